"""Tower steps fed from a distributed ``tf.data`` pipeline (emit stage of TFM303).

The session loop of a tower program becomes, at first, host-side step
batching: each iteration's fed arrays are queued, stacked, and run several per
``tf.function`` call, each replica slicing its rows out of the global batch.
Where the loop computes its fed arrays from the loop index alone,

    for step in range(FLAGS.steps):
        xs, ys = synthetic_batch(step, FLAGS.batch_size)
        ... sess.run(train_op, {features: xs, labels: ys}) ...

this stage writes what TensorFlow's custom-training guides write instead: the
same batches as a ``tf.data.Dataset.from_generator`` (shaped and typed as the
placeholders were, so the step's graph is the one TF1 ran), distributed with
``strategy.experimental_distribute_dataset`` -- which splits every global batch
into consecutive equal slices, the slice tower *i* took with ``tf.split`` -- and
several steps per call in a loop inside the ``tf.function`` (steps per
execution). The rest of the loop body runs on each step's results after its
call, as before.

Only the tf.split form qualifies: towers that read the whole value, or their
rows by index, keep the replica-side slicing; a batch that depends on anything
the loop itself computes keeps the host-fed form (reported as info).
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _dataflow


class StepSpec:
    """What the tower analysis knew of one step function: its parameters'
    placeholder shapes and dtypes (code), and whether every parameter was a
    tf.split source (the only slicing a distributed dataset reproduces)."""

    def __init__(self, specs: dict[str, tuple[str, str]], split_only: bool, anchor: cst.CSTNode, run_name: str):
        self.specs = specs
        self.split_only = split_only
        self.anchor = anchor  # where a kept host-fed form is reported
        self.run_name = run_name  # the wrapper a loop calls once per step when its steps are not batched


def feed_from_datasets(module: cst.Module, rule, steps: dict[str, StepSpec]) -> cst.Module:
    """The module with each host-batched tower loop fed from a distributed dataset."""
    if not steps:
        return module
    module = transform(module, _FromDatasets(rule, steps))
    called = {n.func.value for n in C.walk(module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)}
    for spec in steps.values():
        if spec.run_name in called:
            rule.report(
                spec.anchor,
                "the training steps stay fed from host arrays, one step per tf.function call: the loop body"
                " cannot run after later steps (it reads the model or the step's results before the next step,"
                " leaves the loop on them, or binds names used after the loop), so neither a tf.data pipeline"
                " read ahead of the steps nor several steps per call would run the same program",
                hint="move evaluation and logging of the model out of the training loop, or to every N steps after"
                " the loop body's other work, to let the steps run from a distributed dataset",
                fixed=True, severity="info")
    return module


class _Refused(Exception):
    pass


def _need(condition, why: str = "") -> None:
    if not condition:
        raise _Refused(why)


class _FromDatasets(cst.CSTTransformer):
    def __init__(self, rule, steps: dict[str, StepSpec]):
        super().__init__()
        self.rule = rule
        self.steps = steps
        self.module_functions: set[str] = set()

    def visit_Module(self, node):
        self.module_functions = {st.name.value for st in node.body if isinstance(st, cst.FunctionDef)}

    def leave_IndentedBlock(self, original, updated):
        body = self._rewrite(list(updated.body))
        return updated if body is None else updated.with_changes(body=body)

    def leave_Module(self, original, updated):
        body = self._rewrite(list(updated.body))
        return updated if body is None else updated.with_changes(body=body)

    # ------------------------------------------------------------------ match
    def _rewrite(self, statements):
        for k, st in enumerate(statements):
            step_fn = _stacked_steps_function(st)
            if step_fn is None or step_fn not in self.steps:
                continue
            try:
                return self._rewrite_at(statements, k, step_fn)
            except _Refused as refused:
                if refused.args[0]:
                    self.rule.report(
                        self.steps[step_fn].anchor,
                        "the training steps stay fed from host arrays, stacked several per tf.function call:"
                        f" {refused.args[0]}, so they cannot be a tf.data pipeline giving every replica the"
                        " batches the towers trained on",
                        hint="compute each step's batch in the loop as `xs, ys = make_batch(step, ...)` from the"
                        " loop index of `for step in range(n)` (a function of this module), and slice it across"
                        " the towers with tf.split: it then becomes a distributed tf.data.Dataset",
                        fixed=True, severity="info")
                return None
        return None

    def _rewrite_at(self, statements, k, step_fn):
        spec = self.steps[step_fn]
        _need(spec.split_only, "the towers read a fed value whole or their rows by index, where a distributed"
              " dataset splits every value into consecutive slices")
        _need(2 <= k and k + 4 < len(statements))
        per_st, pending_st = statements[k - 2], statements[k - 1]
        steps_def, finish_def, run_def = statements[k], statements[k + 1], statements[k + 2]
        loop, drain = statements[k + 3], statements[k + 4]
        per = _assigned_name(per_st, "4")
        pending = _assigned_name(pending_st, "[]")
        _need(per and pending and isinstance(finish_def, cst.FunctionDef) and isinstance(run_def, cst.FunctionDef))
        run_fn = run_def.name.value
        _need(C.code_of(drain).strip() == f"{run_fn}()")
        step_def = next((s for s in statements[:k - 2] if isinstance(s, cst.FunctionDef) and s.name.value == step_fn),
                        None)
        _need(step_def is not None)
        params = [p.name.value for p in step_def.params.params]
        _need(params and not isinstance(step_def.params.star_arg, cst.Param) and set(params) <= spec.specs.keys())
        # the loop: `for index in range(count): <pre>; pending.append(((args), (captured))); if ...: run()`
        _need(isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and loop.orelse is None
              and isinstance(loop.body, cst.IndentedBlock))
        index = loop.target.value
        count = _single_range_argument(loop.iter)
        _need(count is not None, "the training loop is not `for step in range(n)`")
        body = list(loop.body.body)
        _need(len(body) >= 2 and C.code_of(body[-1]).strip() == f"if len({pending}) == {per}:\n    {run_fn}()")
        arguments, captured = _queued(body[-2], pending)
        _need(len(arguments) == len(params) and all(isinstance(a, cst.Name) for a in arguments))
        names = [a.value for a in arguments]
        pre = body[:-2]
        makers = [st for st in pre if _assigns_exactly(st, names)]
        _need(len(makers) == 1, "the fed values are not made by one statement of the loop")
        maker = makers[0]
        batch_call = C.assignment(maker)[1] if C.assignment(maker)[0] else None
        _need(isinstance(batch_call, cst.Call) and isinstance(batch_call.func, cst.Name)
              and batch_call.func.value in self.module_functions,
              "the fed values are not the result of calling a function of this module")
        others = [st for st in pre if st is not maker]
        loop_bound = _dataflow.assigned_anywhere(body) | {index}
        # the batch is a function of the index and of values the loop does not change
        _need(not (C.names_used(batch_call) - {index}) & loop_bound,
              "the batch is computed from values the loop itself computes")
        _need(not (C.names_used(count) & loop_bound) and not any(isinstance(n, cst.Call) for n in C.walk(count)),
              "the loop's step count is not a plain value")
        # the fed arrays are read by the step only
        for name in names:
            uses = sum(len(_name_nodes(st, name)) for st in statements)
            _need(uses == 2, f"`{name}` is read outside the step too")
        _need(not set(names) & set(captured), "the fed values are read after the step too")
        return self._emit(statements, k, step_def, spec, params, per_st, per, steps_def, finish_def, run_def,
                          loop, drain, index, count, batch_call, others)

    # ------------------------------------------------------------------ emit
    def _emit(self, statements, k, step_def, spec, params, per_st, per, steps_def, finish_def, run_def, loop,
              drain, index, count, batch_call, others):
        rule = self.rule
        strategy = rule.strategy_name
        step_fn = step_def.name.value
        dataset = rule._fresh("dataset")
        iterator = rule._fresh("iterator")
        first = rule._fresh("first_step")
        taken = rule._fresh("call_steps")
        count_code = C.code_of(count)
        signature = ",".join(f"\n        tf.TensorSpec({spec.specs[p][0]}, {spec.specs[p][1]})" for p in params)
        signature += "," if len(params) == 1 else ""
        setup = C.stmts(
            "# The batches the TF1 loop fed, in order; each replica takes its slice of every\n"
            "# batch, as tower i took tf.split slice i of it.\n"
            f"{dataset} = tf.data.Dataset.from_generator(\n"
            f"    lambda: ({C.code_of(batch_call)} for {index} in range({count_code})),\n"
            f"    output_signature=({signature}))\n"
            f"{iterator} = iter({strategy}.experimental_distribute_dataset({dataset}))\n"
            "# A tf.function call costs more than a TF1 session's run of its cached graph:\n"
            f"# {steps_def.name.value} runs {per} steps per call.\n"
            f"{per} = 4\n"
        )
        setup[0] = setup[0].with_changes(leading_lines=[cst.EmptyLine(indent=False), *setup[0].leading_lines])
        steps_fn = steps_def.name.value
        many = C.stmt(
            "@tf.function\n"
            f"def {steps_fn}(iterator, steps):\n"
            "    # `steps` training steps, each on the next batch of the dataset.\n"
            f"    return [{step_fn}(*next(iterator)) for _ in range(steps)]\n"
        ).with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        results = finish_def.params.params[0].name.value
        finish_body = [st for st in finish_def.body.body if not _is_pass(st)]
        # drop the finish function's own comment line (kept on its first statement)
        if finish_body:
            finish_body[0] = finish_body[0].with_changes(leading_lines=[])
        inner = [*others, *finish_body]
        if inner:
            host = C.stmt(
                f"for {first} in range(0, {count_code}, {per}):\n"
                f"    {taken} = min({per}, {count_code} - {first})\n"
                f"    for {index}, {results} in zip(range({first}, {first} + {taken}), {steps_fn}({iterator}, {taken})):\n"
                "        pass\n"
            )
            outer_body = list(host.body.body)
            inner_loop = outer_body[1]
            inner_loop = inner_loop.with_changes(body=inner_loop.body.with_changes(body=inner))
            host = host.with_changes(body=host.body.with_changes(body=[outer_body[0], inner_loop]))
        else:
            host = C.stmt(
                f"for {first} in range(0, {count_code}, {per}):\n"
                f"    {steps_fn}({iterator}, min({per}, {count_code} - {first}))\n"
            )
        host = host.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        new_step = _without_slicing(step_def, step_fn)
        rewritten = [new_step if st is step_def else st for st in statements[:k - 2]]
        # the comment the setup carried (on `per = 4`) is replaced by the new one
        return [*rewritten, *setup, many, host, *statements[k + 5:]]


# ---------------------------------------------------------------------- helpers
def _stacked_steps_function(st) -> str | None:
    """`step` of `@tf.function def steps(*stacked): return [step(*step) for step in zip(*(tf.unstack...))]`."""
    if not isinstance(st, cst.FunctionDef) or st.params.star_arg is cst.MaybeSentinel.DEFAULT:
        return None
    star = st.params.star_arg
    if not isinstance(star, cst.Param) or star.name.value != "stacked" or st.params.params:
        return None
    returns = [s for s in st.body.body if isinstance(s, cst.SimpleStatementLine)
               and isinstance(s.body[0], cst.Return)]
    if len(returns) != 1 or returns[0].body[0].value is None:
        return None
    value = returns[0].body[0].value
    if not (isinstance(value, cst.ListComp) and isinstance(value.elt, cst.Call)
            and isinstance(value.elt.func, cst.Name)):
        return None
    name = value.elt.func.value
    if C.code_of(value) != f"[{name}(*step) for step in zip(*(tf.unstack(value) for value in stacked))]":
        return None
    return name


def _assigned_name(st, value_code: str) -> str | None:
    targets, value, _ = C.assignment(st)
    if len(targets) == 1 and value is not None and C.code_of(value) == value_code:
        return targets[0]
    return None


def _single_range_argument(node):
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range"
            and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star):
        return node.args[0].value
    return None


def _queued(st, pending: str):
    """(arguments, captured names) of `pending.append(((a, b), (c, d)))`."""
    _need(isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr))
    call = st.body[0].value
    _need(isinstance(call, cst.Call) and C.code_of(call.func) == f"{pending}.append" and len(call.args) == 1)
    pair = call.args[0].value
    _need(isinstance(pair, cst.Tuple) and len(pair.elements) == 2)
    arguments, captured = (el.value for el in pair.elements)
    _need(isinstance(arguments, cst.Tuple) and isinstance(captured, cst.Tuple))
    _need(all(isinstance(el.value, cst.Name) for el in captured.elements))
    return [el.value for el in arguments.elements], [el.value.value for el in captured.elements]


def _assigns_exactly(st, names) -> bool:
    _, value, _ = C.assignment(st)
    if value is None or not isinstance(st, cst.SimpleStatementLine):
        return False
    target = st.body[0].targets[0].target if isinstance(st.body[0], cst.Assign) else None
    if isinstance(target, cst.Tuple):
        got = [el.value.value if isinstance(el.value, cst.Name) else None for el in target.elements]
    elif isinstance(target, cst.Name):
        got = [target.value]
    else:
        return False
    return got == list(names)




def _name_nodes(node, name: str) -> list[cst.Name]:
    return [n for n in C.walk(node) if isinstance(n, cst.Name) and n.value == name]


def _is_pass(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in statement.body)


class _SliceCalls(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated


def _without_slicing(step_def: cst.FunctionDef, step_fn: str) -> cst.FunctionDef:
    """The step with its `{step}_slice` wrapper dropped: the distributed dataset
    hands each replica its slice already."""
    slice_fn = f"{step_fn}_slice"
    body = [st for st in step_def.body.body if not (isinstance(st, cst.FunctionDef) and st.name.value == slice_fn)]
    _need(len(body) == len(step_def.body.body) - 1)
    new = step_def.with_changes(body=step_def.body.with_changes(body=body))
    return transform(new, _SliceCalls(slice_fn, f"{step_fn}_replica"))
