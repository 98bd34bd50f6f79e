"""TFM303 on the tower programs real multi-GPU scripts are (the in-graph
half of issue 14): towers slicing a fed batch by their index, device
functions instead of device strings, an optimizer each tower builds, values
only the first tower computes, and the shapes still declined with a located
reason (towers that only compute losses for one ``minimize``, towers written
out per device across a cluster's tasks).

Every program here is ours, written in the shapes the corpus showed.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrate.codemod.engine import migrate_source

ROOT = Path(__file__).resolve().parent.parent


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _migrate(code: str, select=("TFM303",)):
    result = migrate_source(code, select=list(select) if select else None)
    ast.parse(result.output)
    again = migrate_source(result.output, select=list(select) if select else None)
    assert again.output == result.output, "a second run changed the output"
    return result


def _line_of(code: str, text: str) -> int:
    hits = [i for i, line in enumerate(code.splitlines(), 1) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


# --------------------------------------------------------------------------- before -> after

# Module-level towers: a device function putting variables on the CPU, each
# tower slicing its rows of the fed batch by its index, the optimizer built in
# every tower, the first tower creating the variables (reuse=g > 0).
INDEX_SLICED_BEFORE = '''\
import numpy as np
import tensorflow as tf

GPUS = 2
PER_GPU = 64
PINNED = ["Variable", "VariableV2"]


def classifier(images, reuse):
    with tf.variable_scope("classifier", reuse=reuse):
        w = tf.get_variable("w", [784, 10])
        return tf.matmul(images, w)


def mean_of_towers(tower_grads):
    return [(tf.reduce_mean(tf.stack([g for g, _ in gv]), 0), gv[0][1]) for gv in zip(*tower_grads)]


def gpu_with_cpu_variables(device, ps_device="/cpu:0"):
    def choose(op):
        node = op if isinstance(op, tf.NodeDef) else op.node_def
        if node.op in PINNED:
            return ps_device
        return device
    return choose


with tf.device("/cpu:0"):
    tower_grads = []
    images = tf.placeholder(tf.float32, [None, 784])
    labels = tf.placeholder(tf.float32, [None, 10])
    for g in range(GPUS):
        with tf.device(gpu_with_cpu_variables("/gpu:{}".format(g))):
            batch_images = images[g * PER_GPU:(g + 1) * PER_GPU]
            batch_labels = labels[g * PER_GPU:(g + 1) * PER_GPU]
            logits = classifier(batch_images, reuse=g > 0)
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=batch_labels))
            adam = tf.train.AdamOptimizer(learning_rate=0.001)
            tower_grads.append(adam.compute_gradients(loss))
    train_op = adam.apply_gradients(mean_of_towers(tower_grads))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(100):
            xs = np.random.rand(GPUS * PER_GPU, 784)
            ys = np.eye(10)[np.random.randint(10, size=GPUS * PER_GPU)]
            sess.run(train_op, feed_dict={images: xs, labels: ys})
'''

INDEX_SLICED_AFTER = '''\
import numpy as np
import tensorflow as tf

GPUS = 2
PER_GPU = 64


def classifier(images, reuse):
    with tf.compat.v1.variable_scope("classifier", reuse=reuse):
        w = tf.compat.v1.get_variable("w", [784, 10])
        return tf.matmul(images, w)


strategy = tf.distribute.MirroredStrategy(["/gpu:{}".format(g) for g in range(GPUS)])

def model_fn(images, labels):
    batch_images = images
    batch_labels = labels
    logits = classifier(batch_images, reuse=False)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=tf.stop_gradient(batch_labels)))
    return loss

with strategy.scope():
    global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    adam = tf.keras.optimizers.Adam(learning_rate=0.001, epsilon=1e-08)
    model = tf.compat.v1.make_template("model", model_fn)
    # Build the model's variables once, under the strategy, as the TF1 graph did.
    model(tf.zeros([1, 784], tf.float32), tf.zeros([1, 10], tf.float32))
trainable_variables = model.trainable_variables

@tf.function
def train_step(images, labels):
    def train_step_replica(images, labels):
        with tf.GradientTape() as tape:
            loss = model(images, labels)
            # average_gradients averaged the replicas' gradients; strategies sum them.
            scaled_loss = loss / strategy.num_replicas_in_sync
        gradients = tape.gradient(scaled_loss, trainable_variables)
        adam.apply_gradients(zip(gradients, trainable_variables))
        global_step.assign_add(1)
        return loss
    def train_step_slice(images, labels):
        # tower g sliced its rows of the batch by its index: replica g takes the same rows
        context = tf.distribute.get_replica_context()
        g = context.replica_id_in_sync_group
        images = images[g * PER_GPU:(g + 1) * PER_GPU]
        labels = labels[g * PER_GPU:(g + 1) * PER_GPU]
        return train_step_replica(images, labels)
    strategy.run(train_step_slice, args=(images, labels))
    return None
# A tf.function call costs more than a TF1 session's run of its cached graph:
# train_steps runs steps_per_call steps per call (run_pending_steps), and the rest
# of the loop body (finish_train_step) runs on each step's results after that call.
steps_per_call = 4
pending_steps = []

@tf.function
def train_steps(*stacked):
    # The steps of one call, in order.
    return [train_step(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

def finish_train_step(step_results):
    # The rest of the loop body, run on this step's results.
    pass

def run_pending_steps():
    # Steps whose arguments have the same shapes share a call, stacked.
    groups = []
    for arguments, captured in pending_steps:
        images, labels = arguments
        # the inputs as tensors of the step's dtypes, which take tf.function's
        # fast path (NumPy arguments cost more than the step)
        images, labels = tf.convert_to_tensor(images, tf.float32), tf.convert_to_tensor(labels, tf.float32)
        shapes = [value.shape for value in (images, labels)]
        if not groups or groups[-1][0] != shapes:
            groups.append((shapes, []))
        groups[-1][1].append(((images, labels), captured))
    for _, steps in groups:
        stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
        for (_, captured), step_results in zip(steps, train_steps(*stacked)):
            finish_train_step(step_results, *captured)
    pending_steps.clear()

for step in range(100):
    xs = np.random.rand(GPUS * PER_GPU, 784)
    ys = np.eye(10)[np.random.randint(10, size=GPUS * PER_GPU)]
    pending_steps.append(((xs, ys), ()))
    if len(pending_steps) == steps_per_call:
        run_pending_steps()
run_pending_steps()
'''


def test_index_sliced_towers_with_a_device_function_become_mirrored_replicas():
    result = _migrate(INDEX_SLICED_BEFORE, select=None)
    assert result.output == INDEX_SLICED_AFTER
    notes = [d for d in result.diagnostics if d.code == "TFM303"]
    assert all(d.fixed for d in notes), notes
    assert any("device function put the variables on \"/cpu:0\"" in d.message for d in notes)
    assert result.manual_work == []


def test_a_program_already_on_mirrored_strategy_is_left_alone():
    code = _src("""
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
        with strategy.scope():
            dense = tf.keras.layers.Dense(1)
            sgd = tf.keras.optimizers.SGD(0.1)


        @tf.function
        def step(x, y):
            def replica(x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(dense(x) - y)) / strategy.num_replicas_in_sync
                grads = tape.gradient(loss, dense.trainable_variables)
                sgd.apply_gradients(zip(grads, dense.trainable_variables))
                return loss
            for device in ["/gpu:0", "/gpu:1"]:
                with tf.device(device):
                    tf.print(device)
            return strategy.run(replica, args=(x, y))


        step.get_concrete_function(tf.TensorSpec([None, 4]), tf.TensorSpec([None, 1]))
        sgd.minimize
        """)
    result = _migrate(code)
    assert result.output == code
    assert [d for d in result.diagnostics if d.code == "TFM303"] == []


# --------------------------------------------------------------------------- declines say why

TOWERS = _src("""
    import tensorflow as tf


    def train(batches):
        with tf.device("/cpu:0"):
            feats = tf.placeholder(tf.float32, [None, 4])
            target = tf.placeholder(tf.float32, [None, 1])
            sgd = tf.train.GradientDescentOptimizer(0.1)
            per_gpu = []
            for k in range(2):
                with tf.device("/gpu:%d" % k):
                    rows = feats[k * 16:(k + 1) * 16]
                    cost = tf.reduce_mean(tf.square(net(rows) - target[k * 16:(k + 1) * 16]))
                    per_gpu.append(sgd.compute_gradients(cost))
            update = sgd.apply_gradients(average_gradients(per_gpu))
            with tf.Session() as sess:
                for f, t in batches:
                    sess.run(update, feed_dict={feats: f, target: t})
    """)


def _variant(*replacements: tuple[str, str]) -> str:
    code = TOWERS
    for old, new in replacements:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    return code


def test_the_declined_cases_skeleton_itself_converts():
    result = _migrate(TOWERS)
    assert "tf.distribute.MirroredStrategy" in result.output
    assert "rows = feats[k * 16:(k + 1) * 16]" not in result.output
    assert "feats = feats[k * 16:(k + 1) * 16]" in result.output
    assert "target = target[k * 16:(k + 1) * 16]" in result.output
    assert "k = context.replica_id_in_sync_group" in result.output


DEVICE_FUNCTION = """

    def pick(device):
        def choose(op):
            return device if op.type != "VariableV2" else "/cpu:" + str(len(op.name) % 2)
        return choose
    """

# (source, text of the reported line, words the message must contain)
DECLINED = {
    "slice_bound_in_the_loop": (
        _variant(("                rows = feats[k * 16:(k + 1) * 16]\n",
                  "                size = 16\n                rows = feats[k * size:(k + 1) * size]\n")),
        "rows = feats[k * size:(k + 1) * size]", ["`size`", "which the tower loop computes"],
    ),
    "sliced_two_ways": (
        _variant(("target[k * 16:(k + 1) * 16]", "target[k * 8:(k + 1) * 8]"),
                 ("feats[k * 16:(k + 1) * 16]", "target[k * 16:(k + 1) * 16] + feats[:, :1]")),
        "cost = tf.reduce_mean", ["`target` is sliced both as"],
    ),
    "read_whole_and_sliced": (
        _variant(("net(rows) - target[k * 16:(k + 1) * 16]", "net(rows) - target[k * 16:(k + 1) * 16] + tf.reduce_mean(feats)")),
        "cost = tf.reduce_mean", ["read `feats` whole as well as its slice"],
    ),
    "device_function_choosing_by_computation": (
        _variant(("import tensorflow as tf\n", "import tensorflow as tf\n" + textwrap.dedent(DEVICE_FUNCTION)),
                 ('with tf.device("/gpu:%d" % k):', 'with tf.device(pick("/gpu:%d" % k)):')),
        "for k in range(2):", ["is not a device string"],
    ),
    "optimizer_per_tower_with_its_own_rate": (
        _variant(("        sgd = tf.train.GradientDescentOptimizer(0.1)\n", ""),
                 ("                rows = feats", ("                sgd = tf.train.GradientDescentOptimizer(0.1 * (k + 1))\n"
                                                 "                rows = feats"))),
        "per_gpu.append(sgd.compute_gradients(cost))", ["optimizer `sgd`", "tf.train optimizer constructor"],
    ),
    "first_tower_branch_with_else": (
        _variant(("                per_gpu.append", ("                if k == 0:\n                    extra = 1.0\n"
                                            "                else:\n                    extra = 2.0\n"
                                            "                per_gpu.append"))),
        "if k == 0:", ["reads the tower index `k`"],
    ),
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_declined_tower_shapes_say_why_where(name):
    code, at, words = DECLINED[name]
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303" and not d.fixed]
    assert found, result.diagnostics
    hit = [d for d in found if d.line == _line_of(code, at)]
    assert hit, [(d.line, d.message) for d in found]
    for word in words:
        assert any(word in d.message for d in hit), (word, [d.message for d in hit])


LOSS_TOWERS = _src("""
    import tensorflow as tf


    if __name__ == "__main__":
        n = 2
        images = tf.placeholder(tf.float32, [None, 784])
        labels = tf.placeholder(tf.float32, [None, 10])
        image_parts, label_parts = tf.split(images, n), tf.split(labels, n)
        per_example = []
        for d in range(n):
            with tf.device("/gpu:%d" % d):
                logits = tf.layers.dense(image_parts[d], 10, reuse=d > 0, name="out")
                per_example.append(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=label_parts[d]))
        loss = tf.reduce_mean(tf.concat(per_example, axis=0))
        train_op = tf.train.AdamOptimizer(0.001).minimize(loss)
        sess = tf.Session()
        sess.run(tf.global_variables_initializer())
    """)


def test_towers_that_only_compute_losses_for_one_minimize_are_declined_with_the_tf2_recipe():
    result = _migrate(LOSS_TOWERS)
    assert result.output == LOSS_TOWERS
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert len(found) == 1, found
    d = found[0]
    assert not d.fixed and d.line == _line_of(LOSS_TOWERS, "for d in range(n):")
    assert "only compute losses (appended to `per_example`)" in d.message
    assert "minimize(loss)" in d.message
    assert "the towers append `tf.nn.softmax_cross_entropy_with_logits(" in d.message
    assert "not a name bound in the tower" in d.message
    assert "tf.nn.compute_average_loss" in d.hint


UNROLLED_ACROSS_TASKS = _src("""
    import tensorflow as tf


    def train(batches):
        with tf.Session("grpc://localhost:2222") as sess:
            a = tf.placeholder(tf.float32, [8, 3])
            b = tf.placeholder(tf.float32, [8, 3])
            sgd = tf.train.GradientDescentOptimizer(0.01)
            per_task = []
            with tf.device("/job:worker/task:0"):
                first = model_loss(a)
                per_task.append(sgd.compute_gradients(first))
            with tf.device("/job:worker/task:1"):
                tf.get_variable_scope().reuse_variables()
                second = model_loss(b)
                per_task.append(sgd.compute_gradients(second))
            update = sgd.apply_gradients(average_gradients(per_task))
            sess.run(tf.global_variables_initializer())
            for x, y in batches:
                sess.run(update, {a: x, b: y})
    """)


def test_towers_written_out_across_a_clusters_tasks_point_to_multi_worker_mirrored():
    result = _migrate(UNROLLED_ACROSS_TASKS)
    assert result.output == UNROLLED_ACROSS_TASKS
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert len(found) == 1, found
    d = found[0]
    assert not d.fixed and d.line == _line_of(UNROLLED_ACROSS_TASKS, 'with tf.device("/job:worker/task:0"):')
    assert '`"/job:worker/task:0"`, `"/job:worker/task:1"`' in d.message
    assert "other tasks of a cluster" in d.message
    assert "MultiWorkerMirroredStrategy" in d.hint


# --------------------------------------------------------------------------- it runs the same

# Index slices, a device function, the optimizer built per tower, and values
# fetched from the last tower (`cost`) and from the first only (`error`), in
# training and in evaluations -- one with fewer rows than the towers slice.
EVALUATED = '''\
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

TOWERS = 2
ROWS = 8
VARIABLE_OPS = ("Variable", "VariableV2", "VarHandleOp")


def regression(features, reuse):
    with tf.variable_scope("regression", reuse=reuse):
        w = tf.get_variable("w", [3, 1], initializer=tf.glorot_uniform_initializer(seed=7))
        b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
        return tf.matmul(features, w) + b


def mean_gradients(per_tower):
    out = []
    for pairs in zip(*per_tower):
        out.append((tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1]))
    return out


def on_device(device, variables_device="/cpu:0"):
    def place(op):
        node = op if isinstance(op, tf.NodeDef) else op.node_def
        if node.op in VARIABLE_OPS:
            return variables_device
        return device
    return place


def main():
    rng = np.random.RandomState(3)
    with tf.device("/cpu:0"):
        per_tower = []
        reuse = False
        inputs = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        for t in range(TOWERS):
            with tf.device(on_device("/cpu:%d" % t)):
                rows = inputs[t * ROWS:(t + 1) * ROWS]
                wanted = targets[t * ROWS:(t + 1) * ROWS]
                predicted = regression(rows, reuse)
                cost = tf.reduce_mean(tf.square(predicted - wanted))
                sgd = tf.train.GradientDescentOptimizer(0.1)
                per_tower.append(sgd.compute_gradients(cost))
                if t == 0:
                    error = tf.reduce_mean(tf.abs(predicted - wanted))
                reuse = True
        update = sgd.apply_gradients(mean_gradients(per_tower))
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": TOWERS})) as sess:
            sess.run(tf.global_variables_initializer())
            for step in range(6):
                x = rng.normal(size=(ROWS * TOWERS, 3))
                y = x.sum(axis=1, keepdims=True)
                _, c = sess.run([update, cost], {inputs: x, targets: y})
                print("train", step, c)
                c2, e = sess.run([cost, error], {inputs: x, targets: y})
                print("eval", step, c2, e)
            print("first", sess.run(error, {inputs: x[:ROWS], targets: y[:ROWS]}))


main()
'''


def _run(path: Path) -> list[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env, check=False,
                          cwd=path.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if line.split(" ")[0] in ("train", "eval", "first")]


@pytest.mark.parametrize("shape", ["index_slices", "tf_split"])
def test_migrated_towers_print_what_the_legacy_program_printed(tmp_path, shape):
    """Losses and evaluations bit for bit (plain SGD): each fetched tower value
    is computed by the replica of its tower on that tower's rows."""
    code = EVALUATED
    if shape == "tf_split":
        code = code.replace("inputs[t * ROWS:(t + 1) * ROWS]", "input_parts[t]").replace(
            "targets[t * ROWS:(t + 1) * ROWS]", "target_parts[t]").replace(
            "        for t in range(TOWERS):\n",
            "        input_parts = tf.split(inputs, TOWERS)\n        target_parts = tf.split(targets, TOWERS)\n"
            "        for t in range(TOWERS):\n").replace(
            "{inputs: x[:ROWS], targets: y[:ROWS]}", "{inputs: x[:2 * ROWS], targets: y[:2 * ROWS]}")
        assert "input_parts[t]" in code and "x[:2 * ROWS]" in code
    result = _migrate(code, select=None)
    assert result.manual_work == []
    assert "tf.distribute.MirroredStrategy" in result.output
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(code)
    migrated.write_text(result.output)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 6 * 2 + 1
    assert after == before


# Towers appending per-example losses under a script's main guard, device
# specs, `reuse=d > 0`; one minimize of the mean of their concatenation.
CONCATENATED = '''\
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()


def scores(images, reuse=False):
    with tf.variable_scope("scores", reuse=reuse):
        w = tf.get_variable("w", [6, 3], initializer=tf.glorot_uniform_initializer(seed=5))
        return tf.matmul(images, w)


if __name__ == "__main__":
    devices = 2
    rng = np.random.RandomState(11)
    images = tf.placeholder(tf.float32, [None, 6])
    labels = tf.placeholder(tf.float32, [None, 3])
    image_parts = tf.split(images, devices)
    label_parts = tf.split(labels, devices)
    per_example = []
    for d in range(devices):
        with tf.device(tf.DeviceSpec(device_type="CPU", device_index=d)):
            with tf.variable_scope(tf.get_variable_scope(), reuse=d > 0):
                cost = tf.nn.softmax_cross_entropy_with_logits(logits=scores(image_parts[d], d > 0),
                                                               labels=label_parts[d])
                per_example.append(cost)
    loss = tf.reduce_mean(tf.concat(per_example, axis=0))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss, colocate_gradients_with_ops=True)
    sess = tf.Session(config=tf.ConfigProto(device_count={"CPU": devices}))
    sess.run(tf.global_variables_initializer())
    for step in range(8):
        x = rng.normal(size=(10, 6))
        y = np.eye(3)[rng.randint(3, size=10)]
        _, value = sess.run([train, loss], feed_dict={images: x, labels: y})
        print("train", step, repr(value))
'''


def test_towers_minimizing_their_concatenated_losses_become_replicas_averaging_their_means():
    result = _migrate(CONCATENATED, select=None)
    assert result.manual_work == []
    out = result.output
    assert 'strategy = tf.distribute.MirroredStrategy(' in out and '["/cpu:%d" % d for d in range(devices)]' in out
    assert "cost_mean = tf.reduce_mean(cost)" in out
    assert "per_example = [values[1] for values in replica_results]" in out
    assert "loss = tf.reduce_mean(tf.concat(per_example, axis=0))" in out
    assert ".minimize(" not in out and "tower_grads" not in out and "per_example = []" not in out
    assert "# The towers minimized the mean of their losses; strategies sum the replicas' gradients." in out
    notes = [d.message for d in result.diagnostics if d.code == "TFM303"]
    assert any("minimized the mean of their concatenation" in m for m in notes), notes


def test_concatenated_loss_towers_inside_another_branch_say_where():
    code = CONCATENATED.replace('if __name__ == "__main__":', "if WITH_TOWERS:")
    assert code != CONCATENATED
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert len(found) == 1, found
    assert found[0].line == _line_of(code, "for d in range(devices):")
    assert "inside `if WITH_TOWERS:`" in found[0].message


def test_migrated_concatenated_loss_towers_train_like_the_legacy_program(tmp_path):
    """Plain SGD: the same losses (the mean of the replicas' means is the
    batch mean, and so are the averaged gradients)."""
    result = _migrate(CONCATENATED, select=None)
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(CONCATENATED)
    migrated.write_text(result.output)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 8
    assert [line.split()[:2] for line in after] == [line.split()[:2] for line in before]
    for old, new in zip(before, after):
        assert float(new.split("(")[-1].rstrip(")")) == pytest.approx(float(old.split("(")[-1].rstrip(")")), rel=1e-6)


def test_a_first_tower_value_read_by_every_tower_is_declined():
    """Later towers read the first tower's tensor; replicas would each compute their own."""
    code = EVALUATED.replace("                reuse = True\n",
                             "                reuse = True\n                cost = cost + 0 * error\n")
    assert code != EVALUATED
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303" and not d.fixed]
    assert [d.line for d in found] == [_line_of(code, "cost = cost + 0 * error")]
    assert "only the first tower computes (`if t == 0:`)" in found[0].message


def test_concatenated_losses_of_index_sliced_towers_are_declined():
    """A short batch leaves the last tower fewer rows: the mean of the
    concatenation is then not the mean of the towers' means."""
    code = CONCATENATED.replace("image_parts[d]", "images[d * 5:(d + 1) * 5]").replace(
        "label_parts[d]", "labels[d * 5:(d + 1) * 5]").replace(
        "    image_parts = tf.split(images, devices)\n    label_parts = tf.split(labels, devices)\n", "")
    assert "tf.split" not in code
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert len(found) == 1 and not found[0].fixed, found
    assert found[0].line == _line_of(code, "for d in range(devices):")
    assert "slice the batch by their index" in found[0].message
    assert "not the mean of the towers' means" in found[0].message


# Every tower reads the same batch of a one-shot iterator a module function
# returns: one get_next() per session run, so every tower the same batch.
SHARED_DATASET = '''\
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

TOWERS = 2


def batches():
    rng = np.random.RandomState(4)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)
    return dataset.make_one_shot_iterator().get_next()


def regression(features):
    w = tf.get_variable("w", [3, 1], initializer=tf.glorot_uniform_initializer(seed=7))
    return tf.matmul(features, w)


def main():
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        x, y = batches()
        sgd = tf.train.GradientDescentOptimizer(0.1)
        per_tower = []
        for t in range(TOWERS):
            with tf.device("/cpu:%d" % t):
                with tf.variable_scope(tf.get_variable_scope(), reuse=t > 0):
                    cost = tf.reduce_mean(tf.square(regression(x) - y))
                    per_tower.append(sgd.compute_gradients(cost))
        update = sgd.apply_gradients(average_gradients(per_tower))
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": TOWERS})) as sess:
            sess.run(tf.global_variables_initializer())
            for step in range(6):
                _, c = sess.run([update, cost])
                print("train", step, c)


def average_gradients(per_tower):
    return [(tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1]) for pairs in zip(*per_tower)]


main()
'''


def test_towers_reading_one_iterator_batch_become_replicas_given_that_batch_whole():
    result = _migrate(SHARED_DATASET, select=None)
    assert result.manual_work == []
    out = result.output
    assert "iterator = iter(batches())" in out
    assert "strategy.run(train_step_replica, args=(x, y))" in out  # whole, no slicing
    assert "c = run_train_step(*iterator.get_next())" in out


def test_towers_reading_one_iterator_batch_train_like_the_legacy_program(tmp_path):
    result = _migrate(SHARED_DATASET, select=None)
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(SHARED_DATASET)
    migrated.write_text(result.output)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 6
    assert after == before


# The helper binds the batch to names before returning them, through a named
# iterator, and parses records with a function of its own.
NAMED_BATCH = SHARED_DATASET.replace(
    "    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)\n"
    "    return dataset.make_one_shot_iterator().get_next()\n",
    "    def scaled(features, target):\n"
    "        return features * 2.0, target * 2.0\n"
    "\n"
    "    dataset = tf.data.Dataset.from_tensor_slices((x, y)).map(scaled).repeat().batch(8)\n"
    "    iterator = dataset.make_one_shot_iterator()\n"
    "    features, targets = iterator.get_next()\n"
    "    return features, targets\n")


def test_an_iterator_batch_returned_through_names_becomes_the_helpers_dataset():
    assert "iterator.get_next()" in NAMED_BATCH and "def scaled" in NAMED_BATCH
    result = _migrate(NAMED_BATCH, select=None)
    assert result.manual_work == []
    out = result.output
    helper = out[out.index("def batches():"):out.index("def regression")]
    assert "make_one_shot_iterator" not in helper and "get_next" not in helper
    assert helper.rstrip().endswith("return dataset")
    assert "        return features * 2.0, target * 2.0\n" in helper  # the parser's own return is kept
    assert "= iter(batches())" in out
    assert "strategy.run(train_step_replica, args=(x, y))" in out


def test_an_iterator_batch_returned_through_names_trains_like_the_legacy_program(tmp_path):
    result = _migrate(NAMED_BATCH, select=None)
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(NAMED_BATCH)
    migrated.write_text(result.output)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 6
    assert after == before


def test_a_regularizer_made_before_the_towers_is_made_once_with_the_model_state():
    """`tf.contrib.layers.l2_regularizer(scale)` returns a function, no op:
    every replica calls it as every tower did."""
    code = SHARED_DATASET.replace(
        "def regression(features):\n", "def regression(features, penalty):\n").replace(
        "    return tf.matmul(features, w)\n", "    return tf.matmul(features, w) + penalty(w)\n").replace(
        "        x, y = batches()\n", "        x, y = batches()\n        decay = tf.contrib.layers.l2_regularizer(0.01)\n").replace(
        "regression(x) - y", "regression(x, decay) - y")
    assert "regression(x, decay) - y" in code and "penalty(w)" in code
    result = _migrate(code)
    assert [d for d in result.manual_work if d.code == "TFM303"] == []
    out = result.output
    scope = out[out.index("with strategy.scope():"):out.index("def train_step(")]
    assert "decay = tf.contrib.layers.l2_regularizer(0.01)" in scope
    assert scope.index("decay = ") < scope.index("make_template")
    assert "cost = tf.reduce_mean(tf.square(regression(x, decay) - y))" in out


@pytest.mark.parametrize("change", [
    # the batch is also read inside the helper: not only handed to the caller
    ("    return features, targets\n", "    print(features)\n    return features, targets\n"),
    # the names come back in another order than get_next() bound them
    ("    return features, targets\n", "    return targets, features\n"),
    # the dataset is rebound after the iterator is made: the return would read another one
    ("    return features, targets\n", "    dataset = dataset.take(2)\n    return features, targets\n"),
])
def test_a_helper_returning_more_than_its_iterators_batch_is_declined_at_the_call(change):
    code = NAMED_BATCH.replace(*change)
    assert code != NAMED_BATCH
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert [d.line for d in found] == [_line_of(code, "x, y = batches()")]
    assert "`batches()` does not return as" in found[0].message


# The cifar10 shape: an ExponentialMovingAverage of the trainable variables
# made after the update and grouped with it into the train op.
MOVING_AVERAGES = '''\
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

TOWERS = 2


def regression(features):
    w = tf.get_variable("w", [3, 1], initializer=tf.glorot_uniform_initializer(seed=7))
    return tf.matmul(features, w)


def average_gradients(per_tower):
    return [(tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1]) for pairs in zip(*per_tower)]


def main():
    rng = np.random.RandomState(2)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        input_parts = tf.split(inputs, TOWERS)
        target_parts = tf.split(targets, TOWERS)
        sgd = tf.train.GradientDescentOptimizer(0.1)
        per_tower = []
        for t in range(TOWERS):
            with tf.device("/cpu:%d" % t):
                with tf.variable_scope(tf.get_variable_scope(), reuse=t > 0):
                    cost = tf.reduce_mean(tf.square(regression(input_parts[t]) - target_parts[t]))
                    per_tower.append(sgd.compute_gradients(cost))
        update = sgd.apply_gradients(average_gradients(per_tower), global_step=step)
        averages = tf.train.ExponentialMovingAverage(0.9, step)
        averages_op = averages.apply(tf.trainable_variables())
        train_op = tf.group(update, averages_op)
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": TOWERS})) as sess:
            sess.run(tf.global_variables_initializer())
            for n in range(6):
                x = rng.normal(size=(8, 3))
                y = x.sum(axis=1, keepdims=True)
                _, c = sess.run([train_op, cost], {inputs: x, targets: y})
                print("train", n, c)


main()
'''


def test_moving_averages_grouped_with_the_update_are_updated_by_each_replica_step():
    result = _migrate(MOVING_AVERAGES, select=None)
    assert result.manual_work == []
    out = result.output
    assert "averages = tf.train.ExponentialMovingAverage(0.9, step)" in out
    replica = out[out.index("def train_step_replica"):out.index("def train_step_slice")]
    assert replica.index("sgd.apply_gradients(") < replica.index("averages.apply(trainable_variables)")
    assert replica.index("averages.apply(trainable_variables)") < replica.index("return cost")
    assert "tf.group(" not in out and "averages_op" not in out
    notes = [d for d in result.diagnostics if d.code == "TFM303" and "moving averages" in d.message]
    assert len(notes) == 1 and notes[0].fixed and "no set order" in notes[0].message


def test_moving_averages_follow_the_variables_as_a_tf1_update_then_average_would(tmp_path):
    """TF1's tf.group gave the two updates no order; the migration averages
    after the update. Against the TF1 program that orders them so
    (control_dependencies), the averages and the losses are the same."""
    migrated_code = _migrate(MOVING_AVERAGES, select=None).output
    ordered = MOVING_AVERAGES.replace(
        "        averages_op = averages.apply(tf.trainable_variables())\n",
        "        with tf.control_dependencies([update]):\n"
        "            averages_op = averages.apply(tf.trainable_variables())\n")
    observe_legacy = '            print("first", sess.run(averages.average(tf.trainable_variables()[0])).ravel().tolist())\n'
    ordered = ordered.replace('                print("train", n, c)\n', '                print("train", n, c)\n' + observe_legacy)
    assert "control_dependencies" in ordered and '"first"' in ordered
    end = migrated_code.rindex("    run_pending_steps()\n") + len("    run_pending_steps()\n")
    observe = '    print("first", averages.average(trainable_variables[0]).numpy().ravel().tolist())\n'
    migrated_code = migrated_code[:end] + observe + migrated_code[end:]
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(ordered)
    migrated.write_text(migrated_code)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 7 and before[-1].startswith("first [")
    assert after == before


# The inception/caicloud shape: the averaged list named first, with the
# MOVING_AVERAGE_VARIABLES collection (empty: the model has no batch norm).
NAMED_AVERAGE_LIST = MOVING_AVERAGES.replace(
    "        averages_op = averages.apply(tf.trainable_variables())\n",
    "        averaged = (tf.trainable_variables() +\n"
    "                    tf.moving_average_variables())\n"
    "        averages_op = averages.apply(averaged)\n")


def test_a_named_list_with_the_empty_moving_average_collection_is_averaged_like_the_trainable_variables():
    assert "tf.moving_average_variables()" in NAMED_AVERAGE_LIST
    result = _migrate(NAMED_AVERAGE_LIST, select=None)
    assert result.manual_work == []
    out = result.output
    assert "moving_average_variables" not in out and "averaged =" not in out
    replica = out[out.index("def train_step_replica"):out.index("def train_step_slice")]
    assert replica.index("sgd.apply_gradients(") < replica.index("averages.apply(trainable_variables)")


def test_a_named_average_list_trains_and_averages_like_the_legacy_program(tmp_path):
    """Against the TF1 program ordering the average after the update, the
    losses and the final averages are the same (see above)."""
    ordered = NAMED_AVERAGE_LIST.replace(
        "        averages_op = averages.apply(averaged)\n",
        "        with tf.control_dependencies([update]):\n            averages_op = averages.apply(averaged)\n")
    ordered = ordered.replace('                print("train", n, c)\n', '                print("train", n, c)\n'
                              '            print("first", sess.run(averages.average(tf.trainable_variables()[0]))'
                              '.ravel().tolist())\n')
    migrated_code = _migrate(NAMED_AVERAGE_LIST, select=None).output
    end = migrated_code.rindex("    run_pending_steps()\n") + len("    run_pending_steps()\n")
    observe = '    print("first", averages.average(trainable_variables[0]).numpy().ravel().tolist())\n'
    migrated_code = migrated_code[:end] + observe + migrated_code[end:]
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(ordered)
    migrated.write_text(migrated_code)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 7 and before[-1].startswith("first [")
    assert after == before


@pytest.mark.parametrize("model, reason", [
    # a contrib batch norm added its moving mean and variance to the collection
    ("    w = tf.contrib.layers.batch_norm(w)\n", "`batch_norm` (a contrib/slim batch norm"),
    # a module not in the project built the model: what it added is unknown
    ("    w = net_layers.dense(w)\n", "`dense()` of `net_layers`, which is not in this project"),
])
def test_averaging_a_moving_average_collection_the_model_may_fill_is_declined(model, reason):
    code = NAMED_AVERAGE_LIST.replace(
        "    return tf.matmul(features, w)\n", model + "    return tf.matmul(features, w)\n").replace(
        "import numpy as np\n", "import numpy as np\nimport net_layers\n")
    assert model in code
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert [d.line for d in found] == [_line_of(code, "averaged = (tf.trainable_variables() +")]
    assert "averages `tf.moving_average_variables()`" in found[0].message
    assert reason in found[0].message


def test_splits_assigned_together_are_the_replicas_slices():
    code = MOVING_AVERAGES.replace(
        "        input_parts = tf.split(inputs, TOWERS)\n        target_parts = tf.split(targets, TOWERS)\n",
        "        input_parts, target_parts = tf.split(inputs, TOWERS), tf.split(targets, TOWERS)\n")
    assert "input_parts, target_parts = " in code
    result = _migrate(code)
    assert "tf.distribute.MirroredStrategy" in result.output
    assert "tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync))," in result.output
    assert "for value in (inputs, targets))" in result.output
    assert "input_parts" not in result.output


# The cifar10/caicloud shape: each tower adds its terms to a collection as it
# is built and sums the entries named under its own name scope.
SCOPED_COLLECTION = '''\
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

TOWERS = 2


def regression(features):
    w = tf.get_variable("w", [3, 1], initializer=tf.glorot_uniform_initializer(seed=7))
    tf.add_to_collection("costs", 0.01 * tf.nn.l2_loss(w))
    return tf.matmul(features, w)


def tower_cost(scope, features, targets):
    error = tf.reduce_mean(tf.square(regression(features) - targets))
    tf.add_to_collection("costs", error)
    return tf.add_n(tf.get_collection("costs", scope), name="total")


def average_gradients(per_tower):
    return [(tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1]) for pairs in zip(*per_tower)]


def main():
    rng = np.random.RandomState(2)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        inputs = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        input_parts = tf.split(inputs, TOWERS)
        target_parts = tf.split(targets, TOWERS)
        sgd = tf.train.GradientDescentOptimizer(0.1)
        per_tower = []
        with tf.variable_scope(tf.get_variable_scope()):
            for t in range(TOWERS):
                with tf.device("/cpu:%d" % t):
                    with tf.name_scope("tower_%d" % t) as scope:
                        cost = tower_cost(scope, input_parts[t], target_parts[t])
                        tf.get_variable_scope().reuse_variables()
                        per_tower.append(sgd.compute_gradients(cost))
        train_op = sgd.apply_gradients(average_gradients(per_tower))
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": TOWERS})) as sess:
            sess.run(tf.global_variables_initializer())
            for n in range(6):
                x = rng.normal(size=(8, 3))
                y = x.sum(axis=1, keepdims=True)
                _, c = sess.run([train_op, cost], {inputs: x, targets: y})
                print("train", n, c)


main()
'''


def test_a_tower_summing_the_collection_entries_of_its_scope_becomes_a_replica_with_a_scope_of_its_own():
    result = _migrate(SCOPED_COLLECTION, select=None)
    assert result.manual_work == []
    out = result.output
    model = out[out.index("    def model_fn("):out.index("    with strategy.scope():")]
    assert 'with tf.compat.v1.name_scope("tower") as scope:' in model
    assert "cost = tower_cost(scope, inputs, targets)" in model
    # collections hold graph tensors: the variables are built by a traced call
    assert "tf.function(model)(tf.zeros([1, 3], tf.float32), tf.zeros([1, 1], tf.float32))" in out


def test_a_tower_summing_the_collection_entries_of_its_scope_trains_like_the_legacy_program(tmp_path):
    result = _migrate(SCOPED_COLLECTION, select=None)
    legacy, migrated = tmp_path / "legacy.py", tmp_path / "migrated.py"
    legacy.write_text(SCOPED_COLLECTION)
    migrated.write_text(result.output)
    before, after = _run(legacy), _run(migrated)
    assert len(before) == 6
    assert after == before


@pytest.mark.parametrize("change, reason", [
    # the scope name is also a summary's name: no replica has that name
    (("    return tf.add_n(", "    tf.summary.scalar(scope + \"error\", error)\n    return tf.add_n("),
     "is read as a value"),
    # REGULARIZATION_LOSSES: filled when a variable is made, under the first tower's scope only
    (('tf.get_collection("costs", scope)', "tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES, scope)"),
     "filters REGULARIZATION_LOSSES by it"),
    # a module not in the project receives the name
    (("    error = tf.reduce_mean(", "    net_layers.tag(scope)\n    error = tf.reduce_mean("),
     "passed to `tag()` of `net_layers`, which is not in this project"),
])
def test_a_scope_name_read_otherwise_than_to_filter_a_collection_is_declined(change, reason):
    code = SCOPED_COLLECTION.replace(*change).replace("import numpy as np\n", "import numpy as np\nimport net_layers\n")
    assert change[1] in code
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert [d.line for d in found] == [_line_of(code, "cost = tower_cost(scope, input_parts[t], target_parts[t])")]
    assert "reads `scope`, the name of the tower's scope" in found[0].message
    assert reason in found[0].message


def test_towers_splitting_a_queue_runner_batch_are_declined_saying_where_the_batch_comes_from():
    """A batch from tf.train.shuffle_batch: reader and batching threads decided
    which batch each step took, which no tf.data pipeline can be proven to
    repeat; the decline names the input function and what makes it a queue."""
    code = MOVING_AVERAGES.replace(
        "        inputs = tf.placeholder(tf.float32, [None, 3])\n"
        "        targets = tf.placeholder(tf.float32, [None, 1])\n",
        "        inputs, targets = shuffled_rows(8)\n").replace(
        "def main():\n",
        "def shuffled_rows(size):\n"
        "    rows = tf.random_normal([3])\n"
        "    return tf.train.shuffle_batch([rows, tf.reduce_sum(rows, keepdims=True)], size, 64, 16)\n"
        "\n\n"
        "def main():\n").replace(", {inputs: x, targets: y})", ")")
    assert "shuffled_rows(8)" in code and "placeholder" not in code
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303" and "queue-runner" in d.message]
    assert [d.line for d in found] == [_line_of(code, "input_parts = tf.split(inputs, TOWERS)"),
                                       _line_of(code, "target_parts = tf.split(targets, TOWERS)")]
    assert "`inputs` is filled from `inputs, targets = shuffled_rows(8)`" in found[0].message
    assert "its code calls `tf.train.shuffle_batch`" in found[0].message
    assert "tf.data" in found[0].hint


# Checkpoints written by a tf.train.Saver every other step, the newest two kept.
SAVER_CHECKPOINTS = '''\
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

TOWERS = 2
LOG_DIR = os.environ.get("CHECKPOINTS", "/tmp/towers_ckpt")


def regression(features):
    w = tf.get_variable("w", [3, 1], initializer=tf.glorot_uniform_initializer(seed=7))
    return tf.matmul(features, w)


def average_gradients(per_tower):
    return [(tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1]) for pairs in zip(*per_tower)]


def main():
    rng = np.random.RandomState(2)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        step = tf.train.get_or_create_global_step()
        inputs = tf.placeholder(tf.float32, [None, 3])
        targets = tf.placeholder(tf.float32, [None, 1])
        input_parts = tf.split(inputs, TOWERS)
        target_parts = tf.split(targets, TOWERS)
        sgd = tf.train.GradientDescentOptimizer(0.1)
        per_tower = []
        for t in range(TOWERS):
            with tf.device("/cpu:%d" % t):
                with tf.variable_scope(tf.get_variable_scope(), reuse=t > 0):
                    cost = tf.reduce_mean(tf.square(regression(input_parts[t]) - target_parts[t]))
                    per_tower.append(sgd.compute_gradients(cost))
        train_op = sgd.apply_gradients(average_gradients(per_tower), global_step=step)
        saver = tf.train.Saver(tf.global_variables(), max_to_keep=2)
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": TOWERS})) as sess:
            sess.run(tf.global_variables_initializer())
            for n in range(6):
                x = rng.normal(size=(8, 3))
                y = x.sum(axis=1, keepdims=True)
                _, c = sess.run([train_op, cost], {inputs: x, targets: y})
                print("train", n, c)
                if n % 2 == 0:
                    saver.save(sess, os.path.join(LOG_DIR, "model.ckpt"), global_step=n)


main()
'''


def test_saver_saves_become_a_checkpoint_manager_writing_the_same_files():
    result = _migrate(SAVER_CHECKPOINTS, select=None)
    assert result.manual_work == []
    out = result.output
    assert "Saver" not in out and "sess" not in out
    assert "checkpoint = tf.train.Checkpoint(step=step, sgd=sgd, model=model)" in out
    assert "max_to_keep=2, checkpoint_name=os.path.basename(path))" in out
    assert "            save_checkpoint(os.path.join(LOG_DIR, \"model.ckpt\"), n)" in out
    # a save reads the variables: no step runs ahead of it
    assert "pending_steps" not in out
    notes = [d for d in result.diagnostics if d.code == "TFM303" and "CheckpointManager" in d.message]
    assert len(notes) == 1 and notes[0].fixed and notes[0].line == _line_of(SAVER_CHECKPOINTS, "saver = tf.train.Saver(")


def test_saver_checkpoints_are_written_as_the_legacy_program_wrote_them(tmp_path):
    import tensorflow as tf

    result = _migrate(SAVER_CHECKPOINTS, select=None)
    runs = {}
    for kind, code in (("legacy", SAVER_CHECKPOINTS), ("migrated", result.output)):
        directory = tmp_path / kind
        directory.mkdir()
        (directory / "program.py").write_text(code)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "CHECKPOINTS": str(directory / "ckpt")}
        done = subprocess.run([sys.executable, "program.py"], capture_output=True, text=True, timeout=300, env=env,
                              check=False, cwd=directory)
        assert done.returncode == 0, done.stderr[-3000:]
        files = sorted(p.name for p in (directory / "ckpt").iterdir() if p.suffix == ".index")
        latest = tf.train.latest_checkpoint(str(directory / "ckpt"))
        runs[kind] = (done.stdout.splitlines(), files, latest, tf.train.load_checkpoint(latest))
    legacy, migrated = runs["legacy"], runs["migrated"]
    assert migrated[0] == legacy[0] and len(legacy[0]) == 6
    assert legacy[1] == ["model.ckpt-2.index", "model.ckpt-4.index"]
    assert migrated[1] == legacy[1]
    assert legacy[2].endswith("model.ckpt-4") and migrated[2].endswith("model.ckpt-4")
    # the same values: the step counter after five updates, and the weights
    assert legacy[3].get_tensor("global_step") == migrated[3].get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 5
    weights = [k for k in migrated[3].get_variable_to_shape_map() if k.startswith("model/") and "w" in k]
    assert len(weights) == 1
    np.testing.assert_array_equal(legacy[3].get_tensor("w"), migrated[3].get_tensor(weights[0]))


@pytest.mark.parametrize("change, reason", [
    (("saver.save(sess, os.path.join(LOG_DIR, \"model.ckpt\"), global_step=n)",
      "print(saver.save(sess, os.path.join(LOG_DIR, \"model.ckpt\"), global_step=n))"),
     "used otherwise than in a statement `saver.save(sess, path, global_step=step)`"),
    (("tf.train.Saver(tf.global_variables(), max_to_keep=2)", "tf.train.Saver(tf.trainable_variables())"),
     "TFM303 carries over a Saver of all the variables"),
])
def test_other_saver_uses_are_declined_saying_why(change, reason):
    code = SAVER_CHECKPOINTS.replace(*change)
    assert change[1] in code
    result = _migrate(code)
    assert result.output == code
    found = [d for d in result.diagnostics if d.code == "TFM303"]
    assert len(found) == 1 and reason in found[0].message, found


def test_an_initializer_run_in_the_default_session_is_dropped_like_a_session_run_of_it():
    code = SAVER_CHECKPOINTS.replace(
        "        with tf.Session(", "        init = tf.global_variables_initializer()\n        with tf.Session(").replace(
        "            sess.run(tf.global_variables_initializer())\n", "            init.run()\n")
    assert "init.run()" in code
    result = _migrate(code, select=None)
    assert result.manual_work == []
    assert "init.run()" not in result.output and "init = " not in result.output
