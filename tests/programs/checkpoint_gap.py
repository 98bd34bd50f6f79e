"""A worker that checkpoints a step before logging its loss, like a
MonitoredTrainingSession whose saver hook runs inside the step: killed between
the two, it has trained a step nobody logged, and its restart resumes after it.
The first incarnation stops after step --steps // 2 + 1 right there, with half a loss
record written (a kill mid-write), and waits for the launcher's fault."""

import json
import os
import time
from pathlib import Path

from _common import log_loss, parse_role

args, _ = parse_role()
checkpoint = Path(os.environ["TFMIGRATE_LOSS_LOG"]).with_suffix(".ckpt")
start = int(checkpoint.read_text()) if checkpoint.exists() else 0
print(f"resuming at step {start}", flush=True)


def save_checkpoint(next_step: int) -> None:
    # atomic, as a real saver's: a kill never leaves an empty checkpoint
    partial = checkpoint.with_suffix(".ckpt.tmp")
    partial.write_text(str(next_step))
    os.replace(partial, checkpoint)


for step in range(start, args.steps):
    if start == 0 and step == args.steps // 2:
        # the launcher's fault watches for this step; the next one gets trained
        # and checkpointed, then the kill lands halfway through its record. The
        # step's record and the torn one go out in one write, after the
        # checkpoint, so the fault cannot land between them.
        save_checkpoint(step + 2)
        record = json.dumps({"step": step, "task": os.environ["TFMIGRATE_TASK"], "loss": 1.0 / (step + 1)})
        with open(os.environ["TFMIGRATE_LOSS_LOG"], "a", encoding="utf-8") as f:
            f.write(record + "\n" + json.dumps({"step": step + 1, "task": "torn"})[:12])
        while True:
            time.sleep(1)
    save_checkpoint(step + 1)
    log_loss(step, 1.0 / (step + 1))
    time.sleep(args.step_delay)
