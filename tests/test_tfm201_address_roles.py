"""Programs that find their role by looking their own address up in their host
lists (the same command on every machine, ``--ip`` or the host name matched
against ``ps_hosts``/``worker_hosts``). ParameterServerStrategy needs one more
process, the chief: TFM201 gives the cluster a literal chief address on the
first worker's machine, and since an address lookup cannot tell that process
from worker 0, a ``--chief`` option tested before the lookup. ``check``
launches the migration through that same mechanism."""

from __future__ import annotations

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.rules._role_lookup import comprehended_hosts
from migrate.runtime.topology import analyze, migrated_launch

# ours: addresses zipped from host and port lists, the role by the machine's address
ADDRESS_ROLES = dedent(
    """
    import numpy as np
    import tensorflow as tf

    PS_MACHINES = ["192.168.7.10"]
    PS_PORTS = ["3000"]
    WORKER_MACHINES = ["192.168.7.11", "192.168.7.12"]
    WORKER_PORTS = ["3000", "3000"]
    ps_addresses = ["{}:{}".format(m, p) for m, p in zip(PS_MACHINES, PS_PORTS)]
    worker_addresses = ["{}:{}".format(m, p) for m, p in zip(WORKER_MACHINES, WORKER_PORTS)]

    tf.app.flags.DEFINE_string("machine", "127.0.0.1", "this machine's address")
    tf.app.flags.DEFINE_float("rate", 0.01, "learning rate")
    FLAGS = tf.app.flags.FLAGS

    if FLAGS.machine in PS_MACHINES:
        role = "ps"
        index = PS_MACHINES.index(FLAGS.machine)
    elif FLAGS.machine in WORKER_MACHINES:
        role = "worker"
        index = WORKER_MACHINES.index(FLAGS.machine)


    def main(_):
        cluster = tf.train.ClusterSpec({"ps": ps_addresses, "worker": worker_addresses})
        server = tf.train.Server(cluster, job_name=role, task_index=index)
        if role == "ps":
            server.join()
        elif role == "worker":
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:%d" % index, cluster=cluster)):
                x = tf.placeholder(tf.float32)
                y = tf.placeholder(tf.float32)
                w = tf.get_variable("w", [], tf.float32, initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.square(y - w * x))
                step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(FLAGS.rate).minimize(loss, global_step=step)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0) as sess:
                for _ in range(100):
                    xs = np.random.randn(8)
                    sess.run(train_op, feed_dict={x: xs, y: 3 * xs})


    if __name__ == "__main__":
        tf.app.run()
    """
)


def test_address_lookup_gets_a_chief_option_tested_first_and_a_chief_entry():
    result = migrate_source(ADDRESS_ROLES)
    out = result.output
    assert "ParameterServerStrategy" in out
    # the chief on the first worker's machine, next port; its role by option, before the lookup
    assert '"chief": ["192.168.7.11:3001"]' in out
    assert 'flags.DEFINE_boolean("chief", False,' in out
    assert "if FLAGS.chief:\n    role = \"chief\"\n    index = 0\nelif FLAGS.machine in PS_MACHINES:" in out
    switch = [d for d in result.diagnostics if "added a --chief option" in d.message]
    assert len(switch) == 1 and switch[0].fixed and switch[0].line == 15  # the lookup
    assert not [d for d in result.manual_work if d.code == "TFM201"]
    assert migrate_source(out).output == out  # idempotent


def test_check_launches_the_chief_through_the_programs_own_option():
    out = migrate_source(ADDRESS_ROLES).output
    info = analyze(out)
    assert info.role_style == "match" and info.role_switch == ("chief", "chief")
    spec = migrated_launch(info, analyze(ADDRESS_ROLES), 2, 20)
    assert spec.jobs == {"chief": 1, "worker": 2, "ps": 1}
    args = {f"{job}:{i}": spec.task_args(job, i) for job, n in spec.jobs.items() for i in range(n)}
    assert args == {"chief:0": ["--chief"], "worker:0": ["--machine=192.168.7.11"],
                    "worker:1": ["--machine=192.168.7.12"], "ps:0": ["--machine=192.168.7.10"]}


def test_argparse_address_option_gets_a_store_true_chief_option():
    source = ADDRESS_ROLES.replace(
        'tf.app.flags.DEFINE_string("machine", "127.0.0.1", "this machine\'s address")\n'
        'tf.app.flags.DEFINE_float("rate", 0.01, "learning rate")\n'
        "FLAGS = tf.app.flags.FLAGS\n",
        "import argparse\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--machine", default="127.0.0.1")\n'
        'parser.add_argument("--rate", type=float, default=0.01)\n'
        "FLAGS = parser.parse_args()\n",
    )
    out = migrate_source(source).output
    assert 'parser.add_argument("--chief", action="store_true",' in out
    assert "if FLAGS.chief:" in out and analyze(out).role_switch == ("chief", "chief")


def test_host_lists_built_by_comprehensions_are_read_without_running_anything():
    lists = {"hosts": ["h1", "h2"], "ports": ["1", "2"]}
    assert comprehended_hosts('["{}:{}".format(h, p) for h, p in zip(hosts, ports)]', lists) == ["h1:1", "h2:2"]
    assert comprehended_hosts('["%s:2222" % h for h in hosts]', lists) == ["h1:2222", "h2:2222"]
    assert comprehended_hosts('[f"{h}:{p}" for h, p in zip(hosts, ports)]', lists) == ["h1:1", "h2:2"]
    assert comprehended_hosts('[h + ":" + p for h, p in zip(hosts, ports)]', lists) == ["h1:1", "h2:2"]
    # anything but formatting of the literals: not read
    assert comprehended_hosts('["{0.upper}".format(h) for h in hosts]', lists) is None
    assert comprehended_hosts('[lookup(h) for h in hosts]', lists) is None
    assert comprehended_hosts('["%s:1" % h for h in other]', lists) is None
    assert comprehended_hosts('["%s:1" % h for h in hosts if h]', lists) is None


def test_a_host_name_lookup_with_no_option_to_add_is_reported_at_the_lookup():
    source = ADDRESS_ROLES.replace("FLAGS.machine in", "socket.gethostname() in").replace(
        "import numpy as np\n", "import socket\nimport numpy as np\n")
    result = migrate_source(source)
    assert '"chief": ["192.168.7.11:3001"]' in result.output and "FLAGS.chief" not in result.output
    manual = [d for d in result.manual_work if "cannot tell the chief" in d.message]
    assert len(manual) == 1 and "`socket.gethostname()`" in manual[0].message
    assert manual[0].line == 16  # the lookup
