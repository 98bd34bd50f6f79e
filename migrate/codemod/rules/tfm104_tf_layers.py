"""TFM104 tf-layers: TF1's functional layers -> TF1-equivalent functions defined in the module."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid, dedent
from migrate.codemod.fastcst import fast_visit, keep_code, transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.tfnames import dotted

# TF1 function (canonical name relative to its module) -> function of migrate/codemod/tf1_layers.py
_TF_LAYERS = {
    "dense": "tf1_dense",
    "conv2d": "tf1_conv2d",
    "max_pooling2d": "tf1_max_pooling2d",
    "average_pooling2d": "tf1_average_pooling2d",
    "flatten": "tf1_flatten",
    "dropout": "tf1_dropout",
    "batch_normalization": "tf1_batch_normalization",
}
_CONTRIB_LAYERS = {
    "fully_connected": "tf1_fully_connected",
    "conv2d": "tf1_contrib_conv2d",
    "convolution2d": "tf1_contrib_conv2d",
    "max_pool2d": "tf1_max_pool2d",
    "avg_pool2d": "tf1_avg_pool2d",
    "flatten": "tf1_contrib_flatten",
    "dropout": "tf1_contrib_dropout",
}
# canonical module -> its table; slim re-exports contrib.layers' functions
_MODULES = {
    "layers": _TF_LAYERS,
    "contrib.layers": _CONTRIB_LAYERS,
    "contrib.slim": _CONTRIB_LAYERS,
    "contrib.slim.layers": _CONTRIB_LAYERS,
}

# Parameters whose effect the functions do not reproduce: the call is left as
# it is unless the argument is absent or None.
_NOT_REPRODUCED = {
    "kernel_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "bias_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "weights_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "biases_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "activity_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "kernel_constraint": "TF1's optimizer projected the variable after each update",
    "bias_constraint": "TF1's optimizer projected the variable after each update",
    "beta_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "gamma_regularizer": "its penalty went to the REGULARIZATION_LOSSES collection",
    "beta_constraint": "TF1's optimizer projected the variable after each update",
    "gamma_constraint": "TF1's optimizer projected the variable after each update",
    "renorm_clipping": "batch renormalization is not reproduced",
    "virtual_batch_size": "ghost batches are not reproduced",
    "adjustment": "its random scale and offset are not reproduced",
    "normalizer_fn": "the normalizer (batch norm, usually) has variables and update ops of its own",
    "normalizer_params": "the normalizer (batch norm, usually) has variables and update ops of its own",
    "variables_collections": "the variables went to graph collections",
    "outputs_collections": "the outputs went to graph collections",
}
# initializers TF1 also accepted by Keras name, which the functions map to TF1's objects
_INITIALIZERS = ("kernel_initializer", "bias_initializer", "weights_initializer", "biases_initializer",
                 "beta_initializer", "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer")
_INITIALIZER_NAMES = ("zeros", "glorot_uniform")
# the channels-last spellings each data_format parameter may take (None: the argument may be None)
_CHANNELS_LAST = {"layers": ("channels_last",), "conv": (None, "NHWC"), "pool": ("NHWC",)}


@dataclass(frozen=True)
class _Shim:
    node: cst.FunctionDef
    params: tuple[str, ...]
    needs: tuple[str, ...]  # other functions of tf1_layers.py it calls


@functools.cache
def shim_functions() -> dict[str, _Shim]:
    """The functions of ``migrate/codemod/tf1_layers.py``, read as text (never imported:
    the codemod runs without TensorFlow)."""
    text = resources.files("migrate.codemod").joinpath("tf1_layers.py").read_text(encoding="utf-8")
    functions = {st.name.value: st for st in cst.parse_module(text).body if isinstance(st, cst.FunctionDef)}
    out = {}
    for name, node in functions.items():
        used = C.names_used(node.body)
        out[name] = _Shim(
            node=node,
            params=tuple(p.name.value for p in node.params.params),
            needs=tuple(sorted(n for n in used if n in functions and n != name)),
        )
    return out


def _closure(names: list[str], shims: dict[str, _Shim]) -> list[str]:
    """``names`` and every function they call, in tf1_layers.py's order."""
    wanted: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in wanted:
            wanted.add(name)
            stack.extend(shims[name].needs)
    return [n for n in shims if n in wanted]


def copied_function(name: str, alias: str = "tf", rename: dict[str, str] | None = None) -> cst.FunctionDef:
    """Function ``name`` of tf1_layers.py as the rule copies it: TensorFlow
    spelled ``alias``, the functions it calls renamed by ``rename``, two blank
    lines and its comment before it."""
    # (names kept as they are need no respelling pass; nodes are immutable, so a copy is made once)
    changed = tuple(sorted((old, new) for old, new in (rename or {}).items() if old != new))
    return _copied_function(name, alias, changed)


@functools.lru_cache(maxsize=256)
def _copied_function(name: str, alias: str, rename: tuple[tuple[str, str], ...]) -> cst.FunctionDef:
    names = dict(rename)
    if alias != "tf":
        names["tf"] = alias
    node = shim_functions()[name].node
    node = node.visit(_Respell(names)) if names else node
    comments = C.strip_blank_lines(node.leading_lines)
    return keep_code(node.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *comments]))


def _fixture(before: str, functions: tuple[str, ...], after: str, alias: str = "tf",
             rename: dict[str, str] | None = None) -> str:
    """Expected output of a fixture: ``before`` (its import block), the copied
    ``functions`` and the helpers they call, then ``after``."""
    code = "".join(C.code_of(copied_function(n, alias, rename)) for n in _closure(list(functions), shim_functions()))
    return dedent(before) + code + "\n\n" + dedent(after)


class _Respell(cst.CSTTransformer):
    """``tf`` -> the module's TensorFlow alias; shim names -> their fresh names."""

    def __init__(self, names: dict[str, str]):
        super().__init__()
        self.names = names

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.names.get(updated_node.value)
        return updated_node.with_changes(value=new) if new else updated_node


class _References(cst.CSTVisitor):
    """How often each of ``names`` is read (import statements and the
    targets of the given alias assignments excluded)."""

    def __init__(self, names: set[str], skip: set[int]):
        super().__init__()
        self.names = names
        self.skip = skip
        self.count = dict.fromkeys(names, 0)

    def visit_Import(self, node) -> bool:
        return False

    def visit_ImportFrom(self, node) -> bool:
        return False

    def visit_SimpleStatementLine(self, node) -> bool:
        return id(node) not in self.skip

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.count[node.value] += 1


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _imports_only(statement: cst.CSTNode) -> bool:
    """An import line, or a try/if block of import lines (``try: import x``)."""
    if isinstance(statement, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom, cst.Pass)) for s in statement.body) and any(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)
    if isinstance(statement, (cst.Try, cst.If)):
        blocks = [statement.body]
        if isinstance(statement, cst.Try):
            blocks += [h.body for h in statement.handlers]
        elif statement.orelse is not None:
            blocks.append(statement.orelse.body if isinstance(statement.orelse, cst.Else) else
                          cst.IndentedBlock(body=[statement.orelse]))
        statements = [st for block in blocks for st in C.body_of(block)]
        return any(_imports_only(st) for st in statements) and all(
            _imports_only(st) or (isinstance(st, cst.SimpleStatementLine)
                                  and all(isinstance(s, cst.Pass) for s in st.body)) for st in statements)
    return False


def _binds(statement: cst.CSTNode, name: str) -> bool:
    """Whether a top-level statement imports ``name`` at module level (also
    inside try/if/with blocks, not in a function or class)."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return False
    if isinstance(statement, cst.SimpleStatementLine):
        for s in statement.body:
            if isinstance(s, cst.Import):
                for a in s.names:
                    local = dotted(a.asname.name) if a.asname else (dotted(a.name) or "").partition(".")[0]
                    if local == name:
                        return True
            elif isinstance(s, cst.ImportFrom) and not isinstance(s.names, cst.ImportStar) and any(
                    (dotted(a.asname.name) if a.asname else dotted(a.name)) == name for a in s.names):
                return True
        return False
    return any(_binds(child, name) for child in C.children(statement)
               if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.ExceptHandler, cst.Else, cst.Finally,
                                     cst.If)))


class TfLayers(Rule):
    """Replace TF1's functional layers by TF1-equivalent functions defined in the module.

    What it does:
        Calls of ``tf.layers.dense/conv2d/max_pooling2d/average_pooling2d/
        flatten/dropout/batch_normalization`` (any spelling: ``tf.compat.v1.layers``, ``from
        tensorflow.compat.v1 import layers``) and of ``tf.contrib.layers`` /
        slim's ``fully_connected/conv2d/max_pool2d/avg_pool2d/flatten/dropout``
        (``slim = tf.contrib.slim``, ``import tensorflow.contrib.slim as
        slim``, ``from tensorflow.contrib.layers import fully_connected``)
        become calls of ``tf1_dense``, ``tf1_conv2d`` ... ``tf1_fully_connected``,
        ``tf1_contrib_conv2d`` ..., with the same arguments. Those functions
        (``migrate/codemod/tf1_layers.py``) are copied into the module after its imports,
        once each and only the ones it uses, spelled with the module's
        TensorFlow alias (a fresh name where the module already binds one).
        An import or ``slim = tf.contrib.slim`` alias left unused is removed.

    Why:
        Keras 3, the TF 2.21 default, removed ``tf.compat.v1.layers``
        (``'dense' is not available with Keras 3``) and TF 2.0 removed
        ``tf.contrib``: such models do not build. The copied functions are
        plain ``variable_scope`` + ``get_variable`` code, which TFM301 builds
        once under the strategy with ``make_template`` and reuses at every step,
        as the TF1 graph did.

    Example:
        ``h = tf.layers.dense(x, 128, activation=tf.nn.relu)`` becomes
        ``h = tf1_dense(x, 128, activation=tf.nn.relu)``, with ``def
        tf1_dense(...)`` after the imports.

    Fix safety:
        Safe: each function takes TF1's parameters in TF1's order with TF1's
        defaults (contrib: ReLU activation, ``'SAME'`` convolutions, pooling
        stride 2 ``'VALID'``, ``rate = 1 - keep_prob`` dropout while
        ``is_training``), creates variables with TF1's names (``dense/kernel``,
        ``dense_1/bias``, ``conv2d/kernel``, ``fully_connected/weights``,
        ``Conv/biases``) and default initializers (glorot uniform, zeros) and
        computes with the ops TF1's layer used (matmul or tensordot, bias_add,
        ``tf.nn.convolution``, max/avg pooling, ``tf.nn.dropout``). What it
        cannot reproduce leaves the call as it is, with a located reason:
        regularizers (TF1 filled the REGULARIZATION_LOSSES collection),
        constraints, channels-first data, normalizer functions, graph
        collections, a string initializer other than ``'zeros'`` /
        ``'glorot_uniform'``, ``*args``/``**kwargs``, and every contrib/slim
        call of a module that uses ``arg_scope`` (which changes their defaults
        where the call does not show it). ``slim.get_model_variables()`` no
        longer sees the variables (they are plain ``get_variable`` ones), and
        dropout draws its masks with TF1's op but, where only a graph-level
        seed is set, not the same random stream as TF1's layer did (op seeds
        follow the graph's op count). ``batch_normalization`` keeps TF1's
        fused kernel for 4-D inputs, its moving-average arithmetic (bit for bit)
        and the ``training`` switch; its updates, which TF1 left in UPDATE_OPS
        for the train op to depend on, run with the TF2 step, so a module with a
        ``training`` that may be true and no read of ``tf.GraphKeys.UPDATE_OPS``
        (whose averages never moved) is declined, as are renorm, ghost batches
        and axes other than the last. Layer classes (``tf.layers.Dense``),
        ``tf.contrib.layers.batch_norm`` and other layers are not handled
        (TFM101/TFM402 report them; TFM301 then leaves the training as TF1,
        naming the layer).
    """

    code = "TFM104"
    name = "tf-layers"
    triggers = ("layers", "slim")

    VALID = (
        Valid(
            """
            import tensorflow as tf

            h = tf.keras.layers.Dense(10)(x)
            w = tf.compat.v1.get_variable("w", [3, 1])
            """
        ),
        Valid(
            """
            import tensorflow as tf

            def dense(x, units):
                return x

            h = dense(x, 10)
            cell = tf.compat.v1.layers.Dense(10)
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            images = tf.placeholder(tf.float32, [None, 28, 28, 1])
            features = tf.layers.flatten(images)
            """,
            """
            import tensorflow as tf


            # tf.layers.flatten of TF 1.x (Keras 3 removed tf.compat.v1.layers): [batch, -1],
            # keeping as much static shape as TF1 kept.
            def tf1_flatten(inputs, name=None, data_format="channels_last"):
                if data_format != "channels_last":
                    raise NotImplementedError("tf1_flatten: only channels_last data is reproduced")
                with tf.compat.v1.variable_scope(name, default_name="flatten"):
                    inputs = tf.convert_to_tensor(inputs)
                    shape = inputs.shape.as_list()
                    if len(shape) == 1:
                        return tf.expand_dims(inputs, axis=1)
                    if None not in shape[1:]:
                        size = 1
                        for dim in shape[1:]:
                            size *= dim
                        return tf.reshape(inputs, [-1, size])
                    if shape[0] is not None:
                        return tf.reshape(inputs, [shape[0], -1])
                    return tf.reshape(inputs, [tf.shape(inputs)[0], -1])


            images = tf.placeholder(tf.float32, [None, 28, 28, 1])
            features = tf1_flatten(images)
            """,
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            tf.disable_v2_behavior()

            x = tf.placeholder(tf.float32, [None, 784])
            hidden = tf.layers.dense(x, 128, activation=tf.nn.relu)
            hidden = tf.layers.dropout(hidden, rate=0.4, training=True)
            logits = tf.compat.v1.layers.dense(hidden, 10, name="logits")
            """,
            _fixture(
                """
                import tensorflow.compat.v1 as tf
                """,
                ("tf1_dense", "tf1_dropout"),
                """
                tf.disable_v2_behavior()

                x = tf.placeholder(tf.float32, [None, 784])
                hidden = tf1_dense(x, 128, activation=tf.nn.relu)
                hidden = tf1_dropout(hidden, rate=0.4, training=True)
                logits = tf1_dense(hidden, 10, name="logits")
                """,
            ),
        ),
        Invalid(
            """
            import numpy as np
            import tensorflow as tf
            from tensorflow.compat.v1 import layers

            FLAGS = None
            net = layers.conv2d(images, 32, 5, padding="same", activation=tf.nn.relu)
            net = layers.max_pooling2d(net, pool_size=2, strides=2)
            net = layers.average_pooling2d(net, 2, 2)
            """,
            _fixture(
                """
                import numpy as np
                import tensorflow as tf
                """,
                ("tf1_conv2d", "tf1_max_pooling2d", "tf1_average_pooling2d"),
                """
                FLAGS = None
                net = tf1_conv2d(images, 32, 5, padding="same", activation=tf.nn.relu)
                net = tf1_max_pooling2d(net, pool_size=2, strides=2)
                net = tf1_average_pooling2d(net, 2, 2)
                """,
            ),
        ),
        Invalid(
            """
            import tensorflow as tf
            slim = tf.contrib.slim

            net = slim.conv2d(images, 32, [3, 3], scope="conv1")
            net = slim.max_pool2d(net, [2, 2], scope="pool1")
            net = slim.flatten(net)
            net = slim.dropout(net, 0.8, is_training=is_training)
            logits = slim.fully_connected(net, 10, activation_fn=None, scope="logits")
            """,
            _fixture(
                """
                import tensorflow as tf
                """,
                ("tf1_contrib_conv2d", "tf1_max_pool2d", "tf1_contrib_flatten", "tf1_contrib_dropout",
                 "tf1_fully_connected"),
                """
                net = tf1_contrib_conv2d(images, 32, [3, 3], scope="conv1")
                net = tf1_max_pool2d(net, [2, 2], scope="pool1")
                net = tf1_contrib_flatten(net)
                net = tf1_contrib_dropout(net, 0.8, is_training=is_training)
                logits = tf1_fully_connected(net, 10, activation_fn=None, scope="logits")
                """,
            ),
        ),
        Invalid(
            # the user's own conv2d stays; their tf1_pair makes the copied one tf1_pair_2;
            # slim is still used (batch_norm): its import stays, for TFM402 to report
            """
            import tensorflow as tf
            import tensorflow.contrib.slim as slim

            def conv2d(x, w):
                return tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")

            def tf1_pair(a, b):
                return a, b

            net = slim.avg_pool2d(conv2d(images, w), 2, stride=1)
            net = slim.batch_norm(net)
            """,
            _fixture(
                """
                import tensorflow as tf
                import tensorflow.contrib.slim as slim
                """,
                ("tf1_avg_pool2d",),
                """
                def conv2d(x, w):
                    return tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")

                def tf1_pair(a, b):
                    return a, b

                net = tf1_avg_pool2d(conv2d(images, w), 2, stride=1)
                net = slim.batch_norm(net)
                """,
                rename={"tf1_pair": "tf1_pair_2", "tf1_avg_pool2d": "tf1_avg_pool2d"},
            ),
        ),
        Invalid(
            """
            import tensorflow as tf1
            from tensorflow.contrib.layers import fully_connected, l2_regularizer

            hidden = tf1.contrib.layers.fully_connected(x, 64)
            logits = fully_connected(hidden, 10, activation_fn=None)
            penalty = l2_regularizer(0.1)
            """,
            _fixture(
                """
                import tensorflow as tf1
                from tensorflow.contrib.layers import l2_regularizer
                """,
                ("tf1_fully_connected",),
                """
                hidden = tf1_fully_connected(x, 64)
                logits = tf1_fully_connected(hidden, 10, activation_fn=None)
                penalty = l2_regularizer(0.1)
                """,
                alias="tf1",
            ),
        ),
        Invalid(
            """
            import tensorflow as tf

            a = tf.layers.dense(x, 10, kernel_regularizer=tf.keras.regularizers.l2(0.1))
            b = tf.layers.dense(x, 10, kernel_initializer="he_normal")
            c = tf.layers.conv2d(x, 8, 3, data_format="channels_first")
            d = tf.layers.dense(x, 10, **options)
            e = tf.contrib.layers.fully_connected(x, 10, normalizer_fn=tf.contrib.layers.batch_norm)
            f = tf.layers.max_pooling2d(x, 2, 2, "valid", data_format)
            """,
            None,
            diagnostics=("TFM104",) * 6,
        ),
        Invalid(
            """
            import tensorflow as tf
            slim = tf.contrib.slim

            with slim.arg_scope([slim.conv2d], padding="VALID"):
                net = slim.conv2d(images, 32, [3, 3])
            """,
            None,
            diagnostics=("TFM104",),
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        names = self.ctx.names
        if not names.any:
            return module
        self.shims = shim_functions()
        # module-level aliases of the layer modules: `slim = tf.contrib.slim`
        self.aliases: dict[str, str] = {}
        self.alias_lines: dict[str, cst.SimpleStatementLine] = {}
        for st in module.body:
            targets, value, assign = C.assignment(st)
            if assign is not None and len(assign.targets) == 1 and len(targets) == 1 and value is not None:
                q = names.qualname(value)
                if q in _MODULES:
                    self.aliases[targets[0]] = q
                    self.alias_lines[targets[0]] = st
        self.module_in = module
        self.update_ops_read: bool | None = None  # whether the module reads tf.GraphKeys.UPDATE_OPS
        self.prepared = False  # the analyses below run once a handled call is found
        self.used: list[str] = []  # shim functions the rewritten calls use
        self.heads: set[str] = set()  # names the rewritten calls were spelled from
        self.reported: set[str] = set()
        self.rename: dict[str, str] = {}  # shim name -> the name it gets in this module
        self.existing: set[str] = set()  # shims the module already defines, unchanged
        new = transform(module, self)
        if not self.used:
            return module
        return self._insert_functions(self._drop_unused_aliases(new))

    # ------------------------------------------------------------------ analysis

    def _prepare(self) -> None:
        if self.prepared:
            return
        self.prepared = True
        module = self.module_in
        self.arg_scope = next((call for call in C.calls_in(module)
                               if (self._canonical(call.func) or "").startswith("contrib.")
                               and (self._canonical(call.func) or "").endswith("arg_scope")), None)
        self.taken = C.all_names(module)
        # where the module does not import TensorFlow: the functions that do (innermost first
        # for each call: id(call) -> function) and the layers each one's calls use
        self.local_owners: dict[int, cst.FunctionDef] | None = None
        self.local_used: dict[int, list[str]] = {}
        self.tf_alias, self.tf_import, self.insert_at = self._tensorflow_alias(module)

    def _canonical(self, func: cst.BaseExpression) -> str | None:
        q = self.qualname(func)
        if q is not None:
            return q
        d = dotted(func)
        if d is None:
            return None
        head, _, tail = d.partition(".")
        if head in self.aliases and tail:
            return f"{self.aliases[head]}.{tail}"
        return None

    def _target(self, func: cst.BaseExpression) -> tuple[str, str, str] | None:
        """(canonical module, function, shim name) of a call of a handled TF1 layer."""
        q = self._canonical(func)
        if q is None:
            return None
        module, _, function = q.rpartition(".")
        table = _MODULES.get(module)
        if table is None or function not in table:
            return None
        return module, function, table[function]

    def _tensorflow_alias(self, module: cst.Module) -> tuple[str | None, bool, int]:
        """(the name the copied functions spell TensorFlow with, whether
        ``import tensorflow as tf`` must be added, where the functions go)."""
        bindings = self.ctx.names.bindings
        alias = self.ctx.names.root_alias() or next(
            (k for k, v in bindings.items() if v in ("tensorflow.compat.v1", "tensorflow.compat.v2")), None)
        body = list(module.body)
        after = 0  # after the last import of the module's import block
        for i, st in enumerate(body):
            if _imports_only(st):
                after = i + 1
            elif i == 0 and C.single_expr(st) is not None and isinstance(C.single_expr(st), cst.SimpleString):
                after = 1  # the module docstring
            elif not isinstance(st, cst.SimpleStatementLine):
                break
        if alias is None:
            if "tf" in self.taken:
                return None, False, after
            return "tf", True, after
        binding = next((i for i, st in enumerate(body) if _binds(st, alias)), None)
        if binding is None:
            # TensorFlow imported in a function only (a job function a launcher runs): the
            # layers are written in that function, after its import, where `tf` is TensorFlow
            owners = [n for n in C.walk(module) if type(n) is cst.FunctionDef
                      and any(_binds(st, alias) for st in C.body_of(n.body) if isinstance(st, cst.SimpleStatementLine))]
            if not owners:
                return None, False, after
            self.local_owners = {}
            for owner in owners:  # outer functions first (a walk's order): inner ones take their calls over
                self.local_owners.update((id(n), owner) for n in C.walk(owner) if type(n) is cst.Call)
            return alias, False, after
        return alias, False, max(after, binding + 1)

    def _problem(self, call: cst.Call, module: str, function: str, shim: _Shim) -> str | None:
        """Why the call cannot be rewritten exactly, or None."""
        spelled = C.code_of(call.func)
        if module != "layers" and self.arg_scope is not None:
            return (f"this module uses `{C.code_of(self.arg_scope.func)}`, which changes the defaults of"
                    f" `{spelled}` where the call does not show it")
        bound: dict[str, cst.BaseExpression] = {}
        positional = 0
        for a in call.args:
            if a.star:
                return f"`{a.star}` arguments: which parameters they pass cannot be told"
            if a.keyword is None:
                if positional >= len(shim.params):
                    return f"more positional arguments than TF1's `{module}.{function}` takes"
                bound[shim.params[positional]] = a.value
                positional += 1
            elif a.keyword.value not in shim.params:
                return f"`{a.keyword.value}=` is not a parameter of TF1's `{module}.{function}`"
            else:
                bound[a.keyword.value] = a.value
        for param, value in bound.items():
            if param in _NOT_REPRODUCED and not _is_none(value):
                return f"`{param}` is not reproduced ({_NOT_REPRODUCED[param]})"
            strings = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
            names = (*_INITIALIZER_NAMES, "ones") if function == "batch_normalization" else _INITIALIZER_NAMES
            if param in _INITIALIZERS and isinstance(value, strings) and _string(value) not in names:
                return (f"`{param}={C.code_of(value)}`: TF1 looked that name up in Keras 2's initializers;"
                        " pass an initializer object")
            if function == "batch_normalization" and param in ("renorm", "axis", "training"):
                why = self._batch_norm_problem(param, value)
                if why is not None:
                    return why
            if param == "data_format":
                kind = "layers" if module == "layers" else ("conv" if "conv" in function else "pool")
                allowed = _CHANNELS_LAST[kind]
                if not ((None in allowed and _is_none(value)) or _string(value) in allowed):
                    return (f"`data_format={C.code_of(value)}`: only channels-last data"
                            f" ({' or '.join(repr(a) for a in allowed if a)}) is reproduced")
        return None

    def _batch_norm_problem(self, param: str, value: cst.BaseExpression) -> str | None:
        """Why ``batch_normalization(param=value)`` cannot be written out exactly, or None."""
        literal = C.code_of(value).strip()
        if param == "renorm" and literal != "False":
            return "`renorm` is not reproduced (batch renormalization)"
        if param == "axis" and literal != "-1":
            return f"`axis={literal}`: only the last axis (channels-last data) is reproduced"
        if param == "training" and literal != "False" and not self._reads_update_ops():
            # TF1 moved the moving averages only where the train op depended on UPDATE_OPS;
            # the written-out layer moves them with the step, as that train op did
            return ("`training` may be true and the module never reads tf.GraphKeys.UPDATE_OPS: the TF1 train op"
                    " did not run the moving-average updates, so evaluation used the initial moving mean and"
                    " variance; make the train op depend on UPDATE_OPS (the usual intent) or migrate by hand")
        return None

    def _reads_update_ops(self) -> bool:
        if self.update_ops_read is None:
            self.update_ops_read = any(
                isinstance(n, cst.Attribute) and n.attr.value == "UPDATE_OPS" for n in C.walk(self.module_in))
        return self.update_ops_read

    # ------------------------------------------------------------------ calls

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        target = self._target(original_node.func)
        if target is None:
            return updated_node
        module, function, shim_name = target
        self._prepare()
        spelled = C.code_of(original_node.func)
        why = self._problem(original_node, module, function, self.shims[shim_name])
        if why is None and self.tf_alias is None:
            why = "the module has no module-level TensorFlow import to write TF1's layer with"
        owner = None if self.local_owners is None else self.local_owners.get(id(original_node))
        if why is None and self.local_owners is not None and owner is None:
            importing = sorted({f.name.value for f in self.local_owners.values()})
            why = (f"TensorFlow is imported in {', '.join(f'`{n}`' for n in importing)} only, where TF1's layer"
                   " is written out, and this call is outside")
        if why is not None:
            self.report(original_node, f"`{spelled}` left as it is: {why}",
                        hint="migrate this layer by hand (a Keras 3 layer created once and reused at every step)",
                        fixed=False)
            return updated_node
        name = self._name_for(shim_name)
        if owner is not None:
            self.local_used.setdefault(id(owner), []).append(shim_name)
        if shim_name not in self.reported:
            self.reported.add(shim_name)
            self.report(original_node, f"`{spelled}` -> `{name}`, TF1's layer written out in this module (Keras 3"
                        " removed tf.compat.v1.layers, TF 2 tf.contrib): same variables, initializers and ops",
                        fixed=True, severity="info")
        head = (dotted(original_node.func) or "").partition(".")[0]
        self.heads.add(head)
        return updated_node.with_changes(func=cst.Name(name))

    def _name_for(self, shim_name: str) -> str:
        """The module's name for a shim function (and the functions it calls)."""
        for needed in _closure([shim_name], self.shims):
            if needed not in self.used:
                self.used.append(needed)
                if needed in self.taken and self._defined_unchanged(needed):
                    self.existing.add(needed)
                    self.rename[needed] = needed
                else:
                    self.rename[needed] = C.fresh(needed, self.taken)
        return self.rename[shim_name]

    def _defined_unchanged(self, name: str) -> bool:
        """The module already defines this shim as tfmigrate wrote it (an earlier run)."""
        wanted = C.code_of(self._copy(name, {name: name})).strip()
        return any(isinstance(st, cst.FunctionDef) and st.name.value == name
                   and C.code_of(st).strip() == wanted for st in self.ctx.module.body)

    # ------------------------------------------------------------------ module edits

    def _copy(self, name: str, rename: dict[str, str]) -> cst.FunctionDef:
        return copied_function(name, self.tf_alias or "tf", rename)

    def _functions(self, used: list[str]) -> list[cst.FunctionDef]:
        rename = {n: self.rename[n] for n in self.used}
        return [self._copy(n, rename) for n in _closure(used, self.shims) if n not in self.existing]

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        """A function importing TensorFlow where the module does not gets the
        layers its calls use, right after its import of it."""
        used = self.__dict__.get("local_used", {}).get(id(original_node))
        if not used:
            return updated_node
        functions = self._functions(used)
        if not functions:
            return updated_node
        body = list(updated_node.body.body)
        at = next(i for i, st in enumerate(body) if isinstance(st, cst.SimpleStatementLine)
                  and _binds(st, self.tf_alias)) + 1
        while at < len(body) and _imports_only(body[at]):
            at += 1
        # one blank line between nested functions, none carrying the module's indentation
        functions = [fn.with_changes(leading_lines=[cst.EmptyLine(indent=False), *C.strip_blank_lines(
            fn.leading_lines)]) for fn in functions]
        rest = body[at:]
        if rest:
            lines = C.strip_blank_lines(rest[0].leading_lines)
            rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(indent=False), *lines])
        return updated_node.with_changes(body=updated_node.body.with_changes(body=[*body[:at], *functions, *rest]))

    def _insert_functions(self, module: cst.Module) -> cst.Module:
        if self.tf_import:
            self.ctx.require_import("tensorflow", None, "tf")
        if self.local_owners is not None:
            return module  # written in the functions importing TensorFlow (leave_FunctionDef)
        functions = self._functions(self.used)
        if not functions:
            return module
        body = list(module.body)
        at = self.insert_at - self.removed_before_insert
        # after the functions an earlier run wrote, when there are
        at = max([at] + [i + 1 for i, st in enumerate(body)
                         if isinstance(st, cst.FunctionDef) and st.name.value in self.existing])
        rest = body[at:]
        if rest:
            lines = C.strip_blank_lines(rest[0].leading_lines)
            rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *lines])
        return module.with_changes(body=[*body[:at], *functions, *rest])

    def _drop_unused_aliases(self, module: cst.Module) -> cst.Module:
        """Remove the top-level imports and ``slim = tf.contrib.slim`` aliases
        of layer modules/functions whose every use was rewritten (a contrib
        import fails on TF 2)."""
        self.removed_before_insert = 0
        candidates = set()
        for head in self.heads:
            if head in self.aliases:
                candidates.add(head)
            else:
                full = self.ctx.names.bindings.get(head, "")
                q = self.ctx.names.qualname(cst.Name(head)) or ""
                if full and (q in _MODULES or self._target(cst.Name(head)) is not None):
                    candidates.add(head)
        if not candidates:
            return module
        skip = {id(self.alias_lines[h]) for h in candidates if h in self.alias_lines}
        refs = _References(candidates, skip)
        fast_visit(module, refs)
        unused = {h for h in candidates if refs.count[h] == 0}
        if not unused:
            return module
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for i, st in enumerate(module.body):
            new = self._without(st, unused)
            if new is None:
                if i < self.insert_at:
                    self.removed_before_insert += 1
                carried += [line for line in st.leading_lines if line.comment is not None]
                continue
            if carried:
                new = new.with_changes(leading_lines=[*carried, *new.leading_lines])
                carried = []
            body.append(new)
        return module.with_changes(body=body)

    def _without(self, st: cst.BaseStatement, unused: set[str]) -> cst.BaseStatement | None:
        """``st`` without its bindings of ``unused`` names (None: nothing left)."""
        if not isinstance(st, cst.SimpleStatementLine):
            return st
        targets, _, assign = C.assignment(st)
        if assign is not None and len(targets) == 1 and targets[0] in unused and self.alias_lines.get(targets[0]) is st:
            return None
        small: list[cst.BaseSmallStatement] = []
        for s in st.body:
            if isinstance(s, (cst.Import, cst.ImportFrom)) and not isinstance(s.names, cst.ImportStar):
                kept = [a for a in s.names if self._local(a) not in unused]
                if not kept:
                    continue
                if len(kept) != len(s.names):
                    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    s = s.with_changes(names=kept)
            small.append(s)
        if not small:
            return None
        return st.with_changes(body=small) if len(small) != len(st.body) or any(
            a is not b for a, b in zip(small, st.body)) else st

    @staticmethod
    def _local(alias: cst.ImportAlias) -> str:
        if alias.asname is not None:
            return dotted(alias.asname.name) or ""
        return (dotted(alias.name) or "").partition(".")[0]
