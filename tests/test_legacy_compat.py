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
        from tensorflow.contrib import lookup
        h = tf.contrib.layers.batch_norm(x)
        h = tf.contrib.layers.batch_norm(h)
        h = tf.contrib.layers.fully_connected(h, 10)  # provided by check: not a blocker
        gs = tf.contrib.framework.get_or_create_global_step()
    """))
    assert prepared.blockers == [
        "line 7: imports `tensorflow.examples.tutorials.word2vec.word2vec_basic`, which TensorFlow 2 removed",
        "line 8: imports `tensorflow.contrib.lookup`, which TensorFlow 2 removed",
        ("line 9: uses tensorflow.contrib.layers.batch_norm, which TensorFlow 2 removed (tfmigrate check provides"
         " contrib.layers' fully_connected, conv2d, pooling, flatten, dropout, initializers and regularizers only)"),
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


# ------------------------------------------------------------ what TF 2 removed, in every spelling

PROVIDED_SPELLINGS = {
    "import tensorflow.contrib.slim as slim": "net = slim.conv2d(x, 32, [5, 5], scope='conv1')",
    "from tensorflow.contrib import slim": "net = slim.layers.conv2d(x, 32, [5, 5])",
    "from tensorflow.contrib import layers": "net = layers.fully_connected(x, 10, activation_fn=None)",
    "import tensorflow.contrib.layers as layers": "net = layers.max_pool2d(x, [2, 2])",
    "from tensorflow.contrib.layers import fully_connected": "net = fully_connected(x, 10)",
    "import tensorflow.contrib.slim as sl": "with sl.arg_scope([sl.conv2d], padding='VALID'):\n    net = sl.flatten(x)",
    "from tensorflow.contrib.slim import layers as slim_layers": "net = slim_layers.avg_pool2d(x, 2)",
    "from tensorflow.contrib import framework": "step = framework.get_or_create_global_step()",
    "import numpy": "net = tf.contrib.slim.layers.conv2d(x, 8, 3)\nstep = tf.contrib.framework.get_or_create_global_step()",
    "import os": "w = tf.get_variable('w', [3, 3], initializer=tf.contrib.layers.xavier_initializer(uniform=False))",
}


def test_each_spelling_of_a_provided_contrib_member_is_accepted():
    for imported, used in PROVIDED_SPELLINGS.items():
        prepared = prepare(f"import tensorflow as tf\n{imported}\nx = tf.placeholder(tf.float32)\n{used}\n")
        assert prepared.blockers == [] and prepared.uses_contrib, (imported, used, prepared.blockers)


def test_each_spelling_of_the_mnist_reader_is_accepted_and_served():
    for spelling in (
        "from tensorflow.examples.tutorials.mnist import input_data\nd = input_data.read_data_sets('/d')",
        "import tensorflow.examples.tutorials.mnist.input_data as input_data\nd = input_data.read_data_sets('/d')",
        "from tensorflow.examples.tutorials.mnist.input_data import read_data_sets\nd = read_data_sets('/d')",
        "from tensorflow.contrib.learn.python.learn.datasets.mnist import read_data_sets\nd = read_data_sets('/d')",
        "from tensorflow.contrib.learn.python.learn.datasets import mnist\nd = mnist.read_data_sets('/d')",
        "d = tf.contrib.learn.datasets.mnist.read_data_sets('/d', one_hot=True)",
        "d = tf.contrib.learn.datasets.load_dataset('mnist')",
        "d = tf.contrib.learn.datasets.DATASETS['mnist']('/d')",
    ):
        prepared = prepare(f"import tensorflow as tf\n{spelling}\n")
        assert prepared.blockers == [] and prepared.reads_mnist, (spelling, prepared.blockers)


def test_what_is_not_provided_is_refused_with_its_line_in_any_spelling():
    cases = {
        "import tensorflow.contrib.slim as slim\nx = 1\nnet = slim.batch_norm(x)\n":
            "line 4: uses tensorflow.contrib.slim.batch_norm, which TensorFlow 2 removed",
        "from tensorflow.contrib import layers\nnet = layers.batch_norm(x)\n":
            "line 3: uses tensorflow.contrib.layers.batch_norm, which TensorFlow 2 removed",
        "from tensorflow.contrib.layers import batch_norm\n":
            "line 2: imports `tensorflow.contrib.layers.batch_norm`, which TensorFlow 2 removed",
        "net = tf.contrib.slim.layers.repeat(x, 2, tf.identity)\n":
            "line 2: uses tensorflow.contrib.slim.layers.repeat, which TensorFlow 2 removed",
        "from tensorflow.contrib import slim\nq = slim.prefetch_queue.prefetch_queue([x])\n":
            "line 3: uses tensorflow.contrib.slim.prefetch_queue, which TensorFlow 2 removed",
        "d = tf.contrib.learn.datasets.load_dataset('iris')\n":
            "line 2: uses tensorflow.contrib.learn.datasets.load_dataset for another data set than MNIST",
        "from tensorflow.contrib.session_bundle import exporter\n":
            "line 2: imports `tensorflow.contrib.session_bundle.exporter`, which TensorFlow 2 removed (no TF 2 API"
            " writes its SessionBundle export format",
        "s = tf.scalar_summary('loss', x)\n":
            "line 2: uses tf.scalar_summary, which TensorFlow 1.0 removed (its successor tf.summary.scalar takes"
            " other arguments",
    }
    for body, expected in cases.items():
        prepared = prepare("import tensorflow as tf\n" + body)
        assert len(prepared.blockers) == 1 and prepared.blockers[0].startswith(expected), (body, prepared.blockers)
        assert not prepared.uses_contrib
    # a script already on tf.compat.v1 reaches tf.contrib the same way
    on_v1 = prepare("import tensorflow.compat.v1 as tf\nh = tf.contrib.layers.batch_norm(x)\n")
    assert on_v1.blockers[0].startswith("line 2: uses tensorflow.contrib.layers.batch_norm, which TensorFlow 2 removed")


def test_names_tf_1_0_gave_unchanged_functions_are_used_in_the_legacy_copy():
    prepared = prepare(src("""
        import tensorflow as tf
        merged = tf.merge_all_summaries()
        writer = tf.train.SummaryWriter("/tmp/logs")
        y = tf.mul(x, tf.neg(x))
    """))
    assert prepared.blockers == []
    assert prepared.source.endswith(src("""
        merged = tf.summary.merge_all()
        writer = tf.summary.FileWriter("/tmp/logs")
        y = tf.multiply(x, tf.negative(x))
    """))
    assert "`tf.merge_all_summaries` -> `tf.summary.merge_all`" in prepared.changes[-1]
    # a script already on tf.compat.v1 keeps the compat prefix (tf.summary.merge_all is TF1-only)
    kept = prepare("import tensorflow as tf\ntf.compat.v1.disable_v2_behavior()\nm = tf.compat.v1.merge_all_summaries()\n")
    assert kept.source.endswith("m = tf.compat.v1.summary.merge_all()\n")


def test_provided_contrib_members_compute_what_tf1_computed(tmp_path):
    """Our fixture builds one convnet through slim/contrib.layers in several
    spellings (arg_scope included) and the same network with core ops as TF1's
    slim computed it: the same variables, the same outputs on the same weights;
    the initializers draw TF1's formulas; unknown members raise."""
    import json
    import os
    from pathlib import Path

    fixture = Path(__file__).parent / "data" / "check" / "compat_contrib_spellings.py"
    prepared = prepare(fixture.read_text(encoding="utf-8"))
    assert prepared.blockers == [] and prepared.uses_contrib and prepared.reads_mnist
    script = tmp_path / "legacy.py"
    script.write_text(prepared.source)
    env = {**os.environ, "TFMIGRATE_BOOT_HOOKS": "migrate.runtime.harness", "TFMIGRATE_HARNESS": "contrib,mnist",
           "TFMIGRATE_HARNESS_DIR": str(tmp_path / "h"), "TFMIGRATE_TASK": "worker:0"}
    ran = subprocess.run([sys.executable, "-m", "migrate.runtime.taskboot", str(script)], capture_output=True,
                         text=True, timeout=180, env=env, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(ran.stdout.split("RESULT ", 1)[1])
    assert result["provided_variables"] == result["core_variables"] == {
        "conv1/weights": [5, 5, 1, 4], "conv1/biases": [4], "Conv/weights": [3, 3, 4, 6], "Conv/biases": [6],
        "fully_connected/weights": [14 * 14 * 6, 16], "fully_connected/biases": [16],
        "logits/weights": [16, 10], "logits/biases": [10],
    }
    assert result["output_scale"] > 0.1 and result["output_difference"] <= 1e-6 * result["output_scale"]
    assert result["same_function"] and result["mnist_spellings_agree"]
    assert result["initializer_difference"] == {"xavier_normal": 0.0, "xavier_uniform": 0.0, "variance_scaling": 0.0}
    assert result["penalties"] == [0.5 * 55 / 2, 0.25 * 15]
    assert result["regularization_losses"] == [0.5 * (3 * 4 * 2.0**2) / 2]  # once: the reused call adds none
    assert result["devices"] == ["/job:ps/task:0/device:CPU:0", "/job:ps/task:1/device:CPU:0",
                                 "/job:ps/task:0/device:CPU:0"]
    assert "is not decorated with @add_arg_scope" in result["undecorated"]
    assert "tensorflow.contrib.slim.batch_norm` does not exist in TensorFlow 2" in result["missing"]
    fired = json.loads((tmp_path / "h" / "harness-notes-worker-0.json").read_text())["fired"]
    assert "tf.contrib.framework.arg_scope run as tfmigrate's TF1 code (TF 2 removed tf.contrib)" in fired
    assert any(f.startswith("tf.contrib.learn.datasets.load_dataset served by") for f in fired), fired


def test_every_provided_contrib_member_exists_on_tensorflow_2():
    """The decision (legacy_compat, no TensorFlow) and the module tree
    (contrib_standin) list the same members, each resolvable on TF 2.21."""
    import tensorflow as tf
    from tensorflow.compat import v1

    from migrate.runtime import contrib_standin, legacy_compat

    members = contrib_standin.implementations(tf, v1)
    assert set(members) == legacy_compat.CONTRIB_PROVIDED
    assert all(member is not None for member in members.values())


def test_tf1_apis_keras_3_removed_are_refused_with_their_line_unless_provided(monkeypatch):
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    prepared = prepare(src("""
        import tensorflow as tf
        h = tf.layers.dense(x, 4)  # provided: TF1's code
        h = tf.layers.batch_normalization(h, training=True)  # provided too
        h = tf.layers.conv1d(h, 4, 3)
        cell = tf.nn.rnn_cell.BasicLSTMCell(8)
        outputs, state = tf.nn.dynamic_rnn(cell, h, dtype=tf.float32)  # in compat.v1 as it was
    """))
    assert [b.split(", which")[0] for b in prepared.blockers] == [
        "line 4: uses tf.layers.conv1d",
        "line 5: uses tf.nn.rnn_cell.BasicLSTMCell",
    ]
    assert "Keras 3 removed tf.compat.v1.layers; tfmigrate check provides tf.layers." in prepared.blockers[0]
    imported = prepare("import tensorflow.compat.v1 as tf\nfrom tensorflow.compat.v1.nn.rnn_cell import LSTMCell\n")
    assert imported.blockers[0].startswith("line 2: imports `tensorflow.compat.v1.nn.rnn_cell.LSTMCell`, which")


def test_keras_2_apis_keras_3_lacks_are_refused_with_their_line():
    prepared = prepare(src("""
        import tensorflow as tf
        import keras
        from keras import backend as K
        from keras.layers.core import Lambda
        dense = keras.layers.Dense(4)  # Keras 3 has it
        eps = K.epsilon()  # Keras 3 has it
        K.set_learning_phase(1)
        total = K.sum(x, 1)
    """))
    assert [b.split(", a Keras 2")[0] for b in prepared.blockers] == [
        "line 4: imports `keras.layers.core`",
        "line 7: uses K.set_learning_phase (keras.backend.set_learning_phase)",
        "line 8: uses K.sum (keras.backend.sum)",
    ]
    assert "Keras 3 removed it" in prepared.blockers[0]
    assert prepare("import keras\nm = keras.models.Model(i, o)\n").blockers == []


def test_keras_lists_match_the_installed_keras():
    """What legacy_compat (which never imports Keras) says Keras 3 lacks, it lacks."""
    import importlib

    import keras

    from migrate.runtime.legacy_compat import KERAS2_MODULES, KERAS3_BACKEND

    for name in KERAS2_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        raise AssertionError(f"{name} exists in Keras {keras.__version__}")
    public = {n for n in dir(keras.backend) if not n.startswith("_")}
    assert public <= KERAS3_BACKEND, public - KERAS3_BACKEND
