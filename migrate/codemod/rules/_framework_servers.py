"""Servers a cluster framework starts for the task, whose role a context object gives.

TensorFlowOnSpark runs the training function once per Spark executor and hands it
a context object that knows the executor's place in the cluster:

    def map_fun(args, ctx):
        job_name = ctx.job_name
        task_index = ctx.task_index
        cluster, server = TFNode.start_cluster_server(ctx, num_gpus, rdma)
        # or: cluster, server = ctx.start_cluster_server(num_gpus, rdma)
        if job_name == "ps":
            server.join()
        elif job_name == "worker":
            ...  # between-graph training on `cluster` and `server.target`

``start_cluster_server`` builds ``tf.train.ClusterSpec(ctx.cluster_spec)`` and
starts ``tf.train.Server(cluster, job_name=ctx.job_name, task_index=ctx.task_index)``
(after reserving the executor's GPUs). That is the ClusterSpec and Server pair the
cluster rules rewrite: written out as that pair, the task's cluster and role come
from the context object, the resolver TFM201 builds takes the server's place and
ps/worker tasks serve as in TensorFlowOnSpark's own TF 2 examples. TensorFlowOnSpark
2.x reserves the executor's GPUs itself (``TFCluster.run(..., num_gpus)``).

A function that feeds from Spark (``InputMode.SPARK``: ``TFNode.DataFeed(ctx.mgr)``,
``ctx.get_data_feed()``) keeps its server: its batches come from the executor's
queue manager, fed into placeholders one ``sess.run`` at a time, which a
strategy's replicated step cannot read. :func:`spark_fed` names the feed.

This module finds the pairs (:func:`framework_servers`); :func:`write_out` rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._program import MWMS, PSS, detect_strategy

STARTER = "start_cluster_server"
# what the context object says about the task (TensorFlowOnSpark's TFNodeContext)
ROLE = {"cluster": "cluster_spec", "job": "job_name", "index": "task_index"}
# the Spark-fed input of InputMode.SPARK
_FEEDS = ("DataFeed", "get_data_feed")


@dataclass
class FrameworkServer:
    statement: cst.SimpleStatementLine  # `cluster, server = <start>(...)`
    cluster: str  # the name the cluster is bound to
    server: str  # the name the server is bound to
    context: str  # the context object's name (`ctx`)
    role: dict[str, str]  # ROLE key -> the code that reads it (a local alias or `ctx.job_name`)


def _context_of(call: cst.Call) -> str | None:
    """`ctx.start_cluster_server(...)` -> "ctx"; `TFNode.start_cluster_server(ctx, ...)` -> "ctx"."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == STARTER):
        return None
    receiver = func.value
    if isinstance(receiver, cst.Name) and receiver.value == "TFNode":
        first = call.args[0] if call.args else None
        if first is not None and first.keyword is None and first.star == "" and isinstance(first.value, cst.Name):
            return first.value.value
        return None
    if isinstance(receiver, cst.Name):
        return receiver.value
    return None


def _aliases(function: cst.FunctionDef, context: str, before: cst.CSTNode) -> dict[str, str]:
    """ROLE key -> the local name a statement of ``function`` above ``before``
    binds once to ``<context>.<attribute>`` (`job_name = ctx.job_name`), rebound nowhere."""
    bound: dict[str, list[str]] = {}
    found: dict[str, str] = {}
    for statement in C.body_of(function.body):
        if statement is before:
            break
        names, value, _ = C.assignment(statement)
        for name in names:
            bound.setdefault(name, []).append(C.code_of(value) if value is not None else "")
    for key, attribute in ROLE.items():
        code = f"{context}.{attribute}"
        candidates = [name for name, values in bound.items() if values == [code]]
        if candidates and not _rebound(function, candidates[0], before):
            found[key] = candidates[0]
    return found


def _rebound(function: cst.FunctionDef, name: str, after: cst.CSTNode) -> bool:
    seen = False
    for statement in C.body_of(function.body):
        if statement is after:
            seen = True
            continue
        if seen and any(name in C.target_names(t.target) for n in C.walk(statement)
                        if isinstance(n, cst.Assign) for t in n.targets):
            return True
    return False


def framework_servers(module: cst.Module) -> list[FrameworkServer]:
    """Each `cluster, server = <start_cluster_server>(...)` statement directly in a
    function's body whose context object is a parameter of that function."""
    found = []
    for function in C.walk(module):
        if not isinstance(function, cst.FunctionDef):
            continue
        params = {p.name.value for p in function.params.params}
        for statement in C.body_of(function.body):
            names, value, assign = C.assignment(statement)
            if not (isinstance(value, cst.Call) and assign is not None and len(assign.targets) == 1
                    and isinstance(assign.targets[0].target, (cst.Tuple, cst.List)) and len(names) == 2):
                continue
            context = _context_of(value)
            if context is None or context not in params:
                continue
            aliases = _aliases(function, context, statement)
            role = {key: aliases.get(key, f"{context}.{attribute}") for key, attribute in ROLE.items()}
            found.append(FrameworkServer(statement, names[0], names[1], context, role))
    return found


def spark_fed(module: cst.Module) -> cst.CSTNode | None:
    """The first call of a Spark feed (`TFNode.DataFeed(...)`, `ctx.get_data_feed(...)`)."""
    for call in C.calls_in(module):
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name in _FEEDS:
            return call
    return None


def origin_of(node: cst.CSTNode, origins: dict[str, cst.CSTNode]) -> cst.CSTNode:
    """The framework start a written-out line came from (reports on it are located there), else ``node``."""
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        return origins.get(C.code_of(node.body[0]), node)
    return node


def write_out(module: cst.Module, servers: list[FrameworkServer], tf: str, without_ps: bool,
              origins: dict[str, cst.CSTNode] | None = None) -> cst.Module:
    """Each framework start written out as the ClusterSpec and Server it builds
    (``without_ps``: the cluster without its ps job, which MultiWorkerMirroredStrategy has no use for)."""
    replacements = {}
    for found in servers:
        role = found.role
        spec = role["cluster"]
        if without_ps:
            spec = f'{{job: tasks for job, tasks in {spec}.items() if job != "ps"}}'
        lines = C.stmts(
            f"{found.cluster} = {tf}.train.ClusterSpec({spec})\n"
            f"{found.server} = {tf}.train.Server({found.cluster}, job_name={role['job']},"
            f" task_index={role['index']})\n"
        )
        lines[0] = lines[0].with_changes(leading_lines=found.statement.leading_lines)
        if origins is not None:
            origins.update((C.code_of(line.body[0]), found.statement) for line in lines)
        replacements[id(found.statement)] = lines
    return module.visit(_Replace(replacements))


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, list[cst.BaseStatement]]):
        super().__init__()
        self.replacements = replacements

    def leave_SimpleStatementLine(self, original, updated):
        new = self.replacements.get(id(original))
        return cst.FlattenSentinel(new) if new is not None else updated


def _tf_alias(rule) -> str | None:
    for local, full in rule.ctx.names.bindings.items():
        if full == "tensorflow":
            return local
    return None


def write_out_framework_servers(rule, module: cst.Module, report: bool = True) -> cst.Module:
    """``module`` with its framework-started servers written out as ClusterSpec
    and Server (the cluster rules' subject), or as it is where the training feeds
    from Spark (reported)."""
    rule.framework_specs = set()  # the clusters the context objects give: their chief is reported here
    rule.framework_origins = {}  # the code of a written-out line -> the start it was written from
    servers = framework_servers(module)
    tf = _tf_alias(rule)
    if not servers or tf is None:
        return module
    feed = spark_fed(module)
    if feed is not None:
        if report:
            rule.report(
                feed,
                f"the task's server comes from `{C.code_of(servers[0].statement.body[0].value.func)}(...)` and"
                f" the training feeds from Spark (`{C.code_of(feed.func)}`, InputMode.SPARK): its batches come"
                " from the executor's queue manager one sess.run at a time, which a strategy's replicated step"
                " cannot read, so the cluster stays TF1",
                hint="read the input with tf.data in the training function (TFCluster.run(...,"
                " input_mode=InputMode.TENSORFLOW), as TensorFlowOnSpark's TF 2 examples do), then run tfmigrate"
                " again",
                fixed=False,
            )
        return module
    for found in servers:
        role = found.role
        rule.framework_specs.add(role["cluster"])
        if not report:
            continue
        starter = C.code_of(found.statement.body[0].value.func)
        rule.report(
            found.statement,
            f"the server `{starter}(...)` starts is this task's tf.train.Server on the cluster and role"
            f" `{found.context}` gives ({role['cluster']}, {role['job']}, {role['index']}): the cluster"
            " rules now rewrite it as such (TensorFlowOnSpark 2.x reserves the executor's GPUs itself)",
            fixed=True,
            severity="info",
        )
    strategy = detect_strategy(module, rule.ctx.names)
    written = write_out(module, servers, tf, without_ps=strategy == MWMS, origins=rule.framework_origins)
    if report and strategy == MWMS:
        for found in servers:
            rule.report(
                found.statement,
                "MultiWorkerMirroredStrategy trains on every worker and has no ps tasks: the cluster"
                f" `{found.context}` gives is taken without its ps job, and an executor given the ps role"
                " does nothing",
                hint="in the Spark driver, pass num_ps=0 to TFCluster.run and no master_node (worker 0 is"
                " the strategy's chief)",
                reference="legacy_reference/sync_replicas.py",
                fixed=False,
            )
    if report and strategy == PSS:
        for found in servers:
            rule.report(
                found.statement,
                f"ParameterServerStrategy trains on a 'chief' (coordinator) task: the cluster `{found.context}`"
                f" gives ({found.role['cluster']}) must have a \"chief\" job besides \"ps\" and \"worker\"",
                hint="in the Spark driver, pass master_node='chief' to TFCluster.run (one more executor, whose"
                " job name is then \"chief\")",
                reference="legacy_reference/async_ps.py",
                fixed=False,
            )
    return written
