"""TFM301 and a train op that also updates an ExponentialMovingAverage of the
variables, the TF1 idiom (the CIFAR-10 tutorial and its many derivatives)

    ema_op = ema.apply(tf.trainable_variables())
    train_op = tf.group(train_step, ema_op)        # or
    with tf.control_dependencies([train_step, ema_op]):
        train_op = tf.no_op()                       # or, ordered:
    with tf.control_dependencies([train_step]):
        train_op = ema.apply(tf.trainable_variables())

`tf.group` is also how TF1 code groups its initializers, which the rule drops
as graph plumbing; grouped with the train op it is the training itself. The
averages are made under the strategy and each step updates them after the
variables (the _moving_average stage); where that cannot be exact (the
averages read elsewhere, another variable list, zero_debias, a chief-only
update under ParameterServerStrategy) the training is declined at the
statement, the file byte-identical.

Fixtures are written for these tests in the shapes seen in real scripts.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile

import pytest

from migrate.codemod.engine import dedent, migrate_source

GROUPED = """
import tensorflow.compat.v1 as tf


def train(cluster, server, task_index, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 4])
        targets = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([4, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) - targets))
        update = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        shadows = tf.train.ExponentialMovingAverage(0.99, step)
        shadow_update = shadows.apply(tf.trainable_variables())
        COMBINE
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0,
                                           checkpoint_dir="/tmp/ckpt", hooks=hooks) as sess:
        for x, y in batches:
            if sess.should_stop():
                break
            sess.run(train_op, feed_dict={inputs: x, targets: y})
"""

SPELLINGS = {
    "group": "train_op = tf.group(update, shadow_update)",
    "no_op": "with tf.control_dependencies([update, shadow_update]):\n            train_op = tf.no_op(name='train')",
}


SPELLINGS["inline"] = "train_op = tf.group(update, shadows.apply(tf.trainable_variables()))"
SPELLINGS["ordered"] = ("with tf.control_dependencies([update]):\n"
                         "            train_op = shadows.apply(tf.trainable_variables())")


def _grouped(spelling: str) -> str:
    source = dedent(GROUPED).replace("COMBINE", SPELLINGS[spelling])
    if spelling in ("ordered", "inline"):  # the op made by ema.apply is the train op itself, or grouped at once
        source = source.replace("        shadow_update = shadows.apply(tf.trainable_variables())\n", "")
    return source


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_train_op_with_moving_average_updates_them_in_the_step(spelling):
    source = _grouped(spelling)
    result = migrate_source(source, select=["TFM301"])
    assert not result.manual_work, [d.message for d in result.manual_work]
    out = result.output
    compile(out, "<migrated>", "exec")
    # the averages object is made under the strategy, its shadow variables once before any step
    scope = out.index("with strategy.scope():")
    assert scope < out.index("shadows = tf.train.ExponentialMovingAverage(0.99, step)") < out.index("def train_step")
    made = out.index("trainable_variables = [kernel]")
    assert made < out.index("    shadows.apply(trainable_variables)\n") < out.index("def train_step")
    # each step updates them after the variables and the step counter (num_updates reads the new step)
    replica = out[out.index("def train_step_replica"):out.index("return ()")]
    assert replica.index("apply_gradients") < replica.index("step.assign_add(1)") < replica.index(
        "shadows.apply(trainable_variables)")
    assert ("no set order" in replica) == (spelling != "ordered")
    # saved with the rest, as TF1's Saver saved every global variable
    assert "moving_averages=[shadows.average(v) for v in trainable_variables]" in out
    for legacy in ("tf.group", "no_op", "control_dependencies", "tf.trainable_variables()", "sess.run"):
        assert legacy not in out
    notes = [d for d in result.diagnostics if d.code == "TFM301" and "moving averages" in d.message]
    assert [d.line for d in notes] == [line_of(source, "ExponentialMovingAverage(")]
    assert migrate_source(out, select=["TFM301"]).output == out  # idempotent


DECLINED = {
    # the averages are read elsewhere (an evaluation graph): only their update is carried
    "read elsewhere": ("        train_op = tf.group(update, shadow_update)\n",
                       "        train_op = tf.group(update, shadow_update)\n        smoothed = shadows.average(kernel)\n",
                       "smoothed = shadows.average(kernel)", "`shadows` (the moving averages) is also read"),
    "other list": ("shadows.apply(tf.trainable_variables())", "shadows.apply([kernel])",
                   "shadow_update = shadows.apply", "a list other than tf.trainable_variables()"),
    "zero debias": ("ExponentialMovingAverage(0.99, step)", "ExponentialMovingAverage(0.99, step, zero_debias=True)",
                    "ExponentialMovingAverage(", "zero_debias"),
}


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_moving_averages_that_cannot_be_carried_exactly_are_declined_where_they_are(case):
    old, new, where, why = DECLINED[case]
    source = _grouped("group").replace(old, new)
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source  # the training (and its loop) kept as it was, never dropped
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1, [d.message for d in result.manual_work]
    assert declined[0].line == line_of(source, where)
    assert why in declined[0].message and "ema.apply" in declined[0].hint


def _chief_only(sync: bool) -> str:
    """The train op's name bound again on the chief, to the update grouped
    with the averages' (the shape of a helper returning the train op)."""
    source = _grouped("no_op").replace(
        "        update = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)\n"
        "        shadows = tf.train.ExponentialMovingAverage(0.99, step)\n"
        "        shadow_update = shadows.apply(tf.trainable_variables())\n"
        "        with tf.control_dependencies([update, shadow_update]):\n"
        "            train_op = tf.no_op(name='train')\n",
        "        OPTIMIZER\n"
        "        train_op = opt.minimize(loss, global_step=step)\n"
        "        if task_index == 0:\n"
        "            shadows = tf.train.ExponentialMovingAverage(0.99, step)\n"
        "            shadow_update = shadows.apply(tf.trainable_variables())\n"
        "            with tf.control_dependencies([shadow_update, train_op]):\n"
        "                train_op = tf.no_op()\n")
    optimizer = "opt = tf.train.GradientDescentOptimizer(0.1)"
    if sync:
        optimizer = ("opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),"
                     " replicas_to_aggregate=2, total_num_replicas=2)")
        source = source.replace("hooks = [", "hooks = [opt.make_session_run_hook(task_index == 0), ")
    return source.replace("OPTIMIZER", optimizer)


def test_chief_only_averages_are_declined_under_parameter_servers():
    """`if is_chief:` around the averages: under ParameterServerStrategy every
    scheduled step would update them, not only the chief's steps."""
    source = _chief_only(sync=False)
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1, [(d.line, d.message) for d in result.manual_work]
    assert declined[0].line == line_of(source, "if task_index == 0:")
    assert "only by the chief" in declined[0].message


def test_chief_only_averages_of_synchronous_training_are_updated_by_every_replica():
    """Synchronous replicas (SyncReplicasOptimizer -> MultiWorkerMirroredStrategy)
    hold the same variables: the chief's once-per-step update is every
    replica's, with the same values."""
    source = _chief_only(sync=True)
    result = migrate_source(source, select=["TFM301"])
    assert not [d for d in result.manual_work if d.code == "TFM301"], [d.message for d in result.manual_work]
    out = result.output
    assert "MultiWorkerMirroredStrategy" in out and "if task_index == 0" not in out
    replica = out[out.index("def train_step_replica"):out.index("return ()")]
    assert replica.index("step.assign_add(1)") < replica.index("shadows.apply(trainable_variables)")


def test_grouped_initializers_are_still_plumbing():
    """An init op grouped from the initializers does not read the train op: it
    is still dropped and the training migrates."""
    source = dedent(GROUPED).replace(
        "        shadows = tf.train.ExponentialMovingAverage(0.99, step)\n"
        "        shadow_update = shadows.apply(tf.trainable_variables())\n"
        "        COMBINE\n",
        "        init_op = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())\n"
    ).replace("sess.run(train_op,", "sess.run(update,")
    result = migrate_source(source, select=["TFM301"])
    assert not [d for d in result.manual_work if d.code == "TFM301"], [d.message for d in result.manual_work]
    assert "ParameterServerStrategy" in result.output and "tf.group" not in result.output
    assert "apply_gradients" in result.output


SYNC_AVERAGED = '''
import tensorflow.compat.v1 as tf


def train(cluster, checkpoint_dir, batches, workers=1):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([3, 1]), name="kernel")
        bias = tf.Variable(tf.zeros([1]), name="bias")
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) + bias - targets))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=workers, total_num_replicas=workers)
        update = opt.minimize(loss, global_step=step)
        shadows = tf.train.ExponentialMovingAverage(0.9, step)
        with tf.control_dependencies([update]):
            train_op = shadows.apply(tf.trainable_variables())
    hooks = [opt.make_session_run_hook(True), tf.train.StopAtStepHook(last_step=len(batches))]
    with tf.train.MonitoredTrainingSession(is_chief=True, checkpoint_dir=checkpoint_dir, hooks=hooks) as sess:
        for x, y in batches:
            if sess.should_stop():
                break
            sess.run(train_op, feed_dict={inputs: x, targets: y})
'''

BATCHES = '''
import numpy as np
rng = np.random.RandomState(0)
batches = []
for _ in range(6):
    x = rng.rand(4, 3).astype(np.float32)
    batches.append((x, x.sum(axis=1, keepdims=True)))
'''

# TF1's meaning of the fixture's graph (one replica: plain gradient descent),
# run by a plain session: the variables and their averages after each batch
TF1_REFERENCE = BATCHES + '''
import json
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
step = tf.train.get_or_create_global_step()
inputs = tf.placeholder(tf.float32, [None, 3])
targets = tf.placeholder(tf.float32, [None, 1])
kernel = tf.Variable(tf.zeros([3, 1]))
bias = tf.Variable(tf.zeros([1]))
loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) + bias - targets))
update = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
ema = tf.train.ExponentialMovingAverage(0.9, step)
with tf.control_dependencies([update]):
    train_op = ema.apply(tf.trainable_variables())
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for x, y in batches:
        sess.run(train_op, {inputs: x, targets: y})
    print(json.dumps({"variables": [sess.run(kernel).tolist(), sess.run(bias).tolist()],
                      "averages": [sess.run(ema.average(v)).tolist() for v in (kernel, bias)]}))
'''

MIGRATED_RUN = BATCHES + '''
import json, sys
import tensorflow as tf
train(None, sys.argv[1], batches)
reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(sys.argv[1]))
value = lambda key: np.asarray(reader.get_tensor(key + "/.ATTRIBUTES/VARIABLE_VALUE")).tolist()
print(json.dumps({"variables": [value("kernel"), value("bias")],
                  "averages": [value("moving_averages/0"), value("moving_averages/1")]}))
'''


def test_the_migrated_step_keeps_tf1s_moving_averages():
    """Run TF1's graph and the migrated program (one MultiWorkerMirroredStrategy
    worker) on the same batches: the variables and the averages the
    checkpoint keeps are TF1's, bit for bit (num_updates read after the
    step, the shadows made equal to the initial variables)."""
    pytest.importorskip("tensorflow")
    migrated = migrate_source(dedent(SYNC_AVERAGED)).output
    assert "shadows.apply(trainable_variables)" in migrated
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]},
                                                  "task": {"type": "worker", "index": 0}})}
    seen = []
    with tempfile.TemporaryDirectory() as checkpoint_dir:
        for program, run_env in ((TF1_REFERENCE, os.environ), (migrated + MIGRATED_RUN, env)):
            run = subprocess.run([sys.executable, "-c", program, checkpoint_dir], capture_output=True, text=True,
                                 env=run_env, timeout=300, check=False)
            assert run.returncode == 0, run.stderr[-3000:]
            seen.append(json.loads(run.stdout.strip().splitlines()[-1]))
    legacy, migrated_values = seen
    assert migrated_values == legacy
    # the averages moved away from the variables: the test sees their update
    assert legacy["averages"] != legacy["variables"]


HELPER_NAMED_TRAIN = '''
import tensorflow.compat.v1 as tf

DECAY = 0.999


def train(total_loss, global_step, workers):
    """Apply the gradients, then update the moving averages."""
    rate = tf.train.exponential_decay(0.1, global_step, 1000, 0.5, staircase=True)
    with tf.control_dependencies([]):
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(rate),
                                             replicas_to_aggregate=workers, total_num_replicas=workers)
        grads = opt.compute_gradients(total_loss)
    apply_op = opt.apply_gradients(grads, global_step=global_step)
    averages = tf.train.ExponentialMovingAverage(DECAY, global_step)
    with tf.control_dependencies([apply_op]):
        averages_op = averages.apply(tf.trainable_variables())
    return averages_op, opt


def main(cluster, server, is_chief, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        images = tf.placeholder(tf.float32, [None, 8])
        labels = tf.placeholder(tf.float32, [None, 1])
        weights = tf.Variable(tf.zeros([8, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(images, weights) - labels))
        train_op, opt = train(loss, global_step, 2)
    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=1000)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            x, y = next(batches)
            sess.run(train_op, feed_dict={images: x, labels: y})
'''


def test_a_helper_named_train_returning_the_averages_update_migrates():
    """`def train(total_loss, global_step)` reads `tf.train.*`: not a call of
    itself, so it is inlined; `with tf.control_dependencies([]):` adds no
    dependency and is unwrapped; the op it returns is the averages' update."""
    source = dedent(HELPER_NAMED_TRAIN)
    result = migrate_source(source)
    assert not [d for d in result.manual_work if d.code in ("TFM300", "TFM301")], [
        (d.line, d.message) for d in result.manual_work]
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "def train(" not in out and "control_dependencies" not in out and "tf.train.SyncReplicas" not in out
    assert "MultiWorkerMirroredStrategy" in out
    assert "averages = tf.train.ExponentialMovingAverage(DECAY, global_step)" in out
    replica = out[out.index("def train_step_replica"):out.index("def run_train_step")]
    assert replica.index("apply_gradients") < replica.index("global_step.assign_add(1)") < replica.index(
        "averages.apply(trainable_variables)")
    assert "no set order" not in replica  # TF1 ordered them: after the update
    assert migrate_source(out).output == out


HARNESS_RUN = '''
import json, os, sys
import numpy as np
from migrate.runtime.harness import _Harness, losses_path
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
harness = _Harness()
harness.install()
step = tf.train.get_or_create_global_step()
inputs = tf.placeholder(tf.float32, [None, 3])
kernel = tf.Variable(tf.ones([3, 1]))
loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) - 1.0))
update = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
ema = tf.train.ExponentialMovingAverage(0.9, step)
if sys.argv[1] == "group":
    train_op = tf.group(update, ema.apply(tf.trainable_variables()))
else:
    with tf.control_dependencies([update]):
        train_op = ema.apply(tf.trainable_variables())
data = np.random.RandomState(0).rand(4, 3).astype(np.float32)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    printed = [sess.run([train_op, loss], {inputs: data})[1] for _ in range(3)]
lines = losses_path(harness.dir, harness.task).read_text().splitlines()
print(json.dumps({"printed": [float(p) for p in printed], "recorded": [json.loads(l)["loss"] for l in lines]}))
'''


@pytest.mark.parametrize("spelling", ["group", "ordered"])
def test_check_records_the_loss_of_a_train_op_grouped_with_moving_averages(spelling, tmp_path):
    """`tfmigrate check`'s harness finds the optimizer's train op behind the
    op the legacy session runs (the averages' update): it records each step's
    loss (it recorded none, and check could not compare such programs)."""
    pytest.importorskip("tensorflow")
    env = {**os.environ, "TFMIGRATE_HARNESS": "record", "TFMIGRATE_HARNESS_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", HARNESS_RUN, spelling], capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(seen["recorded"]) == 3
    assert seen["recorded"] == pytest.approx(seen["printed"], rel=1e-6)
