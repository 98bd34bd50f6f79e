"""Whole-program facts the structural rules share: which strategy a legacy
program maps to, and where its cluster comes from."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules._cst import walk
from migrate.codemod.tfnames import TFNames

PSS = "parameter_server"
MWMS = "multi_worker_mirrored"
MIRRORED = "mirrored"

STRATEGY_CLASS = {
    PSS: "tf.distribute.ParameterServerStrategy",
    MWMS: "tf.distribute.MultiWorkerMirroredStrategy",
    MIRRORED: "tf.distribute.MirroredStrategy",
}

REFERENCE = {
    PSS: "legacy_reference/async_ps.py",
    MWMS: "legacy_reference/sync_replicas.py",
    MIRRORED: "legacy_reference/in_graph_towers.py",
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
