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
    def __init__(self, index_names: set[str]):
        super().__init__()
        self.index_names = index_names

    def leave_Arg(self, original, updated):
        if updated.keyword is not None and updated.keyword.value == "reuse" and _later_tower_test(
                updated.value, self.index_names):
            return updated.with_changes(value=cst.Name("False"))
        return updated


def first_tower_reuse(statement, index_names: set[str]):
    """`model(x, reuse=i > 0)` -> `model(x, reuse=False)`: the first tower
    built the variables and the later ones reused them; the migrated model is
    built once by its first call and reuses them on every later call
    (make_template), and reuse=False inherits that reuse."""
    return transform(statement, _FirstTowerReuse(index_names))
