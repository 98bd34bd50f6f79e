"""The ``tf.contrib`` members ``tfmigrate check`` provides on TensorFlow 2.

TF 2.0 removed ``tensorflow.contrib``; legacy training scripts build their
models with its layers (``slim.conv2d``, ``tf.contrib.layers.fully_connected``),
scope them with ``slim.arg_scope`` and make their global step with
``tf.contrib.framework.get_or_create_global_step``. The harness (feature
``contrib``) installs the modules built here under their TF1 names, so an
unmodified legacy program imports and calls them in any spelling TF 1.x
accepted: ``import tensorflow.contrib.slim as slim``, ``from
tensorflow.contrib import layers``, ``tf.contrib.slim.layers.conv2d``,
``from tensorflow.contrib.layers import fully_connected``... Every spelling of
a member is the same object, as in TF1 (``slim.conv2d is
tf.contrib.layers.conv2d``), so ``arg_scope([slim.conv2d], ...)`` reaches
``tf.contrib.layers.conv2d`` calls too.

Each member is what TF 1.x ran: the layers are the TF1 code TFM104 writes into
migrations (:mod:`migrate.codemod.tf1_layers`: same variable names,
initializers and ops), ``arg_scope`` is TF1's (one stack per process, a call's
own keywords over the scope's), the initializers and regularizers compute TF1's
formulas, the members TF 1.x later moved to core are those core functions
(the renames ``tf_upgrade_v2`` applies), and TF1's MNIST reader is the
synthetic stand-in both sides of a check read. Which members exist is decided
in :mod:`migrate.runtime.legacy_compat` (never importing TensorFlow); a
member outside that list raises ``AttributeError`` naming what is provided,
and ``check`` refuses a script using one before running it.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import types
from collections.abc import Callable

from migrate.runtime import legacy_compat

# TF1's arg_scope state (tensorflow/contrib/framework/python/ops/arg_scope.py):
# a stack of {op key: {keyword: value}}, and the keyword names of decorated ops.
_ARGSTACK: list[dict] = [{}]
_DECORATED_OPS: dict[str, list[str]] = {}


def _key_op(op) -> str:
    return getattr(op, "_key_op", str(op))


def current_arg_scope() -> dict:
    return _ARGSTACK[-1]


def has_arg_scope(func) -> bool:
    return _key_op(func) in _DECORATED_OPS


def arg_scoped_arguments(func) -> list[str]:
    assert has_arg_scope(func)
    return _DECORATED_OPS[_key_op(func)]


def add_arg_scope(func: Callable) -> Callable:
    """TF1's ``add_arg_scope``: ``func`` takes its defaults from the
    innermost ``arg_scope`` naming it; keywords of the call win."""

    @functools.wraps(func)
    def func_with_args(*args, **kwargs):
        current_scope = current_arg_scope()
        current_args = kwargs
        key_func = _key_op(func)
        if key_func in current_scope:
            current_args = current_scope[key_func].copy()
            current_args.update(kwargs)
        return func(*args, **current_args)

    parameters = inspect.signature(func).parameters.values()
    _DECORATED_OPS[_key_op(func)] = [p.name for p in parameters if p.default is not inspect.Parameter.empty]
    func_with_args._key_op = _key_op(func)
    return func_with_args


class _ArgScope:
    """TF1's ``arg_scope(list_ops_or_scope, **kwargs)`` context manager."""

    def __init__(self, list_ops_or_scope, **kwargs):
        if isinstance(list_ops_or_scope, dict):
            if kwargs:
                raise ValueError(
                    "When attempting to re-use a scope by suppling a dictionary, kwargs must be empty.")
        elif not isinstance(list_ops_or_scope, (list, tuple)):
            raise TypeError("list_ops_or_scope must either be a list/tuple or reused scope (i.e. dict)")
        self.list_ops_or_scope = list_ops_or_scope
        self.kwargs = kwargs

    def __enter__(self) -> dict:
        if isinstance(self.list_ops_or_scope, dict):
            current_scope = self.list_ops_or_scope.copy()
        else:
            current_scope = current_arg_scope().copy()
            for op in self.list_ops_or_scope:
                key = _key_op(op)
                if not has_arg_scope(op):
                    raise ValueError(f"{(op.__module__, op.__name__)} is not decorated with @add_arg_scope")
                if key in current_scope:
                    current_kwargs = current_scope[key].copy()
                    current_kwargs.update(self.kwargs)
                    current_scope[key] = current_kwargs
                else:
                    current_scope[key] = self.kwargs.copy()
        _ARGSTACK.append(current_scope)
        return current_scope

    def __exit__(self, *exc) -> None:
        _ARGSTACK.pop()


def arg_scope(list_ops_or_scope, **kwargs) -> _ArgScope:
    return _ArgScope(list_ops_or_scope, **kwargs)


def _initializers(v1) -> dict[str, Callable]:
    """TF1's contrib initializers (contrib/layers/python/layers/initializers.py)."""

    def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False, seed=None, dtype=v1.float32):
        if not dtype.is_floating:
            raise TypeError("Cannot create initializer for non-floating point type.")
        if mode not in ["FAN_IN", "FAN_OUT", "FAN_AVG"]:
            raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_OUT, FAN_AVG]")

        def _initializer(shape, dtype=dtype, partition_info=None):
            if not dtype.is_floating:
                raise TypeError("Cannot create initializer for non-floating point type.")
            # Estimating fan_in and fan_out is not possible to do perfectly, but we try.
            # This is the right thing for matrix multiply and convolutions.
            if shape:
                fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
                fan_out = float(shape[-1])
            else:
                fan_in = 1.0
                fan_out = 1.0
            for dim in shape[:-2]:
                fan_in *= float(dim)
                fan_out *= float(dim)
            if mode == "FAN_IN":
                n = fan_in
            elif mode == "FAN_OUT":
                n = fan_out
            else:
                n = (fan_in + fan_out) / 2.0
            if uniform:
                limit = math.sqrt(3.0 * factor / n)
                return v1.random_uniform(shape, -limit, limit, dtype, seed=seed)
            trunc_stddev = math.sqrt(1.3 * factor / n)
            return v1.truncated_normal(shape, 0.0, trunc_stddev, dtype, seed=seed)

        return _initializer

    def xavier_initializer(uniform=True, seed=None, dtype=v1.float32):
        return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=uniform, seed=seed, dtype=dtype)

    def regularizer(kind):
        def make(scale, scope=None):
            if isinstance(scale, (int, float)) and scale < 0.0:
                raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale}")
            if scale == 0.0:
                return lambda _: None

            def apply(weights):
                with v1.name_scope(scope, f"{kind}_regularizer", [weights]) as name:
                    my_scale = v1.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
                    penalty = v1.nn.l2_loss(weights) if kind == "l2" else v1.reduce_sum(v1.abs(weights))
                    return v1.multiply(my_scale, penalty, name=name)

            return apply

        return make

    return {
        "variance_scaling_initializer": variance_scaling_initializer,
        "xavier_initializer": xavier_initializer,
        "xavier_initializer_conv2d": xavier_initializer,
        "l2_regularizer": regularizer("l2"),
        "l1_regularizer": regularizer("l1"),
    }


def _regularized(v1, layer: Callable) -> Callable:
    """A contrib layer taking ``weights_regularizer``/``biases_regularizer`` as
    TF1's did: each regularizer applied to the variable the call created (not
    to a reused one), its loss added to ``REGULARIZATION_LOSSES``."""

    @functools.wraps(layer)
    def regularized(*args, weights_regularizer=None, biases_regularizer=None, **kwargs):
        if weights_regularizer is None and biases_regularizer is None:
            return layer(*args, **kwargs)
        before = {id(v) for v in v1.global_variables()}
        outputs = layer(*args, **kwargs)
        for variable in v1.global_variables():
            kind = variable.op.name.rpartition("/")[2]
            regularizer = {"weights": weights_regularizer, "biases": biases_regularizer}.get(kind)
            if id(variable) in before or regularizer is None:
                continue
            with v1.name_scope(f"{variable.op.name}/Regularizer/"):
                loss = regularizer(variable)
            if loss is not None:
                v1.add_to_collection(v1.GraphKeys.REGULARIZATION_LOSSES, loss)
        return outputs

    return regularized


class VariableDeviceChooser:
    """TF1's ``tf.contrib.framework.VariableDeviceChooser``: variables placed
    round-robin on the tasks of ``job_name`` (a device function)."""

    def __init__(self, num_tasks=0, job_name="ps", device_type="CPU", device_index=0, replica=None):
        self._job_name = job_name
        self._device_type = device_type
        self._device_index = device_index
        self._replica = replica
        self._num_tasks = num_tasks
        self._next_task_id = 0

    def __call__(self, op):
        from tensorflow.compat import v1

        device_spec = v1.DeviceSpec(replica=self._replica, device_type=self._device_type,
                                    device_index=self._device_index)
        if self._num_tasks > 0:
            task_id = self._next_task_id
            self._next_task_id = (self._next_task_id + 1) % self._num_tasks
            device_spec.job = self._job_name
            device_spec.task = task_id
        return device_spec.to_string()


def _resolve(tf, path: str):
    obj = tf
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def implementations(tf, v1) -> dict[str, Callable]:
    """Each provided member (its canonical name, see
    :data:`legacy_compat.CONTRIB_PROVIDED`) -> what TF 1.x ran for it."""
    from migrate.codemod import tf1_layers
    from migrate.runtime import mnist_standin

    # TF1 decorated its layers with add_arg_scope; conv2d and convolution2d
    # were one function
    conv2d = _regularized(v1, tf1_layers.tf1_contrib_conv2d)
    members = {
        "layers.fully_connected": _regularized(v1, tf1_layers.tf1_fully_connected),
        "layers.conv2d": conv2d,
        "layers.convolution2d": conv2d,
        "layers.max_pool2d": tf1_layers.tf1_max_pool2d,
        "layers.avg_pool2d": tf1_layers.tf1_avg_pool2d,
        "layers.flatten": tf1_layers.tf1_contrib_flatten,
        "layers.dropout": tf1_layers.tf1_contrib_dropout,
        **{f"layers.{name}": f for name, f in _initializers(v1).items()},
        "framework.get_or_create_global_step": v1.train.get_or_create_global_step,
        "framework.get_global_step": v1.train.get_global_step,
        "framework.create_global_step": v1.train.create_global_step,
        "framework.arg_scope": arg_scope,
        "framework.add_arg_scope": add_arg_scope,
        "framework.current_arg_scope": current_arg_scope,
        "framework.has_arg_scope": has_arg_scope,
        "framework.arg_scoped_arguments": arg_scoped_arguments,
        "framework.VariableDeviceChooser": VariableDeviceChooser,
        "learn.datasets.mnist.read_data_sets": mnist_standin.read_data_sets,
        "learn.datasets.mnist.load_mnist": mnist_standin.load_mnist,
        "learn.datasets.load_dataset": _load_dataset,
        "learn.datasets.DATASETS": _Datasets(mnist=mnist_standin.load_mnist),
    }
    for member, target in legacy_compat.CONTRIB_MOVED.items():
        members[member] = _resolve(tf, target)
    return members


def _load_dataset(name, size="small", test_with_fake_data=False):
    """contrib.learn's ``load_dataset``, for the data set check serves: MNIST
    (``load_mnist()``, as TF1 called it), from the stand-in."""
    from migrate.runtime import mnist_standin

    if name != "mnist" or size != "small":
        raise NotImplementedError(f"tfmigrate check serves only load_dataset('mnist'), not {name!r} ({size})")
    return mnist_standin.load_mnist()


class _Datasets(dict):
    """contrib.learn's ``DATASETS`` registry, MNIST only."""

    def __missing__(self, name):
        raise KeyError(f"{name!r}: tfmigrate check serves only the 'mnist' data set")


class _Namespace(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"`{self.__name__}.{name}` does not exist in TensorFlow 2; tfmigrate check provides only"
            " the tf.contrib members listed in migrate/runtime/legacy_compat.py (CONTRIB_PROVIDED)"
        )


def _note(member: str) -> str:
    if member.startswith("learn.datasets"):
        return (f"tf.contrib.{member} served by tfmigrate's synthetic MNIST stand-in"
                " (TF 2 removed tf.contrib and the MNIST reader)")
    return f"tf.contrib.{member} run as tfmigrate's TF1 code (TF 2 removed tf.contrib)"


def _announced(member: str, function: Callable, fired: Callable[[str], None]) -> Callable:
    used = []

    @functools.wraps(function)
    def provided(*args, **kwargs):
        if not used:
            used.append(True)
            fired(_note(member))
        return function(*args, **kwargs)

    return provided


def build(tf, v1, fired: Callable[[str], None]) -> types.ModuleType:
    """The ``tensorflow.contrib`` module tree, every TF1 spelling included,
    registered in ``sys.modules``. ``fired(note)`` is told the first use of
    each provided function (the harness's notes)."""
    functions = implementations(tf, v1)
    assert set(functions) == set(legacy_compat.CONTRIB_PROVIDED), set(functions) ^ set(legacy_compat.CONTRIB_PROVIDED)
    wrapped: dict[int, object] = {}  # one object per implementation: every spelling is the same function
    members = {}
    for member, function in functions.items():
        if id(function) not in wrapped:
            if member.startswith("layers.") and member.split(".", 1)[1] in legacy_compat.CONTRIB_LAYERS:
                scoped = add_arg_scope(function)
                provided = _announced(member, scoped, fired)
                provided._key_op = scoped._key_op
            elif inspect.isfunction(function):
                provided = _announced(member, function, fired)
            else:
                provided = function  # a class or a registry: as it is
            wrapped[id(function)] = provided
        members[member] = wrapped[id(function)]

    modules: dict[str, types.ModuleType] = {}

    def module(name: str) -> types.ModuleType:
        if name not in modules:
            full = "tensorflow.contrib" + ("." + name if name else "")
            made = modules[name] = _Namespace(full)
            made.__path__ = []  # a package: `from tensorflow.contrib.slim import layers` imports from sys.modules
            if name:
                parent, _, attr = name.rpartition(".")
                setattr(module(parent), attr, made)
        return modules[name]

    module("")
    for member, function in members.items():
        parent, _, attr = member.rpartition(".")
        setattr(module(parent), attr, function)
    # the other spellings TF 1.x had: the same objects
    for spelling, canonical in legacy_compat.CONTRIB_SPELLINGS:
        parent, _, attr = spelling.rpartition(".")
        setattr(module(parent), attr, module(canonical))
        for name in [n for n in modules if n == canonical or n.startswith(canonical + ".")]:
            modules[spelling + name[len(canonical):]] = modules[name]
    slim = module("slim")
    for member, function in members.items():
        namespace, _, attr = member.partition(".")
        if namespace in ("layers", "framework") and "." not in attr:
            setattr(slim, attr, function)
    for name, made in modules.items():
        sys.modules["tensorflow.contrib" + ("." + name if name else "")] = made
    return modules[""]
