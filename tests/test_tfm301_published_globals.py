"""TFM301 and the functions a training loop hands its session to: an
evaluation helper run every few steps (``evaluate(sess, step, test_x,
test_y)``) that runs graph values of the device-setter block in the TF1
session, reaching them as module globals the block publishes (``global
inputs, targets, loss``), as parameters its callers pass (``report(sess,
loss, x, y, ...)``), or, in a script, reading the session itself as a module
global.

Each distinct fetch set of such a helper becomes an evaluation tf.function, as
the loop's own evaluation runs do; the helper takes those functions where it
took the session (the graph values it was passed, and the `global` that
published them, go) and calls them with the same feeds. What cannot be
carried (a session kept by an object, a helper that trains or uses the
session otherwise) is declined with the reason where it happens.

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from migrate.codemod.engine import dedent, migrate_source
from tests.tfm301_support import line_of, manual, migrate

# a sparse logistic regression (feature ids and weights fed as the parts of a
# SparseTensor), the placeholders and the loss published for `evaluate()`
PUBLISHED = '''
import tensorflow.compat.v1 as tf

FEATURES = 50


def evaluate(sess, step, labels, ids, weights, positions, rows):
    error = sess.run(mean_loss, feed_dict={
        label_in: labels, id_in: ids, weight_in: weights, position_in: positions, shape_in: [rows, FEATURES]})
    print("eval %d %r" % (step, float(error)))


def train(cluster, batches, held_out, workers=1):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        global label_in, id_in, weight_in, position_in, shape_in, mean_loss
        step = tf.train.get_or_create_global_step()
        label_in = tf.placeholder(tf.float32, [None, 1])
        id_in = tf.placeholder(tf.int64, [None])
        weight_in = tf.placeholder(tf.float32, [None])
        position_in = tf.placeholder(tf.int64, [None, 2])
        shape_in = tf.placeholder(tf.int64, [2])
        sparse_ids = tf.SparseTensor(indices=position_in, values=id_in, dense_shape=shape_in)
        sparse_weights = tf.SparseTensor(indices=position_in, values=weight_in, dense_shape=shape_in)
        table = tf.Variable(tf.zeros([FEATURES, 1]), name="table")
        bias = tf.Variable(tf.zeros([1]), name="bias")
        logits = tf.nn.embedding_lookup_sparse(table, sparse_ids, sparse_weights, combiner="sum") + bias
        mean_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label_in, logits=logits))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.5),
                                             replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = opt.minimize(mean_loss, global_step=step)
    hooks = [opt.make_session_run_hook(True), tf.train.StopAtStepHook(last_step=len(batches))]
    with tf.train.MonitoredTrainingSession(is_chief=True, hooks=hooks) as sess:
        for k, (labels, ids, weights, positions, rows) in enumerate(batches):
            if sess.should_stop():
                break
            sess.run(train_op, feed_dict={label_in: labels, id_in: ids, weight_in: weights,
                                          position_in: positions, shape_in: [rows, FEATURES]})
            if k % 2 == 0:
                evaluate(sess, k, held_out[0], held_out[1], held_out[2], held_out[3], held_out[4])
'''

# a script on a ps/worker cluster: the helper is passed the graph values it
# runs, and runs two fetch sets (the loss on held-out data, the global step)
PASSED = '''
import sys
import numpy as np
import tensorflow.compat.v1 as tf

cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
server = tf.train.Server(cluster, job_name=sys.argv[1], task_index=0)


def report(sess, step, error_tensor, step_tensor, x_ph, y_ph, xs, ys):
    error = sess.run(error_tensor, {x_ph: xs, y_ph: ys})
    done = sess.run(step_tensor)
    print("step %d (global %d): held-out error %.5f" % (step, done, error))


if sys.argv[1] == "ps":
    server.join()
else:
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 4])
        labels = tf.placeholder(tf.float32, [None, 1])
        w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
        error = tf.reduce_mean(tf.abs(tf.matmul(images, w) - labels))
        counter = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(0.01).minimize(error, global_step=counter)
    rng = np.random.RandomState(0)
    held_x = rng.rand(16, 4).astype(np.float32)
    held_y = held_x.sum(axis=1, keepdims=True)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                           hooks=[tf.train.StopAtStepHook(last_step=50)]) as sess:
        for local in range(1000):
            xs = rng.rand(8, 4).astype(np.float32)
            sess.run(train_op, feed_dict={images: xs, labels: xs.sum(axis=1, keepdims=True)})
            if local % 10 == 0:
                report(sess, local, error, counter, images, labels, held_x, held_y)
'''

# the same script's helper reading the session and the graph as module globals
SCRIPT_GLOBALS = PASSED.replace(
    "def report(sess, step, error_tensor, step_tensor, x_ph, y_ph, xs, ys):\n"
    "    error = sess.run(error_tensor, {x_ph: xs, y_ph: ys})\n"
    "    done = sess.run(step_tensor)\n"
    '    print("step %d (global %d): held-out error %.5f" % (step, done, error))\n',
    "def report(step, xs, ys):\n"
    "    value = sess.run(error, {images: xs, labels: ys})\n"
    "    done = sess.run(counter)\n"
    '    print("step %d (global %d): held-out error %.5f" % (step, done, value))\n',
).replace("report(sess, local, error, counter, images, labels, held_x, held_y)", "report(local, held_x, held_y)")


def _function(code: str, name: str) -> str:
    lines = code.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
    return "\n".join(lines[start:end])


def test_published_globals_become_an_evaluation_function_the_helper_is_handed():
    assert SCRIPT_GLOBALS != PASSED
    result = migrate(PUBLISHED)
    out = result.output
    assert not manual(result), [d.message for d in manual(result)]
    assert "MultiWorkerMirroredStrategy" in out
    assert "global " not in out  # the graph values it published live in the step functions now
    helper = _function(out, "evaluate")
    assert helper.startswith("def evaluate(compute_mean_loss, step, labels, ids, weights, positions, rows):")
    # the same feeds, as the evaluation function's arguments (in its parameters' order)
    assert "compute_mean_loss(labels, ids, weights, positions, [rows, FEATURES])" in helper
    assert not re.search(r"\bsess\b", out) and "placeholder(" not in out
    evaluation = out[out.index("def compute_mean_loss("):]
    assert evaluation.startswith("def compute_mean_loss(label_in, id_in, weight_in, position_in, shape_in):")
    assert "@tf.function\n    def compute_mean_loss(" in out
    assert "evaluate(compute_mean_loss, k, held_out[0], held_out[1], held_out[2], held_out[3], held_out[4])" in out


def test_graph_values_passed_as_parameters_leave_the_helper_and_its_calls():
    result = migrate(PASSED)
    out = result.output
    assert not manual(result), [d.message for d in manual(result)]
    assert "ParameterServerStrategy" in out
    helper = _function(out, "report")
    # one evaluation function per fetch set, handed where the session was, in the order it ran them
    assert helper.startswith("def report(compute_error, compute_counter, step, xs, ys):")
    assert "compute_error(xs, ys)" in helper and "compute_counter()" in helper
    assert "report(compute_error, compute_counter, local, held_x, held_y)" in out
    assert "error_tensor" not in out and "x_ph" not in out and not re.search(r"\bsess\b", out)
    # the helper evaluates the model: the loop waits for each step before calling it
    assert "run_train_step(xs, xs.sum(axis=1, keepdims=True))" in out and "pending_steps" not in out


def test_a_script_helper_reading_the_session_as_a_global_calls_the_evaluation_functions():
    result = migrate(SCRIPT_GLOBALS)
    out = result.output
    assert not manual(result), [d.message for d in manual(result)]
    helper = _function(out, "report")
    assert helper.startswith("def report(step, xs, ys):")
    assert "compute_error(xs, ys)" in helper and "compute_counter()" in helper
    # module-level definitions, which the helper reads as it read the session
    assert "\n    def compute_error(images, labels):" in out and "\n    def compute_counter():" in out
    assert "report(local, held_x, held_y)" in out and not re.search(r"\bsess\b", out)
    # the call names no evaluation function, yet it evaluates the model: no step runs ahead of it
    assert "pending_steps" not in out


def test_a_helper_called_twice_with_the_session_shares_one_evaluation_function():
    source = PASSED.replace(
        "                report(sess, local, error, counter, images, labels, held_x, held_y)\n",
        "                report(sess, local, error, counter, images, labels, held_x, held_y)\n"
        "        report(sess, -1, error, counter, images, labels, held_x, held_y)\n")
    out = migrate(source).output
    assert out.count("def compute_error(") == 1
    assert "report(compute_error, compute_counter, -1, held_x, held_y)" in out


def test_a_helper_passed_the_fetches_it_runs_together_returns_them_together():
    source = PUBLISHED.replace(
        "def evaluate(sess, step, labels, ids, weights, positions, rows):\n"
        "    error = sess.run(mean_loss, feed_dict={",
        "def evaluate(sess, step, step_tensor, loss_tensor, labels, ids, weights, positions, rows):\n"
        "    done, error = sess.run([step_tensor, loss_tensor], feed_dict={",
    ).replace("evaluate(sess, k, held_out", "evaluate(sess, k, step, mean_loss, held_out")
    out = migrate(source).output
    helper = _function(out, "evaluate")
    assert helper.startswith("def evaluate(compute_step, step, labels, ids, weights, positions, rows):")
    assert ("done, error = tf.nest.map_structure(lambda value: value.numpy(), compute_step(labels, ids, weights,"
            " positions, [rows, FEATURES]))") in helper
    assert "return step, mean_loss" in out
    assert "evaluate(compute_step, k, held_out[0]" in out


def test_an_evaluation_defined_in_the_training_function_keeps_the_loop_waiting_for_each_step():
    source = PASSED.replace(
        "def report(sess, step, error_tensor, step_tensor, x_ph, y_ph, xs, ys):\n"
        "    error = sess.run(error_tensor, {x_ph: xs, y_ph: ys})\n"
        "    done = sess.run(step_tensor)\n"
        '    print("step %d (global %d): held-out error %.5f" % (step, done, error))\n', "",
    ).replace(
        "        for local in range(1000):\n",
        "        def report(step):\n"
        "            value = sess.run(error, {images: held_x, labels: held_y})\n"
        '            print("step %d: held-out error %.5f" % (step, value))\n\n'
        "        for local in range(1000):\n",
    ).replace("report(sess, local, error, counter, images, labels, held_x, held_y)", "report(local)")
    out = migrate(source).output
    assert "value = tf.nest.map_structure(lambda value: value.numpy(), compute_error(held_x, held_y))" in out
    # it evaluates the model: no step may run ahead of it, as none did in TF1
    assert "pending_steps" not in out and "run_train_step(xs, xs.sum(axis=1, keepdims=True))" in out


def _declined(source: str, marker: str):
    """The training stays TF1 with one TFM301 reason, located at ``marker``."""
    source = dedent(source)
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    reasons = manual(result)
    assert reasons, "no reason given"
    located = [d for d in reasons if d.line == line_of(source, marker)]
    assert located, [(d.line, d.message) for d in reasons]
    return located[0]


def test_a_helper_using_the_session_otherwise_is_declined_where_it_does():
    source = PUBLISHED.replace(
        '    print("eval %d %r" % (step, float(error)))\n',
        '    print("eval %d %r" % (step, float(error)))\n'
        '    tf.train.write_graph(sess.graph_def, "/tmp", "eval.pbtxt")\n')
    reason = _declined(source, "write_graph")
    assert "`evaluate()` uses the TF1 session `sess` otherwise than to run graph values" in reason.message
    assert "hands the TF1 session `sess` to `evaluate()`" in reason.message


def test_a_helper_that_trains_is_declined():
    source = PASSED.replace("    done = sess.run(step_tensor)\n", "    done = sess.run(step_tensor)\n"
                            "    sess.run(train_op, {x_ph: xs, y_ph: ys})\n")
    reason = _declined(source, "sess.run(train_op, {x_ph")
    assert "runs the train op" in reason.message and "not its training" in reason.message


def test_a_helper_also_called_outside_the_session_code_is_declined():
    source = PASSED.replace("if sys.argv[1] == \"ps\":\n", "def later(sess):\n    report(sess, 0, error, counter,"
                            " images, labels, None, None)\n\n\nif sys.argv[1] == \"ps\":\n")
    reason = _declined(source, "report(sess, local, error")
    assert "`report()` is also called as `report(sess, 0, error, counter, images, labels, None, None)`" in reason.message
    assert "migrate `report()` by hand" in reason.hint


def test_a_helper_run_leaving_a_placeholder_unfed_is_declined_there():
    source = PASSED.replace("error = sess.run(error_tensor, {x_ph: xs, y_ph: ys})",
                            "error = sess.run(error_tensor, {x_ph: xs})")
    reason = _declined(source, "error = sess.run(error_tensor, {x_ph: xs})")
    assert "`report()` runs `error` feeding no `labels`, which it needs" in reason.message


def test_a_helper_passed_on_as_a_value_is_declined():
    source = PASSED.replace("        for local in range(1000):\n",
                            "        callbacks = [report]\n        for local in range(1000):\n")
    reason = _declined(source, "report(sess, local, error")
    assert "`report()` is also referred to otherwise than by a call" in reason.message


def test_a_helper_a_call_gives_no_session_is_declined():
    source = PASSED.replace("def report(sess, step, error_tensor, step_tensor, x_ph, y_ph, xs, ys):",
                            "def report(sess=None, step=0, error_tensor=error, step_tensor=counter, x_ph=images,"
                            " y_ph=labels, xs=None, ys=None):").replace(
        "        for local in range(1000):\n", "        report(step=-1)\n        for local in range(1000):\n")
    reason = _declined(source, "report(step=-1)")
    assert "`report()` is called with the TF1 session as `sess` here and without it elsewhere" in reason.message


def test_a_defaulted_session_parameter_keeps_the_parameter_list_valid():
    source = PASSED.replace("def report(sess, step, error_tensor, step_tensor, x_ph, y_ph, xs, ys):",
                            "def report(step, error_tensor, step_tensor, x_ph, y_ph, xs=None, ys=None, sess=None):"
                            ).replace("report(sess, local, error, counter, images, labels, held_x, held_y)",
                                      "report(local, error, counter, images, labels, held_x, held_y, sess=sess)")
    out = migrate(source).output
    assert "def report(step, xs=None, ys=None, compute_error=None, compute_counter=None):" in out
    assert "report(local, held_x, held_y, compute_error=compute_error, compute_counter=compute_counter)" in out


def test_a_feed_dict_bound_to_a_name_is_keyed_by_the_evaluation_functions_parameters():
    source = PASSED.replace("error = sess.run(error_tensor, {x_ph: xs, y_ph: ys})",
                            "feed = {x_ph: xs, y_ph: ys}\n    error = sess.run(error_tensor, feed)")
    result = migrate(source)
    assert not manual(result), [d.message for d in manual(result)]
    helper = _function(result.output, "report")
    assert '    feed = {"images": xs, "labels": ys}\n' in helper
    assert "compute_error(**feed)" in helper


def test_a_feed_built_by_a_call_is_declined_at_the_run():
    source = PASSED.replace("error = sess.run(error_tensor, {x_ph: xs, y_ph: ys})",
                            "feed = dict(zip([x_ph, y_ph], [xs, ys]))\n    error = sess.run(error_tensor, feed)")
    reason = _declined(source, "error = sess.run(error_tensor, feed)")
    assert "`feed_dict=feed`" in reason.message


def test_a_helper_exporting_the_graph_keeps_the_exports_own_reason():
    source = PASSED.replace("def report(sess, step,", "def export(sess, path):\n"
                            "    builder = tf.saved_model.builder.SavedModelBuilder(path)\n"
                            "    builder.add_meta_graph_and_variables(sess, [\"serve\"])\n"
                            "    builder.save()\n\n\n"
                            "def report(sess, step,").replace(
        "        for local in range(1000):\n", "        export(sess, \"/tmp/model\")\n        for local in range(1000):\n")
    reason = _declined(source, "export(sess, \"/tmp/model\")")
    assert "it hands the trained graph to `export()`, which exports it for serving" in reason.message


def test_a_session_kept_by_an_object_names_the_class_and_its_runs():
    source = PASSED.replace(
        "if sys.argv[1] == \"ps\":\n",
        "class Prefetcher:\n"
        "    def attach(self, session):\n"
        "        self.session = session\n\n"
        "    def next_rows(self, rows):\n"
        "        return self.session.run(rows)\n\n\n"
        "if sys.argv[1] == \"ps\":\n",
    ).replace("        for local in range(1000):\n",
              "        prefetcher = Prefetcher()\n        prefetcher.attach(sess)\n        for local in range(1000):\n")
    reason = _declined(source, "prefetcher.attach(sess)")
    assert ("hands the TF1 session `sess` to `prefetcher.attach(...)` (a method of `Prefetcher`, a class of this"
            " module), which keeps it as `self.session` for session runs of its own (`self.session.run(rows)`)"
            in reason.message)


def test_the_reason_names_the_mode_under_which_an_object_keeps_the_session():
    source = PASSED.replace(
        "if sys.argv[1] == \"ps\":\n",
        "class Prefetcher:\n"
        "    def attach(self, session):\n"
        "        self.session = session\n\n\n"
        "if sys.argv[1] == \"ps\":\n",
    ).replace("        for local in range(1000):\n",
              "        if len(sys.argv) > 2:\n            Prefetcher().attach(sess)\n"
              "        prefetcher = Prefetcher()\n"
              "        if sys.argv[2:] == [\"prefetch\"]:\n            prefetcher.attach(sess)\n"
              "        for local in range(1000):\n")
    reason = _declined(source, "    prefetcher.attach(sess)")
    assert ("`prefetcher.attach(...)` (a method of `Prefetcher`, a class of this module), which keeps it as"
            " `self.session` (under `if sys.argv[2:] == [\"prefetch\"]:`): TF2 has no session") in reason.message


SPARSE_PLACEHOLDER = """
import tensorflow.compat.v1 as tf


def train(cluster, server, batches):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        rows = tf.sparse_placeholder(tf.float32)
        labels = tf.placeholder(tf.float32, [None, 1])
        w = tf.Variable(tf.zeros([20, 1]))
        logits = tf.sparse_tensor_dense_matmul(rows, w)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           hooks=[tf.train.StopAtStepHook(last_step=len(batches))]) as sess:
        for x, y in batches:
            sess.run(train_op, feed_dict={rows: x, labels: y})
"""


def test_a_sparse_placeholder_is_declined_as_such_where_it_is_fed():
    reason = _declined(SPARSE_PLACEHOLDER, "sess.run(train_op")
    assert "`rows` is a sparse placeholder" in reason.message
    assert "tf.SparseTensor(indices, values, dense_shape)" in reason.hint


def test_a_session_published_as_a_global_by_the_training_function_is_declined():
    source = PUBLISHED.replace("def evaluate(sess, step,", "def evaluate(step,").replace(
        "evaluate(sess, k,", "evaluate(k,").replace(
        "    hooks = [opt.make_session_run_hook(True)", "    global sess\n    hooks = [opt.make_session_run_hook(True)")
    reason = _declined(source, "def evaluate(step,")
    assert "runs the TF1 session `sess` as a module global" in reason.message
    assert "hand `evaluate()` the session as a parameter" in reason.hint


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# TF1's meaning of PUBLISHED on one replica: SyncReplicasOptimizer aggregating
# one gradient per step is its optimizer (the same reference the rule's other
# equivalence tests take; a one-replica SyncReplicas job run in-process drops
# its first gradient as stale and waits on its token queue)
ONE_REPLICA = PUBLISHED.replace(
    "opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.5),\n"
    "                                             replicas_to_aggregate=workers, total_num_replicas=workers)",
    "opt = tf.train.GradientDescentOptimizer(0.5)",
).replace("hooks = [opt.make_session_run_hook(True), ", "hooks = [")

DATA = """
import numpy as np
rng = np.random.RandomState(7)


def sparse_batch(rows):
    ids, weights, positions = [], [], []
    for row in range(rows):
        for column, feature in enumerate(rng.choice(50, size=3, replace=False)):
            ids.append(int(feature))
            weights.append(float(rng.rand()))
            positions.append([row, column])
    labels = (rng.rand(rows, 1) > 0.5).astype(np.float32)
    return labels, ids, weights, positions, rows


batches = [sparse_batch(8) for _ in range(6)]
held_out = sparse_batch(16)
train(None, batches, held_out)
"""


@pytest.mark.slow
def test_the_migrated_evaluation_prints_the_legacy_values():
    """Run the legacy program (TF1 graph, its meaning on one replica) and the
    migrated one (one MultiWorkerMirroredStrategy worker) on the same sparse
    batches: the evaluations print the same values after the same steps."""
    pytest.importorskip("tensorflow")
    assert ONE_REPLICA.count("SyncReplicas") == 0
    reference = dedent(ONE_REPLICA) + "tf.disable_v2_behavior()\n" + DATA
    migrated = migrate(PUBLISHED).output + DATA
    env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": {"worker": [f"127.0.0.1:{_free_port()}"]},
                                                  "task": {"type": "worker", "index": 0}})}
    printed = []
    for program, run_env in ((reference, os.environ), (migrated, env)):
        run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=run_env,
                             timeout=300, check=False)
        assert run.returncode == 0, run.stderr[-3000:]
        printed.append([line for line in run.stdout.splitlines() if line.startswith("eval ")])
    assert len(printed[0]) == 3, printed
    assert printed[1] == printed[0]
    # the evaluations saw training move the model
    assert len({line.split()[2] for line in printed[0]}) == 3
