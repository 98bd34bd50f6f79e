"""The program model TFM301 plans from: which calls of a training graph
build the model's variables, found through the tracer in this file and the
project's sibling modules.

A call builds variables when it calls (through helpers, in this file or a
present sibling module) a TF variable creator. A call of a function of an
*absent* project module (``import net_layers`` with no ``net_layers.py``
beside the file) cannot be read: it is taken as an opaque model builder,
whose variables the migration records on the first call and reuses (the
variable recorder works for ``tf.Variable`` and ``get_variable`` alike), and
the caller says so in a note."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.fastcst import code_of
from migrate.codemod.program.collections import CollectionFills, collection_fills, collection_reads
from migrate.codemod.program.project import ProjectModule, index_for
from migrate.codemod.program.tracing import Pick, Tracer, Unit, creates_variables, own_scope
from migrate.codemod.tfnames import TFNames

VARIABLE_CREATORS = frozenset({"get_variable", "Variable", "get_local_variable"})


@dataclass(frozen=True)
class ModelBuilder:
    """A call of the graph that builds model variables outside this file's
    own helpers: a present sibling's function or an absent module's."""

    call: cst.Call
    plain: bool  # creates tf.Variable objects (or may: opaque), so needs the variable recorder
    module: ProjectModule
    function: str

    @property
    def opaque(self) -> bool:
        return not self.module.present

    @property
    def code(self) -> str:
        return code_of(self.call.func)


# calls a device helper may make besides building the setter: string work on its arguments
_PURE_METHODS = frozenset({"format", "split", "strip", "join", "lower", "upper"})
_PURE_BUILTINS = frozenset({"len", "str", "int", "range", "list", "tuple"})
SETTER = "train.replica_device_setter"
_TRAIN_METHODS = frozenset({"minimize", "apply_gradients", "compute_gradients"})


@dataclass(frozen=True)
class DeviceHelper:
    """A function of this file returning the device setter a ``with
    tf.device(...)`` uses: ``function`` when it only builds the setter (its
    call can go with the block), else ``why`` it cannot."""

    function: cst.FunctionDef | None
    why: str | None


def _pure(node: cst.CSTNode) -> bool:
    """An argument whose evaluation does nothing but compute a value."""
    if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString,
                         cst.FormattedString)):
        return True
    if isinstance(node, cst.Attribute):
        return _pure(node.value)
    if isinstance(node, cst.BinaryOperation):
        return _pure(node.left) and _pure(node.right)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_pure(e.value) for e in node.elements)
    return False


class ProgramModel:
    """The program of one file, with the project around it."""

    def __init__(self, module: cst.Module, qualname, path: str):
        self.tracer = Tracer(module, qualname, index_for(path))

    def model_builders(self, statement: cst.CSTNode) -> list[ModelBuilder]:
        """The calls in ``statement`` of project-module functions that build
        variables (present modules: read; absent ones: opaque)."""
        out: list[ModelBuilder] = []
        unit = self.tracer.root
        for node in own_scope(statement) if not isinstance(statement, cst.Call) else [statement]:
            if not isinstance(node, cst.Call):
                continue
            found = self.tracer.callee(node, unit)
            if found is None:
                continue
            if found[0] == "opaque":
                out.append(ModelBuilder(node, True, found[1], found[2]))
            elif found[2].project is not None:
                creates, plain = creates_variables(self.tracer, found[1], found[2], set(VARIABLE_CREATORS))
                if creates:
                    out.append(ModelBuilder(node, plain, found[2].project, found[1].name.value))
        return out

    def collections_filled(self, builder: ModelBuilder) -> CollectionFills | None:
        """The collections a present builder fills (at each call, when it
        creates variables, or unknown); None for an opaque one."""
        found = self.tracer.callee(builder.call, self.tracer.root)
        if found is None or found[0] != "function":
            return None
        return collection_fills(self.tracer, found[1], found[2])

    def step_collections(self, statement: cst.CSTNode):
        """For each call in ``statement`` of a program function (this file's
        or a present sibling's): (the call, the collections its function
        fills, the collection reads in it: (read, TF name, where))."""
        tracer = self.tracer
        for node in own_scope(statement):
            if not isinstance(node, cst.Call):
                continue
            found = tracer.callee(node, tracer.root)
            if found is not None and found[0] == "function":
                yield node, collection_fills(tracer, found[1], found[2]), collection_reads(tracer, found[1], found[2])

    def sibling_functions(self, driver_bindings: dict[str, str]):
        """(module alias, function name, function with the sibling's module
        names qualified as ``alias.NAME``, ProjectModule) for each function of
        a present sibling this file imports as ``import alias``, when its code
        reads TensorFlow under the names this file binds the same way and reads
        no other import of its module (so it means the same here)."""
        tracer = self.tracer
        for alias, (module, attr) in tracer.imported(tracer.root).items():
            if attr is not None or not module.present:
                continue
            unit = tracer.unit_of(module)
            if unit is None:
                continue
            # its functions as TFM101 writes them (TF2 names), since this file's code is written so
            # by the time they are inlined; names only the migration adds are never qualified
            migrated = _tf2_spelled(unit.module, module.path)
            if migrated is None:
                continue
            sibling_bindings = TFNames.from_module(migrated).bindings
            top = _top_level_names(unit.module)
            for name, fn in tracer.functions(Unit(migrated, module)).items():
                qualified = _qualified(fn, alias, top, sibling_bindings, driver_bindings)
                if qualified is not None:
                    yield alias, name, qualified, module

    def origin_of(self, call: cst.Call) -> str:
        """Where the function ``call`` calls lives, for a reason: "" for this
        file or unknown, else a clause naming the project module."""
        found = self.tracer.callee(call, self.tracer.root)
        if found is None:
            return ""
        if found[0] == "opaque":
            return (f", a function of `{found[1].name}`, which is not in this project (its code, optimizer"
                    " included, cannot be read: migrate it with this file)")
        unit = found[2]
        if unit.project is None:
            return ""
        return (f", a function of the project module `{unit.project.name}` that TFM300 could not inline here"
                " (it inlines one that reads only TensorFlow, its parameters and plain module-level names, ends"
                " with its only `return`, of names, and binds no name the calling function uses)")

    def builds_no_train_op(self, call: cst.Call) -> bool:
        """True when ``call`` calls a function of the program (this file or a
        present sibling) that, with the program functions it calls, builds no
        train op: no TF optimizer, no ``minimize``/``apply_gradients``."""
        found = self.tracer.callee(call, self.tracer.root)
        if found is None or found[0] != "function":
            return False
        seen: set[int] = set()
        stack = [(found[1], found[2])]
        while stack:
            fn, unit = stack.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            for node in own_scope(fn.body):
                if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                    return False  # code it defines could train: not proven
                if not isinstance(node, cst.Call):
                    continue
                q = self.tracer.qualname(node.func, unit) or ""
                if (isinstance(node.func, cst.Attribute) and node.func.attr.value in _TRAIN_METHODS) or (
                        q.startswith(("train.", "keras.optimizers.", "optimizers."))):
                    return False
                inner = self.tracer.callee(node, unit)
                if inner is not None and inner[0] == "opaque":
                    return False
                if inner is not None:
                    stack.append((inner[1], inner[2]))
                elif isinstance(node.func, cst.Attribute) and q == "":
                    return False  # a method of an object: what it builds is not seen
        return True

    def device_helper(self, value: cst.BaseExpression, index: int | None = None) -> DeviceHelper | None:
        """The helper of this file ``value`` calls, when what it returns (its
        element ``index``: ``device, target = helper()``) is a device setter on
        some path; None when ``value`` is no such call."""
        if not isinstance(value, cst.Call):
            return None
        tracer = self.tracer
        found = tracer.callee(value, tracer.root)
        if found is None or found[0] != "function" or found[2].project is not None:
            return None
        fn = found[1]
        sources = tracer._returns(fn, tracer.root, Pick(index=index), (f"`{fn.name.value}(...)`",), 1)
        setters = [s for s in sources if isinstance(s.expr, cst.Call) and tracer.qualname(s.expr.func, s.unit) == SETTER]
        if not setters:
            return None
        name = fn.name.value
        others = [s for s in sources if s not in setters]
        if others:
            other = code_of(others[0].expr) if others[0].expr is not None else "a value it cannot trace"
            return DeviceHelper(None, f"`{name}()` returns the device setter on one path and `{other}` on another"
                                " (single-machine and distributed modes chosen inside it)")
        if index is not None:
            return DeviceHelper(None, f"`{name}()` returns the device setter together with other values")
        if any(s.function is None for s in setters):
            return DeviceHelper(None, f"`{name}()` returns a device setter the module built once, at its top")
        if not all(_pure(a.value) for a in value.args):
            return DeviceHelper(None, f"the call `{code_of(value)}` computes its arguments with calls")
        for node in own_scope(fn.body):
            if isinstance(node, (cst.Yield, cst.Await, cst.Global, cst.Nonlocal)):
                return DeviceHelper(None, f"`{name}()` is not a plain function")
            if not isinstance(node, cst.Call):
                continue
            if tracer.qualname(node.func, tracer.root) == SETTER:
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _PURE_METHODS:
                continue
            if isinstance(func, cst.Name) and func.value in _PURE_BUILTINS:
                continue
            return DeviceHelper(None, f"`{name}()` also calls `{code_of(func)}(...)`, which would be dropped with it")
        if fn.decorators:
            return DeviceHelper(None, f"`{name}()` is decorated")
        return DeviceHelper(fn, None)


def explain_device(program: ProgramModel, expr: cst.BaseExpression, scope: cst.CSTNode,
                   at: cst.CSTNode) -> str | None:
    """Why a ``with tf.device(expr):`` whose device function is traced to a
    replica_device_setter(...) through helpers is not a block TFM301 takes;
    None when no path leads to a device setter."""
    tracer = program.tracer
    sources = tracer.sources(expr, scope, at)
    setters = [s for s in sources if isinstance(s.expr, cst.Call) and tracer.qualname(s.expr.func, s.unit) == SETTER]
    if not setters:
        return None
    where = f" returned by {setters[0].describe()}" if setters[0].via else ""
    text = f"its device function `{code_of(expr)}` is the replica_device_setter(...){where}"
    others = [s for s in sources if s not in setters]
    if others:
        other = code_of(others[0].expr) if others[0].expr is not None else "an untraced value"
        text += (f", and `{other}` on another path: single-machine and distributed modes chosen at run time."
                 " TFM301 carries both over (ParameterServerStrategy on the cluster task's resolver, or on an"
                 " in-process cluster on one machine) where a function of this file called once, without"
                 " arguments, as `device, target = helper()` (or `device = helper()`) in the scope of the block,"
                 " returns the setter or None; this one is reached otherwise")
    elif setters[0].via:
        text += ", with other work or values the migration would have to carry along"
    return text


def _top_level_names(module: cst.Module) -> dict[str, str]:
    """Names a module binds at its top: name -> "import" or "other"."""
    out: dict[str, str] = {}
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            out[statement.name.value] = "other"
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname is not None else alias.name
                        while isinstance(bound, cst.Attribute):
                            bound = bound.value
                        if isinstance(bound, cst.Name):
                            out[bound.value] = "import"
                elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = small.targets if isinstance(small, cst.Assign) else [small]
                    for t in targets:
                        if isinstance(t.target, cst.Name):
                            out.setdefault(t.target.value, "other")
        else:
            # names bound in compound statements (if/try at the top): not traced
            for node in own_scope(statement):
                if isinstance(node, cst.Name):
                    out.setdefault(node.value, "unknown")
    return out


class _Qualify(cst.CSTTransformer):
    """``NAME`` -> ``alias.NAME`` for the module-level names a function reads."""

    def __init__(self, alias: str, names: set[str]):
        super().__init__()
        self.alias = alias
        self.names = names
        self.skip: set[int] = set()

    def visit_Attribute(self, node):
        self.skip.add(id(node.attr))

    def visit_Arg(self, node):
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def leave_Name(self, original, updated):
        if original.value in self.names and id(original) not in self.skip:
            return cst.Attribute(cst.Name(self.alias), cst.Name(original.value))
        return updated


def _qualified(fn: cst.FunctionDef, alias: str, top: dict[str, str], sibling_bindings: dict[str, str],
               driver_bindings: dict[str, str]) -> cst.FunctionDef | None:
    """``fn`` as code of the importing file, or None when it cannot mean the
    same there (a TF alias bound otherwise, another import of its module,
    a default that is not a literal, a nested scope reading module names)."""
    import builtins

    params = fn.params
    for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if p.default is not None and not isinstance(p.default, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)):
            return None
        if isinstance(p.default, cst.Name) and p.default.value not in ("None", "True", "False"):
            return None
    local: set[str] = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
    for node in own_scope(fn.body):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets = [node.asname.name]
        elif isinstance(node, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
            return None
        for t in targets:
            local |= _bound_by(t)
    read: set[str] = set()
    skip: set[int] = set()
    for node in own_scope(fn.body):
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            skip.add(id(node.keyword))
        elif isinstance(node, cst.Name) and id(node) not in skip:
            read.add(node.value)
    qualify: set[str] = set()
    for name in read - local:
        if name in sibling_bindings:
            if driver_bindings.get(name) != sibling_bindings[name]:
                return None  # TensorFlow under a name the importing file binds otherwise
        elif top.get(name) == "other":
            qualify.add(name)
        elif name in top or not hasattr(builtins, name):
            return None  # another import of its module, or a name of unknown origin
    return fn.with_changes(body=fn.body.visit(_Qualify(alias, qualify))) if qualify else fn


def _bound_by(target: cst.CSTNode) -> set[str]:
    """Names an assignment target binds (``a``, ``a, (b, *c)``; not ``x.a``, ``x[a]``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= _bound_by(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _bound_by(target.value)
    return set()


_SPELLED: dict[tuple[str, str], cst.Module | None] = {}


def _tf2_spelled(module: cst.Module, path: str) -> cst.Module | None:
    """A sibling module with TFM101's TF2 names (None: it does not migrate)."""
    # imported here: the engine imports the rules, which import this module
    from migrate.codemod.engine import MigrationError, migrate_source

    source = module.code
    key = (path, source)
    if key not in _SPELLED:
        try:
            output = migrate_source(source, path=path, select=["TFM101"]).output
            _SPELLED[key] = cst.parse_module(output)
        except (MigrationError, cst.ParserSyntaxError):
            _SPELLED[key] = None
        if len(_SPELLED) > 32:
            _SPELLED.pop(next(iter(_SPELLED)))
    return _SPELLED[key]
