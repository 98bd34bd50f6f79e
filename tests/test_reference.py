"""The legacy TF1 reference programs (legacy_reference/) run on the launcher,
train reproducibly where they claim to, recover from a killed chief, and the
naive program really hangs; plus the ``tfmigrate reference`` entry point.

Each run starts real TensorFlow processes (~3-5 s of import each on two
shared cores), so steps are kept small and timeouts generous."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections import Counter

import psutil
import pytest

from migrate.runtime import losslog, reference
from migrate.runtime.cluster import ClusterResult
from migrate.runtime.reference import REFERENCES, run_reference

STEPS = 30

# The programs need TensorFlow (the `tf` extra); the test process never imports it.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed"
)


def trajectory(result: ClusterResult) -> dict[tuple[int, str], float]:
    """(step, task) -> loss; fails on a (step, task) logged twice."""
    counts = Counter((r.step, r.task) for r in result.losses)
    duplicated = [key for key, n in counts.items() if n > 1]
    assert not duplicated, f"steps logged twice: {duplicated[:5]}"
    return {(r.step, r.task): r.loss for r in result.losses}


def assert_ok(result: ClusterResult) -> None:
    assert result.ok, result.summary()


def file_order(result: ClusterResult, task: str) -> list[tuple[int, float]]:
    """The (step, loss) records of one task in the order they were written
    (a restarted task appends to the same file)."""
    job, index = task.split(":")
    path = result.task(job, int(index)).loss_path
    rows = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue  # torn line of a killed process
        rows.append((int(obj["step"]), float(obj["loss"])))
    return rows


@pytest.fixture(scope="module")
def async_single_worker_runs(tmp_path_factory):
    return [
        run_reference("async_ps", workers=1, steps=STEPS, log_dir=tmp_path_factory.mktemp(f"a{i}"))
        for i in range(2)
    ]


def test_registry_points_at_existing_programs():
    assert set(REFERENCES) == {
        "async_ps",
        "sync_replicas",
        "in_graph_towers",
        "chief_recovery",
        "naive_async_ps",
    }
    for ref in REFERENCES.values():
        assert ref.path.is_file(), ref.path
        source = ref.path.read_text(encoding="utf-8")
        # Standalone legacy code: TF1 via compat.v1, never this package.
        assert "import tensorflow.compat.v1 as tf" in source
        assert not re.search(r"^\s*(from|import) migrate\b", source, re.MULTILINE)


def test_async_single_worker_is_deterministic(async_single_worker_runs):
    first, second = async_single_worker_runs
    assert_ok(first)
    assert_ok(second)
    a, b = trajectory(first), trajectory(second)
    assert sorted(a) == [(step, "worker:0") for step in range(STEPS)]
    assert a == b  # bit-identical, not merely close
    assert all(math.isfinite(v) for v in a.values())


def test_async_two_workers_run_every_step_exactly_once(tmp_path):
    result = run_reference("async_ps", workers=2, steps=40, log_dir=tmp_path)
    assert_ok(result)
    losses = trajectory(result)
    steps = sorted(step for step, _ in losses)
    assert steps == list(range(40))  # each ticket once, across both workers
    assert {task for _, task in losses} <= {"worker:0", "worker:1"}


def test_sync_two_workers_identical_over_five_runs(tmp_path):
    runs = []
    for i in range(5):
        result = run_reference("sync_replicas", workers=2, steps=STEPS, log_dir=tmp_path / str(i))
        assert_ok(result)
        losses = trajectory(result)
        for task in ("worker:0", "worker:1"):
            assert sorted(s for s, t in losses if t == task) == list(range(STEPS)), task
        runs.append(losses)
    for other in runs[1:]:
        assert other == runs[0]
    # The two workers see different slices of each global batch.
    assert any(runs[0][(s, "worker:0")] != runs[0][(s, "worker:1")] for s in range(STEPS))


def test_in_graph_towers_use_both_devices_and_match_one_worker(tmp_path, async_single_worker_runs):
    result = run_reference("in_graph_towers", workers=2, steps=STEPS, log_dir=tmp_path)
    assert_ok(result)
    towers = trajectory(result)
    assert sorted(towers) == [(step, "worker:0") for step in range(STEPS)]
    log = result.log_text("worker", 0)
    assert re.search(r"^tower_0 ran on .*CPU:0", log, re.MULTILINE), log[-2000:]
    assert re.search(r"^tower_1 ran on .*CPU:1", log, re.MULTILINE), log[-2000:]
    # Averaging the towers' gradients of two half batches is the gradient of
    # the whole batch: the towers train like one async worker on full batches
    # (same data, same initial weights), up to float summation order.
    single = trajectory(async_single_worker_runs[0])
    for key, loss in single.items():
        assert towers[key] == pytest.approx(loss, rel=1e-5), key


def test_chief_recovery_resumes_from_last_checkpoint(tmp_path):
    steps = 50
    result = run_reference("chief_recovery", workers=1, steps=steps, log_dir=tmp_path)
    assert_ok(result)
    every = reference.checkpoint_interval(steps)

    [event] = result.faults
    chief = result.task("worker", 0)
    assert event.fault.task_name == "worker:0"
    assert event.step_seen >= steps // 2
    assert chief.restarts == 1 and event.restarted_pid == chief.pid
    assert event.killed_pid == chief.pids[0] != chief.pid
    ps = result.task("ps", 0)
    assert len(ps.pids) == 1 and ps.ended_by_launcher  # the ps survived the whole run

    log = result.log_text("worker", 0)
    restored = re.search(
        r"chief restarting from checkpoint .*model\.ckpt-(\d+)$", log, re.MULTILINE
    )
    resumed = re.search(r"^chief resumed at global step (\d+)$", log, re.MULTILINE)
    assert restored and resumed, log[-3000:]
    resumed = int(resumed.group(1))
    assert resumed == int(restored.group(1))  # the global step comes from the checkpoint
    assert resumed % every == 0 and resumed > 0

    rows = file_order(result, "worker:0")
    split = len(rows) - (steps - resumed)
    before, after = rows[:split], rows[split:]
    # The restarted chief continues at the checkpointed global step, up to N.
    assert [s for s, _ in after] == list(range(resumed, steps))
    # The first incarnation ran 0..m with m >= the fault's step; the checkpoint
    # it restored is the last one written before the kill.
    last = before[-1][0]
    assert [s for s, _ in before] == list(range(last + 1))
    assert last >= event.step_seen
    assert last + 1 - every < resumed <= last + 2
    # One worker, weights restored exactly, data chosen by step: steps done
    # before the kill and redone after it have bit-identical losses.
    redone = dict(after)
    for step, loss in before[resumed:]:
        assert redone[step] == loss, step
    assert (tmp_path / "checkpoints" / f"model.ckpt-{steps}.index").exists()


def test_naive_program_hangs_and_is_torn_down(tmp_path):
    # 75 s: worker 1 starts its session 15 s after a TF import that takes up
    # to ~30 s on a loaded machine, then blocks for good.
    result = run_reference("naive_async_ps", workers=2, steps=STEPS, timeout=75, log_dir=tmp_path)
    assert result.timed_out and not result.ok, result.summary()
    chief, late = result.task("worker", 0), result.task("worker", 1)
    assert chief.returncode == 0  # the chief finished the whole job and left
    assert sorted(s for s, t in trajectory(result) if t == "worker:0") == list(range(STEPS))
    assert not result.losses_for("worker:1")  # the late worker never trained
    assert late.stack_dump and "wait_for_session" in late.stack_dump, result.summary()
    for task in result.tasks:
        for pid in task.pids:
            assert not _is_task_process(pid), f"{task.name} pid {pid} survived"


def _is_task_process(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and "naive_async_ps" in " ".join(
            proc.cmdline()
        )
    except psutil.Error:
        return False


def test_cli_run_prints_the_trajectory(tmp_path, capsys):
    assert reference.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in REFERENCES)

    code = reference.main(["run", "in_graph_towers", "--steps", "4", "--log-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    header = next(line for line in out.splitlines() if line.startswith("step"))
    assert "worker:0" in header
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s*\d+\s+\d+\.\d+", line)]
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3]
    logged = {r.step: r.loss for r in losslog.read([tmp_path / "losses-worker-0.jsonl"])}
    assert [float(r[1]) for r in rows] == [pytest.approx(logged[s], abs=5e-7) for s in range(4)]
    assert "cluster ok" in out


@pytest.mark.slow
def test_chief_recovery_with_a_non_chief_that_keeps_training(tmp_path):
    # The non-chief never notices the chief is gone (device_filters) and may
    # finish the job alone; the restarted chief still restores its checkpoint,
    # rolls the global step back and trains up to N again.
    steps = 50
    result = run_reference("chief_recovery", workers=2, steps=steps, log_dir=tmp_path)
    assert_ok(result)
    [event] = result.faults
    assert event.restarted_pid == result.task("worker", 0).pid
    assert result.task("worker", 1).restarts == 0 and result.task("worker", 1).returncode == 0
    log = result.log_text("worker", 0)
    restored = re.search(
        r"chief restarting from checkpoint .*model\.ckpt-(\d+)$", log, re.MULTILINE
    )
    resumed = re.search(r"^chief resumed at global step (\d+)$", log, re.MULTILINE)
    # With two async workers the chief checkpoints at the first step it sees
    # past each interval, not at multiples of it.
    assert restored and resumed and int(resumed.group(1)) == int(restored.group(1)) > 0
    final = max(
        int(p.name.split("-")[1].split(".")[0])
        for p in (tmp_path / "checkpoints").glob("model.ckpt-*.index")
    )
    assert final >= steps


@pytest.mark.slow
def test_sync_three_workers_stay_in_lockstep(tmp_path):
    result = run_reference("sync_replicas", workers=3, steps=STEPS, log_dir=tmp_path)
    assert_ok(result)
    losses = trajectory(result)
    for task in ("worker:0", "worker:1", "worker:2"):
        assert sorted(s for s, t in losses if t == task) == list(range(STEPS)), task
