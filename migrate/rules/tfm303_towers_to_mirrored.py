"""TFM303 towers-to-mirrored."""

from __future__ import annotations

import libcst as cst

from migrate.engine import Invalid, Valid
from migrate.fastcst import transform
from migrate.rules import _cst as C
from migrate.rules._graph import Graph, analyze
from migrate.rules._program import MIRRORED, REFERENCE
from migrate.rules.tfm301_graph_to_strategy import (
    SESSION_CLASSES,
    GraphToStrategy,
    _DropGraphModeSwitches,
    _method,
    _SessionRegion,
)


class _Towers:
    """What the tower loop of an in-graph replicated program tells us."""

    def __init__(self):
        self.loop: cst.For | None = None
        self.index = ""
        self.count: cst.BaseExpression | None = None
        self.device: cst.BaseExpression | None = None
        self.statements: list[cst.BaseStatement] = []  # the per-tower forward computation
        self.loss = ""
        self.grads_list = ""
        self.loss_lists: set[str] = set()
        self.optimizer = ""


class TowersToMirrored(GraphToStrategy):
    """What it does
    Rewrites in-graph replication -- a loop building one "tower" per device
    (``for i in range(num_gpus): with tf.device("/gpu:%d" % i): ...``), each
    computing its loss on ``tf.split`` slice ``i`` of the batch and
    ``opt.compute_gradients(loss)``, then one ``opt.apply_gradients(
    average_gradients(tower_grads))`` -- into ``tf.distribute.MirroredStrategy``
    over the same devices: the tower body becomes the replica function
    (``strategy.run``), replica ``i`` gets slice ``i`` of the batch, and the
    loss is divided by the number of replicas because ``average_gradients``
    averaged while the strategy sums. Values built from the list of tower
    losses (``tf.add_n(tower_losses) / n``) are computed from the replicas'
    local results. CPU "towers" get logical CPU devices, as
    ``ConfigProto(device_count={"CPU": n})`` gave them, and
    ``ReductionToOneDevice`` (the gradients are added on one device, as
    ``average_gradients`` did; the default collective all-reduce doubles the
    step time on CPU devices). GPU towers keep the strategy's default. A
    training loop whose rest of body can run after later steps (see TFM301)
    runs four steps per ``tf.function`` call (``run_pending_steps``): a call
    costs more than a TF1 session's run of its cached graph.

    Why
    The tower loop, ``average_gradients`` and device strings are exactly the
    bookkeeping MirroredStrategy does; without sessions and placeholders the
    TF1 code does not run on TF 2.x.

    Example
        for i in range(FLAGS.num_gpus):
            with tf.device("/gpu:%d" % i):
                loss = tower_loss(images_splits[i], labels_splits[i])
                tower_grads.append(opt.compute_gradients(loss))
        train_op = opt.apply_gradients(average_gradients(tower_grads), global_step=global_step)
    becomes ``strategy = tf.distribute.MirroredStrategy(["/gpu:%d" % i for i in
    range(FLAGS.num_gpus)])``, a ``train_step`` running ``tower_loss`` per
    replica, and ``run_train_step(images, labels)`` in the loop.

    Fix safety
    Unsafe in general (structure changes); ``tfmigrate check`` compares the
    loss trajectories (bit-identical for two towers). Towers fed from input
    queues instead of ``tf.split`` slices are reported for manual work.
    """

    code = "TFM303"
    name = "towers-to-mirrored"
    triggers = ("compute_gradients",)

    def transform(self, module: cst.Module) -> cst.Module:
        self.strategy = MIRRORED
        self.taken = C.all_names(module)
        self.has_resolver = False
        self.converted = False
        self.module_in = module  # the tree the session loops are found in
        module = transform(module, self)
        if self.converted:
            module = transform(module, _DropGraphModeSwitches(self))
        return module

    # ---------------------------------------------------------------- locate
    def _tower_loop(self, statements) -> cst.For | None:
        for st in statements:
            if isinstance(st, cst.For) and any(
                isinstance(n, cst.Call) and _method(n) == "compute_gradients" for n in C.walk(st)
            ) and any(isinstance(n, cst.Call) and self.qualname(n.func) == "device" for n in C.walk(st)):
                return st
            if isinstance(st, cst.With):
                found = self._tower_loop(C.body_of(st.body))
                if found is not None:
                    return found
        return None

    def _rewrite_body(self, body):
        for i, st in enumerate(body):
            if not isinstance(st, cst.With):
                continue
            if self._tower_loop(C.body_of(st.body)) is None:
                continue
            if not all(self._dissolvable(item) for item in st.items):
                continue
            return body[:i] + self._rewrite_block(st) + body[i + 1 :]
        return body

    def _dissolvable(self, item: cst.WithItem) -> bool:
        call = item.item
        if not isinstance(call, cst.Call):
            return False
        if _method(call) == "as_default" and isinstance(call.func, cst.Attribute):
            inner = call.func.value
            return isinstance(inner, cst.Call) and self.qualname(inner.func) == "Graph"
        return self.qualname(call.func) == "device" and isinstance(C.arg(call, 0, None), (cst.SimpleString, cst.FormattedString))

    # ---------------------------------------------------------------- rebuild
    def _rewrite_block(self, block: cst.With):
        statements = list(C.body_of(block.body))
        split = len(statements)
        for k, st in enumerate(statements):
            if any(isinstance(n, cst.Call) and (self.qualname(n.func) in SESSION_CLASSES) for n in C.walk(st)):
                split = k
                break
        graph_part, session_part = statements[:split], statements[split:]
        towers = _Towers()
        pre, post = [], []
        seen_loop = False
        for st in self._flatten_scopes(graph_part):
            if isinstance(st, cst.For) and any(isinstance(n, cst.Call) and _method(n) == "compute_gradients" for n in C.walk(st)):
                self._read_loop(st, towers)
                seen_loop = True
            elif seen_loop:
                post.append(st)
            else:
                pre.append(st)
        graph = analyze(pre, self.qualname)
        if not towers.loss or not towers.grads_list:
            self.report(block, "tower loop without `tower_grads.append(opt.compute_gradients(loss))`",
                        hint="build a MirroredStrategy replica function by hand", reference=REFERENCE[MIRRORED],
                        fixed=False)
            return [block]
        splits = self._splits(pre, graph)
        if splits is None:
            return [block]
        # the per-tower computation, on whole placeholders: the strategy slices
        tower_statements = [_replace_splits(st, splits, towers.index) for st in towers.statements]
        graph.compute = [(_targets(st), st) for st in tower_statements]
        graph.loss = cst.Name(towers.loss)
        graph.optimizer = graph.optimizer or towers.optimizer
        self.post = []
        for st in post:
            names, value, _ = C.assignment(st)
            if isinstance(value, cst.Call) and _method(value) == "apply_gradients":
                graph.train_op = names[0]
                gs = C.arg(value, 1, "global_step")
                if isinstance(gs, cst.Name):
                    graph.global_step = graph.global_step or gs.value
            elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and towers.grads_list in C.names_used(value):
                continue  # average_gradients(tower_grads): the strategy's all-reduce
            elif value is not None and C.names_used(st) & towers.loss_lists:
                self.post.append((names, st))  # e.g. mean_loss = tf.add_n(tower_losses) / n
            else:
                graph.compute.append((names, st))
        if graph.train_op is None:
            self.report(block, "no apply_gradients after the tower loop", reference=REFERENCE[MIRRORED], fixed=False)
            return [block]
        self.towers = towers
        self.splits = splits
        session = _SessionRegion(self, graph)
        session.scan(session_part)
        prelude = self._build(block, graph, session)
        self.converted = True
        new_part = session.rewrite(session_part)
        return self._used_wrappers(prelude, new_part, session) + new_part

    def _flatten_scopes(self, statements):
        out = []
        for st in statements:
            if isinstance(st, cst.With) and all(
                isinstance(i.item, cst.Call) and self.qualname(i.item.func) in ("variable_scope", "name_scope", "device")
                for i in st.items
            ):
                out += self._flatten_scopes(C.body_of(st.body))
            else:
                out.append(st)
        return out

    def _read_loop(self, loop: cst.For, towers: _Towers) -> None:
        towers.loop = loop
        towers.index = C.code_of(loop.target)
        it = loop.iter
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("range", "xrange"):
            towers.count = C.arg(it, 0, None)

        def visit(statements):
            for st in statements:
                if isinstance(st, cst.With):
                    for item in st.items:
                        if isinstance(item.item, cst.Call) and self.qualname(item.item.func) == "device":
                            towers.device = C.arg(item.item, 0, None)
                    visit(C.body_of(st.body))
                    continue
                lone = C.single_expr(st)
                names, value, _ = C.assignment(st)
                if isinstance(lone, cst.Call) and _method(lone) == "reuse_variables":
                    continue
                if isinstance(lone, cst.Call) and _method(lone) == "append":
                    target = lone.func.value.value if isinstance(lone.func.value, cst.Name) else ""
                    item = C.arg(lone, 0, None)
                    if isinstance(item, cst.Call) and _method(item) == "compute_gradients":
                        towers.grads_list = target
                        towers.loss = C.code_of(C.arg(item, 0, "loss"))
                        if isinstance(item.func.value, cst.Name):
                            towers.optimizer = item.func.value.value
                    elif isinstance(item, cst.Name) and item.value in self._grad_names:
                        towers.grads_list = target
                    elif isinstance(item, cst.Name):
                        towers.loss_lists.add(target)
                    continue
                if isinstance(value, cst.Call) and _method(value) == "compute_gradients":
                    self._grad_names.add(names[0])
                    towers.loss = C.code_of(C.arg(value, 0, "loss"))
                    if isinstance(value.func.value, cst.Name):
                        towers.optimizer = value.func.value.value
                    continue
                towers.statements.append(st)

        self._grad_names: set[str] = set()
        visit(C.body_of(loop.body))

    def _splits(self, pre, graph: Graph):
        """{split list name: placeholder} from `xs = tf.split(x, n)`."""
        splits = {}
        for names, st in list(graph.compute):
            _, value, _ = C.assignment(st)
            if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) == "split":
                source = C.arg(value, 0, "value")
                if isinstance(source, cst.Name) and source.value in graph.placeholder_names:
                    splits[names[0]] = source.value
                    graph.compute.remove((names, st))
        return splits

    def _create_strategy(self, block, graph: Graph, resolver: str):
        t = self.towers
        devices = f"[{C.code_of(t.device)} for {t.index} in range({C.code_of(t.count)})]"
        out = []
        if "cpu" in C.code_of(t.device).lower():
            out += C.stmts(
                "# One logical CPU device per tower, as ConfigProto(device_count={\"CPU\": n}) gave the session.\n"
                "tf.config.set_logical_device_configuration(\n"
                "    tf.config.list_physical_devices(\"CPU\")[0],\n"
                f"    [tf.config.LogicalDeviceConfiguration()] * {C.code_of(t.count)})\n"
                "# The gradients are added on one device, as average_gradients did: on CPU\n"
                "# devices the default collective all-reduce takes about twice the step time.\n"
                f"{self.strategy_name} = tf.distribute.MirroredStrategy(\n"
                f"    {devices}, cross_device_ops=tf.distribute.ReductionToOneDevice())\n"
            )
        else:
            out += C.stmts(f"{self.strategy_name} = tf.distribute.MirroredStrategy({devices})\n")
        self.report(block, "in-graph towers now run as MirroredStrategy replicas; the loss is divided by the number"
                    " of replicas so gradients are averaged as average_gradients did",
                    fixed=True, severity="info", reference=REFERENCE[MIRRORED])
        return out

    def _wants_template(self, graph: Graph) -> bool:
        return True  # towers share their variables: build them once, reuse per replica

    def _step_code(self, step_name, run_name, schedule_name, params, args, fetch, graph):
        # What the TF1 graph computed from the towers' losses (the mean loss)
        # stays in the tf.function too: run eagerly, those ops cost more than
        # a whole training step of the towers reference.
        names = ", ".join(params)
        lines = [
            f"def {step_name}({names}):",
            f"    def {step_name}_slice({names}):",
            "        # tower i trained on tf.split slice i of the batch: replica i takes the same slice",
            "        context = tf.distribute.get_replica_context()",
            f"        {names}{',' if len(params) == 1 else ''} = (",
            "            tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync)),",
            "                      context.replica_id_in_sync_group)",
            f"            for value in {C.tuple_code(params)})",
            f"        return {step_name}_replica({names})",
            f"    replica_results = {self.strategy_name}.experimental_local_results(",
            f"        {self.strategy_name}.run({step_name}_slice, args={args}))",
        ]
        for lst in sorted(self.towers.loss_lists):
            lines.append(f"    {lst} = list(replica_results)")
        if self.towers.loss in fetch.values:
            lines.append(f"    {self.towers.loss} = replica_results[-1]  # after the TF1 loop: the last tower's")
        for _, st in self.post:
            lines.append("    " + C.code_of(st).strip())
        values = list(fetch.values)
        lines.append(f"    return {', '.join(values)}" if values else "    return None")
        outer_code = "\n".join(lines) + "\n"
        if len(values) > 1:
            fetched = f"tuple(value.numpy() for value in {step_name}({names}))"
        elif values:
            fetched = f"{step_name}({names}).numpy()"
        else:
            fetched = None
        run = f"def {run_name}({names}):\n"
        run += f"    results = {fetched}\n" if fetched else f"    {step_name}({names})\n    results = None\n"
        return outer_code, run, None

    def _replica_returns(self, fetch, graph: Graph, state_fetches) -> list[str]:
        # each replica returns its tower loss; the run wrapper derives the fetches
        return [self.towers.loss]


def _targets(statement) -> list[str]:
    names, _, _ = C.assignment(statement)
    return names


class _ReplaceSplits(cst.CSTTransformer):
    def __init__(self, splits: dict[str, str], index: str):
        super().__init__()
        self.splits = splits
        self.index = index

    def leave_Subscript(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value in self.splits and len(updated.slice) == 1:
            sl = updated.slice[0].slice
            if isinstance(sl, cst.Index) and C.code_of(sl.value) == self.index:
                return cst.Name(self.splits[updated.value.value])
        return updated


def _replace_splits(statement, splits, index):
    return transform(statement, _ReplaceSplits(splits, index))


TowersToMirrored.VALID = [
    Valid(
        """
        import tensorflow as tf
        grads = opt.compute_gradients(loss)
        """
    ),
]
TowersToMirrored.INVALID = [
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def tower_loss(images, labels):
            w = tf.get_variable("w", [3, 1])
            return tf.reduce_mean(tf.square(tf.matmul(images, w) - labels))


        def train():
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                global_step = tf.train.get_or_create_global_step()
                opt = tf.train.GradientDescentOptimizer(0.1)
                images = tf.placeholder(tf.float32, [8, 3])
                labels = tf.placeholder(tf.float32, [8, 1])
                images_splits = tf.split(images, FLAGS.num_gpus)
                labels_splits = tf.split(labels, FLAGS.num_gpus)
                tower_grads = []
                with tf.variable_scope(tf.get_variable_scope()):
                    for i in range(FLAGS.num_gpus):
                        with tf.device("/gpu:%d" % i):
                            with tf.name_scope("tower_%d" % i) as scope:
                                loss = tower_loss(images_splits[i], labels_splits[i])
                                tf.get_variable_scope().reuse_variables()
                                grads = opt.compute_gradients(loss)
                                tower_grads.append(grads)
                grads = average_gradients(tower_grads)
                train_op = opt.apply_gradients(grads, global_step=global_step)
                sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
                sess.run(tf.global_variables_initializer())
                for step in range(FLAGS.max_steps):
                    _, loss_value = sess.run([train_op, loss], feed_dict={images: x, labels: y})
        """,
        """
        import tensorflow.compat.v1 as tf


        def tower_loss(images, labels):
            w = tf.get_variable("w", [3, 1])
            return tf.reduce_mean(tf.square(tf.matmul(images, w) - labels))


        def train():
            strategy = tf.distribute.MirroredStrategy(["/gpu:%d" % i for i in range(FLAGS.num_gpus)])

            def model_fn(images, labels):
                loss = tower_loss(images, labels)
                return loss

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                tower_grads = []
                opt = tf.keras.optimizers.SGD(learning_rate=0.1)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([8, 3], tf.float32), tf.zeros([8, 1], tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(images, labels):
                def train_step_replica(images, labels):
                    with tf.GradientTape() as tape:
                        loss = model(images, labels)
                        # average_gradients averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return loss
                def train_step_slice(images, labels):
                    # tower i trained on tf.split slice i of the batch: replica i takes the same slice
                    context = tf.distribute.get_replica_context()
                    images, labels = (
                        tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync)),
                                  context.replica_id_in_sync_group)
                        for value in (images, labels))
                    return train_step_replica(images, labels)
                replica_results = strategy.experimental_local_results(
                    strategy.run(train_step_slice, args=(images, labels)))
                loss = replica_results[-1]  # after the TF1 loop: the last tower's
                return loss
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
                    # feed_dict converted fed values to the placeholders' dtypes; tensors also
                    # take tf.function's fast path (NumPy arguments cost more than the step)
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

            for step in range(FLAGS.max_steps):
                pending_steps.append(((x, y), ()))
                if len(pending_steps) == steps_per_call:
                    run_pending_steps()
            run_pending_steps()
        """,
        diagnostics=(),
    ),
    # CPU towers: logical devices, and the gradients added on one device.
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def tower_loss(images, labels):
            w = tf.get_variable("w", [3, 1])
            return tf.reduce_mean(tf.square(tf.matmul(images, w) - labels))


        def train():
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                global_step = tf.train.get_or_create_global_step()
                opt = tf.train.GradientDescentOptimizer(0.1)
                images = tf.placeholder(tf.float32, [8, 3])
                labels = tf.placeholder(tf.float32, [8, 1])
                images_splits = tf.split(images, FLAGS.num_gpus)
                labels_splits = tf.split(labels, FLAGS.num_gpus)
                tower_grads = []
                with tf.variable_scope(tf.get_variable_scope()):
                    for i in range(FLAGS.num_gpus):
                        with tf.device("/cpu:%d" % i):
                            with tf.name_scope("tower_%d" % i) as scope:
                                loss = tower_loss(images_splits[i], labels_splits[i])
                                tf.get_variable_scope().reuse_variables()
                                grads = opt.compute_gradients(loss)
                                tower_grads.append(grads)
                grads = average_gradients(tower_grads)
                train_op = opt.apply_gradients(grads, global_step=global_step)
                sess = tf.Session(config=tf.ConfigProto(device_count={"CPU": FLAGS.num_gpus}))
                sess.run(tf.global_variables_initializer())
                for step in range(FLAGS.max_steps):
                    _, loss_value = sess.run([train_op, loss], feed_dict={images: x, labels: y})
        """,
        """
        import tensorflow.compat.v1 as tf


        def tower_loss(images, labels):
            w = tf.get_variable("w", [3, 1])
            return tf.reduce_mean(tf.square(tf.matmul(images, w) - labels))


        def train():
            tf.config.set_logical_device_configuration(
                tf.config.list_physical_devices("CPU")[0],
                [tf.config.LogicalDeviceConfiguration()] * FLAGS.num_gpus)
            # The gradients are added on one device, as average_gradients did: on CPU
            # devices the default collective all-reduce takes about twice the step time.
            strategy = tf.distribute.MirroredStrategy(
                ["/cpu:%d" % i for i in range(FLAGS.num_gpus)], cross_device_ops=tf.distribute.ReductionToOneDevice())

            def model_fn(images, labels):
                loss = tower_loss(images, labels)
                return loss

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                tower_grads = []
                opt = tf.keras.optimizers.SGD(learning_rate=0.1)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([8, 3], tf.float32), tf.zeros([8, 1], tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(images, labels):
                def train_step_replica(images, labels):
                    with tf.GradientTape() as tape:
                        loss = model(images, labels)
                        # average_gradients averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return loss
                def train_step_slice(images, labels):
                    # tower i trained on tf.split slice i of the batch: replica i takes the same slice
                    context = tf.distribute.get_replica_context()
                    images, labels = (
                        tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync)),
                                  context.replica_id_in_sync_group)
                        for value in (images, labels))
                    return train_step_replica(images, labels)
                replica_results = strategy.experimental_local_results(
                    strategy.run(train_step_slice, args=(images, labels)))
                loss = replica_results[-1]  # after the TF1 loop: the last tower's
                return loss
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
                    # feed_dict converted fed values to the placeholders' dtypes; tensors also
                    # take tf.function's fast path (NumPy arguments cost more than the step)
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

            for step in range(FLAGS.max_steps):
                pending_steps.append(((x, y), ()))
                if len(pending_steps) == steps_per_call:
                    run_pending_steps()
            run_pending_steps()
        """,
        diagnostics=(),
    ),
]
