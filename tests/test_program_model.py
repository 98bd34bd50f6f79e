"""The program model (migrate/codemod/program/): tracing values through
local names, helpers and the project's sibling modules, and what TFM301 and
TFM300 do with it.

- the tracer follows names, tuple unpacking, returned dicts and helper
  returns, in this file and in sibling modules; an absent project module is
  opaque, a library is not the project's;
- a model built by a sibling module's function is built once under the
  strategy: read when the module is there, taken as an opaque builder (with
  a note) when it is not; a loss reading a collection such a builder may
  fill is declined;
- a device function returned by a helper of this file that only builds the
  setter is taken as the setter itself (the helper goes when unused); any
  other device function traced to a setter gets a located reason;
- a SyncReplicasOptimizer built in a helper a device-setter block reaches,
  and a train op built before the block, are reported where they are.

Fixtures are programs written for these tests in the shapes seen in real
TF1 code; each output parses and a second run changes nothing.
"""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from migrate.codemod.engine import dedent, migrate_source
from migrate.codemod.program.project import ProjectIndex, index_for
from migrate.codemod.program.tracing import Tracer
from migrate.codemod.tfnames import TFNames


def migrate(source: str, path: str = "train.py", select=("TFM301",)):
    src = dedent(source)
    ast.parse(src)
    select = list(select) if select is not None else None
    result = migrate_source(src, path=path, select=select)
    ast.parse(result.output)
    assert migrate_source(result.output, path=path, select=select).output == result.output
    return result


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


# ---------------------------------------------------------------- tracer
def _tracer(source: str, directory=None):
    module = cst.parse_module(dedent(source))
    return module, Tracer(module, TFNames.from_module(module).qualname, ProjectIndex(directory))


def _device_arg(with_node: cst.With) -> cst.BaseExpression:
    return with_node.items[0].item.args[0].value


def _function(module: cst.Module, name: str) -> cst.FunctionDef:
    return next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == name)


def _with(fn: cst.FunctionDef) -> cst.With:
    return next(s for s in fn.body.body if isinstance(s, cst.With))


def test_tracer_follows_tuple_unpacking_into_every_return_of_a_helper():
    module, tracer = _tracer('''
        import tensorflow as tf


        def placement(flags):
            if not flags.ps_hosts:
                return None, ""
            cluster = tf.train.ClusterSpec({"ps": flags.ps_hosts, "worker": flags.worker_hosts})
            setter = tf.train.replica_device_setter(cluster=cluster)
            return setter, "grpc://" + flags.worker_hosts[0]


        def main(flags):
            device, master = placement(flags)
            with tf.device(device):
                pass
    ''')
    main = _function(module, "main")
    block = _with(main)
    sources = tracer.sources(_device_arg(block), main, block)
    assert [(s.kind, code(s.expr)) for s in sources] == [
        ("expr", "None"), ("expr", "tf.train.replica_device_setter(cluster=cluster)")]
    assert sources[1].via == ("`placement(...)`",)
    assert sources[1].function is _function(module, "placement")
    # the other element of the same call: what each return gives in second place
    assert [code(s.expr) for s in tracer.sources(cst.Name("master"), main, block)] == [
        '""', '"grpc://" + flags.worker_hosts[0]']


def test_tracer_follows_returned_dicts_locals_and_stops_at_parameters():
    module, tracer = _tracer('''
        import tensorflow as tf


        def build(images, rate):
            loss = tf.reduce_sum(images)
            op = tf.train.AdamOptimizer(rate).minimize(loss)
            return {"loss": loss, "train_op": op}


        def main(images, rate):
            model = build(images, rate)
            step = model["train_op"]
            fetched = rate
            print(step, fetched)
    ''')
    main = _function(module, "main")
    last = main.body.body[-1]
    step, fetched = (a.value for a in last.body[0].value.args)
    [op] = tracer.sources(step, main, last)
    assert code(op.expr) == "tf.train.AdamOptimizer(rate).minimize(loss)" and op.kind == "expr"
    [param] = tracer.sources(fetched, main, last)
    assert param.kind == "parameter" and code(param.expr) == "rate"


def test_tracer_takes_the_binding_before_the_reading_statement_and_the_branches_after_it():
    """Bindings in branches add to the last unconditional one (a superset of
    the values that may reach the read: sound, not exact)."""
    module, tracer = _tracer('''
        def main(flag):
            rate = 0.1
            first = rate
            if flag:
                rate = 0.2
            else:
                rate = 0.3
            second = rate
    ''')
    main = _function(module, "main")
    first, second = main.body.body[1], main.body.body[3]
    assert [code(s.expr) for s in tracer.sources(cst.Name("rate"), main, first)] == ["0.1"]
    assert [code(s.expr) for s in tracer.sources(cst.Name("rate"), main, second)] == ["0.1", "0.2", "0.3"]


def test_tracer_reads_a_present_sibling_module_and_marks_an_absent_one_opaque(tmp_path):
    (tmp_path / "towers.py").write_text(dedent('''
        import tensorflow as tf


        def device_for(cluster):
            return tf.train.replica_device_setter(cluster=cluster)
    '''))
    module, tracer = _tracer('''
        import numpy as np
        import tensorflow as tf

        import towers
        from layers_lib import dense_stack


        def main(cluster, x):
            device = towers.device_for(cluster)
            y = dense_stack(x)
            z = np.zeros(3)
    ''', directory=str(tmp_path))
    main = _function(module, "main")
    _, y_line, z_line = main.body.body
    [setter] = tracer.sources(cst.Name("device"), main, y_line)
    # qualified as the sibling module imports TensorFlow
    assert tracer.qualname(setter.expr.func, setter.unit) == "train.replica_device_setter"
    assert setter.unit.project.name == "towers" and setter.via == ("`towers.device_for(...)`",)
    [opaque] = tracer.sources(cst.Name("y"), main, z_line)
    assert opaque.kind == "opaque" and opaque.opaque.name == "layers_lib" and not opaque.opaque.present
    [library] = tracer.sources(cst.Name("z"), main, None)
    assert library.kind == "expr" and code(library.expr) == "np.zeros(3)"


def test_project_index_knows_libraries_and_reparses_a_changed_module(tmp_path):
    index = ProjectIndex(str(tmp_path))
    assert index.find("numpy") is None and index.find("os.path") is None and index.find("tensorflow.compat") is None
    assert not index.find("model_lib").present
    target = tmp_path / "model_lib.py"
    target.write_text("A = 1\n")
    found = index.find("model_lib")
    assert found.present and code(index.parse(found).body[0]) == "A = 1\n"
    import os
    target.write_text("A = 22\n")
    os.utime(target, ns=(1, 10**18))  # a later mtime than the first write's
    assert code(index.parse(found).body[0]) == "A = 22\n"
    (tmp_path / "broken.py").write_text("def (:\n")
    assert index.parse(index.find("broken")) is None  # unreadable: taken as absent
    assert index_for("<string>").directory is None


# ---------------------------------------------------------------- model builders of sibling modules
def _driver(model_line: str, header: str = "import shapes_net\n") -> str:
    return f'''
import tensorflow as tf

{header}

def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 16])
        labels = tf.placeholder(tf.float32, [None, 2])
        {model_line}
        loss = tf.reduce_mean(tf.square(logits - labels))
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for step in range(steps):
            sess.run(train_op, feed_dict={{images: [[0.5] * 16], labels: [[1.0, 0.0]]}})
'''


def _lines(text: str) -> list[str]:
    """The non-blank lines (where a removed def leaves its blank lines)."""
    return [line for line in text.splitlines() if line.strip() and line.strip() != "pass"]


LOCAL_FORWARD = '''
def forward(images):
    w = tf.Variable(tf.zeros([16, 2]))
    return tf.matmul(images, w)
'''


def test_a_model_from_an_absent_module_is_built_like_a_local_variable_helper(tmp_path):
    """Absent `shapes_net`: its `forward()` is an opaque builder, migrated as a
    local helper creating tf.Variable objects is (the variable recorder), its
    first build traced (what it may add to graph collections stays in that
    build's graph: an eager build's terms would be copied into every step's),
    with one warning at the call saying what the program now assumes of it."""
    source = _driver("logits = shapes_net.forward(images)")
    result = migrate(source, path=str(tmp_path / "train.py"))
    assert "strategy.scope()" in result.output and "replica_device_setter" not in result.output
    local = migrate(_driver("logits = forward(images)", header=LOCAL_FORWARD), path=str(tmp_path / "local.py"))
    expected = local.output.replace(dedent(LOCAL_FORWARD).strip() + "\n", "import shapes_net\n").replace(
        "logits = forward(images)", "logits = shapes_net.forward(images)").replace(
        "# Build the model's variables once, under the strategy, as the TF1 graph did.\n",
        "# Build the model's variables once, under the strategy, as the TF1 graph did: traced,\n"
        "        # so that the terms the model adds to its collections stay in this build's graph.\n").replace(
        "\n        model(tf.zeros(", "\n        tf.function(model)(tf.zeros(")
    assert _lines(result.output) == _lines(expected)
    assert "model = ModelBuiltOnce(model_fn)" in result.output
    [note] = [d for d in result.diagnostics if "shapes_net" in d.message]
    assert note.severity == "warning" and note.fixed and note.line == line_of(source, "shapes_net.forward(")
    assert "not in this project" in note.message and "in the same order at each call" in note.message
    assert "`shapes_net` must be migrated with this file: run tfmigrate on it" in note.hint
    assert not result.manual_work


def test_a_model_from_a_present_sibling_is_read_there(tmp_path):
    """Present `shapes_net.py` creating get_variable weights: a template, as
    for the file's own get_variable helpers; a function there creating
    nothing is no model builder (the block stays declined as before)."""
    (tmp_path / "shapes_net.py").write_text(dedent('''
        import tensorflow.compat.v1 as tf


        def _weights(shape):
            return tf.get_variable("w", shape)


        def forward(images):
            return tf.matmul(images, _weights([16, 2]))


        def identity(images):
            return images * 1.0
    '''))
    result = migrate(_driver("logits = shapes_net.forward(images)"), path=str(tmp_path / "train.py"))
    assert 'model = tf.compat.v1.make_template("model", model_fn)' in result.output
    [note] = [d for d in result.diagnostics if "shapes_net" in d.message]
    assert note.severity == "info" and "`forward()` of the project module `shapes_net`" in note.message
    declined = migrate(_driver("logits = shapes_net.identity(images)"), path=str(tmp_path / "train2.py"))
    assert declined.output == dedent(_driver("logits = shapes_net.identity(images)"))
    assert any("comes from `shapes_net.identity(...)`" in d.message for d in declined.manual_work)


def test_a_loss_reading_a_collection_an_opaque_builder_fills_keeps_the_read_in_the_step(tmp_path):
    """A collection only explicit calls fill (add_to_collection, the
    tf.losses functions) is filled at each call: the read stays in the step,
    and the one warning at the builder's call says the module is assumed to
    fill it so."""
    source = _driver("logits = shapes_net.forward(images)").replace(
        "loss = tf.reduce_mean(tf.square(logits - labels))",
        "loss = tf.reduce_mean(tf.square(logits - labels)) + tf.add_n(tf.get_collection('penalties'))")
    result = migrate(source, path=str(tmp_path / "train.py"))
    assert not result.manual_work, [d.message for d in result.manual_work]
    assert "tf.add_n(tf.get_collection('penalties', model_scope))" in result.output
    [note] = [d for d in result.diagnostics if d.message.startswith("`shapes_net.forward(...)`")]
    assert note.line == line_of(source, "shapes_net.forward(")
    assert "add its terms to 'penalties' at each call" in note.message


def test_a_regularization_read_after_an_opaque_builder_is_declined(tmp_path):
    """REGULARIZATION_LOSSES is what TensorFlow fills when a variable is
    created with a regularizer: once, in the first build, which the step
    would not see; the absent module may do so."""
    source = _driver("logits = shapes_net.forward(images)").replace(
        "loss = tf.reduce_mean(tf.square(logits - labels))",
        "loss = tf.reduce_mean(tf.square(logits - labels)) + tf.losses.get_regularization_loss()")
    result = migrate(source, path=str(tmp_path / "train.py"))
    assert result.output == dedent(source)
    [reason] = [d for d in result.manual_work if "collection" in d.message]
    assert reason.line == line_of(source, "tf.losses.get_regularization_loss()")
    assert "REGULARIZATION_LOSSES collection" in reason.message
    assert "the model builder `shapes_net.forward(...)` of `shapes_net`, which is not in this project" in reason.message
    assert "get_variable's regularizer runs once, when the variable is created" in reason.message


# ---------------------------------------------------------------- device functions from helpers
SETTER_HELPER = '''
def worker_placement(cluster, task):
    """Variables on the ps tasks, ops on this worker."""
    worker = "/job:worker/task:%d" % task
    return tf.train.replica_device_setter(worker_device=worker, cluster=cluster)
'''


def _setter_program(setter_lines: str, device: str, header: str = SETTER_HELPER) -> str:
    return f'''
import tensorflow as tf

{header}

def train(cluster, server, task):
    {setter_lines}
    with tf.device({device}):
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.Variable(tf.zeros([3, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(10):
            sess.run(train_op, feed_dict={{x: [[1.0, 2.0, 3.0]], y: [[1.0]]}})
'''


@pytest.mark.parametrize("setter_lines, device", [
    ("setter = worker_placement(cluster, task)", "setter"),
    ("pass", "worker_placement(cluster, task)"),
])
def test_a_device_function_from_a_setter_helper_is_migrated_like_the_setter(setter_lines, device):
    result = migrate(_setter_program(setter_lines, device))
    inline = migrate(_setter_program(
        'setter = tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % task, cluster=cluster)',
        "setter", header=""))
    assert "strategy.scope()" in inline.output
    # the helper goes with the block it placed: the outputs are the same program
    assert _lines(result.output) == _lines(inline.output)
    assert "worker_placement" not in result.output


def test_a_setter_helper_used_elsewhere_stays():
    source = _setter_program("setter = worker_placement(cluster, task)", "setter") + '''

def placement_for_eval(cluster):
    return worker_placement(cluster, 0)
'''
    result = migrate(source)
    assert "strategy.scope()" in result.output
    assert "def worker_placement(cluster, task):" in result.output


@pytest.mark.parametrize("header, setter_lines, reason", [
    # the helper also starts the task's server: dropping its call would drop that
    ('''
def placement_and_server(cluster, task):
    server = tf.train.Server(cluster, job_name="worker", task_index=task)
    return tf.train.replica_device_setter(cluster=cluster)
''', "setter = placement_and_server(cluster, task)",
     "its device function `setter` is the replica_device_setter(...) returned by `placement_and_server(...)`"),
    # single-machine or distributed, chosen at run time, with the master to use
    ('''
def device_and_target(cluster, task):
    if cluster is None:
        return None, ""
    server = tf.train.Server(cluster, job_name="worker", task_index=task)
    return tf.train.replica_device_setter(cluster=cluster), server.target
''', "setter, target = device_and_target(cluster, task)",
     ("and None on one machine (modes chosen at run time); TFM301 carries both over under ParameterServerStrategy,"
     " `device_and_target()` then returning the task's cluster resolver or, on one machine, an in-process cluster of"
     " one ps and one worker, but `device_and_target()` takes arguments")),
])
def test_other_device_functions_traced_to_a_setter_are_reported_where_they_are(header, setter_lines, reason):
    source = _setter_program(setter_lines, "setter", header=header)
    result = migrate(source)
    assert result.output == dedent(source)
    [block] = [d for d in result.manual_work if "device-setter block left as TF1" in d.message]
    assert reason in block.message
    assert block.line == line_of(source, "with tf.device(setter):")


# ---------------------------------------------------------------- where the training is built
def test_a_sync_optimizer_built_in_a_helper_the_block_reaches_names_the_chain():
    source = '''
import tensorflow as tf


def optimize(loss, workers):
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                         replicas_to_aggregate=workers, total_num_replicas=workers)
    return opt.minimize(loss)


def build_and_train(cluster, server, workers):
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(tf.zeros([3, 1]))
    train_op = optimize(tf.reduce_sum(tf.matmul(x, w)), workers)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        sess.run(train_op, feed_dict={x: [[1.0, 2.0, 3.0]]})


def run(cluster, server, workers):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        build_and_train(cluster, server, workers)
'''
    result = migrate(source)
    assert result.output == dedent(source)
    [sync] = [d for d in result.manual_work if "SyncReplicasOptimizer left in place" in d.message]
    assert "reaches through `build_and_train()` -> `optimize()`" in sync.message
    assert sync.line == line_of(source, "tf.train.SyncReplicasOptimizer(")


def test_a_train_op_built_before_the_device_block_is_reported_there():
    source = '''
import tensorflow as tf


def main(cluster, server):
    x = tf.placeholder(tf.float32)
    w = tf.Variable(0.0)
    cost = tf.square(x * w - 1.0)
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(cost)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        saver = tf.train.Saver()
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(5):
            sess.run(train_op, feed_dict={x: 2.0})
'''
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = [d for d in result.manual_work if "built before the device-setter block" in d.message]
    assert reason.line == line_of(source, "train_op = tf.train.GradientDescentOptimizer")


def test_reasons_found_with_a_builder_inlined_are_kept_when_the_inlining_is_undone(tmp_path):
    """TFM300 inlines `build()`, TFM301 then declines (the loss reads a
    collection the absent model module may fill when it creates a variable):
    the engine undoes the inlining, and the reason found with it inlined is
    reported too."""
    source = '''
import tensorflow as tf

import shapes_net


def build(images, labels):
    logits = shapes_net.forward(images)
    loss = tf.reduce_mean(tf.square(logits - labels)) + tf.losses.get_regularization_loss()
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    return loss, train_op


def train(cluster, server, steps):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 16])
        labels = tf.placeholder(tf.float32, [None, 2])
        loss, train_op = build(images, labels)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for step in range(steps):
            sess.run(train_op, feed_dict={images: [[0.5] * 16], labels: [[1.0, 0.0]]})
'''
    result = migrate(source, path=str(tmp_path / "train.py"), select=("TFM300", "TFM301"))
    assert result.output == dedent(source)
    messages = {d.message: d.line for d in result.manual_work}
    [inlined] = [m for m in messages if m.endswith("(found with the rewrite of TFM300 applied)")]
    assert "reads the REGULARIZATION_LOSSES collection" in inlined
    assert messages[inlined] == line_of(source, "tf.losses.get_regularization_loss()")
    assert any("comes from `build(...)`" in m for m in messages)


def test_a_fetched_value_from_a_helper_that_trains_nothing_is_not_named_as_the_train_op():
    """`loss_value = squared(label, pred)` is fetched, but `squared()` builds no
    train op: the reason is what stopped the block (two ways of training),
    not the helper."""
    source = '''
import tensorflow as tf


def squared(label, pred):
    return tf.square(label - pred)


def main(cluster, server, sync):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32)
        w = tf.Variable(0.0)
        loss_value = squared(1.0, x * w)
        opt = tf.train.GradientDescentOptimizer(0.1)
        if sync:
            train_op = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2).minimize(loss_value)
        else:
            train_op = opt.minimize(loss_value)
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(3):
            sess.run([train_op, loss_value], feed_dict={x: 2.0})
'''
    result = migrate(source)
    assert result.output == dedent(source)
    assert not any("comes from `squared(...)`" in d.message for d in result.manual_work)
    [reason] = [d for d in result.manual_work if "both branches" in d.message]
    assert reason.line == line_of(source, "if sync:")


# ---------------------------------------------------------------- a train op built in a sibling module
REGRESSION_MODEL = '''
import tensorflow as tf

FEATURES = 3
LEARNING_RATE = 0.05


def weights(shape):
    return tf.get_variable("weights", shape, initializer=tf.zeros_initializer())


def build(features, targets):
    predictions = tf.matmul(features, weights([FEATURES, 1]))
    loss = tf.reduce_mean(tf.square(predictions - targets))
    train_op = tf.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    return loss, train_op
'''


def _trainer(build_line: str = "loss, train_op = regression_model.build(features, targets)",
             header: str = "import regression_model\n") -> str:
    return f'''
import tensorflow as tf

{header}

def main(cluster, server):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        features = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        {build_line}
    with tf.train.MonitoredTrainingSession(master=server.target) as sess:
        for _ in range(100):
            sess.run(train_op, feed_dict={{features: [[1.0, 2.0, 3.0]], targets: [[1.0]]}})
'''


def test_a_train_op_built_in_a_sibling_module_is_inlined_with_its_names_qualified(tmp_path):
    (tmp_path / "regression_model.py").write_text(dedent(REGRESSION_MODEL))
    source = _trainer()
    result = migrate(source, path=str(tmp_path / "trainer.py"), select=("TFM101", "TFM300", "TFM301"))
    # the same program with the builder's code written in the block, its module's names qualified
    written_here = _trainer(
        "predictions = tf.matmul(features, regression_model.weights([regression_model.FEATURES, 1]))\n"
        "        loss = tf.reduce_mean(tf.square(predictions - targets))\n"
        "        train_op = tf.train.GradientDescentOptimizer(regression_model.LEARNING_RATE).minimize(loss)")
    expected = migrate(written_here, path=str(tmp_path / "trainer.py"), select=("TFM101", "TFM301"))
    assert "strategy.scope()" in expected.output
    assert result.output == expected.output
    assert "optimizer = tf.keras.optimizers.SGD(learning_rate=regression_model.LEARNING_RATE)" in result.output
    [inlined] = [d for d in result.diagnostics if d.code == "TFM300"]
    assert inlined.line == line_of(source, "regression_model.build(")
    assert "(regression_model.py)" in inlined.message and "left as it is" in inlined.message
    [note] = [d for d in result.diagnostics if "`weights()` of the project module" in d.message]
    assert note.line == line_of(source, "with tf.device(")  # the inlined call is not in this file
    # the sibling is not touched by the driver's migration
    assert (tmp_path / "regression_model.py").read_text() == dedent(REGRESSION_MODEL)


@pytest.mark.parametrize("model_code, trainer_header", [
    # the builder reads another import of its module: it would mean something else here
    (REGRESSION_MODEL.replace("import tensorflow as tf\n", "import tensorflow as tf\nimport numpy as np\n").replace(
        "LEARNING_RATE)", "np.float32(LEARNING_RATE))"), "import regression_model\n"),
    # a module-level name bound in a compound statement: which value it has is not traced
    (REGRESSION_MODEL.replace("import tensorflow as tf\n", "import os\n\nimport tensorflow as tf\n").replace(
        "LEARNING_RATE = 0.05\n",
        "try:\n    LEARNING_RATE = float(os.environ['LR'])\nexcept KeyError:\n    LEARNING_RATE = 0.05\n"),
     "import regression_model\n"),
    # absent: the train op's code cannot be read
    (None, "import regression_model\n"),
])
def test_a_sibling_train_op_builder_that_cannot_mean_the_same_here_is_left(tmp_path, model_code, trainer_header):
    if model_code is not None:
        (tmp_path / "regression_model.py").write_text(dedent(model_code))
    source = _trainer(header=trainer_header)
    result = migrate(source, path=str(tmp_path / "trainer.py"), select=("TFM300", "TFM301"))
    assert result.output == dedent(source)
    [reason] = [d for d in result.manual_work if "comes from `regression_model.build(...)`" in d.message]
    assert reason.line == line_of(source, "regression_model.build(")
    if model_code is None:
        assert "a function of `regression_model`, which is not in this project" in reason.message
    else:
        assert "a function of the project module `regression_model` that TFM300 could not inline" in reason.message


def test_a_sibling_module_rebound_in_the_function_is_not_inlined(tmp_path):
    (tmp_path / "regression_model.py").write_text(dedent(REGRESSION_MODEL))
    source = _trainer().replace("def main(cluster, server):\n", "def main(cluster, server, regression_model):\n")
    result = migrate(source, path=str(tmp_path / "trainer.py"), select=("TFM300", "TFM301"))
    assert result.output == dedent(source)


def test_a_sibling_module_with_another_tensorflow_alias_is_read_with_tf2_names(tmp_path):
    """`import tensorflow as tf1` there: TFM101 spells it `tf` as this file
    does, so the builder means the same here and is inlined."""
    (tmp_path / "regression_model.py").write_text(
        dedent(REGRESSION_MODEL).replace("import tensorflow as tf\n", "import tensorflow as tf1\n").replace(
            "tf.", "tf1."))
    result = migrate(_trainer(), path=str(tmp_path / "trainer.py"), select=("TFM101", "TFM300", "TFM301"))
    assert "strategy.scope()" in result.output and "tf1" not in result.output
    assert [d.code for d in result.diagnostics if d.code == "TFM300"] == ["TFM300"]


# ---------------------------------------------------------------- a device block calling the whole training
PROCEDURE = '''
import tensorflow as tf


def train_and_report(server, is_chief, steps):
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(tf.zeros([3, 1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks) as sess:
        while not sess.should_stop():
            _, loss_value = sess.run([train_op, loss], feed_dict={x: [[1.0, 2.0, 3.0]], y: [[1.0]]})
            print(loss_value)


def main(_, cluster, server, task_index):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        train_and_report(server, task_index == 0, 100)
'''


def test_a_procedure_building_and_training_called_in_the_block_is_inlined_and_migrated():
    """`with tf.device(setter): train_and_report(...)`: the procedure's body
    (graph, hook list, session loop) goes into the block, and is migrated as
    if written there; `is_chief`, read only by the TF1 session, is not bound."""
    result = migrate(PROCEDURE, select=("TFM300", "TFM301"))
    written_here = '''
import tensorflow as tf


def main(_, cluster, server, task_index):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        steps = 100
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.Variable(tf.zeros([3, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
        hooks = [tf.train.StopAtStepHook(last_step=steps)]
        with tf.train.MonitoredTrainingSession(master=server.target, hooks=hooks) as sess:
            while not sess.should_stop():
                _, loss_value = sess.run([train_op, loss], feed_dict={x: [[1.0, 2.0, 3.0]], y: [[1.0]]})
                print(loss_value)
'''
    expected = migrate(written_here)
    assert "strategy.scope()" in expected.output and "hooks" not in expected.output
    assert result.output == expected.output
    assert "is_chief" not in result.output and "train_and_report" not in result.output
    assert "while not scheduled_steps >= steps:" in result.output  # the hook list bounds the loop


def test_a_procedure_whose_name_main_reads_is_not_inlined_over_it():
    """The procedure binds `loss_value`, which the caller also reads: inlining
    would rebind it, so the block is left (with its reason)."""
    source = PROCEDURE.replace("        train_and_report(server, task_index == 0, 100)\n",
                               "        train_and_report(server, task_index == 0, 100)\n    loss_value = None\n"
                               "    print(loss_value)\n")
    result = migrate(source, select=("TFM300", "TFM301"))
    assert result.output == dedent(source)
    assert result.manual_work


def test_a_procedure_calling_a_train_op_builder_is_inlined_and_then_the_builder():
    """`with tf.device(setter): run(...)` where `run()` calls
    `loss, train_op = build(x, y)`: two rounds of inlining put both bodies in
    the block, as if the program had been written there."""
    source = PROCEDURE.replace('''    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
''', '''    global_step, loss, train_op = build(x, y, w)
''').replace("def train_and_report(", '''def build(x, y, w):
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    return global_step, loss, train_op


def train_and_report(''')
    assert "global_step, loss, train_op = build(x, y, w)" in source
    result = migrate(source, select=("TFM300", "TFM301"))
    assert result.output == migrate(PROCEDURE, select=("TFM300", "TFM301")).output
    assert sorted(d.line for d in result.diagnostics if d.code == "TFM300") == [
        line_of(source, "global_step, loss, train_op = build("), line_of(source, "train_and_report(server, task")]


def test_a_train_op_bound_again_after_the_optimizer_built_it_is_declined_there():
    """`if is_chief: ... train_op = tf.no_op()` under control dependencies on
    a moving average: the step would lose the averages; declined, located."""
    source = '''
import tensorflow as tf


def main(cluster, server, is_chief):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.Variable(tf.zeros([3, 1]))
        loss = tf.reduce_sum(tf.matmul(x, w))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        if is_chief:
            averages = tf.train.ExponentialMovingAverage(0.99, global_step)
            with tf.control_dependencies([averages.apply(tf.trainable_variables()), train_op]):
                train_op = tf.no_op()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
        for _ in range(10):
            sess.run(train_op, feed_dict={x: [[1.0, 2.0, 3.0]]})
'''
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = [d for d in result.manual_work if "bound again" in d.message]
    assert reason.line == line_of(source, "if is_chief:") and "`train_op = tf.no_op()`" in reason.message
    # without the rebinding the averages never ran in TF1 either: the same block migrates
    plain = migrate(source.replace("                train_op = tf.no_op()\n", "                pass\n"))
    assert "strategy.scope()" in plain.output


def test_a_call_of_an_absent_module_given_no_graph_value_is_called_in_the_model_function(tmp_path):
    """`data_lib.scale_for("mnist")` reads no placeholder or tensor of the
    block, but its value feeds the loss and minimize() trains every trainable
    variable: it may be one (a learned scale), which a value made once under
    the strategy's scope would leave untrained. It is called in the model
    function (recorded if it makes a variable; a constant comes back the same),
    with the module's warning. With an explicit var_list nothing else is
    trained, and it stays where it was."""
    source = _setter_program(
        'setter = tf.train.replica_device_setter(cluster=cluster)', "setter", header="import data_lib\n").replace(
        "        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))\n",
        '        scale = data_lib.scale_for("mnist")\n'
        "        loss = scale * tf.reduce_mean(tf.square(tf.matmul(x, w) - y))\n")
    result = migrate(source, path=str(tmp_path / "train.py"))
    assert "strategy.scope()" in result.output and not result.manual_work
    model_fn = result.output[result.output.index("def model_fn("):result.output.index("class ModelBuiltOnce")]
    assert 'scale = data_lib.scale_for("mnist")' in model_fn
    assert "+ model.trainable_variables" in result.output
    [note] = [d for d in result.diagnostics if "data_lib" in d.message]
    assert note.severity == "warning" and note.message.startswith("`data_lib.scale_for(...)` comes from `data_lib`")
    listed = source.replace(".minimize(loss", ".minimize(loss, var_list=[w]")
    assert listed != source
    kept = migrate(listed, path=str(tmp_path / "train2.py"))
    assert "strategy.scope()" in kept.output and "ModelBuiltOnce" not in kept.output
    assert not any("data_lib" in d.message for d in kept.diagnostics)


