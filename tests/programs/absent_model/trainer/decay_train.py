"""Asynchronous ps/worker training of decay_net (not in this directory),
whose own `total_loss()` sums the collection its `inference()` fills."""
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


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    rng = np.random.RandomState(3 + FLAGS.task_index)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, decay_net.PIXELS])
        labels = tf.placeholder(tf.int64, [None])
        logits = decay_net.inference(images)
        loss = decay_net.total_loss(logits, labels)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(8, decay_net.PIXELS).astype(np.float32)
            ys = rng.randint(0, decay_net.CLASSES, 8)
            _, loss_value = sess.run([train_op, loss], feed_dict={images: xs, labels: ys})
            print(f"loss {loss_value:g}")


if __name__ == "__main__":
    tf.app.run()
