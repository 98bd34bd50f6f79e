"""A TF1 loop printing fetched one-element values with ``%f`` relied on NumPy 1
converting the array to a number; NumPy 2 (TensorFlow 2.21's) refuses. The
migrated loop reads them with ``.numpy()`` and formats ``.item()``: the same
number, in both NumPy versions."""

from __future__ import annotations

import numpy as np

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.rules._numpy_formats import _conversions

# ours: async ps/worker linear regression, a weight of shape [1] printed with %f
PRINTS_WEIGHTS = dedent(
    """
    import numpy as np
    import tensorflow as tf

    tf.app.flags.DEFINE_string("ps_hosts", "", "ps")
    tf.app.flags.DEFINE_string("worker_hosts", "", "workers")
    tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
    tf.app.flags.DEFINE_integer("task_index", 0, "index")
    FLAGS = tf.app.flags.FLAGS


    def main(_):
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
        elif FLAGS.job_name == "worker":
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
                step_var = tf.train.get_or_create_global_step()
                x = tf.placeholder(tf.float32)
                y = tf.placeholder(tf.float32)
                gain = tf.get_variable("gain", [1], tf.float32, initializer=tf.zeros_initializer())
                shift = tf.get_variable("shift", [1], tf.float32, initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.square(y - gain * x - shift))
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step_var)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0) as sess:
                step = 0
                while step < 50:
                    xs = np.random.randn(4)
                    _, loss_v, step = sess.run([train_op, loss, step_var], feed_dict={x: xs, y: 2 * xs + 1})
                    if step % 10 == 0:
                        g, s = sess.run([gain, shift])
                        print("step %d gain %.3f shift %f loss %f (%s)" % (step, g, s, loss_v, g))


    if __name__ == "__main__":
        tf.app.run()
    """
)


def test_fetched_values_formatted_as_numbers_are_given_as_item():
    result = migrate_source(PRINTS_WEIGHTS)
    out = result.output
    assert "ParameterServerStrategy" in out
    assert "g, s = [gain.numpy(), shift.numpy()]" in out
    # numeric conversions get .item(); the %s one keeps the array's text
    assert '% (step, g.item(), s.item(), loss_v, g))' in out
    fixed = [d for d in result.diagnostics if "`.item()`" in d.message]
    assert len(fixed) == 1 and fixed[0].fixed
    assert fixed[0].line == PRINTS_WEIGHTS.splitlines().index(next(
        line for line in PRINTS_WEIGHTS.splitlines() if "print(\"step %d gain" in line)) + 1
    assert migrate_source(out).output == out
    # what the line prints under NumPy 2 is what NumPy 1 printed for the arrays
    g, s = np.array([0.5], np.float32), np.array([1.25], np.float32)
    assert "%.3f %f" % (g.item(), s.item()) == "0.500 1.250000"  # noqa: UP031 - the program's own formatting


def test_conversions_are_read_per_operand():
    assert _conversions("%d of %5.2f%% (%s) %*d") == [True, True, False, True, True]
    assert _conversions("%(name)s") is None
