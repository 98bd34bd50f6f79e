"""The cluster and the server built in a helper and handed to the training.

Fixtures in ``tests/data/cluster_params/`` (ours, in the shapes real
programs have): ``make_cluster()`` returning the ClusterSpec and the server,
a ``serve_if_ps(server)`` helper joining the ps, the training function given
both; a ``create_server(cluster_spec)`` helper returning the server alone,
the ps joining in ``main()`` and the workers passing ``server.target`` as
the training's ``master`` with the cluster as ``cluster_spec``; a synchronous
``define_cluster()`` returning the cluster, the server and the worker count,
``start_server(server)`` and ``run_worker(...)`` whose device-setter block calls
the function that builds the train op and the session. TFM202 puts the
resolver TFM201 builds beside the server in the server's place on every way
it goes, so TFM301 builds the strategy from it where the training is.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source
from migrate.runtime import check
from tests.tfm301_support import migrate

DATA = Path(__file__).resolve().parent / "data" / "cluster_params"


def _migrated(name: str):
    path = DATA / name
    result = migrate_source(path.read_text(), path=str(path))
    compile(result.output, name, "exec")
    assert migrate_source(result.output, path=str(path)).output == result.output
    return result


def _function(code: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.FunctionDef) and n.name == name)


def _strategy_resolver(function: ast.FunctionDef) -> str:
    """The code of the cluster resolver the strategy made in ``function`` is given."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Strategy"):
            given = node.args or [k.value for k in node.keywords if k.arg == "cluster_resolver"]
            return ast.unparse(given[0])
    raise AssertionError(f"no strategy in {function.name}()")


def _params(function: ast.FunctionDef) -> list[str]:
    return [a.arg for a in function.args.args]


def test_helper_returning_cluster_and_server_trains_on_a_parameter_server_strategy_from_the_resolver():
    result = _migrated("helper_returns_cluster_and_server.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.train.Server" not in out and "replica_device_setter" not in out
    # the helper returns the resolver in the server's place, the caller unpacks and hands it on
    make_cluster = _function(out, "make_cluster")
    assert ast.unparse(make_cluster.body[-1]) == "return (spec, cluster_resolver)"
    assert "cluster, cluster_resolver = make_cluster()" in out
    fit = _function(out, "fit")
    assert _params(fit) == ["cluster", "cluster_resolver"]
    assert _strategy_resolver(fit) == "cluster_resolver"
    assert "tf.distribute.ParameterServerStrategy" in ast.unparse(fit)
    # the ps's join became the serving branch of the ps and worker tasks
    serve = ast.unparse(_function(out, "serve_if_ps"))
    assert "if FLAGS.job_name in ('ps', 'worker'):" in serve
    assert "server = tf.distribute.Server(cluster_resolver.cluster_spec(), job_name=cluster_resolver.task_type" in serve
    assert serve.rstrip().endswith("server.join()")
    assert any(d.code == "TFM202" and d.fixed and "`serve_if_ps()`" in d.message for d in result.diagnostics)


def test_server_returned_alone_and_its_target_passed_as_master_become_the_resolver():
    result = _migrated("server_alone_target_as_master.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.train.Server" not in out
    create = _function(out, "create_server")
    # the resolver reads the spec by the helper's own parameter name
    assert "SimpleClusterResolver(cluster_spec, task_type=FLAGS.job_name" in ast.unparse(create)
    assert ast.unparse(create.body[-1]) == "return cluster_resolver"
    assert "# one server per task" not in out  # the comment was about the TF1 server
    train = _function(out, "train")
    assert _params(train) == ["cluster_resolver", "cluster_spec"]
    assert _strategy_resolver(train) == "cluster_resolver"
    main = ast.unparse(_function(out, "main"))
    assert "cluster_resolver = create_server(cluster)" in main
    assert "train(cluster_resolver, cluster_spec=cluster)" in main
    assert "if FLAGS.job_name in ('ps', 'worker'):" in main


def _with_serving_helper(source: str) -> str:
    """The ps sent to a helper that only serves (`run_ps(server)`), called in
    main()'s own `if job_name == "ps":` branch."""
    return source.replace('''def serve_if_ps(server):
    if FLAGS.job_name == "ps":
        print("parameter server %d serving" % FLAGS.task_index)
        server.join()
''', '''def run_ps(server):
    print("parameter server %d serving" % FLAGS.task_index)
    server.join()
''').replace("    serve_if_ps(server)\n    fit(cluster, server)",
              '    if FLAGS.job_name == "ps":\n        run_ps(server)\n    else:\n        fit(cluster, server)')


def test_a_helper_that_only_serves_the_ps_starts_the_tf2_server_for_ps_and_workers():
    source = _with_serving_helper((DATA / "helper_returns_cluster_and_server.py").read_text())
    assert "run_ps(server)" in source
    result = migrate(source)
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    run_ps = ast.unparse(_function(out, "run_ps"))
    assert "server = tf.distribute.Server(cluster_resolver.cluster_spec()" in run_ps
    assert run_ps.rstrip().endswith("server.join()")
    main = ast.unparse(_function(out, "main"))
    assert "if FLAGS.job_name in ('ps', 'worker'):\n        run_ps(cluster_resolver)\n    else:" in main
    assert _strategy_resolver(_function(out, "fit")) == "cluster_resolver"


def test_under_multi_worker_mirrored_the_serving_helper_goes_with_the_ps():
    source = _with_serving_helper((DATA / "helper_returns_cluster_and_server.py").read_text()).replace(
        "train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)",
        "opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.05), replicas_to_aggregate=2,"
        " total_num_replicas=2)\n        train_op = opt.minimize(loss, global_step=global_step)").replace(
        "hooks = [tf.train.StopAtStepHook", "hooks = [opt.make_session_run_hook(FLAGS.task_index == 0),"
        " tf.train.StopAtStepHook")
    result = migrate(source)
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "run_ps" not in out and "job_name ==" not in ast.unparse(_function(out, "main"))
    assert "fit(cluster, cluster_resolver)" in out
    assert "MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in out
    assert any(d.code == "TFM202" and "`run_ps()`, which only sent the ps to join, removed" in d.message
               for d in result.diagnostics)


def test_spec_returned_by_get_cluster_and_target_passed_as_master_train_on_the_resolver():
    """``return tf.train.ClusterSpec(...)``: the resolver is built where the
    caller named the spec, next to the server, and carried with the target."""
    result = _migrated("spec_from_get_cluster_target_as_master.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert '"chief": FLAGS.chief_hosts.split(",")})' in ast.unparse(_function(out, "get_cluster")).replace("'", '"')
    main = ast.unparse(_function(out, "main"))
    assert "cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type=" in main
    assert "fit(cluster, cluster_resolver)" in main and "tf.train.Server" not in out
    fit = _function(out, "fit")
    assert _params(fit) == ["cluster", "cluster_resolver"]
    assert _strategy_resolver(fit) == "cluster_resolver"


def test_spec_handed_on_as_cluster_spec_gets_its_resolver_by_that_name():
    """The Server is built in the training function from its `cluster_spec`
    parameter: the resolver reads that name, not the caller's `cluster`."""
    result = _migrated("spec_passed_as_cluster_spec.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    train = _function(out, "train")
    assert "SimpleClusterResolver(cluster_spec, task_type=FLAGS.job_name" in ast.unparse(train)
    assert _strategy_resolver(train) == "cluster_resolver"
    assert "if FLAGS.job_name in ('ps', 'worker'):" in ast.unparse(train)


def test_a_returned_target_becomes_the_returned_resolver():
    result = _migrated("target_returned_with_spec.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    helper = _function(out, "cluster_and_target")
    assert ast.unparse(helper.body[-1]) == "return (cluster_spec, cluster_resolver)"
    assert "if FLAGS.job_name in ('ps', 'worker'):" in ast.unparse(helper)
    main = _function(out, "main")
    assert "cluster, cluster_resolver = cluster_and_target()" in ast.unparse(main)
    assert _strategy_resolver(main) == "cluster_resolver"


def test_another_return_of_something_else_keeps_the_server():
    """`return None, ""` for a single-machine run: the caller would get no
    resolver on that path."""
    source = (DATA / "target_returned_with_spec.py").read_text().replace(
        "    cluster_spec = tf.train.ClusterSpec", '    if not FLAGS.ps_hosts:\n        return None, ""\n'
        "    cluster_spec = tf.train.ClusterSpec")
    result = migrate_source(source, path=str(DATA / "local_return.py"))
    compile(result.output, "<migrated>", "exec")
    assert "cluster_resolver" not in result.output
    [reason] = [d for d in result.manual_work if d.code == "TFM301"]
    assert '`return None, ""` returns `""` where `cluster_and_target()` otherwise returns' in reason.message
    assert reason.line == next(i for i, t in enumerate(source.splitlines(), 1) if 'return None, ""' in t)


def test_synchronous_define_cluster_shape_trains_on_multi_worker_mirrored_from_the_resolver():
    result = _migrated("sync_cluster_from_define_cluster.py")
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.train.Server" not in out and "tf.train.SyncReplicasOptimizer" not in out
    # no ps under MultiWorkerMirroredStrategy: the helper that only joined it is gone with its call
    assert "start_server" not in out
    assert "'ps'" not in ast.unparse(_function(out, "define_cluster"))
    run_worker = _function(out, "run_worker")
    assert _params(run_worker) == ["cluster", "cluster_resolver", "num_workers"]
    assert _strategy_resolver(run_worker) == "cluster_resolver"
    assert "tf.distribute.MultiWorkerMirroredStrategy" in ast.unparse(run_worker)
    assert "cluster, cluster_resolver, num_workers = define_cluster()" in out
    # its docstring's entry for the server describes what is returned in its place
    doc = ast.get_docstring(_function(out, "define_cluster"))
    assert "cluster_resolver: the cluster, and this task's job name and index in it." in doc
    assert "server" not in doc


_PRINTED_TARGET = (DATA / "helper_returns_cluster_and_server.py").read_text().replace(
    "    hooks = [tf.train.StopAtStepHook", '    print("training on %s" % server.target)\n'
    "    hooks = [tf.train.StopAtStepHook")


def test_the_target_kept_in_a_local_first_goes_with_the_session():
    """``master = server.target`` then ``MonitoredTrainingSession(master=master)``."""
    source = (DATA / "helper_returns_cluster_and_server.py").read_text().replace(
        "    with tf.train.MonitoredTrainingSession(master=server.target,",
        "    master = server.target\n    with tf.train.MonitoredTrainingSession(master=master,")
    assert "master = server.target" in source
    result = migrate(source)
    out = result.output
    assert not result.manual_work, [d.message for d in result.manual_work]
    fit = _function(out, "fit")
    assert _strategy_resolver(fit) == "cluster_resolver"
    assert "master" not in ast.unparse(fit) and "cluster_resolver = cluster_resolver" not in out


def test_a_use_the_resolver_cannot_stand_in_for_keeps_the_cluster_and_says_where():
    result = migrate_source(_PRINTED_TARGET, path=str(DATA / "printed_target.py"))
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "train.Server(spec" in out and "cluster_resolver" not in out
    line = next(i for i, text in enumerate(_PRINTED_TARGET.splitlines(), 1) if "training on" in text)
    training = [d for d in result.manual_work if d.code == "TFM301"]
    assert [d.line for d in training] == [line]
    assert "this task's TF1 server is built in `make_cluster()` and reaches `fit()`" in training[0].message
    assert 'print("training on %s" % server.target)' in training[0].message
    server = next(d for d in result.manual_work if d.code == "TFM202")
    assert "the server's target is used in" in server.message


@pytest.mark.parametrize("change, why", [
    # given to a class of the module: not a function whose parameter could follow
    ("    fit(cluster, server)\n", "    Trainer(server)\n    fit(cluster, server)\n"),
    # bound again on the way
    ("    serve_if_ps(server)\n", "    serve_if_ps(server)\n    server = None\n"),
])
def test_other_uses_of_the_handed_server_are_named(change, why):
    source = _PRINTED_TARGET.replace('    print("training on %s" % server.target)\n', "")
    source = source.replace(change, why).replace("def main(_):", "class Trainer:\n    def __init__(self, server):\n"
                                                 "        self.server = server\n\n\ndef main(_):")
    result = migrate_source(source, path=str(DATA / "other_use.py"))
    compile(result.output, "<migrated>", "exec")
    assert "train.Server(spec" in result.output
    expected = "`Trainer(...)`, not a function of this module" if "Trainer(server)" in why else (
        "`server` is bound again in `main()`")
    assert any(expected in d.message for d in result.manual_work if d.code in ("TFM202", "TFM301")), [
        d.message for d in result.manual_work]


def test_a_call_giving_the_training_something_else_than_the_server_keeps_it():
    """``train("", ...)`` runs in-process when no cluster is given: the
    parameter cannot become the resolver for that call."""
    source = (DATA / "server_alone_target_as_master.py").read_text().replace(
        "def main(_):\n", 'def main(_):\n    if not FLAGS.ps_hosts:\n        return train("", cluster_spec=None)\n')
    result = migrate_source(source, path=str(DATA / "local_run.py"))
    compile(result.output, "<migrated>", "exec")
    assert "train.Server(cluster_spec" in result.output and "cluster_resolver" not in result.output
    reasons = [d.message for d in result.manual_work if d.code in ("TFM202", "TFM301")]
    assert any("""`train("", cluster_spec=None)` gives `train()` `""` for `master`""" in m for m in reasons), reasons


def test_a_tf1_session_left_on_the_carried_resolver_keeps_the_whole_cluster_tf1():
    """A helper of the program opens its own TF1 session on the server's
    target, which TFM301 does not migrate: the resolver would stand where a
    master was, so the cluster rules stand back and nothing runs half-TF1."""
    source = (DATA / "helper_returns_cluster_and_server.py").read_text().replace(
        "def main(_):", "def show(master):\n    with tf.Session(master) as sess:\n"
        "        print(sess.run(tf.constant(1)))\n\n\ndef main(_):").replace(
        "    fit(cluster, server)\n", "    fit(cluster, server)\n    show(server.target)\n")
    result = migrate_source(source, path=str(DATA / "session_helper.py"))
    out = result.output
    compile(out, "<migrated>", "exec")
    assert "cluster_resolver" not in out and "train.Server(spec" in out
    assert any(d.code == "TFM201" and "not migrated" in d.message for d in result.manual_work)


def test_a_server_used_only_where_it_is_built_keeps_the_branching_rewrite():
    result = migrate("""
        import tensorflow as tf

        def main(_):
            cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
            server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
            if FLAGS.job_name == "ps":
                server.join()
            else:
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    pass
    """, select=["TFM201", "TFM202"])
    assert "cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(" in result.output
    assert 'if FLAGS.job_name in ("ps", "worker"):' in result.output
    assert not any("handed on" in d.message for d in result.diagnostics)


def _check(legacy: Path, migrated_code: str, tmp_path: Path, *args: str) -> dict:
    migrated = tmp_path / "migrated.py"
    migrated.write_text(migrated_code)
    out = tmp_path / "out"
    code = check.main([str(legacy), str(migrated), "--out", str(out), "--runs", "1", "--no-plot", *args])
    report = json.loads((out / "report.json").read_text())
    assert code == 0, report["reason"]
    assert report["verdict"] == "equivalent"
    return report


def test_synchronous_shape_trains_the_same_on_two_workers(tmp_path):
    """Legacy ps + 2 SyncReplicas workers vs the migrated 2-worker
    MultiWorkerMirroredStrategy job, step by step on a loopback cluster."""
    legacy = DATA / "sync_cluster_from_define_cluster.py"
    report = _check(legacy, _migrated(legacy.name).output, tmp_path, "--steps", "3", "--workers", "2")
    assert report["comparison"]["steps_compared"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["helper_returns_cluster_and_server.py", "server_alone_target_as_master.py",
                                  "spec_from_get_cluster_target_as_master.py", "spec_passed_as_cluster_spec.py",
                                  "target_returned_with_spec.py"])
def test_asynchronous_shapes_train_the_same_with_their_own_chief(name, tmp_path):
    legacy = DATA / name
    report = _check(legacy, _migrated(name).output, tmp_path, "--steps", "4", "--workers", "1")
    assert report["comparison"]["steps_compared"] == 4
    assert "chief:0" in report["migrated"]["runs"][0]["cluster_map"]
