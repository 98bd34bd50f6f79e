"""TFM403, the Estimator job's SavedModel exports: ``est.export_savedmodel(dir,
serving_input_receiver_fn)`` after the job and the EvalSpec's FinalExporter /
LatestExporter become ``tf.saved_model.save`` of the model_fn's PREDICT mode on
the receiver's inputs (tests/programs/estimator_export_job.py, and inline
fixtures for the raw receiver and the declined shapes). The codemod, the
migrated job on TF 2.21 writing the exports, and the exported SavedModel
serving the trained variables."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "programs" / "estimator_export_job.py"


def migrated_fixture():
    return migrate_source(FIXTURE.read_text(), path=str(FIXTURE))


def attributes(code: str) -> list[str]:
    return [ast.unparse(n) for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Attribute)]


def test_exporting_job_becomes_a_loop_whose_exports_save_the_predict_mode():
    result = migrated_fixture()
    assert [d.message for d in result.manual_work] == []
    out = result.output
    compile(out, "job.py", "exec")
    left = [a for a in attributes(out) if a.startswith(("tf.estimator", "tf.placeholder", "tf.compat.v1.placeholder"))]
    assert left == []
    # the PREDICT branch returns what its export_outputs served; the receiver fn went into `serve`
    assert '    if mode == "infer":\n        return outputs\n' in out
    assert "def signal_receiver_fn" not in out
    assert ("@tf.function(input_signature=[\n        tf.TensorSpec([None, 12], tf.float32, name=SIGNAL),\n    ])\n"
            "    def serve(signal):\n") in out
    assert ('        received = {SIGNAL: signal}\n'
            '        return model(received, None, mode="infer", params=params)\n') in out
    assert 'signatures={"classify": serve, "serving_default": serve}' in out
    # the export after the job, the exporters from the evaluation
    assert "    export_saved_model(args.export_dir)\n" in out
    assert 'export_saved_model(os.path.join(args.model_dir, "export", "final"))' in out
    assert "for version in exported[:-2]:" in out
    fixed = [d.message for d in result.diagnostics if d.code == "TFM403" and d.fixed]
    assert any(m.startswith("Estimator export -> tf.saved_model.save") for m in fixed)
    assert any("FinalExporter" in m for m in fixed) and any("LatestExporter" in m for m in fixed)
    # idempotent
    assert migrate_source(out, path="job.py").output == out


def test_the_migrated_job_trains_and_exports_the_trained_variables_on_tf221(tmp_path):
    program = tmp_path / "job.py"
    program.write_text(migrated_fixture().output)
    model_dir, export_dir = tmp_path / "model", tmp_path / "serving"
    proc = subprocess.run([sys.executable, str(program), "--model_dir", str(model_dir), "--export_dir",
                           str(export_dir), "--steps", "30"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = sorted((model_dir / "export" / "final").iterdir())
    latest = sorted((model_dir / "export" / "latest").iterdir())
    exported = sorted(export_dir.iterdir())
    # evaluations at steps 10, 20 and 30: the final exporter once, the latest one keeping two
    assert len(final) == 1 and len(latest) == 2 and len(exported) == 1, (final, latest, exported)
    assert all(p.name.isdigit() for p in final + latest + exported)
    check = tmp_path / "serve.py"
    check.write_text(textwrap.dedent(f"""\
        import numpy as np
        import tensorflow as tf

        loaded = tf.saved_model.load({str(exported[0])!r})
        print("signatures", sorted(loaded.signatures))
        serve = loaded.signatures["serving_default"]
        print("inputs", sorted(serve.structured_input_signature[1]))
        signals = np.random.RandomState(0).normal(size=(5, 12)).astype(np.float32)
        out = serve(signal=tf.constant(signals))
        print("outputs", sorted(out))
        # the served scores, recomputed from the last checkpoint's variables (TF1 dense layers)
        reader = tf.train.load_checkpoint({str(model_dir)!r})
        names = {{name.split("/.ATTRIBUTES")[0].replace(".S", "/"): name for name in reader.get_variable_to_shape_map()}}
        def var(suffix):
            return reader.get_tensor(next(full for key, full in names.items() if key.endswith(suffix)))
        hidden = np.maximum(signals @ var("dense/kernel") + var("dense/bias"), 0)
        logits = hidden @ var("dense_1/kernel") + var("dense_1/bias")
        scores = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        print("max_diff", float(np.abs(scores - out["scores"].numpy()).max()))
        print("labels_agree", bool((out["label"].numpy() == scores.argmax(axis=1)).all()))
        # the evaluations' summaries, in <model_dir>/eval as the Estimator wrote them
        import glob
        from tensorflow.core.util import event_pb2
        evaluated = set()
        for path in glob.glob({str(model_dir / "eval" / "events*")!r}):
            for raw in tf.data.TFRecordDataset(path):
                event = event_pb2.Event.FromString(raw.numpy())
                evaluated |= {{(value.tag, event.step) for value in event.summary.value}}
        print("evaluated", sorted(evaluated))
        """))
    proc = subprocess.run([sys.executable, str(check)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert printed["signatures"] == "['classify', 'serving_default']"
    assert printed["inputs"] == "['signal']"
    assert printed["outputs"] == "['label', 'scores']"
    assert float(printed["max_diff"]) < 1e-5 and printed["labels_agree"] == "True"
    assert printed["evaluated"] == str(sorted((tag, step) for tag in ("accuracy", "loss") for step in (10, 20, 30)))


RAW_RECEIVER = textwrap.dedent(
    """\
    import tensorflow as tf


    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        prediction = tf.matmul(tf.reshape(features["reading"], [-1, 3]), w)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=prediction)
        loss = tf.reduce_mean(tf.square(prediction - labels))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"reading": [[1.0, 2.0, 3.0]]}, [[1.0]])).repeat().batch(1)


    def main(export_dir):
        est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/raw_receiver")
        est.train(input_fn, max_steps=5)
        reading = tf.placeholder(tf.float32, [1, 3], name="reading")
        receiver_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({"reading": reading})
        est.export_savedmodel(export_dir, receiver_fn)
    """
)


def test_a_raw_receiver_of_placeholders_becomes_the_signature_with_a_free_batch_dimension():
    result = migrate_source(RAW_RECEIVER, path="raw.py")
    assert [d.message for d in result.manual_work] == []
    out = result.output
    assert [a for a in attributes(out) if a.startswith(("tf.estimator", "tf.compat.v1.placeholder"))] == []
    # build_raw_serving_input_receiver_fn made its placeholders with a None batch dimension
    assert 'tf.TensorSpec([None, 3], tf.float32, name="reading"),' in out
    assert "reading = tf" not in out and "receiver_fn = " not in out
    # a single predictions tensor is served under "output", as PredictOutput named it
    assert '        return {"output": prediction}\n' in out
    assert 'signatures={"serving_default": serve}' in out
    assert "    export_saved_model(export_dir)\n" in out


DECLINED = textwrap.dedent(
    """\
    import tensorflow as tf


    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        prediction = tf.matmul(features["reading"], w)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=prediction, export_outputs=OUTPUTS)
        loss = tf.reduce_mean(tf.square(prediction - labels))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def serving_input_fn():
        RECEIVER


    def main(input_fn, export_dir):
        est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/declined")
        est.train(input_fn=lambda: input_fn(), max_steps=5)
        EXPORT
    """
)
_RECEIVER = ('inputs = {"reading": tf.placeholder(tf.float32, [None, 3])}\n'
             "    return tf.estimator.export.ServingInputReceiver(inputs, inputs)")
_EXPORT = "est.export_savedmodel(export_dir, serving_input_fn)"


@pytest.mark.parametrize(
    "outputs, receiver, export, line, why",
    [
        ("None", ('scale = tf.placeholder(tf.float32, [])\n'
                  '    inputs = {"reading": tf.placeholder(tf.float32, [None, 3])}\n'
                  '    return tf.estimator.export.ServingInputReceiver({"reading": inputs["reading"] * scale}, inputs)'),
         _EXPORT, 15, "a placeholder of the serving_input_receiver_fn that is not one of its receiver tensors"),
        ('{"scores": tf.estimator.export.ClassificationOutput(scores=prediction)}', _RECEIVER, _EXPORT, 8,
         "export_outputs['scores'] is no PredictOutput: tf.saved_model.save writes Predict signatures only"),
        ("None", _RECEIVER, "est.export_savedmodel(export_dir, serving_input_fn, checkpoint_path='/tmp/c/ckpt-3')",
         22, "`export_savedmodel(checkpoint_path=...)`: not carried by the migration"),
        ("None", _RECEIVER, "est.export_savedmodel(export_dir, serving_input_fn, as_text=True)", 22,
         "`export_savedmodel(as_text=...)`"),
    ],
)
def test_exports_the_migration_cannot_carry_are_declined_where_they_are(outputs, receiver, export, line, why):
    source = DECLINED.replace("OUTPUTS", outputs).replace("RECEIVER", receiver).replace("EXPORT", export)
    result = migrate_source(source, path="declined.py", select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and why in found[0].message and found[0].line == line, found


def test_the_valid_receiver_of_the_declined_fixture_migrates():
    """The declined shapes above differ from a migrating job only in what they name."""
    source = DECLINED.replace("OUTPUTS", "None").replace("RECEIVER", _RECEIVER).replace("EXPORT", _EXPORT)
    result = migrate_source(source, path="valid.py")
    assert [d.message for d in result.manual_work] == []
    assert 'tf.TensorSpec([None, 3], tf.float32, name="reading"),' in result.output


PREMADE_AND_EXPERIMENT = textwrap.dedent(
    """\
    import tensorflow as tf
    from tensorflow.contrib.learn.python.learn import learn_runner

    import trainer_model


    def feed():
        return tf.data.Dataset.from_tensor_slices(({"size": [[1.0]]}, [1])).repeat().batch(1)


    def local_model_fn(features, labels, mode):
        loss = tf.reduce_sum(features["size"])
        train_op = tf.train.AdamOptimizer().minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def make_experiment(run_config, hparams):
        BODY


    learn_runner.run(make_experiment, run_config=tf.contrib.learn.RunConfig(model_dir="/tmp/e"))
    """
)


@pytest.mark.parametrize(
    "body, line, why",
    [
        (("est = tf.contrib.learn.DNNClassifier(hidden_units=[8], feature_columns=columns, config=run_config)\n"
          "    return tf.contrib.learn.Experiment(est, train_input_fn=feed, eval_input_fn=feed, train_steps=5)"),
         18, ("the Experiment's Estimator, `tf.contrib.learn.DNNClassifier`, is a premade Estimator: it has no model_fn"
             " for the migrated loop to call (ReLU dense layers of hidden_units")),
        ("return tf.contrib.learn.Experiment(trainer_model.build(run_config), train_input_fn=feed, eval_input_fn=feed)",
         18, ("the Experiment's Estimator is built by `trainer_model.build(...)` of `trainer_model`, which is not in"
             " this project")),
        (("est = tf.estimator.Estimator(local_model_fn, config=run_config)\n"
          "    return tf.contrib.learn.Experiment(est, train_input_fn=feed, eval_input_fn=feed, train_steps=5)"),
         19, ("a tf.contrib.learn Experiment (run by learn_runner.run or its own methods, in the role TF_CONFIG"
             " gives): TFM403 migrates tf.estimator.train_and_evaluate jobs")),
    ],
)
def test_experiment_jobs_are_declined_at_their_first_blocker(body, line, why):
    source = PREMADE_AND_EXPERIMENT.replace("BODY", body)
    result = migrate_source(source, path="experiment.py", select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and why in found[0].message and found[0].line == line, found


CALLER_BUILT = textwrap.dedent(
    """\
    import tensorflow as tf


    def run_training(estimator, input_fn):
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=5), tf.estimator.EvalSpec(input_fn))


    def main(config_path, input_fn):
        network = build_network_from(config_path)
        estimator = tf.estimator.Estimator(network, model_dir="/tmp/caller")
        run_training(estimator, input_fn)
    """
)


def test_an_estimator_handed_to_the_job_is_declined_at_its_callers_model_fn():
    result = migrate_source(CALLER_BUILT, path="caller.py", select=["TFM403"])
    assert result.output == CALLER_BUILT
    found = [(d.line, d.message) for d in result.diagnostics if d.code == "TFM403"]
    assert found == [(11, ("Estimator job not migrated: `estimator`, the Estimator `run_training()` runs, is built by"
                          " its caller with the model_fn `network`, bound to `build_network_from(config_path)`: the"
                          " migration rewrites the model_fn the job calls, which must be a function of this module"))]


def test_a_premade_estimator_job_is_declined_naming_its_numerics_and_the_tf2_port():
    source = textwrap.dedent(
        """\
        import tensorflow as tf


        def feed():
            return tf.data.Dataset.from_tensor_slices(({"size": [[1.0]]}, [1.0])).repeat().batch(1)


        regressor = tf.estimator.LinearRegressor(feature_columns=[tf.feature_column.numeric_column("size")])
        tf.estimator.train_and_evaluate(regressor, tf.estimator.TrainSpec(feed, max_steps=5),
                                        tf.estimator.EvalSpec(feed))
        """)
    result = migrate_source(source, path="premade.py", select=["TFM403"])
    assert result.output == source
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and found[0].line == 8, found
    message = found[0].message
    assert "`regressor` is a premade `tf.estimator.LinearRegressor`: it has no model_fn" in message
    assert "FTRL at learning rate min(0.2, 1/sqrt(number of feature columns))" in message
    assert "mean squared error summed over the batch in TF 1.x (loss_reduction=SUM)" in message
    assert "Keras model on preprocessing layers" in message and "does not train the same numbers" in message


def test_a_receiver_parsing_tf_examples_parses_them_in_the_serving_function():
    receiver = ('serialized = tf.placeholder(tf.string, [None], name="input_example_tensor")\n'
                '    features = tf.parse_example(serialized, {"reading": tf.FixedLenFeature([3], tf.float32)})\n'
                '    return tf.estimator.export.ServingInputReceiver(features, {"examples": serialized})')
    source = DECLINED.replace("OUTPUTS", "None").replace("RECEIVER", receiver).replace("EXPORT", _EXPORT)
    result = migrate_source(source, path="parsing.py")
    assert [d.message for d in result.manual_work] == []
    out = result.output
    assert ('    @tf.function(input_signature=[\n'
            '        tf.TensorSpec([None], tf.string, name="examples"),\n'
            '    ])\n'
            '    def serve(serialized):\n'
            "        # the serving_input_receiver_fn's features, then the model_fn's PREDICT mode on them\n"
            '        features = tf.compat.v1.parse_example(serialized, {"reading": tf.io.FixedLenFeature([3], tf.float32)})\n'
            '        return model(features, None, mode="infer")\n') in out
    assert "def serving_input_fn" not in out


def test_a_parsing_receiver_parses_serialized_examples_in_the_serving_function():
    export = ('spec = {"reading": tf.FixedLenFeature([3], tf.float32)}\n'
              '    est.export_saved_model(export_dir, tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))')
    source = DECLINED.replace("OUTPUTS", "None").replace("RECEIVER", "return None").replace("EXPORT", export)
    result = migrate_source(source, path="parsing.py")
    assert [d.message for d in result.manual_work] == []
    out = result.output
    assert ('    @tf.function(input_signature=[\n'
            '        tf.TensorSpec([None], tf.string, name="examples"),\n'
            '    ])\n'
            '    def serve(serialized):\n'
            "        # the model_fn's PREDICT mode on the serving inputs\n"
            '        return model(tf.io.parse_example(serialized, spec), None, mode="infer")\n') in out
    assert "    spec = {" in out and "    export_saved_model(export_dir)\n" in out


@pytest.mark.slow
def test_check_says_equivalent_for_the_exporting_job_against_its_legacy_run_on_tf215(tmp_path):
    migrated = tmp_path / "migrated.py"
    migrated.write_text(migrated_fixture().output)
    out = tmp_path / "check"
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(FIXTURE), str(migrated), "--steps", "20", "--workers", "1",
         "--out", str(out), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "EQUIVALENT" in proc.stdout and "legacy TensorFlow 2.15" in proc.stdout


def test_exports_of_two_receivers_get_a_serving_function_each():
    source = FIXTURE.read_text().replace("def main(_):", textwrap.dedent("""\
        def window_receiver_fn():
            window = tf.placeholder(tf.float32, [None, 12])
            return tf.estimator.export.ServingInputReceiver({SIGNAL: window}, {"window": window})


        def main(_):""")).replace("serving_input_receiver_fn=signal_receiver_fn)\n\n",
                                  "serving_input_receiver_fn=window_receiver_fn)\n\n")
    assert "serving_input_receiver_fn=window_receiver_fn)" in source
    result = migrate_source(source, path="two.py")
    assert [d.message for d in result.manual_work] == []
    out = result.output
    assert "    def serve_window_receiver(window):\n" in out and "    def serve_signal_receiver(signal):\n" in out
    assert "        return model({SIGNAL: window}, None, mode=\"infer\", params=params)\n" in out
    assert "    export_saved_model(args.export_dir, serve_window_receiver)\n" in out
    assert 'export_saved_model(os.path.join(args.model_dir, "export", "final"), serve_signal_receiver)' in out
    assert "def window_receiver_fn" not in out and "def signal_receiver_fn" not in out
    compile(out, "two.py", "exec")
