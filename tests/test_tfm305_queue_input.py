"""TFM305: TF1 queue-based input pipelines (file-name queues read by readers,
array slices, tf.train.batch / shuffle_batch) become the tf.data pipeline of
the same stages, and TFM301 migrates the training that reads it.

Fixtures are written for these tests in the shapes seen in real programs: a
TFRecord reader in a function handed the file-name queue with shuffle_batch
in an ``inputs()`` helper; a CSV TextLineReader + decode_csv + tf.train.batch
helper with num_epochs (the loop ending at the end of the data); arrays
sliced by slice_input_producer in the device-setter block under a Supervisor
loop ending on OutOfRangeError; a pipeline that cannot be expressed (the
reader's key read) declined with its line. Numerical claims run real
TensorFlow: the tf.data pipeline the rule writes gives the batches the TF1
queues gave.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from migrate.codemod.engine import RuleContext, dedent, migrate_source
from migrate.codemod.rules import _queue_input, _queue_input_emit, _queue_runners


def migrate(source: str, select=None):
    src = dedent(source)
    ast.parse(src)
    result = migrate_source(src, select=list(select) if select is not None else None)
    compile(result.output, "<migrated>", "exec")
    assert migrate_source(result.output, select=list(select) if select is not None else None).output == result.output
    return result


def manual(result) -> list[str]:
    return [d.message for d in result.manual_work]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def function_source(code: str, name: str) -> str:
    tree = ast.parse(code)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return dedent(ast.get_source_segment(code, node))


# ------------------------------------------------------------------------ TFRecords, a reading function, shuffle_batch

TFRECORD_SHUFFLED = '''
import tensorflow.compat.v1 as tf


def decode(filename_queue):
    reader = tf.TFRecordReader()
    _, record = reader.read(filename_queue)
    parsed = tf.parse_single_example(record, {
        "x": tf.FixedLenFeature([3], tf.float32),
        "y": tf.FixedLenFeature([1], tf.float32),
    })
    return parsed["x"], parsed["y"]


def inputs(files, batch_size):
    with tf.name_scope("input"):
        filename_queue = tf.train.string_input_producer(files)
        # both tensors come from one dequeue
        x, y = decode(filename_queue)
        xs, ys = tf.train.shuffle_batch([x, y], batch_size=batch_size, num_threads=4, capacity=500,
                                        min_after_dequeue=100)
        return xs, ys


def train(cluster, server, task, files, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        xs, ys = inputs(files, 16)
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - ys))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def test_a_tfrecord_shuffle_batch_helper_becomes_a_dataset_and_the_training_migrates():
    result = migrate(TFRECORD_SHUFFLED)
    out = result.output
    assert manual(result) == []
    assert function_source(out, "decode") == dedent('''
        def decode(record):
            parsed = tf.compat.v1.parse_single_example(record, {
                "x": tf.io.FixedLenFeature([3], tf.float32),
                "y": tf.io.FixedLenFeature([1], tf.float32),
            })
            return parsed["x"], parsed["y"]
    ''').strip("\n")
    # the producer shuffled several files: each epoch in a new order, endlessly
    assert function_source(out, "inputs") == dedent('''
        def inputs(files, batch_size):
            with tf.compat.v1.name_scope("input"):
                filenames = tf.data.Dataset.from_tensor_slices(files)
                filenames = filenames.shuffle(filenames.cardinality()).repeat()
                dataset = tf.data.TFRecordDataset(filenames)
                dataset = dataset.map(decode)
                dataset = dataset.shuffle(500)
                dataset = dataset.batch(batch_size, drop_remainder=True)
                return dataset
    ''').strip("\n")
    assert "iterator = iter(inputs(files, 16))" in out
    assert "schedule_train_step(*iterator.get_next())" in out
    for legacy in ("string_input_producer", "TFRecordReader", "shuffle_batch", "make_one_shot_iterator"):
        assert legacy not in out
    [note] = [d for d in result.diagnostics if d.code == "TFM305"]
    assert note.fixed and note.severity == "info"
    assert note.line == line_of(TFRECORD_SHUFFLED, "xs, ys = tf.train.shuffle_batch(")
    assert "buffer of `500`" in note.message and "not the legacy run's" in note.message
    assert "`num_threads=4`" in note.message


def test_the_rewrite_is_undone_with_its_reason_when_the_training_stays_tf1():
    # a hook of the program's own may end the loop, TFM301 cannot tell when: it declines,
    # and the input stays the queues it was
    source = TFRECORD_SHUFFLED.replace(", hooks=hooks", ", hooks=[StopWhenConverged()]")
    result = migrate(source)
    assert "string_input_producer" in result.output and "TFRecordDataset" not in result.output
    queued, endless = [d.message for d in result.manual_work if d.code == "TFM301"]
    assert "builds a TF1 queue-based input pipeline (`tf.train.shuffle_batch`)" in queued
    assert "TFM305 rewrites it as the tf.data pipeline of the same stages when the rest of the training" in queued
    assert "would never end in TF2" in endless and endless.endswith("(found with the rewrite of TFM305 applied)")
    assert not [d for d in result.diagnostics if d.code == "TFM305"]


def test_a_pipeline_already_in_tf_data_is_left_to_tfm301():
    source = TFRECORD_SHUFFLED.replace('''        filename_queue = tf.train.string_input_producer(files)
        # both tensors come from one dequeue
        x, y = decode(filename_queue)
        xs, ys = tf.train.shuffle_batch([x, y], batch_size=batch_size, num_threads=4, capacity=500,
                                        min_after_dequeue=100)
        return xs, ys
''', '''        dataset = tf.data.TFRecordDataset(files).batch(batch_size)
        return tf.data.make_one_shot_iterator(dataset).get_next()
''')
    assert migrate(source, select=["TFM305"]).output == dedent(source)


# ------------------------------------------------------------------------ CSV lines, decode_csv, batch, num_epochs

CSV_EPOCHS = '''
import tensorflow.compat.v1 as tf


def read_rows(data_dir, batch_size, epochs):
    files = tf.gfile.Glob(data_dir + "/rows-*.csv")
    queue = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=False)
    reader = tf.TextLineReader(skip_header_lines=1)
    _, line = reader.read(queue)
    a, b, c, label = tf.decode_csv(line, [[0.0], [0.0], [0.0], [0.0]])
    features = tf.stack([a, b, c])
    return tf.train.batch([features, tf.reshape(label, [1])], batch_size)


def train(cluster, server, task, workers, data_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features, labels = read_rows(data_dir, 8, 2)
        w = tf.Variable(tf.zeros([3, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=workers)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(task == 0)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def test_csv_lines_parsed_in_the_helper_become_a_mapped_function_and_the_epochs_end_the_loop():
    result = migrate(CSV_EPOCHS)
    out = result.output
    assert manual(result) == []
    assert function_source(out, "read_rows") == dedent('''
        def read_rows(data_dir, batch_size, epochs):
            files = tf.io.gfile.glob(data_dir + "/rows-*.csv")

            def parse_record(line):
                a, b, c, label = tf.compat.v1.decode_csv(line, [[0.0], [0.0], [0.0], [0.0]])
                features = tf.stack([a, b, c])
                return features, tf.reshape(label, [1])

            filenames = tf.data.Dataset.from_tensor_slices(files)
            filenames = filenames.repeat(epochs)
            dataset = filenames.flat_map(lambda name: tf.data.TextLineDataset(name).skip(1))
            dataset = dataset.map(parse_record)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            return dataset
    ''').strip("\n")
    assert "MultiWorkerMirroredStrategy" in out and "iterator = iter(read_rows(data_dir, 8, 2))" in out
    # the end of the epochs ends the loop, as OutOfRangeError ended the monitored session
    loop = out[out.index("    try:\n"):]
    assert loop == textwrap.indent(dedent('''
        try:
            while True:
                run_train_step(*iterator.get_next())
        except tf.errors.OutOfRangeError:
            # MonitoredTrainingSession ended quietly when the input ran out; so does this.
            pass
    ''').lstrip("\n"), "    ")
    [note] = [d for d in result.diagnostics if d.code == "TFM305"]
    assert "repeated `epochs` times" in note.message and "shuffle" not in note.message


def test_two_readers_batched_together_are_zipped():
    source = CSV_EPOCHS.replace('''    _, line = reader.read(queue)
    a, b, c, label = tf.decode_csv(line, [[0.0], [0.0], [0.0], [0.0]])
    features = tf.stack([a, b, c])
    return tf.train.batch([features, tf.reshape(label, [1])], batch_size)
''', '''    _, line = reader.read(queue)
    a, b, c = tf.decode_csv(line, [[0.0], [0.0], [0.0]])
    features = tf.stack([a, b, c])
    label_queue = tf.train.string_input_producer(tf.gfile.Glob(data_dir + "/labels-*.csv"), num_epochs=epochs,
                                                 shuffle=False)
    label_reader = tf.TextLineReader()
    _, label_line = label_reader.read(label_queue)
    label = tf.decode_csv(label_line, [[0.0]])
    return tf.train.batch([features, label], batch_size)
''')
    out = migrate(source).output
    body = function_source(out, "read_rows")
    assert "def parse_record(line, label_line):" in body
    assert ("dataset = tf.data.Dataset.zip((filenames.flat_map(lambda name: tf.data.TextLineDataset(name).skip(1)),"
            ' tf.data.TextLineDataset(tf.io.gfile.glob(data_dir + "/labels-*.csv")).repeat(epochs)))') in body
    assert "TextLineReader" not in out


# ------------------------------------------------------------------------ arrays sliced in the block, Supervisor

SLICED = '''
import numpy as np
import tensorflow.compat.v1 as tf


def train(cluster, server, task, epochs):
    features = np.arange(60, dtype=np.float32).reshape(20, 3)
    targets = np.ones([20, 1], dtype=np.float32)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x, y = tf.train.slice_input_producer([features, targets], num_epochs=epochs, shuffle=False)
        xs, ys = tf.train.batch([x, y], batch_size=4)
        w = tf.Variable(tf.zeros([3, 1]), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - ys))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=global_step)
        init_op = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())
    sv = tf.train.Supervisor(is_chief=task == 0, init_op=init_op, global_step=global_step)
    with sv.managed_session(server.target) as sess:
        try:
            while not sv.should_stop():
                _, step = sess.run([train_op, global_step])
        except tf.errors.OutOfRangeError:
            print("done after", step)
    sv.stop()
'''


def test_sliced_arrays_in_the_block_become_a_dataset_of_the_same_slices():
    result = migrate(SLICED)
    out = result.output
    assert manual(result) == []
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = ")]
    assert textwrap.dedent(scope[scope.index("        dataset"):]) == dedent('''
        dataset = tf.data.Dataset.from_tensor_slices((features, targets))
        dataset = dataset.repeat(epochs)
        dataset = dataset.batch(4, drop_remainder=True)
        # TF1's one-shot iterator: each session run of the training op took the next batch.
        # One iterator over the dataset, made once; each step is given the next batch.
        iterator = iter(dataset)
    ''').lstrip("\n")
    assert "        while True:\n            step = run_train_step(*iterator.get_next())\n" in out
    assert 'except tf.errors.OutOfRangeError:\n        print("done after", step)' in out
    assert "slice_input_producer" not in out and "local_variables_initializer" not in out


def test_shuffled_slices_are_reshuffled_each_epoch():
    out = migrate(SLICED.replace(", shuffle=False", ", seed=3")).output
    assert "dataset = dataset.shuffle(dataset.cardinality(), seed=3).repeat(epochs)\n" in out


# ------------------------------------------------------------------------ declined, with the reason where it is

@pytest.mark.parametrize("change, why, where", [
    (("    _, line = reader.read(queue)\n", "    key, line = reader.read(queue)\n    tf.summary.text(\"row\", key)\n"),
     "the reader's key `key`", "key, line = reader.read(queue)"),
    (("tf.train.batch([features, tf.reshape(label, [1])], batch_size)",
      "tf.train.batch([features, tf.reshape(label, [1])], batch_size, dynamic_pad=True)"), "`dynamic_pad`",
     "tf.compat.v1.train.batch([features, tf.reshape(label, [1])], batch_size, dynamic_pad=True)` in `read_rows()`"),
    (("tf.train.batch([features, tf.reshape(label, [1])], batch_size)",
      "tf.train.batch_join([[features, tf.reshape(label, [1])]], batch_size)"), "interleaved by the batching threads",
     "tf.compat.v1.train.batch_join([[features, tf.reshape(label, [1])]], batch_size)` in `read_rows()`"),
])
def test_a_pipeline_tf_data_cannot_express_exactly_is_declined_with_its_reason(change, why, where):
    source = CSV_EPOCHS.replace(*change)
    assert source != CSV_EPOCHS
    result = migrate(source)
    assert "TextLineReader" in result.output and "TextLineDataset" not in result.output
    [reason] = [m for m in manual(result) if "queue-based input pipeline" in m]
    assert "TFM305 does not rewrite it as a tf.data pipeline" in reason and why in reason
    assert f"`{where}" in reason


def test_a_queue_filled_by_session_runs_is_not_taken_for_a_reader_pipeline():
    source = CSV_EPOCHS.replace('''    queue = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=False)
    reader = tf.TextLineReader(skip_header_lines=1)
    _, line = reader.read(queue)
''', '''    queue = tf.FIFOQueue(100, [tf.string], shapes=[[]])
    line = queue.dequeue()
''')
    result = migrate(source)
    assert "TextLineDataset" not in result.output and "FIFOQueue" in result.output
    [reason] = [m for m in manual(result) if "queue-based input pipeline" in m]
    assert "no reader or producer of this block makes" in reason


# ------------------------------------------------------------------------ the batches are TF1's

def _write_records(path, rows):
    tf = pytest.importorskip("tensorflow")
    with tf.io.TFRecordWriter(str(path)) as writer:
        for x, y in rows:
            example = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=[y])),
            }))
            writer.write(example.SerializeToString())


ORDERED = TFRECORD_SHUFFLED.replace(
    "        filename_queue = tf.train.string_input_producer(files)\n",
    "        filename_queue = tf.train.string_input_producer(files, num_epochs=2, shuffle=False)\n").replace(
    "xs, ys = tf.train.shuffle_batch([x, y], batch_size=batch_size, num_threads=4, capacity=500,\n"
    "                                        min_after_dequeue=100)",
    "xs, ys = tf.train.batch([x, y], batch_size=batch_size)")


def test_the_dataset_gives_the_batches_tf1s_queues_gave_and_ends_where_they_ended(tmp_path):
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    files = []
    for k in range(2):  # 2 files of 7 records, 2 epochs: 28 records, 7 full batches of 4
        files.append(str(tmp_path / f"part-{k}.tfrecords"))
        _write_records(files[-1], [([k * 100 + i, i, -i], float(k * 10 + i)) for i in range(7)])
    legacy_scope: dict = {}
    exec(compile(dedent(ORDERED), "<legacy>", "exec"), legacy_scope)  # noqa: S102 - our fixture
    want = []
    graph = tf.Graph()
    with graph.as_default():
        batch = legacy_scope["inputs"](files, 4)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.local_variables_initializer())
            coord = tf.compat.v1.train.Coordinator()
            threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    want.append(sess.run(batch))
            coord.request_stop()
            coord.join(threads)
    migrated = migrate(ORDERED).output
    assert "tf.data.TFRecordDataset(files).repeat(2)" in migrated
    scope: dict = {}
    exec(compile(migrated, "<migrated>", "exec"), scope)  # noqa: S102 - the codemod's own output
    got = [tuple(t.numpy() for t in element) for element in scope["inputs"](files, 4)]
    assert len(want) == 7 and len(got) == len(want)
    for (want_x, want_y), (got_x, got_y) in zip(want, got):
        np.testing.assert_array_equal(got_x, want_x)
        np.testing.assert_array_equal(got_y, want_y)


# ------------------------------------------------------------------------ check: the migrated job trains as the legacy one

JOB = Path(__file__).parent / "programs" / "queue_input_job.py"


@pytest.mark.slow
def test_check_says_the_migrated_queue_input_job_trains_bit_for_bit_as_the_legacy_one(tmp_path):
    """The legacy job (its queues run by queue runners, one batching thread)
    and the migration (the tf.data pipeline TFM305 wrote, read by the chief) on
    a loopback cluster, one worker: the same losses at every step."""
    pytest.importorskip("tensorflow")
    result = migrate_source(JOB.read_text(), path=str(JOB))
    assert not result.manual_work and "TFRecordDataset" in result.output
    migrated = tmp_path / "migrated.py"
    migrated.write_text(result.output)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(JOB), str(migrated), "--steps", "20", "--workers", "1",
         "--out", str(out), "--no-plot"],
        cwd=Path(__file__).parent.parent, capture_output=True, text=True, timeout=1200, check=False)
    report = json.loads((out / "report.json").read_text())
    assert proc.returncode == 0 and report["verdict"] == "equivalent", report.get("reason")
    assert report["strategy"] == "parameter_server"
    comparison = report["comparison"]
    assert comparison["steps_compared"] == 20 and comparison["max_abs_diff"] == 0.0  # bit for bit


# ------------------------------------------------------------------------ a plain session with a coordinator

COORDINATED = '''
import tensorflow.compat.v1 as tf


def train(cluster, server, files):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        queue = tf.train.string_input_producer(files, num_epochs=1, shuffle=False)
        reader = tf.FixedLengthRecordReader(record_bytes=16)
        _, raw = reader.read(queue)
        values = tf.reshape(tf.cast(tf.decode_raw(raw, tf.uint8), tf.float32), [16])
        batch = tf.train.batch([values], batch_size=4)
        w = tf.Variable(tf.zeros([16, 1]), name="w")
        loss = tf.reduce_mean(tf.matmul(batch[0], w))
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        init_op = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())
    with tf.Session(server.target) as sess:
        sess.run(init_op)
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while not coord.should_stop():
                sess.run(train_op)
        except tf.errors.OutOfRangeError:
            print("epoch done")
        finally:
            coord.request_stop()
        coord.join(threads)
'''


def test_the_queue_runners_coordinator_goes_with_the_queues_and_the_data_s_end_ends_the_loop():
    result = migrate(COORDINATED)
    out = result.output
    assert manual(result) == []
    assert "dataset = tf.data.FixedLengthRecordDataset(files, record_bytes=16).repeat(1)" in out
    for gone in ("train.Coordinator", "start_queue_runners", "request_stop", "coord.", "threads"):
        assert gone not in out
    assert "steps_in_flight.append((schedule_train_step(iterator.get_next()),))" in out
    assert out.rstrip().endswith('except tf.errors.OutOfRangeError:\n        print("epoch done")')


def test_a_coordinator_the_loop_asks_to_stop_is_kept_and_the_training_left():
    source = COORDINATED.replace("                sess.run(train_op)\n",
                                 "                if sess.run(train_op) is None:\n"
                                 "                    coord.request_stop()\n")
    result = migrate(source)
    assert "FixedLengthRecordReader" in result.output and "Dataset" not in result.output
    assert "coord.request_stop()" in result.output and "tf.compat.v1.Session(" in result.output
    assert any("start_queue_runners" in m for m in manual(result))


def test_a_script_s_coordinator_at_the_top_level_goes_too():
    source = '''
import tensorflow.compat.v1 as tf

with tf.device("/cpu:0"):
    queue = tf.train.string_input_producer(["a.csv"], num_epochs=3)
    reader = tf.TextLineReader()
    _, line = reader.read(queue)
    x, y = tf.decode_csv(line, [[0.0], [0.0]])
    xs, ys = tf.train.batch([x, y], batch_size=10)
sess = tf.Session()
coord = tf.train.Coordinator()
threads = tf.train.start_queue_runners(sess=sess, coord=coord)
try:
    while not coord.should_stop():
        print(sess.run(xs))
except tf.errors.OutOfRangeError:
    print("done")
finally:
    coord.request_stop()
coord.join(threads)
'''
    result = migrate_source(dedent(source), select=["TFM305"])
    # no device setter: not a training TFM305 prepares, the program is left as it is
    assert result.output == dedent(source)
    # its stages, applied as the rule applies them
    module = cst.parse_module(dedent(source))
    qualname = RuleContext(module, "<test>").qualname
    pipelines = [p for p in _queue_input.find(module, qualname) if isinstance(p, _queue_input.QueuePipeline)]
    out = _queue_runners.without_plumbing(_queue_input_emit.rewrite(module, pipelines), qualname).code
    assert out.endswith(dedent('''
        sess = tf.Session()
        try:
            while True:
                print(sess.run(xs))
        except tf.errors.OutOfRangeError:
            print("done")
    '''))
    assert "start_queue_runners" not in out and "TextLineDataset" in out


# ------------------------------------------------------------------------ what the helper computes from its batch

PARSED_AFTER_BATCH = '''
import tensorflow.compat.v1 as tf


def inputs(files, batch_size, classes):
    queue = tf.train.string_input_producer(files, shuffle=False)
    reader = tf.TFRecordReader()
    _, serialized = reader.read(queue)
    serialized_batch, = tf.train.batch([serialized], batch_size=batch_size)
    features = tf.parse_example(serialized_batch, {"x": tf.FixedLenFeature([3], tf.float32),
                                                   "label": tf.FixedLenFeature([], tf.int64)})
    labels = tf.one_hot(features["label"], classes)
    return features["x"], labels


def train(cluster, server, task, files, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        xs, ys = inputs(files, 16, 2)
        w = tf.get_variable("w", [3, 2], initializer=tf.zeros_initializer())
        loss = tf.losses.softmax_cross_entropy(ys, tf.matmul(xs, w))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def test_what_the_helper_computes_from_its_batch_is_mapped_over_the_batches():
    result = migrate(PARSED_AFTER_BATCH)
    assert manual(result) == []
    assert function_source(result.output, "inputs") == dedent('''
        def inputs(files, batch_size, classes):
            def prepare_batch(serialized_batch):
                features = tf.compat.v1.parse_example(serialized_batch, {"x": tf.io.FixedLenFeature([3], tf.float32),
                                                               "label": tf.io.FixedLenFeature([], tf.int64)})
                labels = tf.one_hot(features["label"], classes)
                return features["x"], labels

            dataset = tf.data.TFRecordDataset(files).repeat()
            dataset = dataset.batch(batch_size, drop_remainder=True)
            dataset = dataset.map(prepare_batch)
            return dataset
    ''').strip("\n")


def test_a_summary_of_the_batch_declines_with_its_reason():
    source = PARSED_AFTER_BATCH.replace('    labels = tf.one_hot(features["label"], classes)\n',
                                        '    labels = tf.one_hot(features["label"], classes)\n'
                                        '    tf.summary.histogram("labels", labels)\n')
    result = migrate(source)
    assert "TFRecordReader" in result.output
    [reason] = [m for m in manual(result) if "queue-based input pipeline" in m]
    assert "a summary of the batch (`tf.compat.v1.summary.histogram(...)`)" in reason


def test_one_batched_tensor_stays_a_list_of_one_as_tf1_returned_it():
    source = PARSED_AFTER_BATCH.replace('''    serialized_batch, = tf.train.batch([serialized], batch_size=batch_size)
    features = tf.parse_example(serialized_batch, {"x": tf.FixedLenFeature([3], tf.float32),
                                                   "label": tf.FixedLenFeature([], tf.int64)})
    labels = tf.one_hot(features["label"], classes)
    return features["x"], labels
''', '''    return tf.train.batch([serialized], batch_size=batch_size)
''').replace("xs, ys = inputs(files, 16, 2)", "serialized_batch = inputs(files, 16, 2)\n"
             "        features = tf.parse_example(serialized_batch[0], {\"x\": tf.FixedLenFeature([3], tf.float32),"
             " \"y\": tf.FixedLenFeature([2], tf.float32)})\n        xs, ys = features[\"x\"], features[\"y\"]")
    out = migrate(source, select=["TFM101", "TFM305"]).output
    assert "dataset = dataset.map(lambda serialized: (serialized,))\n" in out


# ------------------------------------------------------------------------ the reader in a worker's block, Supervisor

FLAGGED_JOB = '''
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", "", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "", "ps tasks")
flags.DEFINE_string("worker_hosts", "", "worker tasks")
flags.DEFINE_string("rows", "rows.csv", "training rows")
FLAGS = flags.FLAGS


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        with tf.device(tf.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
            rows = tf.train.string_input_producer([FLAGS.rows], num_epochs=5)
            reader = tf.TextLineReader()
            _, row = reader.read(rows)
            first, second, target = tf.decode_csv(row, record_defaults=[[0.0], [0.0], [0.0]])
            features = tf.stack([first, second])
            feature_batch, target_batch = tf.train.shuffle_batch(
                [features, target], batch_size=32, capacity=2000, min_after_dequeue=1000)
            w = tf.Variable(tf.zeros([2, 1]))
            loss = tf.reduce_mean(tf.square(tf.matmul(feature_batch, w) - tf.expand_dims(target_batch, 1)))
            global_step = tf.Variable(0, trainable=False)
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
            init_op = tf.global_variables_initializer()
            local_init = tf.local_variables_initializer()
        sv = tf.train.Supervisor(is_chief=(FLAGS.task_index == 0), logdir="/tmp/train_logs",
                                 init_op=init_op, local_init_op=local_init, global_step=global_step)
        with sv.managed_session(server.target) as sess:
            while not sv.should_stop():
                _, loss_value, step = sess.run([train_op, loss, global_step])
                if step % 100 == 0:
                    print("step %d loss %f" % (step, loss_value))
        sv.stop()


if __name__ == "__main__":
    tf.app.run()
'''


def test_a_reader_in_the_worker_block_becomes_the_chief_s_dataset():
    result = migrate(FLAGGED_JOB)
    out = result.output
    assert manual(result) == []
    scope = out[out.index("with strategy.scope():"):out.index("trainable_variables = ")]
    assert textwrap.dedent(scope[scope.index("            def parse_record"):]) == dedent('''
        def parse_record(row):
            first, second, target = tf.compat.v1.decode_csv(row, record_defaults=[[0.0], [0.0], [0.0]])
            features = tf.stack([first, second])
            return features, target

        dataset = tf.data.TextLineDataset([FLAGS.rows]).repeat(5)
        dataset = dataset.map(parse_record)
        dataset = dataset.shuffle(2000)
        dataset = dataset.batch(32, drop_remainder=True)
        # TF1's one-shot iterator: each session run of the training op took the next batch.
        # One iterator over the dataset, made once; each step is given the next batch.
        iterator = iter(dataset)
    ''').lstrip("\n")
    assert "except tf.errors.OutOfRangeError:" in out  # five epochs, then the end of the data
    for legacy in ("train.Supervisor", "TextLineReader", "shuffle_batch", "local_variables_initializer"):
        assert legacy not in out


SYNC_JOB_CHANGES = (
    ("        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)\n",
     ("        optimizer = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),\n"
     "                                                   replicas_to_aggregate=len(FLAGS.worker_hosts.split(\",\")))\n"
     "        train_op = optimizer.minimize(loss, global_step=global_step)\n")),
    ("    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]\n",
     ("    hooks = [optimizer.make_session_run_hook(FLAGS.task_index == 0),\n"
     "             tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]\n")),
)


@pytest.mark.slow
def test_check_says_the_synchronous_queue_input_job_on_two_workers_trains_bit_for_bit(tmp_path):
    """The same job with SyncReplicasOptimizer on two workers, each reading the
    whole file as each TF1 worker did, against MultiWorkerMirroredStrategy with
    a dataset per worker: the same losses at every step."""
    pytest.importorskip("tensorflow")
    source = JOB.read_text()
    for old, new in SYNC_JOB_CHANGES:
        assert old in source
        source = source.replace(old, new)
    legacy = tmp_path / "sync_job.py"
    legacy.write_text(source)
    result = migrate_source(source, path=str(legacy))
    assert not result.manual_work and "MultiWorkerMirroredStrategy" in result.output
    migrated = tmp_path / "migrated.py"
    migrated.write_text(result.output)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", str(legacy), str(migrated), "--steps", "20", "--workers", "2",
         "--out", str(out), "--no-plot"],
        cwd=Path(__file__).parent.parent, capture_output=True, text=True, timeout=1200, check=False)
    report = json.loads((out / "report.json").read_text())
    assert proc.returncode == 0 and report["verdict"] == "equivalent", report.get("reason")
    assert report["strategy"] == "multi_worker_mirrored"
    comparison = report["comparison"]
    assert comparison["steps_compared"] == 20 and comparison["max_abs_diff"] == 0.0  # bit for bit


# ------------------------------------------------------------------------ several readers of one queue, joined

JOINED = '''
import tensorflow.compat.v1 as tf


def read_example(filename_queue):
    reader = tf.TFRecordReader()
    _, record = reader.read(filename_queue)
    parsed = tf.parse_single_example(record, {
        "x": tf.FixedLenFeature([3], tf.float32),
        "y": tf.FixedLenFeature([1], tf.float32),
    })
    return parsed["x"], parsed["y"]


def inputs(files, batch_size, read_threads, epochs):
    filename_queue = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=True)
    example_list = [read_example(filename_queue) for _ in range(read_threads)]
    return tf.train.shuffle_batch_join(example_list, batch_size=batch_size, capacity=2000, min_after_dequeue=1000)


def train(cluster, server, task, files):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        xs, ys = inputs(files, 16, 4, 2)
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - ys))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''


def test_readers_joined_from_one_queue_become_an_interleave_of_their_files():
    result = migrate(JOINED)
    assert manual(result) == []
    assert function_source(result.output, "inputs") == dedent('''
        def inputs(files, batch_size, read_threads, epochs):
            filenames = tf.data.Dataset.from_tensor_slices(files)
            filenames = filenames.shuffle(filenames.cardinality()).repeat(epochs)
            dataset = filenames.interleave(tf.data.TFRecordDataset, cycle_length=read_threads)
            dataset = dataset.map(read_example)
            dataset = dataset.shuffle(2000)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            return dataset
    ''').strip("\n")
    assert "def read_example(record):" in result.output
    [note] = [d for d in result.diagnostics if d.code == "TFM305"]
    assert "the `read_threads` readers' records interleaved file by file" in note.message


CSV_ORDERED = '''
import tensorflow.compat.v1 as tf


def read_rows(files, batch_size, epochs):
    queue = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=False)
    reader = tf.TextLineReader(skip_header_lines=1)
    _, line = reader.read(queue)
    a, b, label = tf.decode_csv(line, [[0.0], [0.0], [0]])
    return tf.train.batch([tf.stack([a, b]), label], batch_size)


def train(cluster, server, task):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features, labels = read_rows(["a.csv"], 4, 1)
'''


def test_csv_lines_give_tf1s_batches_headers_skipped_per_file_the_last_partial_batch_dropped(tmp_path):
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    files = []
    for k in range(2):  # 2 files of 5 rows under a header, 2 epochs: 20 rows, 5 full batches of 4
        files.append(str(tmp_path / f"rows-{k}.csv"))
        rows = "".join(f"{k * 10 + i}.5,{-i}.25,{i % 3}\n" for i in range(5))
        (tmp_path / f"rows-{k}.csv").write_text("first,second,label\n" + rows)
    legacy_scope: dict = {}
    exec(compile(dedent(CSV_ORDERED), "<legacy>", "exec"), legacy_scope)  # noqa: S102 - our fixture
    want = []
    graph = tf.Graph()
    with graph.as_default():
        batch = legacy_scope["read_rows"](files, 4, 2)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.local_variables_initializer())
            coord = tf.compat.v1.train.Coordinator()
            threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    want.append(sess.run(batch))
            coord.request_stop()
            coord.join(threads)
    migrated = migrate(CSV_ORDERED, select=["TFM101", "TFM305"]).output
    assert "flat_map(lambda name: tf.data.TextLineDataset(name).skip(1))" in migrated
    scope: dict = {}
    exec(compile(migrated, "<migrated>", "exec"), scope)  # noqa: S102 - the codemod's own output
    got = []  # TFM305's stage alone: the helper returns the one-shot iterator's batch, run as TF1 ran it
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        batch = scope["read_rows"](files, 4, 2)
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                got.append(sess.run(batch))
    assert len(want) == 5 and len(got) == len(want)
    for (want_x, want_y), (got_x, got_y) in zip(want, got):
        np.testing.assert_array_equal(got_x, want_x)
        np.testing.assert_array_equal(got_y, want_y)


def test_a_constant_made_before_the_queue_stays_where_it_is_for_the_parsing_and_the_model():
    source = CSV_EPOCHS.replace('''    files = tf.gfile.Glob(data_dir + "/rows-*.csv")
''', '''    files = tf.gfile.Glob(data_dir + "/rows-*.csv")
    defaults = [[0.0], [0.0], [0.0], [0.0]]
''').replace("tf.decode_csv(line, [[0.0], [0.0], [0.0], [0.0]])", "tf.decode_csv(line, defaults)").replace(
        "    return tf.train.batch([features, tf.reshape(label, [1])], batch_size)\n",
        "    print(len(defaults), 'columns')\n    return tf.train.batch([features, tf.reshape(label, [1])], batch_size)\n")
    result = migrate(source)
    assert manual(result) == []
    body = function_source(result.output, "read_rows")
    assert body.index("defaults = [[0.0], [0.0], [0.0], [0.0]]") < body.index("def parse_record(line):")
    assert "tf.compat.v1.decode_csv(line, defaults)" in body
