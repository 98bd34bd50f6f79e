"""Names from real-world legacy scripts: TensorFlow names that no longer exist
(pre-1.0 tutorials), Python 2 code that parses as Python 3, and diagnostics
located on code rather than on comments that mention the same API.

The central check resolves every ``tf.a.b.c`` chain of tfmigrate's output
against the installed TensorFlow: the codemod must never write a name TF 2.21
does not have, and a leftover it did not write must be reported where it is.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from migrate.codemod import py2
from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.rules.tfm101_tensorflow_import import load_tf_api

ROOT = Path(__file__).resolve().parent.parent
WILD = ROOT / "tests" / "fixtures" / "wild" / "pre1_summaries_tutorial.py"
CHECKED = [
    *sorted((ROOT / "tests" / "fixtures" / "realistic").glob("*.py")),
    *sorted((ROOT / "legacy_reference").glob("*.py")),
    WILD,
]


def _source(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text if py2.is_python3(text) else py2.convert(text, str(path))[0]


def _tf_chains(tree: ast.AST) -> set[tuple[str, ...]]:
    """Every attribute chain rooted at the name ``tf``: ("compat", "v1", "summary", "scalar")."""
    chains = set()
    for node in ast.walk(tree):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if parts and isinstance(node, ast.Name) and node.id == "tf":
            chains.add(tuple(reversed(parts)))
    return chains


def _unresolved(tf, tree: ast.AST) -> set[str]:
    """The shortest prefix of each ``tf`` chain that does not resolve."""
    missing = set()
    for chain in _tf_chains(tree):
        obj = tf
        for i, part in enumerate(chain):
            try:
                obj = getattr(obj, part)
            except Exception:  # noqa: BLE001 - AttributeError, or a Keras-2-only loader raising
                missing.add("tf." + ".".join(chain[: i + 1]))
                break
    return missing


@pytest.fixture(scope="module")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: p.name)
@pytest.mark.parametrize("select", [None, ["TFM101"]], ids=["all-rules", "tfm101"])
def test_every_tf_name_in_the_output_exists_or_is_reported(tf, path, select):
    source = _source(path)
    result = migrate_source(source, path=str(path), select=select)
    tree = ast.parse(result.output)
    assert migrate_source(result.output, select=select).output == result.output
    lines = source.splitlines()
    manual_lines = {d.line for d in result.manual_work}
    keras2_only = tuple(f"tf.compat.v1.{m}." for m in load_tf_api().keras2_only)
    for name in sorted(_unresolved(tf, tree)):
        # not written by tfmigrate: the input has it (a Keras-2-only module is
        # spelled from tf.compat.v1, where TF 2.21 explains it needs Keras 2),
        # and it is reported where it is
        keras2 = (name + ".").startswith(keras2_only)
        spelled = name.replace("tf.compat.v1.", "tf.") if keras2 else name
        assert spelled in source, f"{path.name}: tfmigrate wrote `{name}`, which TF {tf.__version__} lacks"
        if select is None:  # with every rule on, some rule reports it
            located = {i for i, line in enumerate(lines, 1) if spelled in line}
            assert located & manual_lines, f"{path.name}: `{name}` left without a diagnostic on its line"


def test_the_pre1_fixture_keeps_nothing_removed_and_reports_what_it_rewrote():
    source = WILD.read_text()
    result = migrate_source(source, select=["TFM101"])
    for old in ("scalar_summary", "histogram_summary", "merge_all_summaries", "SummaryWriter",
                "initialize_all_variables", "tf.mul(", "tf.sub(", "tf.select(", "tf.pack(", "tf.concat(1,"):
        assert old in source and old not in result.output, old
    for new in ("tf.compat.v1.summary.scalar(", "tf.compat.v1.summary.merge_all()",
                "tf.compat.v1.summary.FileWriter(", "tf.compat.v1.global_variables_initializer()",
                "tf.multiply(", "tf.subtract(", "tf.compat.v1.where(", "tf.stack(",
                "tf.concat(axis=1, values=[features, extra])",
                "softmax_cross_entropy_with_logits(logits=scores, labels=onehot)"):
        assert new in result.output, new
    lines = source.splitlines()
    removed = {lines[d.line - 1].strip() for d in result.diagnostics if d.fixed and "TensorFlow 1.0" in d.message}
    assert {'tf.scalar_summary("loss", loss)', "summary_op = tf.merge_all_summaries()",
            "writer = tf.train.SummaryWriter(FLAGS.log_dir, graph=tf.get_default_graph())"} <= removed
    assert not result.manual_work


def test_pre1_table_matches_the_installed_tensorflow(tf):
    """Each successor exists in tf.compat.v1 with the parameters the table
    maps the old arguments to; each name marked removed is really gone."""
    import inspect

    api = load_tf_api()
    if api.tf_version != tf.__version__:
        pytest.skip(f"tables generated for TF {api.tf_version}, installed {tf.__version__}")

    def resolve(root, name):
        for part in name.split("."):
            root = getattr(root, part)
        return root

    for table in (api.pre1, api.reorders):
        for old, change in table.items():
            target = resolve(tf.compat.v1, change.to)
            if change.old:
                fn = target.__init__ if isinstance(target, type) else target
                params = [p for p in inspect.signature(fn).parameters if p != "self"]
                assert list(change.new) == params[: len(change.new)], old
                for p in change.old:
                    mapped = change.kw.get(p, p)
                    assert mapped is None or mapped in params, (old, p)
            for root in (tf, tf.compat.v1):
                try:
                    resolve(root, old)
                    present = True
                except AttributeError:
                    present = False
                assert not (change.removed and present), old


@pytest.mark.parametrize(
    "code, expected, manual",
    [
        # proven old order: an integer where TF 1.x takes the tensors
        ("tf.concat(0, [a, b])\n", "tf.concat(axis=0, values=[a, b])\n", 0),
        ("tf.concat(-1, parts)\n", "tf.concat(axis=-1, values=parts)\n", 0),
        # a list where TF 1.x takes the axis
        ("tf.concat(dim, [a, b])\n", "tf.concat(axis=dim, values=[a, b])\n", 0),
        ("tf.concat(concat_dim=1, values=parts)\n", "tf.concat(axis=1, values=parts)\n", 0),
        ("tf.split(1, 3, x)\n", "tf.split(axis=1, num_or_size_splits=3, value=x)\n", 0),
        # TF 1.x order, or nothing to tell: untouched
        ("tf.concat([a, b], 0)\n", None, 0),
        ("tf.concat(parts, dim)\n", None, 0),
        ("tf.split(x, 3, 1)\n", None, 0),
        ("tf.split(x, 3)\n", None, 0),
        # keyword arguments renamed with the function
        ("tf.select(c, t=a, e=b)\n", "tf.compat.v1.where(c, x=a, y=b)\n", 0),
        ("tf.batch_matmul(a, b, True)\n", "tf.matmul(a, b, adjoint_a=True)\n", 0),
        # an argument with no counterpart: renamed, reported
        ("tf.histogram_summary('w', w, None, 'op')\n", "tf.compat.v1.summary.histogram('w', w, None, 'op')\n", 1),
        # arguments that cannot be matched: renamed, reported
        ("tf.scalar_summary(*args)\n", "tf.compat.v1.summary.scalar(*args)\n", 1),
    ],
)
def test_pre1_calls_in_tf1_code(code, expected, manual):
    source = "import tensorflow as tf\n\nx = tf.placeholder(tf.float32)\n" + code
    result = migrate_source(source, select=["TFM101"])
    body = result.output.split("\n", 3)[3]
    assert body == (code if expected is None else expected)
    assert len(result.manual_work) == manual, result.manual_work
    ast.parse(result.output)


def test_cross_entropy_positional_order_depends_on_the_code_around_it():
    tf2 = "import tensorflow as tf\n\nloss = tf.nn.softmax_cross_entropy_with_logits(onehot, scores)\n"
    assert migrate_source(tf2, select=["TFM101"]).output == tf2  # TF2 code: (labels, logits)
    tf1 = "import tensorflow as tf\n\nx = tf.placeholder(tf.float32)\nloss = tf.nn.sparse_softmax_cross_entropy_with_logits(s, y)\n"
    result = migrate_source(tf1, select=["TFM101"])
    assert "sparse_softmax_cross_entropy_with_logits(s, y)" in result.output  # not guessed
    (diagnostic,) = result.manual_work
    assert diagnostic.line == 4 and "(logits, labels, name)" in diagnostic.message
    pre1 = tf1 + "tf.scalar_summary('loss', loss)\n"
    result = migrate_source(pre1, select=["TFM101"])
    assert "sparse_softmax_cross_entropy_with_logits(logits=s, labels=y)" in result.output
    assert not result.manual_work


def test_unknown_names_are_not_respelled_and_are_reported():
    source = "import tensorflow.compat.v1 as tf\n\nopt = tf.train.RMSProp(0.1)\nx = tf.placeholder(tf.float32)\n"
    result = migrate_source(source, select=["TFM101", "TFM901"])
    assert "opt = tf.train.RMSProp(0.1)" in result.output
    (diagnostic,) = [d for d in result.manual_work if "does not exist" in d.message]
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TFM901", 3, 7)


def test_removed_names_left_in_place_are_reported_with_their_successor():
    source = "import tensorflow as tf\n\n# tf.merge_all_summaries() used to go here\nop = tf.merge_all_summaries()\n"
    result = migrate_source(source, select=["TFM901"])
    (diagnostic,) = result.manual_work
    assert diagnostic.line == 4 and "tf.compat.v1.summary.merge_all" in diagnostic.hint


# --------------------------------------------------------------------------- locations


def test_a_comment_mentioning_the_api_does_not_attract_the_diagnostic():
    source = dedent(
        """
        import tensorflow as tf

        # Flags for defining the tf.train.Server
        FLAGS = make_flags()
        server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        '''Placeholders: tf.placeholder(tf.float32) feeds the batch.'''
        x = tf.placeholder(tf.float32)
        """
    )
    result = migrate_source(source, select=["TFM901"])
    located = sorted((d.line, d.column) for d in result.manual_work)
    assert located == [(5, 10), (7, 1)], result.manual_work


def test_identical_statements_keep_their_own_lines():
    source = dedent(
        """
        import tensorflow as tf

        ps_x = tf.placeholder(tf.float32, [None, 4])
        ps_y = tf.placeholder(tf.float32, [None, 1])
        x = tf.placeholder(tf.float32, [None, 4])
        y = tf.placeholder(tf.float32, [None, 1])
        """
    )
    result = migrate_source(source, select=["TFM901"])
    assert [d.line for d in result.manual_work] == [3, 4, 5, 6]


def test_estimator_diagnostics_once_per_construct_per_function_and_on_their_line():
    source = dedent(
        """
        import tensorflow as tf

        def model_fn(features, labels, mode):
            if mode == tf.estimator.ModeKeys.PREDICT:
                return tf.estimator.EstimatorSpec(mode, predictions=features)
            train = mode == tf.estimator.ModeKeys.TRAIN
            if mode == tf.estimator.ModeKeys.EVAL:
                return tf.estimator.EstimatorSpec(mode, loss=labels)
            return tf.estimator.EstimatorSpec(mode, loss=labels, train_op=train)

        def input_fn(mode):
            return {"x": [1.0]} if mode == tf.estimator.ModeKeys.TRAIN else {}

        est = tf.estimator.Estimator(model_fn=model_fn)
        """
    )
    result = migrate_source(source, select=["TFM401"])
    found = sorted((d.line, d.message.split(";")[0]) for d in result.manual_work)
    assert [line for line, _ in found] == [4, 5, 12, 14], found
    assert "ModeKeys" in found[2][1] and "`tf.estimator.Estimator`" in found[3][1]


# --------------------------------------------------------------------------- Python 2 in Python 3 syntax

PY2_IN_PY3_SYNTAX = dedent(
    """
    import tensorflow as tf

    LABELS = {"cat": 0, "dog": 1}


    def batches(reader, count):
        for i in xrange(count):   # one batch per step
            yield reader.next()


    def names():
        return [unicode(k) for k, v in LABELS.iteritems() if LABELS.has_key(k)]


    def report(step, loss):
        print ("step %d: loss %.3f" % (step, loss))
    """
)


def test_python2_only_names_are_found_where_nothing_binds_them():
    uses = py2.python2_uses(PY2_IN_PY3_SYNTAX)
    assert [(line, name) for line, _, name in uses] == [
        (7, "xrange"), (12, "unicode"), (12, ".iteritems"), (12, ".has_key")]
    bound = "from six.moves import xrange\nfor i in xrange(3):\n    pass\n"
    assert py2.python2_uses(bound) == []
    assert py2.python2_uses("long = 3\nprint(long)\n") == []
    assert py2.python2_uses("print 'py2 syntax'\n") == []  # not Python 3: the syntax pre-pass handles it


def test_python2_code_in_python3_syntax_is_converted_by_fissix():
    converted, note = py2.convert(PY2_IN_PY3_SYNTAX, "legacy.py")
    assert "for i in range(count):   # one batch per step" in converted
    assert "yield next(reader)" in converted
    assert "[str(k) for k, v in LABELS.items() if k in LABELS]" in converted
    # the print call stays one call; lines without Python 2 constructs are byte-identical
    assert 'print ("step %d: loss %.3f" % (step, loss))' in converted
    kept = [line for line in PY2_IN_PY3_SYNTAX.splitlines()
            if not any(w in line for w in ("xrange", "next", "unicode", "iteritems"))]
    assert all(line in converted.splitlines() for line in kept)
    assert (note.code, note.line, note.fixed) == ("TFM001", 7, True)
    assert "`xrange`" in note.message and "xrange" in note.message.split("fixers:")[1]
    ast.parse(converted)
    assert py2.python2_uses(converted) == []
    with pytest.raises(ValueError):
        py2.convert(converted)  # nothing left to convert
    # then the TensorFlow rules run on it as usual, and report nothing Python 2
    assert not [d for d in migrate_source(converted).manual_work if "Python 2" in d.message]


def test_python2_names_left_in_python3_syntax_are_reported_on_their_lines():
    result = migrate_source(PY2_IN_PY3_SYNTAX, select=["TFM901"])
    found = sorted((d.line, d.message.split(" exists")[0]) for d in result.manual_work)
    assert found == [(7, "`xrange`"), (8, "`.next()`"), (12, "`unicode`, `.iteritems()`, `.has_key()`")], found
    assert all("Python 2" in d.message for d in result.manual_work)


def test_print_of_one_parenthesized_expression_is_not_wrapped_twice():
    source = "import tensorflow as tf\nprint ('%d workers' % n)\nprint ('a', n)\nprint 'plain', n\n"
    converted, _ = py2.convert(source)
    assert converted == (
        "import tensorflow as tf\nprint('%d workers' % n)\nprint(('a', n))\nprint('plain', n)\n"
    )
