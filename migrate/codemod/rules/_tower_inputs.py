"""Input helpers of tower programs: a module function whose batch is the next
element of a tf.data one-shot iterator it makes (analysis and rewrite).

TFM301's planning takes a helper whose every ``return`` is the iterator's
``get_next()`` itself. Real scripts also bind the batch to names first::

    def get_input():
        dataset = tf.data.TFRecordDataset(files).map(parse).batch(100)
        iterator = dataset.make_one_shot_iterator()
        features, labels = iterator.get_next()
        return features, labels

The same input, one batch per session run: the helper can return its dataset
(``return dataset``), the iterator and ``get_next()`` statements go, and the
caller iterates the dataset once. A parsing function defined in the helper is
not a return of the helper.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._graph import ITERATOR_MAKERS


class NamedBatch(NamedTuple):
    """A helper returning its iterator's batch through names."""

    dataset: cst.BaseExpression  # what the iterator iterated (read at the return)
    returned: cst.BaseExpression  # the `return` value: the batch's names
    dropped: frozenset[int]  # ids of the iterator and get_next() statements


def own_returns(function: cst.FunctionDef) -> list[cst.Return]:
    """The function's own ``return`` statements (not those of functions,
    lambdas or classes defined in it)."""
    found: list[cst.Return] = []
    stack = list(C.children(function.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Return):
            found.append(node)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(C.children(node))
    return found


def _iterator_dataset(value, qualname) -> cst.BaseExpression | None:
    """`ds` of `tf.data.make_one_shot_iterator(ds)` / `ds.make_one_shot_iterator()`."""
    if not isinstance(value, cst.Call):
        return None
    if qualname(value.func) in ITERATOR_MAKERS:
        return C.arg(value, 0, "dataset")
    if (isinstance(value.func, cst.Attribute) and value.func.attr.value == "make_one_shot_iterator"
            and qualname(value.func) is None and not value.args):
        return value.func.value
    return None


def named_batch(function: cst.FunctionDef, qualname) -> NamedBatch | None:
    """The plan for a helper whose one return, its last statement, gives back
    the names ``get_next()`` of a one-shot iterator it made was bound to (in
    the same order), the iterator and the batch read nowhere else; None for
    any other function."""
    returns = own_returns(function)
    body = list(C.body_of(function.body))
    if len(returns) != 1 or not body or not isinstance(body[-1], cst.SimpleStatementLine) or (
            body[-1].body[0] is not returns[0]):
        return None
    returned = returns[0].value
    if isinstance(returned, cst.Name):
        names = [returned.value]
    elif isinstance(returned, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in returned.elements):
        names = [e.value.value for e in returned.elements]
    else:
        return None
    batch = next((k for k, st in enumerate(body[:-1]) if C.assignment(st)[0] == names), None)
    if batch is None:
        return None
    _, value, _ = C.assignment(body[batch])
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "get_next" and not value.args):
        return None
    dropped = [body[batch]]
    owner = value.func.value
    dataset = _iterator_dataset(owner, qualname)
    made_at = batch
    if dataset is None:
        if not isinstance(owner, cst.Name):
            return None
        made_at = next((k for k, st in enumerate(body[:batch]) if C.assignment(st)[0] == [owner.value]), None)
        if made_at is None:
            return None
        dataset = _iterator_dataset(C.assignment(body[made_at])[1], qualname)
        if dataset is None:
            return None
        dropped.append(body[made_at])
        read_elsewhere = {owner.value}
    else:
        read_elsewhere = set()
    read_elsewhere |= set(names)
    kept = [st for k, st in enumerate(body[:-1]) if all(st is not d for d in dropped)]
    if any(_free_reads(st) & read_elsewhere for st in kept):
        return None
    # the dataset the iterator was made from is what the return reads
    if any(set(C.assignment(st)[0]) & C.names_used(dataset) for st in body[made_at + 1:-1]):
        return None
    if not isinstance(dataset, cst.Name):
        return None  # an expression: evaluated where the iterator was made, not at the return
    return NamedBatch(dataset=dataset, returned=returned, dropped=frozenset(id(st) for st in dropped))


def _free_reads(statement) -> set[str]:
    """Names a statement reads from the helper's scope: a function defined
    there reads none of its parameters and own locals from it."""
    if not isinstance(statement, cst.FunctionDef):
        return C.names_used(statement)
    params = statement.params
    local = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            local.add(star.name.value)
    for node in C.walk(statement.body):
        local.update(C.assignment(node)[0])
    return C.names_used(statement.body) - local


class _ReturnDataset(cst.CSTTransformer):
    def __init__(self, plan: NamedBatch):
        super().__init__()
        self.plan = plan

    def leave_SimpleStatementLine(self, original, updated):
        if id(original) in self.plan.dropped:
            return cst.RemovalSentinel.REMOVE
        return updated

    def leave_Return(self, original, updated):
        if original.value is self.plan.returned:
            return updated.with_changes(value=self.plan.dataset)
        return updated


def return_dataset(function: cst.FunctionDef, plan: NamedBatch) -> cst.FunctionDef:
    """The helper returning its dataset: the caller iterates it once."""
    return function.visit(_ReturnDataset(plan))


# TF1 input code whose batches queue-runner threads produced
QUEUE_INPUTS = frozenset({
    "train.shuffle_batch", "train.batch", "train.shuffle_batch_join", "train.batch_join",
    "train.string_input_producer", "train.slice_input_producer", "train.input_producer",
    "train.range_input_producer", "train.maybe_batch", "train.maybe_shuffle_batch",
    "contrib.slim.prefetch_queue.prefetch_queue", "train.start_queue_runners",
})


def origin(statements, name: str) -> cst.BaseStatement | None:
    """The last statement of ``statements`` binding ``name`` (the graph block's
    code before the towers)."""
    return next((st for st in reversed(statements) if name in C.assignment(st)[0]), None)


def input_origin(statements, names: set[str], qualname) -> tuple[cst.BaseStatement, cst.Call] | None:
    """Following ``names`` back through ``statements``: the first statement
    whose value is a call of a function the program did not write in the block
    (a helper, another module's input function) -- where the towers' batch
    comes from -- with that call."""
    seen: set[str] = set()
    stack = sorted(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        made = origin(statements, name)
        if made is None:
            continue
        _, value, _ = C.assignment(made)
        if isinstance(value, cst.Call) and qualname(value.func) is None:
            func = value.func
            base = func if isinstance(func, cst.Name) else func.value if isinstance(func, cst.Attribute) else None
            if isinstance(base, cst.Name) and origin(statements, base.value) is None:
                return made, value
        stack.extend(sorted(C.names_used(value) if value is not None else set()))
    return None


def runs_queue_input(tracer, module: cst.Module, call: cst.Call | None) -> str | None:
    """Evidence that the towers' input is a TF1 queue-runner pipeline: the
    input function's code (read where it is in the program) or this file
    starting queue runners; None without any."""
    if call is not None:
        found = tracer.callee(call, tracer.root)
        if found is not None and found[0] == "function":
            for node in C.walk(found[1]):
                if isinstance(node, cst.Call) and tracer.qualname(node.func, found[2]) in QUEUE_INPUTS:
                    return f"its code calls `{C.code_of(node.func)}`"
    for node in C.walk(module):
        if isinstance(node, cst.Call) and tracer.qualname(node.func, tracer.root) == "train.start_queue_runners":
            return f"this file starts its queue runners: `{C.code_of(node)}`"
    return None
