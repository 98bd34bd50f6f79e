"""One server for every role, built before the role branching.

Many TF1 programs build the task's server inside each branch of the role
test, spelling the role as a literal:

    if FLAGS.job_name == "ps":
        server = tf.train.Server(cluster, job_name="ps", task_index=FLAGS.task_index)
        server.join()
    else:
        is_chief = FLAGS.task_index == 0
        server = tf.train.Server(cluster, job_name="worker", task_index=FLAGS.task_index)
        ...

In each branch the literal is the value the test just compared the job
expression with, so one server built from that expression before the ``if``
is the same server for every role of the cluster:

    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    else:
        is_chief = FLAGS.task_index == 0
        ...

That is the shape the cluster rules migrate (TFM201 builds the resolver from
the server's job and index, TFM202 rewrites the branching). Analysis only
decides; :func:`hoist_role_servers` rewrites.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C

ROLES = ("ps", "worker")


def _role_tested(test: cst.BaseExpression) -> tuple[str, str] | None:
    """(code of the job expression, role) for ``<job> == "role"`` (either side)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return None
    sides = [test.left, target.comparator]
    roles = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    others = [s for s in sides if not isinstance(s, cst.SimpleString)]
    if len(roles) != 1 or len(others) != 1 or roles[0] not in ROLES:
        return None
    return C.code_of(others[0]), roles[0]


def _job_arg(call: cst.Call) -> tuple[int, cst.Arg] | None:
    """Position in ``call.args`` and the argument giving ``job_name`` (second positional or keyword)."""
    for k, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == "job_name":
            return k, a
    positional = [k for k, a in enumerate(call.args) if a.keyword is None and not a.star]
    if len(positional) >= 2:
        return positional[1], call.args[positional[1]]
    return None


class _Branch:
    """The server statement of one role branch, if the branch has the shape."""

    def __init__(self, body: cst.BaseSuite, role: str, is_server):
        self.ok = False
        statements = list(C.body_of(body))
        for k, statement in enumerate(statements):
            targets, value, _ = C.assignment(statement)
            if len(targets) == 1 and isinstance(value, cst.Call) and is_server(value):
                job = _job_arg(value)
                if job is None or not isinstance(job[1].value, cst.SimpleString):
                    return
                if job[1].value.evaluated_value != role:
                    return
                before = statements[:k]
                # statements moved after the server must not feed it nor do work of their own
                if any(not _plain_assignment(s) for s in before):
                    return
                if C.names_used(value) & {n for s in before for n in C.assignment(s)[0]}:
                    return
                self.index, self.statement, self.target, self.call, self.job_position = (
                    k, statement, targets[0], value, job[0])
                self.ok = True
                return
            if not _plain_assignment(statement):
                return

    def signature(self) -> str:
        """The call's code with the job argument left out: equal for both roles."""
        args = [a for k, a in enumerate(self.call.args) if k != self.job_position]
        return self.target + "=" + C.code_of(self.call.with_changes(args=args))


def _plain_assignment(statement) -> bool:
    targets, value, _ = C.assignment(statement)
    return bool(targets) and value is not None and not any(True for _ in C.calls_in(value))


def _without(body: cst.BaseSuite, statement) -> cst.BaseSuite:
    kept = [s for s in C.body_of(body) if s is not statement]
    return body.with_changes(body=kept or [cst.SimpleStatementLine([cst.Pass()])])


def plan(branch: cst.If, is_server) -> tuple[cst.BaseStatement, cst.If] | None:
    """(the one server statement, the ``if`` without the per-role servers) when
    ``branch`` builds the same server in its ps and worker branches."""
    tested = _role_tested(branch.test)
    if tested is None:
        return None
    job_code, role = tested
    other = ROLES[1 - ROLES.index(role)]
    orelse = branch.orelse
    elif_other = isinstance(orelse, cst.If) and _role_tested(orelse.test) == (job_code, other) and not orelse.orelse
    if not (isinstance(orelse, cst.Else) or elif_other):
        return None
    other_body = orelse.body
    first, second = _Branch(branch.body, role, is_server), _Branch(other_body, other, is_server)
    if not (first.ok and second.ok) or first.signature() != second.signature():
        return None
    call = first.call
    job = call.args[first.job_position].with_changes(value=C.expr(job_code))
    server = first.statement.deep_replace(call, call.with_changes(
        args=[job if k == first.job_position else a for k, a in enumerate(call.args)]))
    new_orelse = orelse.with_changes(body=_without(orelse.body, second.statement))
    rewritten = branch.with_changes(body=_without(branch.body, first.statement), orelse=new_orelse)
    return server.with_changes(leading_lines=branch.leading_lines), rewritten.with_changes(leading_lines=())


class _Hoist(cst.CSTTransformer):
    def __init__(self, is_server):
        self.is_server = is_server
        self.changed = False

    def _hoisted(self, statements):
        out = []
        for statement in statements:
            planned = plan(statement, self.is_server) if isinstance(statement, cst.If) else None
            if planned is None:
                out.append(statement)
            else:
                out.extend(planned)
                self.changed = True
        return out

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._hoisted(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._hoisted(updated.body))


def hoist_role_servers(module: cst.Module, is_server) -> cst.Module:
    """``module`` with every per-role server pair built once before its branching.
    ``is_server(call)`` tells a TF1 server constructor."""
    if not any(type(node) is cst.If and plan(node, is_server) is not None for node in C.walk(module)):
        return module
    hoist = _Hoist(is_server)
    new = transform(module, hoist)  # (rebuilds only the blocks that change)
    return new if hoist.changed else module
