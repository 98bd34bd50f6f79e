"""Servers built per role branch with a literal job name (TFM201's first stage,
migrate/codemod/rules/_role_servers.py): one server before the branching, so
the cluster rules see the shape they migrate."""

import libcst as cst

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.rules._role_servers import hoist_role_servers

PER_ROLE = dedent(
    """
    import tensorflow as tf

    def main():
        cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
        if FLAGS.job_name == "ps":
            server = tf.train.Server(cluster, job_name="ps", task_index=FLAGS.task_index, config=config)
            server.join()
        else:
            is_chief = FLAGS.task_index == 0
            server = tf.train.Server(cluster, job_name="worker", task_index=FLAGS.task_index, config=config)
            run(server.target, is_chief)
    """
)


def _is_server(call: cst.Call) -> bool:
    return cst.Module([]).code_for_node(call.func) == "tf.train.Server"


def _hoisted(source: str) -> str:
    return hoist_role_servers(cst.parse_module(source), _is_server).code


def test_per_role_servers_become_one_server_before_the_branching():
    assert _hoisted(PER_ROLE) == dedent(
        """
        import tensorflow as tf

        def main():
            cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index, config=config)
            if FLAGS.job_name == "ps":
                server.join()
            else:
                is_chief = FLAGS.task_index == 0
                run(server.target, is_chief)
        """
    )


def test_elif_worker_branch_and_positional_job_name():
    source = PER_ROLE.replace("    else:\n", '    elif FLAGS.job_name == "worker":\n').replace(
        'job_name="ps", ', '"ps", ').replace('job_name="worker", ', '"worker", ')
    out = _hoisted(source)
    assert "server = tf.train.Server(cluster, FLAGS.job_name, task_index=FLAGS.task_index, config=config)" in out
    assert out.count("tf.train.Server(") == 1
    assert 'elif FLAGS.job_name == "worker":' in out


def test_no_op_when_the_servers_differ_or_the_roles_do_not_match():
    # another config per role: not the same server
    other_config = PER_ROLE.replace('job_name="ps", task_index=FLAGS.task_index, config=config',
                                    'job_name="ps", task_index=FLAGS.task_index, config=ps_config')
    assert other_config != PER_ROLE and _hoisted(other_config) == other_config
    # the literal is not the role the branch tested
    swapped = PER_ROLE.replace('job_name="ps"', 'job_name="worker"', 1)
    assert swapped != PER_ROLE and _hoisted(swapped) == swapped
    # work done before the server in a branch (a call) is not moved after it
    busy = PER_ROLE.replace("is_chief = FLAGS.task_index == 0", "wait_for_ps()")
    assert busy != PER_ROLE and _hoisted(busy) == busy
    # an argument the branch computes before the server
    fed = PER_ROLE.replace("is_chief = FLAGS.task_index == 0", "config = worker_config")
    assert fed != PER_ROLE and _hoisted(fed) == fed


def test_sync_program_with_per_role_servers_is_migrated_without_a_server_next_to_the_strategy():
    source = dedent(
        """
        import tensorflow as tf

        def main():
            cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]})
            if FLAGS.job_name == "ps":
                server = tf.train.Server(cluster, job_name="ps", task_index=FLAGS.task_index)
                server.join()
            else:
                is_chief = FLAGS.task_index == 0
                server = tf.train.Server(cluster, job_name="worker", task_index=FLAGS.task_index)
                with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                    w = tf.Variable(tf.zeros([2]))
                    loss = tf.reduce_mean(tf.square(w - 1.0))
                    global_step = tf.train.get_or_create_global_step()
                    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                                         replicas_to_aggregate=2, total_num_replicas=2)
                    train_op = opt.minimize(loss, global_step=global_step)
                hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=10)]
                with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
                    while not sess.should_stop():
                        sess.run(train_op)
        """
    )
    result = migrate_source(source)
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in out
    assert "Server(" not in out  # the strategy starts the worker's server itself
    # the resolver is bound where every role reads it, not inside one branch
    resolver_line = next(line for line in out.splitlines() if "cluster_resolver = " in line)
    assert resolver_line.startswith("    cluster_resolver = ")
    assert "task_type=FLAGS.job_name" in out
    assert not [d for d in result.manual_work if d.code in ("TFM201", "TFM202", "TFM301")]
    assert migrate_source(out).output == out


SERVER_ANNOUNCED = '''
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "ps")
flags.DEFINE_string("worker_hosts", "", "workers")
flags.DEFINE_string("job_name", "", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index")
FLAGS = flags.FLAGS


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    print("task %s:%d serves at %s" % (FLAGS.job_name, FLAGS.task_index, server.target))
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 2])
            w = tf.Variable(tf.zeros([2, 1]), name="w")
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
            step = tf.train.get_or_create_global_step()
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        hooks = [tf.train.StopAtStepHook(last_step=20)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                               hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train_op, feed_dict={x: [[1.0, 2.0]]})


if __name__ == "__main__":
    tf.app.run()
'''


def test_a_log_line_reading_the_server_target_goes_with_the_tf2_server():
    """`print(... server.target)` between the server and the role branch moves
    into the serving branch, where `server` is TF2's server: the training
    migrates (it is no TF1 training left on the TF1 cluster)."""
    result = migrate_source(SERVER_ANNOUNCED, path="announce.py")
    assert "TFM301" in result.rules_applied, [d.message for d in result.manual_work]
    out = result.output
    serving = out.index('if FLAGS.job_name in ("ps", "worker"):')
    assert out.index("server = tf.distribute.Server(") > serving
    assert serving < out.index("serves at %s") < out.index("server.join()")
    assert "tf.train.Server" not in out and "ParameterServerStrategy" in out
    compile(out, "announce.py", "exec")
