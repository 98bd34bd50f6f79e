"""Synchronous ps/worker training of stack_net, a model module this
directory does not hold; the graph, SyncReplicasOptimizer included, is built
by a helper of this file, whose loss adds the collection the model fills."""
import numpy as np
import stack_net
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated ps hosts")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated worker hosts")
flags.DEFINE_integer("train_steps", 30, "global steps to train")
FLAGS = flags.FLAGS

BATCH = 12


def build_graph(features, labels, workers, is_chief):
    penalty = tf.contrib.layers.l2_regularizer(0.01)
    scores = stack_net.scores(features, penalty)
    global_step = tf.train.get_or_create_global_step()
    xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=scores, labels=labels))
    loss = xent + tf.add_n(tf.get_collection("losses"))
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.2),
                                         replicas_to_aggregate=workers, total_num_replicas=workers)
    sync_hook = opt.make_session_run_hook(is_chief)
    train_op = opt.minimize(loss, global_step=global_step)
    return global_step, loss, train_op, sync_hook


def main(_):
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    is_chief = FLAGS.task_index == 0
    rng = np.random.RandomState(FLAGS.task_index)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{FLAGS.task_index}", cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, stack_net.FEATURES])
        labels = tf.placeholder(tf.int64, [None])
        global_step, loss, train_op, sync_hook = build_graph(features, labels, len(worker_hosts), is_chief)
    hooks = [sync_hook, tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(BATCH, stack_net.FEATURES).astype(np.float32)
            ys = rng.randint(0, stack_net.CLASSES, BATCH)
            _, loss_value, step = sess.run([train_op, loss, global_step], feed_dict={features: xs, labels: ys})
            print(f"step {step} loss {loss_value:g}")


if __name__ == "__main__":
    tf.app.run()
