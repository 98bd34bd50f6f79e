"""A driver whose model module is not in the project (TFM301).

The family: a training script copied out of a repository without its model
module (`import mnist_inference` and nothing beside it), or a project whose
user migrates the driver first. The model call (`y = net.scores(x, penalty)`)
is kept in the migrated model function as the driver made it, its first build
traced; a loss reading a collection that only explicit calls fill keeps its
read in the step; one warning per absent module says what the migrated driver
assumes of it and that tfmigrate must migrate it too. What the absent module
would have to do besides building the model from the driver's tensors stays
TF1, with the reason at its line (placeholders it makes for the driver to
feed: tests/test_tfm301_dataflow.py).

Fixtures (ours): tests/programs/absent_model/trainer/ (the drivers, migrated
without their modules), tests/programs/absent_model/models/ (the modules,
served to both sides of `check`: the legacy ones as they are, the migrated
ones as tfmigrate writes them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.codemod.engine import dedent, migrate_source

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "programs" / "absent_model"
TRACED_BUILD = "tf.function(model)(tf.zeros("


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def _migrate_alone(tmp_path: Path, driver: str):
    """The driver copied alone into a directory (its module absent), migrated."""
    path = tmp_path / driver
    shutil.copy(PROGRAMS / "trainer" / driver, path)
    source = path.read_text()
    result = migrate_source(source, path=str(path))
    compile(result.output, str(path), "exec")
    assert migrate_source(result.output, path=str(path)).output == result.output  # idempotent
    return source, result


@pytest.mark.parametrize("driver, module, call, key, strategy", [
    ("sync_train.py", "stack_net", "stack_net.scores(", "losses", "MultiWorkerMirroredStrategy"),
    ("async_train.py", "plain_net", "plain_net.predict(", "weight_penalties", "ParameterServerStrategy"),
])
def test_the_driver_migrates_without_its_model_module_with_one_warning(tmp_path, driver, module, call, key,
                                                                       strategy):
    source, result = _migrate_alone(tmp_path, driver)
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert f"tf.distribute.{strategy}" in out and "replica_device_setter" not in out
    # the model call where the driver made it, in the model function, before the scoped read
    model_fn = out[out.index("def model_fn("):out.index("return loss")]
    assert model_fn.index("model_scope:") < model_fn.index(call) < model_fn.index(f'"{key}", model_scope)')
    assert TRACED_BUILD in out and "model = ModelBuiltOnce(model_fn)" in out
    notes = [d for d in result.diagnostics if d.message.startswith(f"`{call}")]
    assert len(notes) == 1, [d.message for d in result.diagnostics]
    [note] = notes
    assert note.severity == "warning" and note.fixed and note.line == _line(source, call)
    assert f"`{module}`, which is not in this project (no {module}.py beside this file)" in note.message
    assert f"add its terms to '{key}' at each call" in note.message
    assert note.hint.startswith(f"`{module}` must be migrated with this file: run tfmigrate on it")


def test_a_loss_function_of_the_absent_module_is_called_in_the_step_its_first_build_traced(tmp_path):
    """cifar10's layout: `loss = net.total_loss(logits, labels)` sums, in the
    absent module, the collection its `inference()` fills. Nothing in the
    driver reads it, but the module may: the first build is traced, or an
    eager build's terms would be copied into every step's collection."""
    source, result = _migrate_alone(tmp_path, "decay_train.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    model_fn = out[out.index("def model_fn("):out.index("return loss")]
    assert "decay_net.inference(images)" in model_fn and "decay_net.total_loss(logits, labels)" in model_fn
    assert "model_scope" not in out  # no read of the driver's to scope
    assert TRACED_BUILD in out
    [note] = [d for d in result.diagnostics if "decay_net" in d.message and d.severity == "warning"]
    assert note.message.startswith("`decay_net.inference(...)`, `decay_net.total_loss(...)` come from `decay_net`")
    assert note.line == _line(source, "decay_net.inference(")


def test_variables_an_absent_module_makes_for_the_forward_code_are_made_in_the_model_function(tmp_path):
    """`weights = layer_kit.weight_variable([...])`: no tensor is handed to
    it, but nothing else in the block creates a variable, and the forward
    code reads what it returns. Left under the strategy's scope as a plain
    value, the step would train nothing; in the model function its variables
    are recorded on the first call and trained."""
    source, result = _migrate_alone(tmp_path, "kit_train.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    model_fn = out[out.index("def model_fn("):out.index("return loss")]
    assert model_fn.index("layer_kit.weight_variable(") < model_fn.index("tf.matmul(pixels, weights)")
    assert "trainable_variables = model.trainable_variables" in out
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = model.trainable_variables")]
    assert "layer_kit." not in scope.replace("tf.function(model)", "")
    [note] = [d for d in result.diagnostics if d.severity == "warning"]
    assert note.message.startswith("`layer_kit.weight_variable(...)`, `layer_kit.bias_variable(...)` come from")
    assert note.line == _line(source, "layer_kit.weight_variable(")


def test_a_variable_of_an_absent_module_beside_the_blocks_own_is_trained_too(tmp_path):
    """The block makes `weights` itself and takes `biases` from the absent
    module; minimize() trained every trainable variable: both are in the
    step's variables (`biases` made in the model function, recorded)."""
    source = (PROGRAMS / "trainer" / "kit_train.py").read_text().replace(
        "weights = layer_kit.weight_variable([PIXELS, CLASSES])",
        "weights = tf.Variable(tf.zeros([PIXELS, CLASSES]))")
    path = tmp_path / "kit_train.py"
    path.write_text(source)
    result = migrate_source(source, path=str(path))
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "trainable_variables = [weights] + model.trainable_variables" in out
    model_fn = out[out.index("def model_fn("):out.index("return loss")]
    assert "biases = layer_kit.bias_variable([CLASSES])" in model_fn


def test_a_model_module_present_beside_the_driver_is_read_instead(tmp_path):
    """The same driver beside its module: no assumption, no warning."""
    shutil.copy(PROGRAMS / "models" / "stack_net.py", tmp_path / "stack_net.py")
    _, result = _migrate_alone(tmp_path, "sync_train.py")
    assert not result.manual_work
    assert not [d for d in result.diagnostics if d.severity == "warning"]
    assert 'tf.compat.v1.make_template("model", model_fn)' in result.output


# ---------------------------------------------------------------- what stays TF1
DRIVER = '''
import tensorflow as tf

import vision_net


def train(cluster, server, steps, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        {model}
        global_step = tf.train.get_or_create_global_step()
        {train}
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(steps):
            images_value, labels_value = next(batches)
            sess.run(train_op, feed_dict={{images: images_value, labels: labels_value}})
'''


def _declined(tmp_path: Path, model: str, train: str):
    source = dedent(DRIVER.format(model=model, train=train))
    path = tmp_path / "train.py"
    path.write_text(source)
    result = migrate_source(source, path=str(path))
    assert "tf.distribute" not in result.output and "replica_device_setter" in result.output
    return source, [d for d in result.manual_work if d.code == "TFM301"]


def test_a_train_op_the_absent_module_builds_stays_tf1(tmp_path):
    """The optimizer and its update are the module's: TFM301 cannot rewrite
    them into a step function without reading them."""
    source, reasons = _declined(
        tmp_path, "images = tf.placeholder(tf.float32, [None, 784])\n"
                  "        labels = tf.placeholder(tf.int64, [None])",
        "train_op = vision_net.train_op(images, labels, global_step)")
    [reason] = [d for d in reasons if "comes from `vision_net.train_op(...)`" in d.message]
    assert reason.line == _line(source, "vision_net.train_op(")
    assert "`vision_net`, which is not in this project" in reason.message


OBJECT_DRIVER = """
import tensorflow as tf

from convnet import ConvNet


def train(cluster, server, steps, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 784])
        y_ = tf.placeholder(tf.int64, [None])
        net = ConvNet(x, y_, num_classes=10)
        {bind}global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(1e-3).minimize({loss}, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(steps):
            xs, ys = next(batches)
            _, loss_value = sess.run([train_op, {loss}], feed_dict={{x: xs, y_: ys}})
"""


def test_a_model_object_of_an_absent_module_is_built_in_the_model_function(tmp_path):
    """`net = ConvNet(x, y_)` of an absent module, its loss bound in the
    block: the object is made in the model function (recorded once)."""
    source = dedent(OBJECT_DRIVER.format(bind="loss = net.loss\n        ", loss="loss"))
    path = tmp_path / "train.py"
    path.write_text(source)
    result = migrate_source(source, path=str(path))
    assert not result.manual_work, [d.message for d in result.manual_work]
    model_fn = result.output[result.output.index("def model_fn("):result.output.index("return loss")]
    assert "net = ConvNet(x, y_, num_classes=10)" in model_fn and "loss = net.loss" in model_fn
    [note] = [d for d in result.diagnostics if d.severity == "warning"]
    assert note.message.startswith("`ConvNet(...)` comes from `convnet`, which is not in this project")


def test_a_fetched_attribute_of_a_model_object_says_to_bind_it(tmp_path):
    """`sess.run([train_op, net.loss])`: the step returns the block's values
    by name; the reason says which fetch and how to name it."""
    source = dedent(OBJECT_DRIVER.format(bind="", loss="net.loss"))
    path = tmp_path / "train.py"
    path.write_text(source)
    result = migrate_source(source, path=str(path))
    assert "tf.distribute" not in result.output
    [reason] = [d for d in result.manual_work if "an attribute of `net`" in d.message]
    assert "sess.run fetches `net.loss`" in reason.message and reason.line == _line(source, "sess.run(")
    assert "`loss = net.loss`" in reason.hint


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
@pytest.mark.parametrize("driver, workers, strategy", [("sync_train.py", 2, "multi_worker_mirrored"),
                                                       ("async_train.py", 1, "parameter_server"),
                                                       ("decay_train.py", 1, "parameter_server"),
                                                       ("kit_train.py", 1, "parameter_server")])
def test_the_driver_migrated_alone_then_its_module_trains_as_the_legacy_pair(tmp_path, driver, workers, strategy):
    """The user's order: the driver migrated without its module, then the
    module migrated by tfmigrate on its own; the two together (check's
    migrated side) against the legacy pair, step by step within check's
    1e-6 tolerance: the penalties counted once per step, as TF1 counted them."""
    pytest.importorskip("tensorflow")
    legacy, migrated = tmp_path / "legacy", tmp_path / "migrated"
    for what in ("trainer", "models"):
        shutil.copytree(PROGRAMS / what, legacy, dirs_exist_ok=True)
        run = subprocess.run([sys.executable, "-m", "migrate", str(PROGRAMS / what), "-o", str(tmp_path / what)],
                             cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        assert run.returncode in (0, 1), run.stdout + run.stderr
        shutil.copytree(tmp_path / what, migrated, dirs_exist_ok=True)
    assert TRACED_BUILD in (migrated / driver).read_text()
    code, report = _check(legacy / driver, migrated / driver, tmp_path / "out", workers)
    assert code == 0 and report["verdict"] == "equivalent", report.get("reason")
    assert report["strategy"] == strategy


# ---------------------------------------------------------------- in-graph towers (TFM303)
def _towers_split(tmp_path: Path) -> tuple[Path, Path]:
    """The towers reference program (legacy_reference/in_graph_towers.py)
    with its model, `_variable_on_cpu()` and `inference()`, moved to a module
    `tower_model` of its own: (the driver alone in a directory, the module)."""
    code = (REPO / "legacy_reference" / "in_graph_towers.py").read_text()
    start, end = code.index("def _variable_on_cpu("), code.index("def tower_loss(")
    model = ("import tensorflow.compat.v1 as tf\n\nN_IN, N_HIDDEN = 10, 16\n\n\n" + code[start:end]).rstrip() + "\n"
    driver = code[:start] + code[end:]
    driver = driver.replace("import tensorflow.compat.v1 as tf\n", "import tensorflow.compat.v1 as tf\nimport tower_model\n", 1)
    assert driver.count("inference(features)") == 1
    driver = driver.replace("inference(features)", "tower_model.inference(features)")
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "towers.py").write_text(driver)
    (tmp_path / "tower_model.py").write_text(model)
    return tmp_path / "alone" / "towers.py", tmp_path / "tower_model.py"


def test_towers_calling_an_absent_module_build_it_traced_with_one_warning(tmp_path):
    driver, _ = _towers_split(tmp_path)
    source = driver.read_text()
    result = migrate_source(source, path=str(driver))
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.distribute.MirroredStrategy" in result.output
    assert "tf.function(model)(" in result.output  # the absent module's first build traced
    [note] = [d for d in result.diagnostics if d.severity == "warning"]
    assert note.code == "TFM303" and note.line == _line(source, "tower_model.inference(features)")
    assert "`tower_model.inference(...)` comes from `tower_model`, which is not in this project" in note.message
    assert "must create them with get_variable" in note.message


@pytest.mark.slow
def test_towers_migrated_without_their_model_module_train_as_the_legacy_pair(tmp_path):
    pytest.importorskip("tensorflow")
    driver, model = _towers_split(tmp_path)
    legacy, migrated = tmp_path / "legacy", tmp_path / "migrated"
    legacy.mkdir()
    migrated.mkdir()
    shutil.copy(driver, legacy / "towers.py")
    shutil.copy(model, legacy / "tower_model.py")
    (migrated / "towers.py").write_text(migrate_source(driver.read_text(), path=str(driver)).output)
    (migrated / "tower_model.py").write_text(migrate_source(model.read_text(), path=str(model)).output)
    code, report = _check(legacy / "towers.py", migrated / "towers.py", tmp_path / "out", 1)
    assert code == 0 and report["verdict"] == "equivalent", report.get("reason")


# ---------------------------------------------------------------- resuming the TF1 job's checkpoint
def _module(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recorded_variables_named_in_the_model_scope_resume_from_their_tf1_names(tmp_path):
    """plain_net's tf.Variable objects, made in the model function's name
    scope (the collection read's filter) by the traced first build, are named
    `forward/linear/weights`; the emitted restore strips that scope and takes
    TF1's `linear/weights` from the legacy job's checkpoint."""
    tf = pytest.importorskip("tensorflow")
    from migrate.codemod.rules import _collection_reads, _legacy_restore
    from migrate.codemod.rules.tfm301_graph_to_strategy import _RECORDER

    legacy = _module(PROGRAMS / "models" / "plain_net.py", "legacy_plain_net")
    with tf.Graph().as_default():
        inputs = tf.compat.v1.placeholder(tf.float32, [None, legacy.INPUTS])
        legacy.predict(inputs, 0.05)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saved = {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}
            path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "tf1" / "model.ckpt"))
    assert sorted(saved) == ["linear/offset", "linear/weights"]
    migrated_path = tmp_path / "plain_net.py"
    migrated_path.write_text(migrate_source((PROGRAMS / "models" / "plain_net.py").read_text(),
                                            path=str(migrated_path)).output)
    migrated = _module(migrated_path, "migrated_plain_net")
    namespace = {"tf": tf}
    exec(_RECORDER.format(name="ModelBuiltOnce"), namespace)  # noqa: S102 (the code the codemod emits)
    exec(_legacy_restore.helper_code("restore_checkpoint", _collection_reads.NAME_SCOPE, False), namespace)  # noqa: S102

    def model_fn(inputs):
        with tf.compat.v1.name_scope(_collection_reads.NAME_SCOPE) as model_scope:
            predictions = migrated.predict(inputs, 0.05)
            return tf.reduce_sum(predictions) + tf.add_n(tf.compat.v1.get_collection("weight_penalties", model_scope))

    model = namespace["ModelBuiltOnce"](model_fn)
    tf.function(model)(tf.zeros([1, migrated.INPUTS]))
    assert sorted(v.name for v in model.variables) == ["forward/linear/offset:0", "forward/linear/weights:0"]
    namespace["restore_checkpoint"](tf.train.Checkpoint(model=model), path, model.variables)
    for variable in model.variables:
        tf1_name = variable.name.split(":")[0].removeprefix("forward/")
        assert (variable.numpy() == saved[tf1_name]).all()
