"""Runs a hanging cluster (hang.py: ps + 2 workers) under run_cluster, for the
tests that SIGKILL / SIGTERM / SIGINT the launcher process itself.
Usage: python launcher_driver.py LOG_DIR [--isolate]"""

import sys
from pathlib import Path

from migrate.runtime.cluster import run_cluster

result = run_cluster(
    Path(__file__).with_name("hang.py"),
    {"ps": 1, "worker": 2},
    timeout=300,
    log_dir=sys.argv[1],
    isolate_network="--isolate" in sys.argv[2:],
)
print(result.summary(), flush=True)
