"""Variable helpers a driver imports (the MNIST tutorials' weight_variable
and bias_variable, moved to a module of their own)."""
import tensorflow.compat.v1 as tf


def weight_variable(shape):
    return tf.Variable(tf.truncated_normal(shape, stddev=0.1))


def bias_variable(shape):
    return tf.Variable(tf.constant(0.1, shape=shape))
