"""Fixture (ours): a ps/worker job in the docker-compose shape. The cluster
comes from a TRAIN_CLUSTER environment variable (JSON) or else from service
names that only resolve inside the compose network; the role is read by
position from sys.argv (``python trainer.py worker 1``) and the step count
from NUM_STEPS."""
import json
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()


def cluster_from_env():
    raw = os.environ.get("TRAIN_CLUSTER")
    if raw:
        return json.loads(raw)
    return {"ps": ["paramserver:2222"], "worker": ["trainer-a:2222", "trainer-b:2222"]}


def main():
    job_name = sys.argv[1]
    task_index = int(sys.argv[2])
    steps = int(os.environ.get("NUM_STEPS", "1000"))
    cluster = tf.train.ClusterSpec(cluster_from_env())
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()
        return
    device = tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % task_index, cluster=cluster)
    with tf.device(device):
        x = tf.placeholder(tf.float32, [None, 1])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=steps)]
    rng = np.random.RandomState(task_index)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            xs = rng.rand(8, 1)
            sess.run(train_op, {x: xs, y: 3 * xs})


if __name__ == "__main__":
    main()
