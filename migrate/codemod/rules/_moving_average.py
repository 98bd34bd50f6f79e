"""TFM301's stage for a train op that also updates an ExponentialMovingAverage
of the trained variables (analysis -> plan -> the lines the step emits).

TF1 programs (the CIFAR-10 tutorial and the many scripts derived from it)
keep shadow copies of the variables for evaluation and combine their update
with the optimizer's into the op the session runs:

    ema = tf.train.ExponentialMovingAverage(0.9999, global_step)
    with tf.control_dependencies([apply_gradient_op]):    # after the update
        train_op = ema.apply(tf.trainable_variables())

    ema_op = ema.apply(tf.trainable_variables())
    train_op = tf.group(update, ema_op)                   # or
    with tf.control_dependencies([update, ema_op]):       # no set order
        train_op = tf.no_op()

In TF2 the averages object is made under ``strategy.scope()``, its shadow
variables once there (``ema.apply`` of the variables before any step leaves
them equal to the variables, as TF1's initializers did), and each replica
step calls ``ema.apply(trainable_variables)`` after ``apply_gradients`` and
the step counter (``num_updates`` then reads the advanced step, as after
TF1's ``apply_gradients(..., global_step=...)``). The shadow variables join
the checkpoint, as TF1's Saver saved them with the other global variables.

Declined, at the statement, where the averages cannot be carried exactly:
an averages object the program reads otherwise (``ema.average(w)``,
``variables_to_restore()``), a variable list other than the trainable
variables, ``zero_debias=True``, a decay computed by the graph, or an update
made only on the chief under ParameterServerStrategy.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _cst as C

EMA_CLASS = "train.ExponentialMovingAverage"


@dataclass
class MovingAverage:
    name: str  # the ExponentialMovingAverage object
    made: cst.BaseStatement  # its constructor, built under the strategy
    ordered: bool  # TF1 updated the averages after the variables (control_dependencies)
    combined: str  # the op the session runs: the update and the averages together
    update: str  # the optimizer's train op
    group: cst.BaseStatement | None = None  # `combined = tf.group(update, op)`, set aside as plumbing


def _single_with(statement, qualname) -> tuple[cst.Call, cst.BaseStatement] | None:
    """`with tf.control_dependencies([...]):` around one statement."""
    if not (isinstance(statement, cst.With) and len(statement.items) == 1):
        return None
    call = statement.items[0].item
    body = C.body_of(statement.body)
    if isinstance(call, cst.Call) and qualname(call.func) == "control_dependencies" and len(body) == 1 and (
            statement.items[0].asname is None):
        return call, body[0]
    return None


def _listed_names(call: cst.Call) -> list[str] | None:
    listed = C.arg(call, 0, "control_inputs")
    if not isinstance(listed, (cst.List, cst.Tuple)):
        return None
    names = [el.value.value for el in listed.elements if isinstance(el.value, cst.Name)]
    return names if len(names) == len(listed.elements) else None


def _apply_of(statement, ema: str, qualname) -> tuple[str, cst.Call] | None:
    """`op = ema.apply(tf.trainable_variables())`: (op, the apply call)."""
    names, value, _ = C.assignment(statement)
    if len(names) == 1 and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
            value.func.attr.value == "apply" and isinstance(value.func.value, cst.Name)
            and value.func.value.value == ema):
        return names[0], value
    return None


def _trainable_list(call: cst.Call, qualname) -> bool:
    listed = C.arg(call, 0, "var_list")
    return isinstance(listed, cst.Call) and qualname(listed.func) == "trainable_variables" and not listed.args


def plan(graph, block, qualname, chief_only_ok: bool):
    """The averages combined with the train op, taken out of the forward
    computation (the graph's train op becomes the combined op, its
    constructor joins the state); None when the graph has no such op;
    (node, why) when it has one that cannot be carried exactly."""
    update = graph.train_op if isinstance(graph.train_op, str) else None
    if update is None:
        return None
    # `if is_chief:` around the averages, kept whole as one statement of the graph
    guard = next((st for _, st in graph.compute if isinstance(st, cst.If) and st.orelse is None and any(
        qualname(c.func) == EMA_CLASS for c in C.calls_in(st.body))), None)
    entries = list(graph.compute)
    if guard is not None:
        k = next(k for k, (_, st) in enumerate(entries) if st is guard)
        entries[k:k + 1] = [(C.assignment(st)[0], st) for st in C.body_of(guard.body)]
    made = [(names, st) for names, st in entries if len(names) == 1 and isinstance(C.assignment(st)[1], cst.Call)
            and qualname(C.assignment(st)[1].func) == EMA_CLASS]
    if len(made) != 1:
        return None
    (ema,), ctor_statement = made[0]
    ctor = C.assignment(ctor_statement)[1]
    # the op updating the averages, after the update or on its own
    apply_entry, op, apply_call, ordered = None, None, None, False
    for entry in entries:
        statement = entry[1]
        wrapped = _single_with(statement, qualname)
        inner = wrapped[1] if wrapped is not None else statement
        found = _apply_of(inner, ema, qualname)
        if found is None:
            continue
        if wrapped is not None and _listed_names(wrapped[0]) != [update]:
            return statement, ("the moving averages are updated under control dependencies other than the train"
                               f" op `{update}`")
        apply_entry, (op, apply_call), ordered = entry, found, wrapped is not None
        break
    combined, combine_entry, dropped_combine = (op, None, None) if ordered else (None, None, None)
    if apply_entry is None:
        # `train_op = tf.group(update, ema.apply(tf.trainable_variables()))`: made and grouped at once
        for statement in block:
            names, value, _ = C.assignment(statement)
            if not (len(names) == 1 and names[0] in graph.dropped and isinstance(value, cst.Call)
                    and qualname(value.func) == "group" and len(value.args) == 2
                    and all(a.keyword is None for a in value.args)):
                continue
            inline = [_apply_of(C.stmt(f"_ = {C.code_of(a.value)}\n"), ema, qualname) for a in value.args]
            rest = [a.value for a, found in zip(value.args, inline) if found is None]
            if len(rest) == 1 and isinstance(rest[0], cst.Name) and rest[0].value == update:
                apply_call = next(a.value for a, found in zip(value.args, inline) if found is not None)
                apply_entry, combined, dropped_combine = (names, statement), names[0], statement
                break
        if apply_entry is None:
            return None
    # how the session runs both
    if combined is None:
        for entry in entries:
            wrapped = _single_with(entry[1], qualname)
            if wrapped is None or sorted(_listed_names(wrapped[0]) or ()) != sorted([update, op]):
                continue
            names, value, _ = C.assignment(wrapped[1])
            if len(names) == 1 and isinstance(value, cst.Call) and qualname(value.func) == "no_op":
                combined, combine_entry = names[0], entry
                break
        if combined is None:
            for statement in block:
                names, value, _ = C.assignment(statement)
                if len(names) == 1 and names[0] in graph.dropped and isinstance(value, cst.Call) and (
                        qualname(value.func) == "group") and len(value.args) == 2 and all(
                        isinstance(a.value, cst.Name) and a.keyword is None for a in value.args) and (
                        sorted(a.value.value for a in value.args) == sorted([update, op])):
                    combined, dropped_combine = names[0], statement
                    break
    if combined is None:
        return None
    # `train_op = averages_op`: a helper's result bound to the caller's name (TFM300 inlined it)
    aliases = []
    # (an alias of an op bound inside a `with` reads as plain Python to the analysis: in the state)
    candidates = entries + [(C.assignment(st)[0], st) for st in graph.state]
    while True:
        alias = next((entry for entry in candidates if len(entry[0]) == 1 and isinstance(
            C.assignment(entry[1])[1], cst.Name) and C.assignment(entry[1])[1].value == combined), None)
        if alias is None:
            break
        aliases.append(alias)
        combined = alias[0][0]
    # what keeps it from being carried exactly
    if not _trainable_list(apply_call, qualname):
        return apply_entry[1], (f"`{C.code_of(apply_call)}` averages a list other than tf.trainable_variables(),"
                                " which the migrated step does not know to be the trained variables")
    if graph.var_list is not None:
        return apply_entry[1], ("the averages follow every trainable variable while the optimizer trains only"
                                f" `{C.code_of(graph.var_list)}`")
    debias = C.arg(ctor, 2, "zero_debias")
    if debias is not None and not (isinstance(debias, cst.Name) and debias.value == "False"):
        return ctor_statement, ("zero_debias averages keep a step count of their own, which creating the shadow"
                                " variables before the first step would advance")
    if C.names_used(ctor) & (graph.compute_names | set(graph.placeholder_names)):
        return ctor_statement, "the decay or step count of the averages is computed by the graph"
    taken_ids = {id(apply_entry[1]), id(ctor_statement)} | ({id(combine_entry[1])} if combine_entry else set())
    taken_ids |= {id(entry[1]) for entry in aliases}
    for names, statement in entries:
        if id(statement) in taken_ids:
            continue
        if guard is not None and any(statement is st for st in C.body_of(guard.body)):
            return statement, (f"`{C.code_of(statement).strip()}` runs on the chief only, with the moving averages;"
                               " only their update, once per step, is carried into the TF2 step")
        for name in (ema, op):
            if name in C.names_used(statement):
                return statement, (f"`{name}` (the moving averages) is also read here: only their update, once per"
                                   " step, is carried into the TF2 step")
    guards = [guard] if guard is not None else []
    guards += [node for node, note in graph.notes if note == "flattened-if" and any(
        n is ctor_statement for n in C.walk(node))]
    for node in guards:
        test = C.code_of(node.test)
        if not any(word in name.lower() for name in C.names_used(node.test) for word in ("chief", "task")):
            return node, f"the moving averages are updated only when `{test}`"
        if not chief_only_ok:
            return node, (f"the moving averages were updated only by the chief's steps (`if {test}:`); under"
                          " ParameterServerStrategy every scheduled step would update them")
    taken_ids.add(id(guard))
    graph.compute = [entry for entry in graph.compute if id(entry[1]) not in taken_ids]
    graph.state = [st for st in graph.state if id(st) not in taken_ids] + [ctor_statement]
    graph.dropped.discard(combined)
    graph.train_op = combined
    return MovingAverage(name=ema, made=ctor_statement, ordered=ordered, combined=combined, update=update,
                         group=dropped_combine)


def created(ma: MovingAverage, strategy: str | None, trainable: str) -> list[cst.BaseStatement]:
    """The shadow variables, made once under the strategy (if any) before any step."""
    if strategy is None:
        return C.stmts("# The moving averages start equal to the variables, as TF1's initializers made them.\n"
                       f"{ma.name}.apply({trainable})\n")
    return C.stmts(
        f"with {strategy}.scope():\n"
        "    # The moving averages start equal to the variables, as TF1's initializers made them.\n"
        f"    {ma.name}.apply({trainable})\n")


def step_update(ma: MovingAverage, trainable: str) -> str:
    """The replica step's line updating the averages, after the variables
    and the step counter."""
    why = "" if ma.ordered else "  # after the update (TF1 ran the two in no set order)"
    return f"{ma.name}.apply({trainable}){why}\n"


def tracked(ma: MovingAverage, trainable: str) -> tuple[str, str]:
    """The checkpoint entry of the shadow variables."""
    return "moving_averages", f"[{ma.name}.average(v) for v in {trainable}]"


def note(ma: MovingAverage) -> str:
    order = ("after the variables, as its control dependencies ordered it" if ma.ordered
             else "after the variables (TF1 ran the two updates in no set order)")
    return (f"the moving averages `{ma.name}` are made under the strategy and updated by each step {order};"
            f" `{ma.name}.average(variable)` reads them")
