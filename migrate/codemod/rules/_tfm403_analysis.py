"""TFM403 analysis: what an Estimator job is made of.

Finds the statement that trains (``tf.estimator.train_and_evaluate(est,
train_spec, eval_spec)`` or ``est.train(input_fn, max_steps=...)``), the
``Estimator`` it runs, its ``RunConfig``, ``TrainSpec`` and ``EvalSpec``
(written inline or bound to a name in the same block), and the module-level
``model_fn`` and input functions. Anything outside the shapes the plan can
carry exactly raises :class:`Decline` with the node to locate it on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._tfm403_origin import origin, why_not_here
from migrate.codemod.rules._tfm403_premade import enclosing_bindings, premade_name, premade_reason


class Decline(Exception):
    """The job cannot be carried over exactly: ``node`` is where, ``why`` says
    what, ``hint`` what to do by hand."""

    def __init__(self, node: cst.CSTNode, why: str, hint: str = ""):
        super().__init__(why)
        self.node = node
        self.why = why
        self.hint = hint


# what each constructor takes that the migration carries; anything else declines
RUN_CONFIG_ARGS = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps", "save_checkpoints_secs",
    "session_config", "keep_checkpoint_max", "keep_checkpoint_every_n_hours", "log_step_count_steps",
    "train_distribute",
)
ESTIMATOR_ARGS = ("model_fn", "model_dir", "config", "params", "warm_start_from")
TRAIN_SPEC_ARGS = ("input_fn", "max_steps", "hooks")
EVAL_SPEC_ARGS = ("input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs", "throttle_secs")
TRAIN_ARGS = ("input_fn", "hooks", "steps", "max_steps", "saving_listeners")
EVALUATE_ARGS = ("input_fn", "steps", "hooks", "checkpoint_path", "name")
PREDICT_ARGS = ("input_fn", "predict_keys", "hooks", "checkpoint_path", "yield_single_examples")
NUMPY_INPUT_ARGS = ("x", "y", "batch_size", "num_epochs", "shuffle", "queue_capacity", "num_threads")

# what an Estimator's other methods did, for the reason a job using them is declined
_USES = {
    "export_savedmodel": ("exporting a SavedModel of the serving signature (the model_fn's PREDICT mode fed by the"
                          " serving_input_receiver_fn's placeholders, into a new timestamped directory under the"
                          " export directory)"),
    "export_saved_model": ("exporting a SavedModel of the serving signature (the model_fn's PREDICT mode fed by the"
                           " serving_input_receiver_fn's placeholders, into a new timestamped directory under the"
                           " export directory)"),
    "predict": "prediction with the model_fn's PREDICT mode",
    "evaluate": "an evaluation besides the one after est.train()",
    "train": "a second training call",
    "replace": "a RunConfig changed after it was made",
}

# arguments whose value, when given and not None/[]/(), the migration cannot carry
_NOT_CARRIED = {
    "session_config": "a tf.compat.v1.ConfigProto for TF1 sessions (device filters, threads, GPU options)",
    "keep_checkpoint_every_n_hours": "checkpoints kept by age besides the last keep_checkpoint_max",
    "warm_start_from": "variables warm-started from another checkpoint",
    "hooks": "SessionRunHooks run by the Estimator's MonitoredTrainingSession",
    "saving_listeners": "CheckpointSaverListeners",
}


@dataclass
class Call:
    """A constructor call with its arguments bound by name, and the statement
    binding it to a name (None when written inline)."""

    node: cst.Call
    args: dict[str, cst.BaseExpression]
    statement: cst.BaseStatement | None = None
    name: str | None = None

    def get(self, key: str) -> cst.BaseExpression | None:
        value = self.args.get(key)
        if isinstance(value, cst.Name) and value.value == "None":
            return None
        return value


@dataclass
class EstimatorJob:
    block: cst.CSTNode  # the Module or FunctionDef whose body holds the training statement
    trains: cst.BaseStatement  # the train_and_evaluate / est.train statement
    estimator: Call
    config: Call | None
    train_spec: Call
    eval_spec: Call | None
    model_fn: cst.FunctionDef
    train_input: cst.BaseExpression
    eval_input: cst.BaseExpression | None
    # est.train(steps=N): trains N more steps; max_steps: up to that global step
    max_steps: cst.BaseExpression | None
    extra_steps: cst.BaseExpression | None
    removed: list[cst.BaseStatement] = field(default_factory=list)  # statements the job replaces
    # numpy_input_fn(...) bound to a name -> a def of that name returning its tf.data pipeline
    input_defs: dict[int, cst.FunctionDef] = field(default_factory=dict)
    shuffled: list[cst.CSTNode] = field(default_factory=list)  # numpy_input_fn(shuffle=True) calls
    evaluation: Call | None = None  # est.evaluate(...) after est.train(...), and its statement
    notes: list[tuple[cst.CSTNode, str]] = field(default_factory=list)  # what was dropped, and why it may be
    # TrainSpec(hooks=[LoggingTensorHook(...)]): what the loop logs from the step
    logging: LoggedTensors | None = None
    # the Estimator chosen in the branches of an if statement of the block (a flag picks the
    # model): that statement, and each branch's Estimator call with its model_fn
    chosen_in: cst.If | None = None
    choices: list[tuple[Call, cst.FunctionDef]] = field(default_factory=list)
    # est.export_savedmodel(...) statements after the training (the line, the call), and the
    # EvalSpec's exporters: read by _tfm403_export
    export_calls: list[tuple[cst.SimpleStatementLine, cst.Call]] = field(default_factory=list)
    exporters: cst.BaseExpression | None = None
    # est.predict(...) calls after the training (each yields the PREDICT mode's predictions)
    predict_calls: list[cst.Call] = field(default_factory=list)


@dataclass
class LoggedTensors:
    """``tf.train.LoggingTensorHook(tensors={tag: name}, every_n_iter=N)`` of the
    training hooks: the model_fn's tensors named ``name``, logged as ``tag`` on
    the first step and every N steps after."""

    node: cst.Call
    tensors: dict[str, str]  # tag -> the graph name of the tensor (op name, ":0" dropped)
    every_n_iter: cst.BaseExpression


def bind(call: cst.Call, params: tuple[str, ...], what: str) -> dict[str, cst.BaseExpression]:
    out: dict[str, cst.BaseExpression] = {}
    positional = 0
    for a in call.args:
        if a.star:
            raise Decline(call, f"`{what}` called with *args/**kwargs: its settings are not known statically")
        if a.keyword is None:
            if positional >= len(params):
                raise Decline(call, f"`{what}` called with more positional arguments than it takes")
            out[params[positional]] = a.value
            positional += 1
        else:
            if a.keyword.value not in params:
                raise Decline(a, f"`{what}({a.keyword.value}=...)` is not carried by the migration",
                              hint="migrate this job by hand (see the TF2 custom training loop guides)")
            out[a.keyword.value] = a.value
    return out


def _empty(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name) and value.value in ("None", "False"):
        return True
    return isinstance(value, (cst.List, cst.Tuple)) and not value.elements


class Finder:
    """Finds the job in a module; ``qualname`` is the rule's canonical-name lookup."""

    def __init__(self, module: cst.Module, qualname, path: str = "<string>"):
        self.module = module
        self.qualname = qualname
        self.path = path
        self.functions = {
            s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)
        }
        self.functions_here: dict[str, cst.FunctionDef] = {}  # input functions the migration defines
        self.evaluation: cst.BaseStatement | None = None
        self.trains: cst.BaseStatement | None = None
        self.export_calls: list[tuple[cst.SimpleStatementLine, cst.Call]] = []
        self.predict_calls: list[cst.Call] = []
        self.predict_statements: dict[int, cst.BaseStatement] = {}  # where each predict call is

    def is_(self, node: cst.CSTNode, *names: str) -> bool:
        return (self.qualname(node) or "") in names

    def jobs(self) -> list[tuple[cst.CSTNode, cst.BaseStatement]]:
        """(block, statement) of every statement that trains an Estimator."""
        found = []
        for block in self.blocks():
            for st in self._statements(block):
                call = C.single_expr(st)
                if not isinstance(call, cst.Call):
                    continue
                if self.is_(call.func, "estimator.train_and_evaluate") or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "train"
                      and self._estimator_named(block, call.func.value) is not None):
                    found.append((block, st))
        return found

    def nested_jobs(self) -> list[tuple[cst.CSTNode, str]]:
        """Estimator training inside a loop or a branch (train/evaluate rounds): (call, why)."""
        out = []
        for block in self.blocks():
            estimators = {C.assignment(st)[0][0] for st in self._walk(block) if isinstance(st, cst.SimpleStatementLine)
                          and len(C.assignment(st)[0]) == 1 and isinstance(C.assignment(st)[1], cst.Call)
                          and (self.qualname(C.assignment(st)[1].func) or "").startswith("estimator.")}
            for st in self._walk(block):
                if not isinstance(st, (cst.For, cst.While, cst.If, cst.With, cst.Try)):
                    continue
                for call in C.calls_in(st):
                    f = call.func
                    if self.is_(f, "estimator.train_and_evaluate") or (
                            isinstance(f, cst.Attribute) and f.attr.value == "train"
                            and isinstance(f.value, cst.Name) and f.value.value in estimators):
                        kind = {cst.For: "a for loop", cst.While: "a while loop", cst.If: "an if branch",
                                cst.With: "a with block", cst.Try: "a try block"}[type(st)]
                        why = (f"the Estimator is trained inside {kind} (rounds of train/evaluate or a choice of"
                               " jobs), which the migration does not restructure")
                        out.append((call, why))
                if out:
                    return out
        return out

    def _walk(self, block: cst.CSTNode):
        for st in self._statements(block):
            yield from C.walk(st)

    def _statements(self, block: cst.CSTNode) -> list[cst.BaseStatement]:
        return list(block.body if isinstance(block, cst.Module) else C.body_of(block.body))

    def blocks(self) -> list[cst.CSTNode]:
        """Where a job may be: the module, its functions, its ``if __name__ == "__main__":`` block."""
        guards = [st for st in self.module.body if isinstance(st, cst.If) and st.orelse is None
                  and C.code_of(st.test).replace("'", '"') == '__name__ == "__main__"']
        return [self.module, *self.functions.values(), *guards]

    def _estimator_named(self, block, node) -> cst.BaseStatement | None:
        if not isinstance(node, cst.Name):
            return None
        for st in self._statements(block):
            names, value, _ = C.assignment(st)
            if names == [node.value] and isinstance(value, cst.Call) and self.is_(value.func, "estimator.Estimator"):
                return st
        return None

    def _resolve(self, block, node: cst.BaseExpression, qual: str, params, what: str, used_at) -> Call:
        """The ``qual`` constructor call ``node`` is, or the one a name in the
        block is bound to (once, and read nowhere else)."""
        if isinstance(node, cst.Call) and self.is_(node.func, qual):
            return Call(node, bind(node, params, what))
        if isinstance(node, cst.Name):
            bound = []
            for st in self._statements(block):
                names, value, _ = C.assignment(st)
                if node.value in names:
                    bound.append((st, names, value))
            if len(bound) == 1:
                st, names, value = bound[0]
                if names == [node.value] and isinstance(value, cst.Call) and self.is_(value.func, qual):
                    self._read_once(block, node.value, st, used_at)
                    return Call(value, bind(value, params, what), st, node.value)
        raise self._unresolved(block, node, qual, what)

    def _unresolved(self, block, node: cst.BaseExpression, qual: str, what: str) -> Decline:
        """Why ``node`` is not one ``tf.{qual}(...)`` bound in the block, located where that shows."""
        hint = f"build the {what} where the job is started, or migrate by hand"
        if isinstance(node, cst.Name) and isinstance(block, cst.FunctionDef) and node.value in {
                p.name.value for p in block.params.params}:
            built = self._built_by_caller(block, node.value) if qual == "estimator.Estimator" else None
            if built is not None:
                return built
            return Decline(node, f"`{node.value}`, the {what} this job runs, is a parameter of"
                           f" `{block.name.value}()`: it is built by its callers", hint=hint)
        if isinstance(node, cst.Name):
            bound = [st for st in self._statements(block) if node.value in C.assignment(st)[0]]
            value = C.assignment(bound[0])[1] if len(bound) == 1 else None
            if isinstance(value, cst.Call) and premade_name(self.qualname(value.func)):
                why, premade_hint = premade_reason(self.qualname(value.func))
                return Decline(value, f"`{node.value}` is a premade `tf.{self.qualname(value.func)}`: {why}",
                               hint=premade_hint)
            nested = [st for st in self._walk(block) if isinstance(st, cst.SimpleStatementLine)
                      and node.value in C.assignment(st)[0] and st not in self._statements(block)]
            if nested:
                kinds = sorted({self.qualname(C.assignment(st)[1].func) or C.code_of(C.assignment(st)[1].func)
                                for st in nested if isinstance(C.assignment(st)[1], cst.Call)})
                return Decline(nested[0], f"`{node.value}`, the {what} this job runs, is bound in if/else branches"
                               f" or loops ({', '.join('tf.' + k if '.' in k else k for k in kinds)}), not"
                               " once before the job", hint=hint)
        return Decline(node, f"the {what} this job runs is not a `tf.{qual}(...)` call in the same block",
                       hint=hint)

    def _built_by_caller(self, block: cst.FunctionDef, param: str) -> Decline | None:
        """A job whose Estimator is ``block``'s parameter ``param``, built by a caller in
        this module (``estimator = tf.estimator.Estimator(model, ...)``; ``train(estimator,
        ...)``) with a model_fn that is not a function of this module: the decline, at
        that model_fn."""
        position = [p.name.value for p in block.params.params].index(param)
        for call in C.calls_in(self.module):
            if not (isinstance(call.func, cst.Name) and call.func.value == block.name.value):
                continue
            passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            if passed is None and position < len(call.args) and call.args[position].keyword is None:
                passed = call.args[position].value
            binders = enclosing_bindings(self.module, call).get(passed.value, []) if isinstance(
                passed, cst.Name) else []
            value = C.assignment(binders[0])[1] if len(binders) == 1 else passed
            if not (isinstance(value, cst.Call) and self.is_(value.func, "estimator.Estimator")):
                continue
            model_fn = bind(value, ESTIMATOR_ARGS, "Estimator").get("model_fn") if not any(
                a.star for a in value.args) else None
            if model_fn is None or isinstance(model_fn, cst.Name) and model_fn.value in self.functions:
                continue
            made = enclosing_bindings(self.module, value).get(model_fn.value, []) if isinstance(
                model_fn, cst.Name) else []
            what = (f"bound to `{C.code_of(C.assignment(made[0])[1])}`" if len(made) == 1
                    else "not a function of this module")
            return Decline(binders[0] if binders else value, f"`{param}`, the Estimator `{block.name.value}()` runs,"
                           " is built by its caller"
                           f" with the model_fn `{C.code_of(model_fn)}`, {what}: the migration rewrites the"
                           " model_fn the job calls, which must be a function of this module",
                           hint="define the model_fn in this file and build the Estimator where the job runs, or"
                           " migrate by hand")
        return None

    def _read_once(self, block, name: str, binding, used_at) -> None:
        for st in self._statements(block):
            if st is binding or st is used_at or st is self.evaluation:
                continue
            if name in C.names_used(st):
                carried = self._exports_in(block, st, name)
                if carried is not None:
                    exports, predictions = carried
                    self.export_calls += exports
                    self.predict_calls += predictions
                    self.predict_statements.update({id(call): st for call in predictions})
                    continue
                methods = [n.attr.value for n in C.walk(st) if isinstance(n, cst.Attribute)
                           and isinstance(n.value, cst.Name) and n.value.value == name]
                what = next((_USES[m] for m in methods if m in _USES), None)
                if what is not None:
                    raise Decline(st, f"`{name}.{methods[0]}(...)`: {what}, not carried by the migration",
                                  hint="after the loop, tf.saved_model.save a tf.function whose input signature"
                                  " has the receiver's TensorSpecs and which calls the model in PREDICT mode, by hand"
                                  if "SavedModel" in what else "migrate this part by hand")
                raise Decline(st, f"`{name}` is also used here: the migration replaces what it is",
                              hint="keep the Estimator objects to the statements that build and run the job")

    def _exports_in(self, block, st: cst.BaseStatement, name: str) -> tuple[list, list] | None:
        """``name.export_savedmodel(...)`` statements (also in if blocks) and
        ``name.predict(...)`` calls after the training, when they are all ``st``
        does with ``name``: ((line, call) of each export, the predict calls)."""
        statements = self._statements(block)
        if self.trains not in statements or statements.index(st) < statements.index(self.trains):
            return None
        exports, predictions = [], []
        uses = 0
        for node in C.walk(st):
            if isinstance(node, cst.Name) and node.value == name:
                uses += 1
            if isinstance(node, cst.SimpleStatementLine):
                call = C.single_expr(node)
                if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in ("export_savedmodel", "export_saved_model")
                        and isinstance(call.func.value, cst.Name) and call.func.value.value == name):
                    exports.append((node, call))
            if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "predict"
                    and isinstance(node.func.value, cst.Name) and node.func.value.value == name):
                predictions.append(node)
        carried = exports or predictions
        return (exports, predictions) if carried and len(exports) + len(predictions) == uses else None

    def function(self, node: cst.BaseExpression | None, what: str, block=None) -> cst.FunctionDef:
        if isinstance(node, cst.Name) and node.value in self.functions:
            return self.functions[node.value]
        self.foreign(node, what)
        if isinstance(node, cst.Name) and isinstance(block, cst.FunctionDef) and node.value in {
                p.name.value for p in block.params.params}:
            raise Decline(node, f"the {what} `{node.value}` is a parameter of `{block.name.value}()`: its callers"
                          " choose it", hint=f"define the {what} as a module-level function of this file")
        raise Decline(node if node is not None else self.module,
                      f"the {what} is not a function defined at module level in this file",
                      hint=f"define the {what} as a module-level function")

    def foreign(self, node: cst.BaseExpression | None, what: str) -> None:
        """Decline, naming the module, when ``node`` is a function this file
        imports (a sibling module's, a library's)."""
        called = isinstance(node, cst.Lambda) and isinstance(node.body, cst.Call)
        if called:  # lambda: model.input_fn(...)
            node = node.body
        if isinstance(node, cst.Call):  # an input_fn factory: model.make_input_fn(...)
            node = node.func
        found = origin(self.module, self.path, node)
        # TensorFlow's own input functions (numpy_input_fn) have reasons of their own
        if found is None or found.module.split(".")[0] == "tensorflow":
            return
        if called and found.definition is not None:
            # `lambda: model.input_fn(...)` returning its dataset needs no change: the loop calls it there
            try:
                kept = dataset_input_fn(found.definition, self.qualname) is found.definition
            except Decline as d:
                raise Decline(node, f"`{found.code}` of the project module `{found.module}`: {d.why}", d.hint) from None
            if kept and factory_input_fn(found.definition) is None:
                return
        why, hint = why_not_here(found, what)
        raise Decline(node, why, hint)

    @staticmethod
    def evaluation_call(statement: cst.BaseStatement) -> cst.Call:
        value = C.single_expr(statement)
        if value is None:
            value = C.assignment(statement)[1]
        return value

    def _evaluation(self, block, trains: cst.BaseStatement) -> cst.BaseStatement | None:
        """``results = est.evaluate(input_fn=...)`` after ``est.train(...)``: evaluated
        once, after training, as the Estimator did."""
        call = C.single_expr(trains)
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "train"
                and isinstance(call.func.value, cst.Name)):
            return None
        statements = self._statements(block)
        found = None
        for st in statements[statements.index(trains) + 1:]:
            value = C.single_expr(st)
            names, assigned, _ = C.assignment(st)
            value = value if isinstance(value, cst.Call) else assigned if len(names) == 1 else None
            if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "evaluate" and isinstance(value.func.value, cst.Name)
                    and value.func.value.value == call.func.value.value):
                if found is not None:
                    raise Decline(st, "the Estimator is evaluated more than once after training")
                found = st
        return found

    def job(self, block, trains: cst.BaseStatement) -> EstimatorJob:
        call = C.single_expr(trains)
        assert isinstance(call, cst.Call)
        removed: list[cst.BaseStatement] = []
        self.trains = trains
        self.export_calls = []
        self.predict_calls = []
        self.evaluation = self._evaluation(block, trains)
        eval_spec = None
        max_steps = extra_steps = None
        if self.is_(call.func, "estimator.train_and_evaluate"):
            args = bind(call, ("estimator", "train_spec", "eval_spec"), "train_and_evaluate")
            if "estimator" not in args or "train_spec" not in args:
                raise Decline(call, "train_and_evaluate without an estimator and a TrainSpec")
            chosen = self._chosen(block, args["estimator"], trains)
            estimator = chosen[1][0] if chosen else self._resolve(
                block, args["estimator"], "estimator.Estimator", ESTIMATOR_ARGS, "Estimator", trains)
            train_spec = self._resolve(block, args["train_spec"], "estimator.TrainSpec", TRAIN_SPEC_ARGS,
                                       "TrainSpec", trains)
            if "eval_spec" in args:
                eval_spec = self._resolve(block, args["eval_spec"], "estimator.EvalSpec", EVAL_SPEC_ARGS,
                                          "EvalSpec", trains)
            max_steps = train_spec.get("max_steps")
            train_input = train_spec.get("input_fn")
        else:
            chosen = self._chosen(block, call.func.value, trains)
            estimator = chosen[1][0] if chosen else self._resolve(
                block, call.func.value, "estimator.Estimator", ESTIMATOR_ARGS, "Estimator", trains)
            train_spec = Call(call, bind(call, TRAIN_ARGS, "Estimator.train"))
            max_steps = train_spec.get("max_steps")
            extra_steps = train_spec.get("steps")
            train_input = train_spec.get("input_fn")
        if train_input is None:
            raise Decline(call, "no input_fn for training")
        if max_steps is None and extra_steps is None:
            raise Decline(call, "training without max_steps or steps runs until input_fn's data ends",
                          hint="give max_steps (a loop over a finite dataset is also a choice to make by hand)")
        config = None
        if estimator.get("config") is not None:
            config = self._resolve(block, estimator.args["config"], "estimator.RunConfig", RUN_CONFIG_ARGS,
                                   "RunConfig", chosen[0] if chosen else estimator.statement or trains)
        job_notes: list[tuple[cst.CSTNode, str]] = []
        logged = None
        hooks = train_spec.get("hooks")
        if hooks is not None and not _empty(hooks):
            logged, bindings = self._logging_hook(block, hooks, train_spec.statement or trains)
            removed += bindings
        for c in (estimator, config, train_spec, eval_spec):
            if c is None:
                continue
            for key, value in c.args.items():
                if key == "hooks" and c is train_spec:
                    continue  # the logging hook, above
                if key == "session_config" and isinstance(value, cst.Call) and (
                        self.qualname(value.func) or "").endswith("ConfigProto"):
                    job_notes.append((value, ("RunConfig(session_config=ConfigProto(...)) configured the Estimator's"
                                      " TF1 sessions (placement, device filters, threads, GPU memory), none of"
                                      " which changes what trains: dropped (tf.config sets these in TF2)")))
                    continue
                if key in _NOT_CARRIED and not _empty(value):
                    raise Decline(value, f"`{key}`: {_NOT_CARRIED[key]}, not carried by the migration",
                                  hint="drop it, or migrate this job by hand")
            if c.statement is not None and not (chosen and c is estimator):
                removed.append(c.statement)
        model_fn = self.function(estimator.get("model_fn"), "model_fn", block)
        self._no_keras_layers(model_fn)
        choices = [(c, self.function(c.get("model_fn"), "model_fn", block)) for c in chosen[1]] if chosen else []
        for _, fn in choices:
            self._no_keras_layers(fn)
        for node in (train_input, eval_spec.get("input_fn") if eval_spec is not None else None):
            self.foreign(node, "input_fn")
        eval_input = eval_spec.get("input_fn") if eval_spec is not None else None
        evaluation = None
        if self.evaluation is not None:
            if eval_spec is not None:
                raise Decline(self.evaluation, "the job evaluates both through its EvalSpec and here")
            evaluate = self.evaluation_call(self.evaluation)
            evaluation = Call(evaluate, bind(evaluate, EVALUATE_ARGS, "Estimator.evaluate"), self.evaluation)
            for key in ("hooks", "checkpoint_path", "name"):
                if evaluation.get(key) is not None:
                    raise Decline(evaluation.args[key], f"`evaluate({key}=...)` is not carried by the migration")
            eval_input = evaluation.get("input_fn")
            self.foreign(eval_input, "input_fn")
            if eval_input is None:
                raise Decline(evaluate, "evaluate() without an input_fn")
        job = EstimatorJob(block, trains, estimator, config, train_spec, eval_spec, model_fn, train_input,
                           eval_input, max_steps, extra_steps, removed, evaluation=evaluation, notes=job_notes,
                           logging=logged, chosen_in=chosen[0] if chosen else None, choices=choices,
                           export_calls=self.export_calls, predict_calls=self.predict_calls)
        exporters = eval_spec.get("exporters") if eval_spec is not None else None
        if exporters is not None and not _empty(exporters):
            job.exporters = exporters
        for node in (train_input, eval_input):
            self._numpy_input(job, node)
        for call in self.predict_calls:
            args = bind(call, PREDICT_ARGS, "Estimator.predict")
            where = self.predict_statements.get(id(call), call)
            for key in ("predict_keys", "hooks", "checkpoint_path"):
                if args.get(key) is not None and not _empty(args[key]):
                    raise Decline(where, f"`predict({key}=...)` is not carried by the migration")
            if "yield_single_examples" in args and C.code_of(args["yield_single_examples"]) != "True":
                raise Decline(where, "`predict(yield_single_examples=False)` is not carried by the migration")
            if args.get("input_fn") is None:
                raise Decline(where, "predict() without an input_fn")
            self.foreign(args["input_fn"], "input_fn")
            self._numpy_input(job, args["input_fn"], labels=False)
        return job

    def _no_keras_layers(self, model_fn: cst.FunctionDef) -> None:
        """Decline a model_fn that builds Keras layers or models (itself or through the
        module's functions it calls): the Estimator called it once per graph, the
        migrated step calls it at every step, and make_template shares only the
        variables of get_variable, not those a Keras 3 layer makes for itself. So
        is one still running tf.layers / tf.contrib code (a layer TFM104 left)."""
        seen: set[str] = set()
        todo = [model_fn]
        while todo:
            fn = todo.pop()
            for call in C.calls_in(fn):
                q = self.qualname(call.func) or ""
                last = q.rpartition(".")[2]
                if (q.startswith(("keras.layers.", "keras.models.", "keras.applications.")) and last[:1].isupper()
                        or q in ("keras.Sequential", "keras.Model")):
                    where = "" if fn is model_fn else f" (in `{fn.name.value}()`, which the model_fn calls)"
                    raise Decline(call, f"the model_fn builds a Keras layer or model, `tf.{q}`{where}: the migrated"
                                  " step calls the model_fn at every step, and make_template shares only the"
                                  " variables of tf.compat.v1.get_variable, not those a Keras 3 layer makes",
                                  hint="build the Keras model once under the strategy and call it in the step,"
                                  " by hand (TF2 guide: migrate/migrating_estimator)")
                if q.startswith(("layers.", "contrib.")):
                    where = "" if fn is model_fn else f" (in `{fn.name.value}()`, which the model_fn calls)"
                    raise Decline(call, f"the model_fn runs `tf.{q}`{where}, which TF 2.21 does not have and"
                                  " which is left as TF1 code (see its own diagnostic)",
                                  hint="replace it by TF 2 code with the same numerics, then migrate the job")
                if isinstance(call.func, cst.Name) and call.func.value in self.functions and (
                        call.func.value not in seen):
                    seen.add(call.func.value)
                    todo.append(self.functions[call.func.value])

    def _chosen(self, block, node: cst.BaseExpression, used_at) -> tuple[cst.If, list[Call]] | None:
        """``if flag == "a": est = Estimator(model_fn=a_fn, ...) elif ...: est = Estimator(
        model_fn=b_fn, ...) else: sys.exit(...)``: the if statement and each branch's
        Estimator call, which differ in model_fn and params only. None when the
        name is not bound in the branches of one if statement of the block."""
        if not isinstance(node, cst.Name):
            return None
        name = node.value
        statements = self._statements(block)
        if any(name in C.assignment(st)[0] for st in statements):
            return None
        ifs = [st for st in statements if isinstance(st, cst.If) and any(
            name in C.assignment(inner)[0] for inner in C.walk(st) if isinstance(inner, cst.SimpleStatementLine))]
        if len(ifs) != 1:
            return None
        choice = ifs[0]
        calls: list[Call] = []
        branches: list[cst.CSTNode] = []
        branch: cst.CSTNode | None = choice
        while isinstance(branch, cst.If):
            branches.append(branch)
            branch = branch.orelse
        if isinstance(branch, cst.Else):
            branches.append(branch)
        for branch in branches:
            body = list(C.body_of(branch.body))
            binders = [st for st in body if name in C.assignment(st)[0]]
            nested = [st for st in C.walk(branch.body) if isinstance(st, cst.SimpleStatementLine)
                      and name in C.assignment(st)[0] and st not in binders]
            if nested or len(binders) > 1:
                raise Decline((nested or binders)[-1], f"`{name}`, the Estimator this job runs, is bound more than"
                              " once in a branch of the if statement choosing it",
                              hint="build the Estimator once per branch, or migrate by hand")
            if binders:
                targets, value, _ = C.assignment(binders[0])
                q = self.qualname(value.func) if isinstance(value, cst.Call) else None
                if targets != [name] or q is None:
                    raise Decline(binders[0], f"`{name}`, the Estimator this job runs, is not built by a"
                                  " tf.estimator call in this branch")
                if q != "estimator.Estimator":
                    detail, hint = premade_reason(q) if premade_name(q) else (
                        "it has no model_fn for the migrated loop to call", "migrate this job by hand")
                    raise Decline(value, f"`{name}` is a premade `tf.{q}` in one of the if/else branches choosing the"
                                  f" job's Estimator: {detail}", hint=hint)
                calls.append(Call(value, bind(value, ESTIMATOR_ARGS, "Estimator"), binders[0], name))
            elif not _ends_program(body):
                raise Decline(branch, f"a branch of the if statement choosing `{name}` neither builds the Estimator"
                              " nor ends the program", hint="migrate this job by hand")
        if not calls:
            return None
        first = calls[0]
        for other in calls[1:]:
            for key in set(first.args) | set(other.args):
                if key in ("model_fn", "params"):
                    continue
                mine, theirs = first.args.get(key), other.args.get(key)
                if (C.code_of(mine) if mine is not None else None) != (C.code_of(theirs) if theirs is not None
                                                                       else None):
                    raise Decline(other.node, f"the Estimators the if statement chooses between differ in `{key}`,"
                                  " not only in model_fn and params", hint="migrate this job by hand")
        self._read_once(block, name, choice, used_at)
        return choice, calls

    def _bound_once(self, block, node: cst.BaseExpression, used_at) -> tuple[cst.BaseExpression, list]:
        """What a name of the block is bound to (once, read only at ``used_at``), and its statement."""
        if not isinstance(node, cst.Name):
            return node, []
        bound = [st for st in self._statements(block) if node.value in C.assignment(st)[0]]
        if len(bound) != 1 or C.assignment(bound[0])[0] != [node.value]:
            raise Decline(node, f"`{node.value}` is not bound once, by itself, where the job is built")
        self._read_once(block, node.value, bound[0], used_at)
        return C.assignment(bound[0])[1], [bound[0]]

    def _logging_hook(self, block, hooks: cst.BaseExpression, used_at) -> tuple[LoggedTensors, list]:
        """``hooks=[tf.train.LoggingTensorHook(tensors={...}, every_n_iter=N)]``: the one
        training hook the loop carries (it logs the step's tensors at that cadence)."""
        hooks, bindings = self._bound_once(block, hooks, used_at)
        if not isinstance(hooks, (cst.List, cst.Tuple)) or len(hooks.elements) != 1:
            raise Decline(hooks, "`hooks`: SessionRunHooks run by the Estimator's MonitoredTrainingSession, not"
                          " carried by the migration (one tf.train.LoggingTensorHook is)",
                          hint="drop them, or migrate this job by hand")
        hook, more = self._bound_once(block, hooks.elements[0].value, bindings[0] if bindings else used_at)
        bindings += more
        if not (isinstance(hook, cst.Call) and self.is_(hook.func, "train.LoggingTensorHook", "estimator.LoggingTensorHook")):
            raise Decline(hook, "`hooks`: SessionRunHooks run by the Estimator's MonitoredTrainingSession"
                          f" (`{C.code_of(hook)}`), not carried by the migration (tf.train.LoggingTensorHook is)",
                          hint="call what it did from the migrated training loop, by hand")
        args = bind(hook, ("tensors", "every_n_iter", "every_n_secs", "at_end", "formatter"), "LoggingTensorHook")
        for key in ("every_n_secs", "at_end", "formatter"):
            if key in args and not _empty(args[key]):
                raise Decline(args[key], f"`LoggingTensorHook({key}=...)`: the migrated loop logs every_n_iter steps"
                              " only", hint="log by steps (every_n_iter), or migrate the hook by hand")
        if args.get("every_n_iter") is None or _empty(args["every_n_iter"]):
            raise Decline(hook, "LoggingTensorHook without every_n_iter")
        tensors, more = self._bound_once(block, args.get("tensors", cst.Name("None")), bindings[-1]
                                         if bindings else used_at)
        bindings += more
        named: dict[str, str] = {}
        strings = (cst.SimpleString,)
        if isinstance(tensors, cst.Dict) and all(
                isinstance(el, cst.DictElement) and isinstance(el.key, strings) and isinstance(el.value, strings)
                for el in tensors.elements):
            named = {el.key.evaluated_value: el.value.evaluated_value for el in tensors.elements}
        elif isinstance(tensors, (cst.List, cst.Tuple)) and all(
                isinstance(el.value, strings) for el in tensors.elements):
            named = {el.value.evaluated_value: el.value.evaluated_value for el in tensors.elements}
        if not named:
            raise Decline(tensors, "LoggingTensorHook's tensors are not a dict or list of tensor names written here",
                          hint="name the tensors with string literals")
        tensors_by_op = {tag: name.removesuffix(":0") for tag, name in named.items()}
        return LoggedTensors(hook, tensors_by_op, args["every_n_iter"]), bindings

    def _numpy_input(self, job: EstimatorJob, node: cst.BaseExpression | None, labels: bool = True) -> None:
        """``name = tf.estimator.inputs.numpy_input_fn(x, y, ...)`` -> ``def name():
        return <the same examples as a tf.data pipeline>``."""
        if not isinstance(node, cst.Name):
            return
        statements = self._statements(job.block)
        binders = [st for st in statements if node.value in C.assignment(st)[0]]
        if len(binders) != 1 or id(binders[0]) in job.input_defs:
            return
        value = C.assignment(binders[0])[1]
        if not (isinstance(value, cst.Call) and self.is_(value.func, "estimator.inputs.numpy_input_fn")):
            return
        if C.assignment(binders[0])[0] != [node.value]:
            raise Decline(binders[0], "numpy_input_fn bound together with other names")
        args = bind(value, NUMPY_INPUT_ARGS, "numpy_input_fn")
        features_only = args.get("y") is None or _empty(args["y"])
        if features_only and labels:
            raise Decline(value, "numpy_input_fn without y: the model_fn would get no labels")
        shuffle = args.get("shuffle")
        if not (isinstance(shuffle, cst.Name) and shuffle.value in ("True", "False")):
            raise Decline(shuffle or value, "numpy_input_fn's shuffle is not a literal True/False")
        threads = args.get("num_threads")
        if threads is not None and C.code_of(threads) != "1" and shuffle.value == "False":
            raise Decline(threads, "numpy_input_fn(num_threads > 1) enqueued examples in no fixed order")
        # the def reads x and y when the job runs: they must not change in between
        after = statements[statements.index(binders[0]) + 1:]
        read = C.names_used(args["x"]) | (C.names_used(args["y"]) if not features_only else set())
        for st in after:
            if set(C.assignment(st)[0]) & read:
                raise Decline(st, "the arrays numpy_input_fn was given are rebound before the job runs")
        code = (f"tf.data.Dataset.from_tensor_slices({C.code_of(args['x'])})" if features_only else
                f"tf.data.Dataset.from_tensor_slices(({C.code_of(args['x'])}, {C.code_of(args['y'])}))")
        epochs = args.get("num_epochs", cst.Integer("1"))
        if isinstance(epochs, cst.Name) and epochs.value == "None":
            code += ".repeat()"
        elif C.code_of(epochs) != "1":
            code += f".repeat({C.code_of(epochs)})"
        if shuffle.value == "True":
            # numpy_input_fn's RandomShuffleQueue drew from queue_capacity examples
            code += f".shuffle({C.code_of(args['queue_capacity']) if 'queue_capacity' in args else '1000'})"
            job.shuffled.append(value)
        code += f".batch({C.code_of(args['batch_size']) if 'batch_size' in args else '128'})"
        new = C.stmt(f"def {node.value}():\n    return {code}\n")
        lines = list(binders[0].leading_lines)
        if not any(line.comment is None for line in lines):
            lines.insert(0, cst.EmptyLine(indent=False))  # a blank line before a def
        job.input_defs[id(binders[0])] = new.with_changes(leading_lines=lines)
        self.functions_here[node.value] = new



def _ends_program(body: list[cst.BaseStatement]) -> bool:
    """Whether a branch ends in ``raise``, ``return`` or ``sys.exit(...)`` (a choice the
    program refuses)."""
    last = body[-1] if body else None
    if not isinstance(last, cst.SimpleStatementLine):
        return False
    small = last.body[-1]
    if isinstance(small, (cst.Raise, cst.Return)):
        return True
    call = small.value if isinstance(small, cst.Expr) else None
    return isinstance(call, cst.Call) and C.code_of(call.func) in ("sys.exit", "exit", "quit", "os._exit")


# TF1 input plumbing the migrated loop cannot take: it wants the tf.data.Dataset itself
_QUEUE_INPUTS = ("train.batch", "train.shuffle_batch", "train.batch_join", "train.shuffle_batch_join",
                 "train.string_input_producer", "train.slice_input_producer", "train.input_producer",
                 "train.range_input_producer", "placeholder", "py_func")


def _one_shot_source(value: cst.BaseExpression, qualname) -> cst.BaseExpression | None:
    """``X.make_one_shot_iterator().get_next()`` / ``tf.data.make_one_shot_iterator(X).get_next()``
    (also ``make_initializable_iterator``) -> ``X``: the Estimator read the dataset's
    batches in order from that iterator, as the loop reads them from ``X``."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "get_next" and not value.args):
        return None
    maker = value.func.value
    if not isinstance(maker, cst.Call):
        return None
    func = maker.func
    if isinstance(func, cst.Attribute) and func.attr.value == "make_one_shot_iterator" and not maker.args:
        return func.value
    if (qualname(func) or "").endswith("data.make_one_shot_iterator") and len(maker.args) == 1:
        return maker.args[0].value
    return None


def factory_input_fn(fn: cst.FunctionDef) -> cst.FunctionDef | None:
    """The input_fn a factory makes (``def make_input_fn(...): def input_fn():
    ...; return input_fn``, as ``TrainSpec(make_input_fn(files, 32))`` is
    given), or None when ``fn`` is no such factory."""
    body = C.body_of(fn.body)
    last = body[-1] if body else None
    returned = None
    if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and isinstance(last.body[0], cst.Return):
        returned = last.body[0].value
    if not isinstance(returned, cst.Name):
        return None
    defs = [st for st in body if isinstance(st, cst.FunctionDef) and st.name.value == returned.value]
    return defs[0] if len(defs) == 1 else None


def dataset_factory(fn: cst.FunctionDef, qualname) -> cst.FunctionDef:
    """The factory with the input_fn it makes returning its tf.data.Dataset."""
    inner = factory_input_fn(fn)
    new = dataset_input_fn(inner, qualname)
    if new is inner:
        return fn
    return fn.with_changes(body=fn.body.with_changes(body=[
        new if st is inner else st for st in fn.body.body]))


def dataset_input_fn(fn: cst.FunctionDef, qualname) -> cst.FunctionDef:
    """The input_fn returning its tf.data.Dataset (what the loop iterates), or Decline."""
    replace: dict[int, cst.CSTNode] = {}
    for node in C.walk(fn):
        if isinstance(node, cst.Call) and (qualname(node.func) or "") in _QUEUE_INPUTS:
            raise Decline(node, f"the input_fn `{fn.name.value}` builds its batches with"
                          f" tf.{qualname(node.func)}, not as a tf.data.Dataset the strategy can distribute",
                          hint="return a tf.data.Dataset of (features, labels) batches")
        if isinstance(node, cst.Return) and node.value is not None:
            source = _one_shot_source(node.value, qualname)
            if source is not None:
                replace[id(node)] = node.with_changes(value=source)
    rewritten = {id(n) for r in C.walk(fn) if id(r) in replace for n in C.walk(r)}
    for node in C.walk(fn):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                "get_next", "make_one_shot_iterator", "make_initializable_iterator") and id(node) not in rewritten:
            raise Decline(node, f"the input_fn `{fn.name.value}` returns an iterator's tensors, not the dataset",
                          hint="return the tf.data.Dataset itself")
    if not replace:
        return fn

    class _Returns(cst.CSTTransformer):
        def leave_Return(self, original, updated):
            return replace.get(id(original), updated)

    return fn.visit(_Returns())
