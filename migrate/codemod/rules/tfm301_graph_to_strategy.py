"""TFM301 graph-to-strategy: the rule orchestrates; each stage is a module.

analysis
    _graph.py (the device-setter block: variables, optimizer, train op, placeholders),
    _update_barriers.py (update ops the gradients wait for),
    _rebinding.py, _dataflow.py (what the block and the code around it bind and read),
    _flag_choice.py, ../program/ (tracing through helpers and sibling modules),
    _tfm301_session.py (what the session runs, its hooks, checkpoints and loop bounds),
    _session_helpers.py (functions the session is handed to, what they run)
plan
    this file: the strategy, the model built once, step and evaluation functions,
    checkpoints; _session_loop.py (the program's own hooks), _summaries.py,
    _session_helpers_emit.py (those functions' runs as evaluation functions)
emitted code
    this file (strategy scope, step functions), _tfm301_loop.py (the training loop
    around them, steps in flight or batched), _session_helpers_emit.py (the helpers
    handed the evaluation functions)
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import transform, walk_in_functions
from migrate.codemod.program import callers, placement
from migrate.codemod.program.model import ProgramModel, explain_device
from migrate.codemod.rules import (
    _absent_modules,
    _collection_reads,
    _dataflow,
    _device_modes,
    _export_helpers,
    _feed_input,
    _flag_choice,
    _foreign_placement,
    _moving_average,
    _numpy_formats,
    _outer_placeholders,
    _placement,
    _port_probes,
    _queue_input,
    _rebinding,
    _server_flow,
    _serving_export,
    _session_helpers,
    _session_helpers_emit,
    _single_machine,
    _tutorial_mnist,
    _update_barriers,
)
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._equivalents import (
    NO_KERAS_SCHEDULE,
    is_schedule,
    kept_in_compat_v1,
    optimizer_call,
    schedule_call,
    schedule_step,
)
from migrate.codemod.rules._graph import (
    DROPPED_CALLS,
    GLOBAL_STEP_CREATORS,
    ITERATOR_MAKERS,
    QUEUE_CLASSES,
    VARIABLE_CREATORS,
    Graph,
    InputPipeline,
    analyze,
    extend,
    global_step_statement,
    gradient_source,
    is_device_item,
    pinned_variables,
    plumbing_choice,
)
from migrate.codemod.rules._program import (
    LOCAL,
    MIRRORED,
    MWMS,
    PSS,
    REFERENCE,
    STRATEGY_CLASS,
    detect_strategy,
)
from migrate.codemod.rules._session_loop import (
    carry_program_hooks,
    followed_hook_names,
    hook_list_names,
    unread_hook_lists,
)
from migrate.codemod.rules._step_variable import resource_step
from migrate.codemod.rules._summaries import carry_summaries
from migrate.codemod.rules._tfm301_loop import (
    _DropGraphModeSwitches,
    _ReplaceNodes,
    _results_code,
    rewrite_session,
)
from migrate.codemod.rules._tfm301_session import (
    SESSION_CLASSES,
    SUPERVISOR_SESSION_METHODS,
    _depends_on,
    _Fetch,
    _method,
    _owner,
    _reads_task_index,
    _SessionRegion,
)
from migrate.codemod.rules._tower_inputs import own_returns
from migrate.codemod.tfnames import dotted


def _optimizer_code(call: cst.Call, qualname) -> tuple[str, str | None]:
    """Keras 3 optimizer with the TF1 optimizer's numerics (or a note on how
    it differs); else the compat.v1 one, which also works eagerly, with a note."""
    q = qualname(call.func)
    new, reason = optimizer_call(call, q)
    if new is not None:
        return C.code_of(new), reason or None
    args = ", ".join(C.code_of(a).rstrip(", ") for a in call.args)
    return f"tf.compat.v1.{q}({args})", reason or f"no Keras optimizer reproduces {q}; kept the tf.compat.v1 one"


_MOMENTUM_NOTE = (
    "kept tf.compat.v1.train.MomentumOptimizer, which runs in TF2 with TF1's numerics: the learning rate"
    " changes during training (`{lr}`), and TF1's MomentumOptimizer multiplies the whole accumulated momentum"
    " by the current rate (var -= lr_t * accum) where Keras SGD folds each step's rate into its velocity"
    " (v = momentum * v - lr_t * g): equal while the rate is constant, different once it decays. To move to"
    " Keras, use tf.keras.optimizers.SGD(learning_rate=<Keras schedule>, momentum=...) and accept the"
    " different trajectory"
)



# tf.compat.v1.make_template reuses get_variable's variables only; a model whose
# helpers call tf.Variable gets this recorder instead.
_RECORDER = """class {name}(tf.Module):
    # TF1 built the model's graph once and every step reused its variables; in TF2
    # each call of a tf.Variable-creating helper makes new ones. The first call
    # records the variables the model creates, later calls get them back in order.
    def __init__(self, model_fn):
        super().__init__(name="model")
        self.model_fn = model_fn
        self.created = []

    def __call__(self, *args):
        recorded = iter(list(self.created))

        def reuse_or_create(next_creator, **kwargs):
            variable = next(recorded, None)
            if variable is None:
                variable = next_creator(**kwargs)
                self.created.append(variable)
            return variable

        with tf.variable_creator_scope(reuse_or_create):
            return self.model_fn(*args)
"""


class GraphToStrategy(Rule):
    """What it does
    Rebuilds a between-graph replicated TF1 training program on a
    ``tf.distribute`` strategy: the ``with tf.device(replica_device_setter(...))``
    block becomes ``with strategy.scope():`` holding the variables, global step
    and optimizer; the forward computation and the optimizer's train op become a
    ``@tf.function`` step (``GradientTape`` + ``apply_gradients``) whose
    parameters are the old placeholders; ``sess.run(train_op, feed_dict=...)``
    becomes a call of that step on the strategy; ``MonitoredTrainingSession`` /
    ``Supervisor`` / ``Session`` blocks dissolve into plain Python, their hooks
    into loop bounds (``StopAtStepHook``) and ``tf.train.Checkpoint`` +
    ``CheckpointManager`` with restore-on-start (``checkpoint_dir``/``logdir``),
    also of the TF1 job's own name-based checkpoint there (``_legacy_restore``).
    The trained model's export for serving after training (a session bundle's
    ``Exporter``, a ``SavedModelBuilder``, ``simple_save``) becomes
    ``tf.saved_model.save`` of a ``tf.function`` signature computing the same
    outputs from the same inputs, at the same place, into the same directory
    (``_serving_export``).

    Asynchronous ps/worker training maps to ``ParameterServerStrategy`` with a
    ``ClusterCoordinator``: the chief queues each step for a free worker and
    runs the rest of the loop body on the step's results up to
    ``2 x workers`` steps later, so the workers train in parallel as the TF1
    workers did (a loop that needs each result before going on -- it stops
    on the loss, or reads model state -- waits for every step instead);
    ``SyncReplicasOptimizer`` maps to ``MultiWorkerMirroredStrategy`` with the
    loss divided by the number of replicas, because SyncReplicas *averaged* the
    workers' gradients while strategies *sum* them.

    Why
    TF 2.x has no sessions, placeholders or device functions: the TF1 program
    either does not run (``tf.device does not support functions``) or runs only
    through ``tf.compat.v1`` graph mode, outside every modern strategy.

    Example
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            x = tf.placeholder(tf.float32, [None, 10])
            w = tf.get_variable("w", [10, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
        ...
        _, l = sess.run([train_op, loss], feed_dict={x: batch})
    becomes a ``ParameterServerStrategy`` scope with ``w``, a ``train_step(x)``
    tf.function, and ``l = run_train_step(batch)``.

    Fix safety
    Unsafe in general (the program's structure changes), which is why
    ``tfmigrate check`` exists: it runs both versions and compares loss
    trajectories. Learning-rate schedules are converted only where the
    train op advanced the global step the schedule reads (once per applied
    step, as the optimizer's iterations advance); with TF1's
    MomentumOptimizer a changing rate is reported, since Keras SGD folds the
    rate into its velocity where TF1 scaled the accumulated momentum.
    On ParameterServerStrategy the rest of a loop body runs
    on a step's results a few steps later, only where that cannot change what
    the loop does: its tail has no break/continue/return, binds no name used
    outside it and reads no model state; the stop condition and a batch
    chosen by the global step read a count of the scheduled steps (the global
    step lags by the steps in flight); checkpoints wait for every step before
    them. Otherwise each step's results are waited for. Queued steps go to
    the workers four per closure (``steps_per_closure``), stacked, when their
    fed arguments have the same shapes; a closure retried after a worker
    failure reruns its steps (at-least-once, as for one step per closure).
    On MirroredStrategy the same loops run four steps per tf.function call.
    Variables that helper functions create (an ``inference()`` calling a
    ``weight_variable()``) are built once under the strategy and reused by
    every step, as the TF1 graph built them once: ``make_template`` where
    they come from ``get_variable``, a recorder of the created variables
    where they come from ``tf.Variable``. A queue of finished workers for the
    ps's shutdown (``create_done_queue()``) is dropped; TF1 summaries (a
    fetched summary op and the ``add_summary`` of its result) are removed and
    reported, as is a training branch under a flag that defaults to off
    (``if FLAGS.sync_replicas:``). A named learning-rate schedule of the
    global step (``lr = tf.train.exponential_decay(...)``; also
    ``piecewise_constant``, ``polynomial_decay``, ``inverse_time_decay``,
    ``cosine_decay``) becomes the Keras schedule computing the same rates,
    which the optimizer calls with its ``iterations``; a fetched ``lr``
    reads that value. TF1 schedules with no such Keras class stay
    ``tf.compat.v1`` functions of the global step. A ``with
    tf.device("/cpu:0"):`` inside the device-setter block is unwrapped (one
    pinning variables to a worker, which made them per-task, is not). An
    optimizer returned by a module function (``set_optimizer("Adam", lr)``)
    is migrated in that function. Checkpoints are saved as TF1 saved them:
    every ``save_checkpoint_steps``/``save_checkpoint_secs`` (600 s by
    default, as ``MonitoredTrainingSession`` and ``Supervisor`` did) and at
    the end. Hooks passed by name (``stop_hook = tf.train.StopAtStepHook(...)``,
    ``hooks=[sync_hook, stop_hook]``) are the calls bound to those names;
    ``while not sess.should_stop():`` becomes ``while True:`` only where
    something else ends the loop (a break, return or raise, another bound
    in its test, an input pipeline that runs out), else the block is
    declined. A ``tf.data`` one-shot iterator (``make_one_shot_iterator(ds)
    .get_next()``, the method spelling, or a helper returning that batch,
    which then returns its dataset) becomes ``iterator = iter(ds)``, made
    once under the strategy (each MultiWorkerMirrored worker its own; the
    ParameterServer chief one for all workers, handing each batch to one);
    each step is given ``iterator.get_next()``, which raises
    OutOfRangeError at the end as the session run did, and a
    ``MonitoredTrainingSession`` block still ends quietly there. Models are
    built on zeros shaped like a batch, taking none. A loss reading the
    REGULARIZATION_LOSSES collection gets the explicit sum of the block's
    ``get_variable(..., regularizer=r)`` terms; a term added another way
    declines the block (TF2 fills no collection per step). A loss reading
    a collection the model code fills at each call (``add_to_collection`` in
    ``inference()``, in this file or a present sibling) keeps its read in the
    step, where the collection is the step graph's own; the model's first
    build is then traced, and terms added at variable creation or by an
    absent module decline (``_collection_reads.py``). TF1's
    RMSPropOptimizer stays (``tf.compat.v1``, TF1's numerics under every
    strategy): Keras 3 RMSprop starts its accumulator at 0, not 1. A
    placeholder a model helper makes and returns (``y, keep_prob =
    net(x)``, TF1's deep MNIST tutorial) is made in the block and passed to
    the helper, a step argument like the block's own; a shapeless one fed a
    number in every run builds the model with that number. A placeholder made
    before the block (at module level or earlier in its function), or by a
    module function that only makes the placeholders it returns (``x, y =
    placeholder_inputs(n)``, also inlined in the block), is made at the top of
    the block when only the block and the session code after it read it: a
    placeholder holds no variable, so the device setter placed nothing of it.
    A run leaving a placeholder its fetches need unfed, which raised
    InvalidArgumentError in TF1, becomes that raise where nothing is left
    after it in its block (``_outer_placeholders.py``). A dataset reader
    built in the block (``input_data.read_data_sets``) runs once before the
    strategy; ``tf.train.global_step(sess, gs)`` reads the variable; a
    session bound to a name and entered later (``with mts as sess:``) is the
    training session. Where the rewrite would leave a name the program still
    reads unbound (a session or graph value used outside the runs it maps),
    the block is declined at the statement reading it (``_dataflow.py``).
    A function of the module the loop hands its session to
    (``evaluate(sess, step, x, y)``) and that only runs graph values of the
    block in it -- reached through its parameters, as module globals the block
    publishes (``global x, y, loss``), or, in a script, reading the session as
    a module global -- is handed one evaluation tf.function per fetch set in
    its place and calls it with the same feeds; the parameters and `global`
    names that carried graph values go (``_session_helpers.py``,
    ``_session_helpers_emit.py``). A helper that trains or uses the session
    otherwise, or a program object keeping the session for runs of its own,
    is declined where it does so.
    Graphs placed by hand (``with tf.device("/job:ps/task:0"):`` variables,
    ``with tf.device("/job:worker/task:%d" % i):`` computation, or the device
    strings bound to names first) are the layout a device setter makes when
    every variable lives on a ps task, and migrate as one device-setter
    block; variables of a worker's own beside shared ones (local-then-global
    updates, DOWNPOUR), a step counter on the worker and one client driving
    several worker tasks are declined, saying what the program does and the
    TF2 form to choose (``_placement.py``). The gradients a train op applies
    may come from ``compute_gradients(loss)`` (also unzipped:
    ``grads, params = zip(*...)``) or ``tf.gradients(loss, params)``, then
    statements on them (``clip_by_global_norm``) that run after the tape.
    An update barrier (``with tf.control_dependencies(update_ops):`` around
    the train op, or a ``no_op`` barrier on them the gradients or the loss
    wait for) over the UPDATE_OPS collection that nothing in the program
    fills is dropped: it ran nothing; one over a Keras model's ``updates`` or
    a filled collection is declined (``_update_barriers.py``). A train
    tensor (``train_tensor = with_dependencies([apply_op], loss)``, or
    ``tf.identity(loss)`` under ``control_dependencies([apply_op])``: slim's
    create_train_op) is the train op, and a run binding its value gets the
    loss the step computes. The restore
    helper is defined in the function that imports TensorFlow where the
    module does not (a launcher's job function).
    A program's single-machine path beside its distributed one (``if not
    cluster: ... with tf.Session() as sess:`` running an update the statements
    just before it build) migrates in a second pass, only where the distributed
    path did, the same way with no strategy: variables made where the graph
    made them and a plain ``tf.function`` step, as TF2's custom training guide
    writes it (``_single_machine.py``). An export for serving written in a
    helper the session is handed to (``export_model(sess, inputs, outputs)``,
    called once, straight-line) is written out in the call's place and carried
    over as one written there (``_export_helpers.py``). TensorFlow's
    ``NanTensorHook`` and ``LoggingTensorHook`` (every_n_iter) given to the
    session become code of the loop after each train step
    (``_builtin_hooks.py``).
    Anything the rule cannot map (a placeholder created inside a helper that
    does not return it or has other callers, a train op
    or model built by a helper, fetch dicts, unknown hooks, initializable
    iterators, an asynchronous pipeline sharded per task, a
    SyncReplicasOptimizer outside a device-setter block, a global step made
    before the block: each worker's own) is reported for
    manual work, located on the construct, and so is every device-setter
    block and TF1 training session left in the output, with the reason.
    """

    code = "TFM301"
    name = "graph-to-strategy"
    # the model's first build is traced (a loss reads a collection the model fills per call, or the
    # model calls a module that is not in the project), the model function scoped (for those reads)
    traced_build = False
    scoped_reads = False
    triggers = ("replica_device_setter", "SyncReplicasOptimizer", "Supervisor", "MonitoredTrainingSession",
                "DeviceChooser", "job:ps")

    def transform(self, module: cst.Module) -> cst.Module:
        self.strategy = detect_strategy(module, self.ctx.names)
        if self.strategy is None:
            self._report_sessions_on_parameters(module)
        if self.strategy not in (PSS, MWMS):
            self._report_foreign_placement(module)
            return module
        self.taken = C.all_names(module)
        self.taken_before = set(self.taken)
        self.module_before = module  # its switches of the variable kind included  # (the single-machine pass names its code as the first pass did)
        self.has_resolver = "cluster_resolver" in self.taken
        self.module_in = module  # the tree the session loops are found in
        self.converted = False
        self.strategy_names: set[str] = set()
        self.helper_rewrites: dict[str, cst.FunctionDef] = {}  # helper's code -> migrated helper
        self.declined_blocks: list[str] = []  # whitespace-free code of the device blocks left as TF1
        # the program's own SessionRunHooks: class code -> plain class; hook objects whose
        # request_stop() ends the loop; classes reported as not carried over
        self.class_rewrites: dict[str, cst.ClassDef] = {}
        self.hook_stops: list[str] = []
        self.hook_objects: set[str] = set()
        self.declined_hooks: dict[str, str] = {}  # class name -> why
        self.migrated_setter_helpers: list[cst.FunctionDef] = []  # helpers building only a migrated block's setter
        # placeholders made before a migrated block, now made in it (the statements left, by identity);
        # functions that only made placeholders, inlined there
        self.moved_placeholders: list[cst.BaseStatement] = []
        self.placeholder_makers: list[str] = []
        self.block_original = None
        self.signals_dropped = False  # a block's "done" signals to the ps were dropped
        self.local_pass = False
        module = transform(module, self)
        if self.converted and _single_machine.has_local_session(module, self.qualname):
            module = self._migrate_single_machine(module)
        if self.converted and self.signals_dropped:
            module = _dataflow.drop_unused_functions(module, self._signal_makers)
        if self.converted:
            module = transform(module, _DropGraphModeSwitches(self))
            if self.strategy == MWMS:
                module = _feed_input.feed_from_steps(module, self)
            module = _port_probes.drop_probe_calls(module, connects_when_made=self.strategy == PSS)
            module = self._numbers_under_numpy2(module)
        self._report_sync_left(module)
        if not self.converted:
            self._report_foreign_placement(module)
        self._report_left_as_tf1(module)
        return module

    def report(self, node: cst.CSTNode, message: str, **kw) -> None:
        # the single-machine path's graph statements stand in a block of no source of its own
        block = getattr(self, "local_block", None)
        if block is not None and node is block[0]:
            node = block[1]
        super().report(node, message, **kw)

    def _migrate_single_machine(self, module: cst.Module) -> cst.Module:
        """The program's single-machine training path beside the distributed
        one it migrated (`if not FLAGS.ps_hosts: ... with tf.Session() as
        sess:`): migrated the same way with no strategy (_single_machine).
        A second pass, so that it runs only where the distributed path
        migrated: a program half TF1 and half TF2 is never handed out."""
        strategy, self.strategy, self.local_pass = self.strategy, LOCAL, True
        # its code lies on another path than the distributed code's: the same names read alike
        self.taken = set(self.taken_before)
        self.module_in = module
        # what leave_Module adds or drops is the local pass's own
        for attribute in ("migrated_setter_helpers", "migrated_mode_helpers", "placeholder_makers",
                          "moved_placeholders", "inlined_exporters"):
            self.__dict__[attribute] = []
        self.restore_helper_code = None
        try:
            return transform(module, self)
        finally:
            self.strategy, self.local_pass = strategy, False

    def _numbers_under_numpy2(self, module: cst.Module) -> cst.Module:
        """Values read with ``.numpy()`` and formatted as numbers by ``%``: as
        ``.item()``, the number NumPy 1 made of a one-element array, which
        NumPy 2 (TensorFlow 2.21's) no longer converts (see _numpy_formats)."""
        module, changed = _numpy_formats.itemize_formatted(module)
        for node in changed:
            self.report(node, "values fetched from the model are formatted as numbers here: NumPy 2, which"
                        " TensorFlow 2.21 runs on, no longer converts a one-element array to a number as NumPy 1"
                        " did, so they are given as `.item()` (the same number)", fixed=True, severity="info")
        return module

    def _report_foreign_placement(self, module: cst.Module) -> None:
        """Training on the cluster placed by another TF1 device function
        (`VariableDeviceChooser`): say why it stays TF1, where it is placed."""
        for node, call, what, undefined in _foreign_placement.foreign_device_blocks(module, self.qualname):
            broken = (f"; it also reads {', '.join(f'`{n}`' for n in undefined)}, which nothing in this file"
                      " defines (the legacy program raises NameError here)") if undefined else ""
            self.report(node, f"training left as TF1: its variables are placed by `{C.code_of(call.func)}(...)`,"
                        f" which {what}; TFM301 migrates the placement of tf.train.replica_device_setter"
                        f" (variables shared on the ps tasks) and reads no other device function{broken}",
                        hint="place the variables with tf.train.replica_device_setter(cluster=...) (its default"
                        " also spreads them over the ps tasks in turn) and build the train op in that block, then"
                        " migrate again; or migrate to ParameterServerStrategy by hand", reference=REFERENCE[PSS],
                        fixed=False)

    def _covered(self) -> list[str]:
        """Whitespace-free code of the declined blocks and of the nodes of this
        rule's manual reports (a nested node's continuation lines are indented
        as the code around it was, not as the node printed on its own)."""
        return self.declined_blocks + ["".join(C.code_of(r[0]).split()) for r in self.ctx.reports
                                       if r[1] == self.code and not r[5]]

    def _report_left_as_tf1(self, module: cst.Module) -> None:
        """Every device-setter block and TF1 training session still in the
        output gets a TFM301 diagnostic saying why, unless a report on its
        block (or its function's declined block) covers it."""
        setter_names, setter_functions = self._device_functions()
        covered = None
        for node, function in _with_functions(module):
            if isinstance(node, cst.With):
                why = self._device_setter_left(node, setter_names, setter_functions, function)
            elif isinstance(node, cst.Call):
                why = self._session_left(node, function)
            else:
                continue
            if why is None:
                continue
            if covered is None:
                covered = self._covered()
            text = "".join(C.code_of(node).split())
            if any(text in code for code in covered):
                continue
            if function is not None and self.declined_blocks and not why.startswith("single-machine"):
                # (the function's code only when a block was declined: it can be the whole script)
                scope = "".join(C.code_of(function).split())
                if any(block in scope for block in self.declined_blocks):
                    continue
            hint = ("build the graph in a `with tf.device(tf.train.replica_device_setter(...)):` block of the"
                    " function that runs its session loop (or migrate to"
                    f" {STRATEGY_CLASS[self.strategy]} by hand), then migrate again")
            if why.startswith("single-machine") and not self.converted:
                hint = ("bring the distributed training to a shape TFM301 migrates (its diagnostics say how), then"
                        " migrate again: this path migrates with it")
            elif why.startswith("single-machine"):
                hint = ("write its training as a tf.function step (GradientTape + apply_gradients) called in the"
                        " Python loop, by hand (TF2's custom training guide), or train this path through the"
                        " distributed code on a cluster of one worker, then migrate again")
            self.report(node, why, hint=hint, reference=REFERENCE[self.strategy], fixed=False)
            covered.append(text)

    def _device_functions(self) -> tuple[set[str], dict[str, str]]:
        """Names bound to a replica_device_setter(...) anywhere in the file, and
        the module functions (methods, properties) returning one."""
        names: set[str] = set()
        for node in C.walk(self.ctx.module):
            if type(node) is not cst.SimpleStatementLine:
                continue  # C.assignment finds nothing in other nodes
            bound, value, _ = C.assignment(node)
            if len(bound) == 1 and isinstance(value, cst.Call) and (
                    self.qualname(value.func) == "train.replica_device_setter"):
                names.add(bound[0])
        functions: dict[str, str] = {}
        for node in C.walk(self.ctx.module):
            if type(node) is cst.FunctionDef:
                for ret in C.walk(node.body):
                    value = ret.value if type(ret) is cst.Return else None
                    if (isinstance(value, cst.Call) and self.qualname(value.func) == "train.replica_device_setter") or (
                            isinstance(value, cst.Name) and value.value in names):
                        is_property = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "property"
                                          for d in node.decorators)
                        functions[node.name.value] = "a property" if is_property else "a function"
        return names, functions

    def _device_setter_left(self, node: cst.With, setter_names, setter_functions, function=None) -> str | None:
        """Why this `with tf.device(<device function>):` was not migrated, or
        None when it is no device-setter block."""
        for item in node.items:
            call = item.item
            if not (isinstance(call, cst.Call) and self.qualname(call.func) == "device"):
                continue
            target = C.arg(call, 0, "device_name")
            if isinstance(target, cst.Call) and self.qualname(target.func) == "train.replica_device_setter":
                how = None
            elif isinstance(target, cst.Name) and target.value in setter_names:
                how = (f"the device function `{target.value}` is not bound to replica_device_setter(...) before the"
                       " block in the same function")
            elif isinstance(target, cst.Attribute) and target.attr.value in setter_functions:
                how = (f"its device function comes from `{C.code_of(target)}`, {setter_functions[target.attr.value]}"
                       " returning replica_device_setter(...), which this rule does not follow")
            elif isinstance(target, cst.Call) and (
                    (isinstance(target.func, cst.Name) and target.func.value in setter_functions)
                    or (isinstance(target.func, cst.Attribute) and target.func.attr.value in setter_functions)):
                how = (f"its device function comes from `{C.code_of(target)}`, a function returning"
                       " replica_device_setter(...), which this rule does not follow")
            else:
                modes = self._device_modes_left(target, function)
                if modes is not None:
                    removed = self._train_op_in_removed_module(node)
                    return f"device-setter block left as TF1: {f'{removed}; besides, ' if removed else ''}{modes}"
                how = explain_device(self._program(), target, function or self.ctx.module, node) if (
                    target is not None) else None
                if how is None:
                    continue
            if len(node.items) != 1:
                how = "the `with` holds other items besides tf.device(...)"
            elif how is None:
                how = "this rule did not migrate it"
            removed = self._train_op_in_removed_module(node)
            if removed is not None:
                how = f"{removed}; besides, {how}"
            return (f"device-setter block left as TF1: {how}; TFM301 migrates a `with"
                    " tf.device(tf.train.replica_device_setter(...)):` block (or one over a name bound to such a call"
                    " just before it) whose graph the same function's session loop runs")
        return None

    def _device_modes_left(self, target, function) -> str | None:
        """Why a block over a device function a helper chooses at run time
        (one machine: None; a cluster task: the device setter) was left;
        None when its device function is no such helper's."""
        if not isinstance(target, cst.Name):
            return None
        body = C.body_of(function.body) if function is not None else self.ctx.module.body
        modes = next((m for st in body if target.value in C.assignment(st)[0]
                      for m in [_device_modes.find(self.ctx.module, st, target.value, self.qualname)] if m), None)
        if modes is None:
            return None
        return _device_modes.why_left(modes, target.value, self.strategy == PSS, self.qualname)

    def _train_op_in_removed_module(self, block: cst.CSTNode) -> str | None:
        """Why the training of a block that builds no train op of its own is
        out of reach when a function of TensorFlow's tutorial modules builds
        it (``mnist.training(loss, rate)`` of tensorflow.examples.tutorials.mnist,
        which TF 2 no longer ships); None otherwise."""
        calls = list(C.calls_in(block))
        if any(_method(c) in ("minimize", "apply_gradients") for c in calls):
            return None
        for call in calls:
            q = self.qualname(call.func)
            # the tutorial's train-op builder (`mnist.training`), not its model or data reader
            if q is not None and q.startswith("examples.") and "train" in q.rpartition(".")[2]:
                module = "tensorflow." + q.rpartition(".")[0]
                text = f"its training comes from `{C.code_of(call.func)}(...)` of `{module}`, which TF 2 no longer ships"
                if q.rpartition(".")[0] != _tutorial_mnist.MODULE:
                    return f"{text}: the optimizer and loss are built there, where no rule can rewrite them"
                why = _tutorial_mnist.why_not(self.ctx.module, self.qualname, self.ctx.names)
                if why is None:
                    return (f"{text}; TFM300 writes the tutorial's functions out here as TensorFlow 1.x defined them"
                            " when the rest of the training migrates (the reasons found with its rewrite applied say"
                            " what does not)")
                return (f"{text}; TFM300 writes the tutorial's functions out as TensorFlow 1.x defined them where every"
                        " use of the module is a statement `name = mnist.f(...)` (or `return mnist.f(...)`) or one of"
                        f" its constants, and here {why}")
        return None

    def _session_left(self, call: cst.Call, function) -> str | None:
        """Why this TF1 training session was left, or None when it is none."""
        q = self.qualname(call.func)
        if q in ("Session", "InteractiveSession"):
            if not call.args:
                # a local session (evaluation, export): no training on the cluster, unless it trains
                trained = self._local_training(function)
                if trained is None:
                    return None
                head = (f"single-machine TF1 training session `{C.code_of(call.func)}()` left as TF1 (it runs"
                        f" `{trained}`, an optimizer's update built without a device setter, on this process alone)")
                if not self.converted:
                    return (f"{head}: TFM301 migrates a single-machine path together with the program's distributed"
                            " training, which stays TF1 here (its diagnostics say why)")
                return (f"{head}: TFM301 migrates a local `tf.Session()` (no target) running an update that the"
                        " statements just before it in the same block build, and the session's code as it does a"
                        " distributed one's; the reasons reported on this training say what stops it")
        elif q not in SESSION_CLASSES | {"train.Supervisor"}:
            return None
        kind = C.code_of(call.func)
        runs = []
        if function is not None:
            for inner in C.calls_in(function):
                if _method(inner) == "run" and inner.args:
                    runs.append(C.code_of(inner.args[0].value))
        what = f" (it runs `{runs[0]}`)" if runs else ""
        return (f"TF1 training session `{kind}(...)` left as TF1{what}: TFM301 migrates a session loop that runs the"
                " train op of a device-setter block migrated in the same function, and no such block builds what"
                " this one runs")

    def _local_training(self, function) -> str | None:
        """The train op a plain session of ``function`` runs (a name bound to an
        optimizer's minimize/apply_gradients there), if any."""
        if function is None:
            return None
        updates = set()
        for node in C.walk(function):
            names, value, _ = C.assignment(node)
            if len(names) == 1 and isinstance(value, cst.Call) and _method(value) in ("minimize", "apply_gradients"):
                updates.add(names[0])
        for inner in C.calls_in(function):
            if _method(inner) == "run" and inner.args and isinstance(inner.args[0].value, cst.Name) and (
                    inner.args[0].value.value in updates):
                return inner.args[0].value.value
        return None

    def _report_sync_left(self, module: cst.Module) -> None:
        """Every SyncReplicasOptimizer still in the output gets a TFM301
        diagnostic: one of its own unless a report on its block covers it."""
        reported = None
        for call in C.calls_in(module):
            if self.qualname(call.func) != "train.SyncReplicasOptimizer":
                continue
            if reported is None:
                # compared without whitespace: a nested node's continuation lines are indented
                # as the code around it was, not as the node printed on its own
                reported = self.declined_blocks + ["".join(C.code_of(r[0]).split()) for r in self.ctx.reports
                                                   if r[1] == self.code and not r[5]]
            text = "".join(C.code_of(call).split())
            if any(text in code for code in reported):
                continue
            chain = self._reached_from_device_block(module, call)
            if chain is not None:
                self.report(call, "SyncReplicasOptimizer left in place: it is built in a helper the device-setter"
                            f" block reaches through {' -> '.join(chain)}, and the training it belongs to was not"
                            " migrated (the block's other TFM301 diagnostics say why; TFM300 inlines such a helper"
                            " into the block only when it is a function of this file called as `a, b = helper(...)`"
                            " there, with one `return` of names at its end); it still needs TF1's parameter servers"
                            " and sessions",
                            hint="move the graph code of the helper into the device-setter block (or migrate to"
                            " tf.distribute.MultiWorkerMirroredStrategy by hand, dividing the loss by the number of"
                            " replicas as SyncReplicasOptimizer averaged)", reference=REFERENCE[MWMS], fixed=False)
                continue
            placed = placement.describe(module, call, self.qualname, self.ctx.path)
            given = None if placed else placement.receivers(module, call, self.ctx.path)
            if given:
                placed = f"no `with` around it places variables; it is given to {given}"
            how = (f"its variables are placed by {placed}" if placed and not given else placed if given else
                   "its variables are placed another way, or the `with` has other items")
            self.report(call, "SyncReplicasOptimizer left in place: TFM301 migrates synchronous training built in"
                        " a `with tf.device(tf.train.replica_device_setter(...)):` block of its own, and this one"
                        f" is not in such a block ({how}); it still needs TF1's parameter servers and sessions",
                        hint="rebuild the training on tf.distribute.MultiWorkerMirroredStrategy by hand, dividing"
                        " the loss by the number of replicas as SyncReplicasOptimizer averaged",
                        reference=REFERENCE[MWMS], fixed=False)

    def _reached_from_device_block(self, module: cst.Module, node: cst.CSTNode) -> list[str] | None:
        """The chain of helper calls by which a `with tf.device(<function>):`
        block of the module reaches the function holding ``node``."""
        tracer = self._program().tracer
        for with_node in C.walk(module):
            if type(with_node) is not cst.With or not any(
                    isinstance(i.item, cst.Call) and self.qualname(i.item.func) == "device"
                    and isinstance(C.arg(i.item, 0, "device_name"), (cst.Call, cst.Name, cst.Attribute))
                    for i in with_node.items):
                continue
            chain = tracer.reaches(with_node.body, tracer.root, node)
            if chain is not None:
                return chain
        return None

    def visit_FunctionDef(self, node):
        self.__dict__.setdefault("functions_in", []).append(node)

    def leave_FunctionDef(self, original, updated):
        self.functions_in.pop()
        return updated

    def _report_sessions_on_parameters(self, module: cst.Module) -> None:
        """A module that only runs a training session on what its callers give
        it (a ``train_utils.run_training(train_op, loss, global_step)`` helper):
        no graph of its own to put under a strategy, so the session stays, and
        the reason names what it runs and who calls it."""
        for function in C.walk(module):
            if type(function) is not cst.FunctionDef:
                continue
            for found in callers.sessions_on_parameters(module, function, self.qualname):
                runs = ", ".join(f"`{name}`" for name in found.runs)
                through = f" (through `{found.through}`)" if found.through else ""
                sites = callers.callers(self.ctx.path, module, function) if function in module.body else []
                who = ("called at " + ", ".join(s.describe() for s in sites[:3])) if sites else (
                    "no call of it was found in this file or the modules beside it")
                self.report(found.session, f"TF1 training session `{C.code_of(found.session.func)}(...)` left as TF1:"
                            f" it runs {runs}{through}, {'a parameter' if len(found.runs) == 1 else 'parameters'} of"
                            f" `{function.name.value}(...)` ({who}): the graph they belong to (model, optimizer,"
                            " device placement) is built by the callers, and TFM301 migrates a training where that"
                            " graph is built and run", hint="migrate the module that builds the train op and calls"
                            f" `{function.name.value}(...)`: its step function and loop replace this session",
                            fixed=False)

    def _report_cluster_from_caller(self, device_with, setter_statement, after) -> None:
        """A block whose cluster comes in through parameters of its function (a
        library's ``train(target, cluster_spec)``) migrates as the rule's own
        fixtures do: the strategy reads TF_CONFIG. When modules beside this one
        call the function with a cluster and a server they build, those callers
        must change with it (their TF1 server would keep this task's port, where
        the strategy starts its own): a warning names them."""
        function = self.functions_in[-1] if getattr(self, "functions_in", None) else None
        if function is None:
            return
        setters = [c for st in (device_with.items[0].item, setter_statement) if st is not None
                   for c in [*C.calls_in(st)] if self.qualname(c.func) == "train.replica_device_setter"]
        through = callers.cluster_parameters(function, setters, callers.session_calls(after))
        if not through:
            return
        sites = callers.callers(self.ctx.path, self.ctx.module, function, other_files_only=True)
        if not sites:
            return
        what = " and ".join(f"`{name}` ({role})" for name, role in through)
        self.report(device_with, f"the cluster of this training comes from its callers: {what}"
                    f" {'is a parameter' if len(through) == 1 else 'are parameters'} of `{function.name.value}(...)`,"
                    f" called at {', '.join(s.describe() for s in sites[:3])}. The migrated training builds"
                    f" {STRATEGY_CLASS[self.strategy]} from TF_CONFIG instead, and starts this task's server itself:"
                    " the caller's tf.train.Server (and its ps tasks) must go, and the job be launched with TF_CONFIG",
                    hint="remove the caller's ClusterSpec/Server and ps branch (tfmigrate migrates them only in the"
                    " file that trains), set TF_CONFIG for each task", reference=REFERENCE[self.strategy],
                    fixed=False)

    def leave_IndentedBlock(self, original, updated):
        self.block_original = original
        # made at this function's top level, now at the top of the nested block that reads them
        updated = self._drop_moved_placeholders(original, updated)
        return updated.with_changes(body=self._rewrite_body(list(updated.body)))

    def leave_Module(self, original, updated):
        self.block_original = None
        updated = self._drop_moved_placeholders(original, updated)  # made at module level, now in the block
        updated = updated.with_changes(body=self._rewrite_body(list(updated.body)))
        if getattr(self, "migrated_setter_helpers", None):
            updated = self._drop_setter_helpers(updated)
        if getattr(self, "migrated_mode_helpers", None):
            updated = self._rewrite_mode_helpers(updated)
        if getattr(self, "placeholder_makers", None):  # their only calls now make the placeholders
            updated = C.drop_unreferenced(updated, self.placeholder_makers)
        if getattr(self, "inlined_exporters", None):  # their only calls now export in the training's place
            updated = C.drop_unreferenced(updated, self.inlined_exporters)
        if getattr(self, "restore_helper_code", None) and (
                self.restore_helper not in _dataflow.bound_names(updated.body)):
            updated = self._add_restore_helper(updated)
        if getattr(self, "serving_exported", False):  # the session bundle's import goes with its last use
            updated = _serving_export.without_bundle_imports(updated)
        return updated

    def _add_restore_helper(self, module: cst.Module) -> cst.Module:
        """The checkpoint restore function (`_legacy_restore`), defined before
        the first top-level statement that calls it. Where the program imports
        TensorFlow inside a function (a job function a launcher runs, the
        driver never importing TensorFlow itself), the helper is defined in
        that function, after the import, where its `tf` is TensorFlow."""
        owner = None if "tf" in _dataflow.bound_names(module.body) else _importing_function(module, self.restore_helper)
        body = list(module.body if owner is None else C.body_of(owner.body))
        for i, statement in enumerate(body):
            if self.restore_helper in C.names_used(statement):
                blank = [cst.EmptyLine(indent=False)] * (2 if owner is None else 1)
                body.insert(i, C.stmt(self.restore_helper_code).with_changes(leading_lines=blank))
                if owner is None:
                    return module.with_changes(body=body)
                if not statement.leading_lines:  # a blank line after the nested helper too
                    body[i + 1] = statement.with_changes(leading_lines=blank)
                return module.deep_replace(owner, owner.with_changes(body=owner.body.with_changes(body=body)))
        return module

    def _drop_moved_placeholders(self, original, updated):
        """``updated`` (a module or block) without the statements made before a
        migrated block and now made in it: they are nodes of the tree walked
        (``original``), whose statements this rule keeps one for one (it has no
        statement-level hook: a block's rewrite replaces the block's own list)."""
        moved = {id(st) for st in getattr(self, "moved_placeholders", ())}  # (TFM303 shares these hooks)
        if not moved & {id(st) for st in original.body}:
            return updated
        dropped = {id(new) for old, new in zip(original.body, updated.body) if id(old) in moved}
        return updated.with_changes(body=_outer_placeholders.without(updated.body, dropped))

    def _rewrite_mode_helpers(self, module: cst.Module) -> cst.Module:
        """The helpers that chose between one machine and a cluster task now
        return the cluster resolver of either (see _device_modes), the
        in-process cluster's function defined before the first of them."""
        in_process, defined = self._fresh("in_process_cluster_resolver"), False
        helpers = {modes.function.name.value: modes for modes in self.migrated_mode_helpers}
        body: list[cst.BaseStatement] = []
        for statement in module.body:
            modes = helpers.get(statement.name.value) if isinstance(statement, cst.FunctionDef) else None
            if modes is None:
                body.append(statement)
                continue
            rewritten = _device_modes.rewrite(statement, modes.index, self.mode_helper_name, in_process,
                                              self.qualname)
            if rewritten is None:  # checked before the block was taken: cannot happen
                body.append(statement)
                continue
            if not defined:
                body.append(_device_modes.in_process_function(in_process).with_changes(
                    leading_lines=statement.leading_lines))
                rewritten = rewritten.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2)
                self.ctx.require_import("socket")
                defined = True
            body.append(rewritten)
        return module.with_changes(body=body)

    def _drop_setter_helpers(self, module: cst.Module) -> cst.Module:
        """A function that only built the device setter of migrated blocks goes
        with them, when nothing else in the file refers to it."""
        return C.drop_unreferenced(module, {fn.name.value for fn in self.migrated_setter_helpers})

    # ------------------------------------------------------------ locate
    def _device_block(self, body):
        for i, statement in enumerate(body):
            if not isinstance(statement, cst.With) or len(statement.items) != 1:
                continue
            item = statement.items[0].item
            if not isinstance(item, cst.Call) or self.qualname(item.func) != "device":
                continue
            target = C.arg(item, 0, None)
            if isinstance(target, cst.Call) and self.qualname(target.func) == "train.replica_device_setter":
                return i, None
            helper = self._program().device_helper(target)  # `with tf.device(make_setter(cluster)):`
            if helper is not None and helper.function is not None:
                self.setter_helper = helper.function
                return i, None
            if isinstance(target, cst.Name):
                for j in range(i):
                    names, value, _ = C.assignment(body[j])
                    if names != [target.value]:
                        continue
                    if isinstance(value, cst.Call) and self.qualname(value.func) == "train.replica_device_setter":
                        return i, j
                    helper = self._program().device_helper(value)  # `setter = make_setter(cluster)`
                    if helper is not None and helper.function is not None:
                        self.setter_helper = helper.function
                        return i, j
                for j in range(i - 1, -1, -1):
                    if target.value not in C.assignment(body[j])[0]:
                        continue
                    # `device, target = device_and_target()`: one machine or a cluster task
                    modes = _device_modes.find(self.module_in, body[j], target.value, self.qualname)
                    taken = {m.function.name.value for m in self.__dict__.get("migrated_mode_helpers", ())}
                    if modes is not None and modes.why is None and modes.resolver and self.strategy == PSS and (
                            _device_modes.rewrite(modes.function, modes.index, "helper", "in_process",
                                                  self.qualname) is not None) and taken <= {modes.function.name.value}:
                        self.device_modes = modes
                        return i, j
                    break
        return None

    def _rewrite_body(self, body):
        self.setter_helper = None
        self.device_modes = None
        if self.local_pass:
            return self._rewrite_single_machine(body)
        found = self._device_block(body)
        if found is None:
            return self._rewrite_hand_placed(body)
        helper = self.setter_helper
        out = self._rewrite_device_block(body, found)
        if out is not body and helper is not None:
            self.__dict__.setdefault("migrated_setter_helpers", []).append(helper)
        if out is not body and self.device_modes is not None:
            self.__dict__.setdefault("migrated_mode_helpers", []).append(self.device_modes)
        if out is body:
            # declined (and reported): a SyncReplicasOptimizer in it needs no report of its own
            self.declined_blocks.append("".join(C.code_of(body[found[0]]).split()))
        return out

    def _rewrite_single_machine(self, body):
        """A block training on this machine alone: its graph statements
        migrated as a device-setter block would be, with no strategy."""
        found = _single_machine.find(body, self.qualname)
        if found is None:
            return body
        dropped, implicit = _single_machine.default_session_runs(body, found, self.qualname)
        if implicit is not None:
            self.report(implicit, f"single-machine training not migrated: `{C.code_of(implicit)}` runs a graph value"
                        " through the default session (an InteractiveSession's), not through the session by name;"
                        " no step or evaluation function stands for it in TF2; this training was left as TF1",
                        hint="run it through the session (`sess.run(...)`), then migrate again",
                        reference=REFERENCE[LOCAL], fixed=False)
            self.declined_blocks.append("".join(C.code_of(body[found.session]).split()))
            return body
        graph_block = _single_machine.block(body, found)
        self.local_block = (graph_block, body[found.start])
        # an initializer run through the default session (`init.run()`): TF2 variables start initialized
        merged = [*body[:found.start], graph_block, *_single_machine.without(body[found.end:], dropped)]
        reported = len(self.ctx.reports)
        out = self._rewrite_device_block(merged, (found.start, None))
        if out is merged:
            self.declined_blocks.append("".join(C.code_of(graph_block).split()))
            return body
        self.report(body[found.session], f"single-machine training (the session running `{found.train_op}` on this"
                    " process alone, beside the distributed path) now runs eagerly as TF2's custom training guide"
                    " writes it: the variables made where the graph made them, no strategy, a tf.function step"
                    " (GradientTape + apply_gradients) called where the session ran the train op", fixed=True,
                    severity="info", reference=REFERENCE[LOCAL])
        self.ctx.reports.insert(reported, self.ctx.reports.pop())  # said first: what the rest is about
        return out

    def _rewrite_hand_placed(self, body):
        """Variables placed on the ps and computation on this worker by hand
        (`with tf.device("/job:ps/task:0"):` ...): migrated as the one
        device-setter block the layout stands for, or declined at what makes
        it another program (see _placement)."""
        layout = _placement.find_layout(body, self.qualname, self._starts_session, self._variable_helpers()[0])
        if layout is None:
            return body
        if isinstance(layout, _placement.Decline):
            self.report(layout.node, f"training placed by hand not migrated: {layout.why}; this training was left as"
                        " TF1", hint=layout.hint, reference=REFERENCE[self.strategy], fixed=False)
            # the session running what the blocks build needs no report of its own
            for node in [layout.start_block, *layout.runners]:
                self.declined_blocks.append("".join(C.code_of(node).split()))
            return body
        merged = [*body[:layout.start], layout.block, *body[layout.end:]]
        reported = len(self.ctx.reports)
        out = self._rewrite_device_block(merged, (layout.start, None))
        if out is merged:
            self.declined_blocks.append("".join(C.code_of(layout.block).split()))
            return body
        self.report(layout.block, "variables placed by hand on the ps and computation on this worker: the layout"
                    " tf.train.replica_device_setter makes, migrated as such (the strategy places the variables)",
                    fixed=True, severity="info", reference=REFERENCE[self.strategy])
        self.ctx.reports.insert(reported, self.ctx.reports.pop())  # said first: what the rest is about
        return out

    def _rewrite_device_block(self, body, found):
        i, setter_index = found
        device_with = body[i]
        inner = list(C.body_of(device_with.body))
        # mnist_replica.py runs its whole session inside the device block:
        # the graph ends where the first session (or Supervisor) starts
        split = next((k for k, st in enumerate(inner) if self._starts_session(st)), len(inner))
        inner, session_inside = inner[:split], inner[split:]
        if session_inside:
            device_with = device_with.with_changes(body=C.indented(inner, device_with.body))
        queues = self._queues_before(body[:i])
        # placeholders made before the block, read only by it and the session code after it
        outer = _outer_placeholders.outer_placeholders(body, i, self.block_original, self.module_in, self.qualname)
        if outer:
            inner = [st.with_changes(leading_lines=[]) for _, st, _ in outer] + inner
            device_with = device_with.with_changes(body=C.indented(inner, device_with.body))
        moved_here = {k for _, _, k in outer if k is not None}
        # `x, y = placeholder_inputs(batch)`: a function making only the placeholders it returns
        placeholder_makers = _outer_placeholders.inline_placeholder_makers(
            inner, self.ctx.module, self.qualname,
            _outer_placeholders.scope_names(self.module_in, self.block_original))
        if placeholder_makers is not None:
            inner, placeholder_makers = placeholder_makers
            device_with = device_with.with_changes(body=C.indented(inner, device_with.body))
        # a placeholder a model helper makes and returns (keep_prob) is made here and passed in
        helper_moves = _dataflow.placeholder_from_helper(inner, self.ctx.module, self.qualname)
        if helper_moves is not None:
            inner, helper_moves = helper_moves
        # "done" signals to the ps tasks (`for q in create_done_queues(): ops.append(q.enqueue(1))`)
        makers = self.__dict__.get("_signal_makers")
        if makers is None:  # the same for the whole module
            makers = self._signal_makers = _dataflow.queue_makers(self.ctx.module, self.qualname, QUEUE_CLASSES)
        signals, signal_names = _dataflow.done_signals([*inner, *session_inside, *body[i + 1:]], makers)
        inner = [st for st in inner if id(st) not in signals]
        # layers built one after another under the same names (`weights = tf.Variable(...)`)
        inner, renamed = _rebinding.distinct_variable_names(
            inner, lambda call: self.qualname(call.func) in VARIABLE_CREATORS, self.taken)
        if renamed:
            device_with = device_with.with_changes(body=C.indented(inner, device_with.body))
        # hook lists built step by step in the block (`hooks = sync_hooks + [stop_hook]`): the session's
        followed = followed_hook_names([*inner, *session_inside, *body[i + 1:]], self.qualname,
                                       self._is_session_call)
        graph = analyze(inner, self.qualname, dropped={name for k in queues for name in C.assignment(body[k])[0]}
                        | signal_names | followed,
                        variable_helpers=self._variable_helpers()[0], schedules=True,
                        inputs=self._input_helpers(), choose_branch=self._default_branch, barriers=True)
        reported = len(self.ctx.reports)
        # host work built no graph (a dataset reader): it runs once, before the strategy
        hoisted = _dataflow.host_statements(graph, self.qualname)
        if graph.train_op is None or graph.loss is None:
            self._report_missing_train_op(device_with, graph, inner, session_inside + body[i + 1 :], body[:i])
            return body
        for node, why in graph.unsupported:
            self.report(node, f"cannot migrate automatically: {why}",
                        hint="create variables at the top of the graph block (or in a tf.Module) so they can be built"
                        " under strategy.scope()", reference=REFERENCE[self.strategy], fixed=False)
        if graph.unsupported:
            return body
        if not self._plan_update_barriers(graph):
            return body
        self.moving_average = _moving_average.plan(graph, inner, self.qualname, chief_only_ok=self.strategy != PSS)
        if isinstance(self.moving_average, tuple):
            node, why = self.moving_average
            self.moving_average = None
            self.report(node, f"the train op also updates moving averages that cannot be carried over: {why};"
                        " this training was left as TF1", hint="update the averages in the training loop by hand"
                        " (`ema.apply(trainable_variables)` after each step), then migrate the rest",
                        reference=REFERENCE[self.strategy], fixed=False)
            return body
        if self._report_train_op_rebound(graph, inner):
            return body
        if not self._plan_inputs(graph):
            return body
        if not self._plan_regularization(graph, inner):
            return body
        if not self._plan_schedules(graph):
            return body
        self.creates_plain_variables = False
        self.traced_build = self.scoped_reads = False
        # a model object's own variables (`model.trainable_weights`: a Keras model on the block's tensors)
        owned = isinstance(graph.var_list, cst.Attribute) and graph.var_list.attr.value in _MODEL_WEIGHTS and (
            self._keras_model(graph, graph.var_list.value))
        if owned and not graph.variables and not self._wants_template(graph):
            owner = C.code_of(graph.var_list.value)
            self.report(graph.var_list, f"training not migrated: it trains `{C.code_of(graph.var_list)}`, the"
                        f" variables of `{owner}`, which its layers create themselves (a Keras model built on the"
                        " block's tensors and fed through them), not variables this rule builds under the strategy;"
                        " this training was left as TF1", hint=f"build `{owner}` once under strategy.scope() and call"
                        " it on the batch in a tf.function step (training=True), by hand",
                        reference=REFERENCE[self.strategy], fixed=False)
            return body
        self.absent_variable_makers = set()
        if graph.var_list is None:
            self._adopt_absent_variable_makers(graph, device_with)
        if graph.var_list is None and not graph.variables and not self._wants_template(graph) and (
                self._report_unseen_variables(graph)):
            return body
        if self._wants_template(graph) and self._report_layers_in_template(graph):
            return body
        if not self._report_model_builders(graph, device_with, inner):
            return body
        self._report_flattened_ifs(graph)
        before = [st for k, st in enumerate(body[:i]) if k != setter_index and k not in queues]
        if self._report_step_made_before(graph, before):
            return body
        modes = self.device_modes
        if modes is not None:
            # the helper now hands back the cluster this task's strategy runs on, in either mode
            self.mode_helper_name = self.__dict__.get("mode_helper_name") or self._fresh("make_cluster_resolver")
            call = C.stmt(f"{_device_modes.RESOLVER} = {self.mode_helper_name}()").with_changes(
                leading_lines=body[setter_index].leading_lines)
            before.insert(sum(1 for k in range(setter_index) if k not in queues), call)
        self._report_pinned_before(before)
        after = carry_summaries(self, graph, inner, session_inside + body[i + 1 :], REFERENCE[self.strategy])
        rewrites, self.class_rewrites = self.class_rewrites, {}
        after = carry_program_hooks(self, graph, body, after, REFERENCE[self.strategy])
        rewrites, self.class_rewrites = self.class_rewrites, rewrites
        # graph statements after the device block (queues on the ps, config
        # protos, extra ops) belong to the same graph, up to the first session
        kept = []
        hook_lists = hook_list_names(after, self.qualname, self._is_session_call)
        for k, statement in enumerate(after):
            if self._starts_session(statement):
                kept += after[k:]
                break
            if id(statement) in signals:
                continue
            chosen = plumbing_choice(statement, graph.dropped, self.qualname)
            if chosen:
                graph.dropped.update(chosen)  # sync plumbing for the TF1 session, gone with it
                continue
            if not set(C.assignment(statement)[0]) & hook_lists and self._is_graph_tail(statement, graph):
                extend(graph, statement, self.qualname)
            else:
                kept.append(statement)
        after = kept
        # an export for serving the session is handed to (`export_model(sess, ...)`): written out here
        functions = getattr(self, "functions_in", None)
        exporters = _export_helpers.inline(after, self.ctx.module, self.qualname,
                                           C.names_used(functions[-1] if functions else self.module_in))
        if exporters is not None:
            after, exporters = exporters
        session = _SessionRegion(self, graph, body)
        session.scan(after, graph_part=inner, hand_savers=True)
        if session.saver_declines:
            # a checkpoint written or read by hand that the migration's cannot stand in for
            del self.ctx.reports[reported:]
            for node, why in session.saver_declines:
                self.report(node, f"training not migrated: it checkpoints by hand with a TF1 Saver and {why};"
                            " this training was left as TF1", hint="save with tf.train.CheckpointManager.save and"
                            " restore with tf.train.Checkpoint.restore by hand, then migrate again",
                            reference=REFERENCE[self.strategy], fixed=False)
            return body
        if self._plan_serving_exports(graph, session, inner, after, reported):
            return body
        endless = session.endless_loops(after)
        if endless:
            # what was said about migrating this block no longer applies: it stays TF1
            del self.ctx.reports[reported:]
            own = "".join(f"; the program's hook `{name}` that may have ended it cannot become calls in the loop:"
                          f" {why}" for name, why in self.declined_hooks.items())
            unread = unread_hook_lists(after, body, self.qualname, self._is_session_call)
            own += "".join(f"; {why}" for why in unread)
            for loop in endless:
                self.report(loop, f"`while {C.code_of(loop.test)}:` would never end in TF2: the session has no"
                            " StopAtStepHook (last_step/num_steps) the loop could count to"
                            + (" that this rule can see" if unread else "") + ", and the loop has no"
                            " break, return or other bound and reads no input pipeline that could run out (a"
                            f" request_stop() or a hook of the program's own ended it in TF1){own}; this training"
                            " was left as TF1", hint="give the session a tf.train.StopAtStepHook(last_step=...) or"
                            " bound the loop (for step in range(...)), then migrate again",
                            reference=REFERENCE[self.strategy], fixed=False)
            return body
        session.trains_forever = bool(session.loops_tf1_never_ended(after))
        for loop in session.loops_tf1_never_ended(after):
            self.report(loop, f"`while {C.code_of(loop.test)}:` never ended in TF1 either: nothing could ask the"
                        " session to stop (no StopAtStepHook or hook of the program's own, no request_stop(), no"
                        " input pipeline that runs out, no break or return), so the job trained until it was"
                        " killed; the migrated loop runs the same way (`while True:`)", hint="bound the loop"
                        " (for step in range(...)) or stop it at a global step if the job should end by itself",
                        reference=REFERENCE[self.strategy], fixed=True, severity="warning")
        # a helper choosing the mode hands back the resolver in place of its server's target (_device_modes)
        # (one machine: no strategy, so no server or resolver to carry)
        if modes is None and self.strategy != LOCAL and self._report_server_not_carried(device_with):
            del self.ctx.reports[reported:]
            self._report_server_not_carried(device_with, report=True)
            return body
        if modes is None and self.strategy != LOCAL and self._report_resolver_out_of_reach(device_with):
            del self.ctx.reports[reported:]
            self._report_resolver_out_of_reach(device_with, report=True)
            return body
        # functions the session is handed to (`evaluate(sess, ...)`): their runs become evaluation functions
        at_module_level = not getattr(self, "functions_in", None)
        handed, self.handed_declines = _session_helpers_emit.plan(self, session, after, graph, inner, at_module_level)
        if self.handed_declines:
            # the session (or what it runs) still reaches code the rule cannot carry: say what, there
            del self.ctx.reports[reported:]
            for declined in self.handed_declines:
                hint = ("run that work in the loop through tf.function steps (tf.data for input queues), by hand"
                        if not declined.function else f"hand `{declined.function}()` the session as a parameter"
                        if not declined.handed else f"migrate `{declined.function}()` by hand (a tf.function"
                        " computing what it runs, called where it ran the session)")
                self.report(declined.node, f"training not migrated: {declined.reason()}; this training was left as"
                            " TF1", hint=declined.hint or hint + ", then migrate again",
                            reference=REFERENCE[self.strategy], fixed=False)
            return body
        undo = (self.converted, dict(self.helper_rewrites), set(self.strategy_names))
        prelude = self._build(device_with, graph, session)
        unfed = _session_helpers_emit.emit(self, session, handed)
        if unfed is not None:
            self.converted, self.helper_rewrites, self.strategy_names = undo
            del self.ctx.reports[reported:]
            self.report(unfed.node, f"training not migrated: {unfed.why}; this training was left as TF1",
                        hint="feed every placeholder the helper's run needs, then migrate again",
                        reference=REFERENCE[self.strategy], fixed=False)
            return body
        new_after = rewrite_session(session, after)
        self.converted = True
        self.class_rewrites.update(rewrites)
        if self.strategy == PSS:
            self._report_task_sharded_data(before, after)
        for node, note in self.barrier_notes:
            self.report(node, note, fixed=True, severity="info", reference=REFERENCE[self.strategy])
        for nested in graph.unwrapped_devices:
            device = ", ".join(C.code_of(a.value) for a in nested.items[0].item.args)
            self.report(nested, f"`with tf.device({device}):` inside the device-setter block was"
                        " unwrapped: under a strategy, variables go where the strategy puts them (shared, as the"
                        " device setter shared these) and ops run on the replica's device", fixed=True,
                        severity="info", reference=REFERENCE[self.strategy])
        out = hoisted + self._used_wrappers(prelude, new_after, session) + new_after
        if session.foreign_feeds:
            # a step cannot be given a value it has no argument for: the training stays TF1
            self.converted, self.helper_rewrites, self.strategy_names = undo
            del self.ctx.reports[reported:]
            absent_builders: set[int] = set()
            for name in sorted(session.foreign_feeds):
                key = _dataflow.first_feed_of(name, [*session_inside, *body[i + 1:]])
                made = _dataflow.binding_code(name, [*body[:i], device_with], self.ctx.module)
                where = f"it is made by `{made}`" if made else "it is made elsewhere: before the block or in a helper"
                # made by a function of a module this run cannot read (`x, y, loss = make_model(...)`)
                binding = _dataflow.binding_statement(name, [*body[:i], device_with], self.ctx.module)
                value = C.assignment(binding or cst.SimpleStatementLine([]))[1]
                origin = self._program().origin_of(value) if isinstance(value, cst.Call) else ""
                found = self._program().tracer.callee(value, self._program().tracer.root) if isinstance(
                    value, cst.Call) else None
                if found is not None and found[0] == "opaque":
                    if id(value) not in absent_builders:
                        absent_builders.add(id(value))
                        self._report_absent_placeholders(binding, value, found[1].name, session.foreign_feeds)
                    continue
                if isinstance(value, cst.Call) and self.qualname(value.func) == "sparse_placeholder":
                    self.report(key or device_with, f"training not migrated: `{name}` is a sparse placeholder (`{made}`),"
                                " fed a sparse value (a SparseTensorValue or an (indices, values, dense shape) tuple); this rule makes the block's"
                                " dense placeholders arguments of the step function and carries no sparse feed",
                                hint=f"feed the parts of `{name}` through dense placeholders (indices, values, dense"
                                " shape) and build `tf.SparseTensor(indices, values, dense_shape)` from them in the"
                                " block, then migrate again", reference=REFERENCE[self.strategy], fixed=False)
                    continue
                self.report(key or device_with, f"training not migrated: `{name}` is fed to the session but is not a"
                            f" placeholder of the device-setter block ({where}{origin}), so no step function has an"
                            " argument for it",
                            hint="create it in the graph block, or make it a parameter of the function that creates"
                            " it (a tf.placeholder cannot run in TF2), then migrate again" + (
                                "; a module not in the project: run tfmigrate on a directory holding it with this"
                                " file" if "not in this project" in origin else ""),
                            reference=REFERENCE[self.strategy], fixed=False)
            return body
        # as the module will read: the program's hook classes defined here are plain classes now
        finished = [transform(st, _DropGraphModeSwitches(self)) if isinstance(st, cst.ClassDef) else st
                    for st in out]
        finished = [st for st in finished if isinstance(st, cst.CSTNode)]
        if self._report_unbound_reads([device_with, *session_inside, *body[i + 1:]], finished, graph, session,
                                      reported):
            self.converted, self.helper_rewrites, self.strategy_names = undo
            return body
        if helper_moves:
            self.helper_rewrites = {**self.helper_rewrites, **helper_moves}
        self.__dict__.setdefault("moved_placeholders", []).extend(st for _, st, k in outer if k is None)
        self.__dict__.setdefault("placeholder_makers", []).extend(placeholder_makers or ())
        self.__dict__.setdefault("inlined_exporters", []).extend(exporters or ())
        if moved_here:  # their comments stay where they were
            before = _outer_placeholders.without(before, {id(body[k]) for k in moved_here}, out)
        self.signals_dropped = self.signals_dropped or bool(signals)
        if self.strategy != LOCAL:
            self._report_cluster_from_caller(device_with, body[setter_index] if setter_index is not None else None,
                                             [*session_inside, *body[i + 1:]])
        return before + out

    def _plan_serving_exports(self, graph: Graph, session, inner, after, reported: int) -> bool:
        """The trained model exported for serving in the session's code (its
        signature or builder maybe made in the graph block): planned onto
        tf.saved_model.save of a signature (_serving_export), or declined with
        the statement and why (True: the training stays TF1)."""
        exports, declines = _serving_export.find([*inner, *after], self.qualname)
        for export in exports:
            declined = _serving_export.plan(export, graph, self, self._wants_template(graph))
            if declined is not None:
                declines.append(declined)
        if not declines:
            session.serving_exports = {id(export.save_at): export for export in exports}
            session.serving_removed = {k for export in exports for k in export.removed}
            # made in the graph block, they go with the export
            graph.state = [st for st in graph.state if id(st) not in session.serving_removed]
            graph.compute = [(n, st) for n, st in graph.compute if id(st) not in session.serving_removed]
            session.serving_outputs = [name for export in exports for signature in export.signatures
                                       for _, name in signature.outputs]
            self.serving_exported = getattr(self, "serving_exported", False) or bool(exports)
            return False
        del self.ctx.reports[reported:]
        for node, why in declines:
            self.report(node, f"training not migrated: it exports the trained model for serving and {why}; this"
                        " training was left as TF1", hint="export with tf.saved_model.save(module, export_dir,"
                        " signatures=...) of a tf.Module holding the variables, by hand (or move the export out"
                        " of the training code), then migrate again", reference=REFERENCE[self.strategy], fixed=False)
        return True

    def _report_unbound_reads(self, old, new, graph: Graph, session, reported: int) -> bool:
        """Decline, with the statement that reads it, a rewrite that would
        leave a name read but no longer bound (a graph value or a session the
        program still uses where this rule migrates nothing)."""
        lost = _dataflow.unbound_reads(old, new, self.ctx.module)
        if not lost:
            return False
        by_reader: dict[int, tuple[cst.CSTNode, list[str]]] = {}
        for name, reader in lost:
            by_reader.setdefault(id(reader), (reader, []))[1].append(name)
        # what the rewrite said about those statements (why a run there was not mapped) still holds
        inside = {id(node) for reader, _ in by_reader.values() for node in C.walk(reader)}
        self.ctx.reports[reported:] = [r for r in self.ctx.reports[reported:]
                                       if r[1] == self.code and not r[5] and id(r[0]) in inside]
        for reader, names in by_reader.values():
            handed = _session_helpers.handed_elsewhere(reader, session.sessions, self.ctx.module, session.bindings) if (
                set(names) <= session.sessions) else None
            if handed is not None:
                self.report(reader, f"training not migrated: {handed}; this training was left as TF1",
                            hint="run that work in the loop through tf.function steps (tf.data for input queues),"
                            " by hand, then migrate again", reference=REFERENCE[self.strategy], fixed=False)
                continue
            export = _dataflow.graph_export(reader, self.qualname)
            helper = _dataflow.helper_export(reader, self.ctx.module, self.qualname) if export is None else None
            hint = ("export with tf.saved_model.save(module, export_dir, signatures=...) of a tf.Module holding the"
                    " variables, by hand (or move the export out of the training code), then migrate again"
                    if export is not None else "migrate this use by hand (or build it in the step function's"
                    " results), then migrate again; the training was left as TF1")
            if helper is not None:
                hint = (f"write the export of `{helper[0]}()` in the training function after its loop, then migrate"
                        " again (or export with tf.saved_model.save(module, export_dir, signatures=...) by hand)")
            self.report(reader, _dataflow.unbound_reason(names, graph, session.sessions | session.supervisors, reader,
                                                         export, self.ctx.module, helper), hint=hint,
                        reference=REFERENCE[self.strategy], fixed=False)
        return True

    def _report_server_not_carried(self, device_with, report: bool = False) -> bool:
        """This task's TF1 server is built in another function of the module
        and reaches the one that trains here through returns and parameters,
        where TFM202 puts the cluster resolver in its place (_server_flow). A
        use of the server on that way the resolver cannot stand in for (its
        target printed, the server kept in an object, a helper of another
        module given it) keeps the TF1 server, whose port a strategy built here
        would find taken: decline, at that use."""
        functions = getattr(self, "functions_in", None)
        if not functions or "Server" not in self.ctx.source:
            return False
        here = functions[-1].name.value
        module = self.ctx.module
        for statement, function in walk_in_functions(module):
            if function is None or type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
                continue
            small = statement.body[0]
            made = small.value if isinstance(small, (cst.Assign, cst.Return)) else None
            if not (isinstance(made, cst.Call) and self.qualname(made.func) in ("train.Server", "distribute.Server")):
                continue
            if isinstance(small, cst.Assign) and not _server_flow.may_leave(
                    function, C.code_of(small.targets[0].target)):
                continue
            flow = _server_flow.plan(module, statement, self.strategy, lambda fn: callers.callers(
                self.ctx.path, module, fn, other_files_only=True), resolver_built=self.has_resolver)
            if here not in flow.functions[1:] or not flow.refusals:
                continue
            if report:
                refusal = flow.refusals[0]
                self.report(refusal.node, f"training not migrated: this task's TF1 server is built in"
                            f" `{flow.functions[0]}()` and reaches `{here}()`, which trains, through parameters"
                            f" and return values, and the cluster resolver cannot take its place on that way:"
                            f" {refusal.why}; the TF1 server stays and would keep this task's port from the"
                            " strategy's own; this training was left as TF1", hint="on its way to the training use"
                            " the server only as a return value, an argument, the ps's `if job_name == \"ps\":"
                            " server.join()` or a session's master (or build the cluster in the function that"
                            " trains), then migrate again", reference=REFERENCE[self.strategy], fixed=False)
            return True
        return False

    def _report_resolver_out_of_reach(self, device_with, report: bool = False) -> bool:
        """The cluster resolver TFM201 made of the program's ClusterSpec is a
        local of another function (`cluster, server, n = define_cluster()`,
        the cluster handed on as a parameter to the function that trains):
        the strategy built here cannot read it, and the TF1 server made with it
        there would keep this task's port from the strategy's own."""
        if not self.has_resolver or not getattr(self, "functions_in", None):
            return False
        top = {name for st in self.ctx.module.body if not isinstance(st, (cst.FunctionDef, cst.ClassDef))
               for name in _dataflow.binding_counts([st])}
        if "cluster_resolver" in top:
            return False
        for function in self.functions_in:
            if "cluster_resolver" in _dataflow.binding_counts([function]):
                return False
        owners = [fn for fn in C.walk(self.ctx.module) if isinstance(fn, cst.FunctionDef)
                  and all(fn is not f for f in self.functions_in)
                  and any(C.assignment(st)[0] == ["cluster_resolver"] for st in C.body_of(fn.body))]
        if not owners:
            return False
        if report:
            here = self.functions_in[-1].name.value
            # the function handing the cluster on to this one, if it makes it itself
            callers = [fn for fn in owners if any(isinstance(c.func, cst.Name) and c.func.value == here
                                                  for c in C.calls_in(fn))]
            owner = (callers or owners)[0].name.value
            owners = callers or owners
            serves = any(self.qualname(c.func) == "train.Server" for c in C.calls_in(owners[0]))  # the owner's
            server = (f", and the TF1 server `{owner}()` starts would keep this task's port from the strategy's"
                      " own") if serves else ""
            self.report(device_with, f"training not migrated: its cluster is built in `{owner}()` (a ClusterSpec"
                        f"{' and a tf.train.Server' if serves else ''} there) and reaches `{here}()`, which trains,"
                        f" through parameters and return values; the strategy made here needs the cluster resolver"
                        f" TFM201 makes of that ClusterSpec in `{owner}()`, where `{here}()` cannot read it{server};"
                        " this training was left as TF1", hint=f"build the cluster (its ClusterSpec, server and the"
                        f" ps's join) in `{here}()`, or hand `{here}()` the server (TFM202 then carries the cluster"
                        " resolver in its place), then migrate again",
                        reference=REFERENCE[self.strategy], fixed=False)
        return True

    def _report_train_op_rebound(self, graph: Graph, block) -> bool:
        """The train op's name bound again after the optimizer built it
        (``if is_chief: with tf.control_dependencies([ema_op, train_op]):
        train_op = tf.no_op()``, common in helpers TFM300 inlines), or grouped
        with other updates (``train_op = tf.group(train_step, ema_op)``, which
        analysis sets aside as plumbing like an init op): the step would run
        only the optimizer's update, or nothing, and silently lose what the new
        op also runs. Decline, at that statement."""
        name = graph.train_op if isinstance(graph.train_op, str) else None
        if name is None:
            return False
        grouping = [st for st in block if (a := C.assignment(st))[1] is not None and set(a[0]) & graph.dropped
                    and isinstance(a[1], cst.Call) and self.qualname(a[1].func) == "group"
                    and name in C.names_used(a[1])]
        # `with tf.control_dependencies([train_step, ema_op]): train_op = tf.no_op()`
        grouping += [st for _, st in graph.compute if isinstance(st, cst.With) and any(
            isinstance(item.item, cst.Call) and self.qualname(item.item.func) == "control_dependencies"
            and name in C.names_used(item.item) for item in st.items)]
        for statement in [*grouping, *(st for _, st in graph.compute)]:
            for node in C.walk(statement):
                if isinstance(node, cst.Assign) and (statement in grouping or any(
                        name in C.target_names(t.target) for t in node.targets)):
                    how = "grouped with other updates" if statement in grouping else "bound again after the optimizer built it"
                    what = C.code_of(node).strip()
                    if isinstance(statement, cst.With) and statement in grouping:
                        what = f"with {C.code_of(statement.items[0].item)}: {what}"
                    self.report(statement, f"the train op `{name}` is {how} (`{what}`): the migrated step would run only the optimizer's"
                                " update and lose what the new op also runs (moving averages, other updates);"
                                " this training was left as TF1", hint="run those updates in the training loop"
                                " after each step by hand (e.g. `ema.apply(...)` of tf.train.ExponentialMovingAverage"
                                " once per step), then migrate the rest", reference=REFERENCE[self.strategy],
                                fixed=False)
                    return True
        return False

    def _report_task_sharded_data(self, before, after) -> None:
        """Data chosen by the task index (`shard = data[FLAGS.task_index::n]`,
        `RandomState(seed + task_index)`) and fed in the training loop: each
        TF1 worker trained on its own; on ParameterServerStrategy the chief
        runs the loop for every worker, as task 0 -- the other shards would
        never be trained on. The rewrite stands, but a person must feed all of
        the data (the loop itself drives every worker)."""
        tainted: set[str] = set()
        for statement in before:
            names, value, _ = C.assignment(statement)
            if value is not None and names and _reads_task_index(value, tainted):
                tainted.update(names)
        for statement in after:
            if not isinstance(statement, (cst.While, cst.For, cst.With)):
                names, value, _ = C.assignment(statement)
                if value is not None and names and _reads_task_index(value, tainted):
                    tainted.update(names)
                continue
            if _reads_task_index(statement, tainted):
                shown = ", ".join(sorted(tainted)) or "the task index"
                self.report(statement, "the training loop feeds data chosen by this task's index"
                            f" ({shown}): each TF1 worker trained on its own share; on ParameterServerStrategy"
                            " the chief runs this loop for all workers as task 0, so the other shares are never"
                            " trained on", hint="feed the whole data set in the loop (each step goes to whichever"
                            " worker is free), or a tf.data pipeline the strategy distributes",
                            reference=REFERENCE[PSS], fixed=False)
                return

    def _report_missing_train_op(self, device_with, graph: Graph, inner, after, before=()) -> None:
        """No `minimize`/`apply_gradients` in the block: say where the train op
        the session runs comes from, when a helper call or object built it
        (`global_step, loss, train_op = build_model()`, `model = Model(...)`
        then `sess.run(model.train_op)`)."""
        local = None
        if graph.train_op is not None and graph.apply_arg is not None:
            local = _placement.local_gradients(before, graph.train_op, graph.apply_arg, self.qualname,
                                               self._variable_helpers()[0])
        if local is not None:
            self.report(local.node, f"the train op `{graph.train_op}` of this device-setter block is not migrated:"
                        f" {local.why}; this training was left as TF1", hint=local.hint,
                        reference=REFERENCE[self.strategy], fixed=False)
            return
        source = None
        if graph.train_op is not None and graph.apply_arg is not None:
            source = gradient_source(inner, graph.apply_arg, self.qualname)
        if source is not None:
            self.report(source[0], f"the train op `{graph.train_op}` applies gradients of a loss this rule cannot"
                        f" find: {source[1]}; this training was left as TF1",
                        hint="compute the gradients in the device-setter block as `grads = tf.gradients(loss,"
                        " variables)` or `optimizer.compute_gradients(loss)`, outside other blocks, or migrate"
                        " this training by hand", reference=REFERENCE[self.strategy], fixed=False)
            return
        if graph.train_op is not None:
            self.report(device_with, f"the train op `{graph.train_op}` applies gradients of a loss this rule cannot"
                        " find: no `compute_gradients(loss)` of the optimizer in this device-setter block (gradients"
                        " built per tower or another way); this training was left as TF1",
                        hint="compute the gradients with the optimizer in the block, or migrate this training by hand",
                        reference=REFERENCE[self.strategy], fixed=False)
            return
        fetched: dict[str, str] = {}  # root name -> the fetched expression
        for statement in after:
            for call in C.calls_in(statement):
                if _method(call) == "run" and call.args:
                    root = call.args[0].value
                    items = [el.value for el in root.elements] if isinstance(root, (cst.List, cst.Tuple)) else [root]
                    for item in items:
                        base = item
                        while isinstance(base, (cst.Attribute, cst.Subscript)):
                            base = base.value
                        if isinstance(base, cst.Name):
                            fetched.setdefault(base.value, C.code_of(item))
        for statement in inner:
            names, value, _ = C.assignment(statement)
            hit = [n for n in fetched if n in names]
            if not hit or not isinstance(value, cst.Call) or self.qualname(value.func) is not None or (
                    _method(value) in ("minimize", "apply_gradients", "compute_gradients")):
                continue
            if self._report_session_handed_over(statement, value, fetched[hit[0]], before, after):
                return
            if self._program().builds_no_train_op(value):
                continue  # `loss_value = loss(label, pred)`: a helper of the program that trains nothing
            shown = next((n for n in hit if "train" in fetched[n]), hit[0])
            callee = C.code_of(value.func)
            where = self._program().origin_of(value)
            self.report(statement, f"the train op the session runs (`{fetched[shown]}`) comes from `{callee}(...)`"
                        f"{where}: TFM301 migrates train ops built in the device-setter block (an optimizer's minimize"
                        " or apply_gradients there); this training was left as TF1",
                        hint=f"inline the graph code of `{callee}` into the device-setter block, or migrate"
                        " this training by hand", reference=REFERENCE[self.strategy], fixed=False)
            return
        if graph.unsupported:
            node, why = graph.unsupported[0]
            self.report(node, f"cannot migrate automatically: {why}; this training was left as TF1",
                        hint="keep one way of training in the device-setter block (the other in a program of its"
                        " own), then migrate again", reference=REFERENCE[self.strategy], fixed=False)
            return
        for statement in before:
            names, value, _ = C.assignment(statement)
            hit = [n for n in fetched if n in names]
            if hit and value is not None and any(_method(c) in ("minimize", "apply_gradients")
                                                 for c in C.calls_in(value)):
                self.report(statement, f"the train op the session runs (`{fetched[hit[0]]}`) is built before the"
                            " device-setter block, outside it: the device setter does not place its variables, so"
                            " each TF1 worker trained a copy of its own on its own task (a strategy would share"
                            " them: another program); this training was left as TF1", hint="build the model and"
                            " its train op inside the `with tf.device(tf.train.replica_device_setter(...)):` block"
                            " if the workers were meant to share them, then migrate again",
                            reference=REFERENCE[self.strategy], fixed=False)
                return
        removed = self._train_op_in_removed_module(device_with)
        if removed is not None:
            self.report(device_with, f"no train op in this device-setter block: {removed}; this training was left"
                        " as TF1", hint="write the model's functions (inference, loss, training) into the project,"
                        " then migrate again", reference=REFERENCE[self.strategy], fixed=False)
            return
        self.report(device_with, "no train op in this device-setter block: no `minimize(...)` or"
                    " `apply_gradients(...)` of a TF1 optimizer is built in it; this training was left as TF1",
                    hint="build the optimizer's train op in the block, or a tf.function step by hand",
                    reference=REFERENCE[self.strategy], fixed=False)

    def _report_session_handed_over(self, statement, value, fetched, before, after) -> bool:
        """The session runs only a variable's update (`step_op = global_step.assign(step_ph)`,
        a counter kept by hand) while it is handed to other code that trains
        (`worker.process(sess, ...)`, A3C's layout): say where the training is."""
        if _method(value) not in ("assign", "assign_add", "assign_sub"):
            return False
        sessions = set()
        for node in (n for st in after for n in C.walk(st)):
            if isinstance(node, cst.With):
                sessions.update(n for item in node.items if item.asname is not None and isinstance(
                    item.item, cst.Call) and (self._is_session_call(item.item) or _method(item.item) in (
                        "managed_session", "prepare_or_wait_for_session")) for n in C.target_names(item.asname.name))
            names, made, _ = C.assignment(node)
            if isinstance(made, cst.Call) and (self._is_session_call(made) or _method(made) in (
                    "managed_session", "prepare_or_wait_for_session")):
                sessions.update(names)
        handed = next((call for st in after for call in C.calls_in(st) if self.qualname(call.func) is None
                       and _method(call) != "run" and any(isinstance(a.value, cst.Name) and a.value.value in sessions
                                                           for a in call.args)), None)
        if handed is None:
            return False
        owner = _owner(handed)
        made = next((C.assignment(st)[1] for st in [*before, *after] if owner and C.assignment(st)[0] == [owner]
                     and isinstance(C.assignment(st)[1], cst.Call)), None)
        origin = ""
        if made is not None:
            origin = f" (`{owner}` is made by `{C.code_of(made.func)}(...)`{self._program().origin_of(made)})"
        self.report(statement, f"the session runs only `{fetched}`, a variable's update (`{C.code_of(value)}`),"
                    f" no optimizer's train op; the training runs in `{C.code_of(handed.func)}(...)`{origin}, which"
                    " is handed the TF1 session and runs its own updates with it: TFM301 cannot carry them into a"
                    " step function; this training was left as TF1",
                    hint=f"migrate what `{C.code_of(handed.func)}` runs to a tf.function step (GradientTape +"
                    " apply_gradients) under the strategy, then its loop, by hand",
                    reference=REFERENCE[self.strategy], fixed=False)
        return True

    def _report_step_made_before(self, graph: Graph, statements) -> bool:
        """`global_step = tf.Variable(0)` before the device-setter block, the
        train op advancing it in the block: the device setter never placed the
        step, so each TF1 worker counted in a variable of its own on its own
        task (and fetched it after its update, not before: a local reference
        variable). A strategy's step is one shared variable: decline, located
        on the step's creation."""
        step = graph.advanced_step
        if step is None or any(step in C.assignment(st)[0] for st in graph.state):
            return False
        creators = VARIABLE_CREATORS | GLOBAL_STEP_CREATORS
        for statement in statements:
            names, value, _ = C.assignment(statement)
            if names == [step] and isinstance(value, cst.Call) and self.qualname(value.func) in creators:
                self.report(statement, f"the global step `{step}` the train op advances is made before the"
                            " device-setter block, outside it: the device setter does not place it, so each TF1"
                            " worker counted its steps in a variable of its own on its own task (a strategy's step"
                            " is one variable the workers share: another program); this training was left as TF1",
                            hint=f"make `{step}` inside the `with tf.device(tf.train.replica_device_setter(...)):`"
                            " block if the workers were meant to share it, then migrate again",
                            reference=REFERENCE[self.strategy], fixed=False)
                return True
        return False

    def _report_pinned_before(self, statements) -> None:
        """`with tf.device("/job:worker/task:%d" % i): v = tf.get_variable(...)`
        before the device-setter block: per-worker variables, which stay TF1
        code run once on the chief (before the strategy exists)."""
        helpers = self._variable_helpers()[0]
        for statement in statements:
            if isinstance(statement, cst.With) and all(is_device_item(i, self.qualname) for i in statement.items):
                why = pinned_variables(statement, self.qualname, helpers)
                if why:
                    self.report(statement, f"{why}: this block stays TF1 code, run once on the chief before the"
                                " strategy exists", hint="keep such state in plain Python per task, or create"
                                " it under strategy.scope() if it may be shared", reference=REFERENCE[self.strategy],
                                fixed=False)

    def _report_unseen_variables(self, graph: Graph) -> bool:
        """The block trains, but creates no variable this rule can build under
        the strategy: Keras layers called inline, tf.layers, model code from
        another module. A step function would train nothing (and build new
        layers at every step): decline, naming the first such call. (A block
        with no such call -- a template's ``loss = ...`` -- is migrated as a
        skeleton, with the "no trainable variables" report.)"""
        for _, statement in graph.compute:
            for call in C.calls_in(statement):
                q = self.qualname(call.func)
                if q is None or q.startswith(("keras.", "layers.")):
                    callee = C.code_of(call.func.func if isinstance(call.func, cst.Call) else call.func)
                    self.report(statement, f"no variable of the model is created in the device-setter block where"
                                f" this rule can see it: the model comes from `{callee}(...)` (Keras layers,"
                                " tf.layers, or a function this rule does not follow, create their variables"
                                " themselves); this training was left as TF1", hint="build the model once under strategy.scope() (a"
                                " Keras model or tf.Module) and call it in a tf.function step, by hand",
                                reference=REFERENCE[self.strategy], fixed=False)
                    return True
        return False

    def _report_layers_in_template(self, graph: Graph) -> bool:
        """The model is built by get_variable helpers (a template) but also
        calls a layer that creates its own variables (a tf.layers call TFM104
        left, a Keras layer, a contrib/slim layer): the template would neither
        reuse nor train those. Decline, naming the first such call (in the
        block or a module function it calls)."""
        aliases = {}  # module-level `slim = tf.contrib.slim`
        for st in self.ctx.module.body:
            names, value, _ = C.assignment(st)
            q = self.qualname(value) if len(names) == 1 and value is not None else None
            if q is not None and (q + ".").startswith(_LAYER_MODULES):
                aliases[names[0]] = q
        code = [st for _, st in graph.compute]
        seen: set[str] = set()
        while code:
            for call in C.calls_in(code.pop(0)):
                q = self.qualname(call.func)
                head, _, tail = (dotted(call.func) or "").partition(".")
                if q is None and head in aliases and tail:
                    q = f"{aliases[head]}.{tail}"
                if q is not None and q.startswith(_LAYER_MODULES) and not q.endswith(_NOT_LAYERS):
                    self.report(call, f"the model calls `{C.code_of(call.func)}`, which creates variables of"
                                " its own that the model template built once under the strategy would not reuse"
                                " or train; this training was left as TF1", hint="replace that layer (TFM104"
                                " says why it was not rewritten), then migrate again",
                                reference=REFERENCE[self.strategy], fixed=False)
                    return True
                if isinstance(call.func, cst.Name) and call.func.value not in seen:
                    seen.add(call.func.value)
                    helper = self._module_function(call.func.value)
                    if helper is not None:
                        code.append(helper)
        return False

    def _input_helpers(self) -> dict[str, cst.FunctionDef]:
        """Module functions every return of which is a one-shot iterator's
        batch (`return tf.data.make_one_shot_iterator(ds).get_next()`)."""
        known = self.__dict__.get("_input_helpers_found")
        if known is None:  # the same for the whole module: found once per run
            known = self._input_helpers_found = self._find_input_helpers()
        return dict(known)

    def _find_input_helpers(self) -> dict[str, cst.FunctionDef]:
        found = {}
        for node in C.walk(self.ctx.module):
            if type(node) is cst.FunctionDef:
                returns = own_returns(node)
                if returns and all(self._one_shot_dataset(r.value) is not None for r in returns):
                    found[node.name.value] = node
        return found

    def _one_shot_dataset(self, value) -> cst.BaseExpression | None:
        """`ds` of `tf.data.make_one_shot_iterator(ds).get_next()` or
        `ds.make_one_shot_iterator().get_next()`."""
        if not (isinstance(value, cst.Call) and _method(value) == "get_next" and not value.args
                and isinstance(value.func.value, cst.Call)):
            return None
        owner = value.func.value
        if self.qualname(owner.func) in ITERATOR_MAKERS:
            return C.arg(owner, 0, "dataset")
        if _method(owner) == "make_one_shot_iterator" and self.qualname(owner.func) is None and not owner.args:
            return owner.func.value
        return None

    def _plan_inputs(self, graph: Graph) -> bool:
        """tf.data one-shot iterators become one Python iterator each, made
        once (``self.iterator_names``); a helper returning an iterator's batch
        returns its dataset. False, with a report, where that would not
        give each step the batch TF1 gave it."""
        self.iterator_names: dict[int, str] = {}
        helpers = self._input_helpers()
        if self._report_inputs_read_once(graph):
            return False
        reader = self._model_reading_input(graph, helpers)
        if reader is not None:
            statement, function = reader
            self.report(statement, f"`{function}` reads a tf.data iterator itself: this rule moves an input"
                        " pipeline out of the training step only where the device-setter block reads it (`x, y ="
                        " tf.data.make_one_shot_iterator(ds).get_next()`) or calls a function that only returns"
                        " such a batch; here each step would read (or restart) its input inside the model code, or"
                        " train on one batch taken once; this training was left as TF1",
                        hint=f"make `{function}` take the batch as arguments (or return just"
                        " `tf.data.make_one_shot_iterator(dataset).get_next()`), then migrate again",
                        reference=REFERENCE[self.strategy], fixed=False)
            return False
        for pipeline in graph.inputs:
            if pipeline.helper is not None:
                calls = [c for c in C.calls_in(self.ctx.module)
                         if isinstance(c.func, cst.Name) and c.func.value == pipeline.helper]
                if len(calls) != 1:
                    self.report(pipeline.statement, f"`{pipeline.helper}()` returns a one-shot iterator's batch and"
                                " is called elsewhere too: it cannot return its dataset for this training alone;"
                                " this training was left as TF1", hint=f"call `{pipeline.helper}()` once, or make it"
                                " return the dataset and iterate it here", reference=REFERENCE[self.strategy],
                                fixed=False)
                    return False
            calls = list(self._pipeline_calls(graph, pipeline, helpers))
            pipeline.endless = any(_method(c) == "repeat" and not c.args for c in calls) and not any(
                _method(c) in ("take", "take_while") for c in calls)
            if self.strategy == PSS:
                shard = next((c for c in calls if _method(c) == "shard"), None)
                if shard is not None:
                    self.report(shard, "the input pipeline is sharded per task (`.shard(...)`): each TF1 worker read"
                                " its own shard, but under ParameterServerStrategy the chief reads the pipeline and"
                                " hands each batch to whichever worker is free, and it has no worker index; this"
                                " training was left as TF1", hint="drop the shard (the coordinator already gives each"
                                " batch to one worker) or build per-worker datasets with"
                                " coordinator.create_per_worker_dataset, by hand",
                                reference=REFERENCE[PSS], fixed=False)
                    return False
        for pipeline in graph.inputs:
            self.iterator_names[id(pipeline)] = pipeline.iterator or self._fresh("iterator")
        return True

    def _keras_model(self, graph: Graph, owner: cst.BaseExpression) -> bool:
        """``owner`` is bound in the block to a Keras model (`Model(inputs, outputs)`,
        `Sequential([...])`, `keras.models.Model(...)`)."""
        if not isinstance(owner, cst.Name):
            return False
        for statement in [*graph.state, *(st for _, st in graph.compute)]:
            names, value, _ = C.assignment(statement)
            if names == [owner.value] and isinstance(value, cst.Call):
                spelled = C.code_of(value.func)
                return spelled.rsplit(".", 1)[-1] in ("Model", "Sequential") or "keras" in spelled.split(".")
        return False

    def _plan_update_barriers(self, graph: Graph) -> bool:
        """Update barriers (`_update_barriers`) that ran nothing are dropped,
        said once; False, with a report, where one ran updates the step
        would not make, or where its barrier is read otherwise."""
        self.barrier_notes: list[tuple[cst.CSTNode, str]] = []
        if not (graph.update_barriers or graph.barrier_uses):
            return True
        kept = [st for _, st in graph.compute] + graph.state
        for name in [*graph.update_barriers, *graph.update_lists]:
            reader = next((st for st in kept if name in C.names_used(st)), None)
            if reader is not None:
                what = ("an update barrier (a no-op run after the model's update ops)" if name in
                        graph.update_barriers else "the model's update ops")
                listed = f"[{name}]" if name in graph.update_barriers else name
                self.report(reader, f"training not migrated: it reads `{name}`, {what}, other than as what the"
                            " gradients or the loss wait for; this training was left as TF1", hint="compute the"
                            f" gradients or the loss in `with tf.control_dependencies({listed}):` only, or migrate"
                            " this training by hand", reference=REFERENCE[self.strategy], fixed=False)
                return False
        programs, opaque = [self.ctx.module], None
        tracer = self._program().tracer
        stack = [call for st in kept for call in C.calls_in(st)]
        seen: set[int] = set()
        while stack:
            found = tracer.callee(stack.pop(), tracer.root)
            if found is None:
                continue
            if found[0] == "opaque":
                opaque = opaque or found
            elif id(found[1]) not in seen:
                seen.add(id(found[1]))
                programs.append(found[1])
                stack.extend(C.calls_in(found[1]))
        declined = _update_barriers.plan(graph, programs, self.qualname)
        if declined is None and opaque is not None and any(
                kind == "collection" for _, kinds in graph.barrier_uses for kind, _ in kinds):
            where = graph.barrier_uses[0][0]
            declined = where, (
                f"the gradients are computed after the UPDATE_OPS collection's ops run (an update barrier, not a"
                f" synchronization of the workers), and the model calls `{opaque[2]}` of `{opaque[1].name}`, a"
                " module not in this project whose code cannot be read: it may put update ops (batch"
                " normalization's) in that collection, which the step this rule writes would not run; this"
                " training was left as TF1"), ("run tfmigrate on a directory holding that module, then migrate"
                                               " again")
        if declined is not None:
            node, why, hint = declined
            self.report(node, why, hint=hint, reference=REFERENCE[self.strategy], fixed=False)
            return False
        # said once the block is migrated (with the rule's other notes on it)
        if graph.barrier_uses:
            self.barrier_notes.append((graph.barrier_uses[0][0], (
                "the update barrier (the UPDATE_OPS collection's ops run before the gradients) is dropped: nothing"
                " in this program puts an op in that collection (no batch normalization, no add_to_collection of"
                " it), so it ran nothing")))
        for name, ((kind, code), statement) in graph.update_barriers.items():
            if not any(name in C.names_used(st) for st, _ in graph.barrier_uses):
                runs = f"`{code}.updates`" if kind == "layers" else f"`{code}`"
                self.barrier_notes.append((statement, (f"`{name}` (a no-op run after {runs}) is dropped: nothing"
                                                       " waits for it, so TF1 never ran it in a step")))
        return True

    def _report_inputs_read_once(self, graph: Graph) -> bool:
        """Values the step computes with that the block got from a call
        building a TF1 queue-based input pipeline (`tf.train.shuffle_batch`,
        a reader), or several of them (`images, labels`) from a module this run
        cannot read: in TF1 each session run evaluated them anew (the next
        batch); the migration would compute them once, under the strategy, and
        train every step on the same values."""
        read = set().union(*(C.names_used(st) for _, st in graph.compute), C.names_used(graph.loss))
        program = self._program()
        for statement in _assignments_within(graph.state):
            names, value, _ = C.assignment(statement)
            if not (names and isinstance(value, cst.Call) and set(names) & read):
                continue
            if isinstance(graph.loss, cst.Name) and graph.loss.value in names:
                continue  # a model builder handing back its loss: the model stage's
            # from a module this run cannot read, a value that may be a constant (`scale_for("mnist")`)
            # is taken as one; several values the step reads are taken as what they look like: a batch
            found = self._input_source(value, program, opaque=len(set(names) & read) > 1)
            if found is None:
                continue
            how, where, chain = found
            bound = ", ".join(f"`{n}`" for n in names if n in read)
            opaque = how.startswith("takes from")
            queued = "" if opaque else _queue_input.status(self.module_in, self.qualname, set(chain))
            self.report(statement, f"training not migrated: the step computes with {bound} from"
                        f" `{C.code_of(value.func)}(...)`, which {how}{where}: in TF1 each session run evaluated"
                        " them anew (the next batch), while the migration would compute them once, under the"
                        f" strategy, and train every step on the same values{queued}; this training was left as"
                        " TF1",
                        hint="make the input a tf.data pipeline the block reads with"
                        " `tf.data.make_one_shot_iterator(dataset).get_next()` (or a function returning just that)"
                        + (", or run tfmigrate on a directory holding the module, then migrate again" if opaque else
                           " (files read by a queue and a reader: tf.data.TextLineDataset or TFRecordDataset over"
                           " the same files, .map() of the parsing, .batch()), then migrate again"),
                        reference=REFERENCE[self.strategy], fixed=False)
            return True
        return False

    def _input_source(self, call: cst.Call, program, opaque: bool) -> tuple[str, str, list[str]] | None:
        """(what, through which functions said, those functions) when ``call``
        reaches a TF1 queue input op, or (``opaque``) a function of a module
        not in the project."""
        stack, seen = [(call, [])], set()
        while stack:
            current, chain = stack.pop()
            q = self.qualname(current.func) or ""
            if q in QUEUE_INPUTS or q.rsplit(".", 1)[-1] in QUEUE_READERS:
                # spelled as TF1 wrote it (an earlier rule may have moved it to tf.compat.v1)
                return f"builds a TF1 queue-based input pipeline (`tf.{q}`)", _through(chain), chain
            callee = program.tracer.callee(current, program.tracer.root)
            if opaque and callee is not None and callee[0] == "opaque":
                return (f"takes from `{callee[1].name}`, a module not in this project whose code cannot be read",
                        _through(chain + [C.code_of(current.func)]) if chain else "", chain)
            if isinstance(current.func, cst.Name) and current.func.value not in seen:
                seen.add(current.func.value)
                function = self._module_function(current.func.value)
                if function is not None:
                    stack.extend((inner, [*chain, current.func.value]) for inner in C.calls_in(function.body))
        return None

    def _model_reading_input(self, graph: Graph, helpers) -> tuple[cst.CSTNode, str] | None:
        """(statement, function) where a module function the block calls (not
        an input helper) reads an iterator's batch."""
        for statement in [st for _, st in graph.compute] + graph.state:
            stack = [c.func.value for c in C.calls_in(statement) if isinstance(c.func, cst.Name)]
            seen: set[str] = set()
            while stack:
                name = stack.pop()
                if name in seen or name in helpers:
                    continue
                seen.add(name)
                function = self._module_function(name)
                if function is None:
                    continue
                for call in C.calls_in(function):
                    if self.qualname(call.func) in ITERATOR_MAKERS or (
                            _method(call) in ("make_one_shot_iterator", "get_next")
                            and self.qualname(call.func) is None):
                        return statement, name
                    if isinstance(call.func, cst.Name):
                        stack.append(call.func.value)
        return None

    def _report_inputs(self, graph: Graph) -> None:
        for pipeline in graph.inputs:
            name = self.iterator_names[id(pipeline)]
            where = ("the chief makes it and hands each batch to the worker that runs the step, so each batch"
                     " trains once; each TF1 worker read the whole pipeline itself, so with several workers every"
                     " batch went to each of them, and a finite pipeline lasted a pass per worker"
                     if self.strategy == PSS else "each worker makes its own, as each TF1 worker read its own")
            made = f"`{pipeline.helper}()` now returns its dataset, and the" if pipeline.helper is not None else "the"
            self.report(pipeline.statement, f"{made} one-shot iterator becomes `{name} = iter(...)`, made once:"
                        f" {where}. Each run of the step takes the next batch with `{name}.get_next()`, which"
                        " raises tf.errors.OutOfRangeError at the end as the session run did", fixed=True,
                        severity="info", reference=REFERENCE[self.strategy])

    def _plan_regularization(self, graph: Graph, inner) -> bool:
        """A loss reading the REGULARIZATION_LOSSES collection: TF2 fills no
        collection per step (in a tf.function the collection starts with what
        the model's eager build left in it, and get_variable's regularizer
        runs once, when the variable is created). Where every term comes from
        a ``get_variable(..., regularizer=r)`` of the block, the read becomes
        the sum of those terms (``r(w)``, as TF1 computed them at each run);
        a term added another way declines the block, with a report."""
        reads = [(k, call) for k, (_, st) in enumerate(graph.compute) for call in C.calls_in(st)
                 if self._reads_regularization(call)]
        if not reads:
            return True
        other = self._regularization_source(graph, inner)
        if other is None:
            builders = [b for _, st in graph.compute for b in self._model_builders(graph, st)]
            other = _collection_reads.builder_regularization(self._program(), builders)
        first = graph.compute[reads[0][0]][1]
        if other is None and any(call.args for _, call in reads):
            other = (reads[0][1], "a regularization loss read with arguments (a scope or a name)")
        if other is not None:
            node, what = other
            self.report(first, f"the loss reads the REGULARIZATION_LOSSES collection (`{C.code_of(reads[0][1])}`),"
                        f" which TF2 does not fill at each step: {what} (`{C.code_of(node).strip()}`) would be counted"
                        " wrongly or lost (in a tf.function step the collection holds only the values left when the"
                        " model was built, and get_variable's regularizer runs once, when the variable is created);"
                        " this training was left as TF1", hint="add the penalty to the loss explicitly (e.g."
                        " `l2_scale * tf.add_n([tf.nn.l2_loss(w) for w in weights])`, the weights returned by the"
                        " model code), then migrate again", reference=REFERENCE[self.strategy], fixed=False)
            return False
        terms = []
        for variable, regularizer in graph.regularized:
            code = C.code_of(regularizer)
            if not isinstance(regularizer, (cst.Name, cst.Attribute, cst.Call)):
                code = f"({code})"
            terms.append(f"{code}({variable})")
        for k, call in reads:
            names, statement = graph.compute[k]
            q = self.qualname(call.func) or ""
            if q.endswith("get_regularization_loss"):
                new = f"tf.add_n([{', '.join(terms)}])" if terms else "tf.constant(0.0)"
            else:
                new = f"[{', '.join(terms)}]"
            graph.compute[k] = (names, statement.deep_replace(call, C.expr(new)))
        self.report(first, "the REGULARIZATION_LOSSES collection the loss read is now the sum of the terms of the"
                    " variables created with a regularizer, computed at each step as TF1's session computed them",
                    fixed=True, severity="info", reference=REFERENCE[self.strategy])
        return True

    def _reads_regularization(self, call: cst.Call) -> bool:
        q = self.qualname(call.func) or ""
        if q in ("losses.get_regularization_loss", "losses.get_regularization_losses"):
            return True
        return q in ("get_collection", "get_collection_ref") and bool(call.args) and _names_regularization(
            call.args[0].value)

    def _regularization_source(self, graph: Graph, inner) -> tuple[cst.CSTNode, str] | None:
        """A REGULARIZATION_LOSSES term added other than by a get_variable of
        the block: add_to_collection, a variable_scope or layer regularizer,
        a get_variable in a module function the block calls."""
        code: list[tuple[cst.CSTNode, str | None]] = [(st, None) for st in inner]
        seen: set[str] = set()
        while code:
            node, function = code.pop(0)
            where = f" in `{function}`" if function else ""
            for call in C.calls_in(node):
                q = self.qualname(call.func) or ""
                if q in ("add_to_collection", "add_to_collections") and call.args and _names_regularization(
                        call.args[0].value):
                    return call, f"the term added by add_to_collection{where}"
                if q in ("variable_scope", "get_variable") and C.arg(call, None, "regularizer") is not None and (
                        function is not None or q == "variable_scope"):
                    return call, f"the regularizer of a {q}{where}"
                keyword = next((a.keyword.value for a in call.args
                                if a.keyword is not None and a.keyword.value.endswith("_regularizer")), None)
                if keyword is not None:
                    return call, f"the `{keyword}`{where}"
                if isinstance(call.func, cst.Name) and call.func.value not in seen:
                    seen.add(call.func.value)
                    helper = self._module_function(call.func.value)
                    if helper is not None:
                        code.append((helper, call.func.value))
        return None

    def _pipeline_calls(self, graph: Graph, pipeline: InputPipeline, helpers):
        """The method calls of the code building the pipeline's dataset (the
        block's statements it reads and the module functions they call)."""
        wanted = C.names_used(pipeline.dataset)
        code: list[cst.CSTNode] = [pipeline.dataset]
        for statement in reversed([*graph.state, *graph.pipeline]):
            names, _, _ = C.assignment(statement)
            if set(names) & wanted:
                code.append(statement)
                wanted |= C.names_used(statement)
        if pipeline.helper is not None:
            code.append(helpers[pipeline.helper])
        seen: set[str] = set()
        while code:
            node = code.pop()
            for call in C.calls_in(node):
                if _method(call) is not None and self.qualname(call.func) is None:
                    yield call
                if isinstance(call.func, cst.Name) and call.func.value not in seen:
                    seen.add(call.func.value)
                    function = self._module_function(call.func.value)
                    if function is not None:
                        code.append(function)

    def _plan_schedules(self, graph: Graph) -> bool:
        """Named learning-rate schedules become Keras schedules driven by the
        optimizer's iterations (``self.schedule_code``: name -> new value,
        ``self.schedule_reads``: name -> the expression of its current value).
        False, with a report, where that would not keep TF1's rates."""
        self.schedule_code: dict[str, str] = {}
        self.schedule_reads: dict[str, str] = {}
        for name, call in graph.schedules.items():
            q = self.qualname(call.func)
            users = [st for _, st in graph.compute if name in C.names_used(st)]
            if users:
                self.report(users[0], f"the learning-rate schedule `{name}` is used by the forward computation:"
                            " it becomes a Keras schedule object of the optimizer's iterations",
                            hint=f"read its value as `{name}(optimizer.iterations)` there by hand",
                            reference=REFERENCE[self.strategy], fixed=False)
                return False
            new, why = schedule_call(call, q, graph.advanced_step)
            if new is not None and self._keras_optimizer(graph):
                self.schedule_code[name] = C.code_of(new)
                self.schedule_reads[name] = f"{name}({{optimizer}}.iterations)"
                continue
            if new is not None:
                why = "the optimizer stays a tf.compat.v1 one, which calls its rate without the step"
            step = schedule_step(call, q)
            if (q.rsplit(".", 1)[-1] in NO_KERAS_SCHEDULE or new is not None) and isinstance(step, cst.Name) and (
                    step.value == graph.advanced_step):
                # TF2's compat.v1 schedule is a function of the global step, which
                # the step function advances as the train op did; Keras optimizers
                # call such a function for the current rate
                self.report(call, f"{why}: kept tf.compat.v1.{q}, which in TF2 returns a function of the global"
                            " step that the optimizer calls at each step", fixed=True, severity="info",
                            reference=REFERENCE[self.strategy])
                self.schedule_reads[name] = f"{name}()"
                continue
            self.report(call, f"learning-rate schedule `{name}` not migrated: {why}",
                        hint="pass the global step the train op advances (minimize(..., global_step=...)), or"
                        " migrate the schedule by hand", reference=REFERENCE[self.strategy], fixed=False)
            return False
        return True

    def _used_wrappers(self, prelude, after, session):
        """Drop the run/schedule wrappers no loop calls (a pipelined loop
        schedules steps; the others wait for each step's results)."""
        used = set()
        for statement in after:
            used |= C.names_used(statement)
        unused = set()
        for run_name, schedule_name in session.schedule_names.items():
            if run_name not in used:
                unused.add(run_name)
                if schedule_name not in used:
                    unused.add(schedule_name)
        unused |= {run_name for run_name in session.sync_steps if run_name not in used}
        # an evaluation whose only run raised in TF1 (a placeholder it needs unfed) is never called
        # (the helpers handed them, or reading them as module globals, call them too)
        used |= set(getattr(session, "helper_evaluations", ()))
        unused |= {fn for fn in session.eval_names.values() if fn not in used}
        kept = [st for st in prelude if not (isinstance(st, cst.FunctionDef) and st.name.value in unused)]
        return kept

    def _queues_before(self, statements) -> set[int]:
        """Indexes of `done_queue = tf.FIFOQueue(...)` (or a call of a module
        function returning one, `create_done_queue(n)`) before the graph block:
        the ps shutdown queues TF2 has no use for."""
        makers = self.__dict__.get("_queue_makers")
        if makers is None:  # the same for the whole module: found once per run
            makers = self._queue_makers = set()
            for node in C.walk(self.ctx.module):
                if type(node) is cst.FunctionDef and any(
                    type(r) is cst.Return and type(r.value) is cst.Call
                    and self.qualname(r.value.func) in QUEUE_CLASSES for r in C.walk(node)
                ):
                    makers.add(node.name.value)
        found = set()
        for k, statement in enumerate(statements):
            names, value, _ = C.assignment(statement)
            if len(names) == 1 and isinstance(value, cst.Call) and (
                self.qualname(value.func) in QUEUE_CLASSES
                or (isinstance(value.func, cst.Name) and value.func.value in makers)
            ):
                found.add(k)
        return found

    def _is_session_call(self, call: cst.Call) -> bool:
        return self.qualname(call.func) in SESSION_CLASSES or _method(call) in SUPERVISOR_SESSION_METHODS

    def _starts_session(self, statement) -> bool:
        session_like = SESSION_CLASSES | {"train.Supervisor"}
        return any(
            isinstance(node, cst.Call)
            and (self.qualname(node.func) in session_like or _method(node) in SUPERVISOR_SESSION_METHODS)
            for node in C.walk(statement)
        )

    def _is_graph_tail(self, statement, graph: Graph) -> bool:
        """Does this statement after the device block still build the graph?"""
        for node in C.walk(statement):
            if isinstance(node, cst.Call):
                q = self.qualname(node.func)
                if _method(node) in ("run", "should_stop") or (q or "").endswith("Hook"):
                    return False  # session work, or hooks that configure the session loop
        if isinstance(statement, cst.With):
            return all(isinstance(i.item, cst.Call) and self.qualname(i.item.func) == "device" for i in statement.items)
        _, value, _ = C.assignment(statement)
        if value is None:
            return False
        if isinstance(value, cst.Call) and self.qualname(value.func) in DROPPED_CALLS | QUEUE_CLASSES:
            return True
        graph_names = graph.dropped | graph.compute_names | set(graph.placeholder_names) | set(graph.variables)
        return bool(C.names_used(statement) & graph_names)

    # ------------------------------------------------------------ build
    def _fresh(self, name: str) -> str:
        return C.fresh(name, self.taken)

    def _create_strategy(self, device_with, graph: Graph, resolver: str) -> list[cst.BaseStatement]:
        if self.strategy == PSS:
            self.coordinator_name = self._fresh("coordinator")
            self.report(device_with, "asynchronous parameter-server training now runs on ParameterServerStrategy;"
                        " launch a 'chief' task (coordinator) besides the ps and worker tasks",
                        fixed=True, severity="info", reference=REFERENCE[PSS])
            return C.stmts(
                f"{self.strategy_name} = tf.distribute.ParameterServerStrategy({resolver})\n"
                f"{self.coordinator_name} = tf.distribute.coordinator.ClusterCoordinator({self.strategy_name})\n"
            )
        self.report(graph.sync or device_with,
                    "SyncReplicasOptimizer training now runs on MultiWorkerMirroredStrategy; the loss is divided by"
                    " the number of replicas so gradients are averaged as SyncReplicasOptimizer did",
                    fixed=True, severity="info", reference=REFERENCE[MWMS])
        return C.stmts(f"{self.strategy_name} = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver={resolver})\n")

    def _default_branch(self, statement: cst.If):
        """The branch of ``if <flag test>: <sync> else: <async>`` the legacy
        job's default run takes (None: unreadable, or not the mode the
        program's strategy was chosen for)."""
        dropped = _flag_choice.dropped_branch(self.ctx.module, statement)
        if dropped is None:
            return None
        taken = statement.orelse if dropped is statement.body else statement.body
        builds_sync = any(self.qualname(c.func) == "train.SyncReplicasOptimizer" for c in C.calls_in(taken))
        return taken if builds_sync == (self.strategy == MWMS) else None

    def _report_flattened_ifs(self, graph: Graph) -> None:
        """`if FLAGS.sync_replicas: opt = SyncReplicasOptimizer(opt)` was taken as
        built: say so where the test reads a command-line flag, and ask for a
        person where that flag defaults to off (the legacy job's default run then
        trains without what the branch builds)."""
        seen = set()
        for statement, note in graph.notes:
            if note == "chosen-branch":
                name = _flag_choice.default_truth(self.ctx.module, statement.test)[0]
                mode = "synchronous" if self.strategy == MWMS else "asynchronous"
                other = "asynchronous" if self.strategy == MWMS else "synchronous"
                self.report(statement, f"`if {C.code_of(statement.test)}:` chooses between two training modes: the"
                            f" {mode} one --{name} selects by default is migrated, the {other} one chosen by --{name}"
                            " is not carried over",
                            hint=f"to train {other}ally, migrate that branch by hand"
                            f" ({'ParameterServerStrategy' if self.strategy == MWMS else 'MultiWorkerMirroredStrategy'})",
                            reference=REFERENCE[self.strategy], fixed=False)
                continue
            test = C.code_of(statement.test) if note == "flattened-if" else None
            if test is None or test in seen:
                continue
            seen.add(test)
            flag = self._flag_default(statement.test)
            if flag is None:
                continue
            name, default = flag
            if not default:
                self.report(statement, f"`if {test}:` builds training ops migrated here, but --{name} defaults to"
                            " off: by default the legacy job trains without them, the migration with them",
                            hint=f"compare with the legacy job run with --{name}, or migrate its default mode by hand",
                            reference=REFERENCE[self.strategy], fixed=False)
            else:
                self.report(statement, f"the training ops built under `if {test}:` are migrated as if --{name} is on",
                            fixed=True, severity="info", reference=REFERENCE[self.strategy])

    def _flag_default(self, test: cst.BaseExpression) -> tuple[str, object] | None:
        """(name, default) of the command-line flag `test` reads (``FLAGS.name``
        or ``args.name``), when its definition gives a literal default."""
        if not isinstance(test, cst.Attribute):
            return None
        found = _flag_choice.flag_default(self.ctx.module, test.attr.value)
        if found is None:
            return None
        return test.attr.value, found[1]

    def _wants_template(self, graph: Graph) -> bool:
        """Variables created by the forward code itself (a `dense()` helper, a
        dict comprehension of get_variable calls...) need a template; plain
        ``tf.Variable`` calls among them need the variable recorder."""
        helpers, plain_helpers = self._variable_helpers()
        wanted = False
        for _, st in graph.compute:
            used = C.names_used(st)
            qualnames = {self.qualname(c.func) for c in C.calls_in(st)}
            if used & helpers or qualnames & VARIABLE_CREATORS:
                wanted = True
                self.creates_plain_variables |= bool(used & plain_helpers) or "Variable" in qualnames
            for builder in self._model_builders(graph, st):  # the model of a sibling module
                wanted = True
                self.creates_plain_variables |= builder.plain
        return wanted

    def _model_builders(self, graph: Graph, statement) -> list:
        """The model builders of another module ``statement`` calls; an opaque
        one (its module is not in the project) only when it is given a value
        of the graph (a placeholder, a tensor of the block): `tfds.load("x")`
        is no model."""
        graph_values = set(graph.placeholder_names) | set(graph.compute_names)
        makers = self.__dict__.get("absent_variable_makers", set())
        return [b for b in self._program().model_builders(statement)
                if not b.opaque or C.names_used(b.call) & graph_values or id(b.call) in makers]

    def _adopt_absent_variable_makers(self, graph: Graph, device_with: cst.With) -> None:
        """The train op trains every trainable variable (no var_list), and the
        forward code reads what a function of a module not in the project
        returned from values that are no tensors (``weights =
        net_layers.weight_variable([784, 10])``): it may be a variable TF1
        trained, which a value made once under the strategy's scope would
        leave out of the step's variables. Those calls move into the model
        function, where the variables they create are recorded on the first
        call, reused and trained, as for a model builder of that module (a
        call returning a constant returns it there as well)."""
        tracer = self._program().tracer
        read = set().union(set(), *(C.names_used(st) for _, st in graph.compute), C.names_used(graph.loss)
                           if graph.loss is not None else set())
        makers = []
        for statement in graph.state:
            names, value, _ = C.assignment(statement)
            if not (names and isinstance(value, cst.Call) and set(names) & read):
                continue
            if any(set(names) & C.names_used(other) for other in graph.state if other is not statement):
                continue  # also read by what stays under the strategy's scope
            found = tracer.callee(value, tracer.root)
            if found is not None and found[0] == "opaque":
                makers.append((names, statement))
                self.absent_variable_makers.add(id(value))
        if not makers:
            return
        order = {id(node): k for k, node in enumerate(C.walk(device_with)) if isinstance(node, cst.SimpleStatementLine)}
        moved = {id(st) for _, st in makers}
        graph.state = [st for st in graph.state if id(st) not in moved]
        graph.compute = sorted([*graph.compute, *makers], key=lambda entry: order.get(id(entry[1]), len(order)))

    def _program(self) -> ProgramModel:
        """The program model of this file and its project (built once per run)."""
        found = self.__dict__.get("_program_model")
        if found is None:
            found = self._program_model = ProgramModel(self.ctx.module, self.qualname, self.ctx.path)
        return found

    def _report_absent_placeholders(self, binding: cst.CSTNode, call: cst.Call, module: str, fed: set[str]) -> None:
        """The placeholders the session feeds are made by ``call``, a function
        of a module that is not in the project (``x, y, loss = make_model(...)``):
        the step function would have to take them as arguments, which means
        changing that module's code (where it makes them)."""
        names, _, _ = C.assignment(binding)
        made = [n for n in names if n in fed]
        listed = ", ".join(f"`{n}`" for n in made)
        self.report(binding, f"training not migrated: the session feeds {listed}, which `{C.code_of(call.func)}(...)`"
                    f" returns: a function of `{module}`, which is not in this project, making the model's inputs"
                    " itself (placeholders the session feeds); a TF2 step cannot feed them, and they can become the"
                    " step function's arguments only where they are made, in that module's code; this training was"
                    " left as TF1",
                    hint=f"make the placeholders in this file's graph block and pass them to `{C.code_of(call.func)}()`"
                    " (which then builds the model from the tensors it is given), then migrate again; run tfmigrate"
                    f" on `{module}` too", reference=REFERENCE[self.strategy], fixed=False)

    def _report_model_builders(self, graph: Graph, device_with: cst.With, inner) -> bool:
        """A note for each model built by a sibling module's function: read
        there (present), or, for a module that is not in the project, one note
        per module saying what the migrated program now assumes of it. A loss
        that reads a collection such a builder fills keeps its read in the step
        when the builders are read and fill it at each call, or are absent and
        the read is of a collection only explicit calls fill (the model's
        first build is then traced: ``_collection_reads``); otherwise the
        block declines, saying why."""
        builders = [b for _, st in graph.compute for b in self._model_builders(graph, st)]
        self.collection_read_keys = []
        if not self._plan_collection_reads(graph, inner, builders):
            return False
        if any(b.opaque for b in builders):
            # what an absent module adds to graph collections stays in the first build's graph
            self.traced_build = True
        # a call inlined from another module is not in this file: the note goes on the block
        source = "".join(self.ctx.source.split())
        noted: set[str] = set()
        for builder in builders:
            at = builder.call if "".join(C.code_of(builder.call).split()) in source else device_with
            if not builder.opaque:
                self.report(at, f"the model's variables are created by `{builder.function}()` of the project module"
                            f" `{builder.module.name}`: built once under the strategy's scope and reused by every"
                            " step", hint=f"migrate `{builder.module.name}` with this file (tfmigrate on their"
                            " directory)", fixed=True, severity="info", reference=REFERENCE[self.strategy])
                continue
            name = builder.module.name
            if name in noted:
                continue
            noted.add(name)
            self.report(at, _absent_modules.absent_module_note(name, [b.code for b in builders if b.module.name == name],
                                                self.collection_read_keys),
                        hint=_absent_modules.HINT.format(module=name),
                        fixed=True, severity="warning", reference=REFERENCE[self.strategy])
        return True

    def _plan_collection_reads(self, graph: Graph, inner, builders) -> bool:
        """A step reading a collection (in the block or in a function it
        calls) keeps the read where the code filling it does so at each call:
        the model's first build is then traced, and the block's reads are
        filtered by the model function's name scope (``_collection_reads``).
        Otherwise the block declines, saying why."""
        reads: list[_collection_reads.Read] = []
        fills = []
        for _, st in graph.compute:
            for call in C.calls_in(st):
                q = self.qualname(call.func)
                if q in _collection_reads.READS:
                    reads.append(_collection_reads.Read(call, call, q))
            for call, filled, inside in self._program().step_collections(st):
                fills.append((call, filled))
                reads += [_collection_reads.Read(call, read, q, f" in {where}") for read, q, where in inside]
        if not reads:
            return True
        own = None
        if graph.regularized:
            own = (graph.regularized[0][1], "the regularizer of a get_variable of this block")
        declined = _collection_reads.decline(builders, fills, reads, own or self._regularization_source(graph, inner))
        if declined is not None:
            self.report(declined.at, f"{declined.why}; this training was left as TF1", hint=declined.hint,
                        reference=REFERENCE[self.strategy], fixed=False)
            return False
        self.traced_build = self.scoped_reads = True
        self.collection_read_keys = list(dict.fromkeys(
            key for r in reads for key in _collection_reads.read_keys(r.call, r.q) or ()))
        read = reads[0]
        outside = next((r for r in reads if r.where), None)
        replicas = ("each replica of a worker reads it by a name scope of its own, " if outside is None else
                    f"the read{outside.where} is not filtered by replica: with several replicas on one worker (GPUs)"
                    " the later ones' loss values would also count the terms of those before, where TF1 ran one"
                    " replica per worker; ")
        absent = list(dict.fromkeys(f"`{b.module.name}`" for b in builders if b.opaque))
        adds = ("adds" if not absent else f"(that of {', '.join(absent)}, which is not in this project: assumed, see"
                " the note at its call) adds")
        self.report(read.at, f"the loss reads `{C.code_of(read.call)}`{read.where} in the step: the model code {adds}"
                    " its terms to that collection at each call, and in a tf.function the collection is the step's"
                    " own, so the read sees the terms of that step's model call, as TF1's read saw those of its one"
                    f" build ({replicas}and the model's first build is traced too, so that it leaves none behind)",
                    fixed=True, severity="info", reference=REFERENCE[self.strategy])
        return True

    def _variable_helpers(self) -> tuple[set[str], set[str]]:
        """Module functions that create variables (``tf.get_variable`` in a
        ``dense()`` helper, an ``inference()`` calling a ``weight_variable()``
        helper, say), and those of them that create plain ``tf.Variable`` objects:
        their variables must be built once, under the strategy, and reused by every
        step -- a ``make_template`` does that for ``get_variable``, the variable
        recorder (``_RECORDER``) for ``tf.Variable``."""
        found = self.__dict__.get("_variable_helpers_found")
        if found is None:  # the same for the whole module: found once per run
            found = self._variable_helpers_found = self._find_variable_helpers()
        return set(found[0]), set(found[1])

    def _find_variable_helpers(self) -> tuple[set[str], set[str]]:
        qualnames: dict[str, set] = {}
        callees: dict[str, set] = {}
        for node in C.walk(self.ctx.module):
            if type(node) is cst.FunctionDef:
                name = node.name.value
                for call in C.calls_in(node):
                    qualnames.setdefault(name, set()).add(self.qualname(call.func))
                    if isinstance(call.func, cst.Name):
                        callees.setdefault(name, set()).add(call.func.value)
        helpers = {name for name, found in qualnames.items() if found & VARIABLE_CREATORS}
        plain = {name for name, found in qualnames.items() if "Variable" in found}
        # a helper calling a helper (inference() -> weight_variable()) creates them too
        for closed in (helpers, plain):
            changed = True
            while changed:
                changed = False
                for name, called in callees.items():
                    if name not in closed and called & closed:
                        closed.add(name)
                        changed = True
        return helpers, plain

    def _build(self, device_with: cst.With, graph: Graph, session: _SessionRegion):
        out: list[cst.BaseStatement] = []
        strategy = self.strategy
        resolver = "cluster_resolver" if self.has_resolver else "tf.distribute.cluster_resolver.TFConfigClusterResolver()"
        self.strategy_name = self._fresh("strategy")
        self.strategy_names = getattr(self, "strategy_names", set()) | {self.strategy_name}
        self.resolver_code = resolver
        if self.strategy != LOCAL:
            out += self._create_strategy(device_with, graph, resolver)
            out[0] = out[0].with_changes(leading_lines=device_with.leading_lines)

        self.template = None
        self.creates_plain_variables = False  # set by _wants_template
        if self._wants_template(graph):
            self.template = self._fresh("model")
            out += self._model_function(graph, session)
            if self.creates_plain_variables:
                self.recorder = self._fresh("ModelBuiltOnce")
                recorder = C.stmt(_RECORDER.format(name=self.recorder))
                out.append(recorder.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))

        # state under the strategy scope; a hand-made global step counts once per
        # step (not once per replica) like get_or_create_global_step's
        self.schedule_code = getattr(self, "schedule_code", {})
        self.schedule_reads = getattr(self, "schedule_reads", {})
        scope_body = []
        for st in graph.state:
            names, value, _ = C.assignment(st)
            if names == [graph.global_step] and isinstance(value, cst.Call) and self.qualname(value.func) == "Variable":
                # the program's own counter keeps the name TF1 saved it under
                named = C.arg(value, None, "name")
                kept = isinstance(named, cst.SimpleString) and named.evaluated_value != "global_step"
                st = global_step_statement(graph.global_step, st, C.code_of(named) if kept else '"global_step"',
                                           replicated=self.strategy != LOCAL)
            elif len(names) == 1 and names[0] in self.schedule_code and value is graph.schedules.get(names[0]):
                # TF1's schedule of the global step; the Keras optimizer calls it with
                # its iterations, which advance once per applied step as that step did
                new = C.stmts(
                    "# The optimizer calls this schedule with its iterations, which advance once per\n"
                    f"# applied step as {graph.advanced_step} did.\n"
                    f"{names[0]} = {self.schedule_code[names[0]]}\n")[0]
                st = new.with_changes(leading_lines=[*st.leading_lines, *new.leading_lines])
            scope_body.append(st)
        self.made_global_step = graph.global_step is None  # a TF1 checkpoint has no value for it
        if graph.global_step is None:
            graph.global_step = self._fresh("global_step")
            scope_body.append(global_step_statement(graph.global_step, replicated=self.strategy != LOCAL))
        if graph.optimizer is None:
            graph.optimizer = self._fresh("optimizer")
        self.schedule_reads = {n: read.format(optimizer=graph.optimizer) for n, read in self.schedule_reads.items()}
        if graph.optimizer_call is not None:
            scope_body.append(C.stmt(f"{graph.optimizer} = {self._optimizer_code(graph)}\n"))
        else:
            self._optimizer_from_helper(graph)
        scope_body += self._iterators(graph)
        self._report_inputs(graph)
        if self.template is not None:
            dummies = []
            for name, _, call in graph.placeholders:
                if name not in self.model_params:
                    continue
                func = call.func.attr if isinstance(call.func, cst.Attribute) else call.func
                if isinstance(func, cst.Name) and func.value == "placeholder_with_default":
                    # its default value is an input the graph accepts by definition
                    default = C.arg(call, 0, "input")
                    if default is not None and C.names_used(default) <= {"True", "False", "None"}:
                        dummies.append(f"tf.constant({C.code_of(default)})")
                        continue
                    self.report(call, "placeholder_with_default whose default is not a literal: cannot build the"
                                " model's variables ahead with it", hint="give the default as a literal value",
                                fixed=False, reference=REFERENCE[strategy])
                    dummies.append("tf.zeros([1], tf.float32)")
                    continue
                dtype = C.arg(call, 0, "dtype")
                shape = C.arg(call, 1, "shape")
                fed = None if shape is not None else _dataflow.fed_literal(
                    name, [*session.train_fetches.values(), *session.eval_fetches.values()])
                if fed is not None:
                    # a number fed in every run (keep_prob: 0.5): the model is built with it
                    dummies.append(f"tf.constant({fed}, {C.code_of(dtype) if dtype is not None else 'tf.float32'})")
                    continue
                if not isinstance(shape, (cst.List, cst.Tuple)):
                    self.report(call, "placeholder without a static shape: cannot build the model's variables ahead",
                                hint="give the placeholder a shape", fixed=False, reference=REFERENCE[strategy])
                    dims = "[1]"
                else:
                    dims = "[" + ", ".join(
                        "1" if isinstance(el.value, cst.Name) and el.value.value == "None" else C.code_of(el.value)
                        for el in shape.elements) + "]"
                dummies.append(f"tf.zeros({dims}, {C.code_of(dtype) if dtype is not None else 'tf.float32'})")
            for pipeline in graph.inputs:
                if pipeline.names[0] in self.model_params:
                    # zeros shaped like the pipeline's batches: building the model takes no batch
                    zeros = (f"tf.nest.map_structure(lambda spec: tf.zeros([1 if d is None else d for d in spec.shape],"
                             f" spec.dtype), {self.iterator_names[id(pipeline)]}.element_spec)")
                    dummies.append(zeros if pipeline.single else "*" + zeros)
            if self.creates_plain_variables:
                builder = f"{self.recorder}({self.model_fn})"
            else:
                builder = f'tf.compat.v1.make_template("model", {self.model_fn})'
            where = "" if self.strategy == LOCAL else ", under the strategy"
            if self.traced_build:
                build = (f"# Build the model's variables once{where}, as the TF1 graph did: traced,\n"
                         f"# so that the terms the model adds to its collections stay in this build's graph.\n"
                         f"tf.function({self.template})({', '.join(dummies)})\n")
            else:
                build = (f"# Build the model's variables once{where}, as the TF1 graph did.\n"
                         f"{self.template}({', '.join(dummies)})\n")
            scope_body += C.stmts(f"{self.template} = {builder}\n" + build)
        if self.strategy == LOCAL:
            # one machine: the variables are made where the graph made them
            scope_body[0] = scope_body[0].with_changes(leading_lines=[
                *device_with.leading_lines, *C.strip_blank_lines(scope_body[0].leading_lines)])
            out += scope_body
        else:
            out.append(device_with.with_changes(
                items=[cst.WithItem(C.expr(f"{self.strategy_name}.scope()"))],
                body=C.indented(scope_body, device_with.body),
                leading_lines=[cst.EmptyLine(indent=False)] if self.template is not None else [],
            ))
        # the step counter `minimize` advanced is a tf.Variable too, never a trained one
        trained = [v for v in graph.variables if v != graph.global_step]
        if graph.var_list is None and not trained and self.template is None:
            self.report(device_with, "no trainable variables found for the training step",
                        hint="create the model's variables in the graph block", fixed=False,
                        reference=REFERENCE[strategy])
        if graph.var_list is not None:
            variables = C.code_of(graph.var_list)
        else:
            variables = "[" + ", ".join(trained) + "]"
            if self.template is not None:
                variables = (variables + " + " if trained else "") + f"{self.template}.trainable_variables"
        self.trainable_name = self._fresh("trainable_variables")
        out.append(C.stmt(f"{self.trainable_name} = {variables}\n"))
        if getattr(self, "moving_average", None) is not None:
            out += _moving_average.created(self.moving_average, self.strategy_name if self.strategy != LOCAL else None,
                                           self.trainable_name)
            self.report(self.moving_average.made, _moving_average.note(self.moving_average), fixed=True,
                        severity="info", reference=REFERENCE[strategy])

        # one step function per distinct training fetch list, one per evaluation
        for fetch in session.train_fetches.values():
            out += self._train_functions(graph, fetch, session)
        for fetch in session.eval_fetches.values():
            out += self._eval_function(graph, fetch, session)
        return out

    def _iterators(self, graph: Graph) -> list[cst.BaseStatement]:
        """The statements building the input pipelines' datasets, and one
        Python iterator over each, made once under the strategy."""
        if not graph.inputs:
            return []
        out = list(graph.pipeline)
        helpers = self._input_helpers()
        for k, pipeline in enumerate(graph.inputs):
            name = self.iterator_names[id(pipeline)]
            if pipeline.helper is not None:
                # the helper returns the dataset its iterator read
                helper = helpers[pipeline.helper]
                replaced = {id(r.value): self._one_shot_dataset(r.value)
                            for r in own_returns(helper)}
                self.helper_rewrites = {**getattr(self, "helper_rewrites", {}),
                                        C.code_of(helper): transform(helper, _ReplaceNodes(replaced))}
            comment = (
                "# TF1's one-shot iterator: each session run of the training op took the next batch.\n"
                "# One iterator over the dataset, made once; each step is given the next batch.\n"
            ) if k == 0 else ""
            out += C.stmts(f"{comment}{name} = iter({C.code_of(pipeline.dataset)})\n")
        return out

    def _keras_optimizer(self, graph: Graph) -> bool:
        """Does the block's optimizer become a Keras one? (A TF1 optimizer kept
        in compat.v1 calls its learning rate with no argument: a Keras
        schedule, which takes the step, would break it.)"""
        call = graph.optimizer_call
        if call is not None and self._momentum_with_changing_rate(graph):
            return False
        return call is None or optimizer_call(call, self.qualname(call.func))[0] is not None

    def _changing_rate(self, graph: Graph) -> str | None:
        """The optimizer's learning rate when it is a schedule: its name, or the
        schedule function called in the optimizer's own arguments."""
        learning_rate = C.arg(graph.optimizer_call, 0, "learning_rate")
        if isinstance(learning_rate, cst.Name) and learning_rate.value in graph.schedules:
            return learning_rate.value
        if isinstance(learning_rate, cst.Call) and is_schedule(self.qualname(learning_rate.func)):
            return C.code_of(learning_rate.func) + "(...)"
        return None

    def _momentum_with_changing_rate(self, graph: Graph) -> bool:
        """TF1's MomentumOptimizer scales the whole accumulated momentum by the
        current rate (var -= lr_t * accum); Keras SGD folds each step's rate
        into its velocity (v = momentum * v - lr_t * g). Equal while the rate
        is constant, different once it decays: then TF1's optimizer is kept."""
        call = graph.optimizer_call
        q = self.qualname(call.func) or ""
        return q.rsplit(".", 1)[-1] == "MomentumOptimizer" and self._changing_rate(graph) is not None

    def _optimizer_code(self, graph: Graph) -> str:
        """The optimizer under the strategy; a TF1 schedule written into its
        call (`MomentumOptimizer(tf.train.exponential_decay(...), 0.9)`)
        becomes the Keras schedule, as a named one does."""
        call = original = graph.optimizer_call
        learning_rate = C.arg(call, 0, "learning_rate")
        changing = self._changing_rate(graph)
        if self._momentum_with_changing_rate(graph):
            q = self.qualname(call.func)
            self.report(original, _MOMENTUM_NOTE.format(lr=changing), fixed=True, severity="info",
                        reference=REFERENCE[self.strategy])
            return f"tf.compat.v1.{q}({', '.join(C.code_of(a).rstrip(', ') for a in call.args)})"
        if isinstance(learning_rate, cst.Call) and changing is not None:
            new, why = schedule_call(learning_rate, self.qualname(learning_rate.func), graph.advanced_step)
            if new is not None and self._keras_optimizer(graph):
                call = call.deep_replace(learning_rate, new)
            elif new is None:
                self.report(learning_rate, f"the learning-rate schedule was kept as tf.compat.v1 code: {why}",
                            hint="pass the global step the train op advances, or migrate the schedule by hand",
                            reference=REFERENCE[self.strategy], fixed=False)
        code, note = _optimizer_code(call, self.qualname)
        if note and kept_in_compat_v1(self.qualname(call.func)):
            # TF1's own optimizer, kept for its numerics: nothing to do by hand
            self.report(original, note, fixed=True, severity="info", reference=REFERENCE[self.strategy])
        elif note:
            self.report(original, note, fixed=False, hint="check the optimizer's numerics",
                        reference=REFERENCE[self.strategy])
        return code

    def _optimizer_from_helper(self, graph: Graph) -> None:
        """`opt = set_optimizer("Adam", lr)`: a module function returning TF1
        optimizers gets the Keras ones (the same equivalents as in the block;
        ``self.helper_rewrites``); a helper defined elsewhere, or an optimizer
        this rule cannot see being built, is reported where it is bound."""
        name = graph.optimizer
        binding = None
        for st in graph.state:
            names, value, _ = C.assignment(st)
            if names == [name]:
                binding = (st, value)
        if binding is None:
            return  # built before the block: the program's own business, as before
        statement, value = binding
        q = self.qualname(value.func) if isinstance(value, cst.Call) else None
        if q is not None and q.startswith(("keras.", "optimizers.")):
            return  # already a Keras optimizer
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and q is None:
            helper = self._module_function(value.func.value)
            if helper is not None:
                self._migrate_optimizer_helper(helper, statement)
                return
        what = C.code_of(value.func) + "(...)" if isinstance(value, cst.Call) else C.code_of(value)
        self.report(statement, f"the optimizer `{name}` comes from `{what}`, which this file does not define: it"
                    " stays whatever that returns, and a TF1 optimizer does not work in the tf.function step",
                    hint="make it return a tf.keras.optimizers optimizer with the TF1 numerics (see"
                    " migrate/codemod/rules/_equivalents.py), or build the optimizer in the device-setter block",
                    reference=REFERENCE[self.strategy], fixed=False)

    def _module_function(self, name: str) -> cst.FunctionDef | None:
        """The function of that name defined in this file (at any depth), if only one is."""
        functions = self.__dict__.get("_module_functions")
        if functions is None:  # the module's functions by name, listed once per run
            functions = self._module_functions = {}
            for n in C.walk(self.ctx.module):
                if type(n) is cst.FunctionDef:
                    functions.setdefault(n.name.value, []).append(n)
        found = functions.get(name, ())
        return found[0] if len(found) == 1 else None

    def _migrate_optimizer_helper(self, helper: cst.FunctionDef, statement) -> None:
        """Each `return tf.train.XOptimizer(...)` of the helper becomes the Keras
        optimizer with the same numerics (or stays, reported, where none has)."""
        replaced: dict[int, cst.BaseExpression] = {}
        returns = [n for n in C.walk(helper.body) if isinstance(n, cst.Return) and n.value is not None]
        for ret in returns:
            call = ret.value
            q = self.qualname(call.func) if isinstance(call, cst.Call) else None
            if q is not None and q.startswith("train.") and q.endswith("Optimizer") and q != "train.SyncReplicasOptimizer":
                code, note = _optimizer_code(call, self.qualname)
                replaced[id(call)] = C.expr(code)
                if note and kept_in_compat_v1(q):
                    self.report(call, f"`{helper.name.value}` returns tf.{q}(...) here: {note}", fixed=True,
                                severity="info", reference=REFERENCE[self.strategy])
                elif note:
                    self.report(call, f"`{helper.name.value}` returns tf.{q}(...) here: {note}", fixed=False,
                                hint="check the optimizer's numerics", reference=REFERENCE[self.strategy])
            elif q is None or not q.startswith(("keras.", "optimizers.")):
                self.report(ret, f"`{helper.name.value}` returns `{C.code_of(call)}` here, no TF1 optimizer this rule"
                            " can map: this return was left as it is",
                            hint="return a tf.keras.optimizers optimizer", reference=REFERENCE[self.strategy],
                            fixed=False)
        if replaced:
            self.helper_rewrites = {**getattr(self, "helper_rewrites", {}),
                                    C.code_of(helper): transform(helper, _ReplaceNodes(replaced))}
            self.report(statement, f"the optimizer comes from `{helper.name.value}()`: its TF1 optimizers were"
                        " replaced by Keras ones with the same numerics", fixed=True, severity="info",
                        reference=REFERENCE[self.strategy])

    def _model_function(self, graph: Graph, session):
        """All forward statements as one function of the placeholders. When
        a value is wanted from fewer placeholders than the whole (a prediction
        evaluated or served without the labels), the function computes the
        model up to those values and what follows them (the loss, metrics)
        runs in the step and evaluation functions on its results."""
        exports: list[str] = []
        if isinstance(graph.loss, cst.Name):
            exports.append(graph.loss.value)
        for fetch in [*session.train_fetches.values(), *session.eval_fetches.values()]:
            exports += [n for n in fetch.values if n in graph.compute_names and n not in exports]
        exports += [n for n in session.serving_outputs if n in graph.compute_names and n not in exports]
        wanted = set(exports) | C.names_used(graph.loss)
        statements = [(n, st) for n, st in graph.slice_for(wanted)
                      if not (graph.grads_name and graph.grads_name in C.names_used(st))]
        everything = set(graph.params_for(statements))
        predictions = set()
        for values in [session.serving_outputs, *(fetch.values for fetch in session.eval_fetches.values())]:
            values = {n for n in values if n in graph.compute_names}
            if values and set(graph.params_for(graph.slice_for(values))) < everything:
                predictions |= values
        built = {id(st) for _, st in statements}
        if predictions:
            creating = [st for _, st in statements if self._creates_variables(graph, st)]
            made = {n for names, st in statements if any(st is c for c in creating) for n in names}
            built = {id(st) for _, st in graph.slice_for(predictions | made)} | {id(st) for st in creating}
        inside = [(n, st) for n, st in statements if id(st) in built]
        self.model_outside = [(n, st) for n, st in statements if id(st) not in built]
        read_after = set().union(set(), *(C.names_used(st) for _, st in self.model_outside))
        self.model_params = graph.params_for(inside)
        self.model_exports = exports if not self.model_outside else list(dict.fromkeys(
            n for names, _ in inside for n in names if n in read_after or n in wanted))
        self.model_fn = self._fresh("model_fn")
        ret = ", ".join(self.model_exports)
        fn = C.stmt(f"def {self.model_fn}({', '.join(self.model_params)}):\n    return {ret}\n")
        body = [s for _, s in inside] + list(fn.body.body)
        if self.scoped_reads:
            body = _collection_reads.scoped(body, fn.body, self.qualname, self._fresh("model_scope"))
        fn = fn.with_changes(body=fn.body.with_changes(body=body), leading_lines=[cst.EmptyLine(indent=False)])
        return [fn]

    def _creates_variables(self, graph: Graph, statement) -> bool:
        helpers, _ = self._variable_helpers()
        qualnames = {self.qualname(c.func) for c in C.calls_in(statement)}
        return bool(C.names_used(statement) & helpers or qualnames & VARIABLE_CREATORS
                    or self._model_builders(graph, statement))

    def _forward(self, graph: Graph, wanted: set[str]):
        """(statements computing `wanted`, their placeholder parameters)."""
        if self.template is not None:
            targets = ", ".join(self.model_exports)
            call = C.stmt(f"{targets} = {self.template}({', '.join(self.model_params)})\n")
            if self.__dict__.get("model_outside") is None:  # (TFM303's model function computes everything)
                return [([*self.model_exports], call)], list(self.model_params)
            # the model's call, then what the wanted values need of the statements after it
            need, chosen = set(wanted), []
            for names, statement in reversed(self.model_outside):
                if need & set(names):
                    chosen.append((names, statement))
                    need |= C.names_used(statement)
            chosen.reverse()
            outside_params = graph.params_for(chosen)
            uses_model = bool(need & set(self.model_exports))
            statements = ([([*self.model_exports], call)] if uses_model else []) + chosen
            params = [p for p in graph.placeholder_names
                      if p in outside_params or (uses_model and p in self.model_params)]
            params += [p for p in self.model_params if uses_model and p not in params]
            params += [p for p in outside_params if p not in params]
            return statements, params
        statements = graph.slice_for(wanted)
        params = graph.params_for(statements)
        for pipeline in graph.inputs:
            if set(pipeline.names) & wanted and pipeline.names[0] not in params:
                params += pipeline.names  # a batch fetched as it is
        return statements, params

    def _train_functions(self, graph: Graph, fetch: _Fetch, session):
        wanted = set(fetch.values) | C.names_used(graph.loss)
        statements, params = self._forward(graph, wanted)
        if graph.apply_arg is not None:
            statements = graph.slice_for(wanted | C.names_used(graph.apply_arg)) if self.template is None else statements
        fetch.params = params
        step_name = self._fresh("train_step")
        run_name = self._fresh("run_" + step_name)
        session.train_names[id(fetch)] = run_name
        if self.strategy == PSS:
            session.schedule_names[run_name] = self._fresh("schedule_" + step_name)
        loss_code = C.code_of(graph.loss)
        tape = self._fresh("tape")
        grads = self._fresh("gradients")
        # statements using compute_gradients' result (clipping...) run after the tape
        forward, backward = [], []
        for names, st in statements:
            if graph.grads_name and ({graph.grads_name, graph.grads_vars_name} & C.names_used(st)
                                     or set(names) & _depends_on(backward)):
                backward.append((names, st))
            else:
                forward.append((names, st))
        if self.template is not None and graph.grads_name:
            backward = [(n, st) for n, st in graph.slice_for(C.names_used(graph.apply_arg))
                        if graph.grads_name in C.names_used(st)]
        state_fetches = self._replica_state_fetches(fetch, graph)
        reads = "".join(f"{n}_value = {self._state_read(n)}\n" for n in state_fetches)
        # `params = tf.trainable_variables()`: the variables the step trains (TF2 keeps no collection)
        step_reads = set().union(*(C.names_used(st) for _, st in statements), C.names_used(graph.apply_arg or graph.loss))
        reads += "".join(f"{n} = {self.trainable_name}\n" for n in sorted(graph.trainable_aliases & step_reads))
        returns = self._replica_returns(fetch, graph, state_fetches)
        fetch.returned = len(returns)
        # A step whose fetches are only the train op returns no tensors; an
        # empty tuple (not None) lets the coordinator fetch it and the
        # wrappers map over it.
        ret = "return ()\n"
        if returns:
            ret = "return " + (returns[0] if len(returns) == 1 else ", ".join(returns)) + "\n"
        return self._assemble(graph, fetch, session, params, statements, forward, backward, reads, ret,
                              step_name, run_name, tape, grads, loss_code)

    def _replica_state_fetches(self, fetch: _Fetch, graph: Graph) -> list[str]:
        """The fetched variables and schedules the replica function reads
        before the step's update (see `_state_read`)."""
        if self.strategy == LOCAL:
            # in the fetching process a reference variable (TF 1.x's default) was fetched after the
            # step's update, a resource variable before it (_step_variable)
            return [n for n in fetch.values if n in self.schedule_reads or (
                (n == graph.global_step or n in graph.variables) and resource_step(self.module_before, self.qualname, n))]
        return [n for n in fetch.values
                if n == graph.global_step or n in graph.variables or n in self.schedule_reads]

    def _state_read(self, name: str) -> str:
        """The value a TF1 fetch of a variable or schedule gave before the
        step's update: a schedule's rate is that of the step's own update.
        A worker fetching its ps-held global step with the train op got the
        step before the update, reference variable or not (see
        _step_variable): `while step < N` runs N steps in both programs."""
        return self.schedule_reads.get(name) or f"{name}.read_value()"

    def _replica_returns(self, fetch, graph: Graph, state_fetches) -> list[str]:
        returns = []
        for n in fetch.names:
            if n == graph.train_op and graph.sync is not None and fetch.token_used:
                # SyncReplicasOptimizer's train op returned the next global step (its token)
                returns.append(f"{graph.global_step}.read_value()")
            elif n in fetch.values:
                returns.append(f"{n}_value" if n in state_fetches else n)
        return returns

    def _assemble(self, graph, fetch, session, params, statements, forward, backward, reads, ret,
                  step_name, run_name, tape, grads, loss_code):
        scale = ""
        loss_for_grad = loss_code
        if self.strategy not in (PSS, LOCAL):
            scaled = self._fresh("scaled_loss")
            averaged_by = "average_gradients" if self.strategy == MIRRORED else "SyncReplicasOptimizer"
            scale = (
                f"# {averaged_by} averaged the replicas' gradients; strategies sum them.\n"
                f"{scaled} = {loss_code} / {self.strategy_name}.num_replicas_in_sync\n"
            )
            loss_for_grad = scaled
        if graph.grads_name:
            gradient = f"{tape}.gradient({loss_for_grad}, {self.trainable_name})"
            grad_code = {
                "pairs": f"{graph.grads_name} = list(zip({gradient}, {self.trainable_name}))\n",
                "list": f"{graph.grads_name} = {gradient}\n",
                "unzipped": f"{graph.grads_name}, {graph.grads_vars_name} = {gradient}, {self.trainable_name}\n",
            }[graph.grads_form]
            apply_code = f"{graph.optimizer}.apply_gradients({C.code_of(graph.apply_arg)})\n"
        else:
            grad_code = f"{grads} = {tape}.gradient({loss_for_grad}, {self.trainable_name})\n"
            apply_code = f"{graph.optimizer}.apply_gradients(zip({grads}, {self.trainable_name}))\n"
        replica = C.stmt(f"def {step_name}_replica({', '.join(params)}):\n    with tf.GradientTape() as {tape}:\n        pass\n")
        tape_block = [st for _, st in forward] + (C.stmts(scale) if scale else [])
        if tape_block:
            tape_block[0] = tape_block[0].with_changes(leading_lines=C.strip_blank_lines(tape_block[0].leading_lines))
        body = (C.stmts(reads) if reads else []) + [replica.body.body[-1].with_changes(body=C.indented(tape_block))]
        body += C.stmts(grad_code) + [st for _, st in backward]
        averages = ""
        if getattr(self, "moving_average", None) is not None:
            averages = _moving_average.step_update(self.moving_average, self.trainable_name)
        body += C.stmts(apply_code + f"{graph.global_step}.assign_add(1)\n" + averages + ret)
        replica = replica.with_changes(body=replica.body.with_changes(body=body))
        args = C.tuple_code(params)
        schedule_name = session.schedule_names.get(run_name)
        if self.strategy == LOCAL:
            # one machine: the step is the replica's computation itself (TF2's custom training guide)
            replica = replica.with_changes(name=cst.Name(step_name))
        outer_code, run, schedule = self._step_code(step_name, run_name, schedule_name, params, args, fetch, graph)
        if schedule is not None:
            head, _, rest = schedule.partition("\n")
            schedule = head + "\n" + self._feed_code(graph, params) + rest
            session.step_info[schedule_name] = (step_name, list(params), self._feed_code(graph, params))
        else:
            if self.strategy == MIRRORED:
                session.sync_steps[run_name] = (
                    step_name, list(params), self._feed_code(graph, params), _results_code(run, step_name, params))
            head, _, rest = run.partition("\n")
            run = head + "\n" + self._feed_code(graph, params) + rest
        if self.strategy == LOCAL:
            outer = replica
        else:
            outer = C.stmt(outer_code)
            outer = outer.with_changes(body=outer.body.with_changes(body=[replica, *outer.body.body]))
        outer = outer.with_changes(decorators=[cst.Decorator(C.expr("tf.function"))],
                                   leading_lines=[cst.EmptyLine(indent=False)])
        if session.save_steps is not None and session.saves:
            run += (
                f"    if {session.manager} is not None and int({graph.global_step}.numpy()) % {session.save_steps} == 0:\n"
                f"        {session.manager}.save(checkpoint_number={graph.global_step})\n"
            )
        run += "    return results\n"
        wrappers = [C.stmt(run)] if schedule is None else [C.stmt(schedule), C.stmt(run)]
        return [outer] + [w.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for w in wrappers]

    def _feed_code(self, graph, params) -> str:
        """The run wrapper's first lines: fed values become tensors of their
        placeholder's dtype, as feed_dict converted them. (A tf.function also
        takes NumPy arguments on a path that cost more than the training step
        itself: measured 2.5 vs 1.25 ms per step for the towers reference.)"""
        params = [p for p in params if p not in graph.input_names]  # batches of a pipeline are tensors already
        if not params:
            return ""
        dtypes = {}
        for name, _, call in graph.placeholders:
            func = call.func.attr if isinstance(call.func, cst.Attribute) else call.func
            if isinstance(func, cst.Name) and func.value == "placeholder":  # not ..._with_default
                dtypes[name] = C.arg(call, 0, "dtype")
        converted = [
            f"tf.convert_to_tensor({p}, {C.code_of(dtypes[p])})" if dtypes.get(p) is not None
            else f"tf.convert_to_tensor({p})"
            for p in params
        ]
        return (
            "    # the inputs as tensors of the step's dtypes, which take tf.function's\n"
            "    # fast path (NumPy arguments cost more than the step)\n"
            f"    {', '.join(params)} = {', '.join(converted)}\n"
        )

    def _step_code(self, step_name, run_name, schedule_name, params, args, fetch, graph):
        """(outer tf.function source, run wrapper source without its return,
        schedule wrapper source or None)."""
        if self.strategy == PSS:
            # one replica per worker: reduce() just unwraps the per-replica value
            outer_code = (
                f"def {step_name}({', '.join(params)}):\n"
                f"    results = {self.strategy_name}.run({step_name}_replica, args={args})\n"
                f"    return tf.nest.map_structure(\n"
                f"        lambda value: {self.strategy_name}.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)\n"
            )
            schedule = (
                f"def {schedule_name}({', '.join(params)}):\n"
                f"    # The chief queues the step for the next free worker; the step's results come\n"
                f"    # back as a RemoteValue (its fetch() waits for them).\n"
                f"    return {self.coordinator_name}.schedule({step_name}, args={args})\n"
            )
            run = (
                f"def {run_name}({', '.join(params)}):\n"
                f"    # The loop needs this step's results before it goes on: wait for them.\n"
                f"    for attempt in range(3):\n"
                f"        try:\n"
                f"            results = {schedule_name}({', '.join(params)}).fetch()\n"
                f"            break\n"
                f"        except tf.errors.UnavailableError:\n"
                f"            # The worker holding this step's result died before it was fetched. The\n"
                f"            # coordinator recovers the worker; run the step again (closures are\n"
                f"            # at-least-once, like a TF1 worker retrying after its session failed).\n"
                f"            if attempt == 2:\n"
                f"                raise\n"
            )
            return outer_code, run, schedule
        if self.strategy == LOCAL:
            run = (
                f"def {run_name}({', '.join(params)}):\n"
                f"    results = tf.nest.map_structure(lambda value: value.numpy(), {step_name}({', '.join(params)}))\n"
            )
            return None, run, None
        outer_code = (
            f"def {step_name}({', '.join(params)}):\n"
            f"    return {self.strategy_name}.run({step_name}_replica, args={args})\n"
        )
        run = (
            f"def {run_name}({', '.join(params)}):\n"
            f"    results = tf.nest.map_structure(\n"
            f"        lambda value: {self.strategy_name}.experimental_local_results(value)[0].numpy(),\n"
            f"        {step_name}({', '.join(params)}))\n"
        )
        return outer_code, run, None

    def _eval_casts(self, graph: Graph, params) -> list[cst.BaseStatement]:
        """Fed values cast to their placeholder's dtype, as feed_dict converted
        them (TF1's MNIST reader gives float64 one-hot labels for a float32
        placeholder): an evaluation function is called with the loop's NumPy
        values, which a tf.function takes in their own dtype."""
        dtypes = {}
        for name, _, call in graph.placeholders:
            func = call.func.attr if isinstance(call.func, cst.Attribute) else call.func
            dtype = C.arg(call, 0, "dtype")
            if isinstance(func, cst.Name) and func.value == "placeholder" and dtype is not None:
                code = C.code_of(dtype)
                if "string" not in code:
                    dtypes[name] = code
        cast = [p for p in params if p in dtypes and p not in graph.input_names]
        if not cast:
            return []
        return C.stmts(
            "# the values in the dtypes the evaluation takes\n"
            f"{', '.join(cast)} = {', '.join(f'tf.cast({p}, {dtypes[p]})' for p in cast)}\n"
        )

    def _eval_function(self, graph: Graph, fetch: _Fetch, session):
        statements, params = self._forward(graph, set(fetch.values))
        fetch.params = params
        base = fetch.values[0] if fetch.values else "values"
        fn_name = self._fresh(f"compute_{base}")
        session.eval_names[id(fetch)] = fn_name
        values = [f"{n}_value" if n in self.schedule_reads else n for n in fetch.values]
        ret = values[0] if len(values) == 1 else ", ".join(values)
        fn = C.stmt(f"def {fn_name}({', '.join(params)}):\n    return {ret}\n")
        reads = "".join(f"{n}_value = {self._state_read(n)}\n" for n in fetch.values if n in self.schedule_reads)
        computed = [st for _, st in statements]
        casts = self._eval_casts(graph, params)
        if casts and computed:
            computed[0] = computed[0].with_changes(leading_lines=C.strip_blank_lines(computed[0].leading_lines))
        body = (C.stmts(reads) if reads else []) + casts + computed
        if body:
            body[0] = body[0].with_changes(leading_lines=C.strip_blank_lines(body[0].leading_lines))
        fn = fn.with_changes(
            body=fn.body.with_changes(body=body + list(fn.body.body)),
            decorators=[cst.Decorator(C.expr("tf.function"))],
            leading_lines=[cst.EmptyLine(indent=False)],
        )
        return [fn]


# a model object's variables (Keras models and layers, tf.Module)
_MODEL_WEIGHTS = frozenset({"trainable_weights", "trainable_variables", "weights", "variables"})

# Layer modules whose functions create variables of their own (initializers and
# regularizers there do not): TF1's tf.layers, Keras layers, contrib/slim layers.
_LAYER_MODULES = ("layers.", "keras.layers.", "contrib.layers.", "contrib.slim.")
_NOT_LAYERS = ("_initializer", "initializer_conv2d", "_regularizer", "arg_scope")


# TF1 input pipelines run by queue runners: every session run dequeued the next batch
QUEUE_INPUTS = {
    "train.shuffle_batch", "train.batch", "train.shuffle_batch_join", "train.batch_join", "train.maybe_batch",
    "train.maybe_shuffle_batch", "train.string_input_producer", "train.slice_input_producer",
    "train.range_input_producer", "train.input_producer", "train.limit_epochs",
}
QUEUE_READERS = {"FixedLengthRecordReader", "TFRecordReader", "TextLineReader", "WholeFileReader", "IdentityReader",
                 "LMDBReader"}


def _importing_function(module: cst.Module, helper: str) -> cst.FunctionDef | None:
    """The function whose own statements import TensorFlow as `tf` before the
    first of them that calls ``helper`` (`def train(args, ctx): import
    tensorflow as tf ...`), if one does."""
    for node in C.walk(module):
        if type(node) is not cst.FunctionDef:
            continue
        for statement in C.body_of(node.body):
            if helper in C.names_used(statement):
                break
            if isinstance(statement, cst.SimpleStatementLine) and any(
                    isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
            ) and "tf" in _dataflow.bound_names([statement]):
                return node
    return None


def _assignments_within(statements):
    """The simple statements of ``statements`` and of the blocks nested in
    them (`if fmt == "csv": x, y = read_csv(...)`), not those of functions
    or classes defined there."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement
        elif not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            for block in (getattr(statement, "body", None), getattr(statement, "orelse", None),
                          *(getattr(statement, "handlers", None) or ()), getattr(statement, "finalbody", None)):
                if isinstance(block, (cst.Else, cst.If, cst.ExceptHandler, cst.Finally)):
                    yield from _assignments_within([block] if isinstance(block, cst.If) else C.body_of(block.body))
                elif isinstance(block, cst.BaseSuite):
                    yield from _assignments_within(C.body_of(block))


def _through(chain: list[str]) -> str:
    return f" (through `{'()` -> `'.join(chain)}()`)" if chain else ""


def _with_functions(module: cst.Module):
    """(node, innermost enclosing function or None) for every `with` and call."""
    for node, function in walk_in_functions(module):  # (the engine's cached walk of the module)
        kind = type(node)  # exact types: isinstance on libcst's (ABC) classes is slow
        if kind is cst.With or kind is cst.Call:
            yield node, function


def _names_regularization(node) -> bool:
    """`tf.GraphKeys.REGULARIZATION_LOSSES` or its string value."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value == "regularization_losses"
    return isinstance(node, cst.Attribute) and node.attr.value == "REGULARIZATION_LOSSES"


GraphToStrategy.VALID = [
    # variables placed on the ps with no training: nothing to migrate
    Valid(
        """
        import tensorflow.compat.v1 as tf
        with tf.device("/job:ps/task:0"):
            table = tf.Variable(tf.zeros([10, 4]))
        with tf.device("/job:worker/task:0"):
            rows = tf.gather(table, [1, 2])
        """
    ),
    Valid(
        """
        import tensorflow as tf
        with tf.device("/cpu:0"):
            x = tf.constant(1.0)
        """
    ),
    # already TF2: a Keras schedule under a strategy
    Valid(
        """
        import tensorflow as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            lr = tf.keras.optimizers.schedules.ExponentialDecay(0.1, 100, 0.5)
            opt = tf.keras.optimizers.SGD(learning_rate=lr)
        """
    ),
]
GraphToStrategy.INVALID = [
    # variables of the worker's own beside shared ones on the ps: a local-copy scheme, declined
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def train(server, task_index, batches):
            with tf.device("/job:ps/task:0"):
                shared_w = tf.Variable(tf.zeros([3, 1]))
            with tf.device("/job:worker/task:%d" % task_index):
                local_w = tf.Variable(tf.zeros([3, 1]))
                x = tf.placeholder(tf.float32, [None, 3])
                loss = tf.reduce_sum(tf.matmul(x, local_w + shared_w))
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.Session(server.target) as sess:
                for batch in batches:
                    sess.run(train_op, feed_dict={x: batch})
        """,
        None,
        ("TFM301",),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def train(cluster, server, steps):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.matmul(x, w))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            hooks = [tf.train.StopAtStepHook(last_step=steps)]
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, hooks=hooks) as sess:
                while not sess.should_stop():
                    _, value = sess.run([train_op, loss], feed_dict={x: batch()})
        """,
        """
        import tensorflow.compat.v1 as tf


        def train(cluster, server, steps):
            strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
            coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
            with strategy.scope():
                w = tf.Variable(tf.zeros_initializer()(shape=[3, 1], dtype=tf.float32), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.matmul(x, w))
                    gradients = tape.gradient(loss, trainable_variables)
                    optimizer.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return loss
                results = strategy.run(train_step_replica, args=(x,))
                return tf.nest.map_structure(
                    lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)
            # ParameterServerStrategy trains on whichever worker is free. Each closure costs
            # the chief a round trip to its worker, which TF1's workers did not pay, so one
            # closure runs steps_per_closure steps (queue_pending_steps). The rest of the loop body
            # (finish_train_step) runs on each step's results up to max_steps_in_flight steps
            # later, so workers overlap as TF1's asynchronous workers did.
            steps_per_closure = 4
            max_steps_in_flight = 2 * steps_per_closure * tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().num_tasks("worker")
            steps_in_flight = []
            pending_steps = []
            # the global step lags behind by the steps in flight: count the scheduled ones
            scheduled_steps = int(global_step.numpy())

            @tf.function
            def train_steps(*stacked):
                # The steps of one closure, in order, on the worker that runs it.
                return [train_step(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

            def queue_pending_steps():
                # Steps whose arguments have the same shapes share a closure, stacked.
                groups = []
                for arguments, captured in pending_steps:
                    x, = arguments
                    # the inputs as tensors of the step's dtypes, which take tf.function's
                    # fast path (NumPy arguments cost more than the step)
                    x = tf.convert_to_tensor(x, tf.float32)
                    shapes = [value.shape for value in (x,)]
                    if not groups or groups[-1][0] != shapes:
                        groups.append((shapes, []))
                    groups[-1][1].append(((x,), captured))
                for _, steps in groups:
                    stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
                    closure = coordinator.schedule(train_steps, args=tuple(stacked))
                    steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
                pending_steps.clear()

            def finish_train_step(step_results, step_index):
                # The rest of the loop body, run on this step's results (fetch() waits for them).
                try:
                    step_results.fetch()[step_index]
                except tf.errors.UnavailableError:
                    # The step's worker failed and the coordinator could not recover its results:
                    # skip what the loop did with them (a TF1 worker that died lost its step too).
                    return

            while not scheduled_steps >= steps:
                pending_steps.append(((batch(),), ()))
                scheduled_steps += 1
                if len(pending_steps) == steps_per_closure:
                    queue_pending_steps()
                while len(steps_in_flight) > max_steps_in_flight:
                    finish_train_step(*steps_in_flight.pop(0))
            queue_pending_steps()
            while steps_in_flight:
                finish_train_step(*steps_in_flight.pop(0))
        """,
        diagnostics=(),
    ),
    # the loop's tail decides on the step's value: each step's results are waited for
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def train(cluster, server, steps):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
                loss = tf.reduce_mean(tf.matmul(x, w))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            hooks = [tf.train.StopAtStepHook(last_step=steps)]
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, hooks=hooks) as sess:
                while not sess.should_stop():
                    _, value = sess.run([train_op, loss], feed_dict={x: batch()})
                    if value < 0.01:
                        break
        """,
        """
        import tensorflow.compat.v1 as tf


        def train(cluster, server, steps):
            strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
            coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
            with strategy.scope():
                w = tf.Variable(tf.zeros_initializer()(shape=[3, 1], dtype=tf.float32), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.matmul(x, w))
                    gradients = tape.gradient(loss, trainable_variables)
                    optimizer.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return loss
                results = strategy.run(train_step_replica, args=(x,))
                return tf.nest.map_structure(
                    lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)

            def schedule_train_step(x):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                x = tf.convert_to_tensor(x, tf.float32)
                # The chief queues the step for the next free worker; the step's results come
                # back as a RemoteValue (its fetch() waits for them).
                return coordinator.schedule(train_step, args=(x,))

            def run_train_step(x):
                # The loop needs this step's results before it goes on: wait for them.
                for attempt in range(3):
                    try:
                        results = schedule_train_step(x).fetch()
                        break
                    except tf.errors.UnavailableError:
                        # The worker holding this step's result died before it was fetched. The
                        # coordinator recovers the worker; run the step again (closures are
                        # at-least-once, like a TF1 worker retrying after its session failed).
                        if attempt == 2:
                            raise
                return results
            while not int(global_step.numpy()) >= steps:
                value = run_train_step(batch())
                if value < 0.01:
                    break
        """,
        diagnostics=(),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def train(cluster, server, is_chief, num_workers):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                loss = tf.reduce_mean(tf.matmul(x, w))
                global_step = tf.Variable(0, name="global_step", trainable=False)
                opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=num_workers)
                train_op = opt.minimize(loss, global_step=global_step)
                chief_queue_runner = opt.get_chief_queue_runner()
                init_tokens_op = opt.get_init_tokens_op()
                init_op = tf.global_variables_initializer()
            sv = tf.train.Supervisor(is_chief=is_chief, logdir="/tmp/train", init_op=init_op, global_step=global_step)
            sess = sv.prepare_or_wait_for_session(server.target)
            if is_chief:
                sess.run(init_tokens_op)
                sv.start_queue_runners(sess, [chief_queue_runner])
            step = 0
            while step < 100:
                _, step = sess.run([train_op, global_step], feed_dict={x: batch()})
        """,
        '''
        import tensorflow.compat.v1 as tf
        import os
        import time


        def restore_checkpoint(checkpoint, path, variables, optimizer):
            """Restores `checkpoint` from `path`, or from the TF1 job's checkpoint by variable name."""
            reader = tf.train.load_checkpoint(path)
            saved = reader.get_variable_to_shape_map()
            if "_CHECKPOINTABLE_OBJECT_GRAPH" in saved:
                checkpoint.restore(path)
                return
            by_name, repeats = {}, {}
            for variable in variables:
                name = variable.name.split(":")[0]
                # TF1's graph numbered a repeated name: name, name_1, name_2, ...
                repeats[name] = repeats.get(name, -1) + 1
                by_name[f"{name}_{repeats[name]}" if repeats[name] else name] = variable
            missing = sorted(set(by_name) - set(saved))
            if missing:
                raise ValueError(f"{path} has no value for {', '.join(missing)}")
            for name, variable in by_name.items():
                variable.assign(reader.get_tensor(name))
            if "global_step" in saved:
                # the optimizer's step count (its schedule's step) continues from TF1's
                optimizer.iterations.assign(reader.get_tensor("global_step"))
            left = sorted(set(saved) - set(by_name))
            if left:
                tf.get_logger().warning("%s: not restored, nothing in this program takes them: %s",
                                        path, ", ".join(left))


        def train(cluster, server, is_chief, num_workers):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
            with strategy.scope():
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                opt = tf.keras.optimizers.SGD(learning_rate=0.1)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    global_step_value = global_step.read_value()
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.matmul(x, w))
                        # SyncReplicasOptimizer averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return global_step_value
                return strategy.run(train_step_replica, args=(x,))

            def run_train_step(x):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                x = tf.convert_to_tensor(x, tf.float32)
                results = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0].numpy(),
                    train_step(x))
                return results
            checkpoint_dir = "/tmp/train"
            # Checkpoints, restored on start so a restarted job resumes
            # (also from the TF1 job's name-based checkpoints).
            # Saved every 600 s (Supervisor's default save_model_secs) and at the end.
            checkpoint = tf.train.Checkpoint(global_step=global_step, opt=opt, w=w)
            checkpoint_manager = (
                tf.train.CheckpointManager(checkpoint, checkpoint_dir if strategy.cluster_resolver.task_id == 0 else os.path.join(checkpoint_dir, "worker_%d" % strategy.cluster_resolver.task_id), max_to_keep=5) if checkpoint_dir else None)
            latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
            if latest_checkpoint:
                restore_checkpoint(checkpoint, latest_checkpoint, [global_step, w], opt)
            next_checkpoint_time = time.monotonic() + 600
            step = 0
            while step < 100:
                step = run_train_step(batch())
                if checkpoint_manager is not None and time.monotonic() >= next_checkpoint_time:
                    checkpoint_manager.save(checkpoint_number=global_step)
                    next_checkpoint_time = time.monotonic() + 600
            if checkpoint_manager is not None:
                checkpoint_manager.save(checkpoint_number=global_step)
        ''',
        diagnostics=(),
    ),
    Invalid(
        """
        import tensorflow as tf

        with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
            x = tf.placeholder(tf.float32, [None, 3])
            for i in range(2):
                w = tf.get_variable("w%d" % i, [3, 1])
        """,
        None,
        diagnostics=('TFM301',),
    ),
    Invalid(
        """
        import tensorflow as tf

        with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
            w = tf.get_variable("w", [3, 1])
        """,
        None,
        diagnostics=('TFM301',),
    ),
    Invalid(
        """
        import tensorflow as tf

        global_step = tf.train.get_or_create_global_step()
        with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
            x = tf.placeholder(tf.float32, [None, 3])
            w = tf.get_variable("w", [3, 1])
            loss = tf.reduce_mean(tf.matmul(x, w))
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        with tf.train.MonitoredTrainingSession() as sess:
            _, step = sess.run([train_op, global_step], feed_dict={x: [[1.0, 2.0, 3.0]]})
        """,
        None,
        diagnostics=('TFM301', 'TFM301'),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def weight_variable(shape):
            return tf.Variable(tf.truncated_normal(shape, stddev=0.1))


        def inference(x):
            w = weight_variable([3, 1])
            return tf.matmul(x, w)


        def train(cluster, server, is_chief):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                y = inference(x)
                loss = tf.reduce_mean(tf.square(y))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            stop = tf.train.StopAtStepHook(last_step=500)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=[stop]) as sess:
                while not sess.should_stop():
                    _, step = sess.run([train_op, global_step], feed_dict={x: batch()})
        """,
        """
        import tensorflow.compat.v1 as tf


        def weight_variable(shape):
            return tf.Variable(tf.truncated_normal(shape, stddev=0.1))


        def inference(x):
            w = weight_variable([3, 1])
            return tf.matmul(x, w)


        def train(cluster, server, is_chief):
            strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
            coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

            def model_fn(x):
                y = inference(x)
                loss = tf.reduce_mean(tf.square(y))
                return loss

            class ModelBuiltOnce(tf.Module):
                # TF1 built the model's graph once and every step reused its variables; in TF2
                # each call of a tf.Variable-creating helper makes new ones. The first call
                # records the variables the model creates, later calls get them back in order.
                def __init__(self, model_fn):
                    super().__init__(name="model")
                    self.model_fn = model_fn
                    self.created = []

                def __call__(self, *args):
                    recorded = iter(list(self.created))

                    def reuse_or_create(next_creator, **kwargs):
                        variable = next(recorded, None)
                        if variable is None:
                            variable = next_creator(**kwargs)
                            self.created.append(variable)
                        return variable

                    with tf.variable_creator_scope(reuse_or_create):
                        return self.model_fn(*args)

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
                model = ModelBuiltOnce(model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([1, 3], tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    global_step_value = global_step.read_value()
                    with tf.GradientTape() as tape:
                        loss = model(x)
                    gradients = tape.gradient(loss, trainable_variables)
                    optimizer.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return global_step_value
                results = strategy.run(train_step_replica, args=(x,))
                return tf.nest.map_structure(
                    lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)
            # ParameterServerStrategy trains on whichever worker is free. Each closure costs
            # the chief a round trip to its worker, which TF1's workers did not pay, so one
            # closure runs steps_per_closure steps (queue_pending_steps). The rest of the loop body
            # (finish_train_step) runs on each step's results up to max_steps_in_flight steps
            # later, so workers overlap as TF1's asynchronous workers did.
            steps_per_closure = 4
            max_steps_in_flight = 2 * steps_per_closure * tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().num_tasks("worker")
            steps_in_flight = []
            pending_steps = []
            # the global step lags behind by the steps in flight: count the scheduled ones
            scheduled_steps = int(global_step.numpy())

            @tf.function
            def train_steps(*stacked):
                # The steps of one closure, in order, on the worker that runs it.
                return [train_step(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

            def queue_pending_steps():
                # Steps whose arguments have the same shapes share a closure, stacked.
                groups = []
                for arguments, captured in pending_steps:
                    x, = arguments
                    # the inputs as tensors of the step's dtypes, which take tf.function's
                    # fast path (NumPy arguments cost more than the step)
                    x = tf.convert_to_tensor(x, tf.float32)
                    shapes = [value.shape for value in (x,)]
                    if not groups or groups[-1][0] != shapes:
                        groups.append((shapes, []))
                    groups[-1][1].append(((x,), captured))
                for _, steps in groups:
                    stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
                    closure = coordinator.schedule(train_steps, args=tuple(stacked))
                    steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
                pending_steps.clear()

            def finish_train_step(step_results, step_index):
                # The rest of the loop body, run on this step's results (fetch() waits for them).
                try:
                    step_results.fetch()[step_index]
                except tf.errors.UnavailableError:
                    # The step's worker failed and the coordinator could not recover its results:
                    # skip what the loop did with them (a TF1 worker that died lost its step too).
                    return

            while not scheduled_steps >= 500:
                pending_steps.append(((batch(),), ()))
                scheduled_steps += 1
                if len(pending_steps) == steps_per_closure:
                    queue_pending_steps()
                while len(steps_in_flight) > max_steps_in_flight:
                    finish_train_step(*steps_in_flight.pop(0))
            queue_pending_steps()
            while steps_in_flight:
                finish_train_step(*steps_in_flight.pop(0))
        """,
        diagnostics=(),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def inference(x):
            w = tf.get_variable("w", [3, 1])
            keep_prob = tf.placeholder(tf.float32)
            return keep_prob, tf.nn.dropout(tf.matmul(x, w), keep_prob)


        def train(cluster, server, is_chief):
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                keep_prob, y = inference(x)
                loss = tf.reduce_mean(tf.square(y))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            stop = tf.train.StopAtStepHook(last_step=500)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=[stop]) as sess:
                while not sess.should_stop():
                    _, step = sess.run([train_op, global_step], feed_dict={x: batch(), keep_prob: 0.5})
        """,
        """
        import tensorflow.compat.v1 as tf


        def inference(x, keep_prob):
            w = tf.get_variable("w", [3, 1])
            return tf.nn.dropout(tf.matmul(x, w), keep_prob)


        def train(cluster, server, is_chief):
            strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
            coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

            def model_fn(x, keep_prob):
                y = inference(x, keep_prob)
                loss = tf.reduce_mean(tf.square(y))
                return loss

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the TF1 graph did.
                model(tf.zeros([1, 3], tf.float32), tf.constant(0.5, tf.float32))
            trainable_variables = model.trainable_variables

            @tf.function
            def train_step(x, keep_prob):
                def train_step_replica(x, keep_prob):
                    global_step_value = global_step.read_value()
                    with tf.GradientTape() as tape:
                        loss = model(x, keep_prob)
                    gradients = tape.gradient(loss, trainable_variables)
                    optimizer.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return global_step_value
                results = strategy.run(train_step_replica, args=(x, keep_prob))
                return tf.nest.map_structure(
                    lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)
            # ParameterServerStrategy trains on whichever worker is free. Each closure costs
            # the chief a round trip to its worker, which TF1's workers did not pay, so one
            # closure runs steps_per_closure steps (queue_pending_steps). The rest of the loop body
            # (finish_train_step) runs on each step's results up to max_steps_in_flight steps
            # later, so workers overlap as TF1's asynchronous workers did.
            steps_per_closure = 4
            max_steps_in_flight = 2 * steps_per_closure * tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().num_tasks("worker")
            steps_in_flight = []
            pending_steps = []
            # the global step lags behind by the steps in flight: count the scheduled ones
            scheduled_steps = int(global_step.numpy())

            @tf.function
            def train_steps(*stacked):
                # The steps of one closure, in order, on the worker that runs it.
                return [train_step(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

            def queue_pending_steps():
                # Steps whose arguments have the same shapes share a closure, stacked.
                groups = []
                for arguments, captured in pending_steps:
                    x, keep_prob = arguments
                    # the inputs as tensors of the step's dtypes, which take tf.function's
                    # fast path (NumPy arguments cost more than the step)
                    x, keep_prob = tf.convert_to_tensor(x, tf.float32), tf.convert_to_tensor(keep_prob, tf.float32)
                    shapes = [value.shape for value in (x, keep_prob)]
                    if not groups or groups[-1][0] != shapes:
                        groups.append((shapes, []))
                    groups[-1][1].append(((x, keep_prob), captured))
                for _, steps in groups:
                    stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
                    closure = coordinator.schedule(train_steps, args=tuple(stacked))
                    steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
                pending_steps.clear()

            def finish_train_step(step_results, step_index):
                # The rest of the loop body, run on this step's results (fetch() waits for them).
                try:
                    step_results.fetch()[step_index]
                except tf.errors.UnavailableError:
                    # The step's worker failed and the coordinator could not recover its results:
                    # skip what the loop did with them (a TF1 worker that died lost its step too).
                    return

            while not scheduled_steps >= 500:
                pending_steps.append(((batch(), 0.5), ()))
                scheduled_steps += 1
                if len(pending_steps) == steps_per_closure:
                    queue_pending_steps()
                while len(steps_in_flight) > max_steps_in_flight:
                    finish_train_step(*steps_in_flight.pop(0))
            queue_pending_steps()
            while steps_in_flight:
                finish_train_step(*steps_in_flight.pop(0))
        """,
        diagnostics=(),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf

        tf.app.flags.DEFINE_boolean("sync_replicas", False, "Use SyncReplicasOptimizer")
        FLAGS = tf.app.flags.FLAGS


        def train(server, is_chief, num_workers):
            with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                loss = tf.reduce_mean(tf.matmul(x, w))
                tf.summary.scalar("loss", loss)
                summary_op = tf.summary.merge_all()
                global_step = tf.Variable(0, name="global_step", trainable=False)
                opt = tf.train.GradientDescentOptimizer(0.1)
                if FLAGS.sync_replicas:
                    opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=num_workers)
                train_op = opt.minimize(loss, global_step=global_step)
            sv = tf.train.Supervisor(is_chief=is_chief, logdir="/tmp/train", global_step=global_step)
            sess = sv.prepare_or_wait_for_session(server.target)
            step = 0
            while step < 100:
                _, summary, step = sess.run([train_op, summary_op, global_step], feed_dict={x: batch()})
                sv.summary_computed(sess, summary)
        """,
        '''
        import tensorflow.compat.v1 as tf
        import os
        import time

        tf.app.flags.DEFINE_boolean("sync_replicas", False, "Use SyncReplicasOptimizer")
        FLAGS = tf.app.flags.FLAGS


        def restore_checkpoint(checkpoint, path, variables, optimizer):
            """Restores `checkpoint` from `path`, or from the TF1 job's checkpoint by variable name."""
            reader = tf.train.load_checkpoint(path)
            saved = reader.get_variable_to_shape_map()
            if "_CHECKPOINTABLE_OBJECT_GRAPH" in saved:
                checkpoint.restore(path)
                return
            by_name, repeats = {}, {}
            for variable in variables:
                name = variable.name.split(":")[0]
                # TF1's graph numbered a repeated name: name, name_1, name_2, ...
                repeats[name] = repeats.get(name, -1) + 1
                by_name[f"{name}_{repeats[name]}" if repeats[name] else name] = variable
            missing = sorted(set(by_name) - set(saved))
            if missing:
                raise ValueError(f"{path} has no value for {', '.join(missing)}")
            for name, variable in by_name.items():
                variable.assign(reader.get_tensor(name))
            if "global_step" in saved:
                # the optimizer's step count (its schedule's step) continues from TF1's
                optimizer.iterations.assign(reader.get_tensor("global_step"))
            left = sorted(set(saved) - set(by_name))
            if left:
                tf.get_logger().warning("%s: not restored, nothing in this program takes them: %s",
                                        path, ", ".join(left))


        def train(server, is_chief, num_workers):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
            with strategy.scope():
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                opt = tf.keras.optimizers.SGD(learning_rate=0.1)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    global_step_value = global_step.read_value()
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.matmul(x, w))
                        # SyncReplicasOptimizer averaged the replicas' gradients; strategies sum them.
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    opt.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return global_step_value
                return strategy.run(train_step_replica, args=(x,))

            def run_train_step(x):
                # the inputs as tensors of the step's dtypes, which take tf.function's
                # fast path (NumPy arguments cost more than the step)
                x = tf.convert_to_tensor(x, tf.float32)
                results = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0].numpy(),
                    train_step(x))
                return results
            checkpoint_dir = "/tmp/train"
            # Checkpoints, restored on start so a restarted job resumes
            # (also from the TF1 job's name-based checkpoints).
            # Saved every 600 s (Supervisor's default save_model_secs) and at the end.
            checkpoint = tf.train.Checkpoint(global_step=global_step, opt=opt, w=w)
            checkpoint_manager = (
                tf.train.CheckpointManager(checkpoint, checkpoint_dir if strategy.cluster_resolver.task_id == 0 else os.path.join(checkpoint_dir, "worker_%d" % strategy.cluster_resolver.task_id), max_to_keep=5) if checkpoint_dir else None)
            latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
            if latest_checkpoint:
                restore_checkpoint(checkpoint, latest_checkpoint, [global_step, w], opt)
            next_checkpoint_time = time.monotonic() + 600
            step = 0
            while step < 100:
                step = run_train_step(batch())
                if checkpoint_manager is not None and time.monotonic() >= next_checkpoint_time:
                    checkpoint_manager.save(checkpoint_number=global_step)
                    next_checkpoint_time = time.monotonic() + 600
            if checkpoint_manager is not None:
                checkpoint_manager.save(checkpoint_number=global_step)
        ''',
        diagnostics=('TFM301', 'TFM301'),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf


        def create_done_queue(num_workers):
            with tf.device("/job:ps/task:0"):
                return tf.FIFOQueue(num_workers, tf.int32, shared_name="done_queue")


        def train(cluster, server, is_chief, num_workers):
            done_queue = create_done_queue(num_workers)
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                x = tf.placeholder(tf.float32, [None, 3])
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                loss = tf.reduce_mean(tf.matmul(x, w))
                global_step = tf.train.get_or_create_global_step()
                train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
                done_op = done_queue.enqueue(1)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief) as sess:
                for _ in range(100):
                    sess.run(train_op, feed_dict={x: batch()})
                sess.run(done_op)
        """,
        """
        import tensorflow.compat.v1 as tf


        def create_done_queue(num_workers):
            with tf.device("/job:ps/task:0"):
                return tf.FIFOQueue(num_workers, tf.int32, shared_name="done_queue")


        def train(cluster, server, is_chief, num_workers):
            strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
            coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
            with strategy.scope():
                w = tf.Variable(tf.zeros([3, 1]), name="w")
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
            trainable_variables = [w]

            @tf.function
            def train_step(x):
                def train_step_replica(x):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.matmul(x, w))
                    gradients = tape.gradient(loss, trainable_variables)
                    optimizer.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return ()
                results = strategy.run(train_step_replica, args=(x,))
                return tf.nest.map_structure(
                    lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), results)
            # ParameterServerStrategy trains on whichever worker is free. Each closure costs
            # the chief a round trip to its worker, which TF1's workers did not pay, so one
            # closure runs steps_per_closure steps (queue_pending_steps). The rest of the loop body
            # (finish_train_step) runs on each step's results up to max_steps_in_flight steps
            # later, so workers overlap as TF1's asynchronous workers did.
            steps_per_closure = 4
            max_steps_in_flight = 2 * steps_per_closure * tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().num_tasks("worker")
            steps_in_flight = []
            pending_steps = []

            @tf.function
            def train_steps(*stacked):
                # The steps of one closure, in order, on the worker that runs it.
                return [train_step(*step) for step in zip(*(tf.unstack(value) for value in stacked))]

            def queue_pending_steps():
                # Steps whose arguments have the same shapes share a closure, stacked.
                groups = []
                for arguments, captured in pending_steps:
                    x, = arguments
                    # the inputs as tensors of the step's dtypes, which take tf.function's
                    # fast path (NumPy arguments cost more than the step)
                    x = tf.convert_to_tensor(x, tf.float32)
                    shapes = [value.shape for value in (x,)]
                    if not groups or groups[-1][0] != shapes:
                        groups.append((shapes, []))
                    groups[-1][1].append(((x,), captured))
                for _, steps in groups:
                    stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]
                    closure = coordinator.schedule(train_steps, args=tuple(stacked))
                    steps_in_flight.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))
                pending_steps.clear()

            def finish_train_step(step_results, step_index):
                # The rest of the loop body, run on this step's results (fetch() waits for them).
                try:
                    step_results.fetch()[step_index]
                except tf.errors.UnavailableError:
                    # The step's worker failed and the coordinator could not recover its results:
                    # skip what the loop did with them (a TF1 worker that died lost its step too).
                    return

            for _ in range(100):
                pending_steps.append(((batch(),), ()))
                if len(pending_steps) == steps_per_closure:
                    queue_pending_steps()
                while len(steps_in_flight) > max_steps_in_flight:
                    finish_train_step(*steps_in_flight.pop(0))
            queue_pending_steps()
            while steps_in_flight:
                finish_train_step(*steps_in_flight.pop(0))
        """,
    ),
]
