"""The rewrite :func:`_server_flow.plan` decided: the resolver in the place
of a server handed on through returns and parameters (see _server_flow)."""

from __future__ import annotations

import re

import libcst as cst

from migrate.codemod.fastcst import code_of, transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._program import MWMS
from migrate.codemod.rules._server_flow import RESOLVER, Flow


class _Apply(cst.CSTTransformer):
    def __init__(self, flow: Flow, strategy: str):
        super().__init__()
        self.flow = flow
        self.strategy = strategy
        self.emptied: set[str] = set()
        self.created: set[int] = set()  # id() of the serving branches' server statements

    def leave_Name(self, original, updated):
        return updated.with_changes(value=RESOLVER) if id(original) in self.flow.renamed else updated

    def leave_Attribute(self, original, updated):
        return cst.Name(RESOLVER) if id(original) in self.flow.targets else updated

    def leave_FunctionDef(self, original, updated):
        held = self.flow.held_as.get(id(original))
        if held is not None:
            updated = _docstring_entry(updated, held)
        body = [st for st in C.body_of(updated.body) if not _docstring(st)]
        if not body and any(not _docstring(st) for st in C.body_of(original.body)):
            self.emptied.add(updated.name.value)
            if not C.body_of(updated.body):
                return updated.with_changes(body=C.indented([], updated.body))
        return updated

    def leave_IndentedBlock(self, original, updated):
        out: list[cst.BaseStatement] = []
        for before, after in zip(original.body, updated.body):
            if id(before) in self.flow.aliases:
                continue
            if before is self.flow.server_statement:
                if C.assignment(before)[0]:
                    continue
                out.append(C.stmt(f"return {RESOLVER}\n"))  # it returned the server
                continue
            if id(before) in self.flow.ps_joins:
                out.extend(self._serving(before, after))
                continue
            if id(before) in self.flow.helper_joins and self.strategy != MWMS:
                out.extend(self._serve(before, after))
                continue
            out.append(after)
        if len(original.body) != len(updated.body):
            return updated
        return updated.with_changes(body=out)

    def _serving(self, original: cst.If, branch: cst.If) -> list[cst.BaseStatement]:
        join = self.flow.ps_joins[id(original)]
        if self.strategy == MWMS:  # no ps tasks: what the other roles ran stays
            return C.without_first_branch(branch)
        job = branch.test.left if not isinstance(branch.test.left, cst.SimpleString) else (
            branch.test.comparisons[0].comparator)
        body: list[cst.BaseStatement] = []
        for before, after in zip(C.body_of(original.body), C.body_of(branch.body)):
            body.extend(self._serve(before, after) if before is join else [after])
        orelse = branch.orelse
        if isinstance(orelse, cst.If) and isinstance(orelse.test, cst.Comparison) and [
                s.evaluated_value for s in (orelse.test.left, orelse.test.comparisons[0].comparator)
                if isinstance(s, cst.SimpleString)] == ["worker"]:
            orelse = orelse.with_changes(test=C.expr(f'{code_of(job)} == "chief"'))
        return [branch.with_changes(test=C.expr(f'{code_of(job)} in ("ps", "worker")'),
                                    body=C.indented(body, branch.body), orelse=orelse)]

    def _serve(self, join: cst.BaseStatement, updated: cst.BaseStatement) -> list[cst.BaseStatement]:
        """``server.join()`` of a ps task as TF2 serves: a server started
        from the resolver (ps and worker tasks alike), joined."""
        server = C.fresh("server", set(self.flow.taken[id(join)]))
        started, joined = C.stmts(
            f"{server} = tf.distribute.Server(\n"
            f"    {RESOLVER}.cluster_spec(), job_name={RESOLVER}.task_type, task_index={RESOLVER}.task_id,\n"
            f"    protocol={RESOLVER}.rpc_layer or \"grpc\", start=True)\n"
            f"{server}.join()\n")
        started = started.with_changes(leading_lines=updated.leading_lines)
        self.created.add(id(started))
        return [started, joined]


def _docstring_entry(function: cst.FunctionDef, name: str) -> cst.FunctionDef:
    """``function`` whose docstring's ``Args:``/``Returns:`` entry for the
    server it held by ``name`` (``server: the TF1 server ...``) describes the
    resolver now there."""
    body = list(C.body_of(function.body))
    if not body or not isinstance(C.single_expr(body[0]), cst.SimpleString):
        return function
    string = C.single_expr(body[0])
    entry = re.compile(rf"^([ \t]*){re.escape(name)}([ \t]*\([^)\n]*\))?[ \t]*:.*$", re.MULTILINE)
    text = entry.sub(lambda m: f"{m.group(1)}{RESOLVER}: the cluster, and this task's job name and index in it.",
                     string.value, count=1)
    if text == string.value:
        return function
    return function.deep_replace(string, string.with_changes(value=text))


def _docstring(statement: cst.BaseStatement) -> bool:
    value = C.single_expr(statement)
    return isinstance(value, (cst.SimpleString, cst.ConcatenatedString))


def apply(module: cst.Module, flow: Flow, strategy: str) -> tuple[cst.Module, list[str], set[int]]:
    """The module with the resolver in the server's place; the functions
    left with nothing to do (a helper that only sent the ps to ``join()``,
    under MultiWorkerMirroredStrategy) are removed with their calls, and
    named in the second value; the third holds id() of the TF2 servers the
    serving branches now start."""
    emit = _Apply(flow, strategy)
    module = transform(module, emit)
    dropped = []
    if strategy == MWMS and flow.serving_helpers:  # no ps: the helpers that served it are called no more
        module = C.drop_unreferenced(module, flow.serving_helpers)
        kept = {st.name.value for st in module.body if isinstance(st, cst.FunctionDef)}
        dropped = sorted(flow.serving_helpers - kept)
    if not emit.emptied:
        return module, dropped, emit.created
    for name in sorted(emit.emptied):
        calls = [c for c in C.calls_in(module) if isinstance(c.func, cst.Name) and c.func.value == name]
        statements = [st for st in C.walk(module) if C.single_expr(st) is not None
                      and any(C.single_expr(st) is c for c in calls)]
        if len(statements) == len(calls):
            dropped.append(name)
    if dropped:
        module = transform(module, _DropCalls(set(dropped)))
    return module, sorted(dropped), emit.created


class _DropCalls(cst.CSTTransformer):
    """Removes the functions ``names`` and the statements that only call them."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    def _keep(self, statement) -> bool:
        if isinstance(statement, cst.FunctionDef):
            return statement.name.value not in self.names
        value = C.single_expr(statement)
        return not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
                    and value.func.value in self.names)

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=[st for st in updated.body if self._keep(st)])

    def leave_Module(self, original, updated):
        return updated.with_changes(body=[st for st in updated.body if self._keep(st)])
