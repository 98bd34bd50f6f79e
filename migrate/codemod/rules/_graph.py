"""Analysis of a TF1 graph-building block, shared by the strategy rules.

A legacy training program builds a graph (placeholders, variables, the
forward computation, an optimizer's train op) and then runs it in a session
loop. :func:`analyze` sorts the statements of the graph block into kinds so a
rule can rebuild them as TF2 code: state created once under
``strategy.scope()``, and the computation moved into ``tf.function`` steps
whose parameters are the old placeholders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _update_barriers
from migrate.codemod.rules._equivalents import is_schedule

PLACEHOLDERS = {"placeholder", "placeholder_with_default"}
VARIABLE_CREATORS = {"get_variable", "Variable", "get_local_variable"}
GLOBAL_STEP_CREATORS = {
    "train.get_or_create_global_step",
    "train.create_global_step",
    "train.get_global_step",
    "contrib.framework.get_or_create_global_step",
    "contrib.framework.get_global_step",
}
# graph-only plumbing with no TF2 counterpart: initialisers, savers, summaries
DROPPED_CALLS = {
    "global_variables_initializer",
    "local_variables_initializer",
    "initialize_all_variables",
    "initialize_local_variables",
    "variables_initializer",
    "tables_initializer",
    "group",
    "report_uninitialized_variables",
    "train.Saver",
    "summary.merge_all",
    "summary.merge",
    "summary.scalar",
    "summary.histogram",
    "summary.image",
    "summary.FileWriter",
    "summary.FileWriterCache.get",
    "add_to_collection",
    "train.Scaffold",
    "ConfigProto",
    "GPUOptions",
    "RunOptions",
}
# TF1's summary writer cache, also imported from its private module (summary_io)
_WRITER_CACHE_GETS = ("FileWriterCache.get", "SummaryWriterCache.get")
QUEUE_CLASSES = {"FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue", "queue.FIFOQueue"}
SYNC_METHODS = {"get_chief_queue_runner", "get_init_tokens_op", "make_session_run_hook"}
SYNC_ATTRS = {"local_step_init_op", "chief_init_op", "ready_for_local_init_op", "sync_init_op"}


ITERATOR_MAKERS = {"data.make_one_shot_iterator"}
# iterators a session must initialize or feed: no one-pass Python iterator stands for them
OTHER_ITERATORS = {
    "data.make_initializable_iterator": "an initializable iterator (its initializer op is run by the session)",
    "data.Iterator.from_structure": "a reinitializable iterator (Iterator.from_structure)",
    "data.Iterator.from_string_handle": "a feedable iterator (Iterator.from_string_handle)",
}
OTHER_ITERATOR_METHODS = {
    "make_initializable_iterator": "an initializable iterator (its initializer op is run by the session)",
}


@dataclass
class InputPipeline:
    """`x, y = tf.data.make_one_shot_iterator(dataset).get_next()` (or
    `iterator = ...` then `iterator.get_next()`, or a module function returning
    that): each session run of an op that reads x or y took the next batch."""

    names: list[str]  # the get_next() targets, in order: the step's parameters
    single: bool  # one target, bound to the whole element (`batch = ...get_next()`)
    dataset: cst.BaseExpression  # what the iterator iterates
    statement: cst.BaseStatement  # the get_next() statement
    iterator: str | None = None  # the program's own name for the iterator, if it has one
    helper: str | None = None  # `x, y = input_fn()`: the module function that returned get_next()
    endless: bool = False  # the dataset repeats forever (`.repeat()`): its end never comes


@dataclass
class Graph:
    placeholders: list[tuple[str, cst.BaseStatement, cst.Call]] = field(default_factory=list)
    state: list[cst.BaseStatement] = field(default_factory=list)  # variables, optimizer, python
    variables: list[str] = field(default_factory=list)  # trainable, in creation order
    global_step: str | None = None
    optimizer: str | None = None
    optimizer_call: cst.Call | None = None
    sync: cst.Call | None = None  # the SyncReplicasOptimizer(...) call
    compute: list[tuple[list[str], cst.BaseStatement]] = field(default_factory=list)
    train_op: str | None = None
    loss: cst.BaseExpression | None = None
    var_list: cst.BaseExpression | None = None
    grads_name: str | None = None  # compute_gradients result
    # how grads_name holds the gradients: "pairs" (compute_gradients' (gradient, variable)
    # list), "list" (tf.gradients': one gradient per variable of var_list), "unzipped"
    # (`grads, variables = zip(*opt.compute_gradients(loss))`, variables in grads_vars_name)
    grads_form: str = "pairs"
    grads_vars_name: str | None = None
    # `params = tf.trainable_variables()`: names for the variables the step trains
    trainable_aliases: set[str] = field(default_factory=set)
    apply_arg: cst.BaseExpression | None = None  # apply_gradients argument
    dropped: set[str] = field(default_factory=set)
    # work queues: a queue filled once with tf.range(n) hands out "tickets"
    # (batch ids) each exactly once -- what a ClusterCoordinator loop does
    queue_ranges: dict[str, cst.BaseExpression] = field(default_factory=dict)  # queue -> n
    dequeues: dict[str, str] = field(default_factory=dict)  # dequeue op name -> queue
    unsupported: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    notes: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    # named learning-rate schedules (`lr = tf.train.exponential_decay(...)`): name -> call
    schedules: dict[str, cst.Call] = field(default_factory=dict)
    # the global step the train op advances (`minimize(loss, global_step=gs)`), if any
    advanced_step: str | None = None
    # `with tf.device("/cpu:0"):` blocks inside the setter block, unwrapped
    unwrapped_devices: list[cst.With] = field(default_factory=list)
    variable_helpers: frozenset[str] = frozenset()  # module functions creating variables
    keep_schedules: bool = False  # see analyze()
    # tf.data input pipelines read by one-shot iterators (analyze(inputs=...))
    follow_inputs: bool = False
    input_helpers: frozenset[str] = frozenset()  # module functions returning a one-shot iterator's get_next()
    inputs: list[InputPipeline] = field(default_factory=list)
    iterators: dict[str, tuple[cst.BaseExpression, cst.BaseStatement]] = field(default_factory=dict)
    # the statements building the pipelines' datasets, moved out of the forward computation
    pipeline: list[cst.BaseStatement] = field(default_factory=list)
    # `w = tf.get_variable(..., regularizer=r)`: (variable, regularizer) in creation order,
    # the terms TF1 put in the REGULARIZATION_LOSSES collection
    regularized: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)
    # `if <flag test>:` with training in both branches -> the branch the default run takes
    choose_branch: object = None
    # update barriers (`_update_barriers`): names bound to a model's update ops -> what they
    # are; barriers (`with tf.control_dependencies(updates): barrier = tf.no_op()`) -> (what
    # they run, statement); statements the step computes after a barrier -> what it ran
    update_lists: dict[str, tuple[str, str]] = field(default_factory=dict)
    update_barriers: dict[str, tuple[tuple[str, str], cst.BaseStatement]] = field(default_factory=dict)
    barrier_uses: list[tuple[cst.BaseStatement, list[tuple[str, str]]]] = field(default_factory=list)
    # `train_tensor = with_dependencies([apply_op], loss)` (slim's create_train_op): the train op
    # is `train_tensor`, and a session run fetching it got `loss` (its value before the update)
    train_value: str | None = None
    follow_barriers: bool = False  # see analyze()

    @property
    def placeholder_names(self) -> list[str]:
        return [p[0] for p in self.placeholders]

    @property
    def input_names(self) -> set[str]:
        return {n for pipeline in self.inputs for n in pipeline.names}

    @property
    def ending_input_names(self) -> set[str]:
        """Targets of the pipelines that may run out (OutOfRangeError)."""
        return {n for pipeline in self.inputs if not pipeline.endless for n in pipeline.names}

    @property
    def compute_names(self) -> set[str]:
        return {n for names, _ in self.compute for n in names}

    def slice_for(self, wanted: set[str]) -> list[tuple[list[str], cst.BaseStatement]]:
        """The compute statements needed to produce ``wanted``, in order."""
        need = set(wanted)
        chosen = []
        for names, statement in reversed(self.compute):
            if need & set(names) or (not names and need & C.names_used(statement)):
                chosen.append((names, statement))
                need |= C.names_used(statement)
        return list(reversed(chosen))

    def params_for(self, statements) -> list[str]:
        """The placeholders the statements read, then every target of each
        input pipeline they read (one get_next() gave them all)."""
        used: set[str] = set()
        for _, s in statements:
            used |= C.names_used(s)
        params = [n for n in self.placeholder_names if n in used]
        for pipeline in self.inputs:
            if used & set(pipeline.names):
                params += pipeline.names
        return params


def _is_optimizer(q: str | None) -> bool:
    return bool(q) and q.startswith("train.") and q.endswith("Optimizer") and q != "train.SyncReplicasOptimizer"


def analyze(statements, qualname, dropped=(), variable_helpers=frozenset(), schedules=False,
            inputs=None, choose_branch=None, barriers=False) -> Graph:
    """`dropped`: names of graph plumbing built before the block (a "done"
    queue on the ps) whose ops the block derives; `variable_helpers`: module
    functions that create variables (their calls build the model, whatever
    they are passed); `schedules`: take named learning-rate schedules
    (``Graph.schedules``) and Keras optimizers built in the block as state,
    for a rule that rebuilds them, instead of as forward computation;
    `inputs`: follow tf.data one-shot iterators (``Graph.inputs``), given the
    module functions that return one's ``get_next()`` (None: do not);
    `barriers`: take update barriers and train tensors (``_update_barriers``)
    apart, for a rule that plans them."""
    g = Graph()
    g.follow_barriers = barriers
    g.dropped.update(dropped)
    g.variable_helpers = frozenset(variable_helpers)
    g.keep_schedules = schedules
    g.follow_inputs = inputs is not None
    g.input_helpers = frozenset(inputs or ())
    g.choose_branch = choose_branch
    for statement in statements:
        _classify(g, statement, qualname)
    if g.inputs:
        _separate_pipelines(g)
    return g


def _separate_pipelines(g: Graph) -> None:
    """The statements building the datasets (`ds = ds.batch(32)`) run once,
    before the iterators are made, not in every step."""
    needed: set[str] = set()
    for pipeline in g.inputs:
        needed |= C.names_used(pipeline.dataset)
    moved = g.slice_for(needed)
    if not moved:
        return
    moved_ids = {id(st) for _, st in moved}
    rest = [(names, st) for names, st in g.compute if id(st) not in moved_ids]
    built = {n for names, _ in moved for n in names}
    for names, statement in rest:
        shared = sorted(C.names_used(statement) & built)
        if shared:
            why = (f"`{shared[0]}` belongs to the input pipeline and is also read by the model: the pipeline is"
                   " built once, outside the training step")
            g.unsupported.append((statement, why))
            return
    g.compute = rest
    g.pipeline = [st for _, st in moved]


def _get_next_source(g: Graph, call: cst.Call, qualname):
    """(dataset, the program's iterator name) read by `<iterator>.get_next()`,
    or a string saying why this iterator cannot be followed."""
    owner = call.func.value
    if isinstance(owner, cst.Name):
        if owner.value in g.iterators:
            return g.iterators[owner.value][0], owner.value
        return (f"`{owner.value}.get_next()` reads an iterator not made in this block by"
                " tf.data.make_one_shot_iterator(...)")
    if isinstance(owner, cst.Call):
        q = qualname(owner.func)
        method = owner.func.attr.value if isinstance(owner.func, cst.Attribute) else None
        if q in ITERATOR_MAKERS:
            dataset = C.arg(owner, 0, "dataset")
            if dataset is not None:
                return dataset, None
        if method == "make_one_shot_iterator" and q is None and not owner.args:
            return owner.func.value, None
        if q in OTHER_ITERATORS or method in OTHER_ITERATOR_METHODS:
            return OTHER_ITERATORS.get(q) or OTHER_ITERATOR_METHODS[method]
    return f"`{C.code_of(call)}` reads an iterator this rule cannot follow"


def _input(g: Graph, statement, names, assign, call, qualname) -> bool:
    """Record an input pipeline (or why it cannot be migrated); False when
    the statement is none."""
    method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
    q = qualname(call.func)
    if len(names) == 1 and assign is not None and (q in ITERATOR_MAKERS or (method == "make_one_shot_iterator" and q is None)):
        dataset = C.arg(call, 0, "dataset") if q in ITERATOR_MAKERS else call.func.value
        g.iterators[names[0]] = (dataset, statement)
        return True
    if q in OTHER_ITERATORS or (method in OTHER_ITERATOR_METHODS and q is None):
        why = OTHER_ITERATORS.get(q) or OTHER_ITERATOR_METHODS[method]
        why = f"{why}: its batches come from session runs of its init or feed ops, which no Python iterator reproduces"
        g.unsupported.append((statement, why))
        return True
    from_helper = isinstance(call.func, cst.Name) and call.func.value in g.input_helpers
    if not (method == "get_next" and not call.args) and not from_helper:
        return False
    if from_helper:
        source = (call, None)
    else:
        source = _get_next_source(g, call, qualname)
    if isinstance(source, str):
        g.unsupported.append((statement, source))
        return True
    target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
    if target is None or not (isinstance(target, cst.Name) or (
            isinstance(target, (cst.Tuple, cst.List))
            and all(isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in target.elements))):
        g.unsupported.append((statement, "the batch of an input pipeline bound to anything but names"))
        return True
    dataset, iterator = source
    if iterator is not None and any(p.iterator == iterator for p in g.inputs):
        why = f"`{iterator}.get_next()` is called more than once: each call was a batch of its own per session run"
        g.unsupported.append((statement, why))
        return True
    g.inputs.append(InputPipeline(names=list(names), single=isinstance(target, cst.Name), dataset=dataset,
                                  statement=statement, iterator=iterator,
                                  helper=call.func.value if from_helper else None))
    return True


def extend(g: Graph, statement, qualname) -> None:
    """Add a statement built after the device block (``with tf.device("/job:ps")``
    queues, config protos): its body joins the graph."""
    if isinstance(statement, cst.With) and all(
        isinstance(i.item, cst.Call) and qualname(i.item.func) == "device" for i in statement.items
    ):
        for inner in C.body_of(statement.body):
            _classify(g, inner, qualname)
        return
    _classify(g, statement, qualname)


def _classify(g: Graph, statement, qualname) -> None:
    if g.follow_barriers:
        guarded = _update_barriers.classify(g, statement, qualname)
        if guarded is not None:  # part of an update barrier: what it guards is analysed as unwrapped
            for inner in guarded:
                _classify(g, inner, qualname)
            return
        found = _update_barriers.train_tensor(statement, g.train_op)
        if found is not None:
            g.train_op, g.train_value = found
            return
    names, value, _ = C.assignment(statement)
    lone = C.single_expr(statement)

    if value is None and lone is None:
        # compound statement (with name_scope, loops...) or multiple targets
        if isinstance(statement, cst.With) and all(
            _is_scope_item(i, qualname) or is_device_item(i, qualname) for i in statement.items
        ):
            if any(is_device_item(i, qualname) for i in statement.items):
                why = _pinned_variables(g, statement, qualname)
                if why:
                    g.unsupported.append((statement, why))
                    return
                g.unwrapped_devices.append(statement)
            for inner in C.body_of(statement.body):
                _classify(g, inner, qualname)
            return
        chosen = plumbing_choice(statement, g.dropped, qualname)
        if chosen:
            # `if is_chief: init = opt.chief_init_op` / `else: init = opt.local_step_init_op`:
            # sync plumbing for the TF1 session, gone with it
            g.dropped.update(chosen)
            return
        if isinstance(statement, cst.If) and _builds_training(statement, qualname):
            # `if FLAGS.sync_replicas: opt = tf.train.SyncReplicasOptimizer(opt, ...)`: the
            # strategy was chosen from what the branch builds, so take the branch
            if statement.orelse is not None and _builds_training(statement.orelse, qualname):
                taken = g.choose_branch(statement) if g.choose_branch is not None else None
                if taken is None or isinstance(taken, cst.If):
                    g.unsupported.append((statement, "both branches of this `if` build training ops"))
                    return
                # a sync and an async mode chosen on the command line: the default run's
                g.notes.append((statement, "chosen-branch"))
                other = statement.body if isinstance(taken, cst.Else) else statement.orelse
                # what only the other mode binds (its sync token ops...) is TF1 plumbing the
                # default run never had: its uses go with the session code
                g.dropped |= _bound_in(other) - _bound_in(taken)
                for inner in C.body_of(taken.body if isinstance(taken, cst.Else) else taken):
                    _classify(g, inner, qualname)
                return
            g.notes.append((statement, "flattened-if"))
            for inner in C.body_of(statement.body):
                _classify(g, inner, qualname)
            return
        if not _mentions_graph(statement, qualname, g) and not any(
            isinstance(n, cst.Call) and qualname(n.func) is not None for n in C.walk(statement)
        ):
            g.state.append(statement)  # plain Python
            return
        if any(
            isinstance(n, cst.Call) and (qualname(n.func) in VARIABLE_CREATORS | PLACEHOLDERS)
            for n in C.walk(statement)
        ):
            g.unsupported.append((statement, "variables or placeholders created inside a compound statement"))
        g.compute.append(([], statement))
        return

    if _split_nested_gradients(g, statement, qualname):
        return
    call = value if value is not None else lone
    q = qualname(call.func) if isinstance(call, cst.Call) else None
    method = call.func.attr.value if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) else None

    if g.follow_inputs and value is not None and isinstance(call, cst.Call) and _input(
            g, statement, names, C.assignment(statement)[2], call, qualname):
        return

    if value is not None and len(names) == 1 and isinstance(call, cst.Call):
        name = names[0]
        if q in PLACEHOLDERS:
            g.placeholders.append((name, statement, call))
            return
        if q in GLOBAL_STEP_CREATORS:
            g.global_step = name
            g.state.append(global_step_statement(name, statement))
            return
        if q in VARIABLE_CREATORS:
            regularizer = C.arg(call, 4, "regularizer") if q == "get_variable" else None
            if regularizer is not None and not (isinstance(regularizer, cst.Name) and regularizer.value == "None"):
                g.regularized.append((name, regularizer))
            g.state.append(_variable_statement(statement, name, call, qualname))
            trainable = C.arg(call, None, "trainable")
            is_false = isinstance(trainable, cst.Name) and trainable.value == "False"
            if not is_false:
                g.variables.append(name)
            return
        if q == "train.SyncReplicasOptimizer":
            g.sync = call
            inner = C.arg(call, 0, "opt")
            if isinstance(inner, cst.Call) and _is_optimizer(qualname(inner.func)):
                g.optimizer, g.optimizer_call = name, inner
            elif isinstance(inner, cst.Name) and inner.value != name:
                g.dropped.add(name)
                g.notes.append((statement, f"alias:{name}:{inner.value}"))
            return
        if _is_optimizer(q) or (g.keep_schedules and (q or "").startswith(("keras.optimizers.", "optimizers."))
                                and not (q or "").startswith("keras.optimizers.schedules.")):
            g.optimizer, g.optimizer_call = name, call
            return
        if g.keep_schedules and is_schedule(q):
            # built once, with the optimizer (a Keras schedule driven by its iterations)
            g.schedules[name] = call
            g.state.append(statement)
            return
        if q in QUEUE_CLASSES:
            g.dropped.add(name)
            g.notes.append((statement, f"queue:{name}"))
            return
        owner = call.func.value if isinstance(call.func, cst.Attribute) else None
        if isinstance(owner, cst.Name) and owner.value in g.dropped:
            if method == "enqueue_many":
                n = _range_count(C.arg(call, 0, "vals"), qualname)
                if n is not None:
                    g.queue_ranges[owner.value] = n
            elif method == "dequeue":
                g.dequeues[name] = owner.value
        if q in DROPPED_CALLS or method in SYNC_METHODS or C.code_of(call.func).endswith(_WRITER_CACHE_GETS):
            g.dropped.add(name)
            return
        if method == "minimize":
            _train_op(g, name, call, qualname)
            return
        if method == "compute_gradients":
            g.grads_name = name
            g.loss = C.arg(call, 0, "loss")
            g.var_list = _trained_list(g, C.arg(call, 1, "var_list"), qualname) or g.var_list
            return
        if q == "gradients" and _gradients_of_loss(call):
            # tf.gradients(loss, params): the tape's gradients of the same variables
            g.grads_name, g.grads_form = name, "list"
            g.loss = C.arg(call, 0, "ys")
            g.var_list = _trained_list(g, C.arg(call, 1, "xs"), qualname)
            return
        if q == "trainable_variables" and not call.args:
            g.trainable_aliases.add(name)
            return
        if method == "apply_gradients":
            g.train_op = name
            g.apply_arg = C.arg(call, 0, "grads_and_vars")
            gs = C.arg(call, 1, "global_step")
            if isinstance(gs, cst.Name):
                g.global_step = g.global_step or gs.value
                g.advanced_step = gs.value
            if isinstance(call.func.value, cst.Call):  # `tf.train.AdamOptimizer(lr).apply_gradients(...)`
                _optimizer_owner(g, call, qualname)
            return
    if len(names) == 2 and isinstance(call, cst.Call) and _unzipped_gradients(call) is not None:
        inner = _unzipped_gradients(call)
        g.grads_name, g.grads_vars_name, g.grads_form = names[0], names[1], "unzipped"
        g.loss = C.arg(inner, 0, "loss")
        g.var_list = _trained_list(g, C.arg(inner, 1, "var_list"), qualname) or g.var_list
        return
    if value is not None and any(
        isinstance(n, cst.Attribute) and n.attr.value in SYNC_ATTRS for n in C.walk(value)
    ):
        g.dropped.update(names)
        return
    if lone is not None and isinstance(call, cst.Call) and (q in DROPPED_CALLS or method in SYNC_METHODS):
        return  # e.g. tf.summary.scalar("loss", loss)
    if lone is not None and not _mentions_graph(statement, qualname, g):
        g.state.append(statement)  # print(...) and other plain Python
        return
    used = C.names_used(statement)
    if value is not None and used & g.dropped:
        # ops derived from coordination queues and other dropped plumbing
        g.dropped.update(names)
        return
    if value is not None and not _mentions_graph(statement, qualname, g):
        g.state.append(statement)  # plain Python: constants, sizes
        return
    g.compute.append((names, statement))


# tf.gradients arguments that do not change the gradients' values
_GRADIENTS_NEUTRAL = {"name", "colocate_gradients_with_ops", "gate_gradients"}


def _gradients_of_loss(call: cst.Call) -> bool:
    """`tf.gradients(loss, params)`: no grad_ys, stop_gradients or other
    argument that changes what the tape's gradient would be."""
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args) or len(positional) > 2:
        return False
    return len(positional) + len(keywords & {"ys", "xs"}) == 2 and keywords <= {"ys", "xs"} | _GRADIENTS_NEUTRAL


def _unzipped_gradients(call: cst.Call) -> cst.Call | None:
    """The compute_gradients call of `zip(*opt.compute_gradients(loss))`."""
    if not (isinstance(call.func, cst.Name) and call.func.value == "zip" and len(call.args) == 1
            and call.args[0].star == "*"):
        return None
    inner = call.args[0].value
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and (
            inner.func.attr.value == "compute_gradients"):
        return inner
    return None


def _trained_list(g: Graph, var_list, qualname):
    """The variables a gradient is taken of, as the step can name them:
    None for all trainable ones (`tf.trainable_variables()` or a name bound
    to it: TF2 keeps no collection of them), else the expression."""
    if var_list is None:
        return None
    if isinstance(var_list, cst.Name) and var_list.value in g.trainable_aliases:
        return None
    if isinstance(var_list, cst.Call) and qualname(var_list.func) == "trainable_variables" and not var_list.args:
        return None
    if isinstance(var_list, cst.Name):
        # `params = [kernel, bias]` in the block: the list itself, which needs no step to build
        for names, statement in reversed(g.compute):
            if names == [var_list.value]:
                value = C.assignment(statement)[1]
                if isinstance(value, (cst.List, cst.Tuple)) and value.elements and all(
                        isinstance(el, cst.Element) and isinstance(el.value, cst.Name)
                        and el.value.value in g.variables for el in value.elements):
                    return value
                break
    return var_list


def _split_nested_gradients(g: Graph, statement, qualname) -> bool:
    """`grads, _ = tf.clip_by_global_norm(tf.gradients(loss, params), 5.0)`:
    classified as `grads = tf.gradients(loss, params)` then the statement
    reading `grads` (its first target, bound again right after)."""
    names, value, assign = C.assignment(statement)
    if g.grads_name is not None or value is None or assign is None or not names:
        return False
    first = assign.targets[0].target
    if isinstance(first, (cst.Tuple, cst.List)):
        first = first.elements[0].value if first.elements else None
    if not isinstance(first, cst.Name) or first.value != names[0]:
        return False
    inner = [n for n in C.walk(value) if isinstance(n, cst.Call) and qualname(n.func) == "gradients"]
    if len(inner) != 1 or inner[0] is value or not _gradients_of_loss(inner[0]):
        return False
    taken = C.stmt(f"{names[0]} = {C.code_of(inner[0])}\n").with_changes(leading_lines=statement.leading_lines)
    rest = statement.deep_replace(inner[0], cst.Name(names[0])).with_changes(leading_lines=[])
    _classify(g, taken, qualname)
    _classify(g, rest, qualname)
    return True


def _range_count(vals, qualname) -> cst.BaseExpression | None:
    """`[tf.range(n)]` / `tf.range(n, dtype=...)` -> n (a range from 0)."""
    if isinstance(vals, (cst.List, cst.Tuple)) and len(vals.elements) == 1:
        vals = vals.elements[0].value
    if isinstance(vals, cst.Call) and qualname(vals.func) == "range":
        positional = [a for a in vals.args if a.keyword is None]
        if len(positional) == 1:
            return positional[0].value
    return None


def _bound_in(node) -> set[str]:
    return {n for st in C.walk(node) if isinstance(st, (cst.SimpleStatementLine,))
            for n in C.assignment(st)[0]}


def plumbing_choice(statement, dropped: set[str], qualname=None) -> list[str] | None:
    """The names an `if` binds when each of its branches only picks TF1
    plumbing (`if is_chief: local_init_op = opt.chief_init_op` / `else:
    local_init_op = opt.local_step_init_op`; `summary_op = tf.summary.merge_all()`
    / `summary_op = None`), which the dropped session used and TF2 has no
    counterpart for; None when the statement is anything else."""
    if not isinstance(statement, cst.If):
        return None
    bound: list[str] = []
    plumbing = False
    branch: cst.If | cst.Else | None = statement
    while branch is not None:
        if isinstance(branch, cst.If) and any(True for _ in C.calls_in(branch.test)):
            return None  # a test that calls something: dropping it could drop work
        for inner in C.body_of(branch.body):
            names, value, _ = C.assignment(inner)
            if not names or value is None:
                return None
            if isinstance(value, cst.Name) and value.value == "None":
                pass  # this task has none of it
            elif (C.names_used(value) & dropped or any(
                    isinstance(n, cst.Attribute) and n.attr.value in SYNC_ATTRS for n in C.walk(value))) or (
                    qualname is not None and isinstance(value, cst.Call) and qualname(value.func) in DROPPED_CALLS
                    and not value.args):
                plumbing = True
            else:
                return None
            bound += [n for n in names if n not in bound]
        branch = branch.orelse if isinstance(branch, cst.If) else None
    return bound if plumbing else None


def _builds_training(node, qualname) -> bool:
    for n in C.walk(node):
        if isinstance(n, cst.Call):
            q = qualname(n.func)
            method = n.func.attr.value if isinstance(n.func, cst.Attribute) else None
            if q == "train.SyncReplicasOptimizer" or _is_optimizer(q) or method in SYNC_METHODS | {"minimize", "apply_gradients"}:
                return True
            if q in DROPPED_CALLS:
                return True
        if isinstance(n, cst.Attribute) and n.attr.value in SYNC_ATTRS:
            return True
    return False


def is_device_item(item: cst.WithItem, qualname) -> bool:
    """`tf.device("/cpu:0")`, `tf.device("/job:worker/task:%d" % i)`: a device
    string (not a device function) inside the device-setter block."""
    call = item.item
    if not isinstance(call, cst.Call) or qualname(call.func) != "device" or item.asname is not None:
        return False
    target = C.arg(call, 0, "device_name")
    return not (isinstance(target, cst.Call) and qualname(target.func) == "train.replica_device_setter")


def _device_literal(call: cst.Call) -> str | None:
    """The literal text of a device string: `"/cpu:0"`, the format of
    `"/job:worker/task:%d" % i` or `"/job:worker/task:{}".format(i)`, the
    constant parts of an f-string; None when it is not written out."""
    target = C.arg(call, 0, "device_name")
    if isinstance(target, cst.BinaryOperation) and isinstance(target.operator, cst.Modulo):
        target = target.left
    if isinstance(target, cst.Call) and isinstance(target.func, cst.Attribute) and target.func.attr.value == "format":
        target = target.func.value
    if isinstance(target, cst.SimpleString):
        return target.evaluated_value if isinstance(target.evaluated_value, str) else None
    if isinstance(target, cst.FormattedString):
        return "".join(p.value for p in target.parts if isinstance(p, cst.FormattedStringText))
    return None


def _pinned_variables(g: Graph, statement: cst.With, qualname) -> str | None:
    return pinned_variables(statement, qualname, g.variable_helpers)


def pinned_variables(statement: cst.With, qualname, variable_helpers=frozenset()) -> str | None:
    """Why a nested `with tf.device(...)` block cannot be unwrapped, or None.

    The device setter sent every variable without a job to the ps, so variables
    under `/cpu:0` or `/job:ps/...` were shared like the others: unwrapping the
    block keeps that (a strategy places them). Variables pinned to another job
    (`/job:worker/task:%d`) were local to each worker, which no strategy
    reproduces; so are those under a device the code does not write out."""
    creates = any(
        isinstance(n, cst.Call) and (qualname(n.func) in VARIABLE_CREATORS
                                     or (isinstance(n.func, cst.Name) and n.func.value in variable_helpers))
        for n in C.walk(statement.body)
    )
    if not creates:
        return None
    for item in statement.items:
        if not is_device_item(item, qualname):
            continue
        device = _device_literal(item.item)
        device_code = C.code_of(item.item)
        if device is None:
            return (f"variables created under `with {device_code}:`, a device this rule cannot read: the device"
                    " setter shared them only if it names no job but ps")
        job = next((part.split(":", 1)[1] for part in device.split("/") if part.startswith("job:")), None)
        if job not in (None, "ps"):
            return (f"variables created under `with {device_code}:` were local to each {job} task (a variable"
                    " pinned to a job other than ps is not shared through the ps); no strategy keeps per-task"
                    " variables")
    return None


def _is_scope_item(item: cst.WithItem, qualname) -> bool:
    """A name scope, or `tf.control_dependencies([])`: no dependency at all,
    the block runs as if unwrapped (a leftover of removed summaries' ops)."""
    call = item.item
    if not isinstance(call, cst.Call):
        return False
    q = qualname(call.func)
    if q == "control_dependencies" and item.asname is None:
        listed = C.arg(call, 0, "control_inputs")
        return isinstance(listed, (cst.List, cst.Tuple)) and not listed.elements
    return q in ("name_scope", "variable_scope")


def _mentions_graph(statement, qualname, g: Graph) -> bool:
    used = C.names_used(statement)
    graph_names = set(g.placeholder_names) | g.compute_names | set(g.variables) | g.input_names
    if g.global_step:
        graph_names.add(g.global_step)
    if used & graph_names:
        return True
    return any(qualname(c.func) is not None
               or (g.follow_inputs and isinstance(c.func, cst.Name) and c.func.value in g.variable_helpers)
               for c in C.calls_in(statement))


def _train_op(g: Graph, name: str, call: cst.Call, qualname) -> None:
    g.train_op = name
    g.loss = C.arg(call, 0, "loss")
    gs = C.arg(call, 1, "global_step")
    if isinstance(gs, cst.Name):
        g.global_step = g.global_step or gs.value
        g.advanced_step = gs.value
    g.var_list = _trained_list(g, C.arg(call, 2, "var_list"), qualname)
    _optimizer_owner(g, call, qualname)


def _optimizer_owner(g: Graph, call: cst.Call, qualname) -> None:
    """The optimizer of `<optimizer>.minimize(...)` / `.apply_gradients(...)`:
    a name, or a constructor call hoisted under a fresh name."""
    owner = call.func.value
    if isinstance(owner, cst.Call):
        inner_q = qualname(owner.func)
        if inner_q == "train.SyncReplicasOptimizer":
            g.sync = owner
            owner = C.arg(owner, 0, "opt")
        if isinstance(owner, cst.Call) and _is_optimizer(qualname(owner.func)):
            g.optimizer, g.optimizer_call = None, owner  # hoisted under a fresh name
        elif isinstance(owner, cst.Name):
            g.optimizer = g.optimizer or owner.value
    elif isinstance(owner, cst.Name):
        alias = _alias_target(g, owner.value)
        g.optimizer = g.optimizer or alias


def _alias_target(g: Graph, name: str) -> str:
    for _, note in g.notes:
        if note.startswith(f"alias:{name}:"):
            return note.split(":")[2]
    return name


def global_step_statement(name: str, statement=None, variable_name: str = '"global_step"', replicated: bool = True):
    """The global step of a migrated program: counted once per step, not once
    per replica, like get_or_create_global_step's; ``variable_name``: the code
    of the name TF1 gave it (a checkpoint of the TF1 job holds it by that name);
    ``replicated``: trained under a strategy (not on one machine alone)."""
    aggregation = ",\n    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA" if replicated else ""
    new = C.stmt(f"{name} = tf.Variable(0, dtype=tf.int64, name={variable_name}, trainable=False{aggregation})\n")
    return new if statement is None else new.with_changes(leading_lines=statement.leading_lines)


def _variable_statement(statement, name: str, call: cst.Call, qualname):
    q = qualname(call.func)
    if q == "Variable":
        # TF2's tf.Variable, whatever alias or compat.v1 spelling created it
        return statement.deep_replace(call.func, C.expr("tf.Variable"))
    var_name = C.arg(call, 0, "name")
    shape = C.arg(call, 1, "shape")
    dtype = C.arg(call, 2, "dtype")
    init = C.arg(call, 3, "initializer")
    trainable = C.arg(call, None, "trainable")
    if init is None:
        init_code = "tf.compat.v1.glorot_uniform_initializer()"  # get_variable's default
    else:
        init_code = C.code_of(init)
    args = []
    if shape is not None:
        args.append(f"shape={C.code_of(shape)}")
    args.append(f"dtype={C.code_of(dtype)}" if dtype is not None else "dtype=tf.float32")
    extra = ""
    if var_name is not None:
        extra += f", name={C.code_of(var_name)}"
    if trainable is not None:
        extra += f", trainable={C.code_of(trainable)}"
    if init is not None and shape is None:
        # no shape: TF1 took the initializer as the initial value itself (a
        # tensor, array or list), exactly what tf.Variable takes
        dtype_kw = f", dtype={C.code_of(dtype)}" if dtype is not None else ""
        code = f"{name} = tf.Variable({init_code}{dtype_kw}{extra})\n"
    else:
        # an initializer object called with the variable's shape gives the same
        # values get_variable would have drawn
        code = f"{name} = tf.Variable({init_code}({', '.join(args)}){extra})\n"
    return C.stmt(code).with_changes(leading_lines=statement.leading_lines)


def gradient_source(statements, applied, qualname) -> tuple[cst.CSTNode, str] | None:
    """Where the gradients `apply_gradients(<applied>)` applies come from,
    when the analysis could not take them for the tape's: (the statement,
    what it does), or None when no statement of the block binds them."""
    wanted = C.names_used(applied)

    def find(body, within):
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine):
                names, value, _ = C.assignment(statement)
                hit = sorted(set(names) & wanted)
                if hit and value is not None:
                    return statement, hit[0], value, within
            elif isinstance(statement, (cst.With, cst.For, cst.While, cst.If)):
                found = find(C.body_of(statement.body), within or statement)
                if found is not None:
                    return found
        return None

    found = find(statements, None)
    if found is None:
        return None
    statement, name, value, within = found
    if within is not None:
        head = C.code_of(within.with_changes(leading_lines=[])).split("\n", 1)[0].strip()
        return within, (f"the gradients `{name}` it applies are computed inside `{head}`: what that block runs"
                        " first or around them has no place in the step this rule writes (the tape's gradients"
                        " come right after the forward pass)")
    if isinstance(value, cst.Call):
        q = qualname(value.func)
        if q is not None or isinstance(value.func, (cst.Name, cst.Attribute)):
            return statement, (f"the gradients `{name}` it applies come from `{C.code_of(value.func)}(...)`, not"
                               " from `compute_gradients(loss)` or `tf.gradients(loss, variables)` of the loss")
    return statement, (f"the gradients `{name}` it applies are made by `{C.code_of(value)}`, not by"
                       " `compute_gradients(loss)` or `tf.gradients(loss, variables)`")
