"""TFM301, analysis of the session side: what a TF1 session runs (its fetches and
feeds), the loop around it, its hooks, its checkpoint cadence and how the loop
ends. The rule (tfm301_graph_to_strategy.py) plans from this; the emitted loop is
written by _tfm301_loop.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from migrate.codemod.rules import (
    _collection_reads,
    _dataflow,
    _hand_checkpoints,
    _legacy_restore,
    _moving_average,
    _serving_export,
)
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._graph import (
    DROPPED_CALLS,
    QUEUE_CLASSES,
    SYNC_METHODS,
    Graph,
)
from migrate.codemod.rules._program import (
    MWMS,
    PSS,
    REFERENCE,
)
from migrate.codemod.rules._session_loop import (
    follow_hook_list,
    followable,
    hook_arguments,
    note_supervisor_chief,
)

if TYPE_CHECKING:  # annotations only: the rule imports this module
    from migrate.codemod.rules.tfm301_graph_to_strategy import GraphToStrategy

SESSION_CLASSES = {
    "train.MonitoredTrainingSession",
    "train.MonitoredSession",
    "train.SingularMonitoredSession",
    "Session",
    "InteractiveSession",
}
SUPERVISOR_SESSION_METHODS = {"managed_session", "prepare_or_wait_for_session"}
# sessions whose `with` block ends quietly on OutOfRangeError (an input pipeline's end)
QUIET_SESSIONS = {"train.MonitoredTrainingSession", "train.MonitoredSession", "train.SingularMonitoredSession"}
REMOVED_SESSION_METHODS = {"close", "stop", "start_queue_runners", "request_stop", "wait_for_stop"}
CONFIG_CALLS = {"ConfigProto", "GPUOptions", "RunOptions"}
# TensorFlow's session hooks that never ask the session to stop
NON_STOPPING_HOOKS = {
    "train.CheckpointSaverHook", "train.SummarySaverHook", "train.LoggingTensorHook", "train.StepCounterHook",
    "train.ProfilerHook", "train.FeedFnHook",
}

class _Fetch:
    """One `sess.run(...)` call, understood against the graph."""

    def __init__(self, call: cst.Call, graph: Graph, state_names: set[str], is_dropped=lambda node: False):
        self.call = call
        fetches = C.arg(call, 0, "fetches")
        self.feed = C.arg(call, 1, "feed_dict")
        self.shape = "single"
        items: list[cst.BaseExpression] = []
        if isinstance(fetches, (cst.List, cst.Tuple)):
            self.shape = "list"
            items = [el.value for el in fetches.elements]
        elif fetches is not None:
            items = [fetches]
        self.items = items
        self.names = [
            i.value if isinstance(i, cst.Name) else ("<dropped>" if is_dropped(i) else None) for i in items
        ]
        graph.dropped.add("<dropped>")
        self.train = graph.train_op is not None and graph.train_op in self.names
        self.ok = fetches is not None and all(n is not None for n in self.names)
        self.dropped_only = self.ok and all(n in graph.dropped for n in self.names)
        self.state_only = self.ok and not self.train and all(n in state_names for n in self.names)
        self.values = [n for n in self.names if n != graph.train_op and n not in graph.dropped]
        self.token_used = False  # the train op's own value is bound to a name (SyncReplicas token)
        self.params: list[str] = []

    def key(self) -> str:
        return ",".join(str(n) for n in self.names) + ("+token" if self.token_used else "")

    def bind(self, target: cst.BaseExpression, graph: Graph) -> None:
        if self.train and graph.train_value is not None:
            # a train tensor (`with_dependencies([apply], loss)`) bound to a name gave the loss
            # the step computes: fetch that there
            if self.shape == "single":
                bound = [0] if isinstance(target, cst.Name) and target.value != "_" else []
            elif isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(self.names):
                bound = [k for k, el in enumerate(target.elements) if self.names[k] == graph.train_op
                         and not (isinstance(el.value, cst.Name) and el.value.value == "_")]
            else:
                bound = [k for k, n in enumerate(self.names) if n == graph.train_op]
            for k in bound:
                self.names[k] = graph.train_value
            self.values = [n for n in self.names if n != graph.train_op and n not in graph.dropped]
            return
        if not self.train or graph.sync is None:
            return
        if self.shape == "single":
            self.token_used = isinstance(target, cst.Name) and target.value != "_"
        elif isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(self.names):
            el = target.elements[self.names.index(graph.train_op)].value
            self.token_used = isinstance(el, cst.Name) and el.value != "_"


_TASK_INDEX = frozenset({"task_index", "task_id"})
# calls whose reading of the task index is no data share: reporting, naming,
# per-task random streams (each draws as much as another), cluster plumbing
_REPORTING_CALLS = frozenset({
    "print", "info", "warning", "warn", "debug", "error", "format", "log", "sleep",
    "RandomState", "default_rng", "seed", "Random", "set_random_seed", "set_seed",
    "Server", "SimpleClusterResolver", "TFConfigClusterResolver", "ClusterSpec", "replica_device_setter", "device",
})


def _reads_task_index(node: cst.CSTNode, tainted: set[str]) -> bool:
    """Whether ``node`` computes with the task index or a name derived from it,
    outside what only says who is chief or prints (`task_index == 0`,
    `is_chief=...`, `print("worker %d" % FLAGS.task_index)`)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.Comparison, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            continue
        if isinstance(current, cst.Arg) and current.keyword is not None and current.keyword.value == "is_chief":
            continue
        if isinstance(current, cst.Call):
            func = current.func
            name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if name in _REPORTING_CALLS:
                continue
        if isinstance(current, cst.BinaryOperation) and isinstance(current.operator, cst.Modulo) and isinstance(
                current.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            continue
        if isinstance(current, cst.Name) and (current.value in tainted or current.value in _TASK_INDEX):
            return True
        if isinstance(current, cst.Attribute) and current.attr.value in _TASK_INDEX:
            return True
        stack.extend(C.children(current))
    return False


def _catches_end_of_input(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = [el.value for el in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    return any(C.code_of(t).rsplit(".", 1)[-1] in ("OutOfRangeError", "Exception", "BaseException") for t in types)


def _calls_outside_end_handlers(node):
    """The calls of `node` outside the body of a `try` catching OutOfRangeError."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        if isinstance(current, cst.Try) and any(_catches_end_of_input(h) for h in current.handlers):
            stack.extend(current.handlers)
            stack.extend(n for n in (current.orelse, current.finalbody) if n is not None)
            continue
        stack.extend(C.children(current))


def _depends_on(pairs) -> set[str]:
    out: set[str] = set()
    for names, _ in pairs:
        out |= set(names)
    return out


class _SessionRegion:
    """The statements after the graph block: sessions, hooks, the loop."""

    def __init__(self, rule: GraphToStrategy, graph: Graph, scope=()):
        self.rule = rule
        self.graph = graph
        # the statements of the function (or module) holding the device block: where
        # a hook passed by name (`hooks=[stop_hook]`) is bound
        self.scope = list(scope)
        self.bindings: dict[str, cst.Call | None] = {}
        self.sessions: set[str] = set()
        self.supervisors: set[str] = set()
        self.hooks: dict[str, list[cst.Call]] = {}
        self.removed_names: set[str] = set()
        self.train_fetches: dict[str, _Fetch] = {}
        self.eval_fetches: dict[str, _Fetch] = {}
        self.train_names: dict[int, str] = {}
        self.eval_names: dict[int, str] = {}
        self.fetch_by_call: dict[int, _Fetch] = {}
        self.feed_dicts: dict[str, cst.Dict] = {}
        self.last_step: cst.BaseExpression | None = None
        self.num_steps: cst.BaseExpression | None = None
        # every StopAtStepHook's bound (a session given several stops at the first reached)
        self.last_steps: list[cst.BaseExpression] = []
        self.step_counts: list[cst.BaseExpression] = []
        self.count_names: list[str] = []  # `last_step = <global step> + num_steps`, one per count
        self.checkpoint_dir: cst.BaseExpression | None = None
        # TF1's save cadence: every `save_steps` global steps or `save_secs` seconds
        # (MonitoredTrainingSession and Supervisor default to 600 s); `saves` False
        # when the TF1 code turned saving off (it still restored)
        self.save_steps: str | None = None
        self.save_secs: str | None = None
        self.saves = True
        self.cadence = ""  # how TF1 chose it, for the generated comment
        self.save_due = None  # name of the next time-based save's time
        self.train_sessions: set[str] = set()  # sessions the train op runs in
        self.manager = "checkpoint_manager"
        self.ticket_iters: dict[str, str] = {}
        self.schedule_names: dict[str, str] = {}  # run wrapper -> schedule wrapper (PSS)
        self.step_info: dict[str, tuple] = {}  # schedule wrapper -> (step function, params, feed code)
        # MirroredStrategy run wrapper -> (step function, params, feed code, results from `step_results`)
        self.sync_steps: dict[str, tuple] = {}
        self.state_names = set(graph.variables) | {graph.global_step or ""} | set(getattr(rule, "schedule_reads", ()))
        # names bound to a fetched summary op's result (`_, summaries = sess.run([train_op, summary_op])`)
        self.summary_results: set[str] = set()
        self.summaries_reported = False
        self.hook_growth: set[int] = set()  # ids of `hooks.append(...)` statements, removed with the list
        self.followed_lists: set[str] = set()  # hook lists followed through several statements
        self.supervisor_chief: dict[str, str | None] = {}  # Supervisor name -> its is_chief argument's code
        self.session_objects: dict[str, cst.Call] = {}  # session bound by name before its `with`
        self.foreign_feeds: set[str] = set()  # fed keys that are no placeholder of the block
        # Savers used by hand in the session's code: name -> plan; (node, why) of one that cannot be
        self.hand_savers: dict[str, _hand_checkpoints.HandSaver] = {}
        self.monitored_sessions: set[str] = set()  # MonitoredTrainingSession & co: no tf.Session
        self.saver_declines: list[tuple[cst.CSTNode, str]] = []
        self.checkpoint_name: str | None = None
        self.save_functions: dict[str, str] = {}  # saver name -> the emitted function saving as it did
        # calls handing the session to a helper whose runs are carried (`evaluate(sess, ...)`)
        self.handed_calls: dict[int, object] = {}
        self.helper_evaluations: set[str] = set()  # evaluation functions those helpers call
        self.evaluating_helpers: set[str] = set()  # the helpers' names
        # the trained model exported for serving: the statement writing it -> its plan; the
        # ids of the other statements making it
        self.serving_exports: dict[int, _serving_export.ServingExport] = {}
        self.serving_removed: set[int] = set()
        self.serving_outputs: list[str] = []  # the graph values the exports serve
        # a session hook that may have asked the session to stop (a hook of the program's
        # own, one passed through a name this scan cannot follow, a StopAtStepHook...)
        self.hook_may_stop = False
        self.trains_forever = False  # its loop never ended in TF1 either (loops_tf1_never_ended)

    def session_call(self, item: cst.BaseExpression) -> cst.BaseExpression:
        """The session call a `with` item opens: the call itself, or the one
        bound to the name it enters (`with mts as sess:`)."""
        if isinstance(item, cst.Name) and item.value in self.session_objects:
            return self.session_objects[item.value]
        return item

    # ---------------------------------------------------------------- scan
    def scan(self, statements, graph_part=(), hand_savers: bool = False) -> None:
        """Find the sessions, hooks and fetches of ``statements`` (the code after
        the graph); a hook list the graph part builds (`hooks = [sync_hook,
        stop_hook]` before the session starts) is read from ``graph_part``;
        ``hand_savers``: plan the Savers the session's code uses by hand."""
        q = self.rule.qualname
        for statement in self.scope:
            for node in C.walk(statement):
                names, value, _ = C.assignment(node)
                if len(names) == 1 and isinstance(value, cst.Call):
                    # bound twice: which call a use means depends on the path taken
                    self.bindings[names[0]] = None if names[0] in self.bindings else value
        # lists passed as a session's hooks (`hooks = [...]`, then maybe `hooks.append(...)`)
        hook_lists = set()
        for statement in statements:
            for call in C.calls_in(statement):
                if q(call.func) in SESSION_CLASSES or _method(call) in SUPERVISOR_SESSION_METHODS:
                    hook_lists.update(h.value for h in hook_arguments(call, q) if isinstance(h, cst.Name))
        for statement in graph_part:
            for node in C.walk(statement):
                self._hook_list_growth(node, hook_lists)
                names, value, _ = C.assignment(node)
                if len(names) == 1 and names[0] in hook_lists and isinstance(value, (cst.List, cst.Tuple)):
                    self.hooks.setdefault(names[0], []).extend(el.value for el in value.elements)
                    self.removed_names.add(names[0])
        self._follow_hook_lists(hook_lists, graph_part, statements)
        for statement in statements:
            for node in C.walk(statement):
                self._hook_list_growth(node, hook_lists)
                names, value, _ = C.assignment(node)
                if len(names) == 1 and names[0] in hook_lists and isinstance(value, (cst.List, cst.Tuple)) and (
                        names[0] not in self.followed_lists):
                    self.hooks.setdefault(names[0], []).extend(el.value for el in value.elements)
                    self.removed_names.add(names[0])
                if isinstance(value, cst.Call):
                    vq = q(value.func)
                    if vq == "train.Supervisor":
                        self.supervisors.update(names)
                        note_supervisor_chief(self.supervisor_chief, names, value)
                        self._supervisor_checkpointing(value)
                        self.removed_names.update(names)
                    elif vq in SESSION_CLASSES or _method(value) in SUPERVISOR_SESSION_METHODS:
                        self.sessions.update(names)
                        if vq in QUIET_SESSIONS:
                            self.monitored_sessions.update(names)
                        self._session_call(value)
                        self.removed_names.update(names)
                        if len(names) == 1:  # `mts = tf.train.MonitoredTrainingSession(...)`, `with mts as sess:`
                            self.session_objects[names[0]] = value
                    elif vq in CONFIG_CALLS:
                        self.removed_names.update(names)
                    elif vq in DROPPED_CALLS or vq in QUEUE_CLASSES or _method(value) in SYNC_METHODS:
                        # graph plumbing built late (`uninitialized = tf.report_uninitialized_variables()`,
                        # `sync_hook = opt.make_session_run_hook(is_chief)`)
                        self.graph.dropped.update(names)
                        self.removed_names.update(names)
                if isinstance(value, (cst.List, cst.Tuple)) and names and names[0] not in hook_lists and any(
                    isinstance(el.value, cst.Call) and (q(el.value.func) or "").endswith("Hook") for el in value.elements
                ):
                    self.hooks[names[0]] = [el.value for el in value.elements]
                    self.removed_names.update(names)
                if isinstance(value, cst.Dict) and len(names) == 1 and any(
                    isinstance(el, cst.DictElement) and isinstance(el.key, cst.Name)
                    and el.key.value in self.graph.placeholder_names for el in value.elements
                ):
                    self.feed_dicts[names[0]] = value
                if isinstance(node, cst.With):
                    for item in node.items:
                        call = self.session_call(item.item)
                        if isinstance(call, cst.Call) and (q(call.func) in SESSION_CLASSES or _method(call) in SUPERVISOR_SESSION_METHODS):
                            if item.asname is not None:
                                self.sessions.update(C.target_names(item.asname.name))
                                if q(call.func) in QUIET_SESSIONS:
                                    self.monitored_sessions.update(C.target_names(item.asname.name))
                            if call is item.item:
                                self._session_call(call)
        targets = {}
        for statement in statements:
            for node in C.walk(statement):
                if isinstance(node, cst.Assign) and len(node.targets) == 1:
                    targets[id(node.value)] = node.targets[0].target
        for statement in statements:
            for node in C.walk(statement):
                if isinstance(node, cst.Call) and _method(node) == "run" and _owner(node) in self.sessions:
                    fetch = _Fetch(node, self.graph, self.state_names, self._is_dropped_expr)
                    if id(node) in targets:
                        fetch.bind(targets[id(node)], self.graph)
                        target = targets[id(node)]
                        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(fetch.names):
                            self.summary_results.update(
                                el.value.value for el, name in zip(target.elements, fetch.names)
                                if name in self.graph.dropped and isinstance(el.value, cst.Name))
                        elif fetch.dropped_only and _dataflow.only_written_as_summary(target, statements, SUMMARY_WRITES):
                            # `summary = sess.run(summary_op)` for `writer.add_summary(summary)`: gone with them
                            self.summary_results.add(target.value)
                    self.fetch_by_call[id(node)] = fetch
                    key = fetch.key()
                    if fetch.ok and fetch.train:
                        self.train_fetches.setdefault(key, fetch)
                        self.train_sessions.add(_owner(node))
                    elif fetch.ok and not fetch.dropped_only and not fetch.state_only and fetch.values:
                        self.eval_fetches.setdefault(key, fetch)
        if hand_savers:  # (TFM303 carries a tower program's Saver itself)
            self._plan_hand_savers(statements, graph_part)
        if self.checkpoint_dir is not None or self.hand_savers:
            # named now: the session's code (hand-made saves, restores) refers to it before it is emitted
            self.checkpoint_name = self.rule._fresh("checkpoint")
        for saver in self.hand_savers.values():
            if saver.saves:
                self.save_functions[saver.name] = self.rule._fresh(
                    "save_checkpoint" if len(self.hand_savers) == 1 else f"save_{saver.name}")
        if self.checkpoint_dir is not None:
            self.manager = self.rule._fresh("checkpoint_manager")
            if self.saves and self.save_secs is not None:
                self.save_due = self.rule._fresh("next_checkpoint_time")
                self.rule.ctx.require_import("time")

    def _follow_hook_lists(self, hook_lists: set[str], graph_part, statements) -> None:
        """Hook lists built otherwise than by one literal (`hooks = sync_hooks +
        [stop_hook]`, rebound `hooks = hooks + [more]`, bound in both branches
        of an `if`): their hooks, followed through the function's statements;
        the names bound on the way go with the session where only that building
        reads them. A hook only one branch adds must be SyncReplicas' own (gone
        with the optimizer) for the list to be followed."""
        q = self.rule.qualname
        for name in sorted(hook_lists):
            bindings = sum(1 for st in self.scope for node in C.walk(st) if C.assignment(node)[0] == [name])
            if name in self.hooks and bindings == 1:
                continue  # one literal, maybe grown by append/extend: read already
            followed = follow_hook_list(name, self.scope)
            if not followable(followed, self.bindings):
                continue
            self.hooks[name] = list(followed.hooks)
            self.followed_lists.add(name)
            self.removed_names.add(name)
            for other in followed.names - {name}:
                readers = [node for st in self.scope for node in C.walk(st)
                           if isinstance(node, cst.SimpleStatementLine) and other in C.names_used(node)]
                if all(id(r) in followed.statements for r in readers) and not any(
                        other in C.names_used(h) for st in self.scope for node in C.walk(st)
                        if isinstance(node, cst.Call) and (q(node.func) in SESSION_CLASSES)
                        for h in hook_arguments(node, q) if not isinstance(h, cst.Name) or h.value != name):
                    self.removed_names.add(other)

    def _plan_hand_savers(self, statements, graph_part) -> None:
        """`saver = tf.train.Saver()` whose `saver.save(sess, path, global_step=n)`
        and `saver.restore(sess, path)` the session's code calls: planned onto
        the migration's checkpoint, or declined with the statement and why."""
        q = self.rule.qualname
        made: dict[str, list] = {}
        for source in (self.scope, graph_part, statements):
            for name, statement in _hand_checkpoints.savers_made(source, q).items():
                if all(statement is not m for m in made.get(name, [])):
                    made.setdefault(name, []).append(statement)
        after = {id(n) for st in statements for n in C.walk(st)}
        for name, found in made.items():
            if not any(_hand_checkpoints.read_by_hand(name, st) for st in statements):
                continue  # made and never used by hand (or only as a Supervisor's): dropped with the graph
            if any(_dataflow.graph_export(node, q) is not None for st in statements for node in C.walk(st)
                   if isinstance(node, cst.SimpleStatementLine) and _hand_checkpoints.read_by_hand(name, node)):
                continue  # a serving export of the TF1 graph: said to be one where the rewrite is checked
            if len({C.code_of(st) for st in found}) != 1:
                self.saver_declines.append((found[-1], f"the Saver `{name}` is bound more than once"))
                continue
            saver = _hand_checkpoints.plan(name, found[-1], statements, self.sessions | self.supervisors, q,
                                           self.monitored_sessions)
            if not isinstance(saver, _hand_checkpoints.HandSaver):
                self.saver_declines.append(saver)
                continue
            self.hand_savers[name] = saver
            if any(id(st) in after for st in found):
                self.removed_names.add(name)  # made after the graph block: it goes with the session

    def hand_saver_statement(self, original, updated):
        """The rewrite of `original` if it is a hand-made save or restore, else None."""
        for saver in self.hand_savers.values():
            if id(original) in saver.saves or id(original) in saver.restores:
                return _hand_checkpoints.rewritten(original, updated, saver, self.checkpoint_name,
                                                   self.save_functions.get(saver.name, ""), self._restore_code)
        return None

    def _restore_code(self, path: str) -> str:
        """A restore of `path` (a TF2 checkpoint, or the TF1 job's by name)."""
        helper, variables, optimizer = self._restore_parts()
        return _legacy_restore.restore_call(helper, self.checkpoint_name, path, variables, optimizer)

    def _tracked(self) -> str:
        """`name=name, ...`: what the migration's checkpoint holds (what TF1's Saver saved)."""
        gs = self.graph.global_step
        tracked_names = [gs, self.graph.optimizer, *self.graph.variables]
        if self.rule.template is not None:
            tracked_names.append(self.rule.template)
        # once each: a step counter the program made with tf.Variable is one of its variables too
        tracked = ", ".join(f"{v}={v}" for v in dict.fromkeys(tracked_names))
        averages = getattr(self.rule, "moving_average", None)
        if averages is not None:  # TF1's Saver saved the shadow variables with the others
            tracked += ", {}={}".format(*_moving_average.tracked(averages, self.rule.trainable_name))
        return tracked

    def _hand_saver_prelude(self) -> list[cst.BaseStatement]:
        """The checkpoint the hand-made saves and restores use (the session's own
        when it has one), and a function per Saver saving as it did."""
        if not self.hand_savers:
            return []
        out: list[cst.BaseStatement] = []
        if self.checkpoint_dir is None:
            out += C.stmts(
                "# The training state, saved and restored by hand below.\n"
                f"{self.checkpoint_name} = tf.train.Checkpoint({self._tracked()})\n")
        for saver in self.hand_savers.values():
            if saver.saves:
                self.rule.ctx.require_import("os")
                out += C.stmts(_hand_checkpoints.function_code(saver, self.checkpoint_name,
                                                               self.save_functions[saver.name]))
        return out

    def _hook_list_growth(self, node, hook_lists) -> None:
        """`hooks.append(sync_hook)`, `hooks.extend([...])`, `hooks += [...]` on
        a session's hook list: their hooks join the list's, and the statement
        goes with it (`self.hook_growth`)."""
        added = None
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
            small = node.body[0]
            lone = small.value if isinstance(small, cst.Expr) else None
            if isinstance(lone, cst.Call) and _owner(lone) in hook_lists and _method(lone) in ("append", "extend"):
                value = C.arg(lone, 0, None)
                if _method(lone) == "append":
                    added = [value]
                elif isinstance(value, (cst.List, cst.Tuple)):
                    added = [el.value for el in value.elements]
            elif (isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign)
                  and isinstance(small.target, cst.Name) and small.target.value in hook_lists
                  and isinstance(small.value, (cst.List, cst.Tuple))):
                added = [el.value for el in small.value.elements]
        if added is not None:
            owner = _owner(node.body[0].value) if isinstance(node.body[0], cst.Expr) else node.body[0].target.value
            if owner not in self.followed_lists:  # (a followed list holds its growth already)
                self.hooks.setdefault(owner, []).extend(added)
            self.hook_growth.add(id(node))

    def _is_dropped_expr(self, node) -> bool:
        """`tf.global_variables_initializer()` and the like, fetched inline."""
        return isinstance(node, cst.Call) and self.rule.qualname(node.func) in DROPPED_CALLS

    def _session_call(self, call: cst.Call) -> None:
        if self.rule.qualname(call.func) == "train.MonitoredTrainingSession":
            self._session_checkpointing(call)
        calls = []
        for hooks in hook_arguments(call, self.rule.qualname):
            if isinstance(hooks, cst.Name):
                self.removed_names.add(hooks.value)
                calls += self.hooks.get(hooks.value, [])
                self.hook_may_stop |= hooks.value not in self.hooks
            elif isinstance(hooks, (cst.List, cst.Tuple)):
                calls += [el.value for el in hooks.elements]
            else:
                calls.append(hooks)
        self.hook_may_stop |= any(not self._never_stops(hook) for hook in calls)
        self._hook_calls(calls)

    def _never_stops(self, hook: cst.BaseExpression) -> bool:
        """A hook of TensorFlow's that never asks the session to stop
        (SyncReplicasOptimizer's, checkpoint, summary, logging, step counting)."""
        if isinstance(hook, cst.Name):
            hook = self.bindings.get(hook.value)
        if not isinstance(hook, cst.Call):
            return False
        return _method(hook) == "make_session_run_hook" or self.rule.qualname(hook.func) in NON_STOPPING_HOOKS

    def _hook_calls(self, calls) -> None:
        q = self.rule.qualname
        for hook in calls:
            if isinstance(hook, cst.Name) and hook.value not in self.graph.dropped:
                bound = self.bindings.get(hook.value)
                if bound is not None and isinstance(bound.func, cst.Name) and (
                        bound.func.value in getattr(self.rule, "declined_hooks", {})):
                    continue  # reported where its class does what a TF2 loop cannot
                if bound is None or q(bound.func) is None:
                    made = f" (a `{C.code_of(bound.func)}`)" if bound is not None else ""
                    self.rule.report(hook, f"the session hook `{hook.value}` is dropped with the session: it has"
                                     f" no automatic TF2 mapping here{made}", hint="do what it did inside the training loop by hand",
                                     reference=REFERENCE[self.rule.strategy], fixed=False)
                    continue
                # `stop_hook = tf.train.StopAtStepHook(...)` ... `hooks=[stop_hook]`: the call it names;
                # its binding goes with the session where nothing else reads the hook
                if sum(_name_count(st, hook.value) for st in self.scope) == 2:
                    self.removed_names.add(hook.value)
                hook = bound
            if not isinstance(hook, cst.Call):
                continue
            if C.code_of(hook) in getattr(self.rule, "handled_builtin_hooks", ()):
                continue  # code of the loop now, or reported where it does what the loop cannot
            hq = q(hook.func)
            if isinstance(hook.func, cst.Name) and hook.func.value in getattr(self.rule, "declined_hooks", {}):
                continue  # reported where its class does what a TF2 loop cannot
            if isinstance(hook.func, cst.Name) and hook.func.value in getattr(self.rule, "carried_hook_classes", ()):
                continue  # the loop calls its methods now (_session_loop.carry_program_hooks)
            if hq is None and _method(hook) != "make_session_run_hook":
                # SyncReplicasOptimizer's own hook goes with it; any other hook was the program's own
                self.rule.report(hook, f"the session hook `{C.code_of(hook.func)}(...)` is dropped with the session:"
                                 " it has no automatic TF2 mapping here",
                                 hint="do what it did inside the training loop by hand",
                                 reference=REFERENCE[self.rule.strategy], fixed=False)
            if hq == "train.StopAtStepHook":
                # each hook asked to stop at its own bound: the loop ends at the first one reached
                last, count = C.arg(hook, 1, "last_step"), C.arg(hook, 0, "num_steps")
                if last is not None and all(last is not b for b in self.last_steps):
                    self.last_steps.append(last)
                elif last is None and count is not None and all(count is not b for b in self.step_counts):
                    self.step_counts.append(count)
                self.last_step = self.last_steps[0] if self.last_steps else None
                self.num_steps = self.step_counts[0] if self.step_counts else None
            elif hq == "train.CheckpointSaverHook":
                self._hook_checkpointing(hook)
            elif hq is not None and hq != "train.StopAtStepHook":
                self.rule.report(hook, f"{hq} has no automatic TF2 mapping here",
                                 hint="log, summarize or stop inside the training loop by hand",
                                 reference=REFERENCE[self.rule.strategy], fixed=False)

    def _directory(self, directory) -> bool:
        if directory is None or _is_none(directory):
            return False
        self.checkpoint_dir = directory
        return True

    def _cadence(self, steps, secs, default_secs: str | None, names: tuple[str, str, str]) -> None:
        """`steps`/`secs`: the TF1 arguments (None when not given; a literal None
        turns that kind off); seconds win when both are given, as TF1 documents.
        `names`: the TF1 construct and its steps and seconds arguments."""
        owner, steps_name, secs_name = names
        self.saves = True
        if secs is not None and not _is_none(secs):
            self.save_steps, self.save_secs = None, C.code_of(secs)
            self.cadence = f"every {self.save_secs} s ({secs_name})"
        elif steps is not None and not _is_none(steps):
            self.save_steps, self.save_secs = C.code_of(steps), None
            self.cadence = f"every {self.save_steps} global steps ({steps_name})"
        elif steps is None and secs is None and default_secs is not None:
            self.save_steps, self.save_secs = None, default_secs
            self.cadence = f"every {default_secs} s ({owner}'s default {secs_name})"
        else:
            self.saves = False

    def _session_checkpointing(self, call: cst.Call) -> None:
        """MonitoredTrainingSession(checkpoint_dir=...): restored on start, saved
        every save_checkpoint_secs (600 when neither it nor save_checkpoint_steps
        is given) or save_checkpoint_steps, and at the end; both None: never saved."""
        if self._directory(C.arg(call, None, "checkpoint_dir")):
            self._cadence(C.arg(call, None, "save_checkpoint_steps"), C.arg(call, None, "save_checkpoint_secs"),
                          "600", ("MonitoredTrainingSession", "save_checkpoint_steps", "save_checkpoint_secs"))

    def _hook_checkpointing(self, hook: cst.Call) -> None:
        if self._directory(C.arg(hook, 0, "checkpoint_dir")):
            self._cadence(C.arg(hook, 2, "save_steps"), C.arg(hook, 1, "save_secs"), None,
                          ("CheckpointSaverHook", "save_steps", "save_secs"))

    def _supervisor_checkpointing(self, call: cst.Call) -> None:
        """Supervisor(logdir=...): restored on start, saved every save_model_secs
        (600 by default) by the chief; `saver=None` or no save_model_secs: never."""
        if not self._directory(C.arg(call, None, "logdir")):
            return
        saver = C.arg(call, None, "saver")
        secs = C.arg(call, None, "save_model_secs")
        if (saver is not None and _is_none(saver)) or (secs is not None and _is_none(secs)) or (
                isinstance(secs, cst.Integer) and secs.evaluated_value == 0):
            self.saves = False
            return
        self._cadence(None, secs, "600", ("Supervisor", "", "save_model_secs"))

    def _trains(self, statement) -> bool:
        return any(self.fetch_by_call.get(id(c)) is not None and self.fetch_by_call[id(c)].train
                   for c in C.calls_in(statement))

    def opens_training_session(self, statement) -> bool:
        """`sess = <session>` for the session the train op runs in (or a Supervisor's)."""
        names, value, _ = C.assignment(statement)
        if not isinstance(value, cst.Call):
            return False
        q = self.rule.qualname(value.func)
        if _method(value) == "prepare_or_wait_for_session":
            return True
        return (q in SESSION_CLASSES or _method(value) in SUPERVISOR_SESSION_METHODS) and bool(
            set(names) & self.train_sessions)

    def _opens_training_session_inside(self, statement) -> bool:
        if isinstance(statement, cst.SimpleStatementLine) or not isinstance(statement, (cst.If, cst.Try)):
            return False
        return any(isinstance(n, cst.SimpleStatementLine) and self.opens_training_session(n) for n in C.walk(statement))

    def work_queue_take(self, fetch) -> str | None:
        """Name of the Python iterator replacing a ticket queue's dequeue, if
        `fetch` dequeues from a queue filled with tf.range(n) (PSS only: one
        coordinator loop, so one iterator hands out every ticket once)."""
        g = self.graph
        if fetch is None or self.rule.strategy != PSS or len(fetch.names) != 1:
            return None
        queue = g.dequeues.get(fetch.names[0] or "")
        if queue is None or queue not in g.queue_ranges:
            return None
        if queue not in self.ticket_iters:
            self.ticket_iters[queue] = self.rule._fresh(f"{queue}_iterator")
        return self.ticket_iters[queue]

    def endless_loops(self, statements) -> list[cst.While]:
        """`while not sess.should_stop():` loops that nothing would end once
        the session is gone: no StopAtStepHook to count to, no break, return,
        raise or exit in the body (one under `if sess.should_stop():` dies
        with the session), no other bound in the test, no input pipeline
        whose end raises OutOfRangeError."""
        if self.last_step is not None or self.num_steps is not None or getattr(self.rule, "hook_stops", ()):
            return []
        never_ended = {id(loop) for loop in self.loops_tf1_never_ended(statements)}
        return [node for statement in statements for node in C.walk(statement) if id(node) not in never_ended
                and isinstance(node, cst.While) and self._waits_for_stop(node.test)
                and any(self._asks_to_stop(n) for n in C.walk(node))
                and not _has_exit(node.body, self._asks_to_stop) and not self._reads_input(node)]

    def loops_tf1_never_ended(self, statements) -> list[cst.While]:
        """`while not sess.should_stop():` loops that ran until the TF1 program
        was killed: nothing could ask the session to stop (no hook that may,
        no request_stop() anywhere in the program, no input pipeline that runs
        out, no exit in the body). The migration keeps them running (`while
        True:`), as the TF1 job did."""
        if self.hook_may_stop or getattr(self.rule, "declined_hooks", None) or any(
                isinstance(node, cst.Attribute) and node.attr.value == "request_stop"
                for node in C.walk(self.rule.ctx.module)):  # called, or handed to what may call it
            return []
        return [node for statement in statements for node in C.walk(statement)
                if isinstance(node, cst.While) and isinstance(node.test, cst.UnaryOperation)
                and isinstance(node.test.operator, cst.Not) and self._asks_to_stop(node.test.expression)
                and not _has_exit(node.body, self._asks_to_stop) and not self._reads_input(node)]

    def _asks_to_stop(self, node) -> bool:
        return (isinstance(node, cst.Call) and _method(node) == "should_stop"
                and _owner(node) in self.sessions | self.supervisors)

    def _waits_for_stop(self, test) -> bool:
        """Is the loop test true until the session is asked to stop (`not
        sess.should_stop()`, `True`, `and` of those, `or` with one)?"""
        if isinstance(test, cst.Name):
            return test.value == "True"
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._asks_to_stop(test.expression)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self._waits_for_stop(test.left) and self._waits_for_stop(test.right)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            return self._waits_for_stop(test.left) or self._waits_for_stop(test.right)
        return False

    def _reads_input(self, node, unguarded: bool = False) -> bool:
        """Does a session run in `node` take a batch from an input pipeline?
        (`unguarded`: one outside a `try` that catches the pipeline's end.)"""
        inputs = self.graph.ending_input_names
        if not inputs:
            return False
        for call in _calls_outside_end_handlers(node) if unguarded else C.calls_in(node):
            fetch = self.fetch_by_call.get(id(call))
            if fetch is None or not fetch.ok:
                continue
            wanted = set(fetch.values) | (C.names_used(self.graph.loss) if fetch.train else set())
            if set(self.graph.params_for(self.graph.slice_for(wanted))) & inputs:
                return True
        return False

    def stop_condition(self) -> cst.BaseExpression:
        gs = self.graph.global_step
        stops = [f"{hook}.stop_requested" for hook in getattr(self.rule, "hook_stops", ())]
        bounds = [C.code_of(b) for b in self.last_steps] + (self.count_names or ["last_step"] * bool(self.step_counts))
        if len(bounds) > 1:
            stops.insert(0, f"int({gs}.numpy()) >= min({', '.join(bounds)})")
        elif bounds:
            stops.insert(0, f"int({gs}.numpy()) >= {bounds[0]}")
        if len(stops) > 1:
            return C.expr("(" + " or ".join(stops) + ")")
        return C.expr(stops[0] if stops else "False")

    def session_prelude(self) -> list[cst.BaseStatement]:
        gs = self.graph.global_step
        out: list[cst.BaseStatement] = []
        for queue in self.graph.queue_ranges:
            if any(q == queue for q in self.graph.dequeues.values()):
                name = self.ticket_iters.setdefault(queue, self.rule._fresh(f"{queue}_iterator"))
                n = C.code_of(self.graph.queue_ranges[queue])
                out += C.stmts(
                    "# Each batch id is scheduled once, on whichever worker is free.\n"
                    f"{name} = iter(range({n}))\n"
                )
        if self.step_counts:
            # each num_steps hook counted from the step the session started at
            self.count_names = ["last_step"] + [self.rule._fresh("last_step") for _ in self.step_counts[1:]]
            for name, count in zip(self.count_names, self.step_counts):
                out += C.stmts(f"{name} = int({gs}.numpy()) + {C.code_of(count)}\n")
        if self.checkpoint_dir is not None:
            tracked = self._tracked()
            ckpt = self.checkpoint_name
            directory = C.code_of(self.checkpoint_dir)
            if not isinstance(self.checkpoint_dir, (cst.Name, cst.Attribute)):
                name = self.rule._fresh("checkpoint_dir")
                out += C.stmts(f"{name} = {directory}\n")
                directory = name
            if self.rule.strategy == MWMS:
                directory_code = (
                    f"{directory} if {self.rule.strategy_name}.cluster_resolver.task_id == 0 else"
                    f' os.path.join({directory}, "worker_%d" % {self.rule.strategy_name}.cluster_resolver.task_id)'
                )
                self.rule.ctx.require_import("os")
            else:
                directory_code = directory
            if not self.saves:
                saved = "# The TF1 code saved none (its saver was turned off); neither does this one.\n"
            else:
                at_end = "" if self.trains_forever else " and at the end"
                saved = f"# Saved {self.cadence}{at_end}.\n"
            restore = self._restore_call(ckpt, directory)
            out += C.stmts(
                "# Checkpoints, restored on start so a restarted job resumes\n"
                "# (also from the TF1 job's name-based checkpoints).\n"
                + saved +
                f"{ckpt} = tf.train.Checkpoint({tracked})\n"
                f"{self.manager} = (\n"
                f"    tf.train.CheckpointManager({ckpt}, {directory_code}, max_to_keep=5) if {directory} else None)\n"
                + restore
            )
            if self.save_due is not None:
                out += C.stmts(f"{self.save_due} = time.monotonic() + {self.save_secs}\n")
        return out + self._hand_saver_prelude()

    def _restore_call(self, checkpoint: str, directory: str) -> str:
        """Restore-on-start of the newest checkpoint, a TF2 one or the TF1 job's
        (`_legacy_restore`). MultiWorkerMirroredStrategy workers other than the
        chief save to their own directories: every worker restores the chief's."""
        rule = self.rule
        helper, variables, optimizer = self._restore_parts()
        if rule.strategy == MWMS:
            latest = rule._fresh("latest_checkpoint")
            return (f"{latest} = tf.train.latest_checkpoint({directory}) if {directory} else None\n"
                    f"if {latest}:\n"
                    "    " + _legacy_restore.restore_call(helper, checkpoint, latest, variables, optimizer) + "\n")
        return (f"if {self.manager} is not None and {self.manager}.latest_checkpoint:\n"
                "    " + _legacy_restore.restore_call(helper, checkpoint, f"{self.manager}.latest_checkpoint",
                                                      variables, optimizer) + "\n")

    def _restore_parts(self) -> tuple[str, list[str], str | None]:
        """(the restore function's name, the variables it restores, the
        optimizer whose iterations continue from TF1's step or None), made
        once: the session's restore-on-start and the program's own restores
        (`saver.restore(sess, path)`) read a TF2 or a TF1 checkpoint alike."""
        if getattr(self, "restore_parts", None) is not None:
            return self.restore_parts
        rule = self.rule
        helper = getattr(rule, "restore_helper", None)
        if helper is None:
            helper = rule.restore_helper = rule._fresh("restore_checkpoint")
        gs = self.graph.global_step
        # the step counter the migration made has no value in a TF1 checkpoint: it counts on from 0
        counter = [] if getattr(rule, "made_global_step", False) else [gs]
        variables = list(dict.fromkeys([*counter, *(v for v in self.graph.variables if v != gs)]))
        if rule.template is not None:
            variables.append(f"*{rule.template}.variables")
        averages = getattr(rule, "moving_average", None)
        if averages is not None:  # their TF1 names: <variable>/ExponentialMovingAverage, as in eager TF2
            variables.append("*" + _moving_average.tracked(averages, rule.trainable_name)[1])
        keras = rule._keras_optimizer(self.graph)
        optimizer_call = self.graph.optimizer_call
        kind = rule.qualname(optimizer_call.func).rsplit(".", 1)[-1] if optimizer_call is not None else ""
        slots = _legacy_restore.SLOTTED_OPTIMIZERS.get(kind)
        # the step count drives a schedule; with state that starts afresh (Adam's moments) and a
        # constant rate, the whole optimizer starts afresh, its bias correction with it
        schedule = slots is not None and rule._changing_rate(self.graph) is not None
        continues = keras and (slots is None or schedule)
        if rule.template is None:
            scope = None
        elif rule.creates_plain_variables:
            # recorded tf.Variable objects: named in the model function's name scope when it has one
            scope = _collection_reads.NAME_SCOPE if rule.scoped_reads else None
        else:
            scope = "model"  # make_template's variable scope
        rule.restore_helper_code = _legacy_restore.helper_code(helper, scope, continues)
        if slots is not None:
            rule.report(optimizer_call, _legacy_restore.slots_note(kind, slots, keras and schedule), fixed=True,
                        severity="info", hint="expect the first steps after such a resume to differ from the TF1"
                        " job's; to avoid it, resume from a checkpoint the migrated program wrote",
                        reference=_legacy_restore.REFERENCE)
        self.restore_parts = (helper, variables, self.graph.optimizer if continues else None)
        return self.restore_parts

    def timed_save(self, drain: str = "") -> str:
        """Source of the time-based periodic save (TF1's CheckpointSaverHook
        timer, or the Supervisor's checkpoint thread); `drain`: what must run
        before it (the steps still in flight)."""
        return (
            f"if {self.manager} is not None and time.monotonic() >= {self.save_due}:\n"
            + "".join("    " + line + "\n" for line in drain.splitlines())
            + f"    {self.manager}.save(checkpoint_number={self.graph.global_step})\n"
            f"    {self.save_due} = time.monotonic() + {self.save_secs}\n"
        )

    def session_epilogue(self, training=()) -> list[cst.BaseStatement]:
        """The final save after ``training`` (the statements it follows);
        none after a loop that never ends (nothing would reach it)."""
        if self.checkpoint_dir is None or not self.saves or (
                self.trains_forever and training and runs_forever(training[-1])):
            return []
        gs = self.graph.global_step
        return C.stmts(
            f"if {self.manager} is not None:\n    {self.manager}.save(checkpoint_number={gs})\n"
        )


_EXIT_CALLS = {"sys.exit", "exit", "quit", "os._exit"}


def runs_forever(statement) -> bool:
    """`while True:` with no break of its own (one in an inner loop or function ends that)."""
    if not (isinstance(statement, cst.While) and isinstance(statement.test, cst.Name)
            and statement.test.value == "True"):
        return False
    stack = list(C.children(statement.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Break):
            return False
        if not isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(C.children(node))
        elif isinstance(node, (cst.For, cst.While)) and node.orelse is not None:
            stack.extend(C.children(node.orelse))  # an `else:` break leaves this loop
    return True


def _has_exit(node, asks_to_stop, in_loop: bool = False) -> bool:
    """A way out of the loop whose body is `node`: break (not in an inner
    loop), return, raise or sys.exit(), except under `if sess.should_stop():`,
    which the migration makes dead code."""
    for child in C.children(node):
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(child, (cst.Return, cst.Raise)) or (isinstance(child, cst.Break) and not in_loop):
            return True
        if isinstance(child, cst.Call) and C.code_of(child.func) in _EXIT_CALLS:
            return True
        if isinstance(child, cst.If) and asks_to_stop(child.test):
            if child.orelse is not None and _has_exit(child.orelse, asks_to_stop, in_loop):
                return True
            continue
        if _has_exit(child, asks_to_stop, in_loop or isinstance(child, (cst.For, cst.While))):
            return True
    return False


def _method(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def _owner(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
        return call.func.value.value
    return None


# FileWriter/Supervisor methods that write a TF1 summary op's serialized result
SUMMARY_WRITES = {"add_summary", "summary_computed", "add_run_metadata", "add_graph"}


def _name_count(node, name: str) -> int:
    count = 0
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name) and n.value == name:
            count += 1
        stack.extend(C.children(n))
    return count


def _is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
