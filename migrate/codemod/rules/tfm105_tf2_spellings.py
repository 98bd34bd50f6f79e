"""TFM105 tf2-spellings: TF 1.x functions reached through ``tf.compat.v1`` -> their TF2 spelling."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid, first_line_code
from migrate.codemod.fastcst import transform
from migrate.codemod.rules.tfm101_tensorflow_import import attribute_chain

_V1 = "tensorflow.compat.v1."


@dataclass(frozen=True)
class Spelling:
    """A TF 1.x function and its TF2 counterpart, which computes the same for
    every argument the TF 1.x one takes except those in ``refuses``.

    ``v1``/``v2`` are the parameters in order (TF 2.21's signatures);
    ``renamed`` maps the TF 1.x name of a parameter to the TF2 one (the
    deprecated aliases TF 1.x kept); ``needs`` are TF2 parameters without the
    default TF 1.x gave them (the call must pass them)."""

    to: str
    v1: tuple[str, ...]
    v2: tuple[str, ...]
    renamed: dict[str, str] = field(default_factory=dict)
    needs: frozenset[str] = frozenset()
    refuses: frozenset[str] = frozenset()


def _reduction(name: str) -> Spelling:
    # TF 1.x: keepdims None -> False, reduction_indices/keep_dims are aliases
    return Spelling(name, ("input_tensor", "axis", "keepdims", "name", "reduction_indices", "keep_dims"),
                    ("input_tensor", "axis", "keepdims", "name"),
                    {"reduction_indices": "axis", "keep_dims": "keepdims"})


# Each TF 1.x function here calls its TF2 counterpart (or the same kernel with
# the same arguments) once its deprecated aliases are resolved; checked against
# TensorFlow 2.21's sources.
SPELLINGS: dict[str, Spelling] = {
    **{f"reduce_{op}": _reduction(f"reduce_{op}")
       for op in ("mean", "sum", "max", "min", "prod", "any", "all", "logsumexp")},
    **{op: Spelling(op, ("input", "axis", "name", "dimension", "output_type"),
                    ("input", "axis", "output_type", "name"), {"dimension": "axis"})
       for op in ("argmax", "argmin")},
    **{f"nn.{op}": Spelling(f"nn.{op}", ("logits", "axis", "name", "dim"), ("logits", "axis", "name"),
                            {"dim": "axis"})
       for op in ("softmax", "log_softmax")},
    **{op: Spelling(op, ("input", "name", "out_type"), ("input", "out_type", "name")) for op in ("shape", "size")},
    # TF 1.x fills a given `shape` from a shorter list; TF2 does not
    "constant": Spelling("constant", ("value", "dtype", "shape", "name", "verify_shape"),
                         ("value", "dtype", "shape", "name"), refuses=frozenset({"shape", "verify_shape"})),
    "expand_dims": Spelling("expand_dims", ("input", "axis", "name", "dim"), ("input", "axis", "name"),
                            {"dim": "axis"}, needs=frozenset({"axis"})),
    "squeeze": Spelling("squeeze", ("input", "axis", "name", "squeeze_dims"), ("input", "axis", "name"),
                        {"squeeze_dims": "axis"}),
    "transpose": Spelling("transpose", ("a", "perm", "name", "conjugate"), ("a", "perm", "conjugate", "name")),
    "gather": Spelling("gather", ("params", "indices", "validate_indices", "name", "axis", "batch_dims"),
                       ("params", "indices", "validate_indices", "axis", "batch_dims", "name")),
    "boolean_mask": Spelling("boolean_mask", ("tensor", "mask", "name", "axis"), ("tensor", "mask", "axis", "name")),
    "pad": Spelling("pad", ("tensor", "paddings", "mode", "name", "constant_values"),
                    ("tensor", "paddings", "mode", "constant_values", "name")),
    "norm": Spelling("norm", ("tensor", "ord", "axis", "keepdims", "name", "keep_dims"),
                     ("tensor", "ord", "axis", "keepdims", "name"), {"keep_dims": "keepdims"}),
    "convert_to_tensor": Spelling("convert_to_tensor", ("value", "dtype", "name", "preferred_dtype", "dtype_hint"),
                                  ("value", "dtype", "dtype_hint", "name"), {"preferred_dtype": "dtype_hint"}),
    "nn.moments": Spelling("nn.moments", ("x", "axes", "shift", "name", "keep_dims", "keepdims"),
                           ("x", "axes", "shift", "keepdims", "name"), {"keep_dims": "keepdims"}),
    "nn.in_top_k": Spelling("nn.in_top_k", ("predictions", "targets", "k", "name"),
                            ("targets", "predictions", "k", "name")),
    "nn.sparse_softmax_cross_entropy_with_logits": Spelling(
        "nn.sparse_softmax_cross_entropy_with_logits", ("labels", "logits", "name"), ("labels", "logits", "name")),
    # the cuDNN switch picks GPU kernels, whose results may differ
    "nn.conv2d": Spelling("nn.conv2d", ("input", "filter", "strides", "padding", "use_cudnn_on_gpu", "data_format",
                                        "dilations", "name", "filters"),
                          ("input", "filters", "strides", "padding", "data_format", "dilations", "name"),
                          {"filter": "filters"}, refuses=frozenset({"use_cudnn_on_gpu"})),
    "nn.convolution": Spelling("nn.convolution", ("input", "filter", "padding", "strides", "dilation_rate", "name",
                                                  "data_format", "filters", "dilations"),
                               ("input", "filters", "strides", "padding", "data_format", "dilations", "name"),
                               {"filter": "filters", "dilation_rate": "dilations"}),
    "nn.depthwise_conv2d": Spelling("nn.depthwise_conv2d", ("input", "filter", "strides", "padding", "rate", "name",
                                                            "data_format", "dilations"),
                                    ("input", "filter", "strides", "padding", "data_format", "dilations", "name"),
                                    {"rate": "dilations"}),
    # TF2 reads the rank from the input (TF 1.x took 4-D only): the same kernel for 4-D inputs,
    # an error where the rank is unknown
    **{f"nn.{op}": Spelling(f"nn.{op}", ("value", "ksize", "strides", "padding", "data_format", "name", "input"),
                            ("input", "ksize", "strides", "padding", "data_format", "name"), {"value": "input"})
       for op in ("max_pool", "avg_pool")},
    "set_random_seed": Spelling("random.set_seed", ("seed",), ("seed",)),
    "random.set_random_seed": Spelling("random.set_seed", ("seed",), ("seed",)),
    # tf.gfile's functions call tf.io.gfile's
    **{f"gfile.{old}": Spelling(f"io.gfile.{new}", (v1,), (v2,), {v1: v2}) for old, new, v1, v2 in (
        ("Exists", "exists", "filename", "path"), ("MakeDirs", "makedirs", "dirname", "path"),
        ("MkDir", "mkdir", "dirname", "path"), ("IsDirectory", "isdir", "dirname", "path"),
        ("ListDirectory", "listdir", "dirname", "path"), ("DeleteRecursively", "rmtree", "dirname", "path"),
        ("Remove", "remove", "filename", "path"), ("Glob", "glob", "filename", "pattern"))},
    "gfile.Copy": Spelling("io.gfile.copy", ("oldpath", "newpath", "overwrite"), ("src", "dst", "overwrite"),
                           {"oldpath": "src", "newpath": "dst"}),
    "gfile.Rename": Spelling("io.gfile.rename", ("oldname", "newname", "overwrite"), ("src", "dst", "overwrite"),
                             {"oldname": "src", "newname": "dst"}),
    "gfile.Walk": Spelling("io.gfile.walk", ("top", "in_order"), ("top", "topdown", "onerror"),
                           {"in_order": "topdown"}),
}
# TF 1.x's Variable makes the same resource variable as TF2's unless resource
# variables are switched off (disable_v2_behavior, disable_resource_variables,
# use_resource=False), or it is given what only graph collections had
_VARIABLE = Spelling("Variable", (
    "initial_value", "trainable", "collections", "validate_shape", "caching_device", "name", "variable_def",
    "dtype", "expected_shape", "import_scope", "constraint", "use_resource", "synchronization", "aggregation",
    "shape"), ("initial_value", "trainable", "validate_shape", "caching_device", "name", "variable_def", "dtype",
               "import_scope", "constraint", "synchronization", "aggregation", "shape"),
    refuses=frozenset({"collections", "variable_def", "expected_shape", "import_scope", "use_resource"}))
_REFERENCE_VARIABLES = ("disable_v2_behavior", "disable_resource_variables", "use_resource=False")
# a number filling the shape: TF 1.x and TF2 fill it alike
_CONSTANT_FILL = Spelling("constant", ("value", "dtype", "shape", "name", "verify_shape"),
                          ("value", "dtype", "shape", "name"), refuses=frozenset({"verify_shape"}))

# TF 1.x casts: to_X(x, name) is cast(x, X, name)
_CASTS = {"to_float": "float32", "to_double": "float64", "to_int32": "int32", "to_int64": "int64",
          "to_bfloat16": "bfloat16", "to_complex64": "complex64", "to_complex128": "complex128"}
# TF 1.x functions whose TF2 form is another expression
_DROPOUT = ("x", "keep_prob", "noise_shape", "seed", "name", "rate")
_XW_PLUS_B = ("x", "weights", "biases", "name")
_SOFTMAX_XENT = ("labels", "logits", "dim", "name", "axis")
_SPECIAL = frozenset({"nn.dropout", "nn.xw_plus_b", "nn.softmax_cross_entropy_with_logits", *_CASTS})


def _bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, cst.Arg] | None:
    """The call's arguments by parameter name; None when they cannot be read
    (``*args``/``**kwargs``, unknown or repeated parameters)."""
    bound: dict[str, cst.Arg] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None:
            if i >= len(params):
                return None
            name = params[i]
        else:
            name = arg.keyword.value
            if name not in params:
                return None
        if name in bound:
            return None
        bound[name] = arg
    return bound


def _keyword(arg: cst.Arg, name: str) -> cst.Arg:
    if arg.keyword is not None and arg.keyword.value == name:
        return arg
    return arg.with_changes(keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


def _arguments(call: cst.Call, spelling: Spelling) -> list[cst.Arg] | None:
    """The call's arguments for the TF2 function: positional while each stands
    where TF2 expects it, keywords (TF2's names) from the first that does not."""
    bound = _bind(call, spelling.v1)
    if bound is None or spelling.refuses & bound.keys():
        return None
    targets = [spelling.renamed.get(name, name) for name in bound]
    if len(set(targets)) != len(targets) or not spelling.needs <= set(targets) or not set(targets) <= set(
            spelling.v2):
        return None
    args: list[cst.Arg] = []
    positional = True
    for i, (arg, target) in enumerate(zip(call.args, targets)):
        positional = positional and arg.keyword is None and spelling.v2.index(target) == i
        args.append(arg if positional else _keyword(arg, target))
    return _last_comma(args, call)


def _last_comma(args: list[cst.Arg], call: cst.Call) -> list[cst.Arg]:
    """Keep the call's own trailing-comma choice on its last argument."""
    if args and call.args:
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)
        for i, arg in enumerate(args[:-1]):
            if arg.comma is cst.MaybeSentinel.DEFAULT:
                args[i] = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return args


_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)


def _one_minus(value: cst.BaseExpression) -> cst.BaseExpression:
    """``1 - value``: computed for a literal when the result is spelled as
    short as the literal (``1 - 0.5`` is ``0.5``; ``1 - 0.9`` is not ``0.1``
    in floating point, and stays written out)."""
    if type(value) in (cst.Float, cst.Integer):
        number = 1 - float(value.evaluated_value)
        text = repr(number)
        if len(text) <= len(value.value) + 1:
            return cst.Float(text)
    if type(value) not in _ATOMS and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BinaryOperation(left=cst.Integer("1"), operator=cst.Subtract(), right=value)


class Tf2Spellings(Rule):
    """Spell TF 1.x math and nn functions the TF2 way where TF2 computes the same.

    What it does:
        A call of a function TensorFlow 2 keeps under another signature, spelled
        ``tf.compat.v1.X`` (TFM101 spells it so), becomes the TF2 call:
        deprecated parameter names become TF2's (``reduction_indices`` ->
        ``axis``, ``keep_dims`` -> ``keepdims``, ``dim`` -> ``axis``), positional
        arguments TF2 orders differently become keywords, and
        ``nn.dropout(x, keep_prob)`` -> ``nn.dropout(x, rate=1 - keep_prob)``,
        ``nn.xw_plus_b(x, w, b)`` -> ``nn.bias_add(matmul(x, w), b)``,
        ``to_float(x)`` -> ``cast(x, tf.float32)``,
        ``nn.softmax_cross_entropy_with_logits(labels=y, ...)`` ->
        ``...(labels=tf.stop_gradient(y), ...)``, ``set_random_seed`` ->
        ``random.set_seed``, ``Variable(...)`` -> ``tf.Variable(...)`` where
        TF 1.x made the same resource variable.

    Why:
        Code a TF2 engineer maintains reads like TF2's guides; ``tf.compat.v1``
        marks code still waiting for migration. These functions need none.

    Example:
        ``tf.compat.v1.reduce_mean(x, reduction_indices=1)`` becomes
        ``tf.reduce_mean(x, axis=1)``.

    Fix safety:
        Safe: each TF 1.x function here calls its TF2 counterpart (or the same
        kernel) with the same arguments once its aliases are resolved
        (TensorFlow 2.21's sources); TF 1.x's softmax cross-entropy stops the
        gradient into the labels, which the rewrite keeps with
        ``tf.stop_gradient``. A call is left as it is when its arguments cannot
        all be read (``*args``, ``**kwargs``), when it passes a parameter whose
        TF 1.x meaning TF2 lacks (``constant(shape=...)`` of a list, which TF 1.x
        fills from a shorter list; ``conv2d(use_cudnn_on_gpu=...)``), or lacks one TF2
        requires. ``Variable`` is left where the program switches resource
        variables off (TF 1.x then made reference variables) or passes what only
        graph collections had (``collections=``, ``use_resource=``). ``nn.max_pool``/``avg_pool`` in TF2 read the rank from the
        input, and raise where it is unknown (the kernel is TF 1.x's for the 4-D
        inputs TF 1.x took). Only op names change (``ToFloat`` -> ``Cast``), never
        variable names.
    """

    code = "TFM105"
    name = "tf2-spellings"
    # not the names it rewrites: other rules write such calls into files that had none
    triggers = ("tensorflow",)

    VALID = (
        Valid(
            """
            import tensorflow as tf

            loss = tf.reduce_mean(tf.square(y - prediction), axis=1)
            probabilities = tf.nn.softmax(logits)
            """
        ),
        Valid(
            # arguments that cannot be read, or that TF2 has no meaning for
            """
            import tensorflow as tf

            total = tf.compat.v1.reduce_sum(*parts)
            filled = tf.compat.v1.constant([1, 2], shape=[2, 3])
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            loss = tf.compat.v1.reduce_mean(tf.square(y - prediction), reduction_indices=[1], keep_dims=True)
            accuracy = tf.compat.v1.reduce_mean(tf.compat.v1.to_float(tf.equal(
                tf.compat.v1.argmax(logits, 1), tf.compat.v1.argmax(labels, dimension=1))))
            """,
            """
            import tensorflow as tf

            loss = tf.reduce_mean(tf.square(y - prediction), axis=[1], keepdims=True)
            accuracy = tf.reduce_mean(tf.cast(tf.equal(
                tf.argmax(logits, 1), tf.argmax(labels, axis=1)), tf.float32))
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            hidden = tf.compat.v1.nn.dropout(tf.compat.v1.nn.xw_plus_b(x, w, b), keep_prob)
            kept = tf.compat.v1.nn.dropout(hidden, 0.5)
            wide = tf.compat.v1.nn.dropout(hidden, 0.9)
            """,
            """
            import tensorflow as tf

            hidden = tf.nn.dropout(tf.nn.bias_add(tf.matmul(x, w), b), rate=1 - keep_prob)
            kept = tf.nn.dropout(hidden, rate=0.5)
            wide = tf.nn.dropout(hidden, rate=1 - 0.9)
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            tf.compat.v1.set_random_seed(1)
            xent = tf.compat.v1.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y, dim=1)
            correct = tf.compat.v1.nn.in_top_k(logits, labels, 1)
            """,
            """
            import tensorflow as tf

            tf.random.set_seed(1)
            xent = tf.nn.softmax_cross_entropy_with_logits(labels=tf.stop_gradient(y_), logits=y, axis=1)
            correct = tf.nn.in_top_k(predictions=logits, targets=labels, k=1)
            """,
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        self._root = self.ctx.names.root_alias() if self.ctx.names.any else None
        if self._root is None:
            return module  # no `import tensorflow as tf` to spell TF2 names from
        self._changed: Counter[str] = Counter()
        self._calls: list[cst.Call] = []
        new = transform(module, self)
        if self._changed:
            done = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(self._changed.items()))
            # located at a call the file itself has (other rules write such calls too), else at its top
            where = next((call for call in self._calls if self._in_source(call)), module.body[0])
            self.report(where, f"TF 1.x calls now spelled the TF2 way, computing the same: {done}",
                        fixed=True, severity="info")
        return new

    def _in_source(self, call: cst.Call) -> bool:
        text = first_line_code(call)[0].strip().splitlines()
        return bool(text) and (text[0] in self.ctx.source or text[0].replace("tf.compat.v1.", "tf.") in self.ctx.source)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        full = self.ctx.names.full_name(original.func)
        if full is None or not full.startswith(_V1):
            return updated
        name = full[len(_V1):]
        spelling = SPELLINGS.get(name)
        if name == "constant" and updated.args and _is_number(updated.args[0].value):
            spelling = _CONSTANT_FILL
        elif name == "Variable" and not any(switch in self.ctx.source for switch in _REFERENCE_VARIABLES):
            spelling = _VARIABLE
        if spelling is not None:
            args = _arguments(updated, spelling)
            new = None if args is None else updated.with_changes(func=self._tf(spelling.to), args=args)
        elif name in _SPECIAL:
            new = self._special(name, updated)
        else:
            return updated
        if new is None:
            return updated
        self._changed[name] += 1
        self._calls.append(original)
        return new

    def _tf(self, name: str) -> cst.BaseExpression:
        return attribute_chain(f"{self._root}.{name}")

    def _special(self, name: str, call: cst.Call) -> cst.BaseExpression | None:
        if name in _CASTS:
            bound = _bind(call, ("x", "name"))
            if bound is None or "x" not in bound:
                return None
            args = [_plain(bound["x"]), cst.Arg(self._tf(_CASTS[name]))]
            if "name" in bound:
                args.append(_keyword(bound["name"], "name"))
            return call.with_changes(func=self._tf("cast"), args=_last_comma(args, call))
        if name == "nn.xw_plus_b":
            bound = _bind(call, _XW_PLUS_B)
            if bound is None or not {"x", "weights", "biases"} <= bound.keys():
                return None
            product = cst.Call(self._tf("matmul"), args=[
                _plain(bound["x"], comma=True), _plain(bound["weights"])])
            args = [cst.Arg(product, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    _plain(bound["biases"])]
            if "name" in bound:
                args.append(_keyword(bound["name"], "name"))
            return call.with_changes(func=self._tf("nn.bias_add"), args=_last_comma(args, call))
        if name == "nn.dropout":
            bound = _bind(call, _DROPOUT)
            if bound is None or "x" not in bound or ("keep_prob" in bound) == ("rate" in bound):
                return None
            args = []
            for arg, param in zip(call.args, bound):
                if param == "keep_prob":
                    arg = _keyword(arg, "rate").with_changes(value=_one_minus(arg.value))
                elif param != "x":
                    arg = _keyword(arg, param)
                args.append(arg)
            return call.with_changes(func=self._tf("nn.dropout"), args=_last_comma(args, call))
        # nn.softmax_cross_entropy_with_logits: TF 1.x stops the gradient into the labels
        bound = _bind(call, _SOFTMAX_XENT)
        if bound is None or "labels" not in bound or ("dim" in bound and "axis" in bound):
            return None
        args = []
        for arg, param in zip(call.args, bound):
            arg = _keyword(arg, "axis" if param == "dim" else param)
            if param == "labels":
                arg = arg.with_changes(value=cst.Call(self._tf("stop_gradient"), args=[cst.Arg(arg.value)]))
            args.append(arg)
        return call.with_changes(func=self._tf("nn.softmax_cross_entropy_with_logits"),
                                 args=_last_comma(args, call))


def _is_number(node: cst.BaseExpression) -> bool:
    if type(node) is cst.UnaryOperation and type(node.operator) in (cst.Minus, cst.Plus):
        node = node.expression
    return type(node) in (cst.Integer, cst.Float)


def _plain(arg: cst.Arg, comma: bool = False) -> cst.Arg:
    """``arg``'s value as a positional argument, followed by ``, `` or nothing."""
    return arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT, comma=cst.Comma(
        whitespace_after=cst.SimpleWhitespace(" ")) if comma else cst.MaybeSentinel.DEFAULT)
