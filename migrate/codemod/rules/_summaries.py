"""TF1 summaries of a session loop, planned as TF2 ``tf.summary`` writes.

TF1 programs record summaries in three steps: summary ops in the graph
(``tf.summary.scalar("loss", loss)``, merged by ``tf.summary.merge_all()``),
the merged op fetched with the train op (``_, s, step = sess.run([train_op,
summary_op, global_step])``) and its serialized result written by a
``FileWriter`` (``writer.add_summary(s, step)``). TF2 writes the values
themselves under a default writer::

    writer = tf.summary.create_file_writer(logdir)
    ...
    loss_value, step = run_train_step(...)
    with writer.as_default():
        tf.summary.scalar("loss", loss_value, step=step)

This module rewrites the TF1 program into that shape *before* the session
stage migrates it: the summary op in a fetch list becomes the summarized
tensors (which the step function then returns, as for any fetched value),
``add_summary`` becomes the writes at the same point of the loop, and the
``FileWriter`` becomes ``create_file_writer``. What cannot be carried over
exactly is reported, located, and left to the session stage's removal.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C

# TF1 summary ops whose TF2 counterpart records the same values:
# TF1 function -> TF2 function (name, data; `step=` added)
CARRIED = {"summary.scalar": "scalar", "summary.histogram": "histogram"}
SUMMARY_OPS = {
    "summary.scalar", "summary.histogram", "summary.image", "summary.audio", "summary.text",
    "summary.tensor_summary",
}
WRITERS = {"summary.FileWriter", "train.SummaryWriter", "summary.FileWriterCache.get"}
# TF1's writer cache, also imported from its private module (summary_io.SummaryWriterCache)
_CACHE_GETS = ("FileWriterCache.get", "SummaryWriterCache.get")


def is_writer(func: cst.BaseExpression, qualname) -> bool:
    """A TF1 FileWriter constructor, or the writer cache's get(logdir)."""
    return qualname(func) in WRITERS or C.code_of(func).endswith(_CACHE_GETS)
# FileWriter arguments and their create_file_writer spelling (None: dropped, with the reason said)
WRITER_ARGS = {"logdir": "logdir", "graph": None, "max_queue": "max_queue", "filename_suffix": "filename_suffix",
               "flush_secs": "flush_millis"}
WRITER_POSITIONS = ["logdir", "graph", "max_queue", "flush_secs", "graph_def", "filename_suffix"]


@dataclass
class Summary:
    kind: str  # TF2 function: "scalar", "histogram"
    name: cst.BaseExpression
    tensor: str  # the summarized graph name
    node: cst.Call  # the TF1 call, for reports


@dataclass
class SummaryPlan:
    ops: dict[str, list[Summary]] = field(default_factory=dict)  # summary op name -> what it records
    writers: set[str] = field(default_factory=set)
    # (node, why) of summaries or writes not carried over
    left: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    moved_writers: list[cst.BaseStatement] = field(default_factory=list)  # FileWriters built in the graph block
    carried: bool = False
    everything: list[Summary] = field(default_factory=list)  # what merge_all() would merge, in order


def _summary_call(statement, qualname) -> tuple[list[str], cst.Call] | None:
    names, value, _ = C.assignment(statement)
    call = value if value is not None else C.single_expr(statement)
    if isinstance(call, cst.Call) and qualname(call.func) in SUMMARY_OPS:
        return names, call
    return None


def plan_summaries(module, inner, after, qualname, fetchable, variables=()) -> SummaryPlan | None:
    """What the graph block's summary ops record, or None when the program
    has none (or builds some where this plan cannot see them: a helper
    function, another block). `fetchable(name)`: can a step return it?"""
    plan = SummaryPlan()
    everything = plan.everything
    seen: set[int] = set()
    for statement in inner:
        found = _summary_call(statement, qualname)
        if found is None:
            names, value, _ = C.assignment(statement)
            q = qualname(value.func) if isinstance(value, cst.Call) else None
            if len(names) == 1 and q == "summary.merge_all" and not value.args:
                plan.ops[names[0]] = everything  # filled as the block goes on: merge_all sees them all
            elif len(names) == 1 and q == "summary.merge" and isinstance(C.arg(value, 0, "inputs"), cst.List):
                parts = [el.value for el in C.arg(value, 0, "inputs").elements]
                if not all(isinstance(p, cst.Name) and p.value in plan.ops for p in parts):
                    return None
                plan.ops[names[0]] = [s for p in parts for s in plan.ops[p.value]]
            continue
        names, call = found
        seen.add(id(call))
        kind = CARRIED.get(qualname(call.func))
        name, tensor = C.arg(call, 0, "name"), C.arg(call, 1, "tensor") or C.arg(call, 1, "values")
        others = [a for a in call.args[2:] if a.keyword is None or a.keyword.value not in ("name", "tensor", "values")]
        if kind is None:
            why = (f"`{C.code_of(call.func)}` has no TF2 counterpart recording the same values"
                   " (TF2's image summary takes values in [0, 1] where TF1 rescaled them)")
            plan.left.append((call, why))
        elif isinstance(tensor, cst.Name) and tensor.value in variables and not others and name is not None:
            why = (f"it records the variable `{tensor.value}`, which TF1 read in the same run as the update, in no"
                   " set order; a TF2 step reads it either before or after its update")
            plan.left.append((call, why))
        elif others or name is None or not (isinstance(tensor, cst.Name) and fetchable(tensor.value)):
            why = (f"`{C.code_of(call).strip()}` records a value the training step cannot return"
                   " (an expression, or extra arguments: collections, family)")
            plan.left.append((call, why))
        else:
            summary = Summary(kind, name, tensor.value, call)
            everything.append(summary)
            if len(names) == 1:
                plan.ops[names[0]] = [summary]
    if not seen:
        return None
    # summary ops built anywhere else (a model helper's histograms) would be merged too
    if summary_elsewhere(module, inner, qualname, seen) is not None:
        return None
    for statement in [*inner, *after]:
        for node in C.walk(statement):
            names, value, _ = C.assignment(node)
            if len(names) == 1 and isinstance(value, cst.Call) and is_writer(value.func, qualname):
                plan.writers.add(names[0])
    return plan


def summary_elsewhere(module, inner, qualname, seen=frozenset()) -> cst.Call | None:
    """A summary op built outside the graph block's own statements (in a
    helper the block calls, say), which merge_all() also merged."""
    own_calls = [found[1] for found in (_summary_call(st, qualname) for st in inner) if found is not None]
    own = {id(call) for call in own_calls}
    # ``module`` is the tree as parsed, ``inner`` the block as the rule has rewritten it so far
    # (new nodes where it renamed something inside): the block's own calls are also matched by code
    unmatched = Counter(C.code_of(call) for call in own_calls)
    for call in C.calls_in(module):
        if qualname(call.func) not in SUMMARY_OPS or id(call) in seen or id(call) in own:
            continue
        code = C.code_of(call)
        if unmatched[code] > 0:
            unmatched[code] -= 1
            continue
        if not (inner and _exclusive_branches(module, inner[0], call)):
            return call
    return None


def _exclusive_branches(module, statement, call) -> bool:
    """Whether ``statement`` and ``call`` lie in different branches of one
    `if` (a program training either standalone or distributed builds one
    graph or the other: merge_all() in one never saw the other's summaries)."""
    for node in C.walk(module):
        if not isinstance(node, cst.If) or node.orelse is None:
            continue
        body = {id(n) for n in C.walk(node.body)}
        orelse = {id(n) for n in C.walk(node.orelse)}
        if (id(statement) in body and id(call) in orelse) or (id(statement) in orelse and id(call) in body):
            return True
    return False


class _Rewrite(cst.CSTTransformer):
    """The summary ops in fetch lists become their tensors; add_summary the
    TF2 writes; FileWriter create_file_writer."""

    def __init__(self, plan: SummaryPlan, qualname, taken: set[str]):
        super().__init__()
        self.plan = plan
        self.qualname = qualname
        self.taken = taken
        self.results: dict[str, list[tuple[Summary, str]]] = {}  # result name -> (summary, value name)

    def leave_SimpleStatementLine(self, original, updated):
        names, value, assign = C.assignment(original)
        if len(names) == 1 and isinstance(value, cst.Call) and is_writer(value.func, self.qualname):
            return updated.with_changes(body=[updated.body[0].with_changes(value=self._writer(value))])
        if assign is not None and isinstance(value, cst.Call) and C.code_of(value.func).endswith(".run"):
            return self._fetch(original, updated, assign, value)
        lone = C.single_expr(original)
        if isinstance(lone, cst.Call) and isinstance(lone.func, cst.Attribute) and (
                lone.func.attr.value == "add_summary" and isinstance(lone.func.value, cst.Name)
                and lone.func.value.value in self.plan.writers):
            summary = C.arg(lone, 0, "summary")
            step = C.arg(lone, 1, "global_step")
            if isinstance(summary, cst.Name) and summary.value in self.results and step is not None:
                writes = "".join(
                    f"    tf.summary.{s.kind}({C.code_of(s.name)}, {v}, step={C.code_of(step)})\n"
                    for s, v in self.results[summary.value])
                self.plan.carried = True
                return C.stmt(f"with {lone.func.value.value}.as_default():\n{writes}").with_changes(
                    leading_lines=original.leading_lines)
            if isinstance(summary, cst.Name) and summary.value in self.results:
                why = f"`{C.code_of(lone)}` gives no global step: TF2 writes each summary at an explicit step"
                self.plan.left.append((original, why))
        return updated

    def _writer(self, call: cst.Call) -> cst.Call:
        args = []
        for k, a in enumerate(call.args):
            keyword = a.keyword.value if a.keyword is not None else (
                WRITER_POSITIONS[k] if k < len(WRITER_POSITIONS) else None)
            new = WRITER_ARGS.get(keyword or "")
            if new is None:
                continue  # the graph: TF2 traces functions instead (tf.summary.trace_on)
            value = C.code_of(a.value)
            if keyword == "flush_secs":
                value = f"{value} * 1000"
            args.append(value if keyword == "logdir" else f"{new}={value}")
        return C.expr(f"tf.summary.create_file_writer({', '.join(args)})")

    def _fetch(self, original, updated, assign, call):
        fetches = C.arg(call, 0, "fetches")
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if isinstance(fetches, cst.Name) and fetches.value in self.plan.ops and isinstance(target, cst.Name):
            items, targets = [fetches], [target]
        elif isinstance(fetches, (cst.List, cst.Tuple)) and isinstance(target, (cst.List, cst.Tuple)) and (
                len(fetches.elements) == len(target.elements)):
            items = [el.value for el in fetches.elements]
            targets = [el.value for el in target.elements]
        else:
            return updated
        if not any(isinstance(i, cst.Name) and i.value in self.plan.ops for i in items):
            return updated
        # values the same run already fetches into a name
        fetched = {i.value: t.value for i, t in zip(items, targets)
                   if isinstance(i, cst.Name) and isinstance(t, cst.Name) and t.value != "_"}
        new_items, new_targets = [], []
        for item, name in zip(items, targets):
            if not (isinstance(item, cst.Name) and item.value in self.plan.ops):
                new_items.append(C.code_of(item))
                new_targets.append(C.code_of(name))
                continue
            if not isinstance(name, cst.Name):
                return updated
            values = []
            for summary in self.plan.ops[item.value]:
                if summary.tensor not in fetched:
                    fetched[summary.tensor] = C.fresh(f"{summary.tensor}_value", self.taken)
                    new_items.append(summary.tensor)
                    new_targets.append(fetched[summary.tensor])
                values.append((summary, fetched[summary.tensor]))
            if name.value != "_":
                self.results[name.value] = values
        if not new_items:
            return updated.with_changes(body=[cst.Expr(updated.body[0].value)])
        single = len(new_items) == 1 and isinstance(fetches, cst.Name)
        fetch_code = new_items[0] if single else "[" + ", ".join(new_items) + "]"
        target_code = ", ".join(new_targets) if len(new_targets) > 1 else (
            new_targets[0] if single else f"[{new_targets[0]}]")
        new_call = _replace_fetches(updated.body[0].value, fetch_code)
        return updated.with_changes(body=[updated.body[0].with_changes(
            targets=[cst.AssignTarget(C.expr(target_code))], value=new_call)])


def _replace_fetches(call: cst.Call, code: str) -> cst.Call:
    args = list(call.args)
    for k, a in enumerate(args):
        if (a.keyword is None and k == 0) or (a.keyword is not None and a.keyword.value == "fetches"):
            args[k] = a.with_changes(value=C.expr(code))
            break
    return call.with_changes(args=args)


def carry_summaries(rule, graph, inner, after, reference: str):
    """`after` (the code following the graph block, up to its end) with the
    block's summaries written by TF2 writers, FileWriters the block built
    moved to its start; `after` itself where the program has no summaries
    or they cannot all be carried over (each reported, located; the session
    stage then removes the TF1 summary code and says so)."""
    qualname = rule.qualname
    plan = plan_summaries(rule.ctx.module, inner, after, qualname,
                          lambda name: name in graph.compute_names, set(graph.variables))
    rule.summaries_elsewhere = ""
    if plan is None:
        other = summary_elsewhere(rule.ctx.module, inner, qualname)
        if other is not None:
            function = next((f.name.value for f in C.walk(rule.ctx.module) if isinstance(f, cst.FunctionDef)
                             and any(n is other for n in C.walk(f))), None)
            where = f" in `{function}()`" if function else ""
            rule.summaries_elsewhere = (f" (merge_all() also merged `{C.code_of(other.func)}(...)`{where}, built"
                                        " outside the graph block's own statements)")
        return after
    moved = [st for st in inner if C.assignment(st)[0] and set(C.assignment(st)[0]) <= plan.writers]
    rewriter = _Rewrite(plan, qualname, set(rule.taken))
    new = [statement.visit(rewriter) for statement in [*moved, *after]]
    if not rewriter.results and not plan.writers:
        # no run fetches a summary op: the session itself may have saved them
        return session_summaries(rule, graph, plan, after, reference)
    # every fetched summary result must now be written by TF2 (a result handed to a
    # Supervisor or kept for later has no TF2 meaning)
    left = set(rewriter.results) & set().union(*(C.names_used(st) for st in new)) if new else set()
    for node, why in plan.left:
        rule.report(node, f"summary not carried over: {why}; TF2 writes this summary nowhere",
                    hint="return the value from the training step and write it with the matching TF2 tf.summary"
                    " function (tf.summary.image takes floats in [0, 1]) and step= under the writer's as_default()",
                    reference=reference, fixed=False)
    if not plan.carried or left:
        return after
    rule.taken |= rewriter.taken
    graph.dropped -= plan.writers
    first = next(s.node for summaries in plan.ops.values() for s in summaries)
    rule.report(first, "TF1 summaries are now TF2 tf.summary writes: the step returns the summarized values, and"
                " each `add_summary` writes them under the writer (tf.summary.create_file_writer) at the same"
                " point of the loop and global step; a FileWriter's graph argument is not written (TF2 has no"
                " session graph). TF 2's tf.summary functions are implemented by the tensorboard package, which"
                " TensorFlow 2.21 no longer installs: add it to the program's requirements", fixed=True,
                severity="info", reference=reference)
    return new


# ---------------------------------------------------------------- the session's own summary saving

def session_summaries(rule, graph, plan: SummaryPlan, after, reference: str):
    """MonitoredTrainingSession(checkpoint_dir=d) saved merge_all() into d (or
    summary_dir) every save_summaries_steps (100 by default) global steps,
    from the first step on, on the chief (SummarySaverHook): the same writes
    follow each train step, of the values the step returns, at the global
    step after it. Time-based saving, or a chief chosen at run time under
    MultiWorkerMirroredStrategy (every worker runs the loop), is reported."""
    from migrate.codemod.rules._program import PSS

    qualname = rule.qualname
    found = None
    for statement in after:
        for call in C.calls_in(statement):
            if qualname(call.func) == "train.MonitoredTrainingSession":
                found = found or call
    if found is None or not plan.everything:
        return after
    directory = C.arg(found, None, "summary_dir") or C.arg(found, 2, "checkpoint_dir")
    steps, secs = C.arg(found, None, "save_summaries_steps"), C.arg(found, None, "save_summaries_secs")
    is_chief = C.arg(found, 1, "is_chief")
    if directory is None or C.code_of(directory) == "None" or (steps is not None and C.code_of(steps) == "None"
                                                               and (secs is None or C.code_of(secs) == "None")):
        return after  # TF1 saved no summaries either
    why = None
    if secs is not None and C.code_of(secs) != "None":
        why = "they were saved every save_summaries_secs seconds by the session"
    elif rule.strategy != PSS and is_chief is not None and C.code_of(is_chief) != "True":
        why = ("the session saved them on the chief only, and under MultiWorkerMirroredStrategy every worker runs"
               " the loop")
    elif graph.global_step is None:
        why = "the session saved them at the global step, and the graph has none"
    if why is not None:
        rule.report(plan.everything[0].node, f"TF1 summaries are not carried over: {why}", hint="return the"
                    " values from the training step and write them with tf.summary.scalar(name, value, step=step)"
                    " under tf.summary.create_file_writer(logdir).as_default() in the loop",
                    reference=reference, fixed=False)
        return after
    taken = rule.taken
    writer, due = C.fresh("summary_writer", taken), C.fresh("next_summary_step", taken)
    every = C.code_of(steps) if steps is not None else "100"
    placer = _SummaryAfterStep(rule, graph, plan.everything, writer, due, every, taken)
    new = placer.block(after)
    if not placer.placed:
        return after
    setup = C.stmts(f"{writer} = tf.summary.create_file_writer({C.code_of(directory)})\n{due} = 0\n")
    out = []
    for statement in new:
        if any(call is found for call in C.calls_in(statement)) or any(
                C.code_of(call) == C.code_of(found) for call in C.calls_in(statement)):
            setup[0] = setup[0].with_changes(leading_lines=statement.leading_lines)
            out += setup
            statement = statement.with_changes(leading_lines=[])
        out.append(statement)
    rule.report(plan.everything[0].node, "TF1 summaries the session saved (MonitoredTrainingSession's"
                f" save_summaries_steps, every {every} global steps from the first) are now TF2 tf.summary writes"
                f" after the train step, under `{writer}` in the same directory, of the values the step returns."
                " TF 2's tf.summary functions are implemented by the tensorboard package, which TensorFlow 2.21 no"
                " longer installs: add it to the program's requirements", fixed=True, severity="info",
                reference=reference)
    return out


class _SummaryAfterStep:
    """After each train run: the writes SummarySaverHook made when due."""

    def __init__(self, rule, graph, summaries, writer, due, every, taken):
        self.rule, self.graph, self.summaries = rule, graph, summaries
        self.writer, self.due, self.every, self.taken = writer, due, every, taken
        self.placed = False

    def _train_run(self, statement):
        _, value, assign = C.assignment(statement)
        call = value if assign is not None else C.single_expr(statement)
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "run"):
            return None
        fetches = C.arg(call, 0, "fetches")
        items = [el.value for el in fetches.elements] if isinstance(fetches, (cst.List, cst.Tuple)) else [fetches]
        if not any(isinstance(i, cst.Name) and i.value == self.graph.train_op for i in items):
            return None
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        listed = isinstance(fetches, (cst.List, cst.Tuple))
        if target is None:
            targets = ["_"] * len(items)
        elif listed and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(items):
            targets = [C.code_of(el.value) for el in target.elements]
        elif not listed:
            targets = [C.code_of(target)]
        else:
            return None
        return call, items, targets

    def _after(self, statement, found):
        call, items, targets = found
        codes = [C.code_of(i) for i in items]
        fetched = {c: t for c, t in zip(codes, targets) if t != "_" and isinstance(C.expr(t), cst.Name)}
        for wanted in [*(s.tensor for s in self.summaries), self.graph.global_step]:
            if wanted not in fetched:
                fetched[wanted] = C.fresh(f"{wanted}_value", self.taken)
                codes.append(wanted)
                targets.append(fetched[wanted])
        args = list(call.args)
        args[0] = args[0].with_changes(value=C.expr("[" + ", ".join(codes) + "]"))
        run = C.stmt(f"{', '.join(targets)} = {C.code_of(call.with_changes(args=args))}\n").with_changes(
            leading_lines=statement.leading_lines)
        step = f"{fetched[self.graph.global_step]} + 1"
        writes = "".join(f"        tf.summary.{s.kind}({C.code_of(s.name)}, {fetched[s.tensor]}, step={step})\n"
                         for s in self.summaries)
        self.placed = True
        return [run, *C.stmts(
            f"# Summaries as the session saved them: the global step after this one, every {self.every} steps.\n"
            f"if {step} >= {self.due}:\n    with {self.writer}.as_default():\n{writes}"
            f"    {self.due} = {step} + {self.every}\n")]

    def block(self, statements, descend: bool = True):
        """`statements` with the writes placed; `descend`: also in their inner
        blocks (the nested transformer handles each inner block once, bottom-up)."""
        out = []
        for statement in statements:
            found = self._train_run(statement) if isinstance(statement, cst.SimpleStatementLine) else None
            if found is not None:
                out += self._after(statement, found)
            elif descend and not isinstance(statement, cst.SimpleStatementLine):
                out.append(C.map_inner_blocks(statement, lambda inner: self.block(inner, descend=False)))
            else:
                out.append(statement)
        return out
