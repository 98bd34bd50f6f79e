"""A two-layer scorer whose kernel penalties go to the 'losses' collection at
each call (the model module a driver imports; the tests migrate the driver
without it, then serve it to both sides of `check`)."""
import tensorflow.compat.v1 as tf

FEATURES = 10
HIDDEN = 6
CLASSES = 3


def _kernel(shape, penalty):
    kernel = tf.get_variable("kernel", shape, initializer=tf.truncated_normal_initializer(stddev=0.4))
    if penalty is not None:
        tf.add_to_collection("losses", penalty(kernel))
    return kernel


def scores(features, penalty):
    with tf.variable_scope("hidden"):
        bias = tf.get_variable("bias", [HIDDEN], initializer=tf.constant_initializer(0.05))
        hidden = tf.nn.relu(tf.matmul(features, _kernel([FEATURES, HIDDEN], penalty)) + bias)
    with tf.variable_scope("out"):
        bias = tf.get_variable("bias", [CLASSES], initializer=tf.constant_initializer(0.0))
        return tf.matmul(hidden, _kernel([HIDDEN, CLASSES], penalty)) + bias
