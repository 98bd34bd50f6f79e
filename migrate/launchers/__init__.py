"""Launch configurations migrate with the code.

A program the codemod moved to ParameterServerStrategy needs a chief task; one
moved to MultiWorkerMirroredStrategy must not have a ps task. The files that
start it — Kubeflow TFJobs, Kubernetes manifests, docker-compose files, shell
launchers, Slurm batch scripts — are found in the same tree, and each is
rewritten in its own format (YAML round trip, shell text) or gets a located
diagnostic saying what it must now start.

This room only reads the migrated programs' text (:mod:`.topology`); it never
imports TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from migrate.launchers.manifests import YAML_SUFFIXES, Edit, LauncherError, Rewrite, rewrite_yaml
from migrate.launchers.shell import rewrite_shell
from migrate.launchers.topology import Topology, of_program

__all__ = ["Edit", "LauncherError", "Rewrite", "Topology", "find_launchers", "of_program", "rewrite_launcher"]

SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".job", ".pbs")
_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}
MAX_LAUNCHER_SIZE = 1_000_000


def _is_launcher(path: Path) -> bool:
    if path.suffix in YAML_SUFFIXES or path.suffix in SHELL_SUFFIXES:
        return True
    if path.suffix:
        return False
    try:
        with path.open("rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith(b"#!") and any(s in head.split(b"\n", 1)[0] for s in (b"sh", b"bash", b"zsh"))


def find_launchers(roots: list[Path], skip: Callable[[Path], bool] = lambda p: False) -> list[Path]:
    """Candidate launch configurations under the directories ``roots``."""
    found: list[Path] = []
    for root in roots:
        if not root.is_dir():
            continue
        for directory, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")
                             and not skip(Path(directory) / d))
            for name in sorted(names):
                path = Path(directory) / name
                if _is_launcher(path) and not skip(path):
                    found.append(path)
    return found


def rewrite_launcher(path: Path, text: str, topologies: list[Topology]) -> Rewrite | None:
    """The launcher rewritten for every program of ``topologies`` it starts,
    or None when it starts none of them. Raises :class:`LauncherError`
    (located) on YAML that does not parse."""
    result: Rewrite | None = None
    for topology in topologies:
        if topology.program.name not in text:
            continue
        current = result.text if result else text
        rewrite = rewrite_yaml(current, topology) if path.suffix in YAML_SUFFIXES else rewrite_shell(current, topology)
        if rewrite is None:
            continue
        result = Rewrite(rewrite.text, (result.edits if result else []) + rewrite.edits)
    return result
