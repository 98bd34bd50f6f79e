"""TFM301 on ParameterServerStrategy: which training loops queue their steps
(the rest of the body runs on each step's results a few steps later) and
which keep waiting for every step.

Each case is a legacy loop body put into the same asynchronous ps/worker
program; a no-op case (the loop must keep ``run_train_step``) and a pipelined
case (steps queued several per closure by ``queue_pending_steps``, the tail in
``finish_train_step``) per feature, in the style of pyupgrade's tests; the
same for MirroredStrategy towers, whose steps run several per call. Real equivalence of pipelined loops is proved by
``tfmigrate check`` runs in test_check.py (``rewrites/async_ps.py``).
"""

from __future__ import annotations

import ast
from textwrap import dedent, indent

import pytest

from migrate.codemod.engine import migrate_source

PROGRAM = '''\
import tensorflow as tf

FLAGS = tf.app.flags.FLAGS
tf.app.flags.DEFINE_integer("steps", 100, "")


def batch_for(step):
    return [[float(step)] * 3]


def main(_):
    cluster = tf.train.ClusterSpec({{"ps": ["localhost:2222"], "worker": ["localhost:2223"]}})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, hooks=hooks{session_args}) as sess:
{loop}
{after}

if __name__ == "__main__":
    tf.app.run()
'''


def migrate(loop: str, after: str = "", session_args: str = "") -> str:
    src = PROGRAM.format(loop=indent(dedent(loop).strip("\n"), " " * 8),
                         after=indent(dedent(after).strip("\n"), " " * 4) if after else "",
                         session_args=session_args)
    ast.parse(src)
    result = migrate_source(src)
    assert "ParameterServerStrategy(" in result.output, result.output
    ast.parse(result.output)
    # a second run over migrated output changes nothing
    assert migrate_source(result.output).output == result.output
    return result.output


def pipelined(out: str) -> bool:
    queued = "queue_pending_steps()" in out or "schedule_train_step(" in out
    return queued and "finish_train_step(" in out and "def run_train_step" not in out


def function_source(out: str, name: str) -> str:
    tree = ast.parse(out)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(out, node)
    raise AssertionError(f"no function {name} in:\n{out}")


# --------------------------------------------------------------- waits (no-op)

WAITING_LOOPS = {
    "tail breaks on the loss": """
        while not sess.should_stop():
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
            if value < 0.01:
                break
    """,
    "stop condition reads the loss": """
        value = 1.0
        while value > 0.01:
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
    """,
    "tail reads the model state": """
        while not sess.should_stop():
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
            print(sess.run(global_step), value)
    """,
    "tail evaluates the model": """
        while not sess.should_stop():
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
            print(sess.run(loss, feed_dict={x: batch_for(1)}))
    """,
    "step inside try": """
        while not sess.should_stop():
            try:
                _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
            except tf.errors.AbortedError:
                continue
    """,
    "two steps per iteration": """
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: batch_for(0)})
            sess.run(train_op, feed_dict={x: batch_for(1)})
    """,
}


@pytest.mark.parametrize("loop", list(WAITING_LOOPS.values()), ids=list(WAITING_LOOPS))
def test_loop_that_needs_each_result_keeps_waiting(loop):
    out = migrate(loop)
    assert "def run_train_step" in out and "steps_in_flight" not in out
    assert ".fetch()" in function_source(out, "run_train_step")


def test_tail_binding_a_name_used_after_the_loop_keeps_waiting():
    out = migrate("""
        total = 0.0
        while not sess.should_stop():
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
            total += value
    """, after="print(total)")
    assert not pipelined(out)


# ------------------------------------------------------------------ pipelined

def test_logging_tail_is_deferred_with_the_values_it_reads_from_before_the_step():
    out = migrate("""
        step = 0
        while not sess.should_stop():
            xs = batch_for(step)
            _, value = sess.run([train_op, loss], feed_dict={x: xs})
            print("step %d loss %f" % (step, value))
            step += 1
    """)
    assert not pipelined(out)  # `step += 1` after the step binds a name read before it
    out = migrate("""
        step = 0
        while not sess.should_stop():
            step += 1
            xs = batch_for(step)
            _, value = sess.run([train_op, loss], feed_dict={x: xs})
            print("step %d loss %f" % (step, value))
    """)
    assert pipelined(out)
    finish = function_source(out, "finish_train_step")
    assert finish.startswith("def finish_train_step(step_results, step_index, step):")
    assert "value = step_results.fetch()[step_index]" in finish
    assert 'print("step %d loss %f" % (step, value))' in finish
    # the values the tail reads travel with the step: pending as (arguments, (step,))
    assert "pending_steps.append(((xs,), (step,)))" in out
    # steps go out steps_per_closure at a time; the queue is bounded, and flushed
    # and drained after the loop
    assert "if len(pending_steps) == steps_per_closure:\n            queue_pending_steps()" in out
    assert 'max_steps_in_flight = 2 * steps_per_closure * cluster_resolver.cluster_spec().num_tasks("worker")' in out
    loop_end = out.index("    queue_pending_steps()\n    while steps_in_flight:")
    assert out.index("while len(steps_in_flight) > max_steps_in_flight:") < loop_end


def test_stop_condition_and_batches_by_global_step_count_scheduled_steps():
    out = migrate("""
        while not sess.should_stop():
            step = sess.run(global_step)
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(step)})
    """)
    assert pipelined(out)
    assert "scheduled_steps = int(global_step.numpy())" in out
    assert "while not scheduled_steps >= FLAGS.steps:" in out
    assert "step = scheduled_steps" in out and "scheduled_steps += 1" in out
    # nothing in the loop reads the (lagging) global step any more
    loop = out[out.index("while not scheduled_steps"):out.index("while steps_in_flight:")]
    assert "global_step.numpy()" not in loop


def test_for_loop_hands_its_index_to_the_tail():
    out = migrate("""
        for i in range(FLAGS.steps):
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(i)})
            if i % 10 == 0:
                print(i, value)
    """)
    assert pipelined(out)
    assert function_source(out, "finish_train_step").startswith("def finish_train_step(step_results, step_index, i):")
    assert "pending_steps.append(((batch_for(i),), (i,)))" in out


def test_checkpoints_wait_for_every_step_scheduled_before_them():
    out = migrate("""
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: batch_for(0)})
    """, session_args=', checkpoint_dir="/tmp/ckpt", save_checkpoint_steps=5')
    assert pipelined(out)
    save = out.index("if checkpoint_manager is not None and scheduled_steps % 5 == 0:")
    flush = out.index("queue_pending_steps()", save)
    drain = out.index("while steps_in_flight:", save)
    assert flush < drain < out.index("checkpoint_manager.save(checkpoint_number=global_step)", save)


def test_session_without_stop_hook_loops_until_the_loop_breaks():
    src = PROGRAM.format(loop=indent(dedent("""
        while not sess.should_stop():
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
            if value < 0.1:
                break
    """).strip("\n"), " " * 8), after="", session_args="").replace(
        "hooks = [tf.train.StopAtStepHook(last_step=FLAGS.steps)]", "hooks = []")
    out = migrate_source(src).output
    assert "    while True:\n        value = run_train_step(batch_for(0))\n" in out
    assert "not False" not in out


def test_global_step_fetched_with_the_step_travels_with_its_results():
    # `step` is also a parameter of batch_for(): another scope, no conflict
    out = migrate("""
        while not sess.should_stop():
            _, loss_value, step = sess.run([train_op, loss, global_step], feed_dict={x: batch_for(0)})
            if step % 100 == 0:
                print("step", step, loss_value)
    """)
    assert pipelined(out)
    assert "global_step_value = global_step.read_value()" in function_source(out, "train_step")
    assert "loss_value, step = step_results.fetch()[step_index]" in function_source(out, "finish_train_step")


def test_tail_binding_a_global_keeps_waiting():
    out = migrate("""
        global last_loss
        while not sess.should_stop():
            _, last_loss = sess.run([train_op, loss], feed_dict={x: batch_for(0)})
    """)
    assert not pipelined(out)


# ------------------------------------------------------ several steps per closure

def test_queued_steps_are_stacked_into_closures_by_shape():
    """Run the generated queue_pending_steps on real tensors with a recording
    coordinator: same-shaped consecutive steps share one closure, in order."""
    tf = pytest.importorskip("tensorflow")
    out = migrate("""
        for i in range(FLAGS.steps):
            _, value = sess.run([train_op, loss], feed_dict={x: batch_for(i)})
            print(i, value)
    """)
    assert "def train_steps(*stacked):" in out
    scheduled = []

    class Coordinator:
        def schedule(self, fn, args):
            scheduled.append((fn, args))
            return f"closure{len(scheduled)}"

    namespace = {
        "tf": tf, "coordinator": Coordinator(), "train_steps": "train_steps",
        "pending_steps": [
            (([[1.0, 2.0, 3.0]],), (0,)),
            (([[4.0, 5.0, 6.0]],), (1,)),
            (([[7.0, 8.0, 9.0], [1.0, 1.0, 1.0]],), (2,)),  # a batch of another size
            (([[0.5, 0.5, 0.5], [2.0, 2.0, 2.0]],), (3,)),
        ],
        "steps_in_flight": [],
    }
    exec(dedent(function_source(out, "queue_pending_steps")), namespace)  # noqa: S102 - the code under test is our own generated source
    namespace["queue_pending_steps"]()
    assert [fn for fn, _ in scheduled] == ["train_steps", "train_steps"]
    assert [[a.shape.as_list() for a in args] for _, args in scheduled] == [[[2, 1, 3]], [[2, 2, 3]]]
    assert all(a.dtype == tf.float32 for _, args in scheduled for a in args)
    assert scheduled[0][1][0].numpy()[1].tolist() == [[4.0, 5.0, 6.0]]
    assert namespace["steps_in_flight"] == [("closure1", 0, 0), ("closure1", 1, 1), ("closure2", 0, 2), ("closure2", 1, 3)]
    assert namespace["pending_steps"] == []


def test_step_whose_parameter_shadows_the_queue_locals_goes_out_one_per_closure():
    src = PROGRAM.format(loop=indent(dedent("""
        while not sess.should_stop():
            sess.run(train_op, feed_dict={stacked: batch_for(0)})
    """).strip("\n"), " " * 8), after="", session_args="")
    src = src.replace("x = tf.placeholder", "stacked = tf.placeholder").replace("tf.matmul(x, w)", "tf.matmul(stacked, w)")
    out = migrate_source(src).output
    ast.parse(out)
    assert pipelined(out) and "queue_pending_steps" not in out
    assert "steps_in_flight.append((schedule_train_step(batch_for(0)),))" in out


# ------------------------------------------- MirroredStrategy: steps per call

def _towers(tail: str) -> str:
    from migrate.codemod.engine import dedent as engine_dedent
    from migrate.codemod.rules.tfm303_towers_to_mirrored import TowersToMirrored

    src = engine_dedent(TowersToMirrored.INVALID[0].code)
    loop = "            _, loss_value = sess.run([train_op, loss], feed_dict={images: x, labels: y})\n"
    assert loop in src
    src = src.replace(loop, loop + indent(dedent(tail).strip("\n"), " " * 12) + "\n")
    out = migrate_source(src, select=["TFM303"]).output
    ast.parse(out)
    assert migrate_source(out, select=["TFM303"]).output == out
    return out


def test_towers_loop_that_breaks_on_the_loss_keeps_waiting():
    out = _towers("""
        if loss_value < 0.01:
            break
    """)
    assert "loss_value = run_train_step(x, y)" in out and "steps_per_call" not in out


def test_towers_loop_runs_steps_per_call_and_logs_each_step_after_it():
    out = _towers("""
        if step % 10 == 0:
            print(step, loss_value)
    """)
    assert "def run_train_step" not in out
    finish = function_source(out, "finish_train_step")
    assert finish.startswith("def finish_train_step(step_results, step):")
    assert "loss_value = step_results.numpy()" in finish and "print(step, loss_value)" in finish
    assert "pending_steps.append(((x, y), (step,)))" in out
    run = function_source(out, "run_pending_steps")
    assert "for (_, captured), step_results in zip(steps, train_steps(*stacked)):" in run
    # the last, partial call runs after the loop
    assert out.rstrip().endswith("run_pending_steps()")


def test_comments_on_a_global_step_read_go_with_the_read():
    """The read became a count of the steps scheduled: a comment about how
    other workers move the global step under it describes a read that is gone;
    the other comments of the loop stay. The host-fed steps are reported
    (info), with why no per-worker dataset replaces them."""
    src = PROGRAM.format(loop=indent(dedent("""
        while not sess.should_stop():
            # another worker may update the step between this read and ours
            step = sess.run(global_step)
            # the batch of this step
            batch = batch_for(step)
            _, value = sess.run([train_op, loss], feed_dict={x: batch})
    """).strip("\n"), " " * 8), after="", session_args="")
    result = migrate_source(src)
    out = result.output
    assert "step = scheduled_steps" in out and "between this read and ours" not in out
    assert "# the batch of this step\n" in out
    info = [d for d in result.diagnostics if d.code == "TFM301" and "create_per_worker_dataset" in d.message]
    assert len(info) == 1 and info[0].fixed and info[0].severity == "info"
