"""Fixture (ours): three literal clusters on remote machines, one chosen
by --deploy_mode; the role from tf.app.flags."""
import tensorflow.compat.v1 as tf

tf.app.flags.DEFINE_string("job_name", "worker", "ps or worker")
tf.app.flags.DEFINE_integer("task_index", 0, "task index")
tf.app.flags.DEFINE_string("deploy_mode", "pair", "single, pair or rack")
FLAGS = tf.app.flags.FLAGS

single = tf.train.ClusterSpec({"worker": ["192.168.7.2:2222"]})
pair = tf.train.ClusterSpec({"ps": ["192.168.7.2:2221"], "worker": ["192.168.7.2:2223", "192.168.7.3:2223"]})
rack = tf.train.ClusterSpec(
    {"ps": ["192.168.7.2:2221"], "worker": ["192.168.7.%d:2223" % i for i in range(2, 6)]}
)
by_mode = {"single": single, "pair": pair, "rack": rack}
server = tf.train.Server(by_mode[FLAGS.deploy_mode], job_name=FLAGS.job_name, task_index=FLAGS.task_index)
if FLAGS.job_name == "ps":
    server.join()
with tf.device(tf.train.replica_device_setter(cluster=by_mode[FLAGS.deploy_mode])):
    tf.train.get_or_create_global_step()
