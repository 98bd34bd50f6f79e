"""Fixture (ours): the role comes from the Slurm rank, mapped to ps/worker
by code of the script's own."""
import os

import tensorflow.compat.v1 as tf

rank = int(os.environ["SLURM_PROCID"])
hosts = os.environ["SLURM_JOB_NODELIST"].split(",")
job_name = "ps" if rank == 0 else "worker"
cluster = tf.train.ClusterSpec({"ps": hosts[:1], "worker": hosts[1:]})
server = tf.train.Server(cluster, job_name=job_name, task_index=max(rank - 1, 0))
with tf.device(tf.train.replica_device_setter(cluster=cluster)):
    tf.train.get_or_create_global_step()
