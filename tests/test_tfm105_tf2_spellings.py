"""TFM105: TF 1.x calls spelled through ``tf.compat.v1`` become TF2 calls that
compute the same. Pairs per feature (pyupgrade style), the cases left alone,
and a run of each pair in TensorFlow: the rewritten expression gives the very
same values (and gradients) as the TF 1.x one."""

from __future__ import annotations

import pytest

from migrate.codemod.engine import dedent, migrate_source

HEADER = "import tensorflow as tf\n\n"


def tfm105(expression: str) -> str:
    """What TFM105 makes of ``result = <expression>`` (TF 1.x spelling)."""
    out = migrate_source(HEADER + f"result = {expression}\n", path="<test>", select=["TFM105"]).output
    assert out.startswith(HEADER)
    return out[len(HEADER):].removeprefix("result = ").rstrip("\n")


PAIRS = [
    # deprecated parameter names
    ("tf.compat.v1.reduce_mean(x, reduction_indices=[1], keep_dims=True)",
     "tf.reduce_mean(x, axis=[1], keepdims=True)"),
    ("tf.compat.v1.reduce_sum(x, 0)", "tf.reduce_sum(x, 0)"),
    ("tf.compat.v1.reduce_max(x, axis=1, keepdims=False, name='m')", "tf.reduce_max(x, axis=1, keepdims=False, name='m')"),
    ("tf.compat.v1.argmax(x, dimension=1)", "tf.argmax(x, axis=1)"),
    ("tf.compat.v1.nn.softmax(x, dim=0)", "tf.nn.softmax(x, axis=0)"),
    ("tf.compat.v1.expand_dims(x, dim=0)", "tf.expand_dims(x, axis=0)"),
    ("tf.compat.v1.squeeze(tf.compat.v1.expand_dims(x, 0), squeeze_dims=[0])",
     "tf.squeeze(tf.expand_dims(x, 0), axis=[0])"),
    ("tf.compat.v1.nn.moments(x, [0], keep_dims=True)[1]", "tf.nn.moments(x, [0], keepdims=True)[1]"),
    ("tf.compat.v1.norm(x, keep_dims=True)", "tf.norm(x, keepdims=True)"),
    # positional arguments TF2 orders differently become keywords
    ("tf.compat.v1.shape(x, 'shape_of_x')", "tf.shape(x, name='shape_of_x')"),
    ("tf.compat.v1.transpose(x, [1, 0], 'swap')", "tf.transpose(x, [1, 0], name='swap')"),
    ("tf.compat.v1.nn.in_top_k(x, labels, 2)", "tf.nn.in_top_k(predictions=x, targets=labels, k=2)"),
    ("tf.compat.v1.convert_to_tensor([[1.0, 2.0]], tf.float32, 'c')",
     "tf.convert_to_tensor([[1.0, 2.0]], tf.float32, name='c')"),
    ("tf.compat.v1.nn.convolution(images, kernel, 'SAME')", "tf.nn.convolution(images, kernel, padding='SAME')"),
    ("tf.compat.v1.nn.conv2d(images, filter=kernel, strides=[1, 1, 1, 1], padding='VALID')",
     "tf.nn.conv2d(images, filters=kernel, strides=[1, 1, 1, 1], padding='VALID')"),
    ("tf.compat.v1.nn.max_pool(images, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding='SAME')",
     "tf.nn.max_pool(images, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding='SAME')"),
    ("tf.compat.v1.nn.avg_pool(value=images, ksize=2, strides=1, padding='VALID')",
     "tf.nn.avg_pool(input=images, ksize=2, strides=1, padding='VALID')"),
    ("tf.compat.v1.constant(0.1, shape=[2, 3])", "tf.constant(0.1, shape=[2, 3])"),
    ("tf.compat.v1.constant(-1, tf.float32, [4])", "tf.constant(-1, tf.float32, [4])"),
    ("tf.compat.v1.gfile.Exists(log_dir) or tf.compat.v1.gfile.MakeDirs(dirname=log_dir)",
     "tf.io.gfile.exists(log_dir) or tf.io.gfile.makedirs(path=log_dir)"),
    ("tf.compat.v1.gfile.Glob(log_dir + '/*') + [w for w in tf.compat.v1.gfile.Walk(log_dir, in_order=False)]",
     "tf.io.gfile.glob(log_dir + '/*') + [w for w in tf.io.gfile.walk(log_dir, topdown=False)]"),
    ("tf.compat.v1.Variable(tf.compat.v1.reduce_sum(x, 1), False, name='v') * 2",
     "tf.Variable(tf.reduce_sum(x, 1), False, name='v') * 2"),
    # another expression in TF2
    ("tf.compat.v1.to_float(labels)", "tf.cast(labels, tf.float32)"),
    ("tf.compat.v1.to_int64(labels, name='l')", "tf.cast(labels, tf.int64, name='l')"),
    ("tf.compat.v1.nn.xw_plus_b(x, w, b)", "tf.nn.bias_add(tf.matmul(x, w), b)"),
    ("tf.compat.v1.nn.dropout(x, keep_prob=0.75, seed=3)", "tf.nn.dropout(x, rate=0.25, seed=3)"),
    ("tf.compat.v1.nn.dropout(x, 0.9, seed=3)", "tf.nn.dropout(x, rate=1 - 0.9, seed=3)"),
    ("tf.compat.v1.nn.dropout(x, keep + 0.25, seed=3)", "tf.nn.dropout(x, rate=1 - (keep + 0.25), seed=3)"),
    ("tf.compat.v1.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=x)",
     "tf.nn.softmax_cross_entropy_with_logits(labels=tf.stop_gradient(onehot), logits=x)"),
]


@pytest.mark.parametrize(("before", "after"), PAIRS, ids=[p[0].split("(")[0] for p in PAIRS])
def test_rewritten(before: str, after: str) -> None:
    assert tfm105(before) == after


@pytest.mark.parametrize("expression", [
    "tf.reduce_mean(x, axis=1)",  # already TF2
    "tf.compat.v1.reduce_sum(*parts)",  # arguments that cannot be read
    "tf.compat.v1.reduce_mean(x, axis=0, reduction_indices=0)",  # two spellings of one parameter
    "tf.compat.v1.constant([1, 2], shape=[2, 3])",  # TF 1.x fills the shape from a shorter list
    "tf.compat.v1.nn.conv2d(images, kernel, [1, 1, 1, 1], 'SAME', use_cudnn_on_gpu=False)",
    "tf.compat.v1.expand_dims(x)",  # TF2 requires the axis (TF 1.x raised too)
    "tf.compat.v1.nn.dropout(x)",
    "tf.compat.v1.get_variable('w', [2])",  # not a function TF2 keeps
    "tf.compat.v1.Variable(x, collections=['mine'])",
])
def test_left_alone(expression: str) -> None:
    assert tfm105(expression) == expression


def test_needs_a_root_import() -> None:
    """With only ``tensorflow.compat.v1`` imported, no name spells TF2's API."""
    source = "import tensorflow.compat.v1 as tf\n\nresult = tf.reduce_mean(x, reduction_indices=1)\n"
    assert migrate_source(source, path="<test>", select=["TFM105"]).output == source


def test_variables_stay_where_tf1_made_reference_variables() -> None:
    source = dedent("""
        import tensorflow as tf
        tf.compat.v1.disable_v2_behavior()

        w = tf.compat.v1.Variable(tf.zeros([2]))
        m = tf.compat.v1.reduce_mean(w, keep_dims=True)
    """)
    out = migrate_source(source, path="<test>", select=["TFM105"]).output
    assert "w = tf.compat.v1.Variable(tf.zeros([2]))" in out and "m = tf.reduce_mean(w, keepdims=True)" in out


def test_one_info_diagnostic_per_file() -> None:
    source = dedent("""
        import tensorflow as tf

        a = tf.compat.v1.reduce_mean(x, reduction_indices=1)
        b = tf.compat.v1.reduce_mean(y, keep_dims=True)
        c = tf.compat.v1.to_float(z)
    """)
    result = migrate_source(source, path="<test>", select=["TFM105"])
    found = [d for d in result.diagnostics if d.code == "TFM105"]
    assert len(found) == 1 and found[0].fixed and found[0].line == 3
    assert "reduce_mean x2" in found[0].message and "to_float" in found[0].message


def test_located_in_the_file_not_in_code_other_rules_wrote() -> None:
    """TFM104 writes TF1's layer code (with calls TFM105 respells) above the
    program; the diagnostic points at the program's own call."""
    source = dedent("""
        import tensorflow as tf

        images = tf.placeholder(tf.float32, [None, 28, 28, 1])
        features = tf.layers.flatten(images)
        logits = tf.layers.dense(features, 10)
        loss = tf.reduce_mean(logits, reduction_indices=1)
    """)
    result = migrate_source(source, path="<test>", select=["TFM104", "TFM101", "TFM105"])
    assert "tf.reduce_mean(logits, axis=1)" in result.output
    found = [d for d in result.diagnostics if d.code == "TFM105"]
    assert [(d.line, d.column) for d in found] == [(6, 8)]


def test_idempotent_and_compiles() -> None:
    source = HEADER + "\n".join(f"r{i} = {before}" for i, (before, _) in enumerate(PAIRS)) + "\n"
    once = migrate_source(source, path="<test>").output
    compile(once, "<once>", "exec")
    assert migrate_source(once, path="<test>").output == once


def test_same_values_and_gradients_in_tensorflow(tmp_path) -> None:
    """Each pair computed in TensorFlow: the same values, bit for bit, and the
    same gradient with respect to ``x`` (the labels' too, where TF 1.x stopped it)."""
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    rng = np.random.RandomState(0)
    log_dir = tmp_path / "logs"
    (log_dir / "sub").mkdir(parents=True)
    (log_dir / "sub" / "events").write_text("")
    for before, after in PAIRS:
        values = []
        for expression in (before, after):
            tf.random.set_seed(7)
            env = {
                "tf": tf, "keep": tf.constant(0.5),
                "x": tf.Variable(rng.uniform(size=(4, 3)).astype(np.float32) if not values else values[0][2]),
                "labels": tf.constant([0, 2, 1, 1]), "w": tf.constant(np.ones((3, 2), np.float32)),
                "b": tf.constant([0.5, -0.5]),
                "images": tf.constant(np.arange(2 * 5 * 5 * 1, dtype=np.float32).reshape(2, 5, 5, 1)),
                "kernel": tf.constant(np.ones((2, 2, 1, 3), np.float32)),
                "log_dir": str(log_dir),
            }
            env["onehot"] = tf.Variable(tf.one_hot(env["labels"], 3))
            with tf.GradientTape(persistent=True) as tape:
                result = eval(expression, env)
                if isinstance(result, (list, bool)):  # file functions: compare what they return
                    values.append((np.asarray(repr(result)), [None, None], env["x"].numpy()))
                    continue
                total = tf.reduce_sum(tf.cast(result, tf.float32))
            gradients = [tape.gradient(total, env[v]) for v in ("x", "onehot")]
            values.append((np.asarray(result), [None if g is None else g.numpy() for g in gradients],
                           env["x"].numpy()))
        (value1, grads1, _), (value2, grads2, _) = values
        assert value1.dtype == value2.dtype and np.array_equal(value1, value2), before
        for g1, g2 in zip(grads1, grads2):
            assert (g1 is None) == (g2 is None) and (g1 is None or np.array_equal(g1, g2)), before
