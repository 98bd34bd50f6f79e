"""An Estimator job whose model is chosen by a flag, in the shape of the
Kubeflow examples: an if/elif chain builds the Estimator with one of two
custom model_fns (a small convolutional one, a two-layer perceptron) and its
params, an else refuses the flag, then train_and_evaluate runs whichever was
built with the cluster from TF_CONFIG. Synthetic data, no download."""

import sys

import numpy as np
import tensorflow as tf

tf.app.flags.DEFINE_string("model_type", "conv", "conv or mlp")
tf.app.flags.DEFINE_integer("steps", 30, "Training steps")
tf.app.flags.DEFINE_float("learning_rate", 0.2, "Learning rate")
tf.app.flags.DEFINE_string("model_dir", "/tmp/estimator_flag_choice_job", "Checkpoints")
FLAGS = tf.app.flags.FLAGS

GRID = "grid"


def conv_model(features, labels, mode, params):
    grid = tf.reshape(features[GRID], [-1, 4, 4, 1])
    net = tf.layers.conv2d(grid, 4, kernel_size=3, padding="same", activation=tf.nn.relu)
    logits = tf.layers.dense(tf.layers.flatten(net), params["classes"])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.GradientDescentOptimizer(learning_rate=params["learning_rate"])
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return tf.estimator.EstimatorSpec(mode, loss=loss)


def mlp_model(features, labels, mode, params):
    hidden = tf.layers.dense(features[GRID], params["hidden_units"], activation=tf.nn.tanh)
    logits = tf.layers.dense(hidden, params["classes"])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.GradientDescentOptimizer(learning_rate=params["learning_rate"])
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return tf.estimator.EstimatorSpec(mode, loss=loss)


def main(_):
    rng = np.random.RandomState(3)
    grids = rng.uniform(size=(80, 16)).astype(np.float32)
    classes = (grids[:, :3].argmax(axis=1)).astype(np.int32)
    config = tf.estimator.RunConfig(model_dir=FLAGS.model_dir, save_checkpoints_steps=10, tf_random_seed=2)
    if FLAGS.model_type == "conv":
        classifier = tf.estimator.Estimator(
            model_fn=conv_model, config=config, params={"learning_rate": FLAGS.learning_rate, "classes": 3})
    elif FLAGS.model_type == "mlp":
        model_params = {"learning_rate": FLAGS.learning_rate, "classes": 3, "hidden_units": 12}
        classifier = tf.estimator.Estimator(model_fn=mlp_model, config=config, params=model_params)
    else:
        print(f"No such model type: {FLAGS.model_type}")
        sys.exit(1)
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={GRID: grids}, y=classes, batch_size=16, num_epochs=None, shuffle=False)
    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={GRID: grids[:32]}, y=classes[:32], num_epochs=1, shuffle=False)
    train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=FLAGS.steps)
    eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None, start_delay_secs=0)
    tf.estimator.train_and_evaluate(classifier, train_spec, eval_spec)


if __name__ == "__main__":
    tf.app.run()
