"""TFM301 and a session that runs only a hand-kept counter while it is handed
to other code that trains (the asynchronous actor-critic layout: each worker's
learner object runs its own updates with the session it is given, and the
loop only advances a shared step variable through a placeholder).

The optimizer's updates are made by code TFM301 cannot carry into a step
function, so the training stays TF1; the reason names the call the session
is handed to and where its object comes from. Fixtures are written for these
tests in the shapes seen in real scripts.
"""

from __future__ import annotations

from migrate.codemod.engine import dedent, migrate_source

HANDED = '''
import tensorflow.compat.v1 as tf
from learner_module import Learner


def main(cluster, server, task_index, limit):
    learner = Learner(task_index)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        counter = tf.get_variable("counter", [], initializer=tf.constant_initializer(0), trainable=False)
        counter_in = tf.placeholder(counter.dtype, shape=counter.get_shape())
        counter_update = counter.assign(counter_in)
    supervisor = tf.train.Supervisor(is_chief=task_index == 0, global_step=counter)
    with supervisor.managed_session(server.target) as sess:
        while sess.run(counter) < limit:
            done = learner.process(sess, sess.run(counter))
            sess.run(counter_update, {counter_in: sess.run(counter) + done})
'''


def test_the_reason_names_the_code_the_session_is_handed_to():
    source = dedent(HANDED)
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    reasons = [d for d in result.manual_work if d.code == "TFM301"]
    assert len(reasons) == 1, [d.message for d in reasons]
    reason = reasons[0]
    assert reason.line == next(i for i, line in enumerate(source.splitlines(), 1) if "counter.assign(" in line)
    assert "runs only `counter_update`, a variable's update" in reason.message
    assert "`learner.process(...)`" in reason.message
    assert "`Learner(...)`" in reason.message and "`learner_module`" in reason.message
    assert "tf.function step" in reason.hint


def test_a_counter_update_with_no_session_handed_over_keeps_the_general_reason():
    source = dedent(HANDED).replace("done = learner.process(sess, sess.run(counter))", "done = 1")
    result = migrate_source(source, select=["TFM301"])
    assert result.output == source
    messages = [d.message for d in result.manual_work if d.code == "TFM301"]
    assert messages and not any("handed the TF1 session" in m for m in messages)
