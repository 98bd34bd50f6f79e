"""TFM403 export: the Estimator job's SavedModel exports (analysis and emitted code).

The shapes Estimator jobs export their trained model in::

    def serving_input_receiver_fn():
        inputs = {"image": tf.placeholder(tf.float32, [None, 28, 28, 1])}
        return tf.estimator.export.ServingInputReceiver(inputs, inputs)

    tf.estimator.train_and_evaluate(est, train_spec, tf.estimator.EvalSpec(
        eval_input_fn, exporters=tf.estimator.FinalExporter("mnist", serving_input_receiver_fn)))
    est.export_savedmodel(export_dir, serving_input_receiver_fn)   # or export_saved_model

    # or a parsing receiver of serialized tf.Examples (the "examples" input), or the raw
    # receiver of placeholders made beside the export
    image = tf.placeholder(tf.float32, [None, 28, 28])
    est.export_savedmodel(export_dir, tf.estimator.export.build_raw_serving_input_receiver_fn({"image": image}))

The Estimator built the model_fn's PREDICT graph on the receiver's features,
restored the latest checkpoint into it and saved a SavedModel (tag ``serve``)
whose signatures are the PREDICT ``EstimatorSpec``'s ``export_outputs`` (its
``predictions`` when there are none; one signature is also the
``serving_default``), in a new directory under the export directory named by
the time in seconds. Exporters of the EvalSpec did the same after evaluations
into ``<model_dir>/export/<name>``: ``FinalExporter`` after the final one (the
global step at max_steps), ``LatestExporter`` after each, keeping the newest
``exports_to_keep``.

In TF2 the same export is a ``tf.function`` per receiver, its input signature
the placeholders' ``tf.TensorSpec``s named by the receiver's keys, calling the
model in PREDICT mode (``mode="infer"``) on the features, saved by
``tf.saved_model.save`` with the model's variables (the trained ones: the
export runs after the loop, or after an evaluation, as the Estimator's did).

The receiver fn's own statements computing its features from its placeholders
(``tf.parse_example`` of serialized ``tf.Example``s, reshapes) run in the
serving function, its placeholders become the function's parameters.

Declined, with where and why: a receiver that is not a function of this module
(nor a raw receiver of placeholders), a placeholder that is no receiver tensor,
features whose structure (dict or single tensor) cannot be told, receiver alternatives, ``assets_extra``,
``as_text``, an export of a given ``checkpoint_path``, classification and
regression outputs (``tf.saved_model.save`` writes Predict signatures only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._equivalents import bind_args
from migrate.codemod.rules._tfm403_analysis import Decline

EXPORT_METHODS = ("export_savedmodel", "export_saved_model")
_EXPORT_ARGS = ("export_dir_base", "serving_input_receiver_fn", "assets_extra", "as_text", "checkpoint_path",
                "strip_default_attrs")
_EXPORTERS = {
    "estimator.FinalExporter": ("final", ("name", "serving_input_receiver_fn", "assets_extra", "as_text")),
    "estimator.LatestExporter": ("latest", ("name", "serving_input_receiver_fn", "assets_extra", "as_text",
                                            "exports_to_keep")),
}
_RECEIVER = ("features", "receiver_tensors", "receiver_tensors_alternatives")
_RAW_RECEIVER_FN = "estimator.export.build_raw_serving_input_receiver_fn"
_PARSING_RECEIVER_FN = "estimator.export.build_parsing_serving_input_receiver_fn"


@dataclass
class ServingInputs:
    """What a serving_input_receiver_fn feeds the model_fn: the signature's
    inputs (key code, shape code, dtype code), and how the features are made of them."""

    inputs: list[tuple[str, str, str]]
    source: str  # the receiver fn's code, to tell receivers apart
    function_name: str = ""  # the emitted serving function
    params: list[str] = field(default_factory=list)  # the serving function's, one per input
    body: list[str] = field(default_factory=list)  # the receiver fn's statements computing the features
    features_code: str = ""  # what the model is called on


@dataclass
class Exporter:
    """An exporter of the EvalSpec: ``kind`` is "final" or "latest"."""

    node: cst.Call
    kind: str
    name: str  # code of its name
    serving: ServingInputs
    keep: str | None = None  # LatestExporter's exports_to_keep (None: keep all)


@dataclass
class ExportCall:
    """``est.export_savedmodel(base, receiver_fn)``: the statement and what it exports."""

    line: cst.SimpleStatementLine
    call: cst.Call
    base: str
    serving: ServingInputs


@dataclass
class Exports:
    calls: list[ExportCall] = field(default_factory=list)
    exporters: list[Exporter] = field(default_factory=list)

    def servings(self) -> list[ServingInputs]:
        out: list[ServingInputs] = []
        for s in [c.serving for c in self.calls] + [e.serving for e in self.exporters]:
            if not any(o.source == s.source for o in out):
                out.append(s)
        return out

    def __bool__(self) -> bool:
        return bool(self.calls or self.exporters)


def _given(value) -> bool:
    return value is not None and not (isinstance(value, cst.Name) and value.value in ("None", "False"))


class ExportFinder:
    """Reads the exports of a job; ``functions`` are the module's, ``statements``
    the job's block, ``qualname`` the rule's name lookup."""

    def __init__(self, functions: dict[str, cst.FunctionDef], statements, qualname):
        self.functions = functions
        self.statements = statements
        self.q = qualname
        self.servings: dict[str, ServingInputs] = {}
        # the statements of the job's block binding what the exports read (exporters, raw
        # receivers, their placeholders): they go with the exports
        self.used: list[cst.BaseStatement] = []

    def _bound(self, name: str, statements) -> cst.BaseExpression | None:
        found = [st for st in statements if isinstance(st, cst.SimpleStatementLine) and name in C.assignment(st)[0]]
        if len(found) != 1 or C.assignment(found[0])[0] != [name]:
            return None
        if statements is self.statements and not any(st is found[0] for st in self.used):
            self.used.append(found[0])
        return C.assignment(found[0])[1]

    def serving(self, node: cst.BaseExpression | None, where: cst.CSTNode) -> ServingInputs:
        if node is None:
            raise Decline(where, "an export without a serving_input_receiver_fn")
        source = C.code_of(node)
        if source in self.servings:
            return self.servings[source]
        value = node
        if isinstance(node, cst.Name) and node.value not in self.functions:
            value = self._bound(node.value, self.statements)
            if value is None:
                raise Decline(node, f"the serving_input_receiver_fn `{node.value}` is neither a function of this"
                              " module nor bound once where the job runs",
                              hint="define it as a module-level function returning a ServingInputReceiver")
            if isinstance(value, cst.Name) and value.value in self.functions:
                source = value.value
        if isinstance(value, cst.Name) and value.value in self.functions:
            found = self._receiver_fn(self.functions[value.value])
        elif isinstance(value, cst.Call) and self.q(value.func) == _RAW_RECEIVER_FN:
            found = self._raw(value)
        elif isinstance(value, cst.Call) and self.q(value.func) == _PARSING_RECEIVER_FN:
            found = self._parsing(value)
        else:
            raise Decline(node, f"the serving_input_receiver_fn `{C.code_of(node)}` is not a function of this"
                          " module (nor build_raw_serving_input_receiver_fn of placeholders)",
                          hint="define it as a module-level function returning a ServingInputReceiver")
        found.source = source
        self.servings[C.code_of(node)] = found
        return found

    def _placeholder(self, node: cst.BaseExpression, statements, raw: bool) -> tuple[str, str]:
        call, where = node, node
        if isinstance(node, cst.Name):
            call = self._bound(node.value, statements)
            where = next((st for st in statements if isinstance(st, cst.SimpleStatementLine)
                          and node.value in C.assignment(st)[0]), node)
        if not (isinstance(call, cst.Call) and self.q(call.func) == "placeholder"):
            raise Decline(where, f"the serving input `{C.code_of(node)}` is not a tf.placeholder: the TF2"
                          " signature takes tensors of a shape and dtype, which only a placeholder gives here")
        args, why = bind_args(call, ("dtype", "shape", "name"))
        if args is None or "dtype" not in args:
            raise Decline(call, why or "a placeholder without a dtype")
        shape = args.get("shape")
        shape_code = C.code_of(shape) if _given(shape) else "None"
        if raw and _given(shape):
            # build_raw_serving_input_receiver_fn made each placeholder anew, batch dimension None
            if not isinstance(shape, (cst.List, cst.Tuple)) or not shape.elements:
                raise Decline(shape, "the raw receiver's placeholder shape is not a literal list: the batch"
                              " dimension the receiver made None cannot be written")
            shape_code = "[None" + "".join(", " + C.code_of(el.value) for el in shape.elements[1:]) + "]"
        return shape_code, C.code_of(args["dtype"])

    def _dict(self, node: cst.BaseExpression, statements, what: str) -> cst.Dict:
        value, where = node, node
        if isinstance(node, cst.Name):
            value = self._bound(node.value, statements)
            where = next((st for st in statements if isinstance(st, cst.SimpleStatementLine)
                          and node.value in C.assignment(st)[0]), node)
        if isinstance(value, cst.Call):
            raise Decline(where, f"the receiver's {what} are computed (`{C.code_of(value.func)}(...)`), not a dict"
                          " of its placeholders: the serving function would have to compute them (parsing"
                          " tf.Examples, transformations)",
                          hint="export by hand: a tf.function computing the features, then the model")
        if not isinstance(value, cst.Dict) or any(not isinstance(el, cst.DictElement) for el in value.elements):
            raise Decline(where, f"the receiver's {what} are not a dict written in the serving_input_receiver_fn"
                          " (a single tensor?)", hint="export by hand with tf.saved_model.save")
        return value

    def _receiver_fn(self, fn: cst.FunctionDef) -> ServingInputs:
        """The receiver fn's statements become the serving function's: its placeholders
        the function's parameters, its features what the model is called on."""
        if fn.params.params or fn.params.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or fn.params.star_kwarg:
            raise Decline(fn, "the serving_input_receiver_fn takes parameters")
        statements = list(C.body_of(fn.body))
        returns = [st for st in C.walk(fn.body) if isinstance(st, cst.Return)]
        last = statements[-1]
        if len(returns) != 1 or not (isinstance(last, cst.SimpleStatementLine) and last.body[0] is returns[0]):
            raise Decline(fn, "the serving_input_receiver_fn does not end in its one return")
        receiver = returns[0].value
        if not (isinstance(receiver, cst.Call) and self.q(receiver.func) == "estimator.export.ServingInputReceiver"):
            raise Decline(last, "the serving_input_receiver_fn returns no tf.estimator.export."
                          "ServingInputReceiver(...) (a TensorServingInputReceiver or one of another module)",
                          hint="export by hand with tf.saved_model.save")
        args, why = bind_args(receiver, _RECEIVER)
        if args is None:
            raise Decline(receiver, why)
        if _given(args.get("receiver_tensors_alternatives")):
            raise Decline(last, "receiver_tensors_alternatives: signatures on other inputs, not carried by the"
                          " migration")
        if "features" not in args or "receiver_tensors" not in args:
            raise Decline(last, "a ServingInputReceiver without features and receiver_tensors")
        body = statements[:-1]
        bound = {name: st for st in body if isinstance(st, cst.SimpleStatementLine)
                 for name in C.assignment(st)[0]}
        received = args["receiver_tensors"]
        if isinstance(received, cst.Name) and received.value in bound and isinstance(
                C.assignment(bound[received.value])[1], cst.Dict):
            received = C.assignment(bound[received.value])[1]
        elements = ([(C.code_of(el.key), el.value) for el in received.elements if isinstance(el, cst.DictElement)]
                    if isinstance(received, cst.Dict) else [('"input"', received)])
        if isinstance(received, cst.Dict) and len(elements) != len(received.elements):
            raise Decline(last, "the receiver tensors are a dict with ** entries")
        taken = set().union(*(C.names_used(st) for st in statements))
        inputs: list[tuple[str, str, str]] = []
        params: list[str] = []
        replace: dict[int, cst.CSTNode | None] = {}
        placeholders: set[int] = set()
        for key, value in elements:
            shape, dtype = self._placeholder(value, body, raw=False)
            if isinstance(value, cst.Name):
                param = value.value  # the placeholder's name: the function's parameter
                replace[id(bound[value.value])] = None
                placeholders.add(id(C.assignment(bound[value.value])[1]))
            else:
                param = _identifier(key, taken)
                replace[id(value)] = cst.Name(param)
                placeholders.add(id(value))
            taken.add(param)
            params.append(param)
            inputs.append((key, shape, dtype))
        others = [c for c in C.calls_in(fn) if self.q(c.func) == "placeholder" and id(c) not in placeholders]
        if others:
            raise Decline(others[0], "a placeholder of the serving_input_receiver_fn that is not one of its receiver"
                          " tensors: the serving signature would not feed it")
        features = args["features"]
        structure = features
        if isinstance(features, cst.Name) and features.value in bound:
            structure = C.assignment(bound[features.value])[1]
        if isinstance(structure, cst.Call) and (self.q(structure.func) or "").endswith("parse_example"):
            structure = cst.Dict([])  # parse_example returns a dict of its features
        if isinstance(features, cst.Name) and features.value in params:
            structure = None  # a placeholder itself: a single tensor
        if not isinstance(structure, cst.Dict):
            if not (isinstance(features, cst.Name) and features.value in params):
                raise Decline(last, f"the receiver's features, `{C.code_of(features)}`, are not a dict (or"
                              " parse_example's) the migration can tell from a single tensor",
                              hint="return a dict of features, or export by hand")
            # ServingInputReceiver made a single tensor the feature "feature"
            features = cst.Dict([cst.DictElement(cst.SimpleString('"feature"'), features)])

        class _Replace(cst.CSTTransformer):
            def on_leave(self, original, updated):
                if id(original) in replace:
                    new = replace[id(original)]
                    return cst.RemoveFromParent() if new is None else new
                return updated

        kept = [st.visit(_Replace()) for st in body if id(st) not in replace or replace[id(st)] is not None]
        features_code = C.code_of(features.visit(_Replace()))
        # a dict bound only to be the receiver tensors is not needed to serve
        needed = C.names_used(C.expr(features_code))
        for st in reversed(list(kept)):
            names = C.assignment(st)[0]
            if names and not set(names) & needed and not any(
                    isinstance(n, cst.Call) for n in C.walk(C.assignment(st)[1] or cst.Name("x"))):
                kept.remove(st)
                continue
            needed |= C.names_used(st)
        return ServingInputs(inputs, "", params=params, body=[C.code_of(cst.Module(body=[st])).strip("\n")
                                                                    for st in kept], features_code=features_code)

    def _raw(self, call: cst.Call) -> ServingInputs:
        args, why = bind_args(call, ("features", "default_batch_size"))
        if args is None or "features" not in args:
            raise Decline(call, why or "build_raw_serving_input_receiver_fn without features")
        if _given(args.get("default_batch_size")):
            raise Decline(args["default_batch_size"], "a default_batch_size for the raw receiver's placeholders")
        features = self._dict(args["features"], self.statements, "features")
        inputs, params = [], []
        taken = set().union(*(C.names_used(C.expr(C.code_of(el.key))) for el in features.elements))
        for el in features.elements:
            shape, dtype = self._placeholder(el.value, self.statements, raw=True)
            key = C.code_of(el.key)
            param = el.value.value if isinstance(el.value, cst.Name) else _identifier(key, taken)
            taken.add(param)
            inputs.append((key, shape, dtype))
            params.append(param)
        return ServingInputs(inputs, "", params=params, body=[],
                             features_code="{" + ", ".join(f"{key}: {param}" for (key, _, _), param in
                                                           zip(inputs, params)) + "}")

    def _parsing(self, call: cst.Call) -> ServingInputs:
        """``build_parsing_serving_input_receiver_fn(feature_spec)``: serialized tf.Examples
        under "examples", parsed with the feature spec."""
        args, why = bind_args(call, ("feature_spec", "default_batch_size"))
        if args is None or "feature_spec" not in args:
            raise Decline(call, why or "build_parsing_serving_input_receiver_fn without a feature_spec")
        if _given(args.get("default_batch_size")):
            raise Decline(args["default_batch_size"], "a default_batch_size for the parsing receiver's examples")
        spec = C.code_of(args["feature_spec"])
        param = C.fresh("serialized", C.names_used(args["feature_spec"]))
        return ServingInputs([('"examples"', "[None]", "tf.string")], "", params=[param], body=[],
                             features_code=f"tf.io.parse_example({param}, {spec})")

    def export_call(self, line: cst.SimpleStatementLine, call: cst.Call) -> ExportCall:
        args, why = bind_args(call, _EXPORT_ARGS)
        if args is None:
            raise Decline(call, why)
        for key in ("assets_extra", "as_text", "checkpoint_path"):
            if _given(args.get(key)):
                raise Decline(args[key], f"`{call.func.attr.value}({key}=...)`: not carried by the migration (it"
                              " exports the model as trained, in binary, without extra assets)",
                              hint="export by hand with tf.saved_model.save")
        if "export_dir_base" not in args:
            raise Decline(call, "an export without its export directory")
        return ExportCall(line, call, C.code_of(args["export_dir_base"]),
                          self.serving(args.get("serving_input_receiver_fn"), call))

    def exporters(self, node: cst.BaseExpression) -> list[Exporter]:
        value = node
        if isinstance(node, cst.Name):
            value = self._bound(node.value, self.statements)
        items = value.elements if isinstance(value, (cst.List, cst.Tuple)) else [cst.Element(value)] if (
            value is not None) else []
        out = []
        for element in items:
            exporter = element.value
            if isinstance(exporter, cst.Name):
                exporter = self._bound(exporter.value, self.statements)
            q = self.q(exporter.func) if isinstance(exporter, cst.Call) else None
            if q not in _EXPORTERS:
                raise Decline(element.value if value is not None else node,
                              f"EvalSpec exporter `{C.code_of(element.value) if value is not None else C.code_of(node)}`"
                              " is no tf.estimator.FinalExporter / LatestExporter built where the job runs",
                              hint="export by hand with tf.saved_model.save after evaluations")
            kind, params = _EXPORTERS[q]
            args, why = bind_args(exporter, params)
            if args is None:
                raise Decline(exporter, why)
            for key in ("assets_extra", "as_text"):
                if _given(args.get(key)):
                    raise Decline(args[key], f"the exporter's `{key}`: not carried by the migration")
            if "name" not in args:
                raise Decline(exporter, "an exporter without its name")
            keep = args.get("exports_to_keep", cst.Integer("5")) if kind == "latest" else None
            out.append(Exporter(exporter, kind, C.code_of(args["name"]),
                                self.serving(args.get("serving_input_receiver_fn"), exporter),
                                None if keep is None or (isinstance(keep, cst.Name) and keep.value == "None")
                                else C.code_of(keep)))
        if not out:
            raise Decline(node, "EvalSpec exporters that are not FinalExporter / LatestExporter calls")
        return out


# ---------------------------------------------------------------- emitted code


def _identifier(key: str, taken: set[str]) -> str:
    try:
        value = json.loads(key.replace("'", '"')) if key[:1] in "'\"" else key
    except ValueError:
        value = key
    name = "".join(c if c.isalnum() else "_" for c in str(value)).strip("_").lower() or "inputs"
    if name[0].isdigit():
        name = "input_" + name
    return C.fresh(name, taken)


def serving_code(exports: Exports, names: dict[str, str], signatures: list[str], model_call: str) -> list[str]:
    """The serving functions (one per receiver) and the export function, as lines;
    ``signatures`` are the keys the PREDICT mode's outputs are exported under."""
    lines: list[str] = []
    for serving in exports.servings():
        lines.append("@tf.function(input_signature=[")
        for key, shape, dtype in serving.inputs:
            lines.append(f"    tf.TensorSpec({shape}, {dtype}, name={key}),")
        lines.append("])")
        lines.append(f"def {serving.function_name}({', '.join(serving.params)}):")
        lines.append("    # the serving_input_receiver_fn's features, then the model_fn's PREDICT mode on them"
                     if serving.body else "    # the model_fn's PREDICT mode on the serving inputs")
        for statement in serving.body:
            lines += ["    " + line if line else line for line in statement.split("\n")]
        lines.append(f"    return {names['model']}({serving.features_code}, None{model_call.format(mode='infer')})")
        lines.append("")
        lines.append("")
    one = len(exports.servings()) == 1
    lines.append(f"def {names['export']}(export_dir_base{'' if one else ', serving_function'}):")
    lines.append("    # The Estimator's export: the serving signatures and the trained variables, in a new")
    lines.append("    # directory under export_dir_base named by the time in seconds, written under a temporary")
    lines.append("    # name first (a model server watching export_dir_base never loads half an export).")
    lines.append("    export_dir = os.path.join(export_dir_base, str(int(time.time())))")
    lines.append("    while tf.io.gfile.exists(export_dir):")
    lines.append("        time.sleep(1)")
    lines.append("        export_dir = os.path.join(export_dir_base, str(int(time.time())))")
    lines.append("    serving_model = tf.Module()")
    lines.append(f"    serving_model.trained_variables = {names['model']}.variables")
    function = exports.servings()[0].function_name if one else "serving_function"
    entries = [f"{json.dumps(key)}: {function}" for key in signatures]
    lines.append('    temporary_dir = os.path.join(export_dir_base, "temp-" + os.path.basename(export_dir))')
    lines.append(f"    tf.saved_model.save(serving_model, temporary_dir, signatures={{{', '.join(entries)}}})")
    lines.append("    tf.io.gfile.rename(temporary_dir, export_dir)")
    lines.append("    return export_dir")
    lines.append("")
    lines.append("")
    return lines


def export_statement(call: ExportCall, names: dict[str, str], several: bool) -> str:
    extra = f", {call.serving.function_name}" if several else ""
    return f"{names['export']}({call.base}{extra})"


def evaluation_exports(exports: Exports, names: dict[str, str], model_dir: str, several: bool) -> list[str]:
    """Lines of the evaluation function (indented once) exporting as the EvalSpec's exporters did."""
    lines = []
    for exporter in exports.exporters:
        extra = f", {exporter.serving.function_name}" if several else ""
        base = f'os.path.join({model_dir}, "export", {exporter.name})'
        if exporter.kind == "final":
            lines.append(f'    if results["global_step"] >= {names["last_step"]}:')
            lines.append("        # FinalExporter: after the final evaluation")
            lines.append(f"        {names['export']}({base}{extra})")
        else:
            lines.append("    # LatestExporter: after every evaluation"
                         + (f", keeping the newest {exporter.keep}" if exporter.keep is not None else ""))
            if exporter.keep is None:
                lines.append(f"    {names['export']}({base}{extra})")
            else:
                lines.append(f"    latest_exports = {base}")
                lines.append(f"    {names['export']}(latest_exports{extra})")
                lines.append("    exported = sorted(int(entry.rstrip(\"/\")) for entry in tf.io.gfile.listdir(latest_exports)")
                lines.append("                      if entry.rstrip(\"/\").isdigit())")
                lines.append(f"    for version in exported[:-{exporter.keep}]:")
                lines.append("        tf.io.gfile.rmtree(os.path.join(latest_exports, str(version)))")
    return lines


def prediction_code(names: dict[str, str], model_call: str, predictions_dict: bool) -> list[str]:
    """``Estimator.predict``: a generator of the model_fn's PREDICT-mode predictions,
    one example at a time, over a dataset's batches (their features: labels, when
    the input_fn gives them, are not read)."""
    lines = [
        "@tf.function",
        f"def {names['predict_step']}(features):",
        f"    return {names['model']}(features, None{model_call.format(mode='infer')})",
        "",
        "",
        f"def {names['predict']}(dataset):",
        "    # The Estimator's predict(): the PREDICT mode's predictions of the latest variables,",
        "    # one example at a time.",
        "    for batch in dataset:",
        "        features = batch[0] if isinstance(batch, tuple) else batch",
        f"        predictions = tf.nest.map_structure(lambda value: value.numpy(), {names['predict_step']}(features))",
    ]
    if predictions_dict:
        lines += [
            "        for index in range(len(next(iter(predictions.values())))):",
            "            yield {key: value[index] for key, value in predictions.items()}",
        ]
    else:
        lines.append("        yield from predictions")
    return lines + ["", ""]
