"""An Estimator job that exports its model for TF Serving, in the shape of the
Kubernetes / Kubeflow tutorials: a model_fn whose PREDICT branch names its
export outputs, a serving_input_receiver_fn of placeholders, EvalSpec exporters
(a FinalExporter and a LatestExporter keeping two exports) and an
export_savedmodel after train_and_evaluate. Synthetic data, no download."""

import argparse

import numpy as np
import tensorflow as tf

SIGNAL = "signal"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model_dir", default="/tmp/estimator_export_job")
    parser.add_argument("--export_dir", default="/tmp/estimator_export_job_serving")
    return parser.parse_known_args()[0]


def signal_model_fn(features, labels, mode, params):
    hidden = tf.layers.dense(features[SIGNAL], 16, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, params["classes"])
    outputs = {
        "label": tf.argmax(logits, axis=1),
        "scores": tf.nn.softmax(logits),
    }
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(
            mode, predictions=outputs,
            export_outputs={"classify": tf.estimator.export.PredictOutput(outputs)})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.GradientDescentOptimizer(learning_rate=params["learning_rate"])
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=outputs["label"])
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})


def signal_receiver_fn():
    received = {SIGNAL: tf.placeholder(tf.float32, [None, 12], name="signal_input")}
    return tf.estimator.export.ServingInputReceiver(received, received)


def main(_):
    args = parse_args()
    rng = np.random.RandomState(11)
    signals = rng.normal(size=(120, 12)).astype(np.float32)
    classes = (signals[:, 0] > 0).astype(np.int32) + (signals[:, 1] > 0).astype(np.int32)
    config = tf.estimator.RunConfig(model_dir=args.model_dir, save_checkpoints_steps=10, tf_random_seed=4)
    estimator = tf.estimator.Estimator(
        model_fn=signal_model_fn, config=config, params={"classes": 3, "learning_rate": 0.3})
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={SIGNAL: signals}, y=classes, batch_size=20, num_epochs=None, shuffle=False)
    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={SIGNAL: signals[:40]}, y=classes[:40], num_epochs=1, shuffle=False)
    final = tf.estimator.FinalExporter("final", serving_input_receiver_fn=signal_receiver_fn)
    latest = tf.estimator.LatestExporter("latest", signal_receiver_fn, exports_to_keep=2)
    train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=args.steps)
    eval_spec = tf.estimator.EvalSpec(
        input_fn=eval_input_fn, steps=None, exporters=[final, latest], start_delay_secs=0, throttle_secs=0)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    estimator.export_savedmodel(args.export_dir, serving_input_receiver_fn=signal_receiver_fn)


if __name__ == "__main__":
    tf.app.run()
