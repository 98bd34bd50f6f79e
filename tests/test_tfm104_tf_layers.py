"""TFM104 tf-layers: TF1's functional layers -> the functions of migrate/codemod/tf1_layers.py.

Three layers of tests: the codemod (no TensorFlow: where the functions go, how
they are spelled, what is declined, that no other rule touches them, that the
training rule now migrates such models), the functions' numerics against
Keras 3's own layers with the same weights, and their variables (TF1's names
in graph mode, reused by ``make_template`` eagerly and in a ``tf.function``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import numpy as np
import pytest

from migrate.codemod.engine import dedent, migrate_source

SHIMS_PATH = Path(__file__).resolve().parent.parent / "migrate" / "codemod" / "tf1_layers.py"
RULE_PATH = Path(__file__).resolve().parent.parent / "migrate" / "codemod" / "rules" / "tfm104_tf_layers.py"


def functions(code: str) -> dict[str, str]:
    """Top-level function name -> its code (comments included)."""
    module = cst.parse_module(code)
    return {st.name.value: module.code_for_node(st).strip() for st in module.body
            if isinstance(st, cst.FunctionDef)}


SHIM_CODE = functions(SHIMS_PATH.read_text())

# --------------------------------------------------------------------------- the functions' source


def test_shim_module_is_self_contained_and_commented():
    tree = ast.parse(SHIMS_PATH.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in imports] == ["import tensorflow as tf"]
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        assert fn.name.startswith("tf1_"), fn.name
        # defaults are evaluated where the copy is defined: no TensorFlow call there
        for default in [*fn.args.defaults, *filter(None, fn.args.kw_defaults)]:
            assert not any(isinstance(n, ast.Call) for n in ast.walk(default)), fn.name
        # the comment says which TF1 function it reproduces, and why it exists
        assert "# " in SHIM_CODE[fn.name].splitlines()[0], fn.name
    for name in ("tf1_dense", "tf1_conv2d", "tf1_fully_connected", "tf1_contrib_dropout"):
        assert "removed" in SHIM_CODE[name].split("def ")[0]


def test_rule_never_imports_tensorflow():
    tree = ast.parse(RULE_PATH.read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            assert not any(a.name.startswith("tensorflow") for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            assert not (n.module or "").startswith(("tensorflow", "migrate.codemod.tf1_layers"))
    # and the codemod rewrites layers where TensorFlow cannot be imported at all
    import subprocess
    import sys

    code = ("import sys; sys.modules['tensorflow'] = None\n"
            "from migrate.codemod.engine import migrate_source\n"
            "print(migrate_source('import tensorflow as tf\\nh = tf.layers.dense(x, 3)\\n').output)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                         cwd=RULE_PATH.parent.parent.parent)
    assert run.returncode == 0, run.stderr
    assert "def tf1_dense(" in run.stdout and "h = tf1_dense(x, 3)" in run.stdout


@pytest.mark.parametrize("header", [
    "import tensorflow as tf\n",
    "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n",
    "import tensorflow as tf\nx = tf.placeholder(tf.float32)\n",  # read as TF1 code by TFM101
])
def test_no_rule_changes_the_functions(header):
    """Every TF name in tf1_layers.py is spelled as TFM101 spells it, in both
    of its modes: whatever the module, the copies are left as they are."""
    source = header + "".join(f"\n\n{code}\n" for code in SHIM_CODE.values())
    out = migrate_source(source).output
    assert functions(out) == SHIM_CODE


# --------------------------------------------------------------------------- the codemod


def run(src: str, **kw):
    return migrate_source(dedent(src), select=["TFM104"], **kw)


def test_functions_go_after_the_import_block_once_each_in_file_order():
    out = run("""
        \"\"\"A legacy script.\"\"\"
        from __future__ import print_function
        import sys
        sys.path.insert(0, "lib")
        import tensorflow as tf
        import numpy as np

        FLAGS = None
        a = tf.layers.dense(x, 10)
        b = tf.layers.dense(a, 10)
        c = tf.layers.dropout(b)
        """).output
    lines = out.splitlines()
    # after the last import (the TF one comes after sys.path code), before the code
    assert lines[:6] == ['"""A legacy script."""', "from __future__ import print_function", "import sys",
                         'sys.path.insert(0, "lib")', "import tensorflow as tf", "import numpy as np"]
    assert lines[6:8] == ["", ""]
    assert list(functions(out)) == ["tf1_initializer", "tf1_dense", "tf1_dropout"]
    assert out.endswith("\n\nFLAGS = None\na = tf1_dense(x, 10)\nb = tf1_dense(a, 10)\nc = tf1_dropout(b)\n")
    assert functions(out)["tf1_dense"] == SHIM_CODE["tf1_dense"]


@pytest.mark.parametrize("import_line,alias", [
    ("import tensorflow as tf1", "tf1"),
    ("import tensorflow.compat.v1 as tfv1", "tfv1"),
])
def test_functions_spell_the_modules_tensorflow_alias(import_line, alias):
    out = run(f"""
        {import_line}
        net = {alias}.layers.conv2d(images, 8, 3)
        net = {alias}.contrib.layers.fully_connected(net, 10)
        """).output
    defs = functions(out)
    assert list(defs) == ["tf1_initializer", "tf1_pair", "tf1_conv2d", "tf1_fully_connected"]
    for name, code in defs.items():
        comment, _, definition = SHIM_CODE[name].partition("\ndef ")
        assert code == comment + "\ndef " + definition.replace("tf.", f"{alias}."), name
        assert "tf." not in code.partition("\ndef ")[2]
    assert "activation_fn=" + alias + ".nn.relu" in defs["tf1_fully_connected"]


def test_a_module_without_tensorflow_is_left_alone():
    src = """
        from keras import layers
        h = layers.dense(x, 10)
        """
    assert migrate_source(dedent(src)).output == dedent(src)


def test_tensorflow_imported_in_a_function_only_writes_the_layer_there():
    # a job function a launcher runs imports TensorFlow itself: the layer is written
    # in it, after the import, and the module still imports no TensorFlow
    result = run("""
        import os

        def main():
            import tensorflow as tf
            return tf.layers.dense(x, 3)
        """)
    assert not result.manual_work
    assert "\nimport tensorflow" not in result.output
    main = result.output.partition("def main():\n")[2]
    assert main.startswith("    import tensorflow as tf\n\n")
    assert "\n    def tf1_dense(" in main and main.rstrip().endswith("return tf1_dense(x, 3)")


def test_tensorflow_imported_in_two_functions_writes_each_the_layers_it_calls():
    result = run("""
        def train():
            import tensorflow as tf
            return tf.layers.dense(x, 3)

        def evaluate():
            import tensorflow as tf
            return tf.layers.flatten(x)

        def summary(tf):
            return tf.layers.dense(x, 1)
        """)
    out = result.output
    train, _, rest = out.partition("def evaluate():")[0], None, out.partition("def evaluate():")[2]
    evaluate = rest.partition("def summary(tf):")[0]
    assert "def tf1_dense(" in train and "def tf1_flatten(" not in train
    assert "def tf1_flatten(" in evaluate and "def tf1_dense(" not in evaluate
    assert "\nimport tensorflow" not in out
    # a call in neither function is left, saying where TensorFlow is
    [d] = result.manual_work
    assert d.line == 10 and "TensorFlow is imported in `evaluate`, `train` only" in d.message
    assert "return tf.layers.dense(x, 1)" in out


def test_notebook_functions_go_to_the_import_cell():
    import json

    from migrate.codemod.notebook import migrate_notebook

    cells = [["import numpy as np\n", "import tensorflow as tf"],
             ["x = tf.placeholder(tf.float32, [None, 3])\n", "h = tf.layers.dense(x, 4)"]]
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c}
                    for c in cells],
          "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    out = [("".join(c["source"])) for c in json.loads(migrate_notebook(json.dumps(nb).encode()).output)["cells"]]
    assert out[0].startswith("import numpy as np\nimport tensorflow as tf\n\n\n# ")
    assert list(functions(out[0])) == ["tf1_initializer", "tf1_dense"]
    assert out[1] == "x = tf.compat.v1.placeholder(tf.float32, [None, 3])\nh = tf1_dense(x, 4)"


def test_only_a_contrib_import_gets_import_tensorflow_as_tf():
    result = run("""
        from tensorflow.contrib import slim

        net = slim.fully_connected(x, 10)
        """)
    out = result.output
    assert out.startswith("import tensorflow as tf\n\n\n# ")
    assert "tensorflow.contrib" not in out
    assert out.endswith("\n\nnet = tf1_fully_connected(x, 10)\n")
    assert result.manual_work == []


def test_a_second_run_reuses_the_functions_it_wrote():
    first = run("""
        import tensorflow as tf
        a = tf.layers.dense(x, 10)
        """).output
    # new TF1 code added to the migrated module later
    second = run(first + "b = tf.layers.dense(a, 3)\nc = tf.layers.flatten(a)\n").output
    defs = functions(second)
    assert list(defs) == ["tf1_initializer", "tf1_dense", "tf1_flatten"]
    assert second.count("def tf1_dense(") == 1
    assert second.endswith("a = tf1_dense(x, 10)\nb = tf1_dense(a, 3)\nc = tf1_flatten(a)\n")


def test_a_user_function_with_the_name_gets_a_fresh_one():
    out = run("""
        import tensorflow as tf

        def tf1_dense(x):
            return x

        h = tf.layers.dense(tf1_dense(x), 10)
        """).output
    defs = functions(out)
    assert list(defs) == ["tf1_initializer", "tf1_dense_2", "tf1_dense"]
    assert defs["tf1_dense"] == "def tf1_dense(x):\n    return x"
    assert out.endswith("h = tf1_dense_2(tf1_dense(x), 10)\n")


@pytest.mark.parametrize("call,why", [
    ("tf.layers.dense(x, 10, kernel_regularizer=reg)", "`kernel_regularizer` is not reproduced"),
    ("tf.layers.dense(x, 10, None, True, None, None, reg)", "`kernel_regularizer` is not reproduced"),
    ("tf.layers.dense(x, 10, activity_regularizer=reg)", "`activity_regularizer` is not reproduced"),
    ("tf.layers.dense(x, 10, kernel_constraint=c)", "`kernel_constraint` is not reproduced"),
    ("tf.layers.dense(x, 10, kernel_initializer='he_normal')", "Keras 2's initializers"),
    ("tf.layers.conv2d(x, 8, 3, data_format='channels_first')", "only channels-last data"),
    ("tf.layers.max_pooling2d(x, 2, 2, 'valid', fmt)", "only channels-last data"),
    ("tf.layers.dense(x, 10, **kw)", "`**` arguments"),
    ("tf.layers.dense(*args)", "`*` arguments"),
    ("tf.layers.dense(x, 10, kernel_size=3)", "`kernel_size=` is not a parameter of TF1's `layers.dense`"),
    ("tf.contrib.layers.fully_connected(x, 10, normalizer_fn=bn)", "`normalizer_fn` is not reproduced"),
    ("tf.contrib.layers.conv2d(x, 8, 3, data_format='NCHW')", "only channels-last data"),
    ("tf.contrib.layers.max_pool2d(x, 2, outputs_collections=['c'])", "`outputs_collections` is not reproduced"),
])
def test_declined_calls_are_left_with_a_located_reason(call, why):
    src = f"import tensorflow as tf\n\ny = 1\nh = {call}\n"
    result = migrate_source(src, select=["TFM104"])
    assert result.output == src
    [d] = result.manual_work
    assert (d.code, d.line, d.column) == ("TFM104", 4, 5)
    assert why in d.message and "left as it is" in d.message


def test_declined_and_migrated_calls_in_one_module():
    result = run("""
        import tensorflow as tf
        h = tf.layers.dense(x, 10, kernel_initializer=tf.truncated_normal_initializer(stddev=0.1),
                            bias_initializer="zeros", kernel_regularizer=None)
        y = tf.layers.dense(h, 1, kernel_regularizer=tf.keras.regularizers.l2(0.1))
        """)
    assert "h = tf1_dense(x, 10, kernel_initializer=" in result.output
    assert "y = tf.layers.dense(h, 1, kernel_regularizer=" in result.output
    assert [d.line for d in result.manual_work] == [4]


def test_arg_scope_declines_every_contrib_call_of_the_module():
    result = run("""
        import tensorflow as tf
        slim = tf.contrib.slim

        def net(x):
            x = slim.conv2d(x, 8, [3, 3])
            x = tf.layers.flatten(x)
            return slim.fully_connected(x, 10)

        with slim.arg_scope([slim.conv2d, slim.fully_connected], activation_fn=None):
            y = net(images)
        """)
    out = result.output
    assert "slim.conv2d(x, 8, [3, 3])" in out and "slim.fully_connected(x, 10)" in out
    assert "x = tf1_flatten(x)" in out  # tf.layers take no arg_scope
    assert "slim = tf.contrib.slim" in out
    assert [d.line for d in result.manual_work] == [5, 7]
    assert all("slim.arg_scope" in d.message for d in result.manual_work)


def test_nothing_is_reported_as_keras2_only_or_contrib_once_migrated():
    result = migrate_source(dedent("""
        import tensorflow as tf
        import tensorflow.contrib.slim as slim
        from tensorflow.compat.v1 import layers

        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1])
        net = slim.conv2d(x, 4, [3, 3])
        net = layers.max_pooling2d(net, 2, 2)
        net = slim.flatten(net)
        logits = tf.layers.dense(net, 10)
        """))
    assert not [d for d in result.diagnostics if d.code in ("TFM101", "TFM402") and not d.fixed]
    assert "slim" not in result.output.split("x = ")[-1] and "import tensorflow.contrib" not in result.output
    assert "from tensorflow.compat.v1 import layers" not in result.output
    # a call left alone is still reported by TFM101 (Keras 2 only)
    kept = migrate_source("import tensorflow as tf\nh = tf.layers.dense(x, 3, kernel_regularizer=r)\n")
    assert sorted(d.code for d in kept.manual_work) == ["TFM101", "TFM104"]


# --------------------------------------------------------------------------- with the training rule

_PS_WORKER = """
import numpy as np
import tensorflow as tf
{extra_import}
flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "localhost:2222", "ps hosts")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "worker hosts")
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_integer("task_index", 0, "task index")
FLAGS = flags.FLAGS


def main(_):
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({{"ps": FLAGS.ps_hosts.split(","), "worker": worker_hosts}})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    is_chief = FLAGS.task_index == 0
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 8, 8, 1])
        labels = tf.placeholder(tf.int64, [None])
{model}
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        global_step = tf.train.get_or_create_global_step()
{optimizer}
        train_op = opt.minimize(loss, global_step=global_step)
    hooks = [{hooks}tf.train.StopAtStepHook(last_step=20)]
    rng = np.random.RandomState(FLAGS.task_index)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            x = rng.rand(4, 8, 8, 1).astype(np.float32)
            y = rng.randint(0, 10, size=4)
            _, loss_value = sess.run([train_op, loss], feed_dict={{images: x, labels: y}})


if __name__ == "__main__":
    tf.app.run()
"""
_TF_LAYERS_MODEL = """\
        net = tf.layers.conv2d(images, 4, 3, padding="same", activation=tf.nn.relu)
        net = tf.layers.max_pooling2d(net, 2, 2)
        net = tf.layers.flatten(net)
        net = tf.layers.dense(net, 16, activation=tf.nn.relu)
        logits = tf.layers.dense(net, 10)"""
_SLIM_MODEL = """\
        net = slim.conv2d(images, 4, [3, 3], scope="conv1")
        net = slim.max_pool2d(net, [2, 2], scope="pool1")
        net = slim.flatten(net)
        net = slim.fully_connected(net, 16, scope="fc1")
        logits = slim.fully_connected(net, 10, activation_fn=None, scope="logits")"""
_ASYNC = "        opt = tf.train.GradientDescentOptimizer(0.1)"
_SYNC = """\
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=len(worker_hosts),
                                             total_num_replicas=len(worker_hosts))"""

SCRIPTS = {
    "async-tf-layers": ({"extra_import": "", "model": _TF_LAYERS_MODEL, "optimizer": _ASYNC, "hooks": ""},
                        "ParameterServerStrategy", ["tf1_conv2d", "tf1_max_pooling2d", "tf1_flatten", "tf1_dense"]),
    "sync-tf-layers": ({"extra_import": "", "model": _TF_LAYERS_MODEL, "optimizer": _SYNC,
                        "hooks": "opt.make_session_run_hook(is_chief), "},
                       "MultiWorkerMirroredStrategy", ["tf1_conv2d", "tf1_max_pooling2d", "tf1_flatten", "tf1_dense"]),
    "async-slim": ({"extra_import": "import tensorflow.contrib.slim as slim\n", "model": _SLIM_MODEL,
                    "optimizer": _ASYNC, "hooks": ""},
                   "ParameterServerStrategy", ["tf1_contrib_conv2d", "tf1_max_pool2d", "tf1_contrib_flatten",
                                               "tf1_fully_connected"]),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_ps_worker_script_with_tf1_layers_is_migrated_end_to_end(name):
    fields, strategy, used = SCRIPTS[name]
    source = _PS_WORKER.format(**fields)
    result = migrate_source(source)
    out = result.output
    assert [d for d in result.diagnostics if d.code == "TFM301" and not d.fixed] == []
    assert [d.message for d in result.manual_work] == []
    assert f"tf.distribute.{strategy}(" in out
    assert 'tf.compat.v1.make_template("model", model_fn)' in out
    code = "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))
    for legacy in ("replica_device_setter", "tf.layers.", "tf.compat.v1.layers.", "slim", "tf.contrib."):
        assert legacy not in code
    for fn in used:
        assert f"= {fn}(" in out
    # the functions are copied as they are in tf1_layers.py, and no rule touched them
    defs = functions(out)
    assert {n: c for n, c in defs.items() if n.startswith("tf1_")} == {
        n: SHIM_CODE[n] for n in defs if n.startswith("tf1_")}
    compile(out, name, "exec")
    again = migrate_source(out)
    assert again.output == out and again.manual_work == []


@pytest.mark.parametrize("model,layer,extra_import", [
    (_TF_LAYERS_MODEL.replace("logits = tf.layers.dense(net, 10)",
                              "logits = tf.layers.dense(net, 10, kernel_regularizer=reg)"),
     "tf.compat.v1.layers.dense", ""),
    (_SLIM_MODEL.replace('net = slim.flatten(net)', 'net = slim.flatten(slim.batch_norm(net))'),
     "slim.batch_norm", "slim = tf.contrib.slim\n"),
    (_TF_LAYERS_MODEL.replace("net = tf.layers.flatten(net)", "net = tf.keras.layers.Flatten()(net)"),
     "tf.keras.layers.Flatten", ""),
], ids=["declined-dense", "slim-batch-norm", "keras-layer"])
def test_a_layer_left_in_the_model_keeps_the_training_rule_declining(model, layer, extra_import):
    """The rewritten layers make TFM301 build the model with a template; a layer
    creating variables of its own next to them would be rebuilt (and never
    trained) at every step: the training stays TF1, with the reason."""
    source = _PS_WORKER.format(extra_import="", model=model, optimizer=_ASYNC, hooks="")
    source = source.replace("\nflags = ", "\n" + extra_import + "flags = ") if extra_import else source
    result = migrate_source(source)
    reasons = [d.message for d in result.manual_work if d.code == "TFM301"]
    assert any(f"the model calls `{layer}`" in m for m in reasons), reasons
    assert "ParameterServerStrategy" not in result.output


# --------------------------------------------------------------------------- a TF1 program, run as TF1

_TF1_PROGRAM = """
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()

x = tf.placeholder(tf.float32, [None, 6, 6, 1])
y = tf.placeholder(tf.int64, [None])
training = tf.placeholder_with_default(True, [])
net = tf.layers.conv2d(x, 2, 3, activation=tf.nn.relu)
net = tf.layers.max_pooling2d(net, 2, 2)
net = tf.contrib.layers.flatten(net)
net = tf.layers.dropout(net, 0.5, training=training)
logits = tf.contrib.layers.fully_connected(net, 3, activation_fn=None)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
rng = np.random.RandomState(0)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(3):
        feed = {x: rng.rand(4, 6, 6, 1), y: rng.randint(0, 3, size=4)}
        print("loss", sess.run([train_op, loss], feed)[1])
    print("eval", sess.run(loss, {**feed, training: False}))
    print("variables", " ".join(v.name for v in tf.global_variables()))
"""


def test_rewritten_tf1_program_runs_as_tf1_on_keras3(tmp_path):
    """TFM104 alone on a TF1 program (``tensorflow.compat.v1`` in graph mode,
    as TF2 runs TF1 code): the program, which fails on Keras 3 as written,
    trains with the copied functions, with TF1's variable names."""
    import subprocess
    import sys

    source = dedent(_TF1_PROGRAM)
    migrated = migrate_source(source, select=["TFM104"])
    assert migrated.manual_work == [] and "import tensorflow.compat.v1 as tf" in migrated.output
    script = tmp_path / "tf1_program.py"
    script.write_text(migrated.output)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    assert np.isfinite(float(lines["eval"]))
    assert lines["variables"].split() == ["conv2d/kernel:0", "conv2d/bias:0", "fully_connected/weights:0",
                                          "fully_connected/biases:0"]


# --------------------------------------------------------------------------- numerics (real TF)

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
from migrate.codemod import tf1_layers as L  # imports TensorFlow


def _graph_run(build):
    """Build ``build()`` in a TF1 graph, initialise, run; (outputs, {variable name: value})."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(1)
        outputs = build()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            values = sess.run(outputs)
            variables = {v.name: sess.run(v) for v in tf.compat.v1.global_variables()}
    return values, variables


def _eager_run(build):
    """``build()`` run eagerly in a template, as migrated code runs it (graph
    mode may fuse matmul + bias_add + activation and round differently; Keras
    3 runs eagerly): (outputs, {variable name without the template's scope: value})."""
    template = tf.compat.v1.make_template("layers", build)
    outputs = tf.nest.map_structure(lambda t: t.numpy(), template())
    return outputs, {v.name.split("/", 1)[1]: v.numpy() for v in template.variables}


RNG = np.random.default_rng(0)
X2 = RNG.normal(size=(3, 5)).astype(np.float32)
X3 = RNG.normal(size=(2, 3, 5)).astype(np.float32)
IMAGES = RNG.normal(size=(2, 9, 9, 3)).astype(np.float32)


def _keras(layer, x, *weights):
    layer.build(x.shape)
    if weights:
        layer.set_weights(list(weights))
    return layer(x).numpy()


@pytest.mark.parametrize("x", [X2, X3], ids=["rank2", "rank3"])
def test_dense_matches_keras3_dense(x):
    kernel = RNG.normal(size=(5, 4)).astype(np.float32)
    bias = RNG.normal(size=4).astype(np.float32)  # the zeros default would hide a missing bias
    out, variables = _eager_run(lambda: L.tf1_dense(
        x, 4, activation=tf.nn.tanh, kernel_initializer=tf.constant_initializer(kernel),
        bias_initializer=tf.constant_initializer(bias)))
    assert set(variables) == {"dense/kernel:0", "dense/bias:0"}
    expected = _keras(keras.layers.Dense(4, activation="tanh"), x, kernel, bias)
    # bit for bit: rank 2 is the same MatMul, BiasAdd, Tanh; rank 3 TF1's tensordot
    # over the last axis (one [6, 5] x [5, 4] MatMul), which Keras 3's matmul matches
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("kw,keras_kw", [
    ({}, {}),
    ({"strides": 2, "padding": "same"}, {"strides": 2, "padding": "same"}),
    ({"strides": (1, 2), "padding": "valid"}, {"strides": (1, 2)}),
    ({"dilation_rate": 2, "padding": "same"}, {"dilation_rate": 2, "padding": "same"}),
])
def test_conv2d_matches_keras3_conv2d(kw, keras_kw):
    kernel = RNG.normal(size=(3, 3, 3, 4)).astype(np.float32)
    bias = RNG.normal(size=4).astype(np.float32)
    out, variables = _eager_run(lambda: L.tf1_conv2d(
        IMAGES, 4, 3, activation=tf.nn.relu, kernel_initializer=tf.constant_initializer(kernel),
        bias_initializer=tf.constant_initializer(bias), **kw))
    assert {k: v.shape for k, v in variables.items()} == {"conv2d/kernel:0": (3, 3, 3, 4), "conv2d/bias:0": (4,)}
    np.testing.assert_array_equal(out, _keras(keras.layers.Conv2D(4, 3, activation="relu", **keras_kw),
                                              IMAGES, kernel, bias))


@pytest.mark.parametrize("padding", ["valid", "same"])
def test_pooling_flatten_match_keras3(padding):
    (mx, av, flat, cmx, cav, cflat), _ = _eager_run(lambda: (
        L.tf1_max_pooling2d(IMAGES, 2, 2, padding=padding),
        L.tf1_average_pooling2d(IMAGES, (3, 2), 2, padding=padding),
        L.tf1_flatten(IMAGES),
        L.tf1_max_pool2d(IMAGES, [2, 2], padding=padding.upper()),
        L.tf1_avg_pool2d(IMAGES, [3, 2], stride=2, padding=padding.upper()),
        L.tf1_contrib_flatten(IMAGES),
    ))
    np.testing.assert_array_equal(mx, _keras(keras.layers.MaxPooling2D(2, 2, padding=padding), IMAGES))
    np.testing.assert_array_equal(av, _keras(keras.layers.AveragePooling2D((3, 2), 2, padding=padding), IMAGES))
    np.testing.assert_array_equal(flat, _keras(keras.layers.Flatten(), IMAGES))
    # contrib: stride 2 by default
    np.testing.assert_array_equal(cmx, mx)
    np.testing.assert_array_equal(cav, av)
    np.testing.assert_array_equal(cflat, flat)
    (default_pool, default_avg), _ = _eager_run(lambda: (L.tf1_max_pool2d(IMAGES, 2), L.tf1_avg_pool2d(IMAGES, 3)))
    # stride 2, 'VALID' by default: floor((9 - k) / 2) + 1
    assert default_pool.shape == (2, 4, 4, 3) and default_avg.shape == (2, 4, 4, 3)
    np.testing.assert_array_equal(default_pool, _keras(keras.layers.MaxPooling2D(2, 2), IMAGES))


def test_flatten_keeps_tf1s_static_shapes():
    graph = tf.Graph()
    with graph.as_default():
        known = L.tf1_flatten(tf.compat.v1.placeholder(tf.float32, [None, 4, 4]))
        batch_only = L.tf1_flatten(tf.compat.v1.placeholder(tf.float32, [2, None, 3]))
        unknown = L.tf1_contrib_flatten(tf.compat.v1.placeholder(tf.float32, [None, 3, None]))
    assert known.shape.as_list() == [None, 16]
    assert batch_only.shape.as_list() == [2, None]
    assert unknown.shape.as_list() == [None, None]


def test_contrib_defaults_relu_same_padding_xavier_and_zero_biases():
    (fc, linear), variables = _eager_run(lambda: (L.tf1_fully_connected(X2, 6),
                                                  L.tf1_fully_connected(X2, 6, activation_fn=None,
                                                                        reuse=True, scope="fully_connected")))
    weights, biases = variables["fully_connected/weights:0"], variables["fully_connected/biases:0"]
    np.testing.assert_array_equal(biases, np.zeros(6, np.float32))
    limit = np.sqrt(6.0 / (5 + 6))  # xavier_initializer: glorot uniform
    assert np.abs(weights).max() <= limit and np.abs(weights).max() > limit / 2
    np.testing.assert_array_equal(fc, np.maximum(linear, 0))  # ReLU by default
    assert (fc == 0).any() and (fc > 0).any()
    np.testing.assert_array_equal(fc, _keras(keras.layers.Dense(6, activation="relu"), X2, weights, biases))

    (conv,), variables = _eager_run(lambda: (L.tf1_contrib_conv2d(IMAGES, 4, [3, 3]),))
    assert set(variables) == {"Conv/weights:0", "Conv/biases:0"}
    np.testing.assert_array_equal(conv, _keras(  # 'SAME', stride 1, ReLU
        keras.layers.Conv2D(4, 3, padding="same", activation="relu"), IMAGES,
        variables["Conv/weights:0"], variables["Conv/biases:0"]))

    (no_bias,), variables = _eager_run(lambda: (L.tf1_fully_connected(X2, 6, biases_initializer=None,
                                                                       activation_fn=None),))
    assert set(variables) == {"fully_connected/weights:0"}
    np.testing.assert_array_equal(no_bias, _keras(keras.layers.Dense(6, use_bias=False), X2,
                                                  variables["fully_connected/weights:0"]))


def test_tf1_variable_names_in_graph_mode():
    def build():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1])
        with tf.compat.v1.variable_scope("net"):
            h = L.tf1_conv2d(x, 2, 3)
            h = L.tf1_conv2d(h, 2, 3, name="second")
            h = L.tf1_flatten(L.tf1_max_pooling2d(h, 2, 2))
            h = L.tf1_dense(h, 3)
            h = L.tf1_dense(h, 3)
            h = L.tf1_dense(h, 3, use_bias=False)
        h = L.tf1_fully_connected(h, 3)
        h = L.tf1_fully_connected(h, 3, scope="logits")
        L.tf1_contrib_conv2d(x, 2, 3)
        L.tf1_contrib_conv2d(x, 2, 3)
        return h

    graph = tf.Graph()
    with graph.as_default():
        build()
        names = [v.name for v in tf.compat.v1.global_variables()]
    assert names == [
        "net/conv2d/kernel:0", "net/conv2d/bias:0", "net/second/kernel:0", "net/second/bias:0",
        "net/dense/kernel:0", "net/dense/bias:0", "net/dense_1/kernel:0", "net/dense_1/bias:0",
        "net/dense_2/kernel:0",
        "fully_connected/weights:0", "fully_connected/biases:0", "logits/weights:0", "logits/biases:0",
        "Conv/weights:0", "Conv/biases:0", "Conv_1/weights:0", "Conv_1/biases:0",
    ]


def test_reuse_and_the_scope_initializer_as_tf1():
    def build():
        x = tf.constant(X2)  # in this graph
        with tf.compat.v1.variable_scope("s", initializer=tf.compat.v1.constant_initializer(0.5)):
            a = L.tf1_dense(x, 3, name="fc")  # kernel_initializer None: the scope's initializer
        with tf.compat.v1.variable_scope("s", reuse=True):
            b = L.tf1_dense(x, 3, name="fc")
        with tf.compat.v1.variable_scope("t"):
            c = L.tf1_fully_connected(x, 3, scope="fc")
            d = L.tf1_fully_connected(x, 3, scope="fc", reuse=True)
        return a, b, c, d

    (a, b, c, d), variables = _graph_run(build)
    assert list(variables) == ["s/fc/kernel:0", "s/fc/bias:0", "t/fc/weights:0", "t/fc/biases:0"]
    np.testing.assert_array_equal(variables["s/fc/kernel:0"], np.full((5, 3), 0.5, np.float32))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)


def test_dropout_as_tf1():
    x = np.ones((50, 40), np.float32)
    rate = 0.25

    def build():
        training = tf.compat.v1.placeholder(tf.bool, [])
        keep = tf.compat.v1.placeholder_with_default(0.8, [])
        return (training, L.tf1_dropout(tf.constant(x), rate),  # training=False by default: identity
                L.tf1_dropout(tf.constant(x), rate, training=True),
                L.tf1_dropout(tf.constant(x), rate, training=training),
                L.tf1_contrib_dropout(tf.constant(x), 0.75),  # is_training=True by default
                L.tf1_contrib_dropout(tf.constant(x), 0.75, is_training=False),
                L.tf1_contrib_dropout(tf.constant(x), keep, noise_shape=[None, 1]))

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(3)
        training, off, on, fed, contrib_on, contrib_off, column = build()
        with tf.compat.v1.Session(graph=graph) as sess:
            off, on, contrib_on, contrib_off, column = sess.run([off, on, contrib_on, contrib_off, column])
            fed_off = sess.run(fed, {training: False})
            fed_on = sess.run(fed, {training: True})
    np.testing.assert_array_equal(off, x)
    np.testing.assert_array_equal(contrib_off, x)
    np.testing.assert_array_equal(fed_off, x)
    for dropped in (on, contrib_on, fed_on):
        assert set(np.unique(dropped)) == {0.0, np.float32(1 / (1 - rate))}
        assert 0.15 < (dropped == 0).mean() < 0.35
    # noise_shape [None, 1]: whole rows kept or dropped, keep_prob a tensor
    assert all(len(set(row)) == 1 for row in column)


def _model(x):
    h = L.tf1_conv2d(x, 4, 3, padding="same", activation=tf.nn.relu)
    h = L.tf1_flatten(L.tf1_max_pooling2d(h, 2, 2))
    h = L.tf1_dense(h, 8, activation=tf.nn.relu)
    h = L.tf1_dropout(h, 0.5)
    h = L.tf1_fully_connected(h, 6)
    h = L.tf1_fully_connected(h, 6, scope="fc2")
    h = L.tf1_contrib_conv2d(tf.reshape(h, [-1, 1, 6, 1]), 2, [1, 3], padding="VALID")
    h = L.tf1_dense(L.tf1_contrib_flatten(h), 5, name="hidden")
    return L.tf1_dense(h, 3)


# in the template's scope (`model`, `model_1` ... for each template made)
_TEMPLATE_VARIABLES = {
    "conv2d/kernel:0", "conv2d/bias:0", "dense/kernel:0", "dense/bias:0", "hidden/kernel:0", "hidden/bias:0",
    "dense_1/kernel:0", "dense_1/bias:0", "fully_connected/weights:0", "fully_connected/biases:0",
    "fc2/weights:0", "fc2/biases:0", "Conv/weights:0", "Conv/biases:0",
}


def _in_template(variables) -> set[str]:
    return {v.name.split("/", 1)[1] for v in variables}


def test_make_template_reuses_the_variables_eagerly_and_in_tf_function():
    x = tf.constant(IMAGES)
    model = tf.compat.v1.make_template("model", _model)
    first = model(x)
    variables = list(model.trainable_variables)
    assert _in_template(variables) == _TEMPLATE_VARIABLES
    second = model(x)  # the counters of dense, dense_1 ... restart: the same variables
    assert [id(v) for v in model.trainable_variables] == [id(v) for v in variables]
    np.testing.assert_array_equal(first, second)

    step = tf.function(lambda x: model(x))
    np.testing.assert_array_equal(step(x), first)
    np.testing.assert_array_equal(step(x), first)
    assert [id(v) for v in model.trainable_variables] == [id(v) for v in variables]

    # created inside a tf.function first, as a strategy's step can
    fresh = tf.compat.v1.make_template("model", _model)
    in_function = tf.function(lambda x: fresh(x))
    a, b = in_function(x), in_function(x)
    np.testing.assert_array_equal(a, b)
    assert _in_template(fresh.trainable_variables) == _TEMPLATE_VARIABLES


def test_make_template_in_graph_mode_reuses_the_variables():
    graph = tf.Graph()
    with graph.as_default():
        model = tf.compat.v1.make_template("model", _model)
        x = tf.constant(IMAGES)
        a, b = model(x), model(x)
        names = _in_template(tf.compat.v1.global_variables())
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            a, b = sess.run([a, b])
    assert names == _TEMPLATE_VARIABLES
    np.testing.assert_array_equal(a, b)


def test_migrated_training_step_matches_the_legacy_graph():
    """What TFM301 makes of a tf.layers model -- the model built once by a
    template, a GradientTape step, Keras SGD -- against the TF1 graph it came
    from (the same functions, GradientDescentOptimizer, a session), from the
    same initial values: the same losses, step by step."""
    rng = np.random.default_rng(5)
    batches = [(rng.normal(size=(4, 9, 9, 3)).astype(np.float32), rng.integers(0, 3, size=4)) for _ in range(3)]

    def loss_of(x, y):
        logits = _model(x)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 9, 9, 3])
        y = tf.compat.v1.placeholder(tf.int64, [None])
        loss = loss_of(x, y)
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            initial = {v.name: sess.run(v) for v in tf.compat.v1.global_variables()}
            legacy = [sess.run([train, loss], {x: bx, y: by})[1] for bx, by in batches]

    model = tf.compat.v1.make_template("model", loss_of)
    model(tf.zeros([1, 9, 9, 3]), tf.zeros([1], tf.int64))
    for v in model.trainable_variables:
        v.assign(initial[v.name.split("/", 1)[1]])
    optimizer = keras.optimizers.SGD(learning_rate=0.1)

    @tf.function
    def step(bx, by):
        with tf.GradientTape() as tape:
            value = model(bx, by)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(value, variables), variables))
        return value

    migrated = [step(bx, by).numpy() for bx, by in batches]
    np.testing.assert_allclose(migrated, legacy, rtol=1e-6)
