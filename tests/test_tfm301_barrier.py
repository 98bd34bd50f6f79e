"""TFM301 and update barriers (issue 14).

TF1 training code runs a model's update ops (batch normalization's moving
statistics, stateful layers' states) with each step by making its gradients
wait for them: ``with tf.control_dependencies(update_ops): train_op = ...``,
or a no-op "barrier" built on them that the gradients or the loss wait for
(slim's ``create_train_op``, the Keras-with-TensorFlow guides' ``model.updates``).
It is not a synchronization of the workers: no strategy's all-reduce or
parameter-server protocol stands for it. What stands for it in TF2 is a
layer making its updates in its call, in training mode.

So the barrier over the ``UPDATE_OPS`` collection is dropped when nothing in
the program fills that collection (it ran nothing); where a layer or
``add_to_collection`` fills it, or the barrier runs a Keras model's
``updates``, the training is declined at the barrier saying what it runs and
how TF2 makes those updates.

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

import tfm301_support
from tfm301_support import line_of, manual

from migrate.codemod.engine import dedent, migrate_source

_CLUSTER = '''
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_ops

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223", "")
tf.app.flags.DEFINE_string("job_name", "worker", "")
tf.app.flags.DEFINE_integer("task_index", 0, "")
tf.app.flags.DEFINE_integer("train_steps", 30, "")
FLAGS = tf.app.flags.FLAGS


def layer(inputs, width, scope):
    with tf.variable_scope(scope):
        kernel = tf.get_variable("kernel", [inputs.shape[1], width],
                                 initializer=tf.truncated_normal_initializer(stddev=0.1))
        bias = tf.get_variable("bias", [width], initializer=tf.zeros_initializer())
    return tf.nn.relu(tf.matmul(inputs, kernel) + bias)


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 6])
        wanted = tf.placeholder(tf.float32, [None, 1])
        hidden = layer(features, 5, "hidden")
        guess = layer(hidden, 1, "out")
        total_loss = tf.reduce_mean(tf.square(guess - wanted))
        step = tf.train.get_or_create_global_step()
        sgd = tf.train.GradientDescentOptimizer(0.05)
{TRAIN}
    rows = np.random.RandomState(FLAGS.task_index)
    stop = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(FLAGS.task_index == 0),
                                           hooks=stop) as sess:
        while not sess.should_stop():
            batch = rows.rand(16, 6).astype(np.float32)
            _, value = sess.run([train_op, total_loss],
                                feed_dict={features: batch, wanted: batch[:, :1] * 2.0})
            print("loss", value)


if __name__ == "__main__":
    tf.app.run()
'''


def program(train: str) -> str:
    return _CLUSTER.replace("{TRAIN}", dedent(train).rstrip("\n").replace("\n", "\n        ").join(
        ["        ", ""]))


# the boilerplate around minimize, with nothing filling the collection
AROUND_MINIMIZE = program('''
update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
with tf.control_dependencies(update_ops):
    train_op = sgd.minimize(total_loss, global_step=step)
''')

# slim's create_train_op, written out: a barrier the loss waits for
SLIM_BARRIER = program('''
waiting_updates = set(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
with tf.control_dependencies(waiting_updates):
    barrier = tf.no_op(name="update_barrier")
total_loss = control_flow_ops.with_dependencies([barrier], total_loss)
pairs = sgd.compute_gradients(total_loss)
train_op = sgd.apply_gradients(pairs, global_step=step)
''')

# the gradients computed inside a block waiting for the barrier
GRADIENTS_AFTER_BARRIER = program('''
with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
    barrier = tf.no_op(name="update_barrier")
with tf.control_dependencies([barrier]):
    pairs = sgd.compute_gradients(total_loss)
train_op = sgd.apply_gradients(pairs, global_step=step)
''')


def migrate(source: str):
    return tfm301_support.migrate(source)


def _dropped_note(result):
    return [d for d in result.diagnostics if d.code == "TFM301" and d.fixed and "update barrier" in d.message]


def test_update_ops_around_minimize_that_nothing_fills_are_dropped():
    result = migrate(AROUND_MINIMIZE)
    assert "TFM301" in result.rules_applied, [d.message for d in manual(result)]
    assert not manual(result)
    out = result.output
    assert "UPDATE_OPS" not in out and "control_dependencies" not in out and "update_ops" not in out
    assert "tape.gradient(total_loss" in out and "sgd.apply_gradients(" in out
    notes = _dropped_note(result)
    assert len(notes) == 1 and notes[0].line == line_of(AROUND_MINIMIZE, "with tf.control_dependencies(update_ops)")
    assert "ran nothing" in notes[0].message


def test_slim_barrier_the_loss_waits_for_is_dropped():
    result = migrate(SLIM_BARRIER)
    assert "TFM301" in result.rules_applied, [d.message for d in manual(result)]
    out = result.output
    for gone in ("barrier", "with_dependencies", "UPDATE_OPS", "waiting_updates", "control_flow_ops"):
        assert gone not in out, gone
    assert "tape.gradient(total_loss" in out
    assert _dropped_note(result)


def test_gradients_computed_inside_the_barrier_block_are_the_tapes():
    result = migrate(GRADIENTS_AFTER_BARRIER)
    assert "TFM301" in result.rules_applied, [d.message for d in manual(result)]
    out = result.output
    assert "barrier" not in out and "control_dependencies" not in out
    assert "tape.gradient(total_loss" in out


def test_without_the_barrier_the_same_training_is_written():
    plain = program('''
    train_op = sgd.minimize(total_loss, global_step=step)
    ''')
    assert migrate(AROUND_MINIMIZE).output == migrate(plain).output


def test_collection_filled_by_hand_is_declined_at_the_barrier():
    filled = AROUND_MINIMIZE.replace(
        "        update_ops = tf.get_collection",
        "        tally = tf.get_variable(\"tally\", [], trainable=False, initializer=tf.zeros_initializer())\n"
        "        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, tf.assign_add(tally, 1.0))\n"
        "        update_ops = tf.get_collection", 1)
    assert filled != AROUND_MINIMIZE
    result = migrate_source(dedent(filled))
    assert "TFM301" not in result.rules_applied
    reason = next(d for d in manual(result) if d.code == "TFM301")
    assert reason.line == line_of(filled, "with tf.control_dependencies(update_ops)")
    assert "not a synchronization of the workers" in reason.message
    assert "`tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, tf.assign_add(tally, 1.0))`" in reason.message


def test_collection_filled_by_batch_normalization_is_declined_naming_it():
    normalized = GRADIENTS_AFTER_BARRIER.replace(
        'guess = layer(hidden, 1, "out")',
        'guess = layer(tf.contrib.layers.batch_norm(hidden, is_training=True), 1, "out")', 1)
    assert normalized != GRADIENTS_AFTER_BARRIER
    result = migrate_source(dedent(normalized))
    assert "TFM301" not in result.rules_applied
    assert not any("no longer defined" in d.message for d in result.diagnostics)
    reason = next(d for d in manual(result) if d.code == "TFM301")
    assert reason.line == line_of(normalized, "with tf.control_dependencies([barrier])")
    assert "`tf.contrib.layers.batch_norm(...)` puts update ops in it" in reason.message
    assert "BatchNormalization called with training=True" in reason.hint


# a Keras model built on its Input tensors, trained by a TF1 optimizer after its updates
KERAS_MODEL_BARRIER = program('''
entry = tf.keras.layers.Input(shape=(6,))
model = tf.keras.Model(entry, tf.keras.layers.Dense(1)(tf.keras.layers.Dense(5)(entry)))
with tf.control_dependencies(model.updates):
    barrier = tf.no_op(name="update_barrier")
with tf.control_dependencies([barrier]):
    pairs = sgd.compute_gradients(total_loss, model.trainable_weights)
train_op = sgd.apply_gradients(pairs, global_step=step)
''')


def test_keras_model_updates_barrier_is_declined_with_what_it_runs():
    result = migrate_source(dedent(KERAS_MODEL_BARRIER))
    assert "TFM301" not in result.rules_applied
    reasons = [d for d in manual(result) if d.code == "TFM301"]
    assert reasons, [d.message for d in result.diagnostics]
    reason = reasons[0]
    assert reason.line == line_of(KERAS_MODEL_BARRIER, "with tf.control_dependencies([barrier])")
    assert "`model.updates`" in reason.message and "not a synchronization of the workers" in reason.message
    assert "training=True" in reason.message and "training=True" in reason.hint
    # what the old reason said, that no longer explains anything
    assert not any("has no place in the step" in d.message for d in reasons)


def test_barrier_read_otherwise_is_declined_where_it_is_read():
    read = GRADIENTS_AFTER_BARRIER.replace(
        "        train_op = sgd.apply_gradients(pairs, global_step=step)",
        "        train_op = sgd.apply_gradients(pairs, global_step=step)\n"
        "        marker = tf.identity(total_loss) if barrier is not None else total_loss", 1)
    assert read != GRADIENTS_AFTER_BARRIER
    result = migrate_source(dedent(read))
    assert "TFM301" not in result.rules_applied
    reason = next(d for d in manual(result) if d.code == "TFM301")
    assert reason.line == line_of(read, "marker = ")
    assert "reads `barrier`, an update barrier" in reason.message


# Inception's spelling: a group of the updates, and the loss re-read after it
GROUP_BARRIER = program('''
updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
updates_op = tf.group(*updates)
with tf.control_dependencies([updates_op]):
    total_loss = tf.identity(total_loss)
pairs = sgd.compute_gradients(total_loss)
train_op = sgd.apply_gradients(pairs, global_step=step)
''')


def test_group_barrier_and_the_loss_read_after_it_are_dropped():
    result = migrate(GROUP_BARRIER)
    assert "TFM301" in result.rules_applied, [d.message for d in manual(result)]
    out = result.output
    for gone in ("updates_op", "tf.group", "tf.identity", "UPDATE_OPS", "control_dependencies"):
        assert gone not in out, gone
    notes = _dropped_note(result)
    assert len(notes) == 1 and notes[0].line == line_of(GROUP_BARRIER, "with tf.control_dependencies([updates_op])")


# slim's create_train_op written out: the update barrier, then a train tensor whose
# run applies the gradients and gives the loss
SLIM_TRAIN_TENSOR = program('''
with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
    barrier = tf.no_op(name="update_barrier")
total_loss = control_flow_ops.with_dependencies([barrier], total_loss)
pairs = sgd.compute_gradients(total_loss)
apply_op = sgd.apply_gradients(pairs, global_step=step)
train_op = control_flow_ops.with_dependencies([apply_op], total_loss, name="train_op")
''').replace("_, value = sess.run([train_op, total_loss],", "value = sess.run(train_op,")


def test_train_tensor_gives_the_loss_the_step_computes():
    assert "value = sess.run(train_op," in SLIM_TRAIN_TENSOR
    result = migrate(SLIM_TRAIN_TENSOR)
    assert "TFM301" in result.rules_applied, [d.message for d in manual(result)]
    out = result.output
    for gone in ("with_dependencies", "apply_op", "barrier", "control_flow_ops"):
        assert gone not in out, gone
    # the step returns the loss, bound where the train tensor's value was
    assert "return total_loss\n" in out
    assert "value = step_results.fetch()[step_index]" in out or "value = run_train_step(" in out


def test_train_tensor_whose_value_is_not_bound_returns_nothing_extra():
    unbound = SLIM_TRAIN_TENSOR.replace("value = sess.run(train_op,", "_, value = sess.run([train_op, total_loss],")
    out = migrate(unbound).output
    assert "return total_loss, total_loss" not in out and "return total_loss\n" in out


def test_identity_spelling_of_the_train_tensor():
    identity = SLIM_TRAIN_TENSOR.replace(
        '        train_op = control_flow_ops.with_dependencies([apply_op], total_loss, name="train_op")',
        '        with tf.control_dependencies([apply_op]):\n            train_op = tf.identity(total_loss, name="train_op")')
    assert identity != SLIM_TRAIN_TENSOR
    assert migrate(identity).output == migrate(SLIM_TRAIN_TENSOR).output


# a Keras model on the block's tensors, no barrier: the optimizer trains the model's own variables
KERAS_MODEL_ONLY = _CLUSTER.replace('''        hidden = layer(features, 5, "hidden")
        guess = layer(hidden, 1, "out")
        total_loss = tf.reduce_mean(tf.square(guess - wanted))
''', '''        model = tf.keras.Sequential([tf.keras.layers.Dense(5), tf.keras.layers.Dense(1)])
        total_loss = tf.reduce_mean(tf.square(model(features) - wanted))
''').replace("{TRAIN}", '''        pairs = sgd.compute_gradients(total_loss, model.trainable_weights)
        train_op = sgd.apply_gradients(pairs, global_step=step)''')


def test_keras_model_without_barrier_is_declined_at_the_variables_it_trains():
    plain = KERAS_MODEL_ONLY
    assert "layer(features" not in plain and "{TRAIN}" not in plain
    result = migrate_source(dedent(plain))
    assert "TFM301" not in result.rules_applied
    reason = next(d for d in manual(result) if d.code == "TFM301")
    assert reason.line == line_of(plain, "pairs = sgd.compute_gradients(total_loss, model.trainable_weights)")
    assert "it trains `model.trainable_weights`, the variables of `model`" in reason.message
    assert "strategy.scope()" in reason.hint
    # no note about a barrier of a training that stays TF1
    assert not _dropped_note(result)


def test_barrier_nothing_waits_for_is_dropped_with_a_note():
    unused = program('''
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        barrier = tf.no_op(name="update_barrier")
    train_op = sgd.minimize(total_loss, global_step=step)
    ''')
    result = migrate(unused)
    assert "TFM301" in result.rules_applied, [d.message for d in manual(result)]
    assert "barrier" not in result.output
    note = next(d for d in result.diagnostics if d.fixed and "nothing waits for it" in d.message)
    assert note.line == line_of(unused, "with tf.control_dependencies(tf.get_collection(")


def test_declined_training_says_nothing_was_dropped():
    result = migrate_source(dedent(KERAS_MODEL_BARRIER))
    assert not [d for d in result.diagnostics if d.fixed and ("dropped" in d.message and "barrier" in d.message)]
