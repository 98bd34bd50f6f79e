"""TFM303 on the tower shapes of real multi-GPU scripts (the wild-code
triage): it never crashes, every tower loop it does not rewrite gets a
located diagnostic saying why, function-level towers convert like towers in a
graph block, and a named ``exponential_decay`` becomes a Keras schedule that
trains exactly like the TF1 program (``tfmigrate check``).

The sources are small programs written for these tests, in the shapes the
triage found (queue input, helper-built towers, an EMA grouped with the
update, Saver checkpoints...).
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source
from migrate.runtime import check

ROOT = Path(__file__).resolve().parent.parent


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _migrate(code: str, select=("TFM303",)):
    result = migrate_source(code, select=list(select) if select else None)
    ast.parse(result.output)
    again = migrate_source(result.output, select=list(select) if select else None)
    assert again.output == result.output, "a second run changed the output"
    return result


def _line_of(code: str, text: str) -> int:
    hits = [i for i, line in enumerate(code.splitlines(), 1) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


# --------------------------------------------------------------------------- crashes


NO_INPUT = {
    # towers in `with tf.Graph().as_default(), tf.device(...)`, 2-space indent, a helper
    # module builds each tower's loss from the tower index; the loss is fetched
    "graph_block_helper_module": _src("""
        import tensorflow as tf
        import nets


        def main(argv=None):
          with tf.Graph().as_default(), tf.device('/cpu:0'):
            step = tf.Variable(0, trainable=False)
            sgd = tf.train.GradientDescentOptimizer(0.1)
            per_gpu = []
            for n in range(2):
              with tf.device('/gpu:%d' % n):
                cost = nets.gpu_cost(n)
                per_gpu.append(sgd.compute_gradients(cost))
            update = sgd.apply_gradients(nets.average_gradients(per_gpu), global_step=step)
            with tf.Session() as sess:
              sess.run(tf.global_variables_initializer())
              for _ in range(100):
                value, _ = sess.run([cost, update])
        """),
    # the same without a global step, only the train op run
    "graph_block_train_op_only": _src("""
        import tensorflow as tf


        def main():
            with tf.Graph().as_default(), tf.device('/cpu:0'):
                sgd = tf.train.GradientDescentOptimizer(0.1)
                per_gpu = []
                for n in range(2):
                    with tf.device('/gpu:%d' % n):
                        cost = gpu_cost(n)
                        per_gpu.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(per_gpu))
                with tf.Session() as sess:
                    for _ in range(100):
                        sess.run(update)
        """),
    # no graph block at all
    "function_level": _src("""
        import tensorflow as tf


        def main():
            step = tf.Variable(0, trainable=False)
            sgd = tf.train.GradientDescentOptimizer(0.1)
            per_gpu = []
            for n in range(2):
                with tf.device('/gpu:%d' % n):
                    cost = gpu_cost(n)
                    per_gpu.append(sgd.compute_gradients(cost))
            update = sgd.apply_gradients(average_gradients(per_gpu), global_step=step)
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(100):
                    sess.run(update)
        """),
    # each tower dequeues from an input queue
    "queue": _src("""
        import tensorflow as tf


        def main(files):
            with tf.Graph().as_default(), tf.device('/cpu:0'):
                sgd = tf.train.GradientDescentOptimizer(0.1)
                batches = tf.train.batch(read_examples(files), batch_size=32)
                queue = make_prefetch_queue(batches)
                per_gpu = []
                for n in range(2):
                    with tf.device('/gpu:%d' % n):
                        x, y = queue.dequeue()
                        cost = net_cost(x, y)
                        per_gpu.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(per_gpu))
                sess = tf.Session()
                tf.train.start_queue_runners(sess=sess)
                for _ in range(100):
                    sess.run(update)
        """),
}
NO_INPUT_AT = {
    "graph_block_helper_module": "cost = nets.gpu_cost(n)",
    "graph_block_train_op_only": "cost = gpu_cost(n)",
    "function_level": "cost = gpu_cost(n)",
    "queue": "x, y = queue.dequeue()",
}


@pytest.mark.parametrize("name", sorted(NO_INPUT))
def test_towers_without_fed_input_are_declined_where_the_input_is_built(name):
    """These crashed tfmigrate (the step template's `names = (` with no
    names) or were passed over in silence; now every rule runs, the file is
    left as TFM303 found it, and the diagnostic sits on the tower's input
    naming the modern replacement."""
    code = NO_INPUT[name]
    alone = _migrate(code)
    assert alone.output == code
    everything = _migrate(code, select=None)  # no exception from any rule
    found = [d for d in everything.diagnostics if d.code == "TFM303"]
    assert len(found) == 1, found
    d = found[0]
    assert not d.fixed
    assert d.line == _line_of(code, NO_INPUT_AT[name])
    assert "no fed placeholder" in d.message
    assert "strategy.distribute_datasets_from_function" in d.message
    if name == "queue":
        assert "queue" in d.message and "x, y = queue.dequeue()" in d.message


# --------------------------------------------------------------------------- declines say why


SKELETON = _src("""
    import tensorflow as tf


    def fit(batches):
        with tf.Graph().as_default(), tf.device("/cpu:0"):
            counter = tf.train.get_or_create_global_step()
            sgd = tf.train.GradientDescentOptimizer(0.1)
            feats = tf.placeholder(tf.float32, [32, 4])
            parts = tf.split(feats, 2)
            per_gpu = []
            for k in range(2):
                with tf.device("/gpu:%d" % k):
                    cost = net_cost(parts[k])
                    per_gpu.append(sgd.compute_gradients(cost))
            update = sgd.apply_gradients(average_gradients(per_gpu), global_step=counter)
            with tf.Session() as sess:
                for f in batches:
                    sess.run(update, feed_dict={feats: f})
    """)


def _variant(*replacements: tuple[str, str]) -> str:
    code = SKELETON
    for old, new in replacements:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    return code


DECAY = "rate = tf.train.exponential_decay(0.1, counter, 100, 0.5)\n        sgd = tf.train.{}(rate{})"
SGD_LINE = "sgd = tf.train.GradientDescentOptimizer(0.1)"

# (source, text of the reported line, words the message must contain)
DECLINED = {
    "inside_if": (
        _variant(("        for k in range(2):\n", "        if multi_gpu:\n          for k in range(2):\n")),
        "for k in range(2):", ["inside `if multi_gpu:`"],
    ),
    "module_level": (
        _src("""
            import tensorflow as tf

            sgd = tf.train.GradientDescentOptimizer(0.1)
            per_gpu = []
            for k in range(2):
                with tf.device("/gpu:%d" % k):
                    per_gpu.append(sgd.compute_gradients(net_cost(k)))
            """),
        "for k in range(2):", ["module level"],
    ),
    "inside_session_block": (
        _variant(('with tf.Graph().as_default(), tf.device("/cpu:0"):', "with tf.Graph().as_default(), tf.Session() as s:"),
                 ("        with tf.Session() as sess:\n", "        if True:\n"),
                 ("sess.run(update", "s.run(update")),
        "for k in range(2):", ["inside `with tf.Graph().as_default(), tf.Session() as s:`", "cannot remove"],
    ),
    "loop_over_a_device_list": (
        _variant(("for k in range(2):", "for k in GPU_IDS:")),
        "for k in GPU_IDS:", ["does not run over `range(n)`"],
    ),
    "device_function": (
        _variant(('with tf.device("/gpu:%d" % k):', 'with tf.device(assign_to_device("/gpu:%d" % k, "/cpu:0")):')),
        "for k in range(2):", ["not a device string", "assign_to_device"],
    ),
    "optimizer_from_a_helper": (
        _variant((SGD_LINE, 'sgd = make_optimizer("sgd", 0.1)')),
        'sgd = make_optimizer("sgd", 0.1)', ["optimizer `sgd`", "make_optimizer", "Keras 3 equivalent"],
    ),
    # (an EMA of tf.trainable_variables(), also with an empty moving_average_variables(), is
    # migrated: tests/test_tfm303_real.py)
    "ema_of_more_than_the_trainable_variables": (
        _variant(("update = sgd.apply_gradients(", "applied = sgd.apply_gradients("),
                 ("global_step=counter)\n", (
                     "global_step=counter)\n"
                     "        averager = tf.train.ExponentialMovingAverage(0.99, counter)\n"
                     "        averaged = averager.apply(tf.global_variables())\n"
                     "        update = tf.group(applied, averaged)\n"))),
        "update = tf.group(applied, averaged)", ["also runs `averaged`", "averager.apply("],
    ),
    "saver": (
        _variant(("                sess.run(update, feed_dict={feats: f})\n", (
                     "                sess.run(update, feed_dict={feats: f})\n"
                     "            saver.save(sess, \"/tmp/towers\")\n")),
                 ("        with tf.Session() as sess:\n", "        saver = tf.train.Saver()\n        with tf.Session() as sess:\n")),
        'saver.save(sess, "/tmp/towers")', ["tf.train.Saver", "saver = tf.train.Saver()"],
    ),
    "schedule_with_momentum": (
        _variant((SGD_LINE, DECAY.format("MomentumOptimizer", ", 0.9"))),
        "rate = tf.train.exponential_decay(", ["MomentumOptimizer", "differ"],
    ),
    "schedule_of_a_step_starting_at_1": (
        _variant(("counter = tf.train.get_or_create_global_step()", "counter = tf.Variable(1, trainable=False)"),
                 (SGD_LINE, DECAY.format("GradientDescentOptimizer", ""))),
        "rate = tf.train.exponential_decay(", ["`counter` is not created at 0"],
    ),
    "piecewise_schedule": (
        _variant((SGD_LINE, (
            "rate = tf.train.piecewise_constant(counter, [100], [0.1, 0.01])\n"
            "        sgd = tf.train.GradientDescentOptimizer(rate)"))),
        "rate = tf.train.piecewise_constant(", ["only tf.train.exponential_decay", "PiecewiseConstantDecay"],
    ),
    "schedule_fetched": (
        _variant((SGD_LINE, DECAY.format("GradientDescentOptimizer", "")),
                 ("sess.run(update, feed_dict={feats: f})", "_, now = sess.run([update, rate], feed_dict={feats: f})")),
        "_, now = sess.run([update, rate]", ["also reads `rate`", "LearningRateSchedule"],
    ),
    "clipped_gradients": (
        _variant(("update = sgd.apply_gradients(average_gradients(per_gpu), global_step=counter)", (
            "mean = average_gradients(per_gpu)\n"
            "        clipped = [(tf.clip_by_norm(g, 1.0), v) for g, v in mean]\n"
            "        update = sgd.apply_gradients(clipped, global_step=counter)"))),
        "update = sgd.apply_gradients(clipped", ["applies `clipped`", "not the averaged"],
    ),
    "split_on_another_axis": (
        _variant(("parts = tf.split(feats, 2)", "parts = tf.split(feats, 2, axis=1)")),
        "parts = tf.split(feats, 2, axis=1)", ["axis `1`", "batch axis"],
    ),
    "tower_index_read": (
        _variant(("cost = net_cost(parts[k])", "cost = net_cost(parts[k], seed=k)")),
        "cost = net_cost(parts[k], seed=k)", ["reads the tower index `k`"],
    ),
    "summary_op_fetched_alone": (
        _variant(("                sess.run(update, feed_dict={feats: f})\n", (
                     "                sess.run(update, feed_dict={feats: f})\n"
                     "                logged = sess.run(merged, feed_dict={feats: f})\n")),
                 ("        with tf.Session() as sess:\n", "        merged = tf.summary.merge_all()\n        with tf.Session() as sess:\n")),
        "logged = sess.run(merged", ["TF1 session `sess`", "`merged`", "no longer defines"],
    ),
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_every_tower_loop_left_as_it_is_gets_a_located_reason(name):
    code, at, words = DECLINED[name]
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert len(found) == 1, [(d.line, d.message) for d in found]
    d = found[0]
    assert not d.fixed and d.severity == "warning"
    assert d.line == _line_of(code, at), (d.line, d.message)
    for word in words:
        assert word in d.message, (word, d.message)
    assert d.hint


def test_the_skeleton_itself_converts():
    """The declines above are caused by their one change: the base program converts."""
    result = _migrate(SKELETON)
    assert "tf.distribute.MirroredStrategy" in result.output and "tf.Session" not in result.output
    assert [d.code for d in result.manual_work] == []


def test_canonical_multi_gpu_shape_reports_each_blocker_once():
    """The cifar10-style trainer: queue input and a name_scope name given to
    code not in the program each get a diagnostic on their own line; the
    named exponential_decay, the EMA grouped with the update and the Saver's
    saves do not (they would have been migrated)."""
    code = _src("""
        import tensorflow as tf


        def train(data_dir, gpus, steps):
            with tf.Graph().as_default(), tf.device('/cpu:0'):
                step = tf.get_variable('step', [], initializer=tf.constant_initializer(0), trainable=False)
                rate = tf.train.exponential_decay(0.1, step, 1000, 0.1, staircase=True)
                sgd = tf.train.GradientDescentOptimizer(rate)
                images, labels = read_records(data_dir)
                queue = prefetch(images, labels, capacity=2 * gpus)
                grads_list = []
                with tf.variable_scope(tf.get_variable_scope()):
                    for g in range(gpus):
                        with tf.device('/gpu:%d' % g):
                            with tf.name_scope('replica_%d' % g) as ns:
                                image_batch, label_batch = queue.dequeue()
                                cost = scoped_loss(ns, image_batch, label_batch)
                                tf.get_variable_scope().reuse_variables()
                                grads_list.append(sgd.compute_gradients(cost))
                apply_op = sgd.apply_gradients(average_gradients(grads_list), global_step=step)
                tf.summary.scalar('rate', rate)
                averager = tf.train.ExponentialMovingAverage(0.999, step)
                average_op = averager.apply(tf.trainable_variables())
                train_op = tf.group(apply_op, average_op)
                saver = tf.train.Saver(tf.global_variables())
                sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
                sess.run(tf.global_variables_initializer())
                tf.train.start_queue_runners(sess=sess)
                for i in range(steps):
                    _, c = sess.run([train_op, cost])
                    if i % 1000 == 0:
                        saver.save(sess, data_dir + '/model.ckpt', global_step=i)
        """)
    result = _migrate(code)
    assert result.output == code
    got = sorted((d.line, d.message) for d in result.diagnostics if d.code == "TFM303")
    expected = [
        (_line_of(code, "queue.dequeue()"), "dequeues its batch from a queue"),
        (_line_of(code, "cost = scoped_loss(ns"), "reads `ns`, the name of the tower's scope"),
    ]
    assert [line for line, _ in got] == [line for line, _ in expected]
    for (_, message), (_, words) in zip(got, expected):
        assert words in message and message.startswith("tower loop `for g in range(gpus):`"), message


# --------------------------------------------------------------------------- conversions


FUNCTION_LEVEL = _src("""
    import tensorflow as tf


    def main(batches):
        sgd = tf.train.GradientDescentOptimizer(0.1)
        x = tf.placeholder(tf.float32, [None, 4])
        x_parts = tf.split(x, 2)
        per_gpu = []
        for n in range(2):
            with tf.device('/gpu:%d' % n):
                cost = net_cost(x_parts[n])
                per_gpu.append(sgd.compute_gradients(cost))
        update = sgd.apply_gradients(average_gradients(per_gpu))
        with tf.Session() as sess:
            for b in batches:
                sess.run(update, feed_dict={x: b})
    """)


def test_function_level_towers_convert_as_in_a_graph_block():
    """Towers straight in the function body were passed over in silence while
    the same code under `with tf.device('/cpu:0'):` converted: both now give
    the same program."""
    body = FUNCTION_LEVEL.split("def main(batches):\n", 1)[1]
    wrapped = (FUNCTION_LEVEL.split("def main(batches):\n", 1)[0] + "def main(batches):\n"
               + "    with tf.device('/cpu:0'):\n" + textwrap.indent(body, "    ", lambda line: line.strip() != ""))
    ast.parse(wrapped)
    bare, in_block = _migrate(FUNCTION_LEVEL), _migrate(wrapped)
    assert bare.output == in_block.output
    assert "strategy = tf.distribute.MirroredStrategy(['/gpu:%d' % n for n in range(2)])" in bare.output
    assert "Session(" not in bare.output and "placeholder(" not in bare.output
    # the loop iterates over `batches`, not a range: its steps stay host-fed (an info says why)
    kept = [d for d in bare.diagnostics if "stay fed from host arrays" in d.message]
    assert len(kept) == 1 and kept[0].severity == "info" and "not `for step in range(n)`" in kept[0].message
    (d,) = [d for d in bare.diagnostics if d not in kept]
    assert d.fixed and d.code == "TFM303" and d.line == _line_of(FUNCTION_LEVEL, "for n in range(2):")


def test_whole_placeholders_are_not_sliced():
    """A placeholder every tower read whole (no tf.split) reaches every
    replica whole; only tf.split sources are sliced."""
    code = FUNCTION_LEVEL.replace(
        "x_parts = tf.split(x, 2)\n", "x_parts = tf.split(x, 2)\n    keep = tf.placeholder(tf.float32, [])\n"
    ).replace("net_cost(x_parts[n])", "net_cost(x_parts[n], keep)").replace("{x: b}", "{x: b, keep: 0.5}")
    out = _migrate(code).output
    assert "x, = (\n" in out and "for value in (x,))" in out  # only x is sliced
    assert "return train_step_replica(x, keep)" in out
    assert "strategy.run(train_step_slice, args=(x, keep))" in out
    unsplit = FUNCTION_LEVEL.replace("    x_parts = tf.split(x, 2)\n", "").replace("net_cost(x_parts[n])", "net_cost(x)")
    out = _migrate(unsplit).output
    assert "train_step_slice" not in out and "strategy.run(train_step_replica, args=(x,))" in out


def test_named_exponential_decay_becomes_a_keras_schedule():
    code = _variant((SGD_LINE, DECAY.format("GradientDescentOptimizer", "")))
    result = _migrate(code)
    out = result.output
    assert result.manual_work == []
    assert "exponential_decay" not in out
    schedule = "rate = tf.keras.optimizers.schedules.ExponentialDecay(0.1, 100, 0.5)"
    optimizer = "sgd = tf.keras.optimizers.SGD(learning_rate=rate)"
    assert out.count(schedule) == 1 and out.count(optimizer) == 1
    scope = out.index("with strategy.scope():")
    assert scope < out.index(schedule) < out.index(optimizer) < out.index("trainable_variables = ")
    staircase = _variant((SGD_LINE, DECAY.format("GradientDescentOptimizer", "").replace(
        "0.5)", "0.5, staircase=True)")))
    assert "ExponentialDecay(0.1, 100, 0.5, staircase=True)" in _migrate(staircase).output


# --------------------------------------------------------------------------- equivalence, on TensorFlow


def _decaying_towers(tmp_path: Path) -> Path:
    """The towers reference with a learning rate decayed every step (halved
    every 3 steps, smoothly): 12 steps see the rate change 12 times."""
    code = (ROOT / "legacy_reference" / "in_graph_towers.py").read_text()
    old = "        opt = tf.train.GradientDescentOptimizer(FLAGS.learning_rate)\n"
    assert code.count(old) == 1
    code = code.replace(old, "        lr = tf.train.exponential_decay(FLAGS.learning_rate, global_step, 3, 0.5)\n"
                        "        opt = tf.train.GradientDescentOptimizer(lr)\n")
    path = tmp_path / "towers_decay.py"
    path.write_text(code)
    return path


def _check(legacy: Path, migrated: Path, tmp_path: Path, name: str) -> tuple[int, dict]:
    out = tmp_path / name
    code = check.main([str(legacy), str(migrated), "--out", str(out), "--timeout", "240", "--steps", "12"])
    return code, json.loads((out / "report.json").read_text())


def test_exponential_decay_towers_train_bit_for_bit_like_the_legacy_program(tmp_path):
    """optimizer.iterations drives the Keras schedule as the global step
    drove TF1's, once per step also with two replicas: same losses."""
    legacy = _decaying_towers(tmp_path)
    result = migrate_source(legacy.read_text(), path=str(legacy))
    assert result.manual_work == []
    assert "lr = tf.keras.optimizers.schedules.ExponentialDecay(FLAGS.learning_rate, 3, 0.5)" in result.output
    migrated = tmp_path / "towers_decay_migrated.py"
    migrated.write_text(result.output)
    code, report = _check(legacy, migrated, tmp_path, "check")
    assert code == 0, report["reason"]
    assert report["comparison"]["steps_compared"] == 12
    assert report["comparison"]["max_rel_diff"] <= 1e-6


@pytest.mark.slow
def test_a_wrong_schedule_mapping_would_be_caught(tmp_path):
    """The same check tells a staircase schedule from the smooth one."""
    legacy = _decaying_towers(tmp_path)
    output = migrate_source(legacy.read_text(), path=str(legacy)).output
    right = "ExponentialDecay(FLAGS.learning_rate, 3, 0.5)"
    assert output.count(right) == 1
    wrong = tmp_path / "towers_decay_wrong.py"
    wrong.write_text(output.replace(right, "ExponentialDecay(FLAGS.learning_rate, 3, 0.5, staircase=True)"))
    code, report = _check(legacy, wrong, tmp_path, "check_wrong")
    assert code == 1, report["reason"]
