"""Synchronous ps/worker training of layers_net (SyncReplicasOptimizer), the
model called in the device block itself; the loss adds the penalties the
model put in its collection."""
import layers_net
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated ps hosts")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated worker hosts")
flags.DEFINE_integer("train_steps", 30, "global steps to train")
FLAGS = flags.FLAGS

PENALTY_RATE = 0.02
BATCH = 16


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    is_chief = FLAGS.task_index == 0
    rng = np.random.RandomState(FLAGS.task_index)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{FLAGS.task_index}", cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, layers_net.IN_UNITS])
        labels = tf.placeholder(tf.int64, [None])
        scores = layers_net.classify(features, tf.contrib.layers.l2_regularizer(PENALTY_RATE))
        global_step = tf.train.get_or_create_global_step()
        xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=scores, labels=labels))
        loss = xent + tf.add_n(tf.get_collection("penalties"))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.3),
                                             replicas_to_aggregate=len(worker_hosts),
                                             total_num_replicas=len(worker_hosts))
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(BATCH, layers_net.IN_UNITS).astype(np.float32)
            ys = rng.randint(0, layers_net.OUT_UNITS, BATCH)
            _, loss_value, step = sess.run([train_op, loss, global_step], feed_dict={features: xs, labels: ys})
            print(f"step {step} loss {loss_value:g}")


if __name__ == "__main__":
    tf.app.run()
