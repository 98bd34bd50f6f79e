"""TFM901 legacy-distributed-leftover: report every graph-mode distributed construct still present."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid, first_line_code
from migrate.codemod.fastcst import fast_visit
from migrate.codemod.py2 import PY2_ONLY_BUILTINS, PY2_ONLY_METHODS
from migrate.codemod.rules.tfm101_tensorflow_import import load_tf_api, pre1_successor

_REF = "legacy_reference/"


@dataclass(frozen=True)
class _Leftover:
    what: str
    hint: str
    reference: str


_SERVER = _Leftover(
    "`tf.train.Server` (a TF1 gRPC server per task)",
    "run tf.distribute.Server(cluster, job_name, task_index).join() only on ps/worker tasks of a"
    " ParameterServerStrategy cluster (TF_CONFIG + TFConfigClusterResolver); the chief builds the"
    " strategy and ClusterCoordinator. MultiWorkerMirroredStrategy starts its own server",
    _REF + "async_ps.py",
)
_DEVICE_SETTER = _Leftover(
    "`tf.train.replica_device_setter` (variables placed on ps tasks by a device function)",
    "create the variables under strategy.scope() of tf.distribute.ParameterServerStrategy: it"
    " places them on the ps tasks (shard with tf.distribute.experimental.partitioners)",
    _REF + "async_ps.py",
)
_SYNC = _Leftover(
    "`tf.train.SyncReplicasOptimizer` (synchronous gradient aggregation on the ps)",
    "use tf.distribute.MultiWorkerMirroredStrategy with a plain tf.keras optimizer; strategies SUM"
    " gradients where SyncReplicas averaged them: scale each replica's loss by 1/num_replicas",
    _REF + "sync_replicas.py",
)
_SESSION_LOOP = _Leftover(
    "a TF1 training-session wrapper (MonitoredTrainingSession/Supervisor/MonitoredSession)",
    "write a tf.function train step called in a Python loop; chief recovery: tf.train.Checkpoint +"
    " tf.train.CheckpointManager (restore latest at start, save every N steps); summaries with"
    " tf.summary.create_file_writer",
    _REF + "chief_recovery.py",
)
_HOOK = _Leftover(
    "a SessionRunHook",
    "hooks do not exist in TF2: StopAtStepHook -> the loop bound; CheckpointSaverHook ->"
    " CheckpointManager.save() every N steps; LoggingTensorHook -> log in the loop;"
    " SummarySaverHook -> tf.summary.scalar under a writer",
    _REF + "chief_recovery.py",
)
_SESSION = _Leftover(
    "`tf.Session` (graph-mode execution)",
    "run eagerly: call the tf.function train step directly instead of session.run(fetches)",
    _REF + "async_ps.py",
)
_PLACEHOLDER = _Leftover(
    "`tf.placeholder` (graph input fed through feed_dict)",
    "pass the batch as tensor arguments of the tf.function step (tf.data.Dataset for input)",
    _REF + "async_ps.py",
)
_DEVICE_FN = _Leftover(
    "`tf.device(<function>)` (TF2 tf.device accepts only device strings)",
    "drop the device function: variable placement comes from strategy.scope()",
    _REF + "async_ps.py",
)
_TOWERS = _Leftover(
    "in-graph replication: one tower per device in a loop",
    "use tf.distribute.MirroredStrategy: build the model once under strategy.scope() and run the"
    " step with strategy.run(); replace average_gradients by the strategy's all-reduce",
    _REF + "in_graph_towers.py",
)
_GRAPH = _Leftover(
    "graph-collection access (`tf.get_default_graph`)",
    "TF2 is eager: keep Python references to variables/ops instead of graph collections",
    _REF + "async_ps.py",
)
_INIT = _Leftover(
    "an explicit variable-initializer op",
    "TF2 variables are initialised when created: drop the init op (restore with"
    " tf.train.Checkpoint instead of a Scaffold/init_fn)",
    _REF + "chief_recovery.py",
)
_DEVICE_FILTERS = _Leftover(
    "`ConfigProto(device_filters=...)` (keeps TF1 sessions from waiting on other workers)",
    "ParameterServerStrategy/ClusterCoordinator set the device filters themselves: drop the"
    " ConfigProto",
    _REF + "async_ps.py",
)

_NAMES: dict[str, _Leftover] = {
    "train.Server": _SERVER,
    "train.replica_device_setter": _DEVICE_SETTER,
    "train.SyncReplicasOptimizer": _SYNC,
    "train.MonitoredTrainingSession": _SESSION_LOOP,
    "train.MonitoredSession": _SESSION_LOOP,
    "train.SingularMonitoredSession": _SESSION_LOOP,
    "train.Supervisor": _SESSION_LOOP,
    "train.SessionManager": _SESSION_LOOP,
    "train.ChiefSessionCreator": _SESSION_LOOP,
    "train.WorkerSessionCreator": _SESSION_LOOP,
    "train.Scaffold": _SESSION_LOOP,
    "Session": _SESSION,
    "InteractiveSession": _SESSION,
    "placeholder": _PLACEHOLDER,
    "placeholder_with_default": _PLACEHOLDER,
    "sparse_placeholder": _PLACEHOLDER,
    "get_default_graph": _GRAPH,
    "global_variables_initializer": _INIT,
    "initialize_all_variables": _INIT,
    "local_variables_initializer": _INIT,
}


def _leftover(name: str | None) -> _Leftover | None:
    if name is None:
        return None
    hit = _NAMES.get(name)
    if hit is not None:
        return hit
    if name.startswith("train.") and name.endswith(("Hook", "SessionRunHook")) and name.count(".") == 1:
        return _HOOK
    return None


# Namespaces other rules report (TFM101: tensorflow.examples; TFM401:
# estimator; TFM402: contrib); tf.keras is Keras 3 and not in the API tables.
_REPORTED_ELSEWHERE = ("contrib", "estimator", "examples", "keras")


@functools.cache
def _removed_name_parts() -> tuple[str, ...]:
    """Last parts of the names TF removed before 1.0 (``scalar_summary``): the rule's extra triggers."""
    api = load_tf_api()
    return tuple(sorted({name.rpartition(".")[2] for name, change in api.pre1.items() if change.removed}))


# --------------------------------------------------------------------------- locating

def first_code_line(node: cst.CSTNode) -> str:
    """The node's first line of code, stripped (comment lines skipped): the
    text the engine searches the input for to locate a report."""
    text, _ = first_line_code(node)
    lines = (line.strip() for line in text.splitlines())
    return next((line for line in lines if line and not line.startswith("#")), "")


class Locatable:
    """Chooses, among nodes that stand for one finding (the construct, its
    call, its statement), the most precise one the engine will locate on the
    right line.

    The engine locates a report by searching the input for the first line of
    the reported node's code, the k-th report of a text at its k-th line. That
    goes wrong when the text also occurs where nothing is reported: in a
    comment (``# Flags for defining the tf.train.Server``), inside a longer
    name (``tf.estimator.Estimator`` in ``tf.estimator.EstimatorSpec``), or at
    uses a rule reports once for several. A construct is reported as itself
    when its text occurs on one line only, or on exactly as many lines as the
    rule visits constructs with that text, reported in order; otherwise as the
    first wider node (call, statement) whose text occurs on one line only, and
    as itself when there is none (the engine's k-th-occurrence guess).

    Rules ``visit`` every construct they may report, in source order, and
    ``pick`` once all are visited (reports are made in the same order)."""

    def __init__(self, source: str):
        # the input the engine searches (its spelling before TFM101, as the snippets)
        self.source = source
        self._lines: list[str] | None = None
        self._snippets: dict[int, str] = {}
        self._visited: dict[str, int] = {}
        self._reported: dict[str, int] = {}

    def snippet(self, node: cst.CSTNode) -> str:
        text = self._snippets.get(id(node))
        if text is None:
            # the input's spelling before TFM101 (the engine tries both)
            text = self._snippets[id(node)] = first_code_line(node).replace("tf.compat.v1.", "tf.")
        return text

    def lines_with(self, snippet: str) -> int:
        if self._lines is None:
            self._lines = self.source.replace("tf.compat.v1.", "tf.").splitlines()
        return sum(snippet in line for line in self._lines) if snippet else 0

    def visit(self, node: cst.CSTNode) -> int:
        """Record a construct the rule may report; its index among those with its text."""
        text = self.snippet(node)
        k = self._visited.get(text, 0)
        self._visited[text] = k + 1
        return k

    def pick(self, node: cst.CSTNode, index: int, *wider: cst.CSTNode | None) -> cst.CSTNode:
        text = self.snippet(node)
        lines = self.lines_with(text)
        if lines == 1 or (lines == self._visited.get(text, 0) and self._reported.get(text, 0) == index):
            chosen = node
        else:
            others = (w for w in wider if w is not None)
            chosen = next((w for w in others if self.lines_with(self.snippet(w)) == 1), node)
        text = self.snippet(chosen)
        self._reported[text] = self._reported.get(text, 0) + 1
        return chosen


def _is_device_string(node: cst.BaseExpression) -> bool:
    """Literal strings, f-strings, ``"..." % x``, ``"...".format()``, ``None``."""
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Modulo, cst.Add)):
        return _is_device_string(node.left)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
        return _is_device_string(node.func.value)
    return isinstance(node, cst.Name) and node.value == "None"


def _string_text(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.SimpleString):
        return node.value
    if isinstance(node, cst.FormattedString):
        return "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
    if isinstance(node, cst.BinaryOperation):
        return _string_text(node.left)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _string_text(node.func.value)
    return ""


class LegacyDistributedLeftover(Rule):
    """Report every TF1 between-graph/graph-mode distributed construct the rules left behind.

    What it does:
        Runs last. Each statement that still uses ``tf.train.Server``,
        ``replica_device_setter``, ``SyncReplicasOptimizer``,
        ``MonitoredTrainingSession``/``Supervisor``/``MonitoredSession``, a
        ``tf.train.*Hook``, ``tf.Session``, ``tf.placeholder``,
        ``tf.device(<function>)``, per-device tower loops, ``get_default_graph``,
        an initializer op or ``ConfigProto(device_filters=...)`` gets one
        diagnostic (manual work) with what to do and the reference program
        showing the migration. So does every TensorFlow name TF 2.21 does
        not have: one removed before TF 1.0 (``tf.scalar_summary``, with
        its successor) or any other unknown name of a known module
        (``tf.train.RMSProp``), and every name only Python 2 has in a file
        that parses as Python 3 (``xrange``, ``unicode``, ``raw_input`` ...
        that nothing binds, ``d.iteritems()``, ``d.has_key(k)``; then also
        ``it.next()``). Only code counts: a diagnostic is located on the
        construct, its call or its statement, whichever text does not also
        occur in a comment, a string or a longer name.

    Why:
        A migration must never silently leave a graph-mode distributed construct
        in a program that claims to be TF2: those hang or crash on TF 2.21
        (``tf.device`` rejects functions; sessions wait for every task). Names
        that no longer exist fail only when their line runs, often inside a
        training step after the cluster is up.

    Example:
        ``sv = tf.compat.v1.train.Supervisor(is_chief=is_chief, logdir=d)`` is
        reported with "write a tf.function train step called in a Python loop;
        chief recovery: tf.train.Checkpoint + tf.train.CheckpointManager ..."
        and legacy_reference/chief_recovery.py. ``for i in xrange(n):`` is
        reported with "the file is Python 2 code: convert it (2to3/fissix) or
        replace xrange -> range".

    Fix safety:
        Reports only; nothing is rewritten.
    """

    code = "TFM901"
    name = "legacy-distributed-leftover"
    triggers = (
        "Server", "replica_device_setter", "SyncReplicas", "Monitored", "Supervisor", "Hook",
        "Session", "placeholder", "device", "get_default_graph", "initializer", "initialize_",
        "Scaffold", "SessionCreator", *PY2_ONLY_BUILTINS, *PY2_ONLY_METHODS,
    )

    @classmethod
    def applies_to(cls, source: str) -> bool:
        return super().applies_to(source) or any(name in source for name in _removed_name_parts())

    VALID = (
        Valid(
            """
            import tensorflow as tf

            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            if resolver.task_type in ("ps", "worker"):
                tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                     task_index=resolver.task_id, protocol="grpc").join()
            strategy = tf.distribute.ParameterServerStrategy(resolver)
            with tf.device("/job:worker/task:%d" % resolver.task_id):
                with strategy.scope():
                    w = tf.Variable(tf.zeros([784, 10]))
            init = tf.keras.initializers.GlorotUniform()
            """
        ),
        Valid(
            """
            import tensorflow as tf
            from six.moves import xrange

            # Flags for defining the tf.train.Server, kept from the TF1 version
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            for step in xrange(10):
                print(tf.__version__, tf.float32.name, tf.compat.v1.summary.FileWriter)
            try:
                unicode
            except NameError:
                unicode = str
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            tf.scalar_summary("loss", loss)
            opt = tf.train.RMSProp(0.01)
            step = tf.compat.v1.train.get_or_create_global_step()
            """,
            None,
            diagnostics=("TFM901",) * 2,
        ),
        Invalid(
            """
            import tensorflow as tf

            batches = iter(dataset)
            for step in xrange(100):
                images, labels = batches.next()
            for name, value in metrics.iteritems():
                tf.print(name, value)
            """,
            None,
            diagnostics=("TFM901",) * 3,
        ),
        Invalid(
            """
            import tensorflow as tf

            # Flags for defining the tf.train.Server
            server = tf.compat.v1.train.Server(cluster, job_name="ps", task_index=0)
            """,
            None,
            diagnostics=("TFM901",),
        ),
        Invalid(
            """
            import tensorflow as tf

            server = tf.compat.v1.train.Server(cluster, job_name=job, task_index=task)
            with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(cluster=cluster)):
                x = tf.compat.v1.placeholder(tf.float32, [None, 784])
                opt = tf.compat.v1.train.SyncReplicasOptimizer(
                    tf.compat.v1.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2)
            hooks = [opt.make_session_run_hook(is_chief), tf.compat.v1.train.StopAtStepHook(last_step=100)]
            config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
            with tf.compat.v1.train.MonitoredTrainingSession(master=server.target, hooks=hooks) as sess:
                sess.run(train_op)
            """,
            None,
            diagnostics=("TFM901",) * 7,
        ),
        Invalid(
            """
            import tensorflow as tf

            setter = tf.compat.v1.train.replica_device_setter(ps_tasks=2)
            with tf.compat.v1.device(setter):
                w = tf.Variable(tf.zeros([10]))
            """,
            None,
            diagnostics=("TFM901",) * 2,
        ),
        Invalid(
            """
            from tensorflow.train import Supervisor, Server
            import tensorflow as tf1

            sv = Supervisor(is_chief=True, logdir="/tmp/train", init_op=tf1.global_variables_initializer())
            sess = tf1.Session(); graph = tf1.get_default_graph()
            """,
            None,
            diagnostics=("TFM901",) * 2,
        ),
        Invalid(
            """
            import tensorflow as tf

            tower_grads = []
            for i in range(num_gpus):
                with tf.device("/gpu:%d" % i):
                    with tf.name_scope("tower_%d" % i) as scope:
                        loss = tower_loss(scope)
                        tower_grads.append(opt.compute_gradients(loss))

            class StepLogger(tf.train.SessionRunHook):
                def before_run(self, run_context):
                    return None
            """,
            None,
            diagnostics=("TFM901",) * 2,
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        if not self.ctx.names.any:
            return module
        self.api = load_tf_api()
        self._where = Locatable(self.ctx.source)
        # reports, made once every construct is visited: (node, its index, wider nodes, message, kw)
        self._pending: list[tuple[cst.CSTNode, int, tuple, str, dict]] = []
        self._sites: list[tuple[cst.CSTNode, list[tuple[cst.CSTNode, _Leftover]]]] = []
        self._loops = 0
        # names bound to device functions: `setter = tf.train.replica_device_setter(...)`, defs
        self._device_functions: set[str] = set()
        self._call_of: dict[int, cst.Call] = {}  # id(func) -> its call
        self._missing: set[tuple[int, str]] = set()  # (id(site), name) reported
        # Python 2 only names: (node, index, site, name) uses, names the module binds, `.next()` calls
        self._py2: list[tuple[cst.CSTNode, int, cst.CSTNode | None, str]] = []
        self._py2_next: list[tuple[cst.CSTNode, int, cst.CSTNode | None, str]] = []
        self._bound: set[str] = set()
        self._star_import = False
        self._not_reference: set[int] = set()
        fast_visit(module, self)
        self._report_python2()
        for node, index, wider, message, kw in self._pending:
            self.report(self._where.pick(node, index, *wider), message, **kw)
        return module  # reports only

    def _defer(self, node: cst.CSTNode, index: int, wider: tuple, message: str, **kw) -> None:
        self._pending.append((node, index, wider, message, kw))

    # ---------------------------------------------------------------- sites
    def _open(self, node: cst.CSTNode) -> None:
        self._sites.append((node, []))

    def _close(self) -> None:
        site, found = self._sites.pop()
        if not found:
            return
        first_node, index, first = found[0]
        whats = list(dict.fromkeys(f.what for _, _, f in found))
        self._defer(
            first_node,
            index,
            (self._call_of.get(id(first_node)), site),
            "legacy distributed construct left: " + "; ".join(whats),
            hint=first.hint,
            reference=first.reference,
            fixed=False,
        )

    def _add(self, node: cst.CSTNode, leftover: _Leftover) -> None:
        index = self._where.visit(node)
        if self._sites:
            self._sites[-1][1].append((node, index, leftover))
        else:
            self._open(node)
            self._sites[-1][1].append((node, index, leftover))
            self._close()

    def _site(self) -> cst.CSTNode | None:
        return self._sites[-1][0] if self._sites else None

    # ---------------------------------------------------------------- names that do not exist
    def _check_exists(self, node: cst.CSTNode, name: str) -> None:
        """Report a TensorFlow name TF 2.21 does not have: one TF removed before
        1.0 (its successor named), or any other unknown name under a known module."""
        if not name or name.split(".")[0] in _REPORTED_ELSEWHERE:
            return
        old = pre1_successor(name, self.api)
        if old is not None and self.api.pre1[old[0]].removed:
            change = self.api.pre1[old[0]]
            message = f"`tf.{old[0]}` was removed in TensorFlow 1.0: the code predates it"
            hint = f"use tf.compat.v1.{change.to}" + (
                f" (its parameters: {', '.join(change.new)})" if change.old else " (same arguments)"
            )
            key = old[0]
        elif not self.api.exists(name):
            message = f"`tf.{name}` does not exist in TensorFlow {self.api.tf_version}"
            hint = "spell an existing API: the TF 1.x name under tf.compat.v1, or its TF2 replacement"
            key = name
        else:
            return
        site = self._site()
        index = self._where.visit(node)
        if (id(site), key) in self._missing:
            return
        self._missing.add((id(site), key))
        self._defer(node, index, (self._call_of.get(id(node)), site), message, hint=hint, fixed=False)

    # ---------------------------------------------------------------- Python 2 only names
    def _bind(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self._bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._bound.add(item.name.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_reference.add(id(node.keyword))

    def _bind_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
            self._star_import = True
            return
        for alias in node.names:
            if alias.asname is not None:
                self._bind(alias.asname.name)
            else:
                head = alias.name
                while isinstance(head, cst.Attribute):
                    head = head.value
                self._bind(head)

    def _report_python2(self) -> None:
        uses = [u for u in self._py2 if u[3].startswith(".") or not (self._star_import or u[3] in self._bound)]
        if uses:
            uses += self._py2_next  # `.next()` is the iterator protocol of a Python 2 file
        by_site: dict[int, tuple[cst.CSTNode, int, cst.CSTNode | None, list[str]]] = {}
        for node, index, site, name in uses:
            entry = by_site.setdefault(id(site) if site is not None else id(node), (node, index, site, []))
            entry[3].append(name)
        for node, index, site, names in by_site.values():
            names = list(dict.fromkeys(names))
            shown = ", ".join(f"`{n}()`" if n.startswith(".") else f"`{n}`" for n in names)
            fixes = ", ".join(
                f"{n}() -> {PY2_ONLY_METHODS.get(n[1:], 'next(it)')}" if n.startswith(".")
                else f"{n} -> {PY2_ONLY_BUILTINS[n]}"
                for n in names
            )
            self._defer(
                node,
                index,
                (site,),
                f"{shown} exists only in Python 2: this Python 3 syntax fails on Python 3"
                " (NameError/AttributeError)",
                hint=f"the file is Python 2 code: convert it (2to3/fissix) or replace {fixes}",
                fixed=False,
            )

    def visit_SimpleStatementLine(self, node) -> None:
        self._open(node)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        self._close()
        return updated_node

    # compound statements: the header is one site, closed when the body starts
    def _open_header(self, node) -> None:
        self._open(node)

    def _body_starts(self, block) -> None:
        if self._sites and getattr(self._sites[-1][0], "body", None) is block:
            self._close()

    def visit_With(self, node) -> None:
        self._open_header(node)

    def visit_If(self, node) -> None:
        self._open_header(node)

    def visit_While(self, node) -> None:
        self._open_header(node)

    def visit_For(self, node) -> None:
        self._open_header(node)
        self._loops += 1
        self._bind(node.target)

    def leave_For(self, original_node, updated_node):
        self._loops -= 1
        return updated_node

    def visit_ClassDef(self, node) -> None:
        self._open_header(node)
        self._bind(node.name)

    def visit_FunctionDef(self, node) -> None:
        self._open_header(node)
        self._device_functions.add(node.name.value)
        self._bind(node.name)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.Lambda) or (
            isinstance(value, cst.Call) and self.qualname(value.func) == "train.replica_device_setter"
        ):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self._device_functions.add(t.target.value)

    def visit_IndentedBlock(self, node) -> None:
        self._body_starts(node)

    def visit_SimpleStatementSuite(self, node) -> None:
        self._body_starts(node)

    # ---------------------------------------------------------------- constructs
    def visit_Import(self, node) -> bool:
        self._bind_import(node)
        return False

    def visit_ImportFrom(self, node) -> bool:
        self._bind_import(node)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        q = self.qualname(node)
        if q is None:
            self._not_reference.add(id(node.attr))
            return True
        hit = _leftover(q)
        if hit is not None:
            self._add(node, hit)
        else:
            self._check_exists(node, q)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        q = self.qualname(node)
        hit = _leftover(q)
        if hit is not None:
            self._add(node, hit)
        elif q is not None:
            self._check_exists(node, q)
        elif node.value in PY2_ONLY_BUILTINS and id(node) not in self._not_reference:
            self._py2.append((node, self._where.visit(node), self._site(), node.value))

    def visit_Call(self, node: cst.Call) -> None:
        self._call_of[id(node.func)] = node
        func = node.func
        if isinstance(func, cst.Attribute) and self.qualname(func) is None:
            if func.attr.value in PY2_ONLY_METHODS:
                self._py2.append((node, self._where.visit(node), self._site(), "." + func.attr.value))
            elif func.attr.value == "next" and not node.args:
                self._py2_next.append((node, self._where.visit(node), self._site(), ".next"))
        q = self.qualname(node.func)
        if q == "device" and node.args:
            arg = node.args[0].value
            if _is_device_string(arg):
                text = _string_text(arg).lower()
                if self._loops and ("gpu" in text or "cpu" in text) and not isinstance(arg, cst.SimpleString):
                    self._add(node, _TOWERS)
            elif (
                isinstance(arg, cst.Lambda)
                or (isinstance(arg, cst.Call) and self.qualname(arg.func) == "train.replica_device_setter")
                or (isinstance(arg, cst.Name) and arg.value in self._device_functions)
            ):
                self._add(node, _DEVICE_FN)
        elif q == "ConfigProto" and any(
            a.keyword is not None and a.keyword.value == "device_filters" for a in node.args
        ):
            self._add(node, _DEVICE_FILTERS)
