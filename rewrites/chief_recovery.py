"""Chief failure and recovery from a checkpoint.

Asynchronous parameter-server training like ``async_ps.py``, but the chief
writes checkpoints every ``--save_checkpoint_steps`` global steps. The
reference run kills the chief (worker 0) with SIGKILL in the middle of
training and starts it again with the same command line::

    python chief_recovery.py --ps_hosts=... --worker_hosts=... --chief_hosts=... --job_name=worker \
        --task_index=0 --checkpoint_dir=/tmp/ckpt --steps=50
    python chief_recovery.py --ps_hosts=... --worker_hosts=... --chief_hosts=... --job_name=chief \
        --task_index=0 --checkpoint_dir=/tmp/ckpt --steps=50

Data: the batch of an update is chosen by the global step read just before it
(as ``mnist_replica.py`` did); with a single worker that is exactly the step
the update is applied at.
"""

import itertools
import json
import os

import numpy as np
import tensorflow as tf
from absl import app, flags

flags.DEFINE_string("ps_hosts", "", "ps job: comma-separated host:port")
flags.DEFINE_string("worker_hosts", "", "worker job: comma-separated host:port")
flags.DEFINE_string("chief_hosts", "", "Comma-separated hostname:port of the chief (coordinator) task")
flags.DEFINE_string("job_name", "", "'ps', 'worker' or 'chief'")
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
        w = tf.compat.v1.get_variable(
            f"layer{i}/w",
            [fan_in, fan_out],
            initializer=tf.compat.v1.glorot_uniform_initializer(seed=i + 1),
        )
        b = tf.compat.v1.get_variable(f"layer{i}/b", [fan_out], initializer=tf.compat.v1.zeros_initializer())
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


def restore_checkpoint(checkpoint, path, variables, optimizer):
    """Restores `checkpoint` from `path`, or from the TF1 job's checkpoint by variable name."""
    reader = tf.train.load_checkpoint(path)
    saved = reader.get_variable_to_shape_map()
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in saved:
        checkpoint.restore(path)
        return
    by_name, repeats = {}, {}
    for variable in variables:
        name = variable.name.split(":")[0].removeprefix("model/")
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
    if not FLAGS.checkpoint_dir:
        raise SystemExit("--checkpoint_dir is required (the restarted chief restores from it)")
    cluster = tf.train.ClusterSpec(
        {
            "ps": FLAGS.ps_hosts.split(","),
            "worker": FLAGS.worker_hosts.split(","),
            "chief": FLAGS.chief_hosts.split(","),
        }
    )
    cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, task_type=FLAGS.job_name, task_id=FLAGS.task_index, rpc_layer="grpc")
    if FLAGS.job_name in ("ps", "worker"):
        server = tf.distribute.Server(
            cluster_resolver.cluster_spec(), job_name=FLAGS.job_name, task_index=FLAGS.task_index, protocol="grpc", start=True)
        server.join()
        return

    is_chief = FLAGS.task_index == 0
    me = f"/job:worker/task:{FLAGS.task_index}"
    strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    def model_fn(inputs, targets):
        loss = tf.reduce_mean(tf.square(mlp(inputs) - targets))
        return loss

    with strategy.scope():
        global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        optimizer = tf.keras.optimizers.SGD(learning_rate=FLAGS.learning_rate)
        model = tf.compat.v1.make_template("model", model_fn)
        # Build the model's variables once, under the strategy, as the TF1 graph did.
        model(tf.zeros([1, LAYER_SIZES[0]], tf.float32), tf.zeros([1, 1], tf.float32))
    trainable_variables = model.trainable_variables

    @tf.function
    def train_step(inputs, targets):
        def train_step_replica(inputs, targets):
            with tf.GradientTape() as tape:
                loss = model(inputs, targets)
            gradients = tape.gradient(loss, trainable_variables)
            optimizer.apply_gradients(zip(gradients, trainable_variables))
            global_step.assign_add(1)
            return loss
        results = strategy.run(train_step_replica, args=(inputs, targets))
        return tf.nest.map_structure(
            lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)

    previous = tf.train.latest_checkpoint(FLAGS.checkpoint_dir) if is_chief else None
    if previous:
        print(f"chief restarting from checkpoint {previous}", flush=True)
    # Checkpoints, restored on start so a restarted job resumes
    # (also from the TF1 job's name-based checkpoints).
    # Saved every FLAGS.save_checkpoint_steps global steps (save_checkpoint_steps) and at the end.
    checkpoint = tf.train.Checkpoint(global_step=global_step, optimizer=optimizer, model=model)
    checkpoint_manager = (
        tf.train.CheckpointManager(checkpoint, FLAGS.checkpoint_dir, max_to_keep=5) if FLAGS.checkpoint_dir else None)
    if checkpoint_manager is not None and checkpoint_manager.latest_checkpoint:
        restore_checkpoint(checkpoint, checkpoint_manager.latest_checkpoint, [global_step, *model.variables], optimizer)
    if previous:
        print(f"chief resumed at global step {global_step.numpy()}", flush=True)
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
            inputs, targets = arguments
            # the inputs as tensors of the step's dtypes, which take tf.function's
            # fast path (NumPy arguments cost more than the step)
            inputs, targets = tf.convert_to_tensor(inputs, tf.float32), tf.convert_to_tensor(targets, tf.float32)
            shapes = [value.shape for value in (inputs, targets)]
            if not groups or groups[-1][0] != shapes:
                groups.append((shapes, []))
            groups[-1][1].append(((inputs, targets), captured))
        for _, steps in groups:
            stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
            closure = coordinator.schedule(train_steps, args=tuple(stacked))
            steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
        pending_steps.clear()

    def finish_train_step(step_results, step_index, step):
        # The rest of the loop body, run on this step's results (fetch() waits for them).
        try:
            loss_value = step_results.fetch()[step_index]
        except tf.errors.UnavailableError:
            # The step's worker failed and the coordinator could not recover its results:
            # skip what the loop did with them (a TF1 worker that died lost its step too).
            return
        record(step, loss_value)

    while not scheduled_steps >= FLAGS.steps:
        step = scheduled_steps
        xs, ys = data_for_step(step)
        pending_steps.append(((xs, ys), (step,)))
        scheduled_steps += 1
        if len(pending_steps) == steps_per_closure:
            queue_pending_steps()
        while len(steps_in_flight) > max_steps_in_flight:
            finish_train_step(*steps_in_flight.pop(0))
        if checkpoint_manager is not None and scheduled_steps % FLAGS.save_checkpoint_steps == 0:
            queue_pending_steps()
            while steps_in_flight:
                finish_train_step(*steps_in_flight.pop(0))
            checkpoint_manager.save(checkpoint_number=global_step)
    queue_pending_steps()
    while steps_in_flight:
        finish_train_step(*steps_in_flight.pop(0))
    if checkpoint_manager is not None:
        checkpoint_manager.save(checkpoint_number=global_step)
    print(f"{me} done at global step >= {FLAGS.steps}", flush=True)


if __name__ == "__main__":
    app.run(main)
