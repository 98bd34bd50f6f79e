"""Dataflow tracing: from a name a statement reads to the expressions that
define it, wherever the program builds them.

``Tracer.sources(expr, scope, at)`` follows

- local names to their assignments before ``at`` in the function (or module)
  ``scope`` -- every branch's binding when the last ones are conditional --
  and to module-level bindings;
- tuple unpacking (``device, target = device_and_target()``) and subscripts
  of returned dicts (``model["train_op"]``) to the element picked;
- calls of functions of the same file, and of the project's sibling modules
  (``import net`` then ``net.build(...)``, ``from net import build``), to
  every value they ``return``, traced in the callee's own scope.

Each ``Source`` is where the trace ended: the defining expression (a call of
TF, a literal, a parameter...) with the chain of helper functions it went
through, for located diagnostics. The tracer reads code only; nothing here
rewrites."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.fastcst import children, code_of
from migrate.codemod.program.project import ProjectIndex, ProjectModule
from migrate.codemod.tfnames import TFNames

_MAX_DEPTH = 12  # helper calls followed per trace: guards recursion


@dataclass(frozen=True)
class Unit:
    """A module of the program: the file being migrated or a sibling."""

    module: cst.Module
    project: ProjectModule | None  # None: the file being migrated

    @property
    def label(self) -> str:
        return "this file" if self.project is None else f"`{self.project.name}`"


@dataclass
class Source:
    """Where a trace ended. ``expr`` is the defining expression (None: the
    value cannot be known -- a parameter, a loop variable, code of an absent
    module); ``kind`` says which: "expr", "parameter", "opaque", "unknown"."""

    expr: cst.BaseExpression | None
    kind: str
    unit: Unit
    function: cst.FunctionDef | None
    via: tuple[str, ...] = ()  # helper calls traced through, outermost first: "`build(...)`"
    opaque: ProjectModule | None = None  # the absent module an opaque value comes from

    def describe(self) -> str:
        return " -> ".join(self.via)


@dataclass
class Pick:
    """What the consumer takes of a value: element i of a tuple, key k of a dict."""

    index: int | None = None
    key: str | None = None


def own_scope(node: cst.CSTNode):
    """The nodes of a function or module body in its own scope (not inside
    nested functions, lambdas or classes), in source order."""
    stack = list(reversed(list(children(node))))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        stack.extend(reversed(list(children(n))))


def _statements(body, conditional: bool = False):
    """(statement, conditional) for every simple statement line of a body,
    nested blocks included (a binding inside if/for/while/try is conditional;
    inside with it is not), in source order."""
    for statement in body:
        if isinstance(statement, (cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef)):
            yield statement, conditional
        elif isinstance(statement, cst.With):
            yield from _statements(_body(statement.body), conditional)
        elif isinstance(statement, cst.If):
            yield from _statements(_body(statement.body), True)
            orelse = statement.orelse
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    yield from _statements(_body(orelse.body), True)
                    orelse = orelse.orelse
                else:
                    yield from _statements(_body(orelse.body), True)
                    orelse = None
        elif isinstance(statement, (cst.For, cst.While, cst.Try)):
            yield statement, True  # loop targets, except names: bound here
            yield from _statements(_body(statement.body), True)
            for handler in getattr(statement, "handlers", ()):
                yield from _statements(_body(handler.body), True)
            for extra in ("orelse", "finalbody"):
                block = getattr(statement, extra, None)
                if block is not None:
                    yield from _statements(_body(block.body), True)


def _body(suite) -> list:
    return list(suite.body) if isinstance(suite, cst.IndentedBlock) else [suite]


def _contains(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n is inner:
            return True
        stack.extend(children(n))
    return False


def _binding(statement: cst.CSTNode, name: str):
    """(value, pick) when ``statement`` binds ``name`` by plain assignment
    (``name = v``, ``a, name = v``: element 1); ("bound", None) when it binds
    it otherwise (def, import, for, with ... as); None when it does not."""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    pick = _pick_in_target(target.target, name)
                    if pick is not None:
                        return small.value, pick
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                if isinstance(small.target, cst.Name) and small.target.value == name:
                    return small.value, Pick()
            elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and (
                    small.target.value == name):
                return "bound", None
            elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    while isinstance(bound, cst.Attribute):
                        bound = bound.value
                    if isinstance(bound, cst.Name) and bound.value == name:
                        return "import", small
        return None
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value == name:
        return "def", statement
    if isinstance(statement, cst.For) and name in _names_in(statement.target):
        return "bound", None
    return None


def _pick_in_target(target: cst.BaseExpression, name: str) -> Pick | None:
    if isinstance(target, cst.Name):
        return Pick() if target.value == name else None
    if isinstance(target, (cst.Tuple, cst.List)):
        for i, element in enumerate(target.elements):
            if isinstance(element, cst.StarredElement):
                if name in _names_in(element.value):
                    return Pick(index=-1)  # starred: not traced
                continue
            if isinstance(element.value, cst.Name) and element.value.value == name:
                return Pick(index=i)
            if name in _names_in(element.value):
                return Pick(index=-1)  # nested unpacking: not traced
    return None


def _names_in(target: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    stack = [target]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.add(n.value)
        elif isinstance(n, cst.Attribute):
            continue
        else:
            stack.extend(children(n))
    return out


class Tracer:
    """Traces values of one file through its helpers and the project's modules."""

    def __init__(self, module: cst.Module, qualname, project: ProjectIndex | None = None):
        self.root = Unit(module, None)
        self._qualname = qualname
        self.project = project or ProjectIndex(None)
        self._names: dict[int, tuple[cst.Module, TFNames]] = {}
        # per module (kept with it: ids of collected modules are reused)
        self._functions: dict[int, tuple[cst.Module, dict[str, cst.FunctionDef]]] = {}
        self._imported: dict[int, tuple[cst.Module, dict[str, tuple[ProjectModule, str | None]]]] = {}

    # ------------------------------------------------------------ units
    def qualname(self, node: cst.CSTNode, unit: Unit) -> str | None:
        """The TF name of ``node`` as ``unit`` imports it."""
        if unit.project is None:
            return self._qualname(node)
        known = self._names.get(id(unit.module))
        if known is None or known[0] is not unit.module:
            known = self._names[id(unit.module)] = (unit.module, TFNames.from_module(unit.module))
        return known[1].qualname(node)

    def functions(self, unit: Unit) -> dict[str, cst.FunctionDef]:
        """Top-level functions of a unit whose name nothing else binds there."""
        known = self._functions.get(id(unit.module))
        if known is None or known[0] is not unit.module:
            known = self._functions[id(unit.module)] = (unit.module, self._find_functions(unit))
        return known[1]

    def _find_functions(self, unit: Unit) -> dict[str, cst.FunctionDef]:
        counts: dict[str, int] = {}
        defs: dict[str, cst.FunctionDef] = {}
        for statement, _ in _statements(unit.module.body):
            if isinstance(statement, cst.FunctionDef):
                defs[statement.name.value] = statement
                counts[statement.name.value] = counts.get(statement.name.value, 0) + 1
            elif isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                        targets = small.targets if isinstance(small, cst.Assign) else [small]
                        for t in targets:
                            for n in _names_in(t.target):
                                counts[n] = counts.get(n, 0) + 1
        return {name: fn for name, fn in defs.items() if counts[name] == 1}

    def imported(self, unit: Unit) -> dict[str, tuple[ProjectModule, str | None]]:
        """Names a unit binds at its top to project modules: ``import net``
        -> (net, None); ``from net import build as b`` -> (net, "build")."""
        known = self._imported.get(id(unit.module))
        if known is None or known[0] is not unit.module:
            known = self._imported[id(unit.module)] = (unit.module, self._find_imported(unit))
        return known[1]

    def _find_imported(self, unit: Unit) -> dict[str, tuple[ProjectModule, str | None]]:
        out: dict[str, tuple[ProjectModule, str | None]] = {}
        for statement in unit.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        dotted = code_of(alias.name)
                        found = self.project.find(dotted)
                        if found is None:
                            continue
                        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                            out[alias.asname.name.value] = (found, None)
                        elif "." not in dotted:
                            out[dotted] = (found, None)
                elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative and (
                        not isinstance(small.names, cst.ImportStar)):
                    found = self.project.find(code_of(small.module))
                    if found is None:
                        continue
                    for alias in small.names:
                        if not isinstance(alias.name, cst.Name):
                            continue
                        local = alias.asname.name.value if alias.asname is not None else alias.name.value
                        out[local] = (found, alias.name.value)
        return out

    def unit_of(self, module: ProjectModule) -> Unit | None:
        parsed = self.project.parse(module)
        return Unit(parsed, module) if parsed is not None else None

    def callee(self, call: cst.Call, unit: Unit):
        """What a call calls: ("function", FunctionDef, Unit) for a function of
        this file or of a present sibling module, ("opaque", ProjectModule,
        name) for a function of an absent project module, or None (TF, a
        library, a method, a name bound otherwise)."""
        func = call.func
        imported = self.imported(unit)
        if isinstance(func, cst.Name):
            fn = self.functions(unit).get(func.value)
            if fn is not None:
                return "function", fn, unit
            if func.value in imported and imported[func.value][1] is not None:
                module, attr = imported[func.value]
                return self._in_module(module, attr)
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            found = imported.get(func.value.value)
            if found is not None and found[1] is None:
                return self._in_module(found[0], func.attr.value)
        return None

    def _in_module(self, module: ProjectModule, name: str):
        unit = self.unit_of(module)
        if unit is None:
            return "opaque", module, name
        fn = self.functions(unit).get(name)
        return ("function", fn, unit) if fn is not None else None

    # ------------------------------------------------------------ tracing
    def sources(self, expr: cst.BaseExpression, scope: cst.CSTNode, at: cst.CSTNode | None = None,
                unit: Unit | None = None) -> list[Source]:
        """Where the value of ``expr``, read by statement ``at`` of ``scope``
        (a FunctionDef or the unit's Module), is defined."""
        unit = unit or self.root
        return self._sources(expr, scope, at, unit, Pick(), (), 0)

    def _sources(self, expr, scope, at, unit, pick, via, depth) -> list[Source]:
        function = scope if isinstance(scope, cst.FunctionDef) else None
        if depth > _MAX_DEPTH:
            return [Source(expr, "unknown", unit, function, via)]
        if isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"):
            return [Source(expr, "expr", unit, function, via)]
        if isinstance(expr, cst.Name):
            return self._name_sources(expr.value, scope, at, unit, pick, via, depth)
        if isinstance(expr, (cst.Tuple, cst.List)) and pick.index is not None and pick.index >= 0:
            elements = expr.elements
            if pick.index < len(elements) and not any(isinstance(e, cst.StarredElement) for e in elements):
                return self._sources(elements[pick.index].value, scope, at, unit, Pick(), via, depth + 1)
            return [Source(expr, "unknown", unit, function, via)]
        if isinstance(expr, cst.Dict) and pick.key is not None:
            for element in expr.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and (
                        element.key.evaluated_value == pick.key):
                    return self._sources(element.value, scope, at, unit, Pick(), via, depth + 1)
            return [Source(expr, "unknown", unit, function, via)]
        if isinstance(expr, cst.Subscript) and pick.index is None and pick.key is None and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                key = index.value.evaluated_value
                return self._sources(expr.value, scope, at, unit, Pick(key=key), via, depth + 1)
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return self._sources(expr.value, scope, at, unit, Pick(index=int(index.value.value)), via,
                                     depth + 1)
        if isinstance(expr, cst.Call):
            found = self.callee(expr, unit)
            if found is not None and found[0] == "function":
                _, fn, callee_unit = found
                return self._returns(fn, callee_unit, pick, (*via, f"`{code_of(expr.func)}(...)`"), depth + 1)
            if found is not None and found[0] == "opaque":
                return [Source(expr, "opaque", unit, function, via, opaque=found[1])]
        if pick.index is not None or pick.key is not None:
            return [Source(expr, "unknown", unit, function, via)]
        return [Source(expr, "expr", unit, function, via)]

    def _returns(self, fn: cst.FunctionDef, unit: Unit, pick, via, depth) -> list[Source]:
        out: list[Source] = []
        returns = [n for n in own_scope(fn.body) if isinstance(n, cst.Return)]
        if not returns:
            return [Source(cst.Name("None"), "expr", unit, fn, via)]
        for ret in returns:
            if ret.value is None:
                out.append(Source(cst.Name("None"), "expr", unit, fn, via))
                continue
            out += self._sources(ret.value, fn, ret, unit, pick, via, depth)
        return out

    def _name_sources(self, name, scope, at, unit, pick, via, depth) -> list[Source]:
        function = scope if isinstance(scope, cst.FunctionDef) else None
        body = _body(scope.body) if isinstance(scope, cst.FunctionDef) else list(scope.body)
        found: list[tuple[object, object, cst.CSTNode]] = []  # (value, pick, statement), latest last
        for statement, conditional in _statements(body):
            if at is not None and (statement is at or _contains(statement, at)):
                break
            binding = _binding(statement, name)
            if binding is None:
                continue
            if not conditional:
                found = []
            found.append((binding, conditional, statement))
        if not found:
            if function is not None:
                params = function.params
                for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
                    if p.name.value == name:
                        return [Source(cst.Name(name), "parameter", unit, function, via)]
                # a module-level name: read from the unit's top
                return self._name_sources(name, unit.module, None, unit, pick, via, depth + 1)
            return [Source(cst.Name(name), "unknown", unit, function, via)]
        out: list[Source] = []
        for (value, inner_pick), _, statement in found:
            if value == "import":
                imported = self.imported(unit).get(name)
                if imported is not None and not imported[0].present:
                    out.append(Source(cst.Name(name), "opaque", unit, function, via, opaque=imported[0]))
                else:
                    out.append(Source(cst.Name(name), "unknown", unit, function, via))
            elif value in ("bound", "def"):
                out.append(Source(cst.Name(name), "unknown", unit, function, via))
            elif inner_pick.index == -1:
                out.append(Source(value, "unknown", unit, function, via))
            else:
                combined = Pick(index=inner_pick.index, key=None) if inner_pick.index is not None else pick
                if inner_pick.index is not None and (pick.index is not None or pick.key is not None):
                    out.append(Source(value, "unknown", unit, function, via))  # a pick of a pick: not traced
                    continue
                out += self._sources(value, scope, statement, unit, combined, via, depth + 1)
        return out

    # ------------------------------------------------------------ questions
    def calls_of(self, fn: cst.FunctionDef, unit: Unit):
        """(call, callee function, its unit) for each call in ``fn`` of a
        function of the program (this file or a present sibling)."""
        for node in own_scope(fn.body):
            if isinstance(node, cst.Call):
                found = self.callee(node, unit)
                if found is not None and found[0] == "function":
                    yield node, found[1], found[2]

    def reaches(self, statement: cst.CSTNode, unit: Unit, target: cst.CSTNode):
        """The chain of helper calls (``["`a(...)`", "`b(...)`"]``) by which
        code in ``statement`` reaches the function containing ``target``, or
        None. Breadth first: the shortest chain."""
        frontier: list[tuple[cst.CSTNode, Unit, list[str]]] = [(statement, unit, [])]
        seen: set[int] = set()
        while frontier:
            node, node_unit, chain = frontier.pop(0)
            for call in [n for n in own_scope(node) if isinstance(n, cst.Call)] + (
                    [node] if isinstance(node, cst.Call) else []):
                found = self.callee(call, node_unit)
                if found is None or found[0] != "function" or id(found[1]) in seen:
                    continue
                fn, fn_unit = found[1], found[2]
                seen.add(id(fn))
                step = [*chain, f"`{fn.name.value}()`" + ("" if fn_unit.project is None
                                                          else f" of {fn_unit.label}")]
                if _contains(fn, target):
                    return step
                frontier.append((fn, fn_unit, step))
        return None


def creates_variables(tracer: Tracer, fn: cst.FunctionDef, unit: Unit, creators: set[str],
                      _seen: set[int] | None = None) -> tuple[bool, bool]:
    """(creates variables, creates plain ``tf.Variable`` ones): whether ``fn``,
    or a program function it calls, calls one of ``creators`` (TF names)."""
    seen = _seen if _seen is not None else set()
    if id(fn) in seen:
        return False, False
    seen.add(id(fn))
    any_, plain = False, False
    for node in own_scope(fn.body):
        if not isinstance(node, cst.Call):
            continue
        q = tracer.qualname(node.func, unit)
        if q in creators:
            any_ = True
            plain |= q == "Variable"
            continue
        found = tracer.callee(node, unit)
        if found is not None and found[0] == "function":
            a, p = creates_variables(tracer, found[1], found[2], creators, seen)
            any_ |= a
            plain |= p
    return any_, plain
