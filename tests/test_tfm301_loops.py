"""TFM301 on summaries, hooks and loops as people wrote them (issue 14, item 3).

- Summaries: ``tf.summary.scalar`` ops merged by ``merge_all()``, fetched with
  the train op and written by a ``FileWriter``'s ``add_summary`` become TF2
  ``tf.summary`` writes under ``tf.summary.create_file_writer`` at the same
  point of the loop, of the values the step returns.
- Hooks: a session's hooks are found where people put them: a list bound to a
  name after the graph block (``hooks = [sync_hook, stop_hook]``), a session
  made by an assignment and closed by ``sess.close()``, ``chief_only_hooks``.

Each behaviour has a (before, after) pair written for these tests, a no-op
case and invalid cases with their located reason; every output parses and a
second run changes nothing. The summaries' numerics run real TensorFlow.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tempfile
import textwrap

import pytest

from migrate.codemod.engine import dedent, migrate_source


def migrate(source: str, select=("TFM301",)):
    src = dedent(source)
    ast.parse(src)
    select = list(select) if select is not None else None
    result = migrate_source(src, select=select)
    ast.parse(result.output)
    assert migrate_source(result.output, select=select).output == result.output
    return result


def manual(result) -> list[str]:
    return [d.message for d in result.manual_work]


def located(result, text: str) -> list[tuple[int, str]]:
    return [(d.line, d.message) for d in result.diagnostics if text in d.message]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def loop_of(code: str) -> str:
    """The code from the writer's creation to the end of the function."""
    lines = dedent(code).splitlines()
    start = next(i for i, line in enumerate(lines) if "create_file_writer" in line or "FileWriter" in line)
    return textwrap.dedent("\n".join(lines[start:])) + "\n"


# ------------------------------------------------------------------------ summaries

SUMMARIES_SYNC = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, workers, epochs, batches, log_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([3, 1]), name="kernel")
        error = tf.matmul(features, kernel) - targets
        mse = tf.reduce_mean(tf.square(error))
        worst = tf.reduce_max(tf.abs(error))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=workers)
        train_op = opt.minimize(mse, global_step=global_step)
        tf.summary.scalar("mse", mse)
        tf.summary.scalar("worst_error", worst)
        merged = tf.summary.merge_all()
    hooks = [opt.make_session_run_hook(is_chief)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        events = tf.summary.FileWriter(log_dir, sess.graph)
        for epoch in range(epochs):
            for i in range(batches):
                _, loss_value, summaries, step = sess.run([train_op, mse, merged, global_step],
                                                          feed_dict={features: batch(i)[0], targets: batch(i)[1]})
                if step % 10 == 0:
                    events.add_summary(summaries, step)
            print("epoch", epoch, "loss", loss_value)
        events.close()
'''

SUMMARIES_SYNC_LOOP = '''
events = tf.summary.create_file_writer(log_dir)
for epoch in range(epochs):
    for i in range(batches):
        loss_value, worst_value, step = run_train_step(batch(i)[0], batch(i)[1])
        if step % 10 == 0:
            with events.as_default():
                tf.summary.scalar("mse", loss_value, step=step)
                tf.summary.scalar("worst_error", worst_value, step=step)
    print("epoch", epoch, "loss", loss_value)
events.close()
'''


def test_merged_scalars_become_tf2_writes_of_the_steps_values():
    result = migrate(SUMMARIES_SYNC)
    out = result.output
    assert loop_of(out) == dedent(SUMMARIES_SYNC_LOOP).lstrip("\n")
    # the step returns what the summaries record (the fetched loss once, the other value too)
    assert "return mse, worst, global_step_value" in out
    assert "FileWriter" not in out and "merge_all" not in out and "add_summary" not in out
    assert manual(result) == []
    assert located(result, "TF1 summaries are now TF2 tf.summary writes") == [
        (line_of(SUMMARIES_SYNC, 'tf.summary.scalar("mse"'), located(result, "now TF2 tf.summary")[0][1])]


SUMMARIES_BESIDE_SCOPED_LAYERS = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, steps, log_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        pixels = tf.placeholder(tf.float32, [None, 4])
        digits = tf.placeholder(tf.int32, [None])
        with tf.name_scope("hidden"):
            weights = tf.Variable(tf.zeros([4, 8]), name="weights")
            hidden = tf.nn.relu(tf.matmul(pixels, weights))
        with tf.name_scope("logits"):
            weights = tf.Variable(tf.zeros([8, 3]), name="weights")
            logits = tf.matmul(hidden, weights)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=digits, logits=logits))
        tf.summary.scalar("loss", loss)
        global_step = tf.Variable(0, name="global_step", trainable=False)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        summary = tf.summary.merge_all()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
        writer = tf.summary.FileWriter(log_dir, tf.get_default_graph())
        for i in range(steps):
            _, loss_value, summary_value, step = sess.run([train_op, loss, summary, global_step],
                                                          feed_dict={pixels: batch(i)[0], digits: batch(i)[1]})
            writer.add_summary(summary_value, step)
'''


def test_summaries_of_a_block_the_rule_rewrote_inside_are_still_its_own():
    # the two layers' `weights` are renamed apart before the summaries are
    # planned: the block's scalar is then a rebuilt node, still the block's own
    result = migrate(SUMMARIES_BESIDE_SCOPED_LAYERS)
    out = result.output
    assert "weights_2" in out  # (the renaming this test is about happened)
    assert loop_of(out) == dedent('''
        writer = tf.summary.create_file_writer(log_dir)
        for i in range(steps):
            loss_value, step = run_train_step(batch(i)[0], batch(i)[1])
            with writer.as_default():
                tf.summary.scalar("loss", loss_value, step=step)
    ''').lstrip("\n")
    assert manual(result) == []
    assert [line for line, _ in located(result, "now TF2 tf.summary writes")] == [
        line_of(SUMMARIES_BESIDE_SCOPED_LAYERS, 'tf.summary.scalar("loss"')]


SUMMARY_OP_ALONE = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, images, steps, log_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        pixels = tf.placeholder(tf.float32, [None, 16])
        kernel = tf.Variable(tf.zeros([16, 1]))
        output = tf.matmul(pixels, kernel)
        loss = tf.reduce_mean(tf.square(output - 1.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        loss_summary = tf.summary.scalar("loss", loss)
        output_summary = tf.summary.histogram("outputs", output)
        summary_op = tf.summary.merge([loss_summary, output_summary])
        writer = tf.summary.FileWriter(log_dir, flush_secs=30)
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           hooks=[tf.train.StopAtStepHook(last_step=steps)]) as sess:
        while not sess.should_stop():
            _, summary, step = sess.run([train_op, summary_op, global_step], feed_dict={pixels: images})
            writer.add_summary(summary, global_step=step)
'''

SUMMARY_OP_ALONE_LOOP = '''
writer = tf.summary.create_file_writer(log_dir, flush_millis=30 * 1000)
while not int(global_step.numpy()) >= steps:
    loss_value, output_value, step = run_train_step(images)
    with writer.as_default():
        tf.summary.scalar("loss", loss_value, step=step)
        tf.summary.histogram("outputs", output_value, step=step)
'''


def test_merged_named_summaries_and_a_writer_built_in_the_graph_block():
    """`merge([...])` of named summary ops; a FileWriter made in the device
    block moves out of it (before the loop); flush_secs becomes flush_millis."""
    result = migrate(SUMMARY_OP_ALONE)
    assert loop_of(result.output) == dedent(SUMMARY_OP_ALONE_LOOP).lstrip("\n")
    assert manual(result) == []


def test_a_program_without_summaries_gets_no_writer():
    source = SUMMARIES_SYNC.replace('        tf.summary.scalar("mse", mse)\n', "").replace(
        '        tf.summary.scalar("worst_error", worst)\n', "").replace(
        "        merged = tf.summary.merge_all()\n", "").replace(", merged", "").replace(
        "_, loss_value, summaries, step", "_, loss_value, step").replace(
        "                if step % 10 == 0:\n                    events.add_summary(summaries, step)\n", "").replace(
        "        events = tf.summary.FileWriter(log_dir, sess.graph)\n", "").replace(
        "        events.close()\n", "")
    result = migrate(source)
    assert "summary" not in result.output
    assert "return mse, global_step_value" in result.output
    assert located(result, "summar") == []


SUMMARY_IMAGE = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, images, steps, log_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        pixels = tf.placeholder(tf.float32, [None, 4, 4, 1])
        kernel = tf.Variable(tf.zeros([16, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.reshape(pixels, [-1, 16]), kernel) - 1.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        tf.summary.image("inputs", pixels)
        tf.summary.scalar("loss", loss)
        summary_op = tf.summary.merge_all()
    writer = tf.summary.FileWriter(log_dir)
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           hooks=[tf.train.StopAtStepHook(last_step=steps)]) as sess:
        while not sess.should_stop():
            _, summary, step = sess.run([train_op, summary_op, global_step], feed_dict={pixels: images})
            writer.add_summary(summary, step)
'''


def test_an_image_summary_is_reported_where_it_is_and_the_scalars_are_written():
    result = migrate(SUMMARY_IMAGE)
    assert [line for line, _ in located(result, "summary not carried over")] == [
        line_of(SUMMARY_IMAGE, "tf.summary.image")]
    assert "[0, 1]" in manual(result)[0]
    assert 'tf.summary.scalar("loss", loss_value, step=step)' in result.output
    assert "tf.summary.image" not in result.output


def test_summaries_built_by_a_helper_are_not_guessed():
    """merge_all() also merged the summaries a model helper made: the plan
    cannot see them, so the TF1 summary code goes, reported (the fallback)."""
    source = SUMMARY_IMAGE.replace('        tf.summary.image("inputs", pixels)\n',
                                   "        describe(pixels)\n") + '''

def describe(images):
    tf.summary.histogram("pixels", images)
'''
    result = migrate(source)
    assert "create_file_writer" not in result.output and "add_summary" not in result.output
    assert [line for line, _ in located(result, "TF1 summaries are not carried over")] == [
        line_of(source, "writer.add_summary")]
    assert "also merged `tf.summary.histogram(...)` in `describe()`" in manual(result)[0]


def test_summaries_of_the_other_branch_were_never_merged():
    """A program training either on one machine or on the cluster builds one
    graph or the other: merge_all() in the cluster branch never saw the
    standalone branch's summaries, which stay as they are (not this block's)."""
    head, body = SUMMARY_IMAGE.replace('        tf.summary.image("inputs", pixels)\n', "").split(
        "def train(cluster, server, images, steps, log_dir):\n")
    standalone = '        tf.summary.histogram("pixels", tf.placeholder(tf.float32, [None, 16]))\n'
    source = (head + "def train(cluster, server, images, steps, log_dir):\n    if cluster is None:\n" + standalone
              + "    else:\n" + "".join("    " + line if line.strip() else line for line in body.splitlines(True)))
    result = migrate(source)
    assert 'tf.summary.scalar("loss", loss_value, step=step)' in result.output
    assert "also merged" not in "".join(d.message for d in result.diagnostics)
    # outside an `if` that parts them, a summary built elsewhere still counts as merged
    apart = source.replace("    if cluster is None:\n" + standalone + "    else:\n", "    if cluster is None:\n"
                           + standalone + "    if cluster is not None:\n")
    result = migrate(apart)
    assert "also merged `tf.summary.histogram(...)` in `train()`" in manual(result)[0]


def test_add_summary_without_a_step_is_reported():
    source = SUMMARY_IMAGE.replace('        tf.summary.image("inputs", pixels)\n', "").replace(
        "writer.add_summary(summary, step)", "writer.add_summary(summary)")
    result = migrate(source)
    assert [line for line, _ in located(result, "gives no global step")] == [line_of(source, "writer.add_summary")]
    assert "create_file_writer" not in result.output


def test_the_written_summaries_hold_the_steps_values():
    """Run the migrated program (one local worker) and read its event file:
    one scalar per written step, equal to the loss the loop printed. TF 2's
    tf.summary.scalar is implemented by the tensorboard package (TF 2.21 does
    not install it; the migrated program needs it as the TF1 one needed
    TensorBoard to read its summaries)."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tensorboard")
    out = migrate_source(dedent(SUMMARIES_SYNC)).output  # all rules: `import tensorflow as tf`
    program = out + textwrap.dedent('''
        import glob, json, sys
        import numpy as np
        import tensorflow as tf

        data = np.random.RandomState(0).rand(8, 4).astype(np.float32)
        def batch(i):
            return data[:, :3], data[:, 3:]
        printed = []
        print = lambda *args: printed.append(args[-1])
        train(None, None, True, 1, 2, 11, sys.argv[1])
        values = {}
        for path in glob.glob(sys.argv[1] + "/events*"):
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    values.setdefault(value.tag, []).append(
                        (event.step, float(tf.make_ndarray(value.tensor))))
        sys.stdout.write(json.dumps({"values": values, "printed": [float(p) for p in printed]}))
    ''')
    with tempfile.TemporaryDirectory() as log_dir:
        run = subprocess.run([sys.executable, "-c", program, log_dir], check=False, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        seen = json.loads(run.stdout.strip().splitlines()[-1])
    mse = seen["values"]["mse"]
    assert [step for step, _ in mse] == [0, 10, 20]
    assert [step for step, _ in seen["values"]["worst_error"]] == [0, 10, 20]
    # step 10 is the last batch of the first epoch: the loss printed after it
    assert mse[1][1] == pytest.approx(seen["printed"][0], rel=1e-6)
    assert all(worst >= value for (_, worst), (_, value) in zip(seen["values"]["worst_error"], mse))


# ------------------------------------------------------------------------ hooks where people put them

HOOK_LIST_NAME = '''
import time

import tensorflow.compat.v1 as tf


def main(cluster, server, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        left = tf.Variable(tf.zeros([2]))
        right = tf.Variable(tf.zeros([2]))
        total = left + right
        global_step = tf.Variable(0, trainable=False, name="global_step")
        loss = tf.reduce_mean(tf.square(total - 3.0))
        base = tf.train.GradientDescentOptimizer(0.01)
        sync = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2, total_num_replicas=2)
        step_op = sync.minimize(loss, global_step=global_step)

    replicas_hook = sync.make_session_run_hook(is_chief)
    last = tf.train.StopAtStepHook(last_step=50)
    hooks = [replicas_hook, last]
    sess = tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks)
    while not sess.should_stop():
        _, value, at = sess.run([step_op, total, global_step])
        print(value, at)
        time.sleep(0.1)
    sess.close()
    print("done")
'''

HOOK_LIST_NAME_LOOP = '''
    while not int(global_step.numpy()) >= 50:
        value, at = run_train_step()
        print(value, at)
        time.sleep(0.1)
    print("done")
'''


def test_a_stop_hook_in_a_hook_list_bound_after_the_graph_block_bounds_the_loop():
    result = migrate(HOOK_LIST_NAME)
    out = result.output
    assert out.endswith(HOOK_LIST_NAME_LOOP.lstrip("\n"))
    for gone in ("hooks", "StopAtStepHook", "MonitoredTrainingSession", "sess.", "make_session_run_hook"):
        assert gone not in out
    assert manual(result) == []


def test_without_the_stop_hook_the_loop_runs_until_killed_as_in_tf1():
    # SyncReplicasOptimizer's hook never stops the session: the TF1 loop never ended
    source = HOOK_LIST_NAME.replace("    last = tf.train.StopAtStepHook(last_step=50)\n", "").replace(
        "[replicas_hook, last]", "[replicas_hook]")
    result = migrate(source)
    assert "    while True:\n" in result.output and "should_stop" not in result.output
    assert manual(result) == []
    assert [line for line, _ in located(result, "never ended in TF1 either")] == [
        line_of(source, "while not sess.should_stop()")]


def test_without_the_stop_hook_a_program_hook_keeps_the_loop_declined():
    source = HOOK_LIST_NAME.replace("    last = tf.train.StopAtStepHook(last_step=50)\n",
                                    "    last = StopWhenConverged()\n")
    result = migrate(source)
    assert result.output == dedent(source)
    assert [line for line, _ in located(result, "would never end in TF2")] == [
        line_of(source, "while not sess.should_stop()")]


def test_a_program_hook_in_chief_only_hooks_is_reported_not_dropped_silently():
    source = HOOK_LIST_NAME.replace(
        "hooks=hooks)", "hooks=hooks,\n                                             chief_only_hooks=[ProgressHook()])")
    result = migrate(source)
    assert [line for line, _ in located(result, "`ProgressHook(...)` is dropped")] == [
        line_of(source, "chief_only_hooks=[ProgressHook()]")]


# ------------------------------------------------------------------------ the program's own hooks

PROGRESS_HOOK = '''
import time

import tensorflow.compat.v1 as tf


class Progress(tf.train.SessionRunHook):
    """Prints the loss now and then; stops once it is small enough."""

    def __init__(self, every, small_enough):
        self.every = every
        self.small_enough = small_enough

    def begin(self):
        self.count = 0
        self.started = time.time()

    def before_run(self, run_context):
        self.count += 1
        return tf.train.SessionRunArgs(loss)

    def after_run(self, run_context, run_values):
        value = run_values.results
        if self.count % self.every == 0:
            print(self.count, value, time.time() - self.started)
        if value < self.small_enough:
            run_context.request_stop()

    def end(self, session):
        print("trained", self.count, "steps")


def train(cluster, server, data):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.zeros([2, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, hooks=[Progress(10, 1e-3)]) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: data})
'''

PROGRESS_CLASS = '''
class Progress:
    """Prints the loss now and then; stops once it is small enough."""
    stop_requested = False  # set by after_run(): the loop ends after this step

    def __init__(self, every, small_enough):
        self.every = every
        self.small_enough = small_enough

    def begin(self):
        self.count = 0
        self.started = time.time()

    def before_run(self):
        self.count += 1

    def after_run(self, results):
        value = results
        if self.count % self.every == 0:
            print(self.count, value, time.time() - self.started)
        if value < self.small_enough:
            self.stop_requested = True

    def end(self):
        print("trained", self.count, "steps")
'''

PROGRESS_LOOP = '''
    progress = Progress(10, 1e-3)
    progress.begin()
    while not progress.stop_requested:
        progress.before_run()
        progress_results = run_train_step(data)
        progress.after_run(progress_results)
    progress.end()
'''


def test_a_hook_of_the_program_becomes_calls_at_the_same_points_of_the_loop():
    result = migrate(PROGRESS_HOOK)
    out = result.output
    assert dedent(PROGRESS_CLASS).strip() in out
    assert out.endswith(PROGRESS_LOOP.lstrip("\n"))
    # the step returns what before_run's SessionRunArgs fetched
    assert "            return loss\n" in out
    # its after_run reads the stop flag the loop tests: each step's results are waited for
    assert "coordinator.schedule(train_step" in out and "steps_in_flight" not in out
    assert manual(result) == []
    assert [line for line, _ in located(result, "is now a plain object")] == [line_of(PROGRESS_HOOK, "hooks=[Progress")]


def test_a_hook_class_no_session_is_given_stays_as_it_is():
    source = PROGRESS_HOOK.replace("hooks=[Progress(10, 1e-3)]", "hooks=[tf.train.StopAtStepHook(last_step=9)]")
    result = migrate(source)
    assert "class Progress(tf.train.SessionRunHook):" in result.output
    assert located(result, "Progress") == []


def test_a_hook_that_runs_the_session_is_reported_where_it_does():
    source = PROGRESS_HOOK.replace(
        "    def begin(self):\n", "    def after_create_session(self, session, coord):\n"
        "        self.first = session.run(global_step)\n\n    def begin(self):\n").replace(
        "hooks=[Progress(10, 1e-3)]", "hooks=[Progress(10, 1e-3), tf.train.StopAtStepHook(last_step=9)]")
    result = migrate(source)
    assert located(result, "cannot become calls in the TF2 loop") == [
        (line_of(source, "self.first = session.run"),
         ("the session hook `Progress` cannot become calls in the TF2 loop: its after_create_session() uses"
          " `session` (TF1's session), which a TF2 loop does not have"))]
    assert "class Progress(tf.train.SessionRunHook):" in result.output


def test_a_stop_hook_subclass_ending_the_loop_is_named_in_the_reason():
    source = PROGRESS_HOOK.replace("class Progress(tf.train.SessionRunHook):",
                                   "class Progress(tf.train.StopAtStepHook):")
    result = migrate(source)
    assert result.output == dedent(source)
    [(line, message)] = located(result, "would never end in TF2")
    assert line == line_of(source, "while not sess.should_stop()")
    # its own __init__ replaces the one that set the limits StopAtStepHook's methods read
    assert "the program's hook `Progress`" in message and "overrides __init__()" in message
    assert "StopAtStepHook" in message


def test_a_chief_only_hook_under_multi_worker_mirrored_is_called_on_the_chief():
    """Every worker runs the loop: the hook's calls go under the session's
    own is_chief, where TF1 ran them (tests/test_tfm301_helper_hooks.py has
    the one whose request_stop() cannot be carried)."""
    source = SUMMARIES_SYNC.replace("hooks=hooks)", "hooks=hooks, chief_only_hooks=[Timer()])") + '''

class Timer(tf.train.SessionRunHook):
    def after_run(self, run_context, run_values):
        print("step done")
'''
    result = migrate(source)
    assert located(result, "ran on the chief only") == []
    assert "class Timer:" in result.output
    assert ("            loss_value, worst_value, step = run_train_step(batch(i)[0], batch(i)[1])\n"
            "            if is_chief:\n                timer.after_run()\n") in result.output


def test_a_hook_reading_what_it_did_not_fetch_is_reported():
    source = PROGRESS_HOOK.replace("        value = run_values.results\n",
                                   "        value = run_values.results\n        print(run_values.options)\n").replace(
        "hooks=[Progress(10, 1e-3)]", "hooks=[Progress(10, 1e-3), tf.train.StopAtStepHook(last_step=9)]")
    result = migrate(source)
    assert [line for line, _ in located(result, "cannot become calls")] == [line_of(source, "run_values.options")]


# ------------------------------------------------------------------------ Supervisor.is_chief in the loop

SUPERVISOR_CHIEF = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, task_index, data, steps, log_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.zeros([2, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        global_step = tf.Variable(0, trainable=False)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        tf.summary.scalar("loss", loss)
        summaries = tf.summary.merge_all()
    writer = tf.summary.FileWriter(log_dir)
    sv = tf.train.Supervisor(is_chief=task_index == 0, global_step=global_step, summary_op=None)
    with sv.managed_session(server.target) as sess:
        step = 0
        while step < steps:
            _, written, step = sess.run([train_op, summaries, global_step], feed_dict={x: data})
            if sv.is_chief:
                writer.add_summary(written, step)
'''

SUPERVISOR_CHIEF_LOOP = '''
writer = tf.summary.create_file_writer(log_dir)
step = 0
while step < steps:
    loss_value, step = run_train_step(data)
    if (task_index == 0):
        with writer.as_default():
            tf.summary.scalar("loss", loss_value, step=step)
'''


def test_supervisor_is_chief_reads_what_the_program_told_the_supervisor():
    result = migrate(SUPERVISOR_CHIEF)
    assert loop_of(result.output) == dedent(SUPERVISOR_CHIEF_LOOP).lstrip("\n")
    assert "sv" not in result.output.split("def train(")[1].split("writer =")[1]
    assert manual(result) == []


def test_supervisors_told_different_things_are_not_guessed():
    source = SUPERVISOR_CHIEF.replace(
        "    sv = tf.train.Supervisor(is_chief=task_index == 0, global_step=global_step, summary_op=None)\n",
        "    if task_index == 0:\n        sv = tf.train.Supervisor(is_chief=True, global_step=global_step)\n"
        "    else:\n        sv = tf.train.Supervisor(is_chief=False, global_step=global_step)\n")
    result = migrate(source)
    assert result.output == dedent(source)
    assert [line for line, _ in located(result, "uses the TF1 session `sv`")] == [line_of(source, "if sv.is_chief")]


# ------------------------------------------------------------------------ summaries the session saved

SESSION_SAVED = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, epochs, batches, data, checkpoints):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.zeros([2, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        tf.summary.scalar("loss", loss)
    with tf.train.MonitoredTrainingSession(master=server.target, checkpoint_dir=checkpoints,
                                           save_checkpoint_secs=None, save_summaries_steps=50) as sess:
        for epoch in range(epochs):
            for i in range(batches):
                sess.run(train_op, feed_dict={x: data[i]})
'''

SESSION_SAVED_LOOP = '''
summary_writer = tf.summary.create_file_writer(checkpoints)
next_summary_step = 0
'''

SESSION_SAVED_WRITES = '''
            loss_value, global_step_value = run_train_step(data[i])
            # Summaries as the session saved them: the global step after this one, every 50 steps.
            if global_step_value + 1 >= next_summary_step:
                with summary_writer.as_default():
                    tf.summary.scalar("loss", loss_value, step=global_step_value + 1)
                next_summary_step = global_step_value + 1 + 50
'''


def test_summaries_the_session_saved_are_written_after_the_step_as_it_did():
    result = migrate(SESSION_SAVED)
    out = result.output
    assert textwrap.indent(dedent(SESSION_SAVED_LOOP).lstrip("\n"), "    ") in out
    assert SESSION_SAVED_WRITES.lstrip("\n") in out
    assert out.count("tf.summary.scalar") == 1
    assert manual(result) == []
    assert [line for line, _ in located(result, "save_summaries_steps")] == [line_of(SESSION_SAVED, "tf.summary.scalar")]


def test_a_session_saving_no_summaries_gets_no_writer():
    source = SESSION_SAVED.replace("save_summaries_steps=50", "save_summaries_steps=None")
    result = migrate(source)
    assert "summary" not in result.output.split("def train(")[1].split("strategy.scope()")[1]
    assert located(result, "summar") == []


def test_summaries_saved_by_time_are_reported():
    source = SESSION_SAVED.replace("save_summaries_steps=50", "save_summaries_secs=30")
    result = migrate(source)
    assert "create_file_writer" not in result.output
    assert [line for line, _ in located(result, "save_summaries_secs seconds")] == [
        line_of(source, "tf.summary.scalar")]


def test_a_hook_in_a_nested_loop_is_called_once_per_step():
    source = PROGRESS_HOOK.replace(
        "        while not sess.should_stop():\n            sess.run(train_op, feed_dict={x: data})\n",
        "        for epoch in range(3):\n            for i in range(5):\n"
        "                sess.run(train_op, feed_dict={x: data})\n")
    out = migrate(source).output
    assert out.count("progress.before_run()") == 1 and out.count("progress.after_run(") == 1
    assert out.count("progress.begin()") == 1 and out.count("progress.end()") == 1


def test_hooks_passed_positionally_to_a_monitored_session_bound_the_loop_too():
    source = HOOK_LIST_NAME.replace(
        "    sess = tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks)\n",
        "    sess = tf.train.MonitoredSession(tf.train.ChiefSessionCreator(master=server.target), hooks)\n")
    result = migrate(source)
    assert result.output.endswith(HOOK_LIST_NAME_LOOP.lstrip("\n"))
    assert "MonitoredSession" not in result.output and "ChiefSessionCreator" not in result.output
    assert manual(result) == []
