"""Analysis of hand-placed parameter-server layouts, for TFM301.

Besides ``replica_device_setter``, TF1 programs placed their graphs by hand::

    with tf.device("/job:ps/task:0"):
        weights = tf.Variable(...)            # shared: one copy, on the ps
    with tf.device("/job:worker/task:%d" % FLAGS.task_index):
        loss = ...                            # this worker's computation
        train_op = opt.minimize(loss, global_step=global_step)

Where a variable lives is all that placement changes about what trains: a
variable on a ps task is one copy every worker updates, a variable anywhere
else (a worker's device, or no device: the task the session runs on) is a
copy of each worker's own. Ops compute the same values wherever they run. So
when every variable of the training is created under a ps device, the run of
blocks is what a device setter makes, and TFM301 migrates it as one
device-setter block (:func:`find_layout`).

When some variables are the workers' own and others live on the ps, the
program keeps local copies and pushes updates to shared ones (the
"local-then-global" and DOWNPOUR / local SGD schemes): no strategy keeps
per-worker copies of the variables, so :func:`local_copies` names what the
program does for a located decline. One client driving computation on
several worker tasks (in-graph replication across machines) is declined too:
no strategy but ParameterServerStrategy's coordinator drives remote tasks,
and it schedules whole steps, not one graph's towers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._graph import GLOBAL_STEP_CREATORS, VARIABLE_CREATORS, _device_literal

_TRAIN_METHODS = ("minimize", "apply_gradients")
# calls that create variables besides tf.Variable / get_variable: layers build theirs
_LAYER_PREFIXES = ("layers.", "keras.layers.", "contrib.layers.", "contrib.slim.", "contrib.rnn.", "nn.rnn_cell.",
                   "compat.v1.layers.")


@dataclass
class Placement:
    """Where the statements of a run of blocks put their variables."""

    shared: list[tuple[str, cst.CSTNode, str]] = field(default_factory=list)  # (what, node, "under <device>") on a ps
    local: list[tuple[str, cst.CSTNode, str]] = field(default_factory=list)  # (what, node, "under <device>") elsewhere
    counters: set[str] = field(default_factory=set)  # what of local entries that are untrained step counters
    # fully written-out worker devices (`/job:worker/task:1`) -> the first block placing on it
    workers: dict[str, cst.With] = field(default_factory=dict)
    unreadable: cst.With | None = None  # a device this analysis cannot read
    train_ops: list[str] = field(default_factory=list)


@dataclass
class Layout:
    """body[start:end] is a hand-placed ps/worker layout; ``block`` is the one
    device-setter block it stands for (its statements, device blocks
    unwrapped), located at the first of them."""

    start: int
    end: int
    block: cst.With


@dataclass
class Decline:
    node: cst.CSTNode  # where the reason is located
    why: str
    hint: str
    start_block: cst.CSTNode | None = None  # the first block of the declined run
    # the statements after it running its train ops, and the sessions they run in
    runners: list[cst.CSTNode] = field(default_factory=list)


_SCOPES = ("name_scope", "variable_scope")


def _device_item(statement, qualname) -> cst.WithItem | None:
    """The `tf.device(...)` item of `with tf.device(...):`, also beside
    name or variable scopes (`with tf.device(d), tf.name_scope("ps"):`)."""
    if not isinstance(statement, cst.With):
        return None
    devices = [i for i in statement.items if isinstance(i.item, cst.Call) and qualname(i.item.func) == "device"]
    if len(devices) != 1 or devices[0].asname is not None or not all(
            i is devices[0] or (isinstance(i.item, cst.Call) and qualname(i.item.func) in _SCOPES)
            for i in statement.items):
        return None
    return devices[0]


def device_of(statement, qualname, bindings=None) -> tuple[str, str | None] | None:
    """(device code, job) of `with tf.device(<string>):`; job is None for a
    device naming no job (`/cpu:0`), "?" for a device this analysis cannot
    read (a function, a variable not in ``bindings``); None when the
    statement is no such block. ``bindings``: names bound once to a device
    string before (`worker_device = "/job:worker/task:%d" % task_index`)."""
    item = _device_item(statement, qualname)
    if item is None:
        return None
    call = item.item
    target = C.arg(call, 0, "device_name")
    if isinstance(target, cst.Name) and bindings and target.value in bindings:
        call = call.with_changes(args=[cst.Arg(bindings[target.value])])
    device = _device_literal(call)
    code = C.code_of(C.arg(call, 0, "device_name") or call)
    if device is None:
        return code, "?"
    job = next((part.split(":", 1)[1] for part in device.split("/") if part.startswith("job:")), None)
    return code, job


def _creates_variable(call: cst.Call, qualname, variable_helpers) -> bool:
    q = qualname(call.func)
    if q in VARIABLE_CREATORS or q in GLOBAL_STEP_CREATORS:
        return True
    if q is not None and q.startswith(_LAYER_PREFIXES) and q[:1].islower():
        return True  # tf.layers.dense(...) and the like (not their classes' constructors: those create none)
    return isinstance(call.func, cst.Name) and call.func.value in variable_helpers


def _literal_task(item: cst.WithItem) -> str | None:
    """`/job:worker/task:1` of `tf.device("/job:worker/replica:0/task:1")`,
    None when the device is formatted (`"/job:worker/task:%d" % i`) or names
    no task."""
    device = C.arg(item.item, 0, "device_name")
    if not isinstance(device, cst.SimpleString) or not isinstance(device.evaluated_value, str):
        return None
    parts = [p for p in device.evaluated_value.split("/") if p.startswith(("job:", "task:"))]
    return "/" + "/".join(parts) if any(p.startswith("task:") for p in parts) else None


def _what(node: cst.CSTNode, call: cst.Call, qualname) -> str:
    """`w` of `w = tf.Variable(...)`; the variables of `dense(...)` otherwise."""
    names, value, _ = C.assignment(node) if isinstance(node, cst.SimpleStatementLine) else ([], None, None)
    q = qualname(call.func)
    if len(names) == 1 and value is call and (q in VARIABLE_CREATORS or q in GLOBAL_STEP_CREATORS):
        return f"`{names[0]}`"
    return f"the variables of `{C.code_of(call.func)}(...)`"


def placement(statements, qualname, variable_helpers=frozenset(), bindings=None) -> Placement:
    """Sort the variables the statements create by where they live: under
    the innermost device that names a job (TF1 merged nested device scopes),
    no job at all meaning the task the session runs on (a worker)."""
    out = Placement()

    def visit(node, device: tuple[str, str, cst.With] | None, statement):
        placed = device_of(node, qualname, bindings)
        if placed is not None:
            code, job = placed
            if job == "?":
                out.unreadable = out.unreadable or node
            elif job is not None:
                device = (code, job, node)
                literal = _literal_task(_device_item(node, qualname))
                if job != "ps" and literal is not None:
                    out.workers.setdefault(literal, node)
            for inner in C.body_of(node.body):
                visit(inner, device, inner)
            return
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return  # runs where it is called
        if isinstance(node, cst.SimpleStatementLine):
            statement = node
            names, value, _ = C.assignment(node)
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
                    value.func.attr.value in _TRAIN_METHODS):
                out.train_ops += names
        if isinstance(node, cst.Call) and _creates_variable(node, qualname, variable_helpers):
            where = f"under `{device[0]}`" if device is not None else "under no device (the task the session runs on)"
            # located at its device block: earlier rules may have rewritten the statement (tf.layers)
            entry = (_what(statement, node, qualname), device[2] if device is not None else statement, where)
            (out.shared if device is not None and device[1] == "ps" else out.local).append(entry)
            trainable = C.arg(node, None, "trainable")
            if qualname(node.func) in GLOBAL_STEP_CREATORS or (
                    isinstance(trainable, cst.Name) and trainable.value == "False"):
                out.counters.add(entry[0])
        for child in C.children(node):
            visit(child, device, statement)

    for statement in statements:
        visit(statement, None, statement)
    return out


def _builds_train_op(statement) -> bool:
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value in _TRAIN_METHODS for c in C.calls_in(statement))


def _places_on_ps(statement, qualname, bindings) -> bool:
    placed = device_of(statement, qualname, bindings)
    if placed is None:
        return False
    return placed[1] == "ps" or any(_places_on_ps(inner, qualname, bindings) for inner in C.body_of(statement.body))


def _unwrapped(statements, qualname, bindings, first_lines=True) -> list[cst.BaseStatement]:
    """The statements with the layout's own device blocks (a job named)
    replaced by their bodies, the comments above a block kept above its
    first statement (but the first block's: they stay on the merged block);
    `with tf.device("/cpu:0")` stays for the graph analysis, which unwraps
    it with a note."""
    out = []
    for k, statement in enumerate(statements):
        placed = device_of(statement, qualname, bindings)
        if placed is not None and placed[1] not in (None, "?"):
            body = _unwrapped(C.body_of(statement.body), qualname, bindings)
            scopes = [i for i in statement.items if i is not _device_item(statement, qualname)]
            if scopes and body:
                # `with tf.device(d), tf.name_scope(s):` -> `with tf.name_scope(s):`, unwrapped by the analysis
                scopes[-1] = scopes[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                body = [statement.with_changes(items=scopes, body=C.indented(body, statement.body),
                                               leading_lines=[])]
            if body and (first_lines or k):
                body[0] = body[0].with_changes(leading_lines=[*statement.leading_lines, *body[0].leading_lines])
            out += body
        else:
            out.append(statement)
    return out


def _device_bindings(body) -> dict[str, cst.BaseExpression]:
    """Names bound exactly once in ``body`` to a string or a formatted one
    (`ps_device = "/job:ps/task:0"`, `worker_device = "/job:worker/task:%d" % i`)."""
    seen: dict[str, list[cst.BaseExpression | None]] = {}
    for statement in body:
        for node in C.walk(statement):
            if type(node) is cst.SimpleStatementLine:
                names, value, _ = C.assignment(node)
                for name in names:
                    seen.setdefault(name, []).append(value if len(names) == 1 else None)
    out = {}
    for name, values in seen.items():
        value = values[0] if len(values) == 1 else None
        text = value
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo):
            text = value.left
        if isinstance(text, cst.Call) and isinstance(text.func, cst.Attribute) and text.func.attr.value == "format":
            text = text.func.value
        if isinstance(text, (cst.SimpleString, cst.FormattedString)):
            out[name] = value
    return out


def find_layout(body, qualname, starts_session, variable_helpers=frozenset()) -> Layout | Decline | None:
    """The first hand-placed layout of ``body``: from the first block placed
    on a job (`with tf.device("/job:ps/task:0"):`) through the last
    statement that builds a train op, before any session starts; a Layout
    when every variable it creates lives on a ps task, a Decline saying why
    when the placement is not a device setter's, None when ``body`` has no
    such run (no ps placement, no train op)."""
    if not any(_device_item(st, qualname) is not None for st in body):
        return None  # no `with tf.device(...)` block (most bodies): no walk for device bindings
    bindings = _device_bindings(body)
    start = next((k for k, st in enumerate(body) if (d := device_of(st, qualname, bindings)) is not None
                  and d[1] in ("ps", "worker")), None)
    if start is None:
        return None
    end = start
    for k in range(start, len(body)):
        statement = body[k]
        if starts_session(statement):
            break
        if device_of(statement, qualname, bindings) is None and not isinstance(statement, cst.SimpleStatementLine):
            break
        if _builds_train_op(statement):
            end = k + 1
    run = body[start:end]
    if not run or not any(_places_on_ps(st, qualname, bindings) for st in run):
        return None
    found = placement(run, qualname, variable_helpers, bindings)
    runners = [st for st in body[end:] if set(found.train_ops) & C.names_used(st)]
    if not runners:
        return None  # the code running the train op is elsewhere (this is the inside of a block, say)
    runners += [st for st in body[end:] if st not in runners and starts_session(st)]
    if found.unreadable is not None:
        return None  # a device function among the blocks: not a layout this reads
    if len(found.workers) > 1:
        # towers on tasks of their own (a formatted device may name this task: `task:%d` % task_index)
        first, *others = found.workers
        return Decline(found.workers[others[0]], start_block=body[start], runners=runners, why=(
            f"computation placed by hand on several worker tasks (`{first}`, `{others[0]}`) and driven by this"
            " one client (in-graph replication across machines): no tf.distribute strategy runs one graph's"
            " towers on other machines' tasks (ParameterServerStrategy's coordinator schedules whole steps on"
            " its workers, MirroredStrategy uses one machine's devices)"),
            hint="make it between-graph training: each worker builds the model under"
            " `with tf.device(tf.train.replica_device_setter(...))` and runs its own steps, which TFM301 migrates")
    if not found.shared:
        return None
    # variables made before the blocks, under no device, that the blocks use: the workers' own too
    earlier = placement(body[:start], qualname, variable_helpers, bindings)
    used = set().union(*(C.names_used(st) for st in run))
    for entry in earlier.local:
        if isinstance(entry[1], cst.SimpleStatementLine) and set(C.assignment(entry[1])[0]) & used:
            found.local.append(entry)
            if entry[0] in earlier.counters:
                found.counters.add(entry[0])
    if found.local:
        declined = local_copies(found)
        declined.start_block, declined.runners = body[start], runners
        return declined
    statements = _unwrapped(run, qualname, bindings, first_lines=False)
    return Layout(start, end, body[start].with_changes(body=C.indented(statements, body[start].body)))


def local_copies(found: Placement, shared: str | None = None) -> Decline:
    """The local-copy schemes: some variables are each worker's own, others
    shared on the ps (``shared`` says which, when ``found`` has not seen them)."""
    trained = [entry for entry in found.local if entry[0] not in found.counters]
    if not trained:
        what, node, device = found.local[0]
        return Decline(node, (
            f"the step counter {what} is created {device}, not on the ps with the model's variables:"
            " each worker counted its own steps (a device setter would have shared it), and a strategy's"
            " training shares every variable"),
            "create the step counter in the ps block with the variables (or with"
            " tf.train.get_or_create_global_step() there) if the workers were meant to count steps together,"
            " then migrate again")
    local_what, local_node, local_device = trained[0]
    if shared is None:
        shared_what, _, shared_device = found.shared[0]
        shared = f"{shared_what} {shared_device}"
    ops = ", ".join(f"`{op}`" for op in dict.fromkeys(found.train_ops)) or "the train ops"
    why = (f"each worker keeps copies of its own of variables ({local_what} {local_device}) besides shared"
           f" ones on the ps ({shared}), trained by {ops}: a local-copy scheme"
           " (local-then-global updates, DOWNPOUR / local SGD pushing a window of local updates to the ps)."
           " No tf.distribute strategy keeps per-worker copies of the trained variables: each replica trains the"
           " shared variables themselves")
    hint = ("if one asynchronous update of the shared variables per step will do, drop the local copies and build"
            " the model and train op under `with tf.device(tf.train.replica_device_setter(...))` (TFM301 migrates it"
            " to ParameterServerStrategy); to keep the scheme, write it by hand on ParameterServerStrategy: the"
            " copies as `tf.Variable(..., per_worker_variable=True)` under `strategy.scope()` (experimental), a"
            " scheduled step that takes the local steps and applies their summed update to the shared variables")
    return Decline(local_node, why, hint)


def local_gradients(before, train_op: str, applied, qualname, variable_helpers=frozenset()) -> Decline | None:
    """A device-setter block whose train op applies gradients made before
    it (`opt.apply_gradients(zip(grads, global_vars))`, `grads` computed on
    variables placed on this worker): the DOWNPOUR shape, where the workers
    train copies of their own and push the updates to the shared variables."""
    found = placement(before, qualname, variable_helpers, _device_bindings(before))
    if not [entry for entry in found.local if entry[0] not in found.counters]:
        return None
    bound: set[str] = set()
    for statement in before:
        for node in C.walk(statement):
            if type(node) is cst.SimpleStatementLine:
                bound.update(C.assignment(node)[0])
    read = sorted(C.names_used(applied) & bound)
    if not read:
        return None
    declined = local_copies(found, shared=f"the device-setter block's, to which `{train_op}` applies"
                            f" `{'`, `'.join(read)}` computed from the workers' copies")
    return declined
