"""TFM403 on the shapes of the real Estimator jobs: a CNN model_fn whose helper
blocks apply tf.layers.batch_normalization (switched by the mode, the moving
averages updated through UPDATE_OPS control dependencies; or left in inference
mode), a LoggingTensorHook of the TrainSpec logging a tensor the model_fn names,
numpy_input_fn input (tests/programs/estimator_batch_norm_hook_job.py). The
codemod and its located reasons, TF1's batch normalization written out
(TFM104), the migrated job on TF 2.21, and (slow: the legacy side runs on a TF
2.15 environment) the written-out layer against TF 2.15's own and ``tfmigrate
check`` against the legacy job."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "programs"
FIXTURE = PROGRAMS / "estimator_batch_norm_hook_job.py"


def migrated_fixture():
    return migrate_source(FIXTURE.read_text(), path=str(FIXTURE))


def manual(result) -> list[tuple[str, int, str]]:
    return [(d.code, d.line, d.message) for d in result.manual_work]


def test_batch_norm_and_logging_hook_job_becomes_a_strategy_loop():
    result = migrated_fixture()
    assert manual(result) == []
    out = result.output
    compile(out, "job.py", "exec")
    code = [ast.unparse(n) for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Attribute)]
    assert not [c for c in code if c.startswith(("tf.estimator", "tf.layers", "tf.train.LoggingTensorHook"))], code
    # TF1's layer written out, called where the model called tf.layers.batch_normalization
    assert "def tf1_batch_normalization(" in out
    assert "normalized = tf1_batch_normalization(conv, training=is_training, momentum=0.9)" in out
    assert "net = tf1_batch_normalization(net)  # inference mode" in out
    # the control dependencies on UPDATE_OPS went with minimize: the updates run with the step
    model_fn = next(n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.FunctionDef)
                    and n.name == "shapes_model_fn")
    assert "UPDATE_OPS" not in ast.unparse(model_fn) and "control_dependencies" not in ast.unparse(model_fn)
    # the TRAIN mode returns the loss and the tensor the hook logged, under the hook's tag
    assert '        return loss, {"probabilities": outputs["probabilities"]}\n' in out
    assert "loss, logged = model(features, labels, mode=\"train\")" in out
    assert "if (step - first_step) % 10 == 0:" in out
    assert 'logging.info("%s", ", ".join(f"{tag} = {value}" for tag, value in logged.items()))' in out
    # idempotent
    assert migrate_source(out, path="job.py").output == out


def test_the_migrated_job_trains_on_tf221_and_logs_what_the_hook_logged(tmp_path):
    """No TF_CONFIG: one task, MultiWorkerMirroredStrategy. The hook's tensor is
    logged on the first step and every 10 after; the moving averages of the
    switched layer moved, those of the inference-mode one did not."""
    out = migrated_fixture().output
    program = tmp_path / "job.py"
    program.write_text(out + textwrap.dedent(
        """

        def moving_statistics():
            return {v.name: v.numpy().tolist() for v in tf.compat.v1.global_variables() if "moving" in v.name}
        """))
    model_dir = tmp_path / "model"
    runner = tmp_path / "run.py"
    runner.write_text(textwrap.dedent(
        f"""\
        import json, sys
        sys.argv = ["job.py", "--steps", "30", "--model_dir", {str(model_dir)!r}]
        sys.path.insert(0, {str(tmp_path)!r})
        import job
        from absl import app
        try:
            app.run(job.main)
        except SystemExit:
            pass
        import tensorflow as tf
        reader = tf.train.load_checkpoint({str(model_dir)!r})
        print("MOVING", json.dumps({{k: reader.get_tensor(k).tolist() for k in reader.get_variable_to_shape_map()
                                    if "moving" in k and "OPTIMIZER" not in k}}))
        """))
    proc = subprocess.run([sys.executable, str(runner)], capture_output=True, text=True, timeout=600, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logged = [line for line in proc.stderr.splitlines() if "probabilities = [[" in line]
    assert len(logged) == 3, proc.stderr[-3000:]  # steps 1, 11 and 21 of 30
    moving = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("MOVING"))[7:])
    # checkpoint keys of the template's variables: model/batch_normalization.Smoving_mean/...
    switched = {k: v for k, v in moving.items() if "/batch_normalization.S" in k}
    frozen = {k: v for k, v in moving.items() if "/batch_normalization_1.S" in k}
    assert len(switched) == len(frozen) == 2, moving  # moving_mean and moving_variance of each
    assert all(any(x != 0.0 for x in v) for k, v in switched.items() if "moving_mean" in k)
    assert all(all(x == 0.0 for x in v) for k, v in frozen.items() if "moving_mean" in k)
    assert all(all(x == 1.0 for x in v) for k, v in frozen.items() if "moving_variance" in k)


JOB = textwrap.dedent(
    """\
    import tensorflow as tf


    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 2)
        probabilities = tf.nn.softmax(logits, name="probs")
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        MODEL_TAIL


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [1])).repeat().batch(1)


    est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
    HOOK_LINE
    est.train(input_fn, max_steps=10, hooks=[hook])
    """
)
TRAIN_BRANCH = """if mode == tf.estimator.ModeKeys.TRAIN:
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return tf.estimator.EstimatorSpec(mode, loss=loss)"""


def job(hook: str, tail: str = TRAIN_BRANCH) -> str:
    return JOB.replace("HOOK_LINE", hook).replace("MODEL_TAIL", tail)


def test_a_logging_hook_on_a_named_tensor_is_carried():
    result = migrate_source(job('hook = tf.train.LoggingTensorHook(["probs:0"], every_n_iter=5)'), path="job.py")
    assert manual(result) == []
    assert '        return loss, {"probs:0": probabilities}\n' in result.output
    assert "if (step - first_step) % 5 == 0:" in result.output


@pytest.mark.parametrize(
    "hook, tail, line, why",
    [
        ('hook = tf.train.LoggingTensorHook({"p": "probs"}, every_n_secs=30)', TRAIN_BRANCH, 19,
         "`LoggingTensorHook(every_n_secs=...)`: the migrated loop logs every_n_iter steps only"),
        ('hook = tf.train.LoggingTensorHook({"w": "dense/kernel"}, every_n_iter=5)', TRAIN_BRANCH, 4,
         "LoggingTensorHook logs `dense/kernel`, which is not one tensor named so in the model_fn's own statements"),
        ('hook = tf.train.ProfilerHook(save_steps=10, output_dir="/tmp/p")', TRAIN_BRANCH, 19,
         "`hooks`: SessionRunHooks run by the Estimator's MonitoredTrainingSession"),
        ('hook = tf.train.LoggingTensorHook({"p": "probs"}, every_n_iter=5)',
         """train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)""", 9,
         "the model_fn's TRAIN return is not in an `if mode == TRAIN:` branch of its own"),
    ],
)
def test_hooks_the_loop_cannot_carry_are_declined_where_they_are(hook, tail, line, why):
    source = job(hook, tail)
    result = migrate_source(source, path="job.py")
    found = [(d.line, d.message) for d in result.manual_work if d.code == "TFM403"]
    assert found and found[0][0] == line and why in found[0][1], found
    assert "est.train(" in result.output  # the job is left as it was


BATCH_NORM = textwrap.dedent(
    """\
    import tensorflow as tf


    def net(x, training):
        return tf.layers.batch_normalization(x, CALL_ARGS)
    """
)


@pytest.mark.parametrize(
    "args, why",
    [
        ("training=training", "the TF1 train op did not run the moving-average updates"),
        ("renorm=True", "`renorm` is not reproduced"),
        ("axis=1", "`axis=1`: only the last axis (channels-last data) is reproduced"),
        ("gamma_regularizer=tf.keras.regularizers.l2(0.1)", "`gamma_regularizer` is not reproduced"),
    ],
)
def test_batch_normalization_it_cannot_write_out_exactly_is_left_with_a_reason(args, why):
    result = migrate_source(BATCH_NORM.replace("CALL_ARGS", args), path="net.py", select=["TFM104"])
    found = [d.message for d in result.diagnostics if d.code == "TFM104"]
    assert found and why in found[0], found
    assert "tf.layers.batch_normalization(" in result.output


@pytest.mark.parametrize("args", ["training=False", "momentum=0.9, epsilon=1e-5"])
def test_batch_normalization_in_inference_mode_needs_no_update_ops(args):
    result = migrate_source(BATCH_NORM.replace("CALL_ARGS", args), path="net.py", select=["TFM104"])
    assert f"tf1_batch_normalization(x, {args})" in result.output


def test_batch_normalization_with_update_ops_read_is_written_out():
    source = BATCH_NORM.replace("CALL_ARGS", "training=training") + (
        "\n\nupdates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)\n")
    result = migrate_source(source, path="net.py", select=["TFM104"])
    assert "tf1_batch_normalization(x, training=training)" in result.output


# --- TF 2.15's own tf.compat.v1.layers.batch_normalization against the written-out one

COMPARE = textwrap.dedent(
    """\
    import json, sys
    import numpy as np
    import tensorflow as tf
    sys.path.insert(0, REPO)
    from migrate.codemod import tf1_layers
    which, flag = sys.argv[1], sys.argv[2]
    rng = np.random.RandomState(0)
    images = rng.normal(size=(6, 5, 5, 3)).astype(np.float32) * 3 + 1
    rows = rng.normal(size=(8, 4)).astype(np.float32) * 2 - 1


    def model(images, rows, training):
        bn = tf.compat.v1.layers.batch_normalization if which == "tf1" else tf1_layers.tf1_batch_normalization
        a = bn(images, training=training)  # fused kernel
        b = bn(rows, training=training, momentum=0.9)  # moments + batch_normalization
        c = bn(images, training=training, center=False, name="plain")
        return (tf.reduce_mean(tf.square(a - 0.5)) + tf.reduce_mean(tf.square(b - rows * 0.3))
                + tf.reduce_mean(tf.square(c - images * 0.2)))


    if which == "tf2":  # the written-out layer in a TF2 step
        template = tf.compat.v1.make_template("model", model)
        template(images, rows, flag == "true")
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = template(images, rows, flag == "true")
            grads = tape.gradient(loss, template.trainable_variables)
            optimizer.apply_gradients(zip(grads, template.trainable_variables))
            return loss

        losses = [float(step()) for _ in range(5)]
        values = {v.name.replace("model/", ""): v.numpy().tolist() for v in template.variables}
    else:  # a TF1 graph whose train op depends on UPDATE_OPS
        tf.compat.v1.disable_v2_behavior()
        training = {"true": True, "false": False, "tensor": tf.constant(True)}[flag]
        loss = model(images, rows, training)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            losses = [float(session.run([loss, train])[0]) for _ in range(5)]
            values = {v.name: session.run(v).tolist() for v in tf.compat.v1.global_variables()}
    print(json.dumps({"losses": losses, "values": values}))
    """
)


def tf215_python() -> str:
    from migrate.runtime import legacy_env

    try:
        return str(legacy_env.ensure(legacy_env.legacy_env("2.15"), quiet=True).python)
    except legacy_env.LegacyEnvError as e:
        pytest.skip(f"no TF 2.15 environment: {e}")


def trajectory(python: str, script: Path, which: str, flag: str) -> dict:
    proc = subprocess.run([python, str(script), which, flag], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["true", "false", "tensor"])
def test_written_out_batch_normalization_is_tf215s_bit_for_bit(tmp_path, flag):
    """Losses, trained and moving variables after 5 steps: TF 2.15's layer and the
    written-out one in a TF1 graph (the UPDATE_OPS control dependency), and the
    written-out one in a TF2 tf.function step on TF 2.21 (updates with the step)."""
    script = tmp_path / "compare.py"
    script.write_text(COMPARE.replace("REPO", repr(str(REPO))))
    legacy = tf215_python()
    expected = trajectory(legacy, script, "tf1", flag)
    assert trajectory(legacy, script, "shim", flag) == expected
    if flag != "tensor":
        assert trajectory(sys.executable, script, "tf2", flag) == expected


@pytest.mark.slow
def test_check_says_equivalent_against_the_legacy_batch_norm_job_on_tf215(tmp_path):
    migrated = tmp_path / "migrated.py"
    migrated.write_text(migrated_fixture().output)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(FIXTURE), str(migrated), "--steps", "30",
         "--workers", "1", "--out", str(out), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    report = json.loads((out / "report.json").read_text())
    assert report["legacy"]["tensorflow"]["version"] == "2.15.1"
    assert proc.returncode == 0 and report["verdict"] == "equivalent", report.get("reason")


SPEC_HOOK = textwrap.dedent(
    """\
    import tensorflow as tf


    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features["x"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
            hook = tf.train.LoggingTensorHook(TENSORS, EVERY)
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[hook])
        return tf.estimator.EstimatorSpec(mode, loss=loss)


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [1])).repeat().batch(1)


    est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m", params={"log_every": 4})
    est.train(input_fn, max_steps=10)
    """
)


def spec_hook(tensors: str, every: str) -> str:
    return SPEC_HOOK.replace("TENSORS", tensors).replace("EVERY", every)


def test_a_logging_hook_of_the_estimator_spec_is_carried_with_its_tensors_and_cadence():
    source = spec_hook('{"loss": loss, "mean_logit": tf.reduce_mean(logits)}', 'every_n_iter=params["log_every"]')
    result = migrate_source(source, path="job.py")
    assert manual(result) == []
    out = result.output
    returned = next(line for line in out.splitlines() if line.startswith("        return loss, "))
    assert returned.startswith('        return loss, {"loss": loss, "mean_logit": ') and "reduce_mean(logits)}" in returned
    assert "train.LoggingTensorHook(" not in out and "hook" not in out.split("def input_fn")[0]
    assert 'if (step - first_step) % params["log_every"] == 0:' in out


@pytest.mark.parametrize(
    "tensors, every, line, why",
    [
        ('{"loss": loss}', "every_n_secs=60", 9, "`LoggingTensorHook(every_n_secs=...)`"),
        ('{"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))[1]}', "every_n_iter=5", 9,
         "which has no counterpart in the migrated step"),
        ('{"loss": loss}', "every_n_iter=int(loss)", 9, "every_n_iter reads `loss`"),
    ],
)
def test_estimator_spec_hooks_the_loop_cannot_carry_are_declined(tensors, every, line, why):
    result = migrate_source(spec_hook(tensors, every), path="job.py")
    found = [(d.line, d.message) for d in result.manual_work if d.code == "TFM403"]
    assert found and found[0][0] == line and why in found[0][1], found


# --- the Estimator chosen by a flag (tests/programs/estimator_flag_choice_job.py)

FLAG_CHOICE = PROGRAMS / "estimator_flag_choice_job.py"


def test_an_estimator_chosen_in_branches_becomes_the_model_fn_and_params_each_branch_binds():
    result = migrate_source(FLAG_CHOICE.read_text(), path=str(FLAG_CHOICE))
    assert manual(result) == []
    out = result.output
    assert (
        '    if FLAGS.model_type == "conv":\n'
        "        model_fn = conv_model\n"
        '        model_params = {"learning_rate": FLAGS.learning_rate, "classes": 3}\n'
        '    elif FLAGS.model_type == "mlp":\n'
        '        model_params = {"learning_rate": FLAGS.learning_rate, "classes": 3, "hidden_units": 12}\n'
        "        model_fn = mlp_model\n"
        "    else:\n"
        '        print(f"No such model type: {FLAGS.model_type}")\n'
        "        sys.exit(1)\n"
    ) in out
    assert 'model = tf.compat.v1.make_template("model", model_fn)' in out
    assert 'loss = model(features, labels, mode="train", params=model_params)' in out
    # both model_fns lost their EstimatorSpec and optimizer, kept their layers
    code = [ast.unparse(n) for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Attribute)]
    assert not [c for c in code if c.startswith("tf.estimator")], code
    assert out.splitlines().count("    return loss") == 2
    # the training loop comes after the choice
    assert out.index("sys.exit(1)") < out.index("cluster_resolver = ")
    assert migrate_source(out, path="job.py").output == out


def test_each_choice_of_the_migrated_job_trains_on_tf221(tmp_path):
    program = tmp_path / "job.py"
    program.write_text(migrate_source(FLAG_CHOICE.read_text(), path=str(FLAG_CHOICE)).output)
    for model_type in ("mlp", "conv"):
        model_dir = tmp_path / model_type
        proc = subprocess.run(
            [sys.executable, str(program), "--model_type", model_type, "--steps", "10", "--model_dir", str(model_dir)],
            capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (model_dir / "ckpt-10.index").exists()
    proc = subprocess.run([sys.executable, str(program), "--model_type", "tree"], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 1 and "No such model type: tree" in proc.stdout


@pytest.mark.parametrize(
    "old, new, line, why",
    [
        ('tf.train.GradientDescentOptimizer(learning_rate=params["learning_rate"])',
         'tf.train.AdamOptimizer(learning_rate=params["learning_rate"])', 49,
         "the model_fns the if statement chooses between (`conv_model`, `mlp_model`) differ in their optimizer"),
        ('        sys.exit(1)\n', '        model_params = None\n', 55,
         "a branch of the if statement choosing `classifier` neither builds the Estimator nor ends the program"),
        ('model_fn=mlp_model, config=config,', 'model_fn=mlp_model, config=config, model_dir="/tmp/mlp",', 54,
         "the Estimators the if statement chooses between differ in `model_dir`"),
    ],
)
def test_choices_one_loop_cannot_carry_are_declined_where_they_are(old, new, line, why):
    source = FLAG_CHOICE.read_text()
    assert old in source
    head, _, tail = source.rpartition(old)  # the last one: mlp_model's
    result = migrate_source(head + new + tail, path="job.py")
    found = [(d.line, d.message) for d in result.manual_work if d.code == "TFM403"]
    assert found and found[0][0] == line and why in found[0][1], found


@pytest.mark.slow
def test_check_says_equivalent_against_the_legacy_flag_choice_job_on_tf215(tmp_path):
    migrated = tmp_path / "migrated.py"
    migrated.write_text(migrate_source(FLAG_CHOICE.read_text(), path=str(FLAG_CHOICE)).output)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(FLAG_CHOICE), str(migrated), "--steps", "30",
         "--workers", "1", "--out", str(out), "--no-plot"],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    report = json.loads((out / "report.json").read_text())
    assert report["legacy"]["tensorflow"]["version"] == "2.15.1"
    assert proc.returncode == 0 and report["verdict"] == "equivalent", report.get("reason")


@pytest.mark.parametrize(
    "model, line, where",
    [
        ('logits = tf.keras.layers.Dense(2)(features["x"])', 9, ""),
        ('logits = build_head()(features["x"])', 5, " (in `build_head()`, which the model_fn calls)"),
    ],
)
def test_a_model_fn_building_keras_layers_is_declined_where_it_does(model, line, where):
    """The Estimator called the model_fn once per graph; the migrated step calls it at
    every step, and Keras 3 layers keep variables make_template does not share."""
    source = textwrap.dedent(
        """\
        import tensorflow as tf


        def build_head():
            return tf.keras.Sequential([tf.keras.layers.Dense(2, name="head")])


        def model_fn(features, labels, mode):
            MODEL
            loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [1])).repeat().batch(1)


        est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
        est.train(input_fn, max_steps=10)
        """).replace("MODEL", model)
    result = migrate_source(source, path="job.py")
    found = [(d.line, d.message) for d in result.manual_work if d.code == "TFM403"]
    assert found and found[0][0] == line, found
    assert "the model_fn builds a Keras layer or model" in found[0][1] and where in found[0][1], found
    assert "est.train(" in result.output


UPDATE_OPS_JOB = textwrap.dedent(
    """\
    import tensorflow as tf


    def block(x, training):
        return tf.layers.batch_normalization(x, training=training BN_ARGS)


    def model_fn(features, labels, mode):
        logits = tf.layers.dense(block(features["x"], mode == tf.estimator.ModeKeys.TRAIN), 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [1])).repeat().batch(1)


    est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
    est.train(input_fn, max_steps=10)
    """
)


def test_update_ops_bound_to_a_name_go_with_the_control_dependencies_they_fed():
    result = migrate_source(UPDATE_OPS_JOB.replace(" BN_ARGS", ""), path="job.py")
    assert manual(result) == []
    model_fn = result.output.split("def model_fn(")[1].split("\n\n\n")[0]
    assert "update_ops" not in model_fn and "control_dependencies" not in model_fn, model_fn
    assert "return tf1_batch_normalization(x, training=training)" in result.output


def test_a_model_fn_running_a_layer_tfm104_left_is_declined_at_that_layer():
    result = migrate_source(UPDATE_OPS_JOB.replace(" BN_ARGS", ", renorm=True"), path="job.py")
    found = [(d.line, d.message) for d in result.manual_work if d.code == "TFM403"]
    assert found == [(5, ("Estimator job not migrated: the model_fn runs `tf.layers.batch_normalization` (in `block()`,"
                         " which the model_fn calls), which TF 2.21 does not have and which is left as TF1 code (see"
                         " its own diagnostic)"))], found
    assert any(d.code == "TFM104" and d.line == 5 and "`renorm` is not reproduced" in d.message
               for d in result.diagnostics)
