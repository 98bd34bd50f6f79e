"""TFM300 inline-graph-builder: a helper building the train op, called in the
device-setter block, is inlined there so TFM301 can migrate the training."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import children, transform
from migrate.codemod.program.model import ProgramModel
from migrate.codemod.program.project import ProjectModule
from migrate.codemod.program.tracing import own_scope
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _device_modes, _tutorial_mnist
from migrate.codemod.rules._graph import _is_optimizer, is_device_item
from migrate.codemod.rules._tfm301_session import SESSION_CLASSES, SUPERVISOR_SESSION_METHODS

_TRAIN_METHODS = ("minimize", "apply_gradients")
# calls that read or change the scope they run in: inlining would change what they see
_SCOPE_CALLS = {"locals", "vars", "globals", "eval", "exec", "dir", "super"}
_SCOPE_ITEMS = ("name_scope", "variable_scope")


def _optimizer_like(q: str | None) -> bool:
    """A TF1 optimizer (SyncReplicas too) or a Keras one: what TFM301 takes
    as the owner of the train op's ``minimize``/``apply_gradients``."""
    if not q:
        return False
    if _is_optimizer(q) or q == "train.SyncReplicasOptimizer":
        return True
    return q.startswith(("keras.optimizers.", "optimizers.")) and ".schedules." not in q


def _target_names(target: cst.BaseExpression) -> set[str]:
    return set(C.target_names(target))


def _walk(node: cst.CSTNode, skip: cst.CSTNode | None = None):
    """Every node under ``node`` (source order), without the subtree ``skip``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n is skip:
            continue
        yield n
        stack.extend(reversed(list(children(n))))


# the node types _bound_names reads (libcst's concrete classes have no subclasses)
_BINDING_KINDS = frozenset({
    cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.WithItem, cst.Del,
    cst.FunctionDef, cst.ClassDef, cst.Param, cst.ExceptHandler, cst.Global, cst.Nonlocal, cst.Import,
    cst.ImportFrom, cst.Match,
})


def _bound_names(node: cst.CSTNode, skip: cst.CSTNode | None = None) -> set[str] | None:
    """Every name bound anywhere under ``node`` (nested scopes included: the
    conservative answer); None when a binding cannot be read (``import *``,
    ``match``)."""
    out: set[str] = set()
    for n in _walk(node, skip):
        if type(n) not in _BINDING_KINDS:
            continue  # (most nodes: skips the isinstance chain, slow on libcst's ABC classes)
        if isinstance(n, cst.Assign):
            for t in n.targets:
                out |= _target_names(t.target)
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            out |= _target_names(n.target)
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            out |= _target_names(n.asname.name)
        elif isinstance(n, cst.Del):
            out |= _target_names(n.target)
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Param)):
            out.add(n.name.value)
        elif isinstance(n, cst.ExceptHandler) and n.name is not None:
            out |= _target_names(n.name.name)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            out |= {item.name.value for item in n.names}
        elif isinstance(n, (cst.Import, cst.ImportFrom)):
            if isinstance(n.names, cst.ImportStar):
                return None
            for alias in n.names:
                if alias.asname is not None:
                    out |= _target_names(alias.asname.name)
                else:
                    name = alias.name
                    while isinstance(name, cst.Attribute):
                        name = name.value
                    out.add(name.value)
        elif isinstance(n, cst.Match):
            return None
    return out


def _called_names(module: cst.Module) -> set[str]:
    """The names called in the module, as ``name(...)`` or ``alias.name(...)``."""
    called = set()
    for call in C.calls_in(module):
        func = call.func
        if type(func) is cst.Name:
            called.add(func.value)
        elif type(func) is cst.Attribute and type(func.value) is cst.Name:
            called.add(f"{func.value.value}.{func.attr.value}")
    return called


def _all_names(node: cst.CSTNode, skip: cst.CSTNode | None = None) -> set[str]:
    """Names read or bound under ``node`` (not attribute names, not keywords)."""
    names: list[cst.Name] = []
    not_names: set[int] = set()
    for n in _walk(node, skip):
        kind = type(n)
        if kind is cst.Name:
            names.append(n)
        elif kind is cst.Attribute:
            not_names.add(id(n.attr))
        elif kind is cst.Arg and n.keyword is not None:
            not_names.add(id(n.keyword))
    return {n.value for n in names if id(n) not in not_names}


def _literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, cst.UnaryOperation):
        return _literal(node.expression)
    if isinstance(node, cst.Tuple):
        return all(isinstance(el, cst.Element) and _literal(el.value) for el in node.elements)
    return False


def _pure(node: cst.BaseExpression) -> bool:
    """An expression that only reads names, attributes and constants: leaving
    it unevaluated changes nothing."""
    return not any(isinstance(n, (cst.Call, cst.Subscript, cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda))
                   for n in _walk(node))


def _comment_lines(text: str) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(comment=cst.Comment(f"# {line}".rstrip())) for line in inspect.cleandoc(text).splitlines()]


@dataclass
class _Helper:
    fn: cst.FunctionDef
    body: list[cst.BaseStatement]  # without the docstring and the return
    docstring: str | None
    ret: cst.SimpleStatementLine | None  # None: a procedure, called as a statement
    value: cst.BaseExpression | None  # what it returns
    returned: list[str] | dict[str, str] | str  # tuple of names / dict key -> name / one name
    locals: set[str]  # bound in its body
    free: set[str]  # read in its body, bound neither there nor as a parameter
    params: list[cst.Param] = field(default_factory=list)
    module: ProjectModule | None = None  # the sibling module defining it (None: this file)


@dataclass
class _Site:
    statement: cst.SimpleStatementLine
    call: cst.Call
    helper: _Helper
    scope: cst.CSTNode  # the function (or module) the device block is in
    chain: list[cst.FunctionDef]  # enclosing functions, outermost first


class InlineGraphBuilder(Rule):
    """What it does
    Inlines a graph-building helper into the device-setter block that calls
    it: in ``with tf.device(tf.train.replica_device_setter(...)):`` (or over a
    name bound to one just before), a statement ``a, b = helper(args)`` whose
    callee is a function defined once at the top of this file and builds a
    TF1 optimizer's train op (``minimize``/``apply_gradients``) becomes the
    helper's body: ``param = arg`` for each argument (defaults applied,
    keywords matched; nothing for an argument that is the parameter's own
    name), the body with its comments (a docstring becomes comments), then
    the call's targets bound to what the helper returned (nothing where the
    names coincide). A returned dict assigned to a name read only as
    ``model["key"]`` has those subscripts replaced by the returned names.
    The helper's ``def`` goes when nothing else in the file refers to it.
    Also inlined: a helper of a sibling module of the project called as
    ``alias.helper(args)`` after ``import alias`` (its module's names read
    through ``alias.NAME``, from its TF2 spelling; the module itself is left
    as it is); a procedure called as a statement ``helper(args)`` that builds
    the graph (and may run its session) and returns nothing, or that calls
    such a train-op builder, which the next round inlines; a block whose
    device function comes from a helper of this file that only builds the
    setter (``with tf.device(placement(cluster)):``), or that returns the
    setter on a cluster task and None on one machine (``device, target =
    device_and_target()``, which TFM301 carries over in both modes). First,
    the calls of TensorFlow's MNIST tutorial module (``from
    tensorflow.examples.tutorials.mnist import mnist``, not in TF 2) are
    written out as TF 1.x defined them (see ``_tutorial_mnist``): each
    ``name = mnist.inference/loss/training/evaluation(...)`` (or ``return``
    of one) becomes the tutorial's statements (three layers' variables with
    their TF1 names, the mean sparse cross-entropy, a GradientDescentOptimizer
    with its own global step and the loss summary), its constants
    (``mnist.IMAGE_PIXELS``) constants of the file, and the import goes.

    Why
    TFM301 migrates the train op an optimizer builds in the device-setter
    block; built in a helper (``global_step, loss, train_op =
    build_model(x, y_)``, a common TF1 layout) it declined the whole training.

    Example
        def build_model(x, y_, lr=0.01):
            loss = tf.reduce_mean(tf.square(model(x) - y_))
            train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss)
            return loss, train_op

        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 10])
            y_ = tf.placeholder(tf.float32, [None, 1])
            loss, train_op = build_model(x, y_)
    becomes a block holding ``lr = 0.01``, the ``loss`` and ``train_op`` lines,
    and no ``build_model``.

    Fix safety
    Safe: the inlined code runs the same statements in the same order with
    the same values. It is done only where nothing can tell the difference:
    the helper's locals (and parameters it gets as new names) are not read
    or bound anywhere else in the calling function (or module, at the top
    level), the names it reads from the module are not bound in the calling
    function, its only ``return`` ends it, it declares no ``global`` /
    ``nonlocal``, does not yield, is not decorated and looks nothing up in
    its own scope (``locals()``), its defaults are constants, and the call
    passes no ``*args``/``**kwargs``; a sibling module's helper reads
    TensorFlow under the names this file binds alike and no other import of
    its module, and its defaults are literals; a parameter of a procedure read
    only by its TF1 session's arguments (``is_chief``) is not bound, as the
    migrated training has no such session. Anything else is left as it is (TFM301
    then reports the train op coming from the helper). The engine keeps this
    rewrite only when TFM301 migrates the training it prepares. The tutorial's
    functions are written out only where every use of the module is such a
    statement or a constant; they compute what TF 1.15's module computed
    (its loss as ``tf.reduce_mean`` of the cross-entropy: the sum divided by
    the count, as ``tf.losses`` did with weights 1).
    """

    code = "TFM300"
    name = "inline-graph-builder"
    triggers = ("replica_device_setter",)

    VALID = (
        # not in a device-setter block
        Valid(
            """
            import tensorflow as tf


            def build_model(x):
                w = tf.Variable(tf.zeros([3, 1]))
                loss = tf.reduce_sum(tf.matmul(x, w))
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                return loss, train_op


            def main(cluster):
                setter = tf.train.replica_device_setter(cluster=cluster)
                x = tf.placeholder(tf.float32, [None, 3])
                loss, train_op = build_model(x)
            """
        ),
        # the helper builds no train op (TFM301 handles the optimizer from a helper itself)
        Valid(
            """
            import tensorflow as tf


            def make_optimizer(lr):
                return tf.train.AdamOptimizer(lr)


            def main(cluster):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    w = tf.Variable(tf.zeros([3, 1]))
                    loss = tf.reduce_sum(tf.matmul(x, w))
                    opt = make_optimizer(0.1)
                    train_op = opt.minimize(loss)
            """
        ),
        # the helper's local `w` is also a name of main: inlining would rebind it
        Valid(
            """
            import tensorflow as tf


            def build_model(x):
                w = tf.Variable(tf.zeros([3, 1]))
                loss = tf.reduce_sum(tf.matmul(x, w))
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                return loss, train_op


            def main(cluster, w):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    loss, train_op = build_model(x)
                print(w)
            """
        ),
        # an early return
        Valid(
            """
            import tensorflow as tf


            def build_model(x, sync):
                w = tf.Variable(tf.zeros([3, 1]))
                loss = tf.reduce_sum(tf.matmul(x, w))
                if not sync:
                    return loss, tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                train_op = tf.train.GradientDescentOptimizer(0.2).minimize(loss)
                return loss, train_op


            def main(cluster):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    loss, train_op = build_model(x, False)
            """
        ),
        # a missing argument (the call raised TypeError), *args, a global, a method
        Valid(
            """
            import tensorflow as tf

            STEP = None


            def build_model(x, y_, is_chief):
                loss = tf.reduce_sum(x - y_)
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                return loss, train_op


            def build_star(*tensors):
                loss = tf.add_n(tensors)
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                return loss, train_op


            def build_global(x):
                global STEP
                STEP = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(x, global_step=STEP)
                return train_op


            class Model:
                def build(self, x):
                    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(x)
                    return train_op


            def main(cluster, args):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    y_ = tf.placeholder(tf.float32, [None, 3])
                    loss, train_op = build_model(x, y_)
                    loss2, train_op2 = build_star(*args)
                    train_op3 = build_global(x)
                    train_op4 = Model().build(x)
            """
        ),
    )
    INVALID = (
        # TensorFlow's MNIST tutorial module, written out where the block calls it
        Invalid(
            """
            import math
            import tensorflow as tf
            from tensorflow.examples.tutorials.mnist import mnist

            def main(cluster, rate):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    images = tf.placeholder(tf.float32, [None, mnist.IMAGE_PIXELS])
                    labels = tf.placeholder(tf.int32, [None])
                    logits = mnist.inference(images, 32, 16)
                    loss = mnist.loss(logits, labels)
                    train_op = mnist.training(loss, rate)
                return train_op
            """,
            expected="""
            import math
            import tensorflow as tf

            # MNIST: 28x28 images of the digits 0 to 9
            NUM_CLASSES = 10
            IMAGE_SIZE = 28
            IMAGE_PIXELS = IMAGE_SIZE * IMAGE_SIZE

            def main(cluster, rate):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    images = tf.placeholder(tf.float32, [None, IMAGE_PIXELS])
                    labels = tf.placeholder(tf.int32, [None])
                    # The MNIST tutorial's model: two ReLU layers and a linear one giving the logits
                    hidden1_weights = tf.Variable(tf.random.truncated_normal([IMAGE_PIXELS, 32], stddev=1.0 / math.sqrt(float(IMAGE_PIXELS))), name="hidden1/weights")
                    hidden1_biases = tf.Variable(tf.zeros([32]), name="hidden1/biases")
                    hidden1 = tf.nn.relu(tf.matmul(images, hidden1_weights) + hidden1_biases)
                    hidden2_weights = tf.Variable(tf.random.truncated_normal([32, 16], stddev=1.0 / math.sqrt(float(32))), name="hidden2/weights")
                    hidden2_biases = tf.Variable(tf.zeros([16]), name="hidden2/biases")
                    hidden2 = tf.nn.relu(tf.matmul(hidden1, hidden2_weights) + hidden2_biases)
                    softmax_linear_weights = tf.Variable(tf.random.truncated_normal([16, NUM_CLASSES], stddev=1.0 / math.sqrt(float(16))), name="softmax_linear/weights")
                    softmax_linear_biases = tf.Variable(tf.zeros([NUM_CLASSES]), name="softmax_linear/biases")
                    logits = tf.matmul(hidden2, softmax_linear_weights) + softmax_linear_biases
                    # The mean cross-entropy of the batch
                    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int64), logits=logits))
                    # Plain gradient descent; the loss is also a summary
                    tf.compat.v1.summary.scalar("loss", loss)
                    optimizer = tf.compat.v1.train.GradientDescentOptimizer(rate)
                    global_step = tf.Variable(0, name="global_step", trainable=False)
                    train_op = optimizer.minimize(loss, global_step=global_step)
                return train_op
            """,
        ),
        # tuple return, names coincide; the helper goes with its comments
        Invalid(
            """
            import tensorflow as tf


            # Builds the whole training graph.
            def build_model(x, y_, is_chief):
                \"\"\"Returns the global step, the loss and the train op.\"\"\"
                w = tf.Variable(tf.zeros([3, 1]))  # the weights
                global_step = tf.Variable(0, trainable=False)
                # mean squared error
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y_))
                train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=global_step)
                return global_step, loss, train_op


            def main(cluster, is_chief):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    y_ = tf.placeholder(tf.float32, [None, 1])
                    # the training graph
                    global_step, loss, train_op = build_model(x, y_, is_chief)
                with tf.train.MonitoredTrainingSession(is_chief=is_chief) as sess:
                    sess.run(train_op)
            """,
            """
            import tensorflow as tf


            def main(cluster, is_chief):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32, [None, 3])
                    y_ = tf.placeholder(tf.float32, [None, 1])
                    # the training graph
                    # Builds the whole training graph.
                    # Returns the global step, the loss and the train op.
                    w = tf.Variable(tf.zeros([3, 1]))  # the weights
                    global_step = tf.Variable(0, trainable=False)
                    # mean squared error
                    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y_))
                    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=global_step)
                with tf.train.MonitoredTrainingSession(is_chief=is_chief) as sess:
                    sess.run(train_op)
            """,
        ),
        # single name, keyword argument, default, other target names (`decay`, which the helper
        # never reads, takes no assignment); a setter bound to a name; the helper is kept:
        # something else calls it
        Invalid(
            """
            import tensorflow as tf


            def get_train_op(inputs, labels, lr=0.5, decay=None):
                logits = tf.layers.dense(inputs, 1)
                cost = tf.reduce_mean(tf.square(logits - labels))
                op = tf.train.AdamOptimizer(lr).minimize(cost)
                return op


            def main(cluster, flags):
                setter = tf.train.replica_device_setter(cluster=cluster)
                with tf.device(setter):
                    x = tf.placeholder(tf.float32, [None, 3])
                    y = tf.placeholder(tf.float32, [None, 1])
                    train_op = get_train_op(x, labels=y, decay=flags.decay)


            def evaluate(x, y):
                return get_train_op(x, y)
            """,
            """
            import tensorflow as tf


            def get_train_op(inputs, labels, lr=0.5, decay=None):
                logits = tf.layers.dense(inputs, 1)
                cost = tf.reduce_mean(tf.square(logits - labels))
                op = tf.train.AdamOptimizer(lr).minimize(cost)
                return op


            def main(cluster, flags):
                setter = tf.train.replica_device_setter(cluster=cluster)
                with tf.device(setter):
                    x = tf.placeholder(tf.float32, [None, 3])
                    y = tf.placeholder(tf.float32, [None, 1])
                    inputs = x
                    labels = y
                    lr = 0.5
                    logits = tf.layers.dense(inputs, 1)
                    cost = tf.reduce_mean(tf.square(logits - labels))
                    op = tf.train.AdamOptimizer(lr).minimize(cost)
                    train_op = op


            def evaluate(x, y):
                return get_train_op(x, y)
            """,
        ),
        # a target `_` unused elsewhere takes nothing; a parameter the helper never reads gets no
        # assignment (here `is_chief`, which the caller also has); a module-level call site
        Invalid(
            """
            import tensorflow as tf

            is_chief = True


            def build_model(x, is_chief):
                global_step = tf.train.get_or_create_global_step()
                loss = tf.reduce_sum(x)
                train_op = tf.train.AdamOptimizer().minimize(loss, global_step=global_step)
                return global_step, loss, train_op


            with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                x = tf.placeholder(tf.float32)
                _, loss, train_op = build_model(x, is_chief=not is_chief)  # the graph
            print(is_chief)
            """,
            """
            import tensorflow as tf

            is_chief = True


            with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                x = tf.placeholder(tf.float32)
                # the graph
                global_step = tf.train.get_or_create_global_step()
                loss = tf.reduce_sum(x)
                train_op = tf.train.AdamOptimizer().minimize(loss, global_step=global_step)
            print(is_chief)
            """,
        ),
        # a returned dict read as model["key"]: the subscripts become the names
        Invalid(
            """
            import tensorflow as tf


            def get_model(x, y, learning_rate):
                prediction = tf.layers.dense(x, 1)
                loss = tf.reduce_mean(tf.square(prediction - y))
                global_step = tf.train.get_or_create_global_step()
                optimizer = tf.train.GradientDescentOptimizer(learning_rate)
                train_op = optimizer.minimize(loss, global_step=global_step)
                return {"train_op": train_op, "loss": loss, "global_step": global_step}


            def main(server, FLAGS):
                with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                    x = tf.placeholder(tf.float32)
                    y = tf.placeholder(tf.float32)
                    model = get_model(x, y, FLAGS.learning_rate)
                with tf.train.MonitoredTrainingSession(master=server.target) as sess:
                    while not sess.should_stop():
                        _, loss_value = sess.run([model["train_op"], model["loss"]], feed_dict={x: 1.0, y: 2.0})
            """,
            """
            import tensorflow as tf


            def main(server, FLAGS):
                with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                    x = tf.placeholder(tf.float32)
                    y = tf.placeholder(tf.float32)
                    learning_rate = FLAGS.learning_rate
                    prediction = tf.layers.dense(x, 1)
                    loss = tf.reduce_mean(tf.square(prediction - y))
                    global_step = tf.train.get_or_create_global_step()
                    optimizer = tf.train.GradientDescentOptimizer(learning_rate)
                    train_op = optimizer.minimize(loss, global_step=global_step)
                with tf.train.MonitoredTrainingSession(master=server.target) as sess:
                    while not sess.should_stop():
                        _, loss_value = sess.run([train_op, loss], feed_dict={x: 1.0, y: 2.0})
            """,
        ),
        # a returned dict used otherwise (passed on whole): bound as the dict
        Invalid(
            """
            import tensorflow as tf


            def get_model(x):
                loss = tf.reduce_sum(x)
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                return {"train_op": train_op, "loss": loss}


            def main(cluster, report):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32)
                    model = get_model(x)
                report(model)
            """,
            """
            import tensorflow as tf


            def main(cluster, report):
                with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                    x = tf.placeholder(tf.float32)
                    loss = tf.reduce_sum(x)
                    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
                    model = {"train_op": train_op, "loss": loss}
                report(model)
            """,
        ),
    )

    # ------------------------------------------------------------ driver
    def transform(self, module: cst.Module) -> cst.Module:
        module = self._write_out_tutorial(module)
        # a procedure inlined brings the calls of the helpers it used into the block: those
        # are inlined in the next round
        for _ in range(3):
            inlined = self._inline_round(module)
            if inlined is module:
                break
            module = inlined
        return module

    def _write_out_tutorial(self, module: cst.Module) -> cst.Module:
        """The calls of TensorFlow's MNIST tutorial module (gone in TF 2)
        written out as TensorFlow defined them (see _tutorial_mnist): its
        train op is then built where TFM301 migrates it."""
        expansion = _tutorial_mnist.expand(module, self.qualname, self.ctx.names)
        if expansion is None:
            return module
        for statement, fn in expansion.expanded:
            self.report(statement, f"`{fn}(...)` of TensorFlow's MNIST tutorial module"
                        f" (`tensorflow.{_tutorial_mnist.MODULE}`, which TF 2 no longer ships) written out here as"
                        f" TensorFlow 1.x defined it: {_tutorial_mnist.SUMMARY[fn]}", fixed=True, severity="info")
        return expansion.module

    def _inline_round(self, module: cst.Module) -> cst.Module:
        helpers = self._helpers(module)
        if not helpers:
            return module
        sites = self._sites(module, helpers)
        by_scope: dict[int, list[_Site]] = {}
        for site in sites:
            by_scope.setdefault(id(site.scope), []).append(site)
        # one inlining per scope: two would bind the same names twice, unseen by the clash check
        sites = [found[0] for found in by_scope.values() if len(found) == 1]
        if not sites:
            return module
        references = self._references(module, {s.helper.fn.name.value for s in sites})
        replacements: dict[int, list[cst.BaseStatement]] = {}
        subscripts: dict[int, cst.BaseExpression] = {}
        inlined: dict[str, int] = {}
        planned = []
        for site in sites:
            plan = self._plan(module, site)
            if plan is None:
                continue
            planned.append((site, plan))
            name = site.helper.fn.name.value
            inlined[name] = inlined.get(name, 0) + 1
        removed = {name for name, n in inlined.items() if references.get(name, 0) == n}
        for site, (assignments, mapping, subs) in planned:
            sibling = site.helper.module
            drop_def = sibling is None and site.helper.fn.name.value in removed
            replacements[id(site.statement)] = self._inlined(site, assignments, mapping, drop_def)
            subscripts.update(subs)
            if sibling is None:
                self.report(site.statement, f"`{site.helper.fn.name.value}(...)` inlined into the device-setter"
                            " block: its train op is now built there, where TFM301 migrates it", fixed=True,
                            severity="info")
            else:
                self.report(site.statement, f"`{C.code_of(site.call.func)}(...)` of the project module"
                            f" `{sibling.name}` ({_relative(sibling.path, self.ctx.path)}) inlined into the"
                            " device-setter block, its module's names read through"
                            f" `{C.code_of(site.call.func.value)}`: its train op is now built there, where TFM301"
                            f" migrates it; `{sibling.name}` itself is left as it is (its"
                            f" `{site.helper.fn.name.value}()` still builds the TF1 train op for other callers)",
                            fixed=True, severity="info")
        if not replacements:
            return module
        removed_defs = {id(h.fn) for h in helpers.values() if h.fn.name.value in removed}
        return transform(module, _Apply(replacements, subscripts, removed_defs))

    # ------------------------------------------------------------ helpers
    def _helpers(self, module: cst.Module) -> dict[str, _Helper]:
        """Module functions defined once (no other module-level binding of the
        name) that build a train op and have a shape that can be inlined."""
        counts: dict[str, int] = {}
        defs: dict[str, cst.FunctionDef] = {}
        for statement in module.body:
            bound = _bound_names(statement) if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else {
                statement.name.value}
            if bound is None:
                return {}  # `from x import *` at the top: names of unknown origin
            for name in bound:
                counts[name] = counts.get(name, 0) + 1
            if isinstance(statement, cst.FunctionDef):
                defs[statement.name.value] = statement
        # names other functions declare global are bound there too
        for node in C.walk(module):
            if isinstance(node, cst.Global):
                for item in node.names:
                    counts[item.name.value] = counts.get(item.name.value, 0) + 1
        out = {}
        # only a function called somewhere (`name(...)`, `alias.name(...)`) can be inlined at a
        # call site, or be called by a procedure that is: the others (`main`, run by
        # `tf.app.run()`) are not analysed, as they are the largest functions of a script
        called = _called_names(module)
        builders = {name for name, fn in defs.items()
                    if counts.get(name) == 1 and name in called and self._builds_train_op(fn)}
        for name, fn in defs.items():
            if counts.get(name) != 1 or name not in called:
                continue
            if name not in builders and not self._procedure_calling(fn, builders):
                continue
            helper = self._helper(fn)
            if helper is not None:
                out[name] = helper
        # functions of the project's sibling modules, called as `alias.name(...)`
        for alias, name, fn, project in self._program().sibling_functions(self.ctx.names.bindings):
            if counts.get(alias) != 1 or f"{alias}.{name}" not in called or not self._builds_train_op(fn):
                continue
            helper = self._helper(fn)
            if helper is not None:
                helper.module = project
                out[f"{alias}.{name}"] = helper
        return out

    def _program(self) -> ProgramModel:
        program = self.__dict__.get("_program_model")
        if program is None:
            program = self._program_model = ProgramModel(self.ctx.module, self.qualname, self.ctx.path)
        return program

    def _procedure_calling(self, fn: cst.FunctionDef, builders: set[str]) -> bool:
        """A function with no ``return`` that calls a train-op builder of this
        file as ``targets = builder(...)``: inlined, it brings that call into
        the block, where the next round inlines it."""
        for statement in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ():
            names, value, _ = C.assignment(statement)
            if names and isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and (
                    value.func.value in builders):
                # (the walk for a `return` last: it is the costly part)
                return not any(isinstance(node, cst.Return) for node in own_scope(fn.body))
        return False

    def _builds_train_op(self, fn: cst.FunctionDef) -> bool:
        optimizers: set[str] = {p.name.value for p in _params(fn.params)}
        for node in C.walk(fn.body):
            names, value, _ = C.assignment(node)
            if isinstance(value, cst.Call) and (
                    _optimizer_like(self.qualname(value.func))
                    or (isinstance(value.func, cst.Name) and self.qualname(value.func) is None)):
                optimizers.update(names)
        for call in C.calls_in(fn.body):
            if not (isinstance(call.func, cst.Attribute) and call.func.attr.value in _TRAIN_METHODS):
                continue
            owner = call.func.value
            if isinstance(owner, cst.Call) and _optimizer_like(self.qualname(owner.func)):
                return True
            if isinstance(owner, cst.Name) and owner.value in optimizers:
                return True
        return False

    def _helper(self, fn: cst.FunctionDef) -> _Helper | None:
        if fn.decorators or fn.asynchronous is not None or not isinstance(fn.body, cst.IndentedBlock):
            return None
        params = fn.params
        if not isinstance(params.star_arg, (cst.MaybeSentinel, cst.ParamStar)) or params.star_kwarg is not None:
            return None
        body = list(fn.body.body)
        if not body:
            return None
        ret = body[-1]
        procedure = not any(isinstance(node, cst.Return) for node in own_scope(fn.body))
        if procedure:
            # builds the graph (and maybe runs its session) and returns nothing: called as a statement
            ret = None
        elif not (isinstance(ret, cst.SimpleStatementLine) and len(ret.body) == 1
                  and isinstance(ret.body[0], cst.Return) and ret.body[0].value is not None):
            return None
        for node in own_scope(fn.body):
            if isinstance(node, (cst.Yield, cst.Await, cst.Global, cst.Nonlocal)):
                return None
            if isinstance(node, cst.Return) and node is not ret.body[0]:
                return None
        attribute_names = {id(node.attr) for node in C.walk(fn.body) if isinstance(node, cst.Attribute)}
        for node in C.walk(fn.body):
            if isinstance(node, (cst.Global, cst.Nonlocal)):
                return None
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _SCOPE_CALLS:
                return None
            if isinstance(node, cst.Name) and node.value == fn.name.value and id(node) not in attribute_names:
                return None  # recursive (`tf.train.X` in a helper named `train` is no call of it)
        value = ret.body[0].value if ret is not None else None
        returned = _returned(value) if value is not None else ()
        if returned is None:
            return None
        docstring = None
        first = C.single_expr(body[0])
        if isinstance(first, cst.SimpleString) and len(body) > 1:
            text = first.evaluated_value
            docstring = text if isinstance(text, str) else None
            body = body[1:]
        if ret is not None:
            body = body[:-1]
        if not body:
            return None
        local = _bound_names(fn.body)
        if local is None:
            return None
        param_names = {p.name.value for p in _params(params)}
        free = _all_names(fn.body) - local - param_names
        return _Helper(fn=fn, body=body, docstring=docstring, ret=ret, value=value, returned=returned,
                       locals=local, free=free, params=_params(params))

    # ------------------------------------------------------------ call sites
    def _sites(self, module: cst.Module, helpers: dict[str, _Helper]) -> list[_Site]:
        sites: list[_Site] = []

        def visit(node: cst.CSTNode, scope: cst.CSTNode, chain: list[cst.FunctionDef]) -> None:
            if isinstance(node, cst.FunctionDef):
                scope, chain = node, [*chain, node]
            elif isinstance(node, (cst.ClassDef, cst.Lambda)):
                scope = node
            if isinstance(node, (cst.Module, cst.IndentedBlock)):
                body = node.body
                for i, statement in enumerate(body):
                    if self._is_setter_block(statement, body[:i], module):
                        for found in self._calls_in_block(statement, helpers):
                            if isinstance(scope, (cst.Module, cst.FunctionDef)):
                                sites.append(_Site(found[0], found[1], found[2], scope, chain))
            for child in children(node):
                visit(child, scope, chain)

        visit(module, module, [])
        return sites

    def _is_setter_block(self, statement, before, module: cst.Module | None = None) -> bool:
        """TFM301's device-setter block: `with tf.device(replica_device_setter(...)):`
        or `with tf.device(setter):` after `setter = replica_device_setter(...)`."""
        if not isinstance(statement, cst.With) or len(statement.items) != 1:
            return False
        item = statement.items[0].item
        if not isinstance(item, cst.Call) or self.qualname(item.func) != "device":
            return False
        target = C.arg(item, 0, None)
        if isinstance(target, cst.Call):
            return self.qualname(target.func) == "train.replica_device_setter" or self._setter_helper(target)
        if isinstance(target, cst.Name):
            for earlier in before:
                names, value, _ = C.assignment(earlier)
                if names == [target.value] and isinstance(value, cst.Call) and (
                        self.qualname(value.func) == "train.replica_device_setter" or self._setter_helper(value)):
                    return True
                # `device, target = device_and_target()`: a setter on a cluster task, None on one machine
                modes = _device_modes.find(module, earlier, target.value, self.qualname) if (
                    target.value in names and module is not None) else None
                if modes is not None and modes.why is None:
                    return True
        return False

    def _setter_helper(self, call: cst.Call) -> bool:
        """A call of a function of this file that only builds the device setter
        (TFM301 takes its block as it takes the setter's own)."""
        helper = self._program().device_helper(call)
        return helper is not None and helper.function is not None

    def _calls_in_block(self, block: cst.With, helpers):
        """(statement, call, helper) for each `targets = helper(...)` of the
        block's graph part (before a session starts), also in nested
        name/variable-scope and device-string blocks."""
        for statement in C.body_of(block.body):
            if self._starts_session(statement):
                return
            if isinstance(statement, cst.With) and all(
                    (isinstance(i.item, cst.Call) and self.qualname(i.item.func) in _SCOPE_ITEMS)
                    or is_device_item(i, self.qualname) for i in statement.items):
                yield from self._calls_in_block(statement, helpers)
                continue
            if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
                continue
            small = statement.body[0]
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Name) and func.value in helpers and helpers[func.value].ret is None:
                    yield statement, small.value, helpers[func.value]
                continue
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)):
                continue
            func = small.value.func
            if isinstance(func, cst.Name) and func.value in helpers and helpers[func.value].ret is not None:
                yield statement, small.value, helpers[func.value]
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and (
                    f"{func.value.value}.{func.attr.value}" in helpers) and (
                    helpers[f"{func.value.value}.{func.attr.value}"].ret is not None):
                yield statement, small.value, helpers[f"{func.value.value}.{func.attr.value}"]

    def _starts_session(self, statement) -> bool:
        for node in C.walk(statement):
            if isinstance(node, cst.Call):
                if self.qualname(node.func) in SESSION_CLASSES | {"train.Supervisor"}:
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in SUPERVISOR_SESSION_METHODS:
                    return True
        return False

    # ------------------------------------------------------------ planning
    def _plan(self, module: cst.Module, site: _Site):
        """(param assignments, target <- returned assignments, subscript
        replacements), or None when inlining this call is not safe."""
        helper, call = site.helper, site.call
        bindings = _bind_arguments(helper.fn.params, call)
        if bindings is None:
            return None
        if helper.ret is None:  # `helper(...)` as a statement: nothing is bound
            target, targets = None, []
        else:
            target = site.statement.body[0].targets[0].target
        if target is None:
            pass
        elif isinstance(target, cst.Name):
            targets: list[str] | str = target.value
        elif isinstance(target, (cst.Tuple, cst.List)) and all(
                isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in target.elements):
            targets = [el.value.value for el in target.elements]
            if len(set(targets)) != len(targets):
                return None
        else:
            return None
        target_set = {targets} if isinstance(targets, str) else set(targets)

        # what the enclosing scope uses besides this statement, and the names the arguments read
        if isinstance(site.scope, cst.Module):
            elsewhere = _module_names_outside(module, helper.fn, site.statement)
        else:
            elsewhere = _all_names(site.scope, skip=site.statement)
        for a in call.args:
            elsewhere |= _all_names(a.value)

        assignments: list[tuple[str, cst.BaseExpression]] = []
        new_params: set[str] = set()
        used_in_body = _all_names(helper.fn.body)
        session_only = self._session_only_names(helper) if helper.ret is None else set()
        for name, value, is_default in bindings:
            if isinstance(value, cst.Name) and value.value == name:
                continue
            if name not in used_in_body and _pure(value):
                continue  # a parameter the helper never reads (`is_chief`): nothing to bind
            if name in session_only and _pure(value):
                continue  # read only by the TF1 session's arguments, which TFM301 replaces
            if is_default and not self._constant_default(value, module, site):
                return None
            assignments.append((name, value))
            new_params.add(name)
        local = helper.locals | new_params
        clash = (local - target_set) & elsewhere
        if "_" in clash and not _reads_name(site.scope, site.statement, "_"):
            clash.discard("_")  # `def main(_):`, `_, x = ...`: a throwaway nothing reads
        if clash:
            return None
        # names the helper reads from the module must still mean the module's there
        if site.chain:
            bound_in_chain: set[str] = set()
            for fn in site.chain:
                bound = _bound_names(fn)
                if bound is None:
                    return None
                bound_in_chain |= bound
            if helper.free & bound_in_chain:
                return None
        if helper.fn.name.value in local:
            return None
        if helper.module is not None:
            alias = site.call.func.value.value  # `alias.name(...)`: the alias must still be the module
            if alias in local or any(alias in (_bound_names(fn) or {alias}) for fn in site.chain):
                return None
        for fn in site.chain:
            if helper.fn.name.value in (_bound_names(fn) or {helper.fn.name.value}):
                return None  # the call reaches a function of the caller's own, not the module's

        mapping: list[tuple[str, cst.BaseExpression]] = []
        subs: dict[int, cst.BaseExpression] = {}
        returned = helper.returned
        if helper.ret is None:
            return assignments, mapping, subs
        if isinstance(returned, list):
            if isinstance(targets, list):
                if len(targets) != len(returned):
                    return None
                for i, (t, r) in enumerate(zip(targets, returned)):
                    if t in returned[:i] + returned[i + 1:]:
                        return None  # `a, b = b, a`: not a sequence of plain assignments
                    if t != r and not (t == "_" and "_" not in elsewhere):
                        mapping.append((cst.Name(t), cst.Name(r)))
            else:
                mapping.append((target, helper.value))
        elif isinstance(returned, dict):
            if not isinstance(targets, str):
                return None
            found = _subscript_reads(site.scope, site.statement, targets, returned)
            values = set(returned.values())
            if found is not None and values <= helper.locals - target_set and targets not in values:
                subs = {k: cst.Name(v) for k, v in found.items()}
            else:
                mapping.append((target, helper.value))
        else:
            if isinstance(targets, str):
                if targets != returned:
                    mapping.append((target, cst.Name(returned)))
            else:
                if returned in targets:
                    return None
                mapping.append((target, cst.Name(returned)))
        return assignments, mapping, subs

    def _session_only_names(self, helper: _Helper) -> set[str]:
        """Parameters a procedure reads only in the arguments of its TF1
        session (`MonitoredTrainingSession(is_chief=is_chief)`)."""
        inside: dict[str, int] = {}
        for call in C.calls_in(helper.fn.body):
            if self.qualname(call.func) in SESSION_CLASSES | {"train.Supervisor"}:
                for a in call.args:
                    attrs = {id(n.attr) for n in _walk(a.value) if isinstance(n, cst.Attribute)}
                    for node in _walk(a.value):
                        if isinstance(node, cst.Name) and id(node) not in attrs:
                            inside[node.value] = inside.get(node.value, 0) + 1
        everywhere: dict[str, int] = {}
        not_names: set[int] = set()
        for node in _walk(helper.fn.body):
            if isinstance(node, cst.Arg) and node.keyword is not None:
                not_names.add(id(node.keyword))
            elif isinstance(node, cst.Attribute):
                not_names.add(id(node.attr))
            elif isinstance(node, cst.Name) and id(node) not in not_names:
                everywhere[node.value] = everywhere.get(node.value, 0) + 1
        params = {p.name.value for p in helper.params}
        return {name for name, n in inside.items() if name in params and everywhere.get(name) == n}

    def _constant_default(self, value: cst.BaseExpression, module: cst.Module, site: _Site) -> bool:
        """A default the def evaluated once that evaluates alike at the call:
        a literal, or names/attributes of names bound once at the top of the
        module and not in the calling function."""
        if _literal(value):
            return True
        node = value
        while isinstance(node, cst.Attribute):
            node = node.value
        if not isinstance(node, cst.Name):
            return False
        counts = 0
        for statement in module.body:
            bound = _bound_names(statement) if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else {
                statement.name.value}
            counts += bool(bound and node.value in bound)
        if counts != 1:
            return False
        return not any(node.value in (_bound_names(fn) or {node.value}) for fn in site.chain)

    def _references(self, module: cst.Module, names: set[str]) -> dict[str, int]:
        """How often the module refers to each name besides its def (a string
        equal to it counts: getattr, __all__)."""
        out: dict[str, int] = {}
        attrs: set[int] = set()
        for node in C.walk(module):
            if type(node) is cst.Attribute:
                attrs.add(id(node.attr))
            elif type(node) is cst.Arg and node.keyword is not None:
                attrs.add(id(node.keyword))
            elif type(node) is cst.FunctionDef and node.name.value in names:
                attrs.add(id(node.name))
        for node in C.walk(module):
            if type(node) is cst.Name and node.value in names and id(node) not in attrs:
                out[node.value] = out.get(node.value, 0) + 1
            elif type(node) is cst.SimpleString and node.evaluated_value in names:
                out[node.evaluated_value] = out.get(node.evaluated_value, 0) + 2  # never removed
        return out

    # ------------------------------------------------------------ emitting
    def _inlined(self, site: _Site, assignments, mapping, drop_def: bool) -> list[cst.BaseStatement]:
        helper, statement = site.helper, site.statement
        out: list[cst.BaseStatement] = []
        for name, value in assignments:
            out.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)]))
        out += helper.body
        for name, value in mapping:
            out.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(name)], value)]))
        lead = list(statement.leading_lines)
        comment = statement.trailing_whitespace.comment
        if comment is not None:
            lead.append(cst.EmptyLine(comment=comment))
        if drop_def:
            lead += [line for line in helper.fn.leading_lines if line.comment is not None]
        if helper.docstring:
            lead += _comment_lines(helper.docstring)
        first = out[0]
        own = list(first.leading_lines)
        if first is helper.body[0]:
            own = C.strip_blank_lines(own)
        out[0] = first.with_changes(leading_lines=[*lead, *own])
        return out


def _reads_name(scope: cst.CSTNode, skip: cst.CSTNode, name: str) -> bool:
    """Whether code in ``scope`` (nested scopes too, not ``skip``) may read
    ``name``: it occurs other than as a parameter or a plain assignment or
    loop target."""
    bound: set[int] = set()
    for node in _walk(scope, skip):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.For, cst.CompFor)):
            targets = [node.target]
        elif isinstance(node, cst.Param):
            bound.add(id(node.name))
        for t in targets:
            stack = [t]
            while stack:
                n = stack.pop()
                if isinstance(n, cst.Name):
                    bound.add(id(n))
                elif isinstance(n, (cst.Tuple, cst.List)):
                    stack.extend(e.value for e in n.elements)
                elif isinstance(n, cst.StarredElement):
                    stack.append(n.value)
    return any(isinstance(n, cst.Name) and n.value == name and id(n) not in bound for n in _walk(scope, skip))


def _relative(path: str, beside: str) -> str:
    """``path`` relative to the directory of ``beside``."""
    import os

    return os.path.relpath(path, os.path.dirname(os.path.abspath(beside)))


def _module_names_outside(module: cst.Module, helper: cst.FunctionDef, statement: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    for top in module.body:
        if top is helper:
            continue
        out |= _all_names(top, skip=statement)
    return out


def _params(params: cst.Parameters) -> list[cst.Param]:
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _returned(value: cst.BaseExpression):
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Tuple) and value.elements and all(
            isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in value.elements):
        return [el.value.value for el in value.elements]
    if isinstance(value, cst.Dict) and value.elements:
        out: dict[str, str] = {}
        for el in value.elements:
            if not (isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                    and isinstance(el.value, cst.Name)):
                return None
            key = el.key.evaluated_value
            if not isinstance(key, str) or key in out:
                return None
            out[key] = el.value.value
        return out
    return None


def _bind_arguments(parameters: cst.Parameters, call: cst.Call):
    """[(parameter, argument or default, is_default)] in the order the call
    evaluates them, defaults last; None when the call does not bind every
    parameter exactly once (or passes *args / **kwargs)."""
    params = _params(parameters)
    # positional-only and plain parameters take positional arguments
    positional = [*parameters.posonly_params, *parameters.params]
    by_name = {p.name.value: p for p in [*parameters.params, *parameters.kwonly_params]}
    out: list[tuple[str, cst.BaseExpression, bool]] = []
    filled: set[str] = set()
    n_positional = 0
    for a in call.args:
        if a.star:
            return None
        if a.keyword is None:
            n_positional += 1
            if n_positional > len(positional):
                return None
            p = positional[n_positional - 1]
            name = p.name.value
        else:
            name = a.keyword.value
            if name not in by_name:
                return None
        if name in filled:
            return None
        filled.add(name)
        out.append((name, a.value, False))
    for p in params:
        if p.name.value in filled:
            continue
        if p.default is None:
            return None
        out.append((p.name.value, p.default, True))
    return out


def _subscript_reads(scope: cst.CSTNode, statement: cst.CSTNode, name: str, returned: dict[str, str]):
    """{id(subscript): key's name} when every other use of ``name`` in the
    scope reads ``name["key"]`` with a key the dict has; else None."""
    stored: set[int] = set()
    for node in _walk(scope, statement):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.Del)):
            targets = [node.target]
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets = [node.asname.name]
        for t in targets:
            for n in _walk(t):
                stored.add(id(n))
    found: dict[int, str] = {}
    covered: set[int] = set()
    for node in _walk(scope, statement):
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name:
            if id(node) in stored or len(node.slice) != 1:
                return None
            index = node.slice[0].slice
            if not (isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)):
                return None
            key = index.value.evaluated_value
            if key not in returned:
                return None
            found[id(node)] = returned[key]
            covered.add(id(node.value))
        elif isinstance(node, cst.Name) and node.value == name and id(node) not in covered:
            # not yet known as a subscript's value: parents come first in this walk
            return None
    return found


class _Apply(cst.CSTTransformer):
    def __init__(self, replacements, subscripts, removed_defs):
        super().__init__()
        self.replacements = replacements
        self.subscripts = subscripts
        self.removed_defs = removed_defs

    def leave_SimpleStatementLine(self, original, updated):
        new = self.replacements.get(id(original))
        if new is None:
            return updated
        return cst.FlattenSentinel(new)

    def leave_Subscript(self, original, updated):
        return self.subscripts.get(id(original), updated)

    def leave_FunctionDef(self, original, updated):
        if id(original) in self.removed_defs:
            return cst.RemovalSentinel.REMOVE
        return updated
