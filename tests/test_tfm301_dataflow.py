"""TFM301 follows what the device-setter block defines and what the rest of
the program reads (migrate/codemod/rules/_dataflow.py), instead of declining
whenever the rewrite would leave a name unbound:

- (a) host work built in the block (a dataset reader) runs once, before the
  strategy, and the loop still reads it;
- (b) evaluation fetches that also fetch a summary op bind only the values
  the evaluation function returns;
- (c) `tf.train.global_step(sess, gs)` reads the global step variable;
- (d) a session bound to a name and entered later (`with mts as sess:`) is
  the training session; sync plumbing chosen by an `if` goes with it;
- a placeholder a model helper makes and returns (`y, keep_prob = net(x)`)
  is made in the block and passed to the helper, so it is a step argument;
- where a name would still be read unbound, the block is declined with the
  reading statement located and what the name is.

Fixtures are written for these tests in the shapes seen in real scripts;
every output parses and a second run changes nothing.
"""

from __future__ import annotations

import ast
import re

from migrate.codemod.engine import dedent, migrate_source


def migrate(source: str, select=("TFM301",)):
    src = dedent(source)
    ast.parse(src)
    result = migrate_source(src, select=list(select))
    ast.parse(result.output)
    assert migrate_source(result.output, select=list(select)).output == result.output
    return result


def manual(result) -> list:
    return [d for d in result.manual_work if d.code == "TFM301"]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def lines(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip()]


READER = """
import tensorflow.compat.v1 as tf
from tensorflow.examples.tutorials.mnist import input_data


def train(cluster, server, data_dir, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        # the reader downloads once; the loop draws batches from it
        digits = input_data.read_data_sets(data_dir, one_hot=True)
        images = tf.placeholder(tf.float32, [None, 784])
        labels = tf.placeholder(tf.float32, [None, 10])
        w = tf.get_variable("w", [784, 10], initializer=tf.zeros_initializer())
        logits = tf.matmul(images, w)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=200)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs, ys = digits.train.next_batch(32)
            _, value = sess.run([train_op, loss], feed_dict={images: xs, labels: ys})
            print("step", tf.train.global_step(sess, step), "loss", value)
"""


def test_a_dataset_reader_in_the_block_runs_once_before_the_strategy():
    result = migrate(READER)
    out = lines(result.output)
    assert not manual(result)
    reader = out.index("digits = input_data.read_data_sets(data_dir, one_hot=True)")
    # its comment travels with it, and it comes before the strategy, outside every step
    assert out[reader - 1] == "# the reader downloads once; the loop draws batches from it"
    assert out[reader + 1].startswith("strategy = tf.distribute.ParameterServerStrategy(")
    assert result.output.count("read_data_sets") == 1
    assert "xs, ys = digits.train.next_batch(32)" in out
    assert "replica_device_setter" not in result.output


def test_the_global_step_read_through_the_session_reads_the_variable():
    result = migrate(READER)
    assert 'print("step", int(step.numpy()), "loss", value)' in lines(result.output)
    assert "tf.train.global_step" not in result.output and not re.search(r"\bsess\b", result.output)


def test_a_reader_of_a_block_constant_is_built_after_it_under_the_scope():
    source = READER.replace(
        "        digits = input_data.read_data_sets(data_dir, one_hot=True)\n",
        "        folder = data_dir + '/digits'\n        digits = input_data.read_data_sets(folder, one_hot=True)\n")
    out = lines(migrate(source).output)
    scope = out.index("with strategy.scope():")
    assert out.index("folder = data_dir + '/digits'") > scope
    assert out.index("digits = input_data.read_data_sets(folder, one_hot=True)") == (
        out.index("folder = data_dir + '/digits'") + 1)


def test_a_reader_of_graph_values_is_no_host_work():
    # reading a tensor of the block, it is graph work: nothing is hoisted, and the
    # unmigrated use of `images` outside a session run declines the block where it is
    source = READER.replace(
        "        digits = input_data.read_data_sets(data_dir, one_hot=True)\n",
        "        digits = input_data.read_data_sets(data_dir, one_hot=True)\n")
    source = source.replace(
        "        labels = tf.placeholder(tf.float32, [None, 10])\n",
        "        labels = tf.placeholder(tf.float32, [None, 10])\n"
        "        shape_of_input = input_data.dense_to_one_hot(images, 10)\n")
    source = source.replace('print("step",', 'print(shape_of_input, "step",')
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert "it uses `shape_of_input`, built in the device-setter block" in reason.message
    assert reason.line == line_of(source, "print(shape_of_input")


SYNC_CHOICE = """
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, workers):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        step = tf.train.get_or_create_global_step()
        base = tf.train.GradientDescentOptimizer(0.1)
        averaging = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = averaging.minimize(loss, global_step=step)
        init_op = tf.global_variables_initializer()
    # each task picks its own initialization of the sync machinery
    if is_chief:
        local_init = averaging.chief_init_op
    else:
        local_init = averaging.local_step_init_op
    sv = tf.train.Supervisor(is_chief=is_chief, init_op=init_op, local_init_op=local_init,
                             ready_for_local_init_op=averaging.ready_for_local_init_op, global_step=step)
    sess = sv.prepare_or_wait_for_session(server.target)
    for _ in range(100):
        sess.run(train_op, feed_dict={x: batch()})
"""


def test_sync_plumbing_chosen_by_an_if_goes_with_the_session():
    result = migrate(SYNC_CHOICE)
    assert not manual(result)
    assert "MultiWorkerMirroredStrategy" in result.output
    for gone in ("local_init", "chief_init_op", "local_step_init_op", "Supervisor", "if is_chief"):
        assert gone not in result.output
    assert "run_train_step(batch())" in result.output


def test_an_if_that_also_does_other_work_is_not_dropped():
    # the branch prints: it is no sync plumbing only, so it stays, and what it reads is reported
    source = SYNC_CHOICE.replace("        local_init = averaging.chief_init_op\n",
                                 "        local_init = averaging.chief_init_op\n        print('chief')\n")
    result = migrate(source)
    assert "print('chief')" in result.output
    assert "SyncReplicasOptimizer" in result.output
    [reason] = [d for d in manual(result) if "`averaging`" in d.message]
    assert reason.line == line_of(source, "local_init = averaging.chief_init_op")


SESSION_BY_NAME = """
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, workers, test_x, test_y):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 4])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        prediction = tf.matmul(x, w)
        loss = tf.reduce_mean(tf.square(prediction - y))
        tf.summary.scalar("loss", loss)
        error = tf.reduce_mean(tf.abs(prediction - y))
        merged = tf.summary.merge_all()
        step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = opt.minimize(loss, global_step=step)
    sync_hook = opt.make_session_run_hook(is_chief)
    monitored = tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=[sync_hook])
    with monitored as sess:
        for i in range(300):
            sess.run(train_op, feed_dict={x: batch_x(i), y: batch_y(i)})
            if i % 50 == 0:
                summary, err = sess.run([merged, error], feed_dict={x: test_x, y: test_y})
                print(i, err)
"""


def test_a_session_bound_to_a_name_then_entered_is_the_training_session():
    result = migrate(SESSION_BY_NAME)
    assert "MultiWorkerMirroredStrategy" in result.output
    for gone in ("monitored", "MonitoredTrainingSession", "sess.run", "with "):
        assert gone not in result.output.replace("with strategy.scope()", "").replace(
            "with tf.GradientTape()", "")
    assert "run_train_step(batch_x(i), batch_y(i))" in result.output


def test_an_evaluation_fetching_a_summary_binds_only_the_values_it_returns():
    result = migrate(SESSION_BY_NAME)
    out = lines(result.output)
    # compute_error returns `error` alone: unpacking it into (summary, err) would fail
    assert "return error" in out
    assert "err = tf.nest.map_structure(lambda value: value.numpy(), compute_error(test_x, test_y))" in out
    assert "summary" not in result.output.replace("tf.summary", "")


HELPER_PLACEHOLDER = """
import tensorflow.compat.v1 as tf


def network(images):
    w = tf.Variable(tf.truncated_normal([16, 8], stddev=0.1))
    hidden = tf.nn.relu(tf.matmul(images, w))
    # the network makes its own dropout knob and hands it back
    keep = tf.placeholder(tf.float32)
    dropped = tf.nn.dropout(hidden, keep)
    v = tf.Variable(tf.truncated_normal([8, 2], stddev=0.1))
    return tf.matmul(dropped, v), keep


def train(cluster, server, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 16])
        labels = tf.placeholder(tf.float32, [None, 2])
        logits, keep_prob = network(images)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(1e-3).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs, ys = next_batch()
            sess.run(train_op, feed_dict={images: xs, labels: ys, keep_prob: 0.5})
"""


def test_a_placeholder_a_model_helper_returns_becomes_its_parameter_and_a_step_argument():
    result = migrate(HELPER_PLACEHOLDER)
    assert not manual(result)
    out = lines(result.output)
    assert "def network(images, keep):" in out
    assert "keep = tf.placeholder(tf.float32)" not in out
    assert "return tf.matmul(dropped, v)" in out
    # its comment stays with the code that follows it
    assert out[out.index("dropped = tf.nn.dropout(hidden, keep)") - 1] == (
        "# the network makes its own dropout knob and hands it back")
    assert "logits = network(images, keep_prob)" in out
    assert any(line.startswith("def train_step(images, labels, keep_prob):") for line in out)
    # the model is built once with the value the program fed, then each step is given it
    assert "model(tf.zeros([1, 16], tf.float32), tf.zeros([1, 2], tf.float32), tf.constant(0.5, tf.float32))" in out
    assert "run_train_step(xs, ys, 0.5)" in result.output or "pending_steps.append(((xs, ys, 0.5)" in result.output
    assert "placeholder(" not in result.output


def test_a_helper_called_twice_keeps_its_placeholder_and_the_training_is_declined_where_it_is_fed():
    # another caller relies on the helper's own placeholder: nothing is moved
    source = HELPER_PLACEHOLDER + """

def evaluate(images):
    return network(images)
"""
    result = migrate(source)
    # no step could be given keep_prob: the training stays TF1, said where it is fed
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert "`keep_prob` is fed to the session but is not a placeholder of the device-setter block" in reason.message
    assert reason.line == line_of(source, "sess.run(train_op, feed_dict={images: xs, labels: ys, keep_prob: 0.5})")


UNMIGRATED_USE = """
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, export_graph):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: batch()})
        export_graph(sess.graph.as_graph_def())
"""


def test_a_session_used_outside_run_declines_the_block_where_it_is_used():
    result = migrate(UNMIGRATED_USE)
    assert result.output == dedent(UNMIGRATED_USE)
    [reason] = manual(result)
    assert "the TF1 session `sess`" in reason.message and "TF2 has no session" in reason.message
    assert reason.line == line_of(UNMIGRATED_USE, "export_graph(sess.graph")


def test_a_graph_value_used_outside_a_session_run_is_named_where_it_is_used():
    source = UNMIGRATED_USE.replace("export_graph(sess.graph.as_graph_def())", "export_graph(loss.name)")
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert "`loss`, built in the device-setter block" in reason.message
    assert reason.line == line_of(source, "export_graph(loss.name)")


def test_a_run_feeding_too_little_keeps_its_own_reason_next_to_the_decline():
    # the evaluation leaves `keep` unfed (TF1 raised there too): the run is not mapped,
    # and both the decline and the reason for the run are reported on that line
    source = UNMIGRATED_USE.replace(
        "        x = tf.placeholder(tf.float32, [None, 4])\n",
        "        x = tf.placeholder(tf.float32, [None, 4])\n        keep = tf.placeholder(tf.float32, [])\n")
    source = source.replace("tf.matmul(x, w)", "tf.nn.dropout(tf.matmul(x, w), keep)")
    source = source.replace("feed_dict={x: batch()})", "feed_dict={x: batch(), keep: 0.5})")
    source = source.replace("export_graph(sess.graph.as_graph_def())",
                            "print(sess.run(loss, feed_dict={x: batch()}))")
    result = migrate(source)
    assert result.output == dedent(source)
    messages = {d.message for d in manual(result) if d.line == line_of(source, "print(sess.run(loss")}
    assert any(m.startswith("training not migrated: it uses the TF1 session `sess`") for m in messages)
    assert "feed_dict does not feed every placeholder the step needs (`keep` not fed: TF1 raised an error here too)" in (
        messages)


def test_nothing_to_migrate_is_left_alone():
    source = """
    import tensorflow as tf
    from tensorflow.examples.tutorials.mnist import input_data

    digits = input_data.read_data_sets("/tmp/data", one_hot=True)
    print(digits.train.num_examples)
    """
    result = migrate(source)
    assert result.output == dedent(source)
    assert not result.diagnostics


def test_a_placeholder_with_a_default_left_unfed_is_not_called_an_error():
    source = UNMIGRATED_USE.replace(
        "        x = tf.placeholder(tf.float32, [None, 4])\n",
        "        x = tf.placeholder(tf.float32, [None, 4])\n"
        "        keep = tf.placeholder_with_default(1.0, [])\n"
        "        scale = tf.placeholder(tf.float32, [])\n")
    source = source.replace("tf.matmul(x, w)", "tf.nn.dropout(tf.matmul(x, w), keep) * scale")
    source = source.replace("feed_dict={x: batch()})", "feed_dict={x: batch(), keep: 0.5, scale: 1.0})")
    source = source.replace("export_graph(sess.graph.as_graph_def())",
                            "print(sess.run(loss, feed_dict={x: batch()}))")
    result = migrate(source)
    [unfed] = [d.message for d in manual(result) if d.message.startswith("feed_dict does not feed")]
    assert "(`scale` not fed: TF1 raised an error here too)" in unfed and "`keep`" not in unfed


CHOSEN_SUMMARY = SYNC_CHOICE.replace(
    "    # each task picks its own initialization of the sync machinery\n",
    "    # only the chief writes summaries\n"
    "    if is_chief:\n"
    "        summaries = tf.summary.merge_all()\n"
    "    else:\n"
    "        summaries = None\n"
    "    # each task picks its own initialization of the sync machinery\n")


def test_a_summary_op_chosen_by_an_if_is_plumbing_too():
    result = migrate(CHOSEN_SUMMARY)
    assert not manual(result)
    assert "summaries" not in result.output and "merge_all" not in result.output


def test_an_if_choosing_only_none_is_no_plumbing():
    source = SYNC_CHOICE.replace(
        "    # each task picks its own initialization of the sync machinery\n",
        "    if is_chief:\n        marker = None\n    else:\n        marker = None\n"
        "    # each task picks its own initialization of the sync machinery\n")
    assert "marker = None" in migrate(source).output


def test_graph_values_published_as_globals_are_named_on_the_global_statement():
    source = UNMIGRATED_USE.replace(
        "        x = tf.placeholder(tf.float32, [None, 4])\n",
        "        global x\n        x = tf.placeholder(tf.float32, [None, 4])\n")
    source = source.replace("export_graph(sess.graph.as_graph_def())", "pass")
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert "publishes `x` as module globals" in reason.message
    assert reason.line == line_of(source, "global x")


def test_the_functions_reading_published_globals_are_named():
    source = UNMIGRATED_USE.replace(
        "        x = tf.placeholder(tf.float32, [None, 4])\n",
        "        global x\n        x = tf.placeholder(tf.float32, [None, 4])\n")
    source = source.replace("export_graph(sess.graph.as_graph_def())", "pass") + """

def probe(session, value):
    return session.run(x, feed_dict={x: value})


def scale(x):
    return x * 2
"""
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    # `scale` has an `x` of its own: only `probe` reads the published one
    assert "publishes `x` as module globals (`global`) for `probe()`, which runs them" in reason.message


DONE_SIGNALS = """
import tensorflow.compat.v1 as tf


def signal_queue(shard, workers):
    return tf.FIFOQueue(workers, tf.int32, shared_name="finished%d" % shard)


def signal_queues(shards, workers):
    return [signal_queue(shard, workers) for shard in range(shards)]


def train(cluster, server, is_chief, shards, workers):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        # tell every ps shard this worker is finished
        finished = []
        for queue in signal_queues(shards, workers):
            token = queue.enqueue(1)
            finished.append(token)
    sv = tf.train.Supervisor(is_chief=is_chief, global_step=step)
    with sv.managed_session(server.target) as sess:
        for _ in range(100):
            sess.run(train_op, feed_dict={x: batch()})
        for token in finished:
            sess.run(token)
"""


def test_done_signals_to_the_ps_tasks_go_with_the_ps_shutdown():
    result = migrate(DONE_SIGNALS)
    assert not manual(result)
    assert "ParameterServerStrategy" in result.output
    # the queue makers only the signals used go with them
    assert "def signal_queue" not in result.output
    train = result.output[result.output.index("def train("):]
    for gone in ("finished", "enqueue", "for queue in", "for token in", "compute_"):
        assert gone not in train
    assert "run_train_step(batch())" in result.output or "pending_steps.append(((batch(),)" in result.output


def test_a_signal_loop_doing_more_than_enqueueing_is_kept():
    source = DONE_SIGNALS.replace("            finished.append(token)\n",
                                  "            finished.append(token)\n            print(queue)\n")
    result = migrate(source)
    assert "print(queue)" in result.output and "def signal_queues(" in result.output


def test_a_summary_run_alone_for_a_summary_write_goes_with_the_write():
    # only the chief builds the merged op; its serialized result is only written
    source = CHOSEN_SUMMARY.replace(
        "        sess.run(train_op, feed_dict={x: batch()})\n",
        "        sess.run(train_op, feed_dict={x: batch()})\n"
        "        if is_chief:\n"
        "            serialized = sess.run(summaries, feed_dict={x: batch()})\n"
        "            sv.summary_computed(sess, serialized)\n")
    result = migrate(source)
    assert "serialized" not in result.output and "summary_computed" not in result.output
    assert any("TF1 summaries are not carried over" in d.message for d in manual(result))
    assert "MultiWorkerMirroredStrategy" in result.output


def test_a_summary_result_read_by_other_code_is_not_dropped():
    source = CHOSEN_SUMMARY.replace(
        "        sess.run(train_op, feed_dict={x: batch()})\n",
        "        sess.run(train_op, feed_dict={x: batch()})\n"
        "        serialized = sess.run(summaries, feed_dict={x: batch()})\n"
        "        sv.summary_computed(sess, serialized)\n"
        "        archive(serialized)\n")
    result = migrate(source)
    assert "archive(serialized)" in result.output
    assert "serialized = " in result.output


def test_eval_in_the_sessions_default_scope_is_a_run_of_it():
    source = SYNC_CHOICE.replace(
        "        sess.run(train_op, feed_dict={x: batch()})\n",
        "        sess.run(train_op, feed_dict={x: batch()})\n"
        "        with sess.as_default():\n"
        "            print(loss.eval({x: batch()}))\n")
    result = migrate(source, select=("TFM304", "TFM301"))  # TFM304 spells the evals as runs
    assert not manual(result)
    assert "print(tf.nest.map_structure(lambda value: value.numpy(), compute_loss(batch())))" in lines(result.output)
    assert "as_default" not in result.output and ".eval(" not in result.output


def test_eval_naming_its_session_is_a_run_of_it():
    source = SYNC_CHOICE.replace(
        "        sess.run(train_op, feed_dict={x: batch()})\n",
        "        sess.run(train_op, feed_dict={x: batch()})\n"
        "        print(loss.eval(session=sess, feed_dict={x: batch()}))\n")
    result = migrate(source, select=("TFM304", "TFM301"))  # TFM304 spells the evals as runs
    assert not manual(result)
    assert "compute_loss(batch())" in result.output and ".eval(" not in result.output


PLACEHOLDER_BEFORE = SYNC_CHOICE.replace(
    "    with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n"
    "        x = tf.placeholder(tf.float32, [None, 4])\n",
    "    # one input, fed at each step\n"
    "    x = tf.placeholder(tf.float32, [None, 4])\n"
    "    with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n")


def test_a_placeholder_made_before_the_block_in_its_function_is_a_step_argument():
    result = migrate(PLACEHOLDER_BEFORE)
    assert not manual(result)
    out = lines(result.output)
    assert "placeholder(" not in result.output
    assert any(line.startswith("def train_step(x):") for line in out)
    assert "run_train_step(batch())" in out
    # its comment is kept, over what follows
    assert out[out.index("# one input, fed at each step") + 1].startswith("strategy = ")


def test_a_placeholder_made_before_the_block_and_read_elsewhere_declines_it_where_it_is_fed():
    # the function also hands the placeholder out: it cannot become a step argument only
    source = PLACEHOLDER_BEFORE + "    return x\n"
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert reason.line == line_of(source, "return x")
    assert "it uses the placeholder(s) `x` of the training graph as TF1 graph value(s)" in reason.message


def test_a_placeholder_made_before_the_block_and_read_by_another_function_declines_it_where_it_is_fed():
    source = PLACEHOLDER_BEFORE.replace("    x = tf.placeholder(tf.float32, [None, 4])\n",
                                        "    x = tf.placeholder(tf.float32, [None, 4])\n"
                                        "    report = lambda: print(x.name)\n")
    result = migrate(source)
    assert result.output == dedent(source)
    reasons = [d for d in manual(result) if "`x` is fed to the session but is not a placeholder" in d.message]
    assert [d.line for d in reasons] == [line_of(source, "sess.run(train_op, feed_dict={x: batch()})")]
    assert "it is made by `x = tf.placeholder(tf.float32, [None, 4])`" in reasons[0].message


def test_a_placeholder_made_before_the_block_from_a_name_rebound_in_between_is_not_moved():
    # `width` means another thing where the block starts: the placeholder cannot be made there
    source = PLACEHOLDER_BEFORE.replace(
        "    x = tf.placeholder(tf.float32, [None, 4])\n",
        "    width = 4\n    x = tf.placeholder(tf.float32, [None, width])\n    width = 8\n")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`x` is fed to the session but is not a placeholder" in d.message for d in manual(result))


MODULE_PLACEHOLDERS = """
import tensorflow.compat.v1 as tf

FLAGS = tf.app.flags.FLAGS
cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]})
server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
# training data

# the inputs come first, for every task
features = tf.placeholder(tf.float32, [None, 3])
targets = tf.placeholder(tf.float32, [None, 1])

if FLAGS.job_name == "ps":
    server.join()
elif FLAGS.job_name == "worker":
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        w = tf.Variable(tf.zeros([3, 1]))
        residual = tf.matmul(features, w) - targets
        loss = tf.reduce_mean(tf.square(residual))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=50)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            xs, ys = next_batch()
            _, value = sess.run([train_op, loss], feed_dict={features: xs, targets: ys})
            print("loss", value)
"""
# a script at module level: its cluster is migrated with its training
CLUSTER_RULES = ("TFM201", "TFM202", "TFM301")


def test_placeholders_made_at_module_level_before_the_block_are_step_arguments():
    result = migrate(MODULE_PLACEHOLDERS, select=CLUSTER_RULES)
    assert not manual(result)
    out = lines(result.output)
    assert "placeholder(" not in result.output
    assert any(line.startswith("def train_step(features, targets):") for line in out)
    # the comments over the inputs are kept, over what follows
    assert out[out.index("# the inputs come first, for every task") + 1].startswith("if FLAGS.job_name")
    assert "# training data" in out


def test_a_module_placeholder_another_function_reads_stays_and_the_training_is_declined():
    source = MODULE_PLACEHOLDERS + """

def predict(session, xs):
    return session.run(targets, feed_dict={features: xs})
"""
    result = migrate(source, select=CLUSTER_RULES)
    assert result.output == dedent(source)
    reasons = [d for d in manual(result) if "is fed to the session but is not a placeholder" in d.message]
    assert {d.line for d in reasons} == {line_of(source, "_, value = sess.run([train_op, loss]")}


def test_a_function_with_a_parameter_of_the_same_name_does_not_keep_a_module_placeholder():
    # `features` of `scale` is its own parameter, not the module's placeholder
    source = MODULE_PLACEHOLDERS.replace("# the inputs come first", "def scale(features):\n"
                                         "    return features * 2.0\n\n\n# the inputs come first")
    result = migrate(source, select=CLUSTER_RULES)
    assert not manual(result)
    assert "placeholder(" not in result.output
    assert "def scale(features):" in result.output


UNFED_EVAL = """
import tensorflow.compat.v1 as tf


def train(cluster, server, is_chief, test_x, test_y):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 4])
        y = tf.placeholder(tf.float32, [None, 2])
        keep = tf.placeholder(tf.float32)
        w = tf.Variable(tf.zeros([4, 2]))
        logits = tf.nn.dropout(tf.matmul(x, w), keep)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        hits = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), tf.argmax(y, 1)), tf.float32))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=40)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs, ys = batch()
            sess.run(train_op, feed_dict={x: xs, y: ys, keep: 0.5})
        if not is_chief:
            # the dropout knob is forgotten here
            print("hits: %f" % sess.run(hits, feed_dict={x: test_x, y: test_y}))
"""


def test_a_run_that_leaves_a_placeholder_unfed_raises_the_error_tf1_raised():
    result = migrate(UNFED_EVAL)
    assert not manual(result)
    out = lines(result.output)
    # the statement becomes the error TF1 raised there; nothing computes `hits` for it
    raised = out.index('raise tf.errors.InvalidArgumentError(None, None, "no value for keep, which hits needs")')
    assert out[raised - 1] == "# the dropout knob is forgotten here"
    assert "compute_hits" not in result.output and "sess.run" not in result.output
    [said] = [d for d in result.diagnostics if d.code == "TFM301" and "feeds no `keep`" in d.message]
    assert said.line == line_of(UNFED_EVAL, 'print("hits: %f" % sess.run(hits')
    assert "TF1 raised InvalidArgumentError here" in said.message


def test_the_raise_tf1_raised_is_exact_in_tf2():
    # the migrated statement raises what the TF1 session run raised, and only there
    import pytest

    tf = pytest.importorskip("tensorflow")
    out = migrate(UNFED_EVAL).output
    statement = next(line.strip() for line in out.splitlines() if "InvalidArgumentError" in line)
    raised = ast.parse(statement).body[0]
    assert isinstance(raised, ast.Raise) and ast.unparse(raised.exc.func) == "tf.errors.InvalidArgumentError"
    # the arguments it is written with build the error TF2 code catches as TF1's
    error = tf.errors.InvalidArgumentError(*(ast.literal_eval(a) for a in raised.exc.args))
    assert str(error) == "no value for keep, which hits needs"
    legacy = tf.Graph()
    with legacy.as_default():
        keep = tf.compat.v1.placeholder(tf.float32)
        value = keep * 2.0
        with tf.compat.v1.Session() as session, pytest.raises(tf.errors.InvalidArgumentError):
            session.run(value)


def test_an_unfed_run_followed_by_more_code_is_left_and_reported():
    # code after the raise would never run: the rule does not write it, it says why
    source = UNFED_EVAL.replace('            print("hits: %f" % sess.run(hits, feed_dict={x: test_x, y: test_y}))\n',
                                '            print("hits: %f" % sess.run(hits, feed_dict={x: test_x, y: test_y}))\n'
                                '            print("evaluated")\n')
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`keep` not fed: TF1 raised an error here too" in d.message for d in manual(result))


def test_an_unfed_run_after_a_call_with_effects_is_left_and_reported():
    # `record(...)` runs before the session run raised: the statement cannot become the raise alone
    source = UNFED_EVAL.replace('print("hits: %f" % sess.run(hits, feed_dict={x: test_x, y: test_y}))',
                                'record(log(), sess.run(hits, feed_dict={x: test_x, y: test_y}))')
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`keep` not fed: TF1 raised an error here too" in d.message for d in manual(result))


def test_a_serving_export_of_the_session_graph_is_said_to_be_one():
    source = UNMIGRATED_USE.replace(
        "import tensorflow.compat.v1 as tf\n",
        "import tensorflow.compat.v1 as tf\nfrom tensorflow.contrib.session_bundle import exporter\n").replace(
        "        export_graph(sess.graph.as_graph_def())\n",
        "        bundle = exporter.Exporter(saver)\n"
        "        bundle.init(sess.graph.as_graph_def())\n").replace(
        "        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)\n",
        "        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)\n"
        "        saver = tf.train.Saver(sharded=True)\n")
    result = migrate(source)
    assert result.output == dedent(source)
    # an exporter given no signature to serve: nothing says what the TF2 signature would take
    reasons = [d for d in manual(result) if "it exports the trained model for serving" in d.message]
    assert [d.line for d in reasons] == [line_of(source, "bundle.init(sess.graph.as_graph_def())")]
    assert "the exporter is given no named graph signatures" in reasons[0].message
    assert "tf.saved_model.save" in reasons[0].hint


ABSENT_MODEL = """
import tensorflow.compat.v1 as tf
from nets.small_cnn import build_network


def train(cluster, server, is_chief, batches):
    setter = tf.train.replica_device_setter(cluster=cluster)
    with tf.device(setter):
        # the network module makes its own inputs and hands them back
        images, labels, loss = build_network([28, 28, 1], 32)
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(1e-3).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            for xs, ys in batches:
                sess.run(train_op, feed_dict={images: xs, labels: ys})
"""


def test_inputs_made_by_a_module_not_in_the_project_are_said_to_come_from_it():
    """The module makes the placeholders the session feeds: only its code
    could make them the step's arguments. One reason, at the builder's call."""
    result = migrate(ABSENT_MODEL)
    assert result.output == dedent(ABSENT_MODEL)
    [reason] = [d for d in manual(result) if "the session feeds" in d.message]
    assert "the session feeds `images`, `labels`, which `build_network(...)` returns" in reason.message
    assert reason.line == line_of(ABSENT_MODEL, "images, labels, loss = build_network(")
    assert "a function of `nets.small_cnn`, which is not in this project" in reason.message
    assert "make the placeholders in this file's graph block and pass them to `build_network()`" in reason.hint


def test_a_placeholder_a_helper_makes_in_a_name_scope_becomes_its_parameter():
    source = HELPER_PLACEHOLDER.replace(
        "    # the network makes its own dropout knob and hands it back\n"
        "    keep = tf.placeholder(tf.float32)\n"
        "    dropped = tf.nn.dropout(hidden, keep)\n",
        "    with tf.name_scope(\"dropout\"):\n"
        "        # the network makes its own dropout knob and hands it back\n"
        "        keep = tf.placeholder(tf.float32)\n"
        "        dropped = tf.nn.dropout(hidden, keep)\n")
    result = migrate(source)
    assert not manual(result)
    out = lines(result.output)
    assert "def network(images, keep):" in out and "placeholder(" not in result.output
    # the name scope keeps the rest of its statements, the comment over what follows
    scope = out.index('with tf.name_scope("dropout"):')
    assert out[scope + 1:scope + 3] == ["# the network makes its own dropout knob and hands it back",
                                        "dropped = tf.nn.dropout(hidden, keep)"]
    assert any(line.startswith("def train_step(images, labels, keep_prob):") for line in out)


def test_a_helper_whose_name_scope_holds_only_the_placeholder_keeps_it():
    # the scope would be left empty: nothing is moved, the feed is declined where it is
    source = HELPER_PLACEHOLDER.replace(
        "    keep = tf.placeholder(tf.float32)\n",
        "    with tf.name_scope(\"dropout\"):\n        keep = tf.placeholder(tf.float32)\n")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`keep_prob` is fed to the session but is not a placeholder" in d.message for d in manual(result))


def test_sync_plumbing_chosen_by_an_if_inside_the_block_goes_with_the_session():
    # a training function inlined into the block (TFM300) brings its sync plumbing with it
    source = SYNC_CHOICE.replace(
        "        init_op = tf.global_variables_initializer()\n"
        "    # each task picks its own initialization of the sync machinery\n"
        "    if is_chief:\n"
        "        local_init = averaging.chief_init_op\n"
        "    else:\n"
        "        local_init = averaging.local_step_init_op\n",
        "        # each task picks its own initialization of the sync machinery\n"
        "        if is_chief:\n"
        "            local_init = averaging.chief_init_op\n"
        "        else:\n"
        "            local_init = averaging.local_step_init_op\n"
        "        init_op = tf.global_variables_initializer()\n")
    assert "        if is_chief:\n            local_init" in source
    result = migrate(source)
    assert not manual(result)
    assert "MultiWorkerMirroredStrategy" in result.output
    assert "local_init" not in result.output and "averaging" not in result.output


PLACEHOLDER_MAKER = """
import tensorflow.compat.v1 as tf

WIDTH = 4


def input_placeholders(batch_size):
    \"\"\"The inputs of one batch.\"\"\"
    images = tf.placeholder(tf.float32, shape=(batch_size, WIDTH), name="images")
    labels = tf.placeholder(tf.float32, shape=(batch_size, 1))
    return images, labels


def train(cluster, server, is_chief, batch):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        xs_in, ys_in = input_placeholders(batch)
        w = tf.Variable(tf.zeros([WIDTH, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(xs_in, w) - ys_in))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs, ys = next_batch()
            sess.run(train_op, feed_dict={xs_in: xs, ys_in: ys})
"""


def test_a_function_making_only_placeholders_is_inlined_and_its_placeholders_are_step_arguments():
    result = migrate(PLACEHOLDER_MAKER)
    assert not manual(result)
    out = lines(result.output)
    assert any(line.startswith("def train_step(xs_in, ys_in):") for line in out)
    # nothing calls it any more: it goes, with the placeholders TF2 cannot run
    assert "def input_placeholders(batch_size):" not in out and "placeholder(" not in result.output


def test_a_placeholder_maker_called_elsewhere_too_stays_for_those_callers():
    source = PLACEHOLDER_MAKER + """

def export_inputs():
    return input_placeholders(1)
"""
    result = migrate(source)
    assert not manual(result)
    assert "def input_placeholders(batch_size):" in result.output
    assert any(line.startswith("def train_step(xs_in, ys_in):") for line in lines(result.output))


def test_a_placeholder_maker_reading_a_name_the_training_function_shadows_is_not_inlined():
    # `WIDTH` of the helper is the module's; in `train` it would be the parameter
    source = PLACEHOLDER_MAKER.replace("def train(cluster, server, is_chief, batch):",
                                       "def train(cluster, server, is_chief, batch, WIDTH=8):")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`xs_in` is fed to the session but is not a placeholder" in d.message for d in manual(result))


def test_a_placeholder_maker_called_with_an_argument_that_calls_is_not_inlined():
    # the argument would be evaluated once per placeholder instead of once
    source = PLACEHOLDER_MAKER.replace("input_placeholders(batch)", "input_placeholders(batch_size())")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`xs_in` is fed to the session but is not a placeholder" in d.message for d in manual(result))


def test_a_function_that_does_more_than_make_placeholders_is_not_inlined():
    source = PLACEHOLDER_MAKER.replace("    return images, labels\n",
                                       "    tf.add_to_collection(\"inputs\", images)\n    return images, labels\n")
    result = migrate(source)
    assert result.output == dedent(source)
    assert any("`xs_in` is fed to the session but is not a placeholder" in d.message for d in manual(result))


def test_a_placeholder_maker_called_before_the_block_is_made_in_it():
    source = PLACEHOLDER_MAKER.replace(
        "    with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n"
        "        xs_in, ys_in = input_placeholders(batch)\n",
        "    xs_in, ys_in = input_placeholders(batch)\n"
        "    with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n")
    result = migrate(source)
    assert not manual(result)
    assert any(line.startswith("def train_step(xs_in, ys_in):") for line in lines(result.output))
    assert "input_placeholders" not in result.output and "placeholder(" not in result.output


def test_a_placeholder_maker_called_before_the_block_with_its_inputs_read_after_is_declined():
    # the inputs are also handed out after the training: they are no step argument only
    source = PLACEHOLDER_MAKER.replace(
        "    with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n"
        "        xs_in, ys_in = input_placeholders(batch)\n",
        "    xs_in, ys_in = input_placeholders(batch)\n"
        "    with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n") + "    return xs_in\n"
    result = migrate(source)
    assert result.output == dedent(source)
    assert manual(result)


def test_a_saver_saving_a_monitored_session_by_hand_is_said_to_fail_in_tf1():
    """TF1's Saver.save refused a MonitoredTrainingSession (TypeError): the
    migration does not turn that failure into a save (tests/test_tfm301_hand_checkpoints.py
    has the saves it maps)."""
    source = UNMIGRATED_USE.replace(
        "        export_graph(sess.graph.as_graph_def())\n",
        "        saver.save(sess, \"/tmp/model\", global_step=step)\n").replace(
        "        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)\n",
        "        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)\n"
        "        saver = tf.train.Saver()\n")
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert reason.line == line_of(source, "saver.save(sess")
    assert reason.message.startswith("training not migrated: it checkpoints by hand with a TF1 Saver and its"
                                      " `saver.save(sess, ...)` is given a MonitoredSession")
    assert "'sess' must be a Session" in reason.message


FUNCTION_PLACEHOLDERS = """
import tensorflow.compat.v1 as tf

FLAGS = tf.app.flags.FLAGS


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    readings = tf.placeholder(tf.float32, [None, 3])
    expected = tf.placeholder(tf.float32, [None, 1])
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            w = tf.Variable(tf.zeros([3, 1]))
            loss = tf.reduce_mean(tf.square(tf.matmul(readings, w) - expected))
            step = tf.train.get_or_create_global_step()
            train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        hooks = [tf.train.StopAtStepHook(last_step=100)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                               hooks=hooks) as sess:
            while not sess.should_stop():
                xs, ys = batch()
                sess.run(train_op, feed_dict={readings: xs, expected: ys})
"""


def test_placeholders_made_at_the_top_of_the_function_before_the_role_branch_are_step_arguments():
    result = migrate(FUNCTION_PLACEHOLDERS, select=CLUSTER_RULES)
    assert not manual(result)
    assert "placeholder(" not in result.output
    assert any(line.startswith("def train_step(readings, expected):") for line in lines(result.output))


def test_a_function_level_placeholder_also_read_in_another_branch_is_declined():
    source = FUNCTION_PLACEHOLDERS.replace("        server.join()\n",
                                           "        print(readings.name)\n        server.join()\n")
    result = migrate(source, select=CLUSTER_RULES)
    assert result.output == dedent(source)
    assert any("`readings` is fed to the session but is not a placeholder" in d.message for d in manual(result))
