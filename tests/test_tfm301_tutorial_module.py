"""Programs built on TensorFlow's MNIST tutorial module (``from
tensorflow.examples.tutorials.mnist import mnist``: ``mnist.inference``,
``mnist.loss``, ``mnist.training``) have their train op built in a module TF 2
no longer ships. TFM301 says so where the block is, also when the device
setter itself is chosen at run time by a helper (single machine or cluster)."""

from __future__ import annotations

from migrate.codemod.engine import dedent, migrate_source

HEADER = '''
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import mnist

flags = tf.app.flags
flags.DEFINE_string("job_name", None, "ps or worker; unset: one machine")
flags.DEFINE_integer("task_index", 0, "index")
flags.DEFINE_string("ps_hosts", "", "ps")
flags.DEFINE_string("worker_hosts", "", "workers")
FLAGS = flags.FLAGS
'''

BODY = '''
    images = tf.random.uniform([8, 784])
    labels = tf.zeros([8], tf.int32)
    with tf.device({device}):
        logits = mnist.inference(images, 16, 16)
        loss = mnist.loss(logits, labels)
        train_op = mnist.training(loss, 0.01)
    with tf.train.MonitoredTrainingSession(master=target, is_chief=FLAGS.task_index == 0) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def _program(helper: str, device: str, setup: str) -> str:
    return dedent(HEADER + helper + "\n\ndef main(_):\n" + setup + BODY.format(device=device))


PLACEMENT = '''

def placement_and_target():
    if FLAGS.job_name is None:
        return None, ""
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    return tf.train.replica_device_setter(cluster=cluster), server.target
'''


def _reasons(source: str) -> list:
    result = migrate_source(source)
    # the training stays TF1 as a whole (other rules may still modernise flags or imports)
    assert "Strategy" not in result.output and "replica_device_setter" in result.output
    return [d for d in result.manual_work if d.code == "TFM301"]


def test_a_run_time_choice_of_device_over_the_tutorials_training_names_both_reasons():
    source = _program(PLACEMENT, "device", "    device, target = placement_and_target()")
    [block] = [d for d in _reasons(source) if "device-setter block left as TF1" in d.message]
    assert "`mnist.training(...)` of `tensorflow.examples.tutorials.mnist.mnist`, which TF 2 no longer ships" \
        in block.message
    assert "and `None` on another path: single-machine and distributed modes chosen at run time" in block.message
    assert "TFM301 emits the loop of one strategy" in block.message
    assert block.line == source.splitlines().index("    with tf.device(device):") + 1


def test_a_plain_device_setter_block_over_the_tutorials_training_says_where_the_train_op_is():
    setup = ('    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})\n'
             "    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)\n"
             "    target = server.target\n")
    source = _program("", "tf.train.replica_device_setter(cluster=cluster)", setup)
    [block] = [d for d in _reasons(source) if d.message.startswith("no train op in this device-setter block")]
    assert "`mnist.training(...)` of `tensorflow.examples.tutorials.mnist.mnist`" in block.message
    assert "write the model's functions" in block.hint


def test_a_block_with_its_own_optimizer_is_not_blamed_on_the_tutorial_module():
    setup = ('    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})\n'
             "    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)\n"
             "    target = server.target\n")
    source = _program("", "tf.train.replica_device_setter(cluster=cluster)", setup).replace(
        "train_op = mnist.training(loss, 0.01)", "train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)")
    result = migrate_source(source)
    assert not any("no longer ships" in d.message for d in result.diagnostics)
