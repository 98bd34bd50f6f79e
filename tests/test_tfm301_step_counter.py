"""TFM301's checkpoint tracks the program's step counter once.

A TF1 program that makes its own counter with a bare ``tf.Variable(0)``
(trainable, so one of the graph's variables too) and hands it to
``minimize(..., global_step=...)`` and ``Supervisor(global_step=...)`` had
that counter tracked twice in the emitted ``tf.train.Checkpoint``: a repeated
keyword argument, which parses but does not compile.
"""

from __future__ import annotations

import ast

from migrate.codemod.engine import dedent, migrate_source

COUNTER_AS_PLAIN_VARIABLE = '''
import tensorflow as tf


def train(cluster, target, task_index, model_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 3])
        weights = tf.Variable(tf.zeros([3, 1]))
        bias = tf.Variable(tf.zeros([1]))
        cost = tf.reduce_mean(tf.square(tf.matmul(features, weights) + bias))
        counter = tf.Variable(0)
        update = tf.train.AdagradOptimizer(0.1).minimize(cost, global_step=counter)
        init = tf.global_variables_initializer()
    sv = tf.train.Supervisor(is_chief=(task_index == 0), logdir=model_dir, init_op=init,
                             global_step=counter)
    with sv.managed_session(target) as sess:
        step = 0
        while not sv.should_stop() and step < 500:
            _, step = sess.run([update, counter], feed_dict={features: [[1.0, 2.0, 3.0]]})
'''


def checkpoint_keywords(code: str) -> list[list[str]]:
    return [
        [k.arg for k in call.keywords]
        for call in ast.walk(ast.parse(code))
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "Checkpoint"
    ]


def test_counter_made_with_tf_variable_is_tracked_once():
    result = migrate_source(dedent(COUNTER_AS_PLAIN_VARIABLE), path="train.py")
    compile(result.output, "train.py", "exec")
    tracked = checkpoint_keywords(result.output)
    assert len(tracked) == 1, result.output
    assert tracked[0].count("counter") == 1
    assert {"weights", "bias"} <= set(tracked[0])
    assert "ParameterServerStrategy" in result.output
    assert migrate_source(result.output, path="train.py").output == result.output


def test_counter_from_get_or_create_global_step_is_tracked_once():
    """The no-op side: the step the rule creates itself was never duplicated."""
    source = dedent(COUNTER_AS_PLAIN_VARIABLE).replace(
        "counter = tf.Variable(0)", "counter = tf.train.get_or_create_global_step()"
    )
    result = migrate_source(source, path="train.py")
    compile(result.output, "train.py", "exec")
    assert [kw.count("counter") for kw in checkpoint_keywords(result.output)] == [1]


def test_the_step_counter_is_not_one_of_the_trained_variables():
    out = migrate_source(dedent(COUNTER_AS_PLAIN_VARIABLE)).output
    trainable = next(n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", "") == "trainable_variables")
    assert [e.id for e in trainable.value.elts] == ["weights", "bias"]
