"""Fed NumPy batches become a ``tf.data`` pipeline on each worker (emit stage of
TFM301, MultiWorkerMirroredStrategy).

The training rule first carries ``feed_dict`` over as it was: the loop makes
each step's arrays on the host and hands them to a run wrapper, which turns
them into tensors and calls the step::

    step = global_step.numpy()
    while step < args.steps:
        inputs, targets = global_batch(step, args.batch_size)
        shard = slice(task_index * per_worker, (task_index + 1) * per_worker)
        loss_value, next_step = run_train_step(inputs[shard], targets[shard])
        ...
        step = next_step

Where the arrays come from statements of the loop that depend only on values
the loop does not change -- or also on the loop's step, when that step is the
training step's count (the step returns ``global_step`` after adding 1 to it,
and the loop sets its step to that) -- this stage writes the same statements
in a generator, one step after another from the loop's first step, read
through a ``tf.data`` pipeline (each worker makes its own batches, as the loop
did, so what a worker trains on is the legacy one bit for bit)::

    def train_step_inputs(step):
        while True:
            inputs, targets = global_batch(step, args.batch_size)
            shard = slice(task_index * per_worker, (task_index + 1) * per_worker)
            yield inputs[shard], targets[shard]
            step += 1

    inputs_iterator = iter(tf.data.Dataset.from_generator(
        train_step_inputs, args=(step,), output_signature=(...)).prefetch(tf.data.AUTOTUNE))
    while step < args.steps:
        loss_value, next_step = run_train_step(*next(inputs_iterator))

Each worker's iterator is its own (the strategy's input to the worker's
replica), not one of ``strategy.distribute_datasets_from_function``: that
distributed iterator gives the same batches but agrees with the other workers
on every ``next`` (whether each still has data), and measured on the sync
reference (2 workers, loopback) it ran the steps at 0.6-0.8x the legacy job's
rate where this form runs at 2x (the generator runs ahead of the steps,
prefetched, as the host loop could not).

The dataset converts each array to its placeholder's dtype (what ``feed_dict``
did). The loop must be the only caller of the run wrapper, the arrays and the
names made for them read nowhere else; otherwise the host-fed form stays.
Fix safety: the generator makes the batches in the loop's order, the pipeline
reading at most a few steps ahead; a batch function whose state the loop reads
(an epoch counter of the reader) would see it ahead, so a loop naming the
batch source anywhere else keeps the host-fed form.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _dataflow


class _Refused(Exception):
    pass


def _need(condition) -> None:
    if not condition:
        raise _Refused


def feed_from_steps(module: cst.Module, rule) -> cst.Module:
    """The module with each MultiWorkerMirroredStrategy loop that feeds its
    step host arrays fed from a tf.data pipeline instead."""
    wrappers = _run_wrappers(module, rule.strategy_name)
    if not wrappers:
        return module
    calls: dict[str, int] = {}
    for node in C.walk(module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in wrappers:
            calls[node.func.value] = calls.get(node.func.value, 0) + 1
    once = {name: info for name, info in wrappers.items() if calls.get(name) == 1}
    if not once:
        return module
    feeding = _FromGenerators(rule, once, _global_step_steps(module), module)
    module = transform(module, feeding)
    if not feeding.converted:
        return module
    return transform(module, _Unconverted(feeding.converted))


def _run_wrappers(module: cst.Module, strategy: str) -> dict[str, tuple[str, list[str], list[str]]]:
    """{run wrapper: (step function, parameters, dtype codes)} of the wrappers
    that only convert their arguments and call the step."""
    out = {}
    for node in C.walk(module):
        if not isinstance(node, cst.FunctionDef) or not isinstance(node.body, cst.IndentedBlock):
            continue
        params = [p.name.value for p in node.params.params]
        body = list(node.body.body)
        if not params or node.params.star_arg is not cst.MaybeSentinel.DEFAULT or len(body) != 3 \
                or node.params.kwonly_params or node.params.star_kwarg is not None:
            continue
        names, value, _ = C.assignment(body[0])
        if names != params or not isinstance(value, cst.Tuple) or len(value.elements) != len(params):
            continue
        dtypes = []
        for name, element in zip(params, value.elements, strict=True):
            call = element.value
            if not (isinstance(call, cst.Call) and C.code_of(call.func) == "tf.convert_to_tensor"
                    and len(call.args) == 2 and C.code_of(call.args[0].value) == name):
                break
            dtypes.append(C.code_of(call.args[1].value))
        if len(dtypes) != len(params):
            continue
        names, value, _ = C.assignment(body[1])
        step = value.args[1].value if isinstance(value, cst.Call) and len(value.args) == 2 else None
        if names != ["results"] or C.code_of(value.func) != "tf.nest.map_structure" or C.code_of(value.args[0].value) \
                != f"lambda value: {strategy}.experimental_local_results(value)[0].numpy()" \
                or not isinstance(step, cst.Call) or not isinstance(step.func, cst.Name) \
                or [C.code_of(a.value) for a in step.args] != params or C.code_of(body[2]).strip() != "return results":
            continue
        out[node.name.value] = (step.func.value, params, dtypes)
    return out


def _global_step_steps(module: cst.Module) -> dict[str, tuple[str, int]]:
    """{step function: (global step variable, index of its result)} of the
    steps whose replica function adds 1 to a variable and returns it (the
    whole result or one element of the returned tuple) read after that."""
    out = {}
    for node in C.walk(module):
        if not isinstance(node, cst.FunctionDef):
            continue
        inner = [st for st in C.body_of(node.body) if isinstance(st, cst.FunctionDef)
                 and st.name.value == f"{node.name.value}_replica"]
        if len(inner) != 1:
            continue
        body = list(C.body_of(inner[0].body))
        if not body or not isinstance(body[-1], cst.SimpleStatementLine) or not isinstance(body[-1].body[0], cst.Return):
            continue
        returned = body[-1].body[0].value
        elements = [el.value for el in returned.elements] if isinstance(returned, cst.Tuple) else [returned]
        reads = [k for k, el in enumerate(elements) if isinstance(el, cst.Call) and not el.args
                 and isinstance(el.func, cst.Attribute) and el.func.attr.value == "read_value"
                 and isinstance(el.func.value, cst.Name)]
        if len(reads) != 1:
            continue
        variable = elements[reads[0]].func.value.value
        adds = [st for st in body if C.code_of(st).strip() == f"{variable}.assign_add(1)"]
        if len(adds) == 1:
            out[node.name.value] = (variable, reads[0] if isinstance(returned, cst.Tuple) else -1)
    # the variable changes nowhere else in the module
    for name, (variable, _) in list(out.items()):
        writes = [n for n in C.walk(module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                  and isinstance(n.func.value, cst.Name) and n.func.value.value == variable
                  and n.func.attr.value.startswith("assign")]
        if len(writes) != 1:
            del out[name]
    return out


class _FromGenerators(cst.CSTTransformer):
    def __init__(self, rule, wrappers, counted, module):
        super().__init__()
        self.module = module
        self.rule = rule
        self.wrappers = wrappers
        self.counted = counted
        self.converted: set[str] = set()
        self.depth = [0]
        self.block_depth: dict[int, int] = {}

    # loops around a block: a loop inside another would build its pipeline anew
    # at each outer iteration, after the previous one had read ahead of its steps
    def visit_FunctionDef(self, node):
        self.depth.append(0)

    def leave_FunctionDef(self, original, updated):
        self.depth.pop()
        return updated

    def visit_For(self, node):
        self.depth[-1] += 1

    def leave_For(self, original, updated):
        self.depth[-1] -= 1
        return updated

    def visit_While(self, node):
        self.depth[-1] += 1

    def leave_While(self, original, updated):
        self.depth[-1] -= 1
        return updated

    def visit_IndentedBlock(self, node):
        self.block_depth[id(node)] = self.depth[-1]

    def leave_IndentedBlock(self, original, updated):
        if self.block_depth.get(id(original)):
            return updated
        body = list(updated.body)
        for k, statement in enumerate(body):
            if not isinstance(statement, (cst.While, cst.For)):
                continue
            try:
                new = self._rewrite(body, k)
            except _Refused:
                continue
            return updated.with_changes(body=new)
        return updated

    def _rewrite(self, block, k):
        outer = block[k]
        # the loop feeding the step: this one, or one nested in it (through loops and ifs)
        inner = [n for n in C.walk(outer) if isinstance(n, (cst.For, cst.While)) and isinstance(
            n.body, cst.IndentedBlock) and any(self._feeds(st) for st in n.body.body)]
        _need(len(inner) == 1 and _nested_in_blocks(outer, inner[0]))
        loop = inner[0]
        _need(loop.orelse is None)
        body = list(loop.body.body)
        hits = [j for j, st in enumerate(body) if any(
            isinstance(c.func, cst.Name) and c.func.value in self.wrappers for c in C.calls_in(st))]
        _need(len(hits) == 1 and sum(self._feeds(n) for n in C.walk(outer) if isinstance(
            n, cst.SimpleStatementLine)) == 1)
        at = hits[0]
        call_statement = body[at]
        _need(isinstance(call_statement, cst.SimpleStatementLine) and len(call_statement.body) == 1)
        small = call_statement.body[0]
        call = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
        _need(isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in self.wrappers)
        run = call.func.value
        step_fn, params, dtypes = self.wrappers[run]
        _need(len(call.args) == len(params) and all(a.keyword is None and not a.star for a in call.args))
        arguments = [a.value for a in call.args]
        # the statements making the arguments: assignments before the call, closed backwards
        needed = set().union(*(C.names_used(a) for a in arguments))
        makers = []
        for st in reversed(body[:at]):
            names, value, _ = C.assignment(st)
            if names and set(names) & needed:
                _need(isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and value is not None)
                makers.insert(0, st)
                needed |= C.names_used(value)
        # the loop makes each step's inputs (fed values the loop only passes on stay as they are)
        _need(any(list(C.calls_in(node)) for node in [*makers, *arguments]))
        made = set().union(*(set(C.assignment(st)[0]) for st in makers)) if makers else set()
        free = set().union(*(C.names_used(a) for a in arguments)) | set().union(
            *(C.names_used(C.assignment(st)[1]) for st in makers)) if makers else needed
        free -= made
        # the made names are read by the step's arguments only
        for name in made:
            _need(_count(outer, name) == sum(_count(st, name) for st in makers) + sum(
                _count(a, name) for a in arguments))
            _need(not any(_count(st, name) for j, st in enumerate(block) if j != k))
        # the batch source is read by the makers only (the pipeline moves it ahead of the loop)
        for source in _sources(makers):
            _need(_module_source_reads(self.module, source, makers[0])
                  == sum(_source_reads(st, source) for st in makers))
        # what the loops change: the batch depends on none of it, but the training step's count
        changed = _dataflow.assigned_anywhere([st for st in C.body_of(outer.body)]) - made
        if isinstance(outer, cst.For):
            changed |= C.names_used(outer.target)
        changed |= {n for node in C.walk(outer) if isinstance(node, cst.For) for n in C.names_used(node.target)}
        counter = None
        if free & changed:
            _need(loop is outer)
            counter = self._counter(block, k, loop, body, call_statement, small, step_fn, free & changed)
        return self._emit(block, k, outer, loop, body, at, makers, arguments, run, step_fn, dtypes, counter)

    def _feeds(self, statement) -> bool:
        return isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(c.func, cst.Name) and c.func.value in self.wrappers for c in C.calls_in(statement))

    def _counter(self, block, k, loop, body, call_statement, small, step_fn, carried):
        """The loop's step when it is the training step's count (the only
        value of the loop a batch may depend on)."""
        _need(len(carried) == 1 and step_fn in self.counted and isinstance(loop, cst.While))
        (step,) = carried
        variable, index = self.counted[step_fn]
        _need(isinstance(small, cst.Assign) and len(small.targets) == 1)
        target = small.targets[0].target
        if index < 0:
            _need(isinstance(target, cst.Name))
            result = target.value
        else:
            _need(isinstance(target, cst.Tuple) and index < len(target.elements)
                  and all(isinstance(el.value, cst.Name) for el in target.elements))
            result = target.elements[index].value.value
        # `step = result` ends the loop body, the only binding of the step in the loop
        names, value, _ = C.assignment(body[-1])
        _need(names == [step] and isinstance(value, cst.Name) and value.value == result)
        _need(sum(step in C.assignment(st)[0] for st in body) == 1 and step not in _dataflow.assigned_anywhere(
            [st for st in body if not C.assignment(st)[0]]))
        _need(not any(isinstance(n, (cst.Break, cst.Continue)) for st in body for n in C.walk(st)))
        # the step starts at the count: `step = variable.numpy()` (or int of it) right before the loop
        _need(k >= 1)
        names, value, _ = C.assignment(block[k - 1])
        _need(names == [step] and C.code_of(value) in (f"{variable}.numpy()", f"int({variable}.numpy())"))
        return step

    def _emit(self, block, k, outer, loop, body, at, makers, arguments, run, step_fn, dtypes, counter):
        rule = self.rule
        generator = rule._fresh(f"{step_fn}_inputs")
        iterator = rule._fresh("inputs_iterator")
        yielded = ", ".join(C.code_of(a) for a in arguments) + ("," if len(arguments) == 1 else "")
        made = "".join("        " + C.code_of(st).strip() + "\n" for st in makers)
        signature = "".join(f"tf.TensorSpec(None, {dtype}), " for dtype in dtypes).rstrip(", ")
        signature += "," if len(dtypes) == 1 else ""
        advance = f"        {counter} += 1\n" if counter else ""
        definition = C.stmt(
            f"def {generator}({counter or ''}):\n"
            + (f"    # The inputs of each step from `{counter}` on, made as the training loop made them.\n"
               if counter else "    # The inputs of each step, made as the training loop made them.\n")
            + "    while True:\n"
            + made
            + f"        yield {yielded}\n"
            + advance
        )
        setup = C.stmts(
            "# Each worker makes its own inputs, as the loop did, through a tf.data pipeline.\n"
            f"{iterator} = iter(tf.data.Dataset.from_generator(\n"
            f"    {generator},{f' args=({counter},),' if counter else ''}\n"
            f"    output_signature=({signature})).prefetch(tf.data.AUTOTUNE))\n"
        )
        # the generator is defined before the loop's setup (the step's first value, when it has one)
        at_def = k - 1 if counter else k
        first = block[at_def]
        blank = cst.EmptyLine(indent=False)
        definition = definition.with_changes(leading_lines=[blank])
        after_definition = first.with_changes(leading_lines=[blank, *C.strip_blank_lines(first.leading_lines)])
        rest = [after_definition, *block[at_def + 1:k]] if counter else []
        setup[0] = setup[0].with_changes(leading_lines=[*([] if counter else [blank]), *setup[0].leading_lines])
        new_call = body[at].visit(_Args(run, iterator))
        new_body = [st for st in body if st not in makers]
        new_body = [new_call if st is body[at] else st for st in new_body]
        new_loop = loop.with_changes(body=loop.body.with_changes(body=new_body))
        if loop is not outer:
            new_loop = transform(outer, _Replace(loop, new_loop))
        new_loop = new_loop.with_changes(leading_lines=[] if counter else after_definition.leading_lines)
        self.converted.add(run)
        return [*block[:at_def], definition, *rest, *setup, new_loop, *block[k + 1:]]


class _Replace(cst.CSTTransformer):
    def __init__(self, old, new):
        super().__init__()
        self.old, self.new = old, new

    def on_leave(self, original, updated):
        return self.new if original is self.old else updated


def _nested_in_blocks(outer, inner) -> bool:
    """``inner`` is ``outer`` or lies in the bodies of loops and ifs under it
    (not in a function, a with or a try: those would run the loop otherwise)."""
    if outer is inner:
        return True
    if not isinstance(outer, (cst.For, cst.While, cst.If, cst.Else)):
        return False
    blocks = [outer.body]
    if isinstance(outer, cst.If) and outer.orelse is not None:
        blocks.append(outer.orelse)
    return any(_nested_in_blocks(st, inner) for block in blocks for st in C.body_of(block))


def _count(node, name: str) -> int:
    return sum(1 for n in C.walk(node) if isinstance(n, cst.Name) and n.value == name)


class _Args(cst.CSTTransformer):
    def __init__(self, run: str, iterator: str):
        super().__init__()
        self.run, self.iterator = run, iterator

    def leave_Call(self, original, updated):
        if isinstance(updated.func, cst.Name) and updated.func.value == self.run:
            return updated.with_changes(args=[cst.Arg(C.expr(f"next({self.iterator})"), star="*")])
        return updated




def _sources(makers) -> set[str]:
    """The objects the statements making the inputs call methods of
    (``mnist.train`` of ``mnist.train.next_batch(100)``): the batch sources,
    whose state the pipeline moves ahead of the loop."""
    out = set()
    for st in makers:
        for call in C.calls_in(st):
            if isinstance(call.func, cst.Attribute):
                out.add(C.code_of(call.func.value))
    return out


def _module_source_reads(module, source: str, maker) -> int:
    """:func:`_source_reads` over the module, but for the functions (other
    than the one holding ``maker``) where the source's root name is a local of
    their own (a parameter, an assignment without ``global``): another object
    there."""
    root = source.split(".")[0].split("[")[0]
    reads = 0
    todo = list(module.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (cst.FunctionDef, cst.Lambda)) and _binds_locally(node, root) and not any(
                n is maker for n in C.walk(node)):
            continue
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.If, cst.For, cst.While, cst.With, cst.Try,
                             cst.IndentedBlock, cst.Else, cst.SimpleStatementLine, cst.ExceptHandler,
                             cst.Finally)) and not isinstance(node, cst.SimpleStatementLine):
            todo.extend(node.children)
            continue
        reads += _source_reads(node, source)
    return reads


def _binds_locally(function, root: str) -> bool:
    params = function.params
    names = {p.name.value for p in [*params.params, *params.kwonly_params, *params.posonly_params]}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    if root in names:
        return True
    if isinstance(function, cst.Lambda):
        return False
    declared = any(isinstance(n, (cst.Global, cst.Nonlocal)) and root in {g.name.value for g in n.names}
                   for n in C.walk(function))
    return not declared and root in _dataflow.assigned_anywhere(C.body_of(function.body))


def _source_reads(node, source: str) -> int:
    """How often ``node`` reads ``source`` or something of it (``mnist.train.epochs_completed``),
    or hands on what holds it (``evaluate(mnist)``); ``mnist.test`` is another object."""
    inner = {id(n.value) for n in C.walk(node) if isinstance(n, cst.Attribute)}
    inner |= {id(n.target) for n in C.walk(node) if isinstance(n, cst.AssignTarget)}  # made, not read
    inner |= {id(n.attr) for n in C.walk(node) if isinstance(n, cst.Attribute)}  # `x.mnist` is x's
    inner |= {id(n.keyword) for n in C.walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    if isinstance(node, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                         for s in node.body):
        return 0  # `from tensorflow.examples.tutorials.mnist import input_data`
    reads = 0
    for part in C.walk(node):
        if not isinstance(part, (cst.Name, cst.Attribute)) or id(part) in inner:
            continue  # (a chain is counted once, by its outermost node)
        code = C.code_of(part)
        if code == source or code.startswith(source + ".") or source.startswith(code + "."):
            reads += 1
    return reads


class _Unconverted(cst.CSTTransformer):
    """The run wrappers the loops now feed from a dataset, without their
    conversion of host arrays (the dataset's tensors have the placeholders'
    dtypes already)."""

    def __init__(self, converted: set[str]):
        super().__init__()
        self.converted = converted

    def leave_FunctionDef(self, original, updated):
        if updated.name.value not in self.converted or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        return updated.with_changes(body=updated.body.with_changes(body=list(updated.body.body)[1:]))
