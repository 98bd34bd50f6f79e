"""TFM301 and checkpoints written and read by hand with a TF1 ``Saver`` in the
session's code (issue 14): ``saver.save(sess, path, global_step=step)`` every
N steps or at the end, ``saver.restore(sess, path)`` of the newest one at the
start, with their guards and their prints.

They map onto the migration's ``tf.train.Checkpoint``: a save becomes a
function saving it with a ``tf.train.CheckpointManager`` of the same directory,
name and ``max_to_keep`` at the same step number (the same files and the same
``checkpoint`` listing), a restore ``checkpoint.restore(path)``. What cannot be
carried over exactly is declined at the statement, with why.

Fixtures are written for these tests in the shapes seen in real scripts. The
runtime test runs the TF1 program and its migration on one local worker and
compares what they wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

import pytest
import tfm301_support
from tfm301_support import line_of, manual, tail_from

from migrate.codemod.engine import dedent, migrate_source


def migrate(source: str, select=("TFM301",)):
    return tfm301_support.migrate(source, select)


# a SyncReplicas trainer that restores the newest checkpoint, saves every few steps
# (printing the path) and once more at the end, on the chief
SYNC_HAND_SAVES = '''
import os

import tensorflow.compat.v1 as tf


def fit(cluster, server, is_chief, workers, samples, total_steps, save_every, model_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        inputs = tf.placeholder(tf.float32, [None, 4])
        expected = tf.placeholder(tf.float32, [None, 1])
        weights = tf.Variable(tf.zeros([4, 1]), name="weights")
        residual = tf.matmul(inputs, weights) - expected
        cost = tf.reduce_mean(tf.square(residual))
        step_counter = tf.Variable(0, name="step_counter", trainable=False)
        base = tf.train.GradientDescentOptimizer(0.05)
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = opt.minimize(cost, global_step=step_counter)
        init_tokens = opt.get_init_tokens_op()
        chief_runner = opt.get_chief_queue_runner()
        local_init = opt.chief_init_op if is_chief else opt.local_step_init_op
        ready = opt.ready_for_local_init_op
        init = tf.global_variables_initializer()
        snapshots = tf.train.Saver(max_to_keep=3)
    sv = tf.train.Supervisor(is_chief=is_chief, init_op=init, local_init_op=local_init,
                             ready_for_local_init_op=ready, global_step=step_counter)
    sess = sv.prepare_or_wait_for_session(server.target)
    if is_chief:
        sess.run(init_tokens)
        sv.start_queue_runners(sess, [chief_runner])
    newest = tf.train.latest_checkpoint(model_dir)
    if newest:
        snapshots.restore(sess, newest)
        print("resumed from", newest)
    step = 0
    while step < total_steps:
        _, value, step = sess.run([train_op, cost, step_counter],
                                  feed_dict={inputs: samples[0], expected: samples[1]})
        if is_chief and step % save_every == 0:
            # numbered by the step, listed in model_dir/checkpoint
            written = snapshots.save(sess, os.path.join(model_dir, "fit.ckpt"), global_step=step)
            print("saved", written)
    if is_chief:
        snapshots.save(sess, os.path.join(model_dir, "fit.ckpt"), global_step=step)
'''

SYNC_HAND_SAVES_TAIL = '''
# The training state, saved and restored by hand below.
checkpoint = tf.train.Checkpoint(step_counter=step_counter, base=base, weights=weights)
def save_checkpoint(path, number):
    # Saved as <path>-<number>; the 3 newest are kept and listed in the
    # directory's checkpoint file (tf.train.latest_checkpoint reads it).
    manager = tf.train.CheckpointManager(
        checkpoint, os.path.dirname(path), max_to_keep=3, checkpoint_name=os.path.basename(path))
    return manager.save(checkpoint_number=number)
newest = tf.train.latest_checkpoint(model_dir)
if newest:
    restore_checkpoint(checkpoint, newest, [step_counter, weights], base)
    print("resumed from", newest)
step = 0
while step < total_steps:
    value, step = run_train_step(samples[0], samples[1])
    if is_chief and step % save_every == 0:
        # numbered by the step, listed in model_dir/checkpoint
        written = save_checkpoint(os.path.join(model_dir, "fit.ckpt"), step)
        print("saved", written)
if is_chief:
    save_checkpoint(os.path.join(model_dir, "fit.ckpt"), step)
'''


def test_hand_saves_and_the_restore_go_through_the_migrations_checkpoint():
    result = migrate(SYNC_HAND_SAVES)
    out = result.output
    assert manual(result) == []
    assert "MultiWorkerMirroredStrategy" in out
    assert tail_from(out, "The training state, saved") == dedent(SYNC_HAND_SAVES_TAIL).lstrip("\n")
    assert "Saver(" not in out and "sess" not in out and "snapshots" not in out


def test_a_supervisor_checkpointing_a_logdir_shares_its_checkpoint_with_the_hand_saves():
    source = SYNC_HAND_SAVES.replace("global_step=step_counter)\n    sess =",
                                     "global_step=step_counter, logdir=model_dir)\n    sess =")
    result = migrate(source)
    out = result.output
    assert manual(result) == []
    # one checkpoint: the Supervisor's (restored on start, saved on its timer) is the one saved by hand
    assert out.count("tf.train.Checkpoint(") == 1
    assert "checkpoint_manager.save(checkpoint_number=step_counter)" in out
    assert "written = save_checkpoint(os.path.join(model_dir, \"fit.ckpt\"), step)" in out
    assert out.index("checkpoint = tf.train.Checkpoint(") < out.index("def save_checkpoint(path, number):")


# an asynchronous trainer with a plain session that resumes from get_checkpoint_state
ASYNC_STATE_RESTORE = '''
import os

import tensorflow.compat.v1 as tf


def train(cluster, server, batches, steps, out_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        y = tf.placeholder(tf.float32, [None, 1])
        kernel = tf.Variable(tf.zeros([2, 1]))
        bias = tf.Variable(tf.zeros([1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, kernel) + bias - y))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=global_step)
        saver = tf.train.Saver(tf.global_variables(), max_to_keep=2, keep_checkpoint_every_n_hours=1.5)
        init = tf.global_variables_initializer()
    with tf.Session(server.target) as sess:
        sess.run(init)
        state = tf.train.get_checkpoint_state(out_dir)
        if state and state.model_checkpoint_path:
            saver.restore(sess, state.model_checkpoint_path)
        for i in range(steps):
            _, loss_value = sess.run([train_op, loss], feed_dict={x: batches[0], y: batches[1]})
            if (i + 1) % 10 == 0:
                path = saver.save(sess, os.path.join(out_dir, "model.ckpt"), global_step=global_step)
                print("step", i, "loss", loss_value, "saved to", path)
'''


def test_a_plain_session_restoring_from_the_checkpoint_state_and_saving_by_the_step_variable():
    result = migrate(ASYNC_STATE_RESTORE)
    out = result.output
    assert manual(result) == []
    assert "ParameterServerStrategy" in out
    # a TF2 checkpoint is restored as it is, the TF1 job's own by its variables' names
    assert ("    if state and state.model_checkpoint_path:\n"
            "        restore_checkpoint(checkpoint, state.model_checkpoint_path, [global_step, kernel, bias])\n") in out
    assert out.startswith("import os\n\nimport tensorflow.compat.v1 as tf\n\n\ndef restore_checkpoint(")
    assert 'path = save_checkpoint(os.path.join(out_dir, "model.ckpt"), global_step)\n' in out
    assert "max_to_keep=2, keep_checkpoint_every_n_hours=1.5, checkpoint_name=os.path.basename(path))" in out
    assert "checkpoint = tf.train.Checkpoint(global_step=global_step, optimizer=optimizer, kernel=kernel," \
           " bias=bias)" in out


def test_a_saver_made_after_the_graph_block_goes_with_the_session():
    source = ASYNC_STATE_RESTORE.replace(
        "        saver = tf.train.Saver(tf.global_variables(), max_to_keep=2, keep_checkpoint_every_n_hours=1.5)\n",
        "").replace("    with tf.Session(server.target) as sess:\n",
                    "    saver = tf.train.Saver()\n    with tf.Session(server.target) as sess:\n")
    result = migrate(source)
    assert manual(result) == []
    assert "Saver()" not in result.output and "saver" not in result.output
    assert "max_to_keep=5, checkpoint_name" in result.output


@pytest.mark.parametrize("change, where, why", [
    (("saver = tf.train.Saver(tf.global_variables(), max_to_keep=2, keep_checkpoint_every_n_hours=1.5)",
      "saver = tf.train.Saver([kernel])"),
     "saver = tf.train.Saver([kernel])", "its Saver is made with `[kernel]`"),
    (('path = saver.save(sess, os.path.join(out_dir, "model.ckpt"), global_step=global_step)',
      'path = saver.save(sess, os.path.join(out_dir, "model.ckpt"))'),
     "path = saver.save(sess", "has no global_step: TF1 wrote `path` itself"),
    (('path = saver.save(sess, os.path.join(out_dir, "model.ckpt"), global_step=global_step)',
      'path = saver.save(sess, "model.ckpt", global_step=global_step, latest_filename="latest")'),
     "path = saver.save(sess", "passes `latest_filename=`"),
    (("            saver.restore(sess, state.model_checkpoint_path)\n",
      "            saver.restore(sess, state.model_checkpoint_path)\n            archive(saver)\n"),
     "archive(saver)", "it uses the Saver `saver` otherwise than in"),
])
def test_what_cannot_be_carried_over_exactly_is_declined_where_it_is(change, where, why):
    source = ASYNC_STATE_RESTORE.replace(*change)
    assert source != ASYNC_STATE_RESTORE
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert reason.line == line_of(source, where)
    assert reason.message.startswith("training not migrated: it checkpoints by hand with a TF1 Saver and ")
    assert why in reason.message


def test_a_saver_given_to_the_supervisor_only_is_the_supervisors_checkpointing():
    source = SYNC_HAND_SAVES.replace("global_step=step_counter)\n    sess =",
                                     "global_step=step_counter, logdir=model_dir, saver=snapshots)\n    sess =")
    source = source[:source.index("    newest = ")] + (
        "    step = 0\n"
        "    while step < total_steps:\n"
        "        _, step = sess.run([train_op, step_counter], feed_dict={inputs: samples[0], expected: samples[1]})\n")
    result = migrate(source)
    assert manual(result) == []
    assert "save_checkpoint" not in result.output and "Saver(" not in result.output


# ------------------------------------------------------------------------ runtime

# the runtime fixture numbers its checkpoints by its own loop counter, resumed from the
# restored step counter: TF1's value of a step counter fetched with a SyncReplicas train op
# (a reference variable read after the run; one replica's first update dropped as stale)
# is no part of what is compared here
COUNTED_SAVES = SYNC_HAND_SAVES.replace(
    """    step = 0
    while step < total_steps:
        _, value, step = sess.run([train_op, cost, step_counter],
                                  feed_dict={inputs: samples[0], expected: samples[1]})
        if is_chief and step % save_every == 0:
            # numbered by the step, listed in model_dir/checkpoint
            written = snapshots.save(sess, os.path.join(model_dir, "fit.ckpt"), global_step=step)
            print("saved", written)
    if is_chief:
        snapshots.save(sess, os.path.join(model_dir, "fit.ckpt"), global_step=step)
""", """    start = sess.run(step_counter) if newest else 0
    for i in range(start, total_steps):
        sess.run(train_op, feed_dict={inputs: samples[0], expected: samples[1]})
        if is_chief and (i + 1) % save_every == 0:
            written = snapshots.save(sess, os.path.join(model_dir, "fit.ckpt"), global_step=i + 1)
            print("saved", written)
    if is_chief:
        snapshots.save(sess, os.path.join(model_dir, "fit.ckpt"), global_step=total_steps)
""")

RUNNER = '''
import glob, json, os, sys
import numpy as np
import tensorflow as tf_api

legacy, model_dir, total_steps = sys.argv[1] == "legacy", sys.argv[2], int(sys.argv[3])
rng = np.random.RandomState(3)
samples = (rng.rand(8, 4).astype(np.float32), rng.rand(8, 1).astype(np.float32))
printed = []
print = lambda *args: printed.append(" ".join(str(a) for a in args))
if legacy:
    tf_api.compat.v1.disable_v2_behavior()
    port = int(sys.argv[4])
    cluster = tf_api.compat.v1.train.ClusterSpec({"worker": ["localhost:%d" % port]})
    server = tf_api.compat.v1.train.Server(cluster, job_name="worker", task_index=0)
    fit(cluster, server, True, 1, samples, total_steps, 4, model_dir)
else:
    fit(None, None, True, 1, samples, total_steps, 4, model_dir)
kept = {}
for index in sorted(glob.glob(os.path.join(model_dir, "fit.ckpt-*.index"))):
    prefix = index[: -len(".index")]
    reader = tf_api.train.load_checkpoint(prefix)
    names = {name.split("/")[0]: name for name, _ in tf_api.train.list_variables(prefix)}
    kept[os.path.basename(prefix)] = {
        "weights": reader.get_tensor(names["weights"]).ravel().tolist(),
        "step": int(reader.get_tensor(names["step_counter"])),
    }
listed = [os.path.basename(p) for p in tf_api.train.get_checkpoint_state(model_dir).all_model_checkpoint_paths]
sys.stdout.write(json.dumps({"kept": kept, "listed": listed,
                             "printed": [p.replace(model_dir, "DIR") for p in printed]}))
sys.stdout.flush()
os._exit(0)  # TF1's chief queue runner thread still waits on its queue
'''


def _run(program: str, *args: str) -> dict:
    run = subprocess.run([sys.executable, "-c", program, *args], check=False, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_migrated_program_writes_the_checkpoints_tf1_wrote_and_resumes_from_them_exactly():
    """One local worker: the TF1 program (SyncReplicas of one replica) and its
    migration (MultiWorkerMirroredStrategy) save at the same steps under the
    same names, keep the same three and list them alike; each migrated
    checkpoint holds the state after the steps its number says. Run again
    with more steps, the migration resumes from its newest checkpoint and
    writes, bit for bit, what one uninterrupted run writes; started on the TF1
    job's directory, it resumes from the TF1 checkpoint (its step counter)."""
    pytest.importorskip("tensorflow")
    import socket

    migrated = migrate_source(dedent(COUNTED_SAVES)).output  # all rules: `import tensorflow as tf`
    assert "Saver(" not in migrated and "start = step_counter.numpy() if newest else 0" in migrated
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as old_dir, tempfile.TemporaryDirectory() as new_dir, \
            tempfile.TemporaryDirectory() as straight_dir:
        tf1 = _run(dedent(COUNTED_SAVES) + RUNNER, "legacy", old_dir, "10", str(port))
        tf2 = _run(migrated + RUNNER, "migrated", new_dir, "10")
        resumed = _run(migrated + RUNNER, "migrated", new_dir, "14")
        straight = _run(migrated + RUNNER, "migrated", straight_dir, "14")
        # the migrated job started on the TF1 job's directory reads its checkpoint by name
        from_tf1 = _run(migrated + RUNNER, "migrated", old_dir, "14")
    assert sorted(tf1["kept"]) == sorted(tf2["kept"]) == ["fit.ckpt-10", "fit.ckpt-4", "fit.ckpt-8"]
    assert tf2["listed"] == tf1["listed"] == ["fit.ckpt-4", "fit.ckpt-8", "fit.ckpt-10"]
    assert tf2["printed"] == tf1["printed"] == ["saved DIR/fit.ckpt-4", "saved DIR/fit.ckpt-8"]
    assert all(saved["step"] == int(name.split("-")[1]) for name, saved in tf2["kept"].items())
    assert resumed["printed"] == ["resumed from DIR/fit.ckpt-10", "saved DIR/fit.ckpt-12"]
    assert resumed["listed"] == ["fit.ckpt-10", "fit.ckpt-12", "fit.ckpt-14"]
    assert resumed["kept"]["fit.ckpt-10"] == tf2["kept"]["fit.ckpt-10"]
    assert resumed["kept"]["fit.ckpt-12"] == straight["kept"]["fit.ckpt-12"]
    assert resumed["kept"]["fit.ckpt-14"] == straight["kept"]["fit.ckpt-14"]
    assert from_tf1["printed"] == ["resumed from DIR/fit.ckpt-10", "saved DIR/fit.ckpt-12"]
    # (the TF1 job's listing is not carried on, as a restarted TF1 Saver did not carry it either)
    assert from_tf1["listed"] == ["fit.ckpt-12", "fit.ckpt-14"]
    # it counted on from the TF1 counter it restored (a run from 0 would have saved fit.ckpt-4 again)
    assert tf1["kept"]["fit.ckpt-10"]["step"] > 4
    assert [from_tf1["kept"][n]["step"] for n in ("fit.ckpt-12", "fit.ckpt-14")] == [12, 14]


# ------------------------------------------------------------------------ the cluster from a helper

# the cluster and its server made by a helper, the ps's join in another, the training in a
# procedure the device-setter block of a function given the cluster by main() calls: the
# shape of a program split into small helpers
CLUSTER_FROM_HELPER = '''
import tensorflow.compat.v1 as tf

FLAGS = tf.app.flags.FLAGS


def make_cluster():
    workers = FLAGS.worker_hosts.split(",")
    spec = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": workers})
    node = tf.train.Server(spec, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    return spec, node, len(workers)


def serve_if_ps(node):
    if FLAGS.job_name == "ps":
        node.join()


def build_and_train(node, count, samples):
    inputs = tf.placeholder(tf.float32, [None, 4])
    weights = tf.Variable(tf.zeros([4, 1]))
    cost = tf.reduce_mean(tf.square(tf.matmul(inputs, weights) - 1.0))
    counter = tf.train.get_or_create_global_step()
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=count)
    train_op = opt.minimize(cost, global_step=counter)
    hooks = [opt.make_session_run_hook(FLAGS.task_index == 0), tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=node.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={inputs: samples})


def work(spec, node, count, samples):
    with tf.device(tf.train.replica_device_setter(cluster=spec)):
        build_and_train(node, count, samples)


def main(_):
    spec, node, count = make_cluster()
    serve_if_ps(node)
    work(spec, node, count, [[1.0, 2.0, 3.0, 4.0]])


if __name__ == "__main__":
    tf.app.run()
'''


def test_a_cluster_built_by_a_helper_reaches_the_training_as_a_resolver():
    """The cluster and server a helper builds (or main() builds) and hands to
    the function that trains: the cluster resolver takes the server's place on
    that way (rules/_server_flow.py), and the training migrates."""
    source = dedent(CLUSTER_FROM_HELPER)
    result = migrate_source(source)
    out = result.output
    assert "replica_device_setter" not in out and "tf.train.Server" not in out
    assert "strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in out
    assert "    return spec, cluster_resolver, len(workers)\n" in out
    assert manual(result) == []
    compile(out, "<migrated>", "exec")
    # built by main() and handed to the function that trains: the same
    inline = source.replace("    spec, node, count = make_cluster()\n    serve_if_ps(node)\n", (
        "    workers = FLAGS.worker_hosts.split(\",\")\n"
        "    spec = tf.train.ClusterSpec({\"ps\": FLAGS.ps_hosts.split(\",\"), \"worker\": workers})\n"
        "    node = tf.train.Server(spec, job_name=FLAGS.job_name, task_index=FLAGS.task_index)\n"
        "    count = len(workers)\n"
        "    if FLAGS.job_name == \"ps\":\n"
        "        node.join()\n"))
    inline = inline[:inline.index("def make_cluster():")] + inline[inline.index("def build_and_train("):]
    result = migrate_source(inline)
    assert "tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in result.output
    assert manual(result) == [] and "node.join()" not in result.output
    assert "replica_device_setter" not in result.output
