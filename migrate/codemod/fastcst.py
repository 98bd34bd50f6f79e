"""Walks over libcst trees that do not rebuild what they do not change.

libcst's ``node.children`` and ``node.visit(visitor)`` reconstruct every node
they pass (``_visit_and_replace_children``): a transformer pass costs about
two parses even when it changes one line, and rules run one pass each. These
walk the syntactic dataclass fields instead, in libcst's own visiting order,
and `transform` rebuilds only the nodes on the path to a change.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import textwrap
import typing
from bisect import bisect_left
from collections.abc import Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._position import CodeRange
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState

# Fields that only hold whitespace, comments and punctuation. No rule hooks
# those node types, so the walks skip them (and the code they print is kept
# as it is, since nodes are only rebuilt with their other fields changed).
_SKIPPED_FIELDS = ("whitespace", "leading_lines", "lines_after", "lpar", "rpar", "comma", "semicolon",
                   "header", "footer", "newline", "colon", "equal", "dot", "asynchronous",
                   "lbrace", "rbrace", "lbracket", "rbracket")
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
# fields libcst visits with ``visit_body_sequence``: a statement that became
# empty there (its last small statement removed) is dropped, like libcst does
_BODY_FIELDS: set[tuple[type, str]] = set()


def _visit_order(kind: type) -> list[str]:
    """Field names in the order libcst's own ``_visit_and_replace_children``
    visits them (source order: a decorator before its function, an ``IfExp``'s
    body before its test), read from that method; dataclass order if its
    source is unavailable."""
    try:
        source = textwrap.dedent(inspect.getsource(kind._visit_and_replace_children))
    except (OSError, TypeError):
        return []
    # each child is visited by a call ``visit_*(self, "<field>", value, visitor)``
    calls = [
        n for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.startswith("visit_")
        and len(n.args) > 1 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)
    ]
    order: list[str] = []
    for n in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        if n.args[1].value not in order:
            order.append(n.args[1].value)
        if n.func.id == "visit_body_sequence":
            _BODY_FIELDS.add((kind, n.args[1].value))
    return order


def _child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    return _fields_for(type(node))


def _fields_for(kind: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(kind)
    if names is None:
        syntactic = [
            f.name for f in dataclasses.fields(kind)
            if f.name != "star"  # Param.star is text; Parameters.star_arg is a parameter
            and not any(f.name.startswith(p) or f.name.endswith(p) for p in _SKIPPED_FIELDS)
        ]
        order = {name: i for i, name in enumerate(_visit_order(kind))}
        names = tuple(sorted(syntactic, key=lambda name: order.get(name, len(order))))
        _CHILD_FIELDS[kind] = names
    return names


# type -> 1 node, 2 sequence, 3 anything else (str, None, MaybeSentinel);
# ``isinstance(x, cst.CSTNode)`` is an ABC check and the walks' largest cost.
# (Every value is true: ``_KIND.get(t) or _kind(t)`` computes it once.)
_KIND: dict[type, int] = {}


def _kind(kind: type) -> int:
    found = _KIND.get(kind)
    if found is None:
        found = _KIND[kind] = (
            1 if issubclass(kind, cst.CSTNode) else 2 if issubclass(kind, (list, tuple)) else 3
        )
    return found


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Syntactic children without whitespace/punctuation, read straight from
    the node's fields. libcst's ``node.children`` and ``node.visit(visitor)``
    rebuild every node they pass; a read-only scan does not need that."""
    for name in _CHILD_FIELDS.get(type(node)) or _child_fields(node):
        value = getattr(node, name)
        kind = _KIND.get(type(value)) or _kind(type(value))
        if kind == 1:
            yield value
        elif kind == 2:
            for item in value:
                if (_KIND.get(type(item)) or _kind(type(item))) == 1:
                    yield item


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node``, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        kids = []
        for name in _CHILD_FIELDS.get(type(n)) or _child_fields(n):
            value = getattr(n, name)
            kind = _KIND.get(type(value)) or _kind(type(value))
            if kind == 1:
                kids.append(value)
            elif kind == 2:
                kids.extend(item for item in value if (_KIND.get(type(item)) or _kind(type(item))) == 1)
        if kids:
            kids.reverse()
            stack.extend(kids)


def fast_visit(node: cst.CSTNode, visitor: cst.CSTVisitor | cst.CSTTransformer) -> None:
    """``node.visit(visitor)`` for visitors that only read (a transformer's
    return values are ignored), without rebuilding the tree."""
    cls = type(visitor)
    base = cst.CSTTransformer if isinstance(visitor, cst.CSTTransformer) else cst.CSTVisitor
    if cls.on_visit is not base.on_visit or cls.on_leave is not base.on_leave:
        _fast_visit_protocol(node, visitor)
    else:
        _fast_visit(node, visitor, base is cst.CSTTransformer, cls, _step_table(cls), _hook_table(cls))


def _fast_visit_protocol(node: cst.CSTNode, visitor) -> None:
    if visitor.on_visit(node) is not False:
        for child in children(node):
            _fast_visit_protocol(child, visitor)
    if isinstance(visitor, cst.CSTTransformer):
        visitor.on_leave(node, node)
    else:
        visitor.on_leave(node)


def _fast_visit(node: cst.CSTNode, visitor, transformer: bool, cls: type, steps: dict[type, int],
                hooks: dict[type, tuple]) -> None:
    kind = type(node)
    found = hooks.get(kind)
    if found is None:
        found = hooks[kind] = _hooks(visitor, kind)
    visit, leave = found
    if visit is None or visit(visitor, node) is not False:
        for name in _CHILD_FIELDS.get(kind) or _child_fields(node):
            value = getattr(node, name)
            step = steps.get(type(value)) or _step(cls, type(value))
            if step == 1:
                _fast_visit(value, visitor, transformer, cls, steps, hooks)
            elif step == 2:
                for item in value:
                    if (steps.get(type(item)) or _step(cls, type(item))) == 1:
                        _fast_visit(item, visitor, transformer, cls, steps, hooks)
    if leave is not None:
        if transformer:
            leave(visitor, node, node)
        else:
            leave(visitor, node)


# Per visitor class, what a walk does with a field value of each type: 1 a
# node to enter (hooked, or may hold a hooked node), 2 a sequence of values,
# 3 anything else (a node that cannot hold a hooked one, str, None, ...).
_STEPS: dict[type, dict[type, int]] = {}
_HOOK_TABLES: dict[type, dict[type, tuple]] = {}


def _step_table(cls: type) -> dict[type, int]:
    table = _STEPS.get(cls)
    if table is None:
        table = _STEPS[cls] = {}
    return table


def _hook_table(cls: type) -> dict[type, tuple]:
    table = _HOOK_TABLES.get(cls)
    if table is None:
        table = _HOOK_TABLES[cls] = {}
    return table


def _step(cls: type, kind: type) -> int:
    found = _kind(kind)
    if found == 1:
        worth = _enter_table(cls).get(kind)
        if worth is None:
            worth = _must_enter(cls, kind)
        found = 1 if worth else 3
    _step_table(cls)[kind] = found
    return found


_HOOKS: dict[tuple[type, type], tuple] = {}


def _hooks(visitor: cst.CSTTransformer | cst.CSTVisitor, kind: type) -> tuple:
    """The visitor's own ``visit_<Kind>``/``leave_<Kind>``, or None where it
    only inherits libcst's do-nothing stubs (defined for every node type)."""
    key = (type(visitor), kind)
    hooks = _HOOKS.get(key)
    if hooks is None:
        hooks = _HOOKS[key] = (_own_hook(type(visitor), f"visit_{kind.__name__}"),
                               _own_hook(type(visitor), f"leave_{kind.__name__}"))
    return hooks


def _own_hook(cls: type, name: str):
    hook = getattr(cls, name, None)
    for base in (cst.CSTTransformer, cst.CSTVisitor):
        if hook is not None and hook is getattr(base, name, None):
            return None
    return hook


# --------------------------------------------------------------------------- pruning
# A walk need not enter a subtree that cannot hold a node the visitor hooks:
# a pass over statements (``leave_IndentedBlock``) skips every expression.
# What a node type can hold is read from libcst's field annotations.

_CONCRETE: dict[type, tuple[type, ...]] = {}
_HOLDS: dict[type, frozenset[type]] = {}
_REACH: dict[type, frozenset[type]] = {}


def _concrete(kind: type) -> tuple[type, ...]:
    """``kind`` and its subclasses that can be instantiated."""
    found = _CONCRETE.get(kind)
    if found is None:
        out, stack = [], [kind]
        while stack:
            k = stack.pop()
            if dataclasses.is_dataclass(k) and not inspect.isabstract(k):
                out.append(k)
            stack.extend(k.__subclasses__())
        found = _CONCRETE[kind] = tuple(dict.fromkeys(out))
    return found


def _annotation_kinds(hint) -> Iterator[type]:
    if isinstance(hint, type):
        if issubclass(hint, cst.CSTNode):
            yield from _concrete(hint)
        return
    for arg in typing.get_args(hint):
        yield from _annotation_kinds(arg)


def _holds(kind: type) -> frozenset[type]:
    """Node types the syntactic fields of ``kind`` may hold directly."""
    found = _HOLDS.get(kind)
    if found is None:
        hints = typing.get_type_hints(kind)
        names = _fields_for(kind)
        found = _HOLDS[kind] = frozenset(k for name in names for k in _annotation_kinds(hints.get(name)))
    return found


def _reach(kind: type) -> frozenset[type]:
    """Node types that may occur anywhere below a ``kind`` node."""
    found = _REACH.get(kind)
    if found is None:
        seen: set[type] = set()
        stack = list(_holds(kind))
        while stack:
            k = stack.pop()
            if k not in seen:
                seen.add(k)
                stack.extend(_holds(k) - seen)
        found = _REACH[kind] = frozenset(seen)
    return found


def prepare_tables() -> None:
    """Fill the tables of every libcst node type (the fields a walk reads and
    in which order, what a node may hold) that the walks otherwise fill as
    they meet each type: reading them from libcst's sources and annotations
    costs about as much as migrating a file. A process that forks workers
    calls this first, so that they share the tables."""
    for kind in _concrete(cst.CSTNode):
        _fields_for(kind)
        try:
            _reach(kind)
        except (NameError, TypeError):  # annotations that cannot be read (see _must_enter)
            pass


_HOOKED: dict[type, frozenset[type]] = {}
_ENTER: dict[type, dict[type, bool]] = {}


def _enter_table(cls: type) -> dict[type, bool]:
    """Per visitor class: node type -> whether a walk must enter such a node
    (it is hooked, or may hold a hooked node)."""
    table = _ENTER.get(cls)
    if table is None:
        table = _ENTER[cls] = {}
        _HOOKED[cls] = frozenset(
            k for k in _concrete(cst.CSTNode)
            if _own_hook(cls, f"visit_{k.__name__}") or _own_hook(cls, f"leave_{k.__name__}")
        )
    return table


def _must_enter(cls: type, kind: type) -> bool:
    table = _enter_table(cls)
    hooked = _HOOKED[cls]
    try:
        found = kind in hooked or not hooked.isdisjoint(_reach(kind))
    except (NameError, TypeError):  # annotations that cannot be read: enter it
        found = True
    table[kind] = found
    return found


def transform(node: cst.CSTNode, visitor: cst.CSTTransformer):
    """``node.visit(visitor)`` for plain transformers (``visit_*``/``leave_*``
    hooks on syntactic node types): the same hooks in the same order, but a
    node is rebuilt only when one of its children was replaced, an unchanged
    tree comes back as the very same object (also where a hook handed back a
    copy holding the very same children), and subtrees that cannot hold a
    hooked node are not entered. Caches keyed by node (walks, code, names)
    then keep serving the parts of the tree a rule did not change."""
    cls = type(visitor)
    if cls.on_visit is not cst.CSTTransformer.on_visit or cls.on_leave is not cst.CSTTransformer.on_leave:
        return node.visit(visitor)  # custom dispatch: keep libcst's exact protocol
    return _transform(node, visitor, cls, _step_table(cls), _hook_table(cls))


def _transform(node: cst.CSTNode, visitor: cst.CSTTransformer, cls: type, steps: dict[type, int],
               hooks: dict[type, tuple]):
    kind = type(node)
    found = hooks.get(kind)
    if found is None:
        found = hooks[kind] = _hooks(visitor, kind)
    visit, leave = found
    updated = node
    if visit is None or visit(visitor, node) is not False:
        changes = None
        for name in _CHILD_FIELDS.get(kind) or _child_fields(node):
            value = getattr(node, name)
            step = steps.get(type(value)) or _step(cls, type(value))
            if step == 1:
                new = _transform(value, visitor, cls, steps, hooks)
                if new is not value:
                    if isinstance(new, cst.RemovalSentinel):
                        new = _removed_field(node, name)
                    elif isinstance(new, cst.FlattenSentinel):
                        raise TypeError(f"{kind.__name__}.{name} cannot hold several nodes")
                    changes = changes or {}
                    changes[name] = new
            elif step == 2 and value:
                items = None
                body = (kind, name) in _BODY_FIELDS
                for i, item in enumerate(value):
                    new = item
                    if (steps.get(type(item)) or _step(cls, type(item))) == 1:
                        new = _transform(item, visitor, cls, steps, hooks)
                    if new is not item and items is None:
                        items = list(value[:i])
                    if items is None:
                        continue
                    if isinstance(new, cst.RemovalSentinel):
                        continue
                    for one in new.nodes if isinstance(new, cst.FlattenSentinel) else (new,):
                        if not (body and one is not item and one._is_removable() and not item._is_removable()):
                            items.append(one)
                if items is not None:
                    changes = changes or {}
                    changes[name] = tuple(items)
        if changes:
            updated = node.with_changes(**changes)
    if leave is not None:
        new = leave(visitor, node, updated)
        if new is not updated and type(new) is kind and _same_fields(new, updated):
            # a hook that rebuilt the node unchanged (``updated.with_changes(body=...)`` with
            # the same statements): keep it, so the tree around it is not rebuilt either
            return updated
        return new
    return updated


# type -> every dataclass field name (whitespace included)
_ALL_FIELDS: dict[type, tuple[str, ...]] = {}


def _same_fields(new: cst.CSTNode, old: cst.CSTNode) -> bool:
    """Whether ``new`` holds the very same values as ``old`` (sequences item by
    item, strings by value): then it is ``old`` in all but identity."""
    names = _ALL_FIELDS.get(type(old))
    if names is None:
        names = _ALL_FIELDS[type(old)] = tuple(f.name for f in dataclasses.fields(old))
    for name in names:
        a, b = getattr(new, name), getattr(old, name)
        if a is b:
            continue
        kind = type(a)
        if kind is str and type(b) is str:
            if a != b:
                return False
        elif (kind is list or kind is tuple) and (type(b) is list or type(b) is tuple):
            if len(a) != len(b) or any(x is not y for x, y in zip(a, b)):
                return False
        else:
            return False
    return True


def _removed_field(node: cst.CSTNode, name: str):
    # what libcst puts in a single-node field whose child was removed
    default = next(f.default for f in dataclasses.fields(node) if f.name == name)
    if default is None or default is cst.MaybeSentinel.DEFAULT:
        return default
    raise TypeError(f"{type(node).__name__}.{name} is required and cannot be removed")


# --------------------------------------------------------------------------- code


class _NoPosition:
    """A context manager that does nothing (and lets exceptions through)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


_NO_POSITION = _NoPosition()


class PlainCodegenState(CodegenState):
    """libcst's code generation state, without the position recording it
    never does: ``record_syntactic_position`` is a generator-based context
    manager entered for most nodes, and making and running one generator per
    node cost about a third of generating a module's code."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> _NoPosition:
        return _NO_POSITION


# --------------------------------------------------------------------------- caches
# libcst nodes are immutable: a node's code, and the nodes under it, never
# change. Entries keep their node, so its id is not reused while they live.

_EMPTY_MODULE = cst.Module(body=[])
_CODE: dict[int, tuple[cst.CSTNode, str]] = {}
_MODULE_CODE: list[tuple[cst.Module, str]] = []


# id -> node of the statements rules keep for the whole process (their cached
# copies of fixed code, inserted in many files): their code and walks outlive clear_caches
_KEPT: dict[int, cst.CSTNode] = {}


def keep_code(statement: cst.BaseStatement) -> cst.BaseStatement:
    """``statement``, marked as one a rule keeps for the whole process (a
    cached copy of fixed code it inserts in every file that needs it): its
    generated code and its walk are kept from one file to the next. Returns it."""
    if len(_KEPT) >= 1024:
        _KEPT.clear()
    _KEPT[id(statement)] = statement
    return statement


_NODE_CACHES: list[dict] = []


def node_cache() -> dict:
    """A new dict for an analysis to keep its results by node, as ``id(node)
    -> (node, result)`` (check ``found[0] is node``: ids are reused once a
    node is gone); emptied with the other caches after each source."""
    cache: dict = {}
    _NODE_CACHES.append(cache)
    return cache


def clear_caches() -> None:
    """Forget the nodes of the trees seen so far (the engine calls this after
    each source: nothing is kept alive from one file to the next, but the
    code of statements marked by :func:`keep_code`)."""
    for cache in _NODE_CACHES:
        cache.clear()
    _CODE.clear()
    _MODULE_CODE.clear()
    kept = {key: found for key, found in _STATEMENT_CODE.items() if _KEPT.get(key[0]) is found[0]}
    _STATEMENT_CODE.clear()
    _STATEMENT_CODE.update(kept)
    _MODULE_NODES.clear()
    kept_walks = {key: found for key, found in _STATEMENT_WALKS.items() if _KEPT.get(key) is found[0]}
    _STATEMENT_WALKS.clear()
    _STATEMENT_WALKS.update(kept_walks)


def code_of(node: cst.CSTNode) -> str:
    """``cst.Module(body=[]).code_for_node(node)``, generated once per node."""
    found = _CODE.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    # (``_EMPTY_MODULE.code_for_node(node)``)
    state = PlainCodegenState(default_indent=_EMPTY_MODULE.default_indent,
                              default_newline=_EMPTY_MODULE.default_newline)
    node._codegen(state)
    code = "".join(state.tokens)
    if len(_CODE) >= 4096:
        _CODE.clear()
    _CODE[id(node)] = (node, code)
    return code


def module_code(module: cst.Module) -> str:
    """``module.code``, generated once per module (the last few), and once per
    top-level statement: the modules rules hand on share most statements
    (the engine's imports added to a module another pass generated, say)."""
    for known, code in _MODULE_CODE:
        if known is module:
            return code
    code = _module_code(module)
    _MODULE_CODE.insert(0, (module, code))
    del _MODULE_CODE[4:]
    return code


# (id(statement), indent, newline) -> (statement, its tokens joined, its last token)
_STATEMENT_CODE: dict[tuple[int, str, str], tuple[cst.CSTNode, str, str]] = {}


def _module_code(module: cst.Module) -> str:
    """``Module._codegen_impl``, statement by statement: a top-level statement's
    code depends only on it and the module's indentation and newline."""
    indent, newline = module.default_indent, module.default_newline
    parts: list[str] = []
    last = None  # the last token generated
    state = PlainCodegenState(default_indent=indent, default_newline=newline)
    for h in module.header:
        h._codegen(state)
    if state.tokens:
        parts.append("".join(state.tokens))
        last = state.tokens[-1]
    for statement in module.body:
        key = (id(statement), indent, newline)
        found = _STATEMENT_CODE.get(key)
        if found is None or found[0] is not statement:
            state = PlainCodegenState(default_indent=indent, default_newline=newline)
            statement._codegen(state)
            found = (statement, "".join(state.tokens), state.tokens[-1] if state.tokens else None)
            _STATEMENT_CODE[key] = found
        if found[1] or found[2] is not None:
            parts.append(found[1])
            if found[2] is not None:
                last = found[2]
    state = PlainCodegenState(default_indent=indent, default_newline=newline)
    for f in module.footer:
        f._codegen(state)
    if state.tokens:
        parts.append("".join(state.tokens))
        last = state.tokens[-1]
    if module.has_trailing_newline:
        if last is None:
            parts.append(newline)
    elif last is not None:
        # pop_trailing_newline: the last token goes
        code = "".join(parts)
        return code[: len(code) - len(last)]
    return "".join(parts)


# Whole-module walks, newest first: [module, its nodes in walk order, the
# size of each node's subtree, id(node) -> index (made on the first walk of a
# node below the module), indexes of its calls (made on the first call
# search)]. The walk of any node of such a module is a slice of it. A module
# a rule hands on shares most statements with the one it got: the walks of
# top-level statements are kept and joined.
_MODULE_NODES: list[list] = []
_STATEMENT_WALKS: dict[int, tuple[cst.CSTNode, list[cst.CSTNode], list[int]]] = {}


# type -> whether it is a statement (``isinstance`` on libcst's ABCs is slow)
_IS_STATEMENT: dict[type, bool] = {}


def _is_statement(kind: type) -> bool:
    found = _IS_STATEMENT.get(kind)
    if found is None:
        found = _IS_STATEMENT[kind] = issubclass(kind, cst.BaseStatement)
    return found


def _subtree(node: cst.CSTNode) -> tuple[list[cst.CSTNode], list[int]]:
    """``list(walk(node))`` and the size of each of those nodes' subtrees.
    Kept for every statement: a rule that changes one line of a function
    rebuilds the statements on the path to it only, so the walk of the new
    function splices the kept walks of all its other statements."""
    found = _STATEMENT_WALKS.get(id(node))
    if found is not None and found[0] is node:
        return found[1], found[2]
    nodes: list[cst.CSTNode] = []
    sizes: list[int] = []
    stack: list = [node]
    append, push, pop = nodes.append, stack.append, stack.pop
    child_fields, kinds = _CHILD_FIELDS, _KIND
    while stack:
        n = pop()
        if type(n) is int:  # the end of the subtree of nodes[n]
            sizes[n] = len(nodes) - n
            continue
        if n is not node and (_IS_STATEMENT.get(type(n)) or _is_statement(type(n))):
            child_nodes, child_sizes = _subtree(n)
            nodes += child_nodes
            sizes += child_sizes
            continue
        i = len(nodes)
        append(n)
        sizes.append(1)
        kids = []
        for name in child_fields.get(type(n)) or _child_fields(n):
            value = getattr(n, name)
            kind = kinds.get(type(value)) or _kind(type(value))
            if kind == 1:
                kids.append(value)
            elif kind == 2:
                kids.extend(item for item in value if (kinds.get(type(item)) or _kind(type(item))) == 1)
        if kids:
            push(i)
            kids.reverse()
            stack.extend(kids)
    if len(_STATEMENT_WALKS) >= 8192:
        _STATEMENT_WALKS.clear()
    _STATEMENT_WALKS[id(node)] = (node, nodes, sizes)
    return nodes, sizes


def _index(module: cst.Module) -> list:
    for entry in _MODULE_NODES:
        if entry[0] is module:
            return entry
    nodes: list[cst.CSTNode] = [module]
    sizes: list[int] = [0]
    for child in children(module):
        child_nodes, child_sizes = _subtree(child)
        nodes += child_nodes
        sizes += child_sizes
    sizes[0] = len(nodes)
    entry = [module, nodes, sizes, None, None]
    _MODULE_NODES.insert(0, entry)
    del _MODULE_NODES[4:]
    return entry


def _span(node: cst.CSTNode):
    """(module entry, start, end) of a node of an indexed module, else None."""
    key = id(node)
    for entry in _MODULE_NODES:
        starts = entry[3]
        if starts is None:
            nodes = entry[1]
            # a node in two places maps to one of them: its subtree is the same
            starts = entry[3] = dict(zip(map(id, nodes), range(len(nodes))))
        start = starts.get(key)
        if start is not None and entry[1][start] is node:
            return entry, start, start + entry[2][start]
    return None


def _calls(entry: list) -> list[int]:
    if entry[4] is None:
        call = cst.Call
        entry[4] = [i for i, n in enumerate(entry[1]) if type(n) is call]
    return entry[4]


def cached_walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``walk(node)``; a module's walk is kept (several rules scan the same
    immutable module) and the walk of a node of such a module is a slice of it."""
    if type(node) is cst.Module:
        return iter(_index(node)[1])
    found = _span(node)
    if found is not None:
        entry, start, end = found
        return iter(entry[1][start:end])
    return walk(node)


def walk_in_functions(module: cst.Module) -> Iterator[tuple[cst.CSTNode, cst.FunctionDef | None]]:
    """(node, the innermost function definition enclosing it, else None) for
    every node of ``cached_walk(module)``, in its order (a function's own
    node is paired with the function around it)."""
    entry = _index(module)
    nodes, sizes = entry[1], entry[2]
    functions: list[tuple[int, cst.FunctionDef]] = []  # (end of its subtree, function)
    function_def = cst.FunctionDef
    for i, node in enumerate(nodes):
        while functions and functions[-1][0] <= i:
            functions.pop()
        yield node, functions[-1][1] if functions else None
        if type(node) is function_def:
            functions.append((i + sizes[i], node))


def cached_calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The ``cst.Call`` nodes of ``cached_walk(node)``, in its order."""
    if type(node) is cst.Module:
        entry = _index(node)
        nodes = entry[1]
        return iter([nodes[i] for i in _calls(entry)])
    found = _span(node)
    if found is not None:
        entry, start, end = found
        nodes, calls = entry[1], _calls(entry)
        return iter([nodes[i] for i in calls[bisect_left(calls, start):bisect_left(calls, end)]])
    return (n for n in walk(node) if type(n) is cst.Call)


# --------------------------------------------------------------------------- positions


class _PositionFound(Exception):
    pass


class _PositionOfNode(PositionProvidingCodegenState):
    """libcst's position-tracking code generation for ``target`` only: the
    code before it is generated plainly (positions untracked) and its lines
    counted when ``target`` starts; generation stops once ``target``'s own
    position is recorded."""

    def add_indent_tokens(self) -> None:
        if self.tracking:
            super().add_indent_tokens()
        else:
            self.tokens.extend(self.indent_tokens)

    def add_token(self, value: str) -> None:
        if self.tracking:
            super().add_token(value)
        else:
            self.tokens.append(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node is self.target:
            # libcst counts lines token by token; a token never ends between "\r" and "\n"
            segments = NEWLINE_RE.split("".join(self.tokens))
            self.line, self.column = len(segments), len(segments[-1])
            self.tracking = True
        if self.tracking:
            super().before_codegen(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if self.tracking:
            super().after_codegen(node)
            if node is self.target:
                raise _PositionFound

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        if self.tracking:
            return super().record_syntactic_position(node, start_node=start_node, end_node=end_node)
        return contextlib.nullcontext()


class _Computed:
    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


def statement_position(module: cst.Module, node: cst.CSTNode) -> CodeRange | None:
    """``MetadataWrapper(module).resolve(PositionProvider).get(node)`` computed
    from the top-level statement holding ``node`` only: that statement's code
    does not depend on the others (:func:`module_code` relies on it too), so
    the lines before it are counted in their generated text and only the
    statement is generated again, up to ``node``. Raises LookupError when
    ``node`` is not found exactly once under the module's statements (the
    caller then resolves the whole module)."""
    holder = None
    for statement in module.body:
        nodes, _ = _subtree(statement)
        hits = sum(1 for n in nodes if n is node)
        if hits and (holder is not None or hits > 1):
            raise LookupError("node found more than once")
        if hits:
            holder = statement
    if holder is None:
        raise LookupError("node not under a statement")
    module_code(module)  # every statement's code is now in _STATEMENT_CODE
    indent, newline = module.default_indent, module.default_newline
    state = _PositionOfNode(default_indent=indent, default_newline=newline, provider=_Computed())
    state.target, state.tracking = node, False
    for h in module.header:
        h._codegen(state)
    for statement in module.body:
        if statement is holder:
            break
        state.tokens.append(_STATEMENT_CODE[(id(statement), indent, newline)][1])
    try:
        holder._codegen(state)
    except _PositionFound:
        pass
    return state.provider._computed.get(node)
