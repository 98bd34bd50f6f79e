"""A migrated job resumes the legacy job it replaces, from the legacy job's TF1
checkpoint directory (issue 16, item 3).

The legacy reference job trains N steps and stops; its migration, started on
that directory, resumes at step N with the legacy weights and continues the
legacy trajectory step for step (one worker: the reference's data is chosen
by the global step, so the run is deterministic); `tfmigrate checkpoint
convert` round-trips the checkpoint, and what the migration cannot take is
reported, by the migrated program itself and by the convert command.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source
from migrate.runtime.cluster import run_cluster

ROOT = Path(__file__).resolve().parent.parent
LEGACY = ROOT / "legacy_reference" / "chief_recovery.py"
MIGRATED = ROOT / "rewrites" / "chief_recovery.py"
N = 6  # steps the legacy job trains before it stops
SAVE_EVERY = 3
LEGACY_JOBS = {"ps": 1, "worker": 1}
MIGRATED_JOBS = {"chief": 1, "worker": 1, "ps": 1}

tf = pytest.importorskip("tensorflow")


def _args(steps: int, checkpoint_dir: Path) -> list[str]:
    return [f"--steps={steps}", f"--checkpoint_dir={checkpoint_dir}", f"--save_checkpoint_steps={SAVE_EVERY}"]


def _losses(path: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in map(json.loads, path.read_text().splitlines()) if r]


def _values(checkpoint_dir: Path) -> dict[str, object]:
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(checkpoint_dir)))
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="module")
def legacy_runs(tmp_path_factory):
    """The legacy job stopped after N steps (its checkpoint directory), and the
    same job run 2N steps without stopping (the trajectory to continue)."""
    base = tmp_path_factory.mktemp("legacy")
    stopped = run_cluster(LEGACY, LEGACY_JOBS, args=_args(N, base / "stopped"), server_only=("ps",),
                          timeout=240, log_dir=base / "stopped-logs")
    assert stopped.ok, stopped.summary()
    through = run_cluster(LEGACY, LEGACY_JOBS, args=_args(2 * N, base / "through"), server_only=("ps",),
                          timeout=240, log_dir=base / "through-logs")
    assert through.ok, through.summary()
    assert tf.train.latest_checkpoint(str(base / "stopped")).endswith(f"model.ckpt-{N}")
    trajectory = dict(_losses(through.task("worker", 0).loss_path))
    assert sorted(trajectory) == list(range(2 * N))
    return base / "stopped", trajectory


def _resume(checkpoint_dir: Path, log_dir: Path):
    result = run_cluster(MIGRATED, MIGRATED_JOBS, args=_args(2 * N, checkpoint_dir), server_only=("ps", "worker"),
                         timeout=240, log_dir=log_dir)
    assert result.ok, result.summary()
    return result


def _add_variable_the_migration_lacks(checkpoint_dir: Path) -> None:
    """Rewrites the newest TF1 checkpoint with one more variable, as a legacy
    job with a variable its migration dropped would have saved it."""
    values = {name: tf.Variable(value) for name, value in _values(checkpoint_dir).items()}
    values["layer9/w"] = tf.Variable(tf.ones([2, 2]))
    tf.compat.v1.train.Saver(var_list=values).save(None, str(checkpoint_dir / "model.ckpt"), global_step=N)


def test_migrated_job_resumes_the_legacy_checkpoint_step_for_step(legacy_runs, tmp_path):
    stopped, trajectory = legacy_runs
    checkpoint_dir = tmp_path / "ckpt"
    shutil.copytree(stopped, checkpoint_dir)
    legacy_values = _values(checkpoint_dir)
    _add_variable_the_migration_lacks(checkpoint_dir)

    result = _resume(checkpoint_dir, tmp_path / "logs")
    log = result.log_text("chief", 0)
    assert re.search(rf"chief resumed at global step {N}\b", log), log[-2000:]
    # continues the legacy trajectory from step N, bit for bit
    resumed = _losses(result.task("chief", 0).loss_path)
    assert [step for step, _ in resumed] == list(range(N, 2 * N))
    assert [loss for _, loss in resumed] == [trajectory[step] for step in range(N, 2 * N)]
    # the variable the migration lacks is named, not silently dropped
    assert re.search(r"not restored, nothing in this program takes them: layer9/w", log), log[-2000:]
    # it then writes TF2 checkpoints next to the TF1 ones; the legacy files are untouched
    assert tf.train.latest_checkpoint(str(checkpoint_dir)).endswith(f"ckpt-{2 * N}")
    assert (checkpoint_dir / f"model.ckpt-{N}.index").is_file()
    assert set(legacy_values) >= {"global_step", "layer0/w", "layer0/b", "layer1/w", "layer1/b"}


def _convert(source: Path, destination: Path, program: Path = MIGRATED) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "migrate", "checkpoint", "convert", str(source), str(destination),
         "--program", str(program)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )


def test_convert_round_trips_and_the_program_resumes_from_the_conversion(legacy_runs, tmp_path):
    stopped, trajectory = legacy_runs
    converted = _convert(stopped, tmp_path / "tf2")
    assert converted.returncode == 0, converted.stdout + converted.stderr
    assert "layer0/w -> model/layer0/w" in converted.stdout
    assert "global_step -> optimizer.iterations" in converted.stdout  # no optimizer state: the step continues
    back = _convert(tmp_path / "tf2", tmp_path / "tf1")
    assert back.returncode == 0, back.stdout + back.stderr
    original, round_tripped = _values(stopped), _values(tmp_path / "tf1")
    assert set(round_tripped) == set(original)
    for name, value in original.items():
        assert (round_tripped[name] == value).all(), name
    # the migrated program restores the converted (TF2) checkpoint and continues as from the legacy one
    result = _resume(tmp_path / "tf2", tmp_path / "logs")
    resumed = _losses(result.task("chief", 0).loss_path)
    assert [step for step, _ in resumed] == list(range(N, 2 * N))
    assert [loss for _, loss in resumed] == [trajectory[step] for step in range(N, 2 * N)]


def test_convert_reports_what_the_migration_lacks(tmp_path):
    """A TF1 checkpoint of async_ps.py's shape with a variable its migration
    does not have and a Momentum slot: both are listed, exit 1 (pending)."""
    saved = {
        "global_step": tf.Variable(tf.constant(4, tf.int64)),
        "hid_w": tf.Variable(tf.ones([10, 16])), "hid_b": tf.Variable(tf.zeros([16])),
        "out_w": tf.Variable(tf.ones([16, 1])), "out_b": tf.Variable(tf.zeros([1])),
        "hid_w/Momentum": tf.Variable(tf.ones([10, 16])),
        "embedding": tf.Variable(tf.ones([3, 2])),
    }
    tf.compat.v1.train.Saver(var_list=saved).save(None, str(tmp_path / "tf1" / "model.ckpt"), global_step=4)
    result = _convert(tmp_path / "tf1", tmp_path / "tf2", ROOT / "rewrites" / "async_ps.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"LEFT OUT embedding: the program has no variable of this name", result.stdout)
    assert re.search(r"LEFT OUT hid_w/Momentum: TF1 optimizer state", result.stdout)
    assert "hid_w -> hid_w" in result.stdout and "global_step -> global_step" in result.stdout
    tf2 = _values(tmp_path / "tf2")
    assert (tf2["hid_w/.ATTRIBUTES/VARIABLE_VALUE"] == 1).all()
    assert tf2["global_step/.ATTRIBUTES/VARIABLE_VALUE"] == 4
    # the optimizer's state starts afresh, its step count with it (no schedule takes the step)
    assert "opt.iterations" not in result.stdout and "opt/_iterations/.ATTRIBUTES/VARIABLE_VALUE" not in tf2


def test_resume_leaves_optimizer_slots_reported_where_the_optimizer_is_built():
    """TF1 Momentum keeps `<variable>/Momentum` in the checkpoint; the migrated
    program's Keras SGD keeps its velocity in another form: the migration says,
    at the optimizer, that a resume from the TF1 checkpoint starts it afresh."""
    source = (ROOT / "legacy_reference" / "async_ps.py").read_text()
    momentum = source.replace("tf.train.GradientDescentOptimizer(FLAGS.learning_rate)",
                              "tf.train.MomentumOptimizer(FLAGS.learning_rate, momentum=0.9)")
    assert momentum != source
    result = migrate_source(momentum)
    line = next(i for i, text in enumerate(momentum.splitlines(), 1) if "MomentumOptimizer" in text)
    notes = [d for d in result.diagnostics if "<variable>/Momentum" in d.message]
    assert len(notes) == 1 and notes[0].line == line, [(d.line, d.message) for d in result.diagnostics]
    assert "restore_checkpoint(checkpoint, checkpoint_manager.latest_checkpoint" in result.output
    # with a constant rate the optimizer starts afresh as a whole: its step count too
    assert "optimizer.iterations.assign" not in result.output
    # the plain-SGD reference has no slots: nothing to say, and its step count continues
    plain = migrate_source(source)
    assert not [d for d in plain.diagnostics if "<variable>/" in d.message]
    assert "optimizer.iterations.assign" in plain.output
    assert migrate_source(result.output).output == result.output


def test_moving_averages_are_restored_under_their_tf1_names():
    source = (ROOT / "legacy_reference" / "async_ps.py").read_text()
    old = "        train_op = opt.minimize(loss, global_step=global_step)\n"
    assert old in source
    averaged = source.replace(old, "        train = opt.minimize(loss, global_step=global_step)\n"
                              "        averages = tf.train.ExponentialMovingAverage(0.99)\n"
                              "        train_op = tf.group(train, averages.apply(tf.trainable_variables()))\n")
    out = migrate_source(averaged).output
    assert ("restore_checkpoint(checkpoint, checkpoint_manager.latest_checkpoint, [global_step, hid_w, hid_b,"
            " out_w, out_b, *[averages.average(v) for v in trainable_variables]], opt)") in out


def _checkpointing_sync_job(directory: Path) -> Path:
    """legacy_reference/sync_replicas.py with the Supervisor checkpointing into
    --checkpoint_dir every second (it runs without checkpoints), each step
    slowed a little so that checkpoints fall within the run."""
    source = (ROOT / "legacy_reference" / "sync_replicas.py").read_text()
    for old, new in [
        ('    parser.add_argument("--learning_rate", type=float, default=0.05)\n',
         ('    parser.add_argument("--learning_rate", type=float, default=0.05)\n'
         '    parser.add_argument("--checkpoint_dir", default=None)\n')),
        ("        logdir=None,  # no checkpoints: a stale one would silently be restored\n",
         "        logdir=args.checkpoint_dir,\n        save_model_secs=1,\n"),
        ("        saver=None,\n", ""),
        ("        append_loss(step, loss_value, task_name)\n",
         "        append_loss(step, loss_value, task_name)\n        time.sleep(0.3)\n"),
    ]:
        assert old in source, old
        source = source.replace(old, new)
    legacy = directory / "sync_checkpointing.py"
    legacy.write_text(source)
    return legacy


@pytest.mark.slow
def test_synchronous_migration_continues_the_legacy_trajectory_on_every_worker(tmp_path):
    """SyncReplicasOptimizer on 2 workers, stopped; its MultiWorkerMirroredStrategy
    migration resumes on both workers from the chief's TF1 checkpoint and
    continues each worker's legacy losses bit for bit."""
    legacy = _checkpointing_sync_job(tmp_path)
    migrated = tmp_path / "sync_checkpointing_migrated.py"
    migrated.write_text(migrate_source(legacy.read_text()).output)
    steps = 12
    checkpoint_dir = tmp_path / "ckpt"
    jobs = {"ps": 1, "worker": 2}
    stopped = run_cluster(legacy, jobs, args=[f"--steps={steps}", f"--checkpoint_dir={checkpoint_dir}"],
                          role_style="tf_config", server_only=("ps",), timeout=240, log_dir=tmp_path / "stopped")
    assert stopped.ok, stopped.summary()
    resume_at = int(_values(checkpoint_dir)["global_step"])
    assert resume_at > 0
    through = run_cluster(legacy, jobs, args=[f"--steps={2 * steps}"], role_style="tf_config",
                          server_only=("ps",), timeout=240, log_dir=tmp_path / "through")
    assert through.ok, through.summary()
    resumed = run_cluster(migrated, {"worker": 2}, args=[f"--steps={2 * steps}", f"--checkpoint_dir={checkpoint_dir}"],
                          role_style="tf_config", timeout=240, log_dir=tmp_path / "resumed")
    assert resumed.ok, resumed.summary()
    for worker in range(2):
        trajectory = dict(_losses(through.task("worker", worker).loss_path))
        records = _losses(resumed.task("worker", worker).loss_path)
        assert [step for step, _ in records] == list(range(resume_at, 2 * steps))
        assert [loss for _, loss in records] == [trajectory[step] for step, _ in records]


def _emitted_helper(scope: str | None, continue_iterations: bool):
    from migrate.codemod.rules import _legacy_restore

    namespace = {"tf": tf}
    exec(_legacy_restore.helper_code("restore_checkpoint", scope, continue_iterations), namespace)  # noqa: S102 (the code the codemod emits)
    return namespace["restore_checkpoint"]


def test_emitted_restore_maps_tf1_names_in_process(tmp_path, caplog):
    """The emitted helper on a TF1 checkpoint: TF1's numbered repeats
    (`Variable`, `Variable_1`), make_template's `model/` scope removed, the
    optimizer's iterations from global_step, what the program lacks logged,
    a variable the checkpoint lacks raised; a TF2 checkpoint restored as before."""
    saved = {"global_step": tf.Variable(tf.constant(5, tf.int64)), "Variable": tf.Variable([1.0, 2.0]),
             "Variable_1": tf.Variable([3.0]), "layer0/w": tf.Variable([[4.0]]), "extra": tf.Variable(7.0),
             "w": tf.Variable(2.0), "w/ExponentialMovingAverage": tf.Variable(1.5)}
    path = tf.compat.v1.train.Saver(var_list=saved).save(None, str(tmp_path / "tf1" / "model.ckpt"), global_step=5)
    step = tf.Variable(0, dtype=tf.int64, name="global_step")
    first, second = tf.Variable([0.0, 0.0]), tf.Variable([0.0])  # eager: both named "Variable"
    with tf.name_scope("model"):
        templated = tf.Variable([[0.0]], name="layer0/w")
    w = tf.Variable(0.0, name="w")
    averages = tf.train.ExponentialMovingAverage(0.9)
    averages.apply([w])  # its shadow: w/ExponentialMovingAverage, TF1's name
    optimizer = tf.keras.optimizers.SGD(0.1)
    checkpoint = tf.train.Checkpoint(step=step, first=first, second=second, templated=templated, optimizer=optimizer)
    restore = _emitted_helper("model", True)
    restore(checkpoint, path, [step, first, second, templated, w, averages.average(w)], optimizer)
    assert float(w.numpy()) == 2.0 and float(averages.average(w).numpy()) == 1.5
    assert int(step.numpy()) == 5 and int(optimizer.iterations.numpy()) == 5
    assert first.numpy().tolist() == [1.0, 2.0] and second.numpy().tolist() == [3.0]
    assert templated.numpy().tolist() == [[4.0]]
    assert "not restored, nothing in this program takes them: extra" in caplog.text
    with pytest.raises(ValueError, match="has no value for absent"):
        restore(checkpoint, path, [step, tf.Variable(1.0, name="absent")], optimizer)
    # a TF2 checkpoint of the program: tf.train.Checkpoint.restore, as before
    tf2_path = checkpoint.save(str(tmp_path / "tf2" / "ckpt"))
    first.assign([9.0, 9.0])
    restore(checkpoint, tf2_path, [step, first, second, templated], optimizer)
    assert first.numpy().tolist() == [1.0, 2.0]
    # an optimizer that starts afresh is not the helper's: it takes none
    step.assign(0)
    _emitted_helper(None, False)(checkpoint, path, [step, first, second])
    assert int(step.numpy()) == 5
