"""A TF 1.x program (our fixture) that builds one small convnet through
tf.contrib in the spellings legacy scripts use, and the same network written
out with core ops as TF 1.x's slim computed it (variables <scope>/weights and
biases, SAME convolutions, VALID pooling with stride 2 unless told). It prints
one JSON line for tests/test_legacy_compat.py: variable names and shapes of
both, the largest difference of their outputs on the same weights and input,
and the provided initializers' draws next to TF1's formulas."""

import json
import math

import numpy as np
import tensorflow as tf
import tensorflow.contrib.layers as contrib_layers
import tensorflow.contrib.slim as slim
import tensorflow.examples.tutorials.mnist.input_data as input_data
from tensorflow.contrib import layers
from tensorflow.contrib import slim as slim_again
from tensorflow.contrib.layers import fully_connected
from tensorflow.examples.tutorials.mnist.input_data import read_data_sets


def contrib_net(images):
    with slim.arg_scope([slim.conv2d, layers.fully_connected], activation_fn=tf.nn.tanh):
        net = slim.conv2d(images, 4, [5, 5], scope="conv1")
        net = tf.contrib.slim.layers.max_pool2d(net, [2, 2], scope="pool1")
        net = slim_again.layers.conv2d(net, 6, 3)
        net = slim.max_pool2d(net, 2, stride=1, padding="SAME")
        net = contrib_layers.flatten(net)
        net = fully_connected(net, 16)
        net = slim.dropout(net, 0.5, is_training=False)
        return slim.fully_connected(net, 10, activation_fn=None, scope="logits")


def core_net(images):
    def conv(inputs, scope, outputs, size):
        with tf.variable_scope(scope):
            weights = tf.get_variable("weights", [size, size, inputs.shape[-1], outputs])
            biases = tf.get_variable("biases", [outputs], initializer=tf.zeros_initializer())
            return tf.nn.tanh(tf.nn.bias_add(tf.nn.conv2d(inputs, weights, [1, 1, 1, 1], "SAME"), biases))

    def dense(inputs, scope, outputs, activation):
        with tf.variable_scope(scope):
            weights = tf.get_variable("weights", [inputs.shape[-1], outputs])
            biases = tf.get_variable("biases", [outputs], initializer=tf.zeros_initializer())
            return activation(tf.nn.bias_add(tf.matmul(inputs, weights), biases))

    net = conv(images, "conv1", 4, 5)
    net = tf.nn.max_pool(net, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    net = conv(net, "Conv", 6, 3)
    net = tf.nn.max_pool(net, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    net = tf.reshape(net, [-1, 14 * 14 * 6])
    net = dense(net, "fully_connected", 16, tf.nn.tanh)
    return dense(net, "logits", 10, tf.identity)


def build(model, images):
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(7)
        output = model(tf.constant(images))
        session = tf.Session(graph=graph)
        session.run(tf.global_variables_initializer())
    return graph, session, output


def initializer_draws():
    """The provided initializers' values next to TF1's formulas, same seeds."""
    shape, (fan_in, fan_out) = [3, 3, 4, 6], (3 * 3 * 4, 3 * 3 * 6)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(1)
        provided = {
            "xavier_normal": contrib_layers.xavier_initializer(uniform=False, seed=3)(shape),
            "xavier_uniform": slim.xavier_initializer(seed=4)(shape),
            "variance_scaling": layers.variance_scaling_initializer(seed=5)(shape),
        }
        formula = {
            "xavier_normal": tf.truncated_normal(shape, 0.0, math.sqrt(1.3 * 2 / (fan_in + fan_out)), seed=3),
            "xavier_uniform": tf.random_uniform(
                shape, -math.sqrt(6.0 / (fan_in + fan_out)), math.sqrt(6.0 / (fan_in + fan_out)), seed=4),
            "variance_scaling": tf.truncated_normal(shape, 0.0, math.sqrt(1.3 * 2.0 / fan_in), seed=5),
        }
        weights = tf.constant(np.arange(6, dtype=np.float32))
        penalties = [slim.l2_regularizer(0.5)(weights), layers.l1_regularizer(0.25)(weights)]
        with tf.Session() as session:
            values, expected, penalties = session.run([provided, formula, penalties])
    return {k: float(np.abs(values[k] - expected[k]).max()) for k in values}, [float(p) for p in penalties]


def regularized_losses():
    """weights_regularizer through arg_scope: one loss per created variable, none for a reused one."""
    graph = tf.Graph()
    with graph.as_default():
        inputs = tf.constant(np.ones((2, 3), np.float32))
        with slim.arg_scope([slim.fully_connected], weights_regularizer=slim.l2_regularizer(0.5)):
            slim.fully_connected(inputs, 4, scope="dense", weights_initializer=tf.constant_initializer(2.0))
            slim.fully_connected(inputs, 4, scope="dense", reuse=True)
        losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            return [float(v) for v in session.run(losses)]


def chosen_devices():
    """Round robin over the ps tasks, one task per op placed (what slim's variable(device=...) asked)."""
    chooser = tf.contrib.framework.VariableDeviceChooser(num_tasks=2)
    graph = tf.Graph()
    with graph.as_default():
        return [chooser(tf.no_op(name=f"op{i}")) for i in range(3)]


def main():
    data = read_data_sets("/not/read", one_hot=False, reshape=False)
    images = data.train.images[:5]
    via_module = input_data.read_data_sets("/not/read", reshape=False).train.images[:5]
    via_learn = tf.contrib.learn.datasets.load_dataset("mnist").train.images[:5].reshape(images.shape)
    provided_graph, provided_session, provided = build(contrib_net, images)
    core_graph, core_session, core = build(core_net, images)
    with provided_graph.as_default():
        rng = np.random.RandomState(0)
        for variable in tf.global_variables():  # biases too, so adding them is compared
            variable.load(rng.normal(0, 0.2, variable.shape.as_list()).astype(np.float32), provided_session)
        provided_values = {v.op.name: provided_session.run(v) for v in tf.global_variables()}
    with core_graph.as_default():
        core_variables = tf.global_variables()
        for variable in core_variables:  # the same weights on both
            variable.load(provided_values[variable.op.name], core_session)
    difference = np.abs(provided_session.run(provided) - core_session.run(core)).max()
    try:
        with slim.arg_scope([np.sum], axis=0):
            pass
        undecorated = "accepted"
    except ValueError as e:
        undecorated = str(e)
    try:
        slim.batch_norm  # noqa: B018 - not provided
        missing = "provided"
    except AttributeError as e:
        missing = str(e)
    draws, penalties = initializer_draws()
    print("RESULT " + json.dumps({
        "provided_variables": {name: list(value.shape) for name, value in provided_values.items()},
        "core_variables": {v.op.name: v.shape.as_list() for v in core_variables},
        "output_difference": float(difference),
        "output_scale": float(np.abs(core_session.run(core)).max()),
        "same_function": slim.conv2d is layers.conv2d is tf.contrib.slim.layers.conv2d,
        "mnist_spellings_agree": bool(np.array_equal(images, via_module) and np.array_equal(images, via_learn)),
        "initializer_difference": draws,
        "penalties": penalties,
        "regularization_losses": regularized_losses(),
        "devices": chosen_devices(),
        "undecorated": undecorated,
        "missing": missing,
    }))


main()
