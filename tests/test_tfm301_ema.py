"""TFM301 and a train op that also updates an ExponentialMovingAverage of the
variables, the TF1 idiom

    ema_op = ema.apply(tf.trainable_variables())
    train_op = tf.group(train_step, ema_op)        # or
    with tf.control_dependencies([train_step, ema_op]):
        train_op = tf.no_op()

`tf.group` is also how TF1 code groups its initializers, which the rule drops
as graph plumbing; grouped with the train op it is the training itself, and
the loop running it must never be dropped with it. Until the step updates the
averages itself, both spellings are declined at the statement that binds the
combined op, and the file stays byte-identical.

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

import pytest

from migrate.codemod.engine import dedent, migrate_source

GROUPED = """
import tensorflow.compat.v1 as tf


def train(cluster, server, task_index, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 4])
        targets = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([4, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) - targets))
        update = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        shadows = tf.train.ExponentialMovingAverage(0.99, step)
        shadow_update = shadows.apply(tf.trainable_variables())
        COMBINE
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0,
                                           checkpoint_dir="/tmp/ckpt", hooks=hooks) as sess:
        for x, y in batches:
            if sess.should_stop():
                break
            sess.run(train_op, feed_dict={inputs: x, targets: y})
"""

SPELLINGS = {
    "group": "train_op = tf.group(update, shadow_update)",
    "no_op": "with tf.control_dependencies([update, shadow_update]):\n            train_op = tf.no_op(name='train')",
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_train_op_with_moving_average_is_declined_not_dropped(spelling):
    source = dedent(GROUPED).replace("COMBINE", SPELLINGS[spelling])
    result = migrate_source(source, select=["TFM301"])
    # the training (and the loop running it) is kept as it was, never deleted
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1, [d.message for d in result.manual_work]
    combine_line = next(i for i, line in enumerate(source.splitlines(), 1) if "train_op = tf." in line
                        or "control_dependencies" in line)
    assert declined[0].line == combine_line
    assert "`update`" in declined[0].message and "shadow_update" in declined[0].message
    assert "ema.apply" in declined[0].hint


def test_grouped_initializers_are_still_plumbing():
    """An init op grouped from the initializers does not read the train op: it
    is still dropped and the training migrates."""
    source = dedent(GROUPED).replace(
        "        shadows = tf.train.ExponentialMovingAverage(0.99, step)\n"
        "        shadow_update = shadows.apply(tf.trainable_variables())\n"
        "        COMBINE\n",
        "        init_op = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())\n"
    ).replace("sess.run(train_op,", "sess.run(update,")
    result = migrate_source(source, select=["TFM301"])
    assert not [d for d in result.manual_work if d.code == "TFM301"], [d.message for d in result.manual_work]
    assert "ParameterServerStrategy" in result.output and "tf.group" not in result.output
    assert "apply_gradients" in result.output
