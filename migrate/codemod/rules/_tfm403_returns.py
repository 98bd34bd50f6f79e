"""TFM403 plan: what the model_fn's modes return besides the loss, and the checks
of each: the TRAIN mode's summaries (``tf.summary.scalar``/``histogram``, written
by the loop), the PREDICT mode's exported outputs or predictions, the EVAL
mode's ``eval_metric_ops`` as the arguments of Keras metrics computing the same
running values. Used by :mod:`_tfm403_plan`.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._equivalents import bind_args
from migrate.codemod.rules._serving_export import signature_key
from migrate.codemod.rules._tfm403_analysis import Decline


def is_mode(node: cst.BaseExpression, key: str, qualname) -> bool:
    return qualname(node) == f"estimator.ModeKeys.{key}"


def is_mode_test(test: cst.BaseExpression, key: str, qualname) -> bool:
    """``mode == tf.estimator.ModeKeys.<key>`` (either side)."""
    return (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)
            and any(is_mode(side, key, qualname) for side in (test.left, test.comparisons[0].comparator)))


def given(value: cst.BaseExpression | None) -> bool:
    return value is not None and not (isinstance(value, cst.Name) and value.value == "None")


_SUMMARIES = {"summary.scalar": ("scalar", ("name", "tensor", "collections", "family")),
              "summary.histogram": ("histogram", ("name", "values", "collections", "family"))}


def train_summaries(statements, qualname, removed) -> list:
    """``tf.summary.scalar("accuracy", value)`` / ``histogram`` statements the model_fn
    runs in TRAIN mode (its own statements, or its ``if mode == TRAIN:`` branch's):
    (statement, kind, tag, value) each; the statements go (the loop writes them from
    the values the TRAIN mode returns, every save_summary_steps, as the Estimator's
    summary hook did). Their tags are TF1's: no name scope around them."""
    found = []
    for st, parent in statements:
        call = C.single_expr(st) if isinstance(st, cst.SimpleStatementLine) else None
        q = qualname(call.func) if isinstance(call, cst.Call) else None
        if q not in _SUMMARIES:
            continue
        if parent is not None and not (is_mode_test(parent.test, "TRAIN", qualname)
                                       and any(inner is st for inner in C.body_of(parent.body))):
            raise Decline(st, "a summary the model_fn writes outside its TRAIN mode (the Estimator's evaluation"
                          " wrote only eval_metric_ops)", hint="move it to the TRAIN branch, or drop it")
        kind, names = _SUMMARIES[q]
        args, why = bind_args(call, names)
        if args is None:
            raise Decline(call, why)
        if any(given(args.get(key)) for key in ("collections", "family")):
            raise Decline(call, "a summary with collections or a family (its tag then differs)")
        tag, value = args.get("name"), args.get(names[1])
        if not isinstance(tag, cst.SimpleString) or value is None:
            raise Decline(call, "a summary whose tag is not a string literal")
        if tag.evaluated_value == "loss":
            raise Decline(call, "a summary tagged \"loss\", the tag of the Estimator's own loss summary, which the"
                          " migrated loop writes (TF1 tagged this one loss_1)", hint="drop it, or rename its tag")
        if any(C.code_of(tag) == C.code_of(other) for _, _, other, _ in found):
            raise Decline(call, f"two summaries tagged {C.code_of(tag)} (TF1 renamed the second)")
        for inner in C.calls_in(value):
            if (qualname(inner.func) or "").startswith("metrics."):
                raise Decline(call, "the summary writes a tf.metrics value, a running aggregate of the TRAIN"
                              " batches with no counterpart in the migrated step",
                              hint="write the batch's value instead, or a tf.keras.metrics object from the loop")
        removed[id(st)] = None
        found.append((st, kind, tag, value))
    return found


def predict_outputs(args, spec, locals_bound, statements, qualname, removed) -> tuple[cst.BaseExpression, list[str]]:
    """The PREDICT EstimatorSpec -> (what the PREDICT mode returns: the outputs
    its export signatures served, as a dict; the signature keys). The Estimator
    exported ``export_outputs`` (``{"serving_default": PredictOutput(predictions)}``
    when none), a single one also as the ``serving_default``."""

    def bound_once(node, what):
        if not isinstance(node, cst.Name):
            return node
        binders = locals_bound.get(node.value, [])
        if len(binders) != 1 or C.assignment(binders[0])[0] != [node.value]:
            raise Decline(node, f"`{node.value}` ({what}) is not bound once in the model_fn")
        return binders[0]

    def resolved(node, what):
        binder = bound_once(node, what)
        if binder is node:
            return node
        others = [st for st, _ in statements if st is not binder and node.value in C.names_used(st)
                  and not any(isinstance(n, cst.Return) for n in C.walk(st))]
        if others:
            raise Decline(others[0], f"`{node.value}` ({what}) is also read here")
        removed[id(binder)] = None
        return C.assignment(binder)[1]

    outputs_by_key: list[tuple[str, cst.BaseExpression]] = []
    export_outputs = args.get("export_outputs")
    if given(export_outputs):
        found = resolved(export_outputs, "export_outputs")
        if not isinstance(found, cst.Dict) or not all(isinstance(el, cst.DictElement) for el in found.elements):
            raise Decline(export_outputs, "export_outputs is not a dict written in the model_fn")
        for el in found.elements:
            key = signature_key(el.key)
            if key is None:
                raise Decline(el.key, "an export_outputs key that is neither a string literal nor a"
                              " signature_constants name")
            output = resolved(el.value, "an export output")
            q = qualname(output.func) if isinstance(output, cst.Call) else None
            if q != "estimator.export.PredictOutput":
                raise Decline(el.value, f"export_outputs[{key!r}] is no PredictOutput: tf.saved_model.save writes"
                              " Predict signatures only (classification and regression signatures have no TF2"
                              " counterpart)", hint="export a Predict signature, or export by hand")
            bound, why = bind_args(output, ("outputs",))
            if bound is None or "outputs" not in bound:
                raise Decline(output, why or "a PredictOutput without outputs")
            outputs_by_key.append((key, bound["outputs"]))
    else:
        if not given(args.get("predictions")):
            raise Decline(spec, "the PREDICT EstimatorSpec has neither predictions nor export_outputs to export")
        outputs_by_key.append(("serving_default", args["predictions"]))
    if len({C.code_of(value) for _, value in outputs_by_key}) > 1:
        raise Decline(export_outputs, "export_outputs with different outputs per signature: the migration exports"
                      " one serving function", hint="export the other signatures by hand")
    keys = [key for key, _ in outputs_by_key]
    if "serving_default" not in keys:
        if len(keys) > 1:
            raise Decline(export_outputs, "several export_outputs and none the serving_default (the Estimator"
                          " refused to export them)")
        keys.append("serving_default")
    outputs = outputs_by_key[0][1]
    target = outputs
    if isinstance(outputs, cst.Name):
        binder = bound_once(outputs, "the exported outputs")
        target = C.assignment(binder)[1] if binder is not outputs else outputs
    if not isinstance(target, cst.Dict):
        # PredictOutput of a single tensor: its output key is "output"
        outputs = cst.Dict([cst.DictElement(cst.SimpleString('"output"'), outputs)])
    return outputs, keys


# tf.metrics.X -> (Keras metric, TF1 parameters passed to update_state in order, and its keyword for
# weights). Both compute the same running value: accuracy = mean(labels == predictions), mean = mean(values),
# root_mean_squared_error = sqrt(mean over every element of (predictions - labels)^2), labels [B] and
# predictions [B, 1] made the same rank alike (TF1 squeezed the predictions, Keras expands the labels).
TF1_METRICS = {
    "metrics.accuracy": ("tf.keras.metrics.Accuracy()", ("labels", "predictions"), "weights"),
    "metrics.mean": ("tf.keras.metrics.Mean()", ("values",), "weights"),
    "metrics.root_mean_squared_error": ("tf.keras.metrics.RootMeanSquaredError()", ("labels", "predictions"),
                                        "weights"),
}
# tf.metrics.X of an element-wise error, unweighted -> tf.keras.metrics.Mean of that error over every
# element of the labels and predictions flattened: TF1 squeezed a trailing dimension of 1 ([B] and [B, 1]
# pair up element by element, as flattened), and shapes it would have broadcast instead fail to pair.
TF1_ELEMENTWISE_MEANS = {
    "metrics.mean_squared_error": "tf.math.squared_difference(tf.reshape({labels}, [-1]), tf.reshape({predictions}, [-1]))",
    "metrics.mean_absolute_error": "tf.abs(tf.reshape({predictions}, [-1]) - tf.reshape({labels}, [-1]))",
}
TF1_METRICS.update({q: ("tf.keras.metrics.Mean()", ("labels", "predictions"), "weights")
                    for q in TF1_ELEMENTWISE_MEANS})
_METRIC_PARAMS = {
    "metrics.mean_squared_error": ("labels", "predictions", "weights", "metrics_collections", "updates_collections",
                                   "name"),
    "metrics.mean_absolute_error": ("labels", "predictions", "weights", "metrics_collections",
                                    "updates_collections", "name"),
    "metrics.accuracy": ("labels", "predictions", "weights", "metrics_collections", "updates_collections", "name"),
    "metrics.mean": ("values", "weights", "metrics_collections", "updates_collections", "name"),
    "metrics.root_mean_squared_error": ("labels", "predictions", "weights", "metrics_collections",
                                        "updates_collections", "name"),
}


def metric_inputs(ops: cst.BaseExpression, locals_bound, qualname, removed, metrics: dict[str, str]):
    """``{"accuracy": tf.metrics.accuracy(labels=labels, predictions=classes)}`` ->
    ``{"accuracy": (labels, classes)}``, the arguments of the Keras metric's
    ``update_state`` (``metrics`` gets ``"accuracy" -> tf.keras.metrics.Accuracy()``).
    A dict bound to a name in the model_fn is rewritten where it is bound."""
    binding = None
    if isinstance(ops, cst.Name):
        binders = locals_bound.get(ops.value, [])
        if len(binders) != 1 or C.assignment(binders[0])[0] != [ops.value]:
            raise Decline(ops, f"`{ops.value}` (eval_metric_ops) is not bound once in the model_fn")
        binding = binders[0]
        ops = C.assignment(binding)[1]
    if not isinstance(ops, cst.Dict):
        raise Decline(ops, "eval_metric_ops is not a dict written in the model_fn")
    elements = []
    for el in ops.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
            raise Decline(ops, "eval_metric_ops with keys that are not string literals")
        call = el.value
        if isinstance(call, cst.Name):  # `accuracy = tf.metrics.accuracy(...)`, then {"accuracy": accuracy}
            binders = locals_bound.get(call.value, [])
            if (len(binders) == 1 and C.assignment(binders[0])[0] == [call.value]
                    and isinstance(C.assignment(binders[0])[1], cst.Call)
                    and qualname(C.assignment(binders[0])[1].func) in TF1_METRICS):
                removed[id(binders[0])] = None
                call = C.assignment(binders[0])[1]
        q = qualname(call.func) if isinstance(call, cst.Call) else None
        if q not in TF1_METRICS:
            raise Decline(el.value, f"eval_metric_ops[{C.code_of(el.key)}] is no tf.metrics function with a Keras"
                          " metric computing the same value (accuracy, mean, root_mean_squared_error,"
                          " mean_squared_error, mean_absolute_error)",
                          hint="compute it with a tf.keras.metrics object in the evaluation")
        keras, params, weights = TF1_METRICS[q]
        bound, why = bind_args(call, _METRIC_PARAMS[q])
        if bound is None:
            raise Decline(call, why)
        if any(given(bound.get(k)) for k in ("metrics_collections", "updates_collections")):
            raise Decline(call, "metrics collections are not carried")
        if any(p not in bound for p in params):
            raise Decline(call, f"tf.{q} without {', '.join(p for p in params if p not in bound)}")
        inputs = [bound[p] for p in params] + ([bound[weights]] if given(bound.get(weights)) else [])
        if q in TF1_ELEMENTWISE_MEANS:
            if given(bound.get(weights)):
                raise Decline(call, f"tf.{q} with weights: they broadcast against the error's shape, which the"
                              " flattened error the Keras metric averages does not keep")
            inputs = [C.expr(TF1_ELEMENTWISE_MEANS[q].format(labels=C.code_of(bound["labels"]),
                                                             predictions=C.code_of(bound["predictions"])))]
        metrics[el.key.value] = keras
        elements.append(el.with_changes(value=cst.Tuple(
            [cst.Element(v, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
             for v in inputs[:-1]] + [cst.Element(inputs[-1], comma=cst.Comma() if len(inputs) == 1
                                                else cst.MaybeSentinel.DEFAULT)])))
    new = ops.with_changes(elements=elements)
    if binding is None:
        return new
    removed[id(binding)] = binding.deep_replace(ops, new)
    return cst.Name(C.assignment(binding)[0][0])
