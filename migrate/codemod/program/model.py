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
from migrate.codemod.program.project import ProjectModule, index_for
from migrate.codemod.program.tracing import Pick, Tracer, creates_variables, own_scope

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
        text += (f", and `{other}` on another path (single-machine and distributed modes chosen at run time:"
                 " a strategy cannot be chosen by the codemod)")
    elif setters[0].via:
        text += ", with other work or values the migration would have to carry along"
    return text
