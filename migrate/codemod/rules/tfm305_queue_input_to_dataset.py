"""TFM305 queue-input-to-dataset: a TF1 queue-based input pipeline becomes
the tf.data pipeline with the same stages, so TFM301 can migrate the
training that reads it."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.rules import _queue_input, _queue_input_emit, _queue_runners


class QueueInputToDataset(Rule):
    """What it does
    Rewrites a TF1 queue-based input pipeline -- a file-name queue
    (``tf.train.string_input_producer``) read by a reader (``TFRecordReader``,
    ``TextLineReader``, ``FixedLengthRecordReader``, ``WholeFileReader``;
    in the block or in a function handed the queue), or arrays sliced by
    ``tf.train.slice_input_producer``, the per-record parsing, then
    ``tf.train.batch`` / ``tf.train.shuffle_batch`` (or the ``_join`` forms
    over ``[read(queue) for _ in range(n)]``) -- into a tf.data pipeline of
    the same stages, read by a one-shot iterator: the records
    (``TFRecordDataset`` / ``TextLineDataset`` / ... over the same files, the
    files reshuffled each epoch where the producer shuffled them,
    ``.repeat(num_epochs)``, joined readers interleaved), ``.map()`` of the
    same parsing, ``.shuffle(capacity)`` for the shuffling batchers,
    ``.batch(batch_size, drop_remainder=True)`` (TF1's batches were all full
    unless ``allow_smaller_final_batch``), ``.map()`` of what the input
    function computes from the batch before returning it. With no queue left
    in the module, a session's queue-runner plumbing goes too (see
    ``_queue_runners``).

    Why
    Each session run dequeued the next batch; TF2 has no queue runners, and
    TFM301 would compute the batch once and train every step on it. A
    one-shot iterator's batch TFM301 migrates: one iterator made once, each
    step given the next batch, the loop ending at the end of the data as
    OutOfRangeError ended it.

    Example
        filename_queue = tf.train.string_input_producer([path], num_epochs=2)
        image, label = read_and_decode(filename_queue)
        images, labels = tf.train.shuffle_batch([image, label], batch_size=64, capacity=2000,
                                                min_after_dequeue=1000)
    becomes
        dataset = tf.data.TFRecordDataset([path]).repeat(2)
        dataset = dataset.map(read_and_decode)
        dataset = dataset.shuffle(2000)
        dataset = dataset.batch(64, drop_remainder=True)
        images, labels = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    with ``read_and_decode`` now parsing the record it is handed.

    Fix safety
    The batches hold the same parsed examples; with one batching thread and
    no shuffling they come in TF1's order. Shuffled input (shuffle_batch,
    shuffling producers) and several batching threads never had a
    reproducible order in TF1; an info diagnostic says so. Pipelines that
    cannot be expressed exactly (the readers' keys read, batch_join, queues
    filled by session runs, readers of functions not followed) are left as
    they are; TFM301 says why where it declines the training. The engine
    keeps this rewrite only when TFM301 migrates the training it prepares.
    """

    code = "TFM305"
    name = "queue-input-to-dataset"
    triggers = ("replica_device_setter",)

    def transform(self, module: cst.Module) -> cst.Module:
        found = _queue_input.find(module, self.qualname)
        pipelines = [p for p in found if isinstance(p, _queue_input.QueuePipeline)]
        if not pipelines:
            return module
        for pipeline in pipelines:
            for node, message in _queue_input.notes(pipeline):
                self.report(node, message, fixed=True, severity="info", reference="TensorFlow guide: tf.data")
        return _queue_runners.without_plumbing(_queue_input_emit.rewrite(module, pipelines), self.qualname)


QueueInputToDataset.VALID = (
    # a tf.data pipeline already: nothing to do
    Valid(
        """
        import tensorflow as tf


        def inputs(files, batch_size):
            dataset = tf.data.TFRecordDataset(files).batch(batch_size)
            return tf.data.make_one_shot_iterator(dataset).get_next()


        def main(cluster):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x, y = inputs(["a.tfrecords"], 32)
        """
    ),
    # the reader's key (file and record number) is read: no tf.data equivalent here
    Valid(
        """
        import tensorflow as tf


        def main(cluster, files):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                queue = tf.train.string_input_producer(files)
                reader = tf.TextLineReader()
                key, line = reader.read(queue)
                fields = tf.decode_csv(line, [[0.0], [0.0]])
                xs, ys, keys = tf.train.batch([fields[0], fields[1], key], batch_size=8)
        """
    ),
)
QueueInputToDataset.INVALID = (
    Invalid(
        """
        import tensorflow as tf


        def parse(queue):
            reader = tf.TFRecordReader()
            _, serialized = reader.read(queue)
            features = tf.parse_single_example(serialized, {"x": tf.FixedLenFeature([4], tf.float32)})
            return features["x"], tf.reduce_sum(features["x"])


        def inputs(files, batch_size):
            queue = tf.train.string_input_producer(files, num_epochs=3, shuffle=False)
            x, y = parse(queue)
            xs, ys = tf.train.batch([x, y], batch_size=batch_size)
            return xs, ys


        def main(cluster):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                xs, ys = inputs(["a.tfrecords"], 32)
        """,
        expected="""
        import tensorflow as tf


        def parse(serialized):
            features = tf.parse_single_example(serialized, {"x": tf.FixedLenFeature([4], tf.float32)})
            return features["x"], tf.reduce_sum(features["x"])


        def inputs(files, batch_size):
            dataset = tf.data.TFRecordDataset(files).repeat(3)
            dataset = dataset.map(parse)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            return tf.data.make_one_shot_iterator(dataset).get_next()


        def main(cluster):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                xs, ys = inputs(["a.tfrecords"], 32)
        """,
    ),
)
