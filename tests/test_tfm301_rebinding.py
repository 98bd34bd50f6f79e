"""TFM301 on a graph block that builds layer after layer under the same Python
names (`weights = tf.Variable(...)` per name scope): each variable keeps its own
name in the migration (migrate/codemod/rules/_rebinding.py)."""

import ast

from migrate.codemod.engine import dedent, migrate_source

LAYERS = dedent(
    """
    import tensorflow as tf

    def train(cluster, server, batches):
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            images = tf.placeholder(tf.float32, [None, 4])
            labels = tf.placeholder(tf.float32, [None, 2])
            with tf.name_scope("hidden"):
                weights = tf.Variable(tf.truncated_normal([4, 3], stddev=0.5, seed=1), name="weights")
                biases = tf.Variable(tf.zeros([3]), name="biases")
                hidden = tf.nn.relu(tf.matmul(images, weights) + biases)
            with tf.name_scope("logits"):
                weights = tf.Variable(tf.truncated_normal([3, 2], stddev=0.5, seed=2), name="weights")
                biases = tf.Variable(tf.zeros([2]), name="biases")
                logits = tf.matmul(hidden, weights) + biases
            loss = tf.reduce_mean(tf.square(logits - labels))
            global_step = tf.train.get_or_create_global_step()
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        hooks = [tf.train.StopAtStepHook(last_step=100)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, hooks=hooks) as sess:
            while not sess.should_stop():
                x, y = next(batches)
                sess.run(train_op, feed_dict={images: x, labels: y})
        return weights
    """
)


def _migrated() -> str:
    result = migrate_source(LAYERS)
    assert "ParameterServerStrategy" in result.output, [d.message for d in result.manual_work]
    return result.output


def test_each_layer_variable_keeps_a_name_of_its_own():
    out = _migrated()
    tree = ast.parse(out)
    trainable = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", "") == "trainable_variables")
    names = [e.id for e in trainable.value.elts]
    assert names == ["weights_2", "biases_2", "weights", "biases"]
    # the step reads each layer's own variables, in the order the graph did
    assert "tf.matmul(images, weights_2) + biases_2" in out
    assert "tf.matmul(hidden, weights) + biases" in out
    # the TF1 variable names (name="weights") are unchanged, and code after the block
    # still sees the last binding
    assert out.count('name="weights"') == 2
    assert "return weights" in out
    assert migrate_source(out).output == out


def test_no_rename_when_every_variable_has_its_own_name():
    distinct = LAYERS.replace('weights = tf.Variable(tf.truncated_normal([3, 2]', 'w2 = tf.Variable(tf.truncated_normal([3, 2]')
    distinct = distinct.replace("logits = tf.matmul(hidden, weights)", "logits = tf.matmul(hidden, w2)")
    out = migrate_source(distinct).output
    assert "weights_2" not in out and "biases_2" in out  # only the rebound `biases` is renamed
