"""Port probes of TF1 programs go once the training runs on a strategy (emit
stage of TFM301).

A TF1 worker opened sessions on its server, and a session touching a task
whose gRPC server did not listen yet failed with UNAVAILABLE; robust programs
therefore probed the cluster's ports first::

    def wait_for_ports(addresses, timeout=120.0):
        ...
            with socket.socket() as probe:
                if probe.connect_ex((host, int(port))) == 0:
        ...

    wait_for_ports([address for job in cluster_def.values() for address in job])

TF2's strategies wait for their peers themselves (ParameterServerStrategy
connects to the cluster when it is made, before the probe would run;
MultiWorkerMirroredStrategy's first collective waits for every worker), so in
a migrated program the probe is dead code. This stage drops the calls (an
expression statement calling a module function that only opens sockets and
sleeps); the engine's last stage then removes the function and the imports
only it read.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C

_SOCKET_CALLS = {"create_connection", "connect_ex", "connect"}
_ALLOWED_CALLS = _SOCKET_CALLS | {
    "socket", "sleep", "time", "monotonic", "rsplit", "split", "partition", "rpartition", "int", "list", "pop",
    "close", "append", "range", "len", "print", "settimeout", "str", "format", "info", "warning", "debug",
}


def drop_probe_calls(module: cst.Module, connects_when_made: bool) -> cst.Module:
    """The module without the statements calling its port probes; with
    ``connects_when_made`` (ParameterServerStrategy) only those after the
    strategy is made (before it, the probe still waits for the cluster the
    strategy connects to)."""
    probes = {st.name.value for st in module.body if isinstance(st, cst.FunctionDef) and _is_probe(st)}
    if not probes:
        return module
    return transform(module, _DropCalls(probes, connects_when_made))


def _is_probe(function: cst.FunctionDef) -> bool:
    """Opens sockets and sleeps, returns nothing, calls nothing else."""
    if function.decorators:
        return False
    calls = list(C.calls_in(function))
    names = [c.func.attr.value if isinstance(c.func, cst.Attribute) else getattr(c.func, "value", None)
             for c in calls]
    if not any(name in _SOCKET_CALLS for name in names) or not all(name in _ALLOWED_CALLS for name in names):
        return False
    if not any(isinstance(n, cst.Name) and n.value == "socket" for n in C.walk(function)):
        return False
    return not any(isinstance(n, cst.Return) and n.value is not None for n in C.walk(function)) and not any(
        isinstance(n, (cst.Yield, cst.Global, cst.Nonlocal)) for n in C.walk(function))


class _DropCalls(cst.CSTTransformer):
    def __init__(self, probes: set[str], connects_when_made: bool):
        super().__init__()
        self.probes = probes
        self.connected = not connects_when_made

    def leave_Call(self, original, updated):
        if C.code_of(original.func).endswith("ParameterServerStrategy"):
            self.connected = True
        return updated

    def leave_IndentedBlock(self, original, updated):
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        lone = C.single_expr(original)
        if self.connected and isinstance(lone, cst.Call) and isinstance(lone.func, cst.Name) \
                and lone.func.value in self.probes:
            return cst.RemovalSentinel.REMOVE
        return updated
