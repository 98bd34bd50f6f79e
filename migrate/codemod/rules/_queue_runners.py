"""The queue-runner plumbing of a session loop, gone with the queues (TFM305's
last stage, once every queue pipeline of the module is a tf.data one).

    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    try:
        while not coord.should_stop():
            sess.run(train_op)
    except tf.errors.OutOfRangeError:
        print("done")
    finally:
        coord.request_stop()
    coord.join(threads)

With no queue left, ``start_queue_runners`` starts no thread and nothing
asks the coordinator to stop inside the loop: ``coord.should_stop()`` is
False until the loop is over. The coordinator, the threads, their
``request_stop()``/``join()`` go; ``while not coord.should_stop():`` is
``while True:`` (the loop still ends at the end of the data, by the
``OutOfRangeError`` the session run raised, which the one-shot iterator
raises too). A coordinator used any other way (a ``request_stop()`` inside
the loop, ``stop_on_exception()``, handed to a function) is left as it is.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C

# calls that need queue runners: while one is left, the plumbing stays
QUEUE_RUNNER_USERS = {
    "train.batch", "train.shuffle_batch", "train.batch_join", "train.shuffle_batch_join", "train.maybe_batch",
    "train.maybe_shuffle_batch", "train.string_input_producer", "train.slice_input_producer",
    "train.range_input_producer", "train.input_producer", "train.limit_epochs", "train.QueueRunner",
    "train.add_queue_runner", "train.queue_runner.QueueRunner", "train.queue_runner.add_queue_runner",
    "contrib.slim.prefetch_queue.prefetch_queue",
}
_READERS = ("Reader",)


def needs_runners(module: cst.Module, qualname) -> bool:
    for call in C.calls_in(module):
        q = qualname(call.func) or ""
        if q in QUEUE_RUNNER_USERS or q.rsplit(".", 1)[-1].endswith(_READERS):
            return True
        # SyncReplicasOptimizer's token queue, run by a queue runner of its own
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "get_chief_queue_runner":
            return True
    return False


class _Plumbing:
    """The coordinators and thread lists of the module's functions that only
    serve queue runners, and the rewrite of the statements using them."""

    def __init__(self, qualname):
        self.qualname = qualname
        self.coordinators: set[str] = set()
        self.threads: set[str] = set()
        self.kept: set[str] = set()  # coordinators (and thread lists) some function uses otherwise

    def _scope(self, body) -> tuple[set[str], set[str]]:
        """Coordinators and thread lists of a function body that only serve
        queue runners (no use but the plumbing's)."""
        coordinators, threads = set(), set()
        starts = []
        for node in C.walk(body):
            if not isinstance(node, cst.SimpleStatementLine):
                continue
            names, value, _ = C.assignment(node)
            call = value if value is not None else C.single_expr(node)
            if not isinstance(call, cst.Call):
                continue
            q = self.qualname(call.func) or ""
            if q == "train.Coordinator" and len(names) == 1 and not call.args:
                coordinators.add(names[0])
            elif q == "train.start_queue_runners":
                starts.append((names, call))
        for names, call in starts:
            if len(names) == 1:
                threads.add(names[0])
        if not coordinators and not starts:
            return set(), set()
        self.kept |= coordinators | threads  # until shown to be plumbing only
        # every read of a coordinator is the plumbing's; a request_stop() inside a loop it ends is not
        keywords = {id(n.keyword) for n in C.walk(body) if isinstance(n, cst.Arg) and n.keyword is not None}
        attributes = {id(n.attr) for n in C.walk(body) if isinstance(n, cst.Attribute)}
        uses = [n for n in C.walk(body) if isinstance(n, cst.Name) and n.value in coordinators | threads
                and id(n) not in keywords and id(n) not in attributes]
        allowed: set[int] = set()
        for node in C.walk(body):
            if isinstance(node, cst.While):
                for call in C.calls_in(node.body):
                    if _method_of(call, coordinators) == "request_stop":
                        return set(), set()
            if isinstance(node, cst.Call):
                method = _method_of(node, coordinators)
                if method in ("should_stop", "request_stop", "join"):
                    allowed.add(id(node.func.value))
                    if method == "join":
                        allowed |= {id(a.value) for a in node.args if isinstance(a.value, cst.Name)}
                elif (self.qualname(node.func) or "") == "train.start_queue_runners":
                    allowed |= {id(a.value) for a in node.args if isinstance(a.value, cst.Name)
                                and a.value.value in coordinators}
            if isinstance(node, cst.SimpleStatementLine):
                names, value, assign = C.assignment(node)
                if assign is not None and isinstance(value, cst.Call) and (self.qualname(value.func) or "") in (
                        "train.Coordinator", "train.start_queue_runners"):
                    allowed |= {id(t.target) for t in assign.targets}
        if any(id(n) not in allowed for n in uses):
            return set(), set()
        # a should_stop() read anywhere but `while not coord.should_stop()` keeps the coordinator
        for node in C.walk(body):
            if isinstance(node, cst.Call) and _method_of(node, coordinators) == "should_stop" and not any(
                    isinstance(w, cst.While) and _stop_test(w.test, coordinators) is not None
                    and any(c is node for c in C.calls_in(w.test)) for w in C.walk(body)):
                return set(), set()
        return coordinators, threads

    def function(self, node: cst.FunctionDef | cst.Module) -> None:
        kept = set(self.kept)
        coordinators, threads = self._scope(node if isinstance(node, cst.Module) else node.body)
        self.kept = kept | (self.kept - coordinators - threads)
        self.coordinators |= coordinators
        self.threads |= threads

    def dropped(self, statement) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        names, value, _ = C.assignment(statement)
        call = value if value is not None else C.single_expr(statement)
        if not isinstance(call, cst.Call):
            return False
        q = self.qualname(call.func) or ""
        if q == "train.Coordinator" and names and set(names) <= self.coordinators:
            return True
        if q == "train.start_queue_runners" and (not names or set(names) <= self.threads):
            coord = C.arg(call, 1, "coord")
            return coord is None or (isinstance(coord, cst.Name) and coord.value in self.coordinators)
        return not names and _method_of(call, self.coordinators) in ("request_stop", "join")

    def leave_While(self, original, updated):
        test = _stop_test(updated.test, self.coordinators)
        return updated if test is None else updated.with_changes(test=test)

    def leave_IndentedBlock(self, original, updated):
        body = [st for st in updated.body if not self.dropped(st)]
        if len(body) == len(updated.body):
            return updated
        return updated.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])

    def leave_Try(self, original, updated):
        final = updated.finalbody
        if final is not None and _only_pass(final.body.body) and not _only_pass(original.finalbody.body.body):
            if updated.handlers or updated.orelse is not None:
                return updated.with_changes(finalbody=None)
            return cst.FlattenSentinel(list(updated.body.body))
        return updated


def _method_of(call: cst.Call, owners: set[str]) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in owners:
        return func.attr.value
    return None


def _stop_test(test, coordinators) -> cst.BaseExpression | None:
    """The loop test without `not coord.should_stop()` (always true once no
    queue runner can ask the coordinator to stop); None where it has none."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and isinstance(
            test.expression, cst.Call) and _method_of(test.expression, coordinators) == "should_stop":
        return cst.Name("True")
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left = _stop_test(test.left, coordinators)
        right = _stop_test(test.right, coordinators)
        if left is not None and isinstance(left, cst.Name) and left.value == "True":
            return test.right if right is None else right
        if right is not None and isinstance(right, cst.Name) and right.value == "True":
            return test.left
    return None


def _only_pass(body) -> bool:
    return all(isinstance(st, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in st.body)
               for st in body)


def without_plumbing(module: cst.Module, qualname) -> cst.Module:
    """``module`` without the queue-runner plumbing of its functions, when no
    queue is left in it."""
    if needs_runners(module, qualname):
        return module
    visitor = _Plumbing(qualname)
    # first pass: what each function's plumbing is; the rewrite then drops it
    for node in C.walk(module):
        if isinstance(node, cst.FunctionDef):
            visitor.function(node)
    if not visitor.coordinators and not visitor.threads:  # a script: its session loop at the top level
        visitor.function(module)
    if not visitor.coordinators and not visitor.threads:
        return module
    if (visitor.coordinators | visitor.threads) & visitor.kept:
        return module  # a name some function uses otherwise: not told apart here
    return transform(module, _Rewrite(visitor))


class _Rewrite(cst.CSTTransformer):
    def __init__(self, plumbing: _Plumbing):
        super().__init__()
        self.plumbing = plumbing

    def leave_While(self, original, updated):
        return self.plumbing.leave_While(original, updated)

    def leave_IndentedBlock(self, original, updated):
        return self.plumbing.leave_IndentedBlock(original, updated)

    def leave_Try(self, original, updated):
        return self.plumbing.leave_Try(original, updated)

    def leave_Module(self, original, updated):
        return updated.with_changes(body=[st for st in updated.body if not self.plumbing.dropped(st)])
