"""TF1 -> TF2 equivalents of optimizers, learning-rate schedules,
initializers and ``get_variable``.

Pure libcst (the codemod never imports TensorFlow). Used by the skeleton
rules. Every mapping function returns ``(replacement, note)``:

- ``(node, "")``: same numerics (checked by ``tests/test_equivalents.py``
  and, for schedules, ``tests/test_tfm301_wild.py`` against real
  TensorFlow: TF1 graph mode vs the generated TF2 code);
- ``(node, note)``: the closest TF2 construct; ``note`` says what differs;
- ``(None, reason)``: no safe replacement; ``reason`` says why.

Arguments are mapped from positional and keyword form; the replacement always
uses keywords. TF1 defaults that differ from the TF2 defaults are written out
(``epsilon=1e-08`` for Adam: Keras defaults to 1e-7).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.tfnames import dotted

# --------------------------------------------------------------------------- helpers


def _chain(name: str) -> cst.BaseExpression:
    parts = name.split(".")
    node: cst.BaseExpression = cst.Name(parts[0])
    for p in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(p))
    return node


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def _num(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def _call(func: str, args: list[cst.Arg]) -> cst.Call:
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return cst.Call(func=_chain(func), args=args)


def bind_args(call: cst.Call, params: tuple[str, ...]) -> tuple[dict[str, cst.BaseExpression] | None, str]:
    """Map a call's positional and keyword arguments to ``params``.
    (None, reason) for ``*args``/``**kwargs``, unknown keywords or too many positionals."""
    out: dict[str, cst.BaseExpression] = {}
    pos = 0
    for a in call.args:
        if a.star:
            return None, f"`{a.star}` arguments cannot be mapped statically"
        if a.keyword is None:
            if pos >= len(params):
                return None, "more positional arguments than the TF1 signature has"
            out[params[pos]] = a.value
            pos += 1
        else:
            k = a.keyword.value
            if k not in params:
                return None, f"unknown argument `{k}`"
            if k in out:
                return None, f"argument `{k}` given twice"
            out[k] = a.value
    return out, ""


def _short(qualname: str) -> str:
    """``"train.AdamOptimizer"`` / ``"compat.v1.train.AdamOptimizer"`` -> ``"AdamOptimizer"``."""
    return qualname.rsplit(".", 1)[-1]


def _is_false(node: cst.BaseExpression | None) -> bool:
    return node is None or (isinstance(node, cst.Name) and node.value == "False")


# --------------------------------------------------------------------------- optimizers


@dataclass(frozen=True)
class _OptSpec:
    params: tuple[str, ...]  # TF1 signature, in order
    required: tuple[str, ...]
    target: str  # Keras 3 class under tf.keras.optimizers
    # TF1 name -> Keras name (None: dropped)
    rename: dict[str, str | None]
    # Keras keyword -> TF1 default to write out when the TF1 call omits it
    explicit_defaults: dict[str, str]
    note: str = ""


_DROP = {"use_locking": None, "name": "name"}

_OPTIMIZERS: dict[str, _OptSpec] = {
    "GradientDescentOptimizer": _OptSpec(
        ("learning_rate", "use_locking", "name"),
        ("learning_rate",),
        "SGD",
        {"learning_rate": "learning_rate", **_DROP},
        {},
    ),
    "MomentumOptimizer": _OptSpec(
        ("learning_rate", "momentum", "use_locking", "name", "use_nesterov"),
        ("learning_rate", "momentum"),
        "SGD",
        {"learning_rate": "learning_rate", "momentum": "momentum", "use_nesterov": "nesterov", **_DROP},
        {},
    ),
    "AdamOptimizer": _OptSpec(
        ("learning_rate", "beta1", "beta2", "epsilon", "use_locking", "name"),
        (),
        "Adam",
        {"learning_rate": "learning_rate", "beta1": "beta_1", "beta2": "beta_2", "epsilon": "epsilon", **_DROP},
        {"learning_rate": "0.001", "epsilon": "1e-08"},
    ),
    "AdagradOptimizer": _OptSpec(
        ("learning_rate", "initial_accumulator_value", "use_locking", "name"),
        ("learning_rate",),
        "Adagrad",
        {"learning_rate": "learning_rate", "initial_accumulator_value": "initial_accumulator_value", **_DROP},
        # TF1 Adagrad has no epsilon: var -= lr * g / sqrt(accum)
        {"initial_accumulator_value": "0.1", "epsilon": "0.0"},
    ),
    "AdadeltaOptimizer": _OptSpec(
        ("learning_rate", "rho", "epsilon", "use_locking", "name"),
        (),
        "Adadelta",
        {"learning_rate": "learning_rate", "rho": "rho", "epsilon": "epsilon", **_DROP},
        {"learning_rate": "0.001", "rho": "0.95", "epsilon": "1e-08"},
    ),
}

# TF1 optimizers kept as ``tf.compat.v1.train.*``: they run in TF2 (eagerly, in a
# tf.function, under every strategy: apply_gradients merges the replicas'
# gradients itself) with TF1's exact numerics, where the Keras 3 optimizer of
# the same name follows another trajectory. Name -> why, and how to switch.
KEPT_IN_COMPAT_V1 = {
    "RMSPropOptimizer": (
        "kept tf.compat.v1.train.RMSPropOptimizer, which runs in TF2 with TF1's numerics: Keras 3 RMSprop starts"
        " its mean-square accumulator at 0.0 where TF1 started it at 1.0, so its first updates are about"
        " learning_rate / sqrt(1 - decay) whatever the gradient, where TF1's scale with the gradient (about"
        " learning_rate * gradient while gradients are small), and the whole trajectory differs. To move to Keras, use"
        " tf.keras.optimizers.RMSprop(learning_rate=..., rho=<decay>, momentum=..., epsilon=<TF1 epsilon, 1e-10"
        " by default>, centered=...) and accept, or retune for, the different early steps"
    ),
}

_NO_OPTIMIZER = {
    "FtrlOptimizer": "Keras 3 Ftrl differs from TF1 Ftrl (l2_shrinkage and the learning-rate power"
    " are applied differently); port the update rule or keep the TF1 optimizer in compat.v1",
    "ProximalGradientDescentOptimizer": "Keras 3 has no proximal gradient descent",
    "ProximalAdagradOptimizer": "Keras 3 has no proximal Adagrad",
    "AdagradDAOptimizer": "Keras 3 has no Adagrad dual averaging",
    "SyncReplicasOptimizer": "not an optimizer to convert: synchronous training is"
    " tf.distribute.MultiWorkerMirroredStrategy (see legacy_reference/sync_replicas.py)",
}


def optimizer_call(call: cst.Call, qualname: str) -> tuple[cst.Call | None, str]:
    """TF1 optimizer constructor -> ``tf.keras.optimizers.X(...)`` with the same update rule.

    ``qualname`` is the canonical TF name of ``call.func`` (``"train.AdamOptimizer"``).
    """
    if qualname.startswith(("keras.", "optimizers.")):
        return call, ""  # already a Keras optimizer
    short = _short(qualname)
    if short in _NO_OPTIMIZER:
        return None, _NO_OPTIMIZER[short]
    if short in KEPT_IN_COMPAT_V1:
        return None, KEPT_IN_COMPAT_V1[short]
    spec = _OPTIMIZERS.get(short)
    if spec is None:
        return None, f"no known Keras 3 equivalent of `{qualname}`"
    bound, why = bind_args(call, spec.params)
    if bound is None:
        return None, why
    missing = [p for p in spec.required if p not in bound]
    if missing:
        return None, f"required argument `{missing[0]}` missing"
    args: list[cst.Arg] = []
    given: set[str] = set()
    for tf1_name in spec.params:
        if tf1_name not in bound:
            continue
        keras_name = spec.rename.get(tf1_name)
        if keras_name is None:
            continue
        if tf1_name == "use_nesterov" and _is_false(bound[tf1_name]):
            continue
        if tf1_name == "centered" and _is_false(bound[tf1_name]):
            continue
        args.append(_kw(keras_name, bound[tf1_name]))
        given.add(keras_name)
    # TF1 defaults that differ from Keras 3's, written out in TF1 parameter order
    for keras_name, value in spec.explicit_defaults.items():
        if keras_name not in given:
            args.append(_kw(keras_name, _num(value)))
    order = [spec.rename.get(p) for p in spec.params if spec.rename.get(p)] + list(spec.explicit_defaults)
    args.sort(key=lambda a: order.index(a.keyword.value) if a.keyword.value in order else len(order))
    return _call(f"tf.keras.optimizers.{spec.target}", args), spec.note


# --------------------------------------------------------------------------- learning-rate schedules


@dataclass(frozen=True)
class _ScheduleSpec:
    params: tuple[str, ...]  # TF1 signature, in order
    step: str  # the TF1 parameter holding the global step
    target: str  # Keras 3 class under tf.keras.optimizers.schedules
    rename: dict[str, str]  # TF1 name -> Keras name (the step is dropped: the optimizer's iterations drive it)


_SCHEDULES: dict[str, _ScheduleSpec] = {
    "exponential_decay": _ScheduleSpec(
        ("learning_rate", "global_step", "decay_steps", "decay_rate", "staircase", "name"), "global_step",
        "ExponentialDecay",
        {"learning_rate": "initial_learning_rate", "decay_steps": "decay_steps", "decay_rate": "decay_rate",
         "staircase": "staircase", "name": "name"},
    ),
    "piecewise_constant": _ScheduleSpec(
        ("x", "boundaries", "values", "name"), "x", "PiecewiseConstantDecay",
        {"boundaries": "boundaries", "values": "values", "name": "name"},
    ),
    "polynomial_decay": _ScheduleSpec(
        ("learning_rate", "global_step", "decay_steps", "end_learning_rate", "power", "cycle", "name"),
        "global_step", "PolynomialDecay",
        {"learning_rate": "initial_learning_rate", "decay_steps": "decay_steps",
         "end_learning_rate": "end_learning_rate", "power": "power", "cycle": "cycle", "name": "name"},
    ),
    "inverse_time_decay": _ScheduleSpec(
        ("learning_rate", "global_step", "decay_steps", "decay_rate", "staircase", "name"), "global_step",
        "InverseTimeDecay",
        {"learning_rate": "initial_learning_rate", "decay_steps": "decay_steps", "decay_rate": "decay_rate",
         "staircase": "staircase", "name": "name"},
    ),
    "cosine_decay": _ScheduleSpec(
        ("learning_rate", "global_step", "decay_steps", "alpha", "name"), "global_step", "CosineDecay",
        {"learning_rate": "initial_learning_rate", "decay_steps": "decay_steps", "alpha": "alpha", "name": "name"},
    ),
}
# TF1 schedules no Keras 3 schedule computes (``natural_exp_decay`` is
# ``lr * exp(-rate * p)``; ExponentialDecay's ``lr * exp(-rate) ** p`` rounds differently);
# each takes the global step as its second argument
NO_KERAS_SCHEDULE = frozenset(
    {"natural_exp_decay", "linear_cosine_decay", "noisy_linear_cosine_decay", "cosine_decay_restarts"})


def is_schedule(qualname: str | None) -> bool:
    """Is ``qualname`` (``"train.exponential_decay"``) a TF1 learning-rate schedule?"""
    return bool(qualname) and qualname.startswith("train.") and (
        _short(qualname) in _SCHEDULES or _short(qualname) in NO_KERAS_SCHEDULE)


def schedule_step(call: cst.Call, qualname: str) -> cst.BaseExpression | None:
    """The global-step argument of a TF1 schedule call (``x`` of ``piecewise_constant``)."""
    spec = _SCHEDULES.get(_short(qualname))
    if spec is None:
        return _call_arg(call, 1, "global_step") if _short(qualname) in NO_KERAS_SCHEDULE else None
    bound, _ = bind_args(call, spec.params)
    return None if bound is None else bound.get(spec.step)


def _call_arg(call: cst.Call, pos: int, keyword: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[pos].value if pos < len(positional) else None


def schedule_call(call: cst.Call, qualname: str, global_step: str | None) -> tuple[cst.Call | None, str]:
    """TF1 learning-rate schedule of the global step -> the Keras 3 schedule
    computing the same values (``tf.train.exponential_decay(0.1, global_step,
    1000, 0.96)`` -> ``tf.keras.optimizers.schedules.ExponentialDecay(
    initial_learning_rate=0.1, decay_steps=1000, decay_rate=0.96)``).

    A Keras optimizer calls its schedule with its own ``iterations``, which
    advance once per applied step, as the global step did when the train op
    advanced it (``minimize(..., global_step=global_step)``): ``global_step``
    is that variable's name, and the TF1 schedule must read it."""
    short = _short(qualname)
    spec = _SCHEDULES.get(short)
    if spec is None:
        if short in NO_KERAS_SCHEDULE:
            return None, f"no Keras 3 schedule computes tf.train.{short}'s values"
        return None, f"no known Keras 3 equivalent of `{qualname}`"
    bound, why = bind_args(call, spec.params)
    if bound is None:
        return None, why
    missing = [p for p in spec.params if p not in bound and p in spec.rename and p not in _SCHEDULE_OPTIONAL]
    if missing or spec.step not in bound:
        return None, f"required argument `{(missing or [spec.step])[0]}` missing"
    step = bound[spec.step]
    if global_step is None or not (isinstance(step, cst.Name) and step.value == global_step):
        return None, (
            f"the schedule reads `{_code(step)}`, not a global step the train op advances once per step"
            " (the Keras optimizer's iterations would drive it)")
    args = [_kw(spec.rename[p], bound[p]) for p in spec.params if p in bound and p != spec.step]
    return _call(f"tf.keras.optimizers.schedules.{spec.target}", args), ""


_SCHEDULE_OPTIONAL = {"staircase", "name", "end_learning_rate", "power", "cycle", "alpha"}


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


# --------------------------------------------------------------------------- initializers


@dataclass(frozen=True)
class _InitSpec:
    params: tuple[str, ...]
    target: str
    rename: dict[str, str | None]  # TF1 name -> TF2 keyword (None: dropped)
    explicit_defaults: dict[str, str]  # TF2 keyword -> TF1 default (where TF2's differs)
    note: str = ""


_SEED_NOTE = (
    "same distribution, different values for the same seed: TF2 initializers draw from"
    " stateless RNGs; `tf.compat.v1.{name}` called eagerly reproduces the TF1 values"
)
_GLOROT_NOTE = (
    "same distribution, different random values than TF1 for the same seed"
)

_INITIALIZERS: dict[str, _InitSpec] = {
    "zeros_initializer": _InitSpec(("dtype",), "tf.zeros_initializer", {"dtype": None}, {}),
    "ones_initializer": _InitSpec(("dtype",), "tf.ones_initializer", {"dtype": None}, {}),
    "constant_initializer": _InitSpec(
        ("value", "dtype", "verify_shape"), "tf.constant_initializer",
        {"value": "value", "dtype": None, "verify_shape": None}, {"value": "0"},
    ),
    "random_normal_initializer": _InitSpec(
        ("mean", "stddev", "seed", "dtype"), "tf.random_normal_initializer",
        {"mean": "mean", "stddev": "stddev", "seed": "seed", "dtype": None},
        {"mean": "0.0", "stddev": "1.0"}, _SEED_NOTE,
    ),
    "random_uniform_initializer": _InitSpec(
        ("minval", "maxval", "seed", "dtype"), "tf.random_uniform_initializer",
        {"minval": "minval", "maxval": "maxval", "seed": "seed", "dtype": None},
        {"minval": "0.0", "maxval": "1.0"}, _SEED_NOTE,
    ),
    "truncated_normal_initializer": _InitSpec(
        ("mean", "stddev", "seed", "dtype"), "tf.keras.initializers.TruncatedNormal",
        {"mean": "mean", "stddev": "stddev", "seed": "seed", "dtype": None},
        {"mean": "0.0", "stddev": "1.0"}, _SEED_NOTE,
    ),
    "glorot_uniform_initializer": _InitSpec(
        ("seed", "dtype"), "tf.keras.initializers.GlorotUniform", {"seed": "seed", "dtype": None}, {},
        _GLOROT_NOTE,
    ),
    "glorot_normal_initializer": _InitSpec(
        ("seed", "dtype"), "tf.keras.initializers.GlorotNormal", {"seed": "seed", "dtype": None}, {},
        _GLOROT_NOTE,
    ),
    "orthogonal_initializer": _InitSpec(
        ("gain", "seed", "dtype"), "tf.keras.initializers.Orthogonal",
        {"gain": "gain", "seed": "seed", "dtype": None}, {}, _GLOROT_NOTE,
    ),
    "xavier_initializer": _InitSpec(  # tf.contrib.layers
        ("uniform", "seed", "dtype"), "", {"seed": "seed", "dtype": None}, {},
        "contrib's normal Xavier used a truncated normal with stddev sqrt(1.3/fan_avg);"
        " GlorotNormal uses sqrt(2/(fan_in+fan_out))/0.8796 (same variance). " + _GLOROT_NOTE,
    ),
}
_INITIALIZERS["glorot_uniform"] = _INITIALIZERS["glorot_uniform_initializer"]


def initializer_call(call: cst.Call, qualname: str) -> tuple[cst.BaseExpression | None, str]:
    """TF1 initializer constructor -> TF2 initializer (``tf.zeros_initializer()``,
    ``tf.keras.initializers.GlorotUniform(seed=1)`` ...)."""
    if qualname.startswith(("keras.", "initializers.")):
        return None, "already a TF2 initializer"
    short = _short(qualname)
    spec = _INITIALIZERS.get(short)
    if short == "variance_scaling_initializer":
        return _variance_scaling(call)
    if spec is None:
        return None, f"no known TF2 equivalent of `{qualname}`"
    bound, why = bind_args(call, spec.params)
    if bound is None:
        return None, why
    notes = [spec.note.format(name=short)] if spec.note else []
    target = spec.target
    if short == "xavier_initializer":
        uniform = bound.get("uniform")
        if uniform is None or (isinstance(uniform, cst.Name) and uniform.value == "True"):
            target = "tf.keras.initializers.GlorotUniform"
            notes = [_GLOROT_NOTE]
        elif isinstance(uniform, cst.Name) and uniform.value == "False":
            target = "tf.keras.initializers.GlorotNormal"
        else:
            return None, "`uniform=` is not a literal: choose GlorotUniform or GlorotNormal by hand"
    if "dtype" in bound:
        notes.append("dtype moved to the call: pass dtype= when calling the initializer")
    args: list[cst.Arg] = []
    given = set()
    for p in spec.params:
        k = spec.rename.get(p)
        if p in bound and k:
            args.append(_kw(k, bound[p]))
            given.add(k)
    for k, v in spec.explicit_defaults.items():
        if k not in given:
            args.append(_kw(k, _num(v)))
    order = [spec.rename.get(p) for p in spec.params if spec.rename.get(p)]
    args.sort(key=lambda a: order.index(a.keyword.value) if a.keyword.value in order else len(order))
    return _call(target, args), " ".join(notes)


def _variance_scaling(call: cst.Call) -> tuple[cst.BaseExpression | None, str]:
    params = ("scale", "mode", "distribution", "seed", "dtype")
    bound, why = bind_args(call, params)
    if bound is None:
        return None, why
    args: list[cst.Arg] = []
    for p in ("scale", "mode", "distribution", "seed"):
        if p not in bound:
            continue
        value = bound[p]
        if p == "distribution" and isinstance(value, cst.SimpleString) and value.evaluated_value == "normal":
            # TF1's deprecated "normal" means a truncated normal
            value = cst.SimpleString('"truncated_normal"')
        args.append(_kw(p, value))
    if "distribution" not in bound:
        args.append(_kw("distribution", cst.SimpleString('"truncated_normal"')))
    return _call("tf.keras.initializers.VarianceScaling", args), _GLOROT_NOTE


# --------------------------------------------------------------------------- get_variable

_GET_VARIABLE_PARAMS = (
    "name", "shape", "dtype", "initializer", "regularizer", "trainable", "collections",
    "caching_device", "partitioner", "validate_shape", "use_resource", "custom_getter",
    "constraint", "synchronization", "aggregation",
)
_UNSUPPORTED_GET_VARIABLE = {
    "regularizer": "add the regularization loss to the training loss by hand",
    "collections": "TF2 has no collections; keep a Python list",
    "partitioner": "use tf.distribute.experimental.partitioners under ParameterServerStrategy",
    "custom_getter": "custom getters do not exist in TF2",
    "caching_device": "caching devices do not exist in TF2",
}
_PASSTHROUGH = ("trainable", "validate_shape", "constraint", "synchronization", "aggregation")


def variable_from_get_variable(call: cst.Call) -> tuple[cst.Call | None, str]:
    """``tf.get_variable(name, shape, dtype=, initializer=, trainable=)`` ->
    ``tf.Variable(<initializer>(shape, dtype=...), name=name, trainable=...)``."""
    bound, why = bind_args(call, _GET_VARIABLE_PARAMS)
    if bound is None:
        return None, why
    for p, hint in _UNSUPPORTED_GET_VARIABLE.items():
        if p in bound and not (isinstance(bound[p], cst.Name) and bound[p].value == "None"):
            return None, f"`{p}=` has no tf.Variable equivalent: {hint}"
    notes = ["variable_scope reuse does not apply to tf.Variable: create each variable once and pass it on"]
    shape = bound.get("shape")
    dtype = bound.get("dtype")
    init = bound.get("initializer")
    if init is None or (isinstance(init, cst.Name) and init.value == "None"):
        # TF1 default for floating variables: glorot_uniform_initializer()
        factory: cst.BaseExpression | None = _call("tf.keras.initializers.GlorotUniform", [])
        notes.append(
            "TF1's default initializer was glorot_uniform (zeros for integer/bool dtypes);"
            " random values differ from TF1's"
        )
    elif _looks_like_initializer(init):
        mapped, note = initializer_call(init, dotted(init.func) or "")
        # unmapped: keep the caller's initializer (v1 initializers also run eagerly)
        factory = init if mapped is None else mapped
        if mapped is not None and note:
            notes.append(note)
    elif shape is None:
        factory = None  # the initializer is the initial value (a tensor or array)
    else:
        factory = init  # an initializer object held in a name
    if factory is not None:
        if shape is None:
            return None, "an initializer needs a shape"
        call_args = [cst.Arg(shape)]
        if dtype is not None:
            call_args.append(_kw("dtype", dtype))
        value: cst.BaseExpression = cst.Call(func=factory, args=call_args)
    else:
        value = init
    args: list[cst.Arg] = [cst.Arg(value)]
    if "name" in bound:
        args.append(_kw("name", bound["name"]))
    if factory is None and dtype is not None:
        args.append(_kw("dtype", dtype))
    for p in _PASSTHROUGH:
        if p in bound:
            args.append(_kw(p, bound[p]))
    return _call("tf.Variable", args), " ".join(notes)


def _looks_like_initializer(node: cst.BaseExpression) -> bool:
    if not isinstance(node, cst.Call):
        return False
    d = dotted(node.func) or ""
    last = d.rsplit(".", 1)[-1]
    return last.endswith("_initializer") or last in _INITIALIZERS or "initializers." in d


def kept_in_compat_v1(qualname: str | None) -> bool:
    """Is ``qualname`` (``"train.RMSPropOptimizer"``) a TF1 optimizer kept as
    ``tf.compat.v1`` on purpose, for its exact numerics (``KEPT_IN_COMPAT_V1``)?"""
    return bool(qualname) and _short(qualname) in KEPT_IN_COMPAT_V1


__all__ = [
    "KEPT_IN_COMPAT_V1",
    "NO_KERAS_SCHEDULE",
    "bind_args",
    "initializer_call",
    "is_schedule",
    "kept_in_compat_v1",
    "optimizer_call",
    "schedule_call",
    "schedule_step",
    "variable_from_get_variable",
]
