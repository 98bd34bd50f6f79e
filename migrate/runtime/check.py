"""``tfmigrate check LEGACY [MIGRATED]``: run a legacy TF1 training script and
its migration on local loopback clusters and compare their loss trajectories.

    tfmigrate check LEGACY [MIGRATED] [--workers N] [--steps N] [--runs K]
                    [--seed S] [--rtol R] [--atol A] [--stat-rtol R] [--window W]
                    [--timeout S] [--out DIR] [--align-init] [--loss-source auto|program|harness]

MIGRATED defaults to tfmigrate's own output for LEGACY. Exit status: 0
equivalent, 1 not equivalent, 2 could not run (a task crashed or hung, no
losses, the codemod changed nothing, bad usage).

How it works
------------
* Cluster: check owns it. The launcher's loopback addresses reach every
  task (``TFMIGRATE_CLUSTER``) and the harness maps whatever cluster the
  program builds -- literal hosts, docker names, remote IPs, a settings
  module, a ``ServerDef``, a ``TF_CONFIG`` it writes -- onto them task by task,
  session targets included; the mapping is in the report. Task counts come
  from the script's own cluster where it fixes one (``--workers`` replaces
  its worker count), roles as the script reads them: flags it defines
  (absl, argparse, click, hand-parsed), ``TF_CONFIG``, role environment
  variables, ``sys.argv`` positions, its address looked up in its host
  lists, or a role it hard-codes (the rest of its cluster then runs
  standard servers). A script whose tasks cannot be told apart is refused
  before anything starts, with the line and what would help.
* Topology (:mod:`migrate.runtime.topology`): legacy ps/worker scripts get ps:1 +
  worker:N with roles as flags or ``TF_CONFIG``, as the script reads them;
  migrations get chief + workers + ps (ParameterServerStrategy), N workers
  (MultiWorkerMirroredStrategy) or one process (MirroredStrategy, towers as
  logical CPUs). The step count (``--steps``) and tower count go to whichever
  flag, argparse option or environment variable the script defines. A job
  with no step option is stopped once it trained ``--steps`` steps; one
  training on far past them (a bound of its own beside the option it
  defines) is stopped there, and both sides are compared on the first
  ``--steps`` steps, which it computes the same whenever it is stopped.
* Training mode: a script choosing sync or async training by an option
  (``if FLAGS.sync_replicas:`` building its SyncReplicasOptimizer,
  ``is_sync = FLAGS.is_sync == 1``, ``args.mode == "sync"``) runs in the mode
  the migration trains (sync for MultiWorkerMirrored/Mirrored, async for
  ParameterServerStrategy); where that is not the script's default, the
  report says so: the migration does not reproduce the default mode.
* Not comparable: a migration that does not compile or names no strategy
  is reported (exit 2) without being run; the legacy side still runs once,
  so the report holds its losses.
* Losses: every task boots with :mod:`migrate.runtime.harness`, which records
  per-step training losses without editing the script (legacy: the training
  fetches of ``Session.run``; migrated: ``GradientTape.gradient`` inside the
  step function). Losses the program writes itself to ``TFMIGRATE_LOSS_LOG``
  take precedence (``--loss-source``). The loss of global step ``k`` is the
  mean over every record of step ``k`` (workers' shards, towers, replicas).
  Asynchronous workers interleave: for the statistical comparison the legacy
  harness's losses are keyed by their place in the job's order of updates
  (when each ``Session.run`` returned, all tasks on one clock), the order a
  ParameterServerStrategy chief logs its workers' steps in; each task's own
  step count would pair worker 0's k-th step with worker 1's.
* Fairness: both sides get the same seed (``--seed``, default 0: numpy,
  ``random``, TensorFlow's global seeds), data order is the script's own.
  Initial trainable values are recorded on both sides and compared: named
  variables by name, unnamed ones (``Variable_N``) in creation order by shape
  (their numbers shift when a side makes one the other does not), leaving
  out tf.distribute's own variables (MultiWorkerMirroredStrategy's collective
  ordering tokens). A legacy program that draws them without op seeds
  (``tf.truncated_normal_initializer(stddev=0.1)``, get_variable's default
  glorot) starts differently on every run, so then (or with ``--align-init``)
  its values are carried into the migrated job by name instead, and the
  migration's own draws are compared with them by distribution (standard
  deviation and mean: a wrong initializer is still caught);
  ``--no-align-init`` compares values whatever the source says. The harness also defuses the
  known hang points of unmodified legacy code (30 s recovery wait, 120 s close
  grace period, spare sync tokens, sessions without ``device_filters``); the
  launcher waits for ps ports and ends ps tasks. What still hangs is killed at
  ``--timeout``, reported with its stack dump, exit 2.
* Comparison: synchronous, in-graph and single-worker runs step by step:
  ``|migrated - legacy| <= atol + rtol * |legacy|`` at every step (default
  rtol 1e-6: a wrong learning rate or summed gradients differ by percents from
  step 1 on), and both must have trained the same steps. Asynchronous runs
  with several workers are not reproducible step by step, so they are
  compared statistically (below).

Calibration of the asynchronous statistic
-----------------------------------------
Statistic (:func:`compare_statistical`): per run, the mean of the per-step
losses of the last ``W`` global steps (the same step range on both sides: up
to the last step every run reached; steps a run skipped are left out,
repeated ones averaged); per side, the median over ``K`` runs; equivalent
when the two medians differ by at most ``stat_rtol`` x the legacy median +
``stat_atol`` x the legacy initial loss (the mean of its first ``W`` steps),
or by at most the legacy job's own run-to-run scatter when that is wider
(:func:`legacy_scatter_bound`: the 99 % prediction bound ``t(n-1) x s x
sqrt(1 + pi/2n)`` from the standard deviation ``s`` of its ``n`` per-run
statistics). When the first bound does not decide, the legacy job runs
``SPREAD_RUNS`` (8) times in all before its scatter does (unless ``--runs``
fixed the runs): three runs bound it only to 12 standard deviations, eight to
3.8. Legacy programs whose workers interleave by the scheduler scatter far
more than the reference: dev corpus 47 (2 workers, an MLP with Adagrad on a
summed loss, 5 ms steps, 20 steps, W=10) gave per-run statistics 102..173
(s.d. 14.9 over 23 runs); where one worker happened to run every step
(3 runs in 13) the value was 125.815, bit for bit what its
ParameterServerStrategy migration (a chief awaiting each step) gave at every
run, and ``--workers 1`` agrees step by step. Resampling those 23 runs
(20000 times, 3 against 3), the range of 3 legacy runs, the bound used
before, made the job NOT EQUIVALENT to itself 15.1 % of the time and to its
migration 12.5 %; the prediction bound, topped up to 8 runs when needed,
0.28 % and 0.005 %. The price is resolution: at 20 steps that job's
scatter hides a learning rate 10x too small (158.5, inside 102..173); at 200
steps it shows (24.0 against 3.2..7.9). The verdict says how coarse it was.

The absolute part matters once training drives the loss near zero: on
``tests/fixtures/realistic/async_mts_hooks.py`` (noise-free linear target, 2
workers, 40 steps) the medians were 0.0044 vs 0.0051, 14 % apart relatively
but 0.03 % of the initial loss of about 2.5.

Measured on ``legacy_reference/async_ps.py`` (2 workers, 30 steps, lr 0.05,
each batch trained once) on the project's 2-core machine, shared and loaded
(load average 6-9), W=10:

* legacy vs legacy, 12 runs: run statistic 0.5548..0.5586 (spread 0.7 %);
  medians of two disjoint random K-run samples differ by at most 0.7 % (K=1),
  0.5 % (K=3), 0.1 % (K=5) over 2000 resamples;
* legacy vs the ParameterServerStrategy migration (6 runs, statistic
  0.5473..0.5579: the coordinator runs the first closures of both workers
  from the initial weights, the legacy chief-ready signal staggers them):
  K=3 medians differ by 1.1 % (p50), 1.3 % (p95), 1.6 % (max);
* a migration with the learning rate doubled (3 runs): +1.7 % (median).

Defaults: K=3 (CI cost: 6 cluster runs), W=10, ``stat_rtol`` 0.05 (three
times the largest legacy-vs-migration difference seen), ``stat_atol`` 0.01
(for async_ps: 0.0067 on top of 0.028). The statistic is a guard against
gross errors only: for this small model the loss plateaus at
the data noise within 30 steps, so a doubled learning rate moves it by less
than the asynchronous noise (the notes measured TF1-vs-PSS p95 of 13 % with
K=3 on a noisier setup). Subtle errors are what the exact step-by-step runs
are for: check asynchronous code with ``--workers 1`` first (bit-identical
when equivalent). Other programs have other noise: recalibrate ``--runs``
and ``--stat-rtol`` from the spread of the per-run statistics that the
JSON report lists for each side (``comparison.statistic``).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from migrate import __version__
from migrate.runtime import legacy_compat, legacy_env, losslog
from migrate.runtime.cluster import TASK_PYTHON_ENV, ClusterResult, Fault, run_cluster
from migrate.runtime.inputs import missing_inputs
from migrate.runtime.sync_switch import find_sync_switch
from migrate.runtime.topology import (
    TRAINER_JOBS,
    LaunchSpec,
    ProgramInfo,
    TopologyError,
    analyze,
    chief_only_code,
    legacy_launch,
    migrated_launch,
    unseeded_initializers,
)

__all__ = ["CheckOptions", "main", "run_check"]

SCHEMA_VERSION = 1
EXIT_EQUIVALENT, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2

DEFAULT_WORKERS = 2
DEFAULT_STEPS = 20
DEFAULT_RTOL = 1e-6
# Step-by-step default when the migration uses a Keras optimizer that rounds
# unlike TF1's kernel (topology._ROUNDING_OPTIMIZERS). Measured TF1 vs Keras 3
# on MLPs (regression and classification, lr 1e-3..1e-1, same data and
# initial values), max relative loss difference over the first 100 steps:
# Adam 5.1e-5, SGD momentum (Nesterov or not) 6.5e-6. A wrong learning rate,
# summed gradients or a dropped shard differ by percents within a few steps.
# Over hundreds of steps at a high rate the rounding can grow chaotically
# (Adam lr 0.1: 2e-2 by step 500): compare fewer steps there.
ROUNDING_OPTIMIZER_RTOL = 1e-4
DEFAULT_ATOL = 1e-8
DEFAULT_STAT_RTOL = 0.05
DEFAULT_STAT_ATOL = 0.01  # x the legacy initial loss
DEFAULT_STAT_RUNS = 3
# Legacy runs measured, when the calibrated bound does not decide an
# asynchronous comparison, before the legacy job's own scatter does.
SPREAD_RUNS = 8
DEFAULT_WINDOW = 10
DEFAULT_SEED = 0
# Statistically compared jobs must make as many updates: asynchronous TF1
# workers overshoot a global-step bound by a step or two each.
STEP_COUNT_RTOL = 0.1
DEFAULT_TIMEOUT = 300.0
STACK_LINES_SHOWN = 25

HARNESS_HOOK = "migrate.runtime.harness"
PSS = "parameter_server"


# --------------------------------------------------------------------------- options


@dataclass
class CheckOptions:
    legacy: Path
    migrated: Path | None = None
    workers: int | None = None  # None: as many as the script's own cluster has, else DEFAULT_WORKERS
    steps: int | None = DEFAULT_STEPS
    runs: int | None = None  # None: 1 step by step, DEFAULT_STAT_RUNS statistically
    # Both sides seeded alike by default: legacy scripts draw their batches from
    # the unseeded global NumPy generator more often than not.
    seed: int | None = DEFAULT_SEED
    rtol: float | None = None  # None: DEFAULT_RTOL, or ROUNDING_OPTIMIZER_RTOL (see step_rtol)
    atol: float = DEFAULT_ATOL
    stat_rtol: float = DEFAULT_STAT_RTOL
    stat_atol: float = DEFAULT_STAT_ATOL
    window: int = DEFAULT_WINDOW
    timeout: float = DEFAULT_TIMEOUT
    out: Path | None = None
    align_init: bool | None = None  # None: when the legacy initial values are unseeded random draws
    mnist_standin: bool = False  # set by the check: the legacy script reads TF1's MNIST reader
    contrib_standin: bool = False  # set by the check: the legacy script uses provided tf.contrib members
    loss_source: str = "auto"  # auto | program | harness
    robust: bool = True
    plot: bool = True
    mode: str = "auto"  # auto | step | statistical
    # fault injection on both sides: kill the chief (legacy worker:0, migrated
    # chief or worker:0) once it logged this step, and restart it
    kill_chief_at: int | None = None
    # extra argv for the scripts on both sides ("{run_dir}" -> that run's own directory)
    script_args: tuple[str, ...] = ()
    # the legacy launcher's own arguments for every task (--launcher): before the
    # check's, so the check's steps and directories win
    launcher_args: tuple[str, ...] = ()
    # the TensorFlow the legacy side runs on: None/"auto" (Estimator programs on
    # TF 2.15), "installed", or a version (migrate.runtime.legacy_env)
    legacy_tf: str | None = None


# --------------------------------------------------------------------------- losses


@dataclass
class RunOutcome:
    index: int
    result: ClusterResult
    records: list[losslog.LossRecord]
    loss_source: str
    init_path: Path | None
    notes: list[str] = field(default_factory=list)
    cluster_map: dict[str, dict] = field(default_factory=dict)  # task -> script/launcher address
    # the job trained past the steps it was asked for and was stopped at this
    # step index (its own bound ignores the step option): see _overrun_limit
    overran_at: int | None = None

    @property
    def series(self) -> dict[int, float]:
        return per_step_means(self.records)

    @property
    def kill_gap(self) -> set[int]:
        """Steps the run trained but never logged because a fault killed the
        task between a checkpoint and its loss record: the restarted task
        resumes past its predecessor's last logged step."""
        return fault_gap(self.result)

    def as_dict(self) -> dict:
        return {
            "run": self.index,
            "ok": self.result.ok,
            "wall_time": round(self.result.wall_time, 3),
            "log_dir": str(self.result.log_dir),
            "loss_source": self.loss_source,
            "records": len(self.records),
            "steps": len(self.series),
            "harness_fired": self.notes,
            "pids": _task_pids(self.result),
            "faults": [
                {"task": e.fault.task_name, "step_seen": e.step_seen, "killed_pid": e.killed_pid,
                 "restarted_pid": e.restarted_pid}
                for e in self.result.faults
            ],
            "steps_lost_to_faults": sorted(self.kill_gap),
            "cluster_map": self.cluster_map,
            "stopped_past_steps_at": self.overran_at,
            "losses": {str(step): loss for step, loss in sorted(self.series.items())},
        }


def fault_gap(result: ClusterResult) -> set[int]:
    gap: set[int] = set()
    for event in result.faults:
        task = next((t for t in result.tasks if t.name == event.fault.task_name), None)
        if event.resume_offset is None or task is None or task.loss_path is None:
            continue
        try:
            data = task.loss_path.read_bytes()
        except OSError:
            continue
        before = losslog.parse(data[: event.resume_offset])
        after = losslog.parse(data[event.resume_offset :])
        if before and after:
            last_logged = max(r.step for r in before)
            resumed_at = min(r.step for r in after)
            gap.update(range(last_logged + 1, resumed_at))
    return gap


def _task_pids(result: ClusterResult) -> dict[str, list[int]]:
    return {t.name: list(t.pids) for t in result.tasks}


def per_step_means(records: list[losslog.LossRecord]) -> dict[int, float]:
    """Global step -> mean loss over every record of that step."""
    return {
        step: math.fsum(r.loss for r in group) / len(group)
        for step, group in sorted(losslog.by_step(records).items())
    }


def _in_job_order(paths: list[Path]) -> list[losslog.LossRecord]:
    """Legacy harness records keyed by their place in the job's order of
    updates (the time each Session.run returned, all tasks on one clock):
    asynchronous workers interleave, so worker 0's k-th step is not the
    job's k-th. This is the order a ParameterServerStrategy chief logs its
    workers' steps in. Records without a time keep their own step."""
    timed, untimed = [], []
    for path in paths:
        for line in path.read_bytes().splitlines():
            try:
                obj = json.loads(line)
                record = losslog.LossRecord(int(obj["step"]), str(obj["task"]), float(obj["loss"]))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            when = obj.get("time")
            if isinstance(when, (int, float)):
                timed.append((float(when), record))
            else:
                untimed.append(record)
    # one update per task and step (the towers of an in-graph step share its place)
    updates: dict[tuple[str, int], float] = {}
    for when, r in timed:
        updates.setdefault((r.task.split("/")[0], r.step), when)
    place = {key: n for n, key in enumerate(sorted(updates, key=lambda key: (updates[key], key)))}
    ordered = [losslog.LossRecord(place[(r.task.split("/")[0], r.step)], r.task, r.loss) for _, r in timed]
    return ordered + untimed


def harness_records(log_dir: Path, job_order: bool = False) -> list[losslog.LossRecord]:
    """Losses the harness recorded in ``log_dir`` (both of its formats).
    ``job_order``: key graph-program records by their place in the job's
    order of updates (asynchronous runs) instead of each task's step count."""
    from migrate.runtime.harness import decode_print_line

    paths = sorted(log_dir.glob("harness-losses-*.jsonl"))
    records = _in_job_order(paths) if job_order else losslog.read(paths)
    for path in sorted(log_dir.glob("harness-print-*.txt")):
        task = path.stem[len("harness-print-") :].replace("-", ":", 1)
        counters: dict[str, int] = {}
        text = path.read_text(encoding="utf-8", errors="replace")
        # a line without its newline is still being written (or was torn by a
        # kill): its number may be cut short, so it is not a record
        for line in text.splitlines()[: text.count("\n")]:
            decoded = decode_print_line(line)
            if decoded is None:
                continue
            replica, loss = decoded
            step = counters.get(replica, 0)
            counters[replica] = step + 1
            records.append(losslog.LossRecord(step, f"{task}/replica:{replica}", loss))
    records.sort()
    return records


def _records_so_far(log_dir: Path, loss_source: str, job_order: bool) -> list:
    """The loss records a running job has written: the program's own log, else
    (or as ``loss_source`` says) what the harness recorded."""
    records = []
    if loss_source != "harness":
        records = losslog.read(sorted(log_dir.glob("losses-*.jsonl")))
    if not records and loss_source != "program":
        records = harness_records(log_dir, job_order=job_order)
    return records


def _trained_steps_reached(log_dir: Path, steps: int, loss_source: str, job_order: bool) -> bool:
    """Whether a running job has recorded its first ``steps`` steps, each by
    every task (or replica) that records it: ``run_cluster``'s stop_when for
    scripts without a step-count option."""
    try:
        records = _records_so_far(log_dir, loss_source, job_order)
        if not records:
            return False
        if job_order:  # asynchronous workers: the job's first steps, whoever ran them
            return len({r.step for r in records if r.step < steps}) >= steps
        counts: dict[str, int] = {}
        for r in records:
            if r.step < steps:
                counts[r.task] = counts.get(r.task, 0) + 1
        return bool(counts) and min(counts.values()) >= steps
    except OSError:
        return False


def _overrun_limit(steps: int, trainers: int) -> int:
    """The step index past which a job asked for ``steps`` steps is taken to
    ignore that bound (a hard-coded ``StopAtStepHook(last_step=10000)`` or
    ``while step < 1000000`` beside the step option check passes). Generous:
    asynchronous workers each bounded by their own count train ``trainers x
    steps`` updates, and a job that honours the bound overshoots it by a step
    or two."""
    return 2 * steps * max(trainers, 1) + 10


def _trained_past(log_dir: Path, limit: int, loss_source: str, job_order: bool) -> bool:
    """Whether a running job has recorded a step at index ``limit`` or later
    (any task or replica): ``run_cluster``'s stop_when for jobs training past
    the steps they were asked for."""
    try:
        return any(r.step >= limit for r in _records_so_far(log_dir, loss_source, job_order))
    except OSError:
        return False


def _harness_fired(log_dir: Path) -> list[str]:
    fired: list[str] = []
    for path in sorted(log_dir.glob("harness-notes-*.json")):
        try:
            notes = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for what in notes.get("fired", []):
            entry = f"{notes.get('task', path.stem)}: {what}"
            if entry not in fired:
                fired.append(entry)
    return fired


def cluster_map(log_dir: Path) -> dict[str, dict]:
    """How the harness mapped each task of the cluster the program built
    (``{"ps:0": {"script": "pc-01:2222", "launcher": "127.0.0.1:41234"}}``),
    merged over the tasks' notes."""
    mapping: dict[str, dict] = {}
    for path in sorted(log_dir.glob("harness-notes-*.json")):
        try:
            notes = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for task, entry in (notes.get("cluster_map") or {}).items():
            mapping.setdefault(task, entry)
    return dict(sorted(mapping.items()))


def _init_file(log_dir: Path, preferred: tuple[str, ...]) -> Path | None:
    for stem in preferred:
        path = log_dir / f"harness-init-{stem}.npz"
        if path.exists():
            return path
    found = sorted(log_dir.glob("harness-init-*.npz"))
    return found[0] if found else None


def _own_init_file(log_dir: Path) -> Path | None:
    found = sorted(log_dir.glob("harness-own-init-*.npz"))
    return found[0] if found else None


def _load_init(path: Path | None) -> dict:
    if path is None:
        return {}
    import numpy as np

    try:
        with np.load(path) as data:
            names = [str(n) for n in data["__names__"]]
            return {n: data[f"v{i}"] for i, n in enumerate(names)}
    except (OSError, KeyError, ValueError):
        return {}


# --------------------------------------------------------------------------- running


class CheckError(Exception):
    """``check`` could not produce a comparison (exit 2)."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details = details


def _stack_excerpt(result: ClusterResult) -> str:
    parts = []
    # Trainers first: a hung worker's stack matters more than a ps in join().
    for t in sorted(result.tasks, key=lambda t: t.job == "ps"):
        if t.stack_dump:
            lines = t.stack_dump.splitlines()
            shown = "\n".join(lines[:STACK_LINES_SHOWN])
            more = (
                f"\n    ... ({len(lines) - STACK_LINES_SHOWN} more lines)"
                if len(lines) > STACK_LINES_SHOWN
                else ""
            )
            parts.append(f"--- stack dump of {t.name} (log {t.log_path}):\n{shown}{more}")
    return "\n".join(parts)


def _non_chief_hint(side: str, spec: LaunchSpec, result: ClusterResult) -> str:
    """A legacy worker other than the TF1 chief raising on its own (code the
    program runs as a non-chief: a Supervisor without a summary writer) is the
    program's failure with several workers, not the launch's: with its chief
    alone (``--workers 1``) it still runs, and can still be checked."""
    m = re.match(r"worker:(\d+) raised an uncaught exception", result.reason or "")
    if side != "legacy" or m is None or int(m.group(1)) == 0 or result.timed_out:
        return ""
    if {"chief", "master"} & set(spec.jobs) or spec.jobs.get("worker", 0) < 2:
        return ""
    return (f"; the legacy program fails by itself on worker:{m.group(1)}, which is not its chief (worker:0):"
            " with several workers it fails as written; `--workers 1` checks it with its chief alone")


def _run_side(
    side: str,
    program: Path,
    spec: LaunchSpec,
    runs: int,
    opts: CheckOptions,
    out: Path,
    extra_env: dict[str, str],
    failed_runs: list[dict],
    pythonpath: str | None = None,
    job_order: bool = False,
    first: int = 0,
) -> list[RunOutcome]:
    features = ["record", "init", "isolate"]
    if side == "legacy":
        features.append("tf1layers")
    if opts.mnist_standin:
        features.append("mnist")  # both sides: the same examples in the same order
    if opts.contrib_standin:
        features.append("contrib")  # both sides: a migration may keep what TF1 ran
    if opts.robust and side == "legacy":
        features.append("robust")
    if opts.loss_source == "harness":
        features.append("hide")
    env: dict[str, str | None] = {
        "TFMIGRATE_BOOT_HOOKS": HARNESS_HOOK,
        "TFMIGRATE_HARNESS": ",".join(features),
        **spec.env,
        **extra_env,
    }
    trainers = sum(spec.jobs.get(job, 0) for job in TRAINER_JOBS)
    if opts.robust and side == "legacy" and "ps" in spec.jobs and trainers > 1:
        env["TFMIGRATE_HARNESS_BARRIER"] = str(trainers)
    if opts.seed is not None:
        env["TFMIGRATE_SEED"] = str(opts.seed)
        env["PYTHONHASHSEED"] = str(opts.seed)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (pythonpath, os.environ.get("PYTHONPATH", "")) if p
        )
    outcomes = []
    for i in range(first, first + runs):
        log_dir = out / f"{side}-run{i}"
        # A reused --out must not mix an earlier run's observations (or its
        # barrier files) into this one; the launcher clears its own files.
        for stale in log_dir.glob("harness-*"):
            stale.unlink()
        if any("{run_dir}" in a for a in (*opts.launcher_args, *spec.args, *opts.script_args)):
            # state the scripts keep there (checkpoints) must not leak into this run
            shutil.rmtree(log_dir, ignore_errors=True)
        print(f"  running {side} run {i + 1}/{first + runs} ...", file=sys.stderr, flush=True)
        faults = []
        if opts.kill_chief_at is not None:
            chief = next(job for job in TRAINER_JOBS if job in spec.jobs)
            faults.append(Fault(job=chief, index=0, at_step=opts.kill_chief_at, restart=True))
        run_dir = str(log_dir.resolve())
        script_args = [a.replace("{run_dir}", run_dir) for a in (*opts.launcher_args, *spec.args, *opts.script_args)]
        stop_when = overrun_limit = None
        if spec.step_cap is not None:
            stop_when = functools.partial(
                _trained_steps_reached, log_dir, spec.step_cap, opts.loss_source, job_order
            )
        elif opts.steps:
            # A script may take the step option and still train to a bound of
            # its own (a hard-coded StopAtStepHook, `while step < 1000000`):
            # stopped once it is far past the steps asked for. Its first
            # steps are what it computes either way.
            overrun_limit = _overrun_limit(opts.steps, trainers)
            stop_when = functools.partial(_trained_past, log_dir, overrun_limit, opts.loss_source, job_order)
        result = run_cluster(
            program,
            spec.jobs,
            args=script_args,
            role_style=spec.launcher_style,
            task_args=spec.task_args if (spec.argv_roles or spec.role_match) else None,
            task_env=spec.task_env if (spec.role_env or spec.fixed_task) else None,
            flag_names=spec.flag_names or None,
            server_only=spec.server_only,
            timeout=opts.timeout,
            log_dir=log_dir,
            env=env,
            faults=faults,
            stop_when=stop_when,
        )
        if faults and not result.faults:
            raise CheckError(f"{side} run {i + 1}: the chief never reached step {opts.kill_chief_at}")
        if not result.ok:
            failed_runs.append(
                {
                    "run": i,
                    "ok": False,
                    "timed_out": result.timed_out,
                    "reason": result.reason,
                    "wall_time": round(result.wall_time, 3),
                    "log_dir": str(log_dir),
                    "pids": _task_pids(result),
                }
            )
            what = "timed out" if result.timed_out else "failed"
            mapping = cluster_map(log_dir)
            if mapping:
                failed_runs[-1]["cluster_map"] = mapping
            raise CheckError(
                f"{side} run {i + 1} {what}: {result.reason}{_non_chief_hint(side, spec, result)}",
                _stack_excerpt(result) + f"\n{result.summary()}",
            )
        program_records = list(result.losses)
        harness = harness_records(log_dir, job_order=job_order)
        if opts.loss_source == "program" or (opts.loss_source == "auto" and program_records):
            records, source = program_records, "program"
        else:
            records, source = harness, "harness"
        if spec.step_cap is not None:
            # the steps a stopped job trained past the cap are cut short by the stop
            records = [r for r in records if r.step < spec.step_cap]
        overran_at = None
        if overrun_limit is not None and result.stopped_early:
            overran_at = max((r.step for r in records), default=None)
            records = [r for r in records if r.step < opts.steps]
        if not records:
            raise CheckError(
                f"{side} run {i + 1} finished but recorded no training losses "
                f"(loss source: {source}); logs in {log_dir}"
            )
        preferred = ("chief-0", "master-0", "worker-0")
        outcomes.append(
            RunOutcome(
                i, result, records, source, _init_file(log_dir, preferred), _harness_fired(log_dir),
                cluster_map(log_dir), overran_at,
            )
        )
    return outcomes


# --------------------------------------------------------------------------- comparing


@dataclass
class Comparison:
    mode: str  # "step" | "statistical"
    equivalent: bool
    reason: str
    steps_compared: int = 0
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    first_failing_step: int | None = None
    only_legacy: list[int] = field(default_factory=list)
    only_migrated: list[int] = field(default_factory=list)
    statistic: dict | None = None

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "equivalent": self.equivalent,
            "reason": self.reason,
            "steps_compared": self.steps_compared,
            "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff,
            "first_failing_step": self.first_failing_step,
            "steps_only_in_legacy": self.only_legacy,
            "steps_only_in_migrated": self.only_migrated,
            "statistic": self.statistic,
        }


def _rel(diff: float, ref: float) -> float:
    return diff / abs(ref) if ref else (0.0 if diff == 0 else math.inf)


def compare_steps(
    legacy: dict[int, float],
    migrated: dict[int, float],
    rtol: float,
    atol: float,
    legacy_gap: set[int] = frozenset(),
    migrated_gap: set[int] = frozenset(),
) -> Comparison:
    """Step-by-step comparison of two per-step loss series. A step one side
    lacks only because a fault killed its task before the step's loss record
    was written (``*_gap``, see `fault_gap`) is not a difference."""
    common = sorted(set(legacy) & set(migrated))
    only_l = sorted(set(legacy) - set(migrated) - migrated_gap)
    only_m = sorted(set(migrated) - set(legacy) - legacy_gap)
    max_abs = max_rel = 0.0
    first_fail = None
    for step in common:
        diff = abs(migrated[step] - legacy[step])
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, _rel(diff, legacy[step]))
        if first_fail is None and diff > atol + rtol * abs(legacy[step]):
            first_fail = step
    comp = Comparison(
        "step",
        True,
        "",
        len(common),
        max_abs if common else None,
        max_rel if common else None,
        first_fail,
        only_l,
        only_m,
    )
    if not common:
        comp.equivalent, comp.reason = False, "no step was trained by both programs"
    elif first_fail is not None:
        comp.equivalent = False
        comp.reason = (
            f"losses differ from step {first_fail} on (legacy {legacy[first_fail]:.9g}, "
            f"migrated {migrated[first_fail]:.9g}; tolerance rtol {rtol:g} atol {atol:g})"
        )
    elif only_l or only_m:
        comp.equivalent = False
        comp.reason = (
            f"the programs trained different steps: {len(only_l)} only in legacy "
            f"{_steps_text(only_l)}, {len(only_m)} only in migrated {_steps_text(only_m)}"
        )
    else:
        comp.reason = f"all {len(common)} steps within rtol {rtol:g} atol {atol:g}"
    lost = [
        f"{side} {_steps_text(sorted(steps))}"
        for side, steps in (
            ("legacy", set(migrated) & legacy_gap - set(legacy)),
            ("migrated", set(legacy) & migrated_gap - set(migrated)),
        )
        if steps
    ]
    if lost:
        comp.reason += (
            f"; not compared, trained but not logged before a killed task's checkpoint: "
            f"{', '.join(lost)}"
        )
    return comp


def _steps_text(steps: list[int], limit: int = 6) -> str:
    if not steps:
        return "[]"
    shown = ", ".join(map(str, steps[:limit]))
    return f"[{shown}{', ...' if len(steps) > limit else ''}]"


def trailing_mean(series: dict[int, float], window: int, last: int | None = None) -> float:
    """Mean loss of the steps ``last - window + 1 .. last`` (default: the
    series' last step) that the run trained. A window of global steps, not of
    records: an asynchronous run may skip or repeat a step."""
    last = max(series) if last is None else last
    values = [v for s, v in series.items() if last - window < s <= last]
    if not values:  # the run ended before the window: its last records
        values = [series[s] for s in sorted(series)[-window:]]
    return math.fsum(values) / len(values)


def leading_mean(series: dict[int, float], window: int) -> float:
    """Mean loss of the first ``window`` steps the run trained."""
    values = [series[s] for s in sorted(series)[:window]]
    return math.fsum(values) / len(values)


# Two-sided 99 % quantiles of Student's t by degrees of freedom (1..30); past
# 30 the normal's 2.576 is within 7 % of them.
_T_995 = (
    63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
    3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
    2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750,
)


def legacy_scatter_bound(per_run: list[float]) -> float:
    """How far another run's statistic may lie from the median of these runs
    by the legacy job's own run-to-run scatter: the two-sided 99 % prediction
    bound ``t(n-1) x s x sqrt(1 + pi / 2n)`` (``s`` the runs' standard
    deviation, ``pi / 2n`` the variance of their median in units of s^2).
    ``t`` with n-1 degrees of freedom pays for estimating ``s`` from n runs:
    9.9 with 3 runs, 3.5 with 8. A migration whose statistic is one run (or
    the median of several) of a job that trains like the legacy one lies
    within it 99 times in 100; 0 with fewer than two runs."""
    n = len(per_run)
    if n < 2:
        return 0.0
    t = _T_995[n - 2] if n - 1 <= len(_T_995) else 2.576
    return t * statistics.stdev(per_run) * math.sqrt(1 + math.pi / (2 * n))


def needs_more_legacy_runs(comp: Comparison, runs_given: int | None, legacy_runs: int) -> bool:
    """Whether the legacy job should run again (to ``SPREAD_RUNS`` in all)
    before the verdict: the calibrated bound does not decide, so the legacy
    job's own scatter does, and a few runs measure it too loosely to tell
    anything apart (3 runs: a bound of 12 standard deviations; the range of 3
    runs, the bound used before, is narrower than two medians of the same
    job differ 1 time in 8). Not when ``--runs`` fixed the runs, nor when the
    jobs made different numbers of updates (no scatter excuses that)."""
    stat = comp.statistic or {}
    return (
        runs_given is None
        and legacy_runs < SPREAD_RUNS
        and bool(stat.get("updates_agree"))
        and abs(stat["migrated_median"] - stat["legacy_median"]) > stat["calibrated_difference"]
    )


def compare_statistical(
    legacy_runs: list[dict[int, float]],
    migrated_runs: list[dict[int, float]],
    window: int,
    stat_rtol: float,
    stat_atol: float = 0.0,
) -> Comparison:
    """Median over runs of the mean loss of the last ``window`` steps.

    Equivalent when ``|migrated - legacy| <= max(stat_rtol * |legacy| +
    floor, scatter)``, ``floor = stat_atol * (legacy median of the mean
    loss of the first window)``: once training has driven the loss close to
    zero, relative differences of what is left are noise, not a different
    training. ``scatter`` (`legacy_scatter_bound`) is the legacy job's own
    run-to-run noise: asynchronous workers interleave differently at every
    run, and a job whose runs scatter more than the calibrated bound cannot
    tell a migration apart by less (legacy against legacy would fail)."""
    # The same window of global steps on both sides: the last step every run reached.
    last = min(max(s) for s in [*legacy_runs, *migrated_runs])
    l_stats = [trailing_mean(s, window, last) for s in legacy_runs]
    m_stats = [trailing_mean(s, window, last) for s in migrated_runs]
    l_med, m_med = statistics.median(l_stats), statistics.median(m_stats)
    initial = statistics.median(leading_mean(s, window) for s in legacy_runs)
    floor = stat_atol * abs(initial)
    diff = abs(m_med - l_med)
    rel = _rel(diff, l_med)
    calibrated = stat_rtol * abs(l_med) + floor
    scatter = legacy_scatter_bound(l_stats)
    allowed = max(calibrated, scatter)
    l_steps = [len(s) for s in legacy_runs]
    m_steps = [len(s) for s in migrated_runs]
    # The windows above are cut to the steps both reached; the number of updates
    # itself must agree too (a loop bounded by each TF1 worker's own count makes
    # N x steps updates, a ParameterServerStrategy chief's loop steps).
    l_reach = statistics.median(max(s) + 1 for s in legacy_runs)
    m_reach = statistics.median(max(s) + 1 for s in migrated_runs)
    reach_ok = abs(l_reach - m_reach) <= max(3, STEP_COUNT_RTOL * l_reach)
    comp = Comparison(
        "statistical",
        diff <= allowed and reach_ok,
        "",
        steps_compared=min(l_steps + m_steps),
        max_abs_diff=diff,
        max_rel_diff=rel,
        statistic={
            "name": f"median over runs of the mean loss of the last {window} steps",
            "window": window,
            "window_steps": [last - window + 1, last],
            "legacy_per_run": l_stats,
            "migrated_per_run": m_stats,
            "legacy_median": l_med,
            "migrated_median": m_med,
            "relative_difference": rel,
            "stat_rtol": stat_rtol,
            "stat_atol": stat_atol,
            "legacy_initial_loss": initial,
            "legacy_run_range": max(l_stats) - min(l_stats),
            "legacy_run_sd": statistics.stdev(l_stats) if len(l_stats) > 1 else 0.0,
            "calibrated_difference": calibrated,
            "legacy_scatter_bound": scatter,
            "allowed_difference": allowed,
            "legacy_steps_per_run": l_steps,
            "migrated_steps_per_run": m_steps,
            "legacy_updates": l_reach,
            "migrated_updates": m_reach,
            "updates_agree": reach_ok,
        },
    )
    # The bound that decides: the calibrated one whenever it suffices (a few
    # runs bound the scatter loosely, so it is named only when it is needed).
    by_scatter = diff > calibrated and scatter > calibrated
    shown = allowed if by_scatter else calibrated
    why = (
        f"the legacy job's own scatter over {len(l_stats)} runs ({min(l_stats):.4g}..{max(l_stats):.4g},"
        f" s.d. {comp.statistic['legacy_run_sd']:.3g}; 99 % prediction bound)"
        if by_scatter
        else f"{stat_rtol:g} x legacy + {stat_atol:g} x initial loss {initial:.3g}"
    )
    comp.reason = (
        f"trailing-window medians legacy {l_med:.6g}, migrated {m_med:.6g}: difference "
        f"{diff:.3g} (relative {rel:.3g}) {'<=' if diff <= allowed else '>'} allowed "
        f"{shown:.3g} = {why}"
    )
    if by_scatter and diff <= allowed:
        # The verdict is no finer than the legacy job's own noise: say how coarse.
        comp.reason += (
            f"; a migration closer than {allowed:.3g} ({_rel(allowed, l_med):.0%} of the legacy level) to the"
            " legacy job is not told apart from it: --workers 1 compares step by step (exact), more --steps"
            " let asynchronous runs settle"
        )
    if not reach_ok:
        comp.reason = (
            f"the legacy job made {l_reach:g} updates, the migration {m_reach:g} (median per run): the"
            " migrated loop does not train as many steps (a loop bounded by each TF1 worker's own step"
            " count trains workers x steps in all; a ParameterServerStrategy chief's loop trains steps);"
            f" {comp.reason}"
        )
    if len(legacy_runs) < 2:
        # one run shows no scatter: the bound cannot widen to the legacy job's own noise
        comp.reason += (
            "; one legacy run measures none of the job's own run-to-run scatter:"
            f" use --runs {DEFAULT_STAT_RUNS} or more before trusting this verdict"
        )
    return comp


def step_rtol(given: float | None, migrated: ProgramInfo) -> tuple[float, str]:
    """The step-by-step relative tolerance, and why when it is not the default."""
    if given is not None:
        return given, ""
    if migrated.rounding_optimizers:
        names = ", ".join(migrated.rounding_optimizers)
        return ROUNDING_OPTIMIZER_RTOL, (
            f"the migration uses Keras {names}, whose update rounds unlike TF1's kernel"
            f" (measured up to 5e-5 over 100 steps); --rtol {DEFAULT_RTOL:g} asks for bit-level agreement"
        )
    return DEFAULT_RTOL, ""


# Own draws vs legacy values, per variable of n values: the standard deviations
# may differ by 6/sqrt(2(n-1)) relatively, the means by 6 standard errors of
# their difference (noise of two independent draws is about a sixth of that:
# a stddev changed by 3x, or a shifted mean, is far outside it). Fewer than
# this many values tell nothing.
_MIN_VALUES_FOR_DISTRIBUTION = 16


def compare_init_distributions(legacy: dict, own: dict) -> list[str]:
    """Variables whose migrated initializer draws from another distribution
    than the legacy one (the initial values were carried over, so a wrong
    initializer shows only here): ``"w (std 0.1 vs legacy 0.3)"``."""
    import numpy as np

    from migrate.runtime.harness import match_names, pair_initial_values

    differ = []
    pairs = pair_initial_values(legacy, own)
    for lname, oname in match_names(list(legacy), list(own)).items():
        oname = pairs.get(lname, oname)
        a = np.asarray(legacy[lname], dtype=np.float64).ravel()
        b = np.asarray(own[oname], dtype=np.float64).ravel()
        if a.shape != b.shape:
            differ.append(f"{lname} (own draw shape {b.shape} vs legacy {a.shape})")
            continue
        sa, sb, ma, mb = a.std(), b.std(), a.mean(), b.mean()
        if a.size < 2:
            # one value (a scalar weight): neither a constant nor a draw can be told from it
            continue
        if sa == 0:  # a constant: the migration's must be the same constant
            if not np.allclose(b, a, rtol=1e-6, atol=1e-8):
                differ.append(f"{lname} (own initial value {mb:.4g}, legacy constant {ma:.4g})")
            continue
        n = a.size
        if n < _MIN_VALUES_FOR_DISTRIBUTION:
            continue
        if abs(sb / sa - 1) > 6 / math.sqrt(2 * (n - 1)):
            differ.append(f"{lname} (own draws std {sb:.4g} vs legacy {sa:.4g})")
        elif abs(mb - ma) > 6 * sa * math.sqrt(2 / n):
            differ.append(f"{lname} (own draws mean {mb:.4g} vs legacy {ma:.4g})")
    return differ


def compare_init(legacy: dict, migrated: dict, rtol: float, atol: float) -> dict:
    """Initial trainable values, paired by variable name (unnamed variables
    by creation order and shape: ``pair_initial_values``)."""
    import numpy as np

    from migrate.runtime.harness import UNNAMED_VARIABLE, match_names, pair_initial_values

    pairs = pair_initial_values(legacy, migrated)
    # a name both sides use for variables of different shapes, with no other
    # partner of the legacy shape, is a real difference: reported, not skipped
    for lname, mname in match_names(list(legacy), list(migrated)).items():
        pairs.setdefault(lname, mname)
    pairs = {lname: pairs[lname] for lname in legacy if lname in pairs}
    mismatched, max_abs, compared = [], 0.0, 0
    by_order = sum(1 for lname, mname in pairs.items() if lname != mname and UNNAMED_VARIABLE.search(lname))
    for lname, mname in pairs.items():
        a, b = np.asarray(legacy[lname]), np.asarray(migrated[mname])
        if a.shape != b.shape:
            mismatched.append(f"{lname} (shape {a.shape} vs {b.shape})")
            continue
        compared += 1
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        max_abs = max(max_abs, diff)
        if not np.allclose(b, a, rtol=rtol, atol=atol):
            mismatched.append(f"{lname} (max abs diff {diff:.3g})")
    return {
        "legacy_variables": len(legacy),
        "migrated_variables": len(migrated),
        "compared": compared,
        "paired_by_order": by_order,
        "max_abs_diff": max_abs if compared else None,
        "mismatched": mismatched,
        "unmatched_legacy": sorted(set(legacy) - set(pairs)),
    }


# --------------------------------------------------------------------------- report


def _launch_text(spec: LaunchSpec) -> str:
    jobs = " ".join(f"{j}:{n}" for j, n in spec.jobs.items())
    if spec.role_env:
        how = "env " + "/".join(spec.role_env.values())
    elif spec.argv_roles:
        how = "sys.argv"
    elif spec.role_match:
        how = f"--{spec.role_match[0]} looked up in its hosts"
    elif spec.role_style == "flags":
        how = "flags " + " ".join(f for f in (spec.flag_names.get("job"), spec.flag_names.get("index")) if f)
    else:
        how = spec.role_style
    return f"{jobs} ({how})"


def _cluster_map_text(mapping: dict[str, dict]) -> str:
    parts = []
    for task, entry in mapping.items():
        script, launcher = entry.get("script"), entry.get("launcher")
        if script is None:
            parts.append(f"{task} added at {launcher}")
        elif launcher is None:
            parts.append(f"{task} {script} not run by check")
        elif script == launcher:
            parts.append(f"{task} {launcher}")
        else:
            parts.append(f"{task} {script} -> {launcher}")
    return ", ".join(parts)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else f"{x:.3g}"


def render_table(report: dict) -> str:
    lines = [f"tfmigrate check: {report['legacy']['program']} vs {report['migrated']['program']}"]
    comp = report.get("comparison") or {}
    tol = report["tolerances"]
    if report.get("mode") == "statistical":
        how = (
            f"statistical over {report['runs']} runs (window {tol['window']}, "
            f"stat rtol {tol['stat_rtol']:g})"
        )
    else:
        how = f"step by step (rtol {tol['rtol']:g}, atol {tol['atol']:g})"
        if tol.get("rtol_reason"):
            how += f"\n  rtol {tol['rtol']:g}: {tol['rtol_reason']}"
    lines.append(
        f"strategy {report.get('strategy')}, {report['workers']} workers, "
        f"{report['steps'] if report['steps'] is not None else 'default'} steps, {how}"
    )
    tf_sides = [
        f"{side} TensorFlow {report[side]['tensorflow']['version']}"
        for side in ("legacy", "migrated")
        if report[side].get("tensorflow")
    ]
    if tf_sides:
        why = report["legacy"]["tensorflow"].get("why") if report["legacy"].get("tensorflow") else None
        lines.append(", ".join(tf_sides) + (f" ({why})" if why else ""))
    run_as = report["legacy"].get("run_as")
    if run_as:
        lines.append(
            "legacy written for TF 1.x / Python 2, run as TF2 runs TF1 code: "
            + "; ".join(run_as["changes"])
            + f" ({run_as['program']})"
        )
    provided = sorted({
        note.split(": ", 1)[-1].split(" run as ")[0]
        for r in report["legacy"].get("runs", [])
        for note in r.get("harness_fired", [])
        if "run as tfmigrate's TF1 code" in note and "tf.contrib." not in note
    })
    contrib = sorted({
        note.split(" run as ")[0]
        for r in report["legacy"].get("runs", [])
        for note in r.get("harness_fired", [])
        if note.split(": ", 1)[-1].startswith("tf.contrib.")
    })
    if contrib:
        lines.append(
            f"legacy on TF 2: {', '.join(c.split(': ', 1)[-1] for c in contrib)} run as TF 1.x ran them"
            " (TF 2 removed tf.contrib; tfmigrate provides these members exactly)"
        )
    if report.get("mnist_standin"):
        lines.append(
            "MNIST: tensorflow.examples.tutorials.mnist.input_data (removed in TF 2) served on both sides by"
            " tfmigrate's synthetic stand-in (same API, same examples in the same order, nothing downloaded)"
        )
    if provided:
        lines.append(
            f"legacy on Keras 3: {', '.join(provided)} run as the TF1 code TFM104 writes into migrations"
            " (Keras 3 removed tf.compat.v1.layers; with tf-keras the originals run)"
        )
    switch = (report["legacy"].get("launch") or {}).get("mode_switch")
    if switch and switch["mode"] != switch["default_mode"]:
        if switch["argument"]:
            lines.append(
                f"legacy run {switch['mode']} ({switch['argument']}, the branch of line {switch['line']} the"
                f" migration carries); at its default the script trains {switch['default_mode']}:"
                f" the migration does not reproduce that mode"
            )
        else:
            lines.append(
                f"legacy run at its default ({switch['default_mode']}; --{switch['option']}, line"
                f" {switch['line']}): the migration trains {switch['mode']}"
            )
    for side in ("legacy", "migrated"):
        runs = report[side].get("runs") or report[side].get("failed_runs") or []
        mapping = next((r.get("cluster_map") for r in runs if r.get("cluster_map")), None)
        if mapping:
            lines.append(f"{side} cluster, as the program built it -> check's loopback ports: {_cluster_map_text(mapping)}")
        script_cluster = (report[side].get("launch") or {}).get("script_cluster")
        if script_cluster and side == "legacy":
            lines.append(f"  tasks from the script's own cluster (line {script_cluster['line']}: {script_cluster['how']})")
        workers_reason = (report[side].get("launch") or {}).get("workers_reason")
        if workers_reason and side == "legacy":
            lines.append(f"  {workers_reason}")
    if report.get("stopped_past_steps"):
        lines.append(report["stopped_past_steps"])
    if report.get("legacy_runs_added"):
        lines.append(report["legacy_runs_added"])
    rows = [("side", "launch", "runs", "wall", "losses from", "steps")]
    for side in ("legacy", "migrated"):
        info = report[side]
        runs = info.get("runs", [])
        rows.append(
            (
                side,
                info.get("launch_text", "-"),
                str(len(runs)),
                f"{sum(r['wall_time'] for r in runs):.1f}s" if runs else "-",
                ",".join(sorted({r["loss_source"] for r in runs})) or "-",
                "/".join(str(r["steps"]) for r in runs) or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    verdict = report["verdict"].upper().replace("_", " ")
    rows = [
        ("steps compared", "max abs diff", "max rel diff", "first failing step", "verdict"),
        (
            str(comp.get("steps_compared", "-")),
            _fmt(comp.get("max_abs_diff")),
            _fmt(comp.get("max_rel_diff")),
            "-" if comp.get("first_failing_step") is None else str(comp["first_failing_step"]),
            verdict,
        ),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    init = report.get("initial_values")
    if init and init.get("compared"):
        state = "differ: " + ", ".join(init["mismatched"]) if init["mismatched"] else "match"
        by_order = init.get("paired_by_order", 0)
        how = f" by name, {by_order} unnamed by creation order" if by_order else " by name"
        if init.get("carried"):
            lines.append(
                f"initial values carried from the legacy job ({init['compared']} variables paired{how},"
                f" the migration's own draws of {init['own_draws_compared']} compared by distribution): {state}"
            )
        else:
            lines.append(f"initial values ({init['compared']} variables paired{how}) {state}")
    if report.get("align_init_reason"):
        lines.append(f"  why carried: {report['align_init_reason']}")
    lines.append(f"reason: {report['reason']}")
    arts = report.get("artifacts", {})
    if arts:
        lines.append("  ".join(f"{k}: {v}" for k, v in arts.items()))
    return "\n".join(lines)


def write_plot(
    path: Path, legacy: list[RunOutcome], migrated: list[RunOutcome], title: str
) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    for outcomes, color, name in (
        (legacy, "tab:blue", "legacy"),
        (migrated, "tab:orange", "migrated"),
    ):
        for o in outcomes:
            s = o.series
            top.plot(
                list(s),
                list(s.values()),
                color=color,
                alpha=0.9 if o.index == 0 else 0.35,
                marker="o" if len(s) <= 60 else None,
                markersize=3,
                linestyle="-" if name == "legacy" else "--",
                label=name if o.index == 0 else None,
            )
    top.set_ylabel("training loss (mean over replicas)")
    top.set_title(title, fontsize=9)
    top.legend()
    top.grid(alpha=0.3)
    ls, ms = legacy[0].series, migrated[0].series
    common = sorted(set(ls) & set(ms))
    bottom.plot(common, [ms[s] - ls[s] for s in common], color="tab:red", marker=".", markersize=3)
    bottom.axhline(0.0, color="black", linewidth=0.6)
    bottom.set_xlabel("global step")
    bottom.set_ylabel("migrated - legacy (run 1)")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- driver


def _resolve_migrated(opts: CheckOptions, out: Path) -> tuple[Path, str, list[str]]:
    """(migrated program, where it comes from, the codemod's manual-work findings)"""
    if opts.migrated is not None:
        return opts.migrated, "given", []
    from migrate.codemod.engine import MigrationError, migrate_source

    try:
        source, _ = legacy_compat.python3_source(opts.legacy.read_text(encoding="utf-8"))
        result = migrate_source(source, path=str(opts.legacy))
    except MigrationError as e:
        raise CheckError(f"tfmigrate cannot migrate {opts.legacy}: {e}") from None
    if not result.changed:
        raise CheckError(
            f"tfmigrate leaves {opts.legacy} unchanged: there is no migration to compare"
        )
    path = out / f"migrated_{opts.legacy.name}"
    path.write_text(result.output, encoding="utf-8")
    manual = [f"{opts.legacy}:{d.line}:{d.column}: {d.code} {d.message}" for d in result.manual_work]
    return path, "tfmigrate output", manual


def run_check(opts: CheckOptions) -> tuple[int, dict]:
    """Run the check; returns (exit status, JSON report)."""
    out = Path(opts.out) if opts.out else Path(tempfile.mkdtemp(prefix="tfmigrate-check-"))
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "tool": "tfmigrate check",
        "version": __version__,
        "schema": SCHEMA_VERSION,
        "verdict": "error",
        "exit_code": EXIT_ERROR,
        "reason": "",
        "strategy": None,
        "workers": opts.workers,
        "steps": opts.steps,
        "runs": None,
        "mode": None,
        "seed": opts.seed,
        "align_init": opts.align_init,  # the effective choice once known
        "tolerances": {
            "rtol": DEFAULT_RTOL if opts.rtol is None else opts.rtol,
            "atol": opts.atol,
            "stat_rtol": opts.stat_rtol,
            "stat_atol": opts.stat_atol,
            "window": opts.window,
        },
        "legacy": {"program": str(opts.legacy)},
        "migrated": {"program": str(opts.migrated) if opts.migrated else None},
        "comparison": None,
        "initial_values": None,
        "artifacts": {"json": str(out / "report.json")},
        "out_dir": str(out),
    }
    start = time.monotonic()
    try:
        code = _check(opts, out, report)
    except CheckError as e:
        report["reason"] = e.message
        if e.details:
            report["details"] = e.details
        code = EXIT_ERROR
    report["exit_code"] = code
    report["verdict"] = {0: "equivalent", 1: "not_equivalent"}.get(code, "error")
    report["wall_time"] = round(time.monotonic() - start, 3)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return code, report


def _legacy_program(legacy: Path, out: Path, report: dict) -> tuple[Path, str | None]:
    """What runs on the legacy side, and the PYTHONPATH it needs: the script
    itself, or, when it is written for TF 1.x (``import tensorflow as tf``
    and TF1 names) or Python 2, a copy importing ``tensorflow.compat.v1`` in
    graph mode, which is how TF2 runs TF1 code, in Python 3
    (:mod:`migrate.runtime.legacy_compat`). The copy lives in ``out`` and imports
    its neighbours from the script's directory."""
    prepared = legacy_compat.prepare(legacy.read_text(encoding="utf-8"))
    if prepared.blockers:
        raise CheckError(
            f"the legacy script {legacy} cannot run on TensorFlow 2: "
            + "; ".join(prepared.blockers)
            + " (port those imports to TF 2 -- tf.compat.v1, tf.data, Keras --, then check again)"
        )
    if prepared.reads_mnist:
        report["mnist_standin"] = True
    if prepared.uses_contrib:
        report["contrib_standin"] = True
    if not prepared.changed:
        return legacy, None
    copy = out / "legacy-on-tf2" / legacy.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(prepared.source, encoding="utf-8")
    report["legacy"]["run_as"] = {"program": str(copy), "changes": prepared.changes}
    return copy, str(legacy.resolve().parent)


def _legacy_interpreter(opts: CheckOptions, report: dict) -> dict[str, str]:
    """The environment that makes the legacy tasks run on the TensorFlow they
    need (created on first use), and which TensorFlow each side runs on, in
    the report."""
    installed = {"version": legacy_env.installed_tf_version(), "python": sys.executable}
    report["migrated"]["tensorflow"] = installed
    try:
        choice = legacy_env.choose(opts.legacy_tf, opts.legacy.read_text(encoding="utf-8"))
        if choice.env is None:
            report["legacy"]["tensorflow"] = {**installed, **({"why": choice.why} if choice.why else {})}
            return {}
        env = legacy_env.ensure(choice.env)
    except legacy_env.LegacyEnvError as e:
        raise CheckError(str(e)) from None
    report["legacy"]["tensorflow"] = {"version": env.tf_version(), "python": str(env.python), "why": choice.why}
    return {TASK_PYTHON_ENV: str(env.python)}


def _compare_first_steps_of_overrun(
    report: dict, opts: CheckOptions, legacy_runs: list[RunOutcome], migrated_runs: list[RunOutcome]
) -> None:
    """A job stopped past the steps asked for: both sides are compared on those steps."""
    overran = [(side, o) for side, outcomes in (("legacy", legacy_runs), ("migrated", migrated_runs))
               for o in outcomes if o.overran_at is not None]
    if not overran:
        return
    for o in (*legacy_runs, *migrated_runs):
        o.records = [r for r in o.records if r.step < opts.steps]
    report["legacy"]["runs"] = [o.as_dict() for o in legacy_runs]
    report["migrated"]["runs"] = [o.as_dict() for o in migrated_runs]
    sides = sorted({side for side, _ in overran})
    report["stopped_past_steps"] = (
        f"the {' and '.join(sides)} job{'s' if len(sides) > 1 else ''} trained on past --steps {opts.steps}"
        f" (a bound of the script's own, not its step option); check stopped "
        + ", ".join(f"{side} run {o.index + 1} at step {o.overran_at}" for side, o in overran)
        + f" and compares the first {opts.steps} steps"
    )


def _inputs_present(opts: CheckOptions, spec: LaunchSpec) -> None:
    """A data file the legacy script reads and does not find stops check
    before anything starts, located, with what provides it (its option, given
    after ``--``, or the directory to run from): not once every task died."""
    try:
        source, _ = legacy_compat.python3_source(opts.legacy.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - not Python: the launch says so, located
        return
    given = {a.split("=", 1)[0].lstrip("-").replace("-", "_")
             for a in (*opts.launcher_args, *spec.args, *opts.script_args) if a.startswith("-")}
    missing = [m for m in missing_inputs(source)
               if m.option is None or m.option.replace("-", "_") not in given]
    if missing:
        raise CheckError(
            f"the legacy script {opts.legacy} reads input files that are not there, so its tasks would die"
            " once the cluster started: " + "; ".join(m.message() for m in missing)
        )


def _check(opts: CheckOptions, out: Path, report: dict) -> int:
    if not opts.legacy.is_file():
        raise CheckError(f"no such file: {opts.legacy}")
    migrated_path, origin, manual_work = _resolve_migrated(opts, out)
    report["migrated"]["program"] = str(migrated_path)
    report["migrated"]["origin"] = origin
    legacy_program, legacy_pythonpath = _legacy_program(opts.legacy, out, report)
    legacy_extra = _legacy_interpreter(opts, report)
    opts = dataclasses.replace(
        opts, mnist_standin=bool(report.get("mnist_standin")), contrib_standin=bool(report.get("contrib_standin"))
    )
    # Decided before anything starts: a migration that does not compile, or
    # names no strategy (running the TF1 program twice would "prove" a
    # migration that did not happen), is not compared. The legacy side still
    # runs, once, so the report holds its losses: the baseline a migration
    # must reproduce, and proof that the script itself launches.
    not_comparable = None
    try:
        compile(migrated_path.read_text(encoding="utf-8"), str(migrated_path), "exec")
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        not_comparable = CheckError(
            f"the migrated program {migrated_path} does not compile"
            + (f" (line {line}: {e.msg})" if line else f" ({e})"),
            "\n".join(manual_work[:STACK_LINES_SHOWN]),
        )
    infos = []
    for what, path in (("legacy", legacy_program), ("migrated", migrated_path)):
        if what == "migrated" and not_comparable is not None:
            infos.append(infos[0])  # never launched: the legacy shape stands in
            continue
        try:
            # sibling modules (a settings.py holding the cluster) are the user's script's
            infos.append(analyze(path.read_text(encoding="utf-8"), str(opts.legacy)))
        except TopologyError as e:
            raise CheckError(f"{what} script {path}: {e}") from None
    legacy_info, migrated_info = infos
    if legacy_program != opts.legacy:
        # where the user's own file draws them, not the prepared copy (a line longer)
        try:
            tree = ast.parse(opts.legacy.read_text(encoding="utf-8"))
            legacy_info = dataclasses.replace(
                legacy_info, unseeded_initializers=unseeded_initializers(tree), sync_switch=find_sync_switch(tree),
                chief_only=chief_only_code(tree) if legacy_info.chief_only else None,
            )
        except SyntaxError:
            pass  # Python 2: the copy's lines are what there is
    if manual_work:
        report["migrated"]["manual_work"] = manual_work
    if not_comparable is None and legacy_info.strategy is not None and migrated_info.distribute_strategy is None:
        details = "\n".join(manual_work[:STACK_LINES_SHOWN])
        not_comparable = CheckError(
            f"the migrated program {migrated_path} uses no tf.distribute strategy: its training"
            " was not migrated, so there is nothing to compare"
            + (" (tfmigrate reported manual work, listed in details)" if details else ""),
            details,
        )
    if not_comparable is None and (still := legacy_env.missing_here(migrated_path.read_text(encoding="utf-8"))):
        not_comparable = CheckError(
            f"the migrated program {migrated_path} cannot run: {still}; its training was not migrated",
            "\n".join(manual_work[:STACK_LINES_SHOWN]),
        )
    try:
        # the training mode of a sync/async switch follows the migration's
        # strategy; with nothing to compare, the script runs at its default
        trains = migrated_info.distribute_strategy if not_comparable is None else None
        lspec = legacy_launch(legacy_info, opts.workers, opts.steps, None, trains)
    except TopologyError as e:
        raise CheckError(str(e)) from None
    _inputs_present(opts, lspec)
    trainers = sum(lspec.jobs.get(job, 0) for job in TRAINER_JOBS) if lspec.role_style != "none" else None
    try:
        mspec = migrated_launch(
            migrated_info, legacy_info, trainers if trainers else opts.workers, opts.steps, None,
            ps=lspec.jobs.get("ps", 1),
        )
    except TopologyError as e:
        if not_comparable is None:
            # the migration cannot be launched as it is: the legacy side
            # still runs alone, so the report holds the baseline
            not_comparable = CheckError(f"migrated program {migrated_path}: {e}")
    report["workers"] = trainers or opts.workers or DEFAULT_WORKERS
    if opts.launcher_args:
        report["launcher_args"] = list(opts.launcher_args)  # every task's, from the legacy launcher
    if not_comparable is not None:
        report["legacy"]["launch"] = lspec.as_dict()
        report["legacy"]["launch_text"] = _launch_text(lspec)
        report["legacy"]["failed_runs"] = []
        print(f"tfmigrate check: {not_comparable.message}; running the legacy side alone for its losses",
              file=sys.stderr, flush=True)
        try:
            legacy_runs = _run_side("legacy", legacy_program, lspec, 1, opts, out, legacy_extra,
                                    report["legacy"]["failed_runs"], pythonpath=legacy_pythonpath)
        except CheckError as e:
            raise CheckError(f"{not_comparable.message}; the legacy side failed too: {e.message}", e.details) from None
        report["legacy"]["runs"] = [o.as_dict() for o in legacy_runs]
        raise not_comparable
    strategy = mspec.strategy or lspec.strategy
    report["strategy"] = strategy
    align = opts.align_init
    if align is None:
        # No two runs of a program drawing unseeded random initial values start
        # alike: compare from the legacy job's values instead of failing on them.
        align = bool(legacy_info.unseeded_initializers)
        if align:
            shown = ", ".join(legacy_info.unseeded_initializers[:3])
            more = len(legacy_info.unseeded_initializers) - 3
            report["align_init_reason"] = (
                f"the legacy program draws initial values without an op seed ({shown}"
                f"{f' and {more} more' if more > 0 else ''}): they are carried into the migrated job"
                " by variable name, and the migration's own draws are compared by distribution"
            )
    report["align_init"] = align
    rtol, why = step_rtol(opts.rtol, migrated_info)
    report["tolerances"]["rtol"] = rtol
    if why:
        report["tolerances"]["rtol_reason"] = why
    for side, spec in (("legacy", lspec), ("migrated", mspec)):
        report[side]["launch"] = spec.as_dict()
        report[side]["launch_text"] = _launch_text(spec)

    mode = opts.mode
    if mode == "auto":
        mode = "statistical" if strategy == PSS and report["workers"] > 1 else "step"
    runs = opts.runs or (DEFAULT_STAT_RUNS if mode == "statistical" else 1)
    report["runs"] = runs
    report["mode"] = mode

    report["legacy"]["failed_runs"] = []
    report["migrated"]["failed_runs"] = []
    legacy_runs = _run_side(
        "legacy",
        legacy_program,
        lspec,
        runs,
        opts,
        out,
        legacy_extra,
        report["legacy"]["failed_runs"],
        pythonpath=legacy_pythonpath,
        job_order=mode == "statistical",
    )
    report["legacy"]["runs"] = [o.as_dict() for o in legacy_runs]
    extra: dict[str, str] = {}
    if align:
        if legacy_runs[0].init_path is None:
            raise CheckError("aligning initial values: the legacy job's initial values were not recorded")
        extra["TFMIGRATE_ALIGN_INIT"] = str(legacy_runs[0].init_path)
    migrated_runs = _run_side(
        "migrated",
        migrated_path,
        mspec,
        runs,
        opts,
        out,
        extra,
        report["migrated"]["failed_runs"],
        pythonpath=str(opts.legacy.resolve().parent) if origin != "given" else None,
    )
    report["migrated"]["runs"] = [o.as_dict() for o in migrated_runs]
    _compare_first_steps_of_overrun(report, opts, legacy_runs, migrated_runs)

    if mode == "statistical":

        def compare() -> Comparison:
            return compare_statistical(
                [o.series for o in legacy_runs],
                [o.series for o in migrated_runs],
                opts.window,
                opts.stat_rtol,
                opts.stat_atol,
            )

        comp = compare()
        if needs_more_legacy_runs(comp, opts.runs, len(legacy_runs)):
            legacy_runs += _run_side(
                "legacy",
                legacy_program,
                lspec,
                SPREAD_RUNS - len(legacy_runs),
                opts,
                out,
                legacy_extra,
                report["legacy"]["failed_runs"],
                pythonpath=legacy_pythonpath,
                job_order=True,
                first=len(legacy_runs),
            )
            report["legacy"]["runs"] = [o.as_dict() for o in legacy_runs]
            report["legacy_runs_added"] = (
                f"the medians differ by more than {opts.stat_rtol:g} x legacy + {opts.stat_atol:g} x initial"
                f" loss: the legacy job ran {SPREAD_RUNS} times in all, so that its own run-to-run scatter"
                " decides"
            )
            _compare_first_steps_of_overrun(report, opts, legacy_runs, migrated_runs)
            comp = compare()
    else:
        comps = [
            compare_steps(lo.series, mo.series, rtol, opts.atol, lo.kill_gap, mo.kill_gap)
            for lo, mo in zip(legacy_runs, migrated_runs)
        ]
        comp = next((c for c in comps if not c.equivalent), comps[0])
        comp.max_abs_diff = max((c.max_abs_diff or 0.0) for c in comps)
        comp.max_rel_diff = max((c.max_rel_diff or 0.0) for c in comps)
    report["comparison"] = comp.as_dict()
    equivalent, reason = comp.equivalent, comp.reason

    legacy_init = _load_init(legacy_runs[0].init_path)
    init = compare_init(
        legacy_init,
        _load_init(migrated_runs[0].init_path),
        DEFAULT_RTOL if opts.rtol is None else opts.rtol,
        opts.atol,
    )
    if align:
        from migrate.runtime.harness import match_names as harness_match_names

        # the values were carried over; what the migration's own initializers
        # drew must still come from the legacy initializers' distributions
        own = _load_init(_own_init_file(migrated_runs[0].result.log_dir))
        init["carried"] = True
        init["own_draws_compared"] = len(harness_match_names(list(legacy_init), list(own)))
        init["distributions_differ"] = compare_init_distributions(legacy_init, own)
        init["mismatched"] += init["distributions_differ"]
    report["initial_values"] = init
    if not equivalent and mode == "step" and legacy_info.training_randomness:
        shown = ", ".join(legacy_info.training_randomness[:3])
        reason += (
            f"; note: the legacy program draws random numbers while it trains ({shown}), and TF1 and"
            " TF2 draw different streams even under one seed: step-by-step agreement needs that off"
            " (keep_prob=1 / rate=0 / training=False), else compare statistically (--mode statistical)"
        )
    if init.get("distributions_differ"):
        equivalent = False
        reason = (
            "the migration initializes from other distributions than the legacy program"
            f" ({', '.join(init['distributions_differ'])}); {reason}"
        )
    elif init["mismatched"] and mode == "step":
        # In step mode the legacy values are read before any update, so a
        # difference is real (in async runs another worker may already train).
        equivalent = False
        reason = f"initial values differ ({', '.join(init['mismatched'])}); {reason}"
    report["reason"] = reason

    if opts.plot:
        png = out / "losses.png"
        title = f"{opts.legacy.name} vs {migrated_path.name}: {'EQUIVALENT' if equivalent else 'NOT EQUIVALENT'}"
        if write_plot(png, legacy_runs, migrated_runs, title):
            report["artifacts"]["png"] = str(png)
    return EXIT_EQUIVALENT if equivalent else EXIT_DIFFERENT


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        epilog="Arguments after `--` go to both scripts; {run_dir} in them becomes each run's "
        "own directory (e.g. -- --checkpoint_dir={run_dir}/ckpt).",
        prog="tfmigrate check",
        description="Run a legacy TF1 training script and its migration on local clusters "
        "and compare their per-step losses. Exit 0 equivalent, 1 not equivalent, "
        "2 could not run.",
    )
    p.add_argument("legacy", type=Path, nargs="?", help="the legacy script (default with --launcher: the one it starts)")
    p.add_argument(
        "migrated", type=Path, nargs="?", help="its migration (default: tfmigrate's output)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="workers (towers for in-graph programs); default: as many as the script's own cluster"
        f" has, else {DEFAULT_WORKERS}",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help="global training steps, passed to the script's steps flag (default %(default)s; 0: the script's default)",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"runs per side (default 1 step by step, {DEFAULT_STAT_RUNS} statistically)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"seed numpy/random/TensorFlow alike on both sides (default {DEFAULT_SEED})",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=None,
        help=f"step-by-step relative tolerance (default {DEFAULT_RTOL:g}; {ROUNDING_OPTIMIZER_RTOL:g} when the"
        " migration uses a Keras optimizer that rounds unlike TF1: Adam family, SGD with momentum)",
    )
    p.add_argument(
        "--atol", type=float, default=DEFAULT_ATOL, help="step-by-step absolute tolerance"
    )
    p.add_argument(
        "--stat-rtol",
        type=float,
        default=DEFAULT_STAT_RTOL,
        help="relative tolerance of the asynchronous statistic",
    )
    p.add_argument(
        "--stat-atol",
        type=float,
        default=DEFAULT_STAT_ATOL,
        help="absolute part of that tolerance, as a fraction of the legacy initial loss",
    )
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        help="trailing steps averaged by the asynchronous statistic",
    )
    p.add_argument(
        "--launcher",
        type=Path,
        default=None,
        help="the legacy job's launcher (a shell script starting ps and worker tasks, or a TFJob): its task"
        " counts and its arguments for every task are used instead of guessing them (--workers still wins)",
    )
    p.add_argument("--mode", choices=("auto", "step", "statistical"), default="auto")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per cluster run")
    p.add_argument(
        "--out", type=Path, default=None, help="directory for logs, report.json, losses.png"
    )
    p.add_argument(
        "--align-init",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="carry the legacy initial variable values into the migrated job by name (default:"
        " when the legacy program draws them without op seeds, so no two runs start alike;"
        " --no-align-init compares them value by value)",
    )
    p.add_argument(
        "--loss-source",
        choices=("auto", "program", "harness"),
        default="auto",
        help="losses the program logs itself, or the harness's observations",
    )
    p.add_argument(
        "--no-robust", action="store_true", help="do not defuse the legacy hang points from outside"
    )
    p.add_argument(
        "--kill-chief-at",
        type=int,
        metavar="STEP",
        help="fault injection on both sides: kill the chief once it logged STEP, restart it",
    )
    p.add_argument(
        "--legacy-tf",
        metavar="VERSION",
        help="the TensorFlow the legacy side runs on, e.g. 2.15, in an environment check creates once"
        " and caches ($TFMIGRATE_CACHE, default ~/.cache/tfmigrate/envs); default: 2.15 for programs"
        " using Estimator or tf.contrib.learn, else the installed one ('installed')",
    )
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if "--" in argv:  # what follows goes to the scripts themselves
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1 :]
    try:
        ns = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_ERROR if e.code else 0
    if (ns.workers is not None and ns.workers < 1) or (ns.runs is not None and ns.runs < 1) or ns.steps < 0 or ns.window < 1:
        print(
            "tfmigrate check: --workers, --runs and --window must be >= 1, --steps >= 0",
            file=sys.stderr,
        )
        return EXIT_ERROR
    launcher_args: tuple[str, ...] = ()
    if ns.launcher is not None:
        from migrate.launchers.legacy import LaunchError, plan

        try:
            launch = plan(ns.launcher, ns.legacy)
        except LaunchError as e:
            print(f"tfmigrate check: {e}", file=sys.stderr)
            return EXIT_ERROR
        print(f"tfmigrate check: {launch.describe()}", file=sys.stderr)
        ns.legacy = ns.legacy or launch.program
        ns.workers = ns.workers or launch.workers
        launcher_args = launch.args
    if ns.legacy is None:
        print("tfmigrate check: name the legacy script (or its launcher with --launcher)", file=sys.stderr)
        return EXIT_ERROR
    opts = CheckOptions(
        legacy=ns.legacy,
        migrated=ns.migrated,
        workers=ns.workers,
        steps=ns.steps or None,
        runs=ns.runs,
        seed=ns.seed,
        rtol=ns.rtol,
        atol=ns.atol,
        stat_rtol=ns.stat_rtol,
        stat_atol=ns.stat_atol,
        window=ns.window,
        timeout=ns.timeout,
        out=ns.out,
        align_init=ns.align_init,
        loss_source=ns.loss_source,
        robust=not ns.no_robust,
        plot=not ns.no_plot,
        mode=ns.mode,
        kill_chief_at=ns.kill_chief_at,
        script_args=tuple(script_args),
        launcher_args=launcher_args,
        legacy_tf=ns.legacy_tf,
    )
    code, report = run_check(opts)
    if ns.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render_table(report))
        if code == EXIT_ERROR and report.get("details"):
            print(report["details"], file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
