"""A two-layer classifier whose weight penalties go to a collection each time
it is called (the model-module layout of the TF1 book examples)."""
import tensorflow.compat.v1 as tf

IN_UNITS = 12
HIDDEN_UNITS = 8
OUT_UNITS = 3


def _kernel(shape, penalty):
    kernel = tf.get_variable("kernel", shape, initializer=tf.truncated_normal_initializer(stddev=0.3))
    if penalty != None:
        tf.add_to_collection("penalties", penalty(kernel))
    return kernel


def classify(features, penalty):
    with tf.variable_scope("hidden"):
        kernel = _kernel([IN_UNITS, HIDDEN_UNITS], penalty)
        bias = tf.get_variable("bias", [HIDDEN_UNITS], initializer=tf.constant_initializer(0.1))
        hidden = tf.nn.relu(tf.matmul(features, kernel) + bias)
    with tf.variable_scope("scores"):
        kernel = _kernel([HIDDEN_UNITS, OUT_UNITS], penalty)
        bias = tf.get_variable("bias", [OUT_UNITS], initializer=tf.constant_initializer(0.0))
        return tf.matmul(hidden, kernel) + bias
