"""Running a launcher script under test as its own process group: whatever it
starts is killed with it, by group, when it ends or times out."""

from __future__ import annotations

import os
import signal
import subprocess


def run_in_own_group(command: list[str], *, cwd, env: dict[str, str], timeout: float) -> tuple[bytes, int | None]:
    """(combined output, exit status) of ``command``; ``b"(timed out)"`` and
    the status of the killed group when it outlives ``timeout``."""
    process = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        output = b"(timed out)"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # nothing it started may survive it
        except ProcessLookupError:
            pass
        process.communicate()
    return output, process.returncode
