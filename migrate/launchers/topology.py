"""What a migrated program needs from whatever launches it.

A ParameterServerStrategy program is coordinated by a ``chief`` task (its ps
and worker tasks only serve); a MultiWorkerMirroredStrategy program has no
ps task and fails with one. Read from the migrated code: the codemod never
imports TensorFlow, and neither does this.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

PSS = "ParameterServerStrategy"
MWMS = "MultiWorkerMirroredStrategy"

# SlurmClusterResolver() without jobs: one worker per task of the Slurm step, however many
EVERY_TASK_A_WORKER = (("worker", 0),)
_BUILDS = re.compile(r"\b(ParameterServerStrategy|MultiWorkerMirroredStrategy)\s*\(")
_CHIEF_FLAG = re.compile(r"""(DEFINE_string|add_argument)\(\s*(name\s*=\s*)?["'](--)?chief_hosts["']""")


@dataclass(frozen=True)
class Topology:
    program: Path  # the migrated program's file
    strategy: str  # PSS or MWMS
    chief_flag: bool  # the program takes --chief_hosts (else it reads TF_CONFIG)
    # the program's cluster comes from SlurmClusterResolver: its jobs (job -> task count) when
    # they are literals, EVERY_TASK_A_WORKER when it is given none, () when they are computed
    slurm_jobs: tuple[tuple[str, int], ...] | None = None

    @property
    def needs_chief(self) -> bool:
        return self.strategy == PSS

    @property
    def drops_ps(self) -> bool:
        return self.strategy == MWMS

    def describe(self) -> str:
        if self.needs_chief:
            return f"{self.program.name} now runs ParameterServerStrategy: a chief task coordinates, ps and workers serve"
        return f"{self.program.name} now runs MultiWorkerMirroredStrategy: worker tasks only, no ps"


def of_program(path: Path, code: str) -> Topology | None:
    """The topology ``code`` (a program's migrated text) needs, if it builds a
    multi-task strategy (one kind only: a program choosing at run time is
    left to its author)."""
    built = set(_BUILDS.findall(code))
    if len(built) != 1:
        return None
    return Topology(path, built.pop(), bool(_CHIEF_FLAG.search(code)), _slurm_jobs(code))


def _slurm_jobs(code: str) -> tuple[tuple[str, int], ...] | None:
    """The ``jobs`` a ``SlurmClusterResolver(jobs={...})`` of ``code`` asks
    for, in the resolver's order (it sorts them by name: task 0 of the Slurm
    step is the first job's first task); EVERY_TASK_A_WORKER for its default;
    ``()`` when they are not literals."""
    if "SlurmClusterResolver" not in code:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "SlurmClusterResolver"
                                                or getattr(node.func, "id", None) == "SlurmClusterResolver")):
            continue
        jobs = next((k.value for k in node.keywords if k.arg == "jobs"), node.args[0] if node.args else None)
        if jobs is None or (isinstance(jobs, ast.Constant) and jobs.value is None):
            return EVERY_TASK_A_WORKER
        try:
            value = ast.literal_eval(jobs)
        except ValueError:
            return ()
        if isinstance(value, dict) and value and all(
                isinstance(k, str) and isinstance(n, int) and n > 0 for k, n in value.items()):
            return tuple(sorted(value.items()))
        return ()
    return ()
