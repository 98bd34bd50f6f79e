"""migrate.codemod.fastcst: the engine's tree walks must behave exactly like libcst's
``node.visit`` (same hooks, same order, same result), only without rebuilding
what they do not change and without entering subtrees no hook can reach."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from migrate.codemod import fastcst
from migrate.codemod.engine import migrate_source

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted(
    [*ROOT.glob("migrate/**/*.py"), *ROOT.glob("legacy_reference/*.py"), *ROOT.glob("tests/**/*.py"),
     *Path(cst.__file__).parent.glob("_nodes/*.py")]
)
LEGACY = sorted([*ROOT.glob("legacy_reference/*.py"), *ROOT.glob("tests/fixtures/realistic/*.py")])


class _Recorder(cst.CSTTransformer):
    def __init__(self):
        super().__init__()
        self.seen: list[int] = []

    def on_visit(self, node):
        self.seen.append(id(node))
        return False


def test_children_come_in_libcst_visiting_order():
    checked = 0
    for path in CORPUS:
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except cst.ParserSyntaxError:  # deliberately broken test data
            continue
        for node in fastcst.walk(module):
            ours = [id(c) for c in fastcst.children(node)]
            recorder = _Recorder()
            node._visit_and_replace_children(recorder)
            theirs = [i for i in recorder.seen if i in set(ours)]
            assert ours == theirs, f"{type(node).__name__} in {path}"
            checked += 1
    assert checked > 10_000


class _Trace(cst.CSTTransformer):
    """Hooks on a mix of statement and expression nodes; records every call."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def visit_FunctionDef(self, node):
        self.calls.append(f"visit def {node.name.value}")

    def leave_Decorator(self, original, updated):
        self.calls.append("leave decorator")
        return updated

    def visit_IfExp(self, node):
        self.calls.append("visit ifexp")

    def leave_Name(self, original, updated):
        self.calls.append(f"name {original.value}")
        return updated.with_changes(value=updated.value.upper()) if updated.value == "x" else updated

    def leave_SimpleStatementLine(self, original, updated):
        self.calls.append("line")
        return updated


SAMPLE = '''
@deco(x)
def f(a=x if y else z, *, b: x = {x: [x for x in y]}):
    return x[1:2], f"{x!r:>{y}}", lambda: x
class C(B, metaclass=x):
    pass
'''


def test_transform_matches_libcst_visit_hook_for_hook():
    module = cst.parse_module(SAMPLE)
    theirs, ours = _Trace(), _Trace()
    expected = module.visit(theirs)
    got = fastcst.transform(module, ours)
    assert ours.calls == theirs.calls
    assert got.code == expected.code
    assert "X if y" in got.code


def test_unchanged_tree_comes_back_as_the_same_object():
    module = cst.parse_module("import os\nprint(os.path.join('a', y))\n")
    assert fastcst.transform(module, _Trace()) is module
    changed = fastcst.transform(cst.parse_module("import os\nz = x + 1\n"), _Trace())
    assert changed.code == "import os\nz = X + 1\n"


class _RebuildBlocks(cst.CSTTransformer):
    """Hands back a copy of every block, as rules do (``updated.with_changes(body=...)``),
    and renames ``x`` to ``X``."""

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=list(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=list(updated.body))

    def leave_Name(self, original, updated):
        return updated.with_changes(value="X") if updated.value == "x" else updated


def test_a_copy_holding_the_same_children_keeps_the_node():
    module = cst.parse_module("def f():\n    return y\n\n\nclass C:\n    def g(self):\n        return z\n")
    assert fastcst.transform(module, _RebuildBlocks()) is module
    changed = cst.parse_module("def f():\n    return x\n\n\ndef g():\n    return z\n")
    got = fastcst.transform(changed, _RebuildBlocks())
    assert got.code == changed.visit(_RebuildBlocks()).code == "def f():\n    return X\n\n\ndef g():\n    return z\n"
    assert got.body[0] is not changed.body[0]  # rebuilt around the change
    assert got.body[1] is changed.body[1]  # the other function is kept, not a copy


def test_prepared_tables_are_the_tables_walks_fill():
    fastcst.prepare_tables()
    for kind in (cst.FunctionDef, cst.Call, cst.IndentedBlock, cst.Param):
        fields = fastcst._CHILD_FIELDS.pop(kind)
        assert fastcst._fields_for(kind) == fields


class _DropPrints(cst.CSTTransformer):
    def leave_Expr(self, original, updated):
        if isinstance(updated.value, cst.Call) and getattr(updated.value.func, "value", None) == "print":
            return cst.RemovalSentinel.REMOVE
        return updated

    def leave_Assign(self, original, updated):
        return cst.FlattenSentinel([updated, cst.parse_statement("log()").body[0]])


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    print(1)\n    y = 2\n",
        "def f():\n    print(1)\n",  # emptied body: libcst drops the line, codegen writes pass
        "if x: print(1); y = 2\n",
        "print(1); print(2)\nz = 3\n",
    ],
)
def test_removal_and_flattening_like_libcst(source):
    module = cst.parse_module(source)
    assert fastcst.transform(module, _DropPrints()).code == module.visit(_DropPrints()).code


class _StatementsOnly(cst.CSTTransformer):
    def __init__(self):
        super().__init__()
        self.entered: list[str] = []

    def visit_IndentedBlock(self, node):
        self.entered.append("block")

    def leave_Module(self, original, updated):
        return updated


def test_walks_do_not_enter_subtrees_no_hook_can_reach(monkeypatch):
    entered: list[type] = []
    real = fastcst._transform

    def counting(node, *args):
        entered.append(type(node))
        return real(node, *args)

    monkeypatch.setattr(fastcst, "_transform", counting)
    module = cst.parse_module("def f(a=1):\n    return g(a)[0] + h(x=2)\nz = [i for i in range(3)]\n")
    visitor = _StatementsOnly()
    assert fastcst.transform(module, visitor) is module
    assert visitor.entered == ["block"]
    assert cst.Module in entered and cst.IndentedBlock in entered
    # statements can only hold blocks through compound statements: no
    # expression, small statement or simple line was entered
    assert not {cst.Call, cst.Name, cst.Return, cst.Assign, cst.SimpleStatementLine} & set(entered)


def _outputs(paths):
    out = {}
    for path in paths:
        try:
            result = migrate_source(path.read_text(encoding="utf-8"), path=str(path))
        except Exception as exc:  # noqa: BLE001 - a file the engine rejects must be rejected by both
            out[path.name] = repr(exc)
            continue
        out[path.name] = (result.output, list(result.diagnostics), result.rules_applied)
    return out


def test_every_rule_gives_the_same_result_with_libcst_walks(monkeypatch):
    """Differential check over the legacy programs: the engine's output,
    diagnostics and applied rules are the same when every walk is libcst's
    own (rebuilding, unpruned) ``node.visit``."""
    fast = _outputs(LEGACY)
    monkeypatch.setattr(fastcst, "_transform", lambda node, visitor, *rest: node.visit(visitor))
    monkeypatch.setattr(fastcst, "_fast_visit", lambda node, visitor, *rest: node.visit(visitor))
    slow = _outputs(LEGACY)
    assert fast.keys() == slow.keys() and len(fast) >= 10
    for name in fast:
        assert fast[name] == slow[name], name


_POSITIONS_SOURCE = '''\
#!/usr/bin/env python
"""Header docstring."""
import os


def build(x,
          y=(1,
             2)):
    if x:  # a comment
        return [x, y]; z = 3
    else:
        return {"a": x}


class Model:

    def run(self, data):
        with open(data) as f, open(data + "2"):
            for line in f:
                yield line.strip() if line else None


print(build(1), Model().run("p"))
'''


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_statement_position_is_libcsts_position(newline):
    """The position of a node computed from its top-level statement alone is
    the one libcst's PositionProvider computes over the whole module, for every
    node (line endings, nested blocks, two statements on a line, parentheses)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    for text in (_POSITIONS_SOURCE, (ROOT / "legacy_reference" / "sync_replicas.py").read_text()):
        module = cst.parse_module(text.replace("\n", newline))
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        checked = 0
        for node in fastcst.walk(module):
            if node is module:
                continue
            assert fastcst.statement_position(module, node) == positions[node], node
            checked += 1
        assert checked > 80


def test_statement_position_refuses_a_node_it_cannot_place():
    module = cst.parse_module("x = 1\n")
    shared = cst.parse_expression("y")
    twice = module.with_changes(body=[cst.SimpleStatementLine([cst.Expr(shared)])] * 2)
    with pytest.raises(LookupError):
        fastcst.statement_position(twice, shared)
    with pytest.raises(LookupError):
        fastcst.statement_position(module, shared)


def test_walk_in_functions_pairs_each_node_with_its_innermost_function():
    module = cst.parse_module(
        "import os\n"
        "def outer(a):\n"
        "    with open(a) as f:\n"
        "        def inner(b):\n"
        "            return len(b)\n"
        "        return inner(f.read())\n"
        "class Box:\n"
        "    def method(self):\n"
        "        return print(self)\n"
        "print(outer('x'))\n"
    )
    pairs = list(fastcst.walk_in_functions(module))
    # the cached walk's nodes, in its order
    assert [node for node, _ in pairs] == list(fastcst.cached_walk(module))
    # each node's function, computed independently: the nearest FunctionDef above it
    parents: dict[int, cst.CSTNode] = {}
    for node in fastcst.walk(module):
        for child in fastcst.children(node):
            parents[id(child)] = node

    def enclosing(node):
        up = parents.get(id(node))
        while up is not None and type(up) is not cst.FunctionDef:
            up = parents.get(id(up))
        return up

    assert all(function is enclosing(node) for node, function in pairs)
    calls = [(fastcst.code_of(node.func), function.name.value if function else None)
             for node, function in pairs if type(node) is cst.Call]
    assert calls == [("open", "outer"), ("len", "inner"), ("inner", "outer"), ("f.read", "outer"),
                     ("print", "method"), ("print", None), ("outer", None)]
    assert [function.name.value for node, function in pairs
            if type(node) is cst.FunctionDef and function] == ["outer"]
    fastcst.clear_caches()
