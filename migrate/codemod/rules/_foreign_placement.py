"""Distributed TF1 training whose variables a device function other than
``replica_device_setter`` places (``tf.contrib.framework.VariableDeviceChooser``
round-robin over the ps tasks, say), for TFM301: analysis only, the rule says
why such training stays TF1 where the device function is used.

TFM301 migrates the placement ``replica_device_setter`` makes (variables
shared on the ps tasks, ops on the worker). Another device function places by
rules of its own, which the codemod does not read; the training session run
on the cluster (a Supervisor or MonitoredTrainingSession) then stays TF1.
"""

from __future__ import annotations

import builtins

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._dataflow import bound_names

# TF1's own device functions (besides replica_device_setter): what they did
DEVICE_FUNCTIONS = {
    "contrib.framework.VariableDeviceChooser": "places each variable on a ps task in turn (round robin)",
}
_SESSION_MAKERS = ("train.Supervisor", "train.MonitoredTrainingSession")


def foreign_device_blocks(module: cst.Module, qualname) -> list[tuple[cst.With, cst.Call, str, list[str]]]:
    """(the `with`, its device function's call, what that function did, the
    names the call reads that nothing in the file binds) of each
    ``with tf.device(<TF1 device function>(...)):`` in a file that also makes a
    training session on the cluster."""
    if not any(qualname(c.func) in _SESSION_MAKERS for c in C.calls_in(module)):
        return []
    out = []
    unbound = None  # (the names the file binds are found for the first such block only)
    for node in C.walk(module):
        if type(node) is not cst.With:
            continue
        for item in node.items:
            call = item.item
            if not (isinstance(call, cst.Call) and qualname(call.func) == "device"):
                continue
            target = C.arg(call, 0, "device_name")
            what = DEVICE_FUNCTIONS.get(qualname(target.func) or "") if isinstance(target, cst.Call) else None
            if what is not None:
                if unbound is None:
                    unbound = _unbound_in(module)
                out.append((node, target, what, unbound(target)))
    return out


def _unbound_in(module: cst.Module):
    """A function giving the names a node of ``module`` reads that nothing in the file binds."""
    star = any(type(n) is cst.ImportStar for n in C.walk(module))  # `from x import *`: any name may be bound
    bound = bound_names(module.body) | set(dir(builtins))
    for node in C.walk(module):
        if type(node) in (cst.FunctionDef, cst.Lambda):
            params = node.params
            bound |= {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
            if type(node) is cst.FunctionDef:
                bound |= bound_names(C.body_of(node.body))
    return lambda target: [] if star else sorted(C.names_used(target) - bound)
