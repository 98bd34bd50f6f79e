"""Slurm batch scripts: how many tasks they ask for, and where the chief of a
ParameterServerStrategy job runs.

Two shapes start a between-graph job under Slurm:

- one ``srun python train.py`` step whose tasks take their roles from Slurm's
  environment (``SLURM_PROCID``, the step's node list). The migrated program
  builds ``tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={...})``;
  the step must then start exactly as many tasks as those jobs count (one
  more for a chief, the ps gone for MultiWorkerMirroredStrategy): the task
  count the script gives (``srun -n``, ``#SBATCH --ntasks``, or its nodes
  times its tasks per node; an ``srun -n $SLURM_NTASKS`` follows the
  directives) is set to it. For ParameterServerStrategy ``srun --wait``
  ends the step's serving tasks once the chief has exited. A program that
  still maps roles by hand gets a located diagnostic saying what to build
  and what to ask for.
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

from migrate.launchers.manifests import Edit, Rewrite
from migrate.launchers.topology import EVERY_TASK_A_WORKER, Topology

_SBATCH = re.compile(r"^#SBATCH\s")
_ARRAY_NODE = re.compile(r"\$\{([A-Za-z_]\w*)\[(\d+)\]\}")
_NTASKS = ("n", "ntasks")
_NODES = ("N", "nodes")
_PER_NODE = ("ntasks-per-node",)
_NODE_LIST = ("w", "nodelist")
_WAIT = ("W", "wait")


def is_batch_script(text: str) -> bool:
    """A Slurm batch script: ``#SBATCH`` directives, or tasks started by ``srun``."""
    lines = text.splitlines()
    return any(_SBATCH.match(line) for line in lines) or any(
        re.search(r"(^|[\s;&|(])srun\s", line.split(" #", 1)[0]) for line in lines if not line.lstrip().startswith("#"))


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


_ALLOCATION = re.compile(r"\$\{?(SLURM_NTASKS|SLURM_NPROCS|SLURM_NNODES|SLURM_JOB_NUM_NODES)\}?")


def task_count(lines: list[str], first: int, before: int) -> TaskCount:
    srun_tasks = srun_option(lines, first, before, _NTASKS)
    srun_nodes = srun_option(lines, first, before, _NODES)
    per_node = srun_option(lines, first, before, _PER_NODE) or sbatch_option(lines, _PER_NODE)
    # srun counts read from the allocation (-n $SLURM_NTASKS) follow the #SBATCH directives
    follows = _ALLOCATION.fullmatch(srun_tasks.value) if srun_tasks is not None else None
    per_allocated_node = follows is not None and follows.group(1) in ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    if follows is not None:
        srun_tasks = None
    if per_allocated_node:
        per_node = None  # one task per node of the allocation, whatever its task count
    if srun_nodes is not None and _ALLOCATION.fullmatch(srun_nodes.value):
        srun_nodes = None
    ntasks = [o for o in (srun_tasks, None if per_allocated_node else sbatch_option(lines, _NTASKS)) if o]
    return TaskCount(ntasks, srun_nodes or sbatch_option(lines, _NODES), per_node)


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
    return ChiefNode(selector.value, f"${{{array}[{max(used) + 1}]}}", nodes)


def wait_option(lines: list[str], first: int, before: int) -> Option | None:
    return srun_option(lines, first, before, _WAIT)


# --------------------------------------------------------------------------- one srun step, roles from Slurm


def rewrite_step(lines: list[str], first: int, before: int, steps: int, topology: Topology) -> Rewrite:
    """A batch script whose one ``srun`` step (its command on line ``first``,
    the program ``before`` characters into it) starts every task, roles left
    to the program (Slurm's task ids): the step is made to start as many
    tasks as the program's SlurmClusterResolver counts. ``steps``: the
    commands starting the program."""
    at = first + 1
    name = topology.program.name
    count = task_count(lines, first, before)
    where = count.where()
    located = where.line + 1 if where is not None else at
    current = count.current()
    if steps > 1:
        return Rewrite("".join(lines), [Edit("TFM504", f"this batch script starts {name} in {steps} srun steps"
                                             " without a role for each: one step must start every task of"
                                             f" the job; {topology.describe()}", at, fixed=False)])
    if topology.slurm_jobs == EVERY_TASK_A_WORKER and topology.drops_ps:
        return Rewrite("".join(lines), [])  # as many workers as the script asks for tasks
    jobs = dict(topology.slurm_jobs or ()) if topology.slurm_jobs != EVERY_TASK_A_WORKER else {}
    if not jobs:
        roles = ('{"chief": 1, "ps": P, "worker": W}' if topology.needs_chief else '{"worker": W}')
        counted = (f"; this script asks for {current} task(s) (line {located})" if current is not None else "")
        resolver = ("it builds no SlurmClusterResolver" if topology.slurm_jobs is None else
                    "its SlurmClusterResolver has no jobs (every task a worker, no chief)"
                    if topology.slurm_jobs == EVERY_TASK_A_WORKER else
                    "its SlurmClusterResolver's jobs are not literal task counts")
        need = (f"a chief besides its ps and workers: build the cluster with"
                f" tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={roles}) (it orders the jobs by"
                " name: Slurm task 0 becomes the chief, the next P the ps, the rest the workers), and ask Slurm"
                " for P + W + 1 tasks, one more than the ps and workers" if topology.needs_chief else
                f"no ps: build the cluster with tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={roles})"
                " and ask Slurm for the W workers only")
        return Rewrite("".join(lines), [Edit(
            "TFM504", f"this Slurm batch script starts {name} in one srun step whose tasks take their roles"
            f" from Slurm, and {resolver}; {topology.describe()}: it needs {need}{counted}; then run tfmigrate"
            " again and the task count follows the resolver's jobs", located, fixed=False)])
    problem = _jobs_problem(jobs, topology)
    if problem is not None:
        return Rewrite("".join(lines), [Edit("TFM504", f"{name}'s SlurmClusterResolver asks for jobs {jobs}: "
                                             f"{problem}; {topology.describe()}", at, fixed=False)])
    total = sum(jobs.values())
    new_lines = list(lines)
    edits: list[Edit] = []
    if current != total:
        why = set_task_count(new_lines, count, total)
        if why is not None:
            return Rewrite("".join(lines), [Edit("TFM504", f"the srun step must start {total} tasks, as"
                                                 f" {name}'s SlurmClusterResolver(jobs={jobs}) counts, but {why}:"
                                                 " set it by hand", located, fixed=False)])
        edits.append(Edit("TFM504", f"the srun step now starts {total} tasks"
                          + (f" (was {current})" if current is not None else "")
                          + f", the jobs {name}'s SlurmClusterResolver counts ({jobs}): {topology.describe()}",
                          located))
    if topology.needs_chief and wait_option(new_lines, first, before) is None:
        # ps and workers serve until ended: srun ends the step's other tasks once the chief exits
        srun = re.search(r"(^|[\s;&|(])srun(?=\s)", new_lines[first])
        if srun is not None:
            line = new_lines[first]
            new_lines[first] = line[:srun.end()] + " --wait=60" + line[srun.end():]
            edits.append(Edit("TFM504", "srun --wait=60: the ps and worker tasks now only serve (they never"
                              " exit on their own); srun ends them 60 s after the first task exits, the chief"
                              " when training is done (srun then reports them as killed)", at))
    return Rewrite("".join(new_lines), edits)


def _jobs_problem(jobs: dict[str, int], topology: Topology) -> str | None:
    if topology.needs_chief:
        if jobs.get("chief") != 1:
            return "a ParameterServerStrategy job has exactly one chief task (jobs={'chief': 1, ...})"
        if not jobs.get("ps") or not jobs.get("worker"):
            return "a ParameterServerStrategy job needs ps and worker tasks besides the chief"
        if set(jobs) - {"chief", "ps", "worker", "evaluator"}:
            return f"job names other than chief, ps, worker: {sorted(set(jobs) - {'chief', 'ps', 'worker'})}"
    elif "ps" in jobs or not jobs.get("worker"):
        return "a MultiWorkerMirroredStrategy job has worker tasks and no ps"
    return None
