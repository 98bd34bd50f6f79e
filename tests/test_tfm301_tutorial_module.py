"""Programs built on TensorFlow's MNIST tutorial module (``from
tensorflow.examples.tutorials.mnist import mnist``: ``mnist.inference``,
``mnist.loss``, ``mnist.training``, ``mnist.evaluation``), which TF 2 no
longer ships: TFM300 writes its functions out as TF 1.x defined them and
TFM301 migrates the training, also when a helper chooses the device setter at
run time (one machine or a cluster task). What cannot be carried over keeps a
located reason."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.codemod.engine import dedent, migrate_source
from migrate.runtime.topology import unseeded_initializers

REPO = Path(__file__).resolve().parents[1]
MODES_PROGRAM = REPO / "tests" / "programs" / "tutorial_mnist_modes.py"

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
    images = tf.placeholder(tf.float32, [None, mnist.IMAGE_PIXELS])
    labels = tf.placeholder(tf.int32, [None])
    with tf.device({device}):
        logits = mnist.inference(images, 24, 12)
        loss = mnist.loss(logits, labels)
        train_op = mnist.training(loss, 0.05)
    hooks = [tf.train.StopAtStepHook(last_step=200)]
    with tf.train.MonitoredTrainingSession(master=target, is_chief=FLAGS.task_index == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            xs, ys = next_batch()
            sess.run(train_op, feed_dict={{images: xs, labels: ys}})
'''

CLUSTER = ('    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})\n'
           "    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)\n"
           '    if FLAGS.job_name == "ps":\n'
           "        server.join()\n"
           "    target = server.target\n")

PLACEMENT = '''

def placement_and_target():
    if FLAGS.job_name is None:
        return None, ""
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    task_device = "/job:worker/task:%d" % FLAGS.task_index
    # variables on the ps tasks, the rest on this worker
    return tf.train.replica_device_setter(worker_device=task_device, cluster=cluster), server.target
'''

MODES_SETUP = "    device, target = placement_and_target()\n"


def _program(helper: str, device: str, setup: str) -> str:
    return dedent(HEADER + helper + "\n\ndef main(_):\n" + setup + BODY.format(device=device))


def _plain() -> str:
    return _program("", "tf.train.replica_device_setter(cluster=cluster)", CLUSTER)


def _modes() -> str:
    return _program(PLACEMENT, "device", MODES_SETUP)


def _line(source: str, text: str) -> int:
    return next(k for k, line in enumerate(source.splitlines(), 1) if text in line)


def _migrated(source: str):
    result = migrate_source(source)
    assert not result.manual_work, [(d.code, d.message) for d in result.manual_work]
    compile(result.output, "<migrated>", "exec")
    assert migrate_source(result.output).output == result.output  # a second run changes nothing
    return result


def test_the_tutorials_functions_are_written_out_as_tensorflow_defined_them():
    source = _plain()
    result = _migrated(source)
    out = result.output
    assert "tensorflow.examples" not in out and "mnist." not in out
    assert "tf.distribute.ParameterServerStrategy(cluster_resolver)" in out
    # inference: truncated-normal weights of standard deviation 1/sqrt(fan-in), zero biases, TF1's names
    assert ('hidden1_weights = tf.Variable(tf.random.truncated_normal([IMAGE_PIXELS, 24],'
            ' stddev=1.0 / math.sqrt(float(IMAGE_PIXELS))), name="hidden1/weights")') in out
    assert 'hidden2_weights = tf.Variable(tf.random.truncated_normal([24, 12], stddev=1.0 / math.sqrt(float(24)))' in out
    assert ('softmax_linear_weights = tf.Variable(tf.random.truncated_normal([12, NUM_CLASSES],'
            ' stddev=1.0 / math.sqrt(float(12))), name="softmax_linear/weights")') in out
    assert 'softmax_linear_biases = tf.Variable(tf.zeros([NUM_CLASSES]), name="softmax_linear/biases")' in out
    assert "hidden1 = tf.nn.relu(tf.matmul(images, hidden1_weights) + hidden1_biases)" in out
    assert "logits = tf.matmul(hidden2, softmax_linear_weights) + softmax_linear_biases" in out
    # loss: the batch mean of the sparse cross-entropy; training: plain gradient descent
    assert ("loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits("
            "labels=tf.cast(labels, tf.int64), logits=logits))") in out
    assert "tf.keras.optimizers.SGD(learning_rate=0.05)" in out
    # the module's constants, defined once after the imports; math for the standard deviations
    tree = ast.parse(out)
    constants = {t.id: ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}
    assert constants["IMAGE_PIXELS"] == "IMAGE_SIZE * IMAGE_SIZE" and constants["IMAGE_SIZE"] == "28"
    assert constants["NUM_CLASSES"] == "10"
    assert any(isinstance(n, ast.Import) and n.names[0].name == "math" for n in tree.body)
    notes = {d.line: d.message for d in result.diagnostics if d.code == "TFM300"}
    assert set(notes) == {_line(source, f"mnist.{f}(") for f in ("inference", "loss", "training")}
    assert "the batch mean of the sparse softmax cross-entropy" in notes[_line(source, "mnist.loss(")]
    # the import of the removed module is gone, and with it the report that it was removed
    assert not any("was removed from TensorFlow 2" in d.message for d in result.diagnostics)


def test_the_tutorials_evaluation_and_a_returned_train_op_are_written_out():
    source = dedent(HEADER + '''

def build(logits, labels):
    loss = mnist.loss(logits, labels)
    return mnist.training(loss, 0.05)


def main(_):
''' + CLUSTER + BODY.format(device="tf.train.replica_device_setter(cluster=cluster)").replace(
        "        loss = mnist.loss(logits, labels)\n        train_op = mnist.training(loss, 0.05)\n",
        "        correct = mnist.evaluation(logits, labels)\n        train_op = build(logits, labels)\n").replace(
        "            sess.run(train_op, feed_dict={images: xs, labels: ys})\n",
        "            _, right = sess.run([train_op, correct], feed_dict={images: xs, labels: ys})\n"
        "            print(right)\n"))
    result = _migrated(source)
    out = result.output
    assert "mnist." not in out and "ParameterServerStrategy" in out
    assert ("correct = tf.reduce_sum(tf.cast(tf.math.in_top_k(predictions=logits, targets=labels, k=1), tf.int32))"
            in out)
    assert "def build(" not in out  # inlined into the block by TFM300 once written out
    assert {d.message.split("`")[1] for d in result.diagnostics if d.code == "TFM300" and "MNIST" in d.message} == {
        "inference(...)", "loss(...)", "training(...)", "evaluation(...)"}


def test_a_run_time_choice_of_device_keeps_both_modes():
    source = _modes()
    result = _migrated(source)
    out = result.output
    tree = ast.parse(out)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    # the helper now hands back the cluster of either mode, named for what it returns
    helper = functions["make_cluster_resolver"]
    returns = [ast.unparse(n.value) for n in sorted((n for n in ast.walk(helper) if isinstance(n, ast.Return)),
                                                    key=lambda n: n.lineno)]
    assert returns == ["in_process_cluster_resolver()", "cluster_resolver"]
    helper_code = ast.get_source_segment(out, helper)
    assert "replica_device_setter" not in helper_code and ".target" not in helper_code
    assert "task_device" not in helper_code and "the rest on this worker" not in helper_code
    assert 'if FLAGS.job_name in ("ps", "worker"):' in helper_code  # the cluster's tasks only serve
    # one machine: one ps and one worker served in this process, which coordinates
    in_process = ast.get_source_segment(out, functions["in_process_cluster_resolver"])
    assert 'tf.train.ClusterSpec({"ps": addresses[:1], "worker": addresses[1:]})' in in_process
    assert 'tf.distribute.Server(cluster_spec, job_name=job, task_index=0, protocol="grpc", start=True)' in in_process
    assert "SimpleClusterResolver(cluster_spec, rpc_layer=\"grpc\")" in in_process
    assert any(isinstance(n, ast.Import) and n.names[0].name == "socket" for n in tree.body)
    main = ast.get_source_segment(out, functions["main"])
    assert main.index("cluster_resolver = make_cluster_resolver()") < main.index(
        "strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)")
    assert "placement_and_target" not in out and "replica_device_setter" not in out


def _reason(source: str) -> str:
    result = migrate_source(source)
    assert "Strategy" not in result.output and "replica_device_setter" in result.output
    [block] = [d for d in result.manual_work if d.code == "TFM301" and "device-setter block left as TF1" in d.message
               and "(found with the rewrite of" not in d.message]
    assert block.line == _line(source, "with tf.device(device):")
    return block.message


def test_a_mode_helper_called_again_elsewhere_is_left_with_its_reason():
    source = _modes() + dedent('''

def describe():
    return placement_and_target()[1]
''')
    message = _reason(source)
    assert "`placement_and_target()` returns on a cluster task, and None on one machine" in message
    assert "but `placement_and_target()` is called elsewhere too" in message


def test_synchronous_training_over_a_mode_helper_is_left_with_its_reason():
    source = _modes().replace(
        "        train_op = mnist.training(loss, 0.05)\n",
        "        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.05), replicas_to_aggregate=2)\n"
        "        train_op = opt.minimize(loss)\n").replace(
        "hooks = [tf.train.StopAtStepHook(last_step=200)]",
        "hooks = [opt.make_session_run_hook(FLAGS.task_index == 0), tf.train.StopAtStepHook(last_step=200)]")
    message = _reason(source)
    assert "this training is synchronous (SyncReplicasOptimizer, MultiWorkerMirroredStrategy), where it does not" \
        in message


def test_a_use_of_the_tutorial_module_that_cannot_be_written_out_is_named():
    source = _program("", "tf.train.replica_device_setter(cluster=cluster)", CLUSTER).replace(
        "        logits = mnist.inference(images, 24, 12)\n",
        "        model = mnist.inference\n        logits = model(images, 24, 12)\n")
    result = migrate_source(source)
    assert "replica_device_setter" in result.output and "Strategy" not in result.output
    [block] = [d for d in result.manual_work if d.code == "TFM301" and d.line == _line(source, "with tf.device(")]
    assert "`mnist.training(...)` of `tensorflow.examples.tutorials.mnist.mnist`, which TF 2 no longer ships" \
        in block.message
    assert "and here `mnist.inference` is used otherwise than as a statement `name = mnist.inference(...)`" \
        in block.message
    assert any("was removed from TensorFlow 2" in d.message for d in result.manual_work)  # still imported


def test_a_block_with_its_own_optimizer_is_not_blamed_on_the_tutorial_module():
    source = _plain().replace("train_op = mnist.training(loss, 0.05)",
                              "train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)")
    result = migrate_source(source)
    assert not any("no longer ships" in d.message and d.code == "TFM301" for d in result.diagnostics)
    assert "ParameterServerStrategy" in result.output and "mnist." not in result.output


def test_check_carries_the_tutorials_unseeded_weights_over():
    tree = ast.parse(MODES_PROGRAM.read_text())
    found = unseeded_initializers(tree)
    line = _line(MODES_PROGRAM.read_text(), "mnist.inference(")
    assert found == (f"line {line}: mnist.inference (truncated_normal weights)",)
    assert unseeded_initializers(ast.parse("from tensorflow.examples.tutorials.mnist import input_data\n"
                                           "input_data.inference(x)\n")) == ()


@pytest.mark.slow
def test_check_says_the_migrated_modes_program_trains_bit_for_bit_as_the_legacy_one(tmp_path):
    """The legacy job (its tutorial module served by the harness, TF 1.15's
    definitions) and the migration on a loopback cluster, one worker: the
    same losses at every step."""
    pytest.importorskip("tensorflow")
    migrated = tmp_path / "migrated.py"
    migrated.write_text(_migrated(MODES_PROGRAM.read_text()).output)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(MODES_PROGRAM), str(migrated), "--steps", "20",
         "--workers", "1", "--out", str(out), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=1200, check=False)
    report = json.loads((out / "report.json").read_text())
    assert proc.returncode == 0 and report["verdict"] == "equivalent", report.get("reason")
    assert report["strategy"] == "parameter_server"
    assert report["migrated"]["launch"]["jobs"] == {"chief": 1, "worker": 1, "ps": 1}
    comparison = report["comparison"]
    assert comparison["steps_compared"] == 20 and comparison["max_abs_diff"] == 0.0  # bit for bit
    assert report["align_init"]  # the tutorial's unseeded weights, carried over by their TF1 names


@pytest.mark.slow
def test_the_migrated_modes_program_trains_on_one_machine(tmp_path):
    """Without --job_name the migrated program serves its own one-ps,
    one-worker cluster and trains there to its last step."""
    pytest.importorskip("tensorflow")
    migrated = tmp_path / "migrated.py"
    migrated.write_text(_migrated(MODES_PROGRAM.read_text()).output)
    proc = subprocess.run([sys.executable, str(migrated), "--train_steps=6"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, check=False, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_train_op_helper_in_a_block_over_a_mode_helper_is_inlined_and_migrated():
    source = _program(PLACEMENT + '''

def build_model(images, labels):
    logits = mnist.inference(images, 24, 12)
    loss = mnist.loss(logits, labels)
    train_op = mnist.training(loss, 0.05)
    return train_op
''', "device", MODES_SETUP).replace(
        "        logits = mnist.inference(images, 24, 12)\n        loss = mnist.loss(logits, labels)\n"
        "        train_op = mnist.training(loss, 0.05)\n", "        train_op = build_model(images, labels)\n")
    result = _migrated(source)
    assert "def build_model(" not in result.output and "cluster_resolver = make_cluster_resolver()" in result.output
    assert any(d.code == "TFM300" and d.message.startswith("`build_model(...)` inlined") for d in result.diagnostics)


def test_a_mode_helper_called_at_the_top_of_the_module_is_migrated_there():
    source = dedent(HEADER + PLACEMENT + '''

device, target = placement_and_target()
with tf.device(device):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(tf.zeros([4, 1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
with tf.train.MonitoredTrainingSession(master=target, is_chief=FLAGS.task_index == 0,
                                       hooks=[tf.train.StopAtStepHook(last_step=50)]) as sess:
    while not sess.should_stop():
        xs, ys = next_batch()
        sess.run(train_op, feed_dict={x: xs, y: ys})
''').replace("from tensorflow.examples.tutorials.mnist import mnist\n", "")
    out = _migrated(source).output
    tree = ast.parse(out)
    top = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Assign)]
    assert "cluster_resolver = make_cluster_resolver()" in top
    assert "strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)" in top
    assert top.index("cluster_resolver = make_cluster_resolver()") < top.index(
        "strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)")
