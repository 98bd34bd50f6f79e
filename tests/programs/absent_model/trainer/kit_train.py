"""Asynchronous ps/worker training of a softmax layer whose variables come
from layer_kit, a module this directory does not hold."""
import layer_kit
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated ps hosts")
flags.DEFINE_string("worker_hosts", "localhost:2223", "comma-separated worker hosts")
flags.DEFINE_integer("train_steps", 30, "global steps to train")
FLAGS = flags.FLAGS

PIXELS = 20
CLASSES = 5


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    rng = np.random.RandomState(11 + FLAGS.task_index)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        pixels = tf.placeholder(tf.float32, [None, PIXELS])
        digits = tf.placeholder(tf.int64, [None])
        weights = layer_kit.weight_variable([PIXELS, CLASSES])
        biases = layer_kit.bias_variable([CLASSES])
        logits = tf.matmul(pixels, weights) + biases
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=digits))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdagradOptimizer(0.3).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(10, PIXELS).astype(np.float32)
            ys = rng.randint(0, CLASSES, 10)
            _, loss_value = sess.run([train_op, loss], feed_dict={pixels: xs, digits: ys})
            print(f"loss {loss_value:g}")


if __name__ == "__main__":
    tf.app.run()
