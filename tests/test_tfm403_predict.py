"""TFM403, ``est.predict(input_fn)`` after the training: a generator of the
model_fn's PREDICT-mode predictions, one example at a time (a numpy_input_fn
of features only becomes their dataset), running on TF 2.21; the options it
does not carry are declined where they are."""

from __future__ import annotations

import ast
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


    def scorer_fn(features, labels, mode, params):
        logits = tf.layers.dense(features["x"], 3)
        predictions = {"class_ids": tf.argmax(logits, 1)[:, tf.newaxis], "probabilities": tf.nn.softmax(logits)}
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=predictions)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = tf.train.AdagradOptimizer(params["lr"])
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def main(model_dir):
        xs = np.random.RandomState(2).normal(size=(30, 4)).astype(np.float32)
        ys = (xs[:, 0] > 0).astype(np.int64)
        train_fn = tf.estimator.inputs.numpy_input_fn(x={"x": xs}, y=ys, batch_size=6, num_epochs=None, shuffle=False)
        predict_fn = tf.estimator.inputs.numpy_input_fn(x={"x": xs[:7]}, batch_size=4, num_epochs=1, shuffle=False)
        est = tf.estimator.Estimator(model_fn=scorer_fn, model_dir=model_dir, params={"lr": 0.1})
        est.train(input_fn=train_fn, max_steps=10)
        for pred in PREDICTIONS:
            print("pred", int(pred["class_ids"][0]), [float(p) for p in pred["probabilities"]])


    if __name__ == "__main__":
        main(sys.argv[1])
    """
)


def test_predict_after_training_yields_the_predict_modes_predictions_example_by_example(tmp_path):
    source = JOB.replace("PREDICTIONS", "est.predict(input_fn=predict_fn)")
    result = migrate_source(source, path="job.py")
    assert [d.message for d in result.manual_work] == []
    out = result.output
    assert "    for pred in predict(predict_fn()):\n" in out
    assert "        return tf.data.Dataset.from_tensor_slices({\"x\": xs[:7]}).batch(4)\n" in out
    assert '    if mode == "infer":\n        return predictions\n' in out
    assert any(d.message.startswith("Estimator.predict -> a generator") for d in result.diagnostics)
    assert migrate_source(out, path="job.py").output == out
    program = tmp_path / "job.py"
    program.write_text(out)
    proc = subprocess.run([sys.executable, str(program), str(tmp_path / "model")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split(" ", 2) for line in proc.stdout.splitlines() if line.startswith("pred ")]
    # 7 examples in batches of 4 and 3, one prediction each
    assert len(rows) == 7
    for _, class_id, probabilities in rows:
        scores = ast.literal_eval(probabilities)
        assert len(scores) == 3 and abs(sum(scores) - 1) < 1e-5
        assert int(class_id) == max(range(3), key=scores.__getitem__)


@pytest.mark.parametrize(
    "predict, why",
    [
        ("est.predict(input_fn=predict_fn, predict_keys=['class_ids'])", "`predict(predict_keys=...)` is not carried"),
        ("est.predict(predict_fn, yield_single_examples=False)", "`predict(yield_single_examples=False)`"),
    ],
)
def test_predict_options_the_migration_does_not_carry_are_declined(predict, why):
    source = JOB.replace("PREDICTIONS", predict)
    result = migrate_source(source, path="job.py")
    assert "est = tf.estimator.Estimator(model_fn=scorer_fn" in result.output
    found = [d for d in result.diagnostics if d.code == "TFM403"]
    assert len(found) == 1 and why in found[0].message and found[0].line == 25, found
