"""Shell launchers (and Slurm batch scripts) that start the program's tasks.

For ParameterServerStrategy the chief is started after the ps and worker
tasks, with worker 0's arguments and the chief's role, in the foreground; the
ps and worker tasks now only serve, so when the chief ends they are ended and
the script exits with the chief's status. Every task gets ``--chief_hosts``
when the program takes it. For MultiWorkerMirroredStrategy the ps tasks (and
what waits for or kills them) go.

Slurm batch scripts are shell launchers too; what only they have (their
task counts, the node a chief runs on, one ``srun`` step whose tasks take
their roles from Slurm) is :mod:`.slurm`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migrate.launchers import commands, slurm
from migrate.launchers.manifests import Edit, LauncherError, Rewrite
from migrate.launchers.topology import Topology

_TOKEN = re.compile(r"""(?:"[^"]*"|'[^']*'|\\[^\n]|[^\s"'\\])+""")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$")


@dataclass
class _Command:
    first: int  # index of its first physical line
    last: int  # index of its last physical line
    text: str  # the physical lines joined (continuations kept)
    tokens: list[re.Match]

    def words(self) -> list[str]:
        return [t.group(0) for t in self.tokens]


def _commands(lines: list[str]) -> list[_Command]:
    found = []
    at = 0
    while at < len(lines):
        first = at
        while lines[at].rstrip("\r\n").endswith("\\") and at + 1 < len(lines):
            at += 1
        text = "".join(lines[first:at + 1])
        code = text.split(" #", 1)[0] if not text.lstrip().startswith("#") else ""
        found.append(_Command(first, at, text, list(_TOKEN.finditer(code))))
        at += 1
    return found


def _variables(commands_: list[_Command]) -> dict[str, str]:
    values = {}
    for command in commands_:
        match = _ASSIGN.match(command.text.strip())
        if match and not command.text.lstrip().startswith("#"):
            values[match.group(1)] = match.group(2).strip().strip("'\"")
    return values


def _expand(value: str, variables: dict[str, str]) -> str:
    """``value`` with the script's variables (and ``${NAME:-default}`` defaults) filled in."""
    def one(match: re.Match) -> str:
        name, default = match.group(1) or match.group(3), match.group(2)
        if name in variables:
            return _expand(variables[name], {k: v for k, v in variables.items() if k != name})
        return default if default is not None else match.group(0)

    return re.sub(r"\$\{([A-Za-z_]\w*)(?::-([^}]*))?\}|\$([A-Za-z_]\w*)", one, value)


def _expand_names_only(value: str, variables: dict[str, str]) -> str:
    """``value`` with the script's own variables filled in, ``${NAME:-default}`` kept."""
    return re.sub(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))",
                  lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), value)


def _chief_spelling(worker0: str, chief: str) -> str:
    """The chief's address spelled like worker 0's: a port read from the
    environment with a default (``${WORKER0_PORT:-2223}``) stays so, under the
    chief's own name."""
    port = re.search(r"\$\{([A-Za-z_]\w*):-(\d+)\}$", worker0)
    if port is None:
        return chief
    name = re.sub(r"(?i)worker_?\d*", "CHIEF", port.group(1)) if re.search("(?i)worker", port.group(1)) \
        else "CHIEF_PORT"
    host, _, number = chief.rpartition(":")
    return f"{host}:${{{name}:-{number}}}"


def _unclosed_quote(text: str) -> int | None:
    """Offset of a quote ``text`` (one command) opens and never closes."""
    quote, opened, at = None, 0, 0
    while at < len(text):
        char = text[at]
        if quote is None:
            if char == "\\":
                at += 1
            elif char in "'\"":
                quote, opened = char, at
            elif char == "#" and (at == 0 or text[at - 1].isspace()):
                at = text.find("\n", at)
                if at < 0:
                    break
        elif char == quote:
            quote = None
        elif char == "\\" and quote == '"':
            at += 1
        at += 1
    return opened if quote is not None else None


_HOST = r"(?:[\w.-]+|\$\{?[A-Za-z_]\w*\}?|\$\{[A-Za-z_]\w*\[\d+\]\})"
_PORT = r"(?:\d+|\$\{[A-Za-z_]\w*:-\d+\})"
_ADDRESS = re.compile(rf"{_HOST}(?::{_PORT})?")


def _unreadable_hosts(value: str) -> str | None:
    """The part of a host list (the script's own variables filled in) that is
    not ``host:port`` (a host or port may be a variable, an array element or
    ``${PORT:-2222}``): a loop's accumulator, a command substitution."""
    for address in value.strip("'\"").split(","):
        if not _ADDRESS.fullmatch(address):
            return address
    return None


@dataclass
class _Task:
    command: _Command
    program_at: int
    job: str | None
    index: str | None
    background: bool


def _tasks(commands_: list[_Command], program: str) -> list[_Task]:
    tasks = []
    for command in commands_:
        words = command.words()
        at = commands.runs_program(words, program)
        if at is None:
            continue
        job, index = commands.role(words)
        if job is None:
            config = next((commands.tf_config(w.split("=", 1)[1].strip("'\"")) for w in words
                           if w.startswith("TF_CONFIG=")), None)
            if config is not None:
                job, index = commands.tf_config_role(config)
        tasks.append(_Task(command, at, job, index, "&" in words or command.text.rstrip().endswith("&")))
    return tasks


def _insert_flag(command: _Command, program_at: int, name: str, value: str) -> str:
    """The command's text with ``--name=value`` after the program's last argument."""
    words = command.words()
    if commands.flag(words, name):
        return command.text
    last = command.tokens[commands.last_flag(words, program_at)]
    return command.text[:last.end()] + f" --{name}={value}" + command.text[last.end():]


def rewrite_shell(text: str, topology: Topology) -> Rewrite | None:
    lines = text.splitlines(keepends=True)
    parsed = _commands(lines)
    tasks = _tasks(parsed, topology.program.name)
    if not tasks:
        return None
    for task in tasks:
        if _unclosed_quote(task.command.text) is None:
            continue
        rest = "".join(lines[task.command.first:])
        if _unclosed_quote(rest) is None:
            # valid shell: a quoted string going on over the next lines (`bash -c '...`)
            return Rewrite(text, [Edit("TFM503", f"the command that starts {topology.program.name} goes on in a"
                                       " quoted string over several lines, which is not rewritten: "
                                       f"{topology.describe()}", task.command.first + 1, fixed=False)])
        # the quotes of the rest of the file never pair up: the one this command opens is the suspect
        open_at = _unclosed_quote(task.command.text)
        line = task.command.first + task.command.text.count("\n", 0, open_at) + 1
        column = open_at - task.command.text.rfind("\n", 0, open_at)
        raise LauncherError(f"a quote opened here is not closed (in the command that starts"
                            f" {topology.program.name}, and the file's quotes never pair up after it): its"
                            " arguments cannot be told apart", line, column)
    edits: list[Edit] = []
    if all(t.job is None for t in tasks):
        if slurm.is_batch_script(text):
            first = tasks[0]
            return slurm.rewrite_step(lines, first.command.first, _program_offset(first), len(tasks), topology)
        edits.append(Edit("TFM503", f"this launcher starts {topology.program.name} without giving each task its"
                          f" role (the program computes it); {topology.describe()}: it needs "
                          + ("a chief task" if topology.needs_chief else "no ps task"),
                          tasks[0].command.first + 1, fixed=False))
        return Rewrite(text, edits)
    computed = [t for t in tasks if t.job is not None and "$" in t.job]
    if computed and not any(t.job in ("chief", "master") for t in tasks) and (
            topology.needs_chief or not any(t.job == "ps" for t in tasks)):
        # one command for several roles, chosen at run time (from SLURM_PROCID, a loop, an argument)
        task = computed[0]
        slurm_rank = "SLURM_PROCID" in text or "SLURM_NODEID" in text
        need = ("one task more, given the role chief (task index 0) where the roles are computed"
                + (" (e.g. Slurm task 0 the chief, and one more task asked of Slurm)" if slurm_rank else "")
                + (", and --chief_hosts=<its address> on every task" if topology.chief_flag else "")
                if topology.needs_chief else
                "no task given the role ps where the roles are computed: every task a worker"
                + (" (ask Slurm for the workers only)" if slurm_rank else ""))
        edits.append(Edit("TFM504" if slurm.is_batch_script(text) or slurm_rank else "TFM503",
                          f"this launcher computes each task's role at run time (--job_name={task.job}): "
                          f"{topology.describe()}; it needs {need}", task.command.first + 1, fixed=False))
        return Rewrite(text, edits)
    replaced: dict[int, str | None] = {}  # first line of a command -> its new text (None: removed)
    appended: dict[int, str] = {}  # after this command's first line: new text
    has_chief = any(t.job in ("chief", "master") for t in tasks)
    if topology.needs_chief and not has_chief and not _add_chief(lines, parsed, tasks, topology, replaced, appended,
                                                                 edits):
        return Rewrite(text, edits)
    if topology.drops_ps:
        _drop_ps(parsed, tasks, topology, replaced, edits, "TFM504" if slurm.is_batch_script(text) else "TFM503")
    if not replaced and not appended:
        return Rewrite(text, edits)
    out = []
    for command in parsed:
        new = replaced.get(command.first, command.text)
        if new is not None:
            out.append(new)
        if command.first in appended:
            out.append(appended[command.first])
    return Rewrite("".join(out), edits)


def _add_chief(lines, parsed, tasks, topology, replaced, appended, edits) -> bool:
    variables = _variables(parsed)
    batch = slurm.is_batch_script("".join(lines))
    code = "TFM504" if batch else "TFM503"
    worker0 = next((t for t in tasks if t.job == "worker" and t.index in ("0", None)), None)
    if worker0 is None:
        edits.append(Edit(code, "no worker 0 command to start the chief like (a chief task is started with worker"
                          " 0's arguments and the role chief); " + topology.describe(),
                          tasks[0].command.first + 1, fixed=False))
        return False
    chief_value = None
    node: slurm.ChiefNode | None = None
    if topology.chief_flag:
        hosts = commands.flag(worker0.command.words(), ("worker_hosts", "worker-hosts"))
        if hosts is None:
            edits.append(Edit("TFM503", "cannot tell the workers' addresses (no --worker_hosts) to give the chief"
                              " one; " + topology.describe(), worker0.command.first + 1, fixed=False))
            return False
        everything = [a for t in tasks for name in (("worker_hosts", "worker-hosts"), ("ps_hosts", "ps-hosts"))
                      if (f := commands.flag(t.command.words(), name))
                      for a in _expand(f[2], variables).split(",")]
        variable = re.fullmatch(r"\$\{?([A-Za-z_]\w*)\}?", hosts[2].strip("'\""))
        assignments = [c for c in parsed if variable is not None and not c.text.lstrip().startswith("#")
                       and (m := _ASSIGN.match(c.text.strip())) and m.group(1) == variable.group(1)]
        unreadable = _unreadable_hosts(_expand_names_only(hosts[2], variables))
        if (variable is not None and len(assignments) != 1) or unreadable:
            where = assignments[-1].first + 1 if assignments else worker0.command.first + 1
            edits.append(Edit(code, "the workers' addresses are "
                              + (f"${variable.group(1)}, which the script does not assign once"
                                 if variable is not None and len(assignments) != 1 else
                                 f"computed by the script (`{unreadable}`), not written as host:port lists")
                              + ": no address can be chosen for a chief here;"
                              " give the chief one, pass --chief_hosts=<it> to every task and start it like worker"
                              " 0 with --job_name=chief; " + topology.describe(), where, fixed=False))
            return False
        raw_worker0 = _expand_names_only(hosts[2], variables).split(",")[0]
        if batch:
            node = slurm.chief_node(lines, worker0.command.first, _program_offset(worker0), raw_worker0)
        chief = node.address(raw_worker0) if node is not None else _chief_spelling(raw_worker0, commands.chief_address(
            _expand(hosts[2], variables).split(",")[0], everything))
        if variable is not None:
            # the hosts are variables of the script: the chief's is one too, named like them
            [assignment] = assignments
            name = re.sub(r"(?i)worker", lambda m: "chief" if m.group(0).islower() else "CHIEF", variable.group(1)) \
                if re.search("(?i)worker", variable.group(1)) else "CHIEF_HOSTS"
            indent = assignment.text[:len(assignment.text) - len(assignment.text.lstrip())]
            appended[assignment.first] = f"{indent}{name}={chief}\n"
            chief_value = f"${name}"
        else:
            chief_value = chief
        for task in tasks:
            replaced[task.command.first] = _insert_flag(task.command, task.program_at, "chief_hosts", chief_value)
    # the chief: worker 0's command with the chief's role, in the foreground
    base = _Command(worker0.command.first, worker0.command.last,
                    replaced.get(worker0.command.first, worker0.command.text), [])
    base.tokens = list(_TOKEN.finditer(base.text))
    words = base.words()
    chief_text = base.text
    for flag_names, value in ((("job_name", "job-name", "job", "task_type", "task-type"), "chief"),
                              (("task_index", "task-index", "task_id", "task-id", "index"), "0")):
        found = commands.flag(words, flag_names)
        if found is not None:
            token = base.tokens[found[1]]
            new = (token.group(0).split("=", 1)[0] + "=" + value) if found[0] == found[1] else value
            chief_text = chief_text[:token.start()] + new + chief_text[token.end():]
            base = _Command(base.first, base.last, chief_text, list(_TOKEN.finditer(chief_text)))
            words = base.words()
    chief_text = re.sub(r"\s*&\s*$", "\n", chief_text.rstrip("\r\n")) if worker0.background else chief_text
    if node is not None:
        # srun's node selector comes before the program, and before any address
        chief_text = chief_text.replace(node.worker0_node, node.chief_node, 1)
    chief_text = re.sub(r"(?i)worker[-_]?0(?=\S*\.(log|out|txt))", "chief", chief_text)
    if not chief_text.endswith("\n"):
        chief_text += "\n"
    indent = chief_text[:len(chief_text) - len(chief_text.lstrip())]
    last_task = max(tasks, key=lambda t: t.command.first)
    after_last = [c for c in parsed if c.first > last_task.command.last]
    # $! of the last task, captured on the next line, stays its pid
    anchor = last_task.command
    if after_last and re.match(r"^\s*[A-Za-z_]\w*=\$!\s*$", after_last[0].text):
        anchor = after_last[0]
    chief_text = chief_text.rstrip("\r\n") + " || chief_status=$?\n"
    block = (f"{indent}# The chief coordinates the training; the ps and worker tasks serve it until it ends.\n"
             f"{indent}chief_status=0\n"
             f"{chief_text}"
             f"{indent}kill $(jobs -p) 2>/dev/null || true\n"
             f"{indent}wait\n")
    appended[anchor.first] = appended.get(anchor.first, "") + block
    # what waited for or killed the tasks: done by the block above
    for command in after_last:
        words = command.words()
        if words and words[0] in ("wait", "kill") and command.first != anchor.first:
            replaced[command.first] = None
    if not any(c.words()[:1] == ["exit"] for c in after_last if c.first not in replaced):
        last = parsed[-1]
        tail = replaced.get(last.first, last.text)
        if tail is not None and not tail.endswith("\n"):
            replaced[last.first] = tail + "\n"
        appended[last.first] = appended.get(last.first, "") + f"{indent}exit $chief_status\n"
    edits.append(Edit(code, "starts a chief task (worker 0's arguments, role chief) after the ps and"
                      " worker tasks and ends them when it finishes" + (f"; every task gets --chief_hosts={chief_value}"
                                                                       if chief_value else "")
                      + ": " + topology.describe(), worker0.command.first + 1))
    if batch:
        _allocate_chief(lines, node, worker0, replaced, edits)
    return True


def _allocate_chief(lines, node: slurm.ChiefNode | None, worker0: _Task, replaced, edits) -> None:
    """The allocation of a batch script whose chief was added: one more node
    for it (when it runs on a node of its own), one more task."""
    new_lines = list(lines)
    said = []
    if node is not None:
        said.append(f"the chief runs on a node of its own, {node.chief_node}: #SBATCH --nodes"
                    f" {node.nodes.value} -> {node.nodes.number + 1}")
        slurm.set_value(new_lines, node.nodes, str(node.nodes.number + 1))
    else:
        said.append("the chief runs as another srun step beside worker 0 (its node, the next port): the"
                    " allocation needs room for one more task there")
    ntasks = slurm.sbatch_option(lines, ("n", "ntasks"))
    if ntasks is not None and ntasks.number is not None:
        slurm.set_value(new_lines, ntasks, str(ntasks.number + 1))
        said.append(f"#SBATCH --ntasks {ntasks.value} -> {ntasks.number + 1}")
    for at, (old, new) in enumerate(zip(lines, new_lines)):
        if old != new:
            replaced[at] = new
    edits.append(Edit("TFM504", "; ".join(said), (node.nodes.line if node else worker0.command.first) + 1))


def _drop_ps(parsed, tasks, topology, replaced, edits, code) -> None:
    pids = set()
    for task in tasks:
        if task.job != "ps":
            continue
        replaced[task.command.first] = None
        edits.append(Edit(code, "removed this ps task: " + topology.describe(), task.command.first + 1))
        following = [c for c in parsed if c.first > task.command.last][:1]
        if following and (m := re.match(r"^\s*([A-Za-z_]\w*)=\$!\s*$", following[0].text)):
            replaced[following[0].first] = None
            pids.add(m.group(1))
    captured = re.compile(r"\$\{?(" + "|".join(pids) + r")\}?")
    for command in parsed:
        words = command.words()
        if words and words[0] in ("kill", "wait") and pids and all(
                captured.fullmatch(w) for w in words[1:] if not w.startswith("-")):
            replaced[command.first] = None


def _program_offset(task: _Task) -> int:
    """Characters of the task's command before the program it runs."""
    return task.command.tokens[task.program_at].start()
