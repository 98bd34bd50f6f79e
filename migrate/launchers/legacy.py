"""What a legacy launcher starts, for ``tfmigrate check --launcher``: the
program, how many ps and worker tasks, and the arguments every task gets
besides its cluster and role (check owns those: it maps the cluster to
loopback ports and gives each task its role)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from migrate.launchers import commands
from migrate.launchers.manifests import YAML_SUFFIXES, load
from migrate.launchers.shell import _commands, _tasks

_CLUSTER_FLAGS = ("ps_hosts", "ps-hosts", "worker_hosts", "worker-hosts", "chief_hosts", "chief-hosts",
                  "job_name", "job-name", "task_index", "task-index", "task_id", "task-id")


class LaunchError(Exception):
    pass


@dataclass(frozen=True)
class LaunchPlan:
    launcher: Path
    program: Path
    ps: int
    workers: int
    args: tuple[str, ...]  # every task's own arguments (not its cluster or role)

    def describe(self) -> str:
        return (f"{self.launcher} starts {self.program.name}: {self.ps} ps, {self.workers} worker task(s)"
                + (f", arguments {' '.join(self.args)}" if self.args else ""))


def _arguments(tokens: list[str], program_at: int) -> tuple[str, ...]:
    args: list[str] = []
    end = commands.last_flag(tokens, program_at)
    at = program_at + 1
    while at <= end:
        token = tokens[at].strip("'\"")
        found = commands.flag([token], _CLUSTER_FLAGS)
        if found is not None:
            at += 1 if "=" in token else 2
            continue
        if not token.startswith("$"):  # "$@" and other shell expansions are the caller's
            args.append(token)
        at += 1
    return tuple(args)


def plan(launcher: Path, program: Path | None = None) -> LaunchPlan:
    """The plan of ``launcher`` (a shell script or a TFJob), for ``program``
    when given, else for the one Python program it starts."""
    try:
        text = launcher.read_text(encoding="utf-8")
    except OSError as e:
        raise LaunchError(f"cannot read the launcher {launcher}: {e.strerror or e}") from None
    if launcher.suffix in YAML_SUFFIXES:
        return _tfjob_plan(launcher, text, program)
    parsed = _commands(text.splitlines(keepends=True))
    names = [program.name] if program else sorted({
        w.strip("'\"").rsplit("/", 1)[-1] for c in parsed for w in c.words() if w.strip("'\"").endswith(".py")})
    for name in names:
        tasks = [t for t in _tasks(parsed, name) if t.job in ("ps", "worker", "chief", "master")]
        if not tasks:
            continue
        words = tasks[0].command.words()
        path = Path(words[tasks[0].program_at].strip("'\""))
        path = path if path.is_absolute() else launcher.parent / path
        return LaunchPlan(launcher, program or path, sum(t.job == "ps" for t in tasks),
                          sum(t.job != "ps" for t in tasks), _arguments(words, tasks[0].program_at))
    raise LaunchError(f"{launcher}: no command starting a ps or worker task of "
                      + (program.name if program else "a Python program")
                      + " (with --job_name/--task_index flags or a TF_CONFIG) was found")


def _tfjob_plan(launcher: Path, text: str, program: Path | None) -> LaunchPlan:
    try:
        docs = load(text)
    except Exception as e:  # noqa: BLE001 - a located YAML error, said as such
        raise LaunchError(f"{launcher}: {e}") from None
    for doc in docs:
        replicas = ((doc or {}).get("spec") or {}).get("tfReplicaSpecs") if isinstance(doc, dict) else None
        if not isinstance(replicas, dict):
            continue
        counts = {str(k).lower(): int((v or {}).get("replicas", 1)) for k, v in replicas.items()}
        worker = replicas.get(next((k for k in replicas if str(k).lower() == "worker"), None)) or {}
        containers = ((worker.get("template") or {}).get("spec") or {}).get("containers") or []
        tokens = [str(t) for c in containers[:1] for key in ("command", "args") for t in (c.get(key) or [])]
        at = next((i for i, t in enumerate(tokens) if t.endswith(".py")), None)
        if at is None:
            continue
        found = Path(tokens[at])
        local = program or launcher.parent / found.name
        return LaunchPlan(launcher, local, counts.get("ps", 0),
                          counts.get("worker", 0) + counts.get("chief", 0) + counts.get("master", 0),
                          _arguments(tokens, at))
    raise LaunchError(f"{launcher}: no TFJob with a Worker replica spec running a Python program")
