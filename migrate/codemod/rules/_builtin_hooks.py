"""TFM301, TensorFlow's own per-step session hooks given to a training
session (analysis and emitted code), placed by _session_loop with the
program's own hooks.

    hooks = [tf.train.StopAtStepHook(last_step=N),
             tf.train.NanTensorHook(loss),
             tf.train.LoggingTensorHook({"loss": loss, "step": global_step}, every_n_iter=10)]

What each did after every run of the session, the loop does after each train
step, from the values the step now returns:

- ``NanTensorHook(loss)`` raised ``NanLossDuringTrainingError`` (a
  RuntimeError, "NaN loss during training.") when the fetched loss was NaN:
  the loop raises that RuntimeError after the step that gave it.
- ``LoggingTensorHook(tensors, every_n_iter=N)`` logged ``tag = value`` of
  its tensors (tags in sorted order) on the first run and every N runs
  after, on TensorFlow's logger: the loop counts its train steps and logs
  the step's values at the same ones.

Declined, with the reason, where the loop cannot do the same: a NaN hook
that stops quietly (``fail_on_nan_loss=False``), a logging hook timed in
seconds, logging at the end or with a formatter, tensors given by graph name
or not computed by the graph block, and a session whose loop runs other
things than the train step (both hooks saw every run of the session).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C

NAN = "train.NanTensorHook"
LOGGING = "train.LoggingTensorHook"
NAMES = (NAN, LOGGING)


@dataclass
class BuiltinHook:
    element: cst.BaseExpression  # the hooks-list element (the call, or the name bound to it)
    call: cst.Call
    kind: str  # NAN or LOGGING
    fetches: list[str]  # the graph values it read after each run
    tags: list[str] = field(default_factory=list)  # LoggingTensorHook's, in its log order
    every: cst.BaseExpression | None = None
    instance: str | None = None  # the name the hook was bound to, if any
    counter: str | None = None  # LoggingTensorHook: the train steps counted
    chief: str | None = None
    # what the loop's placement reads of a program's hook: none of its methods are called
    methods = frozenset()
    reads_results = stops = False
    make = None

    @property
    def title(self) -> str:
        return self.kind.rpartition(".")[2]

    def start_code(self) -> str:
        return f"{self.counter} = 0\n" if self.kind == LOGGING else ""

    def after_code(self, values: dict[str, str]) -> str:
        """The loop's code after a train step whose fetched values are named
        by ``values`` (graph value -> loop name)."""
        if self.kind == NAN:
            return f'if math.isnan({values[self.fetches[0]]}):\n    raise RuntimeError("NaN loss during training.")\n'
        text = ", ".join(f"{tag} = %s" for tag in self.tags)
        logged = ", ".join(values[name] for name in self.fetches)
        return (f"if {self.counter} % {C.code_of(self.every)} == 0:\n"
                f'    tf.get_logger().info("{text}", {logged})\n'
                f"{self.counter} += 1\n")

    def where(self) -> str:
        if self.kind == NAN:
            return ("after each train step the loop raises RuntimeError (NanLossDuringTrainingError's base, with its"
                    f" message) when the step's `{self.fetches[0]}` is NaN")
        return (f"the loop logs {', '.join(f'`{t}`' for t in self.tags)} from the step's values on TensorFlow's"
                f" logger at its first train step and every {C.code_of(self.every)} after")


def _literal_false(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def plan(call: cst.Call, qualname, fetchable) -> BuiltinHook | tuple[cst.CSTNode, str] | None:
    """The hook ``call`` makes, if it is one of these; (node, why) when it
    does what the loop cannot do after a step."""
    kind = qualname(call.func)
    if kind == NAN:
        loss, fail = C.arg(call, 0, "loss_tensor"), C.arg(call, 1, "fail_on_nan_loss")
        if fail is not None and not (isinstance(fail, cst.Name) and fail.value == "True"):
            return fail, ("with fail_on_nan_loss other than True it asked the session to stop after a NaN loss"
                          " rather than raising, ending the loop where the session's other hooks still ran")
        if not (isinstance(loss, cst.Name) and fetchable(loss.value)):
            return call, "its loss is not a value of the graph block that the step can return"
        return BuiltinHook(call, call, NAN, [loss.value])
    if kind != LOGGING:
        return None
    tensors, every = C.arg(call, 0, "tensors"), C.arg(call, 1, "every_n_iter")
    for position, keyword in ((2, "every_n_secs"), (3, "at_end"), (4, "formatter")):
        value = C.arg(call, position, keyword)
        if value is not None and not (isinstance(value, cst.Name) and value.value == "None") and not (
                keyword == "at_end" and _literal_false(value)):
            return value, (f"it logs by `{keyword}`, which the loop does not time; it carries every_n_iter (logs"
                           " counted in train steps) only")
    if every is None or (isinstance(every, cst.Name) and every.value == "None"):
        return call, "it has no every_n_iter (logs counted in train steps), the only cadence the loop carries"
    if not isinstance(tensors, cst.Dict):
        return tensors if tensors is not None else call, (
            "its tensors are not a dict of tags to graph values written here (a list, or tensors given by graph"
            " name, is read by the names TF1 gave its graph, which TF2 does not have)")
    tagged = []
    for element in tensors.elements:
        key = element.key if isinstance(element, cst.DictElement) else None
        value = element.value if isinstance(element, cst.DictElement) else None
        if not (isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str)):
            return element, "a tag of its tensors is not a string literal"
        if not (isinstance(value, cst.Name) and fetchable(value.value)):
            return element, (f"its tensor `{key.evaluated_value}` is not a value of the graph block that the step can"
                             " return")
        tagged.append((key.evaluated_value, value.value))
    if not tagged:
        return tensors, "it logs no tensor"
    tagged.sort()  # TF1 logged a dict's tags in sorted order
    return BuiltinHook(call, call, LOGGING, [name for _, name in tagged], tags=[tag for tag, _ in tagged],
                       every=every)


def other_runs(body, sessions: set[str], train_op: str) -> cst.CSTNode | None:
    """A run of the session in ``body`` other than a train step's: the hooks
    saw it, the loop would not."""
    for node in (n for statement in body for n in C.walk(statement)):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "run" and (
                isinstance(node.func.value, cst.Name) and node.func.value.value in sessions):
            fetches = C.arg(node, 0, "fetches")
            items = [el.value for el in fetches.elements] if isinstance(fetches, (cst.List, cst.Tuple)) else [fetches]
            if not any(isinstance(i, cst.Name) and i.value == train_op for i in items):
                return node
    return None
