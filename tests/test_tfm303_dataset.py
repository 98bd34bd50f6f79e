"""TFM303: a tower loop whose fed batches are a function of the loop index
becomes a distributed tf.data pipeline with several steps per tf.function
call (the guides' form); batches the loop computes from its own state, and
towers that read whole values or rows by index, keep the host-fed steps.

The sources are small programs written for these tests. That the dataset form
trains bit for bit like the TF1 towers is proved by ``tfmigrate check`` on
``legacy_reference/in_graph_towers.py`` (tests/test_check.py::test_towers_step_by_step).
"""

from __future__ import annotations

import ast
import math
import subprocess
import sys
import textwrap

from migrate.codemod.engine import migrate_source

TOWERS = '''
import numpy as np
import tensorflow.compat.v1 as tf

NUM_TOWERS = 2
BATCH = 8


def make_batch(index, size):
    rng = np.random.RandomState(index)
    return rng.normal(size=(size, 3)).astype(np.float32), rng.normal(size=(size, 1)).astype(np.float32)


def tower_loss(inputs, targets):
    w = tf.get_variable("w", [3, 1])
    return tf.reduce_mean(tf.square(tf.matmul(inputs, w) - targets))


def average_gradients(tower_grads):
    return [(tf.add_n([g for g, _ in pairs]) / len(pairs), pairs[0][1]) for pairs in zip(*tower_grads)]


def train(steps):
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        opt = tf.train.GradientDescentOptimizer(0.1)
        inputs = tf.placeholder(tf.float32, [BATCH, 3])
        targets = tf.placeholder(tf.float32, [BATCH, 1])
        input_splits = tf.split(inputs, NUM_TOWERS)
        target_splits = tf.split(targets, NUM_TOWERS)
        tower_grads = []
        with tf.variable_scope(tf.get_variable_scope()):
            for i in range(NUM_TOWERS):
                with tf.device("/cpu:%d" % i):
                    loss = tower_loss(input_splits[i], target_splits[i])
                    tf.get_variable_scope().reuse_variables()
                    tower_grads.append(opt.compute_gradients(loss))
        train_op = opt.apply_gradients(average_gradients(tower_grads))
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": NUM_TOWERS})) as sess:
            sess.run(tf.global_variables_initializer())
            for step in range(steps):
                BATCH_LINE
                _, loss_value = sess.run([train_op, loss], feed_dict={inputs: xs, targets: ys})
                print(step, loss_value)
'''


def _result(*batch_lines: str):
    source = textwrap.dedent(TOWERS).lstrip("\n").replace("BATCH_LINE", ("\n" + " " * 16).join(batch_lines))
    result = migrate_source(source, select=["TFM303"])
    ast.parse(result.output)
    assert migrate_source(result.output, select=["TFM303"]).output == result.output, "a second run changed it"
    return result


def _migrate(*batch_lines: str) -> str:
    return _result(*batch_lines).output


def _kept_host_fed(result) -> str:
    kept = [d for d in result.diagnostics if "stay fed from host arrays" in d.message]
    assert len(kept) == 1 and kept[0].severity == "info", result.diagnostics
    return kept[0].message


def _function(out: str, name: str) -> str:
    tree = ast.parse(out)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(out, node)
    raise AssertionError(f"no function {name}")


def test_batches_from_the_index_become_a_distributed_dataset_with_steps_per_call():
    out = _migrate("xs, ys = make_batch(step, BATCH)")
    # the same batches, typed and shaped as the placeholders, split across the replicas
    assert "tf.data.Dataset.from_generator(\n" in out
    assert "lambda: (make_batch(step, BATCH) for step in range(steps))" in out
    assert "tf.TensorSpec([BATCH, 3], tf.float32)" in out and "tf.TensorSpec([BATCH, 1], tf.float32)" in out
    assert "iterator = iter(strategy.experimental_distribute_dataset(dataset))" in out
    # several steps per call inside the tf.function, each on the next batch
    steps = _function(out, "train_steps")
    assert "def train_steps(iterator, steps):" in steps
    assert "return [train_step(*next(iterator)) for _ in range(steps)]" in steps
    # replicas get their slices from the dataset: no in-replica split/gather
    step = _function(out, "train_step")
    assert "train_step_slice" not in step and "tf.split" not in step
    assert "strategy.run(train_step_replica, args=(inputs, targets))" in step
    # no host-side stacking is left; the loop body runs on each step's results
    for plumbing in ("pending_steps", "tf.unstack", "convert_to_tensor", "run_pending_steps", "finish_train_step"):
        assert plumbing not in out, plumbing
    assert "for step, step_results in zip(range(first_step, first_step + call_steps), train_steps(iterator, call_steps)):" \
        in out
    host = out[out.index("for first_step in range(0, steps, steps_per_call):"):]
    assert "loss_value = step_results.numpy()" in host and "print(step, loss_value)" in host


def test_a_batch_from_what_the_loop_computes_keeps_the_host_fed_steps():
    # the batch reads a value the loop binds: a generator cannot compute it ahead
    result = _result("size = BATCH if step else BATCH", "xs, ys = make_batch(step, size)")
    out = result.output
    assert "from_generator" not in out and "experimental_distribute_dataset" not in out
    assert "pending_steps" in out and "train_step_slice" in out
    assert "the batch is computed from values the loop itself computes" in _kept_host_fed(result)


def test_fed_arrays_read_elsewhere_in_the_loop_keep_the_host_fed_steps():
    result = _result("xs, ys = make_batch(step, BATCH)", "print(xs.shape)")
    assert "from_generator" not in result.output and "train_step_slice" in result.output
    assert "`xs` is read outside the step too" in _kept_host_fed(result)


def test_converted_loops_report_nothing_kept():
    result = _result("xs, ys = make_batch(step, BATCH)")
    assert not [d for d in result.diagnostics if "stay fed from host arrays" in d.message]


def test_the_dataset_form_runs_every_step_once_including_a_partial_last_call(tmp_path):
    out = _migrate("xs, ys = make_batch(step, BATCH)")
    program = tmp_path / "towers.py"
    program.write_text(out + "\n\ntrain(6)\n")
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    logged = [line.split() for line in run.stdout.splitlines() if line.strip()]
    assert [int(step) for step, _ in logged] == list(range(6))
    losses = [float(loss) for _, loss in logged]
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]


def test_a_loop_that_leaves_on_the_loss_runs_one_host_fed_step_per_call_and_says_so():
    source = textwrap.dedent(TOWERS).lstrip("\n").replace("BATCH_LINE", "xs, ys = make_batch(step, BATCH)")
    source = source.replace("print(step, loss_value)", "if loss_value < 0.01:\n                    break")
    result = migrate_source(source, select=["TFM303"])
    ast.parse(result.output)
    assert "run_train_step(xs, ys)" in result.output and "from_generator" not in result.output
    kept = [d for d in result.diagnostics if "one step per tf.function call" in d.message]
    assert len(kept) == 1 and kept[0].severity == "info"
