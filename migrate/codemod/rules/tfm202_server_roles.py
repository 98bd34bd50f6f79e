"""TFM202 server-roles."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import transform, walk_in_functions
from migrate.codemod.program import callers
from migrate.codemod.program.project import index_for
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _framework_servers, _server_flow, _server_flow_emit
from migrate.codemod.rules._framework_servers import write_out_framework_servers
from migrate.codemod.rules._program import MIRRORED, MWMS, PSS, detect_strategy, serves_only
from migrate.codemod.rules._standard_server import rewrite_standard_servers


def _bound_names(statement) -> set[str]:
    """Names a statement binds (assignment targets, with/for targets, defs)."""
    out: set[str] = set()
    for node in C.walk(statement):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                out.update(C.target_names(t.target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)):
            out.update(C.target_names(node.target))
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            out.update(C.target_names(node.asname.name))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            out.add(node.name.value)
    return out


def _side_effect_free(test: cst.BaseExpression) -> bool:
    """Names, attributes, literals, and comparisons / boolean operations of them."""
    return all(
        isinstance(node, (cst.Name, cst.Attribute, cst.SimpleString, cst.Integer, cst.Float,
                          cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.ComparisonTarget,
                          cst.BaseCompOp, cst.BaseBooleanOp, cst.BaseUnaryOp, cst.Dot,
                          cst.LeftParen, cst.RightParen))
        for node in C.walk(test)
    )


def _emptied_guard(statement) -> bool:
    """``if not FLAGS.existing_servers:`` whose only content was the server this
    rule removed: a guard around nothing (a source block is never empty, so an
    empty one was emptied here). Kept when its test could have an effect."""
    return (
        isinstance(statement, cst.If)
        and isinstance(statement.body, cst.IndentedBlock)
        and not statement.body.body
        and statement.orelse is None
        and _side_effect_free(statement.test)
    )


def _compares(test: cst.BaseExpression, job_code: str, value: str) -> bool:
    """`<job> == "value"` (either side)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = [test.left, target.comparator]
    codes = [C.code_of(s) for s in sides]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return job_code in codes and strings == [value]


_SERVERS = ("train.Server", "distribute.Server")


class ServerRoles(Rule):
    """What it does
    Rewrites ``tf.train.Server(...)`` and the role branching around it
    (``if job_name == "ps": server.join()`` / ``elif job_name == "worker":``)
    into the TF2 topology of the strategy the program migrates to.

    Why
    With ParameterServerStrategy, ps *and* worker tasks only serve
    (``tf.distribute.Server(...).join()``) and a separate ``chief`` task runs the
    training loop as coordinator; the chief must not start a server of its
    own (the strategy does). With MultiWorkerMirroredStrategy there are no
    parameter servers and the strategy starts each worker's server itself, so
    the explicit server and the ps branch go.

    Example
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
        elif FLAGS.job_name == "worker":
            train()
    becomes (ParameterServerStrategy)
        if FLAGS.job_name in ("ps", "worker"):
            server = tf.distribute.Server(cluster_resolver.cluster_spec(), job_name=FLAGS.job_name,
                                          task_index=FLAGS.task_index, protocol="grpc", start=True)
            server.join()
        elif FLAGS.job_name == "chief":
            train()

    A program that builds its graph before sending the ps to ``join()``
    (``server = ...``, the device-setter block, then ``if job_name == "ps":``)
    gets its serving branch moved above the graph: ParameterServerStrategy and
    its coordinator, which that graph becomes, may only be created on the
    chief, and ps and worker tasks must be serving before the chief connects.
    What the TF1 branching ran for the other roles (``elif job_name ==
    "worker":``, now the chief, or ``else:``) follows the graph.

    A server built in one function and handed to others (``cluster, server
    = define_cluster()``, ``start_server(server)``, ``train(cluster, server)``
    or ``train(server.target)`` as the session's master) gets the resolver
    TFM201 builds beside it in its place on every way it goes: returned,
    unpacked, passed on, a parameter (renamed ``cluster_resolver``); its
    ``if job_name == "ps": server.join()`` becomes the serving branch above,
    or goes under MultiWorkerMirroredStrategy with a helper that did only
    that; the sessions given its target are TFM301's to replace. A use the
    resolver cannot stand in for (the target printed, the server kept in an
    object) leaves the server, with that use named.

    A program that only serves (its server built and joined, no training:
    a standard server for a cluster whose clients are other programs) keeps
    its server, spelled ``tf.distribute.Server``; TF 1.x's
    ``tf.contrib.distribute.run_standard_tensorflow_server()`` becomes the
    same server started from a ``TFConfigClusterResolver``, as TF 2's
    parameter-server guide starts its ps and worker tasks.

    Fix safety
    Safe for the shapes above (the contrib standard server set a collective
    group leader in its session config, which only TF1 collective ops read). A ps branch that waits in a session on a
    queue of finished workers (the "done queue" shutdown) becomes
    ``server.join()``: in TF2 the chief ends training and the ps tasks are
    stopped from outside. ``print(server.target)`` moves into the serving
    branch. Statements between the server and the branching that the
    serving branch reads stay before it; when the graph itself is among
    them, nothing moves and it is reported. A server with no recognisable
    role branching is reported for manual work.
    """

    code = "TFM202"
    name = "server-roles"
    triggers = ("Server", "run_standard_tensorflow_server", _framework_servers.STARTER)

    def transform(self, module: cst.Module) -> cst.Module:
        # TFM201 wrote them out; selected alone, this rule does
        module = write_out_framework_servers(self, module, report=False)
        # exact in any program: the same server, started as TF 2 does
        module = rewrite_standard_servers(module, self)
        self.strategy = detect_strategy(module, self.ctx.names)
        if self.strategy is None and serves_only(module, self.ctx.names):
            return transform(module, _StandardServer(self))
        if self.strategy is None:
            self._report_server_handed_over(module)
        if self.strategy is None or self.strategy == MIRRORED:
            return module
        self.has_resolver = "cluster_resolver" in C.all_names(module)
        self.role_under_condition = self._roles_under_condition(module)
        self.flow_refusals: dict[int, _server_flow.Refusal] = {}
        self.carried_servers: set[int] = set()  # the serving branches' servers, made here
        module = self._carry_handed_servers(module)
        return transform(module, self)

    def _carry_handed_servers(self, module: cst.Module) -> cst.Module:
        """Servers built in a function and handed on to other functions of
        the module (returned, passed as arguments, their target given to a
        session there): the resolver TFM201 built next to each takes its place
        on those ways (_server_flow), the ps's join becoming the serving
        branch wherever it is. Where it cannot, the reason is kept for the
        server's diagnostic, and a server with its branching in its own block
        gets the rewrite below."""
        servers = {id(st) for st in self._function_servers(module)}
        while True:
            for statement in self._function_servers(module):
                if id(statement) in self.flow_refusals or id(statement) not in servers:
                    continue
                found = _server_flow.plan(module, statement, self.strategy, lambda fn, m=module: callers.callers(
                    self.ctx.path, m, fn, other_files_only=True), resolver_built=self.has_resolver)
                if not found.carried or not self.has_resolver:
                    if found.refusals and len(found.functions) > 1:
                        self.flow_refusals[id(statement)] = found.refusals[0]
                    continue
                module, dropped, created = _server_flow_emit.apply(module, found, self.strategy)
                self.carried_servers |= created
                what = (" its ps's `join()` becomes the serving branch (ps and worker tasks start"
                        " tf.distribute.Server from the resolver and join it; the chief runs training)"
                        if self.strategy == PSS else " MultiWorkerMirroredStrategy starts each worker's server"
                        " itself and has no ps tasks: the server and the ps's `join()` go")
                gone = f"; `{'()`, `'.join(dropped)}()`, which only sent the ps to join, removed" if dropped else ""
                self.report(statement, "the task's server is handed on to "
                            + ", ".join(f"`{name}()`" for name in found.functions[1:])
                            + f": the cluster resolver takes its place there (it carries the same role);{what}{gone}",
                            fixed=True, severity="info", reference="legacy_reference/async_ps.py"
                            if self.strategy == PSS else "legacy_reference/sync_replicas.py")
                break
            else:
                return module

    def _function_servers(self, module: cst.Module) -> list[cst.BaseStatement]:
        """Server statements in a function that may hand the server on:
        ``return tf.train.Server(...)``, or ``server = tf.train.Server(...)``
        where the function returns the server or gives it (or its target) to
        a function of its own module."""
        out = []
        for statement, function in walk_in_functions(module):
            if function is None or type(statement) is not cst.SimpleStatementLine:
                continue
            if id(statement) in self.role_under_condition:
                continue
            if self._server_returned(statement) is not None:
                out.append(statement)
                continue
            found = self._server_statement(statement)
            if found is not None and _server_flow.may_leave(function, found[0]):
                out.append(statement)
        return out

    def _server_returned(self, statement) -> cst.Call | None:
        if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1:
            small = statement.body[0]
            if (isinstance(small, cst.Return) and isinstance(small.value, cst.Call)
                    and self.qualname(small.value.func) in _SERVERS):
                return small.value
        return None

    def _report_server_handed_over(self, module: cst.Module) -> None:
        """A driver that trains nothing itself and gives its TF1 server to a
        function of another module of the project (``trainer.train(...,
        server.target, ...)``): the server stays with that training, and the
        reason says where the training is."""
        servers = {}
        for node in C.walk(module):
            names, value, _ = C.assignment(node) if isinstance(node, cst.SimpleStatementLine) else ([], None, None)
            if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) in _SERVERS:
                servers[names[0]] = value
        if not servers:
            return
        imports = callers.project_imports(module, index_for(self.ctx.path or "<string>"))
        for handed in callers.servers_handed_over(module, set(servers), imports.get):
            where = (f"`{handed.module}`, a module of this project whose training is migrated (or declined, with"
                     " its reasons) when tfmigrate runs on it" if handed.present else
                     f"`{handed.module}`, which is not in this project (its code cannot be read)")
            self.report(next(iter(servers.values())), f"TF1 server left for the training it serves: it is given"
                        f" to `{C.code_of(handed.call.func)}(...)` as {handed.given}, and that training is in"
                        f" {where}; TFM202 rewrites a server together with the training of the same file, so the"
                        " cluster stays TF1 here", hint="migrate the training module, then replace this server"
                        " and the role branching by hand (see the hint of the training's strategy), or build the"
                        " training in this file and migrate again", fixed=False)
            return

    def _roles_under_condition(self, module: cst.Module) -> set[int]:
        """id() of the servers whose job name or index is computed under the
        condition that builds them (``if not reuse: role = ...; server =
        Server(cluster, job_name=role)``): TFM201 has no resolver for the
        other path, so the server stays and the engine keeps the program TF1."""
        out: set[int] = set()
        for node in C.walk(module):
            if not isinstance(node, cst.If):
                continue
            for statement in C.body_of(node.body):
                found = self._server_statement(statement)
                if found is None:
                    continue
                job = C.arg(found[1], 1, "job_name")
                reads = set().union(*(C.names_used(a) for a in (job, C.arg(found[1], 2, "task_index")) if a is not None))
                if reads & _bound_names(node.body):
                    out.add(id(statement))
                elif self.strategy == PSS and job is not None and not any(
                    _compares(node.test, C.code_of(job), role) for role in ("ps", "worker", "chief")
                ):
                    # `if not FLAGS.existing_servers:` around the server: ps and worker tasks
                    # that skip it would go on to the chief's code and create the coordinator
                    self.report(node, "the server is built only under this condition: under ParameterServerStrategy"
                                " ps and worker tasks must always serve, and a task that skips the server would"
                                " run the chief's training loop and create a coordinator of its own",
                                hint="build the server for every ps/worker task (drop the condition), then run"
                                " tfmigrate again", reference="legacy_reference/async_ps.py", fixed=False)
                    out.add(id(statement))
        return out

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._rewrite_body(list(updated.body)))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._rewrite_body(list(updated.body)))

    def _server_statement(self, statement):
        names, value, _ = C.assignment(statement)
        # tf.distribute.Server is TF 1.14+'s spelling of the same server; here
        # it serves TF1 training (transform() found a legacy strategy)
        if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) in _SERVERS:
            return names[0], value
        return None

    def _rewrite_body(self, body):
        return [st for st in self._rewrite_servers(body) if not _emptied_guard(st)]

    def _rewrite_servers(self, body):
        for i, statement in enumerate(body):
            found = self._server_statement(statement)
            if found is None:
                continue
            server_name, call = found
            if id(statement) in self.carried_servers:
                continue
            if id(statement) in self.role_under_condition:
                continue  # reported (by TFM201 when the role is what the condition computes)
            job = C.arg(call, 1, "job_name")
            index = C.arg(call, 2, "task_index")
            if job is None:
                self.report(statement, "tf.train.Server without a job name: cannot tell the task's role",
                            hint="build the server from a cluster resolver", fixed=False)
                continue
            job_code = C.code_of(job)
            for j in range(i + 1, len(body)):
                branch = body[j]
                if isinstance(branch, cst.If) and self._is_ps_test(branch.test, job_code):
                    # `print(server.target)` between the server and the branching
                    # goes with the server (into the serving branch, or away)
                    between = body[i + 1 : j]
                    announce = [st for st in between
                                if C.single_expr(st) is not None and server_name in C.names_used(st)]
                    self.announce = announce
                    replacement = self._rewrite_if(branch, job_code, index, server_name, statement)
                    if replacement is None:
                        break
                    kept = [st for st in between if not any(st is a for a in announce)]
                    if self.strategy == PSS and any(self._builds_strategy(st) for st in kept):
                        moved = self._serve_first(kept, replacement[0], branch)
                        if moved is not None:
                            return body[:i] + moved + body[j + 1 :]
                    return body[:i] + kept + replacement + body[j + 1 :]
            refusal = self.flow_refusals.get(id(statement))
            handed = (f"; it is handed on to other functions of this module, and the cluster resolver cannot take"
                      f" its place there: {refusal.why}") if refusal is not None else ""
            self.report(
                statement,
                f"tf.train.Server without the usual `if job_name == \"ps\": server.join()` branching{handed}",
                hint="ps and worker tasks should only run tf.distribute.Server(...).join(); the chief coordinates",
                reference="legacy_reference/async_ps.py",
                fixed=False,
            )
        return body

    def _builds_strategy(self, statement) -> bool:
        """Does the statement build the graph TFM301 turns into the strategy
        (a device-setter block, or the setter itself)?"""
        return any(self.qualname(c.func) == "train.replica_device_setter" for c in C.calls_in(statement))

    def _serve_first(self, between, serving: cst.If, branch: cst.If):
        """The TF1 program built its graph, then sent the ps to ``server.join()``.
        Under ParameterServerStrategy that graph becomes the strategy and its
        coordinator, which only the chief may create: ps and worker tasks must
        reach their serve-and-join first. The statements between the server and
        the branching go after the serving branch, except those the branch
        itself reads (kept before it, in order); what the TF1 branching ran for
        the other roles (``elif job_name == "worker":`` -- now the chief --, or
        ``else:``) follows them. None when the serving branch needs the graph."""
        needed = C.names_used(serving.test) | set().union(*(C.names_used(st) for st in C.body_of(serving.body)))
        first, later = [], []
        for statement in reversed(between):
            bound = _bound_names(statement)
            if bound & needed:
                if self._builds_strategy(statement):
                    self.report(branch, "the graph is built before the `ps` branch and the serving branch needs"
                                f" {', '.join(sorted(bound & needed))} from it: ParameterServerStrategy would be"
                                " created on every task", hint="move the ps/worker branching above the graph"
                                " block by hand", reference="legacy_reference/async_ps.py", fixed=False)
                    return None
                first.insert(0, statement)
                needed |= C.names_used(statement)
            else:
                later.insert(0, statement)
        rest: list[cst.BaseStatement] = []
        orelse = serving.orelse
        if isinstance(orelse, cst.If):
            rest = [cst.If(test=orelse.test, body=orelse.body, orelse=orelse.orelse)]
        elif isinstance(orelse, cst.Else):
            rest = list(C.body_of(orelse.body))
        self.report(branch, "ps and worker tasks now serve before the graph is built: the strategy and its"
                    " coordinator are created on the chief only", fixed=True, severity="info",
                    reference="legacy_reference/async_ps.py")
        return first + [serving.with_changes(orelse=None)] + later + rest

    def _is_ps_test(self, test, job_code) -> bool:
        return _compares(test, job_code, "ps")

    def _server_code(self, job_code: str, index: cst.BaseExpression | None, server_name: str) -> str:
        cluster = "cluster_resolver.cluster_spec()" if self.has_resolver else "cluster"
        idx = C.code_of(index) if index is not None else "0"
        return (
            f"{server_name} = tf.distribute.Server(\n"
            f"    {cluster}, job_name={job_code}, task_index={idx}, protocol=\"grpc\", start=True)\n"
        )

    def _rewrite_if(self, branch: cst.If, job_code, index, server_name, server_statement):
        if self.strategy == PSS:
            server_line = C.stmt(self._server_code(job_code, index, server_name)).with_changes(
                leading_lines=C.strip_blank_lines(server_statement.leading_lines)
            )
            ps_body = list(C.body_of(branch.body))
            if any(self.qualname(c.func) in ("Session", "train.Session") for c in C.calls_in(branch.body)):
                # the ps waited in a session on a "done" queue the workers filled, then
                # exited; TF2 ps tasks serve until the job is stopped from outside
                ps_body = [C.stmt(f"{server_name}.join()\n")]
                self.report(branch, "the ps task's wait on a queue of finished workers becomes server.join():"
                            " the chief ends training; stop ps and worker tasks from outside",
                            fixed=True, severity="info", reference="legacy_reference/async_ps.py")
            body = [server_line, *self.announce, *ps_body]
            test = C.expr(f'{job_code} in ("ps", "worker")')
            orelse = branch.orelse
            if isinstance(orelse, cst.If) and _compares(orelse.test, job_code, "worker"):
                # the branch now runs on the chief: its own tests of being a worker (`job_name ==
                # "worker" and task_index == 0`, TF1's chief test) held there, and hold as tests of the chief
                chief_body = orelse.body.visit(_WorkerTestsAsChief(job_code))
                orelse = orelse.with_changes(test=C.expr(f'{job_code} == "chief"'), body=chief_body)
            self.report(server_statement, "ps and worker tasks now only serve; the chief task runs training",
                        fixed=True, severity="info", reference="legacy_reference/async_ps.py")
            return [branch.with_changes(test=test, body=C.indented(body, branch.body), orelse=orelse)]
        if self.strategy == MWMS:
            self.report(server_statement,
                        "MultiWorkerMirroredStrategy starts each worker's server itself and has no ps tasks:"
                        " server and ps branch removed",
                        fixed=True, severity="info", reference="legacy_reference/sync_replicas.py")
            return C.without_first_branch(branch)
        return None


class _WorkerTestsAsChief(cst.CSTTransformer):
    """``<job> == "worker"`` -> ``<job> == "chief"`` in a worker branch that became the chief's."""

    def __init__(self, job_code: str):
        super().__init__()
        self.job_code = job_code

    def leave_Comparison(self, original, updated):
        if not _compares(original, self.job_code, "worker"):
            return updated
        sides = [updated.left, updated.comparisons[0].comparator]
        chief = [C.expr('"chief"') if isinstance(side, cst.SimpleString) else side for side in sides]
        return updated.with_changes(left=chief[0], comparisons=[updated.comparisons[0].with_changes(comparator=chief[1])])


class _StandardServer(cst.CSTTransformer):
    """A program that only serves (builds its task's server and joins it, for
    a cluster whose training runs in other programs) keeps doing exactly that:
    TF2 spells the same server ``tf.distribute.Server``, as the
    parameter-server training guide starts its ps and worker tasks."""

    def __init__(self, rule: ServerRoles):
        super().__init__()
        self.rule = rule

    def leave_Call(self, original, updated):
        if self.rule.qualname(original.func) != "train.Server":
            return updated
        self.rule.report(original, "a program that only serves (its task's server, joined; the cluster's"
                         " training runs elsewhere): the same server is tf.distribute.Server in TF2",
                         fixed=True, severity="info", reference="legacy_reference/async_ps.py")
        return updated.with_changes(func=C.expr("tf.distribute.Server"))


ServerRoles.VALID = [
    Valid(
        # the server is also the session's target: not a standard server only
        """
        import tensorflow as tf
        server = tf.train.Server(spec, job_name="worker", task_index=0)
        if task_type == "ps":
            server.join()
        with tf.Session(server.target) as sess:
            sess.run(op)
        """
    ),
    Valid(
        """
        import tensorflow as tf
        server = tf.distribute.Server(spec, job_name="worker", task_index=0)
        server.join()
        """
    ),
]

ServerRoles.INVALID = [
    Invalid(
        # TF 1.x's standard server from TF_CONFIG, joined at once, with a session config
        """
        import tensorflow as tf
        if task_type == "ps":
            tf.contrib.distribute.run_standard_tensorflow_server(session_config=config).join()
        """,
        """
        import tensorflow as tf
        if task_type == "ps":
            cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            server = tf.distribute.Server(
                cluster_resolver.cluster_spec(), job_name=cluster_resolver.task_type, task_index=cluster_resolver.task_id,
                protocol=cluster_resolver.rpc_layer or "grpc", config=config, start=True)
            server.join()
        """,
    ),
    Invalid(
        # a standard server: the task serves a cluster whose clients are other programs
        """
        import json, os
        import tensorflow as tf
        config = json.loads(os.environ.get("TF_CONFIG", "{}"))
        task = config.get("task", {})
        spec = tf.train.ClusterSpec(config.get("cluster"))
        server = tf.train.Server(spec, job_name=task.get("type"), task_index=task.get("index"))
        server.join()
        """,
        """
        import json, os
        import tensorflow as tf
        config = json.loads(os.environ.get("TF_CONFIG", "{}"))
        task = config.get("task", {})
        spec = tf.train.ClusterSpec(config.get("cluster"))
        server = tf.distribute.Server(spec, job_name=task.get("type"), task_index=task.get("index"))
        server.join()
        """,
    ),
    Invalid(
        # TF 1.14+ spelled the TF1 server tf.distribute.Server
        """
        import tensorflow.compat.v1 as tf
        cluster_resolver = None
        server = tf.distribute.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
        else:
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """,
        """
        import tensorflow.compat.v1 as tf
        cluster_resolver = None
        if FLAGS.job_name in ("ps", "worker"):
            server = tf.distribute.Server(
                cluster_resolver.cluster_spec(), job_name=FLAGS.job_name, task_index=FLAGS.task_index, protocol="grpc", start=True)
            server.join()
        else:
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """,
    ),
    Invalid(
        """
        import tensorflow as tf

        def main(_):
            cluster = tf.train.ClusterSpec({"ps": ps, "worker": workers})
            # Create and start a server for the local task.
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            if FLAGS.job_name == "ps":
                server.join()
            elif FLAGS.job_name == "worker":
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    pass
        """,
        """
        import tensorflow as tf

        def main(_):
            cluster = tf.train.ClusterSpec({"ps": ps, "worker": workers})
            if FLAGS.job_name in ("ps", "worker"):
                # Create and start a server for the local task.
                server = tf.distribute.Server(
                    cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index, protocol="grpc", start=True)
                server.join()
            elif FLAGS.job_name == "chief":
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    pass
        """,
    ),
    Invalid(
        """
        import tensorflow as tf
        server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
        if job_name == "ps":
            server.join()
        else:
            opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2)
        """,
        """
        import tensorflow as tf
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2)
        """,
    ),
    Invalid(
        """
        import tensorflow as tf
        server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
        setter = tf.train.replica_device_setter(cluster=cluster)
        """,
        None,
        diagnostics=("TFM202",),
    ),
    # the graph is built before the ps joins: ps and workers serve first, the chief builds it
    Invalid(
        """
        import tensorflow as tf
        server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            w = tf.Variable(tf.zeros([2]))
        if job_name == "ps":
            server.join()
        else:
            train(w)
        """,
        """
        import tensorflow as tf
        if job_name in ("ps", "worker"):
            server = tf.distribute.Server(
                cluster, job_name=job_name, task_index=task_index, protocol="grpc", start=True)
            server.join()
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            w = tf.Variable(tf.zeros([2]))
        train(w)
        """,
    ),
    Invalid(
        """
        import tensorflow as tf


        def create_done_queue(num_workers):
            with tf.device("/job:ps/task:0"):
                return tf.FIFOQueue(num_workers, tf.int32, shared_name="done_queue")


        def main(_):
            cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
            done_queue = create_done_queue(len(worker_hosts))
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            print(server.target)
            if FLAGS.job_name == "ps":
                with tf.Session(server.target) as sess:
                    for _ in range(len(worker_hosts)):
                        sess.run(done_queue.dequeue())
                return
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """,
        """
        import tensorflow as tf


        def create_done_queue(num_workers):
            with tf.device("/job:ps/task:0"):
                return tf.FIFOQueue(num_workers, tf.int32, shared_name="done_queue")


        def main(_):
            cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
            done_queue = create_done_queue(len(worker_hosts))
            if FLAGS.job_name in ("ps", "worker"):
                server = tf.distribute.Server(
                    cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index, protocol="grpc", start=True)
                print(server.target)
                server.join()
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """,
    ),
]
