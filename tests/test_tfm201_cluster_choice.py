"""TFM201 on a program with one literal cluster per deployment, chosen by a
flag (`--deploy_mode`): the resolver describes the cluster the Server gets."""

from migrate.codemod.engine import dedent, migrate_source

CHOSEN = dedent(
    """
    import tensorflow as tf

    flags = tf.app.flags
    flags.DEFINE_string("job_name", "worker", "ps or worker")
    flags.DEFINE_integer("task_index", 0, "task")
    flags.DEFINE_string("deploy_mode", "local", "local or lab")
    FLAGS = flags.FLAGS

    local = tf.train.ClusterSpec({"ps": ["localhost:2220"], "worker": ["localhost:2221"]})
    lab = tf.train.ClusterSpec({"ps": ["node0:2220"], "worker": ["node1:2221", "node2:2221"]})
    clusters = {"local": local, "lab": lab}
    chosen = clusters[FLAGS.deploy_mode]
    server = tf.train.Server(chosen, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    """
)


def test_one_resolver_for_the_cluster_the_server_is_given():
    result = migrate_source(CHOSEN, select=["TFM201"])
    out = result.output
    assert out.count("SimpleClusterResolver(") == 1
    at = out.index("chosen = clusters[FLAGS.deploy_mode]")
    resolver = out.index("cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(")
    assert resolver > at
    assert "SimpleClusterResolver(\n    chosen, task_type=FLAGS.job_name, task_id=FLAGS.task_index" in out
    compile(out, "<migrated>", "exec")
    assert migrate_source(out, select=["TFM201"]).output == out


def test_a_single_cluster_still_gets_its_resolver_after_the_spec():
    single = CHOSEN.replace('lab = tf.train.ClusterSpec({"ps": ["node0:2220"], "worker": ["node1:2221", "node2:2221"]})\n',
                            "").replace(', "lab": lab', "")
    out = migrate_source(single, select=["TFM201"]).output
    assert out.count("SimpleClusterResolver(") == 1
    assert "SimpleClusterResolver(\n    local, task_type=FLAGS.job_name" in out
