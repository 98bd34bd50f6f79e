"""The tf.data pipeline standing for a TF1 queue-based input pipeline
(TFM305's second stage; ``_queue_input`` found the stages).

The producer, reader and batching statements go; in the batching
statement's place the same stages as a dataset, read through a one-shot
iterator (which TFM301 then moves out of the training step and distributes):

    dataset = tf.data.TFRecordDataset(filenames).repeat(num_epochs)
    dataset = dataset.map(read_and_decode)        # the same parsing, per record
    dataset = dataset.shuffle(capacity)           # shuffle_batch only
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

A file list the producer shuffled is shuffled again each epoch
(``filenames.shuffle(filenames.cardinality())`` before the repeat, as
``string_input_producer`` reshuffled each pass); arrays sliced by
``slice_input_producer`` come from ``Dataset.from_tensor_slices``. The
per-record statements that are not one call of a parsing function become a
function of their own, its parameters the records.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._queue_input import QueuePipeline, Source


def _tf2_root(tf_root: str) -> str:
    return tf_root.removesuffix(".compat.v1")


def _code(node) -> str:
    return C.code_of(node).strip()


def _records(source: Source, tf_root: str, fresh, into: str | None = None) -> tuple[list[str], str]:
    """(statements, the dataset expression) of one source's records
    (``into``: the name of the whole pipeline's dataset, when this is its only source)."""
    data = f"{_tf2_root(tf_root)}.data"
    repeat = ".repeat()" if source.num_epochs is None or _code(source.num_epochs) == "None" else (
        f".repeat({_code(source.num_epochs)})")
    seed = f", seed={_code(source.seed)}" if source.seed is not None and _code(source.seed) != "None" else ""
    items = _code(source.items)
    if source.kind == "slices":
        elements = into or fresh("examples")
        lines = [f"{elements} = {data}.Dataset.from_tensor_slices(({', '.join(_code(e.value) for e in source.items.elements)},))"
                 if len(source.items.elements) == 1 else
                 f"{elements} = {data}.Dataset.from_tensor_slices(({', '.join(_code(e.value) for e in source.items.elements)}))"]
        if source.shuffle:
            lines.append(f"{elements} = {elements}.shuffle({elements}.cardinality(){seed}){repeat}")
        else:
            lines.append(f"{elements} = {elements}{repeat}")
        return lines, elements
    one_file = isinstance(source.items, (cst.List, cst.Tuple)) and len(source.items.elements) == 1
    args = "".join(f", {k}={_code(v)}" for k, v in source.reader_args.items() if k != "skip_header_lines")
    skip = source.reader_args.get("skip_header_lines")
    if source.readers is not None:  # several readers, each reading a file of the queue: interleaved
        names = fresh("filenames")
        lines = [f"{names} = {data}.Dataset.from_tensor_slices({items})"]
        shuffled = f".shuffle({names}.cardinality(){seed})" if source.shuffle and not one_file else ""
        lines.append(f"{names} = {names}{shuffled}{repeat}")
        if source.dataset is None:
            read = f"lambda name: {data}.Dataset.from_tensors({_code_of_read_file(tf_root)}(name))"
        elif args or skip is not None:
            read = f"lambda name: {data}.{source.dataset}(name{args})" + (
                f".skip({_code(skip)})" if skip is not None else "")
        else:
            read = f"{data}.{source.dataset}"
        return lines, f"{names}.interleave({read}, cycle_length={_code(source.readers)})"
    if (not source.shuffle or one_file) and skip is None and source.dataset is not None:
        return [], f"{data}.{source.dataset}({items}{args}){repeat}"
    names = fresh("filenames")
    lines = [f"{names} = {data}.Dataset.from_tensor_slices({items})"]
    if source.shuffle and not one_file:
        lines.append(f"{names} = {names}.shuffle({names}.cardinality(){seed}){repeat}")
    else:
        lines.append(f"{names} = {names}{repeat}")
    if source.dataset is None:  # WholeFileReader: one record per file, its contents
        return lines, f"{names}.map({_code_of_read_file(tf_root)})"
    if skip is not None:
        return lines, f"{names}.flat_map(lambda name: {data}.{source.dataset}(name{args}).skip({_code(skip)}))"
    return lines, f"{data}.{source.dataset}({names}{args})"


def _code_of_read_file(tf_root: str) -> str:
    return f"{_tf2_root(tf_root)}.io.read_file"


def _returned(tensors: cst.BaseExpression) -> str:
    if isinstance(tensors, cst.Dict):
        return _code(tensors)
    values = [_code(el.value) for el in tensors.elements]
    return ", ".join(values) if len(values) > 1 else f"{values[0]},"


class _Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated

    def visit_Attribute(self, node):
        return False  # `x.name`: only its object is a name of this scope (renamed on leaving)

    def leave_Attribute(self, original, updated):
        return updated.with_changes(value=updated.value.visit(self))


def rewrite_block(body: list[cst.BaseStatement], pipeline: QueuePipeline, taken: set[str]) -> list[cst.BaseStatement]:
    """``body`` (the pipeline's block) with its queue stages replaced by the
    tf.data pipeline."""

    def fresh(name):
        return C.fresh(name, taken)

    gone = {id(x) for s in pipeline.sources for x in s.statements} | {id(st) for st in pipeline.moved}
    gone |= {id(st) for st in pipeline.after_batch}
    if pipeline.returned is not None:
        gone.add(id(pipeline.returned))
    dataset = fresh("dataset")
    lines: list[str] = []
    streams = []
    single = dataset if len(pipeline.sources) == 1 else None
    for source in pipeline.sources:
        made, expression = _records(source, pipeline.tf_root, fresh, single)
        lines += made
        streams.append(expression)
    data = f"{_tf2_root(pipeline.tf_root)}.data"
    if streams == [dataset]:
        pass  # the slices were made into the dataset itself
    elif len(streams) == 1:
        lines.append(f"{dataset} = {streams[0]}")
    else:
        lines.append(f"{dataset} = {data}.Dataset.zip(({', '.join(streams)}))")
    record_names = [n for s in pipeline.sources for n in s.names]
    definition: list[cst.BaseStatement] = []
    helper = pipeline.read_helper
    values = (_code(pipeline.tensors) if isinstance(pipeline.tensors, (cst.Dict, cst.ListComp))
              else [_code(el.value) for el in pipeline.tensors.elements])
    if helper is not None and (pipeline.joined or (
            len(pipeline.moved) == 1 and C.assignment(pipeline.moved[0])[0] == values)):
        lines.append(f"{dataset} = {dataset}.map({helper.function.name.value})")
    elif not pipeline.moved and values == record_names and len(values) == 1 and not pipeline.after_batch \
            and pipeline.sources[0].kind == "reader":
        # TF1 batched a list of one tensor: the batch is a list of one tensor (`batch[0]`)
        lines.append(f"{dataset} = {dataset}.map(lambda {values[0]}: ({values[0]},))")
    elif pipeline.moved or values != record_names:
        parse = fresh("parse_record" if pipeline.sources[0].kind == "reader" else "prepare_example")
        moved = list(pipeline.moved)
        if helper is not None:  # the function reads the record it is handed, not a queue
            queue = next(C.target_names(C.assignment(st)[2].targets[0].target)[0]
                         for st in pipeline.sources[0].statements)
            moved = [st.visit(_Rename(queue, helper.record)) for st in moved]
        if moved:
            moved[0] = moved[0].with_changes(leading_lines=C.strip_blank_lines(moved[0].leading_lines))
        params = [helper.record] if helper is not None else record_names
        shell = C.stmt(f"def {parse}({', '.join(params)}):\n    return {_returned(pipeline.tensors)}\n")
        definition.append(shell.with_changes(body=shell.body.with_changes(body=[*moved, *shell.body.body])))
        lines.append(f"{dataset} = {dataset}.map({parse})")
    if pipeline.kind == "shuffle_batch" and pipeline.capacity is not None:
        seed = f", seed={_code(pipeline.seed)}" if pipeline.seed is not None and _code(pipeline.seed) != "None" else ""
        lines.append(f"{dataset} = {dataset}.shuffle({_code(pipeline.capacity)}{seed})")
    lines.append(f"{dataset} = {dataset}.batch({_code(pipeline.batch_size)}, drop_remainder={pipeline.drop_remainder})")
    if pipeline.returned is not None and pipeline.after_batch:
        # what the function returned, computed from each batch
        prepare = fresh("prepare_batch")
        shell = C.stmt(f"def {prepare}({', '.join(C.target_names(pipeline.targets))}):\n"
                       f"    return {_code(pipeline.returned.body[0].value)}\n")
        body_after = list(pipeline.after_batch)
        body_after[0] = body_after[0].with_changes(leading_lines=C.strip_blank_lines(body_after[0].leading_lines))
        made = shell.with_changes(body=shell.body.with_changes(body=[*body_after, *shell.body.body]))
        if definition:
            made = made.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        definition.append(made)
        lines.append(f"{dataset} = {dataset}.map({prepare})")
    batch = f"{pipeline.tf_root}.data.make_one_shot_iterator({dataset}).get_next()"
    if pipeline.targets is None or pipeline.returned is not None:
        lines.append(f"return {batch}")
    else:
        lines.append(f"{_code(pipeline.targets)} = {batch}")
    chain = C.stmts("\n".join(lines) + "\n")
    if definition:  # a blank line after the parsing function
        chain[0] = chain[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    new = [*definition, *chain]
    out: list[cst.BaseStatement] = []
    for statement in body:
        if statement is pipeline.batch_statement:
            # blank lines as before the batching statement (none at the top of the block); its
            # comments described the queues
            lines = [ln for ln in statement.leading_lines if ln.comment is None] if out else []
            if definition and not lines and (out or not pipeline.function_body):
                # a blank line before the parsing function (in a block TFM301 moves, where it lands after others)
                lines = [cst.EmptyLine(indent=False)]
            new[0] = new[0].with_changes(leading_lines=lines)
            out += new
        elif id(statement) not in gone:
            out.append(statement)
    return out


def rewrite_read_helper(original: cst.FunctionDef, function: cst.FunctionDef,
                        pipeline: QueuePipeline) -> cst.FunctionDef:
    """The function that read a queue now parses the record it is handed
    (``original``: the function as analysed; ``function``: as rewritten so far)."""
    helper = pipeline.read_helper
    dropped = {k for k, st in enumerate(original.body.body) if any(st is d for d in helper.dropped)}
    body = [st for k, st in enumerate(function.body.body) if k not in dropped]
    param = function.params.params[0]
    return function.with_changes(
        params=function.params.with_changes(params=[param.with_changes(name=cst.Name(helper.record))]),
        body=function.body.with_changes(body=body))


class _Blocks(cst.CSTTransformer):
    def __init__(self, pipelines: list[QueuePipeline], taken: set[str]):
        super().__init__()
        self.by_block = {}
        for p in pipelines:
            self.by_block.setdefault(id(p.block), []).append(p)
        self.helpers = {id(p.read_helper.function): p for p in pipelines if p.read_helper is not None}
        self.taken = taken
        self.originals: dict[int, cst.CSTNode] = {}

    def _apply(self, original, updated):
        body = list(updated.body)
        for pipeline in self.by_block.get(id(original), ()):
            # the pipeline's statements are the original block's; map them onto the updated ones
            mapping = dict(zip((id(st) for st in original.body), body))
            body = rewrite_block(list(original.body), pipeline, self.taken)
            body = [mapping.get(id(st), st) for st in body]
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original, updated):
        return self._apply(original, updated) if id(original) in self.by_block else updated

    def leave_Module(self, original, updated):
        return self._apply(original, updated) if id(original) in self.by_block else updated

    def leave_FunctionDef(self, original, updated):
        pipeline = self.helpers.get(id(original))
        if pipeline is None:
            return updated
        return rewrite_read_helper(original, updated, pipeline)


def rewrite(module: cst.Module, pipelines: list[QueuePipeline]) -> cst.Module:
    return transform(module, _Blocks(pipelines, C.all_names(module)))
