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


# --- the name that held the ps hosts, once MultiWorkerMirroredStrategy drops the ps job

PS_NAMES = dedent(
    """
    import tensorflow as tf
    from deploy_hosts import ps_addrs, worker_addrs

    flags = tf.app.flags
    flags.DEFINE_string("job_name", "", "ps or worker")
    flags.DEFINE_integer("task_index", 0, "task")
    FLAGS = flags.FLAGS

    # one parameter server, kept apart from the workers
    spare_ps = ["10.0.0.9:2222"]


    def main(_):
        # hosts of this run
        ps_list = FLAGS.ps_hosts.split(",")
        cluster = tf.train.ClusterSpec({"ps": ps_list, "worker": worker_addrs})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            w = tf.Variable(tf.zeros([2]))
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2)
    """
)


def test_the_ps_hosts_name_read_only_by_the_dropped_entry_goes():
    out = migrate_source(PS_NAMES, select=["TFM201"]).output
    assert '{"worker": worker_addrs}' in out
    assert "ps_list" not in out
    # the comment above the removed statement stays, on the next one
    assert "    # hosts of this run\n    cluster = tf.train.ClusterSpec(" in out
    # names the dropped entry did not read stay
    assert 'spare_ps = ["10.0.0.9:2222"]' in out and "from deploy_hosts import ps_addrs, worker_addrs" in out
    compile(out, "<migrated>", "exec")
    assert migrate_source(out, select=["TFM201"]).output == out


def test_an_imported_ps_hosts_name_goes_from_its_import():
    imported = PS_NAMES.replace('{"ps": ps_list,', '{"ps": ps_addrs,')
    assert imported != PS_NAMES
    out = migrate_source(imported, select=["TFM201"]).output
    # the module is still imported for its other names
    assert "from deploy_hosts import worker_addrs\n" in out
    assert migrate_source(out, select=["TFM201"]).output == out


def test_a_ps_hosts_name_still_read_elsewhere_stays():
    still_read = PS_NAMES.replace("    server = tf.train.Server(",
                                  "    print(\"ps tasks:\", len(ps_list))\n    server = tf.train.Server(")
    assert still_read != PS_NAMES
    out = migrate_source(still_read, select=["TFM201"]).output
    assert 'ps_list = FLAGS.ps_hosts.split(",")' in out and '{"worker": worker_addrs}' in out


def test_a_lone_import_and_an_effectful_value_stay():
    lone = PS_NAMES.replace("from deploy_hosts import ps_addrs, worker_addrs",
                            "from deploy_hosts import worker_addrs\nfrom ps_registry import ps_addrs")
    lone = lone.replace('ps_list = FLAGS.ps_hosts.split(",")', "ps_list = fetch_ps_hosts()")
    out = migrate_source(lone, select=["TFM201"]).output
    assert '{"worker": worker_addrs}' in out
    lone_import = lone.replace('{"ps": ps_list,', '{"ps": ps_addrs,')
    out_import = migrate_source(lone_import, select=["TFM201"]).output
    assert '{"worker": worker_addrs}' in out_import
    assert "from ps_registry import ps_addrs" in out_import
    # importing ps_registry may have effects; fetch_ps_hosts() is a call
    assert "from ps_registry import ps_addrs" in out
    assert "ps_list = fetch_ps_hosts()" in out


def test_an_asynchronous_program_with_a_guarded_server_stays_tf1():
    """Under ParameterServerStrategy ps and worker tasks only serve: a task that
    skips the guarded server would run the chief's loop. TFM202 declines at the
    condition; the program stays TF1 rather than half migrated."""
    asynchronous = GUARDED_SERVER.replace(
        "        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),\n"
        "                                             replicas_to_aggregate=len(workers), total_num_replicas=len(workers))\n",
        "        opt = tf.train.GradientDescentOptimizer(0.1)\n",
    ).replace("hooks = [opt.make_session_run_hook(FLAGS.task_index == 0), ", "hooks = [")
    assert "SyncReplicasOptimizer" not in asynchronous and "make_session_run_hook" not in asynchronous
    result = migrate_source(asynchronous, path="guarded.py")
    assert "Strategy" not in result.output and "cluster_resolver" not in result.output
    assert not {"TFM201", "TFM202", "TFM301"} & set(result.rules_applied)
    [reason] = [d for d in result.manual_work if d.code == "TFM202"]
    lines = asynchronous.splitlines()
    assert lines[reason.line - 1][reason.column - 1 :].startswith("if not FLAGS.reuse_servers:")
    assert "ps and worker tasks must always serve" in reason.message


# --- a cluster and server made by a helper the cluster rules cannot see

SERVER_FROM_A_HELPER = dedent(
    """
    import tensorflow as tf
    from lab_cluster import join_lab_cluster


    def main(_):
        cluster, server, job, index = join_lab_cluster(num_ps=1)
        if job == "ps":
            server.join()
        elif job == "worker":
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.Variable(tf.zeros([3, 1]))
                loss = tf.reduce_mean(tf.matmul(x, w))
                step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0,
                                                   hooks=[tf.train.StopAtStepHook(last_step=50)]) as sess:
                while not sess.should_stop():
                    sess.run(train_op, feed_dict={x: [[1.0, 2.0, 3.0]]})


    if __name__ == "__main__":
        tf.app.run()
    """
)


def test_a_strategy_is_not_built_next_to_a_helpers_server():
    """The ps branch joins a server `join_lab_cluster()` built: that TF1 server
    runs on the workers too, where ParameterServerStrategy would have been
    created (every worker a coordinator, no chief). The training stays TF1,
    with the reason at the helper's call."""
    result = migrate_source(SERVER_FROM_A_HELPER, path="lab.py")
    assert "Strategy" not in result.output and "ClusterCoordinator" not in result.output
    assert "TFM301" not in result.rules_applied
    [reason] = [d for d in result.manual_work if d.code == "TFM301" and "TF1 server built by" in d.message]
    assert "built by `join_lab_cluster(...)` (imported from `lab_cluster`)" in reason.message
    lines = SERVER_FROM_A_HELPER.splitlines()
    assert lines[reason.line - 1][reason.column - 1 :].startswith("server, job, index = join_lab_cluster(")
    assert migrate_source(result.output, path="lab.py").output == result.output


def test_a_ps_branch_joining_a_server_built_here_is_not_this_gate():
    built_here = SERVER_FROM_A_HELPER.replace(
        "    cluster, server, job, index = join_lab_cluster(num_ps=1)\n",
        "    cluster, job, index = join_lab_cluster(num_ps=1)\n"
        "    server = tf.train.Server(cluster, job_name=job, task_index=index)\n",
    )
    assert built_here != SERVER_FROM_A_HELPER
    result = migrate_source(built_here, path="lab.py")
    assert "TFM301" in result.rules_applied and "ParameterServerStrategy" in result.output
    assert not [d for d in result.manual_work if "TF1 server built by" in d.message]


def test_a_tensorflowonspark_server_names_the_driver_side_route():
    """TensorFlowOnSpark's ``ctx.start_cluster_server``: the jobs come from the
    Spark driver's TFCluster.run, the hint says how TF2 gets a chief there."""
    tfos = SERVER_FROM_A_HELPER.replace(
        "    cluster, server, job, index = join_lab_cluster(num_ps=1)\n",
        "    job, index = ctx.job_name, ctx.task_index\n"
        "    cluster, server = ctx.start_cluster_server(1, False)\n",
    )
    assert tfos != SERVER_FROM_A_HELPER
    result = migrate_source(tfos, path="lab.py")
    assert "Strategy" not in result.output
    [reason] = [d for d in result.manual_work if d.code == "TFM301" and "TF1 server built by" in d.message]
    assert "built by `ctx.start_cluster_server(...)`" in reason.message
    assert "master_node='chief'" in reason.hint and "TFConfigClusterResolver()" in reason.hint


def test_a_parameter_server_cluster_from_a_variable_is_reported_to_need_a_chief():
    """``ClusterSpec(hosts)`` with ``hosts`` a dict made elsewhere: TFM201 cannot
    add the chief entry ParameterServerStrategy needs, and says so there."""
    from_variable = dedent(
        """
        import tensorflow as tf
        flags = tf.app.flags
        flags.DEFINE_string("job_name", "", "ps or worker")
        flags.DEFINE_integer("task_index", 0, "task")
        FLAGS = flags.FLAGS

        def main(_):
            hosts = load_hosts()
            cluster = tf.train.ClusterSpec(hosts)
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                pass
        """
    )
    result = migrate_source(from_variable, select=["TFM201"])
    [chief] = [d for d in result.manual_work if "'chief'" in d.message]
    assert '`hosts` must have a "chief" job' in chief.message
    line = from_variable.splitlines()[chief.line - 1]
    assert line[chief.column - 1 :].startswith("cluster = tf.train.ClusterSpec(hosts)")
