"""Bootstrap for one cluster task: ``python -m migrate.runtime.taskboot PROGRAM ARGS...``.

Behaves like ``python PROGRAM ARGS...`` (same ``sys.argv``, ``sys.path[0]``,
``__main__``, exit codes, tracebacks) and adds what the launcher
(:mod:`migrate.runtime.cluster`) relies on:

- ``PR_SET_PDEATHSIG=SIGKILL``: the task dies with the launcher, even when the
  launcher is SIGKILLed and cannot clean up;
- ``faulthandler`` on SIGUSR1 (dump every thread's stack and keep running: the
  launcher asks for this before tearing down a hung or failed cluster), on
  SIGTERM (dump, then die as usual) and on fatal signals, all into stderr,
  which the launcher sends to the task's log;
- every module named in ``TFMIGRATE_BOOT_HOOKS`` (comma-separated) is imported
  before the program runs: the extension point for ``tfmigrate check``;
- an uncaught exception, once its traceback is printed, is also written as one
  line to the file ``TFMIGRATE_CRASH_FILE`` names: the launcher learns at once
  that the task is exiting 1 (TensorFlow's teardown can take seconds), so a
  run it would otherwise stop as complete in that time is failed instead.

This module imports nothing heavy; it must never import TensorFlow itself.
"""

from __future__ import annotations

import ctypes
import faulthandler
import importlib
import os
import runpy
import signal
import sys

HOOKS_ENV = "TFMIGRATE_BOOT_HOOKS"
LAUNCHER_PID_ENV = "TFMIGRATE_LAUNCHER_PID"
CRASH_FILE_ENV = "TFMIGRATE_CRASH_FILE"
_PR_SET_PDEATHSIG = 1


_prctl = None


def load_prctl():
    """libc's ``prctl``, or None off Linux. Cached: the launcher resolves it
    before forking so that the child's pre-exec hook only calls it."""
    global _prctl
    if _prctl is None:
        try:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False
    return _prctl or None


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent dies (for a
    multi-threaded parent: when the thread that forked it ends). Returns False
    where prctl is unavailable."""
    prctl = load_prctl()
    return prctl is not None and prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def _exit_if_orphaned() -> None:
    # The launcher may have died before PDEATHSIG was armed; the signal would
    # then never come, so check the parent explicitly.
    # Popped: the program's own subprocesses must not inherit the check.
    expected = os.environ.pop(LAUNCHER_PID_ENV, None)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(70)


def _register_stack_dumps() -> None:
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGTERM, file=sys.stderr, all_threads=True, chain=True)


def _import_hooks() -> None:
    for name in os.environ.get(HOOKS_ENV, "").split(","):
        name = name.strip()
        if name:
            importlib.import_module(name)


def _note_crash(path: str | None, exc: BaseException) -> None:
    if not path:
        return
    try:
        sys.stderr.flush()
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__)
    except (OSError, IndexError):
        pass


def _program_traceback(tb):
    """Drop the bootstrap's own frames (taskboot, runpy) so a crash reads as
    it would under ``python PROGRAM``."""
    bootstrap_files = {__file__, runpy.__file__, "<frozen runpy>"}
    first = tb
    while tb is not None:
        if tb.tb_frame.f_code.co_filename not in bootstrap_files:
            return tb
        tb = tb.tb_next
    return first


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        sys.stderr.write("usage: python -m migrate.runtime.taskboot PROGRAM [ARGS...]\n")
        raise SystemExit(2)
    set_parent_death_signal(signal.SIGKILL)
    _exit_if_orphaned()
    # Popped: the program's own subprocesses are not this task.
    crash_file = os.environ.pop(CRASH_FILE_ENV, None)
    _register_stack_dumps()
    _import_hooks()

    program, args = argv[0], argv[1:]
    sys.argv = [program, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(program))
    try:
        runpy.run_path(program, run_name="__main__")
    # Only Exception: SystemExit and KeyboardInterrupt keep their own semantics.
    except Exception as exc:  # noqa: BLE001
        tb = _program_traceback(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        _note_crash(crash_file, exc)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
