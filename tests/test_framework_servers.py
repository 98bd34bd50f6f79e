"""Servers a cluster framework starts for the task, whose cluster and role a
context object gives (TensorFlowOnSpark's ``start_cluster_server``:
migrate/codemod/rules/_framework_servers.py): the cluster rules rewrite them as
the ClusterSpec and Server they are, reading the role from the context."""

import ast
import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from migrate.codemod.engine import dedent, migrate_source

# our own program in the shape TensorFlowOnSpark's TF1 examples have: one function per
# executor, its role from the context object, the server from the framework
SPARK_TASK = dedent(
    """
    import tensorflow as tf
    from tensorflowonspark import TFNode

    def train_on_executor(params, node):
        role = node.job_name
        index = node.task_index
        cluster, server = STARTER
        if role == "ps":
            server.join()
        elif role == "worker":
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:%d" % index, cluster=cluster)):
                weights = tf.Variable(tf.zeros([3, 1]), name="weights")
                features = tf.constant([[0.5, 1.5, 2.5]])
                loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - 2.0))
                step = tf.train.get_or_create_global_step()
                train_op = tf.train.AdagradOptimizer(0.05).minimize(loss, global_step=step)
            stop = [tf.train.StopAtStepHook(last_step=params.steps)]
            if role == "worker" and index == 0:
                print("first worker trains as the chief")
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(index == 0),
                                                   hooks=stop) as sess:
                while not sess.should_stop():
                    sess.run(train_op)
    """
)

STARTERS = ["TFNode.start_cluster_server(node, 1, params.rdma)", "node.start_cluster_server(1, params.rdma)"]

TF1_CLUSTER = ("tf.train.Server", "replica_device_setter", "MonitoredTrainingSession",
               "start_cluster_server", "server.target")


def _migrated(source: str):
    result = migrate_source(source, path="spark_task.py")
    tree = ast.parse(result.output)
    compile(result.output, "spark_task.py", "exec")
    return result, tree


@pytest.mark.parametrize("starter", STARTERS)
def test_framework_server_becomes_the_resolver_from_the_context(starter):
    result, tree = _migrated(SPARK_TASK.replace("STARTER", starter))
    out = result.output
    for construct in TF1_CLUSTER:
        assert construct not in out, construct
    # the task's cluster and role are the context object's
    assert "tf.distribute.cluster_resolver.SimpleClusterResolver(" in out
    assert "node.cluster_spec" in out
    assert "task_type=role, task_id=index" in out
    assert "tf.distribute.ParameterServerStrategy(cluster_resolver)" in out
    # ps and worker executors serve; the chief trains
    serving = next(n for n in ast.walk(tree) if isinstance(n, ast.If) and "in ('ps', 'worker')" in ast.unparse(n.test))
    assert any("join" in ast.unparse(s) for s in serving.body)
    assert any(isinstance(n, ast.Compare) and "chief" in ast.unparse(n) for n in ast.walk(tree))
    # the branch's own test of being the first worker (TF1's chief) holds on the chief
    assert 'if role == "chief" and index == 0:' in out
    # training stays: the variable and the optimizer step
    assert "apply_gradients" in out and "weights" in out
    # the start is reported where it was, and the chief the driver must add
    located = [d for d in result.diagnostics if d.line == 7 and d.code == "TFM201"]
    assert any(d.fixed for d in located)
    assert any(not d.fixed and "master_node='chief'" in (d.hint or "") for d in located)
    assert not [d for d in result.diagnostics if d.code in ("TFM201", "TFM202") and d.line < 7]


def test_second_run_changes_nothing():
    first = migrate_source(SPARK_TASK.replace("STARTER", STARTERS[0]), path="spark_task.py").output
    assert migrate_source(first, path="spark_task.py").output == first


def test_server_from_an_object_that_is_no_parameter_is_left():
    # the context object must be the function's own: a global handle says nothing of this task
    source = SPARK_TASK.replace("STARTER", "HANDLE.start_cluster_server(1, params.rdma)")
    result = migrate_source(source, path="spark_task.py")
    assert "HANDLE.start_cluster_server(1, params.rdma)" in result.output
    assert "ParameterServerStrategy" not in result.output
    assert any(d.code == "TFM301" and not d.fixed and d.line == 7 for d in result.diagnostics)


SPARK_FED = dedent(
    """
    import tensorflow as tf
    from tensorflowonspark import TFNode

    def train_on_executor(params, node):
        cluster, server = TFNode.start_cluster_server(node, 1, params.rdma)
        if node.job_name == "ps":
            server.join()
        elif node.job_name == "worker":
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:%d" % node.task_index, cluster=cluster)):
                inputs = tf.placeholder(tf.float32, [None, 3])
                targets = tf.placeholder(tf.float32, [None, 1])
                weights = tf.Variable(tf.zeros([3, 1]), name="weights")
                loss = tf.reduce_mean(tf.square(tf.matmul(inputs, weights) - targets))
                step = tf.train.get_or_create_global_step()
                train_op = tf.train.AdagradOptimizer(0.05).minimize(loss, global_step=step)
            feed = TFNode.DataFeed(node.mgr)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(node.task_index == 0)) as sess:
                while not sess.should_stop() and not feed.should_stop():
                    batch_x, batch_y = feed.next_batch(64)
                    sess.run(train_op, feed_dict={inputs: batch_x, targets: batch_y})
    """
)


def test_spark_fed_training_keeps_its_server_with_a_located_reason():
    result = migrate_source(SPARK_FED, path="spark_fed.py")
    assert "start_cluster_server" in result.output
    assert "ParameterServerStrategy" not in result.output
    reasons = [d for d in result.diagnostics if "InputMode.SPARK" in d.message]
    assert reasons and all(not d.fixed for d in reasons)
    assert reasons[0].line == 17  # the DataFeed


def test_synchronous_replicas_train_on_the_workers_of_the_context_cluster():
    # SyncReplicasOptimizer: every worker trains (MultiWorkerMirroredStrategy), no ps serves
    source = SPARK_TASK.replace("STARTER", STARTERS[1]).replace(
        "train_op = tf.train.AdagradOptimizer(0.05).minimize(loss, global_step=step)",
        "sync = tf.train.SyncReplicasOptimizer(tf.train.AdagradOptimizer(0.05), replicas_to_aggregate=2,"
        " total_num_replicas=2)\n            train_op = sync.minimize(loss, global_step=step)",
    ).replace("stop = [tf.train.StopAtStepHook(", "stop = [sync.make_session_run_hook(index == 0), tf.train.StopAtStepHook(")
    result, _ = _migrated(source)
    out = result.output
    for construct in TF1_CLUSTER + ("train.SyncReplicasOptimizer", "server.join()"):
        assert construct not in out, construct
    assert "tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in out
    assert 'tf.train.ClusterSpec({job: tasks for job, tasks in node.cluster_spec.items() if job != "ps"})' in out
    assert any(not d.fixed and "num_ps=0" in (d.hint or "") and d.line == 7 for d in result.diagnostics)



# the executor's entry as a Spark executor calls it: our stand-in for the framework's context object
EXECUTOR = dedent(
    """
    import json, sys, types
    sys.path.insert(0, sys.argv[1])
    import spark_task
    node = types.SimpleNamespace(job_name=sys.argv[2], task_index=0, cluster_spec=json.loads(sys.argv[3]))
    spark_task.train_on_executor(types.SimpleNamespace(steps=5, rdma=False), node)
    print("TRAINED", node.job_name, flush=True)
    """
)


@pytest.mark.slow
def test_migrated_executor_trains_on_a_loopback_cluster_from_the_context(tmp_path):
    source = SPARK_TASK.replace("STARTER", STARTERS[0]).replace("from tensorflowonspark import TFNode\n", "")
    (tmp_path / "spark_task.py").write_text(migrate_source(source, path="spark_task.py").output)
    (tmp_path / "executor.py").write_text(EXECUTOR)
    sockets = [socket.socket() for _ in range(3)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    spec = {job: [f"127.0.0.1:{s.getsockname()[1]}"] for job, s in zip(("chief", "ps", "worker"), sockets)}
    for s in sockets:
        s.close()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    started = []

    def start(job):
        started.append(subprocess.Popen(
            [sys.executable, str(tmp_path / "executor.py"), str(tmp_path), job, json.dumps(spec)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True))
        return started[-1]

    try:
        servers = [start("ps"), start("worker")]
        chief = start("chief")
        out, _ = chief.communicate(timeout=300)
        assert chief.returncode == 0, out
        assert "first worker trains as the chief" in out and "TRAINED chief" in out
        # the ps and worker executors serve until they are stopped
        assert all(p.poll() is None for p in servers)
    finally:
        for p in started:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
