"""check pairs legacy and migrated initial values robustly, and runs a legacy
script with a sync/async switch in the mode its migration trains.

Fixtures are our own small programs in the shapes seen in real scripts:
unnamed ``tf.Variable``s under a MultiWorkerMirroredStrategy (whose collective
ops make unnamed variables of their own), and the ``--sync_replicas``-style
switches of the TF1 distributed-MNIST family.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from migrate.runtime import check
from migrate.runtime.harness import init_path, pair_initial_values
from migrate.runtime.sync_switch import find_sync_switch
from migrate.runtime.topology import analyze, legacy_launch

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------- pairing


def test_unnamed_variables_pair_by_creation_order_and_shape_when_numbers_shift():
    """The migration made two scalar unnamed variables before the model's
    (a library's bookkeeping): Variable/Variable_1 name other variables on the
    two sides, yet the model's values are the same and must compare equal."""
    legacy = {"Variable": np.zeros(2), "Variable_1": np.ones(2), "dense/kernel": np.ones((2, 3))}
    migrated = {
        "Variable": np.float32(0.0),
        "Variable_1": np.float32(0.0),
        "Variable_2": np.zeros(2),
        "Variable_3": np.ones(2),
        "model/dense/kernel": np.ones((2, 3)),
    }
    assert pair_initial_values(legacy, migrated) == {
        "Variable": "Variable_2",
        "Variable_1": "Variable_3",
        "dense/kernel": "model/dense/kernel",
    }
    result = check.compare_init(legacy, migrated, 1e-6, 1e-8)
    assert result["compared"] == 3 and result["mismatched"] == []


def test_unnamed_variables_keep_their_order_when_paired():
    """Two legacy (2,) variables with different values pair with the migrated
    ones in creation order, so a swapped initial value is still caught."""
    legacy = {"Variable": np.zeros(2), "Variable_1": np.ones(2)}
    swapped = {"Variable": np.float32(0), "Variable_1": np.ones(2), "Variable_2": np.zeros(2)}
    result = check.compare_init(legacy, swapped, 1e-6, 1e-8)
    assert result["compared"] == 2
    assert [m.split(" ")[0] for m in result["mismatched"]] == ["Variable", "Variable_1"]


def test_a_variable_of_another_shape_is_still_reported():
    legacy = {"weights": np.zeros((3, 4)), "Variable": np.zeros(2)}
    migrated = {"weights": np.zeros((4, 3)), "Variable": np.zeros(())}
    result = check.compare_init(legacy, migrated, 1e-6, 1e-8)
    assert sorted(result["mismatched"]) == ["Variable (shape (2,) vs ())", "weights (shape (3, 4) vs (4, 3))"]


MWMS_UNNAMED = """\
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    first = tf.Variable(tf.fill([2], 3.0))
    second = tf.Variable(tf.fill([2], 5.0))
"""


def test_harness_leaves_out_the_strategys_own_variables(tmp_path):
    """MultiWorkerMirroredStrategy makes unnamed scalar variables (its
    collective ops' ordering tokens) at construction: the harness records
    the program's two variables only, under TF1's names for them."""
    script = tmp_path / "mwms_unnamed.py"
    script.write_text(MWMS_UNNAMED)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TFMIGRATE_BOOT_HOOKS": "migrate.runtime.harness",
        "TFMIGRATE_HARNESS": "init",
        "TFMIGRATE_HARNESS_DIR": str(tmp_path / "out"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    env.pop("TF_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "migrate.runtime.taskboot", str(script)],
        check=False, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    saved = check._load_init(init_path(tmp_path / "out", "worker:0"))
    assert list(saved) == ["Variable", "Variable_1"]
    assert saved["Variable"].tolist() == [3.0, 3.0] and saved["Variable_1"].tolist() == [5.0, 5.0]


# ----------------------------------------------------------------- sync/async switch

ABSL_SWITCH = """\
import tensorflow as tf
flags = tf.app.flags
flags.DEFINE_string("job_name", None, "ps or worker")
flags.DEFINE_integer("task_index", 0, "index")
flags.DEFINE_boolean("sync_mode", False, "aggregate the workers' gradients")
FLAGS = flags.FLAGS

def main(_):
    opt = tf.train.AdamOptimizer(0.01)
    if FLAGS.job_name == "worker":
        if FLAGS.sync_mode:
            opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2, total_num_replicas=2)
"""

INT_ALIAS_SWITCH = """\
import argparse
import tensorflow as tf
parser = argparse.ArgumentParser()
parser.add_argument("--job_name")
parser.add_argument("--task_index", type=int, default=0)
parser.add_argument("--aggregate", type=int, default=0)
args = parser.parse_args()
together = (args.aggregate == 1)
opt = tf.train.GradientDescentOptimizer(0.1)
if together:
    opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2)
"""

STORE_TRUE_SWITCH = """\
import argparse
import tensorflow as tf
parser = argparse.ArgumentParser()
parser.add_argument("--job-name")
parser.add_argument("--in-step", action="store_true")
args = parser.parse_args()
opt = tf.train.GradientDescentOptimizer(0.1)
if args.in_step:
    opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2)
"""

STRING_MODE_SWITCH = """\
import argparse
import tensorflow as tf
parser = argparse.ArgumentParser()
parser.add_argument("--job_name")
parser.add_argument("--updates", default="sync", choices=["sync", "async"])
args = parser.parse_args()
opt = tf.train.GradientDescentOptimizer(0.1)
if args.updates == "sync":
    opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2)
"""


ELSE_BRANCH_SWITCH = """\
import tensorflow as tf
tf.app.flags.DEFINE_string("job_name", "", "role")
tf.app.flags.DEFINE_bool("independent", True, "apply each worker's gradients as they come")
FLAGS = tf.app.flags.FLAGS
opt = tf.train.GradientDescentOptimizer(0.1)
if FLAGS.independent:
    train = opt
else:
    opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2)
"""

NEGATED_SWITCH = ELSE_BRANCH_SWITCH.replace(
    "if FLAGS.independent:\n    train = opt\nelse:\n", "if not FLAGS.independent:\n"
)


@pytest.mark.parametrize(
    "source, option, sync_value, default, on, off",
    [
        (ABSL_SWITCH, "sync_mode", True, False, "--sync_mode=true", "--sync_mode=false"),
        (INT_ALIAS_SWITCH, "aggregate", 1, 0, "--aggregate=1", "--aggregate=0"),
        (STORE_TRUE_SWITCH, "in-step", True, False, "--in-step", None),
        (STRING_MODE_SWITCH, "updates", "sync", "sync", "--updates=sync", None),
        (ELSE_BRANCH_SWITCH, "independent", False, True, "--independent=false", "--independent=true"),
        (NEGATED_SWITCH, "independent", False, True, "--independent=false", "--independent=true"),
    ],
)
def test_sync_switch_found_in_each_spelling(source, option, sync_value, default, on, off):
    switch = find_sync_switch(ast.parse(source))
    assert switch is not None
    assert (switch.option, switch.sync_value, switch.default) == (option, sync_value, default)
    assert switch.argument(True) == on and switch.argument(False) == off
    assert source.splitlines()[switch.optimizer_line - 1].lstrip().startswith("opt = tf.train.SyncReplicas")


def test_role_tests_are_not_a_training_mode():
    """`if FLAGS.job_name == "worker":` encloses the optimizer too: the switch
    is the inner option, and a script with no other test has none."""
    assert find_sync_switch(ast.parse(ABSL_SWITCH)).option == "sync_mode"
    role_only = ABSL_SWITCH.replace("        if FLAGS.sync_mode:\n    ", "")
    assert find_sync_switch(ast.parse(role_only)) is None


def test_legacy_runs_in_the_mode_the_migration_trains():
    info = analyze(ABSL_SWITCH)
    sync = legacy_launch(info, 2, 5, migrated_strategy="multi_worker_mirrored")
    assert "--sync_mode=true" in sync.args
    assert sync.mode_switch["default_mode"] == "async" and sync.mode_switch["mode"] == "sync"
    assert any("does not reproduce" in note for note in sync.notes)
    unmigrated = legacy_launch(info, 2, 5)  # nothing to compare with: the script's default
    assert unmigrated.mode_switch is None and not any(a.startswith("--sync_mode") for a in unmigrated.args)
    ps = legacy_launch(info, 2, 5, migrated_strategy="parameter_server")
    assert not any(a.startswith("--sync_mode") for a in ps.args)  # its default is already async
    assert ps.mode_switch["mode"] == ps.mode_switch["default_mode"] == "async"


def test_report_says_the_default_mode_is_not_reproduced():
    info = analyze(INT_ALIAS_SWITCH)
    spec = legacy_launch(info, 2, 5, migrated_strategy="multi_worker_mirrored")
    report = {
        "legacy": {"program": "a.py", "launch": spec.as_dict()},
        "migrated": {"program": "b.py"},
        "tolerances": {"rtol": 1e-6, "atol": 1e-8},
        "strategy": "multi_worker_mirrored",
        "workers": 2,
        "steps": 5,
        "verdict": "equivalent",
        "reason": "all 5 steps within rtol 1e-06 atol 1e-08",
    }
    text = check.render_table(report)
    assert "legacy run sync (--aggregate=1, the branch of line 10" in text
    assert "at its default the script trains async" in text


# ----------------------------------------------------------------- a ps with a session of its own

PS_SESSION = """\
import socket
import sys
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

# the worker is never started: a ps session that waits for it never returns
cluster = tf.train.ClusterSpec({
    "ps": ["127.0.0.1:%d" % free_port()], "worker": ["127.0.0.1:%d" % free_port()],
})
server = tf.train.Server(cluster, job_name="ps", task_index=0)
with tf.device("/job:ps/task:0"):
    tokens = tf.FIFOQueue(2, tf.int32, shared_name="finished")
    size = tokens.size()
with tf.Session(server.target) as sess:
    print("tokens", sess.run(size))
sys.stdout.flush()
"""


def test_a_ps_session_of_its_own_does_not_wait_for_the_workers(tmp_path):
    """Done-queue scripts: the ps opens a session to dequeue the workers'
    tokens. The harness filters it to the ps job, so it neither waits for
    workers that start later nor leaves channels to them backing off."""
    script = tmp_path / "ps_session.py"
    script.write_text(PS_SESSION)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TFMIGRATE_BOOT_HOOKS": "migrate.runtime.harness",
        "TFMIGRATE_HARNESS": "robust",
        "TFMIGRATE_TASK": "ps:0",
        "TFMIGRATE_HARNESS_DIR": str(tmp_path / "out"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    done = subprocess.run(
        [sys.executable, "-m", "migrate.runtime.taskboot", str(script)],
        check=False, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tokens 0" in done.stdout


# ----------------------------------------------------------------- a PSS migration with no chief role

HOST_LOOKUP_PSS = """\
import tensorflow as tf
from absl import app, flags
flags.DEFINE_string("addr", "10.0.0.1", "this machine's address")
FLAGS = flags.FLAGS
ps_hosts = ["10.0.0.1"]
worker_hosts = ["10.0.0.2", "10.0.0.3"]

def main(_):
    if FLAGS.addr in ps_hosts:
        role = "ps"
    elif FLAGS.addr in worker_hosts:
        role = "worker"
    index = (ps_hosts + worker_hosts).index(FLAGS.addr)
    cluster = tf.train.ClusterSpec({"ps": [h + ":2222" for h in ps_hosts], "worker": [h + ":2222" for h in worker_hosts]})
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type=role, task_id=index)
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)

app.run(main)
"""


def test_a_pss_migration_that_no_task_can_be_the_chief_of_is_refused_before_launch():
    from migrate.runtime.topology import TopologyError, migrated_launch

    info = analyze(HOST_LOOKUP_PSS)
    assert info.role_style == "match" and info.strategy == "parameter_server"
    with pytest.raises(TopologyError, match=r"--addr looked up in its ps/worker host lists \(line 9\)"):
        migrated_launch(info, info, 2, 5)
    with_chief = HOST_LOOKUP_PSS.replace(
        '    elif FLAGS.addr in worker_hosts:', '    elif FLAGS.addr in chief_hosts:\n        role = "chief"\n'
        '    elif FLAGS.addr in worker_hosts:'
    ).replace('ps_hosts = ["10.0.0.1"]', 'ps_hosts = ["10.0.0.1"]\nchief_hosts = ["10.0.0.4"]')
    assert migrated_launch(analyze(with_chief), info, 2, 5).jobs == {"chief": 1, "worker": 2, "ps": 1}
