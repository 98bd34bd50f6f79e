"""TFM301 on a training mode chosen by a flag with both branches of an `if`
building training ops (`if FLAGS.mode == 1: <SyncReplicasOptimizer> else:
<plain apply_gradients>`): the branch the flag's default selects is migrated
(async -> ParameterServerStrategy, sync -> MultiWorkerMirroredStrategy), the
other one is dropped with a located diagnostic naming the flag; a default
that cannot be read keeps the block declined with the located reason.

Fixtures are written for these tests in the shape seen in real scripts.
"""

from __future__ import annotations

import ast

from migrate.codemod.engine import dedent, migrate_source

PROGRAM = '''
import numpy as np
import tensorflow as tf

flags = tf.app.flags
{definition}
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "task index")
FLAGS = flags.FLAGS


def main(_):
    ps_list = ["localhost:2222"]
    worker_list = ["localhost:2223", "localhost:2224"]
    cluster = tf.train.ClusterSpec({{"ps": ps_list, "worker": worker_list}})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        with tf.device(tf.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
            step_var = tf.train.get_or_create_global_step()
            xs = tf.placeholder(tf.float32, [None, 3])
            ys = tf.placeholder(tf.float32, [None, 1])
            kernel = tf.get_variable("kernel", [3, 1])
            cost = tf.reduce_mean(tf.square(tf.matmul(xs, kernel) - ys))
            base_opt = tf.train.GradientDescentOptimizer(0.05)
            pairs = base_opt.compute_gradients(cost)
            if {test}:
                wrapped = tf.train.SyncReplicasOptimizer(
                    base_opt, replicas_to_aggregate=len(worker_list), total_num_replicas=len(worker_list))
                fit = wrapped.apply_gradients(pairs, global_step=step_var)
                queue_runner = wrapped.get_chief_queue_runner()
                tokens = wrapped.get_init_tokens_op()
            else:
                fit = base_opt.apply_gradients(pairs, global_step=step_var)
        hooks = [tf.train.StopAtStepHook(last_step=50)]
        with tf.train.MonitoredTrainingSession(master=server.target,
                                               is_chief=(FLAGS.task_index == 0), hooks=hooks) as sess:
            if FLAGS.task_index == 0 and {test}:
                sess.run(tokens)
            while not sess.should_stop():
                batch_x = np.random.rand(8, 3)
                batch_y = np.random.rand(8, 1)
                _, value = sess.run([fit, cost], feed_dict={{xs: batch_x, ys: batch_y}})
                print(value)


if __name__ == "__main__":
    tf.app.run()
'''


def migrate(definition: str, test: str):
    src = dedent(PROGRAM.format(definition=definition, test=test))
    ast.parse(src)
    result = migrate_source(src)
    compile(result.output, "<migrated>", "exec")
    assert migrate_source(result.output).output == result.output
    return src, result


def choice_reports(result):
    return [d for d in result.diagnostics if d.code == "TFM301" and "chooses between two training modes" in d.message]


def test_async_default_migrates_the_async_branch():
    src, result = migrate('flags.DEFINE_integer("sync_mode", 0, "1: sync, 0: async")', "FLAGS.sync_mode == 1")
    out = result.output
    assert "tf.distribute.ParameterServerStrategy(" in out
    assert "MultiWorkerMirroredStrategy" not in out
    assert "tf.train.SyncReplicasOptimizer" not in out
    assert "tokens" not in out and "queue_runner" not in out  # bound only in the dropped sync branch
    assert "replica_device_setter" not in out and "MonitoredTrainingSession" not in out
    [report] = choice_reports(result)
    assert "--sync_mode" in report.message and "asynchronous one" in report.message
    assert report.line == src.splitlines().index("            if FLAGS.sync_mode == 1:") + 1
    assert not report.fixed


def test_sync_default_migrates_the_sync_branch():
    _, result = migrate('flags.DEFINE_boolean("use_sync", True, "synchronous training")', "FLAGS.use_sync")
    out = result.output
    assert "tf.distribute.MultiWorkerMirroredStrategy(" in out
    assert "ParameterServerStrategy" not in out
    assert "tf.train.SyncReplicasOptimizer" not in out and "tokens" not in out
    [report] = choice_reports(result)
    assert "--use_sync" in report.message and "synchronous one" in report.message


def test_local_alias_and_negated_test_follow_the_default():
    # `not FLAGS.async_mode` with async_mode on by default: the else (async) branch runs
    _, result = migrate('flags.DEFINE_bool("async_mode", True, "asynchronous training")', "not FLAGS.async_mode")
    assert "tf.distribute.ParameterServerStrategy(" in result.output
    assert "MultiWorkerMirroredStrategy" not in result.output


def test_unknown_default_still_declines():
    # the flag's default is computed: which mode the default run trains cannot be read
    src, result = migrate('flags.DEFINE_integer("sync_mode", int("0"), "1: sync, 0: async")',
                          "FLAGS.sync_mode == 1")
    assert "replica_device_setter" in result.output  # training left as TF1
    assert "tf.distribute.ParameterServerStrategy" not in result.output
    assert not choice_reports(result)
    declined = [d for d in result.manual_work if d.code == "TFM301" and "both branches" in d.message]
    assert declined and declined[0].line == src.splitlines().index("            if FLAGS.sync_mode == 1:") + 1
