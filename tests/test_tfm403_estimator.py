"""TFM403: custom model_fn Estimator jobs -> strategy training loops calling the
model_fn. The codemod on our fixtures (tests/programs/estimator_*_job.py), the
located reasons of the shapes it declines, the migration running without ps
tasks (MultiWorkerMirroredStrategy) on TF 2.21, and (slow: the legacy side
runs on a TF 2.15 environment) ``tfmigrate check`` against the legacy job."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source
from migrate.runtime.cluster import run_cluster

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "programs"
FIXTURES = ("estimator_tf_config_job.py", "estimator_layers_job.py", "estimator_numpy_input_job.py")
MODEL_FNS = {"estimator_tf_config_job.py": "model_fn", "estimator_layers_job.py": "classifier_fn",
             "estimator_numpy_input_job.py": "digits_model_fn"}


def migrate(name: str):
    source = (PROGRAMS / name).read_text()
    return source, migrate_source(source, path=str(PROGRAMS / name))


def estimator_names(code: str) -> list[str]:
    return [
        f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(code))
        if isinstance(n, ast.Attribute) and n.attr == "estimator"
    ]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_job_becomes_a_strategy_loop_calling_its_model_fn(name):
    _, result = migrate(name)
    assert [d.code for d in result.manual_work] == [], [d.message for d in result.manual_work]
    assert any(d.code == "TFM403" and d.fixed for d in result.diagnostics)
    out = result.output
    compile(out, name, "exec")
    assert estimator_names(out) == []
    assert "tf.distribute.ParameterServerStrategy(" in out and "tf.distribute.MultiWorkerMirroredStrategy(" in out
    # the model_fn is kept and called in TRAIN mode by the step, EVAL mode by the evaluation
    assert f'tf.compat.v1.make_template("model", {MODEL_FNS[name]})' in out
    assert 'mode="train"' in out and 'mode="eval"' in out
    assert "optimizer.apply_gradients(" in out and "global_step.assign_add(1)" in out
    # idempotent
    assert migrate_source(out, path=name).output == out


def test_layers_fixture_carries_schedule_checkpoints_seed_and_eval_cadence():
    _, result = migrate("estimator_layers_job.py")
    out = result.output
    assert ("tf.keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=params[\"learning_rate\"],"
            " decay_steps=10, decay_rate=0.5, staircase=True)") in out
    assert "tf.keras.optimizers.SGD(learning_rate=learning_rate)" in out
    assert "tf.train.CheckpointManager(checkpoint, args.model_dir, max_to_keep=2)" in out
    assert "if step % 10 == 0 and step < last_step:" in out  # save_checkpoints_steps=10
    assert "tf.random.set_seed(3)" in out
    assert "if step % 5 == 0:" in out  # log_step_count_steps=5
    assert "if step % 100 == 0:" in out  # RunConfig's default save_summary_steps: the loss summary
    assert 'tf.summary.scalar("loss", loss.fetch() if coordinator is not None else loss)' in out
    assert "next_eval = time.monotonic() + 5" in out  # throttle_secs=5
    # EvalSpec(steps=None): the whole evaluation dataset
    assert "for features, labels in eval_input_fn(params=params)]" in out
    # the PREDICT branch went (the job never predicts), reported as such
    assert "predictions" not in out
    assert any("PREDICT branch dropped" in d.message for d in result.diagnostics)


DECLINED_BASE = textwrap.dedent(
    """\
    import tensorflow as tf


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[1.0]])).repeat().batch(1)


    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [1, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        SPEC


    est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
    TRAIN
    """
)
SPEC = "return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)"
TRAIN = "est.train(input_fn, max_steps=10)"


@pytest.mark.parametrize(
    "spec, train, line, why",
    [
        (SPEC.replace("train_op)", "train_op, eval_metric_ops={'acc': acc})"), TRAIN, 12,
         "EstimatorSpec(eval_metric_ops=...) is not carried"),
        (SPEC.replace("train_op=train_op)", "eval_metric_ops={'auc': tf.compat.v1.metrics.auc(labels, w)})"),
         TRAIN, 12, "eval_metric_ops['auc'] is no tf.metrics function with a Keras metric"),
        (SPEC, "est.train(input_fn, max_steps=10, hooks=[tf.estimator.StopAtStepHook(5)])", 16,
         "`hooks`: SessionRunHooks run by the Estimator's MonitoredTrainingSession"),
        (SPEC, "est.train(tf.estimator.inputs.numpy_input_fn({'x': xs}, ys), max_steps=10)", 16,
         "the input_fn is not a function of this module"),
        (SPEC, TRAIN + "\nprint(est.model_dir)", 17, "`est` is also used here"),
        (SPEC, "est.train(input_fn)", 16, "training without max_steps or steps"),
        ("tf.compat.v1.summary.scalar('loss', loss)\n    " + SPEC, TRAIN, 12,
         "a summary tagged \"loss\", the tag of the Estimator's own loss summary"),
        ("tf.compat.v1.summary.scalar('fit', loss)\n    " + SPEC, TRAIN, 13,
         "the model_fn's TRAIN return is not in an `if mode == TRAIN:` branch of its own"),
    ],
)
def test_declined_shapes_are_left_as_they_are_with_a_located_reason(spec, train, line, why):
    source = DECLINED_BASE.replace("SPEC", spec).replace("TRAIN", train)
    result = migrate_source(source, select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and not found[0].fixed
    assert why in found[0].message and found[0].line == line, found[0]


METRICS_JOB = textwrap.dedent(
    """\
    import tensorflow as tf


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [1, 0])).repeat().batch(2)


    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 2)
        classes = tf.argmax(logits, 1)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=tf.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        metrics = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=classes, weights=w),
                   "mean_class": tf.metrics.mean(classes)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)


    est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
    tf.estimator.train_and_evaluate(est, tf.estimator.TrainSpec(input_fn, max_steps=20), tf.estimator.EvalSpec(input_fn))
    """
)


def test_eval_metric_ops_become_keras_metrics_the_evaluation_updates():
    result = migrate_source(METRICS_JOB, path="metrics_job.py")
    assert [d.code for d in result.manual_work] == [], [d.message for d in result.manual_work]
    out = result.output
    # EVAL mode returns the loss and each metric's update_state arguments
    assert 'metrics = {"accuracy": (labels, classes, w),\n               "mean_class": (classes,)}' in out
    assert "return loss, metrics" in out
    assert '"accuracy": tf.keras.metrics.Accuracy(),' in out and '"mean_class": tf.keras.metrics.Mean(),' in out
    assert "eval_metrics[name].update_state(*inputs)" in out and "metric.reset_state()" in out
    assert ".take(100)" in out  # EvalSpec's default steps
    compile(out, "metrics_job.py", "exec")


def test_numpy_input_fn_becomes_a_function_returning_the_same_batches_as_a_dataset():
    _, result = migrate("estimator_numpy_input_job.py")
    out = result.output
    assert ("    def train_input_fn():\n"
            "        return tf.data.Dataset.from_tensor_slices(({FEATURE: images}, digits)).repeat().batch(25)\n") in out
    # num_epochs=1: one pass, the last batch as large as what is left; batch_size defaults to 128
    assert "from_tensor_slices(({FEATURE: images[:50]}, digits[:50])).batch(128)" in out
    assert "inputs.numpy_input_fn(" not in out


TRAIN_THEN_EVALUATE = textwrap.dedent(
    """\
    import numpy as np
    import tensorflow as tf


    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features["x"], 3)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            optimizer = tf.train.AdagradOptimizer(learning_rate=params["lr"])
            train_op = optimizer.minimize(loss=loss, global_step=tf.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)
        eval_metric_ops = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))}
        return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


    def main(unused_argv):
        xs = np.random.RandomState(0).rand(60, 4).astype(np.float32)
        ys = xs[:, :3].argmax(axis=1).astype(np.int32)
        classifier = tf.estimator.Estimator(model_fn=model_fn, model_dir=MODEL_DIR, params={"lr": 0.3})
        train_input_fn = tf.estimator.inputs.numpy_input_fn(
            x={"x": xs}, y=ys, batch_size=10, num_epochs=None, shuffle=True)
        classifier.train(input_fn=train_input_fn, steps=30)
        eval_input_fn = tf.estimator.inputs.numpy_input_fn(x={"x": xs}, y=ys, num_epochs=1, shuffle=False)
        eval_results = classifier.evaluate(input_fn=eval_input_fn)
        print("evaluated", eval_results)


    if __name__ == "__main__":
        tf.app.run()
    """
)


def test_train_then_evaluate_runs_on_tf221_and_returns_the_estimators_results(tmp_path):
    """The tutorial shape: est.train(input_fn, steps) then results = est.evaluate(input_fn)."""
    source = TRAIN_THEN_EVALUATE.replace("MODEL_DIR", repr(str(tmp_path / "model")))
    result = migrate_source(source, path="tutorial.py")
    assert [d.code for d in result.manual_work] == [], [d.message for d in result.manual_work]
    out = result.output
    assert "eval_results = evaluate()" in out and "last_step = step + 30" in out
    assert ".repeat().shuffle(1000).batch(10)" in out  # numpy_input_fn's queue: 1000 examples
    assert any("not in the same random order" in d.message for d in result.diagnostics)
    program = tmp_path / "tutorial.py"
    program.write_text(out)
    proc = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = next(line for line in proc.stdout.splitlines() if line.startswith("evaluated"))
    results = ast.literal_eval(printed.split(" ", 1)[1])
    assert set(results) == {"accuracy", "loss", "global_step"} and results["global_step"] == 30
    assert 0.0 <= results["accuracy"] <= 1.0 and results["loss"] > 0
    assert (tmp_path / "model" / "ckpt-30.index").exists()


ONE_SHOT_INPUT = textwrap.dedent(
    """\
    import tensorflow as tf


    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def main():
        def train_input_fn():
            ds = DATASET
            return ds.repeat().batch(2).make_one_shot_iterator().get_next()

        est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
        est.train(input_fn=train_input_fn, max_steps=5)
    """
)


def test_an_input_fn_returning_its_one_shot_iterators_batches_returns_the_dataset():
    source = ONE_SHOT_INPUT.replace("DATASET", 'tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[2.0]]))')
    result = migrate_source(source, path="one_shot.py")
    assert [d.code for d in result.manual_work] == [], [d.message for d in result.manual_work]
    assert "        return ds.repeat().batch(2)\n" in result.output
    assert "get_next" not in result.output


def test_an_input_fn_batching_with_queues_is_declined_where_it_does():
    source = ONE_SHOT_INPUT.replace("DATASET", "tf.train.shuffle_batch([x, y], 2, 10, 2)")
    result = migrate_source(source, select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and found[0].line == 13
    assert "builds its batches with tf.train.shuffle_batch" in found[0].message


JOB_SHAPES = textwrap.dedent(
    """\
    import tensorflow as tf


    def model_fn(features, labels, mode):
        loss = tf.reduce_sum(features)
        train_op = tf.train.AdamOptimizer().minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def run(kind, rounds):
        BODY
    """
)


@pytest.mark.parametrize(
    "body, line, why",
    [
        (("est = tf.estimator.Estimator(model_fn)\n"
         "    for _ in range(rounds):\n"
         "        est.train(input_fn, steps=10)\n"
         "        est.evaluate(input_fn)"), 13, "the Estimator is trained inside a for loop"),
        (("if kind == 'linear':\n"
         "        est = tf.estimator.LinearClassifier(columns)\n"
         "    else:\n"
         "        est = tf.estimator.Estimator(model_fn)\n"
         "    tf.estimator.train_and_evaluate(est, tf.estimator.TrainSpec(input_fn, 5), tf.estimator.EvalSpec(input_fn))"),
         12, ("`est` is a premade `tf.estimator.LinearClassifier` in one of the if/else branches choosing the"
         " job's Estimator: it has no model_fn for the migrated loop to call (a linear model")),
        ("tf.estimator.train_and_evaluate(kind, tf.estimator.TrainSpec(input_fn, 5), tf.estimator.EvalSpec(input_fn))",
         10, "`kind`, the Estimator this job runs, is a parameter of `run()`: it is built by its callers"),
        (("est = tf.estimator.Estimator(model_fn, model_dir='/tmp/m')\n"
         "    est.train(input_fn, max_steps=5)\n"
         "    est.export_saved_model('/tmp/export', serving_input_fn)"), 13,
         "the serving_input_receiver_fn `serving_input_fn` is neither a function of this module nor bound once"),
        (("est = tf.estimator.Estimator(model_fn, model_dir='/tmp/m')\n"
         "    est.export_saved_model('/tmp/export', serving_input_fn)\n"
         "    est.train(input_fn, max_steps=5)"), 12,
         "`est.export_saved_model(...)`: exporting a SavedModel of the serving signature"),
    ],
)
def test_jobs_of_other_shapes_are_declined_with_what_makes_them_so(body, line, why):
    source = JOB_SHAPES.replace("BODY", body)
    result = migrate_source(source, select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and why in found[0].message and found[0].line == line, found


def test_a_job_in_the_main_guard_is_migrated_there():
    source = DECLINED_BASE.replace("SPEC", SPEC).replace(
        "est = tf.estimator.Estimator", 'if __name__ == "__main__":\n    est = tf.estimator.Estimator').replace(
        "\nTRAIN", "\n    " + TRAIN)
    result = migrate_source(source, select=["TFM403"])
    assert any(d.code == "TFM403" and d.fixed for d in result.diagnostics), result.diagnostics
    out = result.output
    guard = out.index('if __name__ == "__main__":\n    cluster_resolver = ')
    assert out.index("    while step < last_step:") > guard
    compile(out, "guard.py", "exec")


def test_an_inline_session_config_is_dropped_with_a_note_a_bound_one_declined():
    inline = DECLINED_BASE.replace("SPEC", SPEC).replace("TRAIN", TRAIN).replace(
        'model_dir="/tmp/m")', 'config=tf.estimator.RunConfig(model_dir="/tmp/m",'
        " session_config=tf.ConfigProto(allow_soft_placement=True, device_filters=['/job:ps'])))")
    result = migrate_source(inline, select=["TFM403"])
    assert "ConfigProto" not in result.output and "allow_soft_placement" not in result.output
    notes = [d for d in result.diagnostics if "session_config" in d.message]
    assert len(notes) == 1 and notes[0].fixed and notes[0].line == 15
    bound = inline.replace("session_config=tf.ConfigProto(allow_soft_placement=True, device_filters=['/job:ps'])",
                           "session_config=session_config")
    result = migrate_source(bound, select=["TFM403"])
    assert result.output == bound
    assert any("`session_config`" in d.message and not d.fixed for d in result.diagnostics)


def test_model_fn_reading_the_run_config_is_declined_at_its_definition():
    source = DECLINED_BASE.replace("def model_fn(features, labels, mode)", "def model_fn(features, labels, mode, config)")
    source = source.replace("SPEC", "tf.compat.v1.logging.info(config.is_chief)\n    " + SPEC).replace("TRAIN", TRAIN)
    found = [d for d in migrate_source(source, select=["TFM403"]).diagnostics if d.code == "TFM403"]
    assert found and "reads the RunConfig" in found[0].message and found[0].line == 8


def test_a_run_config_parameter_the_model_fn_never_reads_is_passed_none():
    source = DECLINED_BASE.replace("def model_fn(features, labels, mode)", "def model_fn(features, labels, mode, config)")
    result = migrate_source(source.replace("SPEC", SPEC).replace("TRAIN", TRAIN), select=["TFM403"])
    assert [d.message for d in result.diagnostics if d.code == "TFM403" and not d.fixed] == []
    assert 'model(features, labels, mode="train", config=None)' in result.output
    compile(result.output, "job.py", "exec")


def test_without_ps_tasks_the_migration_trains_with_multi_worker_mirrored_on_chief_and_worker(tmp_path):
    """Estimator jobs do not fix their topology in code: the same migration runs
    as MultiWorkerMirroredStrategy when TF_CONFIG names no ps (chief + worker,
    both training in step), to max_steps, the chief checkpointing."""
    _, result = migrate("estimator_tf_config_job.py")
    program = tmp_path / "migrated.py"
    program.write_text(result.output)
    model_dir = tmp_path / "model"
    run = run_cluster(
        program, {"chief": 1, "worker": 1}, args=["--train_steps", "6", "--model_dir", str(model_dir)],
        role_style="tf_config", server_only=(), timeout=240, log_dir=tmp_path / "logs",
    )
    assert run.ok, run.summary()
    assert (model_dir / "ckpt-6.index").exists(), sorted(p.name for p in model_dir.iterdir())


def test_an_evaluator_task_in_tf_config_evaluates_the_chiefs_checkpoints(tmp_path):
    """TF_CONFIG naming an evaluator (Kubeflow's Evaluator replica, Cloud ML): that task
    evaluates the chief's checkpoints as they come and ends after the last step's."""
    _, result = migrate("estimator_tf_config_job.py")
    migrated = tmp_path / "migrated.py"
    migrated.write_text(result.output)
    program = tmp_path / "verbose.py"  # the migrated program with absl's INFO log shown
    program.write_text(
        "import runpy\nimport sys\nfrom absl import logging\n\nlogging.set_verbosity(logging.INFO)\n"
        f"sys.argv[0] = {str(migrated)!r}\nrunpy.run_path({str(migrated)!r}, run_name='__main__')\n")
    model_dir = tmp_path / "model"
    run = run_cluster(
        program, {"chief": 1, "evaluator": 1}, args=["--train_steps", "6", "--model_dir", str(model_dir)],
        role_style="tf_config", server_only=(), timeout=240, log_dir=tmp_path / "logs",
    )
    assert run.ok, run.summary()
    evaluated = [line for line in run.log_text("evaluator", 0).splitlines() if "Saving dict for global step" in line]
    assert evaluated and "Saving dict for global step 6: {'loss': " in evaluated[-1], evaluated
    # the Estimator's chief only trained when an evaluator task evaluated
    assert "Saving dict for global step" not in run.log_text("chief", 0)


def run_check(legacy: Path, migrated: Path, out: Path, steps: int) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(legacy), str(migrated), "--steps", str(steps),
         "--workers", "1", "--out", str(out), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    report = json.loads((out / "report.json").read_text())
    return proc.returncode, report


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, steps",
    [("estimator_tf_config_job.py", 12), ("estimator_layers_job.py", 25), ("estimator_numpy_input_job.py", 40)],
)
def test_check_says_equivalent_against_the_legacy_estimator_job_on_tf215(tmp_path, name, steps):
    _, result = migrate(name)
    migrated = tmp_path / "migrated.py"
    migrated.write_text(result.output)
    code, report = run_check(PROGRAMS / name, migrated, tmp_path / "out", steps)
    assert report["legacy"]["tensorflow"]["version"] == "2.15.1"
    assert code == 0 and report["verdict"] == "equivalent", report.get("reason")
    assert report["strategy"] == "parameter_server"


@pytest.mark.slow
def test_check_says_equivalent_for_two_asynchronous_trainers_statistically(tmp_path):
    """The legacy chief and worker both train (ps:1 chief:1 worker:1); the migration's two
    workers train while its chief coordinates: compared statistically over 3 runs each."""
    _, result = migrate("estimator_tf_config_job.py")
    migrated = tmp_path / "migrated.py"
    migrated.write_text(result.output)
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(PROGRAMS / "estimator_tf_config_job.py"), str(migrated),
         "--steps", "200", "--workers", "2", "--out", str(tmp_path / "out"), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["legacy"]["launch"]["jobs"] == {"ps": 1, "chief": 1, "worker": 1}
    assert report["migrated"]["launch"]["jobs"] == {"chief": 1, "worker": 2, "ps": 1}
    assert proc.returncode == 0 and report["verdict"] == "equivalent", report.get("reason")


@pytest.mark.slow
def test_check_says_not_equivalent_for_a_migration_with_another_learning_rate(tmp_path):
    _, result = migrate("estimator_layers_job.py")
    wrong = result.output.replace('initial_learning_rate=params["learning_rate"]',
                                  'initial_learning_rate=params["learning_rate"] * 1.1')
    assert wrong != result.output
    migrated = tmp_path / "migrated.py"
    migrated.write_text(wrong)
    code, report = run_check(PROGRAMS / "estimator_layers_job.py", migrated, tmp_path / "out", 20)
    assert code == 1 and report["verdict"] == "not_equivalent", report.get("reason")


# --- the two-file trainer (tests/programs/estimator_project/trainer/{task,model}.py):
# task.py builds the job, model.py defines the model_fn and an input_fn factory

TRAINER = PROGRAMS / "estimator_project" / "trainer"


def test_a_model_fn_of_a_sibling_module_is_declined_naming_the_module_and_its_rewrite():
    """The migration rewrites the model_fn (EstimatorSpec -> loss): one in
    trainer/model.py needs that module rewritten in the same run, which TFM403
    does not do; the driver stays byte-identical, the reason located on
    `model.model_fn`, and the report says the two files were analysed together."""
    source = (TRAINER / "task.py").read_text()
    result = migrate_source(source, path=str(TRAINER / "task.py"))
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and not found[0].fixed
    line = source.splitlines()[found[0].line - 1]
    assert line[found[0].column - 1:].startswith("model.model_fn"), line
    message = found[0].message
    assert "`model.model_fn`, defined in the project module `trainer.model`" in message
    assert "trainer/model.py" in message and "the EstimatorSpec it returns becomes the loss" in message
    assert result.project_files == [str(TRAINER / "model.py")]


def test_the_cli_reports_the_trainer_as_analysed_together_and_changes_no_file(tmp_path):
    project = tmp_path / "project"
    import shutil
    shutil.copytree(TRAINER.parent, project)
    before = {p: p.read_bytes() for p in project.rglob("*.py")}
    proc = subprocess.run([sys.executable, "-m", "migrate", str(project), "--write", "--format", "json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    report = json.loads(proc.stdout)
    task = next(f for f in report["files"] if f["path"].endswith("task.py"))
    assert task["status"] == "unchanged"
    assert task["program"]["migrated_together"] is False
    assert [Path(m).name for m in task["program"]["modules"]] == ["model.py"]
    assert {p: p.read_bytes() for p in project.rglob("*.py")} == before


def _one_file_trainer() -> str:
    """The trainer with model.py's definitions moved into task.py: what the hint asks."""
    task = (TRAINER / "task.py").read_text()
    model = (TRAINER / "model.py").read_text()
    definitions = model.split("import tensorflow as tf\n", 1)[1]
    return task.replace("from trainer import model\n", "import numpy as np\n" + definitions).replace("model.", "")


def test_with_the_model_moved_into_the_driver_the_trainer_migrates_with_its_input_fn_factory():
    source = _one_file_trainer()
    result = migrate_source(source, path="task.py")
    assert [d.code for d in result.manual_work] == [], [d.message for d in result.manual_work]
    out = result.output
    compile(out, "task.py", "exec")
    assert estimator_names(out) == []
    # the factory's call makes the input_fn, whose call makes the dataset
    assert "create_per_worker_dataset(lambda: make_input_fn(512, batch_size=32, seed=1)())" in out
    assert "make_input_fn(128, batch_size=32, seed=2)().take(4)" in out
    assert migrate_source(out, path="task.py").output == out


def test_the_migrated_one_file_trainer_trains_on_tf221_without_ps(tmp_path):
    out = migrate_source(_one_file_trainer(), path="task.py").output
    program = tmp_path / "task.py"
    program.write_text(out)
    model_dir = tmp_path / "model"
    run = run_cluster(
        program, {"chief": 1, "worker": 1}, args=["--train-steps", "6", "--model-dir", str(model_dir)],
        role_style="tf_config", server_only=(), timeout=240, log_dir=tmp_path / "logs",
    )
    assert run.ok, run.summary()
    assert (model_dir / "ckpt-6.index").exists(), sorted(p.name for p in model_dir.iterdir())


IMPORTED = textwrap.dedent(
    """\
    import tensorflow as tf
    IMPORTS


    def model_fn(features, labels, mode):
        loss = tf.reduce_sum(features)
        train_op = tf.compat.v1.train.AdamOptimizer().minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def run(chosen_fn):
        est = tf.estimator.Estimator(MODEL_FN, model_dir="/tmp/m")
        est.train(INPUT_FN, max_steps=5)
    """
)


@pytest.mark.parametrize(
    "imports, model_fn, input_fn, why",
    [
        ("from seq2seq import models", "models.transformer_fn", "input_fn",
         "`models.transformer_fn` of `seq2seq.models`, which is not in this project (no seq2seq/models.py"),
        ("import horovod", "horovod.model_fn", "input_fn",
         "`horovod.model_fn`, from the library `horovod`"),
        ("", "chosen_fn", "input_fn", "the model_fn `chosen_fn` is a parameter of `run()`"),
        ("from trainer import data", "model_fn", "lambda: data.read_batches(32)",
         "the input_fn is `data.read_batches` of `trainer.data`, which is not in this project"),
    ],
)
def test_a_model_fn_or_input_fn_from_elsewhere_is_declined_saying_where_it_is(imports, model_fn, input_fn, why):
    source = (IMPORTED.replace("IMPORTS", imports).replace("MODEL_FN", model_fn)
              .replace("INPUT_FN", input_fn))
    result = migrate_source(source, path=str(PROGRAMS / "elsewhere.py"), select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert found and why in found[0].message, [d.message for d in found]


SIBLING_INPUT = textwrap.dedent(
    """\
    import tensorflow as tf


    def read_batches(batch_size):
        dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat()
        return RETURNED
    """
)


@pytest.mark.parametrize(
    "returned, why",
    [
        ("dataset.batch(batch_size)", None),
        ("tf.compat.v1.data.make_one_shot_iterator(dataset.batch(batch_size)).get_next()",
         "the input_fn is `data.read_batches`, defined in the project module `data`"),
    ],
)
def test_an_input_fn_of_a_sibling_module_is_called_there_when_it_needs_no_change(tmp_path, returned, why):
    """`lambda: data.read_batches(32)`: a sibling input_fn returning its dataset
    is called where it is; one that would need its returns rewritten is declined."""
    (tmp_path / "data.py").write_text(SIBLING_INPUT.replace("RETURNED", returned))
    source = IMPORTED.replace("IMPORTS", "import data").replace("MODEL_FN", "model_fn").replace(
        "INPUT_FN", "lambda: data.read_batches(32)")
    result = migrate_source(source, path=str(tmp_path / "driver.py"), select=["TFM403"])
    found = [d for d in result.diagnostics if d.code == "TFM403" and not d.fixed]
    assert result.project_files == [str(tmp_path / "data.py")]
    if why is None:
        assert found == [], [d.message for d in found]
        assert "create_per_worker_dataset(lambda: data.read_batches(32))" in result.output
        compile(result.output, "driver.py", "exec")
    else:
        assert result.output == source
        assert found and why in found[0].message, [d.message for d in found]


@pytest.mark.slow
def test_check_says_equivalent_for_the_one_file_trainer_against_its_legacy_job_on_tf215(tmp_path):
    """`tfmigrate check` takes one script per side: the two-file trainer (declined)
    is checked in the one-file form its hint asks for."""
    legacy = tmp_path / "legacy.py"
    legacy.write_text(_one_file_trainer())
    migrated = tmp_path / "migrated.py"
    migrated.write_text(migrate_source(legacy.read_text(), path="task.py").output)
    code, report = run_check(legacy, migrated, tmp_path / "out", 20)
    assert report["legacy"]["tensorflow"]["version"] == "2.15.1"
    assert code == 0 and report["verdict"] == "equivalent", report.get("reason")
