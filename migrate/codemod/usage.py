"""Usage examples in a migrated program's comments and docstrings follow the
topology it now needs.

Real programs document how to start their tasks next to the code::

    # python train.py --ps_hosts=h:2222 --worker_hosts=h:2223,h:2224 --job_name=ps --task_index=0
    # python train.py --ps_hosts=h:2222 --worker_hosts=h:2223,h:2224 --job_name=worker --task_index=0

or show the ``TF_CONFIG`` of one task. Once the training runs on
ParameterServerStrategy those instructions start no chief, and the job never
trains; on MultiWorkerMirroredStrategy the ps they start makes the workers
fail. The launchers next to the program are rewritten for that
(``migrate.launchers``); this stage does the same, with the same command
edits, to the examples in the program's own text:

- ParameterServerStrategy: every example command gets ``--chief_hosts`` when
  the program takes it and the commands give ``--worker_hosts``; a set of
  example commands (one per task) without a chief gets one, worker 0's
  command with the chief's role, after its last worker; a ``TF_CONFIG``
  cluster gets a ``chief`` address.
- MultiWorkerMirroredStrategy: ps commands leave a set that starts workers too;
  a ``TF_CONFIG`` cluster loses its ``ps``.

Only text the legacy file had is edited, on whole lines (comments and lines
of string literals); everything else keeps its bytes. A second run finds the
chief there and changes nothing.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from migrate.launchers import commands
from migrate.launchers.topology import Topology, of_program

_RUNS = re.compile(r"\bpython[\d.]*\s+(?:-\S+\s+)*([\w./-]+\.py)\b")
_TOKEN = re.compile(r"""(?:"[^"]*"|'[^']*'|[^\s"'])+""")
_JOB = ("job_name", "job-name", "job", "task_type", "task-type")
_INDEX = ("task_index", "task-index", "task_id", "task-id", "index")
_WORKER_HOSTS = ("worker_hosts", "worker-hosts")
_PS_HOSTS = ("ps_hosts", "ps-hosts")


@dataclass
class Example:
    """One example command: its lines (the first runs the program; the rest
    continue it, e.g. the closing arguments of a ``subprocess.Popen(...)``)."""

    first: int  # 0-based index of its first line in the code
    last: int
    job: str | None
    index: str | None
    container: int  # which comment run or string literal holds it


def follow_topology(path: str, source: str, code: str) -> tuple[str, list[tuple[int, str]]]:
    """``code`` (the migrated text of ``source``) with its usage examples
    following its topology, and what changed: (1-based line in ``source``,
    message) per edited set of examples."""
    topology = of_program(Path(path), code)
    if topology is None:
        return code, []
    lines = code.splitlines(keepends=True)
    legacy_lines = {line.strip() for line in source.splitlines() if line.strip()}
    # an example to edit starts on a line kept from the input that runs the program or
    # holds a TF_CONFIG cluster: without one, the code is not tokenized (most programs)
    containers = _text_containers(code, len(lines)) if any(
        (_RUNS.search(line) or _CLUSTER.search(line)) and line.strip() in legacy_lines for line in lines) else {}
    editable = {at for at in containers if lines[at].strip() in legacy_lines}
    examples = _examples(lines, containers, editable)
    replaced: dict[int, str | None] = {}
    appended: dict[int, str] = {}
    changes: list[tuple[int, str]] = []
    for group in _sets(examples):
        what = _follow(group, lines, topology, replaced, appended)
        if what:
            changes.append((_source_line(source, lines[group[0].first]), what))
    for at in sorted(editable):
        what = _tf_config(at, lines, topology, replaced)
        if what:
            changes.append((_source_line(source, lines[at]), what))
    for at, line in enumerate(lines):
        # the flag's definition may be respelled by a rule (tf.app.flags -> absl): its help is the author's
        helped = _job_flag_help(line, topology) if at not in replaced else None
        if helped is not None and helped[1] in source:
            replaced[at] = helped[0]
            changes.append((_source_line(source, line) if line.strip() in legacy_lines else _flag_line(source),
                            f"the help of the role flag names the roles the program now has ({topology.describe()})"))
    if not replaced and not appended:
        return code, []
    out = []
    for at, line in enumerate(lines):
        new = replaced.get(at, line)
        if new is not None:
            out.append(new)
        if at in appended:
            out.append(appended[at])
    return "".join(out), changes


# --------------------------------------------------------------------------- analysis


def _text_containers(code: str, count: int) -> dict[int, int]:
    """0-based line -> its container: runs of whole-line comments (one
    container per run of consecutive comment lines, blank lines allowed), and
    the lines of each string literal after its opening line."""
    found: dict[int, int] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    container = 0
    previous_comment = -2
    code_lines = set()
    for token in tokens:
        if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER, tokenize.COMMENT):
            continue
        code_lines.update(range(token.start[0] - 1, token.end[0]))
    for token in tokens:
        if token.type == tokenize.COMMENT and not token.line[:token.start[1]].strip():
            at = token.start[0] - 1
            if any(line in code_lines for line in range(previous_comment + 1, at)):
                container += 1
            found[at] = container
            previous_comment = at
        elif token.type == tokenize.STRING and token.end[0] > token.start[0]:
            container += 1
            for at in range(token.start[0] - 1, min(token.end[0], count)):
                found[at] = container
            container += 1
    return found


def _examples(lines: list[str], containers: dict[int, int], editable: set[int]) -> list[Example]:
    found: list[Example] = []
    for at in sorted(editable):
        text = lines[at]
        runs = _RUNS.search(text)
        if runs is None:
            continue
        last = at
        while lines[last].rstrip("\r\n").endswith("\\") and last + 1 in editable:
            last += 1  # a command continued on the next line
        text = "".join(lines[at:last + 1])
        job, index = commands.role(_words(text))
        if job is None:
            continue
        indent = len(text) - len(text.lstrip())
        # lines continuing it: more indented, no command of their own
        while last + 1 in editable and containers.get(last + 1) == containers[at] and lines[last + 1].strip() \
                and len(lines[last + 1]) - len(lines[last + 1].lstrip()) > indent \
                and not _RUNS.search(lines[last + 1]):
            last += 1
        found.append(Example(at, last, job.strip("'\""), None if index is None else index.strip("'\""),
                             containers[at]))
    return found


def _sets(examples: list[Example]) -> list[list[Example]]:
    """The examples that start one job together: consecutive in a container
    until a task is started a second time (a second way of launching)."""
    sets: list[list[Example]] = []
    for example in examples:
        current = sets[-1] if sets else None
        if current is None or current[-1].container != example.container or any(
                (e.job, e.index) == (example.job, example.index) for e in current):
            sets.append([example])
        else:
            current.append(example)
    return sets


def _source_line(source: str, line: str) -> int:
    for number, text in enumerate(source.splitlines(), 1):
        if text.strip() == line.strip():
            return number
    return 1


# --------------------------------------------------------------------------- edits


def _follow(group: list[Example], lines: list[str], topology: Topology,
            replaced: dict[int, str | None], appended: dict[int, str]) -> str | None:
    jobs = {e.job for e in group}
    if topology.drops_ps:
        if "ps" not in jobs or jobs <= {"ps"}:
            return None
        for example in group:
            if example.job == "ps":
                for at in range(example.first, example.last + 1):
                    replaced[at] = None
        return f"usage example: its ps task removed ({topology.describe()})"
    if "chief" in jobs or "master" in jobs:
        return None
    workers = [e for e in group if e.job == "worker"]
    if not workers:
        return None
    said = []
    chief_hosts = None
    if topology.chief_flag:
        hosts = [commands.flag(_words(_text(e, lines, replaced)), _WORKER_HOSTS) for e in group]
        ps = [commands.flag(_words(_text(e, lines, replaced)), _PS_HOSTS) for e in group]
        if all(hosts) and "$" not in hosts[0][2]:
            workers_listed = hosts[0][2].strip("'\"").split(",")
            everything = workers_listed + [a for f in ps[:1] if f for a in f[2].strip("'\"").split(",")]
            # an address like the workers' (a placeholder like theirs where they show one)
            chief_hosts = commands.chief_address(workers_listed[0], everything) \
                if re.fullmatch(r"[\w.-]+:\d+", workers_listed[0]) else workers_listed[0]
            for example in group:
                _replace(example, _with_chief_hosts(_text(example, lines, replaced), chief_hosts), replaced)
            said.append(f"every command gets --chief_hosts={chief_hosts}")
    if len(group) > 1 or group[0].job == "worker":
        worker0 = next((e for e in workers if e.index in ("0", None)), workers[0])
        chief = _with_role("".join(replaced.get(at, lines[at]) or "" for at in range(worker0.first, worker0.last + 1)),
                           "chief", "0")
        last = max(workers, key=lambda e: e.last)
        separated = len(group) > 1 and any(b.first > a.last + 1 for a, b in itertools.pairwise(group))
        blank = _blank_like(lines[last.first]) if separated else ""
        appended[last.last] = appended.get(last.last, "") + blank + chief
        said.append("a chief task is started like worker 0, with the chief's role")
    if not said:
        return None
    return "usage example: " + "; ".join(said) + f" ({topology.describe()})"


def _text(example: Example, lines: list[str], replaced: dict[int, str | None]) -> str:
    """The command of ``example`` (its continued lines joined), as edited so far."""
    end = example.first
    while end < example.last and lines[end].rstrip("\r\n").endswith("\\"):
        end += 1
    return "".join(replaced.get(at, lines[at]) or "" for at in range(example.first, end + 1))


def _replace(example: Example, text: str, replaced: dict[int, str | None]) -> None:
    lines = text.splitlines(keepends=True)
    replaced[example.first] = text
    for at in range(example.first + 1, example.first + len(lines)):
        replaced[at] = None


def _words(line: str) -> list[str]:
    runs = _RUNS.search(line)
    return [t.group(0) for t in _TOKEN.finditer(line[runs.end():] if runs else line)]


def _with_chief_hosts(line: str, chief: str) -> str:
    if commands.flag(_words(line), ("chief_hosts", "chief-hosts")) is not None:
        return line
    match = re.search(r"(--?worker[_-]hosts)(=|\s+)(\"[^\"]*\"|'[^']*'|\S+)", line)
    if match is None:
        return line
    name = match.group(1).replace("worker", "chief")
    quote = match.group(3)[0] if match.group(3)[0] in "'\"" else ""
    return f"{line[:match.end()]} {name}{match.group(2)}{quote}{chief}{quote}{line[match.end():]}"


def _with_role(line: str, job: str, index: str) -> str:
    for names, value in ((_JOB, job), (_INDEX, index)):
        pattern = r"(--?(?:" + "|".join(re.escape(n) for n in names) + r"))(=|\s+)(\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
        match = re.search(pattern, line)
        if match is None:
            continue
        quote = match.group(3)[0] if match.group(3)[0] in "'\"" else ""
        line = f"{line[:match.start(3)]}{quote}{value}{quote}{line[match.end(3):]}"
    return line


def _blank_like(line: str) -> str:
    """An empty line of the same kind (``#`` for a comment)."""
    stripped = line.lstrip()
    indent = line[:len(line) - len(stripped)]
    return f"{indent}#\n" if stripped.startswith("#") else "\n"


_CLUSTER = re.compile(r"\{\s*[\"']cluster[\"']\s*:")


def _tf_config(at: int, lines: list[str], topology: Topology, replaced: dict[int, str | None]) -> str | None:
    """A TF_CONFIG example starting on line ``at``: its cluster edited in
    place (the JSON may span lines)."""
    line = replaced.get(at, lines[at])
    if line is None:
        return None
    start = _CLUSTER.search(line)
    if start is None:
        return None
    span, end_line = _balanced(lines, at, start.start(), replaced)
    if span is None:
        return None
    try:
        config = json.loads(span)
    except ValueError:
        return None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict):
        return None
    if topology.drops_ps and "ps" in cluster:
        pattern = re.compile(r"\"ps\"\s*:\s*\[[^\]]*\]\s*,\s*|,\s*\"ps\"\s*:\s*\[[^\]]*\]")
        said = "usage example: TF_CONFIG without a ps task"
    elif topology.needs_chief and "chief" not in cluster and cluster.get("worker"):
        address = commands.chief_address(cluster["worker"][0], [a for v in cluster.values() for a in v])
        pattern = re.compile(r"(\"worker\"\s*:\s*\[[^\]]*\])")
        said = f"usage example: TF_CONFIG with a chief task ({address})"
    else:
        return None
    text = "".join(replaced.get(i, lines[i]) or "" for i in range(at, end_line + 1))
    head, body = text[:start.start()], text[start.start():]
    body = pattern.sub("" if topology.drops_ps else rf'\1, "chief": ["{address}"]', body, count=1)
    try:
        edited = json.loads(_balanced_text(body))
    except ValueError:
        return None
    if topology.drops_ps and "ps" in edited.get("cluster", {}):
        return None
    new_lines = (head + body).splitlines(keepends=True)
    for i in range(at, end_line + 1):
        replaced[i] = None
    replaced[at] = "".join(new_lines)
    return said + f" ({topology.describe()})"


def _balanced(lines: list[str], at: int, column: int, replaced: dict[int, str | None]) -> tuple[str | None, int]:
    depth = 0
    pieces = []
    for i in range(at, min(at + 40, len(lines))):
        text = replaced.get(i, lines[i]) or ""
        for position in range(column if i == at else 0, len(text)):
            char = text[position]
            depth += char == "{"
            depth -= char == "}"
            if depth == 0:
                pieces.append(text[column if i == at else 0:position + 1])
                return "".join(pieces), i
        pieces.append(text[column if i == at else 0:])
    return None, at


def _balanced_text(text: str) -> str:
    depth = 0
    for position, char in enumerate(text):
        depth += char == "{"
        depth -= char == "}"
        if depth == 0:
            return text[:position + 1]
    return text


# --------------------------------------------------------------------------- the role flag's help

_JOB_FLAG_DEFINITION = re.compile(
    r"""(DEFINE_string\(\s*(?:name\s*=\s*)?|add_argument\(\s*)["'](?:--)?(?:job_name|job-name|job_type|task_type)["']""")
# 'ps' or 'worker' / worker, ps / "ps" / "worker": role names joined by separators
_ROLE_LIST = re.compile(
    r"""(?P<list>(?P<q>['"`]?)(?:ps|worker)(?P=q)(?:(?:\s*,\s*(?:or\s+)?|\s+or\s+|\s*/\s*|\s*\|\s*)"""
    r"""(?P<q2>['"`]?)(?:ps|worker)(?P=q2))+)""")


def _flag_line(source: str) -> int:
    for number, text in enumerate(source.splitlines(), 1):
        if _JOB_FLAG_DEFINITION.search(text):
            return number
    return 1


def _job_flag_help(line: str, topology: Topology) -> tuple[str, str] | None:
    """The definition of the role flag on ``line`` with its help naming the
    roles the migrated program has (``'ps' or 'worker'`` -> ``'ps', 'worker'
    or 'chief'`` for ParameterServerStrategy, ``'worker'`` for
    MultiWorkerMirroredStrategy), and the help text it edited."""
    definition = _JOB_FLAG_DEFINITION.search(line)
    if definition is None:
        return None
    rest = line[definition.end():]
    found = _ROLE_LIST.search(rest)
    if found is None or "chief" in rest:
        return None
    listed = found.group("list")
    items = re.findall(r"""['"`]?(?:ps|worker)['"`]?""", listed)
    separators = re.split(r"""['"`]?(?:ps|worker)['"`]?""", listed)[1:-1]
    if len(items) != len(set(items)) or len(items) < 2:
        return None
    if topology.needs_chief:
        quote = items[-1][0] if items[-1][0] in "'\"`" else ""
        chief = f"{quote}chief{quote}"
        last = separators[-1]
        if re.search(r"\bor\b", last):
            new = "".join(i + (s if k < len(separators) - 1 else ", ") for k, (i, s) in
                          enumerate(zip(items[:-1], separators, strict=True))) + items[-1] + f" or {chief}"
        else:
            new = listed + last + chief
    else:
        kept = [i for i in items if i.strip("'\"`") != "ps"]
        new = kept[0] if len(kept) == 1 else listed
        before = rest[:found.start()]
        either = re.search(r"(?i)\b(either|one of)\s*$", before)
        if either is not None and len(kept) == 1:
            rest = rest[:either.start()] + rest[found.start():]
            found = _ROLE_LIST.search(rest)
    edited = rest[:found.start()] + new + rest[found.end():]
    return line[:definition.end()] + edited, listed
