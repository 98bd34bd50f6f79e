"""What a migrated program needs from whatever launches it.

A ParameterServerStrategy program is coordinated by a ``chief`` task (its ps
and worker tasks only serve); a MultiWorkerMirroredStrategy program has no
ps task and fails with one. Read from the migrated code: the codemod never
imports TensorFlow, and neither does this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PSS = "ParameterServerStrategy"
MWMS = "MultiWorkerMirroredStrategy"

_BUILDS = re.compile(r"\b(ParameterServerStrategy|MultiWorkerMirroredStrategy)\s*\(")
_CHIEF_FLAG = re.compile(r"""(DEFINE_string|add_argument)\(\s*(name\s*=\s*)?["'](--)?chief_hosts["']""")


@dataclass(frozen=True)
class Topology:
    program: Path  # the migrated program's file
    strategy: str  # PSS or MWMS
    chief_flag: bool  # the program takes --chief_hosts (else it reads TF_CONFIG)

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
    return Topology(path, built.pop(), bool(_CHIEF_FLAG.search(code)))
