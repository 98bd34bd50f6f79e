"""An Estimator job in the shape of the Kubernetes CNN tutorials: a small
convolutional model_fn whose blocks (a helper) apply tf.layers.batch_normalization,
one switched by the mode (its moving averages updated through UPDATE_OPS
control dependencies around minimize) and one left in inference mode (the
default training=False), a softmax tensor named for a LoggingTensorHook of the
TrainSpec, numpy_input_fn input and train_and_evaluate with the cluster from
TF_CONFIG. Synthetic images, no download."""

import numpy as np
import tensorflow as tf

tf.app.flags.DEFINE_integer("steps", 30, "Training steps")
tf.app.flags.DEFINE_float("learning_rate", 0.1, "Learning rate")
tf.app.flags.DEFINE_string("model_dir", "/tmp/estimator_batch_norm_hook_job", "Checkpoints")
FLAGS = tf.app.flags.FLAGS

IMAGE = "image"


def conv_block(inputs, filters, is_training, name):
    conv = tf.layers.conv2d(inputs, filters, kernel_size=3, padding="same", name=name)
    normalized = tf.layers.batch_normalization(conv, training=is_training, momentum=0.9)
    return tf.layers.max_pooling2d(tf.nn.relu(normalized), pool_size=2, strides=2)


def shapes_model_fn(features, labels, mode):
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    net = conv_block(features[IMAGE], 4, is_training, "block1")
    net = tf.layers.conv2d(net, 6, kernel_size=3, padding="same")
    net = tf.layers.batch_normalization(net)  # inference mode: the initial moving statistics
    logits = tf.layers.dense(tf.layers.flatten(net), 3)
    outputs = {
        "label": tf.argmax(logits, axis=1),
        "probabilities": tf.nn.softmax(logits, name="softmax_tensor"),
    }
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode=mode, predictions=outputs)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.GradientDescentOptimizer(FLAGS.learning_rate)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(loss=loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)
    metrics = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=outputs["label"])}
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=metrics)


def main(_):
    rng = np.random.RandomState(7)
    images = rng.normal(size=(120, 8, 8, 1)).astype(np.float32)
    shapes = (images[:, :4, :4, 0].sum(axis=(1, 2)) > 0).astype(np.int32) + (images[:, 4:, 4:, 0].mean(
        axis=(1, 2)) > 0.2).astype(np.int32)
    config = tf.estimator.RunConfig(model_dir=FLAGS.model_dir, save_summary_steps=10, save_checkpoints_steps=10)
    classifier = tf.estimator.Estimator(model_fn=shapes_model_fn, config=config)
    tensors_to_log = {"probabilities": "softmax_tensor"}
    logging_hook = tf.train.LoggingTensorHook(tensors=tensors_to_log, every_n_iter=10)
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={IMAGE: images}, y=shapes, batch_size=20, num_epochs=None, shuffle=False)
    train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=FLAGS.steps, hooks=[logging_hook])
    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={IMAGE: images[:40]}, y=shapes[:40], num_epochs=1, shuffle=False)
    eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None, start_delay_secs=0)
    tf.estimator.train_and_evaluate(classifier, train_spec, eval_spec)


if __name__ == "__main__":
    tf.app.run()
