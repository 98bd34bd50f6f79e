"""The per-step loss log: one format shared by the reference programs, the
rewrites, the launcher and ``tfmigrate check``.

Format: JSON Lines, one object per training step a task performed::

    {"step": 17, "task": "worker:1", "loss": 0.4123}

- ``step``: the global step the update was applied at, i.e. the value of the
  global step *before* this update (0 for the first update of the job).
- ``task``: ``"<job>:<index>"`` of the process that ran the step.
- ``loss``: the training loss of that step's batch, computed before the update.

A program finds where to write in the ``TFMIGRATE_LOSS_LOG`` environment
variable (the launcher gives every task its own file); when it is unset the
program logs nothing. Programs write with a plain ``open(..., "a")`` and one
``write`` per line, so they need nothing from this package.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "TFMIGRATE_LOSS_LOG"


@dataclass(frozen=True, order=True)
class LossRecord:
    step: int
    task: str
    loss: float


def append(path: str | os.PathLike, step: int, task: str, loss: float) -> None:
    """Append one record (used by harnesses; the reference programs inline this)."""
    line = json.dumps({"step": int(step), "task": task, "loss": float(loss)})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def read(paths: Iterable[str | os.PathLike]) -> list[LossRecord]:
    """Read records from every existing file, ignoring a torn last line
    (a task killed mid-write), sorted by (step, task)."""
    records: list[LossRecord] = []
    for path in paths:
        p = Path(path)
        if not p.exists():
            continue
        records.extend(parse(p.read_bytes()))
    records.sort()
    return records


def parse(data: bytes) -> list[LossRecord]:
    """Records of one log's bytes, in file order; unreadable lines skipped."""
    records = []
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
            records.append(LossRecord(int(obj["step"]), str(obj["task"]), float(obj["loss"])))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
    return records


def by_step(records: Iterable[LossRecord]) -> dict[int, list[LossRecord]]:
    """Group records by global step."""
    out: dict[int, list[LossRecord]] = {}
    for r in records:
        out.setdefault(r.step, []).append(r)
    return out
