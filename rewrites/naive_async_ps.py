"""A deliberately NAIVE asynchronous ps/worker program that hangs.

Do not copy this file: it exists to show, reproducibly, the most common way
legacy between-graph programs hang. Compare it with ``async_ps.py``, which
trains the same model robustly.

The program is plain ``mnist_replica.py``-style async training, plus one
thing real deployments had: non-chief workers start training a little later
than the chief. ``tf.estimator.train_and_evaluate`` did exactly this: it
started the server, then made worker k (0-based, the chief being a separate
task) sleep ``(k + 1) * 5`` s "since this usually helps model to converge
faster" in async training; cluster schedulers that start pods at different
times do it by accident. Here worker k waits ``k * --startup_delay_secs`` s.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

flags.DEFINE_string("ps_hosts", "", "host:port[,host:port...] of the ps job")
flags.DEFINE_string("worker_hosts", "", "host:port[,host:port...] of the worker job")
flags.DEFINE_string("chief_hosts", "", "Comma-separated hostname:port of the chief (coordinator) task")
flags.DEFINE_string("job_name", "", "ps | worker | chief")
flags.DEFINE_integer("task_index", 0, "task index within the job")
flags.DEFINE_integer("steps", 50, "global steps to train")
flags.DEFINE_float("learning_rate", 0.05, "learning rate")
flags.DEFINE_integer("batch_size", 32, "batch size")
flags.DEFINE_integer("startup_delay_secs", 15, "non-chief k starts k times this late")
FLAGS = flags.FLAGS


def next_batch(global_step_value):
    r = np.random.RandomState(1000 + global_step_value)
    w_true = np.random.RandomState(0).normal(size=10).astype(np.float32)
    batch_x = r.normal(size=(FLAGS.batch_size, 10)).astype(np.float32)
    return batch_x, (
        np.sin(batch_x @ w_true)[:, None] + 0.1 * r.normal(size=(FLAGS.batch_size, 1))
    ).astype(np.float32)


def main(_):
    cluster = tf.train.ClusterSpec(
        {"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(","), "chief": FLAGS.chief_hosts.split(",")}
    )
    cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, task_type=FLAGS.job_name, task_id=FLAGS.task_index, rpc_layer="grpc")
    if FLAGS.job_name in ("ps", "worker"):
        server = tf.distribute.Server(
            cluster_resolver.cluster_spec(), job_name=FLAGS.job_name, task_index=FLAGS.task_index, protocol="grpc", start=True)
        server.join()  # NAIVE: never returns; only an outside kill ends the ps
    task_name = os.environ.get("TFMIGRATE_TASK", f"worker:{FLAGS.task_index}")

    # The server is up (others can reach it); training starts later.
    time.sleep(FLAGS.task_index * FLAGS.startup_delay_secs)

    strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    def model_fn(x, y_):
        params = {
            name: tf.compat.v1.get_variable(name, shape, initializer=init)
            for name, shape, init in [
                ("w1", [10, 16], tf.compat.v1.glorot_uniform_initializer(seed=1)),
                ("b1", [16], tf.compat.v1.zeros_initializer()),
                ("w2", [16, 1], tf.compat.v1.glorot_uniform_initializer(seed=2)),
                ("b2", [1], tf.compat.v1.zeros_initializer()),
            ]
        }
        hidden = tf.nn.relu(tf.matmul(x, params["w1"]) + params["b1"])
        y = tf.matmul(hidden, params["w2"]) + params["b2"]
        mse = tf.reduce_mean(tf.square(y - y_))
        return mse

    with strategy.scope():
        global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        optimizer = tf.keras.optimizers.SGD(learning_rate=FLAGS.learning_rate)
        model = tf.compat.v1.make_template("model", model_fn)
        # Build the model's variables once, under the strategy, as the TF1 graph did.
        model(tf.zeros([1, 10], tf.float32), tf.zeros([1, 1], tf.float32))
    trainable_variables = model.trainable_variables

    @tf.function
    def train_step_2(x, y_):
        def train_step_2_replica(x, y_):
            with tf.GradientTape() as tape:
                mse = model(x, y_)
            gradients = tape.gradient(mse, trainable_variables)
            optimizer.apply_gradients(zip(gradients, trainable_variables))
            global_step.assign_add(1)
            return mse
        results = strategy.run(train_step_2_replica, args=(x, y_))
        return tf.nest.map_structure(
            lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)

    print(f"{task_name}: creating the training session", flush=True)
    print(f"{task_name}: session ready", flush=True)
    # ParameterServerStrategy trains on whichever worker is free. Each closure costs
    # the chief a round trip to its worker, which TF1's workers did not pay, so one
    # closure runs steps_per_closure steps (queue_pending_steps). The rest of the loop body
    # (finish_train_step_2) runs on each step's results up to max_steps_in_flight steps
    # later, so workers overlap as TF1's asynchronous workers did.
    steps_per_closure = 4
    max_steps_in_flight = 2 * steps_per_closure * cluster_resolver.cluster_spec().num_tasks("worker")
    steps_in_flight = []
    pending_steps = []
    # the global step lags behind by the steps in flight: count the scheduled ones
    scheduled_steps = int(global_step.numpy())

    @tf.function
    def train_step_2s(*stacked):
        # The steps of one closure, in order, on the worker that runs it.
        return [train_step_2(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

    def queue_pending_steps():
        # Steps whose arguments have the same shapes share a closure, stacked.
        groups = []
        for arguments, captured in pending_steps:
            x, y_ = arguments
            # the inputs as tensors of the step's dtypes, which take tf.function's
            # fast path (NumPy arguments cost more than the step)
            x, y_ = tf.convert_to_tensor(x, tf.float32), tf.convert_to_tensor(y_, tf.float32)
            shapes = [value.shape for value in (x, y_)]
            if not groups or groups[-1][0] != shapes:
                groups.append((shapes, []))
            groups[-1][1].append(((x, y_), captured))
        for _, steps in groups:
            stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
            closure = coordinator.schedule(train_step_2s, args=tuple(stacked))
            steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
        pending_steps.clear()

    def finish_train_step_2(step_results, step_index, step):
        # The rest of the loop body, run on this step's results (fetch() waits for them).
        try:
            loss_value = step_results.fetch()[step_index]
        except tf.errors.UnavailableError:
            # The step's worker failed and the coordinator could not recover its results:
            # skip what the loop did with them (a TF1 worker that died lost its step too).
            return
        line = json.dumps({"step": int(step), "task": task_name, "loss": float(loss_value)})
        if os.environ.get("TFMIGRATE_LOSS_LOG"):
            with open(os.environ["TFMIGRATE_LOSS_LOG"], "a") as f:
                f.write(line + "\n")

    while not scheduled_steps >= FLAGS.steps:
        step = scheduled_steps
        batch_x, batch_y = next_batch(step)
        pending_steps.append(((batch_x, batch_y), (step,)))
        scheduled_steps += 1
        if len(pending_steps) == steps_per_closure:
            queue_pending_steps()
        while len(steps_in_flight) > max_steps_in_flight:
            finish_train_step_2(*steps_in_flight.pop(0))
    queue_pending_steps()
    while steps_in_flight:
        finish_train_step_2(*steps_in_flight.pop(0))
    print(f"{task_name}: done", flush=True)


if __name__ == "__main__":
    app.run(main)
