"""Analysis of TF1 queue-based input pipelines (TFM305's first stage).

A TF1 input pipeline ran on queue runners: a producer queue of file names
(``tf.train.string_input_producer``) or of array slices
(``tf.train.slice_input_producer``), a reader taking one record per run from
it (``tf.TFRecordReader().read(queue)``, ``TextLineReader``, ...), per-record
parsing (``tf.parse_single_example``, ``tf.decode_csv``, ``tf.decode_raw``),
then a batching queue (``tf.train.batch`` / ``tf.train.shuffle_batch``) whose
dequeue every session run evaluated anew. The same stages are a ``tf.data``
pipeline: the files or slices, repeated ``num_epochs`` times, read record by
record, mapped through the parsing, shuffled in a buffer, batched.

``find(module, qualname)`` returns, for each batching call of the module,
either a :class:`QueuePipeline` (its stages, enough for
``_queue_input_emit``) or a :class:`Declined` saying, located, why the
pipeline cannot be expressed exactly. Only the statements of one block are
followed: the batching call, the parsing statements it reads, the readers and
producers they read (a reader may also sit in a module function handed the
producer's queue: ``image, label = read_and_decode(filename_queue)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C

BATCHERS = {"train.batch": "batch", "train.shuffle_batch": "shuffle_batch"}
# batching TF1 does with several readers (threads) or conditionally: no exact tf.data order
# several readers of one file-name queue (`[read(queue) for _ in range(n)]`), their records interleaved
JOINERS = {"train.batch_join": "batch", "train.shuffle_batch_join": "shuffle_batch"}
OTHER_BATCHERS = {
    "train.maybe_batch": "a batch that keeps each example or not by a predicate run per session run",
    "train.maybe_shuffle_batch": "a batch that keeps each example or not by a predicate run per session run",
    "train.maybe_batch_join": "a batch that keeps each example or not by a predicate run per session run",
    "train.maybe_shuffle_batch_join": "a batch that keeps each example or not by a predicate run per session run",
}
PRODUCERS = {"train.string_input_producer", "train.slice_input_producer"}
OTHER_PRODUCERS = {"train.input_producer", "train.range_input_producer", "train.limit_epochs"}
# reader class -> the tf.data dataset reading the same records
READERS = {"TFRecordReader": "TFRecordDataset", "TextLineReader": "TextLineDataset",
           "FixedLengthRecordReader": "FixedLengthRecordDataset", "WholeFileReader": None}
OTHER_READERS = {"IdentityReader", "LMDBReader"}

# argument positions of the batching calls
_BATCH_ARGS = {
    "batch": {"batch_size": 1, "num_threads": 2, "capacity": 3, "enqueue_many": 4, "shapes": 5, "dynamic_pad": 6,
              "allow_smaller_final_batch": 7},
    "shuffle_batch": {"batch_size": 1, "capacity": 2, "min_after_dequeue": 3, "num_threads": 4, "seed": 5,
                      "enqueue_many": 6, "shapes": 7, "allow_smaller_final_batch": 8},
    "batch_join": {"batch_size": 1, "capacity": 2, "enqueue_many": 3, "shapes": 4, "dynamic_pad": 5,
                   "allow_smaller_final_batch": 6},
    "shuffle_batch_join": {"batch_size": 1, "capacity": 2, "min_after_dequeue": 3, "seed": 4, "enqueue_many": 5,
                           "shapes": 6, "allow_smaller_final_batch": 7},
}


@dataclass
class Source:
    """One record stream: a reader over a file-name queue, or array slices."""

    kind: str  # "reader" | "slices"
    names: list[str]  # what each record binds (the read's value; the slices' names)
    statements: list[cst.BaseStatement]  # producer, reader, read: gone with the queue
    items: cst.BaseExpression  # the file names, or the list of arrays
    num_epochs: cst.BaseExpression | None
    shuffle: bool
    seed: cst.BaseExpression | None
    dataset: str | None = None  # TFRecordDataset, ...; None: WholeFileReader (read_file per name)
    reader_args: dict[str, cst.BaseExpression] = field(default_factory=dict)
    readers: cst.BaseExpression | None = None  # `n` readers taking files from the queue in turn (batch_join)


@dataclass
class ReadHelper:
    """A module function handed the producer's queue that reads it itself
    (``reader = tf.TFRecordReader(); _, record = reader.read(queue)``): once
    those two statements go, it parses one record, the parameter renamed."""

    function: cst.FunctionDef
    parameter: str
    record: str
    dropped: list[cst.BaseStatement]


@dataclass
class QueuePipeline:
    block: cst.CSTNode  # the IndentedBlock (or Module) holding the statements
    batch_statement: cst.BaseStatement
    batch_call: cst.Call
    kind: str  # "batch" | "shuffle_batch"
    tensors: cst.BaseExpression  # the batched list (or dict)
    targets: cst.BaseExpression | None  # `images, labels = ...` (None: `return tf.train.batch(...)`)
    returned: cst.BaseStatement | None  # `return images, labels` right after, collapsed with it
    sources: list[Source]
    moved: list[cst.BaseStatement]  # per-record statements, in order: the map function's body
    read_helper: ReadHelper | None
    batch_size: cst.BaseExpression
    capacity: cst.BaseExpression | None
    seed: cst.BaseExpression | None
    drop_remainder: str  # code: "True", or "not (<allow_smaller_final_batch>)"
    threads: cst.BaseExpression | None
    tf_root: str  # how the program spells TensorFlow's TF1 API here (`tf`, `tf.compat.v1`)
    function: str | None = None  # the function holding the batching call
    function_body: bool = False  # the block is that function's own body (not a `with` in it)
    joined: bool = False  # batch_join of `[read(queue) for _ in range(n)]`: map the reading function
    # statements computing what the function returns from the batch (`labels = tf.reshape(label_batch,
    # [batch_size])`), up to `returned`: a function of the batch, mapped over the batched dataset
    after_batch: list[cst.BaseStatement] = field(default_factory=list)


@dataclass
class Declined:
    node: cst.CSTNode
    function: str | None  # the function holding the batching call
    reason: str


def _literal_false(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _literal_none(node: cst.BaseExpression | None) -> bool:
    return node is None or (isinstance(node, cst.Name) and node.value == "None")


def _binds(statement) -> set[str]:
    names, _, _ = C.assignment(statement)
    if names:
        return set(names)
    out: set[str] = set()
    for node in C.walk(statement):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                out |= set(C.target_names(t.target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            out |= set(C.target_names(node.target))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            out.add(node.name.value)
    return out


def _blocks(module: cst.Module):
    """(block, its statements, the function it belongs to, whether it is that
    function's body) for the module and every indented block in it."""
    stack: list[tuple[cst.CSTNode, str | None, cst.CSTNode | None]] = [(module, None, None)]
    while stack:
        node, function, parent = stack.pop()
        if isinstance(node, cst.FunctionDef):
            function = node.name.value
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            yield node, list(node.body), function, isinstance(parent, cst.FunctionDef)
        stack.extend((child, function, node) for child in C.children(node))


def _tf_root(call: cst.Call) -> str:
    """`tf` of `tf.train.batch`, `tf.compat.v1` of `tf.compat.v1.train.batch`."""
    code = C.code_of(call.func)
    return code.rsplit(".", 2)[0] if code.count(".") >= 2 else "tf"


def find(module: cst.Module, qualname) -> list[QueuePipeline | Declined]:
    functions = {n.name.value: n for n in C.walk(module) if isinstance(n, cst.FunctionDef)}
    calls_by_name: dict[str, int] = {}
    for call in C.calls_in(module):
        if isinstance(call.func, cst.Name):
            calls_by_name[call.func.value] = calls_by_name.get(call.func.value, 0) + 1
    out: list[QueuePipeline | Declined] = []
    for block, body, function, function_body in _blocks(module):
        for k, statement in enumerate(body):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for call in C.calls_in(statement):
                q = qualname(call.func) or ""
                if q in OTHER_BATCHERS:
                    out.append(Declined(call, function, f"`{C.code_of(call.func)}(...)` batches {OTHER_BATCHERS[q]},"
                                        " an order no tf.data pipeline reproduces"))
                elif q in BATCHERS or q in JOINERS:
                    analysis = _Analysis(qualname, functions, calls_by_name)
                    found = (analysis.pipeline(block, body, k, call, BATCHERS[q], function) if q in BATCHERS
                             else analysis.joined(block, body, k, call, JOINERS[q], function))
                    if isinstance(found, QueuePipeline):
                        found.function_body = function_body
                    out.append(found)
    return out


class _Analysis:
    def __init__(self, qualname, functions, calls_by_name):
        self.qualname = qualname
        self.functions = functions
        self.calls_by_name = calls_by_name

    def pipeline(self, block, body, k, call, kind, function) -> QueuePipeline | Declined:
        statement = body[k]

        def declined(node, why):
            return Declined(node, function, why)

        targets = _batch_targets(statement, call)
        if targets is False:
            return declined(call, f"`{C.code_of(call.func)}(...)` is used inside a larger statement; only its"
                            " result bound to names or returned is followed")
        positions = _BATCH_ARGS[kind]

        def batch_arg(name):
            return C.arg(call, positions.get(name), name)

        tensors = C.arg(call, 0, "tensors")
        batch_size = batch_arg("batch_size")
        if tensors is None or batch_size is None:
            return declined(call, "the batching call's tensors or batch size could not be read")
        if not _literal_false(batch_arg("enqueue_many")) and batch_arg("enqueue_many") is not None:
            return declined(call, "`enqueue_many` batches examples that arrive in groups: not followed here")
        if kind == "batch" and batch_arg("dynamic_pad") is not None and not _literal_false(batch_arg("dynamic_pad")):
            return declined(call, "`dynamic_pad` pads each batch to its longest example: not followed here")
        if any(a.star for a in call.args):
            return declined(call, "the batching call's arguments come from `*`/`**`")
        if isinstance(tensors, (cst.List, cst.Tuple)):
            wanted_values = [el.value for el in tensors.elements]
        elif isinstance(tensors, cst.Dict):
            wanted_values = [el.value for el in tensors.elements if isinstance(el, cst.DictElement)]
            if len(wanted_values) != len(tensors.elements):
                return declined(tensors, "the batched dict is built with `**`")
        else:
            return declined(tensors, f"the batched tensors `{C.code_of(tensors)}` are not a list or dict written"
                            " at the call")
        allow_smaller = batch_arg("allow_smaller_final_batch")
        drop = "True" if _literal_none(allow_smaller) or _literal_false(allow_smaller) else (
            "False" if isinstance(allow_smaller, cst.Name) and allow_smaller.value == "True"
            else f"not ({C.code_of(allow_smaller)})")

        # the per-record statements: what the batched tensors are computed from, back to the sources
        before = body[:k]
        wanted = set().union(*(C.names_used(v) for v in wanted_values))
        sources: list[Source] = []
        moved_ids: set[int] = set()
        source_ids: set[int] = set()
        read_helper: ReadHelper | None = None
        producers: dict[str, tuple[cst.BaseStatement, cst.Call]] = {}
        readers: dict[str, tuple[cst.BaseStatement, cst.Call]] = {}
        for statement_before in before:
            bound, value_before, _ = C.assignment(statement_before)
            if len(bound) == 1 and isinstance(value_before, cst.Call):
                q = self.qualname(value_before.func) or ""
                if q == "train.string_input_producer":
                    producers[bound[0]] = (statement_before, value_before)
                elif q.rsplit(".", 1)[-1] in READERS:
                    readers[bound[0]] = (statement_before, value_before)
        consumed: set[int] = set()  # the producers, readers and reads of the sources found
        for j in range(k - 1, -1, -1):
            st = before[j]
            if id(st) in consumed:
                continue
            bound, val, _ = C.assignment(st)
            if not (set(bound) & wanted) and not (_binds(st) & wanted):
                continue
            if isinstance(val, cst.Call):
                q = self.qualname(val.func) or ""
                if q in OTHER_PRODUCERS:
                    return declined(st, f"`{C.code_of(val.func)}(...)` feeds the pipeline: not followed here")
                if q == "train.slice_input_producer":
                    found = self._slices(st, bound, val)
                    if isinstance(found, str):
                        return declined(st, found)
                    sources.insert(0, found)
                    source_ids.add(id(st))
                    continue
                if q == "train.string_input_producer":
                    return declined(st, f"the file-name queue `{bound[0]}` is read by something other than a"
                                    " reader's read() of this block")
                if isinstance(val.func, cst.Attribute) and val.func.attr.value in ("read", "read_up_to") \
                        and isinstance(val.func.value, cst.Name) and val.func.value.value in readers:
                    found = self._read(st, bound, val, readers, producers, before[j + 1:k] + [statement],
                                       val.func.attr.value)
                    if isinstance(found, str):
                        return declined(st, found)
                    sources.insert(0, found)
                    source_ids.add(id(st))
                    consumed |= {id(x) for x in found.statements}
                    continue
                helper = self._read_helper(st, val, producers)
                if isinstance(helper, str):
                    return declined(st, helper)
                if helper is not None:
                    if read_helper is not None:
                        return declined(st, "two functions read queues for the same batch")
                    read_helper, source = helper
                    sources.insert(0, source)
                    consumed |= {id(x) for x in source.statements}
            if isinstance(st, (cst.If, cst.For, cst.While, cst.Try, cst.With)) or not isinstance(
                    st, cst.SimpleStatementLine):
                return declined(st, "a per-record value is computed in a compound statement (if/for/with):"
                                " not followed here")
            moved_ids.add(id(st))
            wanted |= C.names_used(st)
        if not sources:
            return declined(call, f"`{C.code_of(call.func)}(...)` batches values no reader or producer of this"
                            " block makes (a queue filled another way, or a reader in a function not followed)")
        if any(s.kind == "slices" for s in sources) and len(sources) > 1:
            return declined(call, "the batch mixes array slices with other sources")
        statements = [x for s in sources for x in s.statements]
        if len({id(x) for x in statements}) != len(statements):
            return declined(call, "two readers read the same file-name queue, taking turns as their threads ran")
        consumed |= source_ids
        # what is computed before the first queue (constants, file lists) stays where it is: the parsing
        # function reads it as the queue's ops did
        first = min(i for i, st in enumerate(before) if id(st) in consumed)
        moved_ids -= {id(st) for st in before[:first]}
        record_names = {n for s in sources for n in s.names}
        moved_bound = set(record_names)
        for st in before:
            if id(st) in moved_ids:
                moved_bound |= _binds(st)
        # statements after the first source reading a per-record value (a print of it): into the map too
        for st in before[first:]:
            if id(st) in moved_ids or id(st) in consumed:
                continue
            if C.names_used(st) & moved_bound:
                if _binds(st) or not isinstance(st, cst.SimpleStatementLine):
                    return declined(st, "this statement reads a per-record value outside the parsing"
                                    " (its result is used beside the batch)")
                moved_ids.add(id(st))
        moved = [st for st in before if id(st) in moved_ids]
        # the queues and readers, and the per-record values, are read nowhere else
        gone = moved_bound | {n for s in sources for st in s.statements for n in _binds(st)}
        gone -= set(C.target_names(targets)) if targets is not None else set()
        rest = [st for st in body if id(st) not in moved_ids and id(st) not in consumed and st is not statement]
        for st in rest:
            read = C.names_used(st) & gone
            if read:
                name = min(read)
                return declined(st, f"`{name}` (of the queue pipeline) is also read here, outside the per-record"
                                " parsing and the batch")
        returned = None
        if targets is not None and k + 1 < len(body):
            nxt = body[k + 1]
            if isinstance(nxt, cst.SimpleStatementLine) and len(nxt.body) == 1 and isinstance(nxt.body[0], cst.Return):
                ret = nxt.body[0].value
                if ret is not None and C.code_of(ret).strip("()[] ").replace(" ", "") == \
                        C.code_of(targets).strip("()[] ").replace(" ", ""):
                    returned = nxt
        after_batch: list[cst.BaseStatement] = []
        if targets is not None and returned is None:
            found_after = self._after_batch(body[k + 1:], targets, tensors)
            if isinstance(found_after, str):
                return declined(statement, found_after)
            if found_after is not None:
                after_batch, returned = found_after
        threads = batch_arg("num_threads")
        return QueuePipeline(
            block=block, batch_statement=statement, batch_call=call, kind=kind, tensors=tensors, targets=targets,
            returned=returned, sources=sources, moved=moved, read_helper=read_helper, batch_size=batch_size,
            capacity=batch_arg("capacity") if kind == "shuffle_batch" else None,
            seed=batch_arg("seed") if kind == "shuffle_batch" else None, drop_remainder=drop,
            threads=threads, tf_root=_tf_root(call), function=function, after_batch=after_batch)

    def joined(self, block, body, k, call, kind, function) -> QueuePipeline | Declined:
        """`tf.train.shuffle_batch_join([read(queue) for _ in range(n)], ...)`:
        n readers taking the files of one queue in turn, their records
        interleaved -- `filenames.interleave(TFRecordDataset, cycle_length=n)`."""
        statement = body[k]

        def declined(node, why):
            return Declined(node, function, why)

        targets = _batch_targets(statement, call)
        if targets is False:
            return declined(call, f"`{C.code_of(call.func)}(...)` is used inside a larger statement")
        positions = _BATCH_ARGS[f"{kind}_join"]

        def batch_arg(name):
            return C.arg(call, positions.get(name), name)

        listed = C.arg(call, 0, "tensors_list")
        listing = None
        if isinstance(listed, cst.Name):
            listing = next((st for st in body[:k] if C.assignment(st)[0] == [listed.value]), None)
            listed = C.assignment(listing)[1] if listing is not None else None
        why = ("several readers' records interleaved by the batching threads, from a list not written as"
               " `[read(queue) for _ in range(n)]` in this block")
        if not (isinstance(listed, cst.ListComp) and listed.for_in.inner_for_in is None and not listed.for_in.ifs):
            return declined(call, f"`{C.code_of(call.func)}(...)` batches {why}")
        counter = listed.for_in.iter
        if not (isinstance(counter, cst.Call) and isinstance(counter.func, cst.Name) and counter.func.value == "range"
                and len(counter.args) == 1 and isinstance(listed.for_in.target, cst.Name)
                and listed.for_in.target.value not in C.names_used(listed.elt)
                and isinstance(listed.elt, cst.Call)):
            return declined(call, f"`{C.code_of(call.func)}(...)` batches {why}")
        producers = {}
        for st in body[:k]:
            names, val, _ = C.assignment(st)
            if len(names) == 1 and isinstance(val, cst.Call) and self.qualname(val.func) == "train.string_input_producer":
                producers[names[0]] = (st, val)
        helper = self._read_helper(statement, listed.elt, producers, calls=1)
        if helper is None:
            return declined(call, f"`{C.code_of(call.func)}(...)` batches {why}")
        if isinstance(helper, str):
            return declined(call, helper)
        read_helper, source = helper
        source.readers = counter.args[0].value
        for name in ("enqueue_many", "dynamic_pad"):
            if batch_arg(name) is not None and not _literal_false(batch_arg(name)):
                return declined(call, f"`{name}` is not followed here")
        allow_smaller = batch_arg("allow_smaller_final_batch")
        drop = "True" if _literal_none(allow_smaller) or _literal_false(allow_smaller) else (
            f"not ({C.code_of(allow_smaller)})")
        consumed = {id(x) for x in source.statements} | ({id(listing)} if listing is not None else set())
        gone = {n for st in body[:k] if id(st) in consumed for n in _binds(st)}
        for st in body:
            if id(st) not in consumed and st is not statement and C.names_used(st) & gone:
                return declined(st, f"`{min(C.names_used(st) & gone)}` (of the queue pipeline) is also read here")
        if listing is not None:
            source.statements.append(listing)
        returned = None
        if targets is not None and k + 1 < len(body):
            nxt = body[k + 1]
            if isinstance(nxt, cst.SimpleStatementLine) and len(nxt.body) == 1 and isinstance(nxt.body[0], cst.Return) \
                    and nxt.body[0].value is not None and C.code_of(nxt.body[0].value).strip("()[] ").replace(
                        " ", "") == C.code_of(targets).strip("()[] ").replace(" ", ""):
                returned = nxt
        batch_size = batch_arg("batch_size")
        if batch_size is None:
            return declined(call, "the batching call's batch size could not be read")
        return QueuePipeline(
            block=block, batch_statement=statement, batch_call=call, kind=kind, tensors=listed, targets=targets,
            returned=returned, sources=[source], moved=[], read_helper=read_helper, batch_size=batch_size,
            capacity=batch_arg("capacity") if kind == "shuffle_batch" else None,
            seed=batch_arg("seed") if kind == "shuffle_batch" else None, drop_remainder=drop, threads=None,
            tf_root=_tf_root(call), function=function, joined=True)

    def _after_batch(self, rest, targets, tensors):
        """(statements, the return) computing a function's result from its
        batch; None where the function does not go on to return; a reason
        where what it does with the batch cannot be a function of it."""
        end = next((r for r, st in enumerate(rest) if isinstance(st, cst.SimpleStatementLine)
                    and any(isinstance(small, cst.Return) for small in st.body)), None)
        if end is None or not all(isinstance(st, cst.SimpleStatementLine) for st in rest[:end]):
            return None
        returned = rest[end]
        if len(returned.body) != 1 or returned.body[0].value is None:
            return None
        names = C.target_names(targets)
        count = len(tensors.elements) if isinstance(tensors, (cst.List, cst.Tuple)) else None
        if not ((isinstance(targets, (cst.Tuple, cst.List)) and len(names) == len(targets.elements) == count)
                or (isinstance(targets, cst.Name) and isinstance(tensors, cst.Dict))):
            return "what the function returns is computed from a batch not bound name by name"
        for st in rest[:end]:
            for call in C.calls_in(st):
                q = self.qualname(call.func) or ""
                if q.startswith("summary.") or q.endswith("_summary"):
                    return (f"a summary of the batch (`{C.code_of(call.func)}(...)`) is made beside it: in a"
                            " tf.data function it would not be written")
        return list(rest[:end]), returned

    def _producer_fields(self, call: cst.Call) -> tuple[cst.BaseExpression | None, bool, cst.BaseExpression | None,
                                                        str | None]:
        items = C.arg(call, 0, "string_tensor") or C.arg(call, 0, "tensor_list")
        epochs = C.arg(call, 1, "num_epochs")
        shuffle = C.arg(call, 2, "shuffle")
        seed = C.arg(call, 3, "seed")
        if shuffle is not None and not (isinstance(shuffle, cst.Name) and shuffle.value in ("True", "False")):
            return None, False, None, f"whether `{C.code_of(call.func)}(...)` shuffles is decided at run time"
        if C.arg(call, None, "cancel_op") is not None:
            return None, False, None, "the producer is cancelled by an op of its own (`cancel_op`)"
        shuffled = shuffle is None or shuffle.value == "True"
        if items is None:
            return None, False, None, "the producer's input could not be read"
        return epochs, shuffled, seed, None

    def _slices(self, statement, bound, call) -> Source | str:
        epochs, shuffled, seed, why = self._producer_fields(call)
        if why:
            return why
        items = C.arg(call, 0, "tensor_list")
        if not isinstance(items, (cst.List, cst.Tuple)) or not bound:
            return "the sliced arrays are not a list written at the call, bound name by name"
        if len(bound) != len(items.elements):
            return "the slices are not bound one name per array"
        return Source("slices", list(bound), [statement], items, epochs, shuffled, seed)

    def _reader_source(self, reader_call, producer_call, statements, record) -> Source | str:
        reader = (self.qualname(reader_call.func) or "").rsplit(".", 1)[-1]
        if reader in OTHER_READERS:
            return f"`{reader}` has no tf.data dataset reading the same records"
        args = {a.keyword.value: a.value for a in reader_call.args if a.keyword is not None}
        positional = [a.value for a in reader_call.args if a.keyword is None]
        if reader == "TFRecordReader":
            if positional[1:] or not _literal_none(args.get("options")):
                return "the TFRecordReader reads with options (compression): not followed here"
            kept = {}
        elif reader == "TextLineReader":
            skip = args.get("skip_header_lines", positional[0] if positional else None)
            kept = {} if _literal_none(skip) else {"skip_header_lines": skip}
        elif reader == "FixedLengthRecordReader":
            names = ["record_bytes", "header_bytes", "footer_bytes", "hop_bytes"]
            kept = {n: v for n, v in zip(names, positional)}
            kept.update({n: v for n, v in args.items() if n in names})
            if not _literal_none(kept.get("hop_bytes")) or not _literal_none(args.get("encoding")):
                return "the FixedLengthRecordReader hops or decodes (`hop_bytes`, `encoding`): not followed here"
            kept.pop("hop_bytes", None)
            if "record_bytes" not in kept:
                return "the FixedLengthRecordReader's record size could not be read"
        else:
            kept = {}
        epochs, shuffled, seed, why = self._producer_fields(producer_call)
        if why:
            return why
        items = C.arg(producer_call, 0, "string_tensor")
        return Source("reader", [record], statements, items, epochs, shuffled, seed, READERS[reader], kept)

    def _read(self, statement, bound, call, readers, producers, after, method) -> Source | str:
        if method == "read_up_to":
            return "the reader reads several records per run (`read_up_to`): not followed here"
        reader_statement, reader_call = readers[call.func.value.value]
        queue = C.arg(call, 0, "queue")
        if not (isinstance(queue, cst.Name) and queue.value in producers):
            return "the reader reads a queue not made by string_input_producer in this block"
        _, _, assign = C.assignment(statement)
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2
                and all(isinstance(el.value, cst.Name) for el in target.elements)):
            return "the reader's (key, value) pair is not bound to two names"
        key, record = (el.value.value for el in target.elements)
        if key != "_" and any(key in C.names_used(st) for st in after):
            return f"the reader's key `{key}` (file name and record number) is read: not followed here"
        producer_statement, producer_call = producers[queue.value]
        return self._reader_source(reader_call, producer_call,
                                   [producer_statement, reader_statement, statement], record)

    def _read_helper(self, statement, call, producers, calls=1) -> tuple[ReadHelper, Source] | str | None:
        """`image, label = read_and_decode(filename_queue)`: a module function
        reading the producer's queue with a reader of its own."""
        if not (isinstance(call.func, cst.Name) and len(call.args) == 1 and call.args[0].keyword is None
                and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value in producers):
            return None
        name = call.func.value
        function = self.functions.get(name)
        if function is None:
            return f"`{name}()` reads the file-name queue and is not a function of this module"
        if self.calls_by_name.get(name, 0) != calls:
            return f"`{name}()` reads file-name queues and is called elsewhere too"
        params = function.params
        if len(params.params) != 1 or params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or \
                params.kwonly_params or params.posonly_params or params.star_kwarg is not None:
            return f"`{name}()` takes other parameters than the queue"
        parameter = params.params[0].name.value
        body = list(C.body_of(function.body))
        start = 1 if body and C.single_expr(body[0]) is not None and isinstance(
            C.single_expr(body[0]), (cst.SimpleString, cst.ConcatenatedString)) else 0
        if len(body) < start + 3:
            return f"`{name}()` does not read its queue as `reader = tf.XReader(); _, record = reader.read(queue)`"
        reader_names, reader_call, _ = C.assignment(body[start])
        _, read_call, read_assign = C.assignment(body[start + 1])
        if not (len(reader_names) == 1 and isinstance(reader_call, cst.Call)
                and (self.qualname(reader_call.func) or "").rsplit(".", 1)[-1] in {*READERS, *OTHER_READERS}):
            return f"`{name}()` does not begin with the reader it reads its queue with"
        if not (isinstance(read_call, cst.Call) and isinstance(read_call.func, cst.Attribute)
                and C.code_of(read_call.func) == f"{reader_names[0]}.read" and len(read_call.args) == 1
                and C.code_of(read_call.args[0].value) == parameter):
            return f"`{name}()` does not read its queue with `{reader_names[0]}.read({parameter})` right after"
        target = read_assign.targets[0].target if read_assign is not None and len(read_assign.targets) == 1 else None
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2
                and all(isinstance(el.value, cst.Name) for el in target.elements)):
            return f"`{name}()` binds the reader's (key, value) pair to something other than two names"
        key, record = (el.value.value for el in target.elements)
        rest = body[start + 2:]
        for st in rest:
            used = C.names_used(st)
            if parameter in used or reader_names[0] in used or (key != "_" and key in used):
                return (f"`{name}()` uses its queue, reader or the reader's key beyond reading one record"
                        f" (`{C.code_of(st).strip()}`)")
        producer_statement, producer_call = producers[call.args[0].value.value]
        source = self._reader_source(reader_call, producer_call, [producer_statement], record)
        if isinstance(source, str):
            return source
        return ReadHelper(function, parameter, record, [body[start], body[start + 1]]), source


def notes(pipeline: QueuePipeline) -> list[tuple[cst.CSTNode, str]]:
    """What the tf.data pipeline does differently from the queues, said
    where the queue stage was: the order of shuffled and threaded input."""
    out: list[tuple[cst.CSTNode, str]] = []
    call = pipeline.batch_call
    described = []
    for s in pipeline.sources:
        one_file = isinstance(s.items, (cst.List, cst.Tuple)) and len(s.items.elements) == 1
        text = ("the files read with " + (s.dataset or "tf.io.read_file") if s.kind == "reader"
                else "the array slices") + (", reshuffled each epoch" if s.shuffle and not one_file else "")
        epochs = C.code_of(s.num_epochs).strip() if s.num_epochs is not None else "None"
        text += (f", repeated `{epochs}` times (the loop then ends at the end of the data, as OutOfRangeError"
                 " ended it)" if epochs != "None" else ", repeated without end")
        if text not in described:
            described.append(text)
    stages = "; ".join(described)
    message = (f"the queue-based input pipeline (`{C.code_of(call.func)}(...)` of {stages}) is now a tf.data"
               f" pipeline with the same stages: the same parsing per record, batches of"
               f" `{C.code_of(pipeline.batch_size).strip()}`")
    if pipeline.kind == "shuffle_batch":
        message += (f", the examples shuffled in a buffer of `{C.code_of(pipeline.capacity).strip()}` (the"
                    " shuffle_batch queue's capacity; min_after_dequeue only delayed the first batch): the shuffled"
                    " order is not the legacy run's (TF1's reader and batching threads never made it reproducible)")
    if pipeline.joined:
        readers = C.code_of(pipeline.sources[0].readers).strip()
        message += (f"; the `{readers}` readers' records interleaved file by file, where TF1's reader threads"
                    " interleaved them in whatever order they ran")
    threads = pipeline.threads
    if threads is not None and not (isinstance(threads, cst.Integer) and threads.value == "1"):
        message += (f"; the records come in file order, where TF1's `num_threads={C.code_of(threads).strip()}`"
                    " batching threads took them in whatever order they ran")
    out.append((pipeline.batch_statement, message))
    return out


def status(module: cst.Module, qualname, functions: set[str]) -> str:
    """What TFM305 does with the queue pipeline built in one of
    ``functions`` (those a training reads its batch through), said as the
    tail of TFM301's reason for declining that training."""
    found = [f for f in find(module, qualname)
             if f.function in functions]
    declined = next((f for f in found if isinstance(f, Declined)), None)
    if declined is not None:
        where = f" in `{declined.function}()`" if declined.function else ""
        first = C.code_of(declined.node).strip().splitlines()[0]
        return (f"; TFM305 does not rewrite it as a tf.data pipeline: {declined.reason} (`{first}`{where})")
    if found:
        return ("; TFM305 rewrites it as the tf.data pipeline of the same stages when the rest of the training"
                " migrates (the reasons found with its rewrite applied say what does not)")
    return ""


def _batch_targets(statement, call):
    """What the batching ``call`` is bound to in ``statement``: its targets,
    None when the statement returns it, False when it is part of more."""
    small = statement.body[0] if len(statement.body) == 1 else None
    _, value, assign = C.assignment(statement)
    if isinstance(small, cst.Return) and small.value is call:
        return None
    if value is call and assign is not None and len(assign.targets) == 1:
        return assign.targets[0].target
    return False
