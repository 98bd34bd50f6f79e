"""The cluster rules on a Server built under a condition of the cluster's own
block (``if not FLAGS.reuse_servers:``, TF1's "servers already exist" mode).

The resolver must exist on every path the strategy is built on: it goes
right after the ClusterSpec, and the guard the server removal leaves empty
goes with it. Where the task's role itself is only computed under that
condition, no resolver can be built for the other path: the program stays
TF1, with a located reason, rather than reading an unbound (or a different)
resolver."""

import ast

from migrate.codemod.engine import dedent, migrate_source, undefined_names

GUARDED_SERVER = dedent(
    """
    import tensorflow as tf

    flags = tf.app.flags
    flags.DEFINE_string("job_name", "", "ps or worker")
    flags.DEFINE_integer("task_index", 0, "task")
    flags.DEFINE_string("ps_hosts", "", "ps")
    flags.DEFINE_string("worker_hosts", "", "workers")
    flags.DEFINE_boolean("reuse_servers", False, "servers started elsewhere")
    FLAGS = flags.FLAGS


    def main(_):
        workers = FLAGS.worker_hosts.split(",")
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": workers})
        if not FLAGS.reuse_servers:
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            if FLAGS.job_name == "ps":
                server.join()
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            step = tf.train.get_or_create_global_step()
            w = tf.Variable(tf.zeros([4, 1]), name="w")
            x = tf.placeholder(tf.float32, [None, 4])
            y = tf.placeholder(tf.float32, [None, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                                 replicas_to_aggregate=len(workers), total_num_replicas=len(workers))
            train_op = opt.minimize(loss, global_step=step)
        hooks = [opt.make_session_run_hook(FLAGS.task_index == 0), tf.train.StopAtStepHook(last_step=100)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0, hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train_op, feed_dict={x: [[1.0, 2.0, 3.0, 4.0]], y: [[1.0]]})


    if __name__ == "__main__":
        tf.app.run()
    """
)


def _main_body(code: str) -> list[ast.stmt]:
    [main] = [n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    return main.body


def test_the_resolver_is_bound_on_every_path_the_strategy_is_built_on():
    result = migrate_source(GUARDED_SERVER, path="guarded.py")
    out = result.output
    assert "MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in out
    # bound by a statement of main() itself, not under the reuse_servers condition
    top = [n for n in _main_body(out) if isinstance(n, ast.Assign)]
    assert "cluster_resolver" in {t.id for n in top for t in n.targets if isinstance(t, ast.Name)}
    assert out.index("cluster = tf.train.ClusterSpec(") < out.index("cluster_resolver = ") < out.index("strategy = ")
    # the guard held only the server the rule removed: no `if ...: pass` is left
    assert "reuse_servers:" not in out and "pass" not in out
    assert "tf.train.Server" not in out and ".join()" not in out
    assert not undefined_names(ast.parse(out))
    assert migrate_source(out, path="guarded.py").output == out


def test_a_guard_that_still_holds_code_stays():
    kept = GUARDED_SERVER.replace(
        "        if FLAGS.job_name == \"ps\":\n",
        "        print(\"serving\", FLAGS.task_index)\n        if FLAGS.job_name == \"ps\":\n",
    )
    assert kept != GUARDED_SERVER
    out = migrate_source(kept, path="guarded.py").output
    assert "    if not FLAGS.reuse_servers:\n        print(\"serving\", FLAGS.task_index)\n" in out
    assert "cluster_resolver = " in out and out.index("cluster_resolver = ") < out.index("if not FLAGS.reuse_servers:")


def test_a_role_computed_under_the_condition_keeps_the_program_tf1():
    role_inside = GUARDED_SERVER.replace(
        "        server = tf.train.Server(cluster, job_name=FLAGS.job_name,",
        "        role = FLAGS.job_name.lower()\n        server = tf.train.Server(cluster, job_name=role,",
    ).replace('if FLAGS.job_name == "ps":', 'if role == "ps":')
    assert "role = " in role_inside
    result = migrate_source(role_inside, path="guarded.py")
    out = result.output
    assert "Strategy" not in out and "cluster_resolver" not in out
    assert "train.Server(cluster, job_name=role" in out and "server.join()" in out
    assert not {"TFM201", "TFM202", "TFM301"} & set(result.rules_applied)
    [reason] = [d for d in result.manual_work if d.code == "TFM201"]
    lines = role_inside.splitlines()
    assert lines[reason.line - 1][reason.column - 1 :].startswith("if not FLAGS.reuse_servers:")
    assert "only computed under this condition" in reason.message
    assert [d for d in result.manual_work if d.code == "TFM301" and "TF1 server" in d.message]
    assert migrate_source(out, path="guarded.py").output == out


def test_a_cluster_rule_alone_still_places_the_resolver_after_the_spec():
    out = migrate_source(GUARDED_SERVER, select=["TFM201"]).output
    assert out.count("SimpleClusterResolver(") == 1
    assert out.index("cluster_resolver = ") < out.index("if not FLAGS.reuse_servers:")
