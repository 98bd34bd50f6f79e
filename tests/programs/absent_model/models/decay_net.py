"""cifar10's layout in small: `inference()` puts each kernel's weight decay in
the 'losses' collection, `total_loss()` adds the cross entropy there and
returns the collection's sum."""
import tensorflow.compat.v1 as tf

PIXELS = 16
CLASSES = 4


def _decayed(name, shape, decay):
    var = tf.get_variable(name, shape, initializer=tf.truncated_normal_initializer(stddev=0.2))
    tf.add_to_collection("losses", tf.multiply(tf.nn.l2_loss(var), decay, name="weight_loss"))
    return var


def inference(images):
    with tf.variable_scope("local"):
        hidden = tf.nn.relu(tf.matmul(images, _decayed("weights", [PIXELS, 8], 0.004)))
    with tf.variable_scope("logits"):
        return tf.matmul(hidden, _decayed("weights", [8, CLASSES], 0.0))


def total_loss(logits, labels):
    xent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    tf.add_to_collection("losses", xent)
    return tf.add_n(tf.get_collection("losses"), name="total_loss")
