"""TFM301 and graphs placed by hand instead of by replica_device_setter:

    with tf.device("/job:ps/task:0"):
        kernel = tf.Variable(...)                 # shared, on the ps
    with tf.device("/job:worker/task:%d" % task_index):
        loss = ...                                # this worker's computation
        train_op = opt.minimize(loss, global_step=step)

Only where variables live changes what trains; when every variable is on a ps
task, the blocks are the layout a device setter makes and migrate as one.
Variables of a worker's own next to shared ones are the local-copy schemes
(local-then-global updates, DOWNPOUR), which no strategy keeps: declined at
the worker's block, file unchanged. So are step counters on the worker and
one client driving several worker tasks (in-graph across machines).

Fixtures are written for these tests in the shapes seen in real scripts.
"""

from __future__ import annotations

import pytest

from migrate.codemod.engine import dedent, migrate_source

PLACED = dedent('''
import tensorflow as tf


def train(server, task_index, batches):
    # the shared parameters
    with tf.device("/job:ps/task:0"):
        kernel = tf.Variable(tf.zeros([4, 1]), name="kernel")
        offset = tf.Variable(tf.zeros([1]), name="offset")
        step = tf.train.get_or_create_global_step()
    with tf.device("/job:worker/task:%d" % task_index):
        inputs = tf.placeholder(tf.float32, [None, 4])
        targets = tf.placeholder(tf.float32, [None, 1])
        WORKER_EXTRA
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) + offset - targets))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0, hooks=hooks) as sess:
        for x, y in batches:
            if sess.should_stop():
                break
            sess.run(train_op, feed_dict={inputs: x, targets: y})
''')


def _plain() -> str:
    return PLACED.replace("        WORKER_EXTRA\n", "")


def _tfm301(result):
    return [d for d in result.diagnostics if d.code == "TFM301"]


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def _assert_migrated(source: str) -> str:
    result = migrate_source(source, select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "tf.distribute.ParameterServerStrategy" in out and "with strategy.scope():" in out
    # no TF1 placement, placeholder or session is left as code
    for legacy in ("tf.device(", "tf.placeholder(", "MonitoredTrainingSession", "minimize("):
        assert legacy not in out, legacy
    # the variables are built under the strategy, the loss computed in the step
    scope = out.split("with strategy.scope():", 1)[1].split("@tf.function", 1)[0]
    assert 'kernel = tf.Variable(tf.zeros([4, 1]), name="kernel")' in scope
    assert "offset = tf.Variable" in scope
    assert "tape.gradient(loss, trainable_variables)" in out
    assert "trainable_variables = [kernel, offset]" in out
    said = [d for d in _tfm301(result) if "placed by hand" in d.message]
    assert len(said) == 1 and said[0].fixed and said[0].line == _line_of(source, '"/job:ps/task:0"')
    # a second run changes nothing
    assert migrate_source(out, select=["TFM301"]).output == out
    return out


def test_ps_block_then_worker_block_is_a_device_setter_layout():
    out = _assert_migrated(_plain())
    # the comment over the ps block is kept, once
    assert out.count("# the shared parameters") == 1


def test_variables_on_several_ps_tasks():
    source = _plain().replace(
        '        offset = tf.Variable',
        '    with tf.device("/job:ps/task:1"):\n        offset = tf.Variable')
    _assert_migrated(source)


def test_ps_block_nested_in_the_worker_block():
    source = dedent('''
    import tensorflow as tf


    def train(server, task_index, batches):
        with tf.device("/job:worker/task:%d" % task_index):
            with tf.device("/job:ps/task:0"):
                kernel = tf.Variable(tf.zeros([4, 1]), name="kernel")
                offset = tf.Variable(tf.zeros([1]), name="offset")
                step = tf.train.get_or_create_global_step()
            inputs = tf.placeholder(tf.float32, [None, 4])
            targets = tf.placeholder(tf.float32, [None, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) + offset - targets))
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        hooks = [tf.train.StopAtStepHook(last_step=100)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0,
                                               hooks=hooks) as sess:
            for x, y in batches:
                if sess.should_stop():
                    break
                sess.run(train_op, feed_dict={inputs: x, targets: y})
    ''')
    result = migrate_source(source, select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    assert "with strategy.scope():" in result.output and "tf.device(" not in result.output
    said = [d for d in _tfm301(result) if "placed by hand" in d.message]
    assert len(said) == 1 and said[0].line == _line_of(source, '"/job:worker/task:%d"')


def test_the_whole_program_gets_its_cluster_migrated_with_it():
    """With the training migrated, the cluster rules no longer stand back."""
    source = dedent('''
    import tensorflow as tf

    flags = tf.app.flags
    flags.DEFINE_string("ps_hosts", "localhost:2222", "ps")
    flags.DEFINE_string("worker_hosts", "localhost:2223", "workers")
    flags.DEFINE_string("job_name", "worker", "ps or worker")
    flags.DEFINE_integer("task_index", 0, "task")
    FLAGS = flags.FLAGS


    def main(_):
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
            return
        with tf.device("/job:ps/task:0"):
            kernel = tf.Variable(tf.zeros([4, 1]), name="kernel")
            step = tf.Variable(0, name="step", trainable=False)
        with tf.device("/job:worker/task:%d" % FLAGS.task_index):
            inputs = tf.placeholder(tf.float32, [None, 4])
            targets = tf.placeholder(tf.float32, [None, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(inputs, kernel) - targets))
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        hooks = [tf.train.StopAtStepHook(last_step=20)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                               hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train_op, feed_dict={inputs: [[1.0, 2.0, 3.0, 4.0]], targets: [[1.0]]})


    if __name__ == "__main__":
        tf.app.run()
    ''')
    result = migrate_source(source)
    assert not result.manual_work, [(d.code, d.message) for d in result.manual_work]
    compile(result.output, "<migrated>", "exec")
    assert "tf.train.Server(" not in result.output and "tf.distribute.Server(" in result.output
    assert "ClusterCoordinator" in result.output


LOCAL_COPY = "shadow = tf.Variable(tf.zeros([4, 1]), name='shadow', collections=[tf.GraphKeys.LOCAL_VARIABLES])"


@pytest.mark.parametrize("extra, what", [
    (LOCAL_COPY, "`shadow`"),
    ("hidden = tf.layers.dense(inputs, 4)", "the variables of"),
])
def test_variables_of_the_workers_own_beside_shared_ones_are_declined(extra, what):
    source = PLACED.replace("WORKER_EXTRA", extra)
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1, [d.message for d in declined]
    assert declined[0].line == _line_of(source, '"/job:worker/task:%d"')
    assert what in declined[0].message and "`kernel`" in declined[0].message
    assert "local-copy scheme" in declined[0].message and "`train_op`" in declined[0].message
    assert "per_worker_variable=True" in declined[0].hint


def test_a_step_counter_on_the_worker_is_declined():
    source = PLACED.replace("        step = tf.train.get_or_create_global_step()\n", "").replace(
        "WORKER_EXTRA", "step = tf.train.get_or_create_global_step()")
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1
    assert "step counter `step`" in declined[0].message and "counted its own steps" in declined[0].message


def test_a_variable_under_no_device_is_the_workers_own():
    source = _plain().replace("    with tf.device(\"/job:worker", "    bias = tf.Variable(0.0)\n    with tf.device(\"/job:worker")
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1 and "`bias` under no device" in declined[0].message
    assert declined[0].line == _line_of(source, "bias = tf.Variable(0.0)")


def test_one_client_driving_several_worker_tasks_is_declined():
    source = _plain().replace('"/job:worker/task:%d" % task_index', '"/job:worker/task:0"').replace(
        "    hooks =",
        "    with tf.device(\"/job:worker/task:1\"):\n"
        "        second = tf.train.GradientDescentOptimizer(0.1).minimize(loss)\n"
        "    hooks =").replace("sess.run(train_op,", "sess.run([train_op, second],")
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1
    assert "/job:worker/task:0" in declined[0].message and "/job:worker/task:1" in declined[0].message
    assert "in-graph replication across machines" in declined[0].message
    assert declined[0].line == _line_of(source, '"/job:worker/task:1"')


def test_this_workers_task_written_two_ways_is_one_worker():
    """`task:0` and `task:%d % task_index` in a script run as task 0 are not
    several tasks: a literal and a formatted device never count as two."""
    source = _plain().replace('"/job:worker/task:%d" % task_index', '"/job:worker/task:0"').replace(
        "        train_op =",
        "    with tf.device(\"/job:worker/task:%d\" % task_index):\n"
        "        train_op =")
    assert source.count("with tf.device(") == 3
    result = migrate_source(source, select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    assert "with strategy.scope():" in result.output


def test_a_device_setter_block_applying_gradients_of_worker_copies():
    """DOWNPOUR: gradients of worker-placed copies, computed before the
    device-setter block, applied to the shared variables in it."""
    source = dedent('''
    import tensorflow as tf


    def train(cluster, server, task_index, window):
        with tf.device("/job:worker/task:%d" % task_index):
            local_w = tf.Variable(tf.zeros([2]), collections=[tf.GraphKeys.LOCAL_VARIABLES])
            loss = tf.reduce_sum(tf.square(local_w - 3.0))
            local_opt = tf.train.GradientDescentOptimizer(0.1)
            grads, local_vars = zip(*local_opt.compute_gradients(loss, var_list=[local_w]))
            local_train = local_opt.apply_gradients(zip(grads, local_vars))
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            step = tf.train.get_or_create_global_step()
            shared_w = tf.get_variable("shared_w", shape=[2])
            push = tf.train.GradientDescentOptimizer(0.1).apply_gradients(zip(grads, [shared_w]),
                                                                          global_step=step)
        hooks = [tf.train.StopAtStepHook(last_step=100)]
        with tf.train.MonitoredTrainingSession(master=server.target, hooks=hooks) as sess:
            while not sess.should_stop():
                for _ in range(window):
                    sess.run(local_train)
                sess.run(push)
    ''')
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1, [d.message for d in declined]
    assert declined[0].line == _line_of(source, '"/job:worker/task:%d"')
    assert "`push`" in declined[0].message and "`local_w`" in declined[0].message
    assert "`grads`" in declined[0].message and "local-copy scheme" in declined[0].message


def test_worker_only_placement_is_not_taken_for_a_layout():
    """No ps placement: nothing here says the variables were shared."""
    source = _plain().replace('"/job:ps/task:0"', '"/job:worker/task:%d" % task_index')
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    assert not [d for d in _tfm301(result) if "placed by hand" in d.message]


def test_a_ps_block_with_a_scope_beside_the_device():
    source = _plain().replace('with tf.device("/job:ps/task:0"):',
                              'with tf.device("/job:ps/task:0"), tf.name_scope("shared"):')
    _assert_migrated(source)


HELPERS_AND_SUPERVISOR = dedent('''
import tensorflow as tf


def weight(shape, name):
    return tf.Variable(tf.truncated_normal(shape, stddev=0.1), name=name)


def train(server, task_index, batches):
    with tf.device("/job:ps/task:0"):
        hidden_weights = weight([4, 8], "hidden")
        output_weights = weight([8, 1], "output")
        step = tf.Variable(0, trainable=False, name="step")
    with tf.device("/job:worker/task:%d" % task_index):
        inputs = tf.placeholder(tf.float32, [None, 4])
        targets = tf.placeholder(tf.float32, [None, 1])
        hidden = tf.nn.relu(tf.matmul(inputs, hidden_weights))
        loss = tf.reduce_mean(tf.square(tf.matmul(hidden, output_weights) - targets))
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        init_op = tf.global_variables_initializer()
    sv = tf.train.Supervisor(is_chief=(task_index == 0), logdir="/tmp/train_logs", init_op=init_op,
                             global_step=step)
    with sv.managed_session(server.target) as sess:
        while not sv.should_stop():
            x, y = next(batches)
            _, current = sess.run([train_op, step], feed_dict={inputs: x, targets: y})
            if current >= 1000:
                break
    sv.stop()
''')


def test_variables_made_by_a_helper_on_the_ps_and_a_supervisor():
    result = migrate_source(HELPERS_AND_SUPERVISOR, select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "with strategy.scope():" in out and "tf.device(" not in out and "tf.train.Supervisor" not in out
    # the helper's variables are built once under the strategy, and trained
    assert "trainable_variables" in out and "weight([4, 8]" in out
    assert migrate_source(out, select=["TFM301"]).output == out


def test_helper_variables_under_the_worker_are_its_own():
    source = HELPERS_AND_SUPERVISOR.replace(
        '        output_weights = weight([8, 1], "output")\n', "").replace(
        "        hidden = tf.nn.relu", '        output_weights = weight([8, 1], "output")\n        hidden = tf.nn.relu')
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1 and "the variables of `weight(...)`" in declined[0].message


def test_devices_named_before_the_blocks():
    source = _plain().replace(
        '    with tf.device("/job:ps/task:0"):',
        '    ps_device = "/job:ps/task:0"\n    worker_device = "/job:worker/task:%d" % task_index\n'
        '    with tf.device(ps_device):').replace(
        'with tf.device("/job:worker/task:%d" % task_index):', "with tf.device(worker_device):")
    result = migrate_source(source, select=["TFM301"])
    assert not [d.message for d in result.manual_work if d.code == "TFM301"]
    assert "with strategy.scope():" in result.output and "tf.device(" not in result.output


def test_a_device_name_bound_twice_is_not_read():
    """`device = ...` bound again: which device a block names is not known."""
    source = _plain().replace(
        '    with tf.device("/job:ps/task:0"):',
        '    device = "/job:ps/task:0"\n    if task_index > 9:\n        device = "/job:worker/task:0"\n'
        '    with tf.device(device):')
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    assert not [d for d in _tfm301(result) if "placed by hand" in d.message]


def test_a_step_counter_made_before_the_blocks_is_the_workers_own():
    source = _plain().replace("        step = tf.train.get_or_create_global_step()\n", "").replace(
        "    # the shared parameters\n", "    step = tf.train.get_or_create_global_step()\n")
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    declined = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(declined) == 1 and "step counter `step` is created under no device" in declined[0].message
    assert declined[0].line == _line_of(source, "step = tf.train.get_or_create_global_step()")
