"""``tfmigrate check`` launches scripts however they get their cluster.

Fixtures in ``tests/data/check/clusters/`` (ours, in the shapes real
scripts have): hard-coded host lists, an environment variable with docker
service names as fallback, a sibling settings module, a literal ServerDef,
a flag choosing among literal clusters, roles from argparse/click/absl
flags, environment variables, ``sys.argv`` positions or a lookup of the
machine's address in the host lists. Static analysis (topology) decides the
shape in milliseconds; the harness maps whatever cluster the program builds
onto the launcher's loopback ports at run time; the launcher fails at once
when a cluster does not form.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from migrate.runtime import check
from migrate.runtime.cluster import ClusterResult, run_cluster
from migrate.runtime.harness import _Harness
from migrate.runtime.inputs import missing_inputs
from migrate.runtime.topology import (
    LaunchSpec,
    TopologyError,
    analyze,
    find_script_cluster,
    legacy_launch,
)

ROOT = Path(__file__).resolve().parent.parent
CLUSTERS = ROOT / "tests" / "data" / "check" / "clusters"


def info_of(name: str):
    path = CLUSTERS / name
    return analyze(path.read_text(), str(path))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------- the script's own cluster


def test_hard_coded_lists_fix_the_task_count_and_only_defined_flags_are_passed():
    source = textwrap.dedent(
        """
        import tensorflow.compat.v1 as tf
        parameter_servers = ["pc-01:2222"]
        workers = ["pc-02:2222",
                   "pc-03:2222", "pc-04:2222"]
        cluster = tf.train.ClusterSpec({"ps": parameter_servers, "worker": workers})
        tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
        tf.app.flags.DEFINE_integer("task_index", 0, "index")
        server = tf.train.Server(cluster, job_name=tf.app.flags.FLAGS.job_name)
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            pass
        """
    )
    info = analyze(source)
    assert info.script_cluster.jobs == (("ps", 1), ("worker", 3))
    spec = legacy_launch(info, None, 20)
    assert spec.jobs == {"ps": 1, "worker": 3}
    # no --ps_hosts/--worker_hosts: the script defines none (absl would exit 2)
    assert spec.flag_names == {"job": "--job_name", "index": "--task_index", "hosts": None}
    override = legacy_launch(info, 2, 20)
    assert override.jobs == {"ps": 1, "worker": 2}
    assert any("--workers 2 replaces the script's 3 workers" in n for n in override.notes)


def test_env_var_cluster_with_docker_hostnames_fallback_and_sys_argv_roles():
    info = info_of("docker_env_cluster.py")
    cluster = info.script_cluster
    assert cluster.jobs == (("ps", 1), ("worker", 2))
    assert "TRAIN_CLUSTER" in cluster.how
    spec = legacy_launch(info, None, 20)
    assert spec.role_style == "argv" and spec.launcher_style == "flags"
    assert [spec.task_args("ps", 0), spec.task_args("worker", 1)] == [["ps", "0"], ["worker", "1"]]
    assert spec.env == {"NUM_STEPS": "20"}
    assert spec.flag_names == {"job": None, "index": None, "hosts": None}


def test_cluster_in_a_sibling_settings_module_and_absl_role_flags_of_other_names():
    info = info_of("settings_module/trainer.py")
    assert info.script_cluster.jobs == (("ps", 1), ("worker", 3))
    assert "cluster_hosts.py" in info.script_cluster.how
    spec = legacy_launch(info, None, 20)
    assert spec.flag_names["job"] == "--job" and spec.flag_names["index"] == "--task"
    # hard-coded output directories stay inside each run's directory
    assert "--max_steps=20" in spec.args and "--logdir={run_dir}/logdir" in spec.args
    # without the path its sibling module cannot be found: no fixed shape
    assert analyze((CLUSTERS / "settings_module" / "trainer.py").read_text()).script_cluster is None


def test_literal_server_def_with_a_hard_coded_role_runs_the_rest_as_standard_servers():
    info = info_of("serverdef_in_graph.py")
    assert info.script_cluster.jobs == (("worker", 3),) and info.script_cluster.how == "a literal ClusterDef"
    assert info.fixed_role[:2] == ("worker", 2)
    spec = legacy_launch(info, None, 20)
    assert spec.server_only == ("worker:0", "worker:1") and spec.fixed_task == "worker:2"
    assert spec.task_env("worker", 0) == {"TFMIGRATE_STD_SERVER": "1"} and spec.task_env("worker", 2) == {}
    assert "--train-steps=20" in spec.args  # click's spelling
    assert spec.env == {"TFMIGRATE_DEVICE_FILTERS": "0"}  # filters would hide the tasks it places ops on


def test_environment_variables_a_script_deletes_are_set_for_it():
    source = (
        "import os\nimport tensorflow as tf\ndel os.environ['http_proxy']\n"
        "tf.app.flags.DEFINE_string('job_name', '', '')\ntf.train.replica_device_setter(cluster=None)\n"
    )
    assert legacy_launch(analyze(source), 2, 5).env == {"http_proxy": ""}


def test_flag_choosing_among_literal_clusters():
    info = info_of("deploy_choice.py")
    jobs, value = info.script_cluster.jobs, info.script_cluster.choice[1]
    assert (value, jobs) == ("pair", (("ps", 1), ("worker", 2)))  # the flag's own default
    spec = legacy_launch(info, None, 20)
    assert "--deploy_mode=pair" in spec.args and spec.jobs == {"ps": 1, "worker": 2}


def test_role_found_by_looking_the_machines_address_up_in_the_host_lists():
    info = info_of("ip_lookup.py")
    assert info.role_style == "match"
    spec = legacy_launch(info, None, 20)
    assert [spec.task_args("ps", 0), spec.task_args("worker", 1)] == [["--ip=10.1.0.5"], ["--ip=10.1.0.7"]]


def test_roles_from_environment_variables():
    spec = legacy_launch(info_of("env_roles.py"), None, 20)
    assert spec.role_style == "env"
    assert spec.task_env("worker", 1) == {"JOB_NAME": "worker", "TASK_INDEX": "1"}
    assert spec.jobs == {"ps": 1, "worker": 2}


def test_click_and_hand_parsed_role_flags_are_found():
    click_script = (
        "import click\nimport tensorflow as tf\n"
        "@click.command()\n@click.option('--job-name')\n@click.option('--task-index', type=int)\n"
        "def main(job_name, task_index):\n"
        "    tf.train.replica_device_setter(cluster=None)\n"
    )
    spec = legacy_launch(analyze(click_script), 2, 5)
    assert spec.flag_names["job"] == "--job-name" and spec.flag_names["index"] == "--task-index"
    by_hand = (
        "import sys\nimport tensorflow as tf\n"
        "for arg in sys.argv[1:]:\n"
        "    if arg.startswith('--job_name='):\n        job = arg.split('=')[1]\n"
        "    if arg.startswith('--task_index='):\n        index = int(arg.split('=')[1])\n"
        "tf.train.replica_device_setter(cluster=None)\n"
    )
    spec = legacy_launch(analyze(by_hand), 2, 5)
    assert spec.flag_names["job"] == "--job_name" and spec.flag_names["index"] == "--task_index"


def test_clusters_from_flags_or_tf_config_are_the_launchers_to_shape():
    flags_script = (
        "import tensorflow as tf\n"
        "tf.app.flags.DEFINE_string('ps_hosts', 'localhost:2222', '')\n"
        "tf.app.flags.DEFINE_string('worker_hosts', 'localhost:2223,localhost:2224,localhost:2225', '')\n"
        "FLAGS = tf.app.flags.FLAGS\n"
        "cluster = tf.train.ClusterSpec({'ps': FLAGS.ps_hosts.split(','), 'worker': FLAGS.worker_hosts.split(',')})\n"
    )
    assert find_script_cluster(ast.parse(flags_script)) is None


# --------------------------------------------------------------------------- fail fast, with a located reason


def test_script_whose_tasks_cannot_be_told_apart_is_refused_with_its_line(tmp_path):
    with pytest.raises(TopologyError, match=r"SLURM_PROCID \(line 7\).*--job_name/--task_index"):
        legacy_launch(info_of("slurm_rank.py"), None, 20)
    no_role = tmp_path / "no_role.py"
    no_role.write_text(
        "import tensorflow.compat.v1 as tf\n"
        "cluster = tf.train.ClusterSpec({'ps': ['a:1'], 'worker': ['b:1']})\n"
        "server = tf.train.Server(cluster, job_name=pick_job(), task_index=0)\n"
        "with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n    pass\n"
    )
    start = time.monotonic()
    code = check.main([str(no_role), str(no_role), "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 2 and time.monotonic() - start < 30
    assert "tf.train.Server (line 3)" in report["reason"] and "--job_name" in report["reason"]
    assert not list((tmp_path / "out").glob("*-run*"))  # nothing was started


# ours: a batch generator reading a data file the script does not ship, reached from main()
READS_DATA = """
import numpy as np
import tensorflow.compat.v1 as tf

tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
tf.app.flags.DEFINE_integer("task_index", 0, "index")
tf.app.flags.DEFINE_string("labels_file", "labels/train.tsv", "labels")
FLAGS = tf.app.flags.FLAGS


def batches(path):
    with open(path) as f:
        for line in f:
            yield np.array([float(v) for v in line.split()])


def labels():
    return np.loadtxt(FLAGS.labels_file)


def optional_vocabulary():
    try:
        return open("vocab.txt").read().split()
    except IOError:
        return []


def write_summary():
    with open("summary.txt", "w") as f:
        f.write("done")


def main(_):
    cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    optional_vocabulary()
    y = labels()
    for xs in batches("./samples/part-0.txt"):
        pass
    write_summary()
    if FLAGS.job_name == "ps":
        server.join()
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        pass


def unused():
    return open("never-read.txt").read()


if __name__ == "__main__":
    tf.app.run()
"""


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def test_input_files_a_script_reads_and_does_not_ship_are_found_statically(tmp_path):
    found = missing_inputs(READS_DATA, str(tmp_path))
    assert [(m.path, m.line, m.option) for m in found] == [
        ("./samples/part-0.txt", line_of(READS_DATA, "open(path)"), None),
        ("labels/train.tsv", line_of(READS_DATA, "np.loadtxt"), "labels_file")]
    assert f"the path batches() is given at line {line_of(READS_DATA, 'in batches(')}" in found[0].message()
    assert "--labels_file=PATH" in found[1].message()
    # present where the tasks run: nothing to say
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "part-0.txt").write_text("1 2\n")
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "train.tsv").write_text("1\n")
    assert missing_inputs(READS_DATA, str(tmp_path)) == []


def test_a_missing_input_file_stops_check_before_anything_starts(tmp_path):
    legacy = tmp_path / "reads_data.py"
    legacy.write_text(READS_DATA)
    start = time.monotonic()
    code = check.main([str(legacy), str(legacy), "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 2 and time.monotonic() - start < 30
    read, given = line_of(READS_DATA, "open(path)"), line_of(READS_DATA, "in batches(")
    assert f"line {read} (the path batches() is given at line {given}) reads ./samples/part-0.txt" in report["reason"]
    assert "--labels_file=PATH" in report["reason"]
    assert not list((tmp_path / "out").glob("*-run*"))  # nothing was started
    # the option given after `--`: that file is no longer the script's default
    code = check.main([str(legacy), str(legacy), "--out", str(tmp_path / "out2"), "--", "--labels_file=x.tsv"])
    reason = json.loads((tmp_path / "out2" / "report.json").read_text())["reason"]
    assert code == 2 and "labels/train.tsv" not in reason and "part-0.txt" in reason


FAKE_TASK = """
import json, os, socket, sys, time
task = os.environ["TFMIGRATE_TASK"]
behaviour = os.environ.get("FAKE_" + task.replace(":", "_"), "")
print("task", task, "cluster", os.environ.get("TFMIGRATE_CLUSTER"), flush=True)
job, index = task.split(":")
if job == "ps" and behaviour != "wrong_port":  # a server on the launcher's port
    host, port = json.loads(os.environ["TFMIGRATE_CLUSTER"])[job][int(index)].split(":")
    listener = socket.socket()
    listener.bind((host, int(port)))
    listener.listen()
if behaviour == "wrong_port":
    print("I0000 server_lib.cc] Started server with target: grpc://localhost:2222", flush=True)
elif behaviour == "waits_for_absent":
    print("I0000 master.cc] CreateSession still waiting for response from worker: /job:worker/replica:0/task:7",
          flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize(
    "task, behaviour, expected",
    [
        ("ps:0", "wrong_port", "ps:0 started its gRPC server on localhost:2222, not on the launcher's"),
        ("worker:0", "waits_for_absent", "worker:0 waits for /job:worker/task:7, which is not a task"),
    ],
)
def test_a_cluster_that_does_not_form_stops_the_run_at_once(tmp_path, task, behaviour, expected):
    program = tmp_path / "fake_task.py"
    program.write_text(FAKE_TASK)
    start = time.monotonic()
    result = run_cluster(
        program, {"ps": 1, "worker": 2}, flag_names={"job": None, "index": None, "hosts": None},
        timeout=120, log_dir=tmp_path / "logs", env={f"FAKE_{task.replace(':', '_')}": behaviour},
    )
    assert not result.ok and not result.timed_out
    assert expected in result.reason
    assert time.monotonic() - start < 30
    assert not any(pid_alive(t.pid) for t in result.tasks if t.pid)
    # every task got the launcher's cluster, for the harness to map onto
    cluster = json.loads(result.log_text("ps", 0).split("cluster ", 1)[1].splitlines()[0])
    assert cluster == result.cluster


def test_migrated_program_that_does_not_compile_is_reported_before_it_runs(tmp_path):
    broken = tmp_path / "broken_migration.py"
    # parses (ast, libcst) but does not compile: what a codemod can produce
    broken.write_text("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\nprint(sep='', sep=' ')\n")
    legacy = tmp_path / "legacy.py"
    legacy.write_text((CLUSTERS / "docker_env_cluster.py").read_text())
    code, report = run_check(legacy, broken, tmp_path)
    assert code == 2
    assert report["reason"].startswith(f"the migrated program {broken} does not compile (line 3: keyword argument")
    assert not list((tmp_path / "out").glob("migrated-run*"))


# --------------------------------------------------------------------------- the harness maps the cluster


def test_harness_maps_every_task_onto_the_launchers_cluster():
    harness = _Harness.__new__(_Harness)
    harness.launcher_cluster = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"], "ps": ["127.0.0.1:4"]}
    harness.cluster_map, harness.address_map = {}, {}
    mapped = harness.map_cluster({"ps": {0: "pc-01:2222"}, "worker": {0: "pc-02:2222", 1: "pc-03:2222"}})
    assert mapped == {
        "ps": {0: "127.0.0.1:4"}, "worker": {0: "127.0.0.1:2", 1: "127.0.0.1:3"}, "chief": {0: "127.0.0.1:1"},
    }
    assert harness.cluster_map["worker:1"] == {"script": "pc-03:2222", "launcher": "127.0.0.1:3"}
    assert harness.cluster_map["chief:0"] == {"script": None, "launcher": "127.0.0.1:1"}
    assert harness.address_map["pc-02:2222"] == "127.0.0.1:2"
    # clusters sharing no job with the launcher's (TF's own, empty ones) are left alone
    assert harness.map_cluster({"localhost": {0: "localhost:5"}}) is None
    assert harness.map_cluster({}) is None


def run_check(legacy: Path, migrated: Path, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    code = check.main([str(legacy), str(migrated), "--out", str(tmp_path / "out"), "--steps", "6", *extra])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    return code, report


def test_docker_hostnames_cluster_runs_on_loopback_and_records_the_legacy_losses(tmp_path):
    """The script's cluster names docker services that resolve nowhere here;
    its role comes by sys.argv position. Given a migration that names no
    strategy, check does not compare, but the legacy side runs on the
    launcher's ports and its losses are in the report, with the mapping."""
    legacy = CLUSTERS / "docker_env_cluster.py"
    code, report = run_check(legacy, legacy, tmp_path)
    assert code == 2 and "uses no tf.distribute strategy" in report["reason"]
    run = report["legacy"]["runs"][0]
    assert run["records"] >= 6 and run["losses"]  # 6 global steps, shared by the two workers
    mapping = run["cluster_map"]
    assert mapping["ps:0"]["script"] == "paramserver:2222"
    assert mapping["worker:1"]["script"] == "trainer-b:2222"
    assert all(entry["launcher"].startswith("127.0.0.1:") for entry in mapping.values())
    assert "paramserver:2222 -> 127.0.0.1:" in check.render_table(report)
    assert not any(pid_alive(pid) for pids in run["pids"].values() for pid in pids)


def test_in_graph_client_of_a_server_def_gets_standard_servers_and_its_session_target_mapped(tmp_path):
    legacy = CLUSTERS / "serverdef_in_graph.py"
    broken = tmp_path / "broken_migration.py"  # not compared: the legacy side runs alone
    broken.write_text("print(sep='', sep=' ')\n")
    code, report = run_check(legacy, broken, tmp_path)
    assert code == 2 and "does not compile" in report["reason"]
    run = report["legacy"]["runs"][0]
    assert len(run["losses"]) == 6
    assert run["cluster_map"]["worker:0"]["script"] == "lab-node-1:2222"
    assert any("session target mapped" in note for note in run["harness_fired"])
    assert report["legacy"]["launch"]["fixed_task"] == "worker:2"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


DOWNPOUR_SHAPE = """
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
w = tf.get_variable("w", [1], initializer=tf.zeros_initializer())
loss = tf.reduce_mean(tf.square(w - 3.0))
local = tf.train.GradientDescentOptimizer(0.1)
grads_and_vars = local.compute_gradients(loss)
local_step = local.apply_gradients(grads_and_vars)
# the gradients, summed over a window, applied again by a global optimizer
summed = [(g * 2.0, v) for g, v in grads_and_vars]
global_update = tf.train.AdagradOptimizer(0.1).apply_gradients(summed)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
        sess.run([global_update, loss])
"""


def test_harness_records_a_global_update_of_gradients_computed_by_another_optimizer(tmp_path):
    program = tmp_path / "downpour_shape.py"
    program.write_text(DOWNPOUR_SHAPE)
    env = {
        **os.environ, "TFMIGRATE_BOOT_HOOKS": "migrate.runtime.harness", "TFMIGRATE_HARNESS": "record",
        "TFMIGRATE_HARNESS_DIR": str(tmp_path / "h"), "PYTHONPATH": str(ROOT),
    }
    import subprocess

    subprocess.run([sys.executable, "-m", "migrate.runtime.taskboot", str(program)], env=env, check=True,
                   timeout=120, capture_output=True)
    records = [json.loads(line) for line in (tmp_path / "h" / "harness-losses-worker-0.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2]
    assert records[0]["loss"] == pytest.approx(9.0)


def test_a_legacy_non_chief_worker_failing_by_itself_points_to_one_worker(tmp_path):
    def result(reason):
        return ClusterResult(False, reason, False, [], [], {}, tmp_path, 1.0, [])

    crash = "worker:1 raised an uncaught exception (RuntimeError: Writing a summary requires a summary writer.)"
    two = LaunchSpec(None, {"ps": 1, "worker": 2}, "flags", ("ps",))
    hint = check._non_chief_hint("legacy", two, result(crash))
    assert "fails by itself on worker:1" in hint and "`--workers 1`" in hint
    # the chief failing, a migrated side, or a TF1 job with a chief of its own: no such hint
    assert check._non_chief_hint("legacy", two, result(crash.replace("worker:1", "worker:0"))) == ""
    assert check._non_chief_hint("migrated", two, result(crash)) == ""
    master = LaunchSpec(None, {"ps": 1, "master": 1, "worker": 2}, "flags", ("ps",))
    assert check._non_chief_hint("legacy", master, result(crash)) == ""


SUMMARIES_ON_EVERY_WORKER = """
import tensorflow.compat.v1 as tf
tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
tf.app.flags.DEFINE_integer("task_index", 0, "index")
FLAGS = tf.app.flags.FLAGS
with tf.device(tf.train.replica_device_setter(cluster=None)):
    step = tf.train.get_or_create_global_step()
sv = tf.train.Supervisor(is_chief=FLAGS.task_index == 0, logdir="/tmp/run", summary_op=None)
with sv.managed_session("") as sess:
    summary = sess.run(tf.summary.merge_all())
    sv.summary_computed(sess, summary)
"""


def test_code_only_a_tf1_chief_can_run_run_by_every_worker_launches_the_chief_alone():
    info = analyze(SUMMARIES_ON_EVERY_WORKER)
    assert info.chief_only[0] == 11 and "summary_computed" in info.chief_only[1]
    spec = legacy_launch(info, None, 20)
    assert spec.jobs == {"ps": 1, "worker": 1}
    assert any(n.startswith("1 worker: every worker runs sv.summary_computed") and "(line 11)" in n
               for n in spec.notes)
    assert legacy_launch(info, 3, 20).jobs == {"ps": 1, "worker": 3}  # asked for: as asked
    # guarded by the chief test, or a writer of its own: every worker runs it
    for guarded in (
        SUMMARIES_ON_EVERY_WORKER.replace("    sv.summary_computed", "    if FLAGS.task_index == 0:\n"
                                          "        sv.summary_computed"),
        SUMMARIES_ON_EVERY_WORKER.replace('summary_op=None)', 'summary_op=None, summary_writer=None)'),
    ):
        assert analyze(guarded).chief_only is None
        assert legacy_launch(analyze(guarded), None, 20).jobs == {"ps": 1, "worker": 2}
