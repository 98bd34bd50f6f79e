"""ParameterServerStrategy coordinates from a ``chief`` task. A TF1 cluster
written as literal host lists has none: TFM201 adds a literal chief address
beside them (the first worker's host, on the next port the cluster leaves
free there), and a job-name flag restricted to ps/worker accepts it, so the
migrated program runs as written with one more process."""

from __future__ import annotations

import json
from pathlib import Path

from migrate.codemod.engine import dedent, migrate_source
from migrate.runtime import check

ROOT = Path(__file__).resolve().parent.parent
LITERAL = ROOT / "tests" / "data" / "check" / "clusters" / "literal_hosts_no_chief.py"


def _program(cluster_lines: str) -> str:
    return dedent(
        """
        import tensorflow as tf
        {cluster}
        tf.app.flags.DEFINE_string("job_name", "", "ps or worker")
        tf.app.flags.DEFINE_integer("task_index", 0, "index")
        FLAGS = tf.app.flags.FLAGS
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        setter = tf.train.replica_device_setter(cluster=cluster)
        """
    ).format(cluster=cluster_lines)


def test_names_bound_to_literal_lists_get_a_chief_on_the_first_workers_host():
    source = _program(
        'ps_list = ["node-a:2222"]\n'
        'workers = ["node-b:2222", "node-c:2222", "node-b:2223"]\n'
        'cluster = tf.train.ClusterSpec({"ps": ps_list, "worker": workers})'
    )
    result = migrate_source(source, select=["TFM201"])
    # node-b already serves on 2222 and 2223: the chief takes 2224 there
    assert 'ClusterSpec({"ps": ps_list, "worker": workers, "chief": ["node-b:2224"]})' in result.output
    chief = [d for d in result.diagnostics if "added a chief entry" in d.message]
    assert len(chief) == 1 and chief[0].fixed and "`node-b:2224`" in chief[0].message
    assert chief[0].line == 4  # the ClusterSpec line of the input
    assert not result.manual_work
    assert migrate_source(result.output, select=["TFM201"]).output == result.output


def test_a_cluster_that_already_has_a_chief_or_is_not_all_literal_is_left_alone():
    with_chief = _program('cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"], "chief": ["c:1"]})')
    assert '"chief": ["c:1"]})' in migrate_source(with_chief, select=["TFM201"]).output
    assert migrate_source(with_chief, select=["TFM201"]).output.count('"chief"') == 1
    # a worker list computed at run time: no address can be chosen, it is reported
    computed = _program('cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:%d" % p for p in (1, 2)]})')
    result = migrate_source(computed, select=["TFM201"])
    assert '"chief"' not in result.output
    assert [d.code for d in result.manual_work] == ["TFM201"]
    assert "needs a 'chief'" in result.manual_work[0].message


def test_migrated_tutorial_shape_has_a_chief_task_its_flags_accept():
    result = migrate_source(LITERAL.read_text(), path=str(LITERAL))
    out = result.output
    assert '"worker": trainer_hosts, "chief": ["localhost:2325"]})' in out
    assert 'DEFINE_enum("job_name", "worker", ["ps", "worker", "chief"]' in out
    assert "tf.distribute.ParameterServerStrategy(cluster_resolver)" in out
    assert not result.manual_work, [d.message for d in result.manual_work]
    compile(out, "<migrated>", "exec")
    assert migrate_source(out).output == out


def test_migrated_tutorial_shape_runs_with_its_own_chief_and_trains_the_same(tmp_path):
    """On the launcher: the migrated program's cluster has the chief entry
    (the harness maps it, it does not have to add one) and one worker's
    asynchronous steps match the legacy job's step by step."""
    migrated = tmp_path / "migrated.py"
    migrated.write_text(migrate_source(LITERAL.read_text(), path=str(LITERAL)).output)
    out = tmp_path / "out"
    code = check.main([str(LITERAL), str(migrated), "--out", str(out), "--steps", "4", "--workers", "1",
                       "--runs", "1", "--no-plot"])
    report = json.loads((out / "report.json").read_text())
    assert code == 0, report["reason"]
    assert report["verdict"] == "equivalent" and report["comparison"]["steps_compared"] == 4
    mapping = report["migrated"]["runs"][0]["cluster_map"]
    assert mapping["chief:0"]["script"] == "localhost:2325"
    assert "chief:0" not in report["legacy"]["runs"][0]["cluster_map"]


def test_a_cluster_function_returning_a_literal_or_an_environment_value_gets_the_chief_in_its_literal():
    """``ClusterSpec(cluster_from_env())``: the function returns the
    environment's JSON or a literal of docker service names. The literal
    gets its chief where it is written; the environment's cluster is the
    launcher's to give one, which a diagnostic says."""
    path = ROOT / "tests" / "data" / "check" / "clusters" / "docker_env_cluster.py"
    result = migrate_source(path.read_text(), path=str(path))
    out = result.output
    assert ('return {"ps": ["paramserver:2222"], "worker": ["trainer-a:2222", "trainer-b:2222"],'
            ' "chief": ["trainer-a:2223"]}') in out
    assert out.count('"chief": [') == 1
    [manual] = [d for d in result.manual_work if d.code == "TFM201"]
    assert "`cluster_from_env()` from `json.loads(raw)` must have a \"chief\" job" in manual.message
    assert "tf.distribute.ParameterServerStrategy(cluster_resolver)" in out
    compile(out, "<migrated>", "exec")
    assert migrate_source(out, path=str(path)).output == out
