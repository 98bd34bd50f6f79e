"""A TF1 ps/worker job reading its examples through queues: a file-name
queue over a TFRecord file, a reader in a function handed the queue, and
tf.train.batch (one thread, no shuffling: every run reads the same batches in
the same order). The job writes its own TFRecord file of fixed examples
before it builds the graph, so it needs no data beside it."""

import os
import tempfile

import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", None, "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "", "comma-separated host:port of the ps tasks")
flags.DEFINE_string("worker_hosts", "", "comma-separated host:port of the worker tasks")
flags.DEFINE_integer("batch_size", 8, "examples per step")
flags.DEFINE_integer("train_steps", 30, "global steps to train")
FLAGS = flags.FLAGS


def write_examples():
    """64 examples of a noisy linear function, in a file of this process."""
    generator = np.random.RandomState(11)
    features = generator.uniform(-1.0, 1.0, size=(64, 4)).astype(np.float32)
    targets = features @ np.array([0.5, -1.0, 2.0, 0.25], np.float32) + 0.1 * generator.normal(size=64)
    path = os.path.join(tempfile.mkdtemp(prefix="queue-input-job-"), "examples.tfrecords")
    with tf.io.TFRecordWriter(path) as writer:
        for x, y in zip(features, targets.astype(np.float32)):
            example = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=[y])),
            }))
            writer.write(example.SerializeToString())
    return path


def read_example(filename_queue):
    reader = tf.TFRecordReader()
    _, serialized = reader.read(filename_queue)
    parsed = tf.parse_single_example(serialized, {
        "x": tf.FixedLenFeature([4], tf.float32),
        "y": tf.FixedLenFeature([1], tf.float32),
    })
    return parsed["x"], parsed["y"]


def inputs(path, batch_size):
    filename_queue = tf.train.string_input_producer([path], shuffle=False)
    x, y = read_example(filename_queue)
    return tf.train.batch([x, y], batch_size=batch_size)


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    path = write_examples()
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{FLAGS.task_index}",
                                                  cluster=cluster)):
        features, targets = inputs(path, FLAGS.batch_size)
        w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) + b - targets))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(FLAGS.task_index == 0),
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)


if __name__ == "__main__":
    tf.app.run()
