"""Fetched values formatted as numbers keep printing under NumPy 2.

A TF1 loop printing what a session run returned,

    w, b = sess.run([weight, bias])          # weight: a variable of shape [1]
    print("weight: %f, bias: %f" % (w, b))

relied on NumPy 1 converting a one-element array to a number for ``%f``
(``float(array)``). NumPy 2, which TensorFlow 2.21 runs on, refuses that
(``TypeError: only 0-dimensional arrays can be converted to Python scalars``).
The migrated loop reads the values with ``.numpy()``; where such a value is an
operand of a numeric ``%`` conversion (``%d %i %f %e %g %x``...), it is given as
``w.item()``: the number NumPy 1 converted it to (for a one-element array or
a NumPy scalar; an array of more elements failed under NumPy 1 too, and still
does). Only names bound once in their function, from ``.numpy()``, are touched.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.codemod import fastcst
from migrate.codemod.rules import _cst as C

# one %-conversion: (mapping key)(flags)(width)(.precision)(length)(type)
_CONVERSION = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_NUMERIC = set("diouxXeEfFgGc")


def _conversions(template: str) -> list[bool] | None:
    """Per operand, whether its conversion is numeric (None: a mapping key)."""
    out: list[bool] = []
    for m in _CONVERSION.finditer(template):
        key, width, precision, kind = m.groups()
        if kind == "%":
            continue
        if key is not None:
            return None
        out += [True] * ((width == "*") + (precision == "*"))  # `*` takes an int operand
        out.append(kind in _NUMERIC)
    return out


def _is_numpy_call(value: cst.BaseExpression) -> bool:
    """``x.numpy()``"""
    return (isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "numpy")


def _numpy_names(scope: cst.CSTNode) -> set[str]:
    """Names bound once in ``scope`` (not in nested defs) and from ``.numpy()``."""
    bound: dict[str, int] = {}
    from_numpy: set[str] = set()

    def visit(node: cst.CSTNode) -> None:
        # (fastcst's children: libcst's ``node.children`` rebuilds every node it passes)
        for child in fastcst.children(node):
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(child, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.With, cst.NamedExpr)):
                targets = []
                if isinstance(child, cst.Assign):
                    targets = [t.target for t in child.targets]
                elif isinstance(child, (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):
                    targets = [child.target]
                else:
                    targets = [item.asname.name for item in child.items if item.asname is not None]
                for target in targets:
                    for name in C.target_names(target):
                        bound[name] = bound.get(name, 0) + 1
                if isinstance(child, cst.Assign) and len(child.targets) == 1:
                    target, value = child.targets[0].target, child.value
                    if isinstance(target, cst.Name) and _is_numpy_call(value):
                        from_numpy.add(target.value)
                    elif (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))
                          and len(target.elements) == len(value.elements)):
                        for t, v in zip(target.elements, value.elements):
                            if isinstance(t.value, cst.Name) and _is_numpy_call(v.value):
                                from_numpy.add(t.value.value)
            visit(child)

    visit(scope)
    return {name for name in from_numpy if bound.get(name) == 1}


class _ItemizeOperands(cst.CSTTransformer):
    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names
        self.changed: list[cst.BinaryOperation] = []

    def visit_FunctionDef(self, node):
        return False  # a nested function has its own names

    def leave_BinaryOperation(self, original, updated):
        if not isinstance(updated.operator, cst.Modulo) or not isinstance(updated.left, cst.SimpleString):
            return updated
        template = updated.left.evaluated_value
        if not isinstance(template, str):
            return updated
        numeric = _conversions(template)
        if numeric is None:
            return updated
        right = updated.right
        operands = list(right.elements) if isinstance(right, cst.Tuple) else None
        values = [el.value for el in operands] if operands is not None else [right]
        if len(values) != len(numeric):
            return updated
        new_values = [
            cst.Call(func=cst.Attribute(value=value, attr=cst.Name("item")))
            if is_numeric and isinstance(value, cst.Name) and value.value in self.names else value
            for value, is_numeric in zip(values, numeric)
        ]
        if all(a is b for a, b in zip(new_values, values)):
            return updated
        self.changed.append(original)
        if operands is None:
            return updated.with_changes(right=new_values[0])
        return updated.with_changes(right=right.with_changes(
            elements=[el.with_changes(value=v) for el, v in zip(operands, new_values)]))


def itemize_formatted(module: cst.Module) -> tuple[cst.Module, list[cst.BinaryOperation]]:
    """``module`` with ``.numpy()`` values in numeric %-conversions given as
    ``.item()``, and the (original) formatting expressions changed."""
    changed: list[cst.BinaryOperation] = []
    # the functions (None: the module's top) with a ``.numpy()`` call in them: only
    # their own scopes can bind names from one
    reading = {id(function) for node, function in fastcst.walk_in_functions(module)
               if type(node) is cst.Call and _is_numpy_call(node)}
    if not reading:
        return module, changed  # no value read with ``.numpy()``: nothing to give as ``.item()``

    class _PerFunction(cst.CSTTransformer):
        def leave_FunctionDef(self, original, updated):
            if id(original) not in reading:
                return updated
            names = _numpy_names(updated.body)
            if not names:
                return updated
            itemize = _ItemizeOperands(names)
            body = fastcst.transform(updated.body, itemize)
            changed.extend(itemize.changed)
            return updated.with_changes(body=body)

    module = fastcst.transform(module, _PerFunction())
    names = _numpy_names(module) if id(None) in reading else set()
    if names:
        itemize = _ItemizeOperands(names)
        module = fastcst.transform(module, itemize)
        changed.extend(itemize.changed)
    return module, changed
