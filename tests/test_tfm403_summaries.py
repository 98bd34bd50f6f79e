"""TFM403, summaries a model_fn writes in TRAIN mode (``tf.summary.scalar`` /
``histogram`` of its own tensors): the TRAIN mode returns their values after
the loss, the loop writes them under the same tags every save_summary_steps, as
the Estimator's summary hook did; the shapes it cannot carry (a running
tf.metrics value, a summary of the EVAL mode) are declined where they are."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from migrate.codemod.engine import migrate_source

JOB = textwrap.dedent(
    """\
    import sys

    import numpy as np
    import tensorflow as tf


    def model_fn(features, labels, mode, params):
        hidden = tf.layers.dense(features["x"], 8, activation=tf.nn.relu)
        logits = tf.layers.dense(hidden, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        hits = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        SUMMARY
        if mode == tf.estimator.ModeKeys.TRAIN:
            tf.summary.histogram("logits", logits)
            optimizer = tf.train.GradientDescentOptimizer(params["lr"])
            train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        return tf.estimator.EstimatorSpec(mode, loss=loss)


    def main(model_dir):
        xs = np.random.RandomState(1).normal(size=(64, 4)).astype(np.float32)
        ys = (xs[:, 0] > 0).astype(np.int64)
        feed = tf.estimator.inputs.numpy_input_fn(x={"x": xs}, y=ys, batch_size=8, num_epochs=None, shuffle=False)
        config = tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=5)
        est = tf.estimator.Estimator(model_fn=model_fn, config=config, params={"lr": 0.1})
        est.train(input_fn=feed, max_steps=20)


    if __name__ == "__main__":
        main(sys.argv[1])
    """
)


def test_train_summaries_are_returned_by_the_step_and_written_by_the_loop(tmp_path):
    source = JOB.replace("SUMMARY", 'tf.summary.scalar("batch_accuracy", hits)')
    result = migrate_source(source, path="job.py")
    assert [d.message for d in result.manual_work] == []
    out = result.output
    assert '        return loss, {"batch_accuracy": hits, "logits": logits}\n' in out
    assert "tf.summary.scalar(\"batch_accuracy\", hits)" not in out
    assert '                tf.summary.scalar("batch_accuracy", summaries["batch_accuracy"])\n' in out
    assert '                tf.summary.histogram("logits", summaries["logits"])\n' in out
    assert migrate_source(out, path="job.py").output == out
    program = tmp_path / "job.py"
    program.write_text(out)
    proc = subprocess.run([sys.executable, str(program), str(tmp_path / "model")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reader = tmp_path / "events.py"
    reader.write_text(textwrap.dedent(f"""\
        import glob
        import tensorflow as tf
        from tensorflow.core.util import event_pb2

        steps = {{}}
        for path in glob.glob({str(tmp_path / "model" / "events*")!r}):
            for raw in tf.data.TFRecordDataset(path):
                event = event_pb2.Event.FromString(raw.numpy())
                for value in event.summary.value:
                    steps.setdefault(value.tag, []).append(event.step)
        print(sorted((tag, sorted(found)) for tag, found in steps.items()))
        """))
    proc = subprocess.run([sys.executable, str(reader)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # save_summary_steps=5 over 20 steps, the model_fn's tags beside the loss
    assert proc.stdout.strip().splitlines()[-1] == str(
        [("batch_accuracy", [5, 10, 15, 20]), ("logits", [5, 10, 15, 20]), ("loss", [5, 10, 15, 20])])


@pytest.mark.parametrize(
    "summary, line, why",
    [
        ('tf.summary.scalar("running", tf.metrics.mean(hits)[1])', 12,
         "the summary writes a tf.metrics value, a running aggregate of the TRAIN batches"),
        ('tf.summary.scalar("hits", hits, family="train")', 12, "a summary with collections or a family"),
        ('tf.summary.scalar("logits", hits)', 14, 'two summaries tagged "logits"'),
    ],
)
def test_summaries_the_loop_cannot_write_the_same_are_declined_where_they_are(summary, line, why):
    source = JOB.replace("SUMMARY", summary)
    result = migrate_source(source, path="job.py")
    assert "est = tf.estimator.Estimator(model_fn=model_fn" in result.output  # the job stays as it was
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and why in found[0].message and found[0].line == line, found


def test_a_summary_of_the_eval_mode_is_declined():
    source = JOB.replace("SUMMARY", "pass").replace(
        "    return tf.estimator.EstimatorSpec(mode, loss=loss)\n",
        "    if mode == tf.estimator.ModeKeys.EVAL:\n"
        '        tf.summary.scalar("eval_hits", hits)\n'
        "    return tf.estimator.EstimatorSpec(mode, loss=loss)\n")
    assert "eval_hits" in source
    result = migrate_source(source, path="job.py")
    assert "est = tf.estimator.Estimator(model_fn=model_fn" in result.output  # the job stays as it was
    found = [(d.line, d.message) for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and found[0][0] == 19 and "a summary the model_fn writes outside its TRAIN mode" in found[0][1]


REGRESSION = textwrap.dedent(
    """\
    import tensorflow as tf


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [2.0, 4.0])).repeat().batch(2)


    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        predicted = tf.matmul(features["x"], w)
        loss = tf.losses.mean_squared_error(labels=labels[:, tf.newaxis], predictions=predicted)
        if mode == tf.estimator.ModeKeys.TRAIN:
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        rmse = tf.metrics.root_mean_squared_error(labels=labels, predictions=predicted)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"rmse": rmse})


    est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/regression")
    tf.estimator.train_and_evaluate(est, tf.estimator.TrainSpec(input_fn, max_steps=20),
                                    tf.estimator.EvalSpec(input_fn, steps=2))
    """
)


def test_regression_metrics_become_keras_metrics_computing_the_same_running_values(tmp_path):
    source = REGRESSION.replace('eval_metric_ops={"rmse": rmse}', 'eval_metric_ops={"rmse": rmse, "mse": mse}').replace(
        "    rmse = tf.metrics", "    mse = tf.metrics.mean_squared_error(labels, predicted)\n    rmse = tf.metrics")
    result = migrate_source(source, path="regression.py")
    assert [d.message for d in result.manual_work] == []
    assert '"rmse": tf.keras.metrics.RootMeanSquaredError(),' in result.output
    assert '"mse": tf.keras.metrics.Mean(),' in result.output
    assert ('    return loss, {"rmse": (labels, predicted), "mse": (tf.math.squared_difference(tf.reshape(labels, [-1]),'
            ' tf.reshape(predicted, [-1])),)}\n') in result.output
    # TF1's streaming metric (tf.compat.v1, graph mode) and the Keras metric over the same batches:
    # labels [B], predictions [B, 1], weighted, batches of unequal size
    script = tmp_path / "same.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np
        import tensorflow as tf

        rng = np.random.RandomState(3)
        batches = [(rng.normal(size=(n,)).astype(np.float32), rng.normal(size=(n, 1)).astype(np.float32),
                    rng.uniform(size=(n,)).astype(np.float32)) for n in (4, 3, 5)]
        graph = tf.Graph()
        with graph.as_default():
            labels = tf.compat.v1.placeholder(tf.float32, [None])
            predictions = tf.compat.v1.placeholder(tf.float32, [None, 1])
            weights = tf.compat.v1.placeholder(tf.float32, [None])
            value, update = tf.compat.v1.metrics.root_mean_squared_error(labels, predictions, weights)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.local_variables_initializer())
                for y, p, w in batches:
                    session.run(update, {labels: y, predictions: p, weights: w})
                legacy = session.run(value)
            mse, update_mse = tf.compat.v1.metrics.mean_squared_error(labels, predictions)
            mae, update_mae = tf.compat.v1.metrics.mean_absolute_error(labels, predictions)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.local_variables_initializer())
                for y, p, w in batches:
                    session.run([update_mse, update_mae], {labels: y, predictions: p})
                legacy_mse, legacy_mae = session.run([mse, mae])
        metric = tf.keras.metrics.RootMeanSquaredError()
        for y, p, w in batches:
            metric.update_state(y, p, w)
        mse_metric, mae_metric = tf.keras.metrics.Mean(), tf.keras.metrics.Mean()
        for y, p, _ in batches:
            mse_metric.update_state(tf.math.squared_difference(tf.reshape(y, [-1]), tf.reshape(p, [-1])))
            mae_metric.update_state(tf.abs(tf.reshape(p, [-1]) - tf.reshape(y, [-1])))
        print(float(legacy), float(metric.result()))
        print(float(legacy_mse), float(mse_metric.result()))
        print(float(legacy_mae), float(mae_metric.result()))
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in proc.stdout.strip().splitlines()[-3:]:
        legacy, keras = map(float, line.split())
        assert legacy > 0 and abs(legacy - keras) <= 1e-6 * max(1.0, abs(legacy)), (legacy, keras)
