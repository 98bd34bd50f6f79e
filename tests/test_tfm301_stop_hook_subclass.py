"""TFM301 and a program's own subclass of tf.train.StopAtStepHook (a hook that
logs where the run stops, or stops on its own test of the global step).

The subclass becomes a plain class the loop calls at the points the session
called it: it is made with the step counter, keeps StopAtStepHook's limits
(`_num_steps`, `_last_step`), StopAtStepHook's own methods it does not
override are written out, a read of the counter through the session
(`session.run(self._global_step_tensor)`) reads it eagerly, and its
request_stop() ends the loop. Where it relies on more of StopAtStepHook
(its own begin/before_run/__init__, super()), or is made where the step
counter cannot be given to it, the training is declined at that place.

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from migrate.codemod.engine import dedent, migrate_source

PROGRAM = '''
import tensorflow.compat.v1 as tf


class LoudStop(tf.train.StopAtStepHook):
OVERRIDES

def train(cluster, server, is_chief, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 2])
        targets = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([2, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) - targets))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=1, total_num_replicas=1)
        train_op = opt.minimize(loss, global_step=step)
        hooks = [LoudStop(LIMIT)]
        hooks.append(opt.make_session_run_hook(is_chief))
    with tf.train.MonitoredTrainingSession(master=server, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            x, y = next(batches)
            _, at = sess.run([train_op, step], feed_dict={inputs: x, targets: y})
            print("ran", at)
'''

# the subclass's own stop test on the fetched global step, and a log of where it starts
OWN_STOP = '''
    def after_create_session(self, session, coord):
        if self._last_step is None:
            now = session.run(self._global_step_tensor)
            self._last_step = now + self._num_steps
        print("will stop at", self._last_step)

    def after_run(self, run_context, run_values):
        if run_values.results >= self._last_step:
            print("stopping at", run_values.results)
            run_context.request_stop()
'''

# only a log at the end: StopAtStepHook's own after_create_session and after_run stop it
LOG_ONLY = '''
    def end(self, session):
        print("stopped")
'''


def program(overrides: str, limit: str = "num_steps=5") -> str:
    return dedent(PROGRAM).replace("OVERRIDES\n", overrides.lstrip("\n") + "\n").replace("LIMIT", limit)


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_own_stop_test_becomes_calls_with_the_step_counter():
    source = program(OWN_STOP, "last_step=7")
    result = migrate_source(source)
    assert not [d for d in result.manual_work if d.code == "TFM301"], [d.message for d in result.manual_work]
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "class LoudStop:" in out and "StopAtStepHook" not in out and "session." not in out.split("def train")[0]
    assert "def __init__(self, global_step, num_steps=None, last_step=None):" in out
    assert "now = int(self._global_step_tensor.numpy())" in out
    assert "def after_run(self, results):" in out and "if results >= self._last_step:" in out
    # made with the step counter where the loop starts; its request_stop() ends the loop
    assert "loud_stop = LoudStop(step, last_step=7)\n    loud_stop.after_create_session()\n" in out
    assert "while not loud_stop.stop_requested:" in out
    assert "loud_stop.after_run(at)" in out  # the global step the run fetched, as StopAtStepHook's before_run did
    assert "hooks" not in out and "make_session_run_hook" not in out
    assert migrate_source(out).output == out


def test_stop_at_step_hooks_own_methods_are_written_out():
    source = program(LOG_ONLY)
    out = migrate_source(source).output
    compile(out, "<migrated>", "exec")
    cls = out[out.index("class LoudStop:"):out.index("def train")]
    assert "self._last_step = int(self._global_step_tensor.numpy()) + self._num_steps" in cls
    assert "if results + 1 >= self._last_step:" in cls and "self.stop_requested = True" in cls
    assert 'print("stopped")' in cls
    assert "loud_stop = LoudStop(step, num_steps=5)" in out and "loud_stop.end()" in out


DECLINED = {
    "begin": ("    def begin(self):\n        self._steps = 0\n", "def begin(self):", "overrides begin()"),
    "super": (("    def after_run(self, run_context, run_values):\n"
               "        super(LoudStop, self).after_run(run_context, run_values)\n"),
              "super(LoudStop, self)", "through super()"),
}


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_a_subclass_relying_on_more_of_stop_at_step_hook_is_declined_where_it_does(case):
    overrides, where, why = DECLINED[case]
    source = program(overrides)
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    reasons = [d for d in result.manual_work if d.code == "TFM301"]
    # the loop it bounded cannot end in TF2 without it: declined there, saying why the hook cannot be carried
    assert len(reasons) == 1, [(d.line, d.message) for d in reasons]
    assert reasons[0].line == line_of(source, "while not sess.should_stop():")
    assert "`LoudStop`" in reasons[0].message and why in reasons[0].message
    assert where in source


def test_a_subclass_made_before_the_session_by_name_is_declined():
    source = program(LOG_ONLY).replace("hooks = [LoudStop(num_steps=5)]",
                                       "stopper = LoudStop(num_steps=5)\n        hooks = [stopper]")
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    reasons = [d.message for d in result.manual_work if d.code == "TFM301"]
    assert any("step counter StopAtStepHook reads is not given to it" in m for m in reasons), reasons


RUN = '''
import itertools, sys
import numpy as np
if sys.argv[1] == "legacy":
    tf.disable_v2_behavior()
rng = np.random.RandomState(0)
batches = iter([(rng.rand(4, 2).astype(np.float32), rng.rand(4, 1).astype(np.float32)) for _ in range(50)])
train(None, "", True, batches)
'''


@pytest.mark.slow  # about two minutes (a TF1 session and a MultiWorkerMirroredStrategy worker in turn)
def test_the_migrated_loop_stops_at_the_step_the_tf1_session_did():
    """Run the TF1 program (one local session) and its migration (one
    MultiWorkerMirroredStrategy worker): both stop when the global step
    reaches the limit, and the hook's end() runs after the loop. (A TF1 run
    fetched the counter after its update, the migrated step returns it from
    before, as for every fetched variable.)"""
    pytest.importorskip("tensorflow")
    source = program(LOG_ONLY, "last_step=6")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = {**os.environ, "TF_CONFIG": json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]},
                                                     "task": {"type": "worker", "index": 0}})}
    printed = {}
    for side, code, env in (("legacy", source, os.environ), ("migrated", migrate_source(source).output, worker)):
        run = subprocess.run([sys.executable, "-c", code + RUN, side], capture_output=True, text=True, env=env,
                             timeout=300, check=False)
        assert run.returncode == 0, run.stderr[-3000:]
        printed[side] = [line for line in run.stdout.splitlines() if line.split()[0] in ("ran", "stopped")]
    assert printed["legacy"][-1] == printed["migrated"][-1] == "stopped"
    legacy_end = int(printed["legacy"][-2].split()[1])  # fetched after the last update
    migrated_end = int(printed["migrated"][-2].split()[1]) + 1  # fetched before it
    assert legacy_end == migrated_end == 6


def test_a_hook_list_built_by_concatenation_is_followed():
    """`hooks = sync_hooks + [stop]`: the StopAtStepHook in it bounds the loop
    (tests/test_tfm301_helper_hooks.py has the lists it still cannot follow,
    named in the reason)."""
    source = program(LOG_ONLY).replace(
        "        hooks = [LoudStop(num_steps=5)]\n        hooks.append(opt.make_session_run_hook(is_chief))\n",
        "        sync_hooks = [opt.make_session_run_hook(is_chief)]\n"
        "        hooks = sync_hooks + [tf.train.StopAtStepHook(num_steps=5)]\n")
    assert "sync_hooks + [" in source
    result = migrate_source(source, select=["TFM301"])
    assert not [d for d in result.manual_work if d.code == "TFM301"], [d.message for d in result.manual_work]
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "last_step = int(" in out and "+ 5\n" in out and ">= last_step" in out
    assert "hooks" not in out and "make_session_run_hook" not in out
