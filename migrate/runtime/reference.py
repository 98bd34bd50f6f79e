"""The legacy TF1 reference programs in ``legacy_reference/`` and how to run them.

Each program is standalone TF1 code (``tensorflow.compat.v1``) of a classic
shape: async parameter server, SyncReplicasOptimizer + Supervisor, in-graph
towers, chief recovery from a checkpoint, and a deliberately naive program
that hangs. This module knows how to run each one on the local launcher
(:mod:`migrate.runtime.cluster`) and implements::

    tfmigrate reference list
    tfmigrate reference run NAME [--workers N] [--steps N] [--timeout S] [--log-dir DIR]

It never imports TensorFlow itself: the programs run in child processes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from migrate.runtime.cluster import ClusterResult, Fault, run_cluster

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "legacy_reference"

__all__ = [
    "REFERENCES",
    "REFERENCE_DIR",
    "ReferenceProgram",
    "checkpoint_interval",
    "main",
    "run_reference",
    "trajectory_table",
]


def _no_faults(workers: int, steps: int) -> list[Fault]:
    return []


def _no_args(workers: int, steps: int, log_dir: Path) -> list[str]:
    return []


@dataclass(frozen=True)
class ReferenceProgram:
    """How to run one program of ``legacy_reference/`` on the launcher."""

    name: str
    filename: str
    summary: str
    demonstrates: str
    role_style: str  # as run_cluster's role_style
    default_workers: int
    default_steps: int
    default_timeout: float
    has_ps: bool = True  # False: a single in-graph client, no cluster
    server_only: tuple[str, ...] = ("ps",)
    expect_hang: bool = False  # the naive program: success is never expected
    extra_args: Callable[[int, int, Path], list[str]] = _no_args
    faults: Callable[[int, int], list[Fault]] = _no_faults
    note: str = ""  # printed after a run, e.g. why a hang is expected

    @property
    def path(self) -> Path:
        return REFERENCE_DIR / self.filename

    def jobs(self, workers: int) -> dict[str, int]:
        """Task counts for ``workers`` workers (in-graph: one client, always)."""
        return {"ps": 1, "worker": workers} if self.has_ps else {"worker": 1}

    def args(self, workers: int, steps: int, log_dir: Path) -> list[str]:
        return [f"--steps={steps}", *self.extra_args(workers, steps, log_dir)]


DEFAULT_GLOBAL_BATCH = 32  # the programs' --batch_size default


def _global_batch_args(workers: int) -> list[str]:
    """Sync and tower programs split the global batch evenly over replicas:
    keep the default batch when it divides, else round it up to a multiple."""
    if DEFAULT_GLOBAL_BATCH % workers == 0:
        return []
    return [f"--batch_size={workers * -(-DEFAULT_GLOBAL_BATCH // workers)}"]


def _sync_args(workers: int, steps: int, log_dir: Path) -> list[str]:
    return _global_batch_args(workers)


def _tower_args(workers: int, steps: int, log_dir: Path) -> list[str]:
    # In-graph replication has one client; "workers" is the number of towers.
    return [f"--num_towers={workers}", *_global_batch_args(workers)]


def checkpoint_interval(steps: int) -> int:
    """--save_checkpoint_steps of chief_recovery runs: 5 checkpoints per run."""
    return max(1, steps // 5)


def _recovery_args(workers: int, steps: int, log_dir: Path) -> list[str]:
    return [
        f"--checkpoint_dir={log_dir / 'checkpoints'}",
        f"--save_checkpoint_steps={checkpoint_interval(steps)}",
    ]


def _kill_chief_midway(workers: int, steps: int) -> list[Fault]:
    # Half-way, i.e. between two checkpoints: the restarted chief has steps to redo.
    return [Fault(job="worker", index=0, at_step=steps // 2, restart=True)]


REFERENCES: dict[str, ReferenceProgram] = {
    p.name: p
    for p in (
        ReferenceProgram(
            name="async_ps",
            filename="async_ps.py",
            summary="asynchronous ps/worker training, MonitoredTrainingSession, FLAGS roles",
            demonstrates="between-graph replication, replica_device_setter, chief, global step, "
            "device_filters, a ticket queue that runs each batch exactly once",
            role_style="flags",
            default_workers=2,
            default_steps=50,
            default_timeout=180.0,
        ),
        ReferenceProgram(
            name="sync_replicas",
            filename="sync_replicas.py",
            summary="synchronous training: SyncReplicasOptimizer + Supervisor, TF_CONFIG roles",
            demonstrates="gradient accumulators, sync tokens, the chief queue runner, lockstep "
            "workers, bit-identical runs; every remedy of the hang table",
            role_style="tf_config",
            default_workers=2,
            default_steps=50,
            default_timeout=180.0,
            extra_args=_sync_args,
        ),
        ReferenceProgram(
            name="in_graph_towers",
            filename="in_graph_towers.py",
            summary="in-graph replication: one client, towers on /cpu:0 and /cpu:1",
            demonstrates="variable_scope reuse, average_gradients, one apply per step",
            role_style="none",
            default_workers=2,
            default_steps=50,
            default_timeout=120.0,
            has_ps=False,
            server_only=(),
            extra_args=_tower_args,
        ),
        ReferenceProgram(
            name="chief_recovery",
            filename="chief_recovery.py",
            summary="the chief is killed mid-run and restarts from its last checkpoint",
            demonstrates="checkpointing with MonitoredTrainingSession, what the ps still hold, "
            "why the restarted chief restores (the global step goes back)",
            role_style="flags",
            default_workers=1,
            default_steps=50,
            default_timeout=240.0,
            extra_args=_recovery_args,
            faults=_kill_chief_midway,
        ),
        ReferenceProgram(
            name="naive_async_ps",
            filename="naive_async_ps.py",
            summary="NAIVE async ps/worker: a late non-chief hangs forever (expected)",
            demonstrates="no device_filters: a session needs every task, and the chief "
            "already exited",
            role_style="flags",
            default_workers=2,
            default_steps=50,
            # Worker 1 reaches the hang ~15 s after its TF import; on a loaded
            # two-core machine that can take 50 s in all.
            default_timeout=90.0,
            expect_hang=True,
            note=(
                "This program is EXPECTED to hang: worker 1 starts its session after the "
                "chief finished and exited; without device_filters the session waits for "
                "worker 0 forever. The launcher ends it at the timeout (see the stack dump in "
                "worker-1.log). async_ps.py is the robust version."
            ),
        ),
    )
}


def run_reference(
    name: str,
    workers: int | None = None,
    steps: int | None = None,
    timeout: float | None = None,
    log_dir: str | Path | None = None,
) -> ClusterResult:
    """Run reference program ``name`` on a local loopback cluster."""
    try:
        ref = REFERENCES[name]
    except KeyError:
        raise KeyError(
            f"unknown reference program {name!r}; known: {', '.join(REFERENCES)}"
        ) from None
    workers = ref.default_workers if workers is None else workers
    steps = ref.default_steps if steps is None else steps
    if workers < 1 or steps < 1:
        raise ValueError("workers and steps must be >= 1")
    log_path = (
        Path(log_dir)
        if log_dir is not None
        else Path(tempfile.mkdtemp(prefix=f"tfmigrate-reference-{name}-"))
    )
    log_path.mkdir(parents=True, exist_ok=True)
    return run_cluster(
        ref.path,
        ref.jobs(workers),
        args=ref.args(workers, steps, log_path),
        role_style=ref.role_style,
        server_only=ref.server_only,
        timeout=ref.default_timeout if timeout is None else timeout,
        log_dir=log_path,
        faults=ref.faults(workers, steps),
    )


def trajectory_table(result: ClusterResult) -> str:
    """Step x task table of losses; a step a task ran twice (a restarted
    chief redoing steps) shows both values, in the order they were logged."""
    tasks = sorted({r.task for r in result.losses})
    cells: dict[tuple[int, str], list[float]] = {}
    for t in result.tasks:
        if t.loss_path is None or not t.loss_path.exists():
            continue
        for rec in _records_in_file_order(t.loss_path):
            cells.setdefault((rec[0], rec[1]), []).append(rec[2])
    steps = sorted({step for step, _ in cells})
    if not steps:
        return "(no loss records)"
    width = max(12, *(len(t) for t in tasks))
    lines = ["step  " + "  ".join(f"{t:>{width}}" for t in tasks)]
    for step in steps:
        row = []
        for task in tasks:
            values = cells.get((step, task), [])
            row.append(
                f"{' / '.join(f'{v:.6f}' for v in values):>{width}}" if values else " " * width
            )
        lines.append(f"{step:>4}  " + "  ".join(row))
    return "\n".join(lines)


def _records_in_file_order(path: Path) -> list[tuple[int, str, float]]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(raw)
            out.append((int(obj["step"]), str(obj["task"]), float(obj["loss"])))
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line of a killed task
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfmigrate reference",
        description="Run the legacy TF1 reference programs of legacy_reference/ on a local cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the reference programs")
    run = sub.add_parser("run", help="run one program and print its loss trajectory")
    run.add_argument("name", choices=sorted(REFERENCES))
    run.add_argument(
        "--workers", type=int, default=None, help="workers (towers for in_graph_towers)"
    )
    run.add_argument("--steps", type=int, default=None, help="global training steps")
    run.add_argument("--timeout", type=float, default=None, help="overall timeout in seconds")
    run.add_argument("--log-dir", default=None, help="where task logs go (default: a temp dir)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command == "list":
        width = max(len(n) for n in REFERENCES)
        for ref in REFERENCES.values():
            print(f"{ref.name:<{width}}  {ref.summary}")
            print(
                f"{'':<{width}}    file: legacy_reference/{ref.filename}; shows: {ref.demonstrates}"
            )
        return 0

    ref = REFERENCES[args.name]
    print(f"running legacy_reference/{ref.filename} ({ref.summary})", flush=True)
    result = run_reference(args.name, args.workers, args.steps, args.timeout, args.log_dir)
    print(trajectory_table(result))
    print(result.summary())
    for event in result.faults:
        print(
            f"fault: killed {event.fault.task_name} after it logged step {event.step_seen}; "
            f"restarted as pid {event.restarted_pid}"
        )
    if ref.expect_hang:
        print(ref.note)
        if result.timed_out:
            print("=> hung as expected (exit status 1: the cluster did not finish).")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
