"""What a migration orphaned (migrate/codemod/orphans.py): (legacy, migrated,
tidied) triples in the shapes real programs leave behind, no-op cases, and the
stage inside the engine on a ps/worker program."""

from __future__ import annotations

import ast

import pytest

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.orphans import _scan, _tokenize, tidy

# (legacy program, what the rules made of it, what tidy leaves)
CHANGED = {
    "worker device chosen per branch": (
        """
        def main():
          if FLAGS.gpus > 0:
            if FLAGS.gpus < FLAGS.workers:
              raise ValueError("too few gpus")
            gpu = FLAGS.index % FLAGS.gpus
            device = "/job:worker/task:%d/gpu:%d" % (FLAGS.index, gpu)
          elif FLAGS.gpus == 0:
            # the CPU of this task
            cpu = 0
            device = "/job:worker/task:%d/cpu:%d" % (FLAGS.index, cpu)
          with tf.device(tf.train.replica_device_setter(worker_device=device)):
            train()
        main()
        """,
        """
        def main():
          if FLAGS.gpus > 0:
            if FLAGS.gpus < FLAGS.workers:
              raise ValueError("too few gpus")
            gpu = FLAGS.index % FLAGS.gpus
            device = "/job:worker/task:%d/gpu:%d" % (FLAGS.index, gpu)
          elif FLAGS.gpus == 0:
            # the CPU of this task
            cpu = 0
            device = "/job:worker/task:%d/cpu:%d" % (FLAGS.index, cpu)
          with strategy.scope():
            train()
        main()
        """,
        """
        def main():
          if FLAGS.gpus > 0:
            if FLAGS.gpus < FLAGS.workers:
              raise ValueError("too few gpus")
          with strategy.scope():
            train()
        main()
        """,
    ),
    "chain of orphans, the cluster dict first": (
        """
        import tensorflow as tf
        ps_hosts = FLAGS.ps_hosts.split(",")
        worker_hosts = FLAGS.worker_hosts.split(",")
        cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
        server = tf.train.Server(cluster, job_name=FLAGS.job, task_index=FLAGS.index)
        with tf.device("/cpu:0"):
            pass
        """,
        """
        import tensorflow as tf
        ps_hosts = FLAGS.ps_hosts.split(",")
        worker_hosts = FLAGS.worker_hosts.split(",")
        cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        with tf.device("/cpu:0"):
            pass
        """,
        """
        import tensorflow as tf
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        with tf.device("/cpu:0"):
            pass
        """,
    ),
    "a helper without callers, its comment and the constant only it read": (
        """
        import tensorflow as tf

        # Variables go to the CPU.
        PLACED = ["Variable", "VariableV2"]

        def placer(device):
            def place(op):
                return "/cpu:0" if op.type in PLACED else device
            return place

        with tf.device(placer("/gpu:0")):
            model()
        """,
        """
        import tensorflow as tf

        # Variables go to the CPU.
        PLACED = ["Variable", "VariableV2"]

        def placer(device):
            def place(op):
                return "/cpu:0" if op.type in PLACED else device
            return place

        with tf.distribute.MirroredStrategy().scope():
            model()
        """,
        """
        import tensorflow as tf

        with tf.distribute.MirroredStrategy().scope():
            model()
        """,
    ),
    "a session configuration only the server read": (
        """
        import tensorflow as tf
        config = tf.ConfigProto(log_device_placement=False)
        server = tf.train.Server(cluster, job_name="worker", task_index=0, config=config)
        with tf.device("/cpu:0"):
            pass
        """,
        """
        import tensorflow as tf
        config = tf.compat.v1.ConfigProto(log_device_placement=False)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster)
        with tf.device("/cpu:0"):
            pass
        """,
        """
        import tensorflow as tf
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster)
        with tf.device("/cpu:0"):
            pass
        """,
    ),
    "an import only the old code read keeps its neighbours": (
        """
        from tensorflow.python.training.summary_io import SummaryWriterCache, summary_iterator
        import tensorflow as tf
        if __name__ == "__main__":
            writer = SummaryWriterCache.get(logdir)
            print(summary_iterator)
        """,
        """
        from tensorflow.python.training.summary_io import SummaryWriterCache, summary_iterator
        import tensorflow as tf
        if __name__ == "__main__":
            writer = tf.summary.create_file_writer(logdir)
            print(summary_iterator)
        """,
        """
        from tensorflow.python.training.summary_io import summary_iterator
        import tensorflow as tf
        if __name__ == "__main__":
            writer = tf.summary.create_file_writer(logdir)
            print(summary_iterator)
        """,
    ),
    "comments about the supervisor and the session go, with their paragraph": (
        """
        def train():
            is_chief = FLAGS.index == 0
            # The supervisor initializes the variables and
            # restores the latest checkpoint.
            sv = tf.train.Supervisor(is_chief=is_chief)
            with sv.managed_session(server.target) as sess:
                sess.run(op)  # a step
            time.sleep(5)  # let the session close
        """,
        """
        def train():
            is_chief = FLAGS.index == 0
            # The supervisor initializes the variables and
            # restores the latest checkpoint.
            for _ in range(10):
                step()  # a step
            time.sleep(5)  # let the session close
        """,
        """
        def train():
            for _ in range(10):
                step()  # a step
            time.sleep(5)
        """,
    ),
}

# (legacy, migrated): tidy changes nothing
UNCHANGED = {
    "dead before the migration: the author's to remove": (
        """
        def main():
            unused = 3
            tf.train.Supervisor()
        """,
        """
        def main():
            unused = 3
            strategy.run(step)
        """,
    ),
    "a value with an effect": (
        """
        def main():
            server = make_server(cluster)
            server.join()
        """,
        """
        def main():
            server = make_server(cluster)
            strategy.run(step)
        """,
    ),
    "a library's module names: its importers may read them": (
        """
        import tensorflow as tf
        DEVICE = "/job:worker"
        def build():
            return tf.device(DEVICE)
        """,
        """
        import tensorflow as tf
        DEVICE = "/job:worker"
        def build():
            return strategy.scope()
        """,
    ),
    "a name spelled in __all__": (
        """
        import tensorflow as tf
        __all__ = ["helper"]
        def helper():
            pass
        helper()
        tf.train.Supervisor()
        """,
        """
        import tensorflow as tf
        __all__ = ["helper"]
        def helper():
            pass
        tf.distribute.MultiWorkerMirroredStrategy()
        """,
    ),
    "a comment about a session the program still has": (
        """
        def main():
            # the session evaluates the model
            with tf.compat.v1.Session() as sess:
                sess.run(op)
        """,
        """
        def main():
            # the session evaluates the model
            with tf.compat.v1.Session() as sess:
                sess.run(op)
        """,
    ),
    "a comment the rules wrote": (
        """
        def main():
            sv = tf.train.Supervisor()
        """,
        """
        def main():
            # Saved every 600 s (Supervisor's default save_model_secs), as in TF1.
            manager.save()
        """,
    ),
    "the last statement of a block stays": (
        """
        def main():
            for task in tasks:
                device = "/job:worker/task:%d" % task
                tf.device(device)
        """,
        """
        def main():
            for task in tasks:
                device = "/job:worker/task:%d" % task
        """,
    ),
}


@pytest.mark.parametrize("case", list(CHANGED), ids=list(CHANGED))
def test_orphans_removed(case):
    legacy, migrated, tidied = (dedent(text) for text in CHANGED[case])
    assert tidy(legacy, migrated) == tidied
    ast.parse(tidied)
    assert tidy(legacy, tidied) == tidied  # nothing more to do


@pytest.mark.parametrize("case", list(UNCHANGED), ids=list(UNCHANGED))
def test_nothing_orphaned(case):
    legacy, migrated = (dedent(text) for text in UNCHANGED[case])
    assert tidy(legacy, migrated) == migrated


def test_notebook_cell_markers_bound_paragraphs():
    marker = r"# CELL\(\d+\)[ \t]*$"
    legacy = "# CELL(1)\n# the supervisor starts here\nsv = tf.train.Supervisor()\n"
    migrated = "# CELL(1)\n# the supervisor starts here\nstrategy = make()\n"
    assert tidy(legacy, migrated, marker) == "# CELL(1)\nstrategy = make()\n"


def test_engine_tidies_a_migrated_program():
    """The stage runs inside the engine: the device string the device setter
    read and the comments about the setter and the supervisor are gone; the
    program still migrates and compiles."""
    source = dedent(
        """
        import tensorflow as tf

        flags = tf.app.flags
        flags.DEFINE_string("ps_hosts", "", "ps")
        flags.DEFINE_string("worker_hosts", "", "workers")
        flags.DEFINE_string("job_name", "", "ps or worker")
        flags.DEFINE_integer("task_index", 0, "index")
        FLAGS = flags.FLAGS


        def main(_):
            ps_hosts = FLAGS.ps_hosts.split(",")
            worker_hosts = FLAGS.worker_hosts.split(",")
            cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            if FLAGS.job_name == "ps":
                server.join()
                return
            device = "/job:worker/task:%d" % FLAGS.task_index
            # The device setter puts the variables on the ps tasks.
            with tf.device(tf.train.replica_device_setter(worker_device=device, cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 4])
                w = tf.get_variable("w", [4, 1])
                loss = tf.reduce_mean(tf.matmul(x, w))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            hooks = [tf.train.StopAtStepHook(last_step=100)]
            # MonitoredTrainingSession restores and saves checkpoints for us.
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                                   hooks=hooks) as sess:
                while not sess.should_stop():
                    sess.run(train_op, feed_dict={x: [[1.0, 2.0, 3.0, 4.0]]})


        if __name__ == "__main__":
            tf.app.run()
        """
    )
    result = migrate_source(source, path="job.py")
    assert "TFM301" in result.rules_applied, [d.message for d in result.manual_work]
    out = result.output
    compile(out, "job.py", "exec")
    assert "ParameterServerStrategy" in out
    assert "device = " not in out
    assert "device setter" not in out and "MonitoredTrainingSession restores" not in out
    assert migrate_source(out, path="job.py").output == out


def test_docstring_paragraphs_about_removed_machinery_go():
    legacy = dedent(
        '''
        """Distributed training of a small regression model.

        The chief's Supervisor initializes the variables; the other workers
        wait for it in prepare_or_wait_for_session.

        How the workers coordinate:

        Each worker pushes its gradients into the SyncReplicasOptimizer's
        accumulators on the ps.

        Run one process per task.
        """
        import tensorflow as tf
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2)
        sv = tf.train.Supervisor(is_chief=True)


        def step():
            """One step of the Supervisor's session."""
            return 1
        '''
    )
    migrated = legacy.replace(
        'opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2)\nsv = tf.train.Supervisor(is_chief=True)',
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()",
    )
    tidied = tidy(legacy, migrated)
    assert tidied.startswith(
        '"""Distributed training of a small regression model.\n\nRun one process per task.\n"""\n')
    assert '"""One step' not in tidied and "def step():\n    return 1\n" in tidied
    assert tidy(legacy, tidied) == tidied


def test_a_flag_value_set_for_the_removed_cluster_goes_with_it():
    legacy = dedent(
        """
        import json, os
        import tensorflow as tf
        FLAGS = tf.app.flags.FLAGS
        if __name__ == "__main__":
            spec = json.loads(os.environ["TF_CONFIG"])["cluster"]
            ps_hosts = spec.get("ps")
            FLAGS.ps_hosts = ",".join(ps_hosts)
            cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": spec["worker"]})
            server = tf.train.Server(cluster)
        """
    )
    migrated = dedent(
        """
        import json, os
        import tensorflow as tf
        FLAGS = tf.app.flags.FLAGS
        if __name__ == "__main__":
            spec = json.loads(os.environ["TF_CONFIG"])["cluster"]
            ps_hosts = spec.get("ps")
            FLAGS.ps_hosts = ",".join(ps_hosts)
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
        """
    )
    tidied = tidy(legacy, migrated)
    assert "ps_hosts" not in tidied and "strategy = " in tidied
    # a flags object handed around whole may have any value read: kept
    handed = migrated.replace("strategy = tf.distribute.MultiWorkerMirroredStrategy()", "run(FLAGS)")
    assert "FLAGS.ps_hosts = " in tidy(legacy, handed)


SCANNED = [
    'x = "a # not a comment"  # a comment\n',
    "if a or'b':  # `or` is a name, then a string\n    pass\n",
    "s = rb'raw\\''  # escaped quote\nt = Rf'{x}' + b\"\\\"\"\n",
    'doc = """one\n# inside\n\\""" still"""  # after\n',
    "d = f\"{m['k']}\"  # an f-string holding the other quotes\nu = '''a\\\n'''\n",
    "call(1,  # first\n     2)  # second\n\n    # indented alone\n",
    "x = ('a'  # between\n     'b')\n",
    "s = 'line\\\ncontinued'  # a continued string\n",
]


@pytest.mark.parametrize("code", SCANNED)
def test_scan_finds_the_comments_and_names_tokenize_does(code):
    import re
    import sys

    ast.parse(code)
    scanned, tokenized = _scan(code), _tokenize(code)
    assert scanned[0] == tokenized[0] and scanned[0]
    if sys.version_info < (3, 12):  # (3.12 tokenizes an f-string's parts)
        assert re.findall(r"\w+", scanned[1]) == re.findall(r"\w+", tokenized[1])


def test_comments_on_names_and_labels_the_migration_removed_go():
    """A comment naming a variable the migrated code no longer has
    (``local_init_op``) describes code that is gone; a ``# FIX 2`` label goes
    once the docstring paragraph defining the labels went (it named the
    Supervisor); a comment naming what stays is kept."""
    legacy = dedent(
        '''
        """Trains on a Supervisor.

        Fixes applied below, each marked "FIX", because the Supervisor hangs:

        1. a short grace period.
        """
        import tensorflow as tf
        sv = tf.train.Supervisor(is_chief=True)
        local_init_op = opt.local_step_init_op
        # local_init_op set this worker's step to the global step.
        step = read(global_step)
        # the batch of this step
        batch = next_batch(step)
        step = train(batch)  # FIX 2
        '''
    )
    migrated = dedent(
        '''
        """Trains on a Supervisor.

        Fixes applied below, each marked "FIX", because the Supervisor hangs:

        1. a short grace period.
        """
        import tensorflow as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        # local_init_op set this worker's step to the global step.
        step = read(global_step)
        # the batch of this step
        batch = next_batch(step)
        step = train(batch)  # FIX 2
        '''
    )
    tidied = tidy(legacy, migrated)
    assert "local_init_op" not in tidied and "FIX" not in tidied and "Supervisor" not in tidied
    assert "# the batch of this step\nbatch = next_batch(step)\nstep = train(batch)\n" in tidied
    assert tidy(legacy, tidied) == tidied


def test_docstring_paragraph_about_a_removed_queue_goes():
    legacy = dedent(
        '''
        """Asynchronous training.

        A ticket queue on the ps hands out each batch id once.

        Run one process per task.
        """
        import tensorflow as tf
        tickets = tf.FIFOQueue(10, tf.int64, shared_name="tickets")
        ticket = sess.run(tickets.dequeue())
        '''
    )
    migrated = dedent(
        '''
        """Asynchronous training.

        A ticket queue on the ps hands out each batch id once.

        Run one process per task.
        """
        import tensorflow as tf
        for ticket in range(10):
            schedule(ticket)
        '''
    )
    tidied = tidy(legacy, migrated)
    assert "ticket queue" not in tidied and "Run one process per task." in tidied
    # a program keeping a queue keeps what it says of queues
    kept = migrated.replace("import tensorflow as tf\n", "import queue\nimport tensorflow as tf\nwork = queue.Queue()\n")
    assert "ticket queue" in tidy(legacy, kept)


PLACEMENT_REPORT_LEGACY = '''
import tensorflow as tf


def devices(run_metadata):
    return {d.device for d in run_metadata.step_stats.dev_stats}


def main():
    for step in range(10):
        run_metadata = tf.RunMetadata() if step == 0 else None
        _, loss = sess.run([train_op, loss_t], feed_dict=feed(step), run_metadata=run_metadata)
        if step == 0:
            ran = devices(run_metadata)
            for name in sorted(ran):
                print(name)
        print(step, loss)


main()
'''


def test_a_report_read_from_a_run_metadata_nothing_fills_goes():
    """The migrated loop calls a tf.function: the RunMetadata stays empty,
    the placement report reads nothing (and its helper goes with it)."""
    migrated = PLACEMENT_REPORT_LEGACY.replace(
        "        _, loss = sess.run([train_op, loss_t], feed_dict=feed(step), run_metadata=run_metadata)\n",
        "        loss = run_train_step(*feed(step))\n")
    tidied = tidy(PLACEMENT_REPORT_LEGACY, migrated)
    assert tidied.lstrip("\n") == dedent(
        '''
        import tensorflow as tf


        def main():
            for step in range(10):
                loss = run_train_step(*feed(step))
                print(step, loss)


        main()
        ''')
    assert tidy(PLACEMENT_REPORT_LEGACY, tidied) == tidied


def test_a_run_metadata_read_elsewhere_or_still_filled_stays():
    returned = PLACEMENT_REPORT_LEGACY.replace(
        "        _, loss = sess.run([train_op, loss_t], feed_dict=feed(step), run_metadata=run_metadata)\n",
        "        loss = run_train_step(*feed(step))\n").replace("        print(step, loss)\n",
                                                            "        print(step, loss)\n        if run_metadata is not None:\n            print('traced')\n")
    assert "def devices" in tidy(PLACEMENT_REPORT_LEGACY, returned)
    # the legacy program itself (a session still fills it): nothing to do
    assert tidy(PLACEMENT_REPORT_LEGACY, PLACEMENT_REPORT_LEGACY) == PLACEMENT_REPORT_LEGACY
