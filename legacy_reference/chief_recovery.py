"""Chief failure and recovery from a checkpoint (TF1 async PS, run on TF 2.21).

Asynchronous parameter-server training like ``async_ps.py``, but the chief
writes checkpoints every ``--save_checkpoint_steps`` global steps. The
reference run kills the chief (worker 0) with SIGKILL in the middle of
training and starts it again with the same command line::

    python chief_recovery.py --ps_hosts=... --worker_hosts=... --job_name=worker \
        --task_index=0 --checkpoint_dir=/tmp/ckpt --steps=50

What happens when the chief comes back:

* The ps tasks did NOT die. They still hold every variable, including the
  global step, at the values of the last update applied before the crash
  (and, with several workers, the non-chiefs kept training them meanwhile).
* The new chief process has a fresh graph and no idea what the ps holds or
  whether the ps were restarted too (a restarted ps comes back EMPTY). In TF1
  the chief's session manager therefore never trusts the ps: it restores the
  latest checkpoint in ``checkpoint_dir`` (or, without one, runs the
  initializers), overwriting what the ps hold. The checkpoint is the single
  source of truth, and the global step jumps BACK to the checkpointed value.
* Training continues from there: the steps between the last checkpoint and
  the crash are trained again. With one worker they are retrained exactly as
  before (same weights restored, same data for the same step), so the loss
  log shows those steps twice with equal losses.
* Non-chief workers are not restarted: their sessions only involve the ps
  and themselves (``device_filters``), so the chief's absence does not stop
  them, and they are not told about the rollback.

Data: the batch of an update is chosen by the global step read just before it
(as ``mnist_replica.py`` did); with a single worker that is exactly the step
the update is applied at.
"""

import itertools
import json
import os
import socket
import time

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "ps job: comma-separated host:port")
flags.DEFINE_string("worker_hosts", "", "worker job: comma-separated host:port")
flags.DEFINE_string("job_name", "", "'ps' or 'worker'")
flags.DEFINE_integer("task_index", 0, "index within the job; worker 0 is the chief")
flags.DEFINE_integer("steps", 50, "train until the global step reaches this")
flags.DEFINE_float("learning_rate", 0.05, "SGD learning rate")
flags.DEFINE_integer("batch_size", 32, "examples per update")
flags.DEFINE_string("checkpoint_dir", "", "REQUIRED: directory the chief checkpoints into")
flags.DEFINE_integer("save_checkpoint_steps", 10, "checkpoint every this many global steps")
FLAGS = flags.FLAGS

LAYER_SIZES = (10, 16, 1)  # input -> hidden (relu) -> output, a regression MLP


def data_for_step(step):
    seed_rng, rng = np.random.RandomState(0), np.random.RandomState(1000 + step)
    direction = seed_rng.normal(size=LAYER_SIZES[0]).astype(np.float32)
    inputs = rng.normal(size=(FLAGS.batch_size, LAYER_SIZES[0])).astype(np.float32)
    noise = 0.1 * rng.normal(size=(FLAGS.batch_size, 1))
    return inputs, (np.sin(inputs @ direction)[:, None] + noise).astype(np.float32)


def mlp(inputs):
    """Builds the layers in a loop; layer i's weights use initializer seed i+1."""
    activations = inputs
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(LAYER_SIZES)):
        w = tf.get_variable(
            f"layer{i}/w",
            [fan_in, fan_out],
            initializer=tf.glorot_uniform_initializer(seed=i + 1),
        )
        b = tf.get_variable(f"layer{i}/b", [fan_out], initializer=tf.zeros_initializer())
        activations = tf.matmul(activations, w) + b
        if i < len(LAYER_SIZES) - 2:
            activations = tf.nn.relu(activations)
    return activations


def record(step, loss):
    """Append {"step","task","loss"} to $TFMIGRATE_LOSS_LOG (migrate/runtime/losslog.py format)."""
    if "TFMIGRATE_LOSS_LOG" in os.environ:
        with open(os.environ["TFMIGRATE_LOSS_LOG"], "a") as out:
            name = os.environ.get("TFMIGRATE_TASK", f"{FLAGS.job_name}:{FLAGS.task_index}")
            out.write(json.dumps({"step": int(step), "task": name, "loss": float(loss)}) + "\n")


def await_ports(addresses):
    """A server must listen before a session touches it (else UNAVAILABLE)."""
    for address in addresses:
        host, port = address.split(":")
        for _ in range(1200):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex((host, int(port))) == 0:
                    break
            time.sleep(0.1)


def main(_):
    if not FLAGS.checkpoint_dir:
        raise SystemExit("--checkpoint_dir is required (the restarted chief restores from it)")
    cluster = tf.train.ClusterSpec(
        {
            "ps": FLAGS.ps_hosts.split(","),
            "worker": FLAGS.worker_hosts.split(","),
        }
    )
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return

    is_chief = FLAGS.task_index == 0
    me = f"/job:worker/task:{FLAGS.task_index}"
    with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device=me)):
        global_step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, LAYER_SIZES[0]])
        targets = tf.placeholder(tf.float32, [None, 1])
        loss = tf.reduce_mean(tf.square(mlp(inputs) - targets))
        train_op = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(
            loss, global_step=global_step
        )

    previous = tf.train.latest_checkpoint(FLAGS.checkpoint_dir) if is_chief else None
    if previous:
        # A restarted chief. The ps still hold the pre-crash values; the session
        # manager below overwrites them from this checkpoint.
        print(f"chief restarting from checkpoint {previous}", flush=True)

    config = tf.ConfigProto(device_filters=["/job:ps", me])
    # Only the tasks our sessions use (device_filters): a restarted chief must
    # not wait for workers that may have finished and gone meanwhile.
    await_ports(cluster.job_tasks("ps") + [cluster.task_address("worker", FLAGS.task_index)])
    if not is_chief:
        # The session manager of a non-chief polls for the chief's variables
        # only every 30 s; poll faster ourselves before handing over to it.
        uninitialized = tf.report_uninitialized_variables()
        with tf.Session(server.target, config=config) as probe:
            while probe.run(uninitialized).size:
                time.sleep(0.2)
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.checkpoint_dir,
        save_checkpoint_steps=FLAGS.save_checkpoint_steps,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=None,
        hooks=[tf.train.StopAtStepHook(last_step=FLAGS.steps)],
        config=config,
        stop_grace_period_secs=2,
    ) as sess:
        if previous:
            print(f"chief resumed at global step {sess.run(global_step)}", flush=True)
        while not sess.should_stop():
            # With several workers another update may land between this read
            # and ours: async training has no exact "step of an update".
            step = sess.run(global_step)
            xs, ys = data_for_step(step)
            _, loss_value = sess.run([train_op, loss], feed_dict={inputs: xs, targets: ys})
            record(step, loss_value)
    print(f"{me} done at global step >= {FLAGS.steps}", flush=True)


if __name__ == "__main__":
    tf.app.run()
