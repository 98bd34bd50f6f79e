"""An Estimator job whose model_fn is written with TF1's layers and losses: a
small classifier (tf.layers.dense), tf.losses.sparse_softmax_cross_entropy,
a learning rate decayed with tf.train.exponential_decay, and the PREDICT /
EVAL / TRAIN branches of a model_fn. train_and_evaluate runs it with the
cluster read from TF_CONFIG. Fixed synthetic data, so losses repeat."""

import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--train_steps", type=int, default=30)
parser.add_argument("--model_dir", default="/tmp/estimator_layers_job")
parser.add_argument("--learning_rate", type=float, default=0.5)
args = parser.parse_args()

NUM_CLASSES = 3
rng = np.random.RandomState(11)
points = rng.normal(size=(96, 4)).astype(np.float32)
classes = (np.argmax(points[:, :3] + 0.3 * points[:, 3:], axis=1)).astype(np.int32)


def train_input_fn(params):
    data = tf.data.Dataset.from_tensor_slices(({"points": points}, classes))
    return data.repeat().batch(params["batch_size"])


def eval_input_fn(params):
    data = tf.data.Dataset.from_tensor_slices(({"points": points[:32]}, classes[:32]))
    return data.batch(params["batch_size"])


def classifier_fn(features, labels, mode, params):
    hidden = tf.layers.dense(features["points"], 16, activation=tf.nn.relu, name="hidden")
    logits = tf.layers.dense(hidden, NUM_CLASSES, name="logits")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": tf.argmax(logits, axis=1)})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        learning_rate = tf.train.exponential_decay(
            params["learning_rate"], tf.train.get_global_step(), decay_steps=10, decay_rate=0.5, staircase=True
        )
        optimizer = tf.train.GradientDescentOptimizer(learning_rate)
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return tf.estimator.EstimatorSpec(mode, loss=loss)


def main():
    run_config = tf.estimator.RunConfig(
        model_dir=args.model_dir,
        save_checkpoints_steps=10,
        keep_checkpoint_max=2,
        tf_random_seed=3,
        log_step_count_steps=5,
    )
    estimator = tf.estimator.Estimator(
        model_fn=classifier_fn,
        config=run_config,
        params={"learning_rate": args.learning_rate, "batch_size": 16},
    )
    train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=args.train_steps)
    eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=5)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


if __name__ == "__main__":
    main()
