"""TFM301 under MultiWorkerMirroredStrategy: a loop making each step's NumPy
batch on the host and feeding it becomes a tf.data pipeline on each worker
(rules/_feed_input.py), where the pipeline makes the same batches in the same
order; otherwise the host-fed form stays."""

from __future__ import annotations

import ast
from pathlib import Path

from migrate.codemod.engine import migrate_source

ROOT = Path(__file__).resolve().parent.parent

# A SyncReplicasOptimizer job reading its batches from a stateful reader object.
READER_JOB = '''
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "ps")
flags.DEFINE_string("worker_hosts", "", "workers")
flags.DEFINE_string("job_name", "", "role")
flags.DEFINE_integer("task_index", 0, "index")
FLAGS = flags.FLAGS


class Reader:
    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.epochs = 0

    def next_batch(self, size):
        features = self.rng.normal(size=(size, 3))
        return features, features.sum(axis=1, keepdims=True)


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    reader = Reader(FLAGS.task_index)
    workers = len(FLAGS.worker_hosts.split(","))
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(FLAGS.task_index == 0), tf.train.StopAtStepHook(last_step=100)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           hooks=hooks) as sess:
        for step in range(100):
            xs, ys = reader.next_batch(32)
            _, loss_value = sess.run([train_op, loss], feed_dict={x: xs, y: ys})
            print(step, loss_value)


if __name__ == "__main__":
    tf.app.run()
'''


def migrated(source: str) -> str:
    result = migrate_source(source, path="job.py")
    assert "TFM301" in result.rules_applied, [d.message for d in result.manual_work]
    compile(result.output, "job.py", "exec")
    assert "MultiWorkerMirroredStrategy(" in result.output
    assert migrate_source(result.output, path="job.py").output == result.output  # idempotent
    return result.output


def test_batches_of_a_reader_become_a_distributed_dataset():
    out = migrated(READER_JOB)
    assert "    def train_step_inputs():\n" in out
    assert "            xs, ys = reader.next_batch(32)\n            yield xs, ys\n" in out
    assert "inputs_iterator = iter(tf.data.Dataset.from_generator(" in out
    assert "tf.TensorSpec(None, tf.float32), tf.TensorSpec(None, tf.float32)" in out
    loop = out[out.index("for step in range(100):"):]
    assert "run_train_step(*next(inputs_iterator))" in loop and "next_batch" not in loop
    # the wrapper no longer converts host arrays: the dataset's tensors have their dtypes
    assert "convert_to_tensor" not in out


def test_a_loop_reading_the_reader_elsewhere_stays_host_fed():
    """The pipeline reads batches ahead of the loop: a loop that reads the
    reader's state (its epoch count) would see it ahead of where TF1 saw it."""
    source = READER_JOB.replace("            print(step, loss_value)\n",
                                "            print(step, loss_value, reader.epochs)\n")
    out = migrated(source)
    assert "from_generator" not in out and "xs, ys = reader.next_batch(32)" in out


def test_a_batch_read_after_the_step_stays_host_fed():
    source = READER_JOB.replace("            print(step, loss_value)\n", "            print(step, loss_value, xs[0])\n")
    out = migrated(source)
    assert "from_generator" not in out


NESTED = (
    ("        for step in range(100):\n            xs, ys = reader.next_batch(32)\n"
    "            _, loss_value = sess.run([train_op, loss], feed_dict={x: xs, y: ys})\n"
    "            print(step, loss_value)\n"),
    ("        for epoch in range(2):\n            for step in range(50):\n"
    "                xs, ys = reader.next_batch(32)\n"
    "                _, loss_value = sess.run([train_op, loss], feed_dict={x: xs, y: ys})\n"
    "                print(epoch, step, loss_value)\n"),
)


def test_a_loop_inside_another_reads_one_pipeline_built_before_both():
    """Built at each outer iteration, a pipeline would have read ahead of the
    previous one's last step: it is built once, before the outer loop."""
    source = READER_JOB.replace(*NESTED)
    assert "for epoch in range(2):" in source
    out = migrated(source)
    setup = out.index("inputs_iterator = iter(")
    assert setup < out.index("for epoch in range(2):") < out.index("run_train_step(*next(inputs_iterator))")
    assert out.count("reader.next_batch(32)") == 1


def test_an_outer_loop_reading_the_reader_stays_host_fed():
    source = READER_JOB.replace(*NESTED).replace("            for step in range(50):\n",
                                                 "            print(reader.epochs)\n            for step in range(50):\n")
    out = migrated(source)
    assert "from_generator" not in out


def test_a_batch_made_from_the_outer_index_stays_host_fed():
    source = READER_JOB.replace(*NESTED).replace("reader.next_batch(32)", "reader.next_batch(32 + epoch)")
    out = migrated(source)
    assert "from_generator" not in out


def test_batches_indexed_by_the_training_step_follow_its_count():
    """The sync reference: the batch of the step the train op returned; the
    step returns the global step after its update, so the generator counts
    from the loop's first step."""
    out = migrated((ROOT / "legacy_reference" / "sync_replicas.py").read_text())
    assert "    def train_step_inputs(step):\n" in out
    body = out[out.index("    def train_step_inputs(step):"):out.index("    step = global_step.numpy()")]
    assert "inputs, targets = global_batch(step, args.batch_size)" in body and "step += 1" in body
    assert "train_step_inputs, args=(step,)," in out
    tree = ast.parse(out)
    assert any(isinstance(n, ast.While) for n in ast.walk(tree))


def test_batches_indexed_by_a_step_the_loop_computes_otherwise_stay_host_fed():
    legacy = (ROOT / "legacy_reference" / "sync_replicas.py").read_text()
    source = legacy.replace("        step = next_step  # REMEDY 2\n", "        step = next_step + 1\n")
    assert source != legacy
    out = migrated(source)
    assert "from_generator" not in out and "global_batch(step, args.batch_size)" in out


def test_arrays_the_loop_only_passes_on_stay_host_fed():
    """The same arrays every step: nothing for a pipeline to make."""
    source = READER_JOB.replace("            xs, ys = reader.next_batch(32)\n", "").replace(
        "    reader = Reader(FLAGS.task_index)\n", "    reader = Reader(FLAGS.task_index)\n    xs, ys = reader.next_batch(32)\n")
    out = migrated(source)
    assert "from_generator" not in out and "run_train_step(xs, ys)" in out
