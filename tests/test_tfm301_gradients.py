"""TFM301 and the gradients a train op applies, however the program made them:

    grads = tf.gradients(loss, params)                        # a list, one per variable
    grads, _ = tf.clip_by_global_norm(grads, 5.0)             # or nested: clip(tf.gradients(...))
    train_op = opt.apply_gradients(zip(grads, params), global_step=step)

    grads, params = zip(*opt.compute_gradients(loss))         # unzipped pairs

become the tape's gradients of the same loss and variables, then the same
statements on them (clipping) after the tape, then the optimizer's update.
`params = tf.trainable_variables()` names the variables the step trains (TF2
keeps no collection). tf.gradients with arguments that change the gradients
(grad_ys, stop_gradients) is not taken for the tape's.

The harness of `tfmigrate check` records the loss given to tf.gradients as
the one compute_gradients would have had, so such programs can be checked.

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrate.codemod.engine import dedent, migrate_source

BLOCK = dedent('''
import tensorflow as tf


def train(cluster, server, task_index, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 4])
        targets = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.get_variable("kernel", [4, 1])
        offset = tf.get_variable("offset", [1])
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) + offset - targets))
        optimizer = tf.train.GradientDescentOptimizer(0.1)
        TRAIN
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0, hooks=hooks) as sess:
        for x, y in batches:
            if sess.should_stop():
                break
            sess.run(train_op, feed_dict={inputs: x, targets: y})
''')

SHAPES = {
    "tf.gradients of all trainable variables": (
        ("params = tf.trainable_variables()\n"
         "        grads = tf.gradients(loss, params)\n"
         "        train_op = optimizer.apply_gradients(zip(grads, params), global_step=step)"),
        ["params = trainable_variables",
         "grads = tape.gradient(loss, trainable_variables)",
         "optimizer.apply_gradients(zip(grads, params))"]),
    "clipped, nested": (
        ("params = tf.trainable_variables()\n"
         "        grads, _ = tf.clip_by_global_norm(tf.gradients(loss, params), 5.0)\n"
         "        train_op = optimizer.apply_gradients(zip(grads, params), global_step=step)"),
        ["grads = tape.gradient(loss, trainable_variables)",
         "grads, _ = tf.clip_by_global_norm(grads, 5.0)",
         "optimizer.apply_gradients(zip(grads, params))"]),
    "clipped, of a listed var_list": (
        ("params = [kernel, offset]\n"
         "        grads = tf.gradients(loss, params, colocate_gradients_with_ops=True)\n"
         "        clipped, norm = tf.clip_by_global_norm(grads, 5.0)\n"
         "        train_op = optimizer.apply_gradients(zip(clipped, params), global_step=step)"),
        ["trainable_variables = [kernel, offset]",
         "grads = tape.gradient(loss, trainable_variables)",
         "clipped, norm = tf.clip_by_global_norm(grads, 5.0)",
         "optimizer.apply_gradients(zip(clipped, params))"]),
    "compute_gradients unzipped": (
        ("grads, params = zip(*optimizer.compute_gradients(loss))\n"
         "        grads, _ = tf.clip_by_global_norm(grads, 5.0)\n"
         "        train_op = optimizer.apply_gradients(zip(grads, params), global_step=step)"),
        ["grads, params = tape.gradient(loss, trainable_variables), trainable_variables",
         "grads, _ = tf.clip_by_global_norm(grads, 5.0)",
         "optimizer.apply_gradients(zip(grads, params))"]),
    "an optimizer built where it applies": (
        ("grads = tf.gradients(loss, [kernel, offset])\n"
         "        train_op = tf.train.GradientDescentOptimizer(0.1).apply_gradients(\n"
         "            zip(grads, [kernel, offset]), global_step=step)"),
        ["optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)",
         "grads = tape.gradient(loss, trainable_variables)",
         "optimizer.apply_gradients(zip(grads, [kernel, offset]))"]),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_gradients_made_another_way_migrate(shape):
    train, expected = SHAPES[shape]
    source = BLOCK.replace("TRAIN", train)
    if "GradientDescentOptimizer(0.1).apply_gradients" in train:
        source = source.replace("        optimizer = tf.train.GradientDescentOptimizer(0.1)\n", "")
    result = migrate_source(source, select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "tf.gradients(" not in out and "compute_gradients(" not in out and "trainable_variables()" not in out
    step = out.split("with tf.GradientTape() as tape:", 1)[1]
    lines = [line.strip() for line in out.splitlines()]
    for line in expected:
        assert line in lines, line
    # the gradients are taken after the forward pass, and the clipping after them
    assert step.index(expected[-1]) > step.index("tape.gradient(")
    assert migrate_source(out, select=["TFM301"]).output == out


@pytest.mark.parametrize("extra", ["grad_ys=[tf.ones([])]", "stop_gradients=[offset]"])
def test_gradients_that_are_not_the_tapes_are_declined(extra):
    source = BLOCK.replace("TRAIN", (
        f"grads = tf.gradients(loss, [kernel, offset], {extra})\n"
        "        train_op = optimizer.apply_gradients(zip(grads, [kernel, offset]), global_step=step)"))
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1 and "`train_op`" in declined[0].message


_HARNESS_PROBE = textwrap.dedent("""
    import sys
    from migrate.runtime import harness
    observer = harness._Harness()
    observer.install()
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    weight = tf.Variable([2.0])
    loss = tf.reduce_sum(weight * weight)
    grads = tf.gradients(loss, [weight])
    update = tf.train.GradientDescentOptimizer(0.1).apply_gradients(zip(grads, [weight]))
    recorded = observer.train_ops.get(update)
    print("RECORDED", [t.name for t in recorded] if recorded else None)
""")


def test_the_check_harness_records_the_loss_given_to_tf_gradients(tmp_path):
    root = Path(__file__).resolve().parents[1]
    env = {"PYTHONPATH": str(root), "TF_CPP_MIN_LOG_LEVEL": "3", "TFMIGRATE_HARNESS_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", _HARNESS_PROBE], check=False, capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = [line for line in done.stdout.splitlines() if line.startswith("RECORDED")]
    assert recorded == ["RECORDED ['Sum:0']"], done.stdout[-2000:]


def test_gradients_computed_inside_another_block_are_declined_there():
    """`with tf.control_dependencies([barrier]): grads = opt.compute_gradients(loss)`:
    what the block runs first has no place in the tape's step; said at that block."""
    source = BLOCK.replace("TRAIN", (
        "barrier = tf.no_op(name='barrier')\n"
        "        with tf.control_dependencies([barrier]):\n"
        "            grads = optimizer.compute_gradients(loss, [kernel, offset])\n"
        "        train_op = optimizer.apply_gradients(grads, global_step=step)"))
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1
    assert declined[0].line == next(i for i, line in enumerate(source.splitlines(), 1) if "control_dependencies" in line)
    assert "`grads`" in declined[0].message and "`with tf.control_dependencies([barrier]):`" in declined[0].message


@pytest.mark.parametrize("train", [
    "train_op = optimizer.minimize(loss, global_step=step, var_list=tf.trainable_variables())",
    ("tvars = tf.trainable_variables()\n"
     "        train_op = optimizer.minimize(loss, global_step=step, var_list=tvars)"),
    ("tvars = tf.trainable_variables()\n"
     "        pairs = optimizer.compute_gradients(loss, tvars)\n"
     "        train_op = optimizer.apply_gradients(pairs, global_step=step)"),
])
def test_all_trainable_variables_are_the_ones_the_step_trains(train):
    """TF2 keeps no collection: `tf.compat.v1.trainable_variables()` is empty
    outside a TF1 graph, so a step taking it would train nothing."""
    result = migrate_source(BLOCK.replace("TRAIN", train), select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    assert "trainable_variables()" not in result.output
    assert "\n    trainable_variables = [kernel, offset]\n" in result.output
    assert "tape.gradient(loss, trainable_variables)" in result.output
