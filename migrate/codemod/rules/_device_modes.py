"""A device setter chosen at run time by a helper: one machine or a cluster.

TensorFlow's ecosystem examples choose the mode inside a helper of the file::

    def device_and_target():
        if FLAGS.job_name is None:
            return (None, "")                      # one machine: no device function
        cluster_spec = tf.train.ClusterSpec(...)   # a cluster task
        server = tf.train.Server(cluster_spec, ...)
        if FLAGS.job_name == "ps":
            server.join()
        return (tf.train.replica_device_setter(..., cluster=cluster_spec), server.target)

    device, target = device_and_target()
    with tf.device(device):
        ...

Under ParameterServerStrategy both modes keep one training loop: the
cluster task's resolver (TFM201 made it of the helper's ClusterSpec, TFM202
its serving branch) is what the helper returns on a cluster, and on one
machine a cluster of one ps and one worker served in this process (TF2's
parameter_server_training guide, "in-process cluster"), which this process
coordinates: one worker trains the steps in order, as the single TF1 process
did. Analysis (:func:`find`) and the helper's rewrite (:func:`rewrite`) are
here; TFM301 rewrites the block and the call.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod import fastcst
from migrate.codemod.program.tracing import own_scope
from migrate.codemod.rules import _cst as C

SETTER = "train.replica_device_setter"
RESOLVER = "cluster_resolver"  # the name TFM201 binds the task's resolver to

IN_PROCESS = '''
def {name}():
    """One ps and one worker in this process: ParameterServerStrategy on one machine."""
    addresses = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            addresses.append(f"localhost:{{probe.getsockname()[1]}}")
    cluster_spec = tf.train.ClusterSpec({{"ps": addresses[:1], "worker": addresses[1:]}})
    for job in ("ps", "worker"):
        tf.distribute.Server(cluster_spec, job_name=job, task_index=0, protocol="grpc", start=True)
    return tf.distribute.cluster_resolver.SimpleClusterResolver(cluster_spec, rpc_layer="grpc")
'''


@dataclass
class DeviceModes:
    """The helper ``function`` choosing the mode, called by ``call`` (bound
    as ``statement``); ``why`` it cannot be carried over, else None."""

    function: cst.FunctionDef
    statement: cst.BaseStatement
    call: cst.Call
    index: int | None  # the device's element of what the helper returns
    why: str | None = None
    resolver: bool = False  # binds the task's cluster resolver at its top level


def _element(value: cst.BaseExpression | None, index: int | None) -> cst.BaseExpression | None:
    if index is None:
        return value
    if isinstance(value, cst.Tuple) and index < len(value.elements):
        return value.elements[index].value
    return None


def _returns(fn: cst.FunctionDef) -> list[cst.Return]:
    return [n for n in own_scope(fn.body) if isinstance(n, cst.Return)]


def _setter_names(fn: cst.FunctionDef, qualname) -> set[str]:
    """Names the helper binds to a replica_device_setter(...) call."""
    out = set()
    for node in own_scope(fn.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and qualname(node.value.func) == SETTER:
            for target in node.targets:
                out.update(C.target_names(target.target))
    return out


def _kind(element: cst.BaseExpression | None, setters: set[str], qualname) -> str | None:
    if isinstance(element, cst.Name) and element.value == "None":
        return "local"
    if isinstance(element, cst.Call) and qualname(element.func) == SETTER:
        return "setter"
    if isinstance(element, cst.Name) and element.value in setters:
        return "setter"
    return None


def find(module: cst.Module, statement: cst.BaseStatement, device: str, qualname) -> DeviceModes | None:
    """The mode-choosing helper when ``statement`` binds ``device`` (the
    block's device function) from a call of a function of this file that
    returns a device setter on one path and None on another; None when it
    is no such statement."""
    names, value, assign = C.assignment(statement)
    if device not in names or not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name) or not (
            isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    if isinstance(target, cst.Name):
        index = None
    elif isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements):
        index = [e.value.value for e in target.elements].index(device)
    else:
        return None
    fns = [st for st in module.body if isinstance(st, cst.FunctionDef) and st.name.value == value.func.value]
    if len(fns) != 1:
        return None
    fn = fns[0]
    setters = _setter_names(fn, qualname)
    kinds = [_kind(_element(r.value, index), setters, qualname) for r in _returns(fn)]
    if "setter" not in kinds or "local" not in kinds:
        return None
    found = DeviceModes(fn, statement, value, index)
    name = fn.name.value
    if None in kinds:
        found.why = f"`{name}()` also returns something else than the device setter or None"
    elif sum(1 for c in C.calls_in(module) if isinstance(c.func, cst.Name) and c.func.value == name) != 1:
        found.why = f"`{name}()` is called elsewhere too, where its TF1 device setter would still be expected"
    elif value.args:
        found.why = f"`{name}()` takes arguments"
    elif fn.decorators or any(isinstance(n, (cst.Yield, cst.Global, cst.Nonlocal)) for n in own_scope(fn.body)):
        found.why = f"`{name}()` is not a plain function"
    # TFM201 makes it of a ClusterSpec built there (not when the cluster rules stand back)
    found.resolver = RESOLVER in {n for st in C.body_of(fn.body) for n in C.assignment(st)[0]}
    return found


def rewrite(fn: cst.FunctionDef, index: int | None, name: str, in_process: str, qualname) -> cst.FunctionDef | None:
    """The helper ``fn`` returning the cluster task's resolver on the cluster
    path and ``in_process()`` on the other, named ``name``; None when
    something of the TF1 cluster is left in it (the setter, a server's
    target)."""
    setters = _setter_names(fn, qualname)

    class _Returns(cst.CSTTransformer):
        def visit_FunctionDef(self, node):
            return node is fn

        def visit_ClassDef(self, node):
            return False

        def visit_Lambda(self, node):
            return False

        def leave_Return(self, original, updated):
            kind = _kind(_element(original.value, index), setters, qualname)
            if kind == "setter":
                return updated.with_changes(value=cst.Name(RESOLVER))
            if kind == "local":
                return updated.with_changes(value=C.expr(f"{in_process}()"))
            return updated

        def leave_SimpleStatementLine(self, original, updated):
            if any(isinstance(s, cst.Return) and _kind(_element(s.value, index), setters, qualname) == "setter"
                   for s in original.body):
                # what the comments said was about the device setter, which is gone
                return updated.with_changes(leading_lines=[line for line in updated.leading_lines
                                                           if line.comment is None])
            return updated

    new = fastcst.transform(fn, _Returns()).with_changes(name=cst.Name(name))  # (libcst's visit rebuilds every node)
    new = _without_unread(new)
    for call in C.calls_in(new):
        if qualname(call.func) in (SETTER, "train.Server"):
            return None
    for node in C.walk(new):
        if isinstance(node, cst.Attribute) and node.attr.value == "target":
            return None
    return new


def _without_unread(fn: cst.FunctionDef) -> cst.FunctionDef:
    """The helper without top-level assignments of names nothing reads any
    more (the setter's worker device): plain values, calls of string methods."""
    body = list(C.body_of(fn.body))
    changed = True
    while changed:
        changed = False
        for k, statement in enumerate(body):
            names, value, _ = C.assignment(statement)
            if not names or value is None:
                continue
            calls = list(C.calls_in(statement))
            if any(not (isinstance(c.func, cst.Attribute) and c.func.attr.value in ("format", "join", "split"))
                   for c in calls):
                continue
            rest = [st for j, st in enumerate(body) if j != k]
            if any(set(names) & C.names_used(st) for st in rest):
                continue
            del body[k]
            blank = [line for line in statement.leading_lines if line.comment is None][:1]
            if k < len(body) and blank and not body[k].leading_lines:
                body[k] = body[k].with_changes(leading_lines=blank)  # the paragraph break it began
            changed = True
            break
    return fn.with_changes(body=C.indented(body, fn.body))


def why_left(modes: DeviceModes, device: str, asynchronous: bool, qualname) -> str:
    """Why TFM301 left a block over the device function ``device`` that
    ``modes``' helper chooses: what it carries over, and what stopped it."""
    name = modes.function.name.value
    text = (f"its device function `{device}` is the replica_device_setter(...) `{name}()` returns on a cluster task,"
            " and None on one machine (modes chosen at run time); TFM301 carries both over under"
            f" ParameterServerStrategy, `{name}()` then returning the task's cluster resolver or, on one machine, an"
            " in-process cluster of one ps and one worker")
    if modes.why is not None:
        return f"{text}, but {modes.why}"
    if not asynchronous:
        return (f"{text}, and this training is synchronous (SyncReplicasOptimizer, MultiWorkerMirroredStrategy),"
                " where it does not")
    if modes.resolver and rewrite(modes.function, modes.index, name, "in_process", qualname) is None:
        return f"{text}, but `{name}()` would keep TF1 cluster code (a device setter, a server's target)"
    return f"{text}, when the rest of the training migrates (its other diagnostics say what does not)"


def in_process_function(name: str) -> cst.FunctionDef:
    return C.stmt(IN_PROCESS.format(name=name).strip() + "\n")
