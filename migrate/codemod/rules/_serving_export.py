"""TFM301, the trained model exported for serving after training (analysis,
plan and emitted code).

The shapes people wrote in the session's code, once the loop is done (often
only on the chief)::

    model_exporter = exporter.Exporter(saver)            # tf.contrib.session_bundle
    model_exporter.init(sess.graph.as_graph_def(), named_graph_signatures={
        "inputs": exporter.generic_signature({"x": x}),
        "outputs": exporter.generic_signature({"y": y})})
    model_exporter.export(export_dir, tf.constant(version), sess)

    builder = tf.saved_model.builder.SavedModelBuilder(export_dir)
    info_x = tf.saved_model.utils.build_tensor_info(x)
    signature = tf.saved_model.signature_def_utils.build_signature_def(
        inputs={"x": info_x}, outputs={...}, method_name=PREDICT_METHOD_NAME)   # or predict_signature_def
    builder.add_meta_graph_and_variables(sess, [tag_constants.SERVING],
                                         signature_def_map={DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature})
    builder.save()

    tf.saved_model.simple_save(sess, export_dir, inputs={"x": x}, outputs={"y": y})

Each names placeholders as the signature's inputs and graph values as its
outputs. In TF2 the same export is a ``tf.function`` with an input signature
(one ``tf.TensorSpec`` per placeholder: its shape and dtype, named by the
signature's key) computing the outputs from the trained variables, saved by
``tf.saved_model.save`` with the variables it reads, at the same place in the
program and into the same directory (the session bundle's
``<export_dir>/<version, 8 digits>`` included). The SavedModel has the
``serve`` tag and Predict signatures under the same keys; the generic
``inputs``/``outputs`` pair of a session bundle becomes the ``serving_default``
signature, its keys the signature's. As the builder and the bundle exporter
refused to, the export is never written over one already in its directory.
Where the model is built once by helpers (a model function), the signature
calls it as the step does.

Declined, with the statement and why (the training stays TF1 there):
classification/regression signatures (``tf.saved_model.save`` writes Predict
signatures only), assets, init or main ops other than the table initializer,
tags other than ``serve``, a text SavedModel, a signature input that is not a
placeholder of the training graph or an output computed from a placeholder the
signature does not take, a version number computed by the graph, and any
other use of the exporter or builder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C

_EXPORTERS = ("session_bundle.exporter.Exporter",)
_BUILDERS = ("saved_model.builder.SavedModelBuilder", "saved_model.Builder",
             "saved_model.builder_impl.SavedModelBuilder")
_SIMPLE_SAVES = ("saved_model.simple_save", "saved_model.simple_save.simple_save")
_TENSOR_INFOS = ("saved_model.utils.build_tensor_info", "saved_model.build_tensor_info")
_PREDICT_DEFS = ("signature_def_utils.predict_signature_def", "saved_model.predict_signature_def")
_BUILT_DEFS = ("signature_def_utils.build_signature_def", "saved_model.build_signature_def")
_OTHER_DEFS = ("signature_def_utils.classification_signature_def", "signature_def_utils.regression_signature_def",
               "saved_model.classification_signature_def", "saved_model.regression_signature_def")
_GENERIC = ("session_bundle.exporter.generic_signature",)
_BUNDLE_OTHER = ("session_bundle.exporter.classification_signature",
                 "session_bundle.exporter.regression_signature")
_TABLE_INITS = ("tables_initializer", "initialize_all_tables", "saved_model.main_op.main_op",
                "saved_model.main_op")
_PREDICT_METHOD = "tensorflow/serving/predict"


@dataclass
class Signature:
    key: str  # the signature's key
    inputs: list[tuple[str, str]]  # (key, placeholder)
    outputs: list[tuple[str, str]]  # (key, graph value)


@dataclass
class ServingExport:
    """One export of the trained graph: where it is written and what it holds."""

    save_at: cst.SimpleStatementLine  # the statement writing it
    directory: str  # the code of the directory it is written to
    signatures: list[Signature] = field(default_factory=list)
    # ids of the other statements making it (exporter, builder, tensor infos, signature defs)
    removed: set[int] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)  # the names they bind
    function_names: dict[str, str] = field(default_factory=dict)  # signature key -> emitted function
    module_name: str = ""
    # a session bundle's: its base directory and version (a subdirectory of 8 digits)
    base: str = ""
    version: cst.BaseExpression | None = None
    path_name: str = ""  # the name the directory is read by in the emitted code


def _ends(q: str | None, suffixes) -> bool:
    return bool(q) and any(q == s or q.endswith("." + s) for s in suffixes)


# TF's named signature keys (tf.saved_model.signature_constants) and their values
_NAMED_KEYS = {"DEFAULT_SERVING_SIGNATURE_DEF_KEY": "serving_default", "PREDICT_INPUTS": "inputs",
               "PREDICT_OUTPUTS": "outputs", "CLASSIFY_INPUTS": "inputs", "CLASSIFY_OUTPUT_CLASSES": "classes",
               "CLASSIFY_OUTPUT_SCORES": "scores", "REGRESS_INPUTS": "inputs", "REGRESS_OUTPUTS": "outputs"}


def signature_key(node: cst.BaseExpression | None) -> str | None:
    """A signature key written as a literal, or one of TF's named keys."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, (cst.Attribute, cst.Name)):
        return _NAMED_KEYS.get(C.code_of(node).rsplit(".", 1)[-1])
    return None


class _Decline(Exception):
    def __init__(self, node: cst.CSTNode, why: str):
        super().__init__(why)
        self.node, self.why = node, why


class _Finder:
    """Reads the export statements of a session's code, in order."""

    def __init__(self, qualname):
        self.q = qualname
        self.exporters: dict[str, dict] = {}  # name -> {"statement", "signatures", "init"}
        self.builders: dict[str, dict] = {}  # name -> {"statement", "directory", "signatures", "added"}
        self.infos: dict[str, tuple[str, cst.SimpleStatementLine]] = {}  # tensor info -> (graph value, statement)
        self.defs: dict[str, tuple[list, list, cst.SimpleStatementLine]] = {}  # signature def -> (inputs, outputs)
        self.generic: dict[str, tuple[list, cst.SimpleStatementLine]] = {}
        self.dicts: dict[str, tuple[cst.Dict, cst.SimpleStatementLine]] = {}
        self.exports: list[ServingExport] = []
        self.used_statements: set[int] = set()

    # ------------------------------------------------------------ values
    def _mapping(self, node, what: str, infos: bool = False) -> list[tuple[str, str]]:
        """`{"x": x, ...}` (or a name bound to one): its keys and graph values."""
        if isinstance(node, cst.Name) and node.value in self.dicts:
            node, statement = self.dicts[node.value]
            self.used_statements.add(id(statement))
        if not isinstance(node, cst.Dict):
            raise _Decline(node, f"its {what} (`{C.code_of(node)}`) is not a dict written out where it is used,"
                                 " so the signature's tensors cannot be read")
        out = []
        for element in node.elements:
            if not isinstance(element, cst.DictElement):
                raise _Decline(node, f"its {what} unpack another mapping (`**`)")
            key = signature_key(element.key)
            if key is None:
                raise _Decline(element.key, f"a key of its {what} (`{C.code_of(element.key)}`) is not a string"
                                            " literal or one of tf.saved_model's named keys")
            value = element.value
            if infos:
                if isinstance(value, cst.Name) and value.value in self.infos:
                    graph_value, statement = self.infos[value.value]
                    self.used_statements.add(id(statement))
                    out.append((key, graph_value))
                    continue
                if isinstance(value, cst.Call) and _ends(self.q(value.func), _TENSOR_INFOS):
                    value = C.arg(value, 0, "tensor")
                else:
                    raise _Decline(value, f"its {what} entry `{key}` is not a tensor info built from a graph value"
                                          " by name")
            if not isinstance(value, cst.Name):
                raise _Decline(value, f"its {what} entry `{key}` is `{C.code_of(value)}`, not a graph value bound"
                                      " to a name")
            out.append((key, value.value))
        return out

    def _signature_def(self, node) -> tuple[list, list]:
        if isinstance(node, cst.Name) and node.value in self.defs:
            inputs, outputs, statement = self.defs[node.value]
            self.used_statements.add(id(statement))
            return inputs, outputs
        if isinstance(node, cst.Call):
            return self._build_def(node)
        raise _Decline(node, f"its signature `{C.code_of(node)}` is not built where the export can read it")

    def _build_def(self, call: cst.Call) -> tuple[list, list]:
        q = self.q(call.func)
        if _ends(q, _OTHER_DEFS):
            raise _Decline(call, f"it builds a {q.rsplit('.', 1)[-1].split('_')[0]} signature"
                                 f" (`{C.code_of(call.func)}`); tf.saved_model.save writes Predict signatures only,"
                                 " so TF Serving's Classify/Regress APIs would no longer find it")
        if _ends(q, _BUILT_DEFS):
            method = C.arg(call, 2, "method_name")
            literal = isinstance(method, cst.SimpleString) and method.evaluated_value == _PREDICT_METHOD
            if method is None or not (literal or C.code_of(method).endswith("PREDICT_METHOD_NAME")):
                raise _Decline(call, "its signature's method is"
                                     f" `{C.code_of(method) if method is not None else 'none'}`, not Predict;"
                                     " tf.saved_model.save writes Predict signatures only")
        elif not _ends(q, _PREDICT_DEFS):
            raise _Decline(call, f"its signature comes from `{C.code_of(call.func)}(...)`, which this rule does"
                                 " not read")
        infos = _ends(q, _BUILT_DEFS)
        inputs = C.arg(call, 0, "inputs")
        outputs = C.arg(call, 1, "outputs")
        if inputs is None or outputs is None:
            raise _Decline(call, "its signature names no inputs or no outputs")
        return self._mapping(inputs, "signature inputs", infos), self._mapping(outputs, "signature outputs", infos)

    def _generic(self, node) -> list[tuple[str, str]]:
        if isinstance(node, cst.Name) and node.value in self.generic:
            mapping, statement = self.generic[node.value]
            self.used_statements.add(id(statement))
            return mapping
        if isinstance(node, cst.Call) and _ends(self.q(node.func), _BUNDLE_OTHER):
            raise _Decline(node, f"it exports a {C.code_of(node.func).rsplit('.', 1)[-1].split('_')[0]} signature"
                                 " of a session bundle; tf.saved_model.save writes Predict signatures only, so"
                                 " TF Serving's Classify/Regress APIs would no longer find it")
        if isinstance(node, cst.Call) and _ends(self.q(node.func), _GENERIC):
            return self._mapping(C.arg(node, 0, "name_tensor_map"), "generic signature")
        raise _Decline(node, f"its signature `{C.code_of(node)}` is not a generic signature built where the export"
                             " can read it")

    # ------------------------------------------------------------ statements
    def statement(self, line: cst.SimpleStatementLine) -> None:
        names, value, _ = C.assignment(line)
        if len(names) == 1 and isinstance(value, cst.Call):
            q = self.q(value.func)
            if _ends(q, _EXPORTERS):
                self.exporters[names[0]] = {"statement": line, "signatures": None}
                return
            if _ends(q, _BUILDERS):
                directory = C.arg(value, 0, "export_dir")
                if directory is None:
                    raise _Decline(value, "the builder is given no export directory")
                self.builders[names[0]] = {"statement": line, "directory": C.code_of(directory), "signatures": None}
                return
            if _ends(q, _TENSOR_INFOS):
                tensor = C.arg(value, 0, "tensor")
                if not isinstance(tensor, cst.Name):
                    raise _Decline(line, f"its tensor info `{names[0]}` describes"
                                         f" `{C.code_of(tensor) if tensor is not None else 'nothing'}`, not a graph"
                                         " value bound to a name")
                self.infos[names[0]] = (tensor.value, line)
                return
            if _ends(q, _PREDICT_DEFS + _BUILT_DEFS + _OTHER_DEFS):
                self.defs[names[0]] = (*self._build_def(value), line)
                return
            if _ends(q, _GENERIC + _BUNDLE_OTHER):
                if _ends(q, _BUNDLE_OTHER):
                    self._generic(value)  # declines
                self.generic[names[0]] = (self._mapping(C.arg(value, 0, "name_tensor_map"), "generic signature"),
                                          line)
                return
        if len(names) == 1 and isinstance(value, cst.Dict):
            self.dicts[names[0]] = (value, line)
        call = C.single_expr(line)
        if not isinstance(call, cst.Call):
            self._other_uses(line)
            return
        q = self.q(call.func)
        if _ends(q, _SIMPLE_SAVES):
            directory = C.arg(call, 1, "export_dir")
            inputs, outputs = C.arg(call, 2, "inputs"), C.arg(call, 3, "outputs")
            if directory is None or inputs is None or outputs is None:
                raise _Decline(call, "simple_save is not given its directory, inputs and outputs")
            self._init_op(C.arg(call, 4, "legacy_init_op"))
            signature = Signature("serving_default", self._mapping(inputs, "inputs"),
                                  self._mapping(outputs, "outputs"))
            self._finish(ServingExport(line, C.code_of(directory), [signature]), set())
            return
        owner = call.func.value.value if isinstance(call.func, cst.Attribute) and isinstance(
            call.func.value, cst.Name) else None
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        if owner in self.exporters:
            self._exporter_call(owner, method, call, line)
        elif owner in self.builders:
            self._builder_call(owner, method, call, line)
        else:
            self._other_uses(line)

    def _other_uses(self, line) -> None:
        used = C.names_used(line) & (set(self.exporters) | set(self.builders))
        if used:
            name = min(used)
            raise _Decline(line, f"it uses `{name}` otherwise than to make one export (`{C.code_of(line).strip()}`)")

    def _init_op(self, op) -> None:
        """An init or main op run when the SavedModel loads: only the table initializer
        (TF2 initializes tables when it makes them)."""
        if op is None or (isinstance(op, cst.Name) and op.value == "None"):
            return
        if isinstance(op, cst.Call):
            q = self.q(op.func) or ""
            if _ends(q, _TABLE_INITS):
                return
            if _ends(q, ("group",)) and op.args and all(
                    a.keyword is not None or (isinstance(a.value, cst.Call) and _ends(self.q(a.value.func), _TABLE_INITS))
                    for a in op.args):
                return
        raise _Decline(op, f"it runs `{C.code_of(op)}` when the SavedModel is loaded; a TF2 SavedModel runs no"
                           " init op of the program's own")

    def _exporter_call(self, owner, method, call, line) -> None:
        record = self.exporters[owner]
        if method == "init":
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                if keyword in ("assets_collection", "assets_callback") and not (
                        isinstance(arg.value, cst.Name) and arg.value.value == "None"):
                    raise _Decline(arg.value, "it exports assets (`assets_collection`); tf.saved_model.save"
                                              " writes the assets of tracked tf.saved_model.Asset objects only")
                if keyword == "init_op":
                    self._init_op(arg.value)
            signatures = []
            default = C.arg(call, None, "default_graph_signature")
            if default is not None:
                raise _Decline(default, "it exports a default graph signature of a session bundle"
                                        f" (`{C.code_of(default)}`), which names one tensor per role without keys"
                                        " a Predict signature could take")
            named = C.arg(call, None, "named_graph_signatures")
            if named is None:
                raise _Decline(call, "the exporter is given no named graph signatures")
            if isinstance(named, cst.Name) and named.value in self.dicts:
                named, statement = self.dicts[named.value]
                self.used_statements.add(id(statement))
            if not isinstance(named, cst.Dict):
                raise _Decline(named, "its named graph signatures are not a dict written out where they are used")
            roles = {}
            for element in named.elements:
                key = signature_key(element.key) if isinstance(element, cst.DictElement) else None
                if key not in ("inputs", "outputs") or key in roles:
                    raise _Decline(element, "its named graph signatures are not one `inputs` and one `outputs`"
                                            " generic signature, the pair TF Serving read as one Predict signature")
                roles[key] = self._generic(element.value)
            if set(roles) != {"inputs", "outputs"}:
                raise _Decline(named, "its named graph signatures are not one `inputs` and one `outputs` generic"
                                      " signature")
            signatures.append(Signature("serving_default", roles["inputs"], roles["outputs"]))
            record["signatures"] = signatures
            record["init"] = line
            return
        if method == "export" and record.get("signatures") is not None:
            base = C.arg(call, 0, "export_dir_base")
            version = C.arg(call, 1, "global_step_tensor")
            if C.arg(call, 3, "exports_to_keep") is not None:
                raise _Decline(call, "it keeps only some exports (`exports_to_keep`), which tf.saved_model.save"
                                     " does not garbage-collect")
            if base is None or version is None:
                raise _Decline(call, "the export is given no directory or version")
            export = ServingExport(line, "", record["signatures"], base=C.code_of(base), version=version)
            self._finish(export, {id(record["statement"]), id(record["init"])}, owner)
            return
        raise _Decline(line, f"it uses the exporter `{owner}` otherwise than init() then export()"
                             f" (`{C.code_of(line).strip()}`)")

    def _builder_call(self, owner, method, call, line) -> None:
        record = self.builders[owner]
        if method == "add_meta_graph_and_variables" and record["signatures"] is None:
            tags = C.arg(call, 1, "tags")
            elements = tags.elements if isinstance(tags, (cst.List, cst.Tuple)) else None
            if not elements or len(elements) != 1 or not (
                    C.code_of(elements[0].value).endswith("SERVING") or (
                        isinstance(elements[0].value, cst.SimpleString)
                        and elements[0].value.evaluated_value == "serve")):
                raise _Decline(tags or call, f"its tags are `{C.code_of(tags) if tags is not None else 'none'}`;"
                                             " tf.saved_model.save writes the one tag `serve`")
            for keyword in ("assets_collection",):
                value = C.arg(call, None, keyword)
                if value is not None and not (isinstance(value, cst.Name) and value.value == "None"):
                    raise _Decline(value, "it exports assets (`assets_collection`); tf.saved_model.save writes the"
                                          " assets of tracked tf.saved_model.Asset objects only")
            for keyword in ("legacy_init_op", "main_op", "init_op"):
                self._init_op(C.arg(call, None, keyword))
            if C.arg(call, None, "train_op") is not None:
                raise _Decline(call, "it exports a train op with the serving graph; a TF2 SavedModel of a"
                                     " signature holds no train op")
            mapping = C.arg(call, 2, "signature_def_map")
            if isinstance(mapping, cst.Name) and mapping.value in self.dicts:
                mapping, statement = self.dicts[mapping.value]
                self.used_statements.add(id(statement))
            if not isinstance(mapping, cst.Dict) or not mapping.elements:
                raise _Decline(mapping or call, "its signature_def_map is not a dict written out where it is used")
            signatures = []
            for element in mapping.elements:
                key = signature_key(element.key) if isinstance(element, cst.DictElement) else None
                if key is None:
                    raise _Decline(element, "a key of its signature_def_map is not a string literal or"
                                            " DEFAULT_SERVING_SIGNATURE_DEF_KEY")
                signatures.append(Signature(key, *self._signature_def(element.value)))
            record["signatures"] = signatures
            record["added"] = line
            return
        if method == "save" and record["signatures"] is not None:
            as_text = C.arg(call, 0, "as_text")
            if as_text is not None and not (isinstance(as_text, cst.Name) and as_text.value == "False"):
                raise _Decline(call, "it writes the SavedModel as text (`as_text`); tf.saved_model.save writes"
                                     " the binary saved_model.pb")
            export = ServingExport(line, record["directory"], record["signatures"])
            self._finish(export, {id(record["statement"]), id(record["added"])}, owner)
            return
        raise _Decline(line, f"it uses the builder `{owner}` otherwise than add_meta_graph_and_variables() once"
                             f" then save() (`{C.code_of(line).strip()}`)")

    def _finish(self, export: ServingExport, statements: set[int], owner: str | None = None) -> None:
        export.removed = statements | self.used_statements
        self.used_statements = set()
        if owner is not None:
            export.bound.add(owner)
        self.exports.append(export)


def _lines(statements):
    for statement in statements:
        for node in C.walk(statement):
            if isinstance(node, cst.SimpleStatementLine):
                yield node


def find(statements, qualname) -> tuple[list[ServingExport], list[tuple[cst.CSTNode, str]]]:
    """The serving exports of a session's code (``statements``), and where one
    cannot be read, (node, why)."""
    finder = _Finder(qualname)
    try:
        for line in _lines(statements):
            finder.statement(line)
    except _Decline as declined:
        return [], [(declined.node, declined.why)]
    made = set(finder.exporters) | set(finder.builders)
    written = {name for export in finder.exports for name in export.bound}
    for name in sorted(made - written):
        record = finder.exporters.get(name) or finder.builders[name]
        return [], [(record["statement"], (f"`{name}` is made but never writes its export where this rule can"
                                          " see it"))]
    for export in finder.exports:
        # the names bound by the statements the export takes with it
        for line in _lines(statements):
            if id(line) in export.removed:
                export.bound.update(C.assignment(line)[0])
    return finder.exports, []


# ---------------------------------------------------------------- plan


def plan(export: ServingExport, graph, rule, template: bool) -> tuple[cst.CSTNode, str] | None:
    """Check the export against the training graph and name what it emits;
    (node, why) where the trained graph's export cannot be carried exactly."""
    placeholders = {name: call for name, _, call in graph.placeholders}
    version = export.version
    if version is not None:
        if isinstance(version, cst.Call) and rule.qualname(version.func) == "constant" and version.args:
            number = C.code_of(version.args[0].value)
        elif isinstance(version, cst.Name) and version.value in {graph.global_step, graph.advanced_step} - {None}:
            number = f"int({version.value}.numpy())"
        elif not C.names_used(version) & (set(graph.compute_names) | set(placeholders) | set(graph.variables)
                                          | {graph.global_step, graph.advanced_step}):
            number = C.code_of(version)
        else:
            return version, (f"its version (`{C.code_of(version)}`) is computed by the TF1 graph; the export"
                             " directory's name cannot be known without it")
        rule.ctx.require_import("os")
        export.directory = f'os.path.join({export.base}, "%08d" % {number})'
    values = set(graph.compute_names) | set(placeholders) | set(graph.variables)
    for signature in export.signatures:
        taken = [name for _, name in signature.inputs]
        for key, name in signature.inputs:
            if name not in placeholders:
                return export.save_at, (f"its signature input `{key}` is `{name}`, not a placeholder of the"
                                        " training graph: a TF2 signature takes tensors of a shape and dtype, which"
                                        " only a placeholder gives here")
            if taken.count(name) > 1:
                return export.save_at, f"its signature takes the placeholder `{name}` under two keys"
        for key, name in signature.outputs:
            if name not in values:
                return export.save_at, (f"its signature output `{key}` is `{name}`, not a value the training"
                                        " graph computes")
        wanted = {name for _, name in signature.outputs}
        statements = graph.slice_for(wanted)
        if set(graph.input_names) & (wanted | set().union(*(C.names_used(s) for _, s in statements))):
            return export.save_at, ("its signature computes its outputs from the input pipeline's batches; the"
                                    " serving function would read the training data, not its inputs")
        if template:
            # the model function computes the outputs and builds the variables: both from the inputs
            made = {n for names, st in graph.compute if rule._creates_variables(graph, st) for n in names}
            statements = graph.slice_for(wanted | made)
        for name in graph.params_for(statements):
            if name not in taken:
                keys = [key for key, out in signature.outputs if name in _depends(graph, out)]
                return export.save_at, (f"its signature output `{keys[0]}` is computed from the placeholder"
                                        f" `{name}`, which the signature does not take")
        export.function_names[signature.key] = rule._fresh(
            "serve" if signature.key == "serving_default" else "serve_" + _identifier(signature.key))
    export.module_name = rule._fresh("serving_model")
    export.path_name = export.directory if export.directory.isidentifier() else rule._fresh("export_path")
    return None


def _depends(graph, name: str) -> set[str]:
    statements = graph.slice_for({name})
    return {name} | set().union(*(C.names_used(s) for _, s in statements))


def _listed(served: list[str]) -> str:
    if len(served) == 1 and served[0].startswith("*"):
        return f"list({served[0][1:]})"
    return f"[{', '.join(served)}]"


def _identifier(key: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in key).strip("_").lower()
    return out or "signature"


# ---------------------------------------------------------------- emitted code


def without_bundle_imports(module: cst.Module) -> cst.Module:
    """The module without its imports of the session bundle (a contrib module
    TF2 does not have) once nothing in it uses what they import."""
    def bundle(statement) -> list[str] | None:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        node = statement.body[0]
        if isinstance(node, cst.ImportFrom) and node.module is not None and not isinstance(
                node.names, cst.ImportStar) and C.code_of(node.module).startswith("tensorflow.contrib.session_bundle"):
            return [C.code_of(a.asname.name if a.asname else a.name) for a in node.names]
        if isinstance(node, cst.Import) and all(
                C.code_of(a.name).startswith("tensorflow.contrib.session_bundle") and a.asname for a in node.names):
            return [C.code_of(a.asname.name) for a in node.names]
        return None
    used: set[str] = set()
    for statement in module.body:
        if bundle(statement) is None:
            used |= C.names_used(statement)
    return module.with_changes(body=[st for st in module.body if not (
        (names := bundle(st)) is not None and not set(names) & used)])


def emitted(export: ServingExport, graph, rule, line: cst.SimpleStatementLine) -> list[cst.BaseStatement]:
    """The statements replacing the one writing the export (``line``): the
    signatures' functions, computing their outputs as the step functions do
    (``rule._forward``: through the model function where there is one)."""
    placeholders = {name: call for name, _, call in graph.placeholders}
    out: list[cst.BaseStatement] = []
    served: list[str] = []
    for signature in export.signatures:
        name = export.function_names[signature.key]
        specs = []
        for key, placeholder in signature.inputs:
            call = placeholders[placeholder]
            dtype = C.arg(call, 0, "dtype")
            shape = C.arg(call, 1, "shape")
            specs.append(f"    tf.TensorSpec({C.code_of(shape) if shape is not None else 'None'},"
                         f" {C.code_of(dtype) if dtype is not None else 'tf.float32'}, name={json.dumps(key)}),\n")
        statements, _ = rule._forward(graph, {n for _, n in signature.outputs})
        reads = set().union(*(C.names_used(s) for _, s in statements)) | {n for _, n in signature.outputs}
        served += [v for v in graph.variables if v in reads and v not in served]
        if rule.template is not None and rule.template in reads and f"*{rule.template}.variables" not in served:
            served.append(f"*{rule.template}.variables")
        returned = ", ".join(f"{json.dumps(key)}: {value}" for key, value in signature.outputs)
        params = ", ".join(p for _, p in signature.inputs)
        function = C.stmt(
            "@tf.function(input_signature=[\n" + "".join(specs) + "])\n"
            f"def {name}({params}):\n"
            f"    return {{{returned}}}\n")
        body = [
            st.with_changes(leading_lines=C.strip_blank_lines(st.leading_lines)) if k == 0 else st
            for k, (_, st) in enumerate(statements)]
        function = function.with_changes(body=function.body.with_changes(body=[*body, *function.body.body]))
        out.append(function.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
    # an export already there is never written over (a builder took an empty directory)
    path = export.path_name
    guard = (f"{path} = {export.directory}\n" if path != export.directory else "") + (
        f"if tf.io.gfile.exists({path}):\n"
        f'    raise FileExistsError(f"{{{path}}} exists: an export is never written over")\n'
        if export.version is not None else
        f"if tf.io.gfile.exists({path}) and tf.io.gfile.listdir({path}):\n"
        f'    raise FileExistsError(f"{{{path}}} exists and is not empty: an export is never written over")\n')
    out = C.stmts(guard) + out
    signatures = ", ".join(f"{json.dumps(key)}: {name}" for key, name in export.function_names.items())
    saved = C.stmts(
        f"{export.module_name} = tf.Module()\n"
        "# The variables the signatures read, saved with them.\n"
        f"{export.module_name}.served_variables = {_listed(served)}\n"
        "tf.saved_model.save(\n"
        f"    {export.module_name}, {path},\n"
        f"    signatures={{{signatures}}})\n")
    saved[0] = saved[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    out[0] = out[0].with_changes(leading_lines=line.leading_lines)
    return out + saved
