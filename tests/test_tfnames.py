"""TensorFlow name resolution (migrate/codemod/tfnames.py) and the API tables
(migrate/codemod/data/tf_api.json) the TFM1xx rules spell names from."""

from __future__ import annotations

import inspect
import json
import os
import random
import subprocess
import sys
from importlib import resources

import libcst as cst
import pytest

from migrate.codemod.rules.tfm101_tensorflow_import import known_prefix, load_tf_api
from migrate.codemod.tfnames import TFNames, canonical, dotted


def names_of(src: str) -> TFNames:
    return TFNames.from_module(cst.parse_module(src))


def qual(src: str, expr: str) -> str | None:
    return names_of(src).qualname(cst.parse_expression(expr))


@pytest.mark.parametrize(
    "full, want",
    [
        ("tensorflow", ""),
        ("tensorflow.train.Server", "train.Server"),
        ("tensorflow.compat.v1.train.Server", "train.Server"),
        ("tensorflow.compat.v2.distribute.Server", "distribute.Server"),
        ("tensorflow.compat.v1", ""),
        # `import tensorflow.compat.v1 as tf; tf.compat.v1.X` is valid TF
        ("tensorflow.compat.v1.compat.v1.logging.info", "logging.info"),
        ("tensorflow.compat.v1.compat.v1", ""),
        ("tensorflow.python.ops.array_ops", None),
        ("tensorflow._api.v2.train", None),
        ("numpy.float32", None),
        ("tensorflowx.foo", None),
    ],
)
def test_canonical(full, want):
    assert canonical(full) == want


@pytest.mark.parametrize(
    "src, expr, want",
    [
        ("import tensorflow as tf", "tf.train.Server", "train.Server"),
        ("import tensorflow.compat.v1 as tf", "tf.train.Server", "train.Server"),
        ("import tensorflow as tf1", "tf1.compat.v1.train.Server", "train.Server"),
        ("from tensorflow.compat import v1", "v1.train.Server", "train.Server"),
        ("from tensorflow.compat import v1 as tf", "tf.placeholder", "placeholder"),
        ("from tensorflow.train import Server", "Server", "train.Server"),
        ("from tensorflow import train as tr", "tr.Server", "train.Server"),
        ("import tensorflow", "tensorflow.Session", "Session"),
        ("import tensorflow.compat.v1", "tensorflow.compat.v1.Session", "Session"),
        ("import tensorflow as tf", "tf", ""),
        ("import tensorflow as tf", "np.float32", None),
        ("import numpy as tf", "tf.float32", None),
        ("import tensorflow as tf", "tf.train.Server(spec).join", None),  # a call in the chain
    ],
)
def test_qualname(src, expr, want):
    assert qual(src, expr) == want


def test_later_import_wins_and_non_tf_imports_are_ignored():
    src = "import numpy as np\nimport tensorflow.compat.v1 as tf\nimport tensorflow as tf\nfrom os import path\n"
    names = names_of(src)
    assert names.bindings == {"tf": "tensorflow"}
    assert names.root_alias() == "tf"
    assert not names.is_v1_alias("tf")


def test_imports_inside_functions_and_try_blocks_are_seen():
    src = (
        "try:\n    import tensorflow.compat.v1 as tfv1\nexcept ImportError:\n    tfv1 = None\n"
        "def f():\n    from tensorflow.train import Supervisor\n    return Supervisor\n"
    )
    names = names_of(src)
    assert names.is_v1_alias("tfv1")
    assert names.bindings["Supervisor"] == "tensorflow.train.Supervisor"


def test_relative_and_star_imports_bind_nothing():
    assert not names_of("from . import tensorflow\nfrom tensorflow import *\n").any


def test_dotted():
    assert dotted(cst.parse_expression("a.b.c")) == "a.b.c"
    assert dotted(cst.parse_expression("a().b")) is None
    assert dotted(cst.parse_expression("a[0].b")) is None


# --------------------------------------------------------------------------- API tables


def test_api_json_is_compact_and_cached():
    text = resources.files("migrate.codemod").joinpath("data/tf_api.json").read_text()
    assert len(text.encode()) < 1_000_000
    data = json.loads(text)
    assert {"v1", "v2", "same", "renames", "keras2_only", "contrib_renames", "tf_version"} <= set(data)
    assert load_tf_api() is load_tf_api()


def test_api_tables_know_the_names_the_rules_depend_on():
    api = load_tf_api()
    for name in ("train.Server", "train.replica_device_setter", "placeholder", "Session", "app.run",
                 "logging.info", "train.SyncReplicasOptimizer", "train.MonitoredTrainingSession"):
        assert name in api.v1 and name not in api.same, name
    assert {"matmul", "float32", "train.ClusterSpec", "nn.relu"} <= api.same
    # v1 and v2 behave differently: must stay compat.v1
    assert not {"Variable", "reduce_sum", "nn.dropout", "data.Dataset"} & api.same
    assert api.renames["log"] == "math.log"
    assert api.contrib_renames["contrib.cluster_resolver.TFConfigClusterResolver"] == (
        "distribute.cluster_resolver.TFConfigClusterResolver"
    )
    assert "layers" in api.keras2_only
    assert known_prefix("float32.as_numpy_dtype", api) == ("float32", "as_numpy_dtype")
    assert known_prefix("contrib.layers.x", api) == ("", "contrib.layers.x")


def test_api_tables_match_the_installed_tensorflow():
    """The generated tables are true of the TensorFlow installed here (a
    sample: every claim is an identity check against real TF)."""
    tf = pytest.importorskip("tensorflow")
    api = load_tf_api()
    if api.tf_version != tf.__version__:
        pytest.skip(f"tables generated for TF {api.tf_version}, installed {tf.__version__}")

    def resolve(root, name):
        obj = root
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj

    def same(a, b):
        if a is b:
            return True
        return callable(a) and callable(b) and inspect.unwrap(a) is inspect.unwrap(b)

    rng = random.Random(0)
    for name in rng.sample(sorted(api.same), 150):
        assert same(resolve(tf.compat.v1, name), resolve(tf, name)), name
    for old, new in rng.sample(sorted(api.renames.items()), 40):
        assert same(resolve(tf.compat.v1, old), resolve(tf, new)), (old, new)
    for name in ("Variable", "reduce_sum", "nn.dropout"):
        assert not same(resolve(tf.compat.v1, name), resolve(tf, name))
    for old, new in api.contrib_renames.items():
        target = resolve(tf, new)
        assert target is not None, (old, new)


# --------------------------------------------------------------------------- end to end

_TF1_PROGRAM = '''
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()

tf.app.flags.DEFINE_integer("steps", 4, "training steps")
FLAGS = tf.app.flags.FLAGS


def main(_):
    tf.set_random_seed(1)
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.get_variable("w", [3, 2], initializer=tf.random_normal_initializer(seed=2))
    h = tf.nn.dropout(tf.matmul(x, w), keep_prob=1.0)  # v1-only keyword
    y = tf.log(tf.nn.softplus(h))  # renamed to tf.math.log
    loss = tf.reduce_mean(tf.reduce_sum(tf.square(y), 1, keep_dims=True))
    train = tf.train.AdamOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(FLAGS.steps):
            _, value = sess.run([train, loss], {x: [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]})
            tf.logging.info("loss %f", value)
            print("LOSS", repr(float(value)))


if __name__ == "__main__":
    tf.app.run()
'''


def _run_program(path, timeout=240):
    proc = subprocess.run(
        [sys.executable, str(path), "--steps=3"],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if line.startswith("LOSS")]


@pytest.mark.slow
def test_spelling_rules_keep_a_tf1_program_computing_the_same(tmp_path):
    """TFM101-103 rewrite the program (one import, tf.compat.v1 where v1 and
    v2 differ, absl flags/logging); the rewritten program runs on TF 2.21 and
    prints exactly the same losses as the original."""
    pytest.importorskip("tensorflow")
    from migrate.codemod import rules
    from migrate.codemod.engine import migrate_source
    from migrate.codemod.rules.tfm101_tensorflow_import import TensorflowImport
    from migrate.codemod.rules.tfm102_absl_flags import AbslFlags
    from migrate.codemod.rules.tfm103_tf_logging import TfLogging

    saved = list(rules.REGISTRY)
    rules.REGISTRY[:] = [TensorflowImport, AbslFlags, TfLogging]
    try:
        result = migrate_source(_TF1_PROGRAM)
    finally:
        rules.REGISTRY[:] = saved
    out = result.output
    assert "import tensorflow as tf\n" in out and "compat.v1 as tf" not in out
    assert "tf.compat.v1.nn.dropout(" in out and "tf.math.log(" in out
    assert "tf.compat.v1.reduce_sum(" in out and "app.run(main)" in out
    assert "tf.app" not in out and "tf.logging" not in out
    original = tmp_path / "original.py"
    migrated = tmp_path / "migrated.py"
    original.write_text(_TF1_PROGRAM)
    migrated.write_text(out)
    want = _run_program(original)
    got = _run_program(migrated)
    assert len(want) == 3
    assert got == want
