"""TF1 -> TF2 equivalents (migrate/codemod/rules/_equivalents.py).

Two layers: libcst-level mapping tests (argument binding, defaults), and
numerics tests that run real TensorFlow: the TF1 optimizer/initializer in
graph mode against the TF2 code the mapping *generates* (exec'd), on the same
variables and gradients.
"""

from __future__ import annotations

import libcst as cst
import numpy as np
import pytest

from migrate.codemod.rules._equivalents import (
    initializer_call,
    kept_in_compat_v1,
    optimizer_call,
    variable_from_get_variable,
)


def code(node: cst.CSTNode | None) -> str | None:
    return None if node is None else cst.Module(body=[]).code_for_node(node)


def opt(src: str) -> tuple[str | None, str]:
    call = cst.parse_expression(src)
    qual = src.split("(")[0].replace("tf.compat.v1.", "").replace("tf.", "")
    node, note = optimizer_call(call, qual)
    return code(node), note


def init(src: str) -> tuple[str | None, str]:
    call = cst.parse_expression(src)
    qual = src.split("(")[0].replace("tf.compat.v1.", "").replace("tf.", "")
    node, note = initializer_call(call, qual)
    return code(node), note


# --------------------------------------------------------------------------- libcst level


def test_positional_and_keyword_arguments_map_to_the_same_call():
    a, _ = opt("tf.train.MomentumOptimizer(0.1, 0.9, False, 'm', True)")
    b, _ = opt("tf.train.MomentumOptimizer(momentum=0.9, learning_rate=0.1, use_nesterov=True, name='m')")
    assert a == b == "tf.keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, name='m', nesterov=True)"


def test_adam_writes_tf1_epsilon_and_renames_betas():
    out, note = opt("tf.train.AdamOptimizer(1e-3, 0.8, 0.99)")
    assert out == "tf.keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.8, beta_2=0.99, epsilon=1e-08)"
    assert note == ""
    out, _ = opt("tf.train.AdamOptimizer()")
    assert out == "tf.keras.optimizers.Adam(learning_rate=0.001, epsilon=1e-08)"
    out, _ = opt("tf.train.AdamOptimizer(epsilon=1e-4, learning_rate=lr)")
    assert out == "tf.keras.optimizers.Adam(learning_rate=lr, epsilon=1e-4)"


def test_rmsprop_is_kept_in_compat_v1_with_a_note_on_how_to_switch():
    # Keras 3 RMSprop starts its accumulator at 0, TF1's at 1.0: no Keras call reproduces it
    out, note = opt("tf.train.RMSPropOptimizer(0.01, 0.95, centered=True)")
    assert out is None
    assert "accumulator at 0.0 where TF1 started it at 1.0" in note
    assert "tf.keras.optimizers.RMSprop(learning_rate=..., rho=<decay>" in note  # how to switch
    assert kept_in_compat_v1("train.RMSPropOptimizer") and kept_in_compat_v1("compat.v1.train.RMSPropOptimizer")
    assert not kept_in_compat_v1("train.AdamOptimizer") and not kept_in_compat_v1("train.FtrlOptimizer")
    assert not kept_in_compat_v1(None)


def test_keras_optimizers_pass_through_unchanged():
    call = cst.parse_expression("tf.keras.optimizers.SGD(0.1)")
    node, note = optimizer_call(call, "keras.optimizers.SGD")
    assert node is call and note == ""


def test_adagrad_has_no_epsilon_in_tf1():
    out, note = opt("tf.train.AdagradOptimizer(0.5)")
    assert out == "tf.keras.optimizers.Adagrad(learning_rate=0.5, initial_accumulator_value=0.1, epsilon=0.0)"
    assert note == ""


@pytest.mark.parametrize(
    "src, reason",
    [
        ("tf.train.MomentumOptimizer(0.1)", "momentum"),
        ("tf.train.AdamOptimizer(*args)", "*"),
        ("tf.train.AdamOptimizer(**kw)", "**"),
        ("tf.train.AdamOptimizer(lr, beta_1=0.9)", "beta_1"),
        ("tf.train.FtrlOptimizer(0.1)", "Ftrl"),
        ("tf.train.SyncReplicasOptimizer(opt, 2)", "MultiWorkerMirroredStrategy"),
        ("tf.train.ProximalAdagradOptimizer(0.1)", "proximal"),
    ],
)
def test_unmappable_optimizers_say_why(src, reason):
    out, why = opt(src)
    assert out is None
    assert reason in why


def test_initializer_mappings_write_tf1_defaults():
    assert init("tf.random_normal_initializer(seed=3)")[0] == (
        "tf.random_normal_initializer(mean=0.0, stddev=1.0, seed=3)"
    )
    assert init("tf.random_uniform_initializer(-1.0, 1.0)")[0] == (
        "tf.random_uniform_initializer(minval=-1.0, maxval=1.0)"
    )
    assert init("tf.zeros_initializer()") == ("tf.zeros_initializer()", "")
    out, note = init("tf.constant_initializer(0.1, dtype=tf.float64)")
    assert out == "tf.constant_initializer(value=0.1)" and "dtype" in note
    assert init("tf.contrib.layers.xavier_initializer(uniform=False, seed=1)")[0] == (
        "tf.keras.initializers.GlorotNormal(seed=1)"
    )
    assert init("tf.variance_scaling_initializer(2.0, distribution='normal')")[0] == (
        'tf.keras.initializers.VarianceScaling(scale=2.0, distribution="truncated_normal")'
    )
    assert init("tf.contrib.layers.xavier_initializer(uniform=flag)")[0] is None


def test_get_variable_mappings():
    def gv(src):
        node, note = variable_from_get_variable(cst.parse_expression(src))
        return code(node), note

    out, _ = gv("tf.get_variable('b', [10], tf.float32, tf.zeros_initializer(), trainable=False)")
    assert out == "tf.Variable(tf.zeros_initializer()([10], dtype=tf.float32), name='b', trainable=False)"
    out, _ = gv("tf.get_variable(name='c', initializer=tf.constant([1.0, 2.0]))")
    assert out == "tf.Variable(tf.constant([1.0, 2.0]), name='c')"
    out, note = gv("tf.get_variable('w', shape=[3, 4])")
    assert out == "tf.Variable(tf.keras.initializers.GlorotUniform()([3, 4]), name='w')"
    assert "glorot" in note
    out, why = gv("tf.get_variable('w', [3], regularizer=reg)")
    assert out is None and "regularizer" in why
    out, why = gv("tf.get_variable('w', [3], partitioner=p)")
    assert out is None and "partitioner" in why


# --------------------------------------------------------------------------- numerics (real TF)

tf = pytest.importorskip("tensorflow")

STEPS = 12
RTOL = 1e-6


def _grads(n_steps: int, shape, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape).astype(np.float32) for _ in range(n_steps)]


def _tf1_trajectory(make_optimizer, init_value: np.ndarray, grads: list[np.ndarray]) -> list[np.ndarray]:
    graph = tf.Graph()
    with graph.as_default():
        var = tf.compat.v1.Variable(init_value, dtype=tf.float32)
        g = tf.compat.v1.placeholder(tf.float32, init_value.shape)
        train = make_optimizer().apply_gradients([(g, var)])
        out = []
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for grad in grads:
                sess.run(train, {g: grad})
                out.append(sess.run(var))
    return out


def _keras_trajectory(generated: str, init_value: np.ndarray, grads: list[np.ndarray]) -> list[np.ndarray]:
    optimizer = eval(generated, {"tf": tf})  # the code the mapping generated
    var = tf.Variable(init_value, dtype=tf.float32)
    out = []
    for grad in grads:
        optimizer.apply_gradients([(tf.constant(grad), var)])
        out.append(var.numpy())
    return out


TF1_OPTIMIZERS = [
    ("tf.compat.v1.train.GradientDescentOptimizer(0.1)", lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1)),
    ("tf.compat.v1.train.MomentumOptimizer(0.05, 0.9)", lambda: tf.compat.v1.train.MomentumOptimizer(0.05, 0.9)),
    (
        "tf.compat.v1.train.MomentumOptimizer(learning_rate=0.05, momentum=0.8, use_nesterov=True)",
        lambda: tf.compat.v1.train.MomentumOptimizer(learning_rate=0.05, momentum=0.8, use_nesterov=True),
    ),
    ("tf.compat.v1.train.AdamOptimizer(0.01)", lambda: tf.compat.v1.train.AdamOptimizer(0.01)),
    (
        "tf.compat.v1.train.AdamOptimizer(0.02, 0.8, 0.95, 1e-6)",
        lambda: tf.compat.v1.train.AdamOptimizer(0.02, 0.8, 0.95, 1e-6),
    ),
    ("tf.compat.v1.train.AdagradOptimizer(0.1)", lambda: tf.compat.v1.train.AdagradOptimizer(0.1)),
    (
        "tf.compat.v1.train.AdagradOptimizer(0.1, initial_accumulator_value=0.5)",
        lambda: tf.compat.v1.train.AdagradOptimizer(0.1, initial_accumulator_value=0.5),
    ),
    ("tf.compat.v1.train.AdadeltaOptimizer(1.0)", lambda: tf.compat.v1.train.AdadeltaOptimizer(1.0)),
]


@pytest.mark.parametrize("src, make", TF1_OPTIMIZERS, ids=[s for s, _ in TF1_OPTIMIZERS])
def test_mapped_optimizer_follows_the_tf1_trajectory(src, make):
    generated, note = opt(src)
    assert generated is not None and note == "", (generated, note)
    init_value = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    grads = _grads(STEPS, init_value.shape)
    want = _tf1_trajectory(make, init_value, grads)
    got = _keras_trajectory(generated, init_value, grads)
    for step, (w, g) in enumerate(zip(want, got)):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-7, err_msg=f"{generated} step {step}")
    # the comparison is not vacuous: the variable moved
    assert np.max(np.abs(want[-1] - init_value)) > 1e-3


def _compat_v1_step_trajectory(generated: str, init_value: np.ndarray, grads: list[np.ndarray]) -> list[np.ndarray]:
    """The kept TF1 optimizer as a migrated step runs it: built eagerly,
    applied inside a tf.function (its slots are made on the first trace)."""
    optimizer = eval(generated, {"tf": tf})
    var = tf.Variable(init_value, dtype=tf.float32)

    @tf.function
    def step(grad):
        optimizer.apply_gradients([(grad, var)])

    out = []
    for grad in grads:
        step(tf.constant(grad))
        out.append(var.numpy())
    return out


KEPT_RMSPROP = [
    ("tf.train.RMSPropOptimizer(0.01)", lambda: tf.compat.v1.train.RMSPropOptimizer(0.01)),
    ("tf.train.RMSPropOptimizer(0.02, decay=0.8, momentum=0.5)",
     lambda: tf.compat.v1.train.RMSPropOptimizer(0.02, decay=0.8, momentum=0.5)),
    ("tf.train.RMSPropOptimizer(0.01, 0.9, 0.0, 1e-6, centered=True)",
     lambda: tf.compat.v1.train.RMSPropOptimizer(0.01, 0.9, 0.0, 1e-6, centered=True)),
]


@pytest.mark.parametrize("src, make", KEPT_RMSPROP, ids=[s for s, _ in KEPT_RMSPROP])
def test_kept_compat_v1_rmsprop_in_a_tf_function_follows_tf1_bit_for_bit(src, make):
    from migrate.codemod.rules.tfm301_graph_to_strategy import _optimizer_code

    # the optimizer TFM301 writes into the strategy scope, and its note
    generated, note = _optimizer_code(cst.parse_expression(src), lambda func: "train.RMSPropOptimizer")
    assert generated == src.replace("tf.train.", "tf.compat.v1.train.") and "accumulator" in note
    init_value = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    grads = _grads(STEPS, init_value.shape, seed=2)
    want = _tf1_trajectory(make, init_value, grads)
    got = _compat_v1_step_trajectory(generated, init_value, grads)
    for step, (w, g) in enumerate(zip(want, got)):
        np.testing.assert_array_equal(g, w, err_msg=f"{generated} step {step}")
    assert np.max(np.abs(want[-1] - init_value)) > 1e-3


def test_rmsprop_note_is_true_keras_rmsprop_leaves_the_tf1_trajectory_at_once():
    # what the note tells the user to switch to, with every TF1 default written out
    keras = "tf.keras.optimizers.RMSprop(learning_rate=0.01, rho=0.9, epsilon=1e-10)"
    init_value = np.ones((2, 2), np.float32)
    grads = [g * 0.1 for g in _grads(3, init_value.shape)]
    want = _tf1_trajectory(lambda: tf.compat.v1.train.RMSPropOptimizer(0.01), init_value, grads)
    got = _keras_trajectory(keras, init_value, grads)
    first_tf1, first_keras = np.abs(want[0] - init_value), np.abs(got[0] - init_value)
    # Keras: about lr / sqrt(1 - rho) whatever the gradient; TF1: about lr * |gradient|
    np.testing.assert_allclose(first_keras, 0.01 / np.sqrt(0.1), rtol=1e-3)
    assert np.all(first_keras > 3 * first_tf1)


def _tf1_graph_value(make_init, shape):
    graph = tf.Graph()
    with graph.as_default():
        t = make_init()(shape, dtype=tf.float32)
        with tf.compat.v1.Session(graph=graph) as sess:
            return sess.run(t)


EXACT_INITIALIZERS = [
    ("tf.zeros_initializer()", lambda: tf.compat.v1.zeros_initializer()),
    ("tf.ones_initializer()", lambda: tf.compat.v1.ones_initializer()),
    ("tf.constant_initializer(0.25)", lambda: tf.compat.v1.constant_initializer(0.25)),
    ("tf.constant_initializer([1.0, 2.0, 3.0])", lambda: tf.compat.v1.constant_initializer([1.0, 2.0, 3.0])),
]


@pytest.mark.parametrize("src, make", EXACT_INITIALIZERS, ids=[s for s, _ in EXACT_INITIALIZERS])
def test_exact_initializers_give_tf1_values(src, make):
    generated, note = init(src)
    assert note == ""
    shape = [2, 3] if "[" not in src else [3]
    want = _tf1_graph_value(make, shape)
    got = eval(generated, {"tf": tf})(shape, dtype=tf.float32).numpy()
    np.testing.assert_array_equal(got, want)


RANDOM_INITIALIZERS = [
    ("tf.random_normal_initializer(stddev=0.5, seed=7)", lambda: tf.compat.v1.random_normal_initializer(stddev=0.5, seed=7)),
    ("tf.random_uniform_initializer(-2.0, 1.0, seed=7)", lambda: tf.compat.v1.random_uniform_initializer(-2.0, 1.0, seed=7)),
    ("tf.random_uniform_initializer(seed=7)", lambda: tf.compat.v1.random_uniform_initializer(seed=7)),
    ("tf.truncated_normal_initializer(seed=7)", lambda: tf.compat.v1.truncated_normal_initializer(seed=7)),
    ("tf.glorot_uniform_initializer(seed=7)", lambda: tf.compat.v1.glorot_uniform_initializer(seed=7)),
    ("tf.glorot_normal_initializer(seed=7)", lambda: tf.compat.v1.glorot_normal_initializer(seed=7)),
]


@pytest.mark.parametrize("src, make", RANDOM_INITIALIZERS, ids=[s for s, _ in RANDOM_INITIALIZERS])
def test_random_initializers_match_tf1_distribution_and_say_values_differ(src, make):
    generated, note = init(src)
    assert "different" in note
    shape = [300, 200]
    want = _tf1_graph_value(make, shape)
    got = eval(generated, {"tf": tf})(shape, dtype=tf.float32).numpy()
    assert not np.array_equal(got, want)  # the note is true
    scale = float(np.std(want))
    assert abs(float(np.mean(got)) - float(np.mean(want))) < 0.02 * max(scale, 1e-6) + 0.01 * scale
    assert abs(float(np.std(got)) / scale - 1.0) < 0.02
    # same shape of distribution (catches wrong bounds, truncation, scale)
    for q in (0.01, 0.25, 0.5, 0.75, 0.99):
        assert abs(float(np.quantile(got, q)) - float(np.quantile(want, q))) < 0.05 * scale, q


def test_get_variable_with_exact_initializer_gives_tf1_values():
    src = "tf.get_variable('b', [4, 2], tf.float32, tf.constant_initializer(0.3), trainable=False)"
    node, _ = variable_from_get_variable(cst.parse_expression(src))
    graph = tf.Graph()
    with graph.as_default():
        v1 = tf.compat.v1.get_variable(
            "b", [4, 2], tf.float32, tf.compat.v1.constant_initializer(0.3), trainable=False
        )
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            want = sess.run(v1)
    var = eval(code(node), {"tf": tf})
    np.testing.assert_array_equal(var.numpy(), want)
    assert var.trainable is False and var.name.startswith("b")


def test_adam_epsilon_matters_with_small_gradients():
    """With gradients ~1e-6, Keras' default epsilon (1e-7) would change each step
    by ~10 %: the explicit epsilon=1e-08 is what keeps TF1 numerics."""
    src = "tf.compat.v1.train.AdamOptimizer(0.01)"
    generated, _ = opt(src)
    init_value = np.zeros((3,), np.float32)
    grads = [g * 1e-6 for g in _grads(STEPS, init_value.shape, seed=1)]
    want = _tf1_trajectory(lambda: tf.compat.v1.train.AdamOptimizer(0.01), init_value, grads)
    got = _keras_trajectory(generated, init_value, grads)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5, atol=1e-9)
    keras_default = _keras_trajectory("tf.keras.optimizers.Adam(learning_rate=0.01)", init_value, grads)
    assert not np.allclose(keras_default[-1], want[-1], rtol=1e-3, atol=1e-9)
