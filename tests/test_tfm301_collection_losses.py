"""A loss that sums a collection the model module fills (TFM301).

The family: a model module whose ``inference(x, regularizer)`` creates its
weights with ``get_variable`` and calls ``tf.add_to_collection('losses',
regularizer(w))`` each time it is called, and a driver whose loss is
``xent + tf.add_n(tf.get_collection('losses'))`` (the TF1 book examples and
their many copies). In a tf.function the v1 collections are the function's
own: the migrated step calls the model and reads the terms of that call. The
model's first build is traced as well (an eager one would leave its terms in
the global graph, which each later trace copies in: counted twice).

Fixtures: tests/programs/collection_losses/ (a model module, an asynchronous
driver building its train op in a helper, a synchronous one calling the model
in the device block; a model module whose own loss function reads the
collection, and its driver), and small projects written to tmp_path below."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.program.collections import collection_fills
from migrate.codemod.program.tracing import Tracer

REPO = Path(__file__).resolve().parent.parent
PROJECT = REPO / "tests" / "programs" / "collection_losses"
TRACED_BUILD = "tf.function(model)(tf.zeros("


def _migrate_file(path: Path):
    source = path.read_text()
    result = migrate_source(source, path=str(path))
    compile(result.output, str(path), "exec")
    # idempotent: the output migrated again (beside the same model module) is unchanged
    again = path.with_name("again_" + path.name)
    again.write_text(result.output)
    try:
        assert migrate_source(result.output, path=str(again)).output == result.output
    finally:
        again.unlink()
    return result


def _copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    return project


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.mark.parametrize("driver, strategy", [("async_train.py", "ParameterServerStrategy"),
                                              ("sync_train.py", "MultiWorkerMirroredStrategy")])
def test_the_collection_read_stays_in_the_step_and_the_first_build_is_traced(tmp_path, driver, strategy):
    path = _copy_project(tmp_path) / driver
    result = _migrate_file(path)
    out = result.output
    assert f"tf.distribute.{strategy}" in out and "replica_device_setter" not in out
    assert not result.manual_work, [d.message for d in result.manual_work]
    # the read is in the model function the step calls, after the model call
    model_fn = out[out.index("def model_fn("):out.index("return loss")]
    assert model_fn.index('with tf.compat.v1.name_scope("forward") as model_scope:') < model_fn.index(
        "layers_net.classify(") < model_fn.index('tf.add_n(tf.compat.v1.get_collection("penalties", model_scope))')
    # the first build traced, under the strategy's scope; no eager build besides
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = model.trainable_variables")]
    assert TRACED_BUILD in scope
    assert "\n        model(tf.zeros(" not in out
    [note] = [d for d in result.diagnostics if "in the step" in d.message and d.code == "TFM301"]
    assert note.severity == "info" and note.fixed
    assert note.line == _line(path.read_text(), 'tf.get_collection("penalties")')
    assert not [d for d in result.diagnostics if d.code == "TFM901"]


BOOK_MODEL = '''
import tensorflow as tf

INPUT_NODE = 20
OUTPUT_NODE = 4


def get_weight_variable(shape, regularizer):
    weights = tf.get_variable("weights", shape, initializer=tf.truncated_normal_initializer(stddev=0.1))
    if regularizer != None:
        tf.add_to_collection('losses', regularizer(weights))
    return weights


def inference(input_tensor, regularizer):
    with tf.variable_scope('layer1'):
        weights = get_weight_variable([INPUT_NODE, OUTPUT_NODE], regularizer)
        biases = tf.get_variable("biases", [OUTPUT_NODE], initializer=tf.constant_initializer(0.0))
        return tf.matmul(input_tensor, weights) + biases
'''

BOOK_DRIVER = '''
import tensorflow as tf

import net_model


def main(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, net_model.INPUT_NODE])
        y_ = tf.placeholder(tf.int64, [None])
        regularizer = tf.contrib.layers.l2_regularizer(0.001)
        y = net_model.inference(x, regularizer)
        global_step = tf.train.get_or_create_global_step()
        cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=y, labels=y_)
        loss = tf.reduce_mean(cross_entropy) + {read}
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(steps):
            sess.run(train_op, feed_dict={{x: [[0.5] * 20], y_: [1]}})
'''


def _book(tmp_path: Path, model: str = BOOK_MODEL, read: str = "tf.add_n(tf.get_collection('losses'))"):
    (tmp_path / "net_model.py").write_text(dedent(model))
    path = tmp_path / "train.py"
    path.write_text(dedent(BOOK_DRIVER.format(read=read)))
    return path, migrate_source(path.read_text(), path=str(path))


def test_the_book_layout_with_tf_spelled_model_module_migrates(tmp_path):
    _, result = _book(tmp_path)
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.add_n(tf.compat.v1.get_collection('losses', model_scope))" in result.output
    assert TRACED_BUILD in result.output


def _declined(tmp_path: Path, model: str = BOOK_MODEL, read: str = "tf.add_n(tf.get_collection('losses'))"):
    path, result = _book(tmp_path, model, read)
    # the training stays TF1 (other rules still spell its names the TF2 way)
    assert "tf.distribute" not in result.output and "replica_device_setter" in result.output
    reasons = [d for d in result.manual_work if d.code == "TFM301" and "collection" in d.message]
    assert reasons, [d.message for d in result.manual_work]
    return path, reasons[0]


def test_a_term_added_when_the_variable_is_created_declines(tmp_path):
    """`get_variable(..., regularizer=r)` adds its term once, when the variable
    is created: the traced first build would keep it, no step would see it."""
    model = BOOK_MODEL.replace(
        'weights = tf.get_variable("weights", shape, initializer=tf.truncated_normal_initializer(stddev=0.1))',
        'weights = tf.get_variable("weights", shape, regularizer=regularizer)').replace(
        "    if regularizer != None:\n        tf.add_to_collection('losses', regularizer(weights))\n", "")
    path, reason = _declined(tmp_path, model, "tf.losses.get_total_loss()")
    assert reason.line == _line(path.read_text(), "get_total_loss()")
    assert "when it creates a variable" in reason.message and "`get_weight_variable()` of `net_model`" in reason.message


def test_a_regularization_read_no_longer_drops_a_sibling_builders_terms(tmp_path):
    """The REGULARIZATION_LOSSES read became the sum of the block's own
    regularized variables, silently losing the model module's: declined."""
    model = BOOK_MODEL.replace(
        'weights = tf.get_variable("weights", shape, initializer=tf.truncated_normal_initializer(stddev=0.1))',
        'weights = tf.get_variable("weights", shape, regularizer=regularizer)').replace(
        "    if regularizer != None:\n        tf.add_to_collection('losses', regularizer(weights))\n", "")
    _, reason = _declined(tmp_path, model, "tf.losses.get_regularization_loss()")
    assert "REGULARIZATION_LOSSES" in reason.message and "`get_weight_variable()` of `net_model`" in reason.message


def test_a_model_of_plain_variables_migrates_its_resume_stripping_the_name_scope(tmp_path):
    """The collection is read by the model function's name scope, which
    tf.Variable objects take as a prefix (get_variable's names are the
    variable scope's): recorded once, they keep it, and the resume from the
    TF1 job's checkpoint strips it to find their TF1 names."""
    model = BOOK_MODEL.replace(
        'weights = tf.get_variable("weights", shape, initializer=tf.truncated_normal_initializer(stddev=0.1))',
        "weights = tf.Variable(tf.truncated_normal(shape, stddev=0.1))")
    (tmp_path / "net_model.py").write_text(dedent(model))
    path = tmp_path / "train.py"
    path.write_text(dedent(BOOK_DRIVER.format(read="tf.add_n(tf.get_collection('losses'))")).replace(
        "MonitoredTrainingSession(master=server.target)",
        "MonitoredTrainingSession(master=server.target, checkpoint_dir='/tmp/train_logs')"))
    result = _migrate_file(path)
    assert not result.manual_work, [d.message for d in result.manual_work]
    out = result.output
    assert "class ModelBuiltOnce(tf.Module)" in out and TRACED_BUILD in out
    assert "tf.add_n(tf.compat.v1.get_collection('losses', model_scope))" in out
    assert 'with tf.compat.v1.name_scope("forward") as model_scope:' in out
    assert 'name = variable.name.split(":")[0].removeprefix("forward/")' in out


def test_a_collection_named_by_a_computed_key_declines(tmp_path):
    model = BOOK_MODEL.replace("tf.add_to_collection('losses', regularizer(weights))",
                               "tf.add_to_collection(shape and 'losses', regularizer(weights))")
    _, reason = _declined(tmp_path, model)
    assert "names a collection it computes" in reason.message


def test_a_scope_filtered_read_declines(tmp_path):
    _, reason = _declined(tmp_path, read="tf.add_n(tf.get_collection('losses', 'layer1'))")
    assert "by a name or a scope the migration cannot follow" in reason.message


def test_an_absent_model_module_keeps_the_read_in_the_step_with_one_warning(tmp_path):
    """Only explicit calls fill 'losses' (at each call): with the module
    absent the read stays in the step, the first build is traced, and one
    warning at the builder's call names the module and what is assumed."""
    path = tmp_path / "train.py"
    path.write_text(dedent(BOOK_DRIVER.format(read="tf.add_n(tf.get_collection('losses'))")))
    result = _migrate_file(path)
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.add_n(tf.compat.v1.get_collection('losses', model_scope))" in result.output
    assert TRACED_BUILD in result.output and "model = ModelBuiltOnce(model_fn)" in result.output
    [note] = [d for d in result.diagnostics if "net_model" in d.message and d.message.startswith("`")]
    assert note.severity == "warning" and note.line == _line(path.read_text(), "net_model.inference(")
    assert "`net_model.inference(...)` comes from `net_model`, which is not in this project" in note.message
    assert "add its terms to 'losses' at each call" in note.message
    assert note.hint.startswith("`net_model` must be migrated with this file: run tfmigrate on it")
    [read] = [d for d in result.diagnostics if "in the step" in d.message]
    assert "that of `net_model`, which is not in this project: assumed" in read.message


def test_an_absent_model_module_with_a_regularization_read_declines(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(dedent(BOOK_DRIVER.format(read="tf.losses.get_total_loss()")))
    result = migrate_source(path.read_text(), path=str(path))
    assert "tf.distribute" not in result.output and "replica_device_setter" in result.output
    [reason] = [d for d in result.manual_work if "REGULARIZATION_LOSSES" in d.message]
    assert reason.line == _line(path.read_text(), "get_total_loss()")
    assert "`net_model` is not in this project (no net_model.py beside this file)" in reason.message
    assert "TensorFlow fills REGULARIZATION_LOSSES when a variable is created" in reason.message
    assert "put net_model.py beside this file" in reason.hint


# ---------------------------------------------------------------- the analysis
FILLS = '''
import tensorflow.compat.v1 as tf
import absent_layers


def helper(w):
    tf.add_to_collections(["penalties", tf.GraphKeys.LOSSES], tf.nn.l2_loss(w))


def per_call(x):
    w = tf.get_variable("w", [2, 2])
    helper(w)
    tf.losses.mean_squared_error(x, x)
    tf.losses.absolute_difference(x, x, loss_collection=None)
    return x


def at_creation(x):
    with tf.variable_scope("s", regularizer=tf.nn.l2_loss):
        tf.layers.dense(x, 2, kernel_regularizer=tf.nn.l2_loss)
        return tf.get_variable("w", [2], None, None, tf.nn.l2_loss)


def unknown(x, key):
    tf.add_to_collection(key, x)
    return absent_layers.block(x)
'''


def _fills(tmp_path: Path, name: str):
    path = tmp_path / "fills.py"
    path.write_text(dedent(FILLS))
    module = cst.parse_module(path.read_text())
    from migrate.codemod.program.project import index_for
    from migrate.codemod.tfnames import TFNames

    tracer = Tracer(module, TFNames.from_module(module).qualname, index_for(str(path)))
    fn = tracer.functions(tracer.root)[name]
    return collection_fills(tracer, fn, tracer.root)


def test_fills_at_each_call_are_found_through_helpers_and_losses_functions(tmp_path):
    fills = _fills(tmp_path, "per_call")
    assert sorted(key for key, _, _ in fills.at_call) == ["losses", "losses", "penalties"]
    assert {where for _, _, where in fills.at_call} == {"`helper()` of this file", "`per_call()` of this file"}
    assert not fills.at_creation and not fills.unknown


def test_fills_at_variable_creation_and_unknown_ones_are_told_apart(tmp_path):
    created = _fills(tmp_path, "at_creation")
    assert [key for key, _, _ in created.at_creation] == ["regularization_losses"] * 3
    assert not created.at_call and not created.unknown
    unknown = _fills(tmp_path, "unknown")
    assert len(unknown.unknown) == 2
    assert "names a collection it computes" in unknown.unknown[0][1]
    assert "`absent_layers`, which is not in this project" in unknown.unknown[1][1]


# ---------------------------------------------------------------- numerics
def _check(legacy: Path, migrated: Path, out: Path, workers: int) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(legacy), str(migrated), "--steps", "10",
         "--workers", str(workers), "--out", str(out), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
    )
    report = json.loads((out / "report.json").read_text())
    return proc.returncode, report


@pytest.mark.slow
@pytest.mark.parametrize("driver, workers, strategy", [("async_train.py", 1, "parameter_server"),
                                                       ("sync_train.py", 2, "multi_worker_mirrored"),
                                                       ("decay_train.py", 1, "parameter_server")])
def test_the_migrated_losses_are_the_legacy_ones(tmp_path, driver, workers, strategy):
    """tfmigrate check on the project (the migrated driver beside the migrated
    model module): the penalties counted once per step, as TF1 counted them;
    step by step within check's 1e-6 tolerance."""
    pytest.importorskip("tensorflow")
    migrated_dir = tmp_path / "migrated"
    run = subprocess.run([sys.executable, "-m", "migrate", str(PROJECT), "-o", str(migrated_dir)], cwd=REPO,
                         capture_output=True, text=True, timeout=600, check=False)
    assert (migrated_dir / driver).is_file(), run.stdout + run.stderr
    assert TRACED_BUILD in (migrated_dir / driver).read_text()
    code, report = _check(PROJECT / driver, migrated_dir / driver, tmp_path / "out", workers)
    assert code == 0 and report["verdict"] == "equivalent", report.get("reason")
    assert report["strategy"] == strategy


# ---------------------------------------------------------------- reads elsewhere than the block
DECAY_MODEL = '''
import tensorflow as tf


def _decayed_weights(name, shape, wd):
    var = tf.get_variable(name, shape, initializer=tf.truncated_normal_initializer(stddev=0.1))
    tf.add_to_collection('losses', tf.multiply(tf.nn.l2_loss(var), wd, name='weight_loss'))
    return var


def inference(images):
    with tf.variable_scope('dense'):
        return tf.matmul(images, _decayed_weights('weights', [16, 4], 0.004))


def total_loss(logits, labels):
    xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    tf.add_to_collection('losses', xent)
    return tf.add_n(tf.get_collection('losses'), name='total_loss')
'''

DECAY_DRIVER = '''
import tensorflow as tf

{header}

def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 16])
        labels = tf.placeholder(tf.int64, [None])
        logits = {prefix}inference(images)
        loss = {prefix}total_loss(logits, labels)
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(steps):
            sess.run(train_op, feed_dict={{images: [[0.5] * 16], labels: [1]}})
'''


def test_a_read_in_the_model_modules_loss_function_gets_a_traced_build(tmp_path):
    """cifar10's layout: `loss()` of the model module adds the cross entropy
    and returns the sum of the collection. The read runs in the step (the
    module's function is called there), so the first build must be traced,
    or its terms would be counted in every step; the note says the read is
    not filtered by replica."""
    (tmp_path / "decay_net.py").write_text(dedent(DECAY_MODEL))
    path = tmp_path / "train.py"
    path.write_text(dedent(DECAY_DRIVER.format(header="import decay_net\n", prefix="decay_net.")))
    result = migrate_source(path.read_text(), path=str(path))
    assert "strategy.scope()" in result.output and not result.manual_work
    assert TRACED_BUILD in result.output
    [note] = [d for d in result.diagnostics if "in the step" in d.message]
    assert "in `total_loss()` of `decay_net`" in note.message and "not filtered by replica" in note.message
    assert note.line == _line(path.read_text(), "decay_net.total_loss(")


def test_a_single_file_model_adding_to_a_collection_gets_a_traced_build(tmp_path):
    """The model functions in the driver's own file: the same per-call fills,
    the same traced build (an eager one used to be emitted)."""
    path = tmp_path / "train.py"
    path.write_text(dedent(DECAY_DRIVER.format(header=dedent(DECAY_MODEL).replace("import tensorflow as tf\n", ""),
                                               prefix="")))
    result = migrate_source(path.read_text(), path=str(path))
    assert "strategy.scope()" in result.output and not result.manual_work
    assert TRACED_BUILD in result.output and "\n        model(tf.zeros(" not in result.output
