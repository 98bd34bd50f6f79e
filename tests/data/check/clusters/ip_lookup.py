"""Fixture (ours): the role is found by looking this machine's --ip up in
hard-coded host lists; cluster addresses are built from hosts and ports."""
import tensorflow.compat.v1 as tf

ps_ips = ["10.1.0.5"]
worker_ips = ["10.1.0.6", "10.1.0.7"]
ps_addresses = ["%s:2222" % ip for ip in ps_ips]
worker_addresses = ["{}:{}".format(ip, port) for ip, port in zip(worker_ips, ["2222", "2222"])]

tf.app.flags.DEFINE_string("ip", "127.0.0.1", "this machine's address")
FLAGS = tf.app.flags.FLAGS

if FLAGS.ip in ps_ips:
    job_name, task_index = "ps", ps_ips.index(FLAGS.ip)
elif FLAGS.ip in worker_ips:
    job_name, task_index = "worker", worker_ips.index(FLAGS.ip)
cluster = tf.train.ClusterSpec({"ps": ps_addresses, "worker": worker_addresses})
server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
with tf.device(tf.train.replica_device_setter(cluster=cluster)):
    tf.train.get_or_create_global_step()
