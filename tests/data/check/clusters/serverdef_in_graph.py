"""Fixture (ours): an in-graph client that always is worker 2 of a
three-task cluster given as a literal ClusterDef in a ServerDef, with the
two other workers on hosts of a lab network expected to run standard
servers. It places one step's work on each remote worker and opens its
session by a hard-coded address, as such clients did. Flags: click."""
import click
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

SERVER_DEF = tf.train.ServerDef(
    cluster=tf.train.ClusterDef(
        job=[tf.train.JobDef(name="worker", tasks={0: "lab-node-1:2222", 1: "lab-node-2:2222", 2: "localhost:2224"})]
    ),
    job_name="worker",
    task_index=2,
    protocol="grpc",
)


@click.command()
@click.option("--train-steps", default=500, type=int)
def main(train_steps):
    server = tf.train.Server(SERVER_DEF)
    del server  # the session below reaches it by its address
    x = tf.placeholder(tf.float32, [None, 1])
    y = tf.placeholder(tf.float32, [None, 1])
    with tf.device("/job:worker/task:2"):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
    losses = []
    for task in (0, 1):
        with tf.device("/job:worker/task:%d" % task):
            half = tf.split(x, 2)[task], tf.split(y, 2)[task]
            losses.append(tf.reduce_mean(tf.square(tf.matmul(half[0], w) - half[1])))
    loss = tf.add_n(losses) / 2.0
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.RandomState(0)
    with tf.Session("grpc://localhost:2224") as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(train_steps):
            xs = rng.rand(8, 1)
            sess.run(train_op, {x: xs, y: 3 * xs})


if __name__ == "__main__":
    main()
