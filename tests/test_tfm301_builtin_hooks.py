"""TFM301: TensorFlow's own per-step hooks given to a MonitoredTrainingSession
(NanTensorHook, LoggingTensorHook) become code of the migrated loop after
each train step, from the values the step now returns, beside the program's
own hooks (whose methods the loop calls); what the loop cannot do the same
way is said where it is, and the training migrates without that hook."""

from __future__ import annotations

import textwrap

import pytest
import tfm301_support
from tfm301_support import line_of, manual

# a worker's loop with a step limit, a NaN guard, a logger of tensors and a logger of the program's own
PROGRAM = '''
import time

import tensorflow.compat.v1 as tf


def fit(cluster, server, worker, pairs, report_every):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        points = tf.placeholder(tf.float32, [None, 2])
        wanted = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([2, 1]), name="kernel")
        gap = tf.reduce_mean(tf.square(tf.matmul(points, kernel) - wanted))
        counter = tf.train.get_or_create_global_step()
        fit_op = tf.train.AdagradOptimizer(0.1).minimize(gap, global_step=counter)

    class _Reporter(tf.train.SessionRunHook):
        def begin(self):
            self._seen = -1

        def before_run(self, run_context):
            self._seen += 1
            return tf.train.SessionRunArgs(gap)

        def after_run(self, run_context, run_values):
            if self._seen % report_every == 0:
                print("seen", self._seen, "gap", run_values.results)

    watch = [tf.train.StopAtStepHook(last_step=40), tf.train.NanTensorHook(gap),
             tf.train.LoggingTensorHook({"step": counter, "gap": gap}, every_n_iter=5)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=worker == 0, hooks=watch,
                                           chief_only_hooks=[_Reporter()]) as sess:
        while not sess.should_stop():
            for xs, ys in pairs:
                sess.run(fit_op, feed_dict={points: xs, wanted: ys})
'''


def migrate(source: str):
    return tfm301_support.migrate(source, None)


def test_nan_and_logging_hooks_become_code_after_each_train_step():
    result = migrate(PROGRAM)
    out = result.output
    assert "NanTensorHook" not in out and "LoggingTensorHook" not in out and "SessionRunHook" not in out
    assert not manual(result)
    assert "import math\n" in out
    loop = tfm301_support.tail_from(out, "logged_steps = 0")
    # the hooks' calls in TF1's order: the session's hooks, then the chief's
    assert loop.startswith("logged_steps = 0\nreporter = _Reporter()\nreporter.begin()\n")
    assert textwrap.dedent('''
                reporter.before_run()
                gap_value, counter_value = run_train_step(xs, ys)
                if math.isnan(gap_value):
                    raise RuntimeError("NaN loss during training.")
                if logged_steps % 5 == 0:
                    tf.get_logger().info("gap = %s, step = %s", gap_value, counter_value)
                logged_steps += 1
                reporter.after_run(gap_value)
        ''') in "\n" + textwrap.dedent(loop[loop.index("        reporter.before_run()"):])
    notes = {d.line: d.message for d in result.diagnostics if d.code == "TFM301" and d.fixed}
    assert "raises RuntimeError" in notes[line_of(PROGRAM, "tf.train.NanTensorHook(gap)")]
    assert "logs `gap`, `step`" in notes[line_of(PROGRAM, "tf.train.LoggingTensorHook(")]


def test_a_hook_bound_to_a_name_goes_with_its_binding():
    source = PROGRAM.replace("    watch = [tf.train.StopAtStepHook(last_step=40), tf.train.NanTensorHook(gap),",
                             "    guard = tf.train.NanTensorHook(gap)\n"
                             "    watch = [tf.train.StopAtStepHook(last_step=40), guard,")
    result = migrate(source)
    assert "guard" not in result.output and not manual(result)
    assert 'raise RuntimeError("NaN loss during training.")' in result.output


@pytest.mark.parametrize("change, where, why", [
    (lambda s: s.replace("tf.train.NanTensorHook(gap)", "tf.train.NanTensorHook(gap, fail_on_nan_loss=False)"),
     "fail_on_nan_loss=False", "asked the session to stop after a NaN loss"),
    (lambda s: s.replace("every_n_iter=5)", "every_n_secs=30)"), "every_n_secs=30", "logs by `every_n_secs`"),
    (lambda s: s.replace('{"step": counter, "gap": gap}', '["global_step", "gap"]'), '["global_step", "gap"]',
     "not a dict of tags to graph values"),
    (lambda s: s.replace('                sess.run(fit_op, feed_dict={points: xs, wanted: ys})\n',
                         '                sess.run(fit_op, feed_dict={points: xs, wanted: ys})\n'
                         '                print(sess.run(gap, feed_dict={points: xs, wanted: ys}))\n'),
     "print(sess.run(gap", "the hook saw that run too"),
], ids=["nan_stops_quietly", "logged_by_seconds", "tensors_by_graph_name", "other_runs"])
def test_what_the_loop_cannot_do_the_same_is_said_where_it_is(change, where, why):
    source = change(PROGRAM)
    result = migrate(source)
    declined = [d for d in manual(result) if "cannot become code of the TF2 loop" in d.message]
    assert len(declined) >= 1
    assert declined[0].line == line_of(source, where) and why in declined[0].message
    # said once: not again as a hook the session drops
    assert not any("no automatic TF2 mapping" in d.message for d in manual(result))


def test_no_builtin_hook_no_change_to_the_loop():
    source = PROGRAM.replace(" tf.train.NanTensorHook(gap),\n             tf.train.LoggingTensorHook("
                             '{"step": counter, "gap": gap}, every_n_iter=5)]', "]")
    out = migrate(source).output
    assert "logged_steps" not in out and "import math" not in out and "isnan" not in out
    assert "            reporter_results = run_train_step(xs, ys)\n            reporter.after_run(reporter_results)\n" in out


# one machine when no cluster is given (else ps/worker): its loop logs the gap every 3 steps, stops on a NaN
# gap, and a hook of its own, defined once the graph is, prints every step's gap
JOB = '''
import tensorflow.compat.v1 as tf


def fit(cluster, server, batches):
    if cluster is None:
        points = tf.placeholder(tf.float32, [None, 2])
        wanted = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.ones([2, 1]), name="kernel")
        gap = tf.reduce_mean(tf.square(tf.matmul(points, kernel) - wanted))
        counter = tf.train.get_or_create_global_step()
        fit_op = tf.train.GradientDescentOptimizer(0.05).minimize(gap, global_step=counter)

        class _Printer(tf.train.SessionRunHook):
            def begin(self):
                self._runs = 0

            def before_run(self, run_context):
                self._runs += 1
                return tf.train.SessionRunArgs(gap)

            def after_run(self, run_context, run_values):
                print("run", self._runs, "gap", float(run_values.results))

        hooks = [tf.train.StopAtStepHook(last_step=10), tf.train.NanTensorHook(gap), _Printer(),
                 tf.train.LoggingTensorHook({"gap": gap}, every_n_iter=3)]
        with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
            taken = 0
            while not sess.should_stop():
                xs, ys = batches[taken % len(batches)]
                sess.run(fit_op, feed_dict={points: xs, wanted: ys})
                taken += 1
        return
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        points = tf.placeholder(tf.float32, [None, 2])
        wanted = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.ones([2, 1]), name="kernel")
        gap = tf.reduce_mean(tf.square(tf.matmul(points, kernel) - wanted))
        counter = tf.train.get_or_create_global_step()
        fit_op = tf.train.GradientDescentOptimizer(0.05).minimize(gap, global_step=counter)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                           hooks=[tf.train.StopAtStepHook(last_step=10)]) as sess:
        while not sess.should_stop():
            for xs, ys in batches:
                sess.run(fit_op, feed_dict={points: xs, wanted: ys})
'''

RUNNER = '''
import json, logging, sys
import numpy as np
import tensorflow as tf_api

logged = []
class Keep(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if message.startswith("gap = "):
            logged.append(message.split(" (")[0])  # TF1 added the seconds since the last log
tf_api.get_logger().addHandler(Keep())
tf_api.get_logger().setLevel(logging.INFO)
rng = np.random.RandomState(2)
batches = [(rng.rand(4, 2).astype(np.float32), rng.rand(4, 1).astype(np.float32)) for _ in range(3)]
if sys.argv[2] == "nan":
    batches[1] = (batches[1][0], np.full((4, 1), np.nan, np.float32))
error = None
try:
    if sys.argv[1] == "legacy":
        tf_api.compat.v1.disable_v2_behavior()
    fit(None, None, batches)
except RuntimeError as e:
    error = str(e)
sys.stdout.write("\\n" + json.dumps({"logged": logged, "error": error}) + "\\n")
sys.stdout.flush()
import os
os._exit(0)
'''


def _run(source: str, side: str, data: str) -> dict:
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", source + RUNNER, side, data], check=False, capture_output=True,
                         text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    return {**json.loads(lines[-1]), "printed": [line.split() for line in lines if line.startswith("run ")]}


@pytest.mark.parametrize("data", ["finite", "nan"])
def test_the_migrated_loop_logs_and_stops_as_the_hooks_did(data):
    """The single-machine path, TF1 (MonitoredTrainingSession given the
    hooks) and migrated (no strategy): the same values logged and printed at
    the same steps; a NaN gap ends both with a RuntimeError saying so, after
    the NaN check that comes first in the hook list (the program's hook does
    not see that step)."""
    pytest.importorskip("tensorflow")
    source = textwrap.dedent(JOB)
    migrated = migrate(source).output
    assert "LoggingTensorHook" not in migrated and "NanTensorHook" not in migrated and "Session" not in migrated
    assert "        class _Printer:\n" in migrated and "printer.after_run(gap_value)" in migrated
    legacy, new = _run(source, "legacy", data), _run(migrated, "migrated", data)
    assert new["error"] == legacy["error"]
    assert len(new["logged"]) == len(legacy["logged"])
    for old_line, new_line in zip(legacy["logged"], new["logged"]):
        assert float(new_line.split(" = ")[1]) == pytest.approx(float(old_line.split(" = ")[1]), rel=1e-6)
    # the program's own hook: called at the same steps, given the same values
    assert [line[:2] for line in new["printed"]] == [line[:2] for line in legacy["printed"]]
    assert [float(line[3]) for line in new["printed"]] == pytest.approx(
        [float(line[3]) for line in legacy["printed"]], rel=1e-6, nan_ok=True)
    if data == "nan":
        assert legacy["error"] == "NaN loss during training." and len(legacy["logged"]) == 1
    else:
        assert legacy["error"] is None and len(legacy["logged"]) == 4  # steps 0, 3, 6, 9 of 10
        assert len(legacy["printed"]) == 10
