"""The task's server built in one function and handed to the others.

Many TF1 programs build the cluster in a helper and pass what it made on:

    def define_cluster():
        cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        return cluster, server

    def start_server(server):
        if FLAGS.job_name == "ps":
            server.join()

    def main(_):
        cluster, server = define_cluster()
        start_server(server)
        train(cluster, server)          # or train(server.target): a session's master

The server carries this task's role (its job name and index) to the
training, which connects its session to ``server.target``. In TF2 the cluster
resolver TFM201 builds next to the server carries the same role, and the
strategy takes it: so the resolver takes the server's place on every path the
server went (returned, unpacked, passed as an argument, a parameter), the
ps's ``server.join()`` becomes the serving branch of the strategy (ps and
worker tasks start ``tf.distribute.Server`` from the resolver and join it
under ParameterServerStrategy; nothing under MultiWorkerMirroredStrategy,
which starts each worker's server itself), and the sessions given its target
are left to TFM301, which replaces them.

The server may only go where that holds: every use of it, followed through
the functions of this module, must be one of those (a return, an argument of
a function of this module, ``join()`` in a ``== "ps"`` branch, its target
given to a TF1 session or to a function of this module that gives it to
one). Otherwise nothing changes and :func:`plan` says which use stops it.

This module decides (:func:`plan`); ``_server_flow_emit.apply`` rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.engine import SESSION_SINKS
from migrate.codemod.fastcst import children, code_of
from migrate.codemod.program.tracing import own_scope
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._program import PSS

RESOLVER = "cluster_resolver"


_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


@dataclass
class Flow:
    """What carrying the resolver in the server's place changes."""

    server_statement: cst.CSTNode
    renamed: set[int] = field(default_factory=set)  # id() of Name nodes (params, reads, keywords) -> RESOLVER
    targets: set[int] = field(default_factory=set)  # id() of `server.target` nodes -> RESOLVER
    # id(if <job> == "ps") -> the `server.join()` statement in it, or None where it calls a serving helper
    ps_joins: dict[int, cst.CSTNode | None] = field(default_factory=dict)
    # id() of `server.join()` statements of serving helpers (`def run_ps(server): server.join()`)
    helper_joins: set[int] = field(default_factory=set)
    serving_helpers: set[str] = field(default_factory=set)
    functions: list[str] = field(default_factory=list)  # the functions it reaches, in order
    held_as: dict[int, str] = field(default_factory=dict)  # id(function) -> the name it held the server by
    aliases: set[int] = field(default_factory=set)  # id() of `target = server.target` statements (they go)
    taken: dict[int, set[str]] = field(default_factory=dict)  # id(if) -> names its function has
    refusals: list[Refusal] = field(default_factory=list)  # the uses that keep the server, in order found

    @property
    def carried(self) -> bool:
        """Whether the resolver can take the server's place: it goes somewhere, every use allows it."""
        return len(self.functions) > 1 and not self.refusals


@dataclass
class Refusal:
    node: cst.CSTNode
    why: str


class _Index:
    """Parents, scopes and the module's functions (one walk)."""

    def __init__(self, module: cst.Module):
        self.module = module
        self.parent: dict[int, cst.CSTNode] = {}
        stack = [module]
        while stack:
            node = stack.pop()
            for child in children(node):
                self.parent[id(child)] = node
                stack.append(child)
        defs: dict[str, list[cst.FunctionDef]] = {}
        for statement in module.body:
            if isinstance(statement, cst.FunctionDef):
                defs.setdefault(statement.name.value, []).append(statement)
        self.functions = {name: found[0] for name, found in defs.items() if len(found) == 1}

    def up(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parent.get(id(node))

    def scope(self, node: cst.CSTNode) -> cst.CSTNode:
        at = self.up(node)
        while at is not None and not isinstance(at, (*_SCOPES, cst.Module)):
            at = self.up(at)
        return at if at is not None else self.module

    def statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        at = node
        while at is not None and not isinstance(at, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            at = self.up(at)
        return at


def _names_in(scope: cst.CSTNode, name: str) -> tuple[list[cst.Name], bool]:
    """The Name nodes spelling ``name`` in ``scope``'s own code (its
    parameters included, its own def name not), and whether a nested
    function, lambda or class also spells it."""
    own: list[cst.Name] = []
    nested = False
    start = scope.body if isinstance(scope, cst.FunctionDef) else scope
    stack: list[tuple[cst.CSTNode, bool]] = [(start, False)]
    if isinstance(scope, cst.FunctionDef):
        stack.append((scope.params, False))
    while stack:
        node, inner = stack.pop()
        if type(node) is cst.Name and node.value == name:
            if inner:
                nested = True
            else:
                own.append(node)
        for child in children(node):
            if type(child) is cst.Attribute or type(child) is cst.Arg:
                # `x.server` is no read of `server`, nor is the keyword of `f(server=x)`
                stack.append((child.value, inner))
                continue
            stack.append((child, inner or isinstance(node, _SCOPES)))
    return own, nested


def may_leave(function: cst.FunctionDef, name: str) -> bool:
    """Whether ``function`` returns what ``name`` holds or gives it, or its
    ``.target``, to a plain function call (``train(server)``,
    ``fit(cluster, server.target)``): the cheap test before :func:`plan`."""
    for node in C.walk(function):
        kind = type(node)
        if kind is cst.Return and node.value is not None and name in C.names_used(node.value):
            return True
        if kind is cst.Call and type(node.func) is cst.Name:
            for given in node.args:
                value = given.value
                if type(value) is cst.Attribute and value.attr.value == "target":
                    value = value.value
                if type(value) is cst.Name and value.value == name:
                    return True
    return False


def _ps_test(test: cst.BaseExpression) -> bool:
    """``<job> == "ps"`` (either side)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    sides = [test.left, target.comparator]
    return isinstance(target.operator, cst.Equal) and [
        s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)] == ["ps"]


def _callee(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _param_for(function: cst.FunctionDef, call: cst.Call, given: cst.Arg) -> cst.Param | None:
    """The parameter of ``function`` that ``given`` (an argument of ``call``) binds."""
    if any(a.star for a in call.args):
        return None
    params = function.params
    if given.keyword is not None:
        return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                     if p.name.value == given.keyword.value), None)
    index = [a for a in call.args if a.keyword is None].index(given)
    positional = [*params.posonly_params, *params.params]
    return positional[index] if index < len(positional) else None


class _Planner:
    def __init__(self, module: cst.Module, index: _Index, strategy: str, other_callers):
        self.module = module
        self.index = index
        self.strategy = strategy
        self.other_callers = other_callers  # function -> call sites in other files
        self.seen: set[tuple[int, str]] = set()
        self.parameters: list[tuple[cst.FunctionDef, cst.Param]] = []  # the parameters the server goes to
        self.returns: list[tuple[cst.FunctionDef, int | None]] = []  # functions returning it (tuple position)

    def check_other_calls(self, flow: Flow) -> None:
        """Every call of a function whose parameter now takes the resolver
        must give it the resolver: a call giving something else there (a local
        run's ``run(target="")``, a default) would hand the strategy that."""
        carried = flow.renamed | flow.targets | {id(flow.server_statement.body[0].value)}
        for function, position in self.returns:
            for node in own_scope(function):
                if type(node) is not cst.Return:
                    continue
                value = node.value
                if position is not None:
                    elements = value.elements if isinstance(value, cst.Tuple) else ()
                    value = elements[position].value if position < len(elements) else None
                if value is None or id(value) not in carried:
                    flow.refusals.append(Refusal(node, f"`{code_of(node).strip()}` returns"
                                                 f" {'nothing' if value is None else f'`{code_of(value)}`'} where"
                                                 f" `{function.name.value}()` otherwise returns the server or its target"))
        for function, param in self.parameters:
            name = function.name.value
            for call in C.calls_in(self.module):
                if not (isinstance(call.func, cst.Name) and call.func.value == name):
                    continue
                given = next((a for a in call.args if _param_for(function, call, a) is param), None)
                if given is None or id(given.value) not in carried:
                    what = f"`{code_of(given.value)}`" if given is not None else "its default"
                    flow.refusals.append(Refusal(self.index.statement(call), f"`{code_of(call)}` gives"
                                                 f" `{name}()` {what} for `{param.name.value}`, where the others"
                                                 " give the server"))

    def carry(self, flow: Flow, scope: cst.CSTNode, name: str, binding: cst.CSTNode, kind: str) -> None:
        """Follow the value ``name`` holds in ``scope`` (the server, or its
        target when ``kind`` is "target") to every place it is read; the uses
        that do not allow the resolver go to ``flow.refusals``."""
        key = (id(scope), name)
        if key in self.seen:
            return
        self.seen.add(key)
        if scope is not self.module and isinstance(scope, cst.FunctionDef) and scope.name.value not in flow.functions:
            flow.functions.append(scope.name.value)
        if isinstance(scope, cst.FunctionDef):
            flow.held_as.setdefault(id(scope), name)
        own, nested = _names_in(scope, name)
        where = f"`{scope.name.value}()`" if isinstance(scope, cst.FunctionDef) else "the module"
        if nested:
            flow.refusals.append(Refusal(binding, f"a function nested in {where} reads `{name}`"))
            return
        taken, _ = _names_in(scope, RESOLVER)
        if taken and scope is not self.index.scope(flow.server_statement):
            flow.refusals.append(Refusal(taken[0], f"{where} already has a `{RESOLVER}` of its own"))
            return
        for node in own:
            parent = self.index.up(node)
            if isinstance(parent, cst.Param):
                flow.renamed.add(id(node))
                continue
            holder = parent
            while isinstance(holder, (cst.Element, cst.Tuple, cst.List)):
                holder = self.index.up(holder)
            if isinstance(holder, cst.AssignTarget):
                statement = self.index.statement(node)
                if statement is not binding:
                    flow.refusals.append(Refusal(statement, f"`{name}` is bound again in {where}"))
                if binding is not flow.server_statement:
                    flow.renamed.add(id(node))
                continue
            refusal = (self._server_use(flow, scope, node) if kind == "server"
                       else self._target_use(flow, node))
            if refusal is not None:
                flow.refusals.append(refusal)
            elif kind == "target" or id(node) not in flow.targets:
                flow.renamed.add(id(node))

    def _server_use(self, flow: Flow, scope: cst.CSTNode, node: cst.Name) -> Refusal | None:
        parent = self.index.up(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            if parent.attr.value == "target":
                refusal = self._target_use(flow, parent)
                if refusal is None:
                    flow.targets.add(id(parent))
                return refusal
            if parent.attr.value == "join":
                return self._ps_join(flow, parent)
            return Refusal(self.index.statement(node), f"the server is used as `{code_of(parent)}`")
        if isinstance(parent, cst.Arg) and parent.value is node:
            return self._argument(flow, parent, "server")
        if self._is_returned(node):
            return self._returned(flow, scope, node, "server")
        statement = self.index.statement(node)
        return Refusal(statement, f"the server is used in `{code_of(statement).strip()}`")

    def _target_use(self, flow: Flow, node: cst.CSTNode) -> Refusal | None:
        parent = self.index.up(node)
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = self.index.up(parent)
            if _callee(call) in SESSION_SINKS:
                return None  # TFM301 replaces the session
            return self._argument(flow, parent, "target")
        if self._is_returned(node):
            return self._returned(flow, self.index.scope(node), node, "target")
        statement = self.index.statement(node)
        names, value, assign = C.assignment(statement)
        if value is node and len(names) == 1 and len(assign.targets) == 1 and isinstance(
                assign.targets[0].target, cst.Name):
            # `target = server.target`: the name holds the target (and goes: it would hold the resolver)
            flow.aliases.add(id(statement))
            self.carry(flow, self.index.scope(node), names[0], statement, "target")
            return None
        statement = self.index.statement(node)
        return Refusal(statement, f"the server's target is used in `{code_of(statement).strip()}`")

    def _is_returned(self, node: cst.CSTNode) -> bool:
        """``return node`` or ``return ..., node, ...``."""
        parent = self.index.up(node)
        return isinstance(parent, cst.Return) or (
            isinstance(parent, cst.Element) and isinstance(self.index.up(parent), cst.Tuple)
            and isinstance(self.index.up(self.index.up(parent)), cst.Return))

    def _argument(self, flow: Flow, given: cst.Arg, kind: str) -> Refusal | None:
        call = self.index.up(given)
        name = call.func.value if isinstance(call.func, cst.Name) else None
        function = self.index.functions.get(name) if name else None
        what = "the server" if kind == "server" else "the server's target"
        if function is None:
            return Refusal(call, f"{what} is given to `{code_of(call.func)}(...)`, not a function of this module")
        param = _param_for(function, call, given)
        if param is None:
            return Refusal(call, f"{what} is given to `{name}(...)` where no parameter of its takes it by name")
        elsewhere = self.other_callers(function)
        if elsewhere:
            return Refusal(call, f"`{name}(...)` is also called from {elsewhere[0].describe()}, which this"
                           " rewrite cannot change")
        # calls naming the parameter by keyword follow its new name
        for other in C.calls_in(self.module):
            if isinstance(other.func, cst.Name) and other.func.value == name:
                for a in other.args:
                    if a.keyword is not None and a.keyword.value == param.name.value:
                        flow.renamed.add(id(a.keyword))
        self.parameters.append((function, param))
        self.carry(flow, function, param.name.value, param, kind)
        return None

    def _returned(self, flow: Flow, scope: cst.CSTNode, node: cst.CSTNode, kind: str) -> Refusal | None:
        if not isinstance(scope, cst.FunctionDef):
            return Refusal(self.index.statement(node), "the server is returned outside a function")
        name = scope.name.value
        parent = self.index.up(node)
        position = None
        if isinstance(parent, cst.Element):
            position = list(self.index.up(parent).elements).index(parent)
        self.returns.append((scope, position))
        sites = [c for c in C.calls_in(self.module) if isinstance(c.func, cst.Name) and c.func.value == name]
        if not sites:
            return Refusal(scope, f"`{name}()` returns the server and nothing in this module calls it")
        elsewhere = self.other_callers(scope)
        if elsewhere:
            return Refusal(scope, f"`{name}()` returns the server and is also called from"
                           f" {elsewhere[0].describe()}, which this rewrite cannot change")
        for call in sites:
            statement = self.index.statement(call)
            _, value, assign = C.assignment(statement)
            if value is not call or assign is None or len(assign.targets) != 1:
                flow.refusals.append(Refusal(statement, f"the server `{name}()` returns is used as `{code_of(call)}`"))
                continue
            target = assign.targets[0].target
            if position is None:
                held = target if isinstance(target, cst.Name) else None
            else:
                elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
                held = elements[position].value if position < len(elements) else None
            if not isinstance(held, cst.Name) or any(isinstance(e.value, cst.StarredElement) for e in getattr(
                    target, "elements", ())):
                flow.refusals.append(Refusal(statement, f"the server `{name}()` returns is unpacked as"
                                             f" `{code_of(target)}`"))
                continue
            self.carry(flow, self.index.scope(call), held.value, statement, kind)
        return None

    def _ps_join(self, flow: Flow, attribute: cst.Attribute) -> Refusal | None:
        call = self.index.up(attribute)
        expr = self.index.up(call)
        statement = self.index.up(expr)
        block = self.index.up(statement)
        branch = self.index.up(block)
        if (isinstance(call, cst.Call) and not call.args and isinstance(expr, cst.Expr)
                and isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                and isinstance(block, cst.IndentedBlock) and isinstance(branch, cst.If) and branch.body is block
                and _ps_test(branch.test)):
            flow.ps_joins[id(branch)] = statement
            scope = self.index.scope(branch)
            flow.taken[id(statement)] = (_all_names(scope) - {code_of(attribute.value)}) | {RESOLVER}
            return None
        where = self.index.statement(attribute)
        helper = self.index.scope(attribute)
        if (isinstance(call, cst.Call) and not call.args and isinstance(expr, cst.Expr)
                and isinstance(helper, cst.FunctionDef) and helper is self.index.functions.get(helper.name.value)
                and statement in C.body_of(helper.body)):
            # `def run_ps(server): server.join()`, every call of it in a ps branch
            branches = self._ps_branches_calling(helper.name.value)
            if branches is not None:
                flow.helper_joins.add(id(statement))
                flow.serving_helpers.add(helper.name.value)
                flow.taken[id(statement)] = (_all_names(helper) - {code_of(attribute.value)}) | {RESOLVER}
                for branch in branches:
                    flow.ps_joins.setdefault(id(branch), None)
                return None
        return Refusal(where, "the server is joined outside an `if <job> == \"ps\":` branch")

    def _ps_branches_calling(self, name: str) -> list[cst.If] | None:
        """The `if <job> == "ps":` branches holding the calls of ``name``, when
        every call of it is a statement of such a branch's own block."""
        branches = []
        for call in C.calls_in(self.module):
            if not (isinstance(call.func, cst.Name) and call.func.value == name):
                continue
            statement = self.index.statement(call)
            block = self.index.up(statement)
            branch = self.index.up(block)
            if not (C.single_expr(statement) is call and isinstance(branch, cst.If) and branch.body is block
                    and _ps_test(branch.test)):
                return None
            branches.append(branch)
        return branches or None


def _all_names(scope: cst.CSTNode) -> set[str]:
    return {n.value for n in C.walk(scope) if type(n) is cst.Name}


def plan(module: cst.Module, server_statement: cst.SimpleStatementLine, strategy: str,
         other_callers, resolver_built: bool = True) -> Flow:
    """How the resolver takes the place of the server ``server_statement``
    makes (``server = tf.train.Server(...)`` or ``return tf.train.Server(...)``
    in a function of ``module``, next to the resolver TFM201 built unless
    ``resolver_built`` is False), and the uses of the server that keep it
    (``Flow.refusals``). A server that stays in its function is not carried:
    TFM202's branching rewrite is for it."""
    index = _Index(module)
    scope = index.scope(server_statement)
    flow = Flow(server_statement)
    if not isinstance(scope, cst.FunctionDef):
        flow.refusals.append(Refusal(server_statement, "the server is built outside a function"))
        return flow
    bound, _ = _names_in(scope, RESOLVER)
    if resolver_built and not any(isinstance(index.up(n), cst.AssignTarget) for n in bound):
        flow.refusals.append(Refusal(server_statement, f"no cluster resolver is built in `{scope.name.value}()`"
                                     " next to it"))
        return flow
    planner = _Planner(module, index, strategy, other_callers)
    names, _, _ = C.assignment(server_statement)
    if names:
        planner.carry(flow, scope, names[0], server_statement, "server")
    else:  # `return tf.train.Server(...)`
        flow.functions.append(scope.name.value)
        refusal = planner._returned(flow, scope, server_statement.body[0].value, "server")
        if refusal is not None:
            flow.refusals.append(refusal)
    planner.check_other_calls(flow)
    if strategy == PSS and len(flow.functions) > 1 and not flow.ps_joins:
        flow.refusals.append(Refusal(server_statement, "no `if <job> == \"ps\": server.join()` tells which tasks"
                                     " only serve"))
    return flow
