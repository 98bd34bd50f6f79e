"""TFM301 on more shapes of unseen legacy scripts (/tmp/wildcheck/TRIAGE.md:
R3, R4, R9, R10).

- R3: a StopAtStepHook bound to a name and passed as ``hooks=[stop_hook]``
  bounds the loop; ``while not sess.should_stop():`` never silently becomes
  an endless ``while True:``.
- R4: tf.data one-shot iterators become one Python iterator made once, each
  step given the next batch; the REGULARIZATION_LOSSES collection is summed
  explicitly or the block is declined.
- R9: TF1's RMSPropOptimizer stays (tf.compat.v1) with an info note.
- R10: device-setter blocks and TF1 training sessions left as TF1 are
  reported where they are, saying why.

As in tests/test_tfm301_wild.py, each behaviour has a no-op case and a
(before, after) pair written for these tests; every output parses and a
second run changes nothing. Numerical claims run real TensorFlow.
"""

from __future__ import annotations

import ast
import re
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


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def body(code: str) -> str:
    """Code written at function-body level (four spaces)."""
    return textwrap.indent(dedent(code).lstrip("\n"), "    ")


def function_source(code: str, name: str) -> str:
    tree = ast.parse(code)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return dedent(ast.get_source_segment(code, node))


# ------------------------------------------------------------------------ R3: hooks held in names

HOOKS_BY_NAME = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, workers, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.ones([2, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.05), replicas_to_aggregate=workers)
        train_op = opt.minimize(loss, global_step=global_step)
    sync_hook = opt.make_session_run_hook(is_chief)
    stop_hook = tf.train.StopAtStepHook(last_step=steps)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           hooks=[sync_hook, stop_hook]) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: next_batch()})
'''


def test_a_stop_hook_held_in_a_name_bounds_the_loop():
    result = migrate(HOOKS_BY_NAME)
    assert result.output == dedent('''
        import tensorflow.compat.v1 as tf


        def train(cluster, server, is_chief, workers, steps):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
            with strategy.scope():
                w = tf.Variable(tf.ones([2, 1]), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                opt = tf.keras.optimizers.SGD(learning_rate=0.05)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
                        # SyncReplicasOptimizer averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return ()
                return strategy.run(train_step_replica, args=(x,))

            def run_train_step(x):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                x = tf.convert_to_tensor(x, tf.float32)
                results = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0].numpy(),
                    train_step(x))
                return results
            while not int(global_step.numpy()) >= steps:
                run_train_step(next_batch())
    ''')
    assert manual(result) == []


def test_a_hook_name_read_after_the_session_keeps_its_binding():
    source = HOOKS_BY_NAME + "    report_hooks([stop_hook])\n"
    out = migrate(source).output
    assert "    stop_hook = tf.train.StopAtStepHook(last_step=steps)\n" in out
    assert "while not int(global_step.numpy()) >= steps:" in out


def test_a_list_of_hook_names_in_a_variable_bounds_the_loop():
    source = HOOKS_BY_NAME.replace("hooks=[sync_hook, stop_hook]) as sess:", "hooks=hooks) as sess:")
    source = source.replace("    with tf.train.MonitoredTrainingSession(",
                            "    hooks = [sync_hook, stop_hook]\n    with tf.train.MonitoredTrainingSession(")
    result = migrate(source)
    assert "while not int(global_step.numpy()) >= steps:" in result.output
    assert "hook" not in result.output and manual(result) == []


def test_a_hook_name_bound_twice_is_not_guessed_and_the_endless_loop_is_declined():
    source = HOOKS_BY_NAME.replace(
        "    stop_hook = tf.train.StopAtStepHook(last_step=steps)\n",
        "    if steps:\n        stop_hook = tf.train.StopAtStepHook(last_step=steps)\n"
        "    else:\n        stop_hook = tf.train.StopAtStepHook(num_steps=10)\n")
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = result.manual_work
    assert "would never end in TF2" in diagnostic.message
    assert diagnostic.line == line_of(source, "while not sess.should_stop():")


# ------------------------------------------------------------------------ R3: should_stop() without a stop hook

NO_STOP_HOOK = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.ones([2, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
        while not sess.should_stop():
            _, value = sess.run([train_op, loss], feed_dict={x: next_batch()})
            print(value)
'''


def test_should_stop_with_nothing_to_end_the_loop_keeps_running_as_the_tf1_job_did():
    # no hook, no request_stop(), no input that runs out: the TF1 job trained until killed
    result = migrate(NO_STOP_HOOK)
    assert "    while True:\n" in result.output and "should_stop" not in result.output
    assert manual(result) == []
    [warning] = [d for d in result.diagnostics if "never ended in TF1 either" in d.message]
    assert (warning.line, warning.severity, warning.fixed) == (
        line_of(NO_STOP_HOOK, "while not sess.should_stop():"), "warning", True)
    assert "range(" in warning.hint
    # the loop never ends: no drain of in-flight steps follows it (it would be dead code)
    assert "while steps_in_flight:" not in result.output


@pytest.mark.parametrize("stopper", [
    # a hook of the program's own may have asked the session to stop
    ("is_chief=is_chief)", "is_chief=is_chief, hooks=[EarlyStop()])"),
    # hooks handed in from elsewhere: not read here
    ("is_chief=is_chief)", "is_chief=is_chief, hooks=hooks)"),
    # something else in the program asks the session to stop
    ("            print(value)\n", "            print(value)\n            watchdog(sess.request_stop)\n"),
])
def test_should_stop_with_a_possible_stopper_is_still_declined(stopper):
    source = NO_STOP_HOOK.replace(*stopper)
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("would never end in TF2" in m for m in manual(result))


@pytest.mark.parametrize("tail", [
    "            if value < 0.01:\n                return value\n",
    "            if value < 0.01:\n                raise StopTraining(value)\n",
    "            if value < 0.01:\n                sys.exit(0)\n",
])
def test_a_loop_with_its_own_way_out_becomes_while_true(tail):
    result = migrate(NO_STOP_HOOK + tail)
    assert "    while True:\n        value = run_train_step(next_batch())\n" in result.output
    assert manual(result) == []


def test_an_or_beside_should_stop_bounds_nothing():
    source = NO_STOP_HOOK.replace("while not sess.should_stop():", "while not sess.should_stop() or warming_up:")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("would never end in TF2" in m for m in manual(result))


def test_a_counter_bound_beside_should_stop_is_the_loop_test():
    source = NO_STOP_HOOK.replace("while not sess.should_stop():", "while not sess.should_stop() and step < 100:")
    out = migrate(source).output
    assert "    while step < 100:\n" in out and "True" not in out


@pytest.mark.parametrize("exit_on", [
    # dead once the session is gone: should_stop() is always False
    "            if sess.should_stop():\n                break\n",
    # request_stop() asked the session to stop; nothing does after the migration
    "            if value < 0.01:\n                sess.request_stop()\n",
])
def test_a_loop_ended_only_through_the_session_is_declined(exit_on):
    source = NO_STOP_HOOK.replace("while not sess.should_stop():", "while True:") if "break" in exit_on else NO_STOP_HOOK
    source += exit_on
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("would never end in TF2" in m for m in manual(result))


def test_a_break_in_an_inner_loop_does_not_end_the_training_loop():
    source = NO_STOP_HOOK + "            for retry in range(3):\n                break\n"
    result = migrate(source)
    assert any("never ended in TF1 either" in d.message for d in result.diagnostics)
    assert "    while True:\n" in result.output and "while steps_in_flight:" not in result.output


# ------------------------------------------------------------------------ R4: tf.data one-shot iterators

SYNC_PIPELINE = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, workers, task, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        dataset = tf.data.Dataset.from_tensor_slices(load_examples())
        dataset = dataset.shard(workers, task).repeat().batch(16)
        features, targets = tf.data.make_one_shot_iterator(dataset).get_next()
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - targets))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.AdamOptimizer(0.01), replicas_to_aggregate=workers)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def test_a_sharded_pipeline_is_iterated_once_per_worker_and_each_step_gets_the_next_batch():
    result = migrate(SYNC_PIPELINE)
    assert result.output == dedent('''
        import tensorflow.compat.v1 as tf


        def train(cluster, server, is_chief, workers, task, steps):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
            with strategy.scope():
                w = tf.Variable(tf.zeros_initializer()(shape=[3, 1], dtype=tf.float32), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                opt = tf.keras.optimizers.Adam(learning_rate=0.01, epsilon=1e-08)
                dataset = tf.data.Dataset.from_tensor_slices(load_examples())
                dataset = dataset.shard(workers, task).repeat().batch(16)
                # TF1's one-shot iterator: each session run of the training op took the next batch.
                # One iterator over the dataset, made once; each step is given the next batch.
                iterator = iter(dataset)
            trainable_variables = [w]

            @tf.function
            def train_step(features, targets):
                def train_step_replica(features, targets):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - targets))
                        # SyncReplicasOptimizer averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return ()
                return strategy.run(train_step_replica, args=(features, targets))

            def run_train_step(features, targets):
                results = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0].numpy(),
                    train_step(features, targets))
                return results
            while not int(global_step.numpy()) >= steps:
                run_train_step(*iterator.get_next())
    ''')
    assert manual(result) == []
    [note] = [d for d in result.diagnostics if "one-shot iterator" in d.message]
    assert note.fixed and "each worker makes its own" in note.message
    assert note.line == line_of(SYNC_PIPELINE, "get_next()")


def test_a_pipeline_that_may_run_out_ends_the_loop_quietly_as_the_monitored_session_did():
    source = SYNC_PIPELINE.replace(".repeat().batch(16)", ".batch(16)")
    out = migrate(source).output
    assert out[out.index("    try:\n"):] == body('''
        try:
            while not int(global_step.numpy()) >= steps:
                run_train_step(*iterator.get_next())
        except tf.errors.OutOfRangeError:
            # MonitoredTrainingSession ended quietly when the input ran out; so does this.
            pass
    ''')


ASYNC_PIPELINE = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, task):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        iterator = tf.data.make_one_shot_iterator(make_dataset(32))
        features, labels = iterator.get_next()
        w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
        loss = tf.losses.mean_squared_error(labels=labels, predictions=tf.matmul(features, w))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    print("trained")
'''


def test_async_pipeline_is_read_by_the_chief_and_its_end_still_finishes_the_queued_steps():
    result = migrate(ASYNC_PIPELINE)
    out = result.output
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = ")]
    assert "iterator = iter(make_dataset(32))" in scope  # the program's own iterator name
    assert "make_one_shot_iterator" not in out and "get_next()" in out
    assert function_source(out, "schedule_train_step").startswith("def schedule_train_step(features, labels):")
    loop = out[out.index("    try:\n"):]
    assert loop == body('''
        try:
            # ParameterServerStrategy trains on whichever worker is free: the chief queues
            # each step and runs the rest of the loop body (finish_train_step) on its results up to
            # max_steps_in_flight steps later, so workers overlap as TF1's asynchronous workers did.
            max_steps_in_flight = 2 * tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().num_tasks("worker")
            steps_in_flight = []

            def finish_train_step(step_results):
                # The rest of the loop body, run on this step's results (fetch() waits for them).
                try:
                    step_results.fetch()
                except tf.errors.UnavailableError:
                    # The step's worker failed and the coordinator could not recover its results:
                    # skip what the loop did with them (a TF1 worker that died lost its step too).
                    return

            try:
                while True:
                    steps_in_flight.append((schedule_train_step(*iterator.get_next()),))
                    while len(steps_in_flight) > max_steps_in_flight:
                        finish_train_step(*steps_in_flight.pop(0))
            finally:
                while steps_in_flight:
                    finish_train_step(*steps_in_flight.pop(0))
        except tf.errors.OutOfRangeError:
            # MonitoredTrainingSession ended quietly when the input ran out; so does this.
            pass
        print("trained")
    ''')
    assert manual(result) == []
    [note] = [d for d in result.diagnostics if "one-shot iterator" in d.message]
    assert "each batch trains once" in note.message


def test_an_endless_pipeline_needs_no_guard():
    source = ASYNC_PIPELINE.replace("while not sess.should_stop():", "for _ in range(100):")
    source = source.replace("make_dataset(32)", "make_dataset(32).repeat()")
    out = migrate(source).output
    assert "OutOfRangeError" not in out and "finally:" not in out
    assert "steps_in_flight.append((schedule_train_step(*iterator.get_next()),))" in out


def test_the_method_spelling_of_the_one_shot_iterator_is_followed():
    source = ASYNC_PIPELINE.replace("tf.data.make_one_shot_iterator(make_dataset(32))",
                                    "make_dataset(32).make_one_shot_iterator()")
    out = migrate(source).output
    assert "iterator = iter(make_dataset(32))" in out and "make_one_shot_iterator" not in out


def test_an_evaluation_fetch_takes_a_batch_as_its_session_run_did():
    source = ASYNC_PIPELINE.replace("    print(\"trained\")\n", "        print(sess.run(loss))\n")
    out = migrate(source).output
    assert "print(tf.nest.map_structure(lambda value: value.numpy(), compute_loss(*iterator.get_next())))" in out
    assert "    @tf.function\n    def compute_loss(features, labels):\n" in out


INPUT_HELPER = '''
import tensorflow.compat.v1 as tf


def dense(inputs, size, name):
    with tf.variable_scope(name):
        w = tf.get_variable("w", [inputs.get_shape().as_list()[-1], size])
        return tf.matmul(inputs, w)


def input_fn(epochs):
    dataset = tf.data.Dataset.from_tensor_slices(load_examples()).batch(8).repeat(epochs)
    return tf.data.make_one_shot_iterator(dataset).get_next()


def train(cluster, server, task, epochs):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x, y = input_fn(epochs)
        logits = dense(tf.nn.relu(dense(x, 16, "hidden")), 2, "logits")
        loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0) as sess:
        batches = 0
        try:
            while True:
                sess.run(train_op)
                batches += 1
        except tf.errors.OutOfRangeError:
            print("epochs done after", batches)
'''


def test_a_helper_returning_a_batch_returns_its_dataset_and_the_model_is_built_without_one():
    result = migrate(INPUT_HELPER)
    out = result.output
    assert function_source(out, "input_fn") == dedent('''
        def input_fn(epochs):
            dataset = tf.data.Dataset.from_tensor_slices(load_examples()).batch(8).repeat(epochs)
            return dataset
    ''').strip()
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = ")]
    assert "iterator = iter(input_fn(epochs))" in scope
    # the model's variables are built on zeros shaped like a batch: no batch is consumed
    assert ("model(*tf.nest.map_structure(lambda spec: tf.zeros([1 if d is None else d for d in spec.shape],"
            " spec.dtype), iterator.element_spec))") in scope
    assert scope.index("iterator = iter(") < scope.index("model(*tf.nest")
    # the program's own handler catches the pipeline's end: no second guard
    assert out.count("OutOfRangeError") == 1
    assert "            run_train_step(*iterator.get_next())\n" in out
    assert manual(result) == []


def test_a_helper_that_returns_a_batch_to_other_callers_too_is_declined():
    source = INPUT_HELPER + "\n\ndef evaluate():\n    return input_fn(1)\n"
    result = migrate(source)
    assert result.output == dedent(source)
    [message] = manual(result)
    assert "`input_fn()` returns a one-shot iterator's batch and is called elsewhere too" in message


@pytest.mark.parametrize("change, why, where", [
    (("iterator = tf.data.make_one_shot_iterator(make_dataset(32))",
      "iterator = tf.data.make_initializable_iterator(make_dataset(32))"), "an initializable iterator",
     "make_initializable_iterator"),
    (("        features, labels = iterator.get_next()\n",
      "        features, labels = iterator.get_next()\n        more_features, more_labels = iterator.get_next()\n"),
     "`iterator.get_next()` is called more than once", "more_features"),
])
def test_iterators_a_python_iterator_cannot_stand_for_are_declined_where_they_are(change, why, where):
    source = ASYNC_PIPELINE.replace(*change)
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = [d for d in result.manual_work if why in d.message]
    assert diagnostic.line == line_of(source, where)


def test_an_async_pipeline_sharded_by_task_is_declined():
    source = ASYNC_PIPELINE.replace("make_dataset(32)", "make_dataset(32).shard(2, task)")
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = result.manual_work
    assert "sharded per task" in diagnostic.message and "create_per_worker_dataset" in diagnostic.hint
    assert diagnostic.line == line_of(source, "make_one_shot_iterator")


def test_a_dataset_statement_the_model_also_reads_is_declined():
    source = ASYNC_PIPELINE.replace(
        "        iterator = tf.data.make_one_shot_iterator(make_dataset(32))\n",
        "        dataset = tf.data.Dataset.range(10)\n"
        "        iterator = tf.data.make_one_shot_iterator(dataset)\n")
    source = source.replace("predictions=tf.matmul(features, w))",
                            "predictions=tf.matmul(features, w) * tf.cast(dataset.cardinality(), tf.float32))")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`dataset` belongs to the input pipeline and is also read by the model" in m for m in manual(result))


def test_model_code_reading_its_own_iterator_is_declined_where_it_is_called():
    # the steps would call the model, and the iterator inside it, at every step
    source = INPUT_HELPER.replace(
        "        x, y = input_fn(epochs)\n        logits = dense(tf.nn.relu(dense(x, 16, \"hidden\")), 2, \"logits\")\n",
        "        logits, y = network(epochs)\n")
    source = source.replace("def train(", '''def network(epochs):
    x, y = tf.data.make_one_shot_iterator(tf.data.Dataset.range(epochs)).get_next()
    return dense(x, 2, "logits"), y


def train(''')
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = result.manual_work
    assert "`network` reads a tf.data iterator itself" in diagnostic.message
    assert diagnostic.line == line_of(source, "logits, y = network(epochs)")


def test_an_input_helper_that_names_its_iterator_is_declined_not_read_once():
    # built once under the strategy, it would hand every step the same first batch
    source = INPUT_HELPER.replace(
        "    return tf.data.make_one_shot_iterator(dataset).get_next()\n",
        "    iterator = dataset.make_one_shot_iterator()\n    return iterator.get_next()\n")
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = result.manual_work
    assert "`input_fn` reads a tf.data iterator itself" in diagnostic.message
    assert diagnostic.line == line_of(source, "x, y = input_fn(epochs)")


def test_an_iterator_read_outside_the_training_block_is_left_alone():
    source = ASYNC_PIPELINE + '''

def peek(dataset):
    batch = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session() as sess:
        return sess.run(batch)
'''
    result = migrate(source)
    assert function_source(result.output, "peek") == function_source(dedent(source), "peek")
    assert manual(result) == []


# --- numerics (real TensorFlow)

def test_the_generated_iterator_gives_tf1s_batches_and_ends_with_its_error():
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    values = np.arange(20, dtype=np.float32).reshape(10, 2)
    graph = tf.Graph()
    with graph.as_default():
        batch = tf.compat.v1.data.make_one_shot_iterator(
            tf.compat.v1.data.Dataset.from_tensor_slices(values).batch(4)).get_next()
        want = []
        with tf.compat.v1.Session(graph=graph) as sess, pytest.raises(tf.errors.OutOfRangeError):
            while True:
                want.append(sess.run(batch))
    out = migrate(INPUT_HELPER).output
    build = next(line.strip() for line in out.splitlines() if line.strip().startswith("model(*tf.nest"))
    seen_shapes = []
    namespace = {
        "tf": tf,
        "iterator": iter(tf.data.Dataset.from_tensor_slices((values, values[:, 0].astype(np.int64))).batch(4)),
        "model": lambda x, y: seen_shapes.append((x.shape.as_list(), y.shape.as_list(), y.dtype)),
    }
    exec(build, namespace)  # noqa: S102 - the line under test is the codemod's own output
    assert seen_shapes == [([1, 2], [1], tf.int64)]
    got = []
    with pytest.raises(tf.errors.OutOfRangeError):
        while True:
            got.append(namespace["iterator"].get_next()[0].numpy())
    # building the model took no batch: the steps see every batch, in TF1's order
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


# ------------------------------------------------------------------------ R4: the regularization collection

REGULARIZED = '''
import tensorflow.compat.v1 as tf


def penalty(weights):
    return 0.01 * tf.nn.l2_loss(weights)


def rescale(t):
    scale = tf.get_variable("scale", [1], initializer=tf.ones_initializer(), regularizer=penalty)
    return t * scale


def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.get_variable("w", [3, 2], regularizer=penalty)
        v = tf.get_variable("v", [2, 1], regularizer=lambda t: 0.5 * tf.reduce_sum(tf.abs(t)))
        loss = tf.reduce_mean(tf.matmul(tf.matmul(x, w), v)) + tf.losses.get_regularization_loss()
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
        for _ in range(steps):
            sess.run(train_op, feed_dict={x: next_batch()})
'''


def test_regularizers_of_the_block_s_variables_are_summed_in_the_step():
    result = migrate(REGULARIZED)
    step = function_source(result.output, "train_step")
    assert ("loss = tf.reduce_mean(tf.matmul(tf.matmul(x, w), v)) + tf.add_n([penalty(w),"
            " (lambda t: 0.5 * tf.reduce_sum(tf.abs(t)))(v)])") in step
    train = function_source(result.output, "train")
    assert "get_regularization_loss" not in train and "regularizer" not in train
    assert manual(result) == []
    assert any("REGULARIZATION_LOSSES" in d.message and d.fixed for d in result.diagnostics)


def test_a_regularizer_nothing_reads_is_dropped_without_a_word():
    source = REGULARIZED.replace(" + tf.losses.get_regularization_loss()", "")
    result = migrate(source)
    assert "regularizer" not in function_source(result.output, "train")
    assert not [d for d in result.diagnostics if "REGULARIZATION" in d.message] and manual(result) == []


@pytest.mark.parametrize("change, source_of_term", [
    (('        w = tf.get_variable("w", [3, 2], regularizer=penalty)\n',
      ('        w = tf.get_variable("w", [3, 2])\n'
       '        tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, penalty(w))\n')),
     "the term added by add_to_collection"),
    (("        loss = tf.reduce_mean(tf.matmul(tf.matmul(x, w), v))",
      "        loss = tf.reduce_mean(rescale(tf.matmul(tf.matmul(x, w), v)))"),
     "the regularizer of a get_variable in `rescale`"),
])
def test_terms_added_another_way_decline_the_block_on_the_read(change, source_of_term):
    source = REGULARIZED.replace(*change)
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = [d for d in result.manual_work if "REGULARIZATION_LOSSES" in d.message]
    assert source_of_term in diagnostic.message and "would be counted wrongly or lost" in diagnostic.message
    assert diagnostic.line == line_of(source, "tf.losses.get_regularization_loss()")


def test_generated_regularization_sum_equals_tf1s_collection():
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    start_w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    start_v = np.array([[0.5], [-2.0]], np.float32)
    graph = tf.Graph()
    with graph.as_default():
        def penalty(weights):
            return 0.01 * tf.nn.l2_loss(weights)
        tf.compat.v1.get_variable("w", initializer=start_w, regularizer=penalty)
        tf.compat.v1.get_variable("v", initializer=start_v, regularizer=lambda t: 0.5 * tf.reduce_sum(tf.abs(t)))
        total = tf.compat.v1.losses.get_regularization_loss()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            want = sess.run(total)
    step = function_source(migrate(REGULARIZED).output, "train_step")
    expression = re.search(r"\+ (tf\.add_n\(.*\))\n", step).group(1)
    namespace = {"tf": tf, "penalty": lambda weights: 0.01 * tf.nn.l2_loss(weights),
                 "w": tf.Variable(start_w), "v": tf.Variable(start_v)}
    got = tf.function(lambda: eval(expression, namespace))()  # inside a step, as generated
    assert float(got) == float(want) and float(want) > 1.0


# ------------------------------------------------------------------------ R9: TF1 RMSProp kept

def test_rmsprop_stays_tf1s_own_optimizer_with_an_info_note():
    source = HOOKS_BY_NAME.replace("tf.train.GradientDescentOptimizer(0.05)",
                                   "tf.train.RMSPropOptimizer(0.05, decay=0.8, momentum=0.3)")
    result = migrate(source)
    assert "opt = tf.compat.v1.train.RMSPropOptimizer(0.05, decay=0.8, momentum=0.3)" in result.output
    assert "keras" not in result.output
    assert manual(result) == []
    [note] = [d for d in result.diagnostics if "RMSProp" in d.message]
    assert note.fixed and note.severity == "info" and "accumulator" in note.message
    assert note.line == line_of(source, "tf.train.RMSPropOptimizer(0.05")


def test_an_optimizer_helper_returning_rmsprop_keeps_it_with_an_info_note():
    source = HOOKS_BY_NAME.replace(
        "opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.05), replicas_to_aggregate=workers)",
        "opt = make_optimizer(0.05)")
    source = source.replace("def train(", "def make_optimizer(rate):\n    return tf.train.RMSPropOptimizer(rate)\n\n\ndef train(")
    source = source.replace("    sync_hook = opt.make_session_run_hook(is_chief)\n", "").replace("sync_hook, ", "")
    result = migrate(source)
    assert "    return tf.compat.v1.train.RMSPropOptimizer(rate)\n" in result.output
    assert manual(result) == []
    assert any("RMSPropOptimizer" in d.message and d.severity == "info" for d in result.diagnostics)


# ------------------------------------------------------------------------ R10: what is left as TF1 is reported

TRAINER_CLASS = '''
import tensorflow.compat.v1 as tf


class Trainer(object):
    def __init__(self, task):
        self.task = task

    @property
    def placement(self):
        return tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:%d" % self.task)

    def build(self):
        with tf.device(self.placement):
            w = tf.get_variable("w", [4, 1])
            self.loss = tf.reduce_mean(tf.square(tf.matmul(tf.ones([2, 4]), w)))
            self.train_op = tf.train.AdamOptimizer(0.1).minimize(self.loss)

    def fit(self, server, steps):
        if self.task == 0:
            creator = tf.train.ChiefSessionCreator(master=server.target)
        else:
            creator = tf.train.WorkerSessionCreator(master=server.target)
        hooks = [tf.train.StopAtStepHook(last_step=steps)]
        with tf.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(self.train_op)
'''


def test_a_device_function_from_a_property_and_its_session_are_reported_where_they_are():
    result = migrate(TRAINER_CLASS)
    assert result.output == dedent(TRAINER_CLASS)
    by_line = {d.line: d for d in result.manual_work if d.code == "TFM301"}
    block = by_line[line_of(TRAINER_CLASS, "with tf.device(self.placement):")]
    assert "device-setter block left as TF1" in block.message
    assert "`self.placement`, a property returning replica_device_setter(...)" in block.message
    session = by_line[line_of(TRAINER_CLASS, "with tf.train.MonitoredSession(")]
    assert "TF1 training session `tf.train.MonitoredSession(...)` left as TF1 (it runs `self.train_op`)" in session.message
    assert len(by_line) == 2


def test_the_whole_engine_reports_why_the_class_was_left():
    result = migrate(TRAINER_CLASS, select=None)
    codes = [d.code for d in result.manual_work]
    assert codes.count("TFM301") == 2


@pytest.mark.parametrize("setter, how", [
    ("PLACEMENT", "the device function `PLACEMENT` is not bound to replica_device_setter(...) before the block"),
    ("placement()", "its device function comes from `placement()`, a function returning replica_device_setter"),
])
def test_device_functions_bound_elsewhere_are_reported(setter, how):
    source = f'''
import tensorflow.compat.v1 as tf

PLACEMENT = tf.train.replica_device_setter(ps_tasks=1)


def placement():
    return PLACEMENT


def build():
    with tf.device({setter}):
        w = tf.get_variable("w", [4, 1])
    return w
'''
    result = migrate(source)
    assert result.output == dedent(source)
    [diagnostic] = result.manual_work
    assert how in diagnostic.message
    assert diagnostic.line == line_of(source, "with tf.device(")


def test_a_migrated_program_and_a_local_session_get_no_left_as_tf1_report():
    source = HOOKS_BY_NAME + '''

def evaluate(saved):
    with tf.Session() as sess:
        return sess.run(saved)
'''
    result = migrate(source)
    assert "MultiWorkerMirroredStrategy(" in result.output
    assert not [d for d in result.diagnostics if "left as TF1" in d.message]

