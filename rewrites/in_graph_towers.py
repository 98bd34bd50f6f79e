"""In-graph replication: one client drives several "towers".

The shape of ``cifar10_multi_gpu_train.py``: a single Python process builds ONE
graph in which the model is replicated once per device. Each tower computes
the loss and gradients of its slice of the batch; the gradients are averaged
and applied once to the shared variables. There is no
cluster, no ps, no chief: this is *in-graph* replication, the opposite of the
between-graph programs in this directory where every worker builds its own
graph.

    python in_graph_towers.py --num_towers=2 --steps=50
"""

import json
import os

import numpy as np
import tensorflow as tf
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_towers", 2, "How many devices (towers) to replicate onto.")
flags.DEFINE_integer("steps", 50, "Number of training steps.")
flags.DEFINE_integer("batch_size", 32, "GLOBAL batch size, split across the towers.")
flags.DEFINE_float("learning_rate", 0.05, "SGD learning rate.")

N_IN, N_HIDDEN = 10, 16


def synthetic_batch(step, batch_size):
    """Global batch `step` of the synthetic regression problem (deterministic)."""
    weights = np.random.RandomState(0).normal(size=N_IN).astype(np.float32)
    gen = np.random.RandomState(1000 + step)
    features = gen.normal(size=(batch_size, N_IN)).astype(np.float32)
    labels = np.sin(features @ weights)[:, None] + 0.1 * gen.normal(size=(batch_size, 1))
    return features, labels.astype(np.float32)


def _variable_on_cpu(name, shape, initializer):
    """As in the CIFAR-10 example: variables live on the host CPU, shared by
    every tower (the towers read them; one apply updates them)."""
    with tf.compat.v1.device("/cpu:0"):
        return tf.compat.v1.get_variable(name, shape, initializer=initializer, dtype=tf.float32)


def inference(features):
    """The model; called once per tower under one variable scope with reuse."""
    with tf.compat.v1.variable_scope("hidden"):
        w1 = _variable_on_cpu("weights", [N_IN, N_HIDDEN], tf.compat.v1.glorot_uniform_initializer(seed=1))
        b1 = _variable_on_cpu("biases", [N_HIDDEN], tf.compat.v1.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(features, w1) + b1)
    with tf.compat.v1.variable_scope("output"):
        w2 = _variable_on_cpu("weights", [N_HIDDEN, 1], tf.compat.v1.glorot_uniform_initializer(seed=2))
        b2 = _variable_on_cpu("biases", [1], tf.compat.v1.zeros_initializer())
        return tf.matmul(hidden, w2) + b2


def tower_loss(features, labels):
    return tf.reduce_mean(tf.square(inference(features) - labels))


def train():
    per_tower = FLAGS.batch_size // FLAGS.num_towers
    if per_tower * FLAGS.num_towers != FLAGS.batch_size:
        raise ValueError("--batch_size must be a multiple of --num_towers")
    task = os.environ.get("TFMIGRATE_TASK", "worker:0")
    loss_log = os.environ.get("TFMIGRATE_LOSS_LOG")

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * FLAGS.num_towers)
    # The gradients are added on one device, as average_gradients did: on CPU
    # devices the default collective all-reduce takes about twice the step time.
    strategy = tf.distribute.MirroredStrategy(
        [f"/cpu:{i}" for i in range(FLAGS.num_towers)], cross_device_ops=tf.distribute.ReductionToOneDevice())

    def model_fn(features, labels):
        loss = tower_loss(features, labels)
        return loss

    with strategy.scope():
        global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        opt = tf.keras.optimizers.SGD(learning_rate=FLAGS.learning_rate)
        model = tf.compat.v1.make_template("model", model_fn)
        # Build the model's variables once, under the strategy, as the TF1 graph did.
        model(tf.zeros([FLAGS.batch_size, N_IN], tf.float32), tf.zeros([FLAGS.batch_size, 1], tf.float32))
    trainable_variables = model.trainable_variables

    @tf.function
    def train_step(features, labels):
        def train_step_replica(features, labels):
            with tf.GradientTape() as tape:
                loss = model(features, labels)
                # average_gradients averaged the replicas' gradients; strategies sum them.
                scaled_loss = loss / strategy.num_replicas_in_sync
            gradients = tape.gradient(scaled_loss, trainable_variables)
            opt.apply_gradients(zip(gradients, trainable_variables))
            global_step.assign_add(1)
            return loss
        replica_results = strategy.experimental_local_results(
            strategy.run(train_step_replica, args=(features, labels)))
        tower_losses = list(replica_results)
        mean_loss = tf.add_n(tower_losses) / FLAGS.num_towers
        return mean_loss

    # The batches the TF1 loop fed, in order; each replica takes its slice of every
    # batch, as tower i took tf.split slice i of it.
    dataset = tf.data.Dataset.from_generator(
        lambda: (synthetic_batch(step, FLAGS.batch_size) for step in range(FLAGS.steps)),
        output_signature=(
            tf.TensorSpec([FLAGS.batch_size, N_IN], tf.float32),
            tf.TensorSpec([FLAGS.batch_size, 1], tf.float32)))
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    # A tf.function call costs more than a TF1 session's run of its cached graph:
    # train_steps runs steps_per_call steps per call.
    steps_per_call = 4

    @tf.function
    def train_steps(iterator, steps):
        # `steps` training steps, each on the next batch of the dataset.
        return [train_step(*next(iterator)) for _ in range(steps)]

    for first_step in range(0, FLAGS.steps, steps_per_call):
        call_steps = min(steps_per_call, FLAGS.steps - first_step)
        for step, step_results in zip(range(first_step, first_step + call_steps), train_steps(iterator, call_steps)):
            loss_value = step_results.numpy()
            if loss_log:
                with open(loss_log, "a") as out:
                    out.write(
                        json.dumps({"step": step, "task": task, "loss": float(loss_value)})
                        + "\n"
                    )
    print(f"trained {FLAGS.steps} steps on {FLAGS.num_towers} towers", flush=True)


def main(_):
    train()


if __name__ == "__main__":
    app.run(main)
