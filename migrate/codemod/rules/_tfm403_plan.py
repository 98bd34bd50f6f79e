"""TFM403 plan: the user's ``model_fn`` as the migrated step calls it.

The model code stays as written. What the Estimator did around it moves out:

- ``optimizer = tf.train.XOptimizer(...)`` and ``train_op = optimizer.minimize(loss,
  global_step)`` leave the model_fn; the optimizer is built once under the
  strategy (Keras 3's equivalent, or TF1's own, as TFM301 chooses), with the
  learning-rate statements it reads (``tf.train.exponential_decay(lr,
  tf.train.get_global_step(), ...)`` -> the Keras schedule on the optimizer's
  iterations, which advance once per step as the global step did);
- ``return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)`` ->
  ``return loss`` (TRAIN and EVAL modes);
- a PREDICT branch returning predictions only (``if mode == PREDICT: return
  EstimatorSpec(mode, predictions=...)``) goes: the migrated job never predicts;
- ``tf.estimator.ModeKeys.TRAIN/EVAL/PREDICT`` -> the strings they were
  (``"train"``, ``"eval"``, ``"infer"``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._equivalents import (
    bind_args,
    is_schedule,
    kept_in_compat_v1,
    optimizer_call,
    schedule_call,
)
from migrate.codemod.rules._tfm403_analysis import Decline
from migrate.codemod.rules._tfm403_returns import (
    given,
    is_mode_test,
    metric_inputs,
    predict_outputs,
    train_summaries,
)

MODE_STRINGS = {"TRAIN": "train", "EVAL": "eval", "PREDICT": "infer"}
MODEL_FN_PARAMS = ("features", "labels", "mode", "params", "config")
GLOBAL_STEP_READS = ("train.get_global_step", "train.get_or_create_global_step")
_MINIMIZE = ("loss", "global_step", "var_list", "gate_gradients", "aggregation_method",
             "colocate_gradients_with_ops", "name", "grad_loss")
_SPEC = ("mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs", "training_chief_hooks",
         "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks")
_SPEC_DROPPED = ("mode", "predictions", "train_op", "export_outputs")  # what the loop does itself or never uses
GLOBAL_STEP = "global_step"  # the name the hoisted schedule reads (the emitted job's step counter)


@dataclass
class ModelPlan:
    model_fn: cst.FunctionDef  # rewritten
    params: tuple[str, ...]  # what it declares, of MODEL_FN_PARAMS
    optimizer: cst.BaseExpression  # built once under the strategy
    hoisted: list[cst.BaseStatement]  # learning-rate statements the optimizer reads, in order
    keras_optimizer: bool
    dropped_predict: bool
    # eval_metric_ops key (code) -> its Keras metric; the model_fn's EVAL mode then
    # returns (loss, {key: the metric's update_state arguments})
    metrics: dict[str, str]
    # EstimatorSpec(training_hooks=[LoggingTensorHook(..., every_n_iter=N)]): N; the
    # model_fn's TRAIN mode then returns (loss, {tag: tensor})
    log_every: cst.BaseExpression | None = None
    # the job exports: the PREDICT mode returns the serving outputs, exported under these keys
    predict_signatures: list[str] | None = None
    # tf.summary.scalar/histogram the model_fn wrote in TRAIN mode: (kind, tag code); its TRAIN
    # mode then returns {tag: value} last
    summaries: list[tuple[str, str]] | None = None
    # the program predicts: whether the PREDICT mode's predictions are a dict (else one tensor)
    predictions_dict: bool | None = None


def _statements(block: cst.BaseSuite):
    """(statement, enclosing compound statement or None) of a body and its if/else blocks, in order."""
    for st in C.body_of(block):
        yield st, None
        if isinstance(st, cst.If):
            branch: cst.CSTNode | None = st
            while isinstance(branch, (cst.If, cst.Else)):
                for inner, _ in _statements(branch.body):
                    yield inner, st
                branch = branch.orelse if isinstance(branch, cst.If) else None


class _ModeStrings(cst.CSTTransformer):
    def __init__(self, qualname):
        super().__init__()
        self.qualname = qualname

    def leave_Attribute(self, original, updated):
        q = self.qualname(original) or ""
        if q.startswith("estimator.ModeKeys.") and q.rpartition(".")[2] in MODE_STRINGS:
            return cst.SimpleString(f'"{MODE_STRINGS[q.rpartition(".")[2]]}"')
        return updated


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]):
        super().__init__()
        self.names = names

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.names[updated.value]) if updated.value in self.names else updated


def rename(node, names: dict[str, str]):
    return node.visit(_Rename(names)) if names else node


class _Replace(cst.CSTTransformer):
    def __init__(self, old: dict[int, cst.CSTNode | None]):
        super().__init__()
        self.old = old

    def on_leave(self, original, updated):
        if id(original) in self.old:
            new = self.old[id(original)]
            return cst.RemoveFromParent() if new is None else new
        return updated


class _WithoutUpdateDeps(cst.CSTTransformer):
    """``with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)): <body>``
    (also through ``update_ops = tf.get_collection(...)``) -> ``<body>``: the TF1
    layers' updates (batch normalization's moving averages) run with the step."""

    def __init__(self, qualname, update_names: set[str]):
        super().__init__()
        self.qualname = qualname
        self.update_names = update_names
        self.unwrapped = False

    def is_update_ops(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.update_names
        return (isinstance(node, cst.Call) and self.qualname(node.func) == "get_collection" and len(node.args) == 1
                and self.qualname(node.args[0].value) == "GraphKeys.UPDATE_OPS")

    def leave_IndentedBlock(self, original, updated):
        body = []
        for st in updated.body:
            if (isinstance(st, cst.With) and len(st.items) == 1 and isinstance(st.items[0].item, cst.Call)
                    and self.qualname(st.items[0].item.func) == "control_dependencies"
                    and len(st.items[0].item.args) == 1 and self.is_update_ops(st.items[0].item.args[0].value)
                    and st.items[0].asname is None):
                inner = list(C.body_of(st.body))
                inner[0] = inner[0].with_changes(leading_lines=[*st.leading_lines, *inner[0].leading_lines])
                body += inner
                self.unwrapped = True
            else:
                body.append(st)
        return updated.with_changes(body=body)


def without_update_deps(fn: cst.FunctionDef, qualname) -> cst.FunctionDef:
    """The model_fn without its control dependencies on UPDATE_OPS (and the
    statement binding that collection, when nothing else reads it)."""
    names = set()
    for st in C.walk(fn):
        if isinstance(st, cst.SimpleStatementLine):
            targets, value, _ = C.assignment(st)
            if len(targets) == 1 and _WithoutUpdateDeps(qualname, set()).is_update_ops(value):
                names.add(targets[0])
    unwrap = _WithoutUpdateDeps(qualname, names)
    new = fn.visit(unwrap)
    if not unwrap.unwrapped:
        return fn
    # the statement binding the collection goes with its last reader
    binders = [st for st in C.walk(new) if isinstance(st, cst.SimpleStatementLine)
               and len(C.assignment(st)[0]) == 1 and C.assignment(st)[0][0] in names]
    unused = [st for st in binders if sum(isinstance(n, cst.Name) and n.value == C.assignment(st)[0][0]
                                          for n in C.walk(new.body)) == 1]
    return new.visit(_Replace({id(st): None for st in unused})) if unused else new


def _logged_values(fn: cst.FunctionDef, statements, tensors: dict[str, str], train_branch) -> cst.Dict:
    """``{tag: the expression the model_fn binds the tensor named so to}`` (LoggingTensorHook's tensors)."""
    elements = []
    for tag, op_name in tensors.items():
        found = []
        for st, parent in statements:
            if not isinstance(st, cst.SimpleStatementLine) or parent not in (None, train_branch):
                continue
            for call in C.calls_in(st):
                if any(a.keyword is not None and a.keyword.value == "name" and isinstance(a.value, cst.SimpleString)
                       and a.value.evaluated_value == op_name for a in call.args):
                    found.append((st, call))
        if len(found) != 1:
            raise Decline(fn, f"LoggingTensorHook logs `{op_name}`, which is not one tensor named so in the model_fn's"
                          " own statements (outside with blocks and helpers, where TF1 scoped the name)",
                          hint="log it from the migrated loop by hand")
        st, call = found[0]
        targets, value, _ = C.assignment(st)
        code = None
        if len(targets) == 1 and value is call:
            code = targets[0]
        elif len(targets) == 1 and isinstance(value, cst.Dict):
            key = next((el.key for el in value.elements if isinstance(el, cst.DictElement) and el.value is call
                        and isinstance(el.key, cst.SimpleString)), None)
            if key is not None:
                code = f"{targets[0]}[{key.value}]"
        if code is None:
            raise Decline(call, f"the tensor `{op_name}` LoggingTensorHook logs is not bound to a name (or a dict's"
                          " entry) the step can return", hint="bind it to a name in the model_fn")
        elements.append(cst.DictElement(cst.SimpleString(repr(tag).replace("'", '"')), C.expr(code)))
    return cst.Dict(elements)


def _spec_logging_hook(fn, hooks, statements, locals_bound, qualname, removed, train_branch, model_params):
    """``EstimatorSpec(training_hooks=[tf.train.LoggingTensorHook({tag: tensor}, every_n_iter=N)])``
    -> (``{tag: tensor}`` for the TRAIN return, N); the hook's statement goes."""

    def bound(node):
        if isinstance(node, cst.Name):
            binders = locals_bound.get(node.value, [])
            if len(binders) != 1 or C.assignment(binders[0])[0] != [node.value]:
                raise Decline(node, f"`{node.value}` is not bound once in the model_fn")
            others = [st for st, _ in statements if st is not binders[0] and node.value in C.names_used(st)
                      and not any(isinstance(n, cst.Return) for n in C.walk(st))]
            if others:
                raise Decline(others[0], f"`{node.value}` (a training hook) is also read here")
            removed[id(binders[0])] = None
            return C.assignment(binders[0])[1]
        return node

    if not isinstance(hooks, (cst.List, cst.Tuple)) or len(hooks.elements) != 1:
        raise Decline(hooks, "EstimatorSpec(training_hooks=...) other than one tf.train.LoggingTensorHook is not"
                      " carried by the migrated training loop", hint="migrate this part by hand")
    hook = bound(hooks.elements[0].value)
    if not (isinstance(hook, cst.Call) and qualname(hook.func) in ("train.LoggingTensorHook",
                                                                   "estimator.LoggingTensorHook")):
        raise Decline(hook, "EstimatorSpec(training_hooks=...): a SessionRunHook other than tf.train.LoggingTensorHook"
                      " is not carried by the migrated training loop", hint="migrate this part by hand")
    args, why = bind_args(hook, ("tensors", "every_n_iter", "every_n_secs", "at_end", "formatter"))
    if args is None:
        raise Decline(hook, why)
    for key in ("every_n_secs", "at_end", "formatter"):
        if given(args.get(key)) and C.code_of(args[key]) != "False":
            raise Decline(args[key], f"`LoggingTensorHook({key}=...)`: the migrated loop logs every_n_iter steps"
                          " only", hint="log by steps (every_n_iter), or migrate the hook by hand")
    every = args.get("every_n_iter")
    if not given(every):
        raise Decline(hook, "LoggingTensorHook without every_n_iter")
    local = (set(locals_bound) | model_params) & C.names_used(every)
    if local:
        raise Decline(every, f"every_n_iter reads `{min(local)}`, which the model_fn computes per call")
    tensors = args.get("tensors")
    if isinstance(tensors, cst.Name) and tensors.value in locals_bound:
        tensors = bound(tensors)
    if not (isinstance(tensors, cst.Dict) and all(
            isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) for el in tensors.elements)):
        raise Decline(tensors or hook, "LoggingTensorHook's tensors are not a dict with string keys written in the"
                      " model_fn")
    elements = []
    for el in tensors.elements:
        value = el.value
        if isinstance(value, cst.SimpleString):  # a tensor by its graph name
            value = _logged_values(fn, statements, {el.key.evaluated_value: value.evaluated_value.removesuffix(":0")},
                                   train_branch).elements[0].value
        for call in C.calls_in(value):
            if (qualname(call.func) or "").startswith(("metrics.", "train.get")):
                raise Decline(call, f"the hook logs `{C.code_of(call)}`, which has no counterpart in the migrated step")
        elements.append(cst.DictElement(el.key, value))
    return cst.Dict(elements), every


def plan_model_fn(fn: cst.FunctionDef, qualname, predicts: bool, logged: dict[str, str] | None = None,
                  exports: bool = False, predictions: bool = False) -> ModelPlan:
    """``exports``: the job exports SavedModels, so the PREDICT branch stays and
    returns the outputs its EstimatorSpec exported; ``predictions``: the program
    calls predict(), the PREDICT branch returns its predictions (the same, when both)."""
    fn = without_update_deps(fn, qualname)
    params = tuple(p.name.value for p in fn.params.params)
    if fn.params.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or fn.params.star_kwarg or fn.params.kwonly_params:
        raise Decline(fn, "the model_fn takes *args/**kwargs or keyword-only parameters")
    unknown = [p for p in params if p not in MODEL_FN_PARAMS]
    if unknown:
        raise Decline(fn, f"model_fn parameter `{unknown[0]}` is none of Estimator's"
                      " (features, labels, mode, params, config)")
    if "config" in params and "config" in C.names_used(fn.body):
        raise Decline(fn, "the model_fn reads the RunConfig (`config`), which the migrated job no longer has",
                      hint="read what it needs from the job's flags or the cluster resolver")
    statements = list(_statements(fn.body))
    locals_bound: dict[str, list[cst.BaseStatement]] = {}
    for st, _ in statements:
        for name in C.assignment(st)[0]:
            locals_bound.setdefault(name, []).append(st)

    # the train op: `train_op = optimizer.minimize(loss, global_step=...)`
    minimizes = [(st, parent) for st, parent in statements
                 if isinstance(C.assignment(st)[1], cst.Call)
                 and isinstance(C.assignment(st)[1].func, cst.Attribute)
                 and C.assignment(st)[1].func.attr.value == "minimize"]
    if len(minimizes) != 1:
        calls = [c for c in C.calls_in(fn) if isinstance(c.func, cst.Attribute) and c.func.attr.value in (
            "minimize", "apply_gradients")]
        raise Decline(calls[0] if calls else fn,
                      "the model_fn's train op is not one `train_op = optimizer.minimize(loss, global_step)`"
                      " statement in its body or its if/else blocks",
                      hint="build the train op with optimizer.minimize(loss, global_step=tf.train.get_global_step())")
    minimize_st, _ = minimizes[0]
    train_op_names, minimize, _ = C.assignment(minimize_st)
    bound, why = bind_args(minimize, _MINIMIZE)
    if bound is None:
        raise Decline(minimize, why)
    for key in ("var_list", "grad_loss", "aggregation_method"):
        if key in bound:
            raise Decline(bound[key], f"minimize({key}=...) is not carried by the migrated step")
    loss = bound.get("loss")
    if not isinstance(loss, cst.Name):
        raise Decline(minimize, "the loss minimized is not a name the model_fn binds")
    removed: dict[int, cst.CSTNode | None] = {id(minimize_st): None}
    step_names = set()
    step_arg = bound.get("global_step")
    if step_arg is None:
        raise Decline(minimize, "minimize() without global_step: the Estimator would never reach max_steps",
                      hint="pass global_step=tf.train.get_global_step()")
    if isinstance(step_arg, cst.Name) and len(locals_bound.get(step_arg.value, [])) == 1:
        st = locals_bound[step_arg.value][0]
        value = C.assignment(st)[1]
        if isinstance(value, cst.Call) and qualname(value.func) in GLOBAL_STEP_READS:
            step_names.add(step_arg.value)
            removed[id(st)] = None
            step_arg = value
    if not (isinstance(step_arg, cst.Call) and qualname(step_arg.func) in GLOBAL_STEP_READS):
        raise Decline(step_arg, "the step minimize() advances is not tf.train.get_global_step()")

    # the optimizer and the learning-rate statements it reads
    opt = minimize.func.value
    opt_call = opt
    if isinstance(opt, cst.Name):
        binders = locals_bound.get(opt.value, [])
        if len(binders) != 1:
            raise Decline(minimize, f"`{opt.value}` is not bound once in the model_fn")
        removed[id(binders[0])] = None
        opt_call = C.assignment(binders[0])[1]
    if not isinstance(opt_call, cst.Call):
        raise Decline(opt, "the optimizer is not built by a tf.train optimizer call in the model_fn")
    q = qualname(opt_call.func) or ""
    keras, why = optimizer_call(opt_call, q)
    is_keras = keras is not None
    if keras is None and kept_in_compat_v1(q):
        keras = opt_call.with_changes(func=C.expr(f"tf.compat.v1.train.{q.rpartition('.')[2]}"))
    elif keras is None:
        raise Decline(opt_call, f"`{q or C.code_of(opt_call.func)}`: {why}")
    hoisted: list[cst.BaseStatement] = []
    model_params = set(params) - {"params"}

    def hoist(node: cst.CSTNode, seen: set[str]) -> cst.CSTNode:
        """``node`` readable outside the model_fn: locals it reads hoisted before it,
        schedules of the global step made Keras schedules."""
        replace: dict[int, cst.CSTNode | None] = {}
        for call in C.calls_in(node):
            if qualname(call.func) in GLOBAL_STEP_READS:
                replace[id(call)] = cst.Name(GLOBAL_STEP)
        for name in sorted(C.names_used(node)):
            if name in model_params:
                raise Decline(node, f"the optimizer's settings read `{name}`, which the model_fn gets per call")
            if name in step_names:
                replace_names[name] = GLOBAL_STEP
            elif name in locals_bound and name not in seen:
                binders = locals_bound[name]
                if len(binders) != 1 or not C.assignment(binders[0])[0] == [name]:
                    raise Decline(binders[0], f"`{name}`, read by the optimizer, is not bound once in the model_fn")
                seen.add(name)
                value = C.assignment(binders[0])[1]
                if isinstance(value, cst.Call) and is_schedule(qualname(value.func)):
                    value = hoist(value, seen)
                    schedule, why = schedule_call(value, qualname(value.func) or "", GLOBAL_STEP)
                    if schedule is None:
                        raise Decline(binders[0], why)
                    new = binders[0].deep_replace(C.assignment(binders[0])[1], schedule)
                else:
                    new = hoist(binders[0], seen)
                removed[id(binders[0])] = None
                hoisted.append(new)
        return node.visit(_Replace(replace)) if replace else node

    replace_names: dict[str, str] = {}
    optimizer = rename(hoist(keras, set()), replace_names)
    hoisted = [rename(st, replace_names) for st in hoisted]
    for st in hoisted:
        if GLOBAL_STEP in C.names_used(st) and not any(
                is_schedule(qualname(c.func)) for c in C.calls_in(st)):
            raise Decline(st, "a learning-rate statement reads the global step outside a tf.train schedule")

    summaries = train_summaries(statements, qualname, removed)

    # returns
    log_every = None
    dropped_predict = False
    predict_signatures = None
    predictions_dict = None
    metrics: dict[str, str] = {}  # eval_metric_ops key (code) -> the Keras metric made for it
    for st, parent in statements:
        if not isinstance(st, cst.SimpleStatementLine):
            continue  # the statements of if/else blocks come one by one
        for ret in [small for small in st.body if isinstance(small, cst.Return)]:
            spec = ret.value
            if not (isinstance(spec, cst.Call) and qualname(spec.func) == "estimator.EstimatorSpec"):
                raise Decline(ret, "the model_fn returns something other than a tf.estimator.EstimatorSpec(...)")
            args, why = bind_args(spec, _SPEC)
            if args is None:
                raise Decline(spec, why)
            for key, value in args.items():
                if key in _SPEC_DROPPED or key == "loss":
                    continue
                if key == "eval_metric_ops" and "loss" in args and not given(args.get("train_op")):
                    continue  # the evaluation's metrics: below
                if key == "training_hooks" and "loss" in args and given(args.get("train_op")):
                    continue  # a logging hook: below
                empty = isinstance(value, cst.Name) and value.value == "None"
                if not empty:
                    raise Decline(value, f"EstimatorSpec({key}=...) is not carried by the migrated training loop",
                                  hint=("compute the metrics with tf.keras.metrics in an evaluation step"
                                        if key == "eval_metric_ops" else "migrate this part by hand"))
            train_op = args.get("train_op")
            if train_op is not None and not (isinstance(train_op, cst.Name) and train_op.value in train_op_names):
                raise Decline(train_op, "the EstimatorSpec's train_op is not the optimizer's minimize()")
            if "loss" in args:
                value = args["loss"]
                hooks = args.get("training_hooks")
                spec_hook = given(hooks) and not (isinstance(hooks, (cst.List, cst.Tuple)) and not hooks.elements)
                if spec_hook and logged:
                    raise Decline(hooks, "logging hooks both in the TrainSpec and in the EstimatorSpec")
                if (logged or spec_hook or summaries) and given(args.get("train_op")):
                    # the TRAIN mode's return: the loss, the tensors the loop logs, the summaries' values
                    if not (parent is not None and is_mode_test(parent.test, "TRAIN", qualname)
                            and any(inner is st for inner in C.body_of(parent.body))):
                        raise Decline(ret, "the model_fn's TRAIN return is not in an `if mode == TRAIN:` branch of"
                                      " its own, where the step can take the tensors LoggingTensorHook logs"
                                      " and the values its summaries write")
                    returned = [cst.Element(value)]
                    if spec_hook:
                        values, log_every = _spec_logging_hook(fn, hooks, statements, locals_bound, qualname,
                                                               removed, parent, set(params) - {"params"})
                        returned.append(cst.Element(values))
                    elif logged:
                        returned.append(cst.Element(_logged_values(fn, statements, logged, parent)))
                    if summaries:
                        order = [inner for inner, _ in statements]
                        late = [node for node, _, _, _ in summaries if order.index(node) > order.index(st)]
                        if late:
                            raise Decline(late[0], "a summary the model_fn writes after its TRAIN return")
                        returned.append(cst.Element(cst.Dict([cst.DictElement(tag, tensor)
                                                              for _, _, tag, tensor in summaries])))
                    value = cst.Tuple(returned, lpar=[], rpar=[])
                elif given(args.get("eval_metric_ops")):
                    inputs = metric_inputs(args["eval_metric_ops"], locals_bound, qualname, removed, metrics)
                    value = cst.Tuple([cst.Element(value), cst.Element(inputs)], lpar=[], rpar=[])
                removed[id(ret)] = ret.with_changes(value=value)
                continue
            # a PREDICT-only branch: `if mode == PREDICT: ... return EstimatorSpec(mode, predictions=...)`
            predict_branch = (parent is not None and isinstance(st, cst.SimpleStatementLine)
                              and parent.orelse is None and is_mode_test(parent.test, "PREDICT", qualname))
            if predict_branch and (exports or predictions):
                if predict_signatures is not None or predictions_dict is not None:
                    raise Decline(ret, "the model_fn returns from its PREDICT mode in more than one place")
                value = None
                if exports:
                    value, predict_signatures = predict_outputs(args, spec, locals_bound, statements, qualname,
                                                                 removed)
                if predictions:
                    predicted = args.get("predictions")
                    if not given(predicted):
                        raise Decline(spec, "the program predicts, and the PREDICT EstimatorSpec has no predictions")
                    if value is not None and C.code_of(value) != C.code_of(predicted):
                        raise Decline(spec, "the program both predicts and exports, and the PREDICT mode exports"
                                      " outputs other than its predictions (a dict): one PREDICT mode cannot"
                                      " return both", hint="export the predictions, or migrate by hand")
                    value = predicted
                    target = predicted
                    if isinstance(predicted, cst.Name) and len(locals_bound.get(predicted.value, [])) == 1:
                        target = C.assignment(locals_bound[predicted.value][0])[1]
                    predictions_dict = isinstance(target, cst.Dict)
                removed[id(ret)] = ret.with_changes(value=value)
                continue
            if predict_branch and predicts is False:
                removed[id(parent)] = None
                dropped_predict = True
                continue
            raise Decline(ret, "an EstimatorSpec without a loss outside an `if mode == PREDICT:` branch"
                          + (" (the program predicts or exports, which the migration does not carry)" if predicts
                             else ""))
    for name in train_op_names:
        kept = [st for st, _ in statements if id(st) not in removed and name in C.names_used(st)
                and not any(isinstance(n, cst.Return) for n in C.walk(st))]
        if kept:
            raise Decline(kept[0], f"`{name}` (the train op) is read here")
    new_fn = fn.visit(_Replace(removed))
    for st in hoisted:
        for name in C.assignment(st)[0]:
            if name in C.names_used(new_fn.body):
                raise Decline(st, f"`{name}` is read by the model_fn besides the optimizer (a summary of it?)",
                              hint="read the learning rate from optimizer.learning_rate in the migrated loop")
    new_fn = _merge_equal_returns(new_fn.visit(_ModeStrings(qualname)))
    for node in C.walk(new_fn):
        q = qualname(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if q and (q.startswith(("estimator", "metrics.")) or q in GLOBAL_STEP_READS):
            raise Decline(node, f"`tf.{q}` in the model_fn has no TF 2.21 counterpart the step can give it")
        if isinstance(node, cst.Call) and (qualname(node.func) or "").startswith("summary."):
            raise Decline(node, "the model_fn writes summaries, which the Estimator saved every save_summary_steps"
                          " from its session; the migrated step runs on the workers, which write none",
                          hint="write them from the training loop with tf.summary and a file writer")
        if isinstance(node, cst.Call) and qualname(node.func) in ("Variable", "train.get_or_create_global_step"):
            raise Decline(node, "the model_fn creates a tf.Variable, which a model called at every step would"
                          " create again", hint="create it with tf.compat.v1.get_variable")
    if predictions and predictions_dict is None:
        raise Decline(fn, "the program predicts, but the model_fn has no `if mode == PREDICT:` branch returning an"
                      " EstimatorSpec of predictions", hint="migrate the prediction by hand")
    if exports and predict_signatures is None:
        raise Decline(fn, "the job exports SavedModels, but the model_fn has no `if mode == PREDICT:` branch"
                      " returning an EstimatorSpec of predictions", hint="export by hand with tf.saved_model.save")
    return ModelPlan(new_fn, params, optimizer, hoisted, is_keras, dropped_predict, metrics, log_every,
                     predict_signatures, [(kind, C.code_of(tag)) for _, kind, tag, _ in summaries] or None,
                     predictions_dict)


def _merge_equal_returns(fn: cst.FunctionDef) -> cst.FunctionDef:
    """``if mode == "train": return loss`` followed by ``return loss``: the
    branch the train op made goes (both modes now return the loss)."""
    body = list(C.body_of(fn.body))
    out = []
    for i, st in enumerate(body):
        if (isinstance(st, cst.If) and st.orelse is None and i + 1 < len(body)
                and len(C.body_of(st.body)) == 1
                and isinstance(C.body_of(st.body)[0], cst.SimpleStatementLine)
                and isinstance(body[i + 1], cst.SimpleStatementLine)
                and C.code_of(C.body_of(st.body)[0]).strip() == C.code_of(body[i + 1]).strip()
                and isinstance(body[i + 1].body[0], cst.Return)):
            continue
        out.append(st)
    return fn.with_changes(body=fn.body.with_changes(body=out))
