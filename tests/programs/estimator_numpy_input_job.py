"""An Estimator job in the shape of the Kubernetes / Kubeflow MNIST tutorials:
in-memory arrays fed by tf.estimator.inputs.numpy_input_fn, a classifier
model_fn with PREDICT / TRAIN / EVAL branches and an accuracy metric, a
RunConfig with checkpoint and summary cadence, train_and_evaluate with the
cluster from TF_CONFIG. Synthetic data, no download."""

import numpy as np
import tensorflow as tf

tf.app.flags.DEFINE_integer("steps", 40, "Training steps")
tf.app.flags.DEFINE_float("learning_rate", 0.2, "Learning rate of the momentum optimizer")
tf.app.flags.DEFINE_string("model_dir", "/tmp/estimator_numpy_input_job", "Checkpoints")
FLAGS = tf.app.flags.FLAGS

FEATURE = "pixels"


def digits_model_fn(features, labels, mode, params):
    hidden = tf.layers.dense(features[FEATURE], 32, activation=tf.nn.tanh)
    logits = tf.layers.dense(hidden, params["classes"])
    predicted = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode=mode, predictions={"class": predicted})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.MomentumOptimizer(learning_rate=FLAGS.learning_rate, momentum=0.9)
        train_op = optimizer.minimize(loss=loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)
    metrics = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=predicted)}
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=metrics)


def main(_):
    rng = np.random.RandomState(5)
    images = rng.uniform(size=(200, 64)).astype(np.float32)
    digits = (images[:, :10].argmax(axis=1)).astype(np.int32)
    config = tf.estimator.RunConfig(model_dir=FLAGS.model_dir, save_summary_steps=10, save_checkpoints_steps=20)
    classifier = tf.estimator.Estimator(model_fn=digits_model_fn, config=config, params={"classes": 10})
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={FEATURE: images}, y=digits, batch_size=25, num_epochs=None, shuffle=False)
    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={FEATURE: images[:50]}, y=digits[:50], num_epochs=1, shuffle=False)
    train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=FLAGS.steps)
    eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None, start_delay_secs=0)
    tf.estimator.train_and_evaluate(classifier, train_spec, eval_spec)


if __name__ == "__main__":
    tf.app.run()
