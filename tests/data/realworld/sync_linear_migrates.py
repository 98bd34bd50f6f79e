"""A linear model trained by two replicas in step: SyncReplicasOptimizer over a
ps/worker cluster, the chief's hook, a fixed number of steps."""
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "localhost:2222", "ps tasks")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "worker tasks")
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "task number")
FLAGS = flags.FLAGS


def main(_):
    workers = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": workers})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    chief = FLAGS.task_index == 0
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 3])
        target = tf.placeholder(tf.float32, [None, 1])
        weights = tf.get_variable("weights", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - target))
        step = tf.train.get_or_create_global_step()
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=len(workers),
                                             total_num_replicas=len(workers))
        train_op = opt.minimize(loss, global_step=step)
    hooks = [opt.make_session_run_hook(chief), tf.train.StopAtStepHook(last_step=50)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=chief, hooks=hooks) as sess:
        while not sess.should_stop():
            xs = np.random.rand(16, 3).astype(np.float32)
            sess.run(train_op, feed_dict={features: xs, target: xs.sum(axis=1, keepdims=True)})


if __name__ == "__main__":
    tf.app.run()
