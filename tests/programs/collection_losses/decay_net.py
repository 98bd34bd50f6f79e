"""A classifier whose weights carry a weight decay, and a loss function that
adds the cross entropy to the same collection and returns the sum of it (the
cifar10 tutorial's layout)."""
import tensorflow.compat.v1 as tf

IN_UNITS = 12
OUT_UNITS = 3


def _decayed_weights(name, shape, wd):
    var = tf.get_variable(name, shape, initializer=tf.truncated_normal_initializer(stddev=0.3))
    if wd is not None:
        tf.add_to_collection("losses", tf.multiply(tf.nn.l2_loss(var), wd, name="weight_loss"))
    return var


def inference(features):
    with tf.variable_scope("hidden"):
        hidden = tf.nn.relu(tf.matmul(features, _decayed_weights("weights", [IN_UNITS, 8], 0.01)))
    with tf.variable_scope("scores"):
        return tf.matmul(hidden, _decayed_weights("weights", [8, OUT_UNITS], 0.01))


def total_loss(scores, labels):
    xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=scores))
    tf.add_to_collection("losses", xent)
    return tf.add_n(tf.get_collection("losses"), name="total_loss")
