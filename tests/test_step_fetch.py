"""The global step a TF1 loop fetched in the same ``sess.run`` as the train op
(``_, step = sess.run([train_op, global_step])``), and what the migrations
return in its place.

TF1 gave (see migrate/codemod/rules/_step_variable.py):
- a step held by a parameter server, fetched by a worker: the value before
  the update, reference variable or not (``while step < N`` trains N steps);
- a step in the fetching process (in-graph towers): after the update for a
  reference variable (TF 1.x's default), before it for a resource variable.

A migration returning the other value trains one step more or less and shifts
every ``step % k`` cadence; these tests run the legacy and migrated programs
and compare the steps they train and the steps their cadence fires at.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import libcst as cst
import pytest

from migrate.codemod.engine import migrate_source
from migrate.codemod.rules._step_variable import resource_step
from migrate.codemod.tfnames import TFNames
from migrate.runtime import check
from migrate.runtime.legacy_compat import prepare
from tests.script_runs import run_in_own_group

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "step_fetch"
TOWERS = FIXTURES / "towers_cadence.py"
PS = FIXTURES / "ps_cadence.py"
# The same towers program written for TF 2.x's compat.v1 (resource variables).
RESOURCE_HEADER = "import tensorflow.compat.v1 as tf\n\ntf.disable_eager_execution()\n"


def towers_source(kind: str) -> str:
    source = TOWERS.read_text()
    if kind == "resource":
        assert source.count("import tensorflow as tf\n") == 1
        source = source.replace("import tensorflow as tf\n", RESOURCE_HEADER)
    return source


def migrated(source: str, name: str) -> str:
    result = migrate_source(source, path=name)
    assert result.output != source, result.diagnostics
    return result.output


def function_source(code: str, name: str) -> str:
    """The source of the (possibly nested) function ``name`` in ``code``."""
    for node in _walk(cst.parse_module(code)):
        if isinstance(node, cst.FunctionDef) and node.name.value == name:
            return cst.Module([node]).code
    raise AssertionError(f"no function {name} in the migration")


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


# ------------------------------------------------------------------ which kind of variable


@pytest.mark.parametrize(
    "source, resource",
    [
        ("import tensorflow as tf\ngs = tf.train.get_or_create_global_step()\n", False),
        ("import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\ngs = tf.Variable(0)\n", False),
        ("import tensorflow.compat.v1 as tf\ntf.disable_eager_execution()\ngs = tf.train.get_or_create_global_step()\n",
         True),
        (("import tensorflow.compat.v1 as tf\ntf.disable_eager_execution()\ntf.disable_resource_variables()\n"
         "gs = tf.Variable(0)\n"), False),
        ("import tensorflow as tf\ntf.enable_resource_variables()\ngs = tf.Variable(0)\n", True),
        ("import tensorflow as tf\ngs = tf.get_variable('global_step', [], tf.int64, use_resource=True)\n", True),
        (("import tensorflow as tf\nwith tf.variable_scope('train', use_resource=True):\n"
         "    gs = tf.train.get_or_create_global_step()\n"), True),
        (("import tensorflow.compat.v1 as tf\ntf.disable_eager_execution()\n"
         "gs = tf.Variable(0, use_resource=False)\n"), False),
    ],
    ids=["tf1-default", "v2-behavior-off", "eager-off-only", "resource-off", "resource-on", "use-resource",
         "scope-use-resource", "own-use-resource-false"],
)
def test_the_step_variable_kind_tf1_made(source, resource):
    module = cst.parse_module(source)
    assert resource_step(module, TFNames.from_module(module).qualname, "gs") is resource


# ------------------------------------------------------------------ what the migrations emit


def test_ps_step_is_read_before_the_update():
    """A worker fetched its ps-held step before the update arrived: the step
    function returns the step read before apply_gradients."""
    replica = function_source(migrated(PS.read_text(), str(PS)), "train_step_replica")
    read = replica.index("global_step_value = global_step.read_value()")
    assert read < replica.index(".apply_gradients(") < replica.index("global_step.assign_add(1)")
    assert "return global_step_value" in replica


def test_towers_reference_step_is_returned_after_the_update():
    """The towers' step is a reference variable in the fetching process: the
    step function returns it after the replicas ran, and reads it nowhere else."""
    code = migrated(towers_source("reference"), str(TOWERS))
    step = function_source(code, "train_step")
    assert step.rstrip().endswith("return global_step, loss")
    assert "read_value()" not in step  # no read whose value nothing uses


def test_towers_resource_step_is_read_before_the_update():
    code = migrated(towers_source("resource"), "towers_resource.py")
    step = function_source(code, "train_step")
    read = step.index("global_step_before_update = global_step.read_value()")
    assert read < step.index("strategy.run(")
    assert step.rstrip().endswith("return global_step_before_update, loss")


# ------------------------------------------------------------------ legacy and migrated runs


def _run(path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFMIGRATE_")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    output, status = run_in_own_group([sys.executable, str(path)], cwd=path.parent, env=env, timeout=180)
    text = output.decode(errors="replace")
    assert status == 0, text[-3000:]
    return [line for line in text.splitlines() if re.match(r"(report at step \d+|trained \d+ steps)$", line)]


@pytest.mark.parametrize("kind", ["reference", "resource"])
def test_towers_loop_trains_the_same_steps_with_the_same_cadence(kind, tmp_path):
    source = towers_source(kind)
    legacy = tmp_path / "legacy.py"
    legacy.write_text(prepare(source).source)  # as check runs it: TF 1.x behaviour on TF 2
    migration = tmp_path / "migrated.py"
    migration.write_text(migrated(source, f"towers_{kind}.py"))
    expected = {
        # reference variable: the fetch saw 1, 2, ...; resource: 0, 1, ...
        "reference": ["report at step 3", "report at step 6", "report at step 9", "trained 9 steps"],
        "resource": ["report at step 0", "report at step 3", "report at step 6", "report at step 9",
                     "trained 10 steps"],
    }[kind]
    assert _run(legacy) == expected
    assert _run(migration) == expected


def _cadence(log: Path) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines()
            if re.match(r"(report at step \d+|trained \d+ steps)$", line)]


# the fetched steps were 0, 1, ..., 9: `while step < 9` ran ten steps
PS_CADENCE = ["report at step 0", "report at step 3", "report at step 6", "report at step 9", "trained 10 steps"]


def _check(legacy: Path, workers: int, tmp_path: Path) -> dict:
    out = tmp_path / "out"
    code = check.main([str(legacy), "--workers", str(workers), "--steps", "9", "--out", str(out),
                       "--timeout", "240"])
    report = json.loads((out / "report.json").read_text())
    assert code == 0, report["reason"]
    return report


def test_ps_loop_trains_the_same_steps_with_the_same_cadence(tmp_path):
    """check on the loopback cluster: one worker (legacy) and the chief
    (ParameterServerStrategy) train the same steps, bit for bit, and their
    cadence fires at the same global steps."""
    report = _check(PS, 1, tmp_path)
    assert report["comparison"]["steps_compared"] == 10
    assert report["comparison"]["max_abs_diff"] == 0
    assert report["legacy"]["runs"][0]["steps"] == report["migrated"]["runs"][0]["steps"] == 10
    assert _cadence(Path(report["legacy"]["runs"][0]["log_dir"]) / "worker-0.log") == PS_CADENCE
    assert _cadence(Path(report["migrated"]["runs"][0]["log_dir"]) / "chief-0.log") == PS_CADENCE


@pytest.mark.slow
def test_sync_loop_trains_the_same_steps_with_the_same_cadence(tmp_path):
    """SyncReplicasOptimizer, two workers: the chief's queue runner advances
    the ps-held step after both gradients arrived, and each worker fetched the
    step it trained, before that update; MultiWorkerMirroredStrategy's
    workers train and report the same steps."""
    report = _check(FIXTURES / "sync_cadence.py", 2, tmp_path)
    assert report["strategy"] == "multi_worker_mirrored"
    assert report["comparison"]["steps_compared"] == 10
    assert report["legacy"]["runs"][0]["steps"] == report["migrated"]["runs"][0]["steps"] == 10
    for side in ("legacy", "migrated"):
        for task in (0, 1):
            assert _cadence(Path(report[side]["runs"][0]["log_dir"]) / f"worker-{task}.log") == PS_CADENCE, (
                side, task)


# ------------------------------------------------------------------ a step of each worker's own

STEP_BEFORE_BLOCK = '''\
import numpy as np
import tensorflow as tf


def train(cluster, server, task_index):
    {step} = {creation}
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.Variable(tf.zeros([3, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step={step})
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task_index == 0) as sess:
        step = 0
        while step < 10:
            _, step = sess.run([train_op, {step}], feed_dict={{x: np.ones([4, 3])}})
'''


@pytest.mark.parametrize("step, creation", [
    ("global_step", 'tf.Variable(0, name="global_step", trainable=False)'),
    ("counter", "tf.train.get_or_create_global_step()"),
])
def test_step_made_before_the_device_block_is_declined_where_it_is_made(step, creation):
    """Made before the device-setter block, the step was a variable of each
    worker's own (fetched after its update); a strategy's step is shared. The
    migration used to keep it outside strategy.scope() and the chief's steps
    failed on the workers, retried forever."""
    source = STEP_BEFORE_BLOCK.format(step=step, creation=creation)
    result = migrate_source(source, path="train.py")
    reasons = [d for d in result.diagnostics if d.code == "TFM301"]
    assert [(d.line, d.fixed) for d in reasons] == [(6, False)], reasons
    assert f"the global step `{step}` the train op advances is made before the device-setter block" in (
        reasons[0].message)
    assert "Strategy" not in result.output
