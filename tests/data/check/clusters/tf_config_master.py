"""Fixture (ours): the cluster and this task's role from TF_CONFIG, read by
hand; the job's chief comes as task type "master" and trains as a worker of
the same index. Synchronous replicas, stopped at a global step."""
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

tf.app.flags.DEFINE_integer("train_steps", 6, "global steps to train")
FLAGS = tf.app.flags.FLAGS


def main(_):
    config = json.loads(os.environ["TF_CONFIG"])
    role = config["task"]["type"]
    index = config["task"]["index"]
    role = "worker" if role == "master" else role
    spec = tf.train.ClusterSpec(config["cluster"])
    workers = spec.num_tasks("worker")
    server = tf.train.Server(spec, job_name=role, task_index=index)
    if role == "ps":
        server.join()
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % index, cluster=spec)):
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(index == 0), tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            step = sess.run(global_step)
            rng = np.random.RandomState(step)
            xs = rng.randn(8, 3).astype(np.float32)
            _, value = sess.run([train_op, loss], feed_dict={x: xs, y: xs.sum(axis=1, keepdims=True)})
            print("loss", value)


if __name__ == "__main__":
    tf.app.run()
