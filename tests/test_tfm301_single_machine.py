"""TFM301: a program's single-machine training path beside its distributed one
(`if no cluster: ... with tf.Session() as sess:` training locally, else
ps/worker) migrates as TF2's custom training guide writes single-machine
training: the variables made where the graph made them, no strategy, a
tf.function step (GradientTape + apply_gradients) called where the session ran
the train op. It is migrated only where the distributed path is; a session
that trains nothing, or one with a target (a server's), is not this path.

The runtime test trains the legacy path (TF1 graph mode) and the migrated one
on the same data and compares the losses they print."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import tfm301_support
from tfm301_support import line_of, manual

from migrate.codemod.engine import dedent


def migrate(source: str):
    return tfm301_support.migrate(source, None)


# trains here when no TF_CONFIG is set (an epochs loop, an evaluation fetch per epoch); else ps/worker
ENV_CHOICE = '''
import json
import os

import tensorflow.compat.v1 as tf


def fit(samples, targets, epochs, rate):
    optimizer = tf.train.GradientDescentOptimizer(rate)
    if os.environ.get("TF_CONFIG", "") == "":
        # one machine: no cluster to join
        inputs = tf.placeholder(tf.float32, shape=[None, 1])
        labels = tf.placeholder(tf.float32, shape=[None, 1])
        slope = tf.Variable(0.0, name="slope")
        offset = tf.Variable(0.0, name="offset")
        counter = tf.Variable(0, name="global_step", trainable=False)
        cost = tf.reduce_sum(tf.square(labels - inputs * slope - offset))
        train_op = optimizer.minimize(cost, global_step=counter)
        init_op = tf.global_variables_initializer()
        with tf.Session() as sess:
            sess.run(init_op)
            for epoch in range(epochs):
                for a, b in zip(samples, targets):
                    sess.run(train_op, feed_dict={inputs: [[a]], labels: [[b]]})
                seen, step = sess.run([cost, counter], feed_dict={inputs: [[samples[0]]], labels: [[targets[0]]]})
                print("epoch", epoch, "cost", float(seen), "step", int(step))
            print("fitted", float(sess.run(slope)), float(sess.run(offset)))
    else:
        config = json.loads(os.environ["TF_CONFIG"])
        cluster = tf.train.ClusterSpec(config["cluster"])
        role, index = config["task"]["type"], config["task"]["index"]
        server = tf.train.Server(cluster, job_name=role, task_index=index)
        if role == "ps":
            server.join()
        else:
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:%d" % index, cluster=cluster)):
                inputs = tf.placeholder(tf.float32, shape=[None, 1])
                labels = tf.placeholder(tf.float32, shape=[None, 1])
                slope = tf.Variable(0.0, name="slope")
                offset = tf.Variable(0.0, name="offset")
                counter = tf.Variable(0, name="global_step", trainable=False)
                cost = tf.reduce_sum(tf.square(labels - inputs * slope - offset))
                train_op = optimizer.minimize(cost, global_step=counter)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0) as sess:
                for epoch in range(epochs):
                    for a, b in zip(samples, targets):
                        sess.run(train_op, feed_dict={inputs: [[a]], labels: [[b]]})
'''

# no job name: trains here, a session bound to a name, a step-limit loop fetching loss and step, a model helper
FLAG_CHOICE = '''
import tensorflow.compat.v1 as tf


def model(features):
    weights = tf.Variable(tf.zeros([3, 1]), name="weights")
    bias = tf.Variable(0.0, name="bias")
    return tf.matmul(features, weights) + bias


def train(job_name, task_index, ps_hosts, worker_hosts, rows, answers, train_steps):
    if job_name is None:
        features = tf.placeholder(tf.float32, [None, 3])
        wanted = tf.placeholder(tf.float32, [None, 1])
        error = tf.reduce_mean(tf.square(model(features) - wanted))
        step_count = tf.train.get_or_create_global_step()
        update = tf.train.AdamOptimizer(0.01).minimize(error, global_step=step_count)
        sess = tf.Session()
        sess.run(tf.global_variables_initializer())
        step = 0
        while step < train_steps:
            _, value, step = sess.run([update, error, step_count], feed_dict={features: rows, wanted: answers})
            print("step", int(step), "error", float(value))
        sess.close()
        return
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()
        return
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 3])
        wanted = tf.placeholder(tf.float32, [None, 1])
        error = tf.reduce_mean(tf.square(model(features) - wanted))
        step_count = tf.train.get_or_create_global_step()
        update = tf.train.AdamOptimizer(0.01).minimize(error, global_step=step_count)
    hooks = [tf.train.StopAtStepHook(last_step=train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(update, feed_dict={features: rows, wanted: answers})
'''


# no job name: a MonitoredTrainingSession given no master, bounded by its StopAtStepHook, checkpointing
MONITORED = '''
import tensorflow.compat.v1 as tf


def run(job_name, task_index, cluster_hosts, rows, answers, log_dir):
    if job_name == "":
        features = tf.placeholder(tf.float32, [None, 3])
        wanted = tf.placeholder(tf.float32, [None, 1])
        weights = tf.Variable(tf.zeros([3, 1]), name="weights")
        error = tf.reduce_mean(tf.square(tf.matmul(features, weights) - wanted))
        step_count = tf.train.get_or_create_global_step()
        update = tf.train.GradientDescentOptimizer(0.1).minimize(error, global_step=step_count)
        with tf.train.MonitoredTrainingSession(checkpoint_dir=log_dir,
                                               hooks=[tf.train.StopAtStepHook(last_step=20)]) as sess:
            while not sess.should_stop():
                _, value = sess.run([update, error], feed_dict={features: rows, wanted: answers})
                print("error", float(value))
        return
    cluster = tf.train.ClusterSpec(cluster_hosts)
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()
        return
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 3])
        wanted = tf.placeholder(tf.float32, [None, 1])
        weights = tf.Variable(tf.zeros([3, 1]), name="weights")
        error = tf.reduce_mean(tf.square(tf.matmul(features, weights) - wanted))
        step_count = tf.train.get_or_create_global_step()
        update = tf.train.GradientDescentOptimizer(0.1).minimize(error, global_step=step_count)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0, checkpoint_dir=log_dir,
                                           hooks=[tf.train.StopAtStepHook(last_step=20)]) as sess:
        while not sess.should_stop():
            sess.run(update, feed_dict={features: rows, wanted: answers})
'''


def _local_part(code: str, start: str, end: str) -> str:
    begin = code.index(start)
    return code[begin:code.index(end, begin)]


def test_the_local_branch_becomes_a_tf_function_step_without_a_strategy():
    result = migrate(ENV_CHOICE)
    out = result.output
    local = _local_part(out, 'if os.environ.get("TF_CONFIG", "") == "":', "    else:\n")
    assert "Session" not in local and "placeholder(" not in local and "initializer" not in local
    assert "strategy" not in local and "scope()" not in local
    assert textwrap.indent(dedent('''
        @tf.function
        def train_step(inputs, labels):
            with tf.GradientTape() as tape:
                cost = tf.reduce_sum(tf.square(labels - inputs * slope - offset))
            gradients = tape.gradient(cost, trainable_variables)
            optimizer.apply_gradients(zip(gradients, trainable_variables))
            counter.assign_add(1)
            return ()
        '''), " " * 8) in local
    # a plain step counter: no replica to aggregate over
    assert 'counter = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False)\n' in local
    # the per-epoch evaluation keeps its place; the variables are read eagerly
    assert "seen, step = tf.nest.map_structure(lambda value: value.numpy(), compute_cost(" in local
    assert 'print("fitted", float(slope.numpy()), float(offset.numpy()))' in local
    # the distributed branch is migrated as before
    assert "tf.distribute.ParameterServerStrategy(" in out
    assert not manual(result)
    note = next(d for d in result.diagnostics if d.code == "TFM301" and "single-machine" in d.message)
    assert note.line == line_of(ENV_CHOICE, "with tf.Session() as sess:") and note.fixed


def test_a_step_limit_loop_over_a_named_session_reads_the_step_after_its_update():
    out = migrate(FLAG_CHOICE).output
    local = _local_part(out, "if job_name is None:", "cluster = ")
    assert "Session" not in local and "sess." not in local and "strategy" not in local
    # the model helper's variables are made once and reused, here with no strategy around them
    assert "# Build the model's variables once, as the TF1 graph did.\n" in local
    # TF1 fetched its reference-variable step in the process that ran the update: after the update
    assert "return error, step_count\n" in local and "read_value()" not in local
    assert "value, step = run_train_step(rows, answers)" in local


def test_a_resource_step_is_read_before_the_update():
    source = FLAG_CHOICE.replace("step_count = tf.train.get_or_create_global_step()\n        update",
                                 "step_count = tf.Variable(0, name='global_step', trainable=False, use_resource=True)"
                                 "\n        update", 1)
    local = _local_part(migrate(source).output, "if job_name is None:", "cluster = ")
    assert "step_count_value = step_count.read_value()" in local
    assert "return error, step_count_value\n" in local


def test_a_monitored_session_without_master_is_this_machines_training():
    result = migrate(MONITORED)
    out = result.output
    local = _local_part(out, 'if job_name == "":', "        return\n")
    assert "MonitoredTrainingSession(" not in local and "strategy" not in local
    assert "while not int(step_count.numpy()) >= 20:" in local
    # its checkpoints as the distributed path's: one restore helper for both
    assert "tf.train.CheckpointManager(checkpoint, log_dir, max_to_keep=5)" in local
    assert out.count("def restore_checkpoint(") == 1
    assert any("single-machine training" in d.message and d.line == line_of(MONITORED, "with tf.train.Monitored")
               for d in result.diagnostics if d.fixed)


# the driver picks a function: one trains here (saving by hand with a Saver), the other on the cluster
TWO_FUNCTIONS = '''
import numpy as np
import tensorflow.compat.v1 as tf

data = np.random.RandomState(0).rand(64, 4).astype(np.float32)
labels = data.sum(axis=1, keepdims=True)


def train_here(epochs, save_path):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(tf.zeros([4, 1]), name="w")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    step = tf.Variable(0, trainable=False, name="global_step")
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=step)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(epochs):
            for start in range(0, 64, 16):
                _, seen = sess.run([train_op, loss], {x: data[start:start + 16], y: labels[start:start + 16]})
            print(epoch, float(seen))
            saver.save(sess, save_path, global_step=step)


def train_on_cluster(ps_hosts, worker_hosts, job_name, task_index, epochs):
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()
    else:
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 4])
            y = tf.placeholder(tf.float32, [None, 1])
            w = tf.Variable(tf.zeros([4, 1]), name="w")
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            step = tf.train.get_or_create_global_step()
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=step)
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0) as sess:
            for epoch in range(epochs):
                for start in range(0, 64, 16):
                    sess.run(train_op, {x: data[start:start + 16], y: labels[start:start + 16]})


def main(ps_hosts, worker_hosts, job_name, task_index):
    if not ps_hosts:
        train_here(5, "/tmp/fit/model.ckpt")
    else:
        train_on_cluster(ps_hosts, worker_hosts, job_name, task_index, 5)
'''


def test_a_function_training_here_beside_one_training_on_the_cluster():
    result = migrate(TWO_FUNCTIONS)
    out = result.output
    here = _local_part(out, "def train_here(", "def train_on_cluster(")
    assert "Session" not in here and "strategy" not in here and "Saver" not in here
    assert "            seen = run_train_step(data[start:start + 16], labels[start:start + 16])\n" in here
    # the Saver's saves as checkpoints of the same path and number
    assert 'save_checkpoint(save_path, step)' in here
    assert not manual(result)
    # the cluster it does not use is no concern of this path
    assert not any("cluster" in d.message for d in result.diagnostics if d.line < line_of(TWO_FUNCTIONS, "def train_on"))
    note = next(d for d in result.diagnostics if "single-machine training" in d.message)
    assert note.line == line_of(TWO_FUNCTIONS, "with tf.Session() as sess:")


# a script: an InteractiveSession when no job is named, initialized through the default session
SCRIPT = '''
import numpy as np
import tensorflow.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "comma-separated")
flags.DEFINE_string("worker_hosts", "", "comma-separated")
flags.DEFINE_string("job_name", None, "ps or worker")
flags.DEFINE_integer("task_index", 0, "task")
FLAGS = flags.FLAGS

rows = np.random.RandomState(1).rand(32, 3).astype(np.float32)
targets = rows.sum(axis=1, keepdims=True)

if FLAGS.job_name is None:
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(tf.zeros([3, 1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    sess = tf.InteractiveSession()
    tf.global_variables_initializer().run()
    for i in range(100):
        sess.run(train, feed_dict={x: rows, y: targets})
        if i % 10 == 0:
            print(i, sess.run(loss, feed_dict={x: rows, y: targets}))
else:
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    else:
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 3])
            y = tf.placeholder(tf.float32, [None, 1])
            w = tf.Variable(tf.zeros([3, 1]))
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            step = tf.train.get_or_create_global_step()
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                               hooks=[tf.train.StopAtStepHook(last_step=100)]) as sess:
            while not sess.should_stop():
                sess.run(train, feed_dict={x: rows, y: targets})
'''


def test_a_script_initializing_through_the_default_session_migrates():
    result = migrate(SCRIPT)
    here = _local_part(result.output, "if FLAGS.job_name is None:", "else:")
    assert "Session" not in here and "initializer" not in here and ".run()" not in here
    assert "        run_train_step(rows, targets)\n" in here
    assert not manual(result)


def test_a_graph_value_run_through_the_default_session_is_said_to_stay():
    # `loss.eval(...)` is a session run TFM304 spells out; the default session fetched by hand is not
    evaluated = SCRIPT.replace("print(i, sess.run(loss, feed_dict={x: rows, y: targets}))",
                               "print(i, loss.eval(feed_dict={x: rows, y: targets}))")
    assert "InteractiveSession" not in migrate(evaluated).output
    source = SCRIPT.replace("print(i, sess.run(loss, feed_dict={x: rows, y: targets}))",
                            "print(i, tf.get_default_session().run(loss, feed_dict={x: rows, y: targets}))")
    result = migrate(source)
    assert "tf.compat.v1.InteractiveSession()" in result.output
    [reason] = [d for d in manual(result) if "default session" in d.message]
    assert reason.line == line_of(source, "tf.get_default_session().run(")
    assert reason.message.startswith("single-machine training not migrated: `tf.compat.v1.get_default_session()"
                                     ".run(loss, feed_dict={x: rows, y: targets})` runs a graph value through the"
                                     " default session")


def test_the_local_branch_stays_when_the_distributed_one_is_not_migrated():
    # the workers' step counter made before the device setter (each worker's own): that training is
    # declined, so this program stays TF1 throughout
    source = ENV_CHOICE.replace(
        "            with tf.device(tf.train.replica_device_setter(\n",
        '            counter = tf.Variable(0, name="global_step", trainable=False)\n'
        "            with tf.device(tf.train.replica_device_setter(\n").replace(
        '                counter = tf.Variable(0, name="global_step", trainable=False)\n'
        "                cost = tf.reduce_sum(tf.square(labels - inputs * slope - offset))\n"
        "                train_op = optimizer.minimize(cost, global_step=counter)\n"
        "            with tf.train.Monitored",
        "                cost = tf.reduce_sum(tf.square(labels - inputs * slope - offset))\n"
        "                train_op = optimizer.minimize(cost, global_step=counter)\n"
        "            with tf.train.Monitored")
    result = migrate(source)
    assert "with tf.compat.v1.Session() as sess:" in result.output
    assert "tf.distribute" not in result.output
    reasons = {d.line: d for d in manual(result)}
    assert any("is made before the device-setter block" in d.message for d in reasons.values())
    local = reasons[line_of(source, "with tf.Session() as sess:")]
    assert "together with the program's distributed training, which stays TF1 here" in local.message
    assert "this path migrates with it" in local.hint


def test_a_session_on_a_target_or_training_nothing_is_not_this_path():
    # an evaluation session (no update runs in it) is left alone and needs no report
    evaluation = ENV_CHOICE.replace("sess.run(train_op, feed_dict={inputs: [[a]], labels: [[b]]})\n                seen",
                                    "pass\n                seen", 1)
    result = migrate(evaluation)
    assert "with tf.compat.v1.Session() as sess:" in result.output
    assert not any("single-machine" in d.message for d in result.diagnostics)
    # a session given a target runs on a server: not the single-machine path
    remote = ENV_CHOICE.replace("with tf.Session() as sess:", 'with tf.Session("grpc://localhost:2222") as sess:')
    result = migrate(remote)
    assert 'tf.compat.v1.Session("grpc://localhost:2222")' in result.output
    assert not any("single-machine training (the session" in d.message for d in result.diagnostics)


def test_the_migrated_program_changes_nothing_when_migrated_again():
    for source in (ENV_CHOICE, FLAG_CHOICE, MONITORED, TWO_FUNCTIONS, SCRIPT):
        once = migrate(source).output
        assert migrate(once).output == once


RUNNER = '''
import json, sys
import numpy as np
import tensorflow as tf_api

printed = []
print = lambda *args: printed.append(list(args))
if sys.argv[1] == "legacy":
    tf_api.compat.v1.disable_v2_behavior()
xs = np.linspace(-1, 1, 12).astype(np.float32)
ys = (2 * xs + 1 + np.sin(7 * xs) * 0.1).astype(np.float32)
if sys.argv[2] == "env":
    fit(xs, ys, 4, 0.05)
elif sys.argv[2] == "functions":
    import tempfile
    train_here(5, tempfile.mkdtemp() + "/model.ckpt")
elif sys.argv[2] == "monitored":
    run("", 0, {}, np.random.RandomState(4).rand(4, 3).astype(np.float32), np.ones([4, 1], np.float32), None)
else:
    rows = np.random.RandomState(3).rand(4, 3).astype(np.float32)
    train(None, 0, [], [], rows, np.ones([4, 1], np.float32), 12)
sys.stdout.write(json.dumps(printed))
'''


def _run(source: str, side: str, program: str) -> list:
    run = subprocess.run([sys.executable, "-c", source + RUNNER, side, program], check=False, capture_output=True,
                         text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("program, source", [
    ("env", ENV_CHOICE), ("flag", FLAG_CHOICE),
    pytest.param("monitored", MONITORED, marks=pytest.mark.slow),
    pytest.param("functions", TWO_FUNCTIONS, marks=pytest.mark.slow),
], ids=["env", "flag", "monitored", "functions"])
def test_the_migrated_single_machine_path_trains_as_the_legacy_one(program, source):
    """Both run on one machine (no TF_CONFIG, no job name): the same losses,
    steps and fitted values, printed at the same points."""
    pytest.importorskip("tensorflow")
    source = dedent(source)
    migrated = migrate(source).output
    legacy_run, migrated_run = _run(source, "legacy", program), _run(migrated, "migrated", program)
    assert len(legacy_run) == len(migrated_run) > 3
    for old, new in zip(legacy_run, migrated_run):
        assert [v for v in old if isinstance(v, str)] == [v for v in new if isinstance(v, str)]
        assert [v for v in new if not isinstance(v, str)] == pytest.approx(
            [v for v in old if not isinstance(v, str)], rel=1e-5, abs=1e-6)
