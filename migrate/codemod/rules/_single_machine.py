"""TFM301, single-machine training beside the distributed one (analysis).

Programs that run on a cluster often keep a path that trains on the machine
they run on when no cluster is given::

    if not FLAGS.ps_hosts:                      # or `job_name is None`, no TF_CONFIG
        x = tf.placeholder(tf.float32, [None, 1])
        w = tf.Variable(0.0)
        loss = tf.reduce_sum(tf.square(x * w - 1))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for epoch in range(FLAGS.epochs):
                sess.run(train_op, feed_dict={x: batch})
    else:
        ... replica_device_setter, ps/worker ...

The graph statements before the session (from the first one building graph
values) are the single-machine counterpart of a device-setter block: TFM301
migrates them the same way with no strategy at all -- variables made where
the graph made them, a ``tf.function`` step (GradientTape + apply_gradients)
called where the session ran the train op, as TF2's custom training guide
writes single-machine training. The session must be local: ``tf.Session()``
with no target (a ``config`` only), or a ``MonitoredTrainingSession`` given
no master (its hooks and checkpoints are carried as a distributed one's); a
target names a server, which is the distributed path's business.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _cst as C

_LOCAL_SESSIONS = ("Session", "InteractiveSession")
_INITIALIZERS = {"global_variables_initializer", "local_variables_initializer", "initialize_all_variables",
                 "initialize_local_variables", "variables_initializer", "tables_initializer"}
_MONITORED = "train.MonitoredTrainingSession"
_UPDATES = ("minimize", "apply_gradients")


@dataclass
class LocalTraining:
    start: int  # first graph statement of the body
    end: int  # after the last one: classes (the session's hooks) may follow them
    session: int  # the statement starting the session
    train_op: str  # the name the session runs, bound to an optimizer's update


def _method(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def local_session_call(statement: cst.CSTNode, qualname) -> cst.Call | None:
    """The session a statement starts (``with tf.Session() as s:``,
    ``s = tf.Session()``), when it is local: no target, no graph; a
    MonitoredTrainingSession with no master."""
    call = None
    if isinstance(statement, cst.With) and len(statement.items) == 1:
        call = statement.items[0].item
    elif isinstance(statement, cst.SimpleStatementLine):
        _, call, _ = C.assignment(statement)
    if not isinstance(call, cst.Call):
        return None
    q = qualname(call.func)
    if q in _LOCAL_SESSIONS:
        return call if all(a.keyword is not None and a.keyword.value == "config" for a in call.args) else None
    if q == _MONITORED:
        # no master: a session of this process, whatever else it does (checkpoints, hooks)
        return call if all(a.keyword is not None and a.keyword.value != "master" for a in call.args) else None
    return None


def has_local_session(module: cst.Module, qualname) -> bool:
    """Whether the program starts a local session anywhere (a cheap test
    before the pass that looks for its training)."""
    return any(type(node) in (cst.With, cst.SimpleStatementLine) and local_session_call(node, qualname) is not None
               for node in C.walk(module))


def _builds_graph(statement: cst.CSTNode, qualname) -> bool:
    return any(qualname(call.func) is not None for call in C.calls_in(statement))


def find(body, qualname) -> LocalTraining | None:
    """The single-machine training of a block: a local session started in it
    that runs an optimizer's update built by the simple statements just
    before it."""
    for s, statement in enumerate(body):
        if local_session_call(statement, qualname) is None:
            continue
        start = s
        while start > 0 and isinstance(body[start - 1], (cst.SimpleStatementLine, cst.ClassDef)):
            start -= 1
        # the program's hook classes are defined once the graph is (cifar10_train's _LoggerHook):
        # they and what follows them (the hooks list) are the session's code
        end = next((k for k in range(start, s) if isinstance(body[k], cst.ClassDef)), s)
        while start < end and not _builds_graph(body[start], qualname):
            start += 1
        updates = set()
        for graph_statement in body[start:end]:
            names, value, _ = C.assignment(graph_statement)
            if len(names) == 1 and isinstance(value, cst.Call) and _method(value) in _UPDATES:
                updates.add(names[0])
        if not updates:
            continue
        for later in body[s:]:
            for call in C.calls_in(later):
                if _method(call) == "run" and call.args:
                    fetched = call.args[0].value
                    values = ([e.value for e in fetched.elements] if isinstance(fetched, (cst.List, cst.Tuple))
                              else [fetched])
                    for value in values:
                        if isinstance(value, cst.Name) and value.value in updates:
                            return LocalTraining(start, end, s, value.value)
    return None


def block(body, found: LocalTraining) -> cst.With:
    """The graph statements as the block TFM301 migrates (a `with` standing
    for the placement a device setter would have made: none)."""
    # the statements themselves, comments included: analyses find them in the module by identity
    return cst.With(items=[cst.WithItem(C.expr("tf.device(None)"))],
                    body=C.indented(body[found.start:found.end]))


def _session_names(statement) -> set[str]:
    if isinstance(statement, cst.With):
        return {n for item in statement.items if item.asname is not None for n in C.target_names(item.asname.name)}
    return set(C.assignment(statement)[0])


def default_session_runs(body, found: LocalTraining, qualname):
    """What the session's code runs through the default session rather than
    the session by name (``init.run()``, ``loss.eval(feed_dict=...)``, as an
    InteractiveSession allows): (the initializer runs, which TF2's variables
    make needless: statement ids to drop; the first other such use, which
    no step function stands for, or None)."""
    sessions = _session_names(body[found.session])
    initializers = set()
    for statement in body[found.start:found.end]:
        names, value, _ = C.assignment(statement)
        if isinstance(value, cst.Call) and qualname(value.func) in _INITIALIZERS:
            initializers.update(names)
    dropped, other = set(), None
    for statement in body[found.session:]:
        for node in C.walk(statement):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in ("run", "eval")):
                continue
            receiver = node.func.value
            if isinstance(receiver, cst.Name) and receiver.value in sessions:
                continue
            initializer = (isinstance(receiver, cst.Call) and qualname(receiver.func) in _INITIALIZERS) or (
                isinstance(receiver, cst.Name) and receiver.value in initializers)
            lone = next((st for st in C.walk(statement) if isinstance(st, cst.SimpleStatementLine)
                         and C.single_expr(st) is node), None)
            if initializer and node.func.attr.value == "run" and lone is not None:
                dropped.add(id(lone))
            elif other is None:
                other = node
    return dropped, other


def without(statements, dropped: set[int]):
    """``statements`` (and the blocks in them) without the statements ``dropped``."""
    def keep(block):
        return [st for st in block if id(st) not in dropped]
    return [C.map_inner_blocks(st, keep) for st in keep(statements)]
