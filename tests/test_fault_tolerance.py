"""Migrated jobs survive what legacy jobs survived (fault injection on the
shared launcher).

- ParameterServerStrategy: a worker killed mid-run and restarted; the
  ClusterCoordinator re-schedules its closure and the job completes.
- A migrated chief killed mid-run and restarted resumes from its last
  checkpoint (CheckpointManager restore-on-start) and then retraces the
  undisturbed trajectory step for step.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source
from migrate.runtime.check import (
    DEFAULT_STAT_ATOL,
    DEFAULT_STAT_RTOL,
    DEFAULT_WINDOW,
    compare_statistical,
)
from migrate.runtime.cluster import Fault, run_cluster

ROOT = Path(__file__).resolve().parent.parent
ASYNC_FIXTURE = ROOT / "tests" / "fixtures" / "realistic" / "async_mts_hooks.py"
STEPS = 40  # long enough that the trailing window sits past the noisy early descent
PSS_JOBS = {"chief": 1, "worker": 2, "ps": 1}


@pytest.fixture(scope="module")
def migrated_async(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("migrated") / "async_mts_hooks.py"
    out.write_text(migrate_source(ASYNC_FIXTURE.read_text()).output)
    return out


def test_pss_job_survives_a_worker_killed_and_restarted(migrated_async, tmp_path):
    undisturbed = run_cluster(migrated_async, PSS_JOBS, args=[f"--steps={STEPS}"],
                              server_only=("ps", "worker"), timeout=240, log_dir=tmp_path / "clean")
    assert undisturbed.ok, undisturbed.summary()
    fault = Fault(job="worker", index=1, at_step=STEPS // 2, restart=True, step_source="chief:0")
    disturbed = run_cluster(migrated_async, PSS_JOBS, args=[f"--steps={STEPS}"], server_only=("ps", "worker"),
                            timeout=240, log_dir=tmp_path / "fault", faults=[fault])
    assert disturbed.ok, disturbed.summary()
    # the fault really happened, and is visible in the result and the logs
    assert len(disturbed.faults) == 1 and disturbed.faults[0].restarted_pid is not None
    assert disturbed.task("worker", 1).restarts == 1
    assert "restart 1 of worker:1" in disturbed.log_text("worker", 1)
    # the coordinator ran the loop to the last global step; a closure (up to four
    # steps, TFM301 pipelining) applied on the dying worker and then retried
    # elsewhere may leave its steps' records out, the last closure's too (seen on
    # a loaded machine: records 36-39 of 40 missing)
    steps = [r.step for r in disturbed.losses]
    assert steps == sorted(set(steps)) and steps[0] == 0
    assert len(steps) >= STEPS - 8 and steps[-1] >= STEPS - 5
    # a closure lost with the worker may be re-run (at-least-once): compare with
    # `tfmigrate check`'s asynchronous statistic and its default tolerance
    comparison = compare_statistical(
        [{r.step: r.loss for r in undisturbed.losses}], [{r.step: r.loss for r in disturbed.losses}],
        DEFAULT_WINDOW, DEFAULT_STAT_RTOL, DEFAULT_STAT_ATOL,
    )
    assert comparison.equivalent, comparison.reason


def _file_order(path: Path) -> list[tuple[int, float]]:
    import json

    return [(r["step"], r["loss"]) for r in map(json.loads, path.read_text().splitlines()) if r]


def test_migrated_chief_killed_and_restarted_resumes_from_its_checkpoint(tmp_path):
    from migrate.runtime.reference import REFERENCES, checkpoint_interval

    program = ROOT / "rewrites" / "chief_recovery.py"
    ref = REFERENCES["chief_recovery"]
    steps = 20
    interval = checkpoint_interval(steps)
    jobs = {"chief": 1, "worker": 1, "ps": 1}

    clean_dir = tmp_path / "clean"
    clean = run_cluster(program, jobs, args=ref.args(1, steps, clean_dir), server_only=("ps", "worker"),
                        timeout=240, log_dir=clean_dir)
    assert clean.ok, clean.summary()
    undisturbed = dict(_file_order(clean.task("chief", 0).loss_path))
    assert sorted(undisturbed) == list(range(steps))

    kill_at = steps // 2 + 1  # between two checkpoints: some steps must be redone
    fault_dir = tmp_path / "fault"
    result = run_cluster(program, jobs, args=ref.args(1, steps, fault_dir), server_only=("ps", "worker"),
                         timeout=300, log_dir=fault_dir,
                         faults=[Fault(job="chief", index=0, at_step=kill_at, restart=True)])
    assert result.ok, result.summary()
    assert len(result.faults) == 1 and result.task("chief", 0).restarts == 1
    records = _file_order(result.task("chief", 0).loss_path)
    found = re.search(r"chief resumed at global step (\d+)", result.log_text("chief", 0))
    assert found, "the restarted chief did not restore a checkpoint"
    resumed_at = int(found.group(1))
    # the restarted incarnation's records start at the last record of that step
    start = max(i for i, (step, _) in enumerate(records) if step == resumed_at)
    first, second = records[:start], records[start:]
    killed_after = result.faults[0].step_seen
    # the step counter continues from the last checkpoint, not from zero and not past the kill
    assert resumed_at % interval == 0 and 0 < resumed_at <= killed_after + 1
    assert killed_after - resumed_at < interval + 1  # nothing retrained beyond the checkpoint interval
    assert [step for step, _ in first] == list(range(len(first)))
    assert [step for step, _ in second] == list(range(resumed_at, steps))
    # after the resume the job retraces the undisturbed run step for step
    assert all(loss == undisturbed[step] for step, loss in second), [
        (step, loss, undisturbed[step]) for step, loss in second if loss != undisturbed[step]
    ]


def test_migrated_naive_program_no_longer_hangs(tmp_path):
    """The naive TF1 program hangs (late non-chief, no device_filters); its
    migration has no sessions to hang in and runs to completion."""
    from migrate.runtime.reference import REFERENCES

    ref = REFERENCES["naive_async_ps"]
    result = run_cluster(ROOT / "rewrites" / "naive_async_ps.py", PSS_JOBS, args=ref.args(2, 12, tmp_path),
                         server_only=("ps", "worker"), timeout=240, log_dir=tmp_path)
    assert result.ok and not result.timed_out, result.summary()
    assert max(r.step for r in result.losses) >= 10


def test_check_finds_legacy_and_migrated_chief_recovery_equivalent_under_the_same_fault(tmp_path):
    """Both sides lose their chief at the same step, restart it and resume from
    their checkpoints; `tfmigrate check` still finds them equivalent step by step."""
    import json

    from migrate.runtime import check

    out = tmp_path / "check"
    code = check.main([
        str(ROOT / "legacy_reference" / "chief_recovery.py"), str(ROOT / "rewrites" / "chief_recovery.py"),
        "--workers", "1", "--steps", "16", "--kill-chief-at", "9", "--out", str(out), "--no-plot",
        "--", "--checkpoint_dir={run_dir}/ckpt", "--save_checkpoint_steps=4",
    ])
    report = json.loads((out / "report.json").read_text())
    assert code == 0, report.get("reason")
    for side in ("legacy", "migrated"):
        (run,) = report[side]["runs"]
        assert len(run["faults"]) == 1 and run["faults"][0]["restarted_pid"], run
    # a step the chief trained and checkpointed but was killed before logging
    # is not compared; every other step is, and nothing else may be missing
    lost = [s for side in ("legacy", "migrated") for s in report[side]["runs"][0]["steps_lost_to_faults"]]
    assert all(s >= 9 for s in lost), lost
    assert report["comparison"]["steps_compared"] + len(lost) >= 16
    assert report["comparison"]["steps_compared"] >= 16 - 4  # at most one checkpoint interval
