"""Usage examples in a migrated program's comments and docstrings follow its
topology (migrate/codemod/usage.py), and the docstring stage says what the
program now is (migrate/codemod/orphans.py).

(before, after) pairs: ``before`` is the legacy text, ``after`` what the same
text reads like in a migrated program that builds ``strategy``.
"""

from __future__ import annotations

import textwrap

import pytest

from migrate.codemod.engine import migrate_source
from migrate.codemod.orphans import tidy
from migrate.codemod.usage import follow_topology

PSS_FLAGS = """
flags.DEFINE_string("chief_hosts", "", "chief address")
strategy = tf.distribute.ParameterServerStrategy(resolver)
"""
PSS = "strategy = tf.distribute.ParameterServerStrategy(resolver)\n"
MWMS = "strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)\n"


def _follow(text: str, program: str) -> tuple[str, list[tuple[int, str]]]:
    legacy = textwrap.dedent(text)
    code, changes = follow_topology("trainer.py", legacy, legacy + program)
    assert code.endswith(program)
    return code[: len(code) - len(program)], changes


PAIRS = [
    pytest.param(
        """\
        # Start each task on its machine:
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --job_name=ps --task_index=0
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --job_name=worker --task_index=0
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --job_name=worker --task_index=1
        """,
        """\
        # Start each task on its machine:
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --chief_hosts=10.0.0.2:2223 --job_name=ps --task_index=0
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --chief_hosts=10.0.0.2:2223 --job_name=worker --task_index=0
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --chief_hosts=10.0.0.2:2223 --job_name=worker --task_index=1
        # python trainer.py --ps_hosts=10.0.0.1:2222 --worker_hosts=10.0.0.2:2222,10.0.0.3:2222 --chief_hosts=10.0.0.2:2223 --job_name=chief --task_index=0
        """,
        PSS_FLAGS,
        id="pss-flags-in-comments",
    ),
    pytest.param(
        '''\
        """Trains on a hard-coded cluster.

        host-a$ python trainer.py --job_name="ps" --task_index=0
        host-b$ python trainer.py --job_name="worker" --task_index=0
        host-c$ python trainer.py --job_name="worker" --task_index=1
        """
        ''',
        '''\
        """Trains on a hard-coded cluster.

        host-a$ python trainer.py --job_name="ps" --task_index=0
        host-b$ python trainer.py --job_name="worker" --task_index=0
        host-c$ python trainer.py --job_name="worker" --task_index=1
        host-b$ python trainer.py --job_name="chief" --task_index=0
        """
        ''',
        PSS,
        id="pss-hard-coded-cluster-docstring",
    ),
    pytest.param(
        '''\
        """Every task runs this file::

            python trainer.py --ps_hosts=h:2222 \\
                --worker_hosts=h:2223 --job_name=worker --task_index=0
        """
        ''',
        '''\
        """Every task runs this file::

            python trainer.py --ps_hosts=h:2222 \\
                --worker_hosts=h:2223 --chief_hosts=h:2224 --job_name=worker --task_index=0
            python trainer.py --ps_hosts=h:2222 \\
                --worker_hosts=h:2223 --chief_hosts=h:2224 --job_name=chief --task_index=0
        """
        ''',
        PSS_FLAGS,
        id="pss-continued-command",
    ),
    pytest.param(
        """\
        LAUNCH = '''
        import subprocess
        subprocess.Popen('python trainer.py --job_name=ps --task_index=0',
                         shell=True)
        subprocess.Popen('python trainer.py --job_name=worker --task_index=0',
                         shell=True)
        '''
        """,
        """\
        LAUNCH = '''
        import subprocess
        subprocess.Popen('python trainer.py --job_name=ps --task_index=0',
                         shell=True)
        subprocess.Popen('python trainer.py --job_name=worker --task_index=0',
                         shell=True)
        subprocess.Popen('python trainer.py --job_name=chief --task_index=0',
                         shell=True)
        '''
        """,
        PSS,
        id="pss-command-with-continuation-lines",
    ),
    pytest.param(
        '''\
        """Synchronous training.

            TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:2222"],
                                    "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
                        "task": {"type": "worker", "index": 0}}' python trainer.py
        """
        ''',
        '''\
        """Synchronous training.

            TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
                        "task": {"type": "worker", "index": 0}}' python trainer.py
        """
        ''',
        MWMS,
        id="mwms-tf-config-loses-ps",
    ),
    pytest.param(
        """\
        # TF_CONFIG='{"cluster": {"ps": ["p:1"], "worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": 1}}'
        """,
        """\
        # TF_CONFIG='{"cluster": {"ps": ["p:1"], "worker": ["w0:1", "w1:1"], "chief": ["w0:2"]}, "task": {"type": "worker", "index": 1}}'
        """,
        PSS,
        id="pss-tf-config-gains-chief",
    ),
    pytest.param(
        """\
        # pc-1$ python trainer.py --job_name=ps --task_index=0
        # pc-2$ python trainer.py --job_name=worker --task_index=0
        # pc-3$ python trainer.py --job_name=worker --task_index=1
        """,
        """\
        # pc-2$ python trainer.py --job_name=worker --task_index=0
        # pc-3$ python trainer.py --job_name=worker --task_index=1
        """,
        MWMS,
        id="mwms-ps-command-removed",
    ),
]


PAIRS += [
    pytest.param(f"{definition}\n", f"{expected}\n", program, id=f"role-flag-help-{n}")
    for n, (definition, expected, program) in enumerate([
        ('flags.DEFINE_string("job_name", None, "job name: worker or ps")',
         'flags.DEFINE_string("job_name", None, "job name: worker, ps or chief")', PSS),
        ("""flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")""",
         """flags.DEFINE_string("job_name", "", "One of 'ps', 'worker', 'chief'")""", PSS),
        ("""flags.DEFINE_string("job_name", "", "'ps' / 'worker'")""",
         """flags.DEFINE_string("job_name", "", "'ps' / 'worker' / 'chief'")""", PSS),
        ("""parser.add_argument("--job_name", default="", help="Either 'ps' or 'worker'")""",
         """parser.add_argument("--job_name", default="", help="'worker'")""", MWMS),
        ('flags.DEFINE_string("job_name", "worker", "ps or worker")',
         'flags.DEFINE_string("job_name", "worker", "worker")', MWMS),
    ])
]


@pytest.mark.parametrize("before, after, program", PAIRS)
def test_usage_example_follows_the_topology(before, after, program):
    code, changes = _follow(before, program)
    assert code == textwrap.dedent(after)
    assert changes and all(line >= 1 for line, _ in changes)
    # a second run finds the new topology there and changes nothing
    again, more = follow_topology("trainer.py", code + program, code + program)
    assert again == code + program and more == []


@pytest.mark.parametrize(
    "text, program",
    [
        # no strategy built: not a migrated program
        ("# python trainer.py --job_name=ps --task_index=0\n", "x = 1\n"),
        # both kinds built: the author chooses at run time, the examples stay
        ("# python trainer.py --job_name=worker --task_index=0\n", PSS + MWMS),
        # already starts a chief
        ("# python t.py --job_name=worker --task_index=0\n# python t.py --job_name=chief --task_index=0\n", PSS),
        # a set of ps commands only: nothing to keep them beside
        ("# python trainer.py --job_name=ps --task_index=0\n", MWMS),
        # no role: not a task's command
        ("# python trainer.py --steps=10\n", PSS),
        # another flag's help
        ('flags.DEFINE_string("data_dir", "", "ps or worker data")\n', PSS),
    ],
)
def test_usage_examples_left_alone(text, program):
    code, changes = _follow(text, program)
    assert code == text and changes == []


def test_text_the_rules_wrote_is_not_edited():
    program = PSS + "# python trainer.py --job_name=worker --task_index=0\n"
    code, changes = follow_topology("trainer.py", "", program)
    assert code == program and changes == []


def test_stale_summary_says_what_the_program_is_now_and_keeps_its_launch_example():
    legacy = textwrap.dedent('''\
        """Synchronous training with a Supervisor (TF1).

        How SyncReplicasOptimizer aggregates gradients, as every task runs it::

            python trainer.py --job_name=worker --task_index=0

        Losses are logged per step.
        """
        import tensorflow.compat.v1 as tf
        tf.disable_eager_execution()
        sv = tf.train.Supervisor()
        opt = tf.train.SyncReplicasOptimizer(opt)
        ''')
    migrated = legacy.split("import", 1)[0] + "import tensorflow as tf\n" + MWMS
    tidied = tidy(legacy, migrated)
    assert tidied.startswith(
        '"""Synchronous data-parallel training on several workers with tf.distribute.MultiWorkerMirroredStrategy.\n'
        "\nEach task is started like this::\n"
        "\n    python trainer.py --job_name=worker --task_index=0\n"
        "\nLosses are logged per step.\n"
    )


def test_stale_aside_goes_and_the_sentence_stays():
    legacy = textwrap.dedent('''\
        """Chief recovery from a checkpoint (TF1, on a Supervisor).

        Body.
        """
        import tensorflow.compat.v1 as tf
        tf.disable_eager_execution()
        sv = tf.train.Supervisor()
        ''')
    migrated = legacy.split("import", 1)[0] + "import tensorflow as tf\n" + PSS
    assert tidy(legacy, migrated).startswith('"""Chief recovery from a checkpoint.\n\nBody.\n"""')


def test_program_file_names_are_not_machinery():
    # ``sync_replicas.py`` names a program; the paragraph describes no SyncReplicasOptimizer
    legacy = textwrap.dedent('''\
        """Trains a model.

        See sync_replicas.py for the other version.
        """
        opt = tf.train.SyncReplicasOptimizer(opt)
        ''')
    migrated = legacy.split("opt =", 1)[0] + MWMS
    assert "See sync_replicas.py for the other version." in tidy(legacy, migrated)


def test_migrated_program_reports_its_usage_edits():
    legacy = textwrap.dedent('''\
        """Async ps training.

            python trainer.py --ps_hosts=localhost:2222 --worker_hosts=localhost:2223 --job_name=worker --task_index=0
        """
        import tensorflow as tf
        from absl import app, flags

        flags.DEFINE_string("ps_hosts", "", "ps")
        flags.DEFINE_string("worker_hosts", "", "workers")
        flags.DEFINE_string("job_name", "", "role")
        flags.DEFINE_integer("task_index", 0, "index")
        FLAGS = flags.FLAGS


        def main(_):
            cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            if FLAGS.job_name == "ps":
                server.join()
                return
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 1])
                w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            hooks = [tf.train.StopAtStepHook(last_step=10)]
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                                   hooks=hooks) as sess:
                while not sess.should_stop():
                    sess.run(train_op, feed_dict={x: [[1.0]]})


        if __name__ == "__main__":
            app.run(main)
        ''')
    result = migrate_source(legacy, path="trainer.py")
    assert "ParameterServerStrategy(" in result.output, [d.message for d in result.diagnostics]
    assert "--job_name=chief --task_index=0" in result.output
    usage = [d for d in result.diagnostics if d.code == "TFM506"]
    assert len(usage) == 1 and usage[0].fixed and usage[0].line == 3
