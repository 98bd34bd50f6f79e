"""Benchmark: ``tfmigrate check`` wall time, and migrated-vs-legacy training
throughput on the same loopback cluster.

    python benchmarks/bench_check.py [--steps 20] [--throughput-steps 500] [--repeats 3] [--write]

1. ``check`` wall time (both sides, one run each, run one after the other as
   ``check`` does) on two 3-task jobs: ``sync_replicas`` (legacy ps + 2
   workers) against its MultiWorkerMirrored migration, and ``async_ps`` with
   one worker against its ParameterServerStrategy migration (chief + worker +
   ps). Target from the issue: <= 30 s on 2 cores for both sides.
2. Training steps/s of each side (also ``async_ps`` with 2 workers, where the
   job's rate counts every worker's steps), from the harness's per-step time stamps
   (legacy: when ``Session.run`` returned; migrated: ``tf.timestamp()`` in
   the step function), over the steps after the first ``WARMUP`` of a longer
   run, so process start-up and tracing do not count. Target: migrated >=
   1.0x legacy.

Migrations: ``rewrites/<name>.py`` when committed, else the baselines in
``tests/data/check/``. ``--write`` stores the figures in
``benchmarks/RESULTS-check.md``. The machine may be shared: the load average
is recorded next to the figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from migrate.runtime import check
from migrate.runtime.harness import decode_print_line, print_line_time

WARMUP = 5
CALIBRATION_MARKER = "<!-- calibration: kept by bench_check.py --write -->"
PAIRS = {
    "sync_replicas": ("sync_replicas.py", "mwms_sync_replicas.py", 2),
    "async_ps": ("async_ps.py", "pss_async_ps.py", 1),
    "async_ps_2workers": ("async_ps.py", "pss_async_ps.py", 2),
    "in_graph_towers": ("in_graph_towers.py", "mirrored_in_graph_towers.py", 2),
}
# asynchronous pairs train each global step once, on any worker: their rate is
# the job's (every task's steps); the others count the steps of one replica
JOB_RATE = {"async_ps", "async_ps_2workers"}


def migrated_for(name: str) -> Path:
    rewrite, baseline, _ = PAIRS[name]
    path = ROOT / "rewrites" / rewrite
    return path if path.exists() else ROOT / "tests" / "data" / "check" / baseline


def job_step_times(log_dir: Path) -> list[float]:
    """Time stamps of every step any task trained, in time order."""
    times = []
    for path in sorted(log_dir.glob("harness-losses-*.jsonl")):
        times += [
            float(obj["time"])
            for obj in map(json.loads, path.read_text().splitlines())
            if "time" in obj
        ]
    for path in sorted(log_dir.glob("harness-print-*.txt")):
        for line in path.read_text().splitlines():
            stamp = print_line_time(line)
            if decode_print_line(line) is not None and stamp is not None:
                times.append(stamp)
    return sorted(times)


def step_times(log_dir: Path) -> list[float]:
    """Per-step time stamps of the first task that has them (one replica)."""
    for path in sorted(log_dir.glob("harness-losses-*.jsonl")):
        times = []
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            if "time" in obj and not obj["task"].endswith(("/tower:1", "/tower:2", "/tower:3")):
                times.append(float(obj["time"]))
        if times:
            return times
    for path in sorted(log_dir.glob("harness-print-*.txt")):
        times = []
        first_replica = None
        for line in path.read_text().splitlines():
            decoded = decode_print_line(line)
            stamp = print_line_time(line)
            if decoded is None or stamp is None:
                continue
            first_replica = first_replica or decoded[0]
            if decoded[0] == first_replica:
                times.append(stamp)
        if times:
            return sorted(times)
    return []


def steps_per_second(times: list[float]) -> float | None:
    times = times[WARMUP:]
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) / (times[-1] - times[0])


def run_pair(name: str, steps: int, out: Path) -> dict:
    legacy = ROOT / "legacy_reference" / PAIRS[name][0]
    workers = PAIRS[name][2]
    opts = check.CheckOptions(
        legacy=legacy,
        migrated=migrated_for(name),
        workers=workers,
        steps=steps,
        runs=1,  # one run per side, also for the statistical (2-worker asynchronous) pair
        out=out,
        plot=False,
    )
    start = time.monotonic()
    code, report = check.run_check(opts)
    wall = time.monotonic() - start
    sides = {}
    for side in ("legacy", "migrated"):
        runs = report[side].get("runs", [])
        sides[side] = {
            "tasks": sum(report[side]["launch"]["jobs"].values()),
            "cluster_wall": runs[0]["wall_time"] if runs else None,
            "steps_per_s": steps_per_second(
                (job_step_times if name in JOB_RATE else step_times)(Path(runs[0]["log_dir"]))
            )
            if runs
            else None,
        }
    return {"pair": name, "exit": code, "check_wall": wall, "sides": sides}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps of the wall-time runs")
    parser.add_argument("--throughput-steps", type=int, default=500)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="throughput checks per pair; the table gives the median ratio (the two sides of one "
        "check run one after the other, so a burst of load on a shared machine hits only one)",
    )
    parser.add_argument("--pairs", default=",".join(PAIRS))
    parser.add_argument("--write", action="store_true", help="write benchmarks/RESULTS-check.md")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-check-"))
    rows = []
    for name in args.pairs.split(","):
        timed = run_pair(name, args.steps, out / f"{name}-wall")
        fast = [
            run_pair(name, args.throughput_steps, out / f"{name}-throughput-{i}")
            for i in range(args.repeats)
        ]
        rows.append((name, timed, fast))
        print(json.dumps({"wall": timed, "throughput": fast}), flush=True)
    load = os.getloadavg()
    lines = [
        "# `tfmigrate check` benchmark",
        "",
        (
            f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.platform()}, "
            f"{os.cpu_count()} CPUs, load average after the run {load[0]:.1f}/{load[1]:.1f}/"
            f"{load[2]:.1f} (the machine is shared with other jobs: absolute times are upper "
            "bounds). Produced by `python benchmarks/bench_check.py --write`."
        ),
        "",
        f"## `check` wall time ({args.steps} steps, one run per side, sides run one after the other)",
        "",
        (
            "| pair | legacy tasks | migrated tasks | legacy cluster s | migrated cluster s "
            "| check total s | exit |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, timed, _ in rows:
        s = timed["sides"]
        lines.append(
            f"| {name} | {s['legacy']['tasks']} | {s['migrated']['tasks']} "
            f"| {s['legacy']['cluster_wall']:.1f} | {s['migrated']['cluster_wall']:.1f} "
            f"| {timed['check_wall']:.1f} | {timed['exit']} |"
        )
    lines += [
        "",
        (
            f"## Training throughput ({args.throughput_steps} steps, first {WARMUP} excluded, "
            f"{args.repeats} checks per pair)"
        ),
        "",
        (
            "Steps/s of the job for the asynchronous pairs (every worker's steps), of one replica "
            "otherwise; steps/s are medians over the checks, the ratio is the median of the "
            "per-check ratios with their range."
        ),
        "",
        "| pair | legacy steps/s | migrated steps/s | migrated / legacy | range |",
        "|---|---|---|---|---|",
    ]
    for name, _, fast in rows:
        lg = [
            f["sides"]["legacy"]["steps_per_s"] for f in fast if f["sides"]["legacy"]["steps_per_s"]
        ]
        mg = [
            f["sides"]["migrated"]["steps_per_s"]
            for f in fast
            if f["sides"]["migrated"]["steps_per_s"]
        ]
        ratios = [
            f["sides"]["migrated"]["steps_per_s"] / f["sides"]["legacy"]["steps_per_s"]
            for f in fast
            if f["sides"]["legacy"]["steps_per_s"] and f["sides"]["migrated"]["steps_per_s"]
        ]
        ratio = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}x" if ratios else "-"
        lines.append(
            f"| {name} | {statistics.median(lg) if lg else 0:.1f} "
            f"| {statistics.median(mg) if mg else 0:.1f} | {ratio} | {spread} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        results = HERE / "RESULTS-check.md"
        # Keep the hand-written calibration section (not re-measured here).
        kept = ""
        if results.exists() and CALIBRATION_MARKER in results.read_text():
            kept = results.read_text()[results.read_text().index(CALIBRATION_MARKER) :]
        results.write_text(text + ("\n" + kept if kept else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
