"""TFM301 on train ops and hooks handed out by helpers of the same file
(issue 14): ``train_op, hooks = optimize(...)`` where the helper builds the
SyncReplicas hook in an ``if``/``else`` and the stop hook, the caller adds
more (``hooks = hooks + [...]``) and gives some ``chief_only_hooks``, the loop
``while not sess.should_stop():`` bounded by those hooks alone.

- the hook list is followed through concatenation, rebinding and both
  branches of an ``if`` (a hook only one branch adds must be SyncReplicas'
  own, gone with the optimizer); several StopAtStepHooks stop at the first
  bound reached;
- the program's hooks given as ``chief_only_hooks`` are called, under
  MultiWorkerMirroredStrategy (every worker runs the loop), under the
  session's own ``is_chief``; one whose ``request_stop()`` ends the loop is
  declined (the other workers' steps would wait for the chief);
- values the step computes with that come from a TF1 queue input pipeline or
  a module this run cannot read are declined: the migration would compute
  them once and train every step on the same batch.

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

from tfm301_support import line_of, manual, migrate, tail_from

from migrate.codemod.engine import dedent

HELPER_HOOKS = '''
import time

import tensorflow.compat.v1 as tf


class StepTimer(tf.train.SessionRunHook):
    def begin(self):
        self._last = time.time()

    def after_run(self, run_context, run_values):
        now = time.time()
        print("step took", now - self._last)
        self._last = now


def optimize(cost, counter, is_chief, workers, steps):
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=workers)
    train_op = opt.minimize(cost, global_step=counter)
    if is_chief:
        replica_hooks = [opt.make_session_run_hook(is_chief)]
    else:
        replica_hooks = []
    stop = tf.train.StopAtStepHook(num_steps=steps)
    hooks = replica_hooks + [stop]
    return train_op, hooks


def train(cluster, server, is_chief, workers, samples, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        inputs = tf.placeholder(tf.float32, [None, 4])
        weights = tf.Variable(tf.zeros([4, 1]))
        cost = tf.reduce_mean(tf.square(tf.matmul(inputs, weights) - 1.0))
        counter = tf.train.get_or_create_global_step()
        train_op, session_hooks = optimize(cost, counter, is_chief, workers, steps)
    session_hooks = session_hooks + [tf.train.StopAtStepHook(last_step=1000)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=session_hooks,
                                           chief_only_hooks=[StepTimer()]) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={inputs: samples})
'''

HELPER_HOOKS_LOOP = '''
last_step = int(counter.numpy()) + steps
step_timer = StepTimer()
if is_chief:
    step_timer.begin()
while not int(counter.numpy()) >= min(1000, last_step):
    run_train_step(samples)
    if is_chief:
        step_timer.after_run()
'''


def test_hooks_from_a_helper_built_step_by_step_bound_the_loop_and_chief_hooks_run_on_the_chief():
    result = migrate(HELPER_HOOKS)
    out = result.output
    assert manual(result) == []
    assert "MultiWorkerMirroredStrategy" in out
    assert tail_from(out, "last_step = ") == dedent(HELPER_HOOKS_LOOP).lstrip("\n")
    # the lists, the hooks and the sync optimizer's hook are gone with the session
    for gone in ("hooks", "StopAtStepHook", "make_session_run_hook", "replica_hooks", "SessionRunHook"):
        assert gone not in out
    assert "class StepTimer:" in out


def test_a_session_without_is_chief_ran_its_chief_only_hooks_everywhere():
    source = HELPER_HOOKS.replace("master=server.target, is_chief=is_chief, hooks=", "master=server.target, hooks=")
    out = migrate(source).output
    assert tail_from(out, "step_timer = StepTimer()").startswith(
        "step_timer = StepTimer()\nstep_timer.begin()\nwhile")
    assert "if is_chief:" not in tail_from(out, "step_timer = StepTimer()")


def test_a_stop_hook_only_one_branch_adds_is_not_taken_as_the_bound():
    source = HELPER_HOOKS.replace(
        "        replica_hooks = []\n", "        replica_hooks = [tf.train.StopAtStepHook(last_step=10)]\n").replace(
        "    session_hooks = session_hooks + [tf.train.StopAtStepHook(last_step=1000)]\n", "").replace(
        "    stop = tf.train.StopAtStepHook(num_steps=steps)\n    hooks = replica_hooks + [stop]\n",
        "    hooks = replica_hooks\n")
    result = migrate(source)
    assert "Strategy" not in result.output
    [reason] = [d for d in manual(result) if "would never end in TF2" in d.message]
    assert reason.line == line_of(source, "while not sess.should_stop():")
    assert "a list this rule does not follow for a StopAtStepHook" in reason.message


def test_a_chief_only_hook_that_stops_the_loop_is_not_called_and_said_to_be_left():
    """Its calls are not placed (the other workers' steps would wait for a
    chief that stopped): the hook is left out, reported at the session."""
    source = HELPER_HOOKS.replace(
        '        print("step took", now - self._last)\n',
        '        print("step took", now - self._last)\n'
        "        if now - self._last > 60:\n"
        "            run_context.request_stop()\n")
    result = migrate(source)
    assert "step_timer" not in result.output
    reasons = [d for d in manual(result) if "ran on the chief only" in d.message]
    assert [d.line for d in reasons] == [line_of(source, "chief_only_hooks=[StepTimer()]")]
    assert "its request_stop() would end the loop on the chief only" in reasons[0].message


QUEUE_INPUT = '''
import tensorflow.compat.v1 as tf


def batches(files, size):
    queue = tf.train.string_input_producer(files)
    reader = tf.FixedLengthRecordReader(record_bytes=20)
    _, record = reader.read(queue)
    values = tf.reshape(tf.decode_raw(record, tf.float32), [5])
    features, target = values[:4], values[4:]
    return tf.train.shuffle_batch([features, target], batch_size=size, capacity=100, min_after_dequeue=10)


def train(cluster, server, files):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features, target = batches(files, 32)
        weights = tf.Variable(tf.zeros([4, 1]))
        cost = tf.reduce_mean(tf.square(tf.matmul(features, weights) - target))
        counter = tf.train.get_or_create_global_step()
        train_op = tf.train.AdagradOptimizer(0.1).minimize(cost, global_step=counter)
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           hooks=[tf.train.StopAtStepHook(last_step=100)]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def test_a_queue_input_pipeline_read_by_the_step_is_declined_where_its_batch_is_taken():
    result = migrate(QUEUE_INPUT, select=["TFM301"])
    assert result.output == dedent(QUEUE_INPUT)
    [reason] = [d for d in manual(result) if "the step computes with" in d.message]
    assert reason.line == line_of(QUEUE_INPUT, "features, target = batches(files, 32)")
    assert "`features`, `target` from `batches(...)`" in reason.message
    assert "builds a TF1 queue-based input pipeline (`tf.train.string_input_producer`) (through `batches()`)" in \
        reason.message or "(`tf.train.shuffle_batch`) (through `batches()`)" in reason.message
    assert "train every step on the same values" in reason.message


def test_an_input_from_a_module_not_in_the_project_is_declined_and_a_constant_one_is_not():
    absent = QUEUE_INPUT.replace("import tensorflow.compat.v1 as tf\n",
                                 "import tensorflow.compat.v1 as tf\nimport records_input\n").replace(
        "    queue = tf.train.string_input_producer(files)\n"
        "    reader = tf.FixedLengthRecordReader(record_bytes=20)\n"
        "    _, record = reader.read(queue)\n"
        "    values = tf.reshape(tf.decode_raw(record, tf.float32), [5])\n"
        "    features, target = values[:4], values[4:]\n"
        "    return tf.train.shuffle_batch([features, target], batch_size=size, capacity=100, min_after_dequeue=10)\n",
        "    return records_input.read(files, size)\n")
    result = migrate(absent, select=["TFM301"])
    assert result.output == dedent(absent)
    [reason] = [d for d in manual(result) if "the step computes with" in d.message]
    assert "takes from `records_input`, a module not in this project" in reason.message
    assert "(through `batches()` -> `records_input.read()`)" in reason.message
    constant = QUEUE_INPUT.replace(
        "    queue = tf.train.string_input_producer(files)\n"
        "    reader = tf.FixedLengthRecordReader(record_bytes=20)\n"
        "    _, record = reader.read(queue)\n"
        "    values = tf.reshape(tf.decode_raw(record, tf.float32), [5])\n"
        "    features, target = values[:4], values[4:]\n"
        "    return tf.train.shuffle_batch([features, target], batch_size=size, capacity=100, min_after_dequeue=10)\n",
        "    return tf.ones([size, 4]), tf.zeros([size, 1])\n")
    assert not [d for d in manual(migrate(constant, select=["TFM301"])) if "the step computes with" in d.message]
