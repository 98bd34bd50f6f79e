"""TFM402 contrib: ``tf.contrib.*`` -> its TF2 home (rewritten when exact, else reported)."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import code_of, transform
from migrate.codemod.rules import _contrib_equivalents as eq
from migrate.codemod.rules.tfm101_tensorflow_import import attribute_chain, load_tf_api
from migrate.codemod.rules.tfm401_estimator import imported_modules
from migrate.codemod.tfnames import canonical, dotted

# Exact equivalents tf_upgrade_v2's table lacks (the contrib symbol was an alias).
_EXTRA_RENAMES = {
    "contrib.framework.get_or_create_global_step": "compat.v1.train.get_or_create_global_step",
    "contrib.framework.get_global_step": "compat.v1.train.get_global_step",
    "contrib.framework.create_global_step": "compat.v1.train.create_global_step",
    "contrib.framework.assert_global_step": "compat.v1.train.assert_global_step",
}

# canonical prefix -> hint (most specific first); the TF2 home of well-known contrib APIs
_HINTS: list[tuple[str, str]] = [
    ("contrib.layers.xavier_initializer", ("tf.keras.initializers.GlorotUniform(seed=...) (uniform=False:"
     " GlorotNormal); in graph-mode code tf.compat.v1.glorot_uniform_initializer()")),
    ("contrib.layers.variance_scaling_initializer", ("tf.keras.initializers.VarianceScaling(scale=factor,"
     " mode='fan_in'|'fan_out'|'fan_avg', distribution='truncated_normal'|'uniform')")),
    ("contrib.layers.l2_regularizer", "tf.keras.regularizers.L2(0.5 * scale) (TF1 used scale * sum(w**2) / 2)"),
    ("contrib.layers.l1_regularizer", "tf.keras.regularizers.L1(scale)"),
    ("contrib.layers.fully_connected", "tf.keras.layers.Dense(units, activation=...)"),
    ("contrib.layers.conv2d", "tf.keras.layers.Conv2D"),
    ("contrib.layers.max_pool2d", "tf.keras.layers.MaxPooling2D"),
    ("contrib.layers.avg_pool2d", "tf.keras.layers.AveragePooling2D"),
    ("contrib.layers.batch_norm", "tf.keras.layers.BatchNormalization (mind momentum/epsilon defaults)"),
    ("contrib.layers.layer_norm", "tf.keras.layers.LayerNormalization"),
    ("contrib.layers.flatten", "tf.keras.layers.Flatten"),
    ("contrib.layers.dropout", "tf.keras.layers.Dropout(rate=1 - keep_prob)"),
    ("contrib.layers.embed_sequence", "tf.keras.layers.Embedding"),
    ("contrib.layers.optimize_loss", ("a tf.GradientTape step with a tf.keras.optimizers optimizer"
     " (clip with tf.clip_by_global_norm)")),
    ("contrib.layers.summarize", "tf.summary.histogram / tf.summary.scalar in a tf.summary writer"),
    ("contrib.layers", "tf.keras.layers / tf.keras.initializers / tf.keras.regularizers"),
    ("contrib.slim", "tf.keras layers and models (the tf-slim package `tf_slim` exists for TF2)"),
    ("contrib.framework.arg_scope", "pass the shared arguments explicitly (or functools.partial)"),
    ("contrib.framework.get_variables", ("tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES,"
     " scope) (its first parameter is the collection, not the scope; `suffix` has no counterpart)")),
    ("contrib.deprecated", ("tf.compat.v1.summary.scalar/histogram/image/audio/merge/merge_all (the old"
     " `tag` is the new `name`; the old op `name` has no counterpart)")),
    ("contrib.rnn", "tf.keras.layers.LSTMCell / GRUCell / SimpleRNNCell wrapped in tf.keras.layers.RNN"),
    ("contrib.cudnn_rnn", "tf.keras.layers.LSTM / GRU (use cuDNN kernels automatically)"),
    ("contrib.distribute.MirroredStrategy", "tf.distribute.MirroredStrategy(devices=[...])"),
    ("contrib.distribute.CollectiveAllReduceStrategy", "tf.distribute.MultiWorkerMirroredStrategy"),
    ("contrib.distribute.ParameterServerStrategy", ("tf.distribute.ParameterServerStrategy(resolver)"
     " + tf.distribute.coordinator.ClusterCoordinator")),
    ("contrib.distribute", ("tf.distribute strategies (MirroredStrategy, MultiWorkerMirroredStrategy,"
     " ParameterServerStrategy)")),
    ("contrib.opt", ("a tf.keras.optimizers optimizer (AdamW exists in Keras 3); tensorflow-addons is"
     " end-of-life")),
    ("contrib.training.HParams", "a dict, dataclass or argparse/absl flags"),
    ("contrib.training", "a custom training loop with tf.data"),
    ("contrib.metrics", "tf.keras.metrics"),
    ("contrib.losses", "tf.keras.losses"),
    ("contrib.summary", "tf.summary (TF2 summaries: tf.summary.create_file_writer + tf.summary.scalar)"),
    ("contrib.seq2seq", "Keras 3 layers (tensorflow-addons seq2seq is end-of-life)"),
    ("contrib.tpu", "tf.distribute.TPUStrategy"),
    ("contrib.lookup", "tf.lookup"),
    ("contrib.image", "tf.image / tf.keras.layers preprocessing"),
    ("contrib.data", "tf.data / tf.data.experimental"),
    ("contrib.framework", "tf.* / tf.compat.v1.train.* (global step helpers)"),
    ("contrib.predictor", "tf.saved_model.load(path).signatures['serving_default']"),
    ("contrib.quantize", "the TensorFlow Model Optimization toolkit (tfmot.quantization.keras)"),
    ("contrib.eager", "TF2 is eager by default (tf.GradientTape, tf.function)"),
    ("contrib.keras", "tf.keras"),
    ("contrib", "the TF2 API listed in the TF 2 migration guide (tf.contrib was removed in TF 2.0)"),
]
# handled by TFM401 (estimator rule)
_SKIP = ("contrib.learn", "contrib.estimator")


def _hint(name: str) -> str:
    for prefix, hint in _HINTS:
        if name == prefix or name.startswith(prefix + "."):
            return hint
    return _HINTS[-1][1]


class Contrib(Rule):
    """Rewrite ``tf.contrib`` symbols with an exact TF2 equivalent; report the rest.

    What it does:
        Rewrites ``tf.contrib.X`` when TensorFlow's own upgrade table (or a
        known alias) names an identical TF 2.21 symbol:
        ``tf.contrib.cluster_resolver.TFConfigClusterResolver`` ->
        ``tf.distribute.cluster_resolver.TFConfigClusterResolver``,
        ``tf.contrib.framework.get_or_create_global_step`` ->
        ``tf.compat.v1.train.get_or_create_global_step``,
        ``tf.contrib.data.map_and_batch`` -> ``tf.data.experimental.map_and_batch``.
        ``tf.contrib.data``'s readers and ``Dataset`` (TF 1.2/1.3's preview
        of tf.data) -> ``tf.data.X`` (table in ``_contrib_equivalents.py``;
        ``Iterator`` -> ``tf.compat.v1.data.Iterator``), and
        ``ds.apply(tf.contrib.data.batch_and_drop_remainder(n))`` ->
        ``ds.batch(n, drop_remainder=True)``.
        ``tf.contrib.layers.l2_regularizer(scale)`` / ``l1_regularizer`` ->
        a function computing TF1's penalty, ``tf.multiply(scale,
        tf.nn.l2_loss(w), name="l2_regularizer")``, wherever the regularizer
        goes (``regularizer=``, a helper's argument) or applied to a weight
        on the spot. Every other ``tf.contrib`` use (and each
        ``tensorflow.contrib`` import) is reported once per statement, naming
        the TF2 home (``contrib.layers.xavier_initializer`` ->
        ``tf.keras.initializers.GlorotUniform``, ``contrib.rnn`` cells -> Keras
        cells ...). ``contrib.learn`` and ``contrib.estimator`` are left to TFM401.

    Why:
        ``tf.contrib`` was removed in TF 2.0: such programs fail at import.

    Example:
        ``reg = tf.contrib.layers.l2_regularizer(RATE)`` (``RATE = 1e-4``)
        becomes ``reg = lambda weights: tf.multiply(RATE, tf.nn.l2_loss(weights),
        name="l2_regularizer")``; ``tf.contrib.data.TFRecordDataset(files)``
        becomes ``tf.data.TFRecordDataset(files)``.

    Fix safety:
        Rewrites only symbols that are the same object (the contrib name was
        an alias) and take the same arguments: ``contrib.framework.get_variables(scope)``
        is reported, since ``get_collection``'s first parameter is the collection.
        ``tf.contrib.data`` members are rewritten only when the module has no
        call that only TF 1.3's Dataset understood (``.map(f, num_threads=...,
        output_buffer_size=...)``, whose third positional parameter TF 2 reads
        as ``deterministic``; ``dense_to_sparse_batch``). A regularizer is
        rewritten only when its scale is known here (a number, or a module
        constant bound once to one), so TF1's checks happen now: an integer or
        negative scale (TF1 raised ValueError) and a scale known only at run
        time are reported; 0.0 becomes TF1's ``lambda weights: None``. The
        penalty has TF1's ops (the scale converted to the weight's dtype by
        ``tf.multiply``) and the name of its result op. Anything whose
        defaults or numerics differ is reported with the hint, never
        rewritten. Names imported ``from tensorflow.contrib...`` are reported
        (the import itself must go).
    """

    code = "TFM402"
    name = "contrib"
    triggers = ("contrib",)

    VALID = (
        Valid(
            """
            import tensorflow as tf

            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            contrib = {"a": 1}
            print(contrib["a"])
            """
        ),
        Valid(
            """
            import tensorflow as tf

            penalty = lambda kernel: tf.multiply(3e-4, tf.nn.l2_loss(kernel))
            records = tf.data.TFRecordDataset(["shard-0.tfrecords"]).map(decode, 4)
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            resolver = tf.contrib.cluster_resolver.TFConfigClusterResolver()
            global_step = tf.contrib.framework.get_or_create_global_step()
            ds = ds.apply(tf.contrib.data.map_and_batch(parse, 32))
            """,
            """
            import tensorflow as tf

            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            global_step = tf.compat.v1.train.get_or_create_global_step()
            ds = ds.apply(tf.data.experimental.map_and_batch(parse, 32))
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            w = tf.get_variable("w", [784, 10], initializer=tf.contrib.layers.xavier_initializer())
            cell = tf.contrib.rnn.BasicLSTMCell(128)
            h = tf.contrib.layers.fully_connected(tf.contrib.layers.flatten(x), 10)
            """,
            None,
            diagnostics=("TFM402", "TFM402", "TFM402"),
        ),
        Invalid(
            """
            import tensorflow as tf

            head_vars = tf.contrib.framework.get_variables("head")
            tf.contrib.deprecated.scalar_summary("loss", loss)
            """,
            None,
            diagnostics=("TFM402", "TFM402"),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            import tensorflow.contrib.slim as slim
            from tensorflow.contrib import rnn

            net = slim.conv2d(images, 32, [3, 3])
            cell = rnn.GRUCell(64)
            est = tf.contrib.learn.Estimator(model_fn)
            """,
            None,
            diagnostics=("TFM402",) * 4,
        ),
        Invalid(
            """
            import tensorflow as tf1
            strategy = tf1.contrib.distribute.MirroredStrategy(num_gpus=2)
            resolver = tf1.contrib.cluster_resolver.SimpleClusterResolver(spec)
            """,
            """
            import tensorflow as tf1
            strategy = tf1.contrib.distribute.MirroredStrategy(num_gpus=2)
            resolver = tf1.distribute.cluster_resolver.SimpleClusterResolver(spec)
            """,
            diagnostics=("TFM402",),
        ),
        Invalid(
            """
            import tensorflow as tf

            DECAY = 5e-4
            SHARDS = ["train-0.tfrecords", "train-1.tfrecords"]


            def make_input(batch):
                records = tf.contrib.data.TFRecordDataset(SHARDS, compression_type="GZIP")
                lines = tf.contrib.data.TextLineDataset("labels.txt")
                steps = tf.contrib.data.Dataset.range(10)
                merged = tf.contrib.data.Dataset.zip((records, lines, steps))
                return merged.apply(tf.contrib.data.batch_and_drop_remainder(batch))


            def dense(x, units, regularizer):
                w = tf.get_variable("w", [x.shape[-1], units], regularizer=regularizer)
                tf.add_to_collection("penalties", tf.contrib.layers.l1_regularizer(0.5, "sparse")(w))
                return tf.matmul(x, w)


            logits = dense(features, 10, tf.contrib.layers.l2_regularizer(DECAY))
            off = tf.contrib.layers.l2_regularizer(0.0)
            maybe = tf.contrib.layers.l2_regularizer(DECAY) if DECAY else None
            """,
            """
            import tensorflow as tf

            DECAY = 5e-4
            SHARDS = ["train-0.tfrecords", "train-1.tfrecords"]


            def make_input(batch):
                records = tf.data.TFRecordDataset(SHARDS, compression_type="GZIP")
                lines = tf.data.TextLineDataset("labels.txt")
                steps = tf.data.Dataset.range(10)
                merged = tf.data.Dataset.zip((records, lines, steps))
                return merged.batch(batch, drop_remainder=True)


            def dense(x, units, regularizer):
                w = tf.get_variable("w", [x.shape[-1], units], regularizer=regularizer)
                tf.add_to_collection("penalties", tf.multiply(0.5, tf.reduce_sum(tf.abs(w)), name="sparse"))
                return tf.matmul(x, w)


            logits = dense(features, 10, lambda weights: tf.multiply(DECAY, tf.nn.l2_loss(weights), name="l2_regularizer"))
            off = lambda weights: None
            maybe = (lambda weights: tf.multiply(DECAY, tf.nn.l2_loss(weights), name="l2_regularizer")) if DECAY else None
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            RATE = 1e-3
            RATE = RATE / 10
            DECAY = 0.5
            by_flag = tf.contrib.layers.l2_regularizer(FLAGS.weight_decay)
            rebound = tf.contrib.layers.l2_regularizer(RATE)


            def head(x, DECAY):
                return tf.contrib.layers.l2_regularizer(DECAY)


            whole = tf.contrib.layers.l1_regularizer(1)
            negative = tf.contrib.layers.l2_regularizer(-0.1)
            """,
            None,
            diagnostics=("TFM402",) * 5,
        ),
        Invalid(
            """
            import tensorflow as tf

            images = tf.contrib.data.TFRecordDataset(files).map(parse, 8, 1024)
            """,
            None,
            diagnostics=("TFM402",),
        ),
        Invalid(
            """
            import tensorflow as tf

            images = tf.contrib.data.TextLineDataset(files)
            images = images.map(parse, num_threads=8, output_buffer_size=1024)
            """,
            None,
            diagnostics=("TFM402",),
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        if not self.ctx.names.any:
            return module
        api = load_tf_api()
        self.renames = {**api.contrib_renames, **_EXTRA_RENAMES}
        self.v1 = api.v1
        self._site: list[cst.CSTNode] = []
        self._reported: set[int] = set()
        # regularizer calls decided in visit_Call: id(call) -> (replacement, decline reason)
        self._plans: dict[int, tuple[cst.BaseExpression | None, str]] = {}
        self._claimed: set[int] = set()  # contrib chains a plan answers for
        self._whole_value: set[int] = set()  # expressions a lambda can replace without parentheses
        self._module = module
        self._constants: dict[str, int | float] | None = None
        self._old_dataset = eq.old_dataset_use(module) if "contrib.data" in self.ctx.source else None
        return transform(module, self)

    def _tf_root(self, node: cst.CSTNode) -> str | None:
        """The head name of a chain spelled from the TF root (``tf`` of
        ``tf.contrib.X``), None for names imported from tensorflow.contrib."""
        head = (dotted(node) or "").partition(".")[0]
        binding = self.ctx.names.bindings.get(head, "")
        return head if binding in ("tensorflow", "tensorflow.compat.v1", "tensorflow.compat.v2") else None

    def _contrib_name(self, node: cst.CSTNode) -> str | None:
        """The canonical ``contrib.*`` name of a chain (TFM401's included), or None."""
        q = self.qualname(node)
        if q is None or not (q == "contrib" or q.startswith("contrib.")):
            return None
        return q

    # ---------------------------------------------------------------- sites
    def visit_SimpleStatementLine(self, node) -> None:
        self._site.append(node)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        self._site.pop()
        return updated_node

    def visit_Import(self, node: cst.Import) -> bool:
        self._check_import(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._check_import(node)
        return False

    def _check_import(self, node: cst.Import | cst.ImportFrom) -> None:
        for path in imported_modules(node):
            name = canonical(path) or ""
            if name.startswith("contrib") and not name.startswith(_SKIP):
                self.report(
                    node,
                    f"`{path}` does not exist in TF 2 (tf.contrib was removed): this import fails",
                    hint=f"use {_hint(name)}",
                    fixed=False,
                )
                return

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self._contrib_name(node) is None

    # ---------------------------------------------------------- regularizers
    def visit_Arg(self, node: cst.Arg) -> None:
        self._whole_value.add(id(node.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._whole_value.add(id(node.value))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self._whole_value.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        if id(node) in self._plans:
            return  # the inner call of `l2_regularizer(scale)(w)`, planned with it
        if (len(node.args) == 1 and isinstance(node.args[0].value, cst.Call)
                and self._contrib_name(node.args[0].value.func) == eq.DROP_REMAINDER
                and self._tf_root(node.args[0].value.func) is not None):
            batched = eq.batch_dropping_remainder(node, node.args[0].value)
            if batched is not None:
                self._plans[id(node)] = (batched, "")
                self._claimed.add(id(node.args[0].value.func))
            return
        inner, applied_to = node, None
        if (isinstance(node.func, cst.Call) and len(node.args) == 1 and node.args[0].keyword is None
                and not node.args[0].star):
            inner, applied_to = node.func, node.args[0].value
        name = self._contrib_name(inner.func)
        if name not in eq.REGULARIZERS:
            return
        tf = self._tf_root(inner.func)
        if tf is None:
            return
        if self._constants is None:
            self._constants = eq.numeric_constants(self._module)
        plan = eq.regularizer(inner, name, tf, self._constants, applied_to)
        self._plans[id(node)] = plan
        self._claimed.add(id(inner.func))
        if inner is not node:
            self._plans[id(inner)] = (None, "")  # answered by the outer call

    def leave_Call(self, original_node, updated_node):
        plan = self._plans.get(id(original_node))
        if plan is None:
            return updated_node
        new, reason = plan
        if new is None and not reason:
            return updated_node
        if isinstance(new, cst.Call) and isinstance(new.func, cst.Attribute) and new.func.attr.value == "batch":
            self.report(original_node, f"`.apply(tf.{eq.DROP_REMAINDER}(n))` -> `.batch(n, drop_remainder=True)`",
                        fixed=True, severity="info")
            return new.with_changes(func=new.func.with_changes(value=updated_node.func.value))
        func = original_node.func if isinstance(original_node.func, cst.Call) else original_node
        name = self._contrib_name(func.func)
        if new is None:
            self._report_once(original_node, f"`tf.{name}` cannot be carried over exactly: {reason}",
                              hint=f"use {_hint(name)}")
            return updated_node
        self.report(original_node, f"`tf.{name}(...)` -> `{code_of(new)}` (TF1's numerics)",
                    fixed=True, severity="info")
        if updated_node.lpar:
            return new.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        if isinstance(new, cst.Lambda) and id(original_node) not in self._whole_value:
            # `reg = l2_regularizer(s) if c else None`: the lambda must not take in the rest
            return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return new

    def _report_once(self, node: cst.CSTNode, message: str, hint: str) -> None:
        site = self._site[-1] if self._site else node
        if id(site) not in self._reported:
            self._reported.add(id(site))
            self.report(node, message, hint=hint, fixed=False)

    def _handle(self, original, updated):
        name = self._contrib_name(original)
        if name is None or name.startswith(_SKIP) or id(original) in self._claimed:
            return updated
        d = dotted(original) or ""
        head = d.partition(".")[0]
        binding = self.ctx.names.bindings.get(head, "")
        new = self._rename(name)
        data = eq.data_member(name)
        if data is not None and binding in ("tensorflow", "tensorflow.compat.v1", "tensorflow.compat.v2"):
            if self._old_dataset is None:
                new = data[1] + name[len(data[0]):]
                if binding == "tensorflow.compat.v1" and new.startswith("compat.v1."):
                    new = new[len("compat.v1."):]
                self.report(original, f"`tf.{name}` -> `tf.{new}` (same parameters)", fixed=True,
                            severity="info")
                return attribute_chain(f"{head}.{new}")
            call, why = self._old_dataset
            self._report_once(original, f"`tf.{name}` is tf.data's TF 1.3 preview, and this file uses it as"
                              f" such: `{code_of(call).strip()}`: {why}",
                              hint=f"fix that call, then use `tf.{data[1]}`")
            return updated
        # rewrite only chains spelled from the TF root (`tf.contrib.X`); a
        # name imported from tensorflow.contrib needs its import removed by hand
        if new is not None and binding in ("tensorflow", "tensorflow.compat.v1", "tensorflow.compat.v2"):
            if binding == "tensorflow.compat.v1" and not new.startswith("compat.v1."):
                bare = new
                new = bare if bare in self.v1 else "compat.v2." + bare
            elif binding == "tensorflow.compat.v1":
                new = new[len("compat.v1.") :]
            self.report(original, f"`tf.{name}` -> `tf.{new}`", fixed=True, severity="info")
            return attribute_chain(f"{head}.{new}")
        site = self._site[-1] if self._site else original
        if id(site) not in self._reported:
            self._reported.add(id(site))
            self.report(
                original,
                f"`tf.{name}` was removed with tf.contrib (TF 2.0)",
                hint=f"use {_hint(name)}",
                fixed=False,
            )
        return updated

    def _rename(self, name: str) -> str | None:
        if name in self.renames:
            return self.renames[name]
        return None

    def leave_Attribute(self, original_node, updated_node):
        return self._handle(original_node, updated_node)

    def leave_Name(self, original_node, updated_node):
        return self._handle(original_node, updated_node)
