"""ps tasks serve forever; task --only (default every non-ps task) logs two
steps then fails with --exit_code (an uncaught ValueError if it is 1); the
others run their steps normally. With --wait_for=JOB:INDEX the crash waits
until that task logged a step, i.e. is surely running. With --linger=SECONDS
the crashing task takes that long to exit after its traceback (TensorFlow's
teardown of a task's threads and server takes seconds)."""

import atexit
import os
import sys
import time

from _common import log_loss, parse_role, run_steps, serve_forever, this_task

args, rest = parse_role()
wait_for = next((a.split("=", 1)[1] for a in rest if a.startswith("--wait_for=")), None)
linger = float(next((a.split("=", 1)[1] for a in rest if a.startswith("--linger=")), 0))
if args.job_name == "ps":
    serve_forever(args)
if args.only and args.only != this_task():
    run_steps(args)
    sys.exit(0)
if wait_for:
    job, index = wait_for.split(":")
    other = os.path.join(
        os.path.dirname(os.environ["TFMIGRATE_LOSS_LOG"]), f"losses-{job}-{index}.jsonl"
    )
    deadline = time.monotonic() + 60
    while not (os.path.exists(other) and os.path.getsize(other)) and time.monotonic() < deadline:
        time.sleep(0.05)
log_loss(0, 1.0)
log_loss(1, 0.5)
print("about to crash", flush=True)
if linger:
    atexit.register(time.sleep, linger)
if args.exit_code == 1:
    raise ValueError("injected crash in crash.py")
sys.exit(args.exit_code)
