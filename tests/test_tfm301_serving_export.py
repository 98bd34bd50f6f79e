"""TFM301: the trained model exported for serving after training (a session
bundle's Exporter, a SavedModelBuilder, simple_save) becomes
tf.saved_model.save of a tf.function signature, in the same place and
directory; what cannot be carried exactly is declined where it is.

The migrated SavedModel is loaded with tf.saved_model.load and its signature
called: it gives what the trained model gives, and what the TF1 program's own
export gives."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile

import pytest
import tfm301_support
from tfm301_support import line_of, manual

from migrate.codemod.engine import dedent


def migrate(source: str, select=("TFM301",)):
    return tfm301_support.migrate(source, select)


# a SyncReplicas trainer whose chief exports the model with simple_save once the loop is done
SIMPLE_SAVE = '''
import os

import tensorflow.compat.v1 as tf


def fit(cluster, server, is_chief, workers, samples, total_steps, export_dir, probe):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        inputs = tf.placeholder(tf.float32, [None, 4])
        expected = tf.placeholder(tf.float32, [None, 1])
        weights = tf.Variable(tf.zeros([4, 1]), name="weights")
        bias = tf.Variable(0.5, name="bias")
        score = tf.matmul(inputs, weights) + bias
        cost = tf.reduce_mean(tf.square(score - expected))
        step_counter = tf.Variable(0, name="step_counter", trainable=False)
        base = tf.train.GradientDescentOptimizer(0.05)
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=workers, total_num_replicas=workers)
        train_op = opt.minimize(cost, global_step=step_counter)
        init_tokens = opt.get_init_tokens_op()
        chief_runner = opt.get_chief_queue_runner()
        local_init = opt.chief_init_op if is_chief else opt.local_step_init_op
        ready = opt.ready_for_local_init_op
        init = tf.global_variables_initializer()
    sv = tf.train.Supervisor(is_chief=is_chief, init_op=init, local_init_op=local_init,
                             ready_for_local_init_op=ready, global_step=step_counter)
    sess = sv.prepare_or_wait_for_session(server.target)
    if is_chief:
        sess.run(init_tokens)
        sv.start_queue_runners(sess, [chief_runner])
    step = 0
    while step < total_steps:
        _, step = sess.run([train_op, step_counter], feed_dict={inputs: samples[0], expected: samples[1]})
    print("trained", sess.run(score, feed_dict={inputs: probe}).ravel().tolist())
    if is_chief:
        # the chief writes the model TF Serving loads
        tf.saved_model.simple_save(sess, export_dir, inputs={"features": inputs}, outputs={"score": score})
'''

# the same export spelled with a SavedModelBuilder and tensor infos
BUILDER_EXPORT = '''
    if is_chief:
        builder = tf.saved_model.builder.SavedModelBuilder(export_dir)
        features_info = tf.saved_model.utils.build_tensor_info(inputs)
        score_info = tf.saved_model.utils.build_tensor_info(score)
        signature = tf.saved_model.signature_def_utils.build_signature_def(
            inputs={"features": features_info}, outputs={"score": score_info},
            method_name=tf.saved_model.signature_constants.PREDICT_METHOD_NAME)
        builder.add_meta_graph_and_variables(
            sess, [tf.saved_model.tag_constants.SERVING],
            signature_def_map={tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature},
            legacy_init_op=tf.group(tf.tables_initializer(), name="legacy_init_op"))
        builder.save()
'''

SIMPLE_SAVE_EXPORT = '''
    if is_chief:
        # the chief writes the model TF Serving loads
        tf.saved_model.simple_save(sess, export_dir, inputs={"features": inputs}, outputs={"score": score})
'''


def builder_program() -> str:
    return SIMPLE_SAVE.replace(SIMPLE_SAVE_EXPORT, BUILDER_EXPORT)


# the model made by a helper creating its variables with get_variable (a template in TF2)
def helper_model_program() -> str:
    return SIMPLE_SAVE.replace(
        '        weights = tf.Variable(tf.zeros([4, 1]), name="weights")\n'
        '        bias = tf.Variable(0.5, name="bias")\n'
        "        score = tf.matmul(inputs, weights) + bias\n",
        '        hidden = layer(inputs, 4, 8, "hidden")\n'
        '        score = layer(tf.nn.relu(hidden), 8, 1, "score")\n').replace("def fit(", """def layer(x, fan_in, fan_out, name):
    with tf.variable_scope(name):
        w = tf.get_variable("w", [fan_in, fan_out], initializer=tf.random_normal_initializer(seed=4))
        b = tf.get_variable("b", [fan_out], initializer=tf.constant_initializer(0.5))
    return tf.matmul(x, w) + b


def fit(""")


# asynchronous ps/worker training under a Supervisor whose chief writes a session bundle
# (versioned directory) with generic `inputs`/`outputs` signatures after training
SESSION_BUNDLE = '''
import tensorflow as tf
from tensorflow.contrib.session_bundle import exporter

flags = tf.app.flags
flags.DEFINE_string("export_base", "/tmp/served", "where the model is exported")
flags.DEFINE_integer("model_version", 3, "the exported model's version")
FLAGS = flags.FLAGS


def run(cluster, server, is_chief, batches, log_dir):
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        ids = tf.placeholder(tf.int64, shape=[None])
        reading = tf.placeholder(tf.float32, shape=[None, 3])
        target = tf.placeholder(tf.float32, shape=[None, 1])
        kernel = tf.Variable(tf.ones([3, 1]), name="kernel")
        offset = tf.Variable(0.0, name="offset")
        guess = tf.matmul(reading, kernel) + offset
        passed_ids = tf.identity(ids)
        loss = tf.reduce_sum(tf.square(target - guess))
        counter = tf.Variable(0, name="counter", trainable=False)
        train_op = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=counter)
        saver = tf.train.Saver(sharded=True)
        init_op = tf.global_variables_initializer()
    sv = tf.train.Supervisor(is_chief=is_chief, logdir=log_dir, init_op=init_op, saver=saver,
                             global_step=counter, save_model_secs=120)
    with sv.managed_session(server.target) as sess:
        for features, labels in batches:
            sess.run(train_op, feed_dict={reading: features, target: labels})
        if is_chief:
            bundle = exporter.Exporter(saver)
            bundle.init(sess.graph.as_graph_def(), named_graph_signatures={
                "inputs": exporter.generic_signature({"ids": ids, "reading": reading}),
                "outputs": exporter.generic_signature({"ids": passed_ids, "guess": guess})})
            bundle.export(FLAGS.export_base, tf.constant(FLAGS.model_version), sess)
'''


def test_a_session_bundle_becomes_a_saved_model_of_its_signature_in_the_versioned_directory():
    result = migrate(SESSION_BUNDLE)
    assert not manual(result)
    out = result.output
    assert "ParameterServerStrategy" in out and "exporter" not in out and "session_bundle" not in out
    assert "saver" not in out and "Saver" not in out and "sess" not in out
    assert "import os" in out
    tail = tfm301_support.tail_from(out, "if is_chief:")
    assert tail.startswith(dedent('''
        if is_chief:
            export_path = os.path.join(FLAGS.export_base, "%08d" % FLAGS.model_version)
            if tf.io.gfile.exists(export_path):
                raise FileExistsError(f"{export_path} exists: an export is never written over")

            @tf.function(input_signature=[
                tf.TensorSpec([None], tf.int64, name="ids"),
                tf.TensorSpec([None, 3], tf.float32, name="reading"),
            ])
            def serve(ids, reading):
                guess = tf.matmul(reading, kernel) + offset
                passed_ids = tf.identity(ids)
                return {"ids": passed_ids, "guess": guess}

            serving_model = tf.Module()
            # The variables the signatures read, saved with them.
            serving_model.served_variables = [kernel, offset]
            tf.saved_model.save(
                serving_model, export_path,
                signatures={"serving_default": serve})
    ''').lstrip("\n"))


def test_the_export_keeps_its_place_in_the_program_and_its_guard():
    result = migrate(SIMPLE_SAVE)
    assert not manual(result)
    out = result.output
    assert "MultiWorkerMirroredStrategy" in out and "simple_save" not in out and "sess" not in out
    tail = tfm301_support.tail_from(out[out.index("print(\"trained\""):], "if is_chief:")
    assert tail.startswith(dedent('''
        if is_chief:
            # the chief writes the model TF Serving loads
            if tf.io.gfile.exists(export_dir) and tf.io.gfile.listdir(export_dir):
                raise FileExistsError(f"{export_dir} exists and is not empty: an export is never written over")

            @tf.function(input_signature=[
                tf.TensorSpec([None, 4], tf.float32, name="features"),
            ])
            def serve(inputs):
                score = tf.matmul(inputs, weights) + bias
                return {"score": score}
    ''').lstrip("\n"))
    assert 'tf.saved_model.save(\n            serving_model, export_dir,\n            signatures={"serving_default": serve})' \
        in out
    # the export follows the evaluation the program printed, as it did
    assert out.index("print(\"trained\"") < out.index("def serve(")


def test_a_saved_model_builder_becomes_the_same_export():
    simple = migrate(SIMPLE_SAVE).output
    built = migrate(builder_program())
    assert not manual(built)
    strip = tfm301_support.tail_from
    assert "builder" not in built.output and "tensor_info" not in built.output
    # the same TF2 export, apart from the comment simple_save's fixture has
    assert strip(built.output, "def serve(") == strip(simple, "def serve(")


def test_a_signature_and_builder_made_in_the_graph_block_go_with_the_export():
    source = SIMPLE_SAVE.replace(
        "        init = tf.global_variables_initializer()\n",
        "        init = tf.global_variables_initializer()\n"
        "        signature = tf.saved_model.signature_def_utils.predict_signature_def(\n"
        '            inputs={"features": inputs}, outputs={"score": score})\n'
        "        builder = tf.saved_model.builder.SavedModelBuilder(export_dir)\n").replace(
        SIMPLE_SAVE_EXPORT,
        "\n    if is_chief:\n"
        '        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": signature})\n'
        "        builder.save()\n")
    result = migrate(source)
    assert not manual(result)
    assert "builder" not in result.output and "signature_def" not in result.output
    assert tfm301_support.tail_from(result.output, "def serve(") == tfm301_support.tail_from(
        migrate(SIMPLE_SAVE).output, "def serve(")


def test_the_compat_spelling_and_named_keys_are_read_alike():
    source = builder_program().replace("tf.saved_model.", "tf.compat.v1.saved_model.").replace(
        'inputs={"features": features_info}, outputs={"score": score_info},',
        "inputs={tf.saved_model.signature_constants.PREDICT_INPUTS: features_info},\n"
        "            outputs={tf.saved_model.signature_constants.PREDICT_OUTPUTS: score_info},")
    result = migrate(source)
    assert not manual(result)
    assert 'tf.TensorSpec([None, 4], tf.float32, name="inputs"),' in result.output
    assert 'return {"outputs": score}' in result.output


def test_a_bundle_versioned_by_the_global_step_is_written_under_the_steps_number():
    result = migrate(SESSION_BUNDLE.replace("tf.constant(FLAGS.model_version), sess)", "counter, sess)"))
    assert not manual(result)
    assert 'export_path = os.path.join(FLAGS.export_base, "%08d" % int(counter.numpy()))' in result.output


def test_several_signatures_of_a_builder_each_get_their_function():
    source = builder_program().replace(
        "signature_def_map={tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature},",
        "signature_def_map={\"predict_score\": signature, \"echo\": tf.saved_model.signature_def_utils."
        "predict_signature_def(inputs={\"x\": inputs}, outputs={\"x\": inputs})},")
    result = migrate(source)
    assert not manual(result)
    out = result.output
    assert "def serve_predict_score(inputs):" in out and "def serve_echo(inputs):" in out
    assert 'signatures={"predict_score": serve_predict_score, "echo": serve_echo})' in out


def test_a_model_made_by_helpers_is_served_through_the_model_function_without_the_labels():
    """The model function computes the model up to what is served (and
    evaluated) from the inputs alone; the loss follows it in the step."""
    result = migrate(helper_model_program())
    assert not manual(result)
    out = result.output
    assert "    def model_fn(inputs):\n" in out and "        return score\n" in out
    assert "score = model(inputs)\n                cost = tf.reduce_mean(tf.square(score - expected))" in out
    # the probe of the trained model is evaluated from the inputs alone, as TF1 fed it
    assert "InvalidArgumentError" not in out and "compute_score(probe)" in out
    serve = tfm301_support.tail_from(out, "def serve(")
    assert serve.startswith("def serve(inputs):\n    score = model(inputs)\n    return {\"score\": score}\n")
    assert "serving_model.served_variables = list(model.variables)" in out


@pytest.mark.parametrize(("program", "change", "where", "why"), [
    (builder_program, ("[tf.saved_model.tag_constants.SERVING]", '["serve", "gpu"]'), '["serve", "gpu"]',
     "its tags are `[\"serve\", \"gpu\"]`; tf.saved_model.save writes the one tag `serve`"),
    (builder_program, ("PREDICT_METHOD_NAME", "CLASSIFY_METHOD_NAME"), "build_signature_def(",
     "its signature's method is `tf.saved_model.signature_constants.CLASSIFY_METHOD_NAME`, not Predict"),
    (builder_program, ('name="legacy_init_op"))', ('name="legacy_init_op"),\n'
                       '            assets_collection=tf.get_collection(tf.GraphKeys.ASSET_FILEPATHS))')),
     "assets_collection=", "it exports assets"),
    (builder_program, ("builder.save()", "builder.save(as_text=True)"), "builder.save(as_text=True)",
     "it writes the SavedModel as text"),
    (builder_program, ("build_tensor_info(inputs)", "build_tensor_info(score - expected)"),
     "features_info = ", "its tensor info `features_info` describes `score - expected`, not a graph value"),
    (builder_program, ('name="legacy_init_op")', 'step_counter.assign(0))'), "legacy_init_op=",
     "it runs `tf.group(tf.tables_initializer(), step_counter.assign(0))` when the SavedModel is loaded"),
    (lambda: SIMPLE_SAVE, ('inputs={"features": inputs}', 'inputs={"features": expected}'), "simple_save(",
     "its signature output `score` is computed from the placeholder `inputs`, which the signature does not take"),
    (lambda: SIMPLE_SAVE, ('outputs={"score": score}', 'outputs={"score": score, "cost": cost}'), "simple_save(",
     "its signature output `cost` is computed from the placeholder `expected`, which the signature does not take"),
    (lambda: SESSION_BUNDLE, ('tf.constant(FLAGS.model_version), sess)', 'counter + 1, sess)'), "bundle.export(",
     "its version (`counter + 1`) is computed by the TF1 graph"),
    (lambda: SESSION_BUNDLE, ('tf.constant(FLAGS.model_version), sess)',
                              'tf.constant(FLAGS.model_version), sess, exports_to_keep=keep_five)'),
     "bundle.export(", "it keeps only some exports (`exports_to_keep`)"),
    (lambda: SESSION_BUNDLE, ('"outputs": exporter.generic_signature({"ids": passed_ids, "guess": guess})})',
                              ('"outputs": exporter.generic_signature({"ids": passed_ids, "guess": guess})},\n'
                              '                default_graph_signature=exporter.regression_signature(reading, guess))')),
     "default_graph_signature=", "it exports a default graph signature of a session bundle"),
])
def test_what_cannot_be_carried_exactly_is_declined_where_it_is(program, change, where, why):
    source = program().replace(*change)
    assert source != program()
    result = migrate(source)
    assert result.output == dedent(source)
    [reason] = manual(result)
    assert reason.line == line_of(source, where)
    assert reason.message.startswith("training not migrated: it exports the trained model for serving and ")
    assert why in reason.message and reason.message.endswith("this training was left as TF1")
    assert "tf.saved_model.save(module, export_dir, signatures=...)" in reason.hint


RUNNER = '''
import json, os, sys
import numpy as np
import tensorflow as tf_api

legacy, export_dir = sys.argv[1] == "legacy", sys.argv[2]
rng = np.random.RandomState(5)
samples = (rng.rand(8, 4).astype(np.float32), rng.rand(8, 1).astype(np.float32))
probe = rng.rand(3, 4).astype(np.float32)
printed = []
print = lambda *args: printed.append(list(args))
if legacy:
    tf_api.compat.v1.disable_v2_behavior()
    # the Supervisor finalizes the graph, and the TF1 export adds its Saver's ops to it (TF1
    # jobs exporting this way unfinalized it by hand): the reference run lets it
    tf_api.Graph.finalize = lambda graph: None
    port = int(sys.argv[3])
    cluster = tf_api.compat.v1.train.ClusterSpec({"worker": ["localhost:%d" % port]})
    server = tf_api.compat.v1.train.Server(cluster, job_name="worker", task_index=0)
    fit(cluster, server, True, 1, samples, 12, export_dir, probe)
else:
    fit(None, None, True, 1, samples, 12, export_dir, probe)
sys.stdout.write(json.dumps({"trained": printed[0][1], "probe": probe.tolist()}))
sys.stdout.flush()
os._exit(0)  # TF1's chief queue runner thread still waits on its queue
'''

# loads an export in a fresh TF2 process and calls its serving signature
SERVED = '''
import json, sys
import numpy as np
import tensorflow as tf

loaded = tf.saved_model.load(sys.argv[1])
serve = loaded.signatures["serving_default"]
probe = np.array(json.loads(sys.argv[2]), np.float32)
result = serve(features=tf.constant(probe))
inputs = {k: [v.dtype.name, v.shape.as_list()] for k, v in serve.structured_input_signature[1].items()}
print(json.dumps({"score": result["score"].numpy().ravel().tolist(), "outputs": sorted(result),
                  "inputs": inputs}))
'''


def _run(*command: str) -> dict:
    run = subprocess.run([sys.executable, *command], check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("program", [lambda: SIMPLE_SAVE, builder_program, helper_model_program],
                         ids=["simple_save", "builder", "helper_model"])
def test_the_migrated_export_serves_what_the_trained_model_computes(program):
    """One local worker: the TF1 program exports its SavedModel; the migrated
    one (MultiWorkerMirroredStrategy) writes its own. Loaded in a fresh
    process, the migrated signature takes the inputs the TF1 one takes (names,
    dtypes, shapes), has its outputs, and gives, bit for bit, what the trained
    model computed for the same probe in the program."""
    pytest.importorskip("tensorflow")
    source = dedent(program())
    migrated = migrate(source, select=None).output
    assert "tf.saved_model.save(" in migrated
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as old_dir, tempfile.TemporaryDirectory() as new_dir:
        tf1 = _run("-c", source + RUNNER, "legacy", old_dir + "/model", str(port))
        tf2 = _run("-c", migrated + RUNNER, "migrated", new_dir + "/model")
        served_tf1 = _run("-c", SERVED, old_dir + "/model", json.dumps(tf1["probe"]))
        served_tf2 = _run("-c", SERVED, new_dir + "/model", json.dumps(tf2["probe"]))
    # each export serves what its own trained model computes, bit for bit
    assert served_tf2["score"] == tf2["trained"]
    assert served_tf1["score"] == tf1["trained"]
    # under the same signature: its inputs' names, dtypes and shapes, its outputs' names
    assert {k: v for k, v in served_tf2.items() if k != "score"} == {k: v for k, v in served_tf1.items() if k != "score"}
    assert served_tf2["inputs"] == {"features": ["float32", [None, 4]]} and served_tf2["outputs"] == ["score"]


# the session bundle program, printing what the trained model computes for a probe first
def probed_bundle() -> str:
    return SESSION_BUNDLE.replace("def run(cluster, server, is_chief, batches, log_dir):",
                                  "def run(cluster, server, is_chief, batches, log_dir, probe):").replace(
        "        if is_chief:\n            bundle",
        "        print(\"trained\", sess.run(guess, feed_dict={reading: probe}).ravel().tolist())\n"
        "        if is_chief:\n            bundle")


# the migrated program as the chief of a loopback cluster whose ps and worker serve in this process
PSS_RUNNER = '''
import json, os, socket, sys
import numpy as np

def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]

cluster = {"chief": ["localhost:%d" % free_port()], "worker": ["localhost:%d" % free_port()],
           "ps": ["localhost:%d" % free_port()]}
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
for job in ("worker", "ps"):
    tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job, task_index=0, protocol="grpc", start=True)
FLAGS(["run", "--export_base=" + sys.argv[1]])
rng = np.random.RandomState(7)
batches = [(rng.rand(4, 3).astype(np.float32), rng.rand(4, 1).astype(np.float32)) for _ in range(10)]
probe = rng.rand(2, 3).astype(np.float32)
printed = []
print = lambda *args: printed.append(list(args))
run(None, None, True, batches, sys.argv[2], probe)
sys.stdout.write(json.dumps({"trained": printed[0][1], "probe": probe.tolist()}))
sys.stdout.flush()
os._exit(0)
'''

SERVED_BUNDLE = '''
import json, sys
import numpy as np
import tensorflow as tf

serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
result = serve(ids=tf.constant([11, 12], tf.int64), reading=tf.constant(json.loads(sys.argv[2]), tf.float32))
inputs = {k: [v.dtype.name, v.shape.as_list()] for k, v in serve.structured_input_signature[1].items()}
print(json.dumps({"guess": result["guess"].numpy().ravel().tolist(), "ids": result["ids"].numpy().tolist(),
                  "inputs": inputs, "outputs": sorted(result)}))
'''


@pytest.mark.slow
def test_the_chief_of_a_parameter_server_job_exports_the_session_bundle_as_a_saved_model():
    """The asynchronous job (ParameterServerStrategy): its chief writes the
    SavedModel into the version's directory; loaded in a fresh process, the
    signature takes the bundle's inputs by their keys and gives what the
    trained model computed, and the ids passed through."""
    pytest.importorskip("tensorflow")
    import os

    migrated = migrate(probed_bundle(), select=None).output
    with tempfile.TemporaryDirectory() as base, tempfile.TemporaryDirectory() as log_dir:
        trained = _run("-c", migrated + PSS_RUNNER, base, log_dir)
        assert os.listdir(base) == ["00000003"]
        served = _run("-c", SERVED_BUNDLE, os.path.join(base, "00000003"), json.dumps(trained["probe"]))
    assert served["guess"] == trained["trained"]
    assert served["ids"] == [11, 12]
    assert served["inputs"] == {"ids": ["int64", [None]], "reading": ["float32", [None, 3]]}
    assert served["outputs"] == ["guess", "ids"]


# one program, two paths: trained on this machine alone, or on the cluster (whose chief exports)
STANDALONE_OR_CLUSTER = '''
import tensorflow.compat.v1 as tf


def main(cluster, server, is_chief, batches, export_dir):
    if cluster is None:
        features = tf.placeholder(tf.float32, [None, 2])
        target = tf.placeholder(tf.float32, [None, 1])
        slope = tf.Variable(tf.zeros([2, 1]))
        fitted = tf.matmul(features, slope)
        cost = tf.reduce_mean(tf.square(fitted - target))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(cost)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for xs, ys in batches:
                sess.run(train_op, feed_dict={features: xs, target: ys})
    else:
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            features = tf.placeholder(tf.float32, [None, 2])
            target = tf.placeholder(tf.float32, [None, 1])
            slope = tf.Variable(tf.zeros([2, 1]))
            fitted = tf.matmul(features, slope)
            cost = tf.reduce_mean(tf.square(fitted - target))
            step = tf.train.get_or_create_global_step()
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(cost, global_step=step)
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
            for xs, ys in batches:
                sess.run(train_op, feed_dict={features: xs, target: ys})
            if is_chief:
                tf.saved_model.simple_save(sess, export_dir, {"features": features}, {"fitted": fitted})
'''


def test_a_standalone_training_path_beside_the_cluster_one_migrates_with_it():
    result = migrate(STANDALONE_OR_CLUSTER)
    out = result.output
    assert "ParameterServerStrategy" in out and "def serve(features):" in out and "simple_save" not in out
    # the standalone path trains without a strategy (test_tfm301_single_machine.py says how)
    assert not manual(result) and "Session" not in out
    standalone = out[out.index("if cluster is None:"):out.index("    else:\n")]
    assert "def train_step(features, target):" in standalone and "strategy" not in standalone
    # a plain session that only evaluates is no training left behind
    evaluating = STANDALONE_OR_CLUSTER.replace(
        "        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(cost)\n", "").replace(
        "                sess.run(train_op, feed_dict={features: xs, target: ys})\n",
        "                print(sess.run(cost, feed_dict={features: xs, target: ys}))\n", 1)
    assert not manual(migrate(evaluating))


# the chief's export written in a helper handed the session and the signatures' mappings
PUBLISHED = SESSION_BUNDLE.replace(
    '            bundle = exporter.Exporter(saver)\n'
    '            bundle.init(sess.graph.as_graph_def(), named_graph_signatures={\n'
    '                "inputs": exporter.generic_signature({"ids": ids, "reading": reading}),\n'
    '                "outputs": exporter.generic_signature({"ids": passed_ids, "guess": guess})})\n'
    '            bundle.export(FLAGS.export_base, tf.constant(FLAGS.model_version), sess)\n',
    '            publish(sess, {"ids": ids, "reading": reading}, {"ids": passed_ids, "guess": guess})\n') + '''

def publish(sess, inputs, outputs):
    """Writes the bundle TF Serving loads."""
    bundle = exporter.Exporter(tf.train.Saver())
    bundle.init(sess.graph.as_graph_def(), named_graph_signatures={
        "inputs": exporter.generic_signature(inputs), "outputs": exporter.generic_signature(outputs)})
    bundle.export(FLAGS.export_base, tf.constant(FLAGS.model_version), sess)
'''


def test_an_export_in_a_function_given_the_session_is_written_out_in_its_place():
    out = migrate(PUBLISHED).output
    # the same export as one written in the training function
    assert tfm301_support.tail_from(out, "def serve(") == tfm301_support.tail_from(
        migrate(SESSION_BUNDLE).output, "def serve(")
    assert "publish" not in out and "exporter" not in out and "Saver" not in out
    # the mappings are passed through names as well
    named = PUBLISHED.replace('            publish(sess, {"ids": ids, "reading": reading}, {',
                              '            served_inputs = {"ids": ids, "reading": reading}\n'
                              '            publish(sess, served_inputs, {', 1)
    assert tfm301_support.tail_from(migrate(named).output, "def serve(") == tfm301_support.tail_from(out, "def serve(")


@pytest.mark.parametrize("change", [
    # called twice: its statements cannot take the place of one call
    lambda source: source.replace("            publish(sess, {", "            publish(sess, {\"ids\": ids}, {})\n"
                                  "            publish(sess, {", 1),
    # it reads a mapping passed as a literal twice: written out, it would be built twice
    lambda source: source.replace('        "inputs": exporter.generic_signature(inputs),',
                                  '        "inputs": exporter.generic_signature(inputs), "also": exporter.generic_signature(inputs),'),
    # it binds a name the training function uses
    lambda source: source.replace("    bundle = exporter.Exporter(tf.train.Saver())", "    saver = tf.train.Saver()\n"
                                  "    bundle = exporter.Exporter(saver)"),
    # it rebinds a parameter: not the value passed
    lambda source: source.replace("    bundle = exporter.Exporter(tf.train.Saver())", "    inputs = dict(inputs)\n"
                                  "    bundle = exporter.Exporter(tf.train.Saver())"),
], ids=["called_twice", "mapping_read_twice", "binds_a_name_in_use", "rebinds_a_parameter"])
def test_an_export_in_a_function_that_cannot_take_the_calls_place_is_said_to_be_one(change):
    source = change(PUBLISHED)
    result = migrate(source)
    assert result.output == dedent(source)
    reasons = manual(result)
    assert reasons[0].line == line_of(source, "publish(sess, {")
    assert reasons[0].message.startswith("training not migrated: it hands the trained graph to `publish()`, which"
                                         " exports it for serving (`exporter.Exporter(...)`) in a TF1 session")
    assert "write the export of `publish()` in the training function after its loop" in reasons[0].hint


@pytest.mark.slow
def test_an_export_already_written_is_never_written_over():
    """As TF1's builder refused a directory holding an export, the migrated
    program stops before saving over one, which stays as it was."""
    pytest.importorskip("tensorflow")
    migrated = migrate(SIMPLE_SAVE, select=None).output
    with tempfile.TemporaryDirectory() as base:
        first = _run("-c", migrated + RUNNER, "migrated", base + "/model")
        again = subprocess.run([sys.executable, "-c", migrated + RUNNER, "migrated", base + "/model"], check=False,
                               capture_output=True, text=True, timeout=300)
        assert again.returncode != 0
        assert f"FileExistsError: {base}/model exists and is not empty" in again.stderr
        served = _run("-c", SERVED, base + "/model", json.dumps(first["probe"]))
    assert served["score"] == first["trained"]
