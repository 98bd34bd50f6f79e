"""migrate/legacy_compat.py: how ``check`` runs a script written for TF 1.x
on TF 2 (the import changed to ``tensorflow.compat.v1``, graph mode on)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

from migrate.legacy_compat import prepare


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
        tf.disable_eager_execution()
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
        tensorflow.disable_eager_execution()
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
    assert out.index("tfmigrate_tf1.disable_eager_execution()") < out.index("import os")
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
        from tensorflow import contrib
        h = tf.contrib.layers.fully_connected(x, 10)
        h = tf.contrib.layers.fully_connected(h, 10)
    """))
    assert prepared.blockers == [
        "line 6: imports `tensorflow.examples.tutorials.mnist`, which TensorFlow 2 removed",
        "line 7: imports `tensorflow.contrib`, which TensorFlow 2 removed",
        "line 8: uses `tf.contrib` (tensorflow.contrib), which TensorFlow 2 removed",
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
    assert "import tensorflow.compat.v1 as tf\ntf.disable_eager_execution()" in prepared.source
    ast.parse(prepared.source)
