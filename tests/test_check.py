"""``tfmigrate check``: real equivalence runs on the local launcher, the
deliberately wrong migrations of ``tests/data/check/`` (exit 1), crashing and
hanging legacy tasks (exit 2), and the pure comparison logic.

Every real run starts TensorFlow processes (several seconds each), so the
runs use few steps; the long statistical comparison of asynchronous 2-worker
training is marked ``slow``.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from migrate.codemod.engine import migrate_source
from migrate.runtime import check, losslog
from migrate.runtime.harness import _Harness, decode_print_line, match_names
from migrate.runtime.topology import (
    STEP_KNOBS,
    TOWER_KNOBS,
    analyze,
    legacy_launch,
    migrated_launch,
)

ROOT = Path(__file__).resolve().parent.parent
LEGACY = ROOT / "legacy_reference"
REWRITES = ROOT / "rewrites"
DATA = ROOT / "tests" / "data" / "check"
REALISTIC = ROOT / "tests" / "fixtures" / "realistic"

STEPS = 12
TIMEOUT = 240.0

def migrated_for(name: str) -> Path:
    """tfmigrate's committed rewrite of a reference program."""
    return REWRITES / f"{name}.py"


# Deliberately wrong migrations: one line of a correct rewrite changed, the
# way a hand migration goes wrong. Each substitution must still apply.
MUTATIONS = {
    "wrong_initializer_mirrored": (
        "in_graph_towers",
        "glorot_uniform_initializer(seed=1)",
        "glorot_normal_initializer(seed=1)",
    ),
    "wrong_lr_mirrored": (
        "in_graph_towers",
        "SGD(learning_rate=FLAGS.learning_rate)",
        "SGD(learning_rate=0.1)",
    ),
    "wrong_summed_gradients_mirrored": (
        "in_graph_towers",
        "tape.gradient(scaled_loss, trainable_variables)",
        "tape.gradient(loss, trainable_variables)",
    ),
    "wrong_dropped_shard_mwms": (
        "sync_replicas",
        "shard = slice(task_index * per_worker, (task_index + 1) * per_worker)",
        "shard = slice(0, per_worker)",
    ),
    "wrong_lr_mwms": ("sync_replicas", "SGD(learning_rate=args.learning_rate)", "SGD(learning_rate=0.1)"),
    "wrong_summed_gradients_mwms": (
        "sync_replicas",
        "tape.gradient(scaled_loss, trainable_variables)",
        "tape.gradient(loss, trainable_variables)",
    ),
    "wrong_lr_pss": ("async_ps", "SGD(learning_rate=FLAGS.learning_rate)", "SGD(learning_rate=0.1)"),
}


def wrong_migration(name: str, tmp_path: Path) -> Path:
    reference, old, new = MUTATIONS[name]
    code = migrated_for(reference).read_text()
    assert code.count(old) == 1, f"{name}: {old!r} no longer in rewrites/{reference}.py"
    path = tmp_path / f"{name}.py"
    path.write_text(code.replace(old, new))
    return path


def run(legacy: Path, migrated: Path | None, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    argv = [str(legacy)]
    if migrated is not None:
        argv.append(str(migrated))
    argv += ["--out", str(tmp_path / "out"), "--timeout", str(TIMEOUT), *extra]
    code = check.main(argv)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["exit_code"] == code
    return code, report


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes, but the launcher reaps its children.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------------------- pure logic


def test_compare_steps_tolerance_and_missing_steps():
    legacy = {0: 1.0, 1: 0.5, 2: 0.25}
    same = check.compare_steps(legacy, dict(legacy), 1e-6, 0.0)
    assert same.equivalent and same.steps_compared == 3 and same.max_abs_diff == 0.0
    close = check.compare_steps(legacy, {0: 1.0, 1: 0.5 * (1 + 5e-7), 2: 0.25}, 1e-6, 0.0)
    assert close.equivalent
    off = check.compare_steps(legacy, {0: 1.0, 1: 0.5 * (1 + 5e-6), 2: 0.25}, 1e-6, 0.0)
    assert not off.equivalent and off.first_failing_step == 1
    assert off.max_rel_diff == pytest.approx(5e-6)
    short = check.compare_steps(legacy, {0: 1.0, 1: 0.5}, 1e-6, 0.0)
    assert not short.equivalent and short.only_legacy == [2]


def test_compare_steps_excuses_only_steps_a_kill_left_unlogged():
    legacy = {0: 1.0, 1: 0.5, 3: 0.2}  # step 2 trained, checkpointed, then the kill
    migrated = {0: 1.0, 1: 0.5, 2: 0.25, 3: 0.2}
    excused = check.compare_steps(legacy, migrated, 1e-6, 0.0, legacy_gap={2})
    assert excused.equivalent and excused.steps_compared == 3
    assert "legacy [2]" in excused.reason
    # the gap excuses nothing else: a step missing elsewhere is still a difference
    other = check.compare_steps(legacy, migrated, 1e-6, 0.0, legacy_gap={3})
    assert not other.equivalent and other.only_migrated == [2]
    # and the gap of one side does not excuse the other side's missing step
    wrong_side = check.compare_steps(legacy, migrated, 1e-6, 0.0, migrated_gap={2})
    assert not wrong_side.equivalent


def test_per_step_mean_over_workers_and_replicas():
    records = [
        losslog.LossRecord(0, "worker:0", 1.0),
        losslog.LossRecord(0, "worker:1", 3.0),
        losslog.LossRecord(1, "chief:0/replica:0", 0.5),
    ]
    assert check.per_step_means(records) == {0: 2.0, 1: 0.5}


def test_statistical_comparison_uses_median_of_trailing_means():
    base = {s: 1.0 for s in range(20)}
    legacy = [base, {**base, 19: 2.0}, base]  # one outlier run
    migrated = [{s: 1.01 for s in range(20)}] * 3
    comp = check.compare_statistical(legacy, migrated, window=10, stat_rtol=0.02)
    assert comp.equivalent
    assert comp.statistic["legacy_median"] == pytest.approx(1.0)
    # three runs bound their own scatter loosely (+-0.71 here); check runs the
    # legacy job SPREAD_RUNS times before the scatter decides
    legacy = [base, {**base, 19: 2.0}, *[base] * (check.SPREAD_RUNS - 2)]
    worse = check.compare_statistical(legacy, [{s: 1.5 for s in range(20)}] * 3, 10, 0.02)
    assert not worse.equivalent


def test_statistical_floor_relative_to_the_initial_loss():
    """Near zero, a 20 % relative difference is 0.1 % of the initial loss."""
    legacy = [{s: (2.0 if s < 10 else 0.005) for s in range(30)}] * 3
    migrated = [{s: (2.0 if s < 10 else 0.006) for s in range(30)}] * 3
    assert not check.compare_statistical(legacy, migrated, 10, 0.05, 0.0).equivalent
    floored = check.compare_statistical(legacy, migrated, 10, 0.05, 0.01)
    assert floored.equivalent and floored.statistic["legacy_initial_loss"] == 2.0
    far = [{s: (2.0 if s < 10 else 0.1) for s in range(30)}] * 3
    assert not check.compare_statistical(legacy, far, 10, 0.05, 0.01).equivalent


def test_statistical_window_is_the_same_global_steps_on_both_sides():
    """A run that skipped steps (async, keyed by a racy global step) is
    averaged over the same step range as the other side, not over its last
    ``window`` records, which would reach back into higher losses."""
    falling = {s: 10.0 - s for s in range(20)}
    gappy = {s: v for s, v in falling.items() if s % 2 == 0 or s == 19}
    comp = check.compare_statistical([gappy], [falling], window=10, stat_rtol=0.1)
    assert comp.statistic["window_steps"] == [10, 19]
    # steps 10, 12, 14, 16, 18, 19 -> losses 0, -2, -4, -6, -8, -9
    assert comp.statistic["legacy_per_run"] == [pytest.approx(-29 / 6)]
    assert comp.statistic["migrated_per_run"] == [pytest.approx(-4.5)]


def test_async_harness_records_are_keyed_by_the_jobs_order_of_updates(tmp_path):
    """Two asynchronous workers' n-th steps are different updates of the job:
    in a statistical comparison the losses are keyed by when each update
    returned (one clock for all tasks), the order a ParameterServerStrategy
    chief logs its workers' steps in; towers of one step share their place."""
    lines = [
        {"step": 0, "task": "worker:0", "loss": 4.0, "time": 10.0},
        {"step": 1, "task": "worker:0", "loss": 3.0, "time": 13.0},
        {"step": 0, "task": "worker:1/tower:0", "loss": 3.0, "time": 11.0},
        {"step": 0, "task": "worker:1/tower:1", "loss": 4.0, "time": 11.0},
        {"step": 1, "task": "worker:1/tower:0", "loss": 2.0, "time": 12.0},
        {"step": 1, "task": "worker:1/tower:1", "loss": 2.0, "time": 12.0},
    ]
    for task in ("worker-0", "worker-1"):
        with open(tmp_path / f"harness-losses-{task}.jsonl", "w") as f:
            for obj in lines:
                if obj["task"].split("/")[0].replace(":", "-") == task:
                    f.write(json.dumps(obj) + "\n")
    by_task = check.per_step_means(check.harness_records(tmp_path))
    assert by_task == {0: (4.0 + 3.0 + 4.0) / 3, 1: (3.0 + 2.0 + 2.0) / 3}
    in_order = check.per_step_means(check.harness_records(tmp_path, job_order=True))
    assert in_order == {0: 4.0, 1: 3.5, 2: 2.0, 3: 3.0}


def test_statistical_bound_allows_the_legacy_jobs_own_scatter():
    """A legacy job whose runs scatter by 30 % cannot show a migration 5 %
    off: its own run-to-run scatter bounds the difference too, and says so."""
    legacy = [{s: v for s in range(20)} for v in (0.28, 0.43, 0.58)]
    migrated = [{s: 0.30 for s in range(20)}] * 3
    comp = check.compare_statistical(legacy, migrated, 10, 0.05, 0.0)
    assert comp.equivalent and "own scatter over 3 runs (0.28..0.58" in comp.reason
    assert comp.statistic["legacy_run_sd"] == pytest.approx(0.15)
    # how coarse a verdict the scatter allows, and what compares finer
    assert "closer than 1.84 (427% of the legacy level)" in comp.reason and "--workers 1" in comp.reason
    steady = [{s: 0.43 for s in range(20)}] * 3  # no scatter: the calibrated bound alone
    calibrated = check.compare_statistical(steady, migrated, 10, 0.05, 0.0)
    assert not calibrated.equivalent and "--workers 1" not in calibrated.reason
    # within the calibrated bound, that bound decides, though three runs bound their scatter wider
    near = check.compare_statistical(legacy, [{s: 0.44 for s in range(20)}] * 3, 10, 0.05, 0.0)
    assert near.equivalent and near.reason.endswith("= 0.05 x legacy + 0 x initial loss 0.43")


def test_legacy_scatter_bound_is_a_99_percent_prediction_bound():
    """t(n-1) x s x sqrt(1 + pi/2n): three runs estimate s so loosely that the
    bound is 12 standard deviations; eight runs bring it to under 4."""
    assert check.legacy_scatter_bound([0.5]) == 0.0
    three = [0.28, 0.43, 0.58]
    assert check.legacy_scatter_bound(three) == pytest.approx(9.925 * 0.15 * math.sqrt(1 + math.pi / 6))
    eight = [0.28, 0.43, 0.58, 0.43, 0.28, 0.58, 0.43, 0.43]
    sd = statistics.stdev(eight)
    assert check.legacy_scatter_bound(eight) == pytest.approx(3.499 * sd * math.sqrt(1 + math.pi / 16))
    assert check.legacy_scatter_bound(eight) < 4 * sd


def test_statistical_bound_is_sound_for_the_legacy_job_against_itself():
    """The verdict's null case: a second sample of the legacy job's own runs.
    Asynchronous workers interleave differently at each run; per-run
    statistics drawn from one such job (a seeded draw stands in for the
    scheduler) pass against another sample of the same job, while a migration
    far outside the job's scatter still fails. (The range of three runs, the
    bound this replaces, failed a real async job against itself 1 time in 8.)"""
    rng = random.Random(7)

    def verdicts(legacy_runs, migrated_level=None):
        return [
            check.compare_statistical(
                _level_runs(rng, legacy_runs),
                _level_runs(rng, 3) if migrated_level is None else [_flat(migrated_level)] * 3,
                10,
                0.05,
                0.01,
            ).equivalent
            for _ in range(400)
        ]

    # the default three runs a side, and the legacy job topped up to SPREAD_RUNS
    assert sum(verdicts(3)) >= 0.98 * 400  # the range of three runs: 0.85
    assert sum(verdicts(check.SPREAD_RUNS)) >= 0.98 * 400
    assert not any(verdicts(check.SPREAD_RUNS, migrated_level=260.0))


def _flat(level: float) -> dict[int, float]:
    return {s: level for s in range(20)}


def _level_runs(rng: random.Random, n: int) -> list[dict[int, float]]:
    """Runs whose statistic is a draw from the job's distribution (mean 130, s.d. 12)."""
    return [_flat(rng.gauss(130, 12)) for _ in range(n)]


def test_more_legacy_runs_only_when_the_scatter_must_decide():
    """check runs the legacy job more times (to SPREAD_RUNS in all) only when the
    calibrated bound does not decide, the runs were not fixed by --runs, and
    both jobs made as many updates (a step-count error needs no scatter)."""
    scattered = [_flat(v) for v in (120.0, 140.0, 150.0)]
    off = check.compare_statistical(scattered, [_flat(125.8)] * 3, 10, 0.05, 0.01)
    assert check.needs_more_legacy_runs(off, runs_given=None, legacy_runs=3)
    assert not check.needs_more_legacy_runs(off, runs_given=3, legacy_runs=3)
    assert not check.needs_more_legacy_runs(off, runs_given=None, legacy_runs=check.SPREAD_RUNS)
    close = check.compare_statistical(scattered, [_flat(141.0)] * 3, 10, 0.05, 0.01)
    assert close.equivalent and not check.needs_more_legacy_runs(close, runs_given=None, legacy_runs=3)
    short = check.compare_statistical(scattered, [{s: 125.8 for s in range(10)}] * 3, 5, 0.05, 0.01)
    assert not short.statistic["updates_agree"]
    assert not check.needs_more_legacy_runs(short, runs_given=None, legacy_runs=3)


def test_statistical_comparison_counts_the_updates_each_job_made():
    """Losses alike on the steps both reached, but the legacy job made twice
    the updates (a loop bounded by each worker's own count): not equivalent."""
    legacy = [{s: 0.5 for s in range(40)} for _ in range(3)]
    migrated = [{s: 0.5 for s in range(20)} for _ in range(3)]
    comp = check.compare_statistical(legacy, migrated, 10, 0.05, 0.01)
    assert not comp.equivalent and comp.reason.startswith("the legacy job made 40 updates, the migration 20")
    overshoot = [{s: 0.5 for s in range(22)} for _ in range(3)]  # racing workers pass the bound by a step or two
    assert check.compare_statistical(overshoot, migrated, 10, 0.05, 0.01).equivalent


def test_training_randomness_is_found_except_where_switched_off():
    from migrate.runtime.topology import training_randomness

    tree = ast.parse(
        "import tensorflow as tf\n"
        "h = tf.nn.dropout(x, keep_prob=0.5)\n"
        "h = tf.nn.dropout(x, keep_prob=1.0)\n"
        "h = tf.layers.dropout(x, rate=0.2)\n"
        "h = tf.layers.dropout(x, rate=0.2, training=True)\n"
        "h = slim.dropout(x, 0.5, is_training=False)\n"
    )
    assert training_randomness(tree) == ("line 2: tf.nn.dropout", "line 5: tf.layers.dropout")


def test_unnamed_variables_get_tf1s_graph_names_in_the_harness():
    seen: dict[str, int] = {}
    names = [_Harness.graph_unique(n, seen) for n in ("Variable", "Variable", "w", "Variable")]
    assert names == ["Variable", "Variable_1", "w", "Variable_2"]


def test_statistical_verdict_from_one_run_says_it_measured_no_scatter():
    one = [{s: 0.43 for s in range(20)}]
    alone = check.compare_statistical(one, [{s: 0.30 for s in range(20)}], 10, 0.05, 0.0)
    assert not alone.equivalent and "one legacy run" in alone.reason and "--runs 3" in alone.reason
    legacy = [{s: v for s in range(20)} for v in (0.42, 0.43, 0.44)]
    several = check.compare_statistical(legacy, [{s: 0.30 for s in range(20)}] * 3, 10, 0.05, 0.0)
    assert "one legacy run" not in several.reason


def test_harness_print_encoding_is_exact():
    import struct

    value = 0.8167338371276855
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    assert decode_print_line(f"TFMH 1 {bits}") == ("1", value)
    assert decode_print_line("something else") is None


def test_variable_names_pair_across_scopes():
    available = ["model/hidden/kernel", "hid_w", "c/b", "d/b"]
    pairs = match_names(["hidden/kernel", "hid_w", "b", "missing"], available)
    # "b" is ambiguous (c/b or d/b) and "missing" has no partner: both left out.
    assert pairs == {"hidden/kernel": "model/hidden/kernel", "hid_w": "hid_w"}


@pytest.mark.parametrize(
    "path, strategy, role_style, steps_knob",
    [
        (LEGACY / "async_ps.py", "parameter_server", "flags", ("option", "steps")),
        (LEGACY / "sync_replicas.py", "multi_worker_mirrored", "tf_config", ("option", "steps")),
        (LEGACY / "in_graph_towers.py", "mirrored", "none", ("option", "steps")),
        (REALISTIC / "async_mts_hooks.py", "parameter_server", "flags", ("option", "steps")),
        (
            REALISTIC / "mnist_replica_sync.py",
            "multi_worker_mirrored",
            "flags",
            ("option", "train_steps"),
        ),
        (REALISTIC / "tf_config_async.py", "parameter_server", "tf_config", ("env", "NUM_STEPS")),
    ],
)
def test_topology_inferred_from_source(path, strategy, role_style, steps_knob):
    info = analyze(path.read_text())
    assert (info.strategy, info.role_style, info.knob(STEP_KNOBS)) == (
        strategy,
        role_style,
        steps_knob,
    )


def test_options_keep_the_scripts_own_spelling():
    """argparse rejects `--max_steps` for `--max-steps`: knobs and role flags
    are passed as the script defines them (short aliases, dashes, other role
    flag names), and environment knobs are found by every reading idiom."""
    source = (
        "import argparse, os\n"
        "import tensorflow as tf\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--job-name')\n"
        "parser.add_argument('--task-id', type=int)\n"
        "parser.add_argument('--ps-hosts')\n"
        "parser.add_argument('--worker-hosts')\n"
        "parser.add_argument('-n', '--max-steps', type=int)\n"
        "seed = int(os.getenv('SEED', '0'))\n"
        "device_fn = tf.train.replica_device_setter(cluster=None)\n"
    )
    info = analyze(source)
    assert info.role_style == "flags" and info.strategy == "parameter_server"
    spec = legacy_launch(info, 2, 7, seed=3)
    assert spec.args == ["--max-steps=7"] and spec.env == {"SEED": "3"}
    assert spec.flag_names == {"job": "--job-name", "index": "--task-id", "hosts": "--{job}-hosts"}
    absl = analyze("from absl import flags\nflags.DEFINE_integer(name='training_iters', default=5, help='')\n")
    assert absl.knob(STEP_KNOBS) == ("option", "training_iters")


def test_launch_shapes_per_strategy():
    pss = analyze(migrated_for("async_ps").read_text())
    legacy = analyze((LEGACY / "async_ps.py").read_text())
    spec = migrated_launch(pss, legacy, 2, 10)
    assert spec.jobs == {"chief": 1, "worker": 2, "ps": 1}
    assert set(spec.server_only) == {"ps", "worker"}
    # output directories it takes as options go inside each run's own directory
    assert spec.args == ["--steps=10", "--checkpoint_dir={run_dir}/checkpoint_dir"]
    lspec = legacy_launch(legacy, 2, 10)
    assert lspec.jobs == {"ps": 1, "worker": 2} and lspec.server_only == ("ps",)
    towers = analyze((LEGACY / "in_graph_towers.py").read_text())
    assert towers.knob(TOWER_KNOBS) == ("option", "num_towers")
    tspec = legacy_launch(towers, 2, 10)
    assert tspec.jobs == {"worker": 1} and "--num_towers=2" in tspec.args
    mwms = migrated_launch(
        analyze(migrated_for("sync_replicas").read_text()),
        analyze((LEGACY / "sync_replicas.py").read_text()),
        2,
        10,
    )
    assert mwms.jobs == {"worker": 2} and mwms.role_style == "tf_config" and not mwms.server_only
    env_spec = legacy_launch(analyze((REALISTIC / "tf_config_async.py").read_text()), 2, 7)
    assert env_spec.env == {"NUM_STEPS": "7"}


SEEDED_SCRIPT = """
import random
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
value = tf.random_uniform([3])
with tf.Session() as sess:
    print(random.random(), np.random.rand(), *sess.run(value))
"""


def test_harness_seed_makes_unseeded_randomness_repeatable(tmp_path):
    """--seed reaches unseeded Python, numpy and TF graph-mode randomness
    through the boot hook, without touching the script."""
    script = tmp_path / "unseeded.py"
    script.write_text(SEEDED_SCRIPT)

    def start(seed: int, name: str) -> subprocess.Popen:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TFMIGRATE_BOOT_HOOKS": "migrate.runtime.harness",
            "TFMIGRATE_SEED": str(seed),
            "TFMIGRATE_HARNESS_DIR": str(tmp_path / name),
        }
        return subprocess.Popen(
            [sys.executable, "-m", "migrate.runtime.taskboot", str(script)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    procs = [start(5, "a"), start(5, "b"), start(6, "c")]
    outputs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outputs[0] == outputs[1] and len(outputs[0].split()) == 5
    assert outputs[0] != outputs[2]


def test_usage_errors_exit_2(tmp_path):
    assert check.main([str(tmp_path / "missing.py"), "--out", str(tmp_path / "o")]) == 2
    assert check.main(["--workers", "0", str(LEGACY / "async_ps.py")]) == 2


NOT_MIGRATED_TOWERS = """
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
flags = tf.app.flags
flags.DEFINE_integer("num_gpus", 2, "towers")
FLAGS = flags.FLAGS


def average_gradients(tower_grads):
    return [(tf.add_n([g for g, _ in pairs]) / len(pairs), pairs[0][1]) for pairs in zip(*tower_grads)]


def main(_):
    with tf.device("/cpu:0"):
        opt = tf.train.GradientDescentOptimizer(0.1)
        grads = []
        for i in range(FLAGS.num_gpus):
            with tf.device("/cpu:0"), tf.name_scope("tower_%d" % i):
                x = tf.random_normal([4, 3], seed=i)  # each tower makes its own input
                w = tf.get_variable("w", [3, 1], initializer=tf.ones_initializer())
                tf.get_variable_scope().reuse_variables()
                grads.append(opt.compute_gradients(tf.reduce_sum(tf.matmul(x, w))))
        train_op = opt.apply_gradients(average_gradients(grads))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(5):
            sess.run(train_op)


if __name__ == "__main__":
    tf.app.run()
"""


def test_a_migration_without_a_strategy_is_not_compared(tmp_path):
    """When the codemod could not migrate the training (here towers that
    build their own input), check must not run the TF1 program twice and
    call it equivalent: exit 2, saying so, with the codemod's findings. The
    legacy side alone still runs once, so the report holds its baseline."""
    legacy = tmp_path / "towers.py"
    legacy.write_text(NOT_MIGRATED_TOWERS)
    code, report = run(legacy, None, tmp_path)
    assert code == 2 and report["verdict"] == "error"
    assert "uses no tf.distribute strategy" in report["reason"]
    assert "TFM303" in report["details"] and report["migrated"]["manual_work"]
    assert len(report["legacy"]["runs"][0]["losses"]) == 5
    assert not list((tmp_path / "out").glob("migrated-run*"))  # the migration never ran


def test_a_chief_job_of_its_own_is_launched():
    """Cloud ML Engine / Estimator-era scripts read TF_CONFIG whose chief is a
    `master` job: without it every worker waits for initialization."""
    source = (
        "import json, os\nimport tensorflow.compat.v1 as tf\n"
        "task = json.loads(os.environ['TF_CONFIG'])['task']\n"
        "if task['type'] in ['master', 'worker']:\n"
        "    device_fn = tf.train.replica_device_setter(cluster=None)\n"
    )
    info = analyze(source)
    assert info.chief_job == "master"
    assert legacy_launch(info, 2, 5).jobs == {"ps": 1, "master": 1, "worker": 1}
    assert legacy_launch(info, 1, 5).jobs == {"ps": 1, "master": 1}
    assert analyze("import tensorflow as tf\n").chief_job is None


def test_unchanged_by_codemod_exits_2(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("print('no tensorflow here')\n")
    code, report = run(plain, None, tmp_path)
    assert code == 2 and "unchanged" in report["reason"]


# --------------------------------------------------------------------------- real runs: equivalent


def test_sync_two_workers_step_by_step(tmp_path):
    """SyncReplicas (ps + 2 workers, TF_CONFIG) vs MultiWorkerMirrored: every
    step within rtol 1e-6; the harness's observations (Session.run fetches on
    the legacy side, GradientTape inside the MWMS step function) equal the
    losses the programs log themselves, bit for bit."""
    code, report = run(
        LEGACY / "sync_replicas.py", migrated_for("sync_replicas"), tmp_path, "--steps", str(STEPS)
    )
    assert code == 0, report["reason"]
    comp = report["comparison"]
    assert comp["mode"] == "step" and comp["steps_compared"] == STEPS
    assert comp["max_rel_diff"] <= 1e-6
    assert report["initial_values"]["compared"] >= 4 and not report["initial_values"]["mismatched"]
    for side in ("legacy", "migrated"):
        log_dir = Path(report[side]["runs"][0]["log_dir"])
        program = check.per_step_means(losslog.read(log_dir.glob("losses-*.jsonl")))
        observed = check.per_step_means(check.harness_records(log_dir))
        assert len(program) == STEPS and observed == program
    png = Path(report["artifacts"]["png"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_towers_step_by_step(tmp_path):
    code, report = run(
        LEGACY / "in_graph_towers.py",
        migrated_for("in_graph_towers"),
        tmp_path,
        "--steps",
        str(STEPS),
    )
    assert code == 0, report["reason"]
    assert report["comparison"]["steps_compared"] == STEPS
    assert report["legacy"]["launch"]["jobs"] == {"worker": 1}


def test_async_one_worker_step_by_step_from_harness_only(tmp_path):
    """PSS with one worker, losses only from the harness (the programs' own
    loss logs hidden from them): the migrated step function runs on a remote
    PSS worker, whose tf.print lands in the chief's harness file."""
    code, report = run(
        LEGACY / "async_ps.py",
        migrated_for("async_ps"),
        tmp_path,
        "--workers",
        "1",
        "--steps",
        str(STEPS),
        "--loss-source",
        "harness",
    )
    assert code == 0, report["reason"]
    assert report["comparison"]["mode"] == "step"
    assert report["comparison"]["steps_compared"] == STEPS
    for side in ("legacy", "migrated"):
        run0 = report[side]["runs"][0]
        assert run0["loss_source"] == "harness" and run0["steps"] == STEPS
        assert not list(Path(run0["log_dir"]).glob("losses-*.jsonl"))  # programs logged nothing
    assert report["migrated"]["launch"]["jobs"] == {"chief": 1, "worker": 1, "ps": 1}


def test_naive_program_that_hangs_on_its_own_is_checked(tmp_path):
    """legacy_reference/naive_async_ps.py hangs when run as written (its late
    non-chief waits forever for the finished chief: no device_filters). The
    harness defuses that from outside (device filters, a start barrier), so
    the pair is compared statistically over the default 3 runs per side: this
    program's own runs scatter by up to 10 % at step 20 (its batches follow a
    racily read global step), so one run each side cannot decide."""
    code, report = run(
        LEGACY / "naive_async_ps.py",
        migrated_for("naive_async_ps"),
        tmp_path,
        "--workers", "2", "--steps", "20",
    )
    assert code == 0, report["reason"]
    assert report["mode"] == "statistical" and report["runs"] == 3
    fired = " ".join(report["legacy"]["runs"][0]["harness_fired"])
    assert "worker:1: device_filters added" in fired and "start barrier" in fired


@pytest.mark.slow
def test_async_two_workers_statistically(tmp_path):
    """Asynchronous ps/worker with 2 workers vs ParameterServerStrategy with 2
    workers: not reproducible step by step, compared by the median over 3 runs
    of the mean loss of the last 10 steps (see the calibration in check.py)."""
    code, report = run(LEGACY / "async_ps.py", migrated_for("async_ps"), tmp_path, "--steps", "30")
    assert code == 0, report["reason"]
    comp = report["comparison"]
    assert report["mode"] == "statistical" and comp["mode"] == "statistical"
    assert len(comp["statistic"]["legacy_per_run"]) == 3
    assert comp["statistic"]["legacy_steps_per_run"] == [30, 30, 30]
    assert comp["statistic"]["migrated_steps_per_run"] == [30, 30, 30]


# --------------------------------------------------------------------------- unseen scripts


def test_realistic_supervisor_sync_script_unmodified(tmp_path):
    """mnist_replica_sync.py as found in the wild: flags, Supervisor,
    SyncReplicasOptimizer with the default (spare) sync tokens, Adam, and no
    loss log of its own: the harness observes both sides. Migrated by
    tfmigrate itself (no MIGRATED argument)."""
    code, report = run(REALISTIC / "mnist_replica_sync.py", None, tmp_path, "--steps", "8")
    assert code == 0, report["reason"]
    assert report["migrated"]["origin"] == "tfmigrate output"
    assert report["strategy"] == "multi_worker_mirrored"
    for side in ("legacy", "migrated"):
        assert report[side]["runs"][0]["loss_source"] == "harness"
    # its GPU-count option is 0 (check's clusters run on the CPU), its step count ours
    assert report["legacy"]["launch"]["args"] == ["--num_gpus=0", "--train_steps=8"]
    # the spare-token default that lets the chief train alone was defused
    assert any("num_tokens" in f for f in report["legacy"]["runs"][0]["harness_fired"])
    assert report["comparison"]["steps_compared"] >= 8


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_realistic_async_mts_script_unmodified(tmp_path, workers):
    """async_mts_hooks.py: flags, MonitoredTrainingSession, no device_filters
    and no chief-ready signal; with 2 workers the harness's start barrier and
    device filters keep the late non-chief from crashing or hanging."""
    code, report = run(
        REALISTIC / "async_mts_hooks.py",
        None,
        tmp_path,
        "--workers",
        str(workers),
        "--steps",
        "40",  # past the steep descent, where async runs scatter most
    )
    assert code == 0, report["reason"]
    assert report["mode"] == ("step" if workers == 1 else "statistical")


@pytest.mark.slow
def test_realistic_module_level_placeholders_unmodified(tmp_path):
    """module_placeholders_async.py: the inputs are placeholders made at module
    level, before the role branch, and read by the device-setter block; the
    migration makes them step arguments. One worker trains bit for bit as the
    legacy job did."""
    code, report = run(
        REALISTIC / "module_placeholders_async.py", None, tmp_path, "--workers", "1", "--steps", "12"
    )
    assert code == 0, report["reason"]
    assert report["mode"] == "step"
    assert report["comparison"]["steps_compared"] == 12
    assert report["comparison"]["max_abs_diff"] == 0


def test_realistic_helper_built_model_unmodified(tmp_path):
    """async_helper_variables.py: the model is built by helper functions that
    create plain tf.Variables (weight_variable()/inference(), the TF1 tutorial
    shape). The migrated model records its variables on the first call and
    reuses them: with the legacy initial values carried over by name, one
    worker trains bit for bit as the legacy job did."""
    code, report = run(
        REALISTIC / "async_helper_variables.py", None, tmp_path,
        "--workers", "1", "--steps", "20", "--align-init",
    )
    assert code == 0, report["reason"]
    assert report["mode"] == "step"
    assert report["comparison"]["max_abs_diff"] == 0
    init = report["initial_values"]
    assert init["compared"] == 4 and not init["mismatched"], init


def test_realistic_adam_script_whose_loop_fetches_nothing(tmp_path):
    """async_adam_bare_run.py: the loop runs only the train op (the step
    returns no tensors to the chief) and the optimizer is Adam, whose Keras 3
    update rounds unlike TF1's kernel: compared at the calibrated tolerance,
    which the report states, and the difference is real but small."""
    code, report = run(
        REALISTIC / "async_adam_bare_run.py", None, tmp_path, "--workers", "1", "--steps", "20"
    )
    assert code == 0, report["reason"]
    assert report["tolerances"]["rtol"] == check.ROUNDING_OPTIMIZER_RTOL
    assert "Adam" in report["tolerances"]["rtol_reason"]
    comp = report["comparison"]
    assert comp["steps_compared"] == 20
    assert 0 < comp["max_rel_diff"] < check.ROUNDING_OPTIMIZER_RTOL


def test_realistic_howto_script_with_hard_coded_length_and_checkpoint_dir(tmp_path):
    """The how-to shape: StopAtStepHook(last_step=1000000) and no step-count
    option, so check stops each job once it trained --steps steps; and a
    hard-coded checkpoint_dir, which the harness keeps inside each run's own
    directory (otherwise the migrated run, or the next check, would restore
    what the legacy run saved there)."""
    hard_coded = Path("/tmp/tfmigrate-howto-train-logs")
    shutil.rmtree(hard_coded, ignore_errors=True)
    code, report = run(
        REALISTIC / "howto_trainer_fixed_last_step.py", None, tmp_path, "--workers", "1", "--steps", "12"
    )
    assert code == 0, report["reason"]
    assert report["comparison"]["steps_compared"] == 12
    for side in ("legacy", "migrated"):
        assert report[side]["launch"]["step_cap"] == 12
        run0 = report[side]["runs"][0]
        assert run0["steps"] == 12
        assert any("checkpoints redirected: /tmp/tfmigrate-howto-train-logs" in f for f in run0["harness_fired"])
    # TF1's checkpoint saver wrote its first checkpoint, in the run's own directory
    legacy_dir = Path(report["legacy"]["runs"][0]["log_dir"], "checkpoints", "tmp", "tfmigrate-howto-train-logs")
    assert list(legacy_dir.glob("model.ckpt-*.index"))
    assert not hard_coded.exists()


def test_script_training_to_its_own_bound_beside_a_steps_flag_is_stopped_and_compared_on_the_steps_asked(
    tmp_path,
):
    """own_bound_beside_steps_flag.py defines --train_steps (check passes it)
    but trains to a hard-coded StopAtStepHook(last_step=200000): each side is
    stopped once it is far past --steps, and the first --steps steps are
    compared (what the script computes for them does not depend on when it
    is stopped), bit for bit."""
    code, report = run(
        REALISTIC / "own_bound_beside_steps_flag.py", None, tmp_path, "--workers", "1", "--steps", "12"
    )
    assert code == 0, report["reason"]
    assert report["comparison"]["steps_compared"] == 12
    assert report["comparison"]["max_abs_diff"] == 0
    for side in ("legacy", "migrated"):
        assert "--train_steps=12" in report[side]["launch"]["args"]
        assert report[side]["launch"]["step_cap"] is None
        run0 = report[side]["runs"][0]
        assert run0["steps"] == 12 and sorted(map(int, run0["losses"])) == list(range(12))
        assert run0["stopped_past_steps_at"] >= check._overrun_limit(12, 1)
    assert "trained on past --steps 12" in report["stopped_past_steps"]
    assert "compares the first 12 steps" in check.render_table(report)


def test_overrun_stop_asks_for_a_step_far_past_the_steps_asked(tmp_path):
    """The stop for jobs ignoring the step option fires on any task's step
    index at the limit, never on a job that honours the bound (overshooting
    it by a step or two, or trained by asynchronous workers each to their own
    count)."""
    limit = check._overrun_limit(20, 2)
    assert limit > 2 * 20 + 2
    log = tmp_path / "harness-losses-worker-0.jsonl"
    def record(step: int) -> str:
        return json.dumps({"step": step, "task": "worker:0", "loss": 1.0}) + "\n"

    log.write_text("".join(record(s) for s in range(2 * 20 + 2)))
    assert not check._trained_past(tmp_path, limit, "auto", False)
    with log.open("a") as f:
        f.write(record(limit))
    assert check._trained_past(tmp_path, limit, "auto", False)


def test_script_written_for_tf1_runs_as_tf2_runs_tf1_code(tmp_path):
    """tf1_spelled_inference_helpers.py is TF 1.x code as written for TF 1.x
    (`import tensorflow as tf`, tf.train.Server, tf.placeholder): it cannot
    start on TF 2 as it is. check runs a copy importing tensorflow.compat.v1
    in graph mode -- only that changed, said in the report -- and the
    migration (get_variable helpers under make_template) trains bit for bit.
    Its initializers are unseeded, so the legacy values are carried over (no
    option needed) and the migration's own draws compared by distribution."""
    legacy = REALISTIC / "tf1_spelled_inference_helpers.py"
    before = legacy.read_bytes()
    code, report = run(legacy, None, tmp_path, "--workers", "1", "--steps", "15")
    assert code == 0, report["reason"]
    assert report["align_init"] is True and "line 26: tf.truncated_normal_initializer" in report["align_init_reason"]
    assert report["initial_values"]["carried"] and report["initial_values"]["own_draws_compared"] == 4
    run_as = report["legacy"]["run_as"]
    assert Path(run_as["program"]).parent == tmp_path / "out" / "legacy-on-tf2"
    assert any("import tensorflow.compat.v1 as tf" in c for c in run_as["changes"])
    assert legacy.read_bytes() == before
    assert report["comparison"]["steps_compared"] == 15 and report["comparison"]["max_abs_diff"] == 0
    assert report["initial_values"]["compared"] == 4


def test_tf_layers_script_runs_on_keras_3_and_its_migration_is_bit_exact(tmp_path):
    """tf1_layers_mnist_mts.py builds its model with tf.layers.dense/dropout,
    which Keras 3 removed: the legacy side runs them as the TF1 code TFM104
    writes into the migration (the harness provides it, and says so), the
    initial values are carried (glorot defaults, unseeded), and one worker of
    ParameterServerStrategy trains bit for bit as the TF1 job did."""
    code, report = run(REALISTIC / "tf1_layers_mnist_mts.py", None, tmp_path, "--workers", "1", "--steps", "15")
    assert code == 0, report["reason"]
    fired = report["legacy"]["runs"][0]["harness_fired"]
    assert any("tf.compat.v1.layers.dense run as tfmigrate's TF1 code" in f for f in fired), fired
    assert report["comparison"]["steps_compared"] == 15 and report["comparison"]["max_abs_diff"] == 0
    init = report["initial_values"]
    assert init["carried"] and init["compared"] == 6 and not init["mismatched"]
    assert "tf1_dense(" in Path(report["migrated"]["program"]).read_text()


def test_mnist_tutorial_reader_script_checks_offline(tmp_path):
    """mnist_input_data_async.py is mnist_replica.py's shape: TF1's MNIST
    reader (removed in TF 2), Adam, a Supervisor, and a validation pass over
    float64 one-hot labels fed to a float32 placeholder after training. Both
    sides read check's synthetic stand-in, shuffled alike by the seed."""
    code, report = run(REALISTIC / "mnist_input_data_async.py", None, tmp_path, "--workers", "1", "--steps", "12")
    assert code == 0, report["reason"]
    assert report["mnist_standin"] is True
    for side in ("legacy", "migrated"):
        fired = report[side]["runs"][0]["harness_fired"]
        assert any("read_data_sets served by tfmigrate's synthetic stand-in" in f for f in fired), fired
    assert report["comparison"]["steps_compared"] >= 12


def test_deep_mnist_with_reader_and_dropout_placeholder_in_the_block_checks_bit_for_bit(tmp_path):
    """deep_mnist_reader_in_block_mts.py: the MNIST reader made inside the
    device-setter block (run once before the strategy in the migration), the
    model helper's own keep_prob placeholder (a step argument in the
    migration) and `tf.train.global_step(sess, gs)` in the loop."""
    code, report = run(REALISTIC / "deep_mnist_reader_in_block_mts.py", None, tmp_path,
                       "--workers", "1", "--steps", "12")
    assert code == 0, report["reason"]
    assert report["comparison"]["steps_compared"] >= 12
    assert report["comparison"]["max_abs_diff"] == 0


def test_unnamed_variables_pair_by_tf1s_graph_names(tmp_path):
    code, report = run(REALISTIC / "unnamed_variables_mts.py", None, tmp_path, "--workers", "1", "--steps", "10")
    assert code == 0, report["reason"]
    assert report["initial_values"]["compared"] == 2 and not report["initial_values"]["mismatched"]


def test_wrong_unseeded_initializer_is_caught_though_values_are_carried(tmp_path):
    """The migration draws hidden1/weights with 3x the legacy stddev: the values
    are carried over (unseeded legacy initializers), so the losses agree, but
    the migration's own draws come from another distribution: exit 1."""
    legacy = REALISTIC / "tf1_spelled_inference_helpers.py"
    result = migrate_source(legacy.read_text())
    assert result.output.count("stddev=0.3") == 2
    wrong = tmp_path / "wrong_stddev.py"
    wrong.write_text(result.output.replace("stddev=0.3", "stddev=0.9", 1))
    code, report = run(legacy, wrong, tmp_path, "--workers", "1", "--steps", "5")
    assert code == 1, report["reason"]
    assert report["initial_values"]["distributions_differ"][0].startswith("hidden1/weights (own draws std")
    assert "other distributions" in report["reason"]


def test_init_distributions_tell_a_wrong_initializer_from_another_draw():
    rng = np.random.default_rng(0)
    legacy = {"w": rng.normal(0, 0.3, (12, 16)), "b": np.zeros(16), "tiny": rng.normal(0, 1, 3)}
    same = {"model/w": rng.normal(0, 0.3, (12, 16)), "model/b": np.zeros(16), "model/tiny": rng.normal(0, 5, 3)}
    assert check.compare_init_distributions(legacy, same) == []  # another draw; too few to tell
    wide = {"model/w": rng.normal(0, 0.9, (12, 16))}
    assert check.compare_init_distributions(legacy, wide)[0].startswith("w (own draws std")
    shifted = {"model/w": rng.normal(0.3, 0.3, (12, 16))}
    assert check.compare_init_distributions(legacy, shifted)[0].startswith("w (own draws mean")
    ones = {"model/b": np.ones(16)}
    assert check.compare_init_distributions(legacy, ones) == ["b (own initial value 1, legacy constant 0)"]
    # a scalar weight drawn at random: one value is no constant (and no distribution) to compare with
    scalar = {"slope": np.float64(0.12)}
    assert check.compare_init_distributions(scalar, {"model/slope": np.float64(1.5)}) == []


def test_legacy_script_needing_what_tf2_removed_gets_a_located_reason(tmp_path):
    legacy = tmp_path / "contrib_user.py"
    legacy.write_text(
        (REALISTIC / "tf1_spelled_inference_helpers.py").read_text().replace(
            "import tensorflow as tf\n",
            "import tensorflow as tf\nfrom tensorflow.contrib.learn import datasets\n",
        )
    )
    code, report = run(legacy, None, tmp_path, "--workers", "1", "--steps", "5")
    assert code == 2
    assert "cannot run on TensorFlow 2" in report["reason"]
    assert "line 9: imports `tensorflow.contrib.learn.datasets`" in report["reason"]
    assert not report["legacy"].get("runs")  # refused before launching anything


def test_step_tolerance_follows_the_migrated_optimizer():
    sgd = analyze("import tensorflow as tf\nopt = tf.keras.optimizers.SGD(learning_rate=0.1)\n")
    momentum = analyze("import tensorflow as tf\nopt = tf.keras.optimizers.SGD(0.1, 0.9)\n")
    adam = analyze("import tensorflow as tf\nopt = tf.keras.optimizers.Adam(learning_rate=0.1, epsilon=1e-08)\n")
    assert check.step_rtol(None, sgd) == (check.DEFAULT_RTOL, "")
    assert check.step_rtol(None, momentum)[0] == check.ROUNDING_OPTIMIZER_RTOL
    rtol, why = check.step_rtol(None, adam)
    assert rtol == check.ROUNDING_OPTIMIZER_RTOL and "Adam" in why
    assert check.step_rtol(1e-6, adam) == (1e-6, "")  # what the user asks for wins


@pytest.mark.slow
def test_realistic_tf_config_script_steps_by_environment(tmp_path):
    code, report = run(
        REALISTIC / "tf_config_async.py", None, tmp_path, "--workers", "1", "--steps", "10"
    )
    assert code == 0, report["reason"]
    assert report["legacy"]["launch"]["env"] == {"NUM_STEPS": "10"}


def test_python2_legacy_script_runs_converted_to_python3(tmp_path):
    """py2_era_flags.py (print statements, xrange, iteritems, `except E, e`,
    tf.contrib.framework.get_or_create_global_step): check runs it unmodified
    as Python 3 on TF2's compat.v1, with the contrib call TF 1.x's own alias,
    against tfmigrate's migration of it."""
    code, report = run(REALISTIC / "py2_era_flags.py", None, tmp_path, "--workers", "1", "--steps", "10")
    assert code == 0, report["reason"]
    changes = report["legacy"]["run_as"]["changes"]
    assert changes[0].startswith("converted from Python 2") and "print" in changes[0]
    fired = report["legacy"]["runs"][0]["harness_fired"]
    assert any("tf.contrib.framework.get_or_create_global_step run as" in f for f in fired), fired
    assert report["comparison"]["steps_compared"] == 10


# --------------------------------------------------------------------------- real runs: must fail


@pytest.mark.parametrize(
    "legacy, wrong, extra",
    [
        ("in_graph_towers", "wrong_initializer_mirrored", ()),
        ("in_graph_towers", "wrong_lr_mirrored", ()),
        ("in_graph_towers", "wrong_summed_gradients_mirrored", ()),
        ("sync_replicas", "wrong_dropped_shard_mwms", ()),
        pytest.param("sync_replicas", "wrong_lr_mwms", (), marks=pytest.mark.slow),
        pytest.param("sync_replicas", "wrong_summed_gradients_mwms", (), marks=pytest.mark.slow),
        pytest.param("async_ps", "wrong_lr_pss", ("--workers", "1"), marks=pytest.mark.slow),
    ],
)
def test_wrong_migrations_are_not_equivalent(tmp_path, legacy, wrong, extra):
    migrated = wrong_migration(wrong, tmp_path)
    code, report = run(LEGACY / f"{legacy}.py", migrated, tmp_path, "--steps", "6", *extra)
    assert code == 1, report["reason"]
    assert report["verdict"] == "not_equivalent"
    comp = report["comparison"]
    if wrong == "wrong_initializer_mirrored":
        assert report["initial_values"]["mismatched"]
        assert comp["first_failing_step"] == 0  # the very first loss differs
    else:
        assert not report["initial_values"]["mismatched"]
        assert comp["first_failing_step"] is not None


def test_align_init_carries_legacy_values(tmp_path):
    """With --align-init the wrong initializer is overridden by the legacy
    values (by variable name), and the runs become equivalent."""
    code, report = run(
        LEGACY / "in_graph_towers.py",
        wrong_migration("wrong_initializer_mirrored", tmp_path),
        tmp_path,
        "--steps",
        "6",
        "--align-init",
    )
    assert code == 0, report["reason"]
    assert report["initial_values"]["compared"] >= 4 and not report["initial_values"]["mismatched"]


# --------------------------------------------------------------------------- real runs: cannot run


@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_faulty_legacy_task_exits_2_with_reason(tmp_path, fault):
    # check passes no script-specific flags: a copy defaults to the wanted fault.
    script = tmp_path / "legacy_faulty_worker.py"
    script.write_text(
        (DATA / "legacy_faulty_worker.py")
        .read_text()
        .replace('DEFINE_string("fault", "crash"', f'DEFINE_string("fault", "{fault}"')
    )
    argv = [
        str(script),
        str(migrated_for("async_ps")),
        "--out",
        str(tmp_path / "out"),
        "--steps",
        "5",
        "--timeout",
        "90" if fault == "hang" else str(TIMEOUT),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "migrate", "check", *argv],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "error"
    assert "worker:1" in report["reason"]
    if fault == "crash":
        assert "deliberate crash" in report["reason"]
    else:
        assert "timed out" in report["reason"]
        assert "stack dump of worker:1" in report["details"]
        # hung in the script's own code (Session.run of the dequeue, or on the
        # way there when the machine is slow), and the dump says where
        assert "legacy_faulty_worker.py" in report["details"]
    assert "worker:1" in proc.stdout
    failed = report["legacy"]["failed_runs"]
    assert len(failed) == 1 and failed[0]["timed_out"] == (fault == "hang")
    pids = [pid for task_pids in failed[0]["pids"].values() for pid in task_pids]
    assert len(pids) == 3  # ps:0, worker:0, worker:1
    assert not [pid for pid in pids if pid_alive(pid)]
