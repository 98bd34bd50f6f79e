"""TFM301/TFM202 on shapes a survey of public TF1 distributed scripts found
(/tmp/wild/TRIAGE.md: P2, P5, P7, P10).

Each fixed behaviour has, in the style of pyupgrade's tests, a no-op case
(what the fix must leave alone) and a (before, after) pair, written for
these tests (no public code is copied). Every output must parse and a
second run must change nothing. Where a claim is numerical (a Keras
schedule computes TF1's learning rates; a Keras SGD with momentum does not
follow TF1's MomentumOptimizer once the rate changes), real TensorFlow
checks it.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.rules._equivalents import schedule_call


def migrate(source: str, select=None):
    src = dedent(source)
    ast.parse(src)
    result = migrate_source(src, select=select)
    ast.parse(result.output)
    # a second run over the output changes nothing
    assert migrate_source(result.output, select=select).output == result.output
    return result


def manual(result) -> list[str]:
    return [d.message for d in result.manual_work]


def body(code: str) -> str:
    """Code written at function-body level (four spaces)."""
    return textwrap.indent(dedent(code).lstrip("\n"), "    ")


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


# ------------------------------------------------------------------------ P5: serve before the graph

GRAPH_BEFORE_JOIN = '''
import tensorflow as tf


def run(cluster, job_name, task_index):
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    is_chief = task_index == 0
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.zeros([2, 1]))
        loss = tf.reduce_mean(tf.matmul(x, w))
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    if job_name == "ps":
        server.join()
    elif job_name == "worker":
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
            for _ in range(10):
                sess.run(train_op, feed_dict={x: [[1.0, 2.0]]})
'''


def test_serving_branch_moves_above_a_graph_built_before_it():
    result = migrate(GRAPH_BEFORE_JOIN, select=["TFM202"])
    assert result.output == dedent('''
        import tensorflow as tf


        def run(cluster, job_name, task_index):
            if job_name in ("ps", "worker"):
                server = tf.distribute.Server(
                    cluster, job_name=job_name, task_index=task_index, protocol="grpc", start=True)
                server.join()
            is_chief = task_index == 0
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 2])
                w = tf.Variable(tf.zeros([2, 1]))
                loss = tf.reduce_mean(tf.matmul(x, w))
                train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
            if job_name == "chief":
                with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
                    for _ in range(10):
                        sess.run(train_op, feed_dict={x: [[1.0, 2.0]]})
    ''')
    moved = [d for d in result.diagnostics if "serve before the graph" in d.message]
    assert len(moved) == 1 and moved[0].line == line_of(GRAPH_BEFORE_JOIN, 'if job_name == "ps":')


def test_serving_branch_after_plain_statements_stays_in_place():
    source = '''
        import tensorflow as tf


        def train(cluster, is_chief):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                w = tf.Variable(tf.zeros([2, 1]))


        def run(cluster, job_name, task_index):
            server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
            is_chief = task_index == 0
            if job_name == "ps":
                server.join()
            train(cluster, is_chief)
    '''
    result = migrate(source, select=["TFM202"])
    assert result.output == dedent('''
        import tensorflow as tf


        def train(cluster, is_chief):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                w = tf.Variable(tf.zeros([2, 1]))


        def run(cluster, job_name, task_index):
            is_chief = task_index == 0
            if job_name in ("ps", "worker"):
                server = tf.distribute.Server(
                    cluster, job_name=job_name, task_index=task_index, protocol="grpc", start=True)
                server.join()
            train(cluster, is_chief)
    ''')
    assert not [d for d in result.diagnostics if "serve before the graph" in d.message]


def test_what_the_serving_branch_reads_stays_before_it():
    source = '''
        import tensorflow as tf


        def run(cluster, job_name, task_index):
            server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
            banner = "serving %s:%d" % (job_name, task_index)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                w = tf.Variable(tf.zeros([2, 1]))
            if job_name == "ps":
                print(banner)
                server.join()
    '''
    out = migrate(source, select=["TFM202"]).output
    assert out.index("banner = ") < out.index('if job_name in ("ps", "worker"):') < out.index("with tf.device(")


def test_whole_program_creates_the_strategy_only_after_ps_and_workers_joined():
    out = migrate(GRAPH_BEFORE_JOIN).output
    serving = out.index('if job_name in ("ps", "worker"):')
    assert serving < out.index("server.join()") < out.index("tf.distribute.ParameterServerStrategy(")
    assert serving < out.index("tf.distribute.coordinator.ClusterCoordinator(")
    # the strategy is created at function level after the serving branch, which never returns
    tree = ast.parse(out)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    top = [ast.get_source_segment(out, st) for st in run.body]
    assert any(t.startswith("strategy = tf.distribute.ParameterServerStrategy(") for t in top)
    serving_at = next(i for i, t in enumerate(top) if t.startswith("if job_name in"))
    assert serving_at < next(i for i, t in enumerate(top) if t.startswith("strategy = "))


# ------------------------------------------------------------------------ P2a: named learning-rate schedules

NAMED_SCHEDULE = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, workers):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.Variable(tf.zeros([3, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        global_step = tf.train.get_or_create_global_step()
        lr = tf.train.exponential_decay(0.1, global_step, 100, 0.5, staircase=True)
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(lr), replicas_to_aggregate=workers)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=300)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            _, loss_value, rate = sess.run([train_op, loss, lr], feed_dict={x: batch()})
            print(loss_value, rate)
'''


def test_named_schedule_becomes_a_keras_schedule_of_the_optimizer_iterations():
    result = migrate(NAMED_SCHEDULE, select=["TFM301"])
    assert result.output == dedent('''
        import tensorflow.compat.v1 as tf


        def train(cluster, server, is_chief, workers):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
            with strategy.scope():
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                # The optimizer calls this schedule with its iterations, which advance once per
                # applied step as global_step did.
                lr = tf.keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=0.1, decay_steps=100, decay_rate=0.5, staircase=True)
                opt = tf.keras.optimizers.SGD(learning_rate=lr)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    lr_value = lr(opt.iterations)
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
                        # SyncReplicasOptimizer averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return loss, lr_value
                return strategy.run(train_step_replica, args=(x,))

            def run_train_step(x):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                x = tf.convert_to_tensor(x, tf.float32)
                results = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0].numpy(),
                    train_step(x))
                return results
            while not int(global_step.numpy()) >= 300:
                loss_value, rate = run_train_step(batch())
                print(loss_value, rate)
    ''')
    assert manual(result) == []


def test_schedule_of_a_step_the_train_op_does_not_advance_is_left_and_reported():
    # minimize() without global_step=: TF1's rate never decayed, Keras iterations would
    source = NAMED_SCHEDULE.replace("opt.minimize(loss, global_step=global_step)", "opt.minimize(loss)")
    result = migrate(source, select=["TFM301"])
    assert result.output == dedent(source)
    [message] = [m for m in manual(result) if "`lr`" in m]
    assert "not a global step the train op advances" in message
    located = [d for d in result.manual_work if "`lr`" in d.message]
    assert located[0].line == line_of(source, "lr = tf.train.exponential_decay")


def test_schedule_read_by_the_forward_computation_is_reported():
    source = NAMED_SCHEDULE.replace("loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))",
                                    "loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))\n"
                                    "        scaled = loss * lr")
    result = migrate(source, select=["TFM301"])
    assert result.output == dedent(source)
    assert any("used by the forward computation" in m for m in manual(result))


def test_inline_schedule_becomes_the_same_keras_schedule():
    source = NAMED_SCHEDULE.replace("tf.train.GradientDescentOptimizer(lr)",
                                    "tf.train.GradientDescentOptimizer(tf.train.piecewise_constant("
                                    "global_step, [10, 20], [0.1, 0.01, 0.001]))")
    source = source.replace("        lr = tf.train.exponential_decay(0.1, global_step, 100, 0.5, staircase=True)\n", "")
    source = source.replace("_, loss_value, rate = sess.run([train_op, loss, lr]", "_, loss_value = sess.run([train_op, loss]")
    source = source.replace("print(loss_value, rate)", "print(loss_value)")
    result = migrate(source, select=["TFM301"])
    assert ("opt = tf.keras.optimizers.SGD(learning_rate=tf.keras.optimizers.schedules.PiecewiseConstantDecay("
            "boundaries=[10, 20], values=[0.1, 0.01, 0.001]))") in result.output
    assert "tf.train." not in result.output and manual(result) == []


def test_a_constant_rate_momentum_optimizer_gets_no_momentum_note():
    source = NAMED_SCHEDULE.replace("tf.train.GradientDescentOptimizer(lr)", "tf.train.MomentumOptimizer(0.1, 0.9)")
    result = migrate(source, select=["TFM301"])
    assert "SGD(learning_rate=0.1, momentum=0.9)" in result.output
    assert not [m for m in manual(result) if "MomentumOptimizer" in m]


def test_a_decaying_rate_with_momentum_keeps_tf1_momentum():
    """Keras SGD's momentum leaves TF1's trajectory once the rate decays (see
    the numerics test below): TF1's optimizer stays, the schedule stays TF2's
    compat.v1 function of the global step it calls, and nothing is left to
    do by hand."""
    source = NAMED_SCHEDULE.replace("tf.train.GradientDescentOptimizer(lr)", "tf.train.MomentumOptimizer(lr, 0.9)")
    result = migrate(source, select=["TFM301"])
    assert "tf.compat.v1.train.MomentumOptimizer(lr, 0.9)" in result.output
    assert "lr = tf.train.exponential_decay(0.1, global_step, 100, 0.5, staircase=True)" in result.output
    assert "lr_value = lr()" in result.output and "schedules." not in result.output
    assert manual(result) == []
    [note] = [d for d in result.diagnostics if "kept tf.compat.v1.train.MomentumOptimizer" in d.message]
    assert "different once it decays" in note.message and note.fixed
    assert note.line == line_of(source, "tf.train.MomentumOptimizer(lr, 0.9)")
    inline = NAMED_SCHEDULE.replace(
        "tf.train.GradientDescentOptimizer(lr)",
        "tf.train.MomentumOptimizer(tf.train.piecewise_constant(global_step, [5], [0.1, 0.01]), 0.9)")
    kept = migrate(inline, select=["TFM301"]).output
    assert "tf.compat.v1.train.MomentumOptimizer(tf.train.piecewise_constant(global_step, [5], [0.1, 0.01]), 0.9)" in kept


def test_natural_exp_decay_has_no_keras_schedule_and_stays_a_function_of_the_global_step():
    source = NAMED_SCHEDULE.replace("tf.train.exponential_decay(0.1, global_step, 100, 0.5, staircase=True)",
                                    "tf.train.natural_exp_decay(0.1, global_step, 100, 0.5)")
    result = migrate(source, select=["TFM301"])
    assert "lr = tf.train.natural_exp_decay(0.1, global_step, 100, 0.5)" in result.output
    # TF2's compat.v1 schedule returns a function; the step reads its value by calling it
    assert "lr_value = lr()" in result.output
    assert manual(result) == []
    assert any("natural_exp_decay" in d.message and d.fixed for d in result.diagnostics)


def test_a_schedule_feeding_an_optimizer_kept_in_compat_v1_stays_a_function_of_the_global_step():
    # TF1's FtrlOptimizer has no Keras equivalent and stays; it calls its rate with no
    # argument, so the rate must stay TF2's compat.v1 function of the global step
    source = NAMED_SCHEDULE.replace("tf.train.GradientDescentOptimizer(lr)", "tf.train.FtrlOptimizer(lr)")
    result = migrate(source, select=["TFM301"])
    assert "lr = tf.train.exponential_decay(0.1, global_step, 100, 0.5, staircase=True)" in result.output
    assert "opt = tf.compat.v1.train.FtrlOptimizer(lr)" in result.output
    assert "schedules." not in result.output and "lr_value = lr()" in result.output
    [kept] = manual(result)
    assert "Ftrl" in kept


def test_a_fetched_schedule_alone_reads_the_optimizer_iterations():
    source = NAMED_SCHEDULE.replace("        while not sess.should_stop():",
                                    "        print(sess.run(lr))\n        while not sess.should_stop():")
    result = migrate(source, select=["TFM301"])
    assert "print(lr(opt.iterations).numpy())" in result.output


SCHEDULES = [
    ("tf.train.exponential_decay(0.1, global_step, 100, 0.96)", "train.exponential_decay",
     "tf.keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=0.1, decay_steps=100, decay_rate=0.96)"),
    ("tf.train.exponential_decay(0.1, global_step, 100, 0.96, staircase=True, name='lr')", "train.exponential_decay",
     ("tf.keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=0.1, decay_steps=100, decay_rate=0.96,"
      " staircase=True, name='lr')")),
    ("tf.train.piecewise_constant(global_step, [5, 9], [0.1, 0.05, 0.01])", "train.piecewise_constant",
     "tf.keras.optimizers.schedules.PiecewiseConstantDecay(boundaries=[5, 9], values=[0.1, 0.05, 0.01])"),
    ("tf.train.polynomial_decay(0.1, global_step, 50, end_learning_rate=0.01, power=0.5, cycle=True)",
     "train.polynomial_decay",
     ("tf.keras.optimizers.schedules.PolynomialDecay(initial_learning_rate=0.1, decay_steps=50,"
      " end_learning_rate=0.01, power=0.5, cycle=True)")),
    ("tf.train.inverse_time_decay(0.1, global_step, 10, 0.5, True)", "train.inverse_time_decay",
     ("tf.keras.optimizers.schedules.InverseTimeDecay(initial_learning_rate=0.1, decay_steps=10, decay_rate=0.5,"
      " staircase=True)")),
    ("tf.train.cosine_decay(0.1, global_step, 40, alpha=0.1)", "train.cosine_decay",
     "tf.keras.optimizers.schedules.CosineDecay(initial_learning_rate=0.1, decay_steps=40, alpha=0.1)"),
]


def _generated(src: str, qualname: str, step: str = "global_step") -> str | None:
    import libcst as cst

    node, _ = schedule_call(cst.parse_expression(src), qualname, step)
    return None if node is None else cst.Module(body=[]).code_for_node(node)


@pytest.mark.parametrize("src, qualname, expected", SCHEDULES, ids=[q for _, q, _ in SCHEDULES])
def test_schedule_mapping(src, qualname, expected):
    assert _generated(src, qualname) == expected
    # the step must be the global step the train op advances
    assert _generated(src, qualname, step="other_step") is None


def test_schedules_without_an_exact_keras_equivalent_are_not_mapped():
    assert _generated("tf.train.natural_exp_decay(0.1, global_step, 10, 0.5)", "train.natural_exp_decay") is None
    assert _generated("tf.train.linear_cosine_decay(0.1, global_step, 10)", "train.linear_cosine_decay") is None


# --- numerics (real TensorFlow): the generated Keras code against TF1 graph mode

SCHEDULE_STEPS = [0, 1, 2, 5, 9, 10, 11, 39, 40, 41, 49, 50, 51, 99, 100, 101, 137, 250, 1000]


@pytest.mark.parametrize("src, qualname, expected", SCHEDULES, ids=[q for _, q, _ in SCHEDULES])
def test_generated_schedule_gives_tf1_rates_bit_for_bit(src, qualname, expected):
    tf = pytest.importorskip("tensorflow")
    graph = tf.Graph()
    with graph.as_default():
        global_step = tf.compat.v1.placeholder(tf.int64, [])
        rate = eval(src.replace("tf.train.", "tf.compat.v1.train."), {"tf": tf, "global_step": global_step})
        with tf.compat.v1.Session(graph=graph) as sess:
            want = [sess.run(rate, {global_step: s}) for s in SCHEDULE_STEPS]
    schedule = eval(_generated(src, qualname), {"tf": tf})
    iterations = tf.Variable(0, dtype=tf.int64)  # the optimizer's counter

    @tf.function
    def current():  # where a Keras optimizer reads it: inside the training step's function
        return schedule(iterations)

    got = []
    for s in SCHEDULE_STEPS:
        iterations.assign(s)
        got.append(current().numpy())
    assert [float(v) for v in got] == [float(v) for v in want]
    assert len({float(v) for v in want}) > 1  # the rate does change over these steps


def _trajectories(tf1_optimizer, keras_optimizer, steps=12):
    """Weights after each step: TF1 graph mode (minimize with the global step)
    and a Keras optimizer applied in a tf.function, same data."""
    import numpy as np

    tf = pytest.importorskip("tensorflow")
    rng = np.random.RandomState(5)
    xs, ys = rng.randn(8, 3).astype(np.float32), rng.randn(8, 1).astype(np.float32)
    start = np.array([[0.5], [-0.2], [0.1]], np.float32)
    graph = tf.Graph()
    with graph.as_default():
        global_step = tf.compat.v1.train.get_or_create_global_step()
        w = tf.compat.v1.Variable(start)
        loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - ys))
        train_op = tf1_optimizer(tf, global_step).minimize(loss, global_step=global_step)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            want = []
            for _ in range(steps):
                sess.run(train_op)
                want.append(sess.run(w))
    v = tf.Variable(start)
    optimizer = keras_optimizer(tf)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            step_loss = tf.reduce_mean(tf.square(tf.matmul(xs, v) - ys))
        optimizer.apply_gradients(zip(tape.gradient(step_loss, [v]), [v]))

    got = []
    for _ in range(steps):
        step()
        got.append(v.numpy())
    return np.array(want), np.array(got)


def test_sgd_with_the_generated_schedule_trains_as_tf1_bit_for_bit():
    schedule = _generated("tf.train.exponential_decay(0.1, global_step, 4, 0.5, staircase=True)",
                          "train.exponential_decay")
    want, got = _trajectories(
        lambda tf, gs: tf.compat.v1.train.GradientDescentOptimizer(
            tf.compat.v1.train.exponential_decay(0.1, gs, 4, 0.5, staircase=True)),
        lambda tf: tf.keras.optimizers.SGD(learning_rate=eval(schedule, {"tf": tf})))
    assert (want == got).all()
    assert abs(want[-1] - want[0]).max() > 1e-3


def test_momentum_note_is_true_a_decaying_rate_moves_keras_sgd_off_the_tf1_trajectory():
    schedule = _generated("tf.train.exponential_decay(0.1, global_step, 4, 0.5, staircase=True)",
                          "train.exponential_decay")
    want, got = _trajectories(
        lambda tf, gs: tf.compat.v1.train.MomentumOptimizer(
            tf.compat.v1.train.exponential_decay(0.1, gs, 4, 0.5, staircase=True), 0.9),
        lambda tf: tf.keras.optimizers.SGD(learning_rate=eval(schedule, {"tf": tf}), momentum=0.9))
    constant_want, constant_got = _trajectories(
        lambda tf, gs: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
        lambda tf: tf.keras.optimizers.SGD(learning_rate=0.1, momentum=0.9))
    # same until the rate first changes (rounding only), then far apart
    assert abs(want[:4] - got[:4]).max() < 1e-6
    assert abs(want[-1] - got[-1]).max() > 1e-2
    assert abs(constant_want - constant_got).max() < 1e-6
    # what the rule emits instead -- TF1's optimizer on TF2's compat.v1 schedule of a
    # global step the step function advances after each update -- is TF1's trajectory
    import numpy as np

    tf = pytest.importorskip("tensorflow")
    rng = np.random.RandomState(5)  # _trajectories' data and start
    xs, ys = rng.randn(8, 3).astype(np.float32), rng.randn(8, 1).astype(np.float32)
    v = tf.Variable(np.array([[0.5], [-0.2], [0.1]], np.float32))
    global_step = tf.Variable(0, dtype=tf.int64)
    optimizer = tf.compat.v1.train.MomentumOptimizer(
        tf.compat.v1.train.exponential_decay(0.1, global_step, 4, 0.5, staircase=True), 0.9)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            step_loss = tf.reduce_mean(tf.square(tf.matmul(xs, v) - ys))
        optimizer.apply_gradients(zip(tape.gradient(step_loss, [v]), [v]))
        global_step.assign_add(1)

    kept = []
    for _ in range(len(want)):
        step()
        kept.append(v.numpy())
    assert (want == np.array(kept)).all()


# ------------------------------------------------------------------------ P2b: hooks list grown by append

SYNC_HOOK_APPENDED = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]))
        loss = tf.reduce_mean(tf.matmul(x, w))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.AdamOptimizer(0.01), replicas_to_aggregate=2)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=50)]
    hooks.append(opt.make_session_run_hook(is_chief))
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: batch()})
'''


def test_sync_hook_appended_to_the_hook_list_goes_with_it():
    result = migrate(SYNC_HOOK_APPENDED, select=["TFM301"])
    out = result.output
    assert "MultiWorkerMirroredStrategy(" in out and manual(result) == []
    assert "hooks" not in out and "make_session_run_hook" not in out
    # the StopAtStepHook of the list still bounds the loop
    assert "while not int(global_step.numpy()) >= 50:" in out


def test_a_hook_of_the_program_appended_to_the_list_is_reported():
    source = SYNC_HOOK_APPENDED.replace("hooks.append(opt.make_session_run_hook(is_chief))",
                                        "hooks.extend([opt.make_session_run_hook(is_chief), ProgressHook(10)])")
    result = migrate(source, select=["TFM301"])
    assert "hooks" not in result.output
    [message] = manual(result)
    assert "`ProgressHook(...)`" in message


def test_a_sync_hook_named_after_the_block_goes_with_the_session():
    source = SYNC_HOOK_APPENDED.replace(
        "    hooks = [tf.train.StopAtStepHook(last_step=50)]\n    hooks.append(opt.make_session_run_hook(is_chief))\n",
        "    sync_hook = opt.make_session_run_hook(is_chief)\n"
        "    hooks = [sync_hook, tf.train.StopAtStepHook(last_step=50)]\n")
    result = migrate(source, select=["TFM301"])
    # the Keras optimizer has no make_session_run_hook: the line must go
    assert "make_session_run_hook" not in result.output and "sync_hook" not in result.output
    assert manual(result) == []


def test_a_hook_object_of_the_program_passed_by_name_is_reported():
    source = SYNC_HOOK_APPENDED.replace("    hooks.append(opt.make_session_run_hook(is_chief))\n",
                                        "    progress = ProgressHook(10)\n    hooks.append(progress)\n")
    result = migrate(source, select=["TFM301"])
    [message] = manual(result)
    assert "the session hook `progress` is dropped with the session" in message


def test_the_whole_program_with_an_appended_sync_hook_migrates():
    source = '''
        import tensorflow as tf


        def main(_):
            cluster = tf.train.ClusterSpec({"ps": ["h:1"], "worker": ["h:2", "h:3"]})
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            if FLAGS.job_name == "ps":
                server.join()
            is_chief = FLAGS.task_index == 0
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 4])
                w = tf.Variable(tf.zeros([4, 1]))
                loss = tf.reduce_mean(tf.matmul(x, w))
                global_step = tf.train.get_or_create_global_step()
                opt = tf.train.SyncReplicasOptimizer(tf.train.AdamOptimizer(0.01), replicas_to_aggregate=2)
                train_op = opt.minimize(loss, global_step=global_step)
            hooks = [tf.train.StopAtStepHook(last_step=50)]
            hooks.append(opt.make_session_run_hook(is_chief))
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
                while not sess.should_stop():
                    sess.run(train_op, feed_dict={x: batch()})
    '''
    result = migrate(source)
    assert "MultiWorkerMirroredStrategy(" in result.output and "SyncReplicasOptimizer(" not in result.output
    assert "tf.train.Server" not in result.output and "hooks" not in result.output
    assert not [d for d in result.manual_work if d.code == "TFM301"]


# ------------------------------------------------------------------------ P2c: device blocks nested in the setter

NESTED_DEVICE = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        with tf.device("/cpu:0"):
            x = tf.placeholder(tf.float32, [None, 3])
            w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
        for _ in range(steps):
            _, value = sess.run([train_op, loss], feed_dict={x: batch()})
            if value < 0.01:
                break
'''


def test_a_nested_cpu_device_block_is_unwrapped():
    result = migrate(NESTED_DEVICE, select=["TFM301"])
    out = result.output
    assert '"/cpu:0"' not in out and "tf.device" not in out
    assert dedent('''
        with strategy.scope():
            w = tf.Variable(tf.zeros_initializer()(shape=[3, 1], dtype=tf.float32), name="w")
            global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
        trainable_variables = [w]
    ''').replace("\n", "\n    ").strip() in out
    assert "loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))" in function_source(out, "train_step")
    assert manual(result) == []
    [info] = [d for d in result.diagnostics if "unwrapped" in d.message]
    assert info.fixed and info.line == line_of(NESTED_DEVICE, 'with tf.device("/cpu:0"):')


def test_ops_pinned_to_the_worker_without_variables_are_unwrapped_too():
    source = NESTED_DEVICE.replace('with tf.device("/cpu:0"):', 'with tf.device("/job:worker/task:%d" % 0):')
    source = source.replace('            w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())\n', "")
    source = source.replace("        global_step = tf.train", '        w = tf.get_variable("w", [3, 1])\n'
                            "        global_step = tf.train")
    result = migrate(source, select=["TFM301"])
    assert "ParameterServerStrategy(" in result.output and "/job:worker" not in result.output


def test_variables_pinned_to_each_worker_are_not_shared_so_the_block_is_left():
    source = NESTED_DEVICE.replace('with tf.device("/cpu:0"):', 'with tf.device("/job:worker/task:%d" % task):')
    result = migrate(source, select=["TFM301"])
    assert result.output == dedent(source)
    [message] = manual(result)
    assert "local to each worker task" in message and "no strategy keeps per-task variables" in message


def test_variables_pinned_to_the_ps_are_shared_anyway():
    source = NESTED_DEVICE.replace('with tf.device("/cpu:0"):', 'with tf.device("/job:ps/task:0"):')
    result = migrate(source, select=["TFM301"])
    assert "ParameterServerStrategy(" in result.output and manual(result) == []


def test_a_graph_context_around_the_migrated_block_goes():
    source = '''
        import tensorflow.compat.v1 as tf


        def train(cluster, server, steps):
            with tf.Graph().as_default():
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
                    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))
                    global_step = tf.train.get_or_create_global_step()
                    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
                with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
                    for _ in range(steps):
                        sess.run(train_op, feed_dict={x: batch()})
    '''
    out = migrate(source, select=["TFM301"]).output
    # the variables and steps are eager now: a TF1 graph around them would capture them
    assert "as_default" not in out and "tf.Graph" not in out
    assert "\n    strategy = tf.distribute.ParameterServerStrategy(" in out


def test_a_graph_context_without_a_migrated_block_stays():
    source = '''
        import tensorflow.compat.v1 as tf


        def evaluate():
            with tf.Graph().as_default():
                x = tf.constant(1.0)
    '''
    assert migrate(source, select=["TFM301"]).output == dedent(source)


def function_source(out: str, name: str) -> str:
    tree = ast.parse(out)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(out, node)


# ------------------------------------------------------------------------ P2d: why a block is left, located

TRAIN_OP_FROM_HELPER = '''
import tensorflow as tf
from model import build_model


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            global_step, loss, train_op = build_model()
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0) as sess:
            while not sess.should_stop():
                sess.run(train_op)
'''


def test_a_train_op_from_a_helper_is_named_where_it_is_built():
    result = migrate(TRAIN_OP_FROM_HELPER)
    [diagnostic] = [d for d in result.manual_work if d.code == "TFM301"]
    assert diagnostic.line == line_of(TRAIN_OP_FROM_HELPER, "global_step, loss, train_op = build_model()")
    assert "(`train_op`) comes from `build_model(...)`" in diagnostic.message
    assert "device-setter block without an optimizer train op" not in diagnostic.message
    assert "inline" in diagnostic.hint
    # the training stays TF1, and so does the cluster it runs on
    assert "MonitoredTrainingSession(master=server.target" in result.output
    assert "cluster_resolver" not in result.output


def test_a_train_op_in_an_object_is_named_with_the_fetched_expression():
    source = TRAIN_OP_FROM_HELPER.replace("global_step, loss, train_op = build_model()", "model = Model(FLAGS)")
    source = source.replace("sess.run(train_op)", "sess.run(model.train_op)")
    result = migrate(source, select=["TFM301"])
    [diagnostic] = result.manual_work
    assert "(`model.train_op`) comes from `Model(...)`" in diagnostic.message
    assert diagnostic.line == line_of(source, "model = Model(FLAGS)")


def test_gradients_without_compute_gradients_are_named():
    source = TRAIN_OP_FROM_HELPER.replace(
        "global_step, loss, train_op = build_model()",
        "grads = average_gradients(tower_grads)\n"
        "            train_op = tf.train.AdamOptimizer(0.1).apply_gradients(grads)")
    result = migrate(source, select=["TFM301"])
    [diagnostic] = result.manual_work
    assert "the train op `train_op` applies gradients of a loss this rule cannot find" in diagnostic.message


def test_a_model_of_keras_layers_is_left_with_the_layer_named():
    source = '''
        import tensorflow.compat.v1 as tf
        from tensorflow.keras.layers import Dense


        def train(cluster, server):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 4])
                y = tf.placeholder(tf.float32, [None, 1])
                prediction = Dense(1)(x)
                loss = tf.reduce_mean(tf.square(prediction - y))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.AdamOptimizer(1e-3).minimize(loss, global_step=global_step)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
                while not sess.should_stop():
                    sess.run(train_op, feed_dict={x: features(), y: labels()})
    '''
    result = migrate(source, select=["TFM301"])
    # a step function would build new layers at every step and train nothing: left as TF1
    assert result.output == dedent(source)
    [diagnostic] = result.manual_work
    assert "the model comes from `Dense(...)`" in diagnostic.message
    assert diagnostic.line == line_of(source, "prediction = Dense(1)(x)")


def test_sync_replicas_outside_any_device_setter_block_is_reported():
    source = '''
        import tensorflow.compat.v1 as tf


        def train(loss, global_step, workers, device_chooser):
            with tf.device(device_chooser):
                opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                                     replicas_to_aggregate=workers)
                train_op = opt.minimize(loss, global_step=global_step)
            return train_op, opt


        def build(cluster):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                v = tf.Variable(0.0)
    '''
    result = migrate(source, select=["TFM301"])
    [diagnostic] = [d for d in result.manual_work if "SyncReplicasOptimizer left in place" in d.message]
    assert diagnostic.code == "TFM301"
    assert diagnostic.line == line_of(source, "opt = tf.train.SyncReplicasOptimizer(")


def test_a_migrated_sync_replicas_gets_no_left_in_place_report():
    result = migrate(SYNC_HOOK_APPENDED, select=["TFM301"])
    assert not [d for d in result.diagnostics if "left in place" in d.message]


def test_a_sync_replicas_in_a_declined_block_is_covered_by_the_block_report():
    source = SYNC_HOOK_APPENDED.replace("x = tf.placeholder(tf.float32, [None, 4])",
                                        "x = tf.placeholder(tf.float32, [None, 4])\n"
                                        "        for i in range(2):\n"
                                        "            extra = tf.Variable(0.0)")
    result = migrate(source, select=["TFM301"])
    assert result.output == dedent(source)
    assert not [d for d in result.diagnostics if "left in place" in d.message]
    assert len(result.manual_work) == 1


def test_worker_pinned_variables_before_the_block_are_reported():
    source = '''
        import tensorflow.compat.v1 as tf


        def train(cluster, server, task, steps):
            with tf.device("/job:worker/task:%d" % task):
                seen = tf.get_variable("seen", [], trainable=False)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
                for _ in range(steps):
                    sess.run(train_op, feed_dict={x: batch()})
    '''
    result = migrate(source, select=["TFM301"])
    assert "ParameterServerStrategy(" in result.output
    [diagnostic] = result.manual_work
    assert "local to each worker task" in diagnostic.message and "run once on the chief" in diagnostic.message
    assert diagnostic.line == line_of(source, 'with tf.device("/job:worker/task:%d" % task):')


def test_a_device_block_before_the_setter_without_variables_is_not_reported():
    source = '''
        import tensorflow.compat.v1 as tf


        def train(cluster, server, steps):
            with tf.device("/job:worker/task:0"):
                scale = tf.constant(2.0)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
                for _ in range(steps):
                    sess.run(train_op, feed_dict={x: batch()})
    '''
    assert manual(migrate(source, select=["TFM301"])) == []


# ------------------------------------------------------------------------ P7: checkpoints saved as TF1 saved them

SUPERVISOR_LOGDIR = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        global_step = tf.Variable(0, name="global_step", trainable=False)
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]))
        loss = tf.reduce_mean(tf.matmul(x, w))
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    sv = tf.train.Supervisor(is_chief=is_chief, logdir="/tmp/train", global_step=global_step)
    sess = sv.prepare_or_wait_for_session(server.target)
    while True:
        _, step = sess.run([train_op, global_step], feed_dict={x: batch()})
        if step >= 1000:
            break
    print("done")
'''


def test_supervisor_logdir_is_saved_every_600_s_and_at_the_end():
    result = migrate(SUPERVISOR_LOGDIR, select=["TFM301"])
    out = result.output
    assert out.startswith("import tensorflow.compat.v1 as tf\nimport time\n")
    assert out[out.index("    checkpoint_dir = "):] == body('''
        checkpoint_dir = "/tmp/train"
        # Checkpoints, restored on start so a restarted job resumes
        # (also from the TF1 job's name-based checkpoints).
        # Saved every 600 s (Supervisor's default save_model_secs) and at the end.
        checkpoint = tf.train.Checkpoint(global_step=global_step, optimizer=optimizer, w=w)
        checkpoint_manager = (
            tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=5) if checkpoint_dir else None)
        if checkpoint_manager is not None and checkpoint_manager.latest_checkpoint:
            restore_checkpoint(checkpoint, checkpoint_manager.latest_checkpoint, [global_step, w])
        next_checkpoint_time = time.monotonic() + 600
        while True:
            step = run_train_step(batch())
            if checkpoint_manager is not None and time.monotonic() >= next_checkpoint_time:
                checkpoint_manager.save(checkpoint_number=global_step)
                next_checkpoint_time = time.monotonic() + 600
            if step >= 1000:
                break
        if checkpoint_manager is not None:
            checkpoint_manager.save(checkpoint_number=global_step)
        print("done")
    ''')
    assert manual(result) == []


def test_supervisor_with_its_saver_turned_off_saves_nothing():
    source = SUPERVISOR_LOGDIR.replace('logdir="/tmp/train",', 'logdir="/tmp/train", saver=None,')
    out = migrate(source, select=["TFM301"]).output
    assert "restore_checkpoint(checkpoint, " in out  # TF1 still restored from logdir
    assert ".save(" not in out and "time.monotonic" not in out
    assert "# The TF1 code saved none" in out


def test_supervisor_save_model_secs_sets_the_period():
    source = SUPERVISOR_LOGDIR.replace('logdir="/tmp/train",', 'logdir="/tmp/train", save_model_secs=45,')
    out = migrate(source, select=["TFM301"]).output
    assert out.count("time.monotonic() + 45") == 2 and "600" not in out


def test_no_checkpoint_directory_no_checkpoint_code():
    source = SUPERVISOR_LOGDIR.replace('logdir="/tmp/train", ', "")
    out = migrate(source, select=["TFM301"]).output
    assert "Checkpoint" not in out and "time" not in out.split("\n")[1]


SESSION_IN_BRANCHES = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, remote):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        global_step = tf.Variable(0, name="global_step", trainable=False)
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]))
        loss = tf.reduce_mean(tf.matmul(x, w))
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    sv = tf.train.Supervisor(is_chief=is_chief, logdir="/tmp/train", global_step=global_step)
    if remote:
        print("using", remote)
        sess = sv.prepare_or_wait_for_session("grpc://" + remote)
    else:
        sess = sv.prepare_or_wait_for_session(server.target)
    while True:
        _, step = sess.run([train_op, global_step], feed_dict={x: batch()})
        if step >= 1000:
            break
'''


def test_session_made_in_branches_gets_one_checkpoint_setup_before_them():
    out = migrate(SESSION_IN_BRANCHES, select=["TFM301"]).output
    assert out.count("tf.train.Checkpoint(") == 1
    assert out.index("restore_checkpoint(checkpoint, ") < out.index("    if remote:\n        print(\"using\", remote)\n")
    assert "else:" not in out and "pass" not in out
    assert out.rstrip().endswith("checkpoint_manager.save(checkpoint_number=global_step)")


MTS_CHECKPOINTS = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, steps, directory):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, checkpoint_dir=directory) as sess:
        for _ in range(steps):
            _, value = sess.run([train_op, loss], feed_dict={x: batch()})
            if value < 0.01:
                break
'''


def test_monitored_session_checkpoints_every_600_s_by_default():
    out = migrate(MTS_CHECKPOINTS, select=["TFM301"]).output
    assert "# Saved every 600 s (MonitoredTrainingSession's default save_checkpoint_secs) and at the end" in out
    loop = out[out.index("    for _ in range(steps):"):]
    assert loop == body('''
        for _ in range(steps):
            value = run_train_step(batch())
            if checkpoint_manager is not None and time.monotonic() >= next_checkpoint_time:
                checkpoint_manager.save(checkpoint_number=global_step)
                next_checkpoint_time = time.monotonic() + 600
            if value < 0.01:
                break
        if checkpoint_manager is not None:
            checkpoint_manager.save(checkpoint_number=global_step)
    ''')


def test_monitored_session_checkpoint_seconds_are_kept():
    source = MTS_CHECKPOINTS.replace("checkpoint_dir=directory)", "checkpoint_dir=directory, save_checkpoint_secs=30)")
    out = migrate(source, select=["TFM301"]).output
    assert out.count("time.monotonic() + 30") == 2 and "600" not in out


def test_monitored_session_checkpoint_steps_stay_step_based():
    source = MTS_CHECKPOINTS.replace("checkpoint_dir=directory)", "checkpoint_dir=directory, save_checkpoint_steps=5)")
    out = migrate(source, select=["TFM301"]).output
    assert "time.monotonic" not in out
    assert "if checkpoint_manager is not None and int(global_step.numpy()) % 5 == 0:" in out


def test_monitored_session_with_saving_turned_off_only_restores():
    source = MTS_CHECKPOINTS.replace(
        "checkpoint_dir=directory)", "checkpoint_dir=directory, save_checkpoint_secs=None)")
    out = migrate(source, select=["TFM301"]).output
    assert "restore_checkpoint(checkpoint, " in out and ".save(" not in out


def test_a_pipelined_loop_saves_on_the_timer_after_its_steps_in_flight():
    source = MTS_CHECKPOINTS.replace("            if value < 0.01:\n                break\n", "")
    source = source.replace("_, value = sess.run([train_op, loss]", "sess.run(train_op")
    out = migrate(source, select=["TFM301"]).output
    assert "queue_pending_steps()" in out  # pipelined
    save = out.index("if checkpoint_manager is not None and time.monotonic() >= next_checkpoint_time:")
    flush = out.index("queue_pending_steps()", save)
    drain = out.index("while steps_in_flight:", save)
    assert flush < drain < out.index("checkpoint_manager.save(checkpoint_number=global_step)", save)


# ------------------------------------------------------------------------ P10: optimizer built by a helper

OPTIMIZER_HELPER = '''
import tensorflow.compat.v1 as tf


def make_optimizer(kind, rate):
    if kind == "adam":
        return tf.train.AdamOptimizer(rate)
    elif kind == "momentum":
        return tf.train.MomentumOptimizer(rate, momentum=0.8)
    return tf.train.GradientDescentOptimizer(rate)


def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0))
        global_step = tf.train.get_or_create_global_step()
        opt = make_optimizer("adam", 0.01)
        train_op = opt.minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
        for _ in range(steps):
            sess.run(train_op, feed_dict={x: batch()})
'''


def test_a_helper_returning_tf1_optimizers_returns_the_keras_ones():
    result = migrate(OPTIMIZER_HELPER, select=["TFM301"])
    out = result.output
    assert function_source(out, "make_optimizer") == dedent('''
        def make_optimizer(kind, rate):
            if kind == "adam":
                return tf.keras.optimizers.Adam(learning_rate=rate, epsilon=1e-08)
            elif kind == "momentum":
                return tf.keras.optimizers.SGD(learning_rate=rate, momentum=0.8)
            return tf.keras.optimizers.SGD(learning_rate=rate)
    ''').strip()
    # the helper's call is made once, under the strategy
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = ")]
    assert 'opt = make_optimizer("adam", 0.01)' in scope
    assert manual(result) == []
    assert any("make_optimizer()" in d.message and d.fixed for d in result.diagnostics)


def test_a_helper_return_without_an_equivalent_is_reported_where_it_is():
    source = OPTIMIZER_HELPER.replace("return tf.train.GradientDescentOptimizer(rate)",
                                      "return tf.train.FtrlOptimizer(rate)")
    result = migrate(source, select=["TFM301"])
    assert "return tf.compat.v1.train.FtrlOptimizer(rate)" in result.output
    [diagnostic] = result.manual_work
    assert "`make_optimizer` returns tf.train.FtrlOptimizer(...) here" in diagnostic.message
    assert diagnostic.line == line_of(source, "return tf.train.FtrlOptimizer(rate)")


def test_an_optimizer_from_another_module_is_reported_not_left_silently():
    source = OPTIMIZER_HELPER.replace('opt = make_optimizer("adam", 0.01)', 'opt = optimizers.build("adam", 0.01)')
    result = migrate(source, select=["TFM301"])
    # make_optimizer is not the program's optimizer here: left as it is
    assert "return tf.train.AdamOptimizer(rate)" in result.output
    [diagnostic] = result.manual_work
    assert "the optimizer `opt` comes from `optimizers.build(...)`, which this file does not define" in diagnostic.message
    assert diagnostic.line == line_of(source, 'opt = optimizers.build("adam", 0.01)')


def test_an_optimizer_built_in_the_block_leaves_helpers_alone():
    source = OPTIMIZER_HELPER.replace('opt = make_optimizer("adam", 0.01)', "opt = tf.train.AdamOptimizer(0.01)")
    out = migrate(source, select=["TFM301"]).output
    assert function_source(out, "make_optimizer") == function_source(dedent(source), "make_optimizer")


def test_a_keras_optimizer_built_in_the_block_is_left_alone():
    source = OPTIMIZER_HELPER.replace('opt = make_optimizer("adam", 0.01)',
                                      "opt = tf.keras.optimizers.Adam(learning_rate=0.01)")
    result = migrate(source, select=["TFM301"])
    assert "opt = tf.keras.optimizers.Adam(learning_rate=0.01)" in result.output
    assert manual(result) == []
