"""Asynchronous ps/worker training of decay_net, its loss summed from the
collection by the model module's own loss function."""
import decay_net
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated ps hosts")
flags.DEFINE_string("worker_hosts", "localhost:2223", "comma-separated worker hosts")
flags.DEFINE_integer("train_steps", 30, "global steps to train")
FLAGS = flags.FLAGS

BATCH = 16


def build_model(features, labels):
    scores = decay_net.inference(features)
    global_step = tf.train.get_or_create_global_step()
    loss = decay_net.total_loss(scores, labels)
    train_op = tf.train.GradientDescentOptimizer(0.3).minimize(loss, global_step=global_step)
    return global_step, loss, train_op


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    rng = np.random.RandomState(FLAGS.task_index)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{FLAGS.task_index}", cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, decay_net.IN_UNITS])
        labels = tf.placeholder(tf.int64, [None])
        global_step, loss, train_op = build_model(features, labels)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(BATCH, decay_net.IN_UNITS).astype(np.float32)
            ys = rng.randint(0, decay_net.OUT_UNITS, BATCH)
            _, loss_value, step = sess.run([train_op, loss, global_step], feed_dict={features: xs, labels: ys})
            print(f"step {step} loss {loss_value:g}")


if __name__ == "__main__":
    tf.app.run()
