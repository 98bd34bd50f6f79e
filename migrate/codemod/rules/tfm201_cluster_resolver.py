"""TFM201 cluster-resolver."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _framework_servers
from migrate.codemod.rules._framework_servers import write_out_framework_servers
from migrate.codemod.rules._role_lookup import (
    add_chief_switch,
    comprehended_hosts,
    find_role_lookup,
)
from migrate.codemod.rules._role_servers import hoist_role_servers
from migrate.codemod.rules._unread import drop_unread

_SERVERS = ("train.Server", "distribute.Server")
from migrate.codemod.rules._program import MWMS, PSS, detect_strategy, reads_tf_config, serves_only


def _simple_string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


def _dict_keys(d: cst.Dict) -> list[str]:
    keys = []
    for el in d.elements:
        if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
            keys.append(el.key.evaluated_value)
    return keys


class ClusterResolver(Rule):
    """What it does
    Turns a hand-built ``tf.train.ClusterSpec`` (from literals, from
    ``--ps_hosts/--worker_hosts`` flags, or from a hand-parsed ``TF_CONFIG``)
    into a ``tf.distribute.cluster_resolver`` that the strategy can consume:
    ``TFConfigClusterResolver()`` when the program reads ``TF_CONFIG``, else
    ``SimpleClusterResolver(cluster, task_type=..., task_id=...)`` built from
    the same job name and task index the ``Server`` got, so the old flags
    keep working.

    Why
    tf.distribute strategies take a cluster resolver, not a ClusterSpec plus
    a job name. ParameterServerStrategy also needs a ``chief`` task (the
    coordinator): when the cluster comes from ``--worker_hosts`` style flags
    a ``--chief_hosts`` flag is added next to them. MultiWorkerMirroredStrategy
    has no parameter servers, so a ``"ps"`` entry is dropped.

    A server a cluster framework starts for the task, whose cluster and role
    a context object gives (TensorFlowOnSpark's ``cluster, server =
    ctx.start_cluster_server(...)`` in ``map_fun(args, ctx)``), is first
    written out as the ClusterSpec and Server it is (``ctx.cluster_spec``,
    ``ctx.job_name``, ``ctx.task_index``: ``_framework_servers``); training fed
    from Spark (``TFNode.DataFeed``) keeps it, with the reason.

    Example
        cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    becomes
        cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts, "chief": FLAGS.chief_hosts.split(",")})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type=FLAGS.job_name, task_id=FLAGS.task_index, rpc_layer="grpc")
        server = ...

    Fix safety
    Safe: the resolver describes the same cluster. The launch changes: a
    ParameterServerStrategy job needs one more process (``--job_name=chief``).
    Literal ``host:port`` lists get a literal chief address (the first
    worker's host, on the next port the cluster does not use there: reported,
    to be changed where that port is taken; lists built by a comprehension
    formatting literal lists count); a cluster whose hosts are neither flags
    nor such literals gets a diagnostic instead. A program finding its role by
    looking its own address up in those lists cannot tell the chief from
    worker 0 on one machine: it gets a ``--chief`` option tested before the
    lookup (``_role_lookup``), and the chief is started with it.
    """

    code = "TFM201"
    name = "cluster-resolver"
    triggers = ("ClusterSpec", _framework_servers.STARTER)

    def report(self, node: cst.CSTNode, message: str, **kw) -> None:
        # a line written out from a framework's server start is reported where that start is
        super().report(_framework_servers.origin_of(node, getattr(self, "framework_origins", {})), message, **kw)

    def transform(self, module: cst.Module) -> cst.Module:
        if "cluster_resolver" in C.all_names(module):
            return module  # already migrated
        given = module
        module = write_out_framework_servers(self, module)
        self.strategy = detect_strategy(module, self.ctx.names)
        if self.strategy is None and serves_only(module, self.ctx.names):
            return module  # a standard server: nothing here takes a resolver (TFM202)
        if self.strategy is not None:
            # servers built per role branch with a literal job name: one server before the branching
            module = hoist_role_servers(module, lambda call: self.qualname(call.func) in _SERVERS)
        self.server_args = self._server_args(module)
        self.maps_roles = reads_tf_config(module) and self._maps_roles(module)
        self.from_tf_config = reads_tf_config(module) and not self.maps_roles
        self.conditional_role: cst.BaseStatement | None = None
        self._place_near_server(module)
        if self.conditional_role is not None:
            self.report(self.conditional_role, "the task's job name and index are only computed under this condition,"
                        " where the Server is built: a cluster resolver built there would not exist on the other"
                        " path, and the strategy needs it on every path",
                        hint="compute the job name and index before the condition (or build the resolver from"
                        " TF_CONFIG), then run tfmigrate again", fixed=False)
            return given
        self.chief_flag: tuple[str, str] | None = None  # (flags object, style) once a chief entry is added
        self.chief_choice = False  # a literal chief entry was added: the job-name flag must accept it
        # ParameterServerStrategy: the dict literals a name given to ClusterSpec is bound to get the chief
        self.named_dicts, self.named_others, self.named_with_dicts = self._named_cluster_dicts(module)
        self.dropped_ps: set[str] = set()
        # the hosts and roles come from Slurm's environment (SLURM_PROCID, the node list)
        self.slurm_vars = sorted({n.evaluated_value for n in C.walk(module) if isinstance(n, cst.SimpleString)
                                  and isinstance(n.evaluated_value, str) and n.evaluated_value.startswith("SLURM_")})
        self.maps_slurm_ps = any(isinstance(n, cst.SimpleString) and n.evaluated_value == "ps" for n in C.walk(module))
        module = transform(module, self)
        # the name that held the ps hosts, now read nowhere: a leftover of the TF1 cluster
        module = drop_unread(module, self.dropped_ps)
        if self.chief_flag is not None or self.chief_choice:
            module = transform(module, _AddChiefFlag(add_flag=self.chief_flag is not None))
        if self.chief_choice:
            module = self._chief_switch(module)
        return module

    def _chief_switch(self, module: cst.Module) -> cst.Module:
        """A program that finds its role by looking its address up in its host
        lists cannot be the chief, on worker 0's machine, by address: it gets
        a --chief option, tested first (see _role_lookup)."""
        if self.server_args is None or not all(isinstance(e, cst.Name) for e in self.server_args):
            return module
        job, index = (e.value for e in self.server_args)
        lookup = find_role_lookup(module, job, index)
        if lookup is None:
            return module
        switched = add_chief_switch(module, lookup)
        if switched is None:
            self.report(
                lookup[0],
                f"the task finds its role by looking {_looked_up(lookup[1])} up in its host lists, which cannot"
                " tell the chief (coordinator) ParameterServerStrategy needs from worker 0 on the same machine",
                hint=f"add a way to start the chief (an option tested before this lookup setting {job} to"
                     f" \"chief\" and {index} to 0)",
                reference="legacy_reference/async_ps.py",
                fixed=False,
            )
            return module
        self.report(
            lookup[0],
            f"the task finds its role by looking --{lookup[1].option} up in its host lists, which cannot tell"
            " the chief (coordinator) from worker 0 on the same machine: added a --chief option, tested first;"
            " start the chief with --chief on the chief entry's host",
            fixed=True,
            severity="info",
        )
        return switched

    def _server_args(self, module: cst.Module) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        for call in C.calls_in(module):
            if self.qualname(call.func) == "train.Server" or (
                # TF 1.14+ spelling, serving TF1 training here
                self.strategy is not None and self.qualname(call.func) == "distribute.Server"
            ):
                job = C.arg(call, 1, "job_name")
                index = C.arg(call, 2, "task_index")
                if job is not None and index is not None:
                    return job, index
        return None

    def _maps_roles(self, module: cst.Module) -> bool:
        """Whether the job name the Server gets is the program's own mapping of
        roles (``job_name = "worker" if job_name == "master" else job_name``
        after reading TF_CONFIG): TFConfigClusterResolver would give the task
        type TF_CONFIG names (a ``master`` no strategy accepts), the Server's
        job name and index are what the program meant."""
        if self.server_args is None or not isinstance(self.server_args[0], cst.Name):
            return False
        job = self.server_args[0].value
        for node in C.walk(module):
            names, value, _ = C.assignment(node)
            if job in names and value is not None and any(
                isinstance(s, cst.SimpleString) and s.evaluated_value in _ROLE_NAMES for s in C.walk(value)
            ):
                return True
        return False

    def _place_near_server(self, module: cst.Module) -> None:
        """The resolver takes this task's role from the Server call's job and
        index. When that call is in another block than the ClusterSpec (the
        spec at module level, the Server in main()), the resolver goes right
        before the Server statement: there those values exist (a function's
        locals, flags already parsed), as they did for the Server itself."""
        self.server_statement: int | None = None  # id() of the original statement
        self.spec_name: str | None = None
        if self.server_args is None or self.from_tf_config:
            return
        specs, server_block, spec_block = [], None, None
        spec_at = server_at = returned = 0
        for block in C.walk(module):
            if not isinstance(block, (cst.Module, cst.IndentedBlock)):
                continue
            for at, statement in enumerate(block.body):
                names, value, _ = C.assignment(statement)
                if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) == "train.ClusterSpec":
                    specs.append(names[0])
                    spec_block, spec_at = block, at
                returned += self._returned_spec(statement) is not None
                if server_block is None and isinstance(statement, cst.SimpleStatementLine) and any(
                    any(arg.value is self.server_args[0] for arg in call.args) for call in C.calls_in(statement)
                ):
                    server_block, self.server_statement, server_at = block, id(statement), at
        if not specs and returned == 1 and server_block is not None:
            # `return tf.train.ClusterSpec(...)` from a `get_cluster()` helper: the
            # resolver goes before the Server, on the name its caller gave the spec
            chosen = self._server_cluster(module)
            if isinstance(chosen, cst.Name):
                self.spec_name = chosen.value
                return
        if len(specs) > 1 and server_block is not None:
            # several clusters (one per deployment, chosen by a flag): the resolver
            # describes the one the Server is given, where it is given
            chosen = self._server_cluster(module)
            if isinstance(chosen, cst.Name):
                self.spec_name = chosen.value
                return
        if len(specs) == 1 and server_block is not None and server_block is not spec_block:
            # the Server under a condition of the spec's own block (`if not FLAGS.existing_servers:`):
            # a resolver put next to it would be bound only when the condition holds, and the
            # strategy reads it on every path -- it goes after the spec, as in one block
            holder = _statement_holding(spec_block.body[spec_at + 1 :], self.server_statement)
            if holder is not None:
                if _bound_in(holder) & self._server_reads():
                    # the role itself is only known under the condition: no resolver for every path
                    self.conditional_role = holder[1]
                    return
                server_block, server_at = spec_block, spec_at + 1 + holder[0]
        if len(specs) != 1 or server_block is None or (
            server_block is spec_block and not self._bound_between(spec_block.body[spec_at + 1 : server_at])
        ):
            self.server_statement = None
            return
        # in another block (a `create_server(cluster_spec)` helper) the spec has the name the Server reads
        chosen = self._server_cluster(module) if server_block is not spec_block else None
        self.spec_name = chosen.value if isinstance(chosen, cst.Name) else specs[0]

    def _returned_spec(self, statement) -> cst.Call | None:
        """The call of ``return tf.train.ClusterSpec(...)``."""
        if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1:
            small = statement.body[0]
            if (isinstance(small, cst.Return) and isinstance(small.value, cst.Call)
                    and self.qualname(small.value.func) == "train.ClusterSpec"):
                return small.value
        return None

    def _server_cluster(self, module: cst.Module) -> cst.BaseExpression | None:
        """The cluster argument of the Server call whose job and index the resolver takes."""
        for call in C.calls_in(module):
            if any(arg.value is self.server_args[0] for arg in call.args):
                return C.arg(call, 0, "server_or_cluster_def")
        return None

    def _server_reads(self) -> set[str]:
        return set().union(*(C.names_used(e) for e in self.server_args))

    def _bound_between(self, statements) -> bool:
        """Whether these statements (between the spec and the Server in one
        block) bind a name the Server's job and index read: a module-level
        literal cluster above the flag definitions, as many tutorials have."""
        read = self._server_reads()
        for statement in statements:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value in read:
                return True
            names, _, _ = C.assignment(statement)
            if read & set(names):
                return True
        return False

    # every statement block: insert the resolver after the ClusterSpec statement
    # (or before the Server statement, see _place_near_server)
    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._rewrite_body(original.body, updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._rewrite_body(original.body, updated.body))

    def _named_cluster_dicts(self, module: cst.Module):
        """For ParameterServerStrategy, a cluster given to ClusterSpec by name
        (``cluster_def = {"ps": ..., "worker": ...}`` then
        ``ClusterSpec(cluster_def)``) or by a call of a function of this module
        (``ClusterSpec(cluster_from_env())``): id() of the dict literals the
        name is bound to or the function returns; the other values (an
        environment variable's dict), which keep a diagnostic, by the code of
        the ClusterSpec argument; and the arguments with a dict literal."""
        if self.strategy != PSS or self.from_tf_config:
            return set(), {}, set()
        functions = {node.name.value: node for node in module.body if isinstance(node, cst.FunctionDef)}
        names, called = set(), {}
        for call in C.calls_in(module):
            if self.qualname(call.func) == "train.ClusterSpec":
                spec = C.arg(call, 0, "cluster")
                if isinstance(spec, cst.Name):
                    names.add(spec.value)
                elif (isinstance(spec, cst.Call) and isinstance(spec.func, cst.Name)
                      and spec.func.value in functions):
                    called[spec.func.value] = C.code_of(spec)
        values: list[tuple[str, cst.BaseExpression]] = []
        for node in C.walk(module):
            bound, value, _ = C.assignment(node)
            if len(bound) == 1 and bound[0] in names and value is not None:
                values.append((bound[0], value))
        for name, key in called.items():
            values.extend((key, node.value) for node in _own_returns(functions[name]))
        dicts: set[int] = set()
        others: dict[str, list[cst.BaseExpression]] = {}
        with_dicts: set[str] = set()
        for key, value in values:
            if isinstance(value, cst.Dict):
                dicts.add(id(value))
                with_dicts.add(key)
            elif not (isinstance(value, cst.Name) and value.value == "None"):
                others.setdefault(key, []).append(value)
        return dicts, others, with_dicts

    def _rewrite_body(self, originals, body):
        out = []
        aligned = len(originals) == len(body)
        for i, statement in enumerate(body):
            if aligned and self.named_dicts:
                original_value, value = _bound_or_returned(originals[i]), _bound_or_returned(statement)
                if id(original_value) in self.named_dicts and isinstance(value, cst.Dict):
                    new_value = self._with_chief(statement, value)
                    out.append(statement if new_value is None else statement.deep_replace(value, new_value))
                    continue
            if self.server_statement is not None and aligned and id(originals[i]) == self.server_statement:
                out.append(self._resolver_statement(originals[i], self.spec_name))
                out.append(statement)
                continue
            returned = self._returned_spec(statement) if self.server_statement is not None else None
            if returned is not None:  # its caller names it: the resolver is built near the Server
                out.append(self._fix_cluster_dict(statement, returned))
                continue
            names, value, _ = C.assignment(statement)
            if (
                len(names) == 1
                and isinstance(value, cst.Call)
                and self.qualname(value.func) == "train.ClusterSpec"
            ):
                out.append(self._fix_cluster_dict(statement, value))
                if self.server_statement is None:
                    out.append(self._resolver_statement(statement, names[0]))
                continue
            out.append(statement)
        return out

    def _resolver_statement(self, statement, cluster_name: str) -> cst.BaseStatement:
        if self.from_tf_config:
            code = "cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()"
            how = "TF_CONFIG"
        elif self.server_args is not None:
            job, index = (C.code_of(e) for e in self.server_args)
            code = (
                "cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(\n"
                f"    {cluster_name}, task_type={job}, task_id={index}, rpc_layer=\"grpc\")"
            )
            how = "the cluster spec and this task's job name and index"
            if self.maps_roles:
                how += (" (the program maps TF_CONFIG's task type to its own job names: TFConfigClusterResolver"
                        " would hand the strategy TF_CONFIG's, which it may not accept, as `master`)")
        else:
            code = (
                "cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver("
                f"{cluster_name}, rpc_layer=\"grpc\")"
            )
            how = "the cluster spec"
            self.report(
                statement,
                "cluster spec has no Server(job_name=..., task_index=...) to take this task's role from",
                hint="pass task_type= and task_id= to SimpleClusterResolver, or use TF_CONFIG",
                fixed=False,
            )
        self.report(statement, f"ClusterSpec now feeds a cluster resolver built from {how}", fixed=True, severity="info")
        return C.stmt(code + "\n")

    def _fix_cluster_dict(self, statement, call: cst.Call):
        spec = C.arg(call, 0, "cluster")
        if self.strategy == MWMS and self.slurm_vars and self.maps_slurm_ps:
            self.report(
                statement,
                f"the program maps Slurm's tasks to roles itself ({', '.join(self.slurm_vars)}), some of them to"
                " ps: MultiWorkerMirroredStrategy has no ps, every task is a worker, and a task the mapping still"
                " makes a ps would be handed to the strategy as one",
                hint="build the cluster with tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={\"worker\":"
                " W}) (SlurmClusterResolver() makes every Slurm task a worker) in place of the mapping, and ask"
                " Slurm for the W workers only; tfmigrate then sets the batch script's task count",
                reference="legacy_reference/sync_replicas.py",
                fixed=False,
            )
        key = C.code_of(spec) if isinstance(spec, (cst.Name, cst.Call)) else None
        if key in self.named_with_dicts:
            # bound to (or returning) a literal, which got its chief where it is written, and maybe
            # to values known only at run time
            for value in self.named_others.get(key, ()):
                self.report(
                    statement,
                    f"ParameterServerStrategy needs a 'chief' (coordinator) task: the cluster `{key}` from"
                    f" `{C.code_of(value)}` must have a \"chief\" job besides \"ps\" and \"worker\" (its literal"
                    " value got one)",
                    hint='add "chief": ["host:port"] to that cluster and launch one more process as the chief',
                    reference="legacy_reference/async_ps.py",
                    fixed=False,
                )
            return statement
        if not isinstance(spec, cst.Dict):
            if (self.strategy == PSS and spec is not None and not self.from_tf_config
                    and C.code_of(spec) not in self.framework_specs):
                # a dict built elsewhere (a variable, an environment variable): its jobs are not known here
                self.report(
                    statement,
                    f"ParameterServerStrategy needs a 'chief' (coordinator) task: `{C.code_of(spec)}` must have a"
                    " \"chief\" job besides \"ps\" and \"worker\"",
                    hint=self._chief_hint('add "chief": ["host:port"] to the cluster and launch one more process'
                                          " with --job_name=chief"),
                    reference="legacy_reference/async_ps.py",
                    fixed=False,
                )
            return statement
        keys = _dict_keys(spec)
        new_spec = spec
        if self.strategy == MWMS and "ps" in keys:
            self.dropped_ps.update(
                el.value.value for el in spec.elements
                if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                and el.key.evaluated_value == "ps" and isinstance(el.value, cst.Name)
            )
            new_spec = spec.with_changes(
                elements=[
                    el
                    for el in spec.elements
                    if not (isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == "ps")
                ]
            )
            self.report(
                statement,
                "MultiWorkerMirroredStrategy has no parameter servers: the 'ps' job is dropped; launch only worker tasks",
                fixed=True,
                severity="info",
            )
        elif self.strategy == PSS:
            new_spec = self._with_chief(statement, spec) or spec
        if new_spec is spec:
            return statement
        return statement.deep_replace(spec, new_spec)

    def _with_chief(self, statement, spec: cst.Dict) -> cst.Dict | None:
        """``spec`` with a chief entry for ParameterServerStrategy (None: it has
        one, has no workers, or none can be chosen: reported)."""
        keys = _dict_keys(spec)
        if "chief" in keys or "worker" not in keys:
            return None
        chief, how = self._chief_hosts(spec)
        if chief is None:
            workers = next(C.code_of(el.value) for el in spec.elements if isinstance(el, cst.DictElement)
                           and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == "worker")
            self.report(
                statement,
                "ParameterServerStrategy needs a 'chief' (coordinator) task; this cluster has none, and its"
                f" workers (`{workers}`) are neither a --worker_hosts flag nor literal host:port lists, so no"
                " address can be chosen for one here",
                hint=self._chief_hint('add "chief": ["host:port"] to the cluster and launch one more process as'
                                      " the chief"),
                reference="legacy_reference/async_ps.py",
                fixed=False,
            )
            return None
        elements = list(spec.elements)
        last = elements[-1]
        new = cst.DictElement(_simple_string("chief"), chief)
        if last.comma is cst.MaybeSentinel.DEFAULT:
            elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elif len(elements) > 1:
            # one element per line: keep the layout and the trailing comma
            elements[-1] = last.with_changes(comma=elements[-2].comma)
            new = new.with_changes(comma=last.comma)
        else:
            new = new.with_changes(comma=last.comma)
            elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.append(new)
        new_spec = spec.with_changes(elements=elements)
        self.report(
            statement,
            f"ParameterServerStrategy coordinates from a 'chief' task: added a chief entry ({how});"
            " launch one more process as the chief (job name \"chief\", task index 0)",
            fixed=True,
            severity="info",
        )
        return new_spec

    def _chief_hint(self, default: str) -> str:
        """What to do for a chief: a cluster derived from Slurm's environment
        is TensorFlow's SlurmClusterResolver's to build, chief included."""
        if not self.slurm_vars:
            return default
        return (f"the cluster comes from Slurm's environment ({', '.join(self.slurm_vars)}): build it with"
                ' tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={"chief": 1, "ps": P, "worker": W},'
                " port_base=<the port the tasks listen on>), and take this task's role from it"
                " (cluster_resolver.cluster_spec(), then .task_type and .task_id: the jobs are ordered by name,"
                " Slurm task 0 is the chief); tfmigrate then sets the batch script's task count to P + W + 1")

    def _chief_hosts(self, spec: cst.Dict) -> tuple[cst.BaseExpression | None, str]:
        """(the chief's hosts, how they were chosen): `FLAGS.worker_hosts.split(",")`
        (directly or via a local) -> the chief twin of that flag; literal host
        lists -> one literal address next to them (see _literal_chief)."""
        jobs = {}
        for el in spec.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                jobs[el.key.evaluated_value] = el.value
        if "worker" not in jobs:
            return None, ""
        flags_obj = self._flags_object(jobs["worker"])
        if flags_obj is not None:
            self.chief_flag = (flags_obj, "")
            return C.expr(f'{flags_obj}.chief_hosts.split(",")'), "flag --chief_hosts"
        addresses = {job: self._literal_hosts(value) for job, value in jobs.items()}
        if any(hosts is None for hosts in addresses.values()):
            return None, ""
        chief = _literal_chief(addresses)
        if chief is None:
            return None, ""
        self.chief_choice = True
        how = (f"`{chief}`: the first worker's host, on the next port no task of the cluster uses there;"
               " change it where that port is taken")
        return C.expr(f'["{chief}"]'), how

    def _literal_hosts(self, value: cst.BaseExpression) -> list[str] | None:
        """``["h:1", "h:2"]``, directly or through a name bound once to such a list."""
        if isinstance(value, cst.Name):
            value = self._local_source(value.value)
        if isinstance(value, cst.ListComp):
            # ["{}:{}".format(h, p) for h, p in zip(hosts, ports)]: from literal lists
            lists = {}
            for name in C.names_used(value):
                source = self._local_source(name)
                literal = self._literal_hosts(source) if isinstance(source, (cst.List, cst.Tuple)) else None
                if literal is not None:
                    lists[name] = literal
            return comprehended_hosts(C.code_of(value), lists)
        if not isinstance(value, (cst.List, cst.Tuple)) or not value.elements:
            return None
        hosts = [el.value.evaluated_value for el in value.elements
                 if isinstance(el, cst.Element) and isinstance(el.value, cst.SimpleString)]
        return hosts if len(hosts) == len(value.elements) else None

    def _flags_object(self, value: cst.BaseExpression) -> str | None:
        # FLAGS.worker_hosts... or args.worker_hosts...
        for node in C.walk(value):
            if isinstance(node, cst.Attribute) and node.attr.value == "worker_hosts" and isinstance(node.value, cst.Name):
                return node.value.value
        if isinstance(value, cst.Name):
            source = self._local_source(value.value)
            if source is not None:
                return self._flags_object(source)
        return None

    def _local_source(self, name: str) -> cst.BaseExpression | None:
        for node in C.walk(self.ctx.module):
            names, value, _ = C.assignment(node)
            if names == [name] and value is not None:
                return value
        return None


_JOB_NAME_FLAGS = ("job_name", "--job_name", "--job-name")


def _looked_up(lookup) -> str:
    return f"--{lookup.option}" if lookup.owner else f"`{lookup.option}`"
_ROLE_NAMES = ("ps", "worker", "chief", "master")


def _literal_chief(jobs: dict[str, list[str]]) -> str | None:
    """The chief's address for a cluster of literal ``host:port`` lists: the
    first worker's host (a machine of the cluster, reachable as the others
    are) on the port after the highest one the cluster uses on that host.
    None when an address has no numeric port."""
    ports: dict[str, list[int]] = {}
    for hosts in jobs.values():
        for address in hosts:
            host, colon, port = address.rpartition(":")
            if not colon or not host or not port.isdigit():
                return None
            ports.setdefault(host, []).append(int(port))
    host = jobs["worker"][0].rpartition(":")[0]
    port = max(ports[host]) + 1
    return f"{host}:{port}" if port < 65536 else None


def _bound_or_returned(statement) -> cst.BaseExpression | None:
    """The value a statement assigns (``x = value``) or returns (``return value``)."""
    _, value, _ = C.assignment(statement)
    if value is None and isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, cst.Return):
            value = small.value
    return value


def _own_returns(function: cst.FunctionDef) -> list[cst.Return]:
    """The function's return statements with a value, not those of nested defs or lambdas."""
    out: list[cst.Return] = []

    def visit(node: cst.CSTNode) -> None:
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(child, cst.Return) and child.value is not None:
                out.append(child)
            visit(child)

    visit(function.body)
    return out


def _statement_holding(statements, target: int) -> tuple[int, cst.BaseStatement] | None:
    """(index, statement) of the compound statement among ``statements`` whose
    body holds the statement with ``id()`` ``target`` in the same scope (not
    inside a def, class or lambda)."""

    def holds(node: cst.CSTNode) -> bool:
        if id(node) == target:
            return True
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        return any(holds(child) for child in node.children)

    for at, statement in enumerate(statements):
        if not isinstance(statement, cst.SimpleStatementLine) and holds(statement):
            return at, statement
    return None


def _bound_in(held: tuple[int, cst.BaseStatement]) -> set[str]:
    """Names bound anywhere inside the holding statement (assignments, for/with targets)."""
    out: set[str] = set()
    for node in C.walk(held[1]):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                out.update(C.target_names(t.target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)):
            out.update(C.target_names(node.target))
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            out.update(C.target_names(node.asname.name))
        elif isinstance(node, cst.NamedExpr):
            out.update(C.target_names(node.target))
    return out


def _with_chief_choice(call: cst.Call, method: str) -> cst.Call:
    """``choices=["ps", "worker"]`` (argparse) or ``DEFINE_enum("job_name",
    None, ["ps", "worker"], ...)``: the new chief task must pass them."""
    choices = C.arg(call, 2, "enum_values") if method == "DEFINE_enum" else C.arg(call, None, "choices")
    if not isinstance(choices, (cst.List, cst.Tuple)) or not choices.elements:
        return call
    values = [el.value for el in choices.elements]
    if not all(isinstance(v, cst.SimpleString) for v in values):
        return call
    if "chief" in [v.evaluated_value for v in values] or "worker" not in [v.evaluated_value for v in values]:
        return call
    quote = values[0].value[0]
    last = choices.elements[-1]
    elements = [*choices.elements[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))]
    elements.append(cst.Element(cst.SimpleString(f"{quote}chief{quote}"), comma=last.comma))
    return call.deep_replace(choices, choices.with_changes(elements=elements))


class _AddChiefFlag(cst.CSTTransformer):
    """Define --chief_hosts right after the definition of --worker_hosts
    (absl/tf.app flags or argparse), and let a job-name flag restricted to
    ps/worker accept ``chief``."""

    def __init__(self, add_flag: bool):
        super().__init__()
        self.done = not add_flag  # only the choices change where the chief's address is a literal

    def _rewrite(self, body):
        out = []
        for statement in body:
            out.append(statement)
            call = C.single_expr(statement)
            if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
                continue
            first = C.arg(call, 0, None)
            if not isinstance(first, cst.SimpleString):
                continue
            method = call.func.attr.value
            owner = C.code_of(call.func.value)
            text = first.evaluated_value
            if text in _JOB_NAME_FLAGS and (method == "add_argument" or method == "DEFINE_enum"):
                fixed = _with_chief_choice(call, method)
                if fixed is not call:
                    out[-1] = statement.deep_replace(call, fixed)
                continue
            if self.done:
                continue
            if method.startswith("DEFINE_") and text == "worker_hosts":
                out.append(C.stmt(f'{owner}.{method}("chief_hosts", "", "Comma-separated hostname:port of the chief (coordinator) task")\n'))
                self.done = True
            elif method == "add_argument" and text in ("--worker_hosts", "--worker-hosts"):
                flag = "--chief_hosts" if text == "--worker_hosts" else "--chief-hosts"
                out.append(C.stmt(f'{owner}.add_argument("{flag}", type=str, default="", help="Comma-separated hostname:port of the chief (coordinator) task")\n'))
                self.done = True
        return out

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._rewrite(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._rewrite(updated.body))


ClusterResolver.VALID = [
    Valid(
        """
        import tensorflow as tf
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        """
    ),
    Valid(
        """
        import tensorflow as tf
        spec = {"ps": ["a:1"], "worker": ["b:1"]}
        """
    ),
]

ClusterResolver.INVALID = [
    Invalid(
        # the role found by looking this machine's address up in host lists the
        # addresses are built from: a literal chief, and an option naming it
        """
        import tensorflow as tf
        ps_hosts = ["10.0.0.1"]
        worker_hosts = ["10.0.0.2", "10.0.0.3"]
        ps = ["%s:2222" % h for h in ps_hosts]
        workers = ["%s:2222" % h for h in worker_hosts]
        tf.app.flags.DEFINE_string("ip", "", "this machine's address")
        FLAGS = tf.app.flags.FLAGS
        if FLAGS.ip in ps_hosts:
            job, index = "ps", ps_hosts.index(FLAGS.ip)
        elif FLAGS.ip in worker_hosts:
            job, index = "worker", worker_hosts.index(FLAGS.ip)
        cluster = tf.train.ClusterSpec({"ps": ps, "worker": workers})
        server = tf.train.Server(cluster, job_name=job, task_index=index)
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            opt = tf.train.GradientDescentOptimizer(0.1)
        """,
        """
        import tensorflow as tf
        ps_hosts = ["10.0.0.1"]
        worker_hosts = ["10.0.0.2", "10.0.0.3"]
        ps = ["%s:2222" % h for h in ps_hosts]
        workers = ["%s:2222" % h for h in worker_hosts]
        tf.app.flags.DEFINE_string("ip", "", "this machine's address")
        tf.app.flags.DEFINE_boolean("chief", False, "Run this process as the chief (coordinator) task, on the chief entry's host")
        FLAGS = tf.app.flags.FLAGS
        if FLAGS.chief:
            job, index = "chief", 0
        elif FLAGS.ip in ps_hosts:
            job, index = "ps", ps_hosts.index(FLAGS.ip)
        elif FLAGS.ip in worker_hosts:
            job, index = "worker", worker_hosts.index(FLAGS.ip)
        cluster = tf.train.ClusterSpec({"ps": ps, "worker": workers, "chief": ["10.0.0.2:2223"]})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type=job, task_id=index, rpc_layer="grpc")
        server = tf.train.Server(cluster, job_name=job, task_index=index)
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            opt = tf.train.GradientDescentOptimizer(0.1)
        """,
    ),
    Invalid(
        # TF_CONFIG read by hand, its `master` task type mapped to a worker by the
        # program: the resolver takes the job name the Server got, not TF_CONFIG's
        """
        import json, os
        import tensorflow as tf

        def main():
            tf_config = json.loads(os.environ["TF_CONFIG"])
            role = tf_config["task"]["type"]
            index = tf_config["task"]["index"]
            role = "worker" if role == "master" else role
            spec = tf.train.ClusterSpec(tf_config["cluster"])
            server = tf.train.Server(spec, job_name=role, task_index=index)
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        """,
        """
        import json, os
        import tensorflow as tf

        def main():
            tf_config = json.loads(os.environ["TF_CONFIG"])
            role = tf_config["task"]["type"]
            index = tf_config["task"]["index"]
            role = "worker" if role == "master" else role
            spec = tf.train.ClusterSpec(tf_config["cluster"])
            cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
                spec, task_type=role, task_id=index, rpc_layer="grpc")
            server = tf.train.Server(spec, job_name=role, task_index=index)
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        """,
    ),
    Invalid(
        # the spec at module level, the task's role known only in main(): the
        # resolver goes where the Server read it, not where flags are unparsed
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]})

        def main(job_name, task_index):
            server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
            sess = tf.Session(server.target)
        """,
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]})

        def main(job_name, task_index):
            cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
                cluster, task_type=job_name, task_id=task_index, rpc_layer="grpc")
            server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
            sess = tf.Session(server.target)
        """,
    ),
    Invalid(
        # a literal cluster at the top of the module, the flags the Server
        # reads defined after it (the widely copied 2016 tutorial shape): the
        # resolver goes after them, next to the Server
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1", "c:1"]})
        tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
        FLAGS = tf.app.flags.FLAGS
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=0)
        """,
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1", "c:1"]})
        tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
        FLAGS = tf.app.flags.FLAGS
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type=FLAGS.job_name, task_id=0, rpc_layer="grpc")
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=0)
        """,
    ),
    Invalid(
        """
        import tensorflow as tf
        flags = tf.app.flags
        flags.DEFINE_string("ps_hosts", "", "ps")
        flags.DEFINE_string("worker_hosts", "", "workers")
        FLAGS = flags.FLAGS

        def main(_):
            cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """,
        """
        import tensorflow as tf
        flags = tf.app.flags
        flags.DEFINE_string("ps_hosts", "", "ps")
        flags.DEFINE_string("worker_hosts", "", "workers")
        flags.DEFINE_string("chief_hosts", "", "Comma-separated hostname:port of the chief (coordinator) task")
        FLAGS = flags.FLAGS

        def main(_):
            cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(","), "chief": FLAGS.chief_hosts.split(",")})
            cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
                cluster, task_type=FLAGS.job_name, task_id=FLAGS.task_index, rpc_layer="grpc")
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """,
    ),
    Invalid(
        """
        from absl import flags
        import tensorflow as tf
        flags.DEFINE_enum("job_name", None, ('ps', 'worker'), "role")
        flags.DEFINE_string("worker_hosts", "", "workers")
        FLAGS = flags.FLAGS
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": FLAGS.worker_hosts.split(",")})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=0)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
        """
        from absl import flags
        import tensorflow as tf
        flags.DEFINE_enum("job_name", None, ('ps', 'worker', 'chief'), "role")
        flags.DEFINE_string("worker_hosts", "", "workers")
        flags.DEFINE_string("chief_hosts", "", "Comma-separated hostname:port of the chief (coordinator) task")
        FLAGS = flags.FLAGS
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": FLAGS.worker_hosts.split(","), "chief": FLAGS.chief_hosts.split(",")})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type=FLAGS.job_name, task_id=0, rpc_layer="grpc")
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=0)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
    ),
    Invalid(
        # a job-name flag restricted to ps/worker must accept the new chief task
        """
        import argparse
        import tensorflow as tf
        parser = argparse.ArgumentParser()
        parser.add_argument("--job_name", required=True, choices=["ps", "worker"])
        parser.add_argument("--task_index", type=int, default=0)
        parser.add_argument("--worker_hosts", type=str, default="")
        args = parser.parse_args()
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": args.worker_hosts.split(",")})
        server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
        """
        import argparse
        import tensorflow as tf
        parser = argparse.ArgumentParser()
        parser.add_argument("--job_name", required=True, choices=["ps", "worker", "chief"])
        parser.add_argument("--task_index", type=int, default=0)
        parser.add_argument("--worker_hosts", type=str, default="")
        parser.add_argument("--chief_hosts", type=str, default="", help="Comma-separated hostname:port of the chief (coordinator) task")
        args = parser.parse_args()
        cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": args.worker_hosts.split(","), "chief": args.chief_hosts.split(",")})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type=args.job_name, task_id=args.task_index, rpc_layer="grpc")
        server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
    ),
    Invalid(
        """
        import json, os
        import tensorflow.compat.v1 as tf
        tf_config = json.loads(os.environ["TF_CONFIG"])
        cluster = tf.train.ClusterSpec(tf_config["cluster"])
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        """,
        """
        import json, os
        import tensorflow.compat.v1 as tf
        tf_config = json.loads(os.environ["TF_CONFIG"])
        cluster = tf.train.ClusterSpec(tf_config["cluster"])
        cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        """,
    ),
    Invalid(
        # literal host lists: the chief gets a literal address beside them
        # (the first worker's host, the next port the cluster leaves free there)
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]})
        server = tf.train.Server(cluster, "worker", 0)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"], "chief": ["localhost:2225"]})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type="worker", task_id=0, rpc_layer="grpc")
        server = tf.train.Server(cluster, "worker", 0)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
    ),
    Invalid(
        # the cluster dict by name: from an environment variable, else a literal
        # one; the literal gets the chief, the variable's keeps a diagnostic
        """
        import ast, os
        import tensorflow as tf

        def main(job, index):
            raw = os.environ.get("LAB_CLUSTER")
            if raw:
                jobs = ast.literal_eval(raw)
            else:
                jobs = {"ps": ["lab-ps:2000"], "worker": ["lab-w0:2001", "lab-w1:2001"]}
            cluster = tf.train.ClusterSpec(jobs)
            server = tf.train.Server(cluster, job_name=job, task_index=index)
            setter = tf.train.replica_device_setter(cluster=cluster)
        """,
        """
        import ast, os
        import tensorflow as tf

        def main(job, index):
            raw = os.environ.get("LAB_CLUSTER")
            if raw:
                jobs = ast.literal_eval(raw)
            else:
                jobs = {"ps": ["lab-ps:2000"], "worker": ["lab-w0:2001", "lab-w1:2001"], "chief": ["lab-w0:2002"]}
            cluster = tf.train.ClusterSpec(jobs)
            cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
                cluster, task_type=job, task_id=index, rpc_layer="grpc")
            server = tf.train.Server(cluster, job_name=job, task_index=index)
            setter = tf.train.replica_device_setter(cluster=cluster)
        """,
        diagnostics=("TFM201",),
    ),
    Invalid(
        # an address without a port: no free port to pick for the chief
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["ps0"], "worker": ["worker0", "worker1"]})
        server = tf.train.Server(cluster, "worker", 0)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
        """
        import tensorflow as tf
        cluster = tf.train.ClusterSpec({"ps": ["ps0"], "worker": ["worker0", "worker1"]})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster, task_type="worker", task_id=0, rpc_layer="grpc")
        server = tf.train.Server(cluster, "worker", 0)
        device_fn = tf.train.replica_device_setter(cluster=cluster)
        """,
        diagnostics=("TFM201",),
    ),
    Invalid(
        """
        from tensorflow.train import ClusterSpec, Server, SyncReplicasOptimizer
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--worker_hosts", type=str, default="")
        cluster = ClusterSpec({"ps": ["h:1"], "worker": ["h:2"]})
        opt = SyncReplicasOptimizer(None, 2)
        """,
        """
        from tensorflow.train import ClusterSpec, Server, SyncReplicasOptimizer
        import argparse
        import tensorflow as tf

        parser = argparse.ArgumentParser()
        parser.add_argument("--worker_hosts", type=str, default="")
        cluster = ClusterSpec({"worker": ["h:2"]})
        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
        opt = SyncReplicasOptimizer(None, 2)
        """,
        diagnostics=("TFM201",),
    ),
]
