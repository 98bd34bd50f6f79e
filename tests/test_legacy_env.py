"""The legacy side's own TensorFlow: which programs need it, where its cached
environment lives, how creation is serialised and how it fails (no network
needed: pip is pointed at a closed loopback port). One slow test builds the
real TF 2.15 environment and runs a legacy program on it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from migrate.runtime import check, legacy_env

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "programs"

ESTIMATOR_JOB = textwrap.dedent(
    """\
    import tensorflow as tf

    def build_model(features, labels, mode, params):
        logits = tf.layers.dense(features["x"], 1)
        loss = tf.losses.mean_squared_error(labels, logits)
        step = tf.train.get_global_step()
        train_op = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=step)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    runner = tf.estimator.Estimator(model_fn=build_model, model_dir="/tmp/m")
    """
)

LEARN_RUNNER_JOB = textwrap.dedent(
    """\
    from tensorflow.contrib.learn.python.learn import learn_runner

    def make_experiment(run_config, hparams):
        return None

    learn_runner.run(make_experiment, schedule="train_and_evaluate")
    """
)

PLAIN_JOB = textwrap.dedent(
    """\
    import tensorflow as tf
    # an Estimator port of this job (tf.estimator.Estimator) is planned
    doc = "tf.contrib.learn is not used here"
    server = tf.train.Server(tf.train.ClusterSpec({"ps": ["a:1"]}), job_name="ps")
    """
)

PY2_ESTIMATOR_JOB = textwrap.dedent(
    """\
    import tensorflow as tf
    print "building"
    config = tf.contrib.learn.RunConfig()
    """
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def offline_pip(monkeypatch, tmp_path):
    """pip inherits an index nobody listens on and no config of the user's."""
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{_closed_port()}/simple")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv(legacy_env.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


# ----------------------------------------------------------------- which programs need it


def test_estimator_and_contrib_learn_programs_are_found_with_their_line():
    assert legacy_env.needs_estimator(ESTIMATOR_JOB) == "line 8: tf.estimator.EstimatorSpec"
    assert legacy_env.needs_estimator(LEARN_RUNNER_JOB) == (
        "line 1: tensorflow.contrib.learn.python.learn.learn_runner"
    )
    assert legacy_env.needs_estimator("from tensorflow.compat.v1 import estimator as est\n") == (
        "line 1: tensorflow.compat.v1.estimator"
    )
    assert legacy_env.needs_estimator("import tensorflow_estimator as tfe\n") == "line 1: tensorflow_estimator"


def test_mentions_in_comments_and_strings_do_not_count():
    assert legacy_env.needs_estimator(PLAIN_JOB) is None
    assert legacy_env.needs_estimator((PROGRAMS / "tf_ps_worker.py").read_text()) is None


def test_python2_sources_are_scanned_line_by_line():
    assert legacy_env.needs_estimator(PY2_ESTIMATOR_JOB) == "line 3: tf.contrib.learn"
    assert legacy_env.needs_estimator('print "x"  # tf.estimator later\n') is None


def test_auto_choice_sends_only_estimator_programs_to_the_old_tensorflow(monkeypatch, tmp_path):
    monkeypatch.setenv(legacy_env.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(legacy_env, "installed_tf_version", lambda: "2.21.0")
    plain = legacy_env.choose(None, PLAIN_JOB)
    assert plain.env is None
    est = legacy_env.choose(None, ESTIMATOR_JOB)
    assert est.env is not None and est.env.version == "2.15"
    assert "tensorflow-estimator==2.15.0" in est.env.requirements
    assert "line 8" in est.why and "2.16" in est.why
    assert legacy_env.choose("installed", ESTIMATOR_JOB).env is None
    forced = legacy_env.choose("2.15", PLAIN_JOB)
    assert forced.env is not None and forced.env.path.parent == tmp_path
    # an installed TensorFlow that still has Estimator runs it itself
    monkeypatch.setattr(legacy_env, "installed_tf_version", lambda: "2.15.1")
    assert legacy_env.choose(None, ESTIMATOR_JOB).env is None
    assert legacy_env.choose("2.15.0", PLAIN_JOB).env is None


# ours: a one-element weight fetched and printed with %f, as TF1 regressions did under NumPy 1
ONE_ELEMENT_PRINT = textwrap.dedent(
    """\
    import numpy as np
    import tensorflow as tf

    slope = tf.get_variable("slope", [1], tf.float32)
    offset = tf.Variable(tf.zeros([1]), name="offset")
    scale = tf.Variable(2.0, name="scale")
    x = tf.placeholder(tf.float32)
    loss = tf.reduce_mean(tf.square(3 * x - slope * x - offset))
    with tf.Session() as sess:
        s, o, c = sess.run([slope, offset, scale])
        print("scale %f as text %s" % (c, s))
        print("slope %.3f offset %f" % (s, o))
    """
)


def test_a_one_element_array_formatted_as_a_number_is_found_with_its_line():
    why = legacy_env.needs_numpy1(ONE_ELEMENT_PRINT)
    assert why == "line 12: `s` (the value of `slope`, a one-element variable, line 4) formatted by %f"
    # a scalar variable, or a one-element array formatted as text: NumPy 2 prints them too
    assert legacy_env.needs_numpy1(ONE_ELEMENT_PRINT.replace('    print("slope %.3f offset %f" % (s, o))\n', "")) is None


def test_auto_choice_runs_a_numpy1_program_where_it_ran(monkeypatch, tmp_path):
    monkeypatch.setenv(legacy_env.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(legacy_env, "installed_tf_version", lambda: "2.21.0")
    monkeypatch.setattr(legacy_env, "_numpy_version", lambda: "2.4.0")
    choice = legacy_env.choose(None, ONE_ELEMENT_PRINT)
    assert choice.env is not None and choice.env.version == "2.15"
    assert "line 12" in choice.why and "NumPy 2.4.0 refuses" in choice.why
    assert legacy_env.choose("installed", ONE_ELEMENT_PRINT).env is None
    # with NumPy 1 installed the program runs here
    monkeypatch.setattr(legacy_env, "_numpy_version", lambda: "1.26.4")
    assert legacy_env.choose(None, ONE_ELEMENT_PRINT).env is None


# ----------------------------------------------------------------- where it lives


def test_requirements_per_version():
    assert legacy_env.requirements_for("2.15")[:2] == ("tensorflow-cpu==2.15.1", "tensorflow-estimator==2.15.0")
    assert legacy_env.requirements_for("2.15.1") == legacy_env.requirements_for("2.15")
    assert legacy_env.requirements_for("2.13")[:2] == ("tensorflow-cpu==2.13.*", "tensorflow-estimator==2.13.*")
    assert not any("estimator" in r for r in legacy_env.requirements_for("2.17"))
    for bad in ("latest", "1.15", "3"):
        with pytest.raises(legacy_env.LegacyEnvError):
            legacy_env.requirements_for(bad)


def test_key_is_stable_and_differs_by_what_makes_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(legacy_env.CACHE_ENV, str(tmp_path / "c"))
    a = legacy_env.legacy_env("2.15")
    assert a == legacy_env.legacy_env("2.15.1")
    assert a.path.parent == tmp_path / "c"
    assert a.path.name.startswith("tf2.15.1-py")
    assert legacy_env.legacy_env("2.14").path != a.path
    assert legacy_env.env_key(a.requirements, "/other/python3") != legacy_env.env_key(a.requirements)
    monkeypatch.delenv(legacy_env.CACHE_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert legacy_env.cache_root() == tmp_path / "home" / ".cache" / "tfmigrate" / "envs"


def _fake_ready(env: legacy_env.LegacyEnv, version: str = "2.15.1") -> None:
    (env.path / "bin").mkdir(parents=True)
    (env.path / "bin" / "python").symlink_to(sys.executable)
    env.ready_file.write_text(version + "\n")


def _no_subprocess(*a, **k):
    raise AssertionError(f"nothing should run: {a}")


def test_a_ready_environment_is_reused_without_running_anything(monkeypatch, tmp_path):
    env = legacy_env.legacy_env("2.15", root=tmp_path)
    _fake_ready(env)
    monkeypatch.setattr(legacy_env.subprocess, "run", _no_subprocess)
    assert legacy_env.ensure(env, quiet=True) is env
    assert env.tf_version() == "2.15.1"


def test_a_second_check_waits_for_the_first_and_finds_it_built(monkeypatch, tmp_path):
    env = legacy_env.legacy_env("2.15", root=tmp_path)
    holding = threading.Event()

    def first_check():
        with legacy_env._locked(tmp_path / f"{env.path.name}.lock"):
            holding.set()
            time.sleep(0.5)
            _fake_ready(env)

    t = threading.Thread(target=first_check)
    t.start()
    holding.wait(5)
    monkeypatch.setattr(legacy_env.subprocess, "run", _no_subprocess)
    start = time.monotonic()
    assert legacy_env.ensure(env, quiet=True).is_ready()
    assert time.monotonic() - start >= 0.3  # it waited for the lock
    t.join()


def test_pip_failure_leaves_nothing_behind_and_says_how_to_do_it_by_hand(offline_pip):
    env = legacy_env.legacy_env("2.15")
    start = time.monotonic()
    with pytest.raises(legacy_env.LegacyEnvError) as e:
        legacy_env.ensure(env, quiet=True)
    elapsed = time.monotonic() - start
    msg = str(e.value)
    assert elapsed < 90, elapsed  # venv + one refused connection, not a long retry loop
    assert "pip install tensorflow-cpu==2.15.1 tensorflow-estimator==2.15.0" in msg
    assert "failed (exit" in msg
    assert "by hand" in msg and f"-m venv {env.path}" in msg and str(env.ready_file) in msg
    assert not env.path.exists()
    assert not [p for p in offline_pip.iterdir() if ".tmp-" in p.name]


def test_check_exits_2_when_the_legacy_tensorflow_cannot_be_created(offline_pip, tmp_path, capsys):
    legacy = tmp_path / "estimator_job.py"
    legacy.write_text(ESTIMATOR_JOB)
    migrated = tmp_path / "migrated.py"
    migrated.write_text((PROGRAMS / "tf_ps_worker.py").read_text())
    out = tmp_path / "out"
    start = time.monotonic()
    code = check.main([str(legacy), str(migrated), "--out", str(out), "--no-plot"])
    assert code == 2
    assert time.monotonic() - start < 90
    report = json.loads((out / "report.json").read_text())
    assert "cannot create the TensorFlow 2.15 environment" in report["reason"]
    assert "pip install" in report["reason"]
    assert report["migrated"]["tensorflow"]["version"] == legacy_env.installed_tf_version()
    assert not (out / "legacy-run0").exists()  # nothing was launched


# ----------------------------------------------------------------- the real environment


@pytest.mark.slow
def test_real_tf215_environment_runs_the_legacy_side(tmp_path):
    """Builds (or reuses) the TF 2.15 environment in the user's cache and runs a
    ps/worker legacy program on it; the program itself says which TensorFlow ran it."""
    legacy = tmp_path / "ps_worker_says_version.py"
    source = (PROGRAMS / "tf_ps_worker.py").read_text()
    legacy.write_text(source.replace(
        "import tensorflow as tf\n", "import tensorflow as tf\n\nprint('running on TF', tf.__version__, flush=True)\n", 1
    ))
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-m", "migrate", "check", str(legacy), str(PROGRAMS / "tf_ps_worker.py"),
            "--legacy-tf", "2.15", "--steps", "5", "--out", str(out), "--no-plot",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    report = json.loads((out / "report.json").read_text())
    assert report["legacy"]["tensorflow"]["version"] == "2.15.1", proc.stderr[-3000:]
    assert report["migrated"]["tensorflow"]["version"] == legacy_env.installed_tf_version()
    assert "legacy TensorFlow 2.15.1, migrated TensorFlow" in proc.stdout
    runs = report["legacy"]["runs"]
    assert runs and runs[0]["records"] >= 5, proc.stderr[-3000:]
    logs = " ".join(p.read_text(errors="replace") for p in (out / "legacy-run0").glob("*.log"))
    assert "running on TF 2.15.1" in logs
    assert "running on TF 2." + "21" not in logs


def test_an_estimator_tf_config_job_is_launched_with_a_chief():
    from migrate.runtime.topology import analyze, legacy_launch

    source = (PROGRAMS / "estimator_tf_config_job.py").read_text()
    info = analyze(source, str(PROGRAMS / "estimator_tf_config_job.py"))
    assert info.role_style == "tf_config" and info.chief_job == "chief"
    spec = legacy_launch(info, 2, 10, None, None)
    assert spec.jobs == {"ps": 1, "chief": 1, "worker": 1}


def test_a_migration_still_on_estimator_is_not_launched_on_tensorflow_without_it(monkeypatch):
    monkeypatch.setattr(legacy_env, "installed_tf_version", lambda: "2.21.0")
    why = legacy_env.missing_here(ESTIMATOR_JOB)
    assert why is not None and "line 8" in why and "2.21.0" in why
    assert legacy_env.missing_here(PLAIN_JOB) is None
    monkeypatch.setattr(legacy_env, "installed_tf_version", lambda: "2.15.1")
    assert legacy_env.missing_here(ESTIMATOR_JOB) is None


@pytest.mark.slow
def test_estimator_job_legacy_side_runs_alone_on_tf215_for_its_losses(tmp_path):
    """A custom model_fn + train_and_evaluate job with TF_CONFIG chief/ps/worker:
    no option picks TF 2.15 for it; while its migration is still Estimator code
    the legacy side runs alone and its losses are in the report."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-m", "migrate", "check", str(PROGRAMS / "estimator_tf_config_job.py"),
            "--steps", "10", "--out", str(out), "--no-plot",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )
    report = json.loads((out / "report.json").read_text())
    assert report["legacy"]["tensorflow"]["version"] == "2.15.1", proc.stderr[-3000:]
    assert "Estimator" in report["legacy"]["tensorflow"]["why"]
    assert report["legacy"]["launch"]["jobs"] == {"ps": 1, "chief": 1, "worker": 1}
    runs = report["legacy"]["runs"]
    assert runs and runs[0]["records"] >= 5, proc.stderr[-3000:]
    if report["verdict"] == "error":  # the codemod left the Estimator in place
        assert proc.returncode == 2
        assert "uses Estimator" in report["reason"]
