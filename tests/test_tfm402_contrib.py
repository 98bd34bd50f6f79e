"""TFM402's rewrites run on TensorFlow 2.21 with TF1's meaning.

- the tf.contrib.data table: each target exists in the installed TensorFlow and
  its signature starts with TF 1.3's parameters;
- the regularizers: the code the codemod writes, run in a TF1-style graph
  (tf.compat.v1) and eagerly, gives TF1's penalty bit for bit (TF1's recipe:
  scale converted to the weight's dtype times ``nn.l2_loss`` /
  ``reduce_sum(abs)``), the op name TF1 gave it under ``get_variable``, and
  adds nothing for a 0.0 scale.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.rules._contrib_equivalents import DATA_SAME

tf = pytest.importorskip("tensorflow")


@pytest.mark.parametrize("old", sorted(DATA_SAME))
def test_data_table_targets_keep_tf13_parameters(old):
    new, params = DATA_SAME[old]
    target = tf
    for part in new.split("."):
        target = getattr(target, part)
    if params:
        names = list(inspect.signature(target.__init__).parameters)[1:]
        assert names[: len(params)] == list(params)


MODEL = dedent(
    """
    import tensorflow as tf

    DECAY = 0.0037
    OFF = 0.0


    def build(x):
        w = tf.get_variable("w", [4, 3], regularizer=tf.contrib.layers.l2_regularizer(DECAY))
        v = tf.get_variable("v", [3, 2], regularizer=tf.contrib.layers.l1_regularizer(0.25))
        u = tf.get_variable("u", [2, 2], regularizer=tf.contrib.layers.l2_regularizer(OFF))
        direct = tf.contrib.layers.l2_regularizer(DECAY)(w)
        return w, v, u, direct
    """
)


def _run_migrated(source: str) -> dict:
    """Migrate ``source`` and run the output; its top-level names."""
    result = migrate_source(source)
    assert "contrib" not in result.output, result.output
    namespace: dict = {}
    exec(compile(result.output, "<migrated>", "exec"), namespace)  # noqa: S102 - the codemod's own output
    return namespace


def _tf1_l2(scale, weights):
    """TF1's contrib l2 penalty (tensorflow/contrib/layers/python/layers/regularizers.py, r1.15)."""
    my_scale = tf.convert_to_tensor(scale, dtype=weights.dtype.base_dtype)
    return tf.multiply(my_scale, tf.nn.l2_loss(weights))


def _tf1_l1(scale, weights):
    my_scale = tf.convert_to_tensor(scale, dtype=weights.dtype.base_dtype)
    return tf.multiply(my_scale, tf.reduce_sum(tf.abs(weights)))


def test_regularizers_match_tf1_in_a_graph():
    namespace = _run_migrated(MODEL)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(7)
        w, v, _, direct = namespace["build"](tf.zeros([1, 4]))
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
        # TF1 named the penalty <variable>/Regularizer/<kind>_regularizer; a 0.0 scale added none
        assert [t.op.name for t in losses] == ["w/Regularizer/l2_regularizer", "v/Regularizer/l1_regularizer"]
        expected = [_tf1_l2(0.0037, w), _tf1_l1(0.25, v)]
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            got, want, applied = sess.run([losses, expected, direct])
    assert got[0] != 0.0 and got[1] != 0.0
    np.testing.assert_array_equal(got, want)
    assert applied == want[0]


def test_regularizers_match_tf1_eagerly():
    namespace = _run_migrated("import tensorflow as tf\nr = tf.contrib.layers.l2_regularizer(1e-2)\n"
                              "q = tf.contrib.layers.l1_regularizer(0.5)\nz = tf.contrib.layers.l1_regularizer(0.)\n")
    weights = tf.constant(np.random.default_rng(3).normal(size=(5, 7)), dtype=tf.float32)
    assert namespace["r"](weights).numpy() == _tf1_l2(1e-2, weights).numpy()
    assert namespace["q"](weights).numpy() == _tf1_l1(0.5, weights).numpy()
    assert namespace["z"](weights) is None
    # the numbers TF1 documents: scale * sum(w**2) / 2 and scale * sum(|w|)
    w64 = weights.numpy().astype(np.float64)
    np.testing.assert_allclose(namespace["r"](weights).numpy(), 1e-2 * (w64**2).sum() / 2, rtol=1e-6)
    np.testing.assert_allclose(namespace["q"](weights).numpy(), 0.5 * np.abs(w64).sum(), rtol=1e-6)
    # the weight's dtype decides the penalty's, as TF1's convert_to_tensor(scale, dtype=...)
    assert namespace["r"](tf.cast(weights, tf.float64)).dtype == tf.float64


def test_migrated_reader_runs():
    namespace = _run_migrated("import tensorflow as tf\nds = tf.contrib.data.Dataset.range(5).batch(2)\n"
                              "full = tf.contrib.data.Dataset.range(7).apply(tf.contrib.data.batch_and_drop_remainder(3))\n")
    assert [b.tolist() for b in namespace["ds"].as_numpy_iterator()] == [[0, 1], [2, 3], [4]]
    # TF1: only batches of exactly n elements, the batch dimension statically n
    assert [b.tolist() for b in namespace["full"].as_numpy_iterator()] == [[0, 1, 2], [3, 4, 5]]
    assert namespace["full"].element_spec.shape.as_list() == [3]
