"""Fixture (ours): synchronous training. `define_cluster()` builds the
ClusterSpec and this task's server and returns them with the worker count;
`start_server()` keeps the ps serving; `run_worker()` opens the device-setter
block and calls the function that builds the model, the SyncReplicas train op
and the session on the server it is handed."""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2442", "parameter servers")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2443,localhost:2444", "trainers")
tf.app.flags.DEFINE_string("job_name", "worker", "ps or worker")
tf.app.flags.DEFINE_integer("task_index", 0, "index of this task in its job")
tf.app.flags.DEFINE_integer("train_steps", 8, "global steps to train")
FLAGS = tf.app.flags.FLAGS


def train_on(server, num_workers, is_chief):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.05),
                                         replicas_to_aggregate=num_workers, total_num_replicas=num_workers)
    train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            rng = np.random.RandomState(FLAGS.task_index)
            xs = rng.randn(16, 4).astype(np.float32)
            ys = xs.sum(axis=1, keepdims=True) * 0.5
            _, value = sess.run([train_op, loss], feed_dict={x: xs, y: ys})
            print("loss %.6f" % value)


def define_cluster():
    """The cluster of this job.

    Returns:
        cluster: the ClusterSpec of the ps and worker tasks.
        server: this task's server.
        num_workers: how many workers train.
    """
    workers = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": workers})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    return cluster, server, len(workers)


def start_server(server):
    if FLAGS.job_name == "ps":
        server.join()


def run_worker(cluster, server, num_workers):
    is_chief = FLAGS.task_index == 0
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
        train_on(server, num_workers, is_chief)


def main(_):
    cluster, server, num_workers = define_cluster()
    start_server(server)
    run_worker(cluster, server, num_workers)


if __name__ == "__main__":
    tf.app.run()
