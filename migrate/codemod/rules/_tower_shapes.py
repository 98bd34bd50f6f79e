"""TFM303 analysis of tower shapes beyond ``tf.split`` of a placeholder
(kept apart from the rule's rewriting):

- index slices: ``x_i = x[i * k:(i + 1) * k]``, tower ``i`` slicing a fed
  placeholder by its index. Replica ``i`` of a MirroredStrategy over the
  same devices takes the same rows with ``replica_id_in_sync_group`` in
  place of ``i``: the same slice op, also when the fed batch is not ``n * k``
  rows long.
- device functions: ``tf.device(assign_to_device("/gpu:%d" % i,
  ps_device="/cpu:0"))``, a function of this module returning a device
  function that puts variable ops on another device and every other op on the
  device string it was given. The replicas run on that device string; the
  strategy mirrors the variables on every replica's device.
- optimizers built in the tower loop: ``opt = tf.train.AdamOptimizer(lr)``
  in every tower, the last one applying the averaged gradients. Only
  ``apply_gradients`` makes optimizer state (slots), so one optimizer built
  before the loop is the same program.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C


class IndexSlices(NamedTuple):
    """{placeholder: slice code} of the towers' index slices, and why others
    are not taken: [(statement, message)]."""

    slices: dict[str, str]
    problems: list[tuple[cst.CSTNode, str]]


def _index_slice(node, index_names: set[str]) -> str | None:
    """`a:b` of `x[a:b]` when a or b reads the tower index (no step)."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return None
    sl = node.slice[0].slice
    if not isinstance(sl, cst.Slice) or sl.step is not None or sl.lower is None or sl.upper is None:
        return None
    if not (C.names_used(sl.lower) | C.names_used(sl.upper)) & index_names:
        return None
    return C.code_of(sl).strip()


def index_slices(statements, index_names: set[str], placeholders, loop_bound: set[str]) -> IndexSlices:
    """The fed placeholders the tower body reads only as one slice by the
    tower index (`x[i * k:(i + 1) * k]`)."""
    found: dict[str, str] = {}
    problems: list[tuple[cst.CSTNode, str]] = []
    rejected: set[str] = set()
    for st in statements:
        for node in C.walk(st):
            if not (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name)
                    and node.value.value in placeholders):
                continue
            code = _index_slice(node, index_names)
            name = node.value.value
            if code is None or name in rejected:
                continue
            outside = C.names_used(node.slice[0].slice) - index_names
            if outside & loop_bound:
                rejected.add(name)
                why = f"the slice `{name}[{code}]` reads `{min(outside & loop_bound)}`, which the tower loop computes"
                problems.append((st, why))
            elif found.get(name, code) != code:
                rejected.add(name)
                problems.append((st, f"`{name}` is sliced both as `{name}[{found[name]}]` and as `{name}[{code}]`"))
            else:
                found[name] = code
    for name in list(found):
        if name in rejected:
            del found[name]
            continue
        # every read of the placeholder in the towers is that slice
        for st in statements:
            slices = {id(n.value) for n in C.walk(st) if isinstance(n, cst.Subscript)
                      and isinstance(n.value, cst.Name) and n.value.value == name
                      and _index_slice(n, index_names) == found[name]}
            reads = [n for n in C.walk(st) if isinstance(n, cst.Name) and n.value == name]
            if any(id(n) not in slices for n in reads if _is_read(st, n)):
                problems.append((st, f"the towers read `{name}` whole as well as its slice `{name}[{found[name]}]`"))
                del found[name]
                break
    return IndexSlices(found, problems)


def _is_read(statement, name_node: cst.Name) -> bool:
    """Is the name node read (not an assignment target or keyword/attribute name)?"""
    for node in C.walk(statement):
        if isinstance(node, cst.Attribute) and node.attr is name_node:
            return False
        if isinstance(node, cst.Arg) and node.keyword is name_node:
            return False
        if isinstance(node, (cst.AssignTarget,)) and node.target is name_node:
            return False
    return True


class _ReplaceIndexSlices(cst.CSTTransformer):
    def __init__(self, slices: dict[str, str], index_names: set[str]):
        super().__init__()
        self.slices = slices
        self.index_names = index_names

    def leave_Subscript(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value in self.slices and (
                _index_slice(updated, self.index_names) == self.slices[updated.value.value]):
            return cst.Name(updated.value.value)
        return updated


def replace_index_slices(statement, slices: dict[str, str], index_names: set[str]):
    """`x[i * k:(i + 1) * k]` -> `x` (the replica is given its slice)."""
    if not slices:
        return statement
    return transform(statement, _ReplaceIndexSlices(slices, index_names))


def device_function_target(call: cst.Call, module: cst.Module) -> tuple[cst.BaseExpression, str] | None:
    """(the device string, where the function put variables) of
    `assign_to_device("/gpu:%d" % i, ps_device="/cpu:0")`: a call of a
    module-level function whose returned device function gives its first
    parameter for every op but variables. None for any other call."""
    if not isinstance(call.func, cst.Name):
        return None
    fn = next((st for st in module.body if isinstance(st, cst.FunctionDef) and st.name.value == call.func.value), None)
    if fn is None or not fn.params.params:
        return None
    params = fn.params.params
    body = list(C.body_of(fn.body))
    inner = [st for st in body if isinstance(st, cst.FunctionDef)]
    returns = [r for st in body if isinstance(st, cst.SimpleStatementLine) for r in st.body if isinstance(r, cst.Return)]
    if len(inner) != 1 or len(returns) != 1 or not (
            isinstance(returns[0].value, cst.Name) and returns[0].value.value == inner[0].name.value):
        return None
    if len(body) != 2:
        return None  # anything else the function does is not looked into
    device_param = params[0].name.value
    inner_returns = [n for n in C.walk(inner[0]) if isinstance(n, cst.Return)]
    gives_device = any(isinstance(r.value, cst.Name) and r.value.value == device_param for r in inner_returns)
    if not gives_device or len(inner_returns) != 2:
        return None
    # bind the call's arguments to the function's parameters
    bound: dict[str, cst.BaseExpression] = {}
    for k, a in enumerate(call.args):
        if a.star:
            return None
        if a.keyword is not None:
            bound[a.keyword.value] = a.value
        elif k < len(params):
            bound[params[k].name.value] = a.value
    for p in params:
        if p.name.value not in bound and p.default is not None:
            bound[p.name.value] = p.default
    device = bound.get(device_param)
    if device is None:
        return None
    other = next(r.value for r in inner_returns if not (isinstance(r.value, cst.Name)
                                                        and r.value.value == device_param))
    used = C.names_used(other) & set(bound)
    where = C.code_of(bound[min(used)]) if used else C.code_of(other)
    return device, where


def _later_tower_test(node, index_names: set[str]) -> bool:
    """`i > 0`, `(i != 0)`, `i >= 1`, `bool(i)`: true for every tower but the first."""
    while isinstance(node, cst.BaseExpression) and node.lpar:
        node = node.with_changes(lpar=[], rpar=[])
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "bool" and len(node.args) == 1:
        arg = node.args[0].value
        return isinstance(arg, cst.Name) and arg.value in index_names
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1):
        return False
    left, op, right = node.left, node.comparisons[0].operator, node.comparisons[0].comparator
    if not (isinstance(left, cst.Name) and left.value in index_names and isinstance(right, cst.Integer)):
        return False
    value = right.evaluated_value
    return (isinstance(op, (cst.GreaterThan, cst.NotEqual)) and value == 0) or (
        isinstance(op, cst.GreaterThanEqual) and value == 1)


class _FirstTowerReuse(cst.CSTTransformer):
    def __init__(self, index_names: set[str], reuse_positions: dict[str, int]):
        super().__init__()
        self.index_names = index_names
        self.reuse_positions = reuse_positions

    def leave_Call(self, original, updated):
        position = self.reuse_positions.get(updated.func.value) if isinstance(updated.func, cst.Name) else None
        args = list(updated.args)
        for k, a in enumerate(args):
            named = a.keyword is not None and a.keyword.value == "reuse"
            positional = a.keyword is None and not a.star and k == position
            if (named or positional) and _later_tower_test(a.value, self.index_names):
                args[k] = a.with_changes(value=cst.Name("False"))
        return updated.with_changes(args=args)


def reuse_positions(module: cst.Module) -> dict[str, int]:
    """{module function: position of its `reuse` parameter}."""
    out = {}
    for st in module.body:
        if isinstance(st, cst.FunctionDef):
            names = [p.name.value for p in st.params.params]
            if "reuse" in names:
                out[st.name.value] = names.index("reuse")
    return out


def first_tower_reuse(statement, index_names: set[str], positions: dict[str, int]):
    """`model(x, reuse=i > 0)` -> `model(x, reuse=False)`: the first tower
    built the variables and the later ones reused them; the migrated model is
    built once by its first call and reuses them on every later call
    (make_template), and reuse=False inherits that reuse."""
    return transform(statement, _FirstTowerReuse(index_names, positions))


# --------------------------------------------------------------------------- loss towers

# minimize() arguments with no effect on the update a strategy step makes
# (TF2 places each gradient with its op) or that become apply_gradients' own
_MINIMIZE_KEPT = {"loss", "global_step", "colocate_gradients_with_ops", "name"}


class LossTowers(NamedTuple):
    """Towers appending their per-example losses to a list, then one
    `train_op = opt.minimize(tf.reduce_mean(tf.concat(losses, axis=0)))`,
    restated as towers computing their gradients: with equal slices the mean
    of the concatenation is the mean of the towers' means, so its gradient is
    the average of each tower's gradient of its own mean (what
    average_gradients computed)."""

    statements: list  # the region with the loss towers restated (`opt.compute_gradients` per tower)
    loop: cst.For  # the original loop
    new_loop: cst.For
    minimize: cst.BaseStatement  # the original `train_op = ....minimize(loss)` statement
    item: str  # the per-tower value appended


def _concat_mean(value, lists: set[str], qualname) -> str | None:
    """`tf.reduce_mean(tf.concat(L, axis=0))` -> L."""
    if not (isinstance(value, cst.Call) and qualname(value.func) == "reduce_mean" and len(value.args) == 1):
        return None
    inner = C.arg(value, 0, "input_tensor")
    if not (isinstance(inner, cst.Call) and qualname(inner.func) == "concat"):
        return None
    values, axis = C.arg(inner, 0, "values"), C.arg(inner, 1, "axis")
    if not (isinstance(values, cst.Name) and values.value in lists and isinstance(axis, cst.Integer)
            and axis.evaluated_value == 0) or len(inner.args) != 2:
        return None
    return values.value


def loss_towers(statements, loop: cst.For, qualname, taken: set[str]) -> tuple[LossTowers | None, str]:
    """(the restated region, "") or (None, why not)."""
    appends = {}
    for n in C.walk(loop):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "append" and (
                isinstance(n.func.value, cst.Name)):
            appends[n.func.value.value] = C.arg(n, 0, None)
    flat = []

    def flatten(sts):
        for st in sts:
            if isinstance(st, cst.With):
                flatten(C.body_of(st.body))
            else:
                flat.append(st)
    flatten(statements)
    after = flat[next((k for k, st in enumerate(flat) if st is loop), len(flat)) + 1:]
    combined, listed, minimize, train_call = None, None, None, None
    for st in after:
        names, value, _ = C.assignment(st)
        if len(names) == 1 and listed is None and (found := _concat_mean(value, set(appends), qualname)):
            combined, listed = names[0], found
            continue
        if combined and len(names) == 1 and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "minimize":
            loss = C.arg(value, 0, "loss")
            if isinstance(loss, cst.Name) and loss.value == combined:
                minimize, train_call = st, value
                break
    if minimize is None:
        return None, ("the loss the `minimize` after the loop differentiates is not"
                      " `tf.reduce_mean(tf.concat(tower_losses, axis=0))` of the list the towers append to")
    item = appends[listed]
    if not isinstance(item, cst.Name):
        return None, f"the towers append `{C.code_of(item)}` to `{listed}`, not a name bound in the tower"
    extra = [a.keyword.value for a in train_call.args if a.keyword is not None and a.keyword.value not in _MINIMIZE_KEPT]
    if extra or any(a.keyword is None for a in train_call.args[1:]):
        return None, (f"`minimize` takes {', '.join(f'`{e}`' for e in extra) or 'positional arguments'} besides the"
                      " loss, which the replicas' step does not reproduce")
    owner = train_call.func.value
    pre = []
    if isinstance(owner, cst.Name):
        optimizer = owner.value
    elif isinstance(owner, cst.Call) and (q := qualname(owner.func) or "").startswith("train.") and q.endswith(
            "Optimizer"):
        optimizer = C.fresh("optimizer", taken)
        pre.append(C.stmt(f"{optimizer} = {C.code_of(owner)}\n"))
    else:
        return None, f"`minimize` is called on `{C.code_of(owner)}`, not a tf.train optimizer"
    grads = C.fresh("tower_grads", taken)
    mean = C.fresh(f"{item.value}_mean", taken)
    restated = [C.stmt(f"{mean} = tf.reduce_mean({item.value})\n"),
                C.stmt(f"{grads}.append({optimizer}.compute_gradients({mean}))\n")]

    class _AfterAppend(cst.CSTTransformer):
        def leave_IndentedBlock(self, original, updated):
            body = []
            for st in updated.body:
                body.append(st)
                lone = C.single_expr(st)
                if isinstance(lone, cst.Call) and isinstance(lone.func, cst.Attribute) and (
                        lone.func.attr.value == "append") and C.code_of(lone.func.value) == listed:
                    body += restated
            return updated.with_changes(body=body)

    new_loop = loop.visit(_AfterAppend())
    step = C.arg(train_call, 1, "global_step")
    apply = f"{optimizer}.apply_gradients(average_gradients({grads})" + (
        f", global_step={C.code_of(step)})" if step is not None else ")")
    target = C.code_of(minimize.body[0].targets[0].target).strip()
    new_minimize = C.stmt(f"{target} = {apply}\n").with_changes(leading_lines=minimize.leading_lines)

    out = []
    for st in statements:
        if any(x is loop for x in C.walk(st)):
            out += pre
            st = st if st is not loop else new_loop
            if st is not new_loop:
                st = st.deep_replace(loop, new_loop)
        elif any(x is minimize for x in C.walk(st)):
            st = new_minimize if st is minimize else st.deep_replace(minimize, new_minimize)
        out.append(st)
    return LossTowers(out, loop, new_loop, minimize, item.value), ""


def first_line(node) -> str:
    """A node's code on one line (a block: its first line), comments skipped, shortened."""
    if node is None:
        return "?"
    lines = [line.strip() for line in C.code_of(node).splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        return "?"
    if isinstance(node, (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.Finally)):
        text = lines[0]
    else:
        text = " ".join(lines).replace("( ", "(").replace(" )", ")").replace("[ ", "[").replace(" ]", "]")
    return text if len(text) <= 100 else text[:97] + "..."
