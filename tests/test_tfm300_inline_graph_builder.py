"""TFM300 end to end: a between-graph script whose device-setter block gets
its train op from a helper (``global_step, loss, train_op = build_model(...)``)
is migrated by TFM301 once the helper is inlined, with every rule running."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source, undefined_names

ROOT = Path(__file__).resolve().parent.parent
ASYNC_MTS = (ROOT / "tests" / "fixtures" / "realistic" / "build_model_helper_mts.py").read_text()

HEAD = '''\
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
flags.DEFINE_integer("task_index", 0, "Index of task within the job")
flags.DEFINE_integer("train_steps", 100, "Number of global training steps")
FLAGS = flags.FLAGS
'''

SYNC_MTS = HEAD + '''

def inference(x):
    w = tf.get_variable("w", [784, 10], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [10], initializer=tf.zeros_initializer())
    return tf.matmul(x, w) + b


def build_model(x, y_, num_workers):
    y = inference(x)
    global_step = tf.train.get_or_create_global_step()
    cross_entropy = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=y))
    opt = tf.train.GradientDescentOptimizer(0.01)
    opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=num_workers,
                                         total_num_replicas=num_workers)
    train_op = opt.minimize(cross_entropy, global_step=global_step)
    return global_step, cross_entropy, train_op, opt


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    is_chief = FLAGS.task_index == 0
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 784])
        y_ = tf.placeholder(tf.float32, [None, 10])
        global_step, loss, train_op, opt = build_model(x, y_, len(worker_hosts))
    sync_hook = opt.make_session_run_hook(is_chief)
    hooks = [sync_hook, tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs = np.random.rand(32, 784)
            ys = np.eye(10)[np.random.randint(0, 10, 32)]
            _, loss_value, step = sess.run([train_op, loss, global_step], feed_dict={x: xs, y_: ys})
            print(step, loss_value)


if __name__ == "__main__":
    tf.app.run()
'''

SUPERVISOR = HEAD + '''

def build_model(x, y_):
    w = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, w) + b
    global_step = tf.Variable(0, name="global_step", trainable=False)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_, logits=y))
    train_op = tf.train.AdagradOptimizer(0.01).minimize(loss, global_step=global_step)
    return global_step, loss, train_op


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    else:
        with tf.device(tf.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 784])
            y_ = tf.placeholder(tf.int64, [None])
            global_step, loss, train_op = build_model(x, y_)
            init_op = tf.global_variables_initializer()
        sv = tf.train.Supervisor(is_chief=(FLAGS.task_index == 0), logdir="/tmp/train_logs",
                                 init_op=init_op, global_step=global_step, save_model_secs=600)
        with sv.managed_session(server.target) as sess:
            step = 0
            while not sv.should_stop() and step < FLAGS.train_steps:
                xs = np.random.rand(32, 784)
                ys = np.random.randint(0, 10, 32)
                _, step = sess.run([train_op, global_step], feed_dict={x: xs, y_: ys})
        sv.stop()


if __name__ == "__main__":
    tf.app.run()
'''

# the helper returns a dict the session loop reads by key (the Intel k8s example's shape)
MODEL_DICT = HEAD + '''

def get_model(input_tensor, label_tensor, learning_rate=0.01):
    m = tf.Variable(tf.random_normal([1], seed=1), name="m")
    b = tf.Variable(tf.zeros([1]), name="b")
    prediction = m * input_tensor + b
    loss = tf.reduce_mean(tf.square(prediction - label_tensor))
    global_step = tf.train.get_or_create_global_step()
    optimizer = tf.train.GradientDescentOptimizer(learning_rate).minimize(loss, global_step=global_step)
    return {"optimizer": optimizer, "loss": loss, "prediction": prediction, "global_step": global_step}


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        setter = tf.train.replica_device_setter(cluster=cluster)
        with tf.device(setter):
            input_tensor = tf.placeholder(tf.float32, [1])
            label_tensor = tf.placeholder(tf.float32, [1])
            model = get_model(input_tensor, label_tensor)
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                               hooks=[tf.train.StopAtStepHook(last_step=1000)]) as sess:
            while not sess.should_stop():
                train_x = np.random.randn(1) * 10
                train_y = 8.16 * train_x - 19.71
                _, result, loss_value, step = sess.run(
                    [model["optimizer"], model["prediction"], model["loss"], model["global_step"]],
                    feed_dict={input_tensor: train_x, label_tensor: train_y})
                print(step, loss_value, result)


if __name__ == "__main__":
    tf.app.run()
'''


def _migrated(source: str, strategy: str):
    result = migrate_source(source, path="train.py")
    out = result.output
    compile(out, "x", "exec")
    assert "TFM300" in result.rules_applied and "TFM301" in result.rules_applied, result.diagnostics
    assert [d for d in result.manual_work if d.code == "TFM301"] == []
    assert f"tf.distribute.{strategy}" in out
    assert "replica_device_setter" not in out
    assert undefined_names(ast.parse(out)) <= undefined_names(ast.parse(source))
    # idempotent
    assert migrate_source(out, path="train.py").output == out
    return result


def test_async_build_model_helper_migrates_to_parameter_server_strategy():
    result = _migrated(ASYNC_MTS, "ParameterServerStrategy")
    out = result.output
    assert "def build_model" not in out  # inlined once, nothing else called it
    assert "learning_rate = FLAGS.learning_rate" in out  # the keyword argument
    # the comments of the helper came along, but for the one about the TF1 session the program no longer has
    assert "# a small two-layer regression network" in out
    assert "returns what the session runs" not in out
    [note] = [d for d in result.diagnostics if d.code == "TFM300"]
    assert note.fixed and note.severity == "info"
    assert ASYNC_MTS.splitlines()[note.line - 1].strip().startswith("global_step, loss, train_op = build_model(")


def test_sync_replicas_built_in_the_helper_migrates_to_multi_worker_mirrored():
    out = _migrated(SYNC_MTS, "MultiWorkerMirroredStrategy").output
    assert "SyncReplicasOptimizer(" not in out
    assert "def build_model" not in out
    # the worker count only SyncReplicasOptimizer read is gone with it
    assert "num_workers" not in out and "len(worker_hosts)" not in out


def test_supervisor_loop_over_a_helper_built_graph_migrates():
    out = _migrated(SUPERVISOR, "ParameterServerStrategy").output
    assert "Supervisor" not in out and "def build_model" not in out


def test_model_dict_subscripts_become_the_returned_names():
    out = _migrated(MODEL_DICT, "ParameterServerStrategy").output
    assert 'model["' not in out and "def get_model" not in out
    assert "learning_rate = 0.01" in out  # the default


def test_optimizer_helper_is_left_to_tfm301():
    """`opt = make_optimizer(lr)` then `opt.minimize(...)` in the block: the
    train op is already there; TFM301 maps the helper's optimizer itself."""
    source = ASYNC_MTS.replace(
        "    train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(\n"
        "        loss, global_step=global_step)\n"
        "    return global_step, loss, train_op\n",
        "    return global_step, loss\n\n\ndef make_optimizer(lr):\n    return tf.train.GradientDescentOptimizer(lr)\n",
    ).replace(
        "            global_step, loss, train_op = build_model(x, y_, learning_rate=FLAGS.learning_rate)\n",
        "            global_step, loss = build_model(x, y_)\n"
        "            train_op = make_optimizer(FLAGS.learning_rate).minimize(loss, global_step=global_step)\n",
    )
    assert "make_optimizer" in source and "return global_step, loss\n" in source
    result = migrate_source(source, path="train.py")
    assert "TFM300" not in result.rules_applied


@pytest.mark.parametrize(
    "old, new, why",
    [
        # the helper's local `y` is also main's name: inlining would rebind it
        ("            y_ = tf.placeholder(tf.float32, [None, 1], name=\"y\")\n",
         "            y_ = tf.placeholder(tf.float32, [None, 1], name=\"y\")\n            y = y_\n", "clash"),
        # the call misses an argument (it raised TypeError)
        ("build_model(x, y_, learning_rate=FLAGS.learning_rate)", "build_model(x)", "arity"),
        # passed on with *args
        ("build_model(x, y_, learning_rate=FLAGS.learning_rate)", "build_model(*(x, y_))", "star"),
    ],
    ids=lambda v: v if v in ("clash", "arity", "star") else None,
)
def test_declined_helper_calls_stay_as_they_were(old, new, why):
    source = ASYNC_MTS.replace(old, new)
    assert source != ASYNC_MTS
    result = migrate_source(source, path="train.py")
    assert "TFM300" not in result.rules_applied
    assert result.output == migrate_source(source, path="train.py", ignore=["TFM300"]).output
    assert "def build_model" in result.output
    assert any(d.code == "TFM301" and "comes from `build_model(...)`" in d.message for d in result.manual_work)


def test_inlining_is_dropped_when_tfm301_still_declines():
    """The helper is inlined, but TFM301 declines the block for another
    reason (a Keras layer called inline creates the model's variables): the
    inlining alone is no migration, so the output keeps the helper and its
    call."""
    start = ASYNC_MTS.index("    # a small two-layer regression network\n")
    end = ASYNC_MTS.index("    global_step = tf.Variable(0, trainable=False")
    source = ASYNC_MTS[:start] + "    y = tf.keras.layers.Dense(1)(x)\n" + ASYNC_MTS[end:]
    assert "inline" in migrate_source(source, path="train.py", select=["TFM300"]).diagnostics[0].message
    result = migrate_source(source, path="train.py")
    assert [d for d in result.manual_work if d.code == "TFM301"]
    assert "TFM300" not in result.rules_applied
    assert "build_model(x, y_, learning_rate=FLAGS.learning_rate)" in result.output
