"""Invariants of the codemod over every realistic fixture and reference
program: output parses, a second run changes nothing, code the rules did not
touch is byte-identical (comments included), no migrated output needs
tf-keras, and files without TensorFlow are left alone byte for byte.

(That the runnable ones train the same after migration is what
tests/test_check.py and tests/test_rewrites.py show on the launcher.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source, undefined_names
from migrate.codemod.orphans import removed_machinery
from migrate.codemod.py2 import convert as python2_to_3

ROOT = Path(__file__).resolve().parent.parent
REALISTIC = sorted((ROOT / "tests" / "fixtures" / "realistic").glob("*.py"))
REFERENCE = sorted((ROOT / "legacy_reference").glob("*.py"))
ALL = REALISTIC + REFERENCE


def _source(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    try:
        ast.parse(text)
    except SyntaxError:
        text, _ = python2_to_3(text)  # the CLI's Python 2 pre-pass
    return text


@pytest.fixture(scope="module", params=ALL, ids=lambda p: p.name)
def migrated(request):
    source = _source(request.param)
    return request.param, source, migrate_source(source, path=str(request.param))


def test_output_parses_and_is_idempotent(migrated):
    path, _, result = migrated
    ast.parse(result.output)
    assert result.changed, f"{path.name}: nothing migrated"
    again = migrate_source(result.output)
    assert again.output == result.output


def test_untouched_functions_and_comments_survive(migrated):
    """Helper functions the rules have no reason to touch (data, logging)
    keep their exact text; so do the module's leading comments/docstring
    (but for what describes TF1 machinery the program no longer has)."""
    path, source, result = migrated
    tree = ast.parse(source)
    gone = removed_machinery(source, result.output)
    output_names = {n.id for n in ast.walk(ast.parse(result.output)) if isinstance(n, ast.Name)}
    kept = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if node.name not in output_names and f"def {node.name}(" not in result.output:
                # a helper the migration left dead (a port probe, a report of an empty
                # RunMetadata) goes whole: nothing in the output calls it
                continue
            text = ast.get_source_segment(source, node)
            mentions_tf = re.search(r"\btf\.|tensorflow|FLAGS", text)
            if not mentions_tf:
                docstring = ast.get_docstring(node, clean=False) or ""
                if any(said.search(docstring) for said in gone):
                    # the statements after its docstring are untouched
                    for statement in node.body[1:]:
                        assert ast.get_source_segment(source, statement) in result.output, node.name
                else:
                    assert text in result.output, f"{path.name}: {node.name} changed"
                kept += 1
    # module-level comments (outside the rewritten training function) all
    # survive, but for those right above a helper the migration left without
    # callers and removed (a graph builder TFM300 inlined) and those about TF1
    # machinery the program no longer has
    lines = source.splitlines()
    defined_after = {n.name for n in ast.parse(result.output).body if isinstance(n, ast.FunctionDef)}
    went_with_helper = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in defined_after:
            above = node.lineno - 2
            while above >= 0 and lines[above].startswith("#"):
                went_with_helper.add(above)
                above -= 1
    about_gone = set()  # lines of a comment paragraph that names such machinery
    start = 0
    for n in range(len(lines) + 1):
        if n < len(lines) and lines[n].startswith("#"):
            continue
        if any(said.search(" ".join(lines[start:n])) for said in gone):
            about_gone.update(range(start, n))
        start = n + 1
    comments = [line for n, line in enumerate(lines)
                if line.startswith("#") and n not in went_with_helper and n not in about_gone]
    assert [c for c in comments if c not in result.output] == []
    # the module's leading comments and docstring, but for such paragraphs
    head = source.split("\nimport", 1)[0].split("\nfrom", 1)[0]
    head = "\n".join(line for n, line in enumerate(head.split("\n")) if n not in about_gone).lstrip("\n")
    if not any(said.search(ast.get_docstring(tree) or "") for said in gone):
        assert result.output.startswith(head[: max(0, len(head) - 1)])


def test_no_migrated_output_needs_legacy_keras(migrated):
    _, _, result = migrated
    for forbidden in ("tf_keras", "TF_USE_LEGACY_KERAS", "tf.compat.v1.keras", "keras.optimizers.legacy"):
        assert forbidden not in result.output


@pytest.mark.parametrize(
    "text",
    [
        "import numpy as np\n\n\ndef f(x):\n    return np.sum(x)  # no TF here\n",
        "# -*- coding: utf-8 -*-\r\nprint('tf.train.Server is only a string here')\r\n",
        "",
        "x = 1\n" * 1000,
    ],
    ids=["numpy", "crlf-string-only", "empty", "long"],
)
def test_files_without_tensorflow_are_untouched(text):
    result = migrate_source(text)
    assert result.output == text and not result.diagnostics and not result.changed


def test_estimator_script_is_migrated_to_a_strategy_loop():
    path = ROOT / "tests" / "fixtures" / "realistic" / "estimator_train_and_evaluate.py"
    result = migrate_source(path.read_text())
    assert not result.manual_work, result.manual_work
    assert any(d.code == "TFM403" and d.fixed for d in result.diagnostics)
    compile(result.output, str(path), "exec")
    assert "tf.estimator" not in result.output and "ParameterServerStrategy(" in result.output


def test_estimator_script_tfm403_declines_gets_located_diagnostics_naming_the_replacement():
    path = ROOT / "tests" / "fixtures" / "realistic" / "estimator_train_and_evaluate.py"
    # a hook the migration does not carry: the job stays an Estimator job, reported
    text = path.read_text().replace(
        "max_steps=FLAGS.train_steps)", "max_steps=FLAGS.train_steps,\n"
        "                                        hooks=[tf.train.StepCounterHook()])")
    result = migrate_source(text)
    assert any(d.code == "TFM403" and "`hooks`" in d.message for d in result.manual_work), result.diagnostics
    estimator = [d for d in result.manual_work if d.code == "TFM401"]
    assert estimator, result.diagnostics
    lines = text.splitlines()
    for d in estimator:
        assert "estimator" in lines[d.line - 1].lower() or "Spec" in lines[d.line - 1]
    assert any("Strategy" in (d.message + d.hint) for d in estimator)


def test_diagnostics_point_at_code_not_at_comments_or_docstrings_quoting_it():
    source = (
        '"""Usage: import tensorflow as tf, then tf.train.Server(...)."""\n'
        "# written for TF1: import tensorflow as tf\n"
        "import tensorflow as tf  # import tensorflow as tf\n"
        "server = tf.train.Server(cluster)  # tf.train.Server(cluster) starts gRPC\n"
    )
    result = migrate_source(source)
    where = {d.code: (d.line, d.column) for d in result.diagnostics}
    assert where["TFM101"] == (3, 1), result.diagnostics
    assert where["TFM901"] == (4, 10), result.diagnostics


# --------------------------------------------------------------------------- never a broken program

SERVER_STILL_USED = '''\
import tensorflow as tf


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    if not FLAGS.reuse_running_servers:
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 2])
        opt = tf.train.SyncReplicasOptimizer(tf.train.AdamOptimizer(0.01), replicas_to_aggregate=2)
    sv = tf.train.Supervisor(is_chief=FLAGS.task_index == 0, logdir="/tmp/x")
    sess = sv.prepare_or_wait_for_session(server.target)
'''


def test_cluster_stays_tf1_when_the_training_on_it_is_not_migrated():
    """Server roles would drop `server = tf.train.Server(...)` and the
    resolver would reshape the cluster, but no rule takes over the
    Supervisor session that still reads `server.target` (a real
    mnist_replica variant): a half-migrated program would run TF1 training
    on a cluster that no longer has its ps, or on a `server` bound only on
    another branch. The cluster rules stand back, each with a located
    manual-work diagnostic, and the output reads no name it does not bind."""
    result = migrate_source(SERVER_STILL_USED, path="replica.py")
    assert undefined_names(ast.parse(result.output)) <= undefined_names(ast.parse(SERVER_STILL_USED))
    assert "TFM201" not in result.rules_applied and "TFM202" not in result.rules_applied
    assert "server.target" in result.output and "cluster_resolver" not in result.output
    assert "if FLAGS.job_name == \"ps\":\n            server.join()" in result.output
    kept = {d.code: d for d in result.manual_work if "cluster left as TF1" in d.message}
    assert set(kept) == {"TFM201", "TFM202"}
    lines = SERVER_STILL_USED.splitlines()
    assert lines[kept["TFM201"].line - 1][kept["TFM201"].column - 1 :].startswith("tf.train.ClusterSpec(")
    assert lines[kept["TFM202"].line - 1][kept["TFM202"].column - 1 :].startswith("tf.train.Server(")
    assert "`replica_device_setter`" in kept["TFM201"].message  # the first TF1 construct left
    # idempotent: a second run finds nothing new to do
    assert migrate_source(result.output, path="replica.py").output == result.output


CLUSTER_FROM_A_HELPER = """\
import tensorflow as tf


def join_cluster(job, index):
    cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]})
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    return cluster, server


def train(index, batches):
    cluster, server = join_cluster("worker", index)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.Variable(tf.ones([3, 1]))
        loss = tf.reduce_sum(tf.matmul(x, w))
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0) as sess:
        for batch in batches:
            sess.run(train_op, feed_dict={x: batch})
"""


def test_a_rewrite_reading_a_name_bound_in_another_function_is_not_applied():
    """The resolver is built where the cluster is, inside the helper; the
    strategy rewrite of the caller would read `cluster_resolver`, a local of
    another function (a scope-blind check sees it bound). TFM301 sees it out
    of the training function's reach and leaves that rewrite out itself; the
    cluster then stays TF1 too. The resolver cannot take the server's place on
    its way to the training either (TFM202 carries it through returns and
    parameters): no ps branch says which tasks only serve. The diagnostic is
    located at the helper's server and says so."""
    result = migrate_source(CLUSTER_FROM_A_HELPER, path="helper.py")
    assert not undefined_names(ast.parse(result.output))
    assert not {"TFM201", "TFM202", "TFM301"} & set(result.rules_applied)
    [unsafe] = [d for d in result.manual_work if d.code == "TFM301"]
    assert "built in `join_cluster()` and reaches `train()`" in unsafe.message
    assert 'no `if <job> == "ps": server.join()` tells which tasks only serve' in unsafe.message
    assert unsafe.line == 6  # the helper's tf.train.Server
    assert "replica_device_setter" in result.output


@pytest.mark.parametrize(
    "code, undefined",
    [
        (
            (
                "import os.path\nfrom a import b as c\n"
                "def f(p, *q, k=1):\n    global g\n    for i, (j, *m) in enumerate(q):\n        pass\n"
                "    with open(p) as fh:\n        y = [z for z in fh if (w := z)]\n"
                "    return os.path.join(c.attr, x=u), sorted(m), w, g, h\n"
            ),
            {"u", "h"},
        ),
        # module level reads in statement order; function bodies run later
        ("print(FLAGS.x)\nFLAGS = 1\ndef f():\n    return LATER\nLATER = 2\n", {"FLAGS"}),
        # a name bound in one function is not bound in another
        ("def f():\n    r = 1\ndef g():\n    return r\n", {"r"}),
    ],
    ids=["bindings", "module-order", "scopes"],
)
def test_undefined_names_by_scope_and_statement_order(code, undefined):
    assert undefined_names(ast.parse(code)) == undefined


def test_get_variable_with_a_value_as_initializer_becomes_that_initial_value():
    """`get_variable(name, initializer=<tensor or list>)` (no shape) took the
    value itself; with a shape, an initializer is called with it."""
    source = (
        "import tensorflow as tf\n"
        'cluster = tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]})\n'
        "server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)\n"
        'if FLAGS.job_name == "ps":\n'
        "    server.join()\n"
        "with tf.device(tf.train.replica_device_setter(cluster=cluster)):\n"
        "    w = tf.get_variable('w', initializer=tf.random_uniform(shape=[2]))\n"
        "    b = tf.get_variable('b', initializer=[0.9, 0.9], dtype=tf.float32)\n"
        "    v = tf.get_variable('v', [2], initializer=tf.zeros_initializer())\n"
        "    loss = tf.reduce_sum(w * b * v)\n"
        "    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)\n"
        "with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:\n"
        "    for i in range(10):\n"
        "        sess.run(train_op)\n"
    )
    output = migrate_source(source).output
    assert "w = tf.Variable(tf.random.uniform(shape=[2]), name='w')" in output
    assert "b = tf.Variable([0.9, 0.9], dtype=tf.float32, name='b')" in output
    assert re.search(r"v = tf\.Variable\(tf\.[\w.]*zeros_initializer\(\)\(shape=\[2\], dtype=tf\.float32\), name='v'\)", output)
