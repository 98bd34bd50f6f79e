"""TFM403 analysis: why a job of a premade Estimator, or of a ``tf.contrib.learn``
``Experiment``, stays TF1, said where it shows.

Premade (canned) Estimators build their model, loss head and default optimizer
inside the Estimator: there is no model_fn for the migrated loop to call, and
TF 2.21 has no premade model with the same numerics (Keras 3 dropped the
feature-column layers and ``LinearModel``). The reason names each one's TF 1.x
numerics, what a TF2 port builds, and what differs, so the port is a choice
made knowingly.

An ``Experiment`` (``learn_runner.run(experiment_fn, ...)``, or the object's own
``train_and_evaluate()``) wired an Estimator to TF_CONFIG's roles by a schedule;
tf.estimator's ``train_and_evaluate(estimator, TrainSpec, EvalSpec)`` replaced it
(TF 1.4), and that is the shape TFM403 migrates. The reason is the job's first
blocker: its Estimator (premade, built in another module, or whose model_fn is
not a function of this file), else the Experiment itself, with the
train_and_evaluate it maps onto.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._tfm403_origin import origin, why_not_here

_LINEAR = ("a linear model: every feature column's weighted sum (weights and bias initialized to zeros), FTRL at"
           " learning rate min(0.2, 1/sqrt(number of feature columns))")
_DNN = ("ReLU dense layers of hidden_units (Glorot-uniform kernels, zero biases, optional dropout) on the feature"
        " columns' input layer, Adagrad at 0.05")
_CLASSIFIER = "softmax cross-entropy (sigmoid for n_classes=2)"
_REGRESSOR = "mean squared error"
_SUMMED = "summed over the batch in TF 1.x (loss_reduction=SUM)"
_PREMADE = {
    "LinearClassifier": f"{_LINEAR}; head: {_CLASSIFIER} {_SUMMED}",
    "LinearRegressor": f"{_LINEAR}; head: {_REGRESSOR} {_SUMMED}",
    "DNNClassifier": f"{_DNN}; head: {_CLASSIFIER} {_SUMMED}",
    "DNNRegressor": f"{_DNN}; head: {_REGRESSOR} {_SUMMED}",
    "DNNLinearCombinedClassifier": (f"the sum of {_LINEAR} (the linear_feature_columns) and {_DNN} (the"
                                    f" dnn_feature_columns), each part with its own optimizer; head: {_CLASSIFIER}"
                                    f" {_SUMMED}"),
    "DNNLinearCombinedRegressor": (f"the sum of {_LINEAR} (the linear_feature_columns) and {_DNN} (the"
                                   f" dnn_feature_columns), each part with its own optimizer; head: {_REGRESSOR}"
                                   f" {_SUMMED}"),
    "BoostedTreesClassifier": "gradient boosted trees (TF 2.21 has none: TensorFlow Decision Forests is their successor)",
    "BoostedTreesRegressor": "gradient boosted trees (TF 2.21 has none: TensorFlow Decision Forests is their successor)",
    "BaselineClassifier": f"a bias only (the label distribution); head: {_CLASSIFIER} {_SUMMED}",
    "BaselineRegressor": f"a bias only (the labels' mean); head: {_REGRESSOR} {_SUMMED}",
}
_TF2_PORT = ("TF 2.21's counterpart is a Keras model on preprocessing layers (Normalization, StringLookup,"
             " CategoryEncoding, Discretization, HashedCrossing in place of the feature columns) with the same"
             " layers, loss and optimizer, trained by a strategy loop; its variables, initial values and feature"
             " transformations are not the premade's, so it does not train the same numbers")

EXPERIMENT = "contrib.learn.Experiment"
_EXPERIMENT_ARGS = (
    "estimator", "train_input_fn", "eval_input_fn", "eval_metrics", "train_steps", "eval_steps", "train_monitors",
    "eval_hooks", "local_eval_frequency", "eval_delay_secs", "continuous_eval_throttle_secs", "min_eval_frequency",
    "delay_workers_by_global_step", "export_strategies", "train_steps_per_iteration", "checkpoint_and_export",
    "saving_listeners", "check_interval_secs")


def premade_name(qualname: str | None) -> str | None:
    """``"estimator.DNNClassifier"`` / ``"contrib.learn.DNNClassifier"`` -> ``"DNNClassifier"``."""
    if not qualname or not qualname.startswith(("estimator.", "contrib.learn.")):
        return None
    last = qualname.rpartition(".")[2]
    return last if last in _PREMADE else None


def premade_reason(qualname: str) -> tuple[str, str]:
    """(why, hint) for a job of the premade Estimator ``qualname``: the why goes
    after "`tf.<qualname>` is a premade Estimator: "."""
    name = premade_name(qualname) or qualname.rpartition(".")[2]
    why = (f"it has no model_fn for the migrated loop to call ({_PREMADE.get(name, 'its model and head')}, built"
           f" inside the Estimator); {_TF2_PORT}")
    return why, ("port it by hand (TF2 guide: migrate/migrating_feature_columns and migrating_estimator), or give"
                 " the job a custom model_fn computing what you want, which TFM403 migrates")


def _bound_args(call: cst.Call, params: tuple[str, ...]) -> dict[str, cst.BaseExpression]:
    """The arguments of ``call`` that bind to ``params`` statically (``*args``/``**kwargs`` skipped)."""
    out: dict[str, cst.BaseExpression] = {}
    for position, a in enumerate(call.args):
        if a.star:
            break
        if a.keyword is None and position < len(params):
            out[params[position]] = a.value
    for a in call.args:
        if a.keyword is not None and not a.star:
            out[a.keyword.value] = a.value
    return out


def enclosing_bindings(module: cst.Module, call: cst.CSTNode) -> dict[str, list[cst.BaseStatement]]:
    """The statements binding each name in the function (or module) holding ``call`` (a node)."""
    holder: cst.CSTNode = module
    for node in C.walk(module):
        if isinstance(node, cst.FunctionDef) and node is not call and any(n is call for n in C.walk(node)):
            holder = node  # the innermost one wins: walk goes outside in
    out: dict[str, list[cst.BaseStatement]] = {}
    for st in C.walk(holder):
        if isinstance(st, cst.SimpleStatementLine):
            for name in C.assignment(st)[0]:
                out.setdefault(name, []).append(st)
    return out


def binding_before(module: cst.Module, node: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """What ``name`` was last bound to before the statement holding ``node``, in
    the function (or module) holding it."""
    holder: cst.CSTNode = module
    for candidate in C.walk(module):
        if isinstance(candidate, cst.FunctionDef) and any(n is node for n in C.walk(candidate)):
            holder = candidate
    value = None
    for st in C.walk(holder):
        if not isinstance(st, cst.SimpleStatementLine):
            continue
        if any(n is node for n in C.walk(st)):
            return value
        if name in C.assignment(st)[0]:
            value = C.assignment(st)[1] if C.assignment(st)[0] == [name] else None
    return None


def experiment_decline(module: cst.Module, qualname, path: str,
                       functions: dict[str, cst.FunctionDef]) -> tuple[cst.CSTNode, str, str] | None:
    """(node, why, hint) of a module's Experiment job, or None when it has none."""
    experiments = [c for c in C.calls_in(module) if qualname(c.func) == EXPERIMENT]
    if not experiments:
        return None
    experiment = experiments[0]
    estimator = _bound_args(experiment, _EXPERIMENT_ARGS).get("estimator")
    if isinstance(estimator, cst.Name):
        estimator = binding_before(module, experiment, estimator.value)
    if isinstance(estimator, cst.Call):
        q = qualname(estimator.func)
        if premade_name(q):
            why, hint = premade_reason(q)
            return estimator, f"the Experiment's Estimator, `tf.{q}`, is a premade Estimator: {why}", hint
        if q in ("estimator.Estimator", "contrib.learn.Estimator"):
            model_fn = _bound_args(estimator, ("model_fn", "model_dir", "config", "params")).get("model_fn")
            if model_fn is not None and not (isinstance(model_fn, cst.Name) and model_fn.value in functions):
                found = origin(module, path, model_fn)
                if found is not None:
                    why, hint = why_not_here(found, "model_fn")
                    return estimator, f"the Experiment's Estimator: {why}", hint
                made = binding_before(module, estimator, model_fn.value) if isinstance(model_fn, cst.Name) else None
                what = f"`{C.code_of(made)}`" if made is not None else "not a function"
                return estimator, (f"the Experiment's Estimator's model_fn, `{C.code_of(model_fn)}`, is {what}, not a"
                                  " function of this module: the migration rewrites the model_fn it calls"), (
                    "define the model_fn as a module-level function of this file")
        elif q is None:
            found = origin(module, path, estimator.func)
            if found is not None:
                where = (f"the library `{found.module}`" if found.project is None else
                         f"the project module `{found.module}`" if found.project.present else
                         f"`{found.module}`, which is not in this project (no {found.module.replace('.', '/')}.py"
                         " beside this file or at the root of its packages)")
                return estimator, (f"the Experiment's Estimator is built by `{C.code_of(estimator.func)}(...)` of"
                                   f" {where}, not in this file: the migration needs its model_fn here"), (
                    "build the Estimator (with its model_fn) in this file, or migrate by hand")
    return experiment, ("a tf.contrib.learn Experiment (run by learn_runner.run or its own methods, in the role"
                        " TF_CONFIG gives): TFM403 migrates tf.estimator.train_and_evaluate jobs, which replaced it"), (
        "write it as tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(train_input_fn,"
        " max_steps=train_steps), tf.estimator.EvalSpec(eval_input_fn, steps=eval_steps)), then migrate again")
