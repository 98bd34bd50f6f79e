"""An Estimator job of the shape Cloud ML Engine / TFJob ran: a custom model_fn,
train_and_evaluate, and the cluster (chief, ps, workers) read from TF_CONFIG by
RunConfig. Linear regression on a fixed synthetic set, so losses repeat."""

import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--train_steps", type=int, default=20)
parser.add_argument("--model_dir", default="/tmp/estimator_tf_config_job")
args = parser.parse_args()

rng = np.random.RandomState(7)
inputs = rng.rand(64, 3).astype(np.float32)
targets = (inputs @ np.array([[0.5], [-1.0], [2.0]], np.float32) + 0.25).astype(np.float32)


def input_fn():
    data = tf.data.Dataset.from_tensor_slices(({"x": inputs}, targets))
    return data.repeat().batch(8)


def model_fn(features, labels, mode, params):
    prediction = tf.compat.v1.layers.dense(
        features["x"], 1, kernel_initializer=tf.compat.v1.zeros_initializer()
    )
    loss = tf.compat.v1.losses.mean_squared_error(labels, prediction)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(model_dir=args.model_dir, tf_random_seed=1, log_step_count_steps=1)
regressor = tf.estimator.Estimator(model_fn=model_fn, config=config, params={"learning_rate": 0.1})
tf.estimator.train_and_evaluate(
    regressor,
    tf.estimator.TrainSpec(input_fn=input_fn, max_steps=args.train_steps),
    tf.estimator.EvalSpec(input_fn=input_fn, steps=2, start_delay_secs=0, throttle_secs=1),
)
