"""Update barriers: how TF1 code ran a model's update ops with each step.

TF1 layers that keep state besides their weights (batch normalization's moving
mean and variance, a stateful RNN's state) do not update it in their forward
ops: they make update ops, put them in the ``UPDATE_OPS`` graph collection
(``tf.layers``, ``tf.contrib.layers``/slim) or in ``model.updates`` (a Keras
model in graph mode), and the training code must run them every step. The
idiom from slim's ``create_train_op`` and the Keras-with-TensorFlow guides::

    with tf.control_dependencies(model.updates):      # or UPDATE_OPS
        barrier = tf.no_op(name="update_barrier")
    with tf.control_dependencies([barrier]):
        grads = opt.compute_gradients(loss, variables)
    # or: total_loss = control_flow_ops.with_dependencies([barrier], total_loss)
    # or: barrier = tf.group(*update_ops); with tf.control_dependencies([barrier]):
    #         total_loss = tf.identity(total_loss)
    # or: with tf.control_dependencies(update_ops): train_op = opt.minimize(loss)

The barrier is not a synchronization of the workers (each worker runs its own
updates with its own step), so no strategy's synchronization stands for it. In
TF2 a layer called in training mode makes its updates in the call; the step
TFM301 writes runs the forward computation it sees, nothing else. So:

- the ``UPDATE_OPS`` collection, when nothing in the program fills it (no
  batch normalization, no ``add_to_collection`` of it, no model code this run
  cannot read): the barrier ran nothing and is dropped, exactly;
- the collection filled by a layer, or a Keras model's ``updates``: the
  migrated step would not make those updates; the training is declined at the
  barrier, saying what it runs and how TF2 makes those updates.

:func:`classify` recognises the statements while the block is analysed
(``_graph``); :func:`plan` decides, with the program in view. The same
idiom's train tensor (``train_tensor = with_dependencies([apply_op], loss)``),
whose run applied the update and gave the loss, is :func:`train_tensor`.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C

# what fills UPDATE_OPS in TF1 (matched on the last part of the called name)
_FILLERS = ("batch_normalization", "batch_norm", "BatchNormalization", "BatchNorm", "fused_batch_norm")
_COLLECTION_ADDS = ("add_to_collection", "add_to_collections")
_NO_OPS = ("no_op",)
_WITH_DEPENDENCIES = ("with_dependencies",)


def _shown(node: cst.CSTNode) -> str:
    """``node``'s code as TF1 spelled it (TFM101 may have moved it to tf.compat.v1)."""
    return C.code_of(node).replace("tf.compat.v1.", "tf.")


def _last(func: cst.BaseExpression) -> str:
    return (C.code_of(func).rsplit(".", 1)[-1]) if isinstance(func, (cst.Name, cst.Attribute)) else ""


def _names_update_ops(node: cst.CSTNode) -> bool:
    """`tf.GraphKeys.UPDATE_OPS` (any spelling) or the collection's string."""
    if isinstance(node, cst.Attribute) and node.attr.value in ("UPDATE_OPS", "UPDATE_OPS_COLLECTION"):
        return True  # (the second: the collection of Inception's own slim)
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "update_ops"


def updates_of(expr, lists: dict[str, tuple[str, str]], qualname) -> tuple[str, str] | None:
    """What ``expr`` lists when it is a model's update ops: ("collection",
    its code) for the ``UPDATE_OPS`` collection, ("layers", owner) for
    ``owner.updates``; None otherwise. ``lists``: names already bound to
    one (`update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)`)."""
    if isinstance(expr, cst.Name):
        return lists.get(expr.value)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "updates":
        return "layers", C.code_of(expr.value)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Name) and expr.func.value in ("set", "list", "tuple") and len(expr.args) == 1:
            return updates_of(expr.args[0].value, lists, qualname)
        if qualname(expr.func) in ("get_collection", "get_collection_ref") and expr.args and _names_update_ops(
                expr.args[0].value):
            return "collection", _shown(expr)
    return None


def _dependencies(statement) -> cst.BaseExpression | None:
    """``X`` of a statement `with tf.control_dependencies(X):` (one item, no `as`)."""
    if not isinstance(statement, cst.With) or len(statement.items) != 1 or statement.items[0].asname is not None:
        return None
    call = statement.items[0].item
    if isinstance(call, cst.Call) and _last(call.func) == "control_dependencies" and len(call.args) == 1:
        return call.args[0].value
    return None


def _barrier_list(expr, barriers) -> list[str] | None:
    """The barriers of `[barrier]` when it lists only barriers."""
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Name) and e.value.value in barriers
            for e in expr.elements):
        return [e.value.value for e in expr.elements]
    return None


def classify(g, statement, qualname) -> list[cst.BaseStatement] | None:
    """Take ``statement`` when it is part of an update barrier, recording it
    in ``g`` (``update_lists``, ``update_barriers``, ``barrier_uses``).
    Returns the statements to analyse in its place (the guarded body of a
    `with tf.control_dependencies(...)`, unwrapped; [] for the rest), or None
    when the statement is none of these."""
    names, value, _ = C.assignment(statement)
    if len(names) == 1 and value is not None:
        found = updates_of(value, g.update_lists, qualname)
        if found is not None and not isinstance(value, cst.Name):
            g.update_lists[names[0]] = found
            return []
        # `barrier = tf.group(*update_ops)`
        if (isinstance(value, cst.Call) and _last(value.func) == "group" and len(value.args) == 1
                and value.args[0].star == "*"):
            found = updates_of(value.args[0].value, g.update_lists, qualname)
            if found is not None:
                g.update_barriers[names[0]] = (found, statement)
                return []
        # `total_loss = with_dependencies([barrier], total_loss)`: the same loss, after the barrier
        if isinstance(value, cst.Call) and _last(value.func) in _WITH_DEPENDENCIES and len(value.args) == 2:
            listed = _barrier_list(value.args[0].value, g.update_barriers)
            if listed is not None and isinstance(value.args[1].value, cst.Name) and (
                    value.args[1].value.value == names[0]):
                g.barrier_uses.append((statement, [g.update_barriers[b][0] for b in listed]))
                return []
        return None
    guarded = _dependencies(statement)
    if guarded is None:
        return None
    body = list(C.body_of(statement.body))
    updates = updates_of(guarded, g.update_lists, qualname)
    if updates is not None and len(body) == 1:
        # `with tf.control_dependencies(model.updates): barrier = tf.no_op()`
        made, made_value, _ = C.assignment(body[0])
        if len(made) == 1 and isinstance(made_value, cst.Call) and _last(made_value.func) in _NO_OPS:
            g.update_barriers[made[0]] = (updates, statement)
            return []
    if updates is not None:
        # `with tf.control_dependencies(update_ops): train_op = opt.minimize(loss)`
        g.barrier_uses.append((statement, [updates]))
        return body
    listed = _barrier_list(guarded, g.update_barriers)
    if listed is not None:
        g.barrier_uses.append((statement, [g.update_barriers[b][0] for b in listed]))
        if len(body) == 1 and _same_after(body[0]):
            return []  # `total_loss = tf.identity(total_loss)`: the same loss, after the barrier
        return body
    return None


def _same_after(statement) -> bool:
    """`x = tf.identity(x)`."""
    names, value, _ = C.assignment(statement)
    return (len(names) == 1 and isinstance(value, cst.Call) and _last(value.func) == "identity"
            and len(value.args) == 1 and isinstance(value.args[0].value, cst.Name)
            and value.args[0].value.value == names[0])


def plan(g, programs, qualname) -> tuple[cst.CSTNode, str, str] | None:
    """None when every update barrier of ``g`` ran nothing (the UPDATE_OPS
    collection, which nothing in ``programs`` fills: the modules' code the
    model runs); else (where, why, hint) for the first that ran updates the
    migrated step would not make."""
    for statement, kinds in g.barrier_uses:
        for kind, code in kinds:
            if kind == "layers":
                return statement, (
                    f"the gradients are computed after `{code}.updates` run (an update barrier: the update ops"
                    f" of `{code}`'s layers, batch normalization's moving statistics or stateful layers' states,"
                    " each worker running its own; not a synchronization of the workers). In TF2 a Keras model"
                    " called with training=True makes those updates in the call, but this rule does not rebuild"
                    f" `{code}` as a model called in its step (it migrates models made of variables it creates),"
                    " so the step it writes would not make them; this training was left as TF1"), (
                    f"build `{code}` under strategy.scope() and call it with training=True in a tf.function step"
                    " (its updates then run in the call; drop the barrier), by hand")
            filler = _filler(programs, qualname)
            if filler is not None:
                return statement, (
                    f"the gradients are computed after the UPDATE_OPS collection's ops run (`{code}`: an update"
                    f" barrier, not a synchronization of the workers), and {filler} puts update ops in it that the"
                    " step this rule writes would not run; this training was left as TF1"), (
                    "use tf.keras.layers.BatchNormalization called with training=True in the step (its moving"
                    " statistics update in the call), then migrate again")
    return None


def _filler(programs, qualname) -> str | None:
    """What fills the UPDATE_OPS collection in ``programs`` (nodes: the
    module and the code it runs), said for a message; None when nothing."""
    for program in programs:
        for node in C.walk(program):
            if not isinstance(node, cst.Call):
                continue
            last = _last(node.func)
            if last in _FILLERS:
                return f"`{_shown(node.func)}(...)`"
            if last in _COLLECTION_ADDS and any(_names_update_ops(n) for n in C.walk(node)):
                return f"`{_shown(node)}`"
    return None


def train_tensor(statement, train_op: str | None) -> tuple[str, str] | None:
    """(the train tensor, the value it fetches) of
    `train_tensor = with_dependencies([train_op], loss)` or
    `with tf.control_dependencies([train_op]): train_tensor = tf.identity(loss)`
    (slim's create_train_op, written out): a session run of it applied the
    update and returned the loss, computed before the update."""
    if train_op is None:
        return None
    names, value, _ = C.assignment(statement)
    guarded = _dependencies(statement)
    if guarded is not None:
        body = list(C.body_of(statement.body))
        if _barrier_list(guarded, {train_op}) is None or len(body) != 1:
            return None
        names, value, _ = C.assignment(body[0])
        if not (isinstance(value, cst.Call) and _last(value.func) == "identity" and value.args
                and value.args[0].keyword is None
                and all(a.keyword is not None and a.keyword.value == "name" for a in value.args[1:])):
            return None
        loss = value.args[0].value
    elif isinstance(value, cst.Call) and _last(value.func) in _WITH_DEPENDENCIES and len(value.args) >= 2 and (
            _barrier_list(value.args[0].value, {train_op}) is not None) and all(
            a.keyword is None or a.keyword.value == "name" for a in value.args[2:]):
        loss = value.args[1].value
    else:
        return None
    if len(names) != 1 or not isinstance(loss, cst.Name) or names[0] in (train_op, loss.value):
        return None
    return names[0], loss.value
