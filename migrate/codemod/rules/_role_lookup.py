"""A chief for programs that find their role by looking their own address up.

Some TF1 programs run the same command on every machine and find the task
they are by looking an option (this machine's address) up in their own host
lists:

    ps_hosts = ["10.0.0.1"]
    worker_hosts = ["10.0.0.2", "10.0.0.3"]
    ps_list = ["{}:{}".format(h, p) for h, p in zip(ps_hosts, ps_ports)]
    ...
    if FLAGS.ip in ps_hosts:
        job_name = "ps"
        task_index = ps_hosts.index(FLAGS.ip)
    elif FLAGS.ip in worker_hosts:
        job_name = "worker"
        task_index = worker_hosts.index(FLAGS.ip)

ParameterServerStrategy needs one more process, the chief (coordinator).
TFM201 gives the cluster a literal chief address on the first worker's
machine (next port); an address lookup cannot tell that process from worker
0, so the program gets a boolean option naming it, tested before the lookup:

    flags.DEFINE_boolean("chief", False, "...")
    if FLAGS.chief:
        job_name = "chief"
        task_index = 0
    elif FLAGS.ip in ps_hosts:
        ...

Analysis (:func:`find_role_lookup`) is apart from the rewrite
(:func:`add_chief_switch`); both work on the module as it stands.
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _cst as C

CHIEF_OPTION = "chief"
_HELP = "Run this process as the chief (coordinator) task, on the chief entry's host"


@dataclass(frozen=True)
class RoleLookup:
    owner: str  # the options object tested (`FLAGS`, `args`)
    option: str  # the option looked up (`ip`)
    job: str  # the name bound to the job name
    index: str  # the name bound to the task index


def _lookup_test(test: cst.BaseExpression) -> tuple[str, str] | None:
    """``FLAGS.ip in hosts`` -> ("FLAGS", "ip")."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.In)
            and isinstance(test.comparisons[0].comparator, cst.Name)):
        return None
    left = test.left
    if isinstance(left, cst.Attribute) and isinstance(left.value, cst.Name):
        return left.value.value, left.attr.value
    return "", C.code_of(left)  # `socket.gethostname() in hosts`: no option of the program's own


def _assigned_role(body: cst.BaseSuite, job: str) -> str | None:
    for statement in C.body_of(body):
        names, value, _ = C.assignment(statement)
        if job not in names:
            continue
        if len(names) > 1 and isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(names):
            value = value.elements[names.index(job)].value  # `job, index = "ps", hosts.index(...)`
        if isinstance(value, cst.SimpleString):
            return value.evaluated_value
    return None


def _chain_heads(module: cst.Module) -> list[cst.If]:
    """Every ``if`` that is not the ``elif`` of another."""
    inner = {id(node.orelse) for node in C.walk(module) if isinstance(node, cst.If) and isinstance(node.orelse, cst.If)}
    return [node for node in C.walk(module) if isinstance(node, cst.If) and id(node) not in inner]


def find_role_lookup(module: cst.Module, job: str, index: str) -> tuple[cst.If, RoleLookup] | None:
    """The ``if``/``elif`` chain giving ``job`` (and ``index``) the roles ps and
    worker by looking one option up in host lists, with no chief branch."""
    for head in _chain_heads(module):
        branch: cst.BaseSuite | cst.If | cst.Else | None = head
        tested, roles = set(), set()
        while isinstance(branch, cst.If):
            found = _lookup_test(branch.test)
            role = _assigned_role(branch.body, job)
            if found is None or role is None:
                break
            tested.add(found)
            roles.add(role)
            branch = branch.orelse
        if len(tested) == 1 and {"ps", "worker"} <= roles and not roles & {"chief", "master"}:
            owner, option = tested.pop()
            return head, RoleLookup(owner, option, job, index)
    return None


def _defines_option(module: cst.Module, name: str) -> bool:
    for call in C.calls_in(module):
        first = C.arg(call, 0, None)
        if isinstance(first, cst.SimpleString) and isinstance(first.evaluated_value, str) and \
                first.evaluated_value.lstrip("-").replace("-", "_") == name:
            return True
    return False


class _DefineSwitch(cst.CSTTransformer):
    """``<owner>.DEFINE_boolean("chief", False, ...)`` right after the
    definition of the looked-up option (absl / tf.app.flags), or
    ``parser.add_argument("--chief", action="store_true", ...)`` (argparse)."""

    def __init__(self, option: str):
        super().__init__()
        self.option = option
        self.done = False

    def _rewrite(self, body):
        out = []
        for statement in body:
            out.append(statement)
            call = C.single_expr(statement)
            if self.done or not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
                continue
            first = C.arg(call, 0, None)
            if not isinstance(first, cst.SimpleString):
                continue
            owner, method, text = C.code_of(call.func.value), call.func.attr.value, first.evaluated_value
            if method.startswith("DEFINE_") and text == self.option:
                out.append(C.stmt(f'{owner}.DEFINE_boolean("{CHIEF_OPTION}", False, "{_HELP}")\n'))
                self.done = True
            elif method == "add_argument" and text.lstrip("-").replace("-", "_") == self.option:
                out.append(C.stmt(f'{owner}.add_argument("--{CHIEF_OPTION}", action="store_true", help="{_HELP}")\n'))
                self.done = True
        return out

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._rewrite(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._rewrite(updated.body))


class _PrependBranch(cst.CSTTransformer):
    def __init__(self, head: cst.If, branch: cst.If):
        super().__init__()
        self.head, self.branch = head, branch

    def leave_If(self, original, updated):
        if original is self.head:
            return self.branch.with_changes(orelse=updated.with_changes(leading_lines=()), leading_lines=updated.leading_lines)
        return updated


def add_chief_switch(module: cst.Module, lookup: tuple[cst.If, RoleLookup]) -> cst.Module | None:
    """``module`` with the chief option defined and tested first (None: the
    option is defined nowhere this can add to, or ``chief`` is taken)."""
    found = lookup[1]
    if not found.owner or _defines_option(module, CHIEF_OPTION):
        return None
    define = _DefineSwitch(found.option)
    defined = module.visit(define)
    if not define.done:
        return None
    head_now = find_role_lookup(defined, found.job, found.index)
    if head_now is None:
        return None
    indent = head_now[0].body
    paired = any(C.assignment(st)[0] == [found.job, found.index] for st in C.body_of(head_now[0].body))
    assign = (f"{found.job}, {found.index} = \"chief\", 0\n" if paired  # as the lookup's branches bind them
              else f"{found.job} = \"chief\"\n    {found.index} = 0\n")
    code = f"if {found.owner}.{CHIEF_OPTION}:\n    {assign}"
    branch = C.stmt(code)
    if isinstance(indent, cst.IndentedBlock) and indent.indent is not None:
        branch = branch.with_changes(body=branch.body.with_changes(indent=indent.indent))
    return defined.visit(_PrependBranch(head_now[0], branch))


# --------------------------------------------------------------------------- host lists built by a comprehension


def comprehended_hosts(code: str, lists: dict[str, list[str]]) -> list[str] | None:
    """The addresses ``["{}:{}".format(h, p) for h, p in zip(hosts, ports)]``
    (or ``"%s:%s" % (h, p)``, an f-string, ``h + ":" + p``; over one list with
    a literal port too) builds from literal lists (``lists``: name -> its
    literal strings); None for anything else. Nothing is executed but string
    formatting of those literals."""
    try:
        tree = ast.parse(code, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.ListComp) or len(tree.generators) != 1:
        return None
    gen = tree.generators[0]
    if gen.ifs or gen.is_async:
        return None
    targets = [gen.target] if isinstance(gen.target, ast.Name) else list(getattr(gen.target, "elts", []))
    if not targets or not all(isinstance(t, ast.Name) for t in targets):
        return None
    names = [t.id for t in targets]
    if isinstance(gen.iter, ast.Name) and gen.iter.id in lists and len(names) == 1:
        rows = [(v,) for v in lists[gen.iter.id]]
    elif (isinstance(gen.iter, ast.Call) and isinstance(gen.iter.func, ast.Name) and gen.iter.func.id == "zip"
          and not gen.iter.keywords and len(gen.iter.args) == len(names)
          and all(isinstance(a, ast.Name) and a.id in lists for a in gen.iter.args)):
        rows = list(zip(*(lists[a.id] for a in gen.iter.args)))
    else:
        return None
    out = []
    for row in rows:
        value = _format(tree.elt, dict(zip(names, row)))
        if not isinstance(value, str):
            return None
        out.append(value)
    return out


def _plain_fields(template: str) -> bool:
    """Only positional fields (``{}``, ``{0}``): no attribute or item lookups."""
    try:
        return all(field is None or field == "" or field.isdigit()
                   for _, field, _, _ in string.Formatter().parse(template))
    except ValueError:
        return False


def _format(node: ast.AST, env: dict[str, str]):
    """String formatting of literals and bound names only; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Tuple):
        items = [_format(e, env) for e in node.elts]
        return None if any(i is None for i in items) else tuple(items)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        left, right = _format(node.left, env), _format(node.right, env)
        if not isinstance(left, str) or right is None:
            return None
        try:
            return left % right if isinstance(node.op, ast.Mod) else (left + right if isinstance(right, str) else None)
        except (TypeError, ValueError):
            return None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
            and not node.keywords):
        args = [_format(a, env) for a in node.args]
        if any(a is None or isinstance(a, tuple) for a in args) or not _plain_fields(node.func.value.value):
            return None
        try:
            return node.func.value.value.format(*args)
        except (IndexError, KeyError, ValueError):
            return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
        value = _format(node.args[0], env)
        return None if value is None or isinstance(value, tuple) else str(value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue) and part.format_spec is None and part.conversion == -1:
                value = _format(part.value, env)
                if value is None or isinstance(value, tuple):
                    return None
                parts.append(str(value))
            else:
                return None
        return "".join(parts)
    return None
