"""Fixture (ours): the cluster comes from a sibling settings module, the
role from absl flags spelled --job/--task."""
from absl import app, flags

import tensorflow.compat.v1 as tf
from cluster_hosts import ps_nodes, worker_nodes

flags.DEFINE_string("job", "", "ps or worker")
flags.DEFINE_integer("task", 0, "task index")
flags.DEFINE_integer("max_steps", 1000, "steps")
flags.DEFINE_string("logdir", "/tmp/lab_train", "summaries and checkpoints")
FLAGS = flags.FLAGS


def main(_):
    cluster = tf.train.ClusterSpec({"ps": ps_nodes, "worker": worker_nodes})
    server = tf.train.Server(cluster, job_name=FLAGS.job, task_index=FLAGS.task)
    if FLAGS.job == "ps":
        server.join()
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        tf.train.get_or_create_global_step()


if __name__ == "__main__":
    app.run(main)
