"""Asynchronous between-graph parameter-server training.

Each task is started like this::

    python async_ps.py --ps_hosts=127.0.0.1:2222 \
        --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --chief_hosts=127.0.0.1:2225 --job_name=worker --task_index=0
    python async_ps.py --ps_hosts=127.0.0.1:2222 \
        --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --chief_hosts=127.0.0.1:2225 --job_name=chief --task_index=0

See README.md in this directory for the concepts and the failure table.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

flags.DEFINE_string("ps_hosts", "", "Comma-separated host:port list of the ps job")
flags.DEFINE_string("worker_hosts", "", "Comma-separated host:port list of the worker job")
flags.DEFINE_string("chief_hosts", "", "Comma-separated hostname:port of the chief (coordinator) task")
flags.DEFINE_string("job_name", "", "One of 'ps', 'worker', 'chief'")
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


def restore_checkpoint(checkpoint, path, variables, optimizer):
    """Restores `checkpoint` from `path`, or from the TF1 job's checkpoint by variable name."""
    reader = tf.train.load_checkpoint(path)
    saved = reader.get_variable_to_shape_map()
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in saved:
        checkpoint.restore(path)
        return
    by_name, repeats = {}, {}
    for variable in variables:
        name = variable.name.split(":")[0]
        # TF1's graph numbered a repeated name: name, name_1, name_2, ...
        repeats[name] = repeats.get(name, -1) + 1
        by_name[f"{name}_{repeats[name]}" if repeats[name] else name] = variable
    missing = sorted(set(by_name) - set(saved))
    if missing:
        raise ValueError(f"{path} has no value for {', '.join(missing)}")
    for name, variable in by_name.items():
        variable.assign(reader.get_tensor(name))
    if "global_step" in saved:
        # the optimizer's step count (its schedule's step) continues from TF1's
        optimizer.iterations.assign(reader.get_tensor("global_step"))
    left = sorted(set(saved) - set(by_name))
    if left:
        tf.get_logger().warning("%s: not restored, nothing in this program takes them: %s",
                                path, ", ".join(left))


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts, "chief": FLAGS.chief_hosts.split(",")})
    cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, task_type=FLAGS.job_name, task_id=FLAGS.task_index, rpc_layer="grpc")

    if FLAGS.job_name in ("ps", "worker"):
        server = tf.distribute.Server(
            cluster_resolver.cluster_spec(), job_name=FLAGS.job_name, task_index=FLAGS.task_index, protocol="grpc", start=True)
        server.join()  # never returns: the ps is ended from outside
        return

    strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

        hid_w = tf.Variable(tf.compat.v1.glorot_uniform_initializer(seed=1)(shape=[NUM_FEATURES, NUM_HIDDEN], dtype=tf.float32), name="hid_w")
        hid_b = tf.Variable(tf.compat.v1.zeros_initializer()(shape=[NUM_HIDDEN], dtype=tf.float32), name="hid_b")
        out_w = tf.Variable(tf.compat.v1.glorot_uniform_initializer(seed=2)(shape=[NUM_HIDDEN, 1], dtype=tf.float32), name="out_w")
        out_b = tf.Variable(tf.compat.v1.zeros_initializer()(shape=[1], dtype=tf.float32), name="out_b")
        opt = tf.keras.optimizers.SGD(learning_rate=FLAGS.learning_rate)
    trainable_variables = [hid_w, hid_b, out_w, out_b]

    @tf.function
    def train_step(x, y):
        def train_step_replica(x, y):
            with tf.GradientTape() as tape:
                hid = tf.nn.relu(tf.matmul(x, hid_w) + hid_b)
                prediction = tf.matmul(hid, out_w) + out_b
                loss = tf.reduce_mean(tf.square(prediction - y))
            gradients = tape.gradient(loss, trainable_variables)
            opt.apply_gradients(zip(gradients, trainable_variables))
            global_step.assign_add(1)
            return loss
        results = strategy.run(train_step_replica, args=(x, y))
        return tf.nest.map_structure(
            lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)
    # Each batch id is scheduled once, on whichever worker is free.
    tickets_iterator = iter(range(FLAGS.steps))
    # Checkpoints, restored on start so a restarted job resumes
    # (also from the TF1 job's name-based checkpoints).
    # Saved every 600 s (MonitoredTrainingSession's default save_checkpoint_secs) and at the end.
    checkpoint = tf.train.Checkpoint(global_step=global_step, opt=opt, hid_w=hid_w, hid_b=hid_b, out_w=out_w, out_b=out_b)
    checkpoint_manager = (
        tf.train.CheckpointManager(checkpoint, FLAGS.checkpoint_dir, max_to_keep=5) if FLAGS.checkpoint_dir else None)
    if checkpoint_manager is not None and checkpoint_manager.latest_checkpoint:
        restore_checkpoint(checkpoint, checkpoint_manager.latest_checkpoint, [global_step, hid_w, hid_b, out_w, out_b], opt)
    next_checkpoint_time = time.monotonic() + 600
    # ParameterServerStrategy trains on whichever worker is free. Each closure costs
    # the chief a round trip to its worker, which TF1's workers did not pay, so one
    # closure runs steps_per_closure steps (queue_pending_steps). The rest of the loop body
    # (finish_train_step) runs on each step's results up to max_steps_in_flight steps
    # later, so workers overlap as TF1's asynchronous workers did.
    steps_per_closure = 4
    max_steps_in_flight = 2 * steps_per_closure * cluster_resolver.cluster_spec().num_tasks("worker")
    steps_in_flight = []
    pending_steps = []
    # the global step lags behind by the steps in flight: count the scheduled ones
    scheduled_steps = int(global_step.numpy())

    @tf.function
    def train_steps(*stacked):
        # The steps of one closure, in order, on the worker that runs it.
        return [train_step(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

    def queue_pending_steps():
        # Steps whose arguments have the same shapes share a closure, stacked.
        groups = []
        for arguments, captured in pending_steps:
            x, y = arguments
            # the inputs as tensors of the step's dtypes, which take tf.function's
            # fast path (NumPy arguments cost more than the step)
            x, y = tf.convert_to_tensor(x, tf.float32), tf.convert_to_tensor(y, tf.float32)
            shapes = [value.shape for value in (x, y)]
            if not groups or groups[-1][0] != shapes:
                groups.append((shapes, []))
            groups[-1][1].append(((x, y), captured))
        for _, steps in groups:
            stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
            closure = coordinator.schedule(train_steps, args=tuple(stacked))
            steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
        pending_steps.clear()

    def finish_train_step(step_results, step_index, ticket):
        # The rest of the loop body, run on this step's results (fetch() waits for them).
        try:
            loss_value = step_results.fetch()[step_index]
        except tf.errors.UnavailableError:
            # The step's worker failed and the coordinator could not recover its results:
            # skip what the loop did with them (a TF1 worker that died lost its step too).
            return
        log_loss(ticket, loss_value)

    while not scheduled_steps >= FLAGS.steps:
        ticket = next(tickets_iterator, None)
        if ticket is None:
            break
        xs, ys = batch_for_ticket(ticket, FLAGS.batch_size)
        pending_steps.append(((xs, ys), (ticket,)))
        scheduled_steps += 1
        if len(pending_steps) == steps_per_closure:
            queue_pending_steps()
        while len(steps_in_flight) > max_steps_in_flight:
            finish_train_step(*steps_in_flight.pop(0))
        if checkpoint_manager is not None and time.monotonic() >= next_checkpoint_time:
            queue_pending_steps()
            while steps_in_flight:
                finish_train_step(*steps_in_flight.pop(0))
            checkpoint_manager.save(checkpoint_number=global_step)
            next_checkpoint_time = time.monotonic() + 600
    queue_pending_steps()
    while steps_in_flight:
        finish_train_step(*steps_in_flight.pop(0))
    if checkpoint_manager is not None:
        checkpoint_manager.save(checkpoint_number=global_step)
    print(f"worker {FLAGS.task_index} done", flush=True)


if __name__ == "__main__":
    app.run(main)
