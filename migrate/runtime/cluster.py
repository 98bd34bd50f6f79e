"""The one local-cluster launcher: run a program as every task of a loopback
TensorFlow-style cluster, supervise it, and always clean up.

Used by the TF1 reference programs, ``tfmigrate check`` (a legacy script and
its migration side by side) and the fault-injection tests. Public API:
:func:`run_cluster`, :class:`Fault`, :class:`ClusterResult`,
:class:`TaskResult`, :class:`FaultEvent`.

How a run goes:

1. One free loopback port per task (bind ``127.0.0.1:0``; sockets are held
   until just before that task launches, so nothing else takes the port).
2. Server-only tasks (``server_only``, e.g. ``ps`` which ``server.join()``
   forever) start first; the launcher waits until their ports accept TCP, then
   starts the other ("client") tasks. Sessions that touch a task before its
   gRPC server listens fail with ``UNAVAILABLE`` and cascade.
3. Each task is ``python -m migrate.runtime.taskboot PROGRAM ARGS`` in its own process
   group, with its role as flags or ``TF_CONFIG``, its own log file and loss
   log (:mod:`migrate.runtime.losslog`).
4. Supervision: success once every client exited 0 (server-only tasks are then
   ended by the launcher); failure when a client exits non-zero or a server
   task dies early; timeout. On failure and timeout every running task first
   gets SIGUSR1, which makes it dump all thread stacks into its log.
5. Teardown: SIGTERM to each process group, a short grace, SIGKILL, reap.
   Tasks also die with the launcher (``PR_SET_PDEATHSIG``) and the launcher
   tears down on SIGTERM/SIGINT before re-raising them.

The launcher binds and connects to 127.0.0.1 only and never imports
TensorFlow.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migrate.runtime import losslog
from migrate.runtime.taskboot import (
    CRASH_FILE_ENV,
    LAUNCHER_PID_ENV,
    load_prctl,
    set_parent_death_signal,
)

__all__ = ["ClusterResult", "Fault", "FaultEvent", "TaskResult", "run_cluster"]

LOOPBACK = "127.0.0.1"
DEFAULT_FLAG_NAMES: dict[str, str | None] = {
    "job": "--job_name",
    "index": "--task_index",
    "hosts": "--{job}_hosts",
}
ROLE_STYLES = ("flags", "tf_config", "none")

TERM_GRACE_SECONDS = 3.0  # SIGTERM -> SIGKILL
FAILURE_DUMP_WAIT_SECONDS = 1.0  # SIGUSR1 -> teardown after a task failed
TIMEOUT_DUMP_WAIT_SECONDS = 1.5  # SIGUSR1 -> teardown after the overall timeout
POLL_SECONDS = 0.05
RSS_POLL_SECONDS = 0.2
STOP_POLL_SECONDS = 0.25  # how often the caller's stop_when is asked
# a task that raised (taskboot's crash file) and has not exited within this is
# failed without waiting for its exit
CRASH_EXIT_GRACE_SECONDS = 2.0
LAST_LOG_LINES = 5
# A cluster that does not form fails at once, not at the overall timeout:
# a server-only task must open its port within this (TF's import and server
# start take 5-20 s on a loaded 2-core machine) ...
SERVER_START_SECONDS = 90.0
# ... and a task may wait this long for tasks the launcher runs (TF logs
# "CreateSession still waiting" every 10 s) before the run is failed.
CLUSTER_FORM_SECONDS = 60.0
LOG_WATCH_SECONDS = 0.5
CLUSTER_ENV = "TFMIGRATE_CLUSTER"  # the launcher's cluster, for check's harness
# the interpreter every task runs in (check: the legacy side on the TensorFlow it needs)
TASK_PYTHON_ENV = "TFMIGRATE_TASK_PYTHON"
_ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit)|INFO:tensorflow:Error reported to Coordinator)\b.*")
_SERVER_STARTED = re.compile(r"Started server with target: grpc://([^\s:]+):(\d+)")
_SESSION_WAITING = re.compile(
    r"CreateSession still waiting for response from worker: /job:([\w-]+)/replica:\d+/task:(\d+)"
)
ISOLATED_MARGIN_SECONDS = 30.0  # beyond ``timeout``, for the inner launcher's own teardown

_ENV_CLEARED = ("TF_CONFIG", losslog.ENV_VAR, "TFMIGRATE_TASK")
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
_DUMP_HEADER = re.compile(
    r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):$"
)
_DUMP_BODY = re.compile(r"^(  File \".*\", line \d+ in .*|  <no Python frame>|  \.\.\.|  <.*>)$")


# --------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class Fault:
    """Kill task ``job:index`` once its loss log shows a step >= ``at_step``,
    or ``after_seconds`` after the task first started (exactly one of the two),
    with signal ``sig`` sent to its process group; relaunch it identically
    (same ports, flags, env; log appended) ``restart_delay`` seconds later if
    ``restart``. Each fault fires at most once."""

    job: str
    index: int
    at_step: int | None = None
    after_seconds: float | None = None
    restart: bool = True
    sig: int = signal.SIGKILL
    restart_delay: float = 0.0
    # whose loss log ``at_step`` watches ("chief:0"); default the killed task's
    # own. ParameterServerStrategy workers log nothing: the chief logs every step.
    step_source: str | None = None

    def __post_init__(self) -> None:
        if (self.at_step is None) == (self.after_seconds is None):
            raise ValueError("Fault needs exactly one of at_step or after_seconds")

    @property
    def task_name(self) -> str:
        return f"{self.job}:{self.index}"


@dataclass
class FaultEvent:
    """A fault that fired. ``time`` is seconds since the cluster started."""

    fault: Fault
    time: float
    step_seen: int | None
    killed_pid: int
    restarted_pid: int | None = None
    # size of the killed task's loss log when its relaunch began: records before
    # it are the killed incarnation's, records after it the restarted one's
    resume_offset: int | None = None


@dataclass
class TaskResult:
    job: str
    index: int
    pid: int | None  # of the last incarnation
    returncode: int | None  # of the last incarnation; negative = killed by that signal
    log_path: Path
    peak_rss_bytes: int  # max over incarnations, including the task's child processes
    ended_by_launcher: bool  # server-only task stopped on success, or torn down
    restarts: int
    stack_dump: str | None  # faulthandler output requested on failure/timeout
    ready_seconds: float | None  # launch -> port accepts TCP (server-only tasks)
    loss_path: Path | None = None
    pids: list[int] = field(default_factory=list)  # every incarnation, in order

    @property
    def name(self) -> str:
        return f"{self.job}:{self.index}"


@dataclass
class ClusterResult:
    ok: bool
    reason: str
    timed_out: bool
    tasks: list[TaskResult]
    losses: list[losslog.LossRecord]
    cluster: dict[str, list[str]]
    log_dir: Path
    wall_time: float
    faults: list[FaultEvent]
    network_isolated: bool = False  # ran inside a private network namespace
    stopped_early: bool = False  # ended by the caller's stop_when, not by its tasks

    def task(self, job: str, index: int = 0) -> TaskResult:
        for t in self.tasks:
            if t.job == job and t.index == index:
                return t
        raise KeyError(f"no task {job}:{index}")

    def log_text(self, job: str, index: int = 0) -> str:
        path = self.task(job, index).log_path
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def losses_for(self, task_name: str) -> list[losslog.LossRecord]:
        return [r for r in self.losses if r.task == task_name]

    def summary(self) -> str:
        status = "ok" if self.ok else ("TIMED OUT" if self.timed_out else "FAILED")
        if self.ok and self.stopped_early:
            status = "ok (stopped early)"
        lines = [
            f"cluster {status} in {self.wall_time:.1f}s"
            + (" (isolated network)" if self.network_isolated else "")
            + (f": {self.reason}" if self.reason else "")
        ]
        if self.cluster:
            lines.append(
                "  spec: " + ", ".join(f"{j}={','.join(h)}" for j, h in self.cluster.items())
            )
        for t in self.tasks:
            extra = []
            if t.ready_seconds is not None:
                extra.append(f"ready {t.ready_seconds:.2f}s")
            if t.restarts:
                extra.append(f"restarts {t.restarts}")
            if t.ended_by_launcher:
                extra.append("ended by launcher")
            if t.stack_dump:
                extra.append("stack dump in log")
            lines.append(
                f"  {t.name:<10} pid {t.pid} rc {t.returncode} "
                f"peak {t.peak_rss_bytes / 2**20:.0f} MiB"
                + (f" ({', '.join(extra)})" if extra else "")
                + f" log {t.log_path}"
            )
        for e in self.faults:
            lines.append(
                f"  fault {e.fault.task_name} sig {e.fault.sig} at {e.time:.2f}s "
                f"(step seen {e.step_seen}) killed {e.killed_pid} restarted {e.restarted_pid}"
            )
        lines.append(f"  losses: {len(self.losses)} records; logs in {self.log_dir}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- internals


class _LauncherSignal(BaseException):
    """Raised inside the launcher when it receives SIGTERM/SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _SignalGuard:
    """Turns SIGTERM/SIGINT into :class:`_LauncherSignal` so the launcher can
    tear down before dying, then re-delivers them to the previous handlers.
    Inside ``critical`` sections (forking, reaping) and once tearing down,
    signals are held instead of raised. Only the main thread receives signals,
    so elsewhere this does nothing."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.critical = False
        self.tearing_down = False
        self.previous: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            old = signal.getsignal(signum)
            if old is signal.SIG_IGN or old is None:
                continue
            self.previous[signum] = old
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame) -> None:
        if self.tearing_down or self.critical:
            self.pending = self.pending or signum
            return
        raise _LauncherSignal(signum)

    def check(self) -> None:
        """Raise a held signal, unless inside a critical section or teardown."""
        if self.pending is not None and not self.tearing_down and not self.critical:
            signum, self.pending = self.pending, None
            raise _LauncherSignal(signum)

    def restore(self) -> None:
        for signum, old in self.previous.items():
            signal.signal(signum, old)

    def redeliver(self, signum: int | None) -> None:
        """Act on ``signum`` as if the launcher had never intercepted it."""
        if signum is None or signum not in self.previous:
            return
        old = self.previous[signum]
        if callable(old):
            old(signum, None)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1.0)  # the default action ends the process during this sleep
        raise SystemExit(128 + signum)


def _child_preexec(launcher_pid: int) -> None:
    # Runs in the forked child before exec; taskboot arms PDEATHSIG again after exec.
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != launcher_pid:
        os._exit(70)


def _read_hwm_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children_map() -> dict[int, list[int]]:
    """parent pid -> child pids, from one scan of /proc (one scan serves every
    task of a poll; /proc/<pid>/task/*/children is not available everywhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found: list[int] = []
    stack = list(children.get(pid, ()))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, ()))
    return found


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _last_lines(path: Path, count: int = LAST_LOG_LINES, limit: int = 400) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            tail = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    all_lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    lines = all_lines[-count:]
    text = " | ".join(lines)
    text = text if len(text) <= limit else "..." + text[-limit:]
    # A task often logs its shutdown after the error that ended it: name the
    # error itself when the tail does not show it.
    errors = [ln for ln in all_lines if _ERROR_LINE.match(ln)]
    if errors and errors[-1] not in lines:
        text = f"{errors[-1][:limit]} ... {text}"
    return text


def extract_stack_dump(text: str) -> str | None:
    """The first faulthandler dump (every thread's header and frames) in
    ``text``; a dump ends where a thread shows up a second time (the next dump,
    e.g. the one SIGTERM writes during teardown) or at any other output."""
    out: list[str] = []
    threads: set[str] = set()
    in_dump = False
    for line in text.splitlines():
        header = _DUMP_HEADER.match(line)
        if header:
            thread = header.group(1)
            if thread in threads:
                break
            threads.add(thread)
            in_dump = True
            out.append(line)
        elif in_dump and (_DUMP_BODY.match(line) or not line.strip()):
            out.append(line)
        elif in_dump:
            break
    dump = "\n".join(out).strip()
    return dump or None


class _Task:
    def __init__(self, job: str, index: int, server_only: bool, log_dir: Path) -> None:
        self.job = job
        self.index = index
        self.server_only = server_only
        self.log_path = log_dir / f"{job}-{index}.log"
        self.loss_path = log_dir / f"losses-{job}-{index}.jsonl"
        self.crash_path = log_dir / f"crashed-{job}-{index}.txt"  # taskboot: an uncaught exception
        self.port: int | None = None
        self.holder: socket.socket | None = None
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.proc: subprocess.Popen | None = None
        self.pids: list[int] = []
        self.first_start: float | None = None
        self.last_start: float | None = None
        self.returncode: int | None = None
        self.done = False  # exited for good (no restart pending)
        self.ended_by_launcher = False
        self.fault_kill: tuple[float, Fault] | None = None  # (kill time, fault) awaiting exit
        self.restart_at: float | None = None
        self.restart_fault: Fault | None = None
        self.restarts = 0
        self.peak_rss = 0
        self.ready_seconds: float | None = None
        self.dump_offset: int | None = None
        self.stack_dump: str | None = None
        self.loss_offset = 0
        self.loss_tail = b""
        self.max_step: int | None = None
        self.log_offset = 0  # how far the launcher's log watch has read
        self.waiting_since: float | None = None  # first "CreateSession still waiting"
        self.waiting_for: str | None = None

    @property
    def name(self) -> str:
        return f"{self.job}:{self.index}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def has_exited(self) -> bool:
        """Whether the current process has exited, without reaping it: while it
        is an unreaped zombie its pid (= process group id) cannot be reused, so
        the group can still be killed safely."""
        assert self.proc is not None
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def reap(self) -> int:
        """Kill whatever is left in the task's process group, then reap the task."""
        assert self.proc is not None
        proc = self.proc
        _killpg(proc.pid, signal.SIGKILL)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.peak_rss = max(self.peak_rss, usage.ru_maxrss * 1024)
        except ChildProcessError:
            if proc.returncode is None:
                proc.returncode = proc.wait()
        self.returncode = proc.returncode
        return proc.returncode

    def poll_rss(self, children: dict[int, list[int]]) -> None:
        if not self.running:
            return
        assert self.proc is not None
        pids = [self.proc.pid, *_descendants(self.proc.pid, children)]
        self.peak_rss = max(self.peak_rss, sum(_read_hwm_bytes(p) for p in pids))

    def read_new_steps(self) -> None:
        try:
            with open(self.loss_path, "rb") as f:
                f.seek(self.loss_offset)
                chunk = f.read()
        except OSError:
            return
        self.loss_offset += len(chunk)
        data = self.loss_tail + chunk
        *lines, self.loss_tail = data.split(b"\n")
        for raw in lines:
            try:
                step = int(json.loads(raw)["step"])
            except (ValueError, KeyError, TypeError):
                continue
            if self.max_step is None or step > self.max_step:
                self.max_step = step


class _ClusterRun:
    def __init__(
        self,
        program: str | os.PathLike,
        jobs: Mapping[str, int],
        args: Sequence[str],
        role_style: str,
        server_only: Sequence[str],
        timeout: float,
        log_dir: str | os.PathLike | None,
        env: Mapping[str, str | None] | None,
        faults: Sequence[Fault],
        flag_names: Mapping[str, str | None] | None,
        cwd: str | os.PathLike | None,
        task_args: Callable[[str, int], Sequence[str]] | None,
        stop_when: Callable[[], bool] | None = None,
        task_env: Callable[[str, int], Mapping[str, str]] | None = None,
    ) -> None:
        if role_style not in ROLE_STYLES:
            raise ValueError(f"role_style must be one of {ROLE_STYLES}, not {role_style!r}")
        if not jobs:
            raise ValueError("jobs is empty")
        for job, count in jobs.items():
            if not isinstance(count, int) or count < 1:
                raise ValueError(f"job {job!r} needs a positive task count, got {count!r}")
        self.program = str(Path(program).resolve())
        if not Path(self.program).is_file():
            raise FileNotFoundError(self.program)
        self.role_style = role_style
        self.timeout = float(timeout)
        self.cwd = cwd
        # Absolute: tasks may run in another cwd and get paths inside it.
        self.log_dir = (
            Path(os.path.abspath(log_dir))
            if log_dir is not None
            else Path(tempfile.mkdtemp(prefix="tfmigrate-cluster-"))
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.flag_names = {**DEFAULT_FLAG_NAMES, **(flag_names or {})}
        self.faults = list(faults)
        self.fired: set[int] = set()  # indexes into self.faults
        self.events: list[FaultEvent] = []
        self.tasks = [
            _Task(job, i, job in server_only or f"{job}:{i}" in server_only, self.log_dir)
            for job, count in jobs.items()
            for i in range(count)
        ]
        if all(t.server_only for t in self.tasks):
            raise ValueError("every task is server-only: nothing would ever finish")
        by_name = {t.name: t for t in self.tasks}
        for f in self.faults:
            if f.task_name not in by_name:
                raise ValueError(f"fault targets unknown task {f.task_name}")
        self.cluster: dict[str, list[str]] = {}
        self.ok = False
        self.reason = ""
        self.timed_out = False
        self.finished = False
        self.start = 0.0
        self.deadline = 0.0
        self._base_args = list(args)
        self._task_args = task_args
        self._task_env = task_env
        self._last_log_watch = 0.0
        self._env = env
        self.guard = _SignalGuard()
        self._last_rss_poll = 0.0
        self._stop_when = stop_when
        self._last_stop_poll = 0.0
        self.stopped_early = False

    # ----------------------------------------------------------------- setup

    def _allocate_ports(self) -> None:
        if self.role_style == "none":
            return
        for t in self.tasks:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            t.holder, t.port = s, s.getsockname()[1]
        for t in self.tasks:
            self.cluster.setdefault(t.job, []).append(f"{LOOPBACK}:{t.port}")

    def _role_argv(self, t: _Task) -> list[str]:
        if self.role_style != "flags":
            return []
        argv = []
        if self.flag_names.get("job"):
            argv.append(f"{self.flag_names['job']}={t.job}")
        if self.flag_names.get("index"):
            argv.append(f"{self.flag_names['index']}={t.index}")
        hosts_flag = self.flag_names.get("hosts")
        if hosts_flag:
            for job, hosts in self.cluster.items():
                argv.append(f"{hosts_flag.format(job=job)}={','.join(hosts)}")
        return argv

    def _prepare(self) -> None:
        base = dict(os.environ)
        for key in _ENV_CLEARED:
            base.pop(key, None)
        for key, value in (self._env or {}).items():
            if value is None:
                base.pop(key, None)
            else:
                base[key] = str(value)
        _with_package_on_path(base)
        for t in self.tasks:
            extra = list(self._task_args(t.job, t.index)) if self._task_args else []
            t.argv = [*self._role_argv(t), *self._base_args, *extra]
            t.env = dict(base)
            t.env.update(
                {
                    losslog.ENV_VAR: str(t.loss_path),
                    "TFMIGRATE_TASK": t.name,
                    "PYTHONUNBUFFERED": "1",
                    LAUNCHER_PID_ENV: str(os.getpid()),
                    CRASH_FILE_ENV: str(t.crash_path),
                }
            )
            if self.cluster:
                t.env[CLUSTER_ENV] = json.dumps(self.cluster)
            if self._task_env:
                t.env.update({k: str(v) for k, v in self._task_env(t.job, t.index).items()})
            if self.role_style == "tf_config":
                t.env["TF_CONFIG"] = json.dumps(
                    {"cluster": self.cluster, "task": {"type": t.job, "index": t.index}}
                )
            # A reused log_dir must not mix in an earlier run's records.
            t.loss_path.unlink(missing_ok=True)
            t.log_path.write_bytes(b"")

    # ----------------------------------------------------------------- processes

    def _launch(self, t: _Task, marker: str | None = None) -> None:
        load_prctl()  # resolve prctl here, not in the forked child (dlopen takes locks)
        self.guard.critical = True  # a signal now would orphan the child being forked
        try:
            if t.holder is not None:
                t.holder.close()
                t.holder = None
            t.crash_path.unlink(missing_ok=True)
            with open(t.log_path, "ab") as log:
                if marker:
                    log.write(f"\n===== tfmigrate launcher: {marker} =====\n".encode())
                    log.flush()
                t.proc = subprocess.Popen(
                    [t.env.get(TASK_PYTHON_ENV) or sys.executable, "-m", "migrate.runtime.taskboot", self.program, *t.argv],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=t.env,
                    cwd=self.cwd,
                    start_new_session=True,
                    # Arms PDEATHSIG before exec; safe with threads because it
                    # only calls the already-resolved prctl and os functions.
                    preexec_fn=functools.partial(_child_preexec, os.getpid()),  # noqa: PLW1509
                )
        finally:
            self.guard.critical = False
        now = time.monotonic()
        t.pids.append(t.proc.pid)
        t.returncode = None
        t.last_start = now
        if t.first_start is None:
            t.first_start = now
        self.guard.check()

    def _reap(self, t: _Task) -> int:
        # Not interruptible: a pid reaped but not recorded could be signalled later.
        was_critical, self.guard.critical = self.guard.critical, True
        try:
            return t.reap()
        finally:
            self.guard.critical = was_critical

    def _terminate(self, tasks: Sequence[_Task]) -> None:
        """SIGTERM each group, a grace period, then SIGKILL and reap. Signals to
        the launcher are held until this is done: an interrupted teardown
        could leave a reaped pid whose group id it would later signal."""
        was_critical, self.guard.critical = self.guard.critical, True
        try:
            self._terminate_now(tasks)
        finally:
            self.guard.critical = was_critical
        self.guard.check()

    def _terminate_now(self, tasks: Sequence[_Task]) -> None:
        running = [t for t in tasks if t.running]
        for t in running:
            _killpg(t.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE_SECONDS
        while time.monotonic() < deadline and not all(t.has_exited() for t in running):
            time.sleep(POLL_SECONDS)
        for t in running:
            t.reap()
            t.ended_by_launcher = True
            t.done = True
        for t in tasks:
            if t.restart_at is not None:  # a relaunch that will no longer happen
                t.restart_at = None
                t.done = True

    def _dump_stacks(self, wait: float) -> None:
        running = [t for t in self.tasks if t.running]
        for t in running:
            try:
                t.dump_offset = t.log_path.stat().st_size
            except OSError:
                t.dump_offset = 0
            try:
                os.kill(t.proc.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        if running:
            time.sleep(wait)

    def _collect_stack_dumps(self) -> None:
        for t in self.tasks:
            if t.dump_offset is None:
                continue
            try:
                with open(t.log_path, "rb") as f:
                    f.seek(t.dump_offset)
                    text = f.read().decode("utf-8", errors="replace")
            except OSError:
                continue
            t.stack_dump = extract_stack_dump(text)

    # ----------------------------------------------------------------- outcomes

    def _fail(self, reason: str, timed_out: bool = False) -> None:
        self.ok = False
        self.timed_out = timed_out
        self.reason = reason
        self.finished = True
        self._dump_stacks(TIMEOUT_DUMP_WAIT_SECONDS if timed_out else FAILURE_DUMP_WAIT_SECONDS)
        self._terminate(self.tasks)

    def _fail_log(self, t: _Task, what: str) -> None:
        last = _last_lines(t.log_path)
        self._fail(f"{t.name} {what}" + (f"; last log lines: {last}" if last else ""))

    def _server_elsewhere(self, t: _Task) -> str | None:
        """``host:port`` where the task's log says its gRPC server started, if
        that is not the port the launcher gave it."""
        try:
            text = t.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        for host, port in _SERVER_STARTED.findall(text):
            if t.port is not None and int(port) != t.port:
                return f"{host}:{port}"
        return None

    def _watch_logs(self) -> None:
        """Fail at once when a task waits for a task the launcher does not
        run, or for CLUSTER_FORM_SECONDS for one it runs (a cluster that
        does not form), instead of at the overall timeout."""
        now = time.monotonic()
        if now - self._last_log_watch < LOG_WATCH_SECONDS or self.role_style == "none":
            return
        self._last_log_watch = now
        known = {t.name for t in self.tasks}
        for t in self.tasks:
            if not t.running:
                continue
            try:
                with open(t.log_path, "rb") as f:
                    f.seek(t.log_offset)
                    chunk = f.read()
            except OSError:
                continue
            # keep a partial last line for the next read
            cut = chunk.rfind(b"\n") + 1
            t.log_offset += cut
            for job, index in _SESSION_WAITING.findall(chunk[:cut].decode("utf-8", errors="replace")):
                awaited = f"{job}:{index}"
                if awaited not in known:
                    self._fail_log(t, f"waits for /job:{job}/task:{index}, which is not a task of the "
                                   f"launcher's cluster ({', '.join(sorted(known))}): the cluster did not form")
                    return
                if t.waiting_since is None:
                    t.waiting_since, t.waiting_for = now, awaited
                elif now - t.waiting_since > CLUSTER_FORM_SECONDS:
                    self._fail_log(t, f"waited {now - t.waiting_since:.0f} s for /job:{job}/task:{index}"
                                   " to answer: the cluster did not form")
                    return

    def _fail_exit(self, t: _Task, rc: int, when: str = "") -> None:
        how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
        last = _last_lines(t.log_path)
        self._fail(f"{t.name} {how}{when}" + (f"; last log lines: {last}" if last else ""))

    def _timeout(self) -> None:
        running = [t for t in self.tasks if t.running]
        names = ", ".join(t.name + (" (server)" if t.server_only else "") for t in running)
        self._fail(
            f"timed out after {self.timeout:g}s; still running: {names or 'none'}", timed_out=True
        )

    # ----------------------------------------------------------------- phases

    def _start_servers(self) -> None:
        servers = [t for t in self.tasks if t.server_only]
        for t in servers:
            self._launch(t)
        waiting = [t for t in servers if t.port is not None]
        while waiting and not self.finished:
            for t in list(waiting):
                if t.has_exited():
                    rc = self._reap(t)
                    t.done = True
                    self._fail_exit(t, rc, " before its port accepted connections")
                    return
                try:
                    with socket.create_connection((LOOPBACK, t.port), timeout=0.5):
                        pass
                except OSError:
                    elsewhere = self._server_elsewhere(t)
                    if elsewhere:
                        self._fail_log(t, f"started its gRPC server on {elsewhere}, not on the launcher's "
                                       f"{LOOPBACK}:{t.port}: the program builds a cluster of its own that "
                                       "the launcher does not map")
                        return
                    continue
                t.ready_seconds = time.monotonic() - t.last_start
                waiting.remove(t)
            if waiting:
                if time.monotonic() > self.deadline:
                    self._timeout()
                    return
                slow = [t for t in waiting if time.monotonic() - t.last_start > min(SERVER_START_SECONDS, self.timeout)]
                if slow:
                    self._fail_log(slow[0], f"is running but did not open its port {LOOPBACK}:{slow[0].port} "
                                   f"within {min(SERVER_START_SECONDS, self.timeout):g} s: the cluster did not form")
                    return
                self._sleep(POLL_SECONDS)
                self._poll_rss_if_due()

    def _start_clients(self) -> None:
        for t in self.tasks:
            if not t.server_only:
                self._launch(t)

    def _clients_done(self) -> bool:
        return all(t.done for t in self.tasks if not t.server_only)

    def _handle_exit(self, t: _Task) -> None:
        rc = self._reap(t)
        now = time.monotonic()
        if t.fault_kill is not None:
            _, fault = t.fault_kill
            t.fault_kill = None
            if fault.restart:
                t.restart_at = now + fault.restart_delay
                t.restart_fault = fault
            else:
                t.done = True
            return
        t.done = True
        if t.server_only:
            # A server that ends itself cleanly (e.g. after draining a done-queue)
            # is fine; clients that needed it will fail on their own.
            if rc != 0 and not self._clients_done():
                self._fail_exit(t, rc, " (server-only) before the other tasks finished")
        elif rc != 0:
            self._fail_exit(t, rc)

    def _check_faults(self) -> None:
        now = time.monotonic()
        for i, fault in enumerate(self.faults):
            if i in self.fired:
                continue
            t = next(x for x in self.tasks if x.job == fault.job and x.index == fault.index)
            if not t.running or t.fault_kill is not None:
                continue
            step_seen = None
            if fault.at_step is not None:
                watched = t
                if fault.step_source is not None:
                    watched = next(x for x in self.tasks if x.name == fault.step_source)
                watched.read_new_steps()
                if watched.max_step is None or watched.max_step < fault.at_step:
                    continue
                step_seen = watched.max_step
            elif now - t.first_start < fault.after_seconds:
                continue
            self.fired.add(i)
            pid = t.proc.pid
            _killpg(pid, fault.sig)
            t.fault_kill = (now, fault)
            self.events.append(FaultEvent(fault, now - self.start, step_seen, pid))

    def _escalate_fault_kills(self) -> None:
        # A fault signal the task survives (caught/ignored) must not hang the run.
        now = time.monotonic()
        for t in self.tasks:
            if (
                t.fault_kill is not None
                and t.running
                and now - t.fault_kill[0] > TERM_GRACE_SECONDS
            ):
                _killpg(t.proc.pid, signal.SIGKILL)

    def _restart_due(self) -> None:
        now = time.monotonic()
        for t in self.tasks:
            if t.restart_at is not None and now >= t.restart_at:
                fault = t.restart_fault
                t.restart_at = None
                t.restart_fault = None
                t.restarts += 1
                offset = _end_loss_log_line(t.loss_path)
                self._launch(
                    t,
                    marker=f"restart {t.restarts} of {t.name} after fault "
                    f"(signal {int(fault.sig)}, pid {t.pids[-1]})",
                )
                for e in reversed(self.events):
                    if e.fault is fault and e.restarted_pid is None:
                        e.restarted_pid = t.proc.pid
                        e.resume_offset = offset
                        break

    def _supervise(self) -> None:
        while not self.finished:
            for t in self.tasks:
                if t.running and t.has_exited():
                    self._handle_exit(t)
                    if self.finished:
                        return
            if self._clients_done():
                self.ok = True
                self.finished = True
                self._terminate([t for t in self.tasks if t.server_only])
                return
            self._watch_crashes()
            if self.finished:
                return
            if self._stop_requested():
                # the caller has what it needs (e.g. check's first N steps of a
                # script with no step-count option): end every task now
                self.ok = True
                self.finished = True
                self.stopped_early = True
                self.reason = "stopped early by the caller"
                self._terminate(self.tasks)
                return
            if time.monotonic() > self.deadline:
                self._timeout()
                return
            self._watch_logs()
            if self.finished:
                return
            self._restart_due()
            self._check_faults()
            self._escalate_fault_kills()
            self._poll_rss_if_due()
            self._sleep(POLL_SECONDS)

    def _watch_crashes(self) -> None:
        """Fail at once when a task raised an uncaught exception (taskboot's
        crash file), judged as its exit with code 1 will be, without waiting
        for that exit: TensorFlow's teardown takes seconds, in which the
        caller's stop_when could end the run as complete."""
        for t in self.tasks:
            if not t.running or t.fault_kill is not None or not t.crash_path.exists():
                continue
            if t.server_only and self._clients_done():
                continue
            # a task that exits soon is judged by its exit code, as usual
            deadline = time.monotonic() + CRASH_EXIT_GRACE_SECONDS
            while time.monotonic() < deadline and not t.has_exited():
                time.sleep(POLL_SECONDS)
            if t.has_exited():
                self._handle_exit(t)
                if self.finished:
                    return
                continue
            try:
                what = t.crash_path.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                what = ""
            self._fail_log(t, f"raised an uncaught exception ({what or 'see its log'}) and is exiting with code 1")
            return

    def _stop_requested(self) -> bool:
        now = time.monotonic()
        if self._stop_when is None or now - self._last_stop_poll < STOP_POLL_SECONDS:
            return False
        self._last_stop_poll = now
        return bool(self._stop_when())

    def _poll_rss_if_due(self) -> None:
        now = time.monotonic()
        if now - self._last_rss_poll >= RSS_POLL_SECONDS:
            self._last_rss_poll = now
            running = [t for t in self.tasks if t.running]
            if running:
                children = _children_map()
                for t in running:
                    t.poll_rss(children)

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)
        self.guard.check()

    # ----------------------------------------------------------------- driver

    def execute(self) -> ClusterResult:
        self.guard.install()
        caught: _LauncherSignal | None = None
        try:
            try:
                self.start = time.monotonic()
                self.deadline = self.start + self.timeout
                self._allocate_ports()
                self._prepare()
                self._start_servers()
                if not self.finished:
                    self._start_clients()
                    self._supervise()
            except _LauncherSignal as sig:
                caught = sig
            finally:
                self.guard.tearing_down = True
                self._terminate(self.tasks)
                for t in self.tasks:
                    if t.holder is not None:
                        t.holder.close()
                        t.holder = None
        finally:
            self.guard.restore()
        self.guard.redeliver(caught.signum if caught else self.guard.pending)
        self._collect_stack_dumps()
        return self._result(time.monotonic() - self.start)

    def _result(self, wall_time: float) -> ClusterResult:
        tasks = [
            TaskResult(
                job=t.job,
                index=t.index,
                pid=t.pids[-1] if t.pids else None,
                returncode=t.returncode,
                log_path=t.log_path,
                peak_rss_bytes=t.peak_rss,
                ended_by_launcher=t.ended_by_launcher,
                restarts=t.restarts,
                stack_dump=t.stack_dump,
                ready_seconds=t.ready_seconds,
                loss_path=t.loss_path,
                pids=list(t.pids),
            )
            for t in self.tasks
        ]
        return ClusterResult(
            ok=self.ok,
            reason=self.reason,
            timed_out=self.timed_out,
            tasks=tasks,
            losses=losslog.read(t.loss_path for t in self.tasks),
            cluster=self.cluster,
            log_dir=self.log_dir,
            wall_time=wall_time,
            faults=list(self.events),
            stopped_early=self.stopped_early,
        )


# --------------------------------------------------------------------------- entry point


def run_cluster(
    program: str | os.PathLike,
    jobs: Mapping[str, int],
    args: Sequence[str] = (),
    role_style: str = "flags",
    server_only: Sequence[str] = ("ps",),
    timeout: float = 120.0,
    log_dir: str | os.PathLike | None = None,
    env: Mapping[str, str | None] | None = None,
    faults: Sequence[Fault] = (),
    flag_names: Mapping[str, str | None] | None = None,
    cwd: str | os.PathLike | None = None,
    task_args: Callable[[str, int], Sequence[str]] | None = None,
    isolate_network: bool = False,
    stop_when: Callable[[], bool] | None = None,
    task_env: Callable[[str, int], Mapping[str, str]] | None = None,
) -> ClusterResult:
    """Run ``program`` as every task of a loopback cluster and wait for it.

    ``jobs`` maps job name -> task count (``{"ps": 1, "worker": 2}``). Roles
    are passed per ``role_style``: ``"flags"`` (``--job_name``,
    ``--task_index``, ``--<job>_hosts`` for every job; spellings via
    ``flag_names``, a ``None`` spelling drops that flag), ``"tf_config"`` (env
    ``TF_CONFIG``) or ``"none"`` (no role info and no ports). ``server_only``
    jobs (or single tasks, ``"worker:1"``) never finish by themselves; they are started first, awaited until
    their ports accept TCP, and ended by the launcher once every other task
    exited 0. ``env`` adds environment (a ``None`` value removes a variable).
    ``faults`` kill (and optionally restart) chosen tasks. Logs and loss logs
    go to ``log_dir`` (a kept temp dir if None). Never raises for a failing
    cluster: see :attr:`ClusterResult.ok` and ``reason``. SIGTERM/SIGINT
    received meanwhile tear the cluster down and are then re-raised.

    ``isolate_network=True`` runs the whole cluster inside one private network
    namespace (``unshare -rn``, loopback only) where that works: TF gRPC
    servers listen on the wildcard address, and parallel runs cannot clash
    over ports. Elsewhere it falls back to a normal run; the result's
    ``network_isolated`` says which happened.

    ``stop_when``, asked every STOP_POLL_SECONDS while the tasks run, ends
    the run successfully once it returns true (every task is torn down;
    ``stopped_early`` says so). Not with ``isolate_network``.
    """
    if stop_when is not None and isolate_network:
        raise ValueError("stop_when cannot cross into an isolated network namespace")
    run = _ClusterRun(
        program,
        jobs,
        args,
        role_style,
        server_only,
        timeout,
        log_dir,
        env,
        faults,
        flag_names,
        cwd,
        task_args,
        stop_when,
        task_env,
    )
    if isolate_network and network_isolation_available():
        spec = {
            "program": run.program,
            "jobs": dict(jobs),
            "args": [str(a) for a in args],
            "role_style": role_style,
            "server_only": list(server_only),
            "timeout": timeout,
            "log_dir": str(run.log_dir),
            "env": {k: None if v is None else str(v) for k, v in (env or {}).items()},
            "faults": [dataclasses.asdict(f) for f in faults],
            "flag_names": dict(flag_names) if flag_names else None,
            "cwd": str(cwd) if cwd is not None else None,
            "task_argv": {t.name: [str(a) for a in task_args(t.job, t.index)] for t in run.tasks}
            if task_args
            else None,
        }
        return _run_isolated(spec, run.log_dir, timeout)
    return run.execute()


# --------------------------------------------------------------------------- network isolation


def _bring_loopback_up() -> None:
    """``ip link set lo up`` without needing iproute2."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, siocgifflags, request)[:18])[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


@functools.cache
def network_isolation_available() -> bool:
    """Whether ``unshare -rn`` works here (unprivileged user namespaces) and
    loopback can be brought up inside it."""
    if not shutil.which("unshare"):
        return False
    probe = "from migrate.runtime.cluster import _bring_loopback_up; _bring_loopback_up()"
    try:
        done = subprocess.run(
            ["unshare", "-rn", sys.executable, "-c", probe],
            env=_with_package_on_path(dict(os.environ)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _end_loss_log_line(path: Path) -> int:
    """Terminate a line a killed task left torn, so the restarted task's first
    record does not fuse with it into one unreadable line; return the size."""
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    f.write(b"\n")
                    size += 1
            return size
    except FileNotFoundError:
        return 0


def _with_package_on_path(env: dict[str, str]) -> dict[str, str]:
    pythonpath = env.get("PYTHONPATH", "")
    if _PACKAGE_PARENT not in pythonpath.split(os.pathsep):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, pythonpath) if p)
    return env


def _result_to_json(result: ClusterResult) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(result), default=str))


def _result_from_json(data: dict) -> ClusterResult:
    tasks = []
    for t in data["tasks"]:
        t = dict(t)
        t["log_path"] = Path(t["log_path"])
        t["loss_path"] = Path(t["loss_path"]) if t["loss_path"] else None
        tasks.append(TaskResult(**t))
    faults = [
        FaultEvent(
            **{**e, "fault": Fault(**{**e["fault"], "sig": signal.Signals(e["fault"]["sig"])})}
        )
        for e in data["faults"]
    ]
    return ClusterResult(
        **{
            **data,
            "tasks": tasks,
            "losses": [losslog.LossRecord(**r) for r in data["losses"]],
            "log_dir": Path(data["log_dir"]),
            "faults": faults,
        }
    )


def _run_isolated(spec: dict, log_dir: Path, timeout: float) -> ClusterResult:
    """Run ``python -m migrate.runtime.cluster --isolated-run SPEC`` under ``unshare
    -rn``; that inner launcher runs the cluster and writes its result as JSON."""
    spec_path = log_dir / "isolated-launcher.json"
    result_path = log_dir / "isolated-result.json"
    launcher_log = log_dir / "isolated-launcher.log"
    result_path.unlink(missing_ok=True)
    spec_path.write_text(json.dumps({**spec, "result_path": str(result_path)}), encoding="utf-8")
    env = _with_package_on_path(dict(os.environ))
    env[LAUNCHER_PID_ENV] = str(os.getpid())
    command = ["unshare", "-rn", sys.executable, "-m", "migrate.runtime.cluster", "--isolated-run"]

    guard = _SignalGuard()
    guard.install()
    caught: _LauncherSignal | None = None
    proc: subprocess.Popen | None = None
    overdue = False
    start = time.monotonic()
    try:
        try:
            load_prctl()
            guard.critical = True
            try:
                with open(launcher_log, "wb") as log:
                    proc = subprocess.Popen(
                        [*command, str(spec_path)],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                        preexec_fn=functools.partial(_child_preexec, os.getpid()),  # noqa: PLW1509
                    )
            finally:
                guard.critical = False
            deadline = start + timeout + ISOLATED_MARGIN_SECONDS
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
                guard.check()
            overdue = proc.poll() is None
        except _LauncherSignal as sig:
            caught = sig
        finally:
            guard.tearing_down = True
            if proc is not None and proc.poll() is None:
                # The inner launcher tears its cluster down on SIGTERM; its
                # tasks also die with it (PDEATHSIG) if it must be killed.
                _killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=TERM_GRACE_SECONDS + TIMEOUT_DUMP_WAIT_SECONDS + 10)
                except subprocess.TimeoutExpired:
                    _killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    finally:
        guard.restore()
    guard.redeliver(caught.signum if caught else guard.pending)
    if result_path.exists():
        return _result_from_json(json.loads(result_path.read_text(encoding="utf-8")))
    code = proc.returncode if proc is not None else None
    last = _last_lines(launcher_log)
    what = "did not finish in time" if overdue else f"failed (exit {code})"
    return ClusterResult(
        ok=False,
        reason=f"isolated launcher {what}" + (f"; last log lines: {last}" if last else ""),
        timed_out=overdue,
        tasks=[],
        losses=[],
        cluster={},
        log_dir=log_dir,
        wall_time=time.monotonic() - start,
        faults=[],
        network_isolated=True,
    )


def _isolated_main(spec_path: str) -> None:
    """The launcher inside the namespace (see :func:`_run_isolated`)."""
    set_parent_death_signal(signal.SIGKILL)
    expected_parent = os.environ.get(LAUNCHER_PID_ENV, "")
    if expected_parent.isdigit() and os.getppid() != int(expected_parent):
        raise SystemExit(70)  # the outer launcher already died
    _bring_loopback_up()
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    result_path = Path(spec.pop("result_path"))
    task_argv = spec.pop("task_argv")
    spec["faults"] = [Fault(**f) for f in spec["faults"]]
    result = run_cluster(
        **spec, task_args=(lambda job, index: task_argv[f"{job}:{index}"]) if task_argv else None
    )
    result.network_isolated = True
    partial = result_path.with_suffix(".partial")
    partial.write_text(json.dumps(_result_to_json(result)), encoding="utf-8")
    os.replace(partial, result_path)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--isolated-run":
        _isolated_main(sys.argv[2])
    else:
        sys.stderr.write("usage: python -m migrate.runtime.cluster --isolated-run SPEC.json\n")
        raise SystemExit(2)
