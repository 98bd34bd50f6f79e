"""TensorFlow's MNIST tutorial module, written out where a program calls it.

``from tensorflow.examples.tutorials.mnist import mnist`` (TF 1.x; TF 2 no
longer ships it) gives ``mnist.inference(images, hidden1_units,
hidden2_units)``, ``mnist.loss(logits, labels)``, ``mnist.training(loss,
learning_rate)``, ``mnist.evaluation(logits, labels)`` and the constants
``NUM_CLASSES``, ``IMAGE_SIZE``, ``IMAGE_PIXELS``. Their meaning is fixed
and documented (tensorflow/examples/tutorials/mnist/mnist.py, TF 1.15):

* inference: three layers under the name scopes ``hidden1``, ``hidden2``,
  ``softmax_linear``; weights ``tf.Variable(tf.truncated_normal([n_in, n_out],
  stddev=1.0 / math.sqrt(float(n_in))), name='weights')``, biases
  ``tf.Variable(tf.zeros([n_out]), name='biases')``; ReLU on the two hidden
  layers, the last one linear (the logits).
* loss: ``tf.losses.sparse_softmax_cross_entropy(labels=tf.to_int64(labels),
  logits=logits)``: the batch mean of the cross-entropy (weights 1, so the
  sum over the examples divided by their count, as ``tf.reduce_mean``).
* training: ``tf.summary.scalar('loss', loss)``, a
  ``GradientDescentOptimizer(learning_rate)`` minimizing the loss with a new
  ``tf.Variable(0, name='global_step', trainable=False)`` as global step.
* evaluation: ``tf.reduce_sum(tf.cast(tf.nn.in_top_k(logits, labels, 1),
  tf.int32))``.

:func:`expand` replaces each statement ``name = mnist.f(args)`` (or ``return
mnist.f(args)``) with those statements, in the TF1 spelling the training
rule reads (its variables, loss, optimizer and summary), so the program
keeps its model once the module is gone; the module's constants become
constants of the file. Never imports TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod import fastcst
from migrate.codemod.rules import _cst as C

MODULE = "examples.tutorials.mnist.mnist"  # its qualname (compat prefixes stripped)
FUNCTIONS = {
    "inference": ("images", "hidden1_units", "hidden2_units"),
    "loss": ("logits", "labels"),
    "training": ("loss", "learning_rate"),
    "evaluation": ("logits", "labels"),
}
# the module's constants, in an order where each is defined before it is read
CONSTANTS = {"NUM_CLASSES": "10", "IMAGE_SIZE": "28", "IMAGE_PIXELS": "IMAGE_SIZE * IMAGE_SIZE"}
# what each function reads of the module's constants
_READS = {"inference": ("IMAGE_PIXELS", "NUM_CLASSES")}
_LAYERS = ("hidden1", "hidden2", "softmax_linear")


@dataclass
class Expansion:
    module: cst.Module
    expanded: list[tuple[cst.CSTNode, str]] = field(default_factory=list)  # (original statement, function)


def _tutorial_function(node: cst.CSTNode, qualname) -> str | None:
    """``inference`` for a call of the tutorial's ``inference``, etc."""
    if not isinstance(node, cst.Call):
        return None
    q = qualname(node.func) or ""
    module, _, name = q.rpartition(".")
    return name if module == MODULE and name in FUNCTIONS else None


def _simple(node: cst.BaseExpression) -> bool:
    """A value the expansion may read where the function read its parameter:
    a name, an attribute of one (`FLAGS.hidden1`), a number."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, (cst.Name, cst.Integer, cst.Float))


def _bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    if any(a.star for a in call.args):
        return None
    bound: dict[str, cst.BaseExpression] = {}
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) > len(params):
        return None
    for p, a in zip(params, positional):
        bound[p] = a.value
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value not in params or a.keyword.value in bound:
                return None
            bound[a.keyword.value] = a.value
    return bound if len(bound) == len(params) else None


class _Spelling:
    """How the file names TensorFlow: TF2-valid ops through its alias, the
    TF1 optimizer and summary through ``compat.v1`` when the alias is
    TensorFlow's root."""

    def __init__(self, alias: str, v1: bool):
        self.tf = alias
        self.v1 = alias if v1 else f"{alias}.compat.v1"


def _statements(fn: str, args: dict[str, cst.BaseExpression], result: str, spell: _Spelling,
                taken: set[str]) -> list[str]:
    """The statements of the tutorial's ``fn`` binding its value to ``result``."""
    tf, v1 = spell.tf, spell.v1
    lines: list[str] = []
    values: dict[str, str] = {}
    for param, value in args.items():
        if _simple(value):
            values[param] = C.code_of(value)
        else:
            # evaluated once, before the function's own statements, as the call evaluated it
            name = C.fresh(param, taken)
            lines.append(f"{name} = {C.code_of(value)}")
            values[param] = name
    if fn == "inference":
        layer_in, units_in = values["images"], "IMAGE_PIXELS"
        outputs = (values["hidden1_units"], values["hidden2_units"], "NUM_CLASSES")
        for k, (scope, units_out) in enumerate(zip(_LAYERS, outputs)):
            weights, biases = C.fresh(f"{scope}_weights", taken), C.fresh(f"{scope}_biases", taken)
            last = k == len(_LAYERS) - 1
            out = result if last else C.fresh(scope, taken)
            lines.append(f"{weights} = {tf}.Variable({tf}.random.truncated_normal([{units_in}, {units_out}],"
                         f" stddev=1.0 / math.sqrt(float({units_in}))), name=\"{scope}/weights\")")
            lines.append(f"{biases} = {tf}.Variable({tf}.zeros([{units_out}]), name=\"{scope}/biases\")")
            linear = f"{tf}.matmul({layer_in}, {weights}) + {biases}"
            lines.append(f"{out} = {linear}" if last else f"{out} = {tf}.nn.relu({linear})")
            layer_in, units_in = out, units_out
    elif fn == "loss":
        lines.append(f"{result} = {tf}.reduce_mean({tf}.nn.sparse_softmax_cross_entropy_with_logits("
                     f"labels={tf}.cast({values['labels']}, {tf}.int64), logits={values['logits']}))")
    elif fn == "training":
        loss = values["loss"]
        optimizer, step = C.fresh("optimizer", taken), C.fresh("global_step", taken)
        lines.append(f"{v1}.summary.scalar(\"loss\", {loss})")
        lines.append(f"{optimizer} = {v1}.train.GradientDescentOptimizer({values['learning_rate']})")
        lines.append(f"{step} = {tf}.Variable(0, name=\"global_step\", trainable=False)")
        lines.append(f"{result} = {optimizer}.minimize({loss}, global_step={step})")
    else:
        lines.append(f"{result} = {tf}.reduce_sum({tf}.cast({tf}.math.in_top_k(predictions={values['logits']},"
                     f" targets={values['labels']}, k=1), {tf}.int32))")
    return lines


# what each written-out function is, for the report
SUMMARY = {
    "inference": "its three layers' variables (truncated-normal weights, standard deviation 1/sqrt(inputs), zero"
                 " biases; TF1's names `hidden1/weights`...) and their ReLU, ReLU, linear computation",
    "loss": "the batch mean of the sparse softmax cross-entropy",
    "training": "the loss summary, a GradientDescentOptimizer minimizing the loss, and its own global step",
    "evaluation": "the count of the batch's examples whose top logit is their label",
}
_COMMENTS = {
    "inference": "# The MNIST tutorial's model: two ReLU layers and a linear one giving the logits",
    "loss": "# The mean cross-entropy of the batch",
    "training": "# Plain gradient descent; the loss is also a summary",
    "evaluation": "# How many of the batch's examples are classified right",
}


def _aliases(module: cst.Module) -> set[str]:
    """The local names the file binds to the tutorial module at its top."""
    aliases: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                source = C.code_of(small.module) if small.module is not None and not small.relative else ""
                for alias in small.names:
                    if f"{source}.{C.code_of(alias.name)}" == "tensorflow." + MODULE:
                        aliases.add(C.code_of((alias.asname or alias).name))
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    if C.code_of(alias.name) == "tensorflow." + MODULE and alias.asname is not None:
                        aliases.add(C.code_of(alias.asname.name))
    return aliases


class _Expand(cst.CSTTransformer):
    def __init__(self, qualname, aliases: set[str], spell: _Spelling, taken: set[str]):
        super().__init__()
        self.qualname = qualname
        self.aliases = aliases
        self.spell = spell
        self.top = taken  # the module's names: new names of a function avoid them and its own
        self.scopes: list[set[str]] = [taken]
        self.expanded: list[tuple[cst.CSTNode, str]] = []
        self.constants: set[str] = set()

    def _expand_statement(self, statement: cst.SimpleStatementLine) -> list[cst.BaseStatement] | None:
        if len(statement.body) != 1:
            return None
        small = statement.body[0]
        result = None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                     cst.Name):
            call, result = small.value, small.targets[0].target.value
        elif isinstance(small, cst.Return) and small.value is not None:
            call = small.value
        else:
            return None
        fn = _tutorial_function(call, self.qualname)
        if fn is None:
            return None
        args = _bind(call, FUNCTIONS[fn])
        if args is None or any(self._reads_module(v) for v in args.values()):
            return None
        returned = result is None
        if returned:
            result = C.fresh({"inference": "logits", "loss": "loss", "training": "train_op",
                              "evaluation": "correct"}[fn], self.taken)
        lines = _statements(fn, args, result, self.spell, self.taken)
        if returned:
            lines.append(f"return {result}")
        self.constants.update(_READS.get(fn, ()))
        out = [C.stmt(line) for line in lines]
        comments = [*statement.leading_lines, cst.EmptyLine(comment=cst.Comment(_COMMENTS[fn]))]
        out[0] = out[0].with_changes(leading_lines=comments)
        self.expanded.append((statement, fn))
        return out

    def _reads_module(self, node: cst.CSTNode) -> bool:
        return any(type(n) is cst.Name and n.value in self.aliases for n in C.walk(node))

    def _block(self, body) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for statement in body:
            new = self._expand_statement(statement) if isinstance(statement, cst.SimpleStatementLine) else None
            out.extend(new if new is not None else [statement])
        return out

    @property
    def taken(self) -> set[str]:
        return self.scopes[-1]

    def visit_FunctionDef(self, node):
        self.scopes.append(self.top | C.all_names(node))

    def leave_FunctionDef(self, original, updated):
        self.scopes.pop()
        return updated

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._block(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._block(updated.body))

    def leave_Attribute(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value in self.aliases and (
                updated.attr.value in CONSTANTS):
            self.constants.add(updated.attr.value)
            return cst.Name(updated.attr.value)
        return updated


def expand(module: cst.Module, qualname, names) -> Expansion | None:
    """The module with every ``x = mnist.f(...)`` (and ``return
    mnist.f(...)``) statement of the tutorial module written out, the
    module's constants it reads defined after its imports and the import
    gone; None when the module is not imported, or a use of it is left
    that this cannot write out (the module would still be needed)."""
    aliases = _aliases(module)
    if not aliases:
        return None
    alias, v1 = names.root_alias(), False
    if alias is None:
        alias, v1 = next((local for local in names.bindings if names.is_v1_alias(local)), None), True
    if alias is None:
        return None
    taken = C.all_names(module)
    if taken & set(CONSTANTS):
        return None  # names of the file's own the constants would shadow
    expander = _Expand(qualname, aliases, _Spelling(alias, v1), _top_names(module) | set(CONSTANTS))
    expanded = fastcst.transform(module, expander)  # (libcst's visit rebuilds every node)
    if not expander.expanded:
        return None
    # any other use of the module (a function not written out, the module passed on) keeps it
    if any(type(n) is cst.Name and n.value in aliases for st in expanded.body if not _is_import(st)
           for n in C.walk(st)):
        return None
    return Expansion(_without_import(expanded, aliases, expander.constants), expander.expanded)


def _top_names(module: cst.Module) -> set[str]:
    """The names the module binds at its top (functions, classes, assignments, imports)."""
    out: set[str] = set()
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            out.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        out.update(C.target_names(target.target))
                elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    out.update(C.code_of((a.asname or a).name).split(".")[0] for a in small.names)
        else:
            out |= C.all_names(statement)  # bound in an `if`/`try` at the top: all taken
    return out


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _without_import(module: cst.Module, aliases: set[str], constants: set[str]) -> cst.Module:
    """The tutorial import gone (``import math`` in its place when the file
    has none: the initializers' standard deviation), the module's constants
    the program reads defined after the file's imports."""
    needs_math = "IMAGE_PIXELS" in constants and not any(
        isinstance(s, cst.Import) and any(C.code_of(a.name) == "math" and a.asname is None for a in s.names)
        for st in module.body if _is_import(st) for s in st.body)
    body: list[cst.BaseStatement] = []
    last_import = -1
    for statement in module.body:
        if _is_import(statement):
            kept = [s for s in (_drop_alias(small, aliases) for small in statement.body) if s is not None]
            if kept != list(statement.body):
                if needs_math:
                    body.append(C.stmt("import math").with_changes(leading_lines=statement.leading_lines))
                    needs_math = False
                    last_import = len(body) - 1
                if not kept:
                    continue
                statement = statement.with_changes(body=kept)
            body.append(statement)
            last_import = len(body) - 1
        else:
            body.append(statement)
    wanted = [name for name in CONSTANTS if name in constants or (name == "IMAGE_SIZE" and "IMAGE_PIXELS" in constants)]
    if wanted:
        defined = [C.stmt(f"{name} = {CONSTANTS[name]}") for name in wanted]
        defined[0] = defined[0].with_changes(leading_lines=[
            cst.EmptyLine(), cst.EmptyLine(comment=cst.Comment("# MNIST: 28x28 images of the digits 0 to 9"))])
        body[last_import + 1:last_import + 1] = defined
    return module.with_changes(body=body)


def _drop_alias(small: cst.BaseSmallStatement, aliases: set[str]) -> cst.BaseSmallStatement | None:
    """The import without its binding of the tutorial module; None when that was all it bound."""
    if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
        names = [a for a in small.names if C.code_of((a.asname or a).name) not in aliases]
    elif isinstance(small, cst.Import):
        names = [a for a in small.names if a.asname is None or C.code_of(a.asname.name) not in aliases]
    else:
        return small
    if len(names) == len(small.names):
        return small
    if not names:
        return None
    names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return small.with_changes(names=names)


def why_not(module: cst.Module, qualname, names) -> str | None:
    """Why :func:`expand` cannot write the tutorial module out of this file
    (the first use it leaves, located by its code); None when it can, or
    the module is not imported."""
    aliases = _aliases(module)
    if not aliases or expand(module, qualname, names) is not None:
        return None
    if names.root_alias() is None and not any(names.is_v1_alias(local) for local in names.bindings):
        return "the file binds no name to TensorFlow itself to spell the tutorial's code with"
    if C.all_names(module) & set(CONSTANTS):
        clash = min(C.all_names(module) & set(CONSTANTS))
        return f"the file has a `{clash}` of its own, which the tutorial's constant would shadow"
    for node in C.walk(module):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in aliases:
            if node.attr.value in CONSTANTS:
                continue
            return f"`{C.code_of(node)}` is used otherwise than as a statement `name = {C.code_of(node)}(...)`"
    return "the module is used otherwise than through its functions and constants"
