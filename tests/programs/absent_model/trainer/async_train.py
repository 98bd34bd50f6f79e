"""Asynchronous ps/worker training of plain_net, a model module this
directory does not hold; the loss adds the penalties it puts in its
collection."""
import numpy as np
import plain_net
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
    rng = np.random.RandomState(7 + FLAGS.task_index)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        inputs = tf.placeholder(tf.float32, [None, plain_net.INPUTS])
        targets = tf.placeholder(tf.float32, [None, 1])
        predictions = plain_net.predict(inputs, 0.05)
        loss = tf.reduce_mean(tf.square(predictions - targets)) + tf.add_n(tf.get_collection("weight_penalties"))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(16, plain_net.INPUTS).astype(np.float32)
            ys = xs.sum(axis=1, keepdims=True) * 0.5
            _, loss_value = sess.run([train_op, loss], feed_dict={inputs: xs, targets: ys})
            print(f"loss {loss_value:g}")


if __name__ == "__main__":
    tf.app.run()
