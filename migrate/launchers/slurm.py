"""Slurm batch scripts: how many tasks they ask for, and where the chief of a
ParameterServerStrategy job runs.

Two shapes start a between-graph job under Slurm:

- one ``srun python train.py`` step whose tasks take their roles from Slurm's
  environment (``SLURM_PROCID``, the step's node list). The migrated program
  builds ``tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={...})``;
  the step must then start exactly as many tasks as those jobs count (one
  more for a chief, the ps gone for MultiWorkerMirroredStrategy): the task
  count the script gives (``srun -n``, ``#SBATCH --ntasks``, or its nodes
  times its tasks per node) is set to it. A program that still maps roles by
  hand gets a located diagnostic saying what to build and what to ask for.
- one ``srun`` per task with ``--job_name/--task_index`` flags, the hosts taken
  from ``scontrol show hostnames`` into an array (``${NODES[1]}:2222``): the
  chief is started like worker 0 on the next node of that array, and the
  allocation gets that node (``#SBATCH --nodes`` one more).

Values are replaced where they are written (comments, layout kept); a count
the script does not spell as a number is left to its author, with a
diagnostic naming its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SBATCH = re.compile(r"^#SBATCH\s")
_ARRAY_NODE = re.compile(r"\$\{([A-Za-z_]\w*)\[(\d+)\]\}")
_NTASKS = ("n", "ntasks")
_NODES = ("N", "nodes")
_PER_NODE = ("ntasks-per-node",)
_NODE_LIST = ("w", "nodelist")
_WAIT = ("W", "wait")


def is_batch_script(text: str) -> bool:
    """A Slurm batch script: ``#SBATCH`` directives, or tasks started by ``srun``."""
    return any(_SBATCH.match(line) for line in text.splitlines()) or bool(
        re.search(r"(^|[\s;&|(])srun\s", text, re.MULTILINE))


@dataclass(frozen=True)
class Option:
    """One option's value as written: on line ``line`` (0-based) at ``start:end``."""

    line: int
    start: int
    end: int
    value: str

    @property
    def number(self) -> int | None:
        return int(self.value) if self.value.isdigit() else None


def _options(text: str, offset: int, line: int, names: tuple[str, ...]) -> Option | None:
    """The value of the first option of ``names`` in ``text`` (short
    ``-n 4``/``-n4``, long ``--ntasks=4``/``--ntasks 4``), located; ``text``
    starts at column ``offset`` of line ``line``."""
    for name in names:
        if len(name) == 1:
            pattern = rf"(?:^|\s)-{name}(?:\s+|=)?([^\s#;&|]+)"
        else:
            pattern = rf"(?:^|\s)--{re.escape(name)}(?:=|\s+)([^\s#;&|]+)"
        match = re.search(pattern, text)
        if match:
            return Option(line, offset + match.start(1), offset + match.end(1), match.group(1).strip("'\""))
    return None


def sbatch_option(lines: list[str], names: tuple[str, ...]) -> Option | None:
    """The value an ``#SBATCH`` directive gives the option (the last one wins, as in sbatch)."""
    found = None
    for at, line in enumerate(lines):
        if not _SBATCH.match(line):
            continue
        body = line.rstrip("\r\n")
        found = _options(body[len("#SBATCH"):], len("#SBATCH"), at, names) or found
    return found


def srun_option(lines: list[str], first: int, before: int, names: tuple[str, ...]) -> Option | None:
    """The value ``srun`` itself is given in the command starting on line
    ``first``: among its first ``before`` characters (those before the
    program, whose own options are not srun's)."""
    text = "".join(lines[first:])[:before]
    srun = re.search(r"(^|[\s;&|(])srun\s", text)
    if srun is None:
        return None
    found = _options(text[srun.end() - 1:], srun.end() - 1, 0, names)
    if found is None:
        return None
    line, start = first, found.start
    while start >= len(lines[line]):
        start -= len(lines[line])
        line += 1
    return Option(line, start, start + found.end - found.start, found.value)


def set_value(lines: list[str], option: Option, value: str) -> None:
    line = lines[option.line]
    lines[option.line] = line[:option.start] + value + line[option.end:]


@dataclass
class TaskCount:
    """Where a batch script says how many tasks its ``srun`` step runs."""

    ntasks: list[Option]  # srun -n, #SBATCH --ntasks
    nodes: Option | None  # srun -N, else #SBATCH --nodes
    per_node: Option | None  # srun --ntasks-per-node, else #SBATCH's

    def current(self) -> int | None:
        numbers = [o.number for o in self.ntasks]
        if numbers:
            return numbers[0]
        if self.nodes is None or self.nodes.number is None:
            return None
        per_node = 1 if self.per_node is None else self.per_node.number
        return None if per_node is None else self.nodes.number * per_node

    def where(self) -> Option | None:
        return (self.ntasks or [self.nodes])[0]


def task_count(lines: list[str], first: int, before: int) -> TaskCount:
    ntasks = [o for o in (srun_option(lines, first, before, _NTASKS), sbatch_option(lines, _NTASKS)) if o]
    nodes = srun_option(lines, first, before, _NODES) or sbatch_option(lines, _NODES)
    per_node = srun_option(lines, first, before, _PER_NODE) or sbatch_option(lines, _PER_NODE)
    return TaskCount(ntasks, nodes, per_node)


def set_task_count(lines: list[str], count: TaskCount, total: int) -> str | None:
    """Sets the script's task count to ``total`` in place; None when done,
    else why it cannot be (a count not written as a number)."""
    if count.ntasks:
        bad = next((o for o in count.ntasks if o.number is None), None)
        if bad is not None:
            return f"its task count `{bad.value}` (line {bad.line + 1}) is not a number"
        for option in count.ntasks:
            set_value(lines, option, str(total))
        if count.nodes is not None and count.nodes.number is not None and count.per_node is not None \
                and count.per_node.number is not None and count.nodes.number * count.per_node.number < total:
            set_value(lines, count.nodes, str(-(-total // count.per_node.number)))
        return None
    if count.nodes is None:
        return "it does not say how many tasks to start (no srun -n, #SBATCH --ntasks or --nodes)"
    if count.nodes.number is None:
        return f"its node count `{count.nodes.value}` (line {count.nodes.line + 1}) is not a number"
    per_node = 1 if count.per_node is None else count.per_node.number
    if per_node is None or total % per_node:
        return (f"{total} tasks do not fill its nodes at {count.per_node.value if count.per_node else 1} task(s)"
                " per node")
    set_value(lines, count.nodes, str(total // per_node))
    return None


# --------------------------------------------------------------------------- the chief on a node of its own


@dataclass
class ChiefNode:
    """Worker 0 runs on ``${ARRAY[i]}`` of the script's node array: the chief
    gets the array's next node, and the allocation one more node."""

    worker0_node: str  # as written in worker 0's srun: ${NODES[1]}
    chief_node: str  # ${NODES[3]}
    nodes: Option  # the #SBATCH node count to raise
    ntasks: Option | None  # an #SBATCH task count to raise

    def address(self, worker0_address: str) -> str:
        _, _, port = worker0_address.rpartition(":")
        return self.chief_node + (f":{port}" if port else "")


def chief_node(lines: list[str], first: int, before: int, worker0_address: str) -> ChiefNode | None:
    """Where the chief of a job started by one srun per task goes: the next
    node of the array worker 0's node comes from, when worker 0's srun picks
    its node from that array (``-w ${NODES[1]}``), its address is on that node
    and the allocation has no node left over."""
    selector = srun_option(lines, first, before, _NODE_LIST)
    if selector is None:
        return None
    node = _ARRAY_NODE.fullmatch(selector.value)
    if node is None or not worker0_address.startswith(selector.value):
        return None
    array = node.group(1)
    used = [int(i) for i in re.findall(rf"\$\{{{array}\[(\d+)\]\}}", "".join(lines))]
    nodes = sbatch_option(lines, _NODES)
    if nodes is None or nodes.number is None or nodes.number != max(used) + 1:
        return None
    ntasks = sbatch_option(lines, _NTASKS)
    return ChiefNode(selector.value, f"${{{array}[{max(used) + 1}]}}", nodes,
                     ntasks if ntasks is not None and ntasks.number is not None else None)


def wait_option(lines: list[str], first: int, before: int) -> Option | None:
    return srun_option(lines, first, before, _WAIT)
