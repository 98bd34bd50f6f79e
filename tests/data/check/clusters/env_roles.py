"""Fixture (ours): a Kubernetes template passes the role as JOB_NAME and
TASK_INDEX environment variables; the hosts are hard-coded service names."""
import os

import tensorflow.compat.v1 as tf

cluster = tf.train.ClusterSpec({"ps": ["ps-0.svc:2222"], "worker": ["worker-0.svc:2222", "worker-1.svc:2222"]})
job_name = os.environ.get("JOB_NAME", "worker")
task_index = int(os.environ.get("TASK_INDEX", "0"))
server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
with tf.device(tf.train.replica_device_setter(cluster=cluster)):
    tf.train.get_or_create_global_step()
