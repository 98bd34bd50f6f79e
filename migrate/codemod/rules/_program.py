"""Whole-program facts the structural rules share: which strategy a legacy
program maps to, and where its cluster comes from."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules._cst import walk
from migrate.codemod.tfnames import TFNames

PSS = "parameter_server"
MWMS = "multi_worker_mirrored"
MIRRORED = "mirrored"
# a program's single-machine training path, migrated beside its distributed one: no strategy
LOCAL = "single_machine"

STRATEGY_CLASS = {
    PSS: "tf.distribute.ParameterServerStrategy",
    MWMS: "tf.distribute.MultiWorkerMirroredStrategy",
    MIRRORED: "tf.distribute.MirroredStrategy",
    LOCAL: "no strategy (one machine)",
}

REFERENCE = {
    PSS: "legacy_reference/async_ps.py",
    MWMS: "legacy_reference/sync_replicas.py",
    MIRRORED: "legacy_reference/in_graph_towers.py",
    LOCAL: "https://www.tensorflow.org/tutorials/customization/custom_training_walkthrough",
}


def call_qualnames(module: cst.Module, names: TFNames) -> set[str]:
    out = set()
    for node in walk(module):
        if type(node) is cst.Call:  # exact type: isinstance on libcst's ABCs is slow
            q = names.qualname(node.func)
            if q is not None:
                out.add(q)
    return out


def detect_strategy(module: cst.Module, names: TFNames) -> str | None:
    """The tf.distribute strategy a legacy program's training maps to.

    SyncReplicasOptimizer -> MultiWorkerMirrored (TF2 has no synchronous PS);
    a replica_device_setter without it -> ParameterServer (asynchronous);
    in-graph towers -> Mirrored.
    """
    q = call_qualnames(module, names)
    if "train.SyncReplicasOptimizer" in q and _sync_in_default_run(module, names):
        return MWMS
    if "train.replica_device_setter" in q:
        return PSS
    for node in walk(module):
        if type(node) is cst.Name and node.value in ("average_gradients", "tower_loss"):
            return MIRRORED
    if "device" in q and _places_on_ps_by_hand(module, names):
        return PSS  # `with tf.device("/job:ps/task:0"):` variables: a device setter's layout written out
    return None


def _places_on_ps_by_hand(module: cst.Module, names: TFNames) -> bool:
    from migrate.codemod.rules._graph import _device_literal

    devices = False
    for node in walk(module):
        if type(node) is cst.Call and names.qualname(node.func) == "device":
            devices = True
            device = _device_literal(node)
            if device is not None and "job:ps" in device.split("/"):
                return True
    # `ps_device = "/job:ps/task:0"` ... `with tf.device(ps_device):`
    return devices and any(type(node) is cst.SimpleString and isinstance(node.evaluated_value, str)
                           and "job:ps" in node.evaluated_value.split("/") for node in walk(module))


def _sync_in_default_run(module: cst.Module, names: TFNames) -> bool:
    """A SyncReplicasOptimizer is built outside the branch a flag's default
    leaves off (``if FLAGS.issync == 1: <sync> else: <async>`` with issync
    defaulting to 0 trains asynchronously by default)."""
    from migrate.codemod.rules._flag_choice import dropped_branch

    off: list[cst.CSTNode] = []
    for node in walk(module):
        if type(node) is cst.If and node.orelse is not None and _trains(node.body, names) and _trains(
                node.orelse, names):
            branch = dropped_branch(module, node)
            if branch is not None:
                off.append(branch)
    skipped = {id(n) for branch in off for n in walk(branch)}
    return any(type(n) is cst.Call and id(n) not in skipped and names.qualname(n.func) == "train.SyncReplicasOptimizer"
               for n in walk(module))


def _trains(node, names: TFNames) -> bool:
    for n in walk(node):
        if type(n) is cst.Call:
            method = n.func.attr.value if isinstance(n.func, cst.Attribute) else None
            if method in ("apply_gradients", "minimize") or names.qualname(n.func) == "train.SyncReplicasOptimizer":
                return True
    return False


def reads_tf_config(module: cst.Module) -> bool:
    for node in walk(module):
        if type(node) is cst.SimpleString and "TF_CONFIG" in node.value:
            return True
    return False


_SERVERS = ("train.Server", "distribute.Server")
# calls that run a TF1 graph (a client of the server, in this process or another)
_CLIENTS = ("Session", "train.Session", "InteractiveSession", "train.MonitoredTrainingSession",
            "train.MonitoredSession", "train.Supervisor", "estimator.Estimator", "estimator.train_and_evaluate")


def serves_only(module: cst.Module, names: TFNames) -> set[str]:
    """The names of the TF1 servers of a program that only serves: it builds a
    server (``server = tf.train.Server(...)``), joins it, and runs no graph
    (no session, supervisor or estimator; no training a strategy would take:
    the caller has checked :func:`detect_strategy`). Such a task serves a
    cluster whose clients are other programs (a ps/worker standard server);
    empty when the program does anything else with its server."""
    servers: set[str] = set()
    for node in walk(module):
        if type(node) is cst.Call and names.qualname(node.func) in _CLIENTS:
            return set()
        if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            value = node.value
            if type(value) is cst.Call and names.qualname(value.func) in _SERVERS:
                servers.add(node.targets[0].target.value)
    if not servers:
        return set()
    joined: set[str] = set()
    # every read of a server name is `server.join()`
    reads = [n for n in walk(module) if type(n) is cst.Name and n.value in servers]
    joins = {id(n.func.value) for n in walk(module)
             if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "join"
             and type(n.func.value) is cst.Name and n.func.value.value in servers and not n.args}
    targets = {id(t.target) for n in walk(module) if type(n) is cst.Assign for t in n.targets}
    for read in reads:
        if id(read) in joins:
            joined.add(read.value)
        elif id(read) not in targets:
            return set()
    return servers if joined == servers else set()
