"""Fixture (ours): the ClusterSpec is built in main(), a helper makes and
returns only the server; the ps joins in main(), the workers pass the
server's target as the `master` of a training function that also takes
the cluster as `cluster_spec`."""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2432", "parameter servers")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2433,localhost:2434", "trainers")
tf.app.flags.DEFINE_string("job_name", "worker", "ps or worker")
tf.app.flags.DEFINE_integer("task_index", 0, "index of this task in its job")
tf.app.flags.DEFINE_integer("train_steps", 12, "global steps to train")
FLAGS = tf.app.flags.FLAGS


def create_server(cluster_spec):
    # one server per task, on the address the cluster gives it
    return tf.train.Server(cluster_spec, job_name=FLAGS.job_name, task_index=FLAGS.task_index)


def train(master, cluster_spec):
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster_spec)):
        x = tf.placeholder(tf.float32, [None, 4])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)

    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=master, is_chief=(FLAGS.task_index == 0),
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            step = sess.run(global_step)
            rng = np.random.RandomState(step)
            xs = rng.randn(16, 4).astype(np.float32)
            ys = xs.sum(axis=1, keepdims=True) * 0.5
            sess.run(train_op, feed_dict={x: xs, y: ys})


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = create_server(cluster)
    if FLAGS.job_name == "ps":
        server.join()
    else:
        train(server.target, cluster_spec=cluster)


if __name__ == "__main__":
    tf.app.run()
