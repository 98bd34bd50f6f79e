"""Exact TF 2.21 equivalents of the ``tf.contrib`` members distributed
programs use (analysis and emitted code for TFM402; pure libcst).

- ``tf.contrib.data`` readers and ``Dataset``: TF 1.2/1.3 shipped ``tf.data``
  under ``tf.contrib.data``; the constructors kept their parameters in
  ``tf.data`` (new ones were appended), so ``tf.contrib.data.X`` ->
  ``tf.data.X``. ``Dataset.map``'s third positional parameter changed meaning
  (``output_buffer_size`` -> ``deterministic``) and two members went away:
  a module using those is declined with the place that needs a hand.
- ``tf.contrib.layers.l2_regularizer(scale)`` / ``l1_regularizer(scale)``:
  TF1 validated ``scale`` when the regularizer was made (an integer or a
  negative scale raised ``ValueError``, 0.0 gave ``lambda _: None``) and
  returned ``scale * tf.nn.l2_loss(w)`` (``scale * reduce_sum(|w|)``) with the
  scale converted to the weight's dtype, as ``tf.multiply`` does. The
  scale must be known statically (a number, or a module constant bound once
  to one) so that validation is done here, exactly as TF1 did it.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import cached_calls
from migrate.codemod.rules._equivalents import bind_args
from migrate.codemod.tfnames import dotted

# tf.contrib.data member -> (tf.data member, TF 1.3's parameters): TF 2.21's
# signature starts with the same parameters (tests/test_tfm402_contrib.py
# checks it against the installed TensorFlow)
DATA_SAME: dict[str, tuple[str, tuple[str, ...]]] = {
    "contrib.data.Dataset": ("data.Dataset", ()),
    "contrib.data.TFRecordDataset": ("data.TFRecordDataset", ("filenames", "compression_type")),
    "contrib.data.TextLineDataset": ("data.TextLineDataset", ("filenames", "compression_type")),
    "contrib.data.FixedLengthRecordDataset": (
        "data.FixedLengthRecordDataset", ("filenames", "record_bytes", "header_bytes", "footer_bytes")),
    # a graph-mode iterator: TF 2 keeps it in compat.v1 (tf.data.Iterator is TF 2's abstract class)
    "contrib.data.Iterator": ("compat.v1.data.Iterator", ()),
}
# `ds.apply(tf.contrib.data.batch_and_drop_remainder(n))`: the batches of
# exactly n elements, the batch dimension statically n == `ds.batch(n, drop_remainder=True)`
DROP_REMAINDER = "contrib.data.batch_and_drop_remainder"
# old Dataset members TF 2.21's tf.data.Dataset does not have
_GONE_METHODS = ("dense_to_sparse_batch", "from_sparse_tensor_slices")
# TF 1.3's Dataset.map(map_func, num_threads=None, output_buffer_size=None)
_OLD_MAP_KEYWORDS = ("num_threads", "output_buffer_size")

REGULARIZERS = ("contrib.layers.l2_regularizer", "contrib.layers.l1_regularizer")


def data_member(name: str) -> tuple[str, str] | None:
    """``(contrib prefix, tf.data prefix)`` when ``name`` is (a member of) one
    of the readers/``Dataset`` kept unchanged, else None."""
    for old, (new, _params) in DATA_SAME.items():
        if name == old or name.startswith(old + "."):
            return old, new
    return None


def old_dataset_use(module: cst.Module) -> tuple[cst.Call, str] | None:
    """The first call in ``module`` that only TF 1.3's contrib ``Dataset``
    understood, with why; None when there is none."""
    for node in cached_calls(module):
        if not isinstance(node.func, cst.Attribute):
            continue
        method = node.func.attr.value
        if method in _GONE_METHODS:
            return node, f"`.{method}(...)` is not a member of TF 2's tf.data.Dataset"
        if method == "map":
            keywords = [a.keyword.value for a in node.args if a.keyword is not None]
            positional = [a for a in node.args if a.keyword is None and not a.star]
            old = [k for k in keywords if k in _OLD_MAP_KEYWORDS]
            if old:
                return node, (f"`.map(..., {old[0]}=...)` is TF 1.3's contrib Dataset signature"
                              " (TF 2: num_parallel_calls=, and .prefetch() for the buffer)")
            if len(positional) >= 3:
                return node, ("`.map(f, threads, buffer)`: TF 2's third parameter is `deterministic`,"
                              " not TF 1.3's output_buffer_size")
    return None


def batch_dropping_remainder(apply: cst.Call, batching: cst.Call) -> cst.Call | None:
    """``ds.apply(batch_and_drop_remainder(n))`` -> ``ds.batch(n, drop_remainder=True)``,
    None when the call has another shape."""
    if not isinstance(apply.func, cst.Attribute) or apply.func.attr.value != "apply":
        return None
    if len(batching.args) != 1 or batching.args[0].star:
        return None
    arg = batching.args[0]
    if arg.keyword is not None and arg.keyword.value != "batch_size":
        return None
    call = cst.parse_expression("ds.batch(n, drop_remainder=True)")
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
    return call.with_changes(func=call.func.with_changes(value=apply.func.value),
                             args=[call.args[0].with_changes(value=arg.value), call.args[1]])


# --------------------------------------------------------------------------- regularizers


def numeric_constants(module: cst.Module) -> dict[str, int | float]:
    """Names bound exactly once in the whole module, at its top level, to a
    number literal (``RATE = 0.0001``): no parameter, loop variable or other
    assignment anywhere may give the name another value where it is read."""
    counts: dict[str, int] = {}
    values: dict[str, int | float] = {}

    class _Bindings(cst.CSTVisitor):
        def _target(self, target: cst.BaseExpression) -> None:
            if isinstance(target, cst.Name):
                counts[target.value] = counts.get(target.value, 0) + 1
            elif isinstance(target, (cst.Tuple, cst.List)):
                for el in target.elements:
                    self._target(el.value)
            elif isinstance(target, cst.StarredElement):
                self._target(target.value)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self._target(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self._target(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self._target(node.target)

        def visit_For(self, node: cst.For) -> None:
            self._target(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            self._target(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            self._target(node.target)

        def visit_Param(self, node: cst.Param) -> None:
            self._target(node.name)

        def visit_CompFor(self, node: cst.CompFor) -> None:
            self._target(node.target)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self._target(node.name)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            self._target(node.name)

        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            if node.asname is None and isinstance(node.name, cst.Name):
                self._target(node.name)

        def visit_Global(self, node: cst.Global) -> None:
            for item in node.names:
                counts[item.name.value] = counts.get(item.name.value, 0) + 2

    module.visit(_Bindings())
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                value = number(small.value, {})
                if isinstance(target, cst.Name) and value is not None:
                    values[target.value] = value
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def number(node: cst.BaseExpression, constants: dict[str, int | float]) -> int | float | None:
    """The value of a number literal (signed) or of a module constant."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.Float):
        return float(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        inner = number(node.expression, constants)
        if inner is None:
            return None
        return -inner if isinstance(node.operator, cst.Minus) else inner
    if isinstance(node, cst.Name):
        return constants.get(node.value)
    return None


def _penalty(kind: str, tf: str, scale: cst.BaseExpression, weights: cst.BaseExpression,
             scope: cst.BaseExpression | None) -> cst.Call:
    """``tf.multiply(scale, <l2_loss|sum of abs>(weights), name=scope)``."""
    if kind == "l2":
        norm = cst.parse_expression(f"{tf}.nn.l2_loss(x)").with_changes(args=[cst.Arg(weights)])
    else:
        absolute = cst.parse_expression(f"{tf}.abs(x)").with_changes(args=[cst.Arg(weights)])
        norm = cst.parse_expression(f"{tf}.reduce_sum(x)").with_changes(args=[cst.Arg(absolute)])
    name = scope if scope is not None else cst.SimpleString(f'"{kind}_regularizer"')
    call = cst.parse_expression(f"{tf}.multiply(a, b, name=c)")
    assert isinstance(call, cst.Call)
    return call.with_changes(args=[call.args[0].with_changes(value=scale),
                                   call.args[1].with_changes(value=norm),
                                   call.args[2].with_changes(value=name)])


def regularizer(call: cst.Call, name: str, tf: str, constants: dict[str, int | float],
                applied_to: cst.BaseExpression | None = None) -> tuple[cst.BaseExpression | None, str]:
    """TF 2 code for ``tf.contrib.layers.l{1,2}_regularizer(scale, scope)``:
    a function of the weights, or (``applied_to``) the penalty on them.
    ``(None, reason)`` when TF1's result cannot be reproduced exactly here."""
    kind = name.rpartition(".")[2][:2]
    args, why = bind_args(call, ("scale", "scope"))
    if args is None:
        return None, why
    if "scale" not in args:
        return None, "no `scale` is given"
    scale = args["scale"]
    scope = args.get("scope")
    if isinstance(scope, cst.Name) and scope.value == "None":
        scope = None
    value = number(scale, constants)
    spelled = dotted(scale) or "the scale"
    if value is None:
        return None, (f"its scale `{spelled}` is only known at run time, where TF1 checked it (an integer"
                      " or negative scale raised ValueError, 0.0 disabled the regularizer): with a"
                      f" positive float scale write `lambda w: {tf}.multiply(scale,"
                      f" {'tf.nn.l2_loss(w)' if kind == 'l2' else 'tf.reduce_sum(tf.abs(w))'})`")
    if isinstance(value, int):
        return None, f"its scale {value} is an integer: TF1 raised ValueError('scale cannot be an integer')"
    if value < 0:
        return None, f"its scale {value:g} is negative: TF1 raised ValueError"
    if value == 0:
        # TF1: "Scale of 0 disables regularizer." -> lambda _: None
        if applied_to is not None:
            return cst.Name("None"), ""
        return cst.Lambda(params=cst.Parameters(params=[cst.Param(cst.Name("weights"))]), body=cst.Name("None")), ""
    if applied_to is not None:
        return _penalty(kind, tf, scale, applied_to, scope), ""
    param = "weights" if spelled != "weights" else "tensor"
    body = _penalty(kind, tf, scale, cst.Name(param), scope)
    return cst.Lambda(params=cst.Parameters(params=[cst.Param(cst.Name(param))]), body=body), ""
