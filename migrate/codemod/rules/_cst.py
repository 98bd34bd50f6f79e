"""Small libcst helpers shared by the rules (no metadata providers: speed)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

import libcst as cst

# children, fast_visit and code_of are re-exported for the rules
from migrate.codemod.fastcst import cached_calls, cached_walk, children, code_of, fast_visit  # noqa: F401


# Rules spell new code as text. libcst nodes are immutable, so a snippet
# parsed once can be reused (parsing even one line costs most of a millisecond).
@functools.lru_cache(maxsize=2048)
def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


@functools.lru_cache(maxsize=2048)
def stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def stmts(code: str) -> list[cst.BaseStatement]:
    return list(_stmts(code))


@functools.lru_cache(maxsize=2048)
def _stmts(code: str) -> tuple[cst.BaseStatement, ...]:
    module = cst.parse_module(code)
    body = list(module.body)
    if body and module.header:
        # leading comments parse into the module header: keep them on the statement
        body[0] = body[0].with_changes(leading_lines=[*module.header, *body[0].leading_lines])
    return tuple(body)


def names_used(node: cst.CSTNode) -> set[str]:
    """Names a node reads: `a` of `a.b.c`, not keyword names of calls."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        kind = type(n)  # exact types: isinstance on libcst's (ABC) classes is slow
        if kind is cst.Name:
            out.add(n.value)
        elif kind is cst.Attribute or kind is cst.Arg:
            stack.append(n.value)
        else:
            stack.extend(children(n))
    return out


def target_names(target: cst.BaseExpression) -> list[str]:
    """Names an assignment target binds (``a``, ``a, (b, *c)``; not ``x.a``, ``x[a]``)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in target.elements:
            out.extend(target_names(el.value))
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


def assignment(statement: cst.CSTNode) -> tuple[list[str], cst.BaseExpression | None, cst.Assign | None]:
    """(target names, value, Assign node) for `a = b = value` simple statements."""
    # exact types: isinstance on libcst's (ABC) classes is slow, and this runs on every node of many walks
    if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1:
        small = statement.body[0]
        if type(small) is cst.Assign:
            names: list[str] = []
            for t in small.targets:
                names.extend(target_names(t.target))
            return names, small.value, small
        if type(small) is cst.AnnAssign and small.value is not None:
            return target_names(small.target), small.value, None
    return [], None, None


def single_expr(statement: cst.CSTNode) -> cst.BaseExpression | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, cst.Expr):
            return small.value
    return None


def arg(call: cst.Call, pos: int | None, keyword: str | None) -> cst.BaseExpression | None:
    """A call argument by keyword, else by position (positional args only)."""
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
    if pos is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if pos < len(positional):
            return positional[pos].value
    return None


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` in source order. Whole-module walks are
    cached: several rules scan the same (immutable) module."""
    return cached_walk(node)


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    return cached_calls(node)


def body_of(block: cst.BaseSuite) -> Sequence[cst.BaseStatement]:
    if isinstance(block, cst.IndentedBlock):
        return block.body
    return [cst.SimpleStatementLine(body=list(block.body))]


def without_first_branch(branch: cst.If) -> list[cst.BaseStatement]:
    """What stands for ``if a: ... elif b: ... else: ...`` once its first branch
    goes: the ``elif`` as an ``if``, the ``else`` body, or nothing."""
    orelse = branch.orelse
    if orelse is None:
        return []
    if isinstance(orelse, cst.If):
        return [cst.If(test=orelse.test, body=orelse.body, orelse=orelse.orelse, leading_lines=branch.leading_lines)]
    return list(body_of(orelse.body))


def indented(statements: Iterable[cst.BaseStatement], like: cst.BaseSuite | None = None) -> cst.IndentedBlock:
    body = list(statements) or [cst.SimpleStatementLine([cst.Pass()])]
    if isinstance(like, cst.IndentedBlock):
        return like.with_changes(body=body)
    return cst.IndentedBlock(body=body)


def all_names(module: cst.Module) -> set[str]:
    """Names the module binds or reads (not attribute names, not keywords)."""
    # exact type checks in the whole-module loops: isinstance on libcst's
    # (ABC) node classes is several times slower, and nothing subclasses them
    names: list[cst.Name] = []
    skip: set[int] = set()
    for n in walk(module):
        kind = type(n)
        if kind is cst.Name:
            names.append(n)
        elif kind is cst.Attribute:
            skip.add(id(n.attr))
        elif kind is cst.Arg and n.keyword is not None:
            skip.add(id(n.keyword))
    return {n.value for n in names if id(n) not in skip}


def fresh(name: str, taken: set[str]) -> str:
    if name not in taken:
        taken.add(name)
        return name
    i = 2
    while f"{name}_{i}" in taken:
        i += 1
    taken.add(f"{name}_{i}")
    return f"{name}_{i}"


def strip_blank_lines(lines):
    """Leading lines without the blank ones before the first comment."""
    lines = list(lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return lines


def tuple_code(names) -> str:
    """Source of a tuple of names: `(a,)`, `(a, b)`."""
    return f"({names[0]},)" if len(names) == 1 else "(" + ", ".join(names) + ")"


class _InnerBlocks(cst.CSTTransformer):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self.fn(list(updated.body)))

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False


def map_inner_blocks(statement: cst.CSTNode, fn) -> cst.CSTNode:
    """``statement`` with ``fn(statements)`` applied to every block nested in
    it, innermost first (each block once), without entering functions or
    classes: they are scopes of their own."""
    return statement.visit(_InnerBlocks(fn))


def drop_unreferenced(module: cst.Module, names) -> cst.Module:
    """The module without its top-level functions ``names`` that nothing
    else in it refers to (by name, or by a string equal to it)."""
    names = set(names)
    kept: set[str] = set()
    for statement in module.body:
        own = isinstance(statement, cst.FunctionDef) and statement.name.value in names
        for node in walk(statement.body if own else statement):
            if type(node) is cst.Name and node.value in names:
                kept.add(node.value)
            elif type(node) is cst.SimpleString and node.evaluated_value in names:
                kept.add(node.evaluated_value)
    dropped = names - kept
    return module.with_changes(body=[st for st in module.body if not (
        isinstance(st, cst.FunctionDef) and st.name.value in dropped)])
