"""Run a legacy script written for TensorFlow 1.x on TensorFlow 2 as TF1.

``tfmigrate check`` runs the legacy program as it is. Most legacy scripts
import TensorFlow the TF1 way (``import tensorflow as tf``) and call names
TF2 moved under ``tf.compat.v1`` (``tf.train.Server``, ``tf.placeholder``,
``tf.app.flags``...), in graph mode. TF2 still has all of that in
``tensorflow.compat.v1``; TensorFlow's own guide runs TF1 code on TF2 by
changing only the import::

    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()

:func:`prepare` makes exactly that change (every ``import tensorflow``/``from
tensorflow import X`` binding now names ``tensorflow.compat.v1``, and TF 1.x
behaviour -- graph mode, reference variables, v1 control flow and shapes --
is switched on right after the first TensorFlow import), and converts
Python 2 syntax to Python 3 as the codemod does, nothing else:
the training code is the user's. A script that already runs on TF2 (it
imports ``tensorflow.compat.v1`` or switches eager execution off itself) is
left alone. What TF2 cannot run in any spelling (``tensorflow.contrib``,
``tensorflow.examples``) is reported, so ``check`` can say why the legacy
side cannot start instead of showing an ImportError.

Never imports TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules._cst import walk
from migrate.codemod.tfnames import TFNames, dotted
from migrate.codemod.tfnames import canonical as tf_canonical

__all__ = ["Prepared", "prepare"]

# Module attributes a TF2 program uses to leave eager mode (any spelling):
# their presence means the script already runs on TF2 as TF1.
_GRAPH_MODE_SWITCHES = ("disable_eager_execution", "disable_v2_behavior")
# Packages TF 2.x removed entirely: no import spelling brings them back.
_REMOVED = ("tensorflow.contrib", "tensorflow.examples")
# ...except TF1's MNIST reader, which check serves on both sides (migrate/runtime/mnist_standin.py)
MNIST_READER = "tensorflow.examples.tutorials.mnist"


@dataclass
class Prepared:
    source: str  # what to run (the input itself when nothing was changed)
    changed: bool = False
    changes: list[str] = field(default_factory=list)  # what was changed, for the report
    blockers: list[str] = field(default_factory=list)  # imports TF2 cannot satisfy, located
    reads_mnist: bool = False  # imports TF1's MNIST reader, which check provides
    uses_contrib: bool = False  # uses tf.contrib members, which check provides (CONTRIB_PROVIDED)


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted(node) or "" if node is not None else ""


def _line(module: cst.Module, node: cst.CSTNode) -> int:
    # cheap: the statement's first line in the printed module
    code = module.code
    text = module.code_for_node(node).strip().splitlines()[0]
    index = code.find(text)
    return code.count("\n", 0, index) + 1 if index >= 0 else 0


class _ToCompatV1(cst.CSTTransformer):
    """TF1 bindings of ``tensorflow`` become bindings of ``tensorflow.compat.v1``."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []
        self.alias: str | None = None  # a local name bound to compat.v1, for the graph-mode switch

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        names = []
        for alias in updated.names:
            full = _module_name(alias.name)
            if full == "tensorflow":
                local = alias.asname.name.value if alias.asname else "tensorflow"
                alias = alias.with_changes(
                    name=cst.parse_expression("tensorflow.compat.v1"),
                    asname=cst.AsName(name=cst.Name(local)),
                )
                self.changes.append(f"`import tensorflow{' as ' + local if local != 'tensorflow' else ''}`"
                                    f" -> `import tensorflow.compat.v1 as {local}`")
                self.alias = self.alias or local
            names.append(alias)
        return updated.with_changes(names=names)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if updated.relative:
            return updated
        full = _module_name(updated.module)
        if full == "tensorflow" and not isinstance(updated.names, cst.ImportStar):
            kept = [a for a in updated.names if _module_name(a.name) not in ("compat",)]
            if len(kept) == len(updated.names):
                self.changes.append("`from tensorflow import ...` -> `from tensorflow.compat.v1 import ...`")
                return updated.with_changes(module=cst.parse_expression("tensorflow.compat.v1"))
        return updated


def _switches_graph_mode(module: cst.Module) -> bool:
    for node in walk(module):
        if isinstance(node, cst.Attribute) and node.attr.value in _GRAPH_MODE_SWITCHES:
            return True
        if isinstance(node, cst.ImportAlias) and _module_name(node.name) in _GRAPH_MODE_SWITCHES:
            return True
    return False


def _imports_compat_v1(module: cst.Module) -> bool:
    for node in walk(module):
        if isinstance(node, cst.Import):
            if any(_module_name(a.name).startswith("tensorflow.compat.v1") for a in node.names):
                return True
        elif isinstance(node, cst.ImportFrom) and not node.relative:
            full = _module_name(node.module)
            if full.startswith("tensorflow.compat.v1"):
                return True
            if (
                full == "tensorflow.compat"
                and not isinstance(node.names, cst.ImportStar)
                and any(_module_name(a.name) == "v1" for a in node.names)
            ):
                return True
    return False


# tf.contrib members check provides on the legacy side (harness feature
# `contrib`, built by migrate/runtime/contrib_standin.py), each exactly what
# TF 1.x ran, by the name TF 1.x defined it under: the layers TFM104 writes out
# (migrate/codemod/tf1_layers.py), TF1's initializers and l1/l2 regularizers,
# global-step functions, arg_scope, the MNIST reader of contrib.learn (the
# stand-in both sides read), and the members TF 1.x moved to core (the renames
# tf_upgrade_v2 applies). Anything else under tf.contrib still blocks the run.
CONTRIB_LAYERS = frozenset({
    "fully_connected", "conv2d", "convolution2d", "max_pool2d", "avg_pool2d", "flatten", "dropout",
})
_CONTRIB_INITIALIZERS = frozenset({
    "xavier_initializer", "xavier_initializer_conv2d", "variance_scaling_initializer", "l2_regularizer",
    "l1_regularizer",
})
_CONTRIB_FRAMEWORK = frozenset({
    "get_or_create_global_step", "get_global_step", "create_global_step",
    "arg_scope", "add_arg_scope", "current_arg_scope", "has_arg_scope", "arg_scoped_arguments",
    "VariableDeviceChooser",
})
_CONTRIB_MNIST = frozenset({"learn.datasets.mnist.read_data_sets", "learn.datasets.mnist.load_mnist"})
# contrib.learn's data set registry: provided for MNIST only, so a use must
# select "mnist" literally (`load_dataset("mnist")`, `DATASETS["mnist"]`)
_CONTRIB_MNIST_SELECTED = frozenset({"learn.datasets.load_dataset", "learn.datasets.DATASETS"})


def _moved_to_core() -> dict[str, str]:
    """``{"framework.nest.flatten": "nest.flatten", ...}``: contrib members TF
    1.x made core functions (tf_upgrade_v2's renames; TPU ones left out)."""
    from migrate.codemod.rules.tfm101_tensorflow_import import load_tf_api

    return {
        old[len("contrib."):]: new
        for old, new in load_tf_api().contrib_renames.items()
        if old.startswith("contrib.") and not old.startswith("contrib.tpu.")
    }


CONTRIB_MOVED = _moved_to_core()
CONTRIB_PROVIDED = frozenset({
    *(f"layers.{name}" for name in CONTRIB_LAYERS | _CONTRIB_INITIALIZERS),
    *(f"framework.{name}" for name in _CONTRIB_FRAMEWORK),
    *_CONTRIB_MNIST,
    *_CONTRIB_MNIST_SELECTED,
    *CONTRIB_MOVED,
})
# contrib.learn's modules as a whole are not imported: of them check serves the
# MNIST reader only (imported as its own module, or reached by a use check can judge)
_CONTRIB_LEARN_MODULES = frozenset({"learn", "learn.datasets", "learn.python"})
# Other names TF 1.x gave the same modules: (spelling, canonical module).
# slim re-exported contrib.layers and contrib.framework's members (below), and
# slim.layers was contrib.layers' own module.
CONTRIB_SPELLINGS = (
    ("slim.layers", "layers"),
    ("learn.python.learn", "learn"),
    ("layers.python.layers.layers", "layers"),
)
_CONTRIB_NAMESPACES = frozenset(
    {"", "slim"}
    | {member.rsplit(".", 1)[0] for member in CONTRIB_PROVIDED}
    | {".".join(member.split(".")[:i]) for member in CONTRIB_PROVIDED for i in range(1, member.count(".") + 1)}
    | {".".join(spelling.split(".")[:i]) for spelling, _ in CONTRIB_SPELLINGS
       for i in range(1, spelling.count(".") + 2)}
)


def _tf1_name(full: str) -> str:
    """``tensorflow.compat.v1.contrib.X`` (a script on compat.v1, or the prepared copy) is ``tensorflow.contrib.X``."""
    for prefix in ("tensorflow.compat.v1.", "tensorflow.compat.v1.compat.v1."):
        if full.startswith((prefix + "contrib", prefix + "examples")):
            return "tensorflow." + full[len(prefix):]
    return full


def contrib_member(full: str) -> str | None:
    """``"layers.fully_connected"`` for ``tensorflow.contrib.layers.fully_connected``."""
    full = _tf1_name(full)
    if full == "tensorflow.contrib":
        return ""
    return full[len("tensorflow.contrib.") :] if full.startswith("tensorflow.contrib.") else None


def contrib_canonical(member: str) -> str:
    """The name TF 1.x defined a contrib member under, for any spelling it
    had: ``slim.layers.conv2d`` and ``slim.conv2d`` are ``layers.conv2d``,
    ``slim.arg_scope`` is ``framework.arg_scope``."""
    for spelling, canonical in CONTRIB_SPELLINGS:
        if member == spelling or member.startswith(spelling + "."):
            member = canonical + member[len(spelling):]
            break
    head, _, rest = member.partition(".")
    if head == "slim" and rest:
        name = rest.split(".")[0]
        if f"layers.{name}" in CONTRIB_PROVIDED:
            return f"layers.{rest}"
        if f"framework.{name}" in CONTRIB_PROVIDED:
            return f"framework.{rest}"
    return member


def contrib_provided(full: str) -> bool:
    member = contrib_member(full)
    if member is None:
        return False
    return member in _CONTRIB_NAMESPACES or contrib_canonical(member) in CONTRIB_PROVIDED | _CONTRIB_NAMESPACES


def contrib_reads_mnist(full: str) -> bool:
    """Whether ``full`` names contrib.learn's MNIST reader (TF1's input_data
    was that module)."""
    member = contrib_member(full)
    if member is None:
        return False
    member = contrib_canonical(member)
    return member.startswith("learn.datasets.mnist") or member in _CONTRIB_MNIST_SELECTED


def _selects_mnist(node: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """``load_dataset("mnist")`` (size "small", TF1's default) or ``DATASETS["mnist"]``."""

    def is_mnist(expression: cst.BaseExpression) -> bool:
        return isinstance(expression, cst.SimpleString) and expression.evaluated_value == "mnist"

    if isinstance(parent, cst.Call) and parent.func is node:
        positional = [a.value for a in parent.args if a.keyword is None and not a.star]
        size = [a.value for a in parent.args if a.keyword is not None and a.keyword.value == "size"]
        small = not size or (isinstance(size[0], cst.SimpleString) and size[0].evaluated_value == "small")
        return len(positional) == 1 and is_mnist(positional[0]) and small
    if isinstance(parent, cst.Subscript) and parent.value is node and len(parent.slice) == 1:
        index = parent.slice[0].slice
        return isinstance(index, cst.Index) and is_mnist(index.value)
    return False


def _is_mnist_reader(name: str) -> bool:
    return name == MNIST_READER or name.startswith(MNIST_READER + ".")


def reads_mnist(source: str) -> bool:
    """Whether the source imports TF1's MNIST reader (``input_data``)."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return False
    tf_names = TFNames.from_module(module)
    for node in walk(module):
        if isinstance(node, cst.Attribute) and contrib_reads_mnist(tf_names.full_name(node) or ""):
            return True
        if isinstance(node, cst.Import) and any(
            _is_mnist_reader(_module_name(a.name)) or contrib_reads_mnist(_module_name(a.name)) for a in node.names
        ):
            return True
        if isinstance(node, cst.ImportFrom) and not node.relative:
            base = _module_name(node.module)
            names = [] if isinstance(node.names, cst.ImportStar) else [_module_name(a.name) for a in node.names]
            if any(contrib_reads_mnist(f"{base}.{name}") for name in names) or contrib_reads_mnist(base):
                return True
            if _is_mnist_reader(base) or (
                base == "tensorflow.examples.tutorials"
                and not isinstance(node.names, cst.ImportStar)
                and any(_module_name(a.name) == "mnist" for a in node.names)
            ):
                return True
    return False


# Why a removed module cannot be provided, where more can be said than that it is gone.
_WHY_NOT_PROVIDED = {
    "tensorflow.contrib.session_bundle": "no TF 2 API writes its SessionBundle export format; SavedModel replaced it",
    "tensorflow.contrib.learn": "TF 2 has no exact equivalent of contrib.learn's Estimator-era API",
    "tensorflow.contrib.slim": "tfmigrate check provides slim's layers, initializers, regularizers, arg_scope"
                               " and global step only",
    "tensorflow.contrib.layers": "tfmigrate check provides contrib.layers' fully_connected, conv2d, pooling,"
                                 " flatten, dropout, initializers and regularizers only",
}


# tf.compat.v1.layers functions check runs as TF1's code when Keras 3 left
# them out (harness feature `tf1layers`, migrate/codemod/tf1_layers.py).
TF1_LAYERS_PROVIDED = frozenset({
    "dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten", "dropout", "batch_normalization",
})


def _keras3_removed(name: str) -> str | None:
    """Why canonical ``name`` (``layers.batch_normalization``,
    ``nn.rnn_cell.LSTMCell``) cannot run on Keras 3, or None. tf-keras with
    TF_USE_LEGACY_KERAS brings them back."""
    import importlib.util
    import os

    from migrate.codemod.rules.tfm101_tensorflow_import import load_tf_api

    module = next((m for m in load_tf_api().keras2_only if name.startswith(m + ".")), None)
    if module is None or (module == "layers" and name.split(".")[1] in TF1_LAYERS_PROVIDED):
        return None
    if os.environ.get("TF_USE_LEGACY_KERAS", "") not in ("", "0") and importlib.util.find_spec("tf_keras"):
        return None
    provided = f"; tfmigrate check provides tf.layers.{', '.join(sorted(TF1_LAYERS_PROVIDED))} only" if (
        module == "layers") else ""
    return (f"TensorFlow 2 runs only with Keras 2 (tf-keras and TF_USE_LEGACY_KERAS=1): Keras 3 removed"
            f" tf.compat.v1.{module}{provided}")


# Keras 2 (what TF 1.x programs imported as `keras`) against Keras 3, which TF
# 2.21 installs: these modules are gone, and keras.backend keeps only these
# names (tests/test_legacy_compat.py checks both lists on the installed Keras).
KERAS2_MODULES = frozenset({
    "keras.layers.core", "keras.layers.recurrent", "keras.layers.convolutional", "keras.layers.merge",
    "keras.layers.embeddings", "keras.layers.normalization", "keras.layers.pooling", "keras.layers.wrappers",
    "keras.layers.advanced_activations", "keras.layers.noise", "keras.layers.local", "keras.engine",
    "keras.utils.np_utils", "keras.utils.generic_utils", "keras.wrappers.scikit_learn", "keras.objectives",
})
KERAS3_BACKEND = frozenset({
    "backend", "clear_session", "epsilon", "floatx", "get_uid", "image_data_format", "is_float_dtype",
    "is_int_dtype", "is_keras_tensor", "result_type", "set_epsilon", "set_floatx", "set_image_data_format",
    "standardize_dtype",
})
_KERAS2_WHY = ("a Keras 2 {what}: TensorFlow 2.21's Keras 3 removed it, and check does not substitute Keras 2"
               " (tf-keras) for the program's Keras")


def _keras_bindings(module: cst.Module) -> dict[str, str]:
    """Local names bound to standalone ``keras`` modules: ``K`` -> ``keras.backend``."""
    bindings: dict[str, str] = {}
    for node in walk(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if full == "keras" or full.startswith("keras."):
                    bindings[alias.asname.name.value if alias.asname else full.split(".")[0]] = (
                        full if alias.asname else "keras")
        elif isinstance(node, cst.ImportFrom) and not node.relative and not isinstance(node.names, cst.ImportStar):
            base = _module_name(node.module)
            if base == "keras" or base.startswith("keras."):
                for alias in node.names:
                    name = _module_name(alias.name)
                    bindings[alias.asname.name.value if alias.asname else name] = f"{base}.{name}"
    return bindings


def _keras2_removed(full: str) -> str | None:
    """``full`` (``keras.backend.sum``, ``keras.layers.core.Lambda``) as Keras 3 lacks it, or None."""
    module = next((m for m in KERAS2_MODULES if full == m or full.startswith(m + ".")), None)
    if module is not None:
        return module
    parts = full.split(".")
    if len(parts) >= 3 and parts[:2] == ["keras", "backend"] and parts[2] not in KERAS3_BACKEND:
        return ".".join(parts[:3])
    return None


def _removed(full: str, verb: str, line: int) -> str:
    why = next((w for prefix, w in _WHY_NOT_PROVIDED.items() if full == prefix or full.startswith(prefix + ".")), "")
    shown = f"`{full}`" if verb == "imports" else full
    return f"line {line}: {verb} {shown}, which TensorFlow 2 removed" + (f" ({why})" if why else "")


def _blockers(module: cst.Module) -> list[str]:
    """Uses and imports of removed packages that check does not provide, by
    what each name is bound to (any import spelling), except those a
    ``try:`` guards (the script has a fallback)."""
    positions = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.PositionProvider)

    def line(node: cst.CSTNode) -> int:
        return positions[node].start.line if node in positions else _line(module, node)

    from migrate.codemod.rules.tfm101_tensorflow_import import load_tf_api

    api = load_tf_api()
    guarded = {id(n) for t in walk(module) if isinstance(t, cst.Try) for n in walk(t.body)}
    tf_names = TFNames.from_module(module)
    keras_names = _keras_bindings(module)
    found = []
    used: set[str] = set()
    inner = {id(n.value) for n in walk(module) if isinstance(n, cst.Attribute)}
    parents = {id(child): n for n in walk(module) for child in n.children}
    for node in walk(module):
        if id(node) in guarded:
            continue
        if isinstance(node, cst.Attribute):
            if id(node) in inner:
                continue  # only whole chains: tf.contrib.layers.fully_connected, not tf.contrib
            head = (dotted(node) or "").split(".")[0]
            keras_full = (
                keras_names[head] + (dotted(node) or "")[len(head):] if head in keras_names
                else tf_names.qualname(node) or ""
            )
            keras2 = _keras2_removed(keras_full)
            if keras2 is not None and keras2 not in used:
                used.add(keras2)
                what = "module" if keras2 in KERAS2_MODULES else "backend function"
                found.append(f"line {line(node)}: uses {dotted(node)} ({keras2}), " + _KERAS2_WHY.format(what=what))
                continue
            full = _tf1_name(tf_names.full_name(node) or "")
            keras3 = _keras3_removed(tf_names.qualname(node) or "")
            if keras3 is not None and full not in used:
                used.add(full)
                found.append(f"line {line(node)}: uses {dotted(node)}, which {keras3}")
                continue
            change = api.pre1.get(tf_names.qualname(node) or "")
            if change is not None and change.removed and change.old and full not in used:
                used.add(full)
                found.append(
                    f"line {line(node)}: uses {dotted(node)}, which TensorFlow 1.0 removed (its successor tf.{change.to}"
                    " takes other arguments, so the legacy program cannot run unchanged)"
                )
                continue
            member = contrib_member(full)
            if member is not None and contrib_canonical(member) in _CONTRIB_MNIST_SELECTED:
                if not _selects_mnist(node, parents.get(id(node))):
                    found.append(f"line {line(node)}: uses {full} for another data set than MNIST, which"
                                 " TensorFlow 2 removed (tfmigrate check serves only MNIST, from its stand-in)")
                continue
            if not full.startswith(_REMOVED) or _is_mnist_reader(full) or contrib_provided(full):
                continue
            # the shortest prefix of the chain that is gone, once per name
            while "." in full and not contrib_provided(full.rsplit(".", 1)[0]) and full.rsplit(".", 1)[0].startswith(_REMOVED):
                full = full.rsplit(".", 1)[0]
            if full not in used:
                used.add(full)
                found.append(_removed(full, "uses", line(node)))
            continue
        names: list[str] = []
        if isinstance(node, cst.Import):
            names = [_module_name(a.name) for a in node.names]
        elif isinstance(node, cst.ImportFrom) and not node.relative:
            base = _module_name(node.module)
            names = [base]
            if base.startswith(("tensorflow", "keras")) and not isinstance(node.names, cst.ImportStar):
                names = [f"{base}.{_module_name(a.name)}" for a in node.names]
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            gone = [n for n in names if _keras2_removed(n) in KERAS2_MODULES]
            if isinstance(node, cst.ImportFrom) and _keras2_removed(_module_name(node.module)) in KERAS2_MODULES:
                gone = [_module_name(node.module)]
            if gone and gone[0] not in used:
                used.add(gone[0])
                found.append(f"line {line(node)}: imports `{gone[0]}`, " + _KERAS2_WHY.format(what="module"))
                continue
        for name in names:
            keras3 = _keras3_removed(tf_canonical(name) or "")
            if keras3 is not None:
                found.append(f"line {line(node)}: imports `{name}`, which {keras3}")
                break
            member = contrib_member(name)
            whole_learn = member is not None and contrib_canonical(member) in _CONTRIB_LEARN_MODULES
            if _is_mnist_reader(name) or name == "tensorflow.examples.tutorials" or (
                contrib_provided(name) and not whole_learn
            ):
                continue
            if any(name == r or name.startswith(r + ".") for r in _REMOVED):
                found.append(_removed(name, "imports", line(node)))
                break
    return found


def python3_source(source: str) -> tuple[str, str | None]:
    """The source as Python 3 runs it, and what was converted: the CLI's
    Python 2 pre-pass (print statements, ``xrange``, ``d.iteritems()``...).
    Raises :class:`migrate.codemod.engine.MigrationError` when it is neither."""
    from migrate.codemod import py2

    if py2.python2_uses(source) or not py2.is_python3(source):
        converted, note = py2.convert(source)
        return converted, note.message
    return source, None


class _AllowOverride(cst.CSTTransformer):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        from migrate.codemod.rules.tfm102_absl_flags import ABSL_OWN_FLAGS

        func = dotted(updated.func) or ""
        if not func.rpartition(".")[2].startswith("DEFINE_") or not updated.args:
            return updated
        first = updated.args[0]
        if first.keyword is not None or not isinstance(first.value, cst.SimpleString):
            return updated
        name = first.value.evaluated_value
        if name not in ABSL_OWN_FLAGS or any(a.keyword and a.keyword.value == "allow_override" for a in updated.args):
            return updated
        self.names.append(name)
        args = list(updated.args)
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("allow_override"), value=cst.Name("True"),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                  whitespace_after=cst.SimpleWhitespace(""))))
        return updated.with_changes(args=args)


def _allow_absl_own_flags(source: str) -> tuple[str, list[str]] | None:
    """A flag absl defines itself (``--log_dir``: TF 1.x's tutorials used it)
    raises DuplicateFlagError on TF 2 unless it may override absl's."""
    if "DEFINE_" not in source:
        return None
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None
    fixer = _AllowOverride()
    new = module.visit(fixer)
    return (new.code, fixer.names) if fixer.names else None


class _Pre1Renames(cst.CSTTransformer):
    """``tf.merge_all_summaries`` -> ``tf.summary.merge_all``: names TF 1.0
    gave functions it kept unchanged (tf_api.json's ``pre1`` entries whose calls
    did not change); a legacy script written for TF 0.x calls the same function."""

    def __init__(self, names: TFNames) -> None:
        super().__init__()
        from migrate.codemod.rules.tfm101_tensorflow_import import load_tf_api

        self.names = names
        self.api = load_tf_api()
        self.renamed: list[str] = []

    def leave_Attribute(self, original: cst.Attribute, updated: cst.BaseExpression) -> cst.BaseExpression:
        name = self.names.qualname(original)
        change = self.api.pre1.get(name or "")
        head = (dotted(original) or "").split(".")[0]
        bound = self.names.bindings.get(head)
        if change is None or not change.removed or change.old or bound not in ("tensorflow", "tensorflow.compat.v1"):
            return updated
        new = f"{head}.{'compat.v1.' if bound == 'tensorflow' else ''}{change.to}"
        text = f"`{dotted(original)}` -> `{new}`"
        if text not in self.renamed:
            self.renamed.append(text)
        return cst.parse_expression(new)


def _pre1_renames(source: str) -> tuple[str, list[str]] | None:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None
    renamer = _Pre1Renames(TFNames.from_module(module))
    new = module.visit(renamer)
    return (new.code, renamer.renamed) if renamer.renamed else None


def prepare(source: str) -> Prepared:
    """The legacy source as TF2 runs TF1 code (see the module docstring)."""
    prepared = _prepare(source)
    overridden = _allow_absl_own_flags(prepared.source)
    if overridden is not None:
        prepared.source, names = overridden
        prepared.changed = True
        prepared.changes.append(
            f"{', '.join('--' + n for n in names)} defined with allow_override=True (absl, which TF 2"
            " imports, defines it too: DuplicateFlagError otherwise)"
        )
    renamed = _pre1_renames(prepared.source)
    if renamed is not None:
        prepared.source, names = renamed
        prepared.changed = True
        prepared.changes.append(f"{', '.join(names)} (TF 1.0's names for the same functions; TF 1.0 removed the old ones)")
    prepared.reads_mnist = reads_mnist(prepared.source)
    prepared.uses_contrib = "contrib" in prepared.source and not prepared.blockers
    return prepared


def _prepare(source: str) -> Prepared:
    from migrate.codemod.engine import MigrationError

    try:
        source, converted = python3_source(source)
    except MigrationError:
        return Prepared(source)  # the caller's parse reports where
    done = [converted] if converted else []
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return Prepared(source, bool(done), done)
    blockers = _blockers(module)
    if _switches_graph_mode(module) or _imports_compat_v1(module):
        return Prepared(source, bool(done), done, blockers)
    to_v1 = _ToCompatV1()
    new = module.visit(to_v1)
    if not to_v1.changes:
        return Prepared(source, bool(done), done, blockers)
    # Graph mode right after the first top-level TensorFlow import (else after
    # the docstring and __future__ imports, with an import of its own).
    index, alias = None, None
    for i, statement in enumerate(module.body):
        if isinstance(statement, cst.SimpleStatementLine):
            finder = _ToCompatV1()
            statement.visit(finder)
            if finder.changes:
                index, alias = i + 1, finder.alias
                break
    switch = []
    if index is None or alias is None:
        alias = "tfmigrate_tf1"
        switch.append(cst.parse_statement(f"import tensorflow.compat.v1 as {alias}\n"))
    if index is None:
        index = 0
        for i, statement in enumerate(module.body):
            first = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
            docstring = i == 0 and isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString)
            future = isinstance(first, cst.ImportFrom) and _module_name(first.module) == "__future__"
            if not (docstring or future):
                break
            index = i + 1
    switch.append(cst.parse_statement(f"{alias}.disable_v2_behavior()\n"))
    body = list(new.body)
    body[index:index] = switch
    changes = [*done, *to_v1.changes, f"`{alias}.disable_v2_behavior()` added after the import"]
    return Prepared(new.with_changes(body=body).code, True, changes, blockers)


def main(argv: list[str] | None = None) -> int:
    """``python3 -m migrate.runtime.legacy_compat FILE...``: what check would
    change, provide and refuse on each legacy script's side, without running it."""
    import sys
    from pathlib import Path

    refused = 0
    for name in argv if argv is not None else sys.argv[1:]:
        prepared = prepare(Path(name).read_text(encoding="utf-8"))
        provided = [what for what, used in (("tf.contrib members", prepared.uses_contrib),
                                            ("the MNIST reader", prepared.reads_mnist)) if used]
        print(f"{name}: {'refused' if prepared.blockers else 'accepted'}")
        for change in prepared.changes:
            print(f"  changed: {change}")
        if provided:
            print(f"  provided: {', '.join(provided)}")
        for blocker in prepared.blockers:
            print(f"  refused: {blocker}")
        refused += bool(prepared.blockers)
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
