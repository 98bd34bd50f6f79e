"""TFM301, emitted code of the training loop: the session loop rewritten around the
step functions (_SessionRewriter), steps kept in flight on ParameterServerStrategy and
batched per tf.function call on MirroredStrategy (_Pipeliner), global-step reads and
graph-mode switches dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _dataflow, _serving_export, _session_helpers_emit
from migrate.codemod.rules._program import (
    MIRRORED,
    PSS,
    REFERENCE,
)
from migrate.codemod.rules._session_loop import (
    supervisor_chief_read,
)

if TYPE_CHECKING:  # annotations only: the rule imports this module
    from migrate.codemod.rules.tfm301_graph_to_strategy import GraphToStrategy
from migrate.codemod.rules._tfm301_session import (
    _EXIT_CALLS,
    QUIET_SESSIONS,
    REMOVED_SESSION_METHODS,
    SESSION_CLASSES,
    SUMMARY_WRITES,
    SUPERVISOR_SESSION_METHODS,
    _Fetch,
    _method,
    _name_count,
    _owner,
    _SessionRegion,
    runs_forever,
)

GRAPH_MODE_SWITCHES = {"disable_eager_execution", "disable_v2_behavior", "reset_default_graph"}


class _SessionRewriter(cst.CSTTransformer):
    def __init__(self, region: _SessionRegion):
        super().__init__()
        self.r = region
        self.prelude_done = False
        self.prelude_outside_with = False  # checkpoint setup emitted for a session made by an assignment
        self.loop_depth = 0
        self.line: cst.SimpleStatementLine | None = None  # the statement being rewritten
        self.last_statements: set[int] = set()  # ids of statements ending their block
        self.unfed_raises: dict[int, cst.BaseStatement] = {}  # statement id -> the raise replacing it

    def visit_IndentedBlock(self, node):
        if node.body:
            self.last_statements.add(id(node.body[-1]))

    def visit_SimpleStatementLine(self, node):
        self.line = node

    def _is_session_with(self, node: cst.With) -> bool:
        q = self.r.rule.qualname
        return any(
            isinstance(call := self.r.session_call(i.item), cst.Call)
            and (q(call.func) in SESSION_CLASSES or _method(call) in SUPERVISOR_SESSION_METHODS)
            for i in node.items
        )

    def visit_While(self, node):
        self.loop_depth += 1

    def visit_For(self, node):
        self.loop_depth += 1

    def leave_For(self, original, updated):
        self.loop_depth -= 1
        if _dataflow.runs_dropped_ops(original, self.r.graph.dropped, self.r.sessions):
            return cst.RemovalSentinel.REMOVE  # the ps tasks' "done" signals: TF2's ps serve to the end
        return self._timed_saves(updated, _Pipeliner(self.r, original, updated).result())

    def _timed_saves(self, updated, result):
        """A loop that waits for each step saves on TF1's timer right after the
        statement running the step (a pipelined loop has its own)."""
        if result is not updated or self.r.save_due is None or not isinstance(updated.body, cst.IndentedBlock):
            return result
        runs = set(self.r.train_names.values())
        body = list(updated.body.body)
        hits = [k for k, st in enumerate(body)
                if any(isinstance(c.func, cst.Name) and c.func.value in runs for c in C.calls_in(st))]
        if not hits or any(self.r.save_due in C.names_used(st) for st in body):
            return result  # no step here, or an inner loop saves already
        k = hits[-1]
        body[k + 1 : k + 1] = C.stmts(self.r.timed_save())
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def leave_IndentedBlock(self, original, updated):
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def _waits_on_dropped(self, test) -> bool:
        for node in C.walk(test):
            if isinstance(node, cst.Call):
                fetch = self.r.fetch_by_call.get(id(node))
                if fetch is not None and fetch.dropped_only:
                    return True
        return False

    def leave_While(self, original, updated):
        self.loop_depth -= 1
        # `while sess.run(tf.report_uninitialized_variables()).size: sleep()` and
        # other polls of graph plumbing: TF2 strategies wait for their peers
        if self._waits_on_dropped(original.test):
            return cst.RemovalSentinel.REMOVE
        return self._timed_saves(updated, _Pipeliner(self.r, original, updated).result())

    def leave_If(self, original, updated):
        if self._waits_on_dropped(original.test):
            return cst.RemovalSentinel.REMOVE
        if isinstance(updated.orelse, cst.Else) and all(_is_pass(st) for st in C.body_of(updated.orelse.body)) and (
                not all(_is_pass(st) for st in C.body_of(original.orelse.body))):
            # `else: sess = sv.prepare_or_wait_for_session(...)` had nothing else
            updated = updated.with_changes(orelse=None)
        # `if is_chief: sess.run(init_tokens_op)` and the like lose their whole body
        body_empty = all(_is_pass(st) for st in C.body_of(updated.body))
        had_code = not all(_is_pass(st) for st in C.body_of(original.body))
        if body_empty and had_code:
            else_empty = isinstance(updated.orelse, cst.Else) and all(
                _is_pass(st) for st in C.body_of(updated.orelse.body))
            if updated.orelse is None or else_empty:
                return cst.RemovalSentinel.REMOVE
            if isinstance(updated.orelse, cst.Else):
                return updated.with_changes(test=cst.UnaryOperation(cst.Not(), _parenthesized(updated.test)),
                                            body=updated.orelse.body, orelse=None)
        return updated

    def leave_With(self, original, updated):
        if not self._is_session_with(original):
            return updated
        body = list(C.body_of(updated.body))
        if body and all(_is_pass(s) for s in body):
            body = []
        if body and self._ends_quietly(original) and self.r._reads_input(original, unguarded=True):
            # the session's `with` swallowed the OutOfRangeError of an input pipeline's end
            guarded = C.stmt(
                "try:\n    pass\nexcept tf.errors.OutOfRangeError:\n"
                f"    # {self._session_kind(original)} ended quietly when the input ran out; so does this.\n"
                "    pass\n")
            first = body[0].with_changes(leading_lines=C.strip_blank_lines(body[0].leading_lines))
            body = [guarded.with_changes(body=guarded.body.with_changes(body=[first, *body[1:]]))]
        prelude = []
        if not self.prelude_done and any(self.r.fetch_by_call.get(id(c)) and self.r.fetch_by_call[id(c)].train
                                         for c in C.calls_in(original)):
            prelude = self.r.session_prelude()
            body = body + self.r.session_epilogue(body)
            self.prelude_done = True
        new = prelude + body
        if not new:
            return cst.RemovalSentinel.REMOVE
        new[0] = new[0].with_changes(leading_lines=[*updated.leading_lines, *new[0].leading_lines])
        return cst.FlattenSentinel(new)

    def _ends_quietly(self, node: cst.With) -> bool:
        return self._session_kind(node) is not None

    def _session_kind(self, node: cst.With) -> str | None:
        """The session of a `with` that ended on OutOfRangeError without raising it."""
        for item in node.items:
            call = self.r.session_call(item.item)
            if isinstance(call, cst.Call):
                q = self.r.rule.qualname(call.func)
                if q in QUIET_SESSIONS:
                    return q.rsplit(".", 1)[-1]
                if _method(call) == "managed_session":
                    return "Supervisor.managed_session"
        return None

    def leave_SimpleStatementLine(self, original, updated):
        self.line = None
        if id(original) in self.unfed_raises:
            return self.unfed_raises.pop(id(original)).with_changes(leading_lines=original.leading_lines)
        if id(original) in self.r.hook_growth:
            return cst.RemovalSentinel.REMOVE
        export = self.r.serving_exports.get(id(original))
        if export is not None:  # the trained model's export for serving, as TF2 writes it
            return cst.FlattenSentinel(_serving_export.emitted(export, self.r.graph, self.r.rule, original))
        if id(original) in self.r.serving_removed:
            return cst.RemovalSentinel.REMOVE
        if self.r.checkpoint_name is not None:
            saved = self.r.hand_saver_statement(original, updated)
            if saved is not None:  # `saver.save(sess, path, global_step=n)`: through the checkpoint
                return saved
        names, value, _ = C.assignment(original)
        if names and set(names) <= self.r.removed_names:
            if not self.prelude_done and self.r.opens_training_session(original):
                self.prelude_done = self.prelude_outside_with = True
                prelude = self.r.session_prelude()
                if not prelude:
                    return cst.RemovalSentinel.REMOVE
                prelude[0] = prelude[0].with_changes(leading_lines=[*original.leading_lines, *prelude[0].leading_lines])
                return cst.FlattenSentinel(prelude)
            return cst.RemovalSentinel.REMOVE
        lone = C.single_expr(original)
        if isinstance(lone, cst.Call):
            owner, method = _owner(lone), _method(lone)
            if owner in self.r.sessions | self.r.supervisors and method in REMOVED_SESSION_METHODS:
                return cst.RemovalSentinel.REMOVE
            fetch = self.r.fetch_by_call.get(id(lone))
            if fetch is not None and (fetch.dropped_only or (fetch.state_only and True)):
                return cst.RemovalSentinel.REMOVE
            if method in SUMMARY_WRITES and C.names_used(lone) & (
                self.r.summary_results | self.r.graph.dropped | self.r.supervisors
            ):
                # the TF1 summary op and its writer are gone with the graph
                if not self.r.summaries_reported:
                    self.r.summaries_reported = True
                    self.r.rule.report(
                        original, "TF1 summaries are not carried over: the summary op, its writer and this"
                        f" `{method}` call were removed{getattr(self.r.rule, 'summaries_elsewhere', '')}",
                        hint="write tf.summary.scalar(...) under tf.summary.create_file_writer(logdir).as_default()"
                        " with the step's returned values",
                        reference=REFERENCE[self.r.rule.strategy], fixed=False)
                return cst.RemovalSentinel.REMOVE
        if names and isinstance(value, cst.Call):
            fetch = self.r.fetch_by_call.get(id(value))
            ticket = self.r.work_queue_take(fetch)
            if ticket is not None and len(names) == 1:
                # the coordinator hands each batch id out once, as the ps queue did
                take = C.stmt(f"{names[0]} = next({ticket}, None)\n").with_changes(
                    leading_lines=original.leading_lines)
                if self.loop_depth:
                    return cst.FlattenSentinel([take, C.stmt(f"if {names[0]} is None:\n    break\n")])
                return take
            if fetch is not None and fetch.dropped_only and set(names) <= self.r.summary_results:
                return cst.RemovalSentinel.REMOVE
            if fetch is not None and fetch.dropped_only:
                self.r.rule.report(
                    original,
                    f"the program uses the value of graph plumbing with no TF2 counterpart ({', '.join(fetch.names)})",
                    hint="replace it by plain Python (e.g. a counter or the global step); the rule kept the line",
                    reference=REFERENCE[self.r.rule.strategy], fixed=False)
                return updated
            if fetch is not None and fetch.shape == "list" and (fetch.train or (
                    fetch.ok and not fetch.state_only and fetch.values)):
                # the step or evaluation function returns only the fetched values it computes
                return self._train_assignment(original, updated, fetch)
        return updated

    def _train_assignment(self, original, updated, fetch: _Fetch):
        """`_, loss_value = sess.run([train_op, loss], ...)` -> `loss_value = run_train_step(...)`."""
        small = updated.body[0]
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return updated
        target = small.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(fetch.names):
            return updated
        kept = [el.value for el, n in zip(target.elements, fetch.names)
                if n in fetch.values or (n == self.r.graph.train_op and fetch.token_used)]
        if not kept:
            return updated.with_changes(body=[cst.Expr(small.value)])
        new_target = kept[0] if len(kept) == 1 else cst.Tuple([cst.Element(k) for k in kept], lpar=[], rpar=[])
        return updated.with_changes(body=[small.with_changes(targets=[cst.AssignTarget(new_target)])])

    def leave_Dict(self, original, updated):
        names = self.r.graph.placeholder_names
        if updated.elements and all(
            isinstance(el, cst.DictElement) and isinstance(el.key, cst.Name) and el.key.value in names
            for el in updated.elements
        ) and any(original is d for d in self.r.feed_dicts.values()):
            return updated.with_changes(elements=[
                el.with_changes(key=cst.SimpleString(f'"{el.key.value}"')) for el in updated.elements
            ])
        return updated

    def leave_Attribute(self, original, updated):
        # `if sv.is_chief:` reads what the program told its Supervisor
        return supervisor_chief_read(original, updated, self.r.supervisor_chief)

    def leave_UnaryOperation(self, original, updated):
        # `not sess.should_stop()` with no stop hook: the session never asked to stop
        if (isinstance(updated.operator, cst.Not) and isinstance(updated.expression, cst.Name)
                and updated.expression.value == "False" and not isinstance(original.expression, cst.Name)):
            return cst.Name("True", lpar=updated.lpar, rpar=updated.rpar)
        return updated

    def leave_BooleanOperation(self, original, updated):
        # `not sv.should_stop() and step < n` with no stop hook: `True and step < n` is `step < n`
        if isinstance(updated.operator, cst.And) and not updated.lpar:
            for side, other, was in ((updated.left, updated.right, original.left),
                                     (updated.right, updated.left, original.right)):
                if (isinstance(side, cst.Name) and side.value == "True" and not isinstance(was, cst.Name)
                        and not isinstance(other, cst.BooleanOperation)):
                    return other
        return updated

    def leave_Call(self, original, updated):
        handed = self.r.handed_calls.get(id(original))
        if handed is not None:  # `evaluate(sess, ...)`: handed its evaluation functions instead
            return _session_helpers_emit.rewrite_call(handed, updated, self.r)
        owner, method = _owner(original), _method(original)
        if owner in self.r.sessions | self.r.supervisors and method == "should_stop":
            return self.r.stop_condition()
        state_read = _dataflow.session_state_read(original, self.r.rule.qualname, self.r.sessions, self.r.graph)
        if state_read is not None:
            return state_read
        if owner in self.r.sessions and method == "run":
            fetch = self.r.fetch_by_call.get(id(original))
            if fetch is None or not fetch.ok:
                attribute = _fetched_attribute(original, set(self.r.graph.compute_names))
                if attribute is not None:
                    self.r.rule.report(original, f"sess.run fetches `{C.code_of(attribute)}`, an attribute of"
                                       f" `{C.code_of(attribute.value)}`, which the device-setter block builds: the"
                                       " step function returns the block's values by name",
                                       hint=f"bind it to a name in the block (`{attribute.attr.value} ="
                                       f" {C.code_of(attribute)}`) and fetch that name, then migrate again",
                                       reference=REFERENCE[self.r.rule.strategy], fixed=False)
                    return updated
                self.r.rule.report(original, "sess.run with fetches this rule cannot map",
                                   hint="call the training step function with explicit arguments",
                                   reference=REFERENCE[self.r.rule.strategy], fixed=False)
                return updated
            if fetch.state_only:
                reads = self.r.rule.schedule_reads
                parts = [f"{reads[n]}.numpy()" if n in reads else f"{n}.numpy()" for n in fetch.names]
                return C.expr(parts[0] if fetch.shape == "single" else "[" + ", ".join(parts) + "]")
            if fetch.train:
                canonical = self.r.train_fetches.get(fetch.key(), fetch)
                fn = self.r.train_names.get(id(canonical))
            else:
                canonical = self.r.eval_fetches.get(fetch.key(), fetch)
                fn = self.r.eval_names.get(id(canonical))
                if fn is not None:
                    fn = f"tf.nest.map_structure(lambda value: value.numpy(), {fn}"
            if fn is None:
                return updated
            self._report_foreign_feeds(fetch, original)
            args = self._args(fetch, getattr(canonical, "params", []))
            if args is None:
                unfed = _dataflow.unfed_placeholders(fetch.feed, getattr(canonical, "params", []), self.r.graph)
                if unfed and _unfed_run_ends_block(self.line, original, self.last_statements):
                    self._raise_unfed(original, fetch, unfed)
                    return updated
                what = f" ({', '.join(f'`{n}`' for n in unfed)} not fed: TF1 raised an error here too)" if unfed else ""
                self.r.rule.report(original, f"feed_dict does not feed every placeholder the step needs{what}",
                                   hint="pass the step function's arguments explicitly",
                                   reference=REFERENCE[self.r.rule.strategy], fixed=False)
                return updated
            code = f"{fn}({args})" + (")" if fn.startswith("tf.nest") else "")
            return C.expr(code)
        return updated

    def _raise_unfed(self, run_call: cst.Call, fetch: _Fetch, unfed: list[str]) -> None:
        """The run leaves a placeholder its fetches need unfed: TF1 raised
        InvalidArgumentError there, and the statement becomes that raise."""
        needed = ", ".join(f"`{n}`" for n in fetch.values) or "the step"
        missing = ", ".join(unfed)
        message = f"no value for {missing}, which {needed.replace('`', '')} needs"
        self.unfed_raises[id(self.line)] = C.stmt(f'raise tf.errors.InvalidArgumentError(None, None, "{message}")\n')
        self.r.rule.report(
            run_call, f"this session run feeds no {', '.join(f'`{n}`' for n in unfed)}, which {needed} needs: TF1"
            " raised InvalidArgumentError here (\"You must feed a value for placeholder tensor\"), and the"
            " migrated code raises it at the same point",
            hint=f"give {needed} the value it needs here (for a dropout keep probability, 1.0 evaluates without"
            " dropout), then migrate again", reference=REFERENCE[self.r.rule.strategy], fixed=True)

    def _report_foreign_feeds(self, fetch: _Fetch, run_call: cst.CSTNode) -> None:
        """A fed key that is no placeholder of the graph block (one a helper
        function created, a ``keep_prob`` inside ``inference()``, say) has no
        argument in the step function: say so where it is fed."""
        if not isinstance(fetch.feed, cst.Dict):
            return
        placeholders = {name for name, _, _ in self.r.graph.placeholders}
        for element in fetch.feed.elements:
            if (isinstance(element, cst.DictElement) and isinstance(element.key, cst.Name)
                    and element.key.value not in placeholders):
                self.r.foreign_feeds.add(element.key.value)
                self.r.rule.report(
                    run_call, f"`{element.key.value}` is fed but is not a placeholder of the graph block:"
                    " the step function has no argument for it and its value is not passed",
                    hint="create it in the graph block, or make it a parameter of the function that creates it"
                    " (a tf.placeholder cannot run in TF2)",
                    reference=REFERENCE[self.r.rule.strategy], fixed=False)

    def _args(self, fetch: _Fetch, params: list[str]) -> str | None:
        """The step's arguments: the fed values of its placeholders, then the
        next batch of each input pipeline it reads (as the session run took it)."""
        feed = fetch.feed
        graph = self.r.graph
        fed = [p for p in params if p not in graph.input_names]
        batches = [(f"{self.r.rule.iterator_names[id(p)]}.get_next()" if p.single
                    else f"*{self.r.rule.iterator_names[id(p)]}.get_next()")
                   for p in graph.inputs if p.names[0] in params]
        if not fed:
            return ", ".join(batches)
        if isinstance(feed, cst.Dict):
            by_name = {el.key.value: el.value for el in feed.elements
                       if isinstance(el, cst.DictElement) and isinstance(el.key, cst.Name)}
            if not set(fed) <= set(by_name):
                return None
            return ", ".join([C.code_of(by_name[p]) for p in fed] + batches)
        if isinstance(feed, cst.Name) and feed.value in self.r.feed_dicts and not batches:
            return f"**{feed.value}"
        return None


# statements that leave or re-enter a loop body, or change scopes: a loop tail
# holding one of them cannot run later, in a function of its own
_TAIL_BLOCKERS = (cst.Break, cst.Continue, cst.Return, cst.Raise, cst.Yield, cst.Await, cst.Global, cst.Nonlocal,
                  cst.FunctionDef, cst.ClassDef)


def _bound_names(statements) -> set[str]:
    """Names the statements bind in their own scope (comprehensions excluded)."""
    out: set[str] = set()
    for statement in statements:
        for node in C.walk(statement):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    out.update(C.target_names(t.target))
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
                out.update(C.target_names(node.target))
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                out.update(C.target_names(node.asname.name))
            elif isinstance(node, cst.ExceptHandler) and node.name is not None:
                out.update(C.target_names(node.name.name))
            elif isinstance(node, cst.Del):
                out.update(C.target_names(node.target))
            elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    name = alias.asname.name if alias.asname is not None else alias.name
                    out.update(C.target_names(name) or [C.code_of(name).split(".")[0]])
    return out


def _enclosing_function(module: cst.Module, loop) -> cst.FunctionDef | None:
    """The innermost function around the loop (found by its code: the session
    rewriter works on copies of the module's nodes); None at module level or
    when several loops have the same code."""
    code = C.code_of(loop)
    kind = type(loop)
    found: list[cst.FunctionDef | None] = []
    stack: list[tuple[cst.CSTNode, cst.FunctionDef | None]] = [(module, None)]
    while stack:  # a plain scan: libcst's .children rebuilds every node it passes
        node, function = stack.pop()
        if type(node) is kind and C.code_of(node) == code:
            found.append(function)
        inner = node if type(node) is cst.FunctionDef else function
        stack.extend((child, inner) for child in C.children(node))
    return found[0] if len(found) == 1 else None


class _Pipeliner:
    """ParameterServerStrategy: a loop that trains one step per iteration
    queues each step and runs the rest of its body on the step's results up
    to a few steps later, so the workers train in parallel as TF1's
    asynchronous workers did. (Fetching each step's results before the next
    step is scheduled leaves all workers but one idle.) Steps whose fed
    arguments can be stacked go out several per closure: the coordinator's
    thread for a worker runs one closure at a time and copies its results to
    the chief before the next, a round trip per closure TF1 workers did not pay
    (measured: 1 step per closure 0.8x the legacy job's steps/s, 4 steps 1.2-1.4x).

    Only when deferring the loop's tail cannot change the program: the tail
    has no break/continue/return, binds no name used outside it, reads no
    model state (which would have moved on); and nothing before the step
    reads model state either (a batch chosen by the global step). The
    loop's stop condition on the global step counts scheduled steps instead.
    Otherwise the loop keeps waiting for each step (`run_*` wrapper)."""

    def __init__(self, region: _SessionRegion, original, updated):
        self.r = region
        self.rule = region.rule
        self.original = original
        self.updated = updated

    def result(self):
        try:
            out = self._pipelined()
        except _NotPipelined:
            return self.updated
        return out

    def _refuse(self, why: str = ""):
        raise _NotPipelined(why)

    def _train_statement(self, statement):
        """(assignment target or None, call) of `x = run_train_step(...)` / `run_train_step(...)`."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        small = statement.body[0]
        target = None
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [cst.Element(target)]
            if not all(isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in elements):
                return None
            value = small.value
        elif isinstance(small, cst.Expr):
            value = small.value
        else:
            return None
        wrappers = self.r.schedule_names.keys() | self.r.sync_steps.keys()
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in wrappers:
            return target, value
        return None

    def _pipelined(self):
        r, rule, loop = self.r, self.rule, self.updated
        if rule.strategy not in (PSS, MIRRORED) or loop.orelse is not None or (
                r.save_steps is not None and not r.graph.global_step):
            self._refuse()
        if not isinstance(loop.body, cst.IndentedBlock):
            self._refuse()
        body = list(loop.body.body)
        wrappers = set(r.schedule_names) | set(r.sync_steps)
        calls = [c for c in C.calls_in(loop) if isinstance(c.func, cst.Name) and c.func.value in wrappers]
        hits = [k for k, st in enumerate(body) if self._train_statement(st) is not None]
        if len(calls) != 1 or len(hits) != 1:
            self._refuse()
        k = hits[0]
        target, call = self._train_statement(body[k])
        pre, tail = body[:k], body[k + 1 :]
        if any(isinstance(n, _TAIL_BLOCKERS) or (isinstance(n, cst.Call) and C.code_of(n.func) in _EXIT_CALLS)
               for st in tail for n in C.walk(st)):
            self._refuse()  # the loop ends (or leaves) on this step's results: no step may run ahead
        # model state and session work: read before the step, they would see
        # the model ahead of where the TF1 loop saw it; after, behind or ahead
        state = set(r.state_names) - {""} | set(r.eval_names.values()) | wrappers | set(r.schedule_names.values())
        state |= r.evaluating_helpers  # they call evaluation functions (read as module globals, too)
        state |= {rule.strategy_name, getattr(rule, "coordinator_name", rule.strategy_name)}
        gs = r.graph.global_step
        # the global step lags behind by the steps in flight: the stop condition
        # and batches chosen by step read a count of the steps scheduled instead
        counter = rule._fresh("scheduled_steps") if gs else None
        swap = _GlobalStepReads(gs, counter)
        pre = [_without_comments_on_read(st, st.visit(swap)) for st in pre]
        if isinstance(loop, cst.While):
            test = loop.test.visit(swap)
            head_names = C.names_used(test)
        else:
            test = None
            head_names = C.names_used(loop.iter) | C.names_used(loop.target)
        if counter is not None and not swap.found and r.save_steps is None:
            rule.taken.discard(counter)
            counter = None
        pre_names = set().union(*(C.names_used(st) for st in pre)) if pre else set()
        tail_names = set().union(*(C.names_used(st) for st in tail)) if tail else set()
        # functions of the program reading the session or the model (an evaluation defined in the loop's function)
        scope = _enclosing_function(rule.module_in, self.original) or rule.module_in
        state |= {fn.name.value for fn in C.walk(scope) if type(fn) is cst.FunctionDef
                  and fn.name.value in head_names | pre_names | tail_names
                  and C.names_used(fn.body) & (state | r.sessions)}
        if (head_names | pre_names | tail_names) & state:
            self._refuse()
        if getattr(rule, "hook_objects", set()) & tail_names & (head_names | pre_names):
            # a session hook's before_run (or the loop's stop) reads what its after_run sets
            self._refuse()
        # names the deferred tail binds live only there (and in the step's target)
        target_names = C.target_names(target) if target is not None else []
        tail_bound = _bound_names(tail) | set(target_names)
        for name in tail_bound:
            if name in head_names or name in pre_names or (
                    _name_count(scope, name) != _name_count(self.original, name)):
                self._refuse(f"the loop's tail binds {name}, which is used outside the loop")
            if scope is not rule.module_in and any(
                    isinstance(n, (cst.Global, cst.Nonlocal)) and name in C.names_used(n) for n in C.walk(scope)):
                self._refuse(f"{name} is declared global or nonlocal")
        pre_bound = _bound_names(pre)
        if isinstance(loop, cst.For):
            loop_names = C.target_names(loop.target)
            if not loop_names:
                self._refuse()  # `for self.i in ...`: a target the tail cannot be handed
            pre_bound |= set(loop_names)
        captured = sorted((tail_names - tail_bound) & pre_bound)
        return self._emit(loop, body[k], target, call, pre, tail, captured, test, counter)

    def _emit(self, loop, train_statement, target, call, pre, tail, captured, test, counter):
        if call.func.value in self.r.sync_steps:
            return self._emit_sync(loop, train_statement, target, call, pre, tail, captured, test, counter)
        r, rule = self.r, self.rule
        schedule = r.schedule_names[call.func.value]
        step = schedule.removeprefix("schedule_")
        info = r.step_info.get(schedule)
        # Steps go to the workers several per closure when their arguments can be
        # stacked: plain positional arguments, one per parameter of the step.
        grouped = (
            info is not None and bool(info[1]) and len(call.args) == len(info[1])
            and all(a.keyword is None and not a.star for a in call.args)
            and not set(info[1]) & _GROUP_LOCALS
            and not set(info[1]) & r.graph.input_names  # a batch may be a structure: not stacked
        )
        finish = rule._fresh(f"finish_{step}")
        in_flight = rule._fresh("steps_in_flight")
        window = rule._fresh("max_steps_in_flight")
        results = rule._fresh("step_results")
        index = rule._fresh("step_index") if grouped else None
        params = ", ".join([results, *([index] if grouped else []), *captured])
        tail_names = set().union(*(C.names_used(st) for st in tail)) if tail else set()
        keep_target = target is not None and bool(set(C.target_names(target)) & tail_names)
        fetch = f"{results}.fetch()[{index}]" if grouped else f"{results}.fetch()"
        fetched = f"{C.code_of(target)} = {fetch}" if keep_target else fetch
        finish_def = C.stmt(
            f"def {finish}({params}):\n"
            f"    # The rest of the loop body, run on this step's results (fetch() waits for them).\n"
            f"    try:\n"
            f"        {fetched}\n"
            f"    except tf.errors.UnavailableError:\n"
            f"        # The step's worker failed and the coordinator could not recover its results:\n"
            f"        # skip what the loop did with them (a TF1 worker that died lost its step too).\n"
            f"        return\n"
        )
        if tail:
            first = tail[0].with_changes(leading_lines=C.strip_blank_lines(tail[0].leading_lines))
            finish_def = finish_def.with_changes(
                body=finish_def.body.with_changes(body=[*finish_def.body.body, first, *tail[1:]]))
        workers = f'{rule.resolver_code}.cluster_spec().num_tasks("worker")'
        helpers: list[cst.BaseStatement] = []
        if grouped:
            per = rule._fresh("steps_per_closure")
            pending = rule._fresh("pending_steps")
            steps_fn = rule._fresh(f"{info[0]}s")
            queue_fn = rule._fresh("queue_pending_steps")
            setup = (
                f"# ParameterServerStrategy trains on whichever worker is free. Each closure costs\n"
                f"# the chief a round trip to its worker, which TF1's workers did not pay, so one\n"
                f"# closure runs {per} steps ({queue_fn}). The rest of the loop body\n"
                f"# ({finish}) runs on each step's results up to {window} steps\n"
                f"# later, so workers overlap as TF1's asynchronous workers did.\n"
                f"{per} = 4\n"
                f"{window} = 2 * {per} * {workers}\n"
                f"{in_flight} = []\n"
                f"{pending} = []\n"
            )
            names = info[1]
            unpack = ", ".join(names) + ("," if len(names) == 1 else "")
            feed = "".join("    " + line + "\n" for line in info[2].splitlines())
            tup = C.tuple_code(names)
            helpers = [
                C.stmt(
                    f"@tf.function\n"
                    f"def {steps_fn}(*stacked):\n"
                    f"    # The steps of one closure, in order, on the worker that runs it.\n"
                    f"    return [{info[0]}(*step) for step in zip(*(tf.unstack(value) for value in stacked))]\n"
                ),
                C.stmt(
                    f"def {queue_fn}():\n"
                    f"    # Steps whose arguments have the same shapes share a closure, stacked.\n"
                    + _stacked_groups(pending, unpack, feed, tup) +
                    f"        closure = {rule.coordinator_name}.schedule({steps_fn}, args=tuple(stacked))\n"
                    f"        {in_flight}.extend((closure, index, *captured) for index, (_, captured) in enumerate(steps))\n"
                    f"    {pending}.clear()\n"
                ),
            ]
        else:
            setup = (
                f"# ParameterServerStrategy trains on whichever worker is free: the chief queues\n"
                f"# each step and runs the rest of the loop body ({finish}) on its results up to\n"
                f"# {window} steps later, so workers overlap as TF1's asynchronous workers did.\n"
                f"{window} = 2 * {workers}\n"
                f"{in_flight} = []\n"
            )
        if counter is not None:
            setup += (f"# the global step lags behind by the steps in flight: count the scheduled ones\n"
                      f"{counter} = int({r.graph.global_step}.numpy())\n")
        prelude = C.stmts(setup)
        prelude[0] = prelude[0].with_changes(leading_lines=[*loop.leading_lines, *prelude[0].leading_lines])
        finish_def = finish_def.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        helpers = [h.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for h in helpers]
        if grouped:
            arguments = C.tuple_code([C.code_of(a.value) for a in call.args])
            queue = C.stmt(f"{pending}.append(({arguments}, {C.tuple_code(captured) if captured else '()'}))\n")
            flush = f"{queue_fn}()\n"
        else:
            scheduled = call.with_changes(func=cst.Name(schedule))
            entry = ", ".join([C.code_of(scheduled), *captured]) + ("," if not captured else "")
            queue = C.stmt(f"{in_flight}.append(({entry}))\n")
            flush = ""
        queue = queue.with_changes(leading_lines=train_statement.leading_lines)
        if call.args:
            rule.report(
                self.original,
                "the steps stay fed from the host arrays the loop makes, scheduled on the workers in the loop's"
                " order: a tf.data pipeline per worker (ClusterCoordinator.create_per_worker_dataset) would give"
                " every worker its own copy of the input, so with several workers a batch would be trained once"
                " per worker rather than once, in no fixed order",
                hint="with a single worker, or where visiting every batch exactly once does not matter, build the"
                " dataset in a function passed to coordinator.create_per_worker_dataset and take"
                " next(iterator) inside the step (TensorFlow's parameter_server_training tutorial)",
                fixed=True, severity="info", reference=REFERENCE[PSS])
        save = ""
        if r.save_steps is not None:
            # a checkpoint holds every step scheduled before it, as in TF1
            save = (
                f"if {r.manager} is not None and {counter} % {r.save_steps} == 0:\n"
                + ("    " + flush if flush else "")
                + f"    while {in_flight}:\n"
                f"        {finish}(*{in_flight}.pop(0))\n"
                f"    {r.manager}.save(checkpoint_number={r.graph.global_step})\n"
            )
        elif r.save_due is not None:
            save = r.timed_save(flush + f"while {in_flight}:\n    {finish}(*{in_flight}.pop(0))\n")
        after_queue = C.stmts(
            (f"{counter} += 1\n" if counter is not None else "")
            + (f"if len({pending}) == {per}:\n    {flush}" if grouped else "")
            + f"while len({in_flight}) > {window}:\n    {finish}(*{in_flight}.pop(0))\n"
            + save
        )
        new_loop = loop.with_changes(body=loop.body.with_changes(body=[*pre, queue, *after_queue]),
                                     leading_lines=[cst.EmptyLine(indent=False)])
        if test is not None:
            new_loop = new_loop.with_changes(test=test)
        # (nothing follows a loop that never ends)
        drain = [] if r.trains_forever and runs_forever(new_loop) else C.stmts(flush + f"while {in_flight}:\n    {finish}(*{in_flight}.pop(0))\n")
        if info is not None and set(info[1]) & r.graph.ending_input_names:
            # the input pipeline's end raises OutOfRangeError out of the loop: the steps
            # queued before it still finish, as TF1's had before its session run failed
            guarded = C.stmt("try:\n    pass\nfinally:\n    pass\n")
            guarded = guarded.with_changes(
                body=guarded.body.with_changes(body=[new_loop.with_changes(leading_lines=[])]),
                finalbody=guarded.finalbody.with_changes(body=guarded.finalbody.body.with_changes(body=drain)),
                leading_lines=new_loop.leading_lines)
            return cst.FlattenSentinel([*prelude, *helpers, finish_def, guarded])
        return cst.FlattenSentinel([*prelude, *helpers, finish_def, new_loop, *drain])


    def _emit_sync(self, loop, train_statement, target, call, pre, tail, captured, test, counter):
        """MirroredStrategy: the steps run several per tf.function call; the
        rest of the loop body runs on each step's results after its call."""
        r, rule = self.r, self.rule
        step_fn, names, feed_code, results_code = r.sync_steps[call.func.value]
        if not (names and len(call.args) == len(names)
                and all(a.keyword is None and not a.star for a in call.args)
                and not set(names) & _GROUP_LOCALS):
            self._refuse("the step's arguments cannot be stacked")
        step = call.func.value.removeprefix("run_")
        finish = rule._fresh(f"finish_{step}")
        results = rule._fresh("step_results")
        per = rule._fresh("steps_per_call")
        pending = rule._fresh("pending_steps")
        steps_fn = rule._fresh(f"{step_fn}s")
        run_fn = rule._fresh("run_pending_steps")
        tail_names = set().union(*(C.names_used(st) for st in tail)) if tail else set()
        keep_target = target is not None and bool(set(C.target_names(target)) & tail_names)
        finish_def = C.stmt(
            f"def {finish}({', '.join([results, *captured])}):\n"
            f"    # The rest of the loop body, run on this step's results.\n"
            + (f"    {C.code_of(target)} = {results_code.replace('step_results', results)}\n" if keep_target else "    pass\n")
        )
        body = [st for st in finish_def.body.body if not _is_pass(st)]
        if tail:
            first = tail[0].with_changes(leading_lines=C.strip_blank_lines(tail[0].leading_lines))
            body += [first, *tail[1:]]
        finish_def = finish_def.with_changes(body=finish_def.body.with_changes(body=body or finish_def.body.body))
        setup = (
            f"# A tf.function call costs more than a TF1 session's run of its cached graph:\n"
            f"# {steps_fn} runs {per} steps per call ({run_fn}), and the rest\n"
            f"# of the loop body ({finish}) runs on each step's results after that call.\n"
            f"{per} = 4\n"
            f"{pending} = []\n"
        )
        if counter is not None:
            setup += (f"# the global step moves on when the pending steps run: count the steps taken\n"
                      f"{counter} = int({r.graph.global_step}.numpy())\n")
        unpack = ", ".join(names) + ("," if len(names) == 1 else "")
        feed = "".join("    " + line + "\n" for line in feed_code.splitlines())
        tup = C.tuple_code(names)
        helpers = [
            C.stmt(
                f"@tf.function\n"
                f"def {steps_fn}(*stacked):\n"
                f"    # The steps of one call, in order.\n"
                f"    return [{step_fn}(*step) for step in zip(*(tf.unstack(value) for value in stacked))]\n"
            ),
            finish_def,
            C.stmt(
                f"def {run_fn}():\n"
                f"    # Steps whose arguments have the same shapes share a call, stacked.\n"
                + _stacked_groups(pending, unpack, feed, tup) +
                f"        for (_, captured), {results} in zip(steps, {steps_fn}(*stacked)):\n"
                f"            {finish}({results}, *captured)\n"
                f"    {pending}.clear()\n"
            ),
        ]
        prelude = C.stmts(setup)
        prelude[0] = prelude[0].with_changes(leading_lines=[*loop.leading_lines, *prelude[0].leading_lines])
        helpers = [h.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for h in helpers]
        arguments = C.tuple_code([C.code_of(a.value) for a in call.args])
        queue = C.stmt(f"{pending}.append(({arguments}, {C.tuple_code(captured) if captured else '()'}))\n")
        queue = queue.with_changes(leading_lines=train_statement.leading_lines)
        save = ""
        if r.save_steps is not None:
            # a checkpoint holds every step taken before it, as in TF1
            save = (
                f"if {r.manager} is not None and {counter} % {r.save_steps} == 0:\n"
                f"    {run_fn}()\n"
                f"    {r.manager}.save(checkpoint_number={r.graph.global_step})\n"
            )
        elif r.save_due is not None:
            save = r.timed_save(f"{run_fn}()\n")
        after_queue = C.stmts(
            (f"{counter} += 1\n" if counter is not None else "")
            + f"if len({pending}) == {per}:\n    {run_fn}()\n"
            + save
        )
        new_loop = loop.with_changes(body=loop.body.with_changes(body=[*pre, queue, *after_queue]),
                                     leading_lines=[cst.EmptyLine(indent=False)])
        if test is not None:
            new_loop = new_loop.with_changes(test=test)
        drain = [] if r.trains_forever and runs_forever(new_loop) else C.stmts(f"{run_fn}()\n")
        return cst.FlattenSentinel([*prelude, *helpers, new_loop, *drain])


def _results_code(run: str, step_name: str, params) -> str:
    """What a run wrapper makes of its step's results, as an expression of
    `step_results` (the wrapper's own source: `results = <expr of the call>`)."""
    if "    results = " not in run:
        return "step_results"
    expr = run.split("    results = ", 1)[1]
    expr = " ".join(line.strip() for line in expr.splitlines() if line.strip())
    return expr.replace(f"{step_name}({', '.join(params)})", "step_results").replace("( ", "(")


# names the generated queue function uses for itself
_GROUP_LOCALS = frozenset(
    {"arguments", "captured", "groups", "shapes", "closure", "index", "steps", "stacked", "column", "value", "step", "_"}
)


class _NotPipelined(Exception):
    pass


class _GlobalStepReads(cst.CSTTransformer):
    """`global_step.numpy()` / `int(global_step.numpy())` -> `counter`."""

    def __init__(self, global_step: str | None, counter: str | None):
        super().__init__()
        self.reads = {f"{global_step}.numpy()", f"int({global_step}.numpy())"} if global_step and counter else set()
        self.counter = counter
        self.found = False

    def leave_Call(self, original, updated):
        if self.reads and C.code_of(original) in self.reads:
            self.found = True
            return cst.Name(self.counter)
        return updated


def _without_comments_on_read(original, swapped):
    """A statement whose global-step read became the count of scheduled steps,
    without the comment lines above it: they described the read of a step
    other workers move on ("another update may land between this read and
    ours"), which the statement no longer makes."""
    if not isinstance(swapped, cst.SimpleStatementLine) or C.code_of(swapped) == C.code_of(original):
        return swapped
    return swapped.with_changes(leading_lines=[line for line in swapped.leading_lines if line.comment is None])


def _parenthesized(test: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(test, (cst.Name, cst.Attribute, cst.Call)) or test.lpar:
        return test
    return test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _is_pass(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in statement.body)


class _ReplaceNodes(cst.CSTTransformer):
    """Replaces the expressions whose ids are keys of `replaced`."""

    def __init__(self, replaced: dict[int, cst.BaseExpression]):
        super().__init__()
        self.replaced = replaced

    def leave_Call(self, original, updated):
        return self.replaced.get(id(original), updated)


class _DropGraphModeSwitches(cst.CSTTransformer):
    """The program is eager now: `disable_eager_execution()` and friends go."""

    def __init__(self, rule: GraphToStrategy):
        super().__init__()
        self.rule = rule

    def leave_SimpleStatementLine(self, original, updated):
        lone = C.single_expr(original)
        if isinstance(lone, cst.Call):
            q = self.rule.qualname(lone.func)
            if q in GRAPH_MODE_SWITCHES:
                return cst.RemovalSentinel.REMOVE
        return updated

    def leave_ClassDef(self, original, updated):
        migrated = getattr(self.rule, "class_rewrites", {}).get(C.code_of(original))
        return updated if migrated is None else migrated

    def leave_FunctionDef(self, original, updated):
        rewrites = getattr(self.rule, "helper_rewrites", None)
        migrated = rewrites.get(C.code_of(original)) if rewrites else None
        return updated if migrated is None else migrated

    def leave_With(self, original, updated):
        """`with tf.Graph().as_default():` around a migrated block: its
        variables and steps must be eager (a TF1 graph would hold them)."""
        if not all(
            isinstance(i.item, cst.Call) and _method(i.item) == "as_default" and i.asname is None
            and isinstance(i.item.func.value, cst.Call) and self.rule.qualname(i.item.func.value.func) == "Graph"
            for i in updated.items
        ) or not C.names_used(updated.body) & self.rule.strategy_names:
            return updated
        body = list(C.body_of(updated.body))
        body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)


def _unfed_run_ends_block(line, run_call: cst.Call, last_statements: set[int]) -> bool:
    """Can the statement ``line`` holding a run that raised in TF1 become that
    raise? Only when it ends its block (no code after it to leave dead) and
    nothing it evaluates before the run has effects: its other calls hold
    the run (they are called after it) and the run's arguments call nothing."""
    if line is None or id(line) not in last_statements or len(line.body) != 1:
        return False
    if any(type(node) in (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
           for node in C.walk(line)):
        return False
    if any(call is not run_call for arg in run_call.args for call in C.calls_in(arg.value)):
        return False
    return all(call is run_call or any(node is run_call for node in C.walk(call)) for call in C.calls_in(line))


def rewrite_session(region: _SessionRegion, statements):
    """The statements of a session region with the session's loop rewritten
    around the step functions."""
    rewriter = _SessionRewriter(region)
    if statements:
        rewriter.last_statements.add(id(statements[-1]))
    trains = [k for k, st in enumerate(statements) if region._trains(st)]
    out = []
    for k, statement in enumerate(statements):
        if not rewriter.prelude_done and region._opens_training_session_inside(statement):
            # `if remote: sess = sv.prepare_or_wait_for_session(url) else: sess = ...`:
            # the checkpoint setup goes before the branching, for every branch
            out.extend(region.session_prelude())
            rewriter.prelude_done = rewriter.prelude_outside_with = True
        new = transform(statement, rewriter)
        if isinstance(new, cst.FlattenSentinel):
            out.extend(new.nodes)
        elif new is not cst.RemovalSentinel.REMOVE:
            out.append(new)
        if trains and k == trains[-1] and rewriter.prelude_outside_with:
            # the session was no `with` block: the final save follows the training
            out.extend(region.session_epilogue(out))
    return out


def _stacked_groups(pending: str, unpack: str, feed: str, tup: str) -> str:
    """Emitted lines grouping the pending steps by their arguments' shapes and
    stacking each group (`stacked`, per group `steps` of (arguments, captured))."""
    return (
        f"    groups = []\n"
        f"    for arguments, captured in {pending}:\n"
        f"        {unpack} = arguments\n"
        f"{feed}"
        f"        shapes = [value.shape for value in {tup}]\n"
        f"        if not groups or groups[-1][0] != shapes:\n"
        f"            groups.append((shapes, []))\n"
        f"        groups[-1][1].append(({tup}, captured))\n"
        f"    for _, steps in groups:\n"
        f"        stacked = [tf.stack(column) for column in zip(*(arguments for arguments, _ in steps))]\n"
    )


def _fetched_attribute(run: cst.Call, built: set[str]) -> cst.Attribute | None:
    """The first fetch of ``run`` that is an attribute of a value the block
    builds (``net.loss`` of ``net = ConvNet(x, y_)``)."""
    fetches = run.args[0].value if run.args else None
    if fetches is None:
        return None
    for node in C.walk(fetches):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in built:
            return node
    return None
