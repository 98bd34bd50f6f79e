"""The command line of one task, as launchers spell it: which program it runs,
its role (``--job_name``/``--task_index`` flags or a TF_CONFIG), and the
changes a new topology makes to it.

Tokens are kept as written (a shell line's ``$PS_HOSTS`` stays a variable);
a flag is ``--name=value`` or ``--name value``, with ``-`` or ``_`` in the
name.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

_JOB_FLAGS = ("job_name", "job-name", "job", "task_type", "task-type")
_INDEX_FLAGS = ("task_index", "task-index", "task_id", "task-id", "index")
_FLAG = re.compile(r"^--?([A-Za-z][\w-]*)(=(.*))?$", re.DOTALL)


def runs_program(tokens: list[str], program: str) -> int | None:
    """Index of the token naming ``program`` (a file name like ``train.py``)."""
    for at, token in enumerate(tokens):
        bare = token.strip("'\"")
        if bare == program or PurePosixPath(bare).name == program:
            return at
    return None


def flag(tokens: list[str], names: tuple[str, ...] | str) -> tuple[int, int, str] | None:
    """(index of the flag token, index of its value token, value)"""
    names = (names,) if isinstance(names, str) else names
    for at, token in enumerate(tokens):
        match = _FLAG.match(token.strip("'\""))
        if not match or match.group(1) not in names:
            continue
        if match.group(2) is not None:
            return at, at, match.group(3)
        if at + 1 < len(tokens):
            return at, at + 1, tokens[at + 1].strip("'\"")
    return None


def role(tokens: list[str]) -> tuple[str | None, str | None]:
    """(job name, task index) as the flags give them (either may be None)."""
    job, index = flag(tokens, _JOB_FLAGS), flag(tokens, _INDEX_FLAGS)
    return (job[2] if job else None), (index[2] if index else None)


def with_flag(tokens: list[str], names: tuple[str, ...] | str, value: str, after: int | None = None) -> list[str]:
    """``tokens`` with the flag set to ``value`` (added after ``after``, by
    default after the last token, when it is absent)."""
    names = (names,) if isinstance(names, str) else names
    found = flag(tokens, names)
    tokens = list(tokens)
    if found is None:
        at = len(tokens) if after is None else after + 1
        tokens.insert(at, f"--{names[0]}={value}")
        return tokens
    name_at, value_at, _ = found
    if name_at == value_at:
        prefix = tokens[name_at].split("=", 1)[0]
        tokens[name_at] = f"{prefix}={value}"
    else:
        tokens[value_at] = value
    return tokens


def with_role(tokens: list[str], job: str, index: str) -> list[str]:
    return with_flag(with_flag(tokens, _JOB_FLAGS, job), _INDEX_FLAGS, index)


def last_flag(tokens: list[str], start: int) -> int:
    """Index of the last token of the program's arguments from ``start``
    (shell redirections and ``&`` are not arguments)."""
    last = start
    for at in range(start + 1, len(tokens)):
        token = tokens[at]
        if token in ("&", "&&", "||", ";", "|") or re.match(r"^\d*[<>]", token):
            break
        last = at
    return last


# --------------------------------------------------------------------------- TF_CONFIG


def tf_config(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("cluster"), dict) else None


def tf_config_role(config: dict) -> tuple[str | None, str | None]:
    task = config.get("task") or {}
    index = task.get("index")
    return task.get("type"), (None if index is None else str(index))


def chief_address(worker0: str, addresses: list[str]) -> str:
    """A chief address in the naming scheme of worker 0's: its host with
    ``worker`` made ``chief`` (``job-worker-0:2222`` -> ``job-chief-0:2222``)
    when the host names its role, else the same host on the port above every
    port the cluster uses there."""
    host, _, port = worker0.rpartition(":")
    if re.search(r"(?i)worker", host):
        return re.sub(r"(?i)worker", "chief", host, count=1) + (f":{port}" if port else "")
    ports = [int(p) for h, _, p in (a.rpartition(":") for a in addresses) if h == host and p.isdigit()]
    if ports:
        return f"{host}:{max(ports) + 1}"
    return f"chief-{worker0}"
