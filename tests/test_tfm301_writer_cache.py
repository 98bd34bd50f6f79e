"""TF1's summary writer cache (`tf.summary.FileWriterCache.get(logdir)`, also
imported from its private module as SummaryWriterCache) is a FileWriter to the
summaries stage of TFM301: carried to a TF2 writer, or removed with the
summaries it wrote, never left as a TF1 writer that fails in eager mode."""

from migrate.codemod.engine import dedent, migrate_source

CACHED_WRITER = dedent(
    """
    import tensorflow as tf

    def train(cluster, server, batches, logdir):
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 2])
            w = tf.Variable(tf.zeros([2, 1]))
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
            tf.summary.scalar("loss", loss)
            summary_op = tf.summary.merge_all()
            global_step = tf.train.get_or_create_global_step()
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            writer = tf.summary.FileWriterCache.get(logdir)
        hooks = [tf.train.StopAtStepHook(last_step=100)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, hooks=hooks) as sess:
            while not sess.should_stop():
                _, summary, step = sess.run([train_op, summary_op, global_step], feed_dict={x: next(batches)})
                writer.add_summary(summary, step)
    """
)


def test_a_cached_writer_becomes_a_tf2_writer():
    out = migrate_source(CACHED_WRITER).output
    assert "ParameterServerStrategy" in out
    assert "FileWriterCache" not in out
    assert "tf.summary.create_file_writer(logdir)" in out
    assert 'tf.summary.scalar("loss"' in out
    compile(out, "<migrated>", "exec")
    assert migrate_source(out).output == out
