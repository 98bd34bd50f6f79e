"""TFM301 on shapes helper-10's survey of new legacy scripts found wrong:
evaluation feeds in another dtype, placeholder_with_default in a model built
ahead, data chosen by the task index under ParameterServerStrategy."""

from __future__ import annotations

import textwrap

from migrate.codemod.engine import migrate_source

SCRIPT = textwrap.dedent('''\
    import numpy as np
    import tensorflow as tf

    flags = tf.app.flags
    flags.DEFINE_string("ps_hosts", "", "")
    flags.DEFINE_string("worker_hosts", "", "")
    flags.DEFINE_string("job_name", "", "")
    flags.DEFINE_integer("task_index", 0, "")
    flags.DEFINE_integer("steps", 20, "")
    FLAGS = flags.FLAGS
    DATA = np.random.RandomState(0).randn(400, 3).astype(np.float32)


    def model(x, training):
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        h = tf.layers.dropout(x, rate=0.1, training=training)
        return tf.matmul(h, w)


    def main(_):
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
            return
        DATA_CHOICE
        with tf.device(tf.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 3])
            y = tf.placeholder(tf.float32, [None, 1])
            training = tf.placeholder_with_default(False, [])
            loss = tf.reduce_mean(tf.square(model(x, training) - y))
            gs = tf.train.get_or_create_global_step()
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(FLAGS.task_index == 0),
                                               hooks=[tf.train.StopAtStepHook(last_step=FLAGS.steps)]) as sess:
            step = 0
            while not sess.should_stop():
                bx = shard[step % 100:step % 100 + 8]
                _, step = sess.run([train_op, gs], feed_dict={x: bx, y: bx.sum(1, keepdims=True), training: True})
                print("worker %d step %d" % (FLAGS.task_index, step))
            vx = np.ones((4, 3))  # float64, fed to a float32 placeholder
            print(sess.run(loss, feed_dict={x: vx, y: vx.sum(1, keepdims=True), training: False}))


    if __name__ == "__main__":
        tf.app.run()
    ''')


def migrate(data_choice: str):
    result = migrate_source(SCRIPT.replace("DATA_CHOICE", data_choice))
    compile(result.output, "migrated.py", "exec")
    return result


def test_evaluation_casts_fed_values_to_the_placeholder_dtypes():
    out = migrate("shard = DATA").output
    body = out[out.index("def compute_loss("):]
    assert "x, y = tf.cast(x, tf.float32), tf.cast(y, tf.float32)" in body.split("return")[0]


def test_placeholder_with_default_builds_the_model_with_its_default():
    out = migrate("shard = DATA").output
    assert "tf.constant(False)" in out and "tf.zeros([], False)" not in out


def test_data_chosen_by_task_index_is_reported_for_parameter_server_strategy():
    result = migrate("shard = DATA[FLAGS.task_index::2]")
    assert "ParameterServerStrategy" in result.output
    found = [d for d in result.manual_work if "chosen by this task's index (shard)" in d.message]
    assert len(found) == 1 and found[0].line == 35, result.diagnostics  # the session its loop runs in


def test_task_index_only_for_chief_seeds_and_printing_is_not_reported():
    for choice in ("shard = DATA", "shard = DATA[np.random.RandomState(FLAGS.task_index).permutation(400)]"):
        result = migrate(choice)
        assert not [d for d in result.diagnostics if "chosen by this task" in d.message], choice

