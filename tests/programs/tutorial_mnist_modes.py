"""A TF1 job built on TensorFlow's MNIST tutorial module whose device setter
a helper chooses at run time: without --job_name it trains on this machine,
with one it is a task of a ps/worker cluster (the layout of TensorFlow's
ecosystem examples). The images are a fixed synthetic set read in order
through a one-shot iterator, so every run sees the same batches."""

import numpy as np
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import mnist

flags = tf.app.flags
flags.DEFINE_string("job_name", None, "ps or worker; unset: a single machine")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "", "comma-separated host:port of the ps tasks")
flags.DEFINE_string("worker_hosts", "", "comma-separated host:port of the worker tasks")
flags.DEFINE_integer("hidden1", 32, "units of the first hidden layer")
flags.DEFINE_integer("hidden2", 16, "units of the second hidden layer")
flags.DEFINE_integer("batch_size", 20, "examples per step")
flags.DEFINE_float("learning_rate", 0.1, "learning rate")
flags.DEFINE_integer("train_steps", 30, "global steps to train")
FLAGS = flags.FLAGS


def batches(batch_size):
    generator = np.random.RandomState(7)
    images = generator.uniform(size=(400, mnist.IMAGE_PIXELS)).astype(np.float32)
    labels = (images[:, :mnist.NUM_CLASSES].argmax(axis=1)).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(batch_size)
    return tf.data.make_one_shot_iterator(dataset).get_next()


def device_and_target():
    if FLAGS.job_name is None:
        return (None, "")
    cluster_spec = tf.train.ClusterSpec({
        "ps": FLAGS.ps_hosts.split(","),
        "worker": FLAGS.worker_hosts.split(","),
    })
    server = tf.train.Server(cluster_spec, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    worker_device = f"/job:worker/task:{FLAGS.task_index}"
    return (tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster_spec), server.target)


def main(_):
    device, target = device_and_target()
    with tf.device(device):
        images, labels = batches(FLAGS.batch_size)
        logits = mnist.inference(images, FLAGS.hidden1, FLAGS.hidden2)
        loss = mnist.loss(logits, labels)
        train_op = mnist.training(loss, FLAGS.learning_rate)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=target, is_chief=(FLAGS.task_index == 0), hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)


if __name__ == "__main__":
    tf.app.run()
