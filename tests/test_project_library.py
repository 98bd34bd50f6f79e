"""Library + driver projects: a training function whose cluster comes in
through its parameters (``train(target, cluster_spec)`` called by a driver
that builds the ClusterSpec and the TF1 server).

The function migrates as a single file would (the strategy reads TF_CONFIG);
when modules beside it call it with a cluster and a server they build, a
warning on its device block names those calls: their TF1 server would keep
the task's port, where the strategy starts its own, so they must change with
it. The callers are found through each import spelling.

The trees are written by these tests (our own code, in the shape of
Inception's ``imagenet_distributed_train.py`` -> ``train(...)`` pairs)."""

from __future__ import annotations

import os
from pathlib import Path

import libcst as cst

from migrate.codemod.engine import migrate_source
from migrate.codemod.program import callers

LIBRARY = '''\
"""Builds and runs the replicated training on the cluster it is given."""
import tensorflow as tf

FLAGS = tf.app.flags.FLAGS
tf.app.flags.DEFINE_integer("task_index", 0, "Index of this worker.")
tf.app.flags.DEFINE_integer("train_steps", 200, "Steps to train.")


def train(target, cluster_spec):
    num_workers = len(cluster_spec.as_dict()["worker"])
    is_chief = FLAGS.task_index == 0
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster_spec)):
        global_step = tf.train.get_or_create_global_step()
        features = tf.random.normal([16, 4], seed=1)
        weights = tf.get_variable("weights", [4, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - 1.0))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.05),
                                             replicas_to_aggregate=num_workers,
                                             total_num_replicas=num_workers)
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    with tf.train.MonitoredTrainingSession(master=target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
'''

DRIVER = '''\
"""Parses the cluster flags and starts this task's part of the training."""
import tensorflow as tf

from replicated import trainer_lib

FLAGS = tf.app.flags.FLAGS
tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
tf.app.flags.DEFINE_string("ps_hosts", "", "ps host:port list")
tf.app.flags.DEFINE_string("worker_hosts", "", "worker host:port list")


def main(_):
    cluster_spec = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","),
                                         "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster_spec, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
    else:
        trainer_lib.train(server.target, cluster_spec)


if __name__ == "__main__":
    tf.app.run()
'''


def _tree(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _tfm301(result):
    return [d for d in result.diagnostics if d.code == "TFM301"]


def _device_line(source: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if "with tf.device(" in line)


def test_library_whose_cluster_is_a_parameter_migrates_and_names_the_driver_call(tmp_path):
    tree = _tree(tmp_path, {"trainer_lib.py": LIBRARY, "launch.py": DRIVER})
    result = migrate_source(LIBRARY, path=str(tree / "trainer_lib.py"))
    assert "tf.distribute.MultiWorkerMirroredStrategy" in result.output
    assert "replica_device_setter" not in result.output
    [warning] = [d for d in _tfm301(result) if not d.fixed]
    assert warning.line == _device_line(LIBRARY)
    assert "`cluster_spec` (the device setter's cluster)" in warning.message
    assert "`target` (the master its session connects to)" in warning.message
    assert "launch.py:19 (`trainer_lib.train(server.target, cluster_spec)`)" in warning.message
    assert migrate_source(result.output, path=str(tree / "trainer_lib.py")).output == result.output


def test_library_alone_or_called_in_its_own_file_gets_no_warning(tmp_path):
    alone = migrate_source(LIBRARY, path=str(_tree(tmp_path, {"trainer_lib.py": LIBRARY}) / "trainer_lib.py"))
    assert "tf.distribute.MultiWorkerMirroredStrategy" in alone.output
    assert not [d for d in _tfm301(alone) if not d.fixed]
    other = tmp_path / "other"
    other.mkdir()
    # a module of another directory calling it is not beside it: not found
    (other / "launch.py").write_text(DRIVER)
    again = migrate_source(LIBRARY, path=str(tmp_path / "trainer_lib.py"))
    assert again.output == alone.output and not [d for d in _tfm301(again) if not d.fixed]


def test_the_same_training_with_its_cluster_built_in_the_function_gets_no_warning(tmp_path):
    own_cluster = LIBRARY.replace(
        "def train(target, cluster_spec):\n",
        'def train():\n    cluster_spec = tf.train.ClusterSpec({"worker": ["localhost:2222", "localhost:2223"]})\n',
    ).replace("master=target, ", "")
    assert own_cluster != LIBRARY
    path = _tree(tmp_path, {"trainer_lib.py": own_cluster, "launch.py": DRIVER}) / "trainer_lib.py"
    result = migrate_source(own_cluster, path=str(path))
    assert "tf.distribute.MultiWorkerMirroredStrategy" in result.output
    assert not [d for d in _tfm301(result) if not d.fixed]


def test_callers_are_found_through_each_import_spelling(tmp_path):
    library = cst.parse_module(LIBRARY)
    function = next(s for s in library.body if isinstance(s, cst.FunctionDef))
    _tree(tmp_path, {
        "trainer_lib.py": LIBRARY,
        "a.py": "import trainer_lib\ntrainer_lib.train(t, c)\n",
        "b.py": "from trainer_lib import train\n\ntrain(t2, c2)\n",
        "c.py": "from pkg import trainer_lib as lib\nlib.train(t3, c3)\n",
        "d.py": "import other\nother.train(t4, c4)\n",  # another module's train: not a caller
    })
    sites = callers.callers(str(tmp_path / "trainer_lib.py"), library, function)
    assert [(s.path, s.line, s.code) for s in sites] == [
        ("a.py", 2, "trainer_lib.train(t, c)"), ("b.py", 3, "train(t2, c2)"), ("c.py", 2, "lib.train(t3, c3)")]


# ------------------------------------------- where a SyncReplicasOptimizer's variables go
CHOOSER = '''\
import tensorflow as tf

from vision.ops import scopes
from vision.ops import placement


def train(num_ps, task):
    with tf.device("/job:worker/task:%d" % task):
        with scopes.arg_scope([scopes.variable], device=placement.RoundRobinChooser(num_ps)):
            step = tf.train.get_or_create_global_step()
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                                 replicas_to_aggregate=2, total_num_replicas=2)
            return opt, step
'''

HANDED_OVER = '''\
import tensorflow as tf

from toolkit import loops

learner = tf.contrib.slim


def main(_):
    optimizer = tf.train.SyncReplicasOptimizer(tf.train.AdamOptimizer(), replicas_to_aggregate=4)
    if optimizer is None:
        raise ValueError("no optimizer %s" % optimizer)
    update = loops.build_update(optimizer)
    learner.learning.train(update, "/tmp/logs", sync_optimizer=optimizer)
'''


def _sync_reason(result):
    [reason] = [d for d in _tfm301(result) if "SyncReplicasOptimizer left in place" in d.message]
    return reason


def test_a_device_chooser_given_to_an_arg_scope_is_named_with_its_absent_module(tmp_path):
    reason = _sync_reason(migrate_source(CHOOSER, path=str(tmp_path / "train.py")))
    assert reason.line == next(n for n, line in enumerate(CHOOSER.splitlines(), 1) if "SyncReplicas" in line)
    assert ("its variables are placed by `placement.RoundRobinChooser(num_ps)`, the `device=` of"
            " `scopes.arg_scope(...)` (`placement` comes from `vision.ops.placement`, which is not in this"
            " project)") in reason.message
    assert "/job:worker" not in reason.message  # a device string places no variables


def test_an_optimizer_handed_to_other_code_names_what_receives_it(tmp_path):
    reason = _sync_reason(migrate_source(HANDED_OVER, path=str(tmp_path / "train.py")))
    assert "no `with` around it places variables; it is given to" in reason.message
    assert "`loops.build_update(...)` (`loops` comes from `toolkit.loops`, which is not in this project)" in (
        reason.message)
    assert "`learner.learning.train(...)` (`learner` is `tf.contrib.slim`)" in reason.message
    assert "ValueError" not in reason.message


# ------------------------------------------- the driver: a server handed to another module's training
def _package(tmp_path, files: dict[str, str]):
    package = tmp_path / "replicated"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(text)
    return package


def test_modules_of_a_package_resolve_from_the_package_root(tmp_path):
    from migrate.codemod.program.project import index_for

    package = _package(tmp_path, {"trainer_lib.py": LIBRARY, "launch.py": DRIVER})
    index = index_for(str(package / "launch.py"))
    assert index.find("replicated.trainer_lib", package_roots=True).path == str(package / "trainer_lib.py")
    assert index.find("trainer_lib").present  # beside the file, as before
    assert not index.find("replicated.absent_module", package_roots=True).present
    # the model tracer still looks beside the file only
    assert not index.find("replicated.trainer_lib").present


def _tfm202(result):
    return [d for d in result.diagnostics if d.code == "TFM202"]


def test_a_driver_handing_its_server_to_a_project_module_says_where_the_training_is(tmp_path):
    package = _package(tmp_path, {"trainer_lib.py": LIBRARY, "launch.py": DRIVER})
    result = migrate_source(DRIVER, path=str(package / "launch.py"))
    assert "tf.compat.v1.train.Server(" in result.output  # the cluster stays TF1 with the training it serves
    [reason] = _tfm202(result)
    assert reason.line == next(n for n, line in enumerate(DRIVER.splitlines(), 1) if "tf.train.Server(" in line)
    assert "given to `trainer_lib.train(...)` as `server.target`" in reason.message
    assert "`replicated.trainer_lib`, a module of this project" in reason.message
    # the library, migrated on its own, names this driver's call
    library = migrate_source(LIBRARY, path=str(package / "trainer_lib.py"))
    assert any("launch.py:19" in d.message for d in _tfm301(library))


def test_a_server_target_held_in_a_name_and_an_absent_module_are_named(tmp_path):
    driver = DRIVER.replace("        trainer_lib.train(server.target, cluster_spec)\n",
                            "        master = server.target\n        trainer_lib.train(master, cluster_spec)\n")
    assert driver != DRIVER
    result = migrate_source(driver, path=str(_package(tmp_path, {"launch.py": driver}) / "launch.py"))
    [reason] = _tfm202(result)
    assert "as `master` (`server.target`)" in reason.message
    assert "`replicated.trainer_lib`, which is not in this project" in reason.message


def test_a_server_given_to_a_library_gets_no_such_reason(tmp_path):
    driver = DRIVER.replace("        trainer_lib.train(server.target, cluster_spec)\n",
                            "        print(server.target)\n")
    result = migrate_source(driver, path=str(tmp_path / "launch.py"))
    assert not _tfm202(result)


# ------------------------------------------- a helper module that only runs the session
LOOP_HELPER = '''\
import tensorflow as tf

FLAGS = tf.app.flags.FLAGS
tf.app.flags.DEFINE_string("master", "", "Master address.")
tf.app.flags.DEFINE_integer("max_steps", 100, "Steps.")


def one_step(session, op, loss_value):
    _, value = session.run([op, loss_value])
    return value


def run_loop(train_op, loss, warm_start_dir=None):
    supervisor = tf.train.Supervisor(logdir="/tmp/run", is_chief=True)
    with supervisor.managed_session(master=FLAGS.master) as sess:
        if warm_start_dir:
            log_progress(sess, warm_start_dir)
        for _ in range(FLAGS.max_steps):
            one_step(sess, train_op, loss)


def log_progress(session, directory):
    print(directory, session)
'''

LOOP_CALLER = '''\
import tensorflow as tf

import loop_helper


def main(_):
    loss = tf.reduce_sum(tf.get_variable("w", [2]))
    loop_helper.run_loop(tf.train.AdamOptimizer().minimize(loss), loss)
'''


def test_a_session_running_only_what_its_function_is_given_says_so_with_its_callers(tmp_path):
    tree = _tree(tmp_path, {"loop_helper.py": LOOP_HELPER, "experiment.py": LOOP_CALLER})
    result = migrate_source(LOOP_HELPER, path=str(tree / "loop_helper.py"))
    [reason] = _tfm301(result)
    assert not reason.fixed
    assert reason.line == next(n for n, line in enumerate(LOOP_HELPER.splitlines(), 1) if "Supervisor(" in line)
    # what the helper runs in the session, not what it merely hands the session with (warm_start_dir)
    assert "it runs `train_op`, `loss` (through `one_step(sess, train_op, loss)`)" in reason.message
    assert "parameters of `run_loop(...)`" in reason.message
    assert "experiment.py:8 (`loop_helper.run_loop(" in reason.message
    assert "warm_start_dir" not in reason.message


def test_a_session_running_its_own_graph_gets_no_such_reason(tmp_path):
    own = LOOP_HELPER.replace("def run_loop(train_op, loss, warm_start_dir=None):\n",
                              "def run_loop(warm_start_dir=None):\n"
                              "    loss = tf.reduce_sum(tf.get_variable(\"w\", [2]))\n"
                              "    train_op = tf.train.AdamOptimizer().minimize(loss)\n")
    assert own != LOOP_HELPER
    result = migrate_source(own, path=str(_tree(tmp_path, {"loop_helper.py": own}) / "loop_helper.py"))
    assert not _tfm301(result)


# ------------------------------------------- the report: which files are one program
SIBLING_MODEL = '''\
import tensorflow.compat.v1 as tf


def _weights(shape):
    return tf.get_variable("w", shape)


def forward(images):
    return tf.matmul(images, _weights([16, 2]))


def identity(images):
    return images * 1.0
'''

MODEL_DRIVER = '''\
import tensorflow as tf

import shapes_net


def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 16])
        labels = tf.placeholder(tf.float32, [None, 2])
        logits = shapes_net.forward(images)
        loss = tf.reduce_mean(tf.square(logits - labels))
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for step in range(steps):
            sess.run(train_op, feed_dict={images: [[0.5] * 16], labels: [[1.0, 0.0]]})
'''


def _cli(tmp_path, *args):
    import json
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-m", "migrate", *args], check=False, cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": root}, timeout=300)
    return proc, (json.loads(proc.stdout) if "--format" in args else None)


def test_the_report_says_which_files_were_migrated_as_one_program(tmp_path):
    _tree(tmp_path, {"shapes_net.py": SIBLING_MODEL, "train.py": MODEL_DRIVER,
                     "probe.py": MODEL_DRIVER.replace("shapes_net.forward(", "shapes_net.identity(")})
    proc, _ = _cli(tmp_path, ".")
    lines = proc.stdout.splitlines()
    assert "train.py: migrated as one program with shapes_net.py" in lines
    # read for the analysis, and the training declined: not one migrated program
    assert "probe.py: analysed together with shapes_net.py" in lines
    assert not any(line.startswith("shapes_net.py:") and "program" in line for line in lines)
    _, data = _cli(tmp_path, "--format", "json", ".")
    programs = {entry["path"]: entry["program"] for entry in data["files"]}
    assert programs["train.py"] == {"modules": ["shapes_net.py"], "migrated_together": True}
    assert programs["probe.py"] == {"modules": ["shapes_net.py"], "migrated_together": False}
    assert programs["shapes_net.py"] is None
