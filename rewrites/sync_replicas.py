"""Synchronous data-parallel training on several workers with tf.distribute.MultiWorkerMirroredStrategy.

Each task is started like this::

    TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
                "task": {"type": "worker", "index": 1}}' python sync_replicas.py --steps=50

With 2 workers the per-step losses are bit-identical run to run.
"""

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

FEATURES, HIDDEN = 10, 16


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="global (synchronous) steps")
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument(
        "--batch_size", type=int, default=32, help="GLOBAL batch, split over workers"
    )
    args, _ = parser.parse_known_args(argv)
    return args


def global_batch(step, size):
    """Global batch number `step`: identical for every worker and every run."""
    rng = np.random.RandomState(1000 + step)
    true_w = np.random.RandomState(0).normal(size=FEATURES).astype(np.float32)
    inputs = rng.normal(size=(size, FEATURES)).astype(np.float32)
    return inputs, (np.sin(inputs @ true_w)[:, None] + 0.1 * rng.normal(size=(size, 1))).astype(
        np.float32
    )


def dense(inputs, units, name, activation=None, seed=0):
    """A fully connected layer from raw variables (tf.layers needs tf-keras)."""
    with tf.compat.v1.variable_scope(name):
        kernel = tf.compat.v1.get_variable(
            "kernel",
            [int(inputs.shape[1]), units],
            initializer=tf.compat.v1.glorot_uniform_initializer(seed=seed),
        )
        bias = tf.compat.v1.get_variable("bias", [units], initializer=tf.compat.v1.zeros_initializer())
    out = tf.matmul(inputs, kernel) + bias
    return activation(out) if activation else out


def append_loss(step, loss, task):
    path = os.environ.get("TFMIGRATE_LOSS_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps({"step": int(step), "task": task, "loss": float(loss)}) + "\n")


def main(argv):
    args = parse_args(argv)
    tf_config = json.loads(os.environ["TF_CONFIG"])
    cluster_def = tf_config["cluster"]
    job_name = tf_config["task"]["type"]
    task_index = int(tf_config["task"]["index"])
    task_name = os.environ.get("TFMIGRATE_TASK") or f"{job_name}:{task_index}"

    cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()

    num_workers = len(cluster_def["worker"])
    if args.batch_size % num_workers:
        raise ValueError("--batch_size must be a multiple of the number of workers")
    per_worker = args.batch_size // num_workers

    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)

    def model_fn(x, y):
        hidden = dense(x, HIDDEN, "hidden", activation=tf.nn.relu, seed=1)
        loss = tf.reduce_mean(tf.square(dense(hidden, 1, "output", seed=2) - y))
        return loss

    with strategy.scope():
        global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        opt = tf.keras.optimizers.SGD(learning_rate=args.learning_rate)
        model = tf.compat.v1.make_template("model", model_fn)
        # Build the model's variables once, under the strategy, as the TF1 graph did.
        model(tf.zeros([1, FEATURES], tf.float32), tf.zeros([1, 1], tf.float32))
    trainable_variables = model.trainable_variables

    @tf.function
    def train_step(x, y):
        def train_step_replica(x, y):
            with tf.GradientTape() as tape:
                loss = model(x, y)
                # SyncReplicasOptimizer averaged the replicas' gradients; strategies sum them.
                scaled_loss = loss / strategy.num_replicas_in_sync
            gradients = tape.gradient(scaled_loss, trainable_variables)
            opt.apply_gradients(zip(gradients, trainable_variables))
            global_step.assign_add(1)
            return loss, global_step.read_value()
        return strategy.run(train_step_replica, args=(x, y))

    def run_train_step(x, y):
        results = tf.nest.map_structure(
            lambda value: strategy.experimental_local_results(value)[0].numpy(),
            train_step(x, y))
        return results

    def train_step_inputs(step):
        # The inputs of each step from `step` on, made as the training loop made them.
        while True:
            inputs, targets = global_batch(step, args.batch_size)
            shard = slice(task_index * per_worker, (task_index + 1) * per_worker)
            yield inputs[shard], targets[shard]
            step += 1

    step = global_step.numpy()
    # Each worker makes its own inputs, as the loop did, through a tf.data pipeline.
    inputs_iterator = iter(tf.data.Dataset.from_generator(
        train_step_inputs, args=(step,),
        output_signature=(tf.TensorSpec(None, tf.float32), tf.TensorSpec(None, tf.float32))).prefetch(tf.data.AUTOTUNE))
    while step < args.steps:
        loss_value, next_step = run_train_step(*next(inputs_iterator))
        append_loss(step, loss_value, task_name)
        step = next_step
    print(f"{task_name} finished {args.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
