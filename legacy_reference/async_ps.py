"""Asynchronous between-graph parameter-server training (TF1, run on TF 2.21).

The classic shape of ``mnist_replica.py`` / the TF 1.x "Distributed TensorFlow"
how-to: every process runs this same file with its role on the command line::

    python async_ps.py --ps_hosts=127.0.0.1:2222 \
        --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --job_name=worker --task_index=0

* ``ps`` tasks only host variables: they start a ``tf.train.Server`` and
  ``server.join()`` forever (the launcher ends them once the workers are done).
* each ``worker`` builds its OWN copy of the graph ("between-graph
  replication"); ``replica_device_setter`` places the variables on the ps
  job and the computation on the worker itself, so all copies share the same
  variables through the ps.
* worker 0 is the *chief*: it initializes the variables (and would write
  checkpoints); the others wait until the variables exist on the ps.
* updates are asynchronous: each worker reads the current weights, computes a
  gradient and applies it on the ps whenever it is ready; no worker waits for
  another, so two workers can compute from the same (stale) weights.

Reproducibility: which worker trains which batch depends on thread timing, so
a *ticket queue* on the ps hands out batch ids 0..N-1 exactly once each (the
same idea as ``ClusterCoordinator`` closures in TF2). Losses are logged by
ticket, never by the order a worker happened to run them. With one worker the
ticket equals the global step and the run is bit-for-bit deterministic.

See README.md in this directory for the concepts and the failure table.
"""

import json
import os
import socket
import time

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()  # TF1 graph mode: placeholders, sessions, queues

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "Comma-separated host:port list of the ps job")
flags.DEFINE_string("worker_hosts", "", "Comma-separated host:port list of the worker job")
flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
flags.DEFINE_integer("task_index", 0, "Index of the task within its job")
flags.DEFINE_integer("steps", 50, "Number of global training steps (batches) in total")
flags.DEFINE_float("learning_rate", 0.05, "Learning rate of plain SGD")
flags.DEFINE_integer("batch_size", 32, "Examples per batch (per update)")
flags.DEFINE_string("checkpoint_dir", None, "Optional: where the chief writes checkpoints")
FLAGS = flags.FLAGS

NUM_FEATURES, NUM_HIDDEN = 10, 16
# The regression target: y = sin(x . TRUE_W) + noise, the same in every process.
TRUE_W = np.random.RandomState(0).normal(size=NUM_FEATURES).astype(np.float32)


def batch_for_ticket(ticket, batch_size):
    """Batch number `ticket` of the synthetic data set: the same ticket always
    yields the same examples, on any worker."""
    rng = np.random.RandomState(1000 + int(ticket))
    xs = rng.normal(size=(batch_size, NUM_FEATURES)).astype(np.float32)
    ys = np.sin(xs @ TRUE_W)[:, None] + 0.1 * rng.normal(size=(batch_size, 1))
    return xs, ys.astype(np.float32)


def log_loss(step, loss):
    """One JSON line per step, in the format of migrate/runtime/losslog.py."""
    task = os.environ.get("TFMIGRATE_TASK") or f"{FLAGS.job_name}:{FLAGS.task_index}"
    if os.environ.get("TFMIGRATE_LOSS_LOG"):
        with open(os.environ["TFMIGRATE_LOSS_LOG"], "a") as f:
            f.write(json.dumps({"step": int(step), "task": task, "loss": float(loss)}) + "\n")


def wait_for_cluster(hosts, timeout_secs=120):
    """Block until each task's gRPC port accepts TCP. A session that touches
    a task before its server listens gets UNAVAILABLE, and the errors cascade
    into cancelled steps on the other workers."""
    deadline = time.time() + timeout_secs
    for host, port in (h.rsplit(":", 1) for h in hosts):
        while time.time() < deadline:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    num_workers = len(worker_hosts)
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)

    if FLAGS.job_name == "ps":
        server.join()  # never returns: the ps is ended from outside
        return

    is_chief = FLAGS.task_index == 0
    worker_device = f"/job:worker/task:{FLAGS.task_index}"

    # replica_device_setter: variables go round-robin over the ps tasks, every
    # other op stays on this worker. (tf.compat.v1.device accepts a function;
    # TF2's tf.device does not.)
    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()

        x = tf.placeholder(tf.float32, [None, NUM_FEATURES], name="x")
        y = tf.placeholder(tf.float32, [None, 1], name="y")

        hid_w = tf.get_variable(
            "hid_w", [NUM_FEATURES, NUM_HIDDEN], initializer=tf.glorot_uniform_initializer(seed=1)
        )
        hid_b = tf.get_variable("hid_b", [NUM_HIDDEN], initializer=tf.zeros_initializer())
        out_w = tf.get_variable(
            "out_w", [NUM_HIDDEN, 1], initializer=tf.glorot_uniform_initializer(seed=2)
        )
        out_b = tf.get_variable("out_b", [1], initializer=tf.zeros_initializer())

        hid = tf.nn.relu(tf.matmul(x, hid_w) + hid_b)
        prediction = tf.matmul(hid, out_w) + out_b
        loss = tf.reduce_mean(tf.square(prediction - y))

        opt = tf.train.GradientDescentOptimizer(FLAGS.learning_rate)
        # minimize() applies the update on the ps and increments global_step.
        train_op = opt.minimize(loss, global_step=global_step)

    # Queues living on ps:0; shared_name makes every worker's graph refer to
    # the same queue object instead of each creating its own.
    with tf.device("/job:ps/task:0"):
        tickets = tf.FIFOQueue(
            FLAGS.steps, tf.int64, shapes=[[]], shared_name="batch_tickets", name="batch_tickets"
        )
        chief_ready = tf.FIFOQueue(
            num_workers, tf.int32, shapes=[[]], shared_name="chief_ready", name="chief_ready"
        )
    fill_tickets = tickets.enqueue_many([tf.range(FLAGS.steps, dtype=tf.int64)])
    close_tickets = tickets.close()  # a drained, closed queue ends every worker's loop
    next_ticket = tickets.dequeue()
    signal_ready = chief_ready.enqueue_many([tf.zeros([num_workers - 1], tf.int32)])
    await_chief = chief_ready.dequeue()

    # device_filters: this worker's sessions only talk to the ps tasks and to
    # itself. Without it, creating a session waits for EVERY task in the
    # cluster, so a worker that starts after the chief exited hangs forever
    # (see naive_async_ps.py).
    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    # Likewise wait only for the ports those sessions use: a worker that
    # starts late must not wait for workers that already finished.
    wait_for_cluster(ps_hosts + [worker_hosts[FLAGS.task_index]])

    if not is_chief:
        # Wait for the chief's "variables initialized" signal. Otherwise the
        # session manager may find the model not ready and sleep 30 s
        # (SessionManager.recovery_wait_secs) before looking again.
        with tf.Session(server.target, config=config) as sess:
            sess.run(await_chief)

    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.steps)]
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.checkpoint_dir,
        hooks=hooks,
        config=config,
        stop_grace_period_secs=2,
    ) as sess:
        if is_chief:
            # Only the chief hands out the work, once per job. (A restarted
            # chief would hand it out again; chief_recovery.py instead picks
            # data by the global step, which a checkpoint restores.)
            sess.run(fill_tickets)
            sess.run(close_tickets)
            sess.run(signal_ready)
        while not sess.should_stop():
            # Dequeuing from the closed, empty queue raises OutOfRangeError,
            # which MonitoredTrainingSession turns into a clean stop.
            ticket = sess.run(next_ticket)
            xs, ys = batch_for_ticket(ticket, FLAGS.batch_size)
            _, loss_value = sess.run([train_op, loss], feed_dict={x: xs, y: ys})
            log_loss(ticket, loss_value)
    print(f"worker {FLAGS.task_index} done", flush=True)


if __name__ == "__main__":
    tf.app.run()
