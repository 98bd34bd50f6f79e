"""migrate/runtime/legacy_compat.py: how ``check`` runs a script written for TF 1.x
on TF 2 (the import changed to ``tensorflow.compat.v1``, graph mode on)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

from migrate.runtime.legacy_compat import prepare


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_tf1_import_becomes_compat_v1_in_graph_mode_right_after_it():
    prepared = prepare(src("""
        from __future__ import print_function
        import os
        import tensorflow as tf
        import numpy as np

        x = tf.placeholder(tf.float32, [None, 2])
    """))
    assert prepared.changed and not prepared.blockers
    assert prepared.source == src("""
        from __future__ import print_function
        import os
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        import numpy as np

        x = tf.placeholder(tf.float32, [None, 2])
    """)
    assert any("tensorflow.compat.v1" in c for c in prepared.changes)


def test_other_spellings_of_the_tf1_import():
    prepared = prepare(src("""
        import tensorflow
        from tensorflow import flags, train
        w = tensorflow.get_variable("w", [1])
    """))
    assert prepared.source == src("""
        import tensorflow.compat.v1 as tensorflow
        tensorflow.disable_v2_behavior()
        from tensorflow.compat.v1 import flags, train
        w = tensorflow.get_variable("w", [1])
    """)


def test_import_only_inside_a_function_switches_graph_mode_at_the_top():
    prepared = prepare(src('''
        """Docstring."""
        from __future__ import division
        import os


        def main():
            import tensorflow as tf
            return tf.placeholder(tf.float32)
    '''))
    out = prepared.source
    assert out.index("import tensorflow.compat.v1 as tfmigrate_tf1") > out.index("from __future__")
    assert out.index("tfmigrate_tf1.disable_v2_behavior()") < out.index("import os")
    assert "    import tensorflow.compat.v1 as tf\n" in out
    ast.parse(out)


def test_scripts_that_already_run_on_tf2_are_left_alone():
    for text in (
        "import tensorflow.compat.v1 as tf\ntf.disable_eager_execution()\n",
        "import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32)\n",
        "from tensorflow.compat import v1 as tf\n",
        "import tensorflow as tf\ntf.compat.v1.disable_eager_execution()\n",
        "import tensorflow as tf\ntf.compat.v1.disable_v2_behavior()\n",
        "import numpy as np\n",
    ):
        prepared = prepare(text)
        assert not prepared.changed and prepared.source == text, text


def test_packages_tf2_removed_are_reported_with_their_line_unless_guarded():
    prepared = prepare(src("""
        import tensorflow as tf
        try:
            import tensorflow.contrib.slim as slim
        except ImportError:
            slim = None
        from tensorflow.examples.tutorials.mnist import input_data
        from tensorflow.examples.tutorials.word2vec import word2vec_basic
        from tensorflow.contrib import learn
        h = tf.contrib.layers.batch_norm(x)
        h = tf.contrib.layers.batch_norm(h)
        h = tf.contrib.layers.fully_connected(h, 10)  # provided by check: not a blocker
        gs = tf.contrib.framework.get_or_create_global_step()
    """))
    assert prepared.blockers == [
        "line 7: imports `tensorflow.examples.tutorials.word2vec.word2vec_basic`, which TensorFlow 2 removed",
        "line 8: imports `tensorflow.contrib.learn`, which TensorFlow 2 removed",
        "line 9: uses tensorflow.contrib.layers.batch_norm, which TensorFlow 2 removed",
    ]


def test_prepared_tf1_program_runs_on_tensorflow_2(tmp_path):
    """The original does not run on TF 2 (no tf.placeholder, eager); the
    prepared copy does, in graph mode."""
    program = src("""
        import tensorflow as tf

        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.get_variable("w", [2, 1], initializer=tf.ones_initializer())
        y = tf.reduce_sum(tf.matmul(x, w))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            print("result", sess.run(y, feed_dict={x: [[1.0, 2.0], [3.0, 4.0]]}))
    """)
    original, copy = tmp_path / "original.py", tmp_path / "prepared.py"
    original.write_text(program)
    copy.write_text(prepare(program).source)
    failed = subprocess.run([sys.executable, str(original)], capture_output=True, text=True, timeout=120, check=False)
    assert failed.returncode != 0 and "placeholder" in failed.stderr
    ran = subprocess.run([sys.executable, str(copy)], capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "result 10.0" in ran.stdout


def test_python2_source_is_converted_first():
    prepared = prepare(src("""
        import tensorflow as tf
        for i in xrange(3):
            print "step", i
    """))
    assert prepared.changes[0].startswith("converted from Python 2")
    assert "print(\"step\", i)" in prepared.source and "range(3)" in prepared.source
    assert "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()" in prepared.source
    ast.parse(prepared.source)


def test_tf1_mnist_reader_is_not_a_blocker_but_noted():
    prepared = prepare(src("""
        import tensorflow as tf
        from tensorflow.examples.tutorials.mnist import input_data
        mnist = input_data.read_data_sets("/tmp/data", one_hot=True)
    """))
    assert prepared.blockers == [] and prepared.reads_mnist
    other = prepare("import tensorflow as tf\nfrom tensorflow.examples.tutorials.word2vec import w2v\n")
    assert other.blockers and not other.reads_mnist
    contrib = prepare("import tensorflow as tf\ngs = tf.contrib.framework.get_or_create_global_step()\n")
    assert contrib.uses_contrib and not contrib.blockers
    assert not prepare("import tensorflow as tf\nx = 1\n").reads_mnist


def test_mnist_standin_has_tf1s_api_and_is_deterministic():
    import numpy as np

    from migrate.runtime import mnist_standin

    np.random.seed(3)
    first = mnist_standin.read_data_sets("/nonexistent", one_hot=True)
    assert first.train.images.shape == (5000, 784) and first.train.images.dtype == np.float32
    assert 0.0 <= first.train.images.min() and first.train.images.max() <= 1.0
    assert first.train.labels.shape == (5000, 10) and first.validation.num_examples == 1000
    assert first.test.images.shape == (1000, 784)
    xs, ys = first.train.next_batch(100)
    assert xs.shape == (100, 784) and ys.shape == (100, 10) and (ys.sum(axis=1) == 1).all()
    np.random.seed(3)
    again = mnist_standin.read_data_sets("/elsewhere", one_hot=True)
    assert np.array_equal(again.train.next_batch(100)[0], xs)  # same seed, same batches
    dense = mnist_standin.read_data_sets(None, reshape=False, validation_size=0)
    assert dense.train.images.shape == (6000, 28, 28, 1) and dense.train.labels.dtype == np.uint8
    # an epoch boundary: the rest of the epoch, then the start of the next one
    small = mnist_standin.DataSet(np.zeros((5, 28, 28, 1), np.uint8), np.arange(5, dtype=np.uint8))
    small.next_batch(4)
    _, labels = small.next_batch(4)
    assert len(labels) == 4 and small.epochs_completed == 1
    # learnable: the class templates separate the classes
    means = [first.train.images[first.train.labels.argmax(1) == c].mean(0) for c in range(10)]
    assert min(np.abs(means[a] - means[b]).mean() for a in range(10) for b in range(a)) > 0.05


def test_harness_serves_the_mnist_reader_and_tf1_layers_to_an_unmodified_program(tmp_path):
    """What check's legacy side gets on TF 2.21 with Keras 3: the removed MNIST
    reader and tf.layers, provided from outside, each use noted."""
    import json
    import os

    script = tmp_path / "legacy.py"
    script.write_text(src("""
        import tensorflow.compat.v1 as tf
        from tensorflow.examples.tutorials.mnist import input_data
        tf.disable_eager_execution()
        mnist = input_data.read_data_sets("/nonexistent/mnist", one_hot=True)
        xs, ys = mnist.train.next_batch(8)
        logits = tf.layers.dense(tf.constant(xs), 10)
        print("shapes", xs.shape, ys.shape, logits.shape, [v.name for v in tf.global_variables()])
    """))
    env = {**os.environ, "TFMIGRATE_BOOT_HOOKS": "migrate.runtime.harness", "TFMIGRATE_HARNESS": "mnist,tf1layers",
           "TFMIGRATE_HARNESS_DIR": str(tmp_path / "h"), "TFMIGRATE_TASK": "worker:0"}
    ran = subprocess.run([sys.executable, "-m", "migrate.runtime.taskboot", str(script)], capture_output=True,
                         text=True, timeout=120, env=env, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "shapes (8, 784) (8, 10) (8, 10) ['dense/kernel:0', 'dense/bias:0']" in ran.stdout
    fired = json.loads((tmp_path / "h" / "harness-notes-worker-0.json").read_text())["fired"]
    assert any("read_data_sets served by tfmigrate's synthetic stand-in" in f for f in fired), fired
    assert any("tf.compat.v1.layers.dense run as tfmigrate's TF1 code" in f for f in fired), fired


def test_flags_absl_defines_itself_may_override_it():
    prepared = prepare(src("""
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        tf.app.flags.DEFINE_string("log_dir", "/tmp/logs", "summaries")
        tf.app.flags.DEFINE_integer("steps", 5, "")
    """))
    assert prepared.changed and "--log_dir defined with allow_override=True" in prepared.changes[-1]
    assert 'DEFINE_string("log_dir", "/tmp/logs", "summaries", allow_override=True)' in prepared.source
    assert 'DEFINE_integer("steps", 5, "")\n' in prepared.source
