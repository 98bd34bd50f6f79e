"""A one-layer regressor made of tf.Variable objects, its weight penalty put
in a collection at each call."""
import tensorflow.compat.v1 as tf

INPUTS = 8


def predict(inputs, decay):
    with tf.name_scope("linear"):
        weights = tf.Variable(tf.truncated_normal([INPUTS, 1], stddev=0.5), name="weights")
        offset = tf.Variable(tf.zeros([1]), name="offset")
        tf.add_to_collection("weight_penalties", decay * tf.nn.l2_loss(weights))
        return tf.matmul(inputs, weights) + offset
