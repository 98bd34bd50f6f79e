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
WRITERS = {"summary.FileWriter", "train.SummaryWriter"}
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


def _summary_call(statement, qualname) -> tuple[list[str], cst.Call] | None:
    names, value, _ = C.assignment(statement)
    call = value if value is not None else C.single_expr(statement)
    if isinstance(call, cst.Call) and qualname(call.func) in SUMMARY_OPS:
        return names, call
    return None


def plan_summaries(module, inner, after, qualname, fetchable) -> SummaryPlan | None:
    """What the graph block's summary ops record, or None when the program
    has none (or builds some where this plan cannot see them: a helper
    function, another block). `fetchable(name)`: can a step return it?"""
    plan = SummaryPlan()
    everything: list[Summary] = []
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
    for call in C.calls_in(module):
        if qualname(call.func) in SUMMARY_OPS and id(call) not in seen and not any(
                call is n for st in inner for n in C.walk(st)):
            return None
    for statement in [*inner, *after]:
        for node in C.walk(statement):
            names, value, _ = C.assignment(node)
            if len(names) == 1 and isinstance(value, cst.Call) and qualname(value.func) in WRITERS:
                plan.writers.add(names[0])
    return plan


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
        if len(names) == 1 and isinstance(value, cst.Call) and self.qualname(value.func) in WRITERS:
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
                          lambda name: name in graph.compute_names)
    if plan is None:
        return after
    moved = [st for st in inner if C.assignment(st)[0] and set(C.assignment(st)[0]) <= plan.writers]
    rewriter = _Rewrite(plan, qualname, set(rule.taken))
    new = [statement.visit(rewriter) for statement in [*moved, *after]]
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
