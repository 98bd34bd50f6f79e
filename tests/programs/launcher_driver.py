"""Runs a hanging cluster (hang.py: ps + 2 workers) under run_cluster, for the
tests that SIGKILL / SIGTERM / SIGINT the launcher process itself.
Usage: python launcher_driver.py LOG_DIR [--isolate]"""

import signal
import sys
from pathlib import Path

from migrate.runtime.cluster import run_cluster

# As a program started in the foreground: a test run started in the background
# of a shell without job control would hand this process SIGINT ignored, and
# the launcher (rightly) leaves an ignored SIGINT alone.
signal.signal(signal.SIGINT, signal.default_int_handler)

result = run_cluster(
    Path(__file__).with_name("hang.py"),
    {"ps": 1, "worker": 2},
    timeout=300,
    log_dir=sys.argv[1],
    isolate_network="--isolate" in sys.argv[2:],
)
print(result.summary(), flush=True)
