"""The model of the two-file Estimator trainer (tests/programs/estimator_project):
a linear regressor's model_fn and the input functions task.py trains it with."""

import numpy as np
import tensorflow as tf

FEATURES = 4


def make_input_fn(num_examples, batch_size, seed):
    """An input_fn of a synthetic regression problem: y = x . w_true + 0.5."""

    def input_fn():
        rng = np.random.RandomState(seed)
        x = rng.uniform(-1.0, 1.0, size=(num_examples, FEATURES)).astype(np.float32)
        y = (x @ np.arange(1.0, FEATURES + 1.0, dtype=np.float32) + 0.5).reshape(-1, 1)
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        return dataset.repeat().batch(batch_size)

    return input_fn


def model_fn(features, labels, mode, params):
    weights = tf.compat.v1.get_variable(
        "weights", [FEATURES, 1], initializer=tf.compat.v1.zeros_initializer())
    bias = tf.compat.v1.get_variable("bias", [1], initializer=tf.compat.v1.zeros_initializer())
    predictions = tf.matmul(features["x"], weights) + bias
    loss = tf.reduce_mean(tf.square(predictions - labels))
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
