"""TFM301 on distributed TF1 training whose variables another TF1 device
function places (``VariableDeviceChooser``): the training stays TF1, said
where the device function is used (migrate/codemod/rules/_foreign_placement.py).
Fixtures are written for these tests in the shape seen in real scripts."""

from __future__ import annotations

from migrate.codemod.engine import dedent, migrate_source

CHOOSER = """
import tensorflow as tf

FLAGS = tf.app.flags.FLAGS


def run(cluster, server, ps_count, learner):
    with tf.device(tf.contrib.framework.VariableDeviceChooser(ps_count)):
        learner.build_variables()
        step = tf.Variable(0)
        bump = step.assign_add(1)
    sv = tf.train.Supervisor(is_chief=FLAGS.task_index == 0, logdir="/tmp/logs", global_step=step)
    with sv.prepare_or_wait_for_session(server.target) as sess:
        learner.attach(sess, bump)
        while not sv.should_stop():
            learner.play()
"""


def reasons(source):
    result = migrate_source(dedent(source), select=["TFM301"])
    assert result.output == dedent(source)
    return [d for d in result.manual_work if d.code == "TFM301"]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def test_training_placed_by_a_variable_device_chooser_is_said_to_stay_tf1_where_it_is_placed():
    [reason] = reasons(CHOOSER)
    assert reason.line == line_of(CHOOSER, "with tf.device(tf.contrib.framework.VariableDeviceChooser")
    assert "its variables are placed by `tf.contrib.framework.VariableDeviceChooser(...)`" in reason.message
    assert "round robin" in reason.message and "NameError" not in reason.message
    assert "tf.train.replica_device_setter" in reason.hint


def test_a_name_the_device_function_reads_that_nothing_defines_is_named():
    source = CHOOSER.replace("VariableDeviceChooser(ps_count)", "VariableDeviceChooser(len(ps_hosts))")
    [reason] = reasons(source)
    assert "it also reads `ps_hosts`, which nothing in this file defines" in reason.message


def test_a_star_import_may_define_it():
    source = CHOOSER.replace("VariableDeviceChooser(ps_count)", "VariableDeviceChooser(len(ps_hosts))").replace(
        "import tensorflow as tf\n", "import tensorflow as tf\nfrom cluster_setup import *\n")
    [reason] = reasons(source)
    assert "NameError" not in reason.message


def test_a_device_chooser_without_a_training_session_is_not_reported():
    source = CHOOSER.split("    sv = tf.train.Supervisor")[0]
    assert reasons(source) == []


def test_the_reason_is_given_also_where_variables_are_pinned_to_the_ps_by_hand_too():
    # a device string naming the ps makes the program a parameter-server one; the chooser still stops it
    source = CHOOSER.replace("        step = tf.Variable(0)\n",
                             "        with tf.device(\"/job:ps/task:0\"):\n            step = tf.Variable(0)\n")
    found = [d for d in reasons(source) if "VariableDeviceChooser" in d.message]
    assert [d.line for d in found] == [line_of(source, "with tf.device(tf.contrib.framework.VariableDeviceChooser")]
