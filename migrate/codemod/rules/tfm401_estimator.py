"""TFM401 estimator: ``tf.estimator`` / ``tf.contrib.learn`` -> located manual-work diagnostics."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import transform
from migrate.codemod.rules.tfm901_legacy_leftovers import Locatable
from migrate.codemod.tfnames import canonical, dotted

REFERENCE = "legacy_reference/async_ps.py"
_STRATEGY_HINT = (
    "write a custom training loop: a tf.function train step run by"
    " tf.distribute.ParameterServerStrategy + tf.distribute.coordinator.ClusterCoordinator"
    " (TF_CONFIG with ps tasks; the chief coordinates) or"
    " tf.distribute.MultiWorkerMirroredStrategy (workers only, synchronous);"
    " read the cluster with tf.distribute.cluster_resolver.TFConfigClusterResolver()"
)

# (canonical name prefix, what it is, hint). First match wins, most specific first.
_CONSTRUCTS: list[tuple[str, str, str]] = [
    (
        "estimator.train_and_evaluate",
        "`tf.estimator.train_and_evaluate` ran ps/worker/chief/evaluator roles from TF_CONFIG",
        _STRATEGY_HINT + "; evaluate in the loop every N steps or run a"
        " tf.keras.utils.SidecarEvaluator on the evaluator task",
    ),
    (
        "estimator.RunConfig",
        "`tf.estimator.RunConfig` read TF_CONFIG (cluster, task type/index) and checkpoint settings",
        ("resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver() gives the cluster and"
        " role; checkpoints: tf.train.Checkpoint + tf.train.CheckpointManager(directory,"
        " max_to_keep=keep_checkpoint_max) saved every save_checkpoints_steps steps"),
    ),
    (
        "estimator.TrainSpec",
        "`tf.estimator.TrainSpec` (input_fn, max_steps, hooks)",
        ("max_steps bounds the training loop; input_fn becomes a tf.data.Dataset built in"
        " strategy.distribute_datasets_from_function / coordinator.create_per_worker_dataset"),
    ),
    (
        "estimator.EvalSpec",
        "`tf.estimator.EvalSpec` (eval input_fn, steps, throttle_secs)",
        ("evaluate in the training loop every N steps, or run tf.keras.utils.SidecarEvaluator"
        " on a separate evaluator task that reads the checkpoints"),
    ),
    (
        "estimator.EstimatorSpec",
        "`tf.estimator.EstimatorSpec` returned by a model_fn",
        ("turn the model_fn into a Keras 3 model or tf.Module plus a tf.function train step that"
        " computes `loss` and applies the optimizer; eval_metric_ops become tf.keras.metrics"),
    ),
    (
        "estimator.ModeKeys",
        "`tf.estimator.ModeKeys` selects train/eval/predict inside a model_fn",
        "split the model_fn into separate train, eval and predict functions",
    ),
    (
        "estimator.export",
        "Estimator export (serving input receivers, exporters)",
        ("export with tf.saved_model.save(model, path, signatures=<tf.function with an input"
        " signature>)"),
    ),
    (
        "estimator.Exporter",
        "Estimator exporter",
        "export with tf.saved_model.save after training",
    ),
    (
        "estimator.LatestExporter",
        "Estimator exporter",
        "export with tf.saved_model.save after training",
    ),
    (
        "estimator.BestExporter",
        "Estimator exporter",
        "export with tf.saved_model.save after training",
    ),
    (
        "estimator.inputs",
        "`tf.estimator.inputs` input functions",
        "use tf.data.Dataset.from_tensor_slices((x, y)).shuffle(...).batch(...)",
    ),
    (
        "estimator.Estimator",
        "`tf.estimator.Estimator` (model_fn + RunConfig)",
        _STRATEGY_HINT + "; the model_fn body becomes the model and the train step",
    ),
    (
        "contrib.learn.Experiment",
        "`tf.contrib.learn.Experiment` wired an Estimator to the TF_CONFIG cluster",
        _STRATEGY_HINT,
    ),
    (
        "contrib.learn.python.learn.learn_runner.run",
        "`learn_runner.run` ran an Experiment in the role given by TF_CONFIG",
        _STRATEGY_HINT,
    ),
    (
        "contrib.learn.learn_runner.run",
        "`learn_runner.run` ran an Experiment in the role given by TF_CONFIG",
        _STRATEGY_HINT,
    ),
    (
        "contrib.learn.RunConfig",
        "`tf.contrib.learn.RunConfig` read TF_CONFIG",
        ("resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver() gives the cluster"
        " and the task; checkpoints: tf.train.CheckpointManager"),
    ),
    (
        "contrib.learn.datasets",
        "`tf.contrib.learn.datasets` was removed",
        "load data with tf.keras.datasets (e.g. tf.keras.datasets.mnist.load_data())",
    ),
    (
        "contrib.learn",
        "`tf.contrib.learn` was removed in TF 2",
        _STRATEGY_HINT,
    ),
    (
        "contrib.estimator",
        "`tf.contrib.estimator` was removed in TF 2",
        _STRATEGY_HINT,
    ),
    (
        "estimator",
        "`tf.estimator` was removed in TF 2.16",
        _STRATEGY_HINT,
    ),
]


def imported_modules(node: cst.Import | cst.ImportFrom) -> list[str]:
    """Full dotted paths an import statement loads: ``import a.b`` -> ["a.b"],
    ``from a import b, c`` -> ["a.b", "a.c"]."""
    if isinstance(node, cst.Import):
        return [dotted(a.name) or "" for a in node.names]
    if node.relative or node.module is None:
        return []
    mod = dotted(node.module) or ""
    if isinstance(node.names, cst.ImportStar):
        return [mod]
    return [f"{mod}.{dotted(a.name)}" for a in node.names]


def _construct(name: str) -> tuple[str, str] | None:
    for prefix, what, hint in _CONSTRUCTS:
        if name == prefix or name.startswith(prefix + "."):
            return what, hint
    return None


class Estimator(Rule):
    """Report every ``tf.estimator`` / ``tf.contrib.learn`` construct with its TF2 replacement.

    What it does:
        Reports (without rewriting) each statement that uses ``tf.estimator``
        (``Estimator``, canned estimators, ``RunConfig``, ``TrainSpec``/``EvalSpec``,
        ``train_and_evaluate``, ``EstimatorSpec``, exporters), ``tf.contrib.learn``
        (``Experiment``, ``learn_runner.run``, ``RunConfig``) or the standalone
        ``tensorflow_estimator`` package (imports included: they fail on TF 2.21),
        once per statement and once per construct per function (a model_fn
        testing ``ModeKeys`` ten times gets one diagnostic), naming the
        replacement: a custom training loop under
        ``tf.distribute.ParameterServerStrategy`` or
        ``tf.distribute.MultiWorkerMirroredStrategy`` with the cluster read by
        ``tf.distribute.cluster_resolver.TFConfigClusterResolver``.

    Why:
        ``tf.estimator`` was removed in TF 2.16 (also from ``tf.compat.v1``) and
        ``tf.contrib`` in TF 2.0: such programs do not import on TF 2.21.
        tf_upgrade_v2 says nothing about them.

    Example:
        ``config = tf.estimator.RunConfig()`` is reported with "resolver =
        tf.distribute.cluster_resolver.TFConfigClusterResolver() gives the
        cluster and role ...".

    Fix safety:
        Nothing is rewritten: an Estimator's model_fn, hooks and input_fn
        contract has no mechanical TF2 translation.
    """

    code = "TFM401"
    name = "estimator"
    triggers = ("estimator", "contrib.learn", "learn_runner", "Experiment")

    VALID = (
        Valid(
            """
            import tensorflow as tf

            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
            estimator = make_model()  # a local name, not tf.estimator
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            def model_fn(features, labels, mode):
                logits = tf.layers.dense(features["x"], 10)
                if mode == tf.estimator.ModeKeys.PREDICT:
                    return tf.estimator.EstimatorSpec(mode, predictions=logits)
                loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
                train_op = tf.train.AdamOptimizer().minimize(loss, tf.train.get_global_step())
                return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

            config = tf.estimator.RunConfig(model_dir="/tmp/m", save_checkpoints_steps=100)
            est = tf.estimator.Estimator(model_fn=model_fn, config=config)
            train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=1000)
            eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn)
            tf.estimator.train_and_evaluate(est, train_spec, eval_spec)
            """,
            None,
            diagnostics=("TFM401",) * 7,
        ),
        Invalid(
            """
            import tensorflow as tf

            def head(logits, mode):
                training = mode == tf.estimator.ModeKeys.TRAIN
                if mode != tf.estimator.ModeKeys.PREDICT:
                    logits = tf.identity(logits)
                return logits, mode == tf.estimator.ModeKeys.EVAL

            def serving_fn(features, mode):
                if mode == tf.estimator.ModeKeys.PREDICT:
                    return tf.estimator.EstimatorSpec(mode, predictions=features)
                return tf.estimator.EstimatorSpec(mode, predictions={})
            """,
            None,
            diagnostics=("TFM401",) * 3,
        ),
        Invalid(
            """
            import tensorflow as tf
            from tensorflow.contrib.learn.python.learn import learn_runner

            def experiment_fn(run_config, hparams):
                estimator = tf.contrib.learn.Estimator(model_fn=model_fn, config=run_config)
                return tf.contrib.learn.Experiment(estimator, train_input_fn=train_fn, eval_input_fn=eval_fn)

            learn_runner.run(experiment_fn, run_config=tf.contrib.learn.RunConfig(model_dir="/tmp/m"))
            """,
            None,
            diagnostics=("TFM401",) * 4,
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf1
            import tensorflow_estimator as tf_estimator

            est = tf_estimator.estimator.DNNClassifier(hidden_units=[10], feature_columns=cols)
            """,
            None,
            diagnostics=("TFM401",) * 2,
        ),
        Invalid(
            """
            from tensorflow.estimator import RunConfig, Estimator
            import tensorflow as tf

            class MyEstimator(tf.estimator.Estimator):
                pass

            est = Estimator(model_fn, config=RunConfig())
            """,
            None,
            diagnostics=("TFM401",) * 3,
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        # the standalone package: `import tensorflow_estimator as tfe`,
        # `from tensorflow_estimator import estimator as tf_estimator`
        self.extra: dict[str, str] = {}
        for stmt in module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for a in small.names:
                        name = dotted(a.name) or ""
                        if name.split(".")[0] == "tensorflow_estimator":
                            local = dotted(a.asname.name) if a.asname else name.split(".")[0]
                            self.extra[local] = name if a.asname else "tensorflow_estimator"
                elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                    mod = dotted(small.module) or ""
                    if mod.split(".")[0] == "tensorflow_estimator" and not isinstance(small.names, cst.ImportStar):
                        for a in small.names:
                            local = dotted(a.asname.name) if a.asname else dotted(a.name)
                            if local:
                                self.extra[local] = f"{mod}.{dotted(a.name)}"
        self._statement: cst.CSTNode | None = None
        self._reported: set[int] = set()
        self._functions: list[cst.FunctionDef] = []
        self._constructs: set[tuple[int, str]] = set()  # (id(function), what) reported
        self._call_of: dict[int, cst.Call] = {}
        self._where = Locatable(self.ctx.source)
        self._pending: list[tuple[cst.CSTNode, int, tuple, str, str]] = []
        out = transform(module, self)
        for node, index, wider, what, hint in self._pending:
            self.report(
                self._where.pick(node, index, *wider),
                f"{what}; no TF 2.21 equivalent to rewrite to",
                hint=hint,
                reference=REFERENCE,
                fixed=False,
            )
        return out

    def _name(self, node: cst.CSTNode) -> str | None:
        q = self.qualname(node)
        if q is not None:
            return q
        d = dotted(node)
        if d is None or not self.extra:
            return None
        head, _, tail = d.partition(".")
        base = self.extra.get(head)
        if base is None:
            return None
        full = base + ("." + tail if tail else "")
        # tensorflow_estimator[.python.estimator...].estimator.X -> estimator.X
        parts = full.split(".")
        if "estimator" in parts[1:]:
            i = parts.index("estimator", 1)
            return ".".join(parts[i:])
        return "estimator"

    # one diagnostic per statement: remember the statement being visited
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement = node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        self._statement = None
        return updated_node

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._statement = node  # the bases are one site

    # one diagnostic per construct per function (module level: one per module)
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node, updated_node):
        self._functions.pop()
        return updated_node

    def visit_Call(self, node: cst.Call) -> None:
        self._call_of[id(node.func)] = node

    def visit_If(self, node: cst.If) -> None:
        self._statement = node.test

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._statement = None

    def visit_Import(self, node: cst.Import) -> bool:
        self._check_import(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._check_import(node)
        return False

    def _check_import(self, node: cst.Import | cst.ImportFrom) -> None:
        for path in imported_modules(node):
            removed = path.startswith(("tensorflow.contrib.learn", "tensorflow.contrib.estimator"))
            if removed or path.split(".")[0] == "tensorflow_estimator" or canonical(path) == "estimator" or (
                canonical(path) or ""
            ).startswith("estimator."):
                self.report(
                    node,
                    f"`{path}` does not exist in TF 2.21 (tf.estimator was removed in 2.16,"
                    " tf.contrib in 2.0): this import fails",
                    hint=_STRATEGY_HINT,
                    reference=REFERENCE,
                    fixed=False,
                )
                return

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return not self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> bool:
        name = self._name(node)
        if name is None:
            return False
        found = _construct(name)
        if found is None:
            return False
        index = self._where.visit(node)
        site = self._statement or node
        what, hint = found
        function = self._functions[-1] if self._functions else None
        if id(site) in self._reported or (id(function), what) in self._constructs:
            return True
        self._reported.add(id(site))
        self._constructs.add((id(function), what))
        self._pending.append((node, index, (self._call_of.get(id(node)), self._statement, function), what, hint))
        return True
