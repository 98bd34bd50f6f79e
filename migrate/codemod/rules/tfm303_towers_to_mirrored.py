"""TFM303 towers-to-mirrored."""

from __future__ import annotations

import ast
import builtins
from typing import NamedTuple

import libcst as cst

from migrate.codemod.engine import Invalid, Valid
from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _absent_modules
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._equivalents import bind_args
from migrate.codemod.rules._graph import Graph, analyze, extend
from migrate.codemod.rules._program import MIRRORED, REFERENCE
from migrate.codemod.rules._step_variable import resource_step
from migrate.codemod.rules._tfm301_loop import _DropGraphModeSwitches, rewrite_session
from migrate.codemod.rules._tfm301_session import SESSION_CLASSES, _method, _SessionRegion
from migrate.codemod.rules._tower_averages import moving_average_filler
from migrate.codemod.rules._tower_checkpoints import (
    SaverPlan,
    checkpoint_code,
    rewrite_saves,
    saver_problem,
)
from migrate.codemod.rules._tower_dataset import StepSpec, feed_from_datasets
from migrate.codemod.rules._tower_inputs import (
    input_origin,
    named_batch,
    own_returns,
    return_dataset,
    runs_queue_input,
)
from migrate.codemod.rules._tower_scopes import scope_problem
from migrate.codemod.rules._tower_shapes import (
    device_function_target,
    first_tower_reuse,
    index_slices,
    loss_towers,
    replace_index_slices,
    reuse_positions,
)
from migrate.codemod.rules._tower_shapes import (
    first_line as _first_line,
)
from migrate.codemod.rules.tfm301_graph_to_strategy import GraphToStrategy

# TF1 learning-rate schedules that read the global step; only exponential_decay
# is mapped (its Keras schedule computes the same expression of the step).
_TF1_SCHEDULES = {
    "train.exponential_decay": "ExponentialDecay",
    "train.piecewise_constant": "PiecewiseConstantDecay",
    "train.piecewise_constant_decay": "PiecewiseConstantDecay",
    "train.polynomial_decay": "PolynomialDecay",
    "train.inverse_time_decay": "InverseTimeDecay",
    "train.natural_exp_decay": "ExponentialDecay with a natural base",
    "train.cosine_decay": "CosineDecay",
    "train.cosine_decay_restarts": "CosineDecayRestarts",
    "train.linear_cosine_decay": "a LearningRateSchedule subclass",
    "train.noisy_linear_cosine_decay": "a LearningRateSchedule subclass",
}
_ZERO_STEP_CREATORS = {
    "train.get_or_create_global_step",
    "train.create_global_step",
    "contrib.framework.get_or_create_global_step",
}
# functions of a tensor (the regularization term), not ops: callable from any replica
_REGULARIZER_FACTORIES = {
    f"{module}.{name}" for module in ("contrib.layers", "keras.regularizers")
    for name in ("l1_regularizer", "l2_regularizer", "l1_l2_regularizer", "l1", "l2", "l1_l2", "L1", "L2", "L1L2")
}
_INITIALIZER_OPS = {"global_variables_initializer", "initialize_all_variables", "local_variables_initializer",
                    "initialize_local_variables"}
_DEQUEUES = {"dequeue", "dequeue_many", "dequeue_up_to"}
_INPUT_HINT = (
    "feed the batch through placeholders (whole, or split with tf.split), or build the input with tf.data and"
    " strategy.distribute_datasets_from_function(...) and pass each replica its batch (TF2 has no queue runners)"
)
_WHERE_HINT = (
    "put the tower loop directly in a function body, or under `with tf.Graph().as_default()`,"
    ' `tf.device("...")` or variable/name scopes, then rerun tfmigrate'
)


class _Blocker(NamedTuple):
    """Why a tower loop is not rewritten, located on ``node``."""

    node: cst.CSTNode
    message: str
    hint: str


class _Towers:
    """What the tower loop of an in-graph replicated program tells us."""

    def __init__(self):
        self.loop: cst.For | None = None
        self.index = ""
        self.index_names: set[str] = set()
        self.count: cst.BaseExpression | None = None
        self.device: cst.BaseExpression | None = None
        self.statements: list[cst.BaseStatement] = []  # the per-tower forward computation
        self.scope_names: set[str] = set()  # `with tf.name_scope(...) as scope` inside the loop
        self.name_scope_names: set[str] = set()  # of those, the names of name scopes (strings)
        self.collected_scope = ""  # the scope name read only to filter collections (see _tower_scopes)
        self.loss = ""
        self.loss_expr: cst.BaseExpression | None = None
        self.loss_node: cst.CSTNode | None = None  # the statement calling compute_gradients
        self.grads_list = ""
        self.loss_lists: set[str] = set()
        self.loss_items: dict[str, str] = {}  # list of tower values -> the value each tower appends
        self.optimizer = ""
        self.index_slices: dict[str, str] = {}  # placeholder -> `i * k:(i + 1) * k` (see _tower_shapes)
        self.variable_device = ""  # where a device function put the variables
        self.first_tower_names: set[str] = set()  # bound under `if i == 0:` (the first tower only)
        self.first_tower_guard: cst.If | None = None
        self.first_tower_statements: set[int] = set()  # ids of the statements under `if i == 0:`


class TowersToMirrored(GraphToStrategy):
    """What it does
    Rewrites in-graph replication -- a loop building one "tower" per device
    (``for i in range(num_gpus): with tf.device("/gpu:%d" % i): ...``), each
    computing its loss on ``tf.split`` slice ``i`` of the batch and
    ``opt.compute_gradients(loss)``, then one ``opt.apply_gradients(
    average_gradients(tower_grads))`` -- into ``tf.distribute.MirroredStrategy``
    over the same devices: the tower body becomes the replica function
    (``strategy.run``), replica ``i`` gets slice ``i`` of the batch (a
    placeholder every tower read whole is passed whole to every replica), and
    the loss is divided by the number of replicas because ``average_gradients``
    averaged while the strategy sums. Values built from the list of tower
    losses (``tf.add_n(tower_losses) / n``) are computed from the replicas'
    local results. The graph may be built under ``with tf.Graph().as_default()``
    / ``tf.device("/cpu:0")`` or directly in the function body. A learning
    rate ``lr = tf.train.exponential_decay(lr0, global_step, steps, rate,
    staircase)`` passed to the optimizer becomes
    ``tf.keras.optimizers.schedules.ExponentialDecay(lr0, steps, rate,
    staircase=...)``, which reads ``optimizer.iterations``: like a global step
    that starts at 0 and that only this ``apply_gradients`` advances, it
    counts the steps taken. CPU "towers" get logical CPU devices, as
    ``ConfigProto(device_count={"CPU": n})`` gave them, and
    ``ReductionToOneDevice`` (the gradients are added on one device, as
    ``average_gradients`` did; the default collective all-reduce doubles the
    step time on CPU devices). GPU towers keep the strategy's default. A
    training loop whose rest of body can run after later steps (see TFM301)
    runs four steps per ``tf.function`` call (``run_pending_steps``): a call
    costs more than a TF1 session's run of its cached graph. Where the loop's
    fed batches are a function of its index (``xs, ys = batch(step, n)``) and
    the towers took ``tf.split`` slices, the batches become a
    ``tf.data.Dataset.from_generator`` shaped as the placeholders, distributed
    with ``experimental_distribute_dataset`` (each replica gets tower i's
    slice), and the steps of a call run in a loop inside the ``tf.function``
    (``_tower_dataset``).

    The shapes real multi-GPU scripts take (analysis in ``_tower_shapes``):
    a tower slicing a fed placeholder by its index (``x[i * k:(i + 1) * k]``)
    -- replica ``i`` takes the same rows, ``replica_id_in_sync_group`` in
    place of ``i``; a device function of this module putting variables on
    one device and every other op on the device string it was given
    (``assign_to_device("/gpu:%d" % i, ps_device="/cpu:0")``) or a
    ``tf.DeviceSpec(device_type=..., device_index=i)`` -- the replicas run
    on those devices, the strategy mirrors the variables (a note says so);
    an optimizer every tower builds alike (only ``apply_gradients`` makes
    optimizer state) -- built once; ``reuse=i > 0`` -- ``reuse=False``, the
    model being built once and reused; values only the first tower computes
    (``if i == 0:``) -- computed by every replica, read from the first.
    Fetched tower values (training or evaluation) are the replicas' own,
    computed on their tower's rows: the last tower's, as the TF1 name held
    after the loop, or the first's. Towers that append per-example losses
    and ``minimize`` the mean of their concatenation are restated as towers
    differentiating their own mean (equal ``tf.split`` slices: the same mean,
    the averaged gradient) and migrated the same way. An input function
    returning its one-shot iterator's batch through names (``iterator =
    ds.make_one_shot_iterator(); x, y = iterator.get_next(); return x, y``)
    returns its dataset, iterated once (``_tower_inputs``). A tower reading
    its ``name_scope`` name only to filter collections
    (``tf.add_n(tf.get_collection("losses", scope))``, also in the program's
    helpers) -- each replica's model function opens a name scope of its own
    and the model is built by a traced call (``_tower_scopes``). An
    ``ExponentialMovingAverage`` of ``tf.trainable_variables()`` (named
    first, or plus a ``tf.moving_average_variables()`` no code of the graph
    fills) grouped into the train op -- updated after the variables in each
    replica step (``_tower_averages``). A regularizer made before the loop
    (``l2_regularizer(scale)``, a function) -- made once with the model. A
    ``tf.train.Saver`` of all the variables saved by ``saver.save(sess,
    path, global_step=n)`` -- a ``tf.train.Checkpoint`` saved by a
    ``CheckpointManager`` to the same ``<path>-<n>`` files, as many kept
    (``_tower_checkpoints``). Towers built directly
    under ``if __name__ == "__main__":`` are taken like a function body.
    Towers written out one ``with tf.device(...)`` block each are reported
    (across a cluster's tasks: MultiWorkerMirroredStrategy by hand).

    Every tower loop (a ``for`` whose body calls ``tf.device`` and
    ``compute_gradients``) that is not rewritten gets a located TFM303
    diagnostic naming the construct that stops it: towers that read no fed
    placeholder (a TF1 queue-runner pipeline: the input function, its module
    and what makes it a queue are named -- no tf.data pipeline can be proven
    to repeat the threads' batch order; use
    ``strategy.distribute_datasets_from_function``), a tower body reading the
    tower index, or its scope name otherwise than to filter a collection
    (given to code not in the program, REGULARIZATION_LOSSES), an optimizer
    built elsewhere, a train op grouped with other updates (batch-norm
    updates, an average of a ``moving_average_variables()`` the model's
    layers may fill), a restoring or partial ``tf.train.Saver``, a tower loop
    inside an ``if`` or at module level, and the like.

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
    loss trajectories (bit-identical for two towers, also with an
    ``exponential_decay`` learning rate). Only what is provably the same
    computation is rewritten: towers fed from input queues or helpers instead
    of placeholders, a global step that does not start at 0 under a
    schedule, a ``MomentumOptimizer`` under a decaying learning rate (TF1
    scales the accumulated momentum by the current rate, Keras does not) and
    the other constructs above are reported for manual work and left as they
    are; so is a rewrite that would leave a name of the TF1 graph (a session,
    a summary op) used but no longer defined.
    """

    code = "TFM303"
    name = "towers-to-mirrored"
    triggers = ("compute_gradients",)

    @classmethod
    def applies_to(cls, source: str) -> bool:
        # also towers that only compute losses, one minimize after the loop
        return "compute_gradients" in source or ("minimize" in source and "device" in source and ".append(" in source)

    def transform(self, module: cst.Module) -> cst.Module:
        self.strategy = MIRRORED
        self.taken = C.all_names(module)
        self.has_resolver = False
        self.converted = False
        self.module_in = module  # the tree the session loops are found in
        self.handled: set[str] = set()  # tower loops rewritten or reported (by _loop_key)
        # what GraphToStrategy's later passes read (no optimizer helpers are migrated here)
        self.helper_rewrites: dict[str, cst.FunctionDef] = {}
        self.strategy_names: set[str] = set()
        self.step_specs: dict[str, StepSpec] = {}
        module = transform(module, self)
        self._report_unhandled(self.module_in)
        self._report_loss_towers(self.module_in)
        if self.converted:
            module = transform(module, _DropGraphModeSwitches(self))
            module = feed_from_datasets(module, self, self.step_specs)
        return module

    # ---------------------------------------------------------------- input helpers
    def _find_input_helpers(self) -> dict[str, cst.FunctionDef]:
        """Module functions returning a one-shot iterator's batch: as the
        iterator's `get_next()` itself, or through the names it was bound to
        (see _tower_inputs); a function defined inside (a parser) is not a
        return of the helper."""
        found = {}
        self._named_batches = {}
        self._inner_returns: set[int] = set()
        for node in C.walk(self.ctx.module):
            if type(node) is not cst.FunctionDef:
                continue
            returns = own_returns(node)
            plan = named_batch(node, self.qualname)
            if plan is None and not (returns and all(super(TowersToMirrored, self)._one_shot_dataset(r.value)
                                                     is not None for r in returns)):
                continue
            found[node.name.value] = node
            if plan is not None:
                self._named_batches[node.name.value] = plan
            own = {id(r) for r in returns}
            self._inner_returns |= {id(r.value) for r in C.walk(node.body)
                                    if type(r) is cst.Return and id(r) not in own and r.value is not None}
        return found

    def _one_shot_dataset(self, value) -> cst.BaseExpression | None:
        if id(value) in self.__dict__.get("_inner_returns", ()):
            return value  # a parser's return inside the helper: unchanged
        return super()._one_shot_dataset(value)

    def _iterators(self, graph: Graph) -> list[cst.BaseStatement]:
        out = super()._iterators(graph)
        helpers = self._input_helpers()
        for pipeline in graph.inputs:
            plan = self._named_batches.get(pipeline.helper or "")
            if plan is not None:
                helper = helpers[pipeline.helper]
                self.helper_rewrites[C.code_of(helper)] = return_dataset(helper, plan)
        return out

    # ---------------------------------------------------------------- locate
    def _is_tower_loop(self, st) -> bool:
        return isinstance(st, cst.For) and any(
            isinstance(n, cst.Call) and _method(n) == "compute_gradients" for n in C.walk(st)
        ) and any(isinstance(n, cst.Call) and self.qualname(n.func) == "device" for n in C.walk(st))

    def _is_loss_tower_loop(self, st) -> bool:
        """A loop of towers appending their losses to a list (no gradients): one
        `minimize` after it may differentiate their mean (see loss_towers)."""
        return isinstance(st, cst.For) and not any(
            isinstance(n, cst.Call) and _method(n) == "compute_gradients" for n in C.walk(st)
        ) and any(isinstance(n, cst.Call) and self.qualname(n.func) == "device" for n in C.walk(st)) and bool(
            _appended_names(st))

    def _tower_loop(self, statements) -> cst.For | None:
        for st in statements:
            if self._is_tower_loop(st) or self._is_loss_tower_loop(st):
                return st
            if isinstance(st, cst.With):
                found = self._tower_loop(C.body_of(st.body))
                if found is not None:
                    return found
        return None

    def _rewrite_body(self, body):
        """`with tf.Graph().as_default(), tf.device("/cpu:0"):` blocks holding towers."""
        out, changed = [], False
        for i, st in enumerate(body):
            if (isinstance(st, cst.With) and self._tower_loop(C.body_of(st.body)) is not None
                    and all(self._dissolvable(item) for item in st.items)):
                new = self._rewrite_region(st, st, list(C.body_of(st.body)), list(body[i + 1 :]))
                if new is not None:
                    out += new
                    changed = True
                    continue
            out.append(st)
        return out if changed else body

    def leave_FunctionDef(self, original, updated):
        """Towers built directly in the function body (no enclosing graph block)."""
        return self._rewrite_bare(updated)

    def leave_If(self, original, updated):
        """Towers built directly under `if __name__ == "__main__":`, a script's main function."""
        return self._rewrite_bare(updated) if _is_main_guard(updated) else updated

    def _rewrite_bare(self, updated):
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        for t, st in enumerate(body):
            if self._bare_tower_loop(st) is None:
                continue
            start = self._region_start(body, t)
            region = [body[start].with_changes(leading_lines=[]), *body[start + 1 :]]
            block = cst.With(items=[cst.WithItem(cst.Name("_"))],
                             body=cst.IndentedBlock(body=region, indent=updated.body.indent),
                             leading_lines=body[start].leading_lines)
            new = self._rewrite_region(None, block, region, [])
            if new is None:
                return updated
            return updated.with_changes(body=updated.body.with_changes(body=body[:start] + new))
        return updated

    def _bare_tower_loop(self, st) -> cst.For | None:
        """The tower loop of a statement that is one, or that holds one under
        `with` blocks of variable/name scopes and device strings only (a
        block the graph-block rewrite does not take)."""
        if self._is_tower_loop(st) or self._is_loss_tower_loop(st):
            return st
        if isinstance(st, cst.With) and all(self._scope_item(i) for i in st.items) and not all(
                self._dissolvable(i) for i in st.items):
            for inner in C.body_of(st.body):
                found = self._bare_tower_loop(inner)
                if found is not None:
                    return found
        return None

    def _scope_item(self, item: cst.WithItem) -> bool:
        call = item.item
        if not isinstance(call, cst.Call):
            return False
        q = self.qualname(call.func)
        if q in ("variable_scope", "name_scope"):
            return True
        return q == "device" and item.asname is None and not isinstance(C.arg(call, 0, None), cst.Call)

    def _region_start(self, body, t: int) -> int:
        """First statement of a function-level graph: the first one calling
        TensorFlow, after any definition or import before the tower loop."""
        first = 0
        for s in range(t):
            st = body[s]
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)) or (
                isinstance(st, cst.SimpleStatementLine)
                and any(isinstance(x, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal, cst.Return))
                        for x in st.body)):
                first = s + 1
        for s in range(first, t):
            if any(self.qualname(c.func) is not None for c in C.calls_in(body[s])):
                return s
        return t

    def _dissolvable(self, item: cst.WithItem) -> bool:
        call = item.item
        if not isinstance(call, cst.Call) or item.asname is not None:
            return False
        if _method(call) == "as_default" and isinstance(call.func, cst.Attribute):
            inner = call.func.value
            return isinstance(inner, cst.Call) and self.qualname(inner.func) == "Graph"
        return self.qualname(call.func) == "device" and isinstance(C.arg(call, 0, None), (cst.SimpleString, cst.FormattedString))

    # ---------------------------------------------------------------- rebuild
    def _rewrite_region(self, anchor, block: cst.With, statements, after):
        """The graph (and its session loop) in ``statements`` rebuilt on a
        MirroredStrategy; None when it is not (every reason reported)."""
        self.restated = None
        loop = self._tower_loop(statements)
        if loop is None or not self._is_loss_tower_loop(loop):
            return self._rewrite_towers(anchor, block, statements, after)
        restated, _ = loss_towers(statements, loop, self.qualname, self.taken)
        if restated is None:
            return None  # _report_loss_towers says why
        self.handled.add(_loop_key(loop))
        self.restated = restated
        reports, imports, taken = len(self.ctx.reports), len(self.ctx.imports), set(self.taken)
        strategies, converted = set(self.strategy_names), self.converted
        new = self._rewrite_towers(anchor, block, restated.statements, after)
        if new is None:
            # reasons found on the restated towers: said on the towers as written
            originals = {id(n) for st in [*statements, *after] for n in C.walk(st)}
            for k in range(reports, len(self.ctx.reports)):
                node, code, message, *rest = self.ctx.reports[k]
                if id(node) not in originals:
                    self.ctx.reports[k] = (loop, code, message, *rest)
            self._decline(loop, f"tower loop `{_header(loop)}` not migrated: the towers only compute losses, and"
                          " their restatement as towers computing their gradients (above) is not migrated either",
                          "port this by hand")
            return None
        if self.towers.index_slices:
            # a short batch gives the last tower fewer rows: the mean of the
            # concatenation is then not the mean of the towers' means
            del self.ctx.reports[reports:]
            del self.ctx.imports[imports:]
            self.taken, self.strategy_names, self.converted = taken, strategies, converted
            self._decline(loop, f"tower loop `{_header(loop)}` not migrated: the towers slice the batch by their index"
                          f" and `{_first_line(restated.minimize)}` minimizes the mean of their concatenated losses:"
                          " a batch shorter than the towers' slices gives the last tower fewer rows, and the mean of"
                          " the concatenation is then not the mean of the towers' means",
                          "split the batch with tf.split (equal slices), or port this by hand")
            return None
        new = [st.visit(_ReplaceComment(_AVERAGED_COMMENT, _CONCATENATED_COMMENT)) for st in new]
        self.report(self.anchor, f"the towers appended their losses to `{next(iter(sorted(self.towers.loss_lists)))}` and"
                    f" `{_first_line(restated.minimize)}` minimized the mean of their concatenation: with equal"
                    " slices that is the mean of the towers' means, so each replica differentiates the mean of its own"
                    f" `{restated.item}` and the strategy averages the gradients", fixed=True, severity="info",
                    reference=REFERENCE[MIRRORED])
        return new

    def _rewrite_towers(self, anchor, block: cst.With, statements, after):
        loop = self._tower_loop(statements)
        if loop is None:
            return None
        self.handled.add(_loop_key(loop))
        anchor = anchor if anchor is not None else loop
        self.anchor = anchor
        split = len(statements)
        for k, st in enumerate(statements):
            if any(isinstance(n, cst.Call) and (self.qualname(n.func) in SESSION_CLASSES) for n in C.walk(st)):
                split = k
                break
        graph_part, session_part = statements[:split], statements[split:]
        towers = _Towers()
        pre, post = [], []
        for st in self._flatten_scopes(graph_part):
            if st is loop:
                self._read_loop(st, towers)
            elif towers.loop is not None:
                post.append(st)
            else:
                pre.append(st)
        if towers.loop is None:
            k = next(k for k, st in enumerate(statements) if any(n is loop for n in C.walk(st)))
            if k >= split:
                where = (f"it is built after the session starts (`{_first_line(statements[split])}`);"
                         " TFM303 needs the graph built before the session")
            else:
                where = (f"it is inside `{_header(_blocking_with(statements[k], loop, self))}`, which TFM303 cannot"
                         ' remove (it dissolves only `tf.Graph().as_default()`, `tf.device("...")` and'
                         " variable/name scopes)")
            self._decline(loop, f"tower loop `{_header(loop)}` not migrated: {where}", _WHERE_HINT)
            return None
        if not towers.loss or not towers.grads_list:
            self.report(anchor, f"tower loop `{_header(loop)}` not migrated: no"
                        " `tower_grads.append(opt.compute_gradients(loss))` in it",
                        hint="build a MirroredStrategy replica function by hand", reference=REFERENCE[MIRRORED],
                        fixed=False)
            return None
        pre += self._optimizer_from_loop(towers)
        self._pre = pre
        pre = [st for st in pre if not self._list_init(st, towers, [*session_part, *after])]
        blockers: list[_Blocker] = []
        graph = analyze(pre, self.qualname, inputs=self._input_helpers())
        for node, why in graph.unsupported:
            blockers.append(_Blocker(node, f"tower loop `{_header(loop)}`: cannot migrate automatically: {why}",
                             "create variables at the top of the graph block (or in a tf.Module)"))
        splits = self._splits(graph)
        header = f"tower loop `{_header(loop)}`"
        self._check_loop(loop, towers, pre, header, blockers)
        if towers.count is None:
            # no `range(n)`: which tower is which (and what `xs[i]` slices) is unknown
            for node, message, hint in blockers:
                self._decline(node, message, hint)
            return None
        # the per-tower computation, on whole placeholders: the strategy slices
        sliced = index_slices(towers.statements, towers.index_names,
                              set(graph.placeholder_names) - set(splits.values()),
                              _scope_bound(C.body_of(loop.body)))
        towers.index_slices = sliced.slices
        pairs = [(st, first_tower_reuse(replace_index_slices(_replace_splits(st, splits, towers.index),
                                                             sliced.slices, towers.index_names), towers.index_names,
                                          reuse_positions(self.module_in)))
                 for st in towers.statements]
        for node, why in sliced.problems:
            blockers.append(_Blocker(node, f"{header}: {why}; TFM303 gives each replica one slice of a fed"
                                     " placeholder", "slice each fed placeholder once per tower, by the tower"
                                     " index, or port this by hand"))
        self._regularizers_to_state(pre, graph)
        pre_compute = list(graph.compute)  # computed once before the loop (tf.split is gone)
        graph.compute = [(_targets(new), new) for _, new in pairs]
        loss = towers.loss_expr
        graph.loss = cst.Name(loss.value) if isinstance(loss, cst.Name) else None
        if graph.loss is None:
            blockers.append(_Blocker(towers.loss_node, f"{header}: the tower loss `{towers.loss}` is not a name bound in"
                             " the tower body", "bind the loss to a name (`loss = model.loss`) before compute_gradients"))
        params = graph.params_for(graph.slice_for(C.names_used(loss)))
        needed = set().union(*(C.names_used(new) for _, new in pairs)) if pairs else set()
        bad_splits = needed & set(self.bad_splits)
        for names, st in pre_compute:
            if len(names) == 1 and names[0] in bad_splits:
                _, split, _ = C.assignment(st)
                source = C.arg(split, 0, "value") if isinstance(split, cst.Call) else None
                filled = self._queue_input(C.names_used(source), f"; `{source.value}` is") if isinstance(
                    source, cst.Name) else ""
                blockers.append(_Blocker(st, f"{header}: the towers read `{names[0]}[{towers.index}]` of"
                                         f" `{_first_line(st)}`, but {self.bad_splits[names[0]]}{filled}",
                                         "split the fed batch along axis 0 into equal slices, or port this by"
                                         " hand" if not filled else _INPUT_HINT))
        if not params and not bad_splits:
            blockers.append(self._input_helper_problem(pre, pairs, header)
                            or self._no_input(pairs, towers, header, graph, loss))
        self._check_tower_body(pairs, towers, header, blockers, index=bool(params) and not bad_splits)
        for original, new in pairs:
            shared = C.names_used(new) & towers.first_tower_names
            if shared and id(original) not in towers.first_tower_statements:
                name = min(shared)
                blockers.append(_Blocker(original, f"{header}: `{_first_line(original)}` reads `{name}`, which only the"
                                         f" first tower computes (`{_header(towers.first_tower_guard)}`): every later"
                                         " tower read the first tower's value, each replica would compute its own",
                                         "compute it before the tower loop, or port this by hand"))
                break
        graph.optimizer = graph.optimizer or towers.optimizer
        if graph.optimizer_call is None or graph.optimizer != towers.optimizer:
            where = next((st for st in pre if towers.optimizer and C.assignment(st)[0] == [towers.optimizer]), None)
            made = f" is built by `{_first_line(where)}`, not" if where is not None else " is not built by"
            blockers.append(_Blocker(where or towers.loss_node, f"{header}: the optimizer `{towers.optimizer or '?'}`{made}"
                             " a tf.train optimizer constructor in this graph block: TFM303 cannot choose its"
                             " Keras 3 equivalent", "construct the tf.train optimizer in the graph block (it is"
                             " mapped to the Keras optimizer with the same update), or port this by hand"))
        self.post = []
        self._header, self._graph_code = header, [*pre, loop, *post]
        averaged, apply_call = self._read_post(post, towers, graph, header, blockers)
        if self.ema is not None and self.ema[3]:
            graph.state.append(self.ema[1])  # made under the strategy, updated by the step
        if graph.train_op is None:
            self.report(anchor, f"{header} not migrated: no `train_op = opt.apply_gradients(...)` after it",
                        hint="apply the averaged tower gradients with the optimizer's apply_gradients",
                        reference=REFERENCE[MIRRORED], fixed=False)
            return None
        apply_arg = C.arg(apply_call, 0, "grads_and_vars")
        if not (isinstance(apply_arg, cst.Name) and apply_arg.value in averaged) and not (
                isinstance(apply_arg, cst.Call) and self._averages(apply_arg, towers)):
            blockers.append(_Blocker(apply_call, f"{header}: `{_first_line(apply_call)}` applies"
                             f" `{C.code_of(apply_arg) if apply_arg is not None else '?'}`, not the averaged tower"
                             " gradients: TFM303 maps only `apply_gradients(average_gradients(tower_grads))`",
                             "apply the transformed gradients by hand in the replica step"))
        region = [*graph_part, *session_part, *after]
        converted = self._schedules(pre, graph, region, apply_call, header, blockers)
        if params and not bad_splits:
            for names, st in pre_compute:
                if set(names) & needed and st not in converted:
                    blockers.append(_Blocker(st, f"{header}: `{_first_line(st)}` is computed once before the tower"
                                             " loop and read by every tower; TFM303 moves only the tower body into"
                                             " the replicas", "compute it inside the tower loop (or from the fed"
                                             " batch)"))
                    break
        self._check_savers(graph_part, session_part, after, header, blockers)
        for st in graph_part:
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
                blockers.append(_Blocker(st, f"{header}: `{_first_line(st)}` is defined inside the graph block, which"
                                 " TFM303 would have to move", "define it outside the graph block"))
        if blockers:
            for node, message, hint in sorted(blockers, key=lambda b: _order(statements + after, b.node)):
                self._decline(node, message, hint)
            return None
        if not self._plan_inputs(graph):
            return None  # reported: a tf.data input TF1 read otherwise than each step's batch
        # build it; keep it only if it leaves no name of the TF1 graph behind
        reports, taken, imports = len(self.ctx.reports), set(self.taken), len(self.ctx.imports)
        strategies = set(self.strategy_names)
        self.towers = towers
        self.splits = splits
        session = _SessionRegion(self, graph)
        if self.saver_plans:
            self.save_function, self.checkpoint_name = self._fresh("save_checkpoint"), self._fresh("checkpoint")
            session_part = rewrite_saves(session_part, self.saver_plans, self.save_function)
            # a save reads the variables: the loop runs no step ahead of it
            session.state_names.add(self.save_function)
        session_part = self._initializer_runs(graph_part, session_part)
        session.scan(session_part)
        prelude = self._build(block, graph, session)
        new_part = rewrite_session(session, session_part)
        new = self._used_wrappers(prelude, new_part, session) + new_part
        if self.ema is not None and self.ema[3]:
            update = C.stmts("# The moving averages follow the updated variables (tf.group gave the two no order).\n"
                             f"{self.ema[0]}.apply({self.trainable_name})\n")
            new = [transform(st, _BeforeReturn(self.train_replica_names, update)) for st in new]
        lost = _introduced(statements + after, new + after)
        if lost:
            del self.ctx.reports[reports:]
            del self.ctx.imports[imports:]
            self.taken = taken
            self.strategy_names = strategies
            self._report_lost(lost, statements, new + after, session, header)
            return None
        self.converted = True
        return new

    def _initializer_runs(self, graph_part, session_part):
        """`init.run()` of an initializer op in the default session -> `sess.run(init)`,
        the session run the session rewrite already knows (it drops it)."""
        initializers = {n for st in graph_part for n in C.assignment(st)[0][:1]
                        if isinstance(C.assignment(st)[1], cst.Call)
                        and self.qualname(C.assignment(st)[1].func) in _INITIALIZER_OPS}
        sessions = {n for st in session_part for item in C.walk(st) if isinstance(item, cst.WithItem)
                    and item.asname is not None and isinstance(item.item, cst.Call)
                    and self.qualname(item.item.func) in SESSION_CLASSES for n in C.target_names(item.asname.name)}
        if not initializers or len(sessions) != 1:
            return session_part
        session = next(iter(sessions))

        class RunInSession(cst.CSTTransformer):
            def leave_Call(self, original, updated):
                owner = original.func.value if isinstance(original.func, cst.Attribute) else None
                if _method(original) == "run" and not original.args and isinstance(owner, cst.Name) and (
                        owner.value in initializers):
                    return C.expr(f"{session}.run({owner.value})")
                return updated

        return [st.visit(RunInSession()) for st in session_part]

    def _regularizers_to_state(self, pre, graph: Graph) -> None:
        """`regularizer = tf.contrib.layers.l2_regularizer(scale)` makes a Python
        function, no op: made once with the model's state, every replica calls it
        on the variables it reads (as every tower did)."""
        for names, st in list(graph.compute):
            _, value, _ = C.assignment(st)
            if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) in _REGULARIZER_FACTORIES:
                graph.compute.remove((names, st))
                k = next(k for k, other in enumerate(pre) if other is st)
                graph.state.insert(len(analyze(pre[:k], self.qualname).state), st)

    def _decline(self, node, message: str, hint: str) -> None:
        self.report(node, message, hint=hint, reference=REFERENCE[MIRRORED], fixed=False)

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
        towers.index_names = set(C.target_names(loop.target))
        it = loop.iter
        if (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("range", "xrange")
                and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star):
            towers.count = C.arg(it, 0, None)

        def visit(statements):
            for st in statements:
                if isinstance(st, cst.With):
                    for item in st.items:
                        if isinstance(item.item, cst.Call) and self.qualname(item.item.func) == "device":
                            towers.device = C.arg(item.item, 0, None)
                        if item.asname is not None:
                            towers.scope_names.update(C.target_names(item.asname.name))
                            if isinstance(item.item, cst.Call) and self.qualname(item.item.func) == "name_scope":
                                towers.name_scope_names.update(C.target_names(item.asname.name))
                    visit(C.body_of(st.body))
                    continue
                if self._first_tower_only(st, towers):
                    # computed by the first tower only: every replica computes it (the
                    # forward ops change nothing), the first replica's value is the one read
                    towers.first_tower_guard = st
                    for inner in C.body_of(st.body):
                        towers.first_tower_names.update(_targets(inner))
                        towers.first_tower_statements.add(id(inner))
                        towers.statements.append(inner)
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
                        self._loss_of(item, st, towers)
                        if isinstance(item.func.value, cst.Name):
                            towers.optimizer = item.func.value.value
                    elif isinstance(item, cst.Name) and item.value in self._grad_names:
                        towers.grads_list = target
                    elif isinstance(item, cst.Name):
                        towers.loss_lists.add(target)
                        towers.loss_items[target] = item.value
                    continue
                if isinstance(value, cst.Call) and _method(value) == "compute_gradients":
                    self._grad_names.add(names[0])
                    self._loss_of(value, st, towers)
                    if isinstance(value.func.value, cst.Name):
                        towers.optimizer = value.func.value.value
                    continue
                towers.statements.append(st)

        self._grad_names: set[str] = set()
        visit(C.body_of(loop.body))

    def _first_tower_only(self, st, towers: _Towers) -> bool:
        """`if i == 0:` (no else) holding assignments of forward values only."""
        if not (isinstance(st, cst.If) and st.orelse is None and isinstance(st.test, cst.Comparison)):
            return False
        test = st.test
        if not (isinstance(test.left, cst.Name) and test.left.value in towers.index_names
                and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)
                and _is_zero(test.comparisons[0].comparator)):
            return False
        for inner in C.body_of(st.body):
            names, value, _ = C.assignment(inner)
            if not names or value is None or any(
                    isinstance(n, cst.Call) and _method(n) in ("compute_gradients", "append", "minimize")
                    for n in C.walk(inner)):
                return False
        return True

    @staticmethod
    def _loss_of(call: cst.Call, statement, towers: _Towers) -> None:
        """The loss a tower's `compute_gradients(loss)` differentiates."""
        loss = C.arg(call, 0, "loss")
        if loss is not None:
            towers.loss, towers.loss_expr, towers.loss_node = C.code_of(loss), loss, statement

    def _splits(self, graph: Graph):
        """{split list name: placeholder} from `xs = tf.split(x, n)` (equal
        slices along the batch axis, what the strategy's replicas take).
        Other splits: ``self.bad_splits`` (name -> why not)."""
        splits = {}
        self.bad_splits: dict[str, str] = {}
        for names, st in list(graph.compute):
            _, value, _ = C.assignment(st)
            # `xs = tf.split(x, n)`, or `xs, ys = tf.split(x, n), tf.split(y, n)`
            values = [value] if len(names) == 1 else (
                [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [])
            if len(values) != len(names) or not all(
                    isinstance(v, cst.Call) and self.qualname(v.func) == "split" for v in values):
                continue
            taken = {}
            for name, call in zip(names, values):
                source = C.arg(call, 0, "value")
                count = C.arg(call, 1, "num_or_size_splits")
                axis = C.arg(call, 2, "axis")
                if axis is not None and not (isinstance(axis, cst.Integer) and axis.evaluated_value == 0):
                    self.bad_splits[name] = (f"it splits axis `{C.code_of(axis)}`, not the batch axis the"
                                             " strategy's replicas are sliced on")
                elif isinstance(count, (cst.List, cst.Tuple)):
                    self.bad_splits[name] = ("its slices have sizes of their own, the strategy's replicas"
                                             " take equal slices")
                elif not (isinstance(source, cst.Name) and source.value in graph.placeholder_names):
                    self.bad_splits[name] = (f"it splits `{C.code_of(source) if source else '?'}`, not a"
                                             " placeholder fed by the session")
                else:
                    taken[name] = source.value
            if len(taken) == len(names):
                splits.update(taken)
                graph.compute.remove((names, st))
        return splits

    # ---------------------------------------------------------------- checks
    def _check_loop(self, loop, towers: _Towers, pre, header, blockers) -> None:
        """The strategy's device list is built from the loop's count and device string."""
        if towers.count is None:
            blockers.append(_Blocker(loop, f"{header}: the loop does not run over `range(n)` towers, so the"
                             " MirroredStrategy device list cannot be derived from it",
                             'give MirroredStrategy its device list (["/gpu:0", "/gpu:1", ...]) by hand'))
        device = towers.device
        if isinstance(device, cst.Call) and self.qualname(device.func) == "DeviceSpec":
            device = towers.device = _device_spec_string(device) or device
        if isinstance(device, cst.Call) and (found := device_function_target(device, self.module_in)) is not None:
            device, towers.variable_device = found  # the ops' device string; the variables are mirrored
            towers.device = device
        if device is None or not _is_device_string(device):
            blockers.append(_Blocker(loop, f"{header}: the tower device"
                             f" `{C.code_of(device) if device is not None else '?'}` is not a device string"
                             " (a device function or a computed value): MirroredStrategy takes device strings",
                             'pass MirroredStrategy the device strings (["/gpu:0", "/gpu:1", ...])'))
            return
        outside = (C.names_used(device) | (C.names_used(towers.count) if towers.count is not None else set()))
        outside -= towers.index_names
        bound_in_loop = _scope_bound(C.body_of(loop.body))
        for st in pre:
            bound = _scope_bound([st]) & outside
            if bound or outside & bound_in_loop:
                name = min(bound or outside & bound_in_loop)
                blockers.append(_Blocker(st if bound else loop, f"{header}: its devices read `{name}`, which is computed"
                                 " inside the graph block; the strategy is created before it",
                                 "compute it before the graph block"))
                return

    def _list_init(self, st, towers: _Towers, rest) -> bool:
        """`tower_grads = []` (or `tower_grads, tower_losses = [], []`) of lists
        only the tower loop fills: the strategy's step collects them itself."""
        names, value, _ = C.assignment(st)
        lists = {towers.grads_list, *towers.loss_lists} - {""}
        if not names or not set(names) <= lists:
            return False
        empties = value.elements if isinstance(value, cst.Tuple) and len(names) > 1 else [value]
        if len(empties) != len(names) or not all(
                isinstance(getattr(e, "value", e), cst.List) and not getattr(e, "value", e).elements for e in empties):
            return False
        return not any(set(names) & C.names_used(other) for other in rest)

    def _optimizer_from_loop(self, towers: _Towers) -> list[cst.BaseStatement]:
        """`opt = tf.train.XOptimizer(...)` built by every tower (the last one
        applies the averaged gradients) -> built once before the loop: only
        apply_gradients makes optimizer state, compute_gradients reads none."""
        if not towers.optimizer:
            return []
        bound = _scope_bound(C.body_of(towers.loop.body))
        for k, st in enumerate(towers.statements):
            names, value, _ = C.assignment(st)
            if names != [towers.optimizer] or not isinstance(value, cst.Call):
                continue
            q = self.qualname(value.func) or ""
            if not (q.startswith("train.") and q.endswith("Optimizer")) or q == "train.SyncReplicasOptimizer":
                return []
            if C.names_used(value) & (bound | towers.index_names):
                return []  # each tower's optimizer differs
            if any(towers.optimizer in C.names_used(other) for other in towers.statements[:k]):
                return []
            del towers.statements[k]
            return [st]
        return []

    def _check_tower_body(self, pairs, towers: _Towers, header, blockers, index: bool) -> None:
        for original, new in pairs:
            used = C.names_used(new)
            if not used & towers.scope_names:
                continue
            name = min(used & towers.scope_names)
            problem = scope_problem(self._program().tracer, [original], name) if (
                name in towers.name_scope_names and towers.collected_scope in ("", name)) else None
            if name in towers.name_scope_names and problem is None:
                towers.collected_scope = name  # each replica's model function opens a name scope of its own
                continue
            why = (problem.why if problem is not None else
                   "it names a variable scope, which the replicas do not have")
            blockers.append(_Blocker(original, f"{header}: `{_first_line(original)}` reads `{name}`, the name of the"
                             " tower's scope (`with ... as " + name + f"`): {why}",
                             "read the tower's collections by the name scope alone (tf.get_collection(key, scope)),"
                             " or compute the tower loss without the scope name"))
            break
        for original, new in pairs:
            used = C.names_used(new)
            if index and used & towers.index_names and not used & set(self.bad_splits):
                name = min(used & towers.index_names)
                blockers.append(_Blocker(original, f"{header}: `{_first_line(original)}` reads the tower index `{name}`"
                                 " (other than as `xs[" + name + "]` of a `tf.split` of a placeholder), which the"
                                 " replicas do not have",
                                 "select per-tower data with tf.split of a fed batch, or use"
                                 " tf.distribute.get_replica_context().replica_id_in_sync_group in a hand-written"
                                 " replica function"))
                break

    def _input_helper_problem(self, pre, pairs, header) -> _Blocker | None:
        """Towers reading the batch a module function returns from a tf.data
        iterator in a shape the input planning does not follow (`features,
        labels = iterator.get_next()` then `return features, labels`)."""
        read = set().union(*(C.names_used(new) for _, new in pairs)) if pairs else set()
        for st in pre:
            names, value, _ = C.assignment(st)
            if not (set(names) & read and isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
                continue
            helper = next((f for f in C.walk(self.module_in) if isinstance(f, cst.FunctionDef)
                           and f.name.value == value.func.value), None)
            if helper is None or not any(isinstance(n, cst.Call) and _method(n) == "get_next" for n in C.walk(helper)):
                continue
            if value.func.value in self._input_helpers():
                continue
            return _Blocker(st, f"{header}: the towers read `{', '.join(names)}` from `{_first_line(st)}`, a batch"
                            f" of a tf.data iterator that `{value.func.value}()` does not return as"
                            " `tf.data.make_one_shot_iterator(dataset).get_next()` (or `dataset.make_one_shot_iterator()"
                            ".get_next()`): TFM303 cannot tell which batches each step took",
                            f"make `{value.func.value}()` return `dataset.make_one_shot_iterator().get_next()` itself,"
                            " then migrate again (every tower read the same batch: so will every replica)")
        return None

    def _no_input(self, pairs, towers: _Towers, header, graph: Graph, loss):
        """The decline of towers that read no fed placeholder, located where
        a tower gets its input (among the statements its loss depends on)."""
        wanted = {id(st) for _, st in graph.slice_for(C.names_used(loss))}
        pairs = [(original, new) for original, new in pairs if id(new) in wanted] or pairs
        use = "; build the input with tf.data and strategy.distribute_datasets_from_function"
        for original, _ in pairs:
            dequeue = next((n for n in C.walk(original) if isinstance(n, cst.Call) and _method(n) in _DEQUEUES), None)
            if dequeue is not None:
                owner = dequeue.func.value
                filled = self._queue_input(C.names_used(owner), "") if isinstance(owner, cst.Name) else ""
                return _Blocker(original, f"{header}: the towers read no fed placeholder: each dequeues its batch"
                                f" from a queue (`{_first_line(original)}`){filled}, and TFM303 does not migrate"
                                f" queue input{use}", _INPUT_HINT)
        for original, _ in pairs:
            if C.names_used(original) & towers.index_names:
                return _Blocker(original, f"{header}: the towers read no fed placeholder: `{_first_line(original)}`"
                                f" builds each tower's input from the tower index, which the replicas cannot"
                                f" reproduce{use}", _INPUT_HINT)
        node = pairs[0][0] if pairs else towers.loss_node
        return _Blocker(node, f"{header}: the towers read no fed placeholder: `{_first_line(node)}` builds each"
                        f" tower's input itself (placeholders of its own, a helper or a queue), which TFM303 does not"
                        f" migrate{use}",
                        _INPUT_HINT)

    def _queue_input(self, names: set[str], lead: str) -> str:
        """Where the towers' queue or batch comes from, when TF1 queue runners
        filled it: a clause for the decline ("" when that is not known)."""
        found = input_origin(self._pre, names, self.qualname)
        tracer = self._program().tracer
        evidence = runs_queue_input(tracer, self.module_in, found[1] if found else None)
        if evidence is None:
            return ""
        what = (f"a TF1 queue-runner input pipeline ({evidence}), whose reader and batching threads decided which"
                " batch each step took: no tf.data pipeline can be proven to repeat that order")
        if found is None:
            return f"{lead or ','} {what}"
        made, call = found
        where = self._program().origin_of(call)
        where = where.split(" (", 1)[0] if where else ""
        return f"{lead} filled from `{_first_line(made)}`{where}: {what}"

    def _averages(self, call: cst.Call, towers: _Towers) -> bool:
        """`average_gradients(tower_grads)` (any module's function whose name says it averages)."""
        func = call.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        return (self.qualname(func) is None and towers.grads_list in C.names_used(call)
                and any(word in name.lower() for word in ("average", "avg", "mean")))

    def _read_post(self, post, towers: _Towers, graph: Graph, header, blockers):
        """Sort the statements after the tower loop; (averaged gradient names, apply_gradients call)."""
        averaged: set[str] = set()
        apply_call = None
        self.ema = None  # (name, constructor statement, apply op name, grouped into the train op)
        for st in post:
            names, value, _ = C.assignment(st)
            if self._moving_average(st, names, value, blockers):
                continue
            if isinstance(value, cst.Call) and _method(value) == "apply_gradients" and len(names) == 1:
                graph.train_op = names[0]
                apply_call = value
                gs = C.arg(value, 1, "global_step")
                if isinstance(gs, cst.Name):
                    graph.global_step = graph.global_step or gs.value
                continue
            if isinstance(value, cst.Call) and towers.grads_list in C.names_used(value) and len(names) == 1 and (
                    self.qualname(value.func) is None):
                if self._averages(value, towers):
                    averaged.add(names[0])  # average_gradients(tower_grads): the strategy's all-reduce
                else:
                    blockers.append(_Blocker(st, f"{header}: `{_first_line(st)}` combines the tower gradients with"
                                     f" `{C.code_of(value.func)}`, which TFM303 does not know to average them",
                                     "name the function average_gradients if it averages, or port this by hand"))
                continue
            if graph.train_op and len(names) == 1 and isinstance(value, cst.Name) and value.value == graph.train_op:
                graph.train_op = names[0]  # train_op = apply_gradient_op
                continue
            if graph.train_op and isinstance(value, cst.Call) and self.qualname(value.func) == "group" and (
                    graph.train_op in C.names_used(value)):
                others = [a for a in value.args if not (isinstance(a.value, cst.Name)
                                                        and a.value.value == graph.train_op) and a.keyword is None]
                if self.ema is not None and self.ema[2] and len(others) == 1 and isinstance(others[0].value, cst.Name) \
                        and others[0].value.value == self.ema[2] and len(names) == 1:
                    self.ema = (*self.ema[:3], True)
                    others = []  # the moving averages are updated in the step, after the variables
                if not others and len(names) == 1:
                    graph.train_op = names[0]  # tf.group(apply_gradient_op)
                    continue
                what = []
                for a in others:
                    made = next((_first_line(s) for s in post if isinstance(a.value, cst.Name)
                                 and C.assignment(s)[0] == [a.value.value]), None)
                    what.append(f"`{C.code_of(a.value)}`" + (f" (`{made}`)" if made else ""))
                ema = any(self.qualname(c.func) == "train.ExponentialMovingAverage" for s in post for c in C.calls_in(s))
                blockers.append(_Blocker(st, f"{header}: the train op `{_first_line(st)}` also runs {', '.join(what)};"
                                 " TFM303 migrates a train op that only applies the averaged gradients",
                                 ("create the ExponentialMovingAverage under strategy.scope() and call"
                                  " `ema.apply(trainable_variables)` after apply_gradients in the replica step"
                                  " (tf.group gave the two updates no order), or drop it"
                                  if ema else "run these updates in the replica step by hand")))
                continue
            if isinstance(st, cst.For) and any(
                    isinstance(n, cst.Call) and _method(n) == "compute_gradients" for n in C.walk(st)):
                blockers.append(_Blocker(st, f"{header}: a second loop computing gradients follows it in the same"
                                 " graph block", "migrate one training graph at a time"))
                self.handled.add(_loop_key(st))  # reported here
                continue
            if value is not None and C.names_used(st) & towers.loss_lists:
                self.post.append((names, st))  # e.g. mean_loss = tf.add_n(tower_losses) / n
                continue
            extend(graph, st, self.qualname)
        return averaged, apply_call

    def _moving_average(self, st, names, value, blockers) -> bool:
        """`ema = tf.train.ExponentialMovingAverage(decay, num_updates)` and
        `ema_op = ema.apply(tf.trainable_variables())` after the tower loop
        (the list possibly named first, `+ tf.moving_average_variables()` where
        that collection was empty): taken here (the step updates the averages);
        False for anything else."""
        if len(names) != 1 or value is None:
            return False
        if isinstance(value, cst.Call) and self.qualname(value.func) == "train.ExponentialMovingAverage" and (
                self.ema is None):
            self.ema = (names[0], st, "", False)
            self.average_lists: set[str] = set()
            return True
        if self.ema is None or self.ema[2]:
            return False
        if self._averaged_list(value, st, blockers):
            self.average_lists.add(names[0])  # variables_to_average = tf.trainable_variables() + ...
            return True
        if isinstance(value, cst.Call) and _method(value) == "apply" and isinstance(
                value.func.value, cst.Name) and value.func.value.value == self.ema[0] and len(value.args) == 1:
            listed = value.args[0].value
            if (isinstance(listed, cst.Name) and listed.value in self.average_lists) or self._averaged_list(
                    listed, st, blockers):
                self.ema = (self.ema[0], self.ema[1], names[0], False)
                return True
        return False

    def _averaged_list(self, value, st, blockers) -> bool:
        """`tf.trainable_variables()`, or that `+ tf.moving_average_variables()`
        (a blocker where the collection may have held variables: TF2 has none)."""
        def listing(node, name):
            return isinstance(node, cst.Call) and self.qualname(node.func) == name and not node.args
        if listing(value, "trainable_variables"):
            return True
        if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)):
            return False
        pair = (value.left, value.right)
        if not (any(listing(v, "trainable_variables") for v in pair)
                and any(listing(v, "moving_average_variables") for v in pair)):
            return False
        # the code built before this list, the average's own constructor aside
        built = self._graph_code[:next(k for k, other in enumerate(self._graph_code) if other is st)]
        filler = moving_average_filler(self._program().tracer, [b for b in built if b is not self.ema[1]])
        if filler is not None:
            where = "the tower body runs" if not filler.opaque else "the model is built by"
            blockers.append(_Blocker(st, f"{self._header}: `{_first_line(st)}` averages"
                            " `tf.moving_average_variables()`, the TF1 collection the model's layers filled as"
                            f" they were built, which TF2 does not keep; {where} {filler.what}"
                            f" (through `{_first_line(filler.call)}`), so the variables it held "
                            + ("cannot be read here" if filler.opaque else "are not only the trainable ones"),
                            ("migrate the module with this file, or list the variables to average (for a model"
                             " without batch norm: tf.trainable_variables() alone)" if filler.opaque else
                             "average the layers' moving statistics explicitly by hand")))
        return True

    def _schedules(self, pre, graph: Graph, region, apply_call, header, blockers) -> set:
        """`lr = tf.train.exponential_decay(...)` read by the optimizer -> a
        Keras ExponentialDecay under the strategy (added to the graph's state)."""
        converted = set()
        inserted = 0
        for k, st in enumerate(pre):
            names, value, _ = C.assignment(st)
            if len(names) != 1 or not isinstance(value, cst.Call) or self.qualname(value.func) not in _TF1_SCHEDULES:
                continue
            name = names[0]
            q = self.qualname(value.func)
            problem, hint, where = None, "", st
            by_optimizer = graph.optimizer_call is not None and name in C.names_used(graph.optimizer_call)
            for other in region:
                for use in _uses(other, name):
                    if use is st or (graph.optimizer_call is not None and any(
                            n is graph.optimizer_call for n in C.walk(use))) or self._summary_only(use, name):
                        continue
                    problem = (f"`{_first_line(use)}` also reads `{name}`, which becomes a Keras"
                               " LearningRateSchedule (not a tensor)")
                    hint, where = f"read `{graph.optimizer}.learning_rate` instead", use
                    break
                if problem:
                    break
            if problem is None and not by_optimizer:
                continue  # only summaries read it: dropped with them
            if problem is None:
                problem, hint = self._schedule_problem(q, value, name, graph, pre, region, apply_call)
            if problem is not None:
                blockers.append(_Blocker(where, f"{header}: learning rate `{_first_line(st)}`: {problem}", hint))
                continue
            bound, _ = bind_args(value, ("learning_rate", "global_step", "decay_steps", "decay_rate",
                                         "staircase", "name"))
            args = [C.code_of(bound[p]) for p in ("learning_rate", "decay_steps", "decay_rate")]
            if "staircase" in bound:
                args.append(f"staircase={C.code_of(bound['staircase'])}")
            if "name" in bound:
                args.append(f"name={C.code_of(bound['name'])}")
            new = C.stmt(f"{name} = tf.keras.optimizers.schedules.ExponentialDecay({', '.join(args)})\n")
            new = new.with_changes(leading_lines=st.leading_lines)
            # where the statement was among the state built under the strategy
            position = len(analyze(pre[:k], self.qualname).state) + inserted
            graph.state.insert(position, new)
            inserted += 1
            converted.add(st)
        return converted

    def _schedule_problem(self, q, call, name, graph: Graph, pre, region, apply_call):
        """(why the schedule cannot become a Keras one, hint), or (None, "")."""
        if q != "train.exponential_decay":
            return _why(f"TFM303 maps only tf.train.exponential_decay to a Keras schedule; for `{q.split('.')[-1]}`"
                        f" use tf.keras.optimizers.schedules.{_TF1_SCHEDULES[q]} by hand", "the Keras schedule reads"
                        " optimizer.iterations, which counts the steps taken, as a global step starting at 0 did")
        bound, why = bind_args(call, ("learning_rate", "global_step", "decay_steps", "decay_rate", "staircase", "name"))
        if bound is None or not {"learning_rate", "global_step", "decay_steps", "decay_rate"} <= set(bound):
            return _why(f"its arguments cannot be mapped ({why or 'an argument is missing'})", "")
        gs = bound["global_step"]
        applied = C.arg(apply_call, 1, "global_step") if apply_call is not None else None
        if not (isinstance(gs, cst.Name) and isinstance(applied, cst.Name) and gs.value == applied.value):
            return _why(f"it decays on `{C.code_of(gs)}`, not on the global step the tower update advances"
                        " (apply_gradients(..., global_step=...)); optimizer.iterations counts the update's steps",
                        "decay on optimizer.iterations by hand")
        if not self._starts_at_zero(pre, gs.value):
            return _why(f"the global step `{gs.value}` is not created at 0 in the graph block; the Keras schedule"
                        " counts optimizer.iterations from 0", "start the global step at 0, or offset the schedule"
                        " by hand")
        for other in region:
            for n in C.calls_in(other):
                if self._moves(n, gs.value):
                    return _why(f"`{C.code_of(n)}` also moves the global step, which optimizer.iterations would not"
                                " follow", "decay on a step count of your own by hand")
        lr_arg = C.arg(graph.optimizer_call, 0, "learning_rate")
        if not (isinstance(lr_arg, cst.Name) and lr_arg.value == name):
            return _why(f"the optimizer takes `{C.code_of(lr_arg) if lr_arg is not None else '?'}`, not `{name}`"
                        " itself, as its learning rate", "pass the schedule itself as learning_rate")
        if self.qualname(graph.optimizer_call.func) == "train.MomentumOptimizer":
            return _why("TF1 MomentumOptimizer multiplies the whole accumulated momentum by the current learning"
                        " rate, Keras SGD(momentum=...) multiplies each step's gradient: once the rate decays the"
                        " two trajectories differ", "port the TF1 momentum update by hand, or accept the difference")
        return None, ""

    def _moves(self, call: cst.Call, variable: str) -> bool:
        """`gs.assign_add(1)` / `tf.assign(gs, ...)`: a write to the variable."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == variable:
            return func.attr.value.startswith("assign")
        ref = C.arg(call, 0, "ref")
        return ((self.qualname(func) or "").split(".")[-1] in ("assign", "assign_add", "assign_sub")
                and isinstance(ref, cst.Name) and ref.value == variable)

    def _starts_at_zero(self, pre, gs: str) -> bool:
        for st in pre:
            names, value, _ = C.assignment(st)
            if names != [gs] or not isinstance(value, cst.Call):
                continue
            q = self.qualname(value.func)
            if q in _ZERO_STEP_CREATORS:
                return True
            if q == "Variable":
                return _is_zero(C.arg(value, 0, "initial_value"))
            if q == "get_variable":
                init = C.arg(value, 3, "initializer")
                if isinstance(init, cst.Call):
                    iq = self.qualname(init.func)
                    if iq == "zeros_initializer":
                        return True
                    if iq == "constant_initializer":
                        first = C.arg(init, 0, "value")
                        return first is None or _is_zero(first)
            return False
        return False

    def _summary_only(self, statement, name: str) -> bool:
        """Is every read of `name` in the statement an argument of a TF1 summary op?"""
        reads = _name_nodes(statement, name)
        inside = set()
        for call in C.calls_in(statement):
            if (self.qualname(call.func) or "").startswith("summary."):
                inside |= {id(n) for n in _name_nodes(call, name)}
        return bool(reads) and {id(n) for n in reads} <= inside

    def _check_savers(self, graph_part, session_part, after, header, blockers) -> None:
        """A `tf.train.Saver` of all the variables saved by `saver.save(sess, path,
        global_step=n)` statements of the session code is carried over
        (``self.saver_plans``, see _tower_checkpoints); any other is a blocker."""
        self.saver_plans: list[SaverPlan] = []
        region = [*graph_part, *session_part, *after]
        savers = {}
        sessions = set()
        for st in region:
            for node in C.walk(st):
                names, value, _ = C.assignment(node)
                if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) == "train.Saver":
                    savers[names[0]] = node
                if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) in SESSION_CLASSES:
                    sessions.add(names[0])
                if isinstance(node, cst.WithItem) and isinstance(node.item, cst.Call) and node.asname is not None and (
                        self.qualname(node.item.func) in SESSION_CLASSES):
                    sessions.update(C.target_names(node.asname.name))
        hint = ("checkpoint the migrated program with tf.train.Checkpoint(optimizer=..., model=...) and"
                " tf.train.CheckpointManager(directory, max_to_keep=5): manager.save(checkpoint_number=step)")
        for name, made in savers.items():
            uses = [u for st in region for u in _uses(st, name) if u is not made]
            if not uses:
                continue
            found = saver_problem(name, made, uses, sessions, self.qualname)
            inside = {id(n) for st in session_part for n in C.walk(st)}
            if isinstance(found, SaverPlan) and all(id(u) in inside for u in found.saves) and not self.saver_plans:
                self.saver_plans.append(found)
                continue
            why = "a second saver, or one saved after the session"
            node, why = found if not isinstance(found, SaverPlan) else (uses[0], why)
            blockers.append(_Blocker(node, f"{header}: `{_first_line(node)}` checkpoints with a TF1 `tf.train.Saver`"
                                     f" (`{_first_line(made)}`), which TFM303 does not migrate here: {why}", hint))

    def _report_lost(self, lost, statements, new, session: _SessionRegion, header) -> None:
        """Say which statements still need names of the TF1 graph, located on
        input code (a use in generated code is located where the name was made)."""
        by_use: dict[int, tuple[cst.CSTNode, list[str]]] = {}
        for name in lost:
            made = next((u for st in statements for u in _binders(st, name)), None)
            original = {C.code_of(u).strip() for st in statements for u in _uses(st, name)}
            uses = [u for st in new for u in _uses(st, name)]
            use = next((u for u in uses if C.code_of(u).strip() in original), None)
            node = use or made or self.anchor
            if name in session.sessions:
                what = f"the TF1 session `{name}`"
            else:
                what = f"`{name}`" + (f" (`{_first_line(made)}`)" if made is not None else "")
            by_use.setdefault(id(node), (node, []))[1].append(what)
        for node, whats in by_use.values():
            where = f"`{_first_line(node)}`" if node is not self.anchor else "the code after the graph"
            sessions = any("TF1 session" in w for w in whats)
            self._decline(node, f"{header}: not rewritten, {where} still uses {' and '.join(whats)}, which the"
                          " migrated program no longer defines",
                          "fetch only the train op and values the towers compute, or port this statement by hand"
                          + (" (TF1 summaries, queue runners and Saver need the session)" if sessions else ""))

    # ---------------------------------------------------------------- unhandled loops
    def _report_unhandled(self, module: cst.Module) -> None:
        for loop, chain in self._loops_with_ancestors(module, []):
            if _loop_key(loop) in self.handled:
                continue
            self.handled.add(_loop_key(loop))
            why, hint = self._why_not_here(chain)
            self._decline(loop, f"tower loop `{_header(loop)}` not migrated: {why}", hint)

    def _why_not_here(self, chain) -> tuple[str, str]:
        """Why a tower loop under these compound statements was not taken, and a hint."""
        scope = chain
        for k, node in enumerate(chain):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                scope = chain[k + 1 :]
        in_function = any(isinstance(n, cst.FunctionDef) for n in chain)
        blocking = [n for n in scope if not isinstance(n, cst.With) and not (
            not in_function and isinstance(n, cst.If) and _is_main_guard(n))]
        withs = [n for n in scope if isinstance(n, cst.With)
                 and not all(self._scope_item(i) or self._dissolvable(i) for i in n.items)]
        if blocking:
            why = (f"it is inside `{_header(blocking[-1])}`; TFM303 migrates tower loops built directly in a"
                   " function body (or `if __name__ == \"__main__\":`) or under `with` blocks")
        elif withs:
            why = (f"it is inside `{_header(withs[-1])}`, which TFM303 cannot remove (it dissolves only"
                   ' `tf.Graph().as_default()`, `tf.device("...")` and variable/name scopes)')
        elif not in_function and not any(isinstance(n, cst.If) for n in chain):
            why = "it runs at module level; TFM303 migrates towers built inside a function"
        else:
            why = "the graph around it does not have the shape TFM303 migrates"
        return why, (_WHERE_HINT if (blocking or withs or not in_function) else
                     "build a MirroredStrategy replica function by hand")

    def _report_loss_towers(self, module: cst.Module) -> None:
        """Tower loops that only compute losses (one `minimize` of their
        combination after the loop), and towers written out one `with
        tf.device(...)` block each: located reasons, no rewrite."""
        for body, chain in _statement_lists(module, []):
            self._report_unrolled(body)
            for st in body:
                if not (isinstance(st, cst.For) and self._device_calls(st)) or _loop_key(st) in self.handled:
                    continue
                appended = _appended_names(st)
                if not appended:
                    continue
                minimize = next((c for other in body for c in C.calls_in(other)
                                 if _method(c) == "minimize"), None)
                if minimize is None:
                    continue
                self.handled.add(_loop_key(st))
                lists = ", ".join(f"`{n}`" for n in sorted(appended))
                restated, why = loss_towers(body, st, self.qualname, set(self.taken))
                if restated is not None:  # the towers' shape is fine: where they are is not
                    why, hint = self._why_not_here(chain)
                    self._decline(st, f"tower loop `{_header(st)}` not migrated: {why}", hint)
                    continue
                self._decline(st, f"tower loop `{_header(st)}` not migrated: the towers only compute losses (appended"
                              f" to {lists}) and one `{_first_line(minimize)}` after the loop differentiates their"
                              f" combination, and {why}; TFM303 migrates towers that compute their gradients"
                              " (`opt.compute_gradients(loss)`, then average_gradients) or whose losses are"
                              " concatenated and minimized as one mean",
                              "under MirroredStrategy each replica computes its slice's loss, e.g."
                              " tf.nn.compute_average_loss(per_example_loss, global_batch_size=...) for the mean over"
                              " the whole batch, and the strategy sums the replicas' gradients; port this by hand or"
                              " compute gradients per tower")

    def _device_calls(self, node) -> list[cst.Call]:
        return [n for n in C.walk(node) if isinstance(n, cst.Call) and self.qualname(n.func) == "device"]

    def _report_unrolled(self, body) -> None:
        """Two or more sibling `with tf.device(...)` blocks each computing
        gradients: towers written out by hand, no loop."""
        towers = [st for st in body if isinstance(st, cst.With) and any(
            isinstance(i.item, cst.Call) and self.qualname(i.item.func) == "device" for i in st.items)
            and any(isinstance(n, cst.Call) and _method(n) == "compute_gradients" for n in C.walk(st))]
        if len(towers) < 2 or _loop_key(towers[0]) in self.handled:
            return
        self.handled.add(_loop_key(towers[0]))
        devices = [C.code_of(i.item.args[0].value) for t in towers for i in t.items
                   if isinstance(i.item, cst.Call) and self.qualname(i.item.func) == "device" and i.item.args]
        jobs = [d for d in devices if "/job:" in d or "/task:" in d]
        message = (f"{len(towers)} towers written out one `with tf.device(...)` block each"
                   f" ({', '.join(f'`{d}`' for d in devices)}), not built by a loop over range(n)")
        hint = "build the towers in a loop over range(n) with the device string of tower i, then rerun tfmigrate"
        if len(set(jobs)) > 1:
            message += (": they run on other tasks of a cluster, driven by this one client, which MirroredStrategy"
                        " (one machine's devices) cannot do")
            hint = ("run the program on every worker under tf.distribute.MultiWorkerMirroredStrategy (TF_CONFIG"
                    " names the workers), each worker training on the share of the batch its tower was fed and the"
                    " strategy averaging the gradients as average_gradients did; port this by hand")
        self._decline(towers[0], f"towers not migrated: {message}", hint)

    def _loops_with_ancestors(self, node, chain):
        for st in _child_statements(node):
            if self._is_tower_loop(st):
                yield st, chain
            elif isinstance(st, (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.Finally)):
                yield from self._loops_with_ancestors(st, [*chain, st])

    # ---------------------------------------------------------------- output
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
        self.report(self.anchor, "in-graph towers now run as MirroredStrategy replicas; the loss is divided by the"
                    " number of replicas so gradients are averaged as average_gradients did",
                    fixed=True, severity="info", reference=REFERENCE[MIRRORED])
        if t.variable_device:
            self.report(self.anchor, f"the towers' device function put the variables on {t.variable_device} and the"
                        f" other ops on {C.code_of(t.device)}: the replicas run on those devices and MirroredStrategy"
                        " keeps a synchronized copy of each variable on every replica's device",
                        fixed=True, severity="info", reference=REFERENCE[MIRRORED])
        return out

    def _wants_template(self, graph: Graph) -> bool:
        return True  # towers share their variables: build them once, reuse per replica

    def _step_code(self, step_name, run_name, schedule_name, params, args, fetch, graph):
        # What the TF1 graph computed from the towers' losses (the mean loss)
        # stays in the tf.function too: run eagerly, those ops cost more than
        # a whole training step of the towers reference.
        names = ", ".join(params)
        self.train_replica_names = getattr(self, "train_replica_names", set()) | {f"{step_name}_replica"}
        self._record_step_spec(step_name, run_name, params, graph)
        lines = [f"def {step_name}({names}):"]
        wrapper = self._slice_wrapper(step_name, params)
        lines += wrapper
        replica_fn = f"{step_name}_slice" if wrapper else f"{step_name}_replica"
        values = list(fetch.values)
        if graph.global_step in values and resource_step(self.module_in, self.qualname, graph.global_step):
            # TF1 read its resource-variable step before the update; a reference
            # variable's fetch (TF1's default) gave it after: returned as it is below
            before = self._fresh(f"{graph.global_step}_before_update")
            lines.append(f"    {before} = {graph.global_step}.read_value()")
            values[values.index(graph.global_step)] = before
        if fetch.values or self.towers.loss_lists or self.post:
            lines += [
                f"    replica_results = {self.strategy_name}.experimental_local_results(",
                f"        {self.strategy_name}.run({replica_fn}, args={args if params else '()'}))",
            ]
        else:  # only the train op is run: no replica's result is read
            lines.append(f"    {self.strategy_name}.run({replica_fn}, args={args if params else '()'})")
        returned = self._replica_returns(fetch, graph, [])
        for lst in sorted(self.towers.loss_lists):
            item = self.towers.loss_items.get(lst, self.towers.loss)
            if len(returned) == 1:
                lines.append(f"    {lst} = list(replica_results)")
            else:
                lines.append(f"    {lst} = [values[{returned.index(item)}] for values in replica_results]")
        for k, value in enumerate(returned):
            if value != self.towers.loss and value not in fetch.values:
                continue  # appended to a list only
            if value != self.towers.loss and value in self.towers.first_tower_names:
                lines.append(f"    {value} = replica_results[0][{k}]  # the first tower computed it")
            elif value != self.towers.loss:
                lines.append(f"    {value} = replica_results[-1][{k}]  # after the TF1 loop: the last tower's")
            elif value in fetch.values:
                last = "replica_results[-1]" + ("[0]" if len(returned) > 1 else "")
                lines.append(f"    {value} = {last}  # after the TF1 loop: the last tower's")
        for _, st in self.post:
            lines.append("    " + C.code_of(st).strip())
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

    def _record_step_spec(self, step_name, run_name, params, graph: Graph) -> None:
        """What _tower_dataset needs to feed this step from a dataset: each
        parameter's placeholder shape and dtype, and whether every one was a
        tf.split source."""
        specs = {}
        for name, _, call in graph.placeholders:
            dtype, shape = C.arg(call, 0, "dtype"), C.arg(call, 1, "shape")
            if name in params and dtype is not None and isinstance(shape, (cst.List, cst.Tuple)):
                specs[name] = (C.code_of(shape), C.code_of(dtype))
        split_only = bool(params) and set(params) <= set(self.splits.values()) and not any(
            p in self.towers.index_slices for p in params)
        self.step_specs[step_name] = StepSpec(specs, split_only, self.anchor, run_name)

    def _slice_wrapper(self, fn_name: str, params) -> list[str]:
        """Lines of `{fn_name}_slice`, giving replica i the rows tower i read
        (a tf.split slice, or the tower's index slice) before calling
        `{fn_name}_replica`; none when every tower read whole values."""
        names = ", ".join(params)
        split_sources = set(self.splits.values())
        sliced = [p for p in params if p in split_sources]
        by_index = {p: self.towers.index_slices[p] for p in params if p in self.towers.index_slices}
        if not sliced and not by_index:
            return []
        lines = [f"    def {fn_name}_slice({names}):"]
        if sliced:
            lines.append("        # tower i trained on tf.split slice i of the batch: replica i takes the same slice")
        if by_index:
            index = self.towers.index
            lines.append(f"        # tower {index} sliced its rows of the batch by its index: replica {index} takes the"
                         " same rows")
        whole = [p for p in params if p not in split_sources and p not in by_index]
        if whole:
            lines.append(f"        # ({', '.join(whole)}: every tower read the whole value, so does every replica)")
        lines.append("        context = tf.distribute.get_replica_context()")
        if sliced:
            lines += [
                f"        {', '.join(sliced)}{',' if len(sliced) == 1 else ''} = (",
                "            tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync)),",
                "                      context.replica_id_in_sync_group)",
                f"            for value in {C.tuple_code(sliced)})",
            ]
        if by_index:
            lines.append(f"        {index} = context.replica_id_in_sync_group")
            lines += [f"        {p} = {p}[{code}]" for p, code in by_index.items()]
        lines.append(f"        return {fn_name}_replica({names})")
        return lines

    def _tower_values(self, values) -> bool:
        """Are these fetched values all computed by the towers (not after the loop)?"""
        bound = {n for st in self.towers.statements for n in _targets(st)} | {self.towers.loss}
        return bool(values) and set(values) <= bound

    def _eval_function(self, graph: Graph, fetch, session):
        """A fetch of values the towers computed: TF1's names held the last
        tower's tensors (the first tower's, under `if i == 0:`), computed on
        that tower's rows; the replicas compute them on the same rows."""
        if self.template is None or not self._tower_values(fetch.values):
            return super()._eval_function(graph, fetch, session)
        params = list(self.model_params)
        fetch.params = params
        names = ", ".join(params)
        fn_name = self._fresh(f"compute_{fetch.values[0]}")
        session.eval_names[id(fetch)] = fn_name
        exports = list(self.model_exports)
        lines = [f"def {fn_name}({names}):"]
        casts = self._eval_casts(graph, params)
        lines += ["    " + line for st in casts for line in C.code_of(st).strip().splitlines()]
        lines += [
            f"    def {fn_name}_replica({names}):",
            f"        {', '.join(exports)}{',' if len(exports) == 1 else ''} = {self.template}({names})",
            f"        return {', '.join(fetch.values)}",
        ]
        wrapper = self._slice_wrapper(fn_name, params)
        lines += wrapper
        replica_fn = f"{fn_name}_slice" if wrapper else f"{fn_name}_replica"
        lines += [
            f"    replica_results = {self.strategy_name}.experimental_local_results(",
            f"        {self.strategy_name}.run({replica_fn}, args={C.tuple_code(params)}))",
        ]
        for k, value in enumerate(fetch.values):
            item = f"[{k}]" if len(fetch.values) > 1 else ""
            if value in self.towers.first_tower_names:
                lines.append(f"    {value} = replica_results[0]{item}  # the first tower computed it")
            else:
                lines.append(f"    {value} = replica_results[-1]{item}  # after the TF1 loop: the last tower's")
        lines.append(f"    return {', '.join(fetch.values)}")
        fn = C.stmt("\n".join(lines) + "\n")
        return [fn.with_changes(decorators=[cst.Decorator(C.expr("tf.function"))],
                                leading_lines=[cst.EmptyLine(indent=False)])]

    def _build(self, device_with: cst.With, graph: Graph, session):
        out = self._build_averages(device_with, graph, session)
        if (self.towers.collected_scope or self.__dict__.get("absent_in_model")) and self.template is not None:
            # a module not in the project may add to collections (and read them) as it builds
            out = [transform(st, _TracedBuild(self.template, bool(self.towers.collected_scope))) for st in out]
        if self.saver_plans:
            tracked = [n for n in [graph.global_step, graph.optimizer, *graph.variables, self.template] if n]
            averages = (f"[{self.ema[0]}.average(variable) for variable in {self.trainable_name}]"
                        if self.ema is not None and self.ema[3] else None)
            code = checkpoint_code(self.saver_plans[0], self.checkpoint_name, self.save_function, tracked, averages)
            made = C.stmts(code)
            made = [st.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for st in made]
            self.ctx.require_import("os")
            k = max(k for k, st in enumerate(out) if C.assignment(st)[0] == [self.trainable_name] or (
                isinstance(st, cst.With) and self.ema is not None and f"{self.ema[0]}.apply(" in C.code_of(st)))
            out = [*out[:k + 1], *made, *out[k + 1:]]
            plan = self.saver_plans[0]
            self.report(plan.made, f"`{_first_line(plan.made)}`: its saves become `{self.save_function}(path, step)`,"
                        " a tf.train.Checkpoint of the step counter, the optimizer and the model"
                        + (" and the moving averages" if averages else "") + " written by a"
                        " tf.train.CheckpointManager as <path>-<step>, the newest kept as the Saver kept them (it also"
                        " counts checkpoints an earlier run listed in that directory)", fixed=True, severity="info",
                        reference=REFERENCE[MIRRORED])
        return out

    def _build_averages(self, device_with: cst.With, graph: Graph, session):
        out = super()._build(device_with, graph, session)
        if self.ema is None or not self.ema[3]:
            return out
        # the averages' variables are made once, from the variables' initial
        # values as TF1's were (that first update leaves them equal)
        k = next(k for k, st in enumerate(out) if C.assignment(st)[0] == [self.trainable_name])
        made = C.stmts(
            f"with {self.strategy_name}.scope():\n"
            "    # The moving averages start from the variables' initial values, as TF1's did.\n"
            f"    {self.ema[0]}.apply({self.trainable_name})\n")
        self.report(self.ema[1], f"`{_first_line(self.ema[1])}`: the moving averages of the trainable variables are"
                    " made under the strategy and updated by each step after the variables (TF1's tf.group ran the"
                    " two updates in no set order; ema.average(variable) reads them)", fixed=True,
                    severity="info", reference=REFERENCE[MIRRORED])
        return [*out[:k + 1], *made, *out[k + 1:]]

    def _model_function(self, graph: Graph, session):
        """All tower statements as one function of the placeholders, returning
        the tower loss, the fetched tower values and what the towers append to
        lists read after the loop."""
        exports: list[str] = [graph.loss.value] if isinstance(graph.loss, cst.Name) else []
        items = [self.towers.loss_items[lst] for lst in sorted(self.towers.loss_lists)]
        for fetch in [*session.train_fetches.values(), *session.eval_fetches.values()]:
            exports += [n for n in [*fetch.values, *items] if n in graph.compute_names and n not in exports]
        wanted = set(exports) | C.names_used(graph.loss)
        statements = [st for _, st in graph.slice_for(wanted)]
        absent = _absent_modules.absent_calls(self._program().tracer, statements)
        self.absent_in_model = bool(absent)
        for module, (calls, keys, first) in absent.items():
            self.report(first, _absent_modules.absent_module_note(module, calls, keys, shared=True),
                        hint=_absent_modules.HINT.format(module=module), fixed=True, severity="warning",
                        reference=REFERENCE[MIRRORED])
        self.model_params = graph.params_for([(None, st) for st in statements])
        self.model_exports = exports
        self.model_fn = self._fresh("model_fn")
        ret = exports[0] if len(exports) == 1 else ", ".join(exports)
        fn = C.stmt(f"def {self.model_fn}({', '.join(self.model_params)}):\n    return {ret}\n")
        body = statements + list(fn.body.body)
        scope = self.towers.collected_scope
        if scope:
            # the tower's collection entries are those named under its scope
            block = C.stmt(f"with tf.compat.v1.name_scope(\"tower\") as {scope}:\n    pass\n")
            comment = C.stmts("# Each replica builds its tower under a name scope of its own (the second one's\n"
                              "# ops are named replica_1/...): its collections hold what its own code added.\n"
                              "pass\n")[0].leading_lines
            body = [block.with_changes(body=C.indented(body, fn.body), leading_lines=comment)]
        fn = fn.with_changes(body=fn.body.with_changes(body=body), leading_lines=[cst.EmptyLine(indent=False)])
        return [fn]

    def _replica_state_fetches(self, fetch, graph: Graph) -> list[str]:
        # the step function returns fetched variables itself (see _step_code)
        return []

    def _replica_returns(self, fetch, graph: Graph, state_fetches) -> list[str]:
        # each replica returns its tower loss (and the tower values fetched
        # with the train op); the step derives the fetches from them
        bound = {n for st in self.towers.statements for n in _targets(st)}
        items = [self.towers.loss_items[lst] for lst in sorted(self.towers.loss_lists)]
        wanted = [n for n in [*fetch.values, *items] if n in bound and n != self.towers.loss]
        return [self.towers.loss, *dict.fromkeys(wanted)]


def _why(message: str, hint: str) -> tuple[str, str]:
    return message, hint


def _targets(statement) -> list[str]:
    names, _, _ = C.assignment(statement)
    return names


def _is_main_guard(node) -> bool:
    """`if __name__ == "__main__":` with no else."""
    test = node.test
    return node.orelse is None and isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and (
        isinstance(test.comparisons[0].operator, cst.Equal)) and {
        C.code_of(test.left).strip(), C.code_of(test.comparisons[0].comparator).strip()} in (
        {"__name__", "'__main__'"}, {"__name__", '"__main__"'})


def _statement_lists(node, chain):
    """Every statement list of the module with its enclosing compound statements."""
    body = list(_child_statements(node))
    yield body, chain
    for st in body:
        if isinstance(st, (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.Finally)):
            yield from _statement_lists(st, [*chain, st])


def _appended_names(loop: cst.For) -> set[str]:
    """Lists the loop body appends to (`losses.append(cost)`)."""
    out = set()
    for n in C.walk(loop):
        if isinstance(n, cst.Call) and _method(n) == "append" and isinstance(n.func.value, cst.Name) and (
                C.arg(n, 0, None) is not None):
            out.add(n.func.value.value)
    return out


def _loop_key(loop: cst.For) -> str:
    return C.code_of(loop.with_changes(leading_lines=[]))


def _header(node) -> str:
    return _first_line(node)


def _order(statements, node) -> int:
    """Source order of a reported node among the region's statements."""
    for k, st in enumerate(statements):
        if st is node or any(n is node for n in C.walk(st)):
            return k
    return len(statements)


def _blocking_with(holder, loop, rule: TowersToMirrored):
    """The innermost statement between `holder` and the loop that is not a
    scope the rule flattens (a session block, a control-dependency block...)."""
    found = holder
    node = holder
    while isinstance(node, cst.With):
        if not all(isinstance(i.item, cst.Call) and rule.qualname(i.item.func) in ("variable_scope", "name_scope", "device")
                   for i in node.items):
            found = node
        node = next((st for st in C.body_of(node.body) if any(n is loop for n in C.walk(st))), None)
    return found


def _is_device_string(node) -> bool:
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Modulo, cst.Add)):
        return isinstance(node.left, (cst.SimpleString, cst.FormattedString))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
        return isinstance(node.func.value, (cst.SimpleString, cst.FormattedString))
    return False


def _device_spec_string(call: cst.Call) -> cst.BaseExpression | None:
    """`tf.DeviceSpec(device_type="GPU", device_index=i)` -> `"/gpu:%d" % i`."""
    kinds = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    kind, index = kinds.get("device_type"), kinds.get("device_index")
    if len(kinds) != 2 or len(call.args) != 2 or not isinstance(kind, cst.SimpleString) or index is None:
        return None
    name = kind.evaluated_value.lower()
    if name not in ("gpu", "cpu"):
        return None
    return C.expr(f'"/{name}:%d" % {C.code_of(index)}')


def _is_zero(node) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and node.evaluated_value == 0


def _name_nodes(node, name: str) -> list[cst.Name]:
    """The Name nodes reading `name` (not attribute or keyword names)."""
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            if n.value == name:
                out.append(n)
        elif isinstance(n, (cst.Attribute, cst.Arg)):
            stack.append(n.value)
        else:
            stack.extend(C.children(n))
    return out


def _simple_statements(statement):
    """The simple statement lines of a statement, nested ones included, in order."""
    if isinstance(statement, cst.SimpleStatementLine):
        return [statement]
    return [n for n in C.walk(statement) if isinstance(n, cst.SimpleStatementLine)]


def _uses(statement, name: str):
    """The innermost simple statements (or block headers) of `statement` reading `name`, in order."""
    for node in C.walk(statement):
        if isinstance(node, cst.SimpleStatementLine):
            if name in C.names_used(node):
                yield node
        elif name in _header_names(node):
            yield node


def _header_names(node) -> set[str]:
    """Names read by the header of a `for`, `if`, `while` or `with` block."""
    if isinstance(node, cst.For):
        return C.names_used(node.iter)
    if isinstance(node, (cst.If, cst.While)):
        return C.names_used(node.test)
    if isinstance(node, cst.With):
        return set().union(*(C.names_used(item.item) for item in node.items))
    return set()


def _binders(statement, name: str):
    for line in _simple_statements(statement):
        names, _, _ = C.assignment(line)
        if name in names:
            yield line


def _scope_bound(statements) -> set[str]:
    """Names bound by assignments, loop targets and `as` clauses (nested functions excluded)."""
    out: set[str] = set()
    stack = list(statements)
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            out.add(n.name.value)
            continue
        if isinstance(n, cst.Lambda):
            continue
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
            out.update(C.target_names(n.target))
        elif isinstance(n, cst.AsName):
            out.update(C.target_names(n.name))
        stack.extend(C.children(n))
    return out


def _child_statements(node):
    """Statements directly inside a module, compound statement or clause."""
    out = []
    for field in ("body", "orelse", "handlers", "finalbody"):
        value = getattr(node, field, None)
        if value is None:
            continue
        if isinstance(value, cst.BaseSuite):
            out += list(C.body_of(value))
        elif isinstance(value, (list, tuple)):
            out += [v for v in value if isinstance(v, cst.CSTNode)]
        elif isinstance(value, cst.CSTNode):
            out.append(value)  # an elif, else or finally clause
    return out


_BUILTINS = frozenset(dir(builtins))


def _free_names(statements) -> set[str] | None:
    """Names the statements read that they do not bind (scope-blind, as the
    engine's own check); None when the code cannot be analysed."""
    try:
        tree = ast.parse(cst.Module(body=list(statements)).code)
    except (SyntaxError, ValueError):
        return None
    loads, bound = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.alias):
            bound.add(n.asname or n.name.partition(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            bound.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
    return loads - bound - _BUILTINS


def _introduced(before, after) -> list[str]:
    """Names the rewritten statements read but no longer bind."""
    old, new = _free_names(before), _free_names(after)
    if old is None or new is None:
        return []
    return sorted(new - old)


_AVERAGED_COMMENT = "# average_gradients averaged the replicas' gradients; strategies sum them."
_CONCATENATED_COMMENT = "# The towers minimized the mean of their losses; strategies sum the replicas' gradients."


class _BeforeReturn(cst.CSTTransformer):
    """Statements added before the return of the named functions."""

    def __init__(self, names: set[str], statements):
        super().__init__()
        self.names, self.statements = names, statements

    def leave_FunctionDef(self, original, updated):
        if updated.name.value not in self.names or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        k = next((k for k, st in enumerate(body) if isinstance(st, cst.SimpleStatementLine)
                  and isinstance(st.body[0], cst.Return)), len(body))
        return updated.with_changes(body=updated.body.with_changes(body=[*body[:k], *self.statements, *body[k:]]))


class _TracedBuild(cst.CSTTransformer):
    """`model(dummies)` -> `tf.function(model)(dummies)`: collections hold
    graph tensors, named under their scope; an eager build has neither."""

    def __init__(self, template: str, scoped: bool):
        super().__init__()
        self.template = template
        self.scoped = scoped

    def leave_SimpleStatementLine(self, original, updated):
        call = C.single_expr(original)
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == self.template):
            return updated
        why = ("# as the towers were, so that the tower reads the collection entries of its scope.\n" if self.scoped
               else "# so that the terms the model adds to its collections stay in this build's graph.\n")
        comment = C.stmts("# Build the model's variables once, under the strategy, as the TF1 graph did: traced,\n"
                          + why + "pass\n")[0].leading_lines
        return updated.with_changes(
            body=[updated.body[0].with_changes(value=call.with_changes(func=C.expr(f"tf.function({self.template})")))],
            leading_lines=[line for line in updated.leading_lines if line.comment is None] + list(comment))


class _ReplaceComment(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def leave_Comment(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated


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
    # a loop computing gradients without tf.device is not a tower loop: nothing to say
    Valid(
        """
        import tensorflow as tf


        def per_example_gradients(opt, losses):
            out = []
            for loss in losses:
                out.append(opt.compute_gradients(loss))
            return out
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
                    # the inputs as tensors of the step's dtypes, which take tf.function's
                    # fast path (NumPy arguments cost more than the step)
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
                    # the inputs as tensors of the step's dtypes, which take tf.function's
                    # fast path (NumPy arguments cost more than the step)
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
    # towers built directly in the function body (no graph block) convert like those in one; a
    # placeholder every tower read whole (keep) is passed whole to every replica
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def fit(batches, towers):
            sgd = tf.train.GradientDescentOptimizer(0.01)
            feats = tf.placeholder(tf.float32, [64, 10])
            goal = tf.placeholder(tf.float32, [64, 1])
            keep = tf.placeholder(tf.float32, [])
            feat_parts = tf.split(feats, towers)
            goal_parts = tf.split(goal, towers)
            per_tower = []
            for t in range(towers):
                with tf.device("/gpu:%d" % t):
                    err = regression_loss(feat_parts[t], goal_parts[t], keep)
                    per_tower.append(sgd.compute_gradients(err))
            step_op = sgd.apply_gradients(mean_of_grads(per_tower))
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for f, g in batches:
                    _, e = sess.run([step_op, err], feed_dict={feats: f, goal: g, keep: 0.9})
                    if e < 1e-3:
                        break
        """,
        """
        import tensorflow.compat.v1 as tf


        def fit(batches, towers):
            strategy = tf.distribute.MirroredStrategy(["/gpu:%d" % t for t in range(towers)])

            def model_fn(feats, goal, keep):
                err = regression_loss(feats, goal, keep)
                return err

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                sgd = tf.keras.optimizers.SGD(learning_rate=0.01)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([64, 10], tf.float32), tf.zeros([64, 1], tf.float32), tf.zeros([], tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(feats, goal, keep):
                def train_step_replica(feats, goal, keep):
                    with tf.GradientTape() as tape:
                        err = model(feats, goal, keep)
                        # average_gradients averaged the replicas' gradients; strategies sum them.
                        scaled_loss = err / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    sgd.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return err
                def train_step_slice(feats, goal, keep):
                    # tower i trained on tf.split slice i of the batch: replica i takes the same slice
                    # (keep: every tower read the whole value, so does every replica)
                    context = tf.distribute.get_replica_context()
                    feats, goal = (
                        tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync)),
                                  context.replica_id_in_sync_group)
                        for value in (feats, goal))
                    return train_step_replica(feats, goal, keep)
                replica_results = strategy.experimental_local_results(
                    strategy.run(train_step_slice, args=(feats, goal, keep)))
                err = replica_results[-1]  # after the TF1 loop: the last tower's
                return err

            def run_train_step(feats, goal, keep):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                feats, goal, keep = tf.convert_to_tensor(feats, tf.float32), tf.convert_to_tensor(goal, tf.float32), tf.convert_to_tensor(keep, tf.float32)
                results = train_step(feats, goal, keep).numpy()
                return results
            for f, g in batches:
                e = run_train_step(f, g, 0.9)
                if e < 1e-3:
                    break
        """,
        diagnostics=(),
    ),
    # no tf.split at all: every tower read the whole batch, so every replica gets it whole
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def fit(batches):
            sgd = tf.train.AdamOptimizer(0.001)
            feats = tf.placeholder(tf.float32, [None, 10])
            grads_by_gpu = []
            for g in range(2):
                with tf.device("/gpu:{}".format(g)):
                    err = reconstruction_loss(feats)
                    grads_by_gpu.append(sgd.compute_gradients(err))
            step_op = sgd.apply_gradients(average_gradients(grads_by_gpu))
            with tf.Session() as sess:
                for f in batches:
                    _, e = sess.run([step_op, err], feed_dict={feats: f})
                    if e < 1e-3:
                        break
        """,
        """
        import tensorflow.compat.v1 as tf


        def fit(batches):
            strategy = tf.distribute.MirroredStrategy(["/gpu:{}".format(g) for g in range(2)])

            def model_fn(feats):
                err = reconstruction_loss(feats)
                return err

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                sgd = tf.keras.optimizers.Adam(learning_rate=0.001, epsilon=1e-08)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([1, 10], tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(feats):
                def train_step_replica(feats):
                    with tf.GradientTape() as tape:
                        err = model(feats)
                        # average_gradients averaged the replicas' gradients; strategies sum them.
                        scaled_loss = err / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    sgd.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return err
                replica_results = strategy.experimental_local_results(
                    strategy.run(train_step_replica, args=(feats,)))
                err = replica_results[-1]  # after the TF1 loop: the last tower's
                return err

            def run_train_step(feats):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                feats = tf.convert_to_tensor(feats, tf.float32)
                results = train_step(feats).numpy()
                return results
            for f in batches:
                e = run_train_step(f)
                if e < 1e-3:
                    break
        """,
        diagnostics=(),
    ),
    # a named exponential_decay of a global step that starts at 0 and that the update advances:
    # the Keras schedule of optimizer.iterations (summaries of the rate are dropped with the others)
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def fit(batches, towers):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                counter = tf.train.get_or_create_global_step()
                # halve the rate every 500 steps
                rate = tf.train.exponential_decay(0.2, counter, 500, 0.5, staircase=True)
                sgd = tf.train.GradientDescentOptimizer(rate)
                feats = tf.placeholder(tf.float32, [64, 10])
                feat_parts = tf.split(feats, towers)
                per_tower = []
                for t in range(towers):
                    with tf.device("/gpu:%d" % t):
                        err = reconstruction_loss(feat_parts[t])
                        per_tower.append(sgd.compute_gradients(err))
                step_op = sgd.apply_gradients(average_gradients(per_tower), global_step=counter)
                tf.summary.scalar("rate", rate)
                with tf.Session() as sess:
                    for f in batches:
                        _, e = sess.run([step_op, err], feed_dict={feats: f})
                        if e < 1e-3:
                            break
        """,
        """
        import tensorflow.compat.v1 as tf


        def fit(batches, towers):
            strategy = tf.distribute.MirroredStrategy(["/gpu:%d" % t for t in range(towers)])

            def model_fn(feats):
                err = reconstruction_loss(feats)
                return err

            with strategy.scope():
                counter = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                # halve the rate every 500 steps
                rate = tf.keras.optimizers.schedules.ExponentialDecay(0.2, 500, 0.5, staircase=True)
                sgd = tf.keras.optimizers.SGD(learning_rate=rate)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([64, 10], tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(feats):
                def train_step_replica(feats):
                    with tf.GradientTape() as tape:
                        err = model(feats)
                        # average_gradients averaged the replicas' gradients; strategies sum them.
                        scaled_loss = err / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    sgd.apply_gradients(zip(gradients, trainable_variables))
                    counter.assign_add(1)
                    return err
                def train_step_slice(feats):
                    # tower i trained on tf.split slice i of the batch: replica i takes the same slice
                    context = tf.distribute.get_replica_context()
                    feats, = (
                        tf.gather(tf.stack(tf.split(value, context.num_replicas_in_sync)),
                                  context.replica_id_in_sync_group)
                        for value in (feats,))
                    return train_step_replica(feats)
                replica_results = strategy.experimental_local_results(
                    strategy.run(train_step_slice, args=(feats,)))
                err = replica_results[-1]  # after the TF1 loop: the last tower's
                return err

            def run_train_step(feats):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                feats = tf.convert_to_tensor(feats, tf.float32)
                results = train_step(feats).numpy()
                return results
            for f in batches:
                e = run_train_step(f)
                if e < 1e-3:
                    break
        """,
        diagnostics=(),
    ),
    # crash regression (2-space indent): towers with no fed input, each building its own from the
    # tower index through a helper module -> declined, located on the tower's input
    Invalid(
        """
        import tensorflow as tf
        import model_lib


        def run(argv=None):
          with tf.Graph().as_default(), tf.device("/cpu:0"):
            step = tf.Variable(0, trainable=False)
            sgd = tf.train.GradientDescentOptimizer(0.1)
            collected = []
            for k in range(4):
              with tf.device("/gpu:%d" % k):
                cost = model_lib.tower_cost(k)
                collected.append(sgd.compute_gradients(cost))
            update = sgd.apply_gradients(model_lib.average_gradients(collected), global_step=step)
            with tf.Session() as sess:
              sess.run(tf.global_variables_initializer())
              for _ in range(10):
                c, _ = sess.run([cost, update])
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # crash regression: function-level towers, no graph block, no placeholder at all
    Invalid(
        """
        import tensorflow as tf


        def run():
            sgd = tf.train.GradientDescentOptimizer(0.1)
            collected = []
            for k in range(2):
                with tf.device("/gpu:%d" % k):
                    cost = synthetic_cost()
                    collected.append(sgd.compute_gradients(cost))
            update = sgd.apply_gradients(average_gradients(collected))
            with tf.Session() as sess:
                for _ in range(10):
                    sess.run(update)
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # the canonical multi-GPU shape: queue input and a name_scope name given to code not in
    # the program, one diagnostic each (the EMA grouped with the update and the Saver's saves
    # would have been migrated)
    Invalid(
        """
        import tensorflow as tf


        def train(data_dir, gpus, steps):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                step = tf.train.get_or_create_global_step()
                rate = tf.train.exponential_decay(0.1, step, 1000, 0.1, staircase=True)
                sgd = tf.train.GradientDescentOptimizer(rate)
                images, labels = read_records(data_dir)
                prefetched = tf.contrib.slim.prefetch_queue.prefetch_queue([images, labels], capacity=2 * gpus)
                grads_list = []
                with tf.variable_scope(tf.get_variable_scope()):
                    for g in range(gpus):
                        with tf.device("/gpu:%d" % g), tf.name_scope("replica_%d" % g) as ns:
                            image_batch, label_batch = prefetched.dequeue()
                            cost = scoped_loss(ns, image_batch, label_batch)
                            tf.get_variable_scope().reuse_variables()
                            grads_list.append(sgd.compute_gradients(cost))
                apply_op = sgd.apply_gradients(average_gradients(grads_list), global_step=step)
                averager = tf.train.ExponentialMovingAverage(0.999, step)
                average_op = averager.apply(tf.trainable_variables())
                train_op = tf.group(apply_op, average_op)
                saver = tf.train.Saver(tf.global_variables())
                sess = tf.Session()
                sess.run(tf.global_variables_initializer())
                tf.train.start_queue_runners(sess=sess)
                for i in range(steps):
                    _, c = sess.run([train_op, cost])
                    if i % 1000 == 0:
                        saver.save(sess, data_dir + "/model.ckpt", global_step=i)
        """,
        None,
        diagnostics=('TFM303', 'TFM303'),
    ),
    # a tower loop inside an `if` is not migrated, and says so
    Invalid(
        """
        import tensorflow as tf


        def build(use_towers):
            sgd = tf.train.GradientDescentOptimizer(0.1)
            feats = tf.placeholder(tf.float32, [32, 4])
            parts = tf.split(feats, 2)
            collected = []
            if use_towers:
                for k in range(2):
                    with tf.device("/gpu:%d" % k):
                        cost = net_cost(parts[k])
                        collected.append(sgd.compute_gradients(cost))
            return sgd.apply_gradients(average_gradients(collected))
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # a tower loop at module level is not migrated, and says so
    Invalid(
        """
        import tensorflow as tf

        sgd = tf.train.GradientDescentOptimizer(0.1)
        collected = []
        for k in range(2):
            with tf.device("/gpu:%d" % k):
                collected.append(sgd.compute_gradients(net_cost(k)))
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # MomentumOptimizer under a decaying rate: Keras SGD(momentum=) differs once the rate changes
    Invalid(
        """
        import tensorflow as tf


        def fit(batches):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                counter = tf.train.get_or_create_global_step()
                rate = tf.train.exponential_decay(0.1, counter, 100, 0.5)
                sgd = tf.train.MomentumOptimizer(rate, 0.9)
                feats = tf.placeholder(tf.float32, [32, 4])
                parts = tf.split(feats, 2)
                collected = []
                for k in range(2):
                    with tf.device("/gpu:%d" % k):
                        cost = net_cost(parts[k])
                        collected.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(collected), global_step=counter)
                with tf.Session() as sess:
                    for f in batches:
                        sess.run(update, feed_dict={feats: f})
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # a global step that does not start at 0: optimizer.iterations would lag behind it
    Invalid(
        """
        import tensorflow as tf


        def fit(batches):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                counter = tf.Variable(1, trainable=False)
                rate = tf.train.exponential_decay(0.1, counter, 100, 0.5)
                sgd = tf.train.GradientDescentOptimizer(rate)
                feats = tf.placeholder(tf.float32, [32, 4])
                parts = tf.split(feats, 2)
                collected = []
                for k in range(2):
                    with tf.device("/gpu:%d" % k):
                        cost = net_cost(parts[k])
                        collected.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(collected), global_step=counter)
                with tf.Session() as sess:
                    for f in batches:
                        sess.run(update, feed_dict={feats: f})
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # an optimizer from a helper: its Keras equivalent cannot be chosen
    Invalid(
        """
        import tensorflow as tf


        def fit(batches):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                counter = tf.train.get_or_create_global_step()
                sgd = optimizers.make("sgd", 0.1)
                feats = tf.placeholder(tf.float32, [32, 4])
                parts = tf.split(feats, 2)
                collected = []
                for k in range(2):
                    with tf.device("/gpu:%d" % k):
                        cost = net_cost(parts[k])
                        collected.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(collected), global_step=counter)
                with tf.Session() as sess:
                    for f in batches:
                        sess.run(update, feed_dict={feats: f})
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # a device function instead of a device string
    Invalid(
        """
        import tensorflow as tf


        def fit(batches):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                counter = tf.train.get_or_create_global_step()
                sgd = tf.train.GradientDescentOptimizer(0.1)
                feats = tf.placeholder(tf.float32, [32, 4])
                parts = tf.split(feats, 2)
                collected = []
                for k in range(2):
                    with tf.device(pin_variables_to_cpu("/gpu:%d" % k)):
                        cost = net_cost(parts[k])
                        collected.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(collected), global_step=counter)
                with tf.Session() as sess:
                    for f in batches:
                        sess.run(update, feed_dict={feats: f})
        """,
        None,
        diagnostics=('TFM303',),
    ),
    # a summary op fetched on its own would leave the session and the op undefined: declined
    Invalid(
        """
        import tensorflow as tf


        def fit(batches):
            with tf.Graph().as_default(), tf.device("/cpu:0"):
                sgd = tf.train.GradientDescentOptimizer(0.1)
                feats = tf.placeholder(tf.float32, [32, 4])
                parts = tf.split(feats, 2)
                collected = []
                for k in range(2):
                    with tf.device("/gpu:%d" % k):
                        cost = net_cost(parts[k])
                        collected.append(sgd.compute_gradients(cost))
                update = sgd.apply_gradients(average_gradients(collected))
                tf.summary.scalar("cost", cost)
                summaries = tf.summary.merge_all()
                with tf.Session() as sess:
                    for f in batches:
                        sess.run(update, feed_dict={feats: f})
                        written = sess.run(summaries, feed_dict={feats: f})
        """,
        None,
        diagnostics=('TFM303',),
    ),
]
