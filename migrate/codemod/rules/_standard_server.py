"""TF 1.x's standard server from TF_CONFIG, spelled as TF 2 starts one.

``tf.contrib.distribute.run_standard_tensorflow_server()`` parsed TF_CONFIG
and returned the task's started server; the ps and worker tasks of a
parameter-server job ran it and joined. TF 2 has no such function: the
parameter-server training guide starts the same server from a
TFConfigClusterResolver::

    cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        cluster_resolver.cluster_spec(), job_name=cluster_resolver.task_type,
        task_index=cluster_resolver.task_id, protocol=cluster_resolver.rpc_layer or "grpc", start=True)

Taken where the call is a statement of its own: ``server = run_...()`` or
``run_...().join()``. Analysis (:func:`standard_server_call`) is apart from
the rewrite (:func:`rewrite_standard_servers`).
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C

STANDARD_SERVER = "contrib.distribute.run_standard_tensorflow_server"


def standard_server_call(statement: cst.BaseStatement, qualname) -> tuple[str | None, cst.Call] | None:
    """(the name the server is bound to, or None when it is joined at once;
    the call) for ``name = run_standard_tensorflow_server(...)`` and
    ``run_standard_tensorflow_server(...).join()``; None otherwise."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    names, value, _ = C.assignment(statement)
    if len(names) == 1 and isinstance(value, cst.Call) and qualname(value.func) == STANDARD_SERVER:
        return names[0], value
    call = C.single_expr(statement)
    if (isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "join" and isinstance(call.func.value, cst.Call)
            and qualname(call.func.value.func) == STANDARD_SERVER):
        return None, call.func.value
    return None


def _server_code(name: str, call: cst.Call) -> str:
    config = C.arg(call, 0, "session_config")
    extra = f", config={C.code_of(config)}" if config is not None else ""
    return (
        "cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()\n"
        f"{name} = tf.distribute.Server(\n"
        "    cluster_resolver.cluster_spec(), job_name=cluster_resolver.task_type,"
        " task_index=cluster_resolver.task_id,\n"
        f"    protocol=cluster_resolver.rpc_layer or \"grpc\"{extra}, start=True)\n"
    )


class _Rewrite(cst.CSTTransformer):
    def __init__(self, rule, taken: set[str]):
        super().__init__()
        self.rule = rule
        self.taken = taken

    def _rewrite(self, body):
        out = []
        for statement in body:
            found = standard_server_call(statement, self.rule.qualname)
            if found is None:
                out.append(statement)
                continue
            name, call = found
            joined = name is None
            if joined:
                name = "server" if "server" not in self.taken else "standard_server"
            new = list(cst.parse_module(_server_code(name, call)).body)
            if joined:
                new.append(C.stmt(f"{name}.join()\n"))
            new[0] = new[0].with_changes(leading_lines=statement.leading_lines)
            self.rule.report(statement, "the standard server from TF_CONFIG (tf.contrib.distribute."
                             "run_standard_tensorflow_server) is started from a TFConfigClusterResolver, as TF 2's"
                             " parameter-server guide starts its ps and worker tasks", fixed=True, severity="info",
                             reference="legacy_reference/async_ps.py")
            out.extend(new)
        return out

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._rewrite(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._rewrite(updated.body))


def rewrite_standard_servers(module: cst.Module, rule) -> cst.Module:
    """``module`` with every standard-server statement started the TF 2 way;
    unchanged where a ``cluster_resolver`` name exists already (it would be
    shadowed)."""
    if not any(type(n) is cst.Call and rule.qualname(n.func) == STANDARD_SERVER for n in C.walk(module)):
        return module
    names = C.all_names(module)
    if "cluster_resolver" in names:
        return module
    return module.visit(_Rewrite(rule, set(names)))
