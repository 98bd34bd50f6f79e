"""Model code in a module that is not in the project (TFM301/TFM303: policy, notes).

A driver is often migrated without its model module: a script copied out of a
repository (``import mnist_inference`` with no ``mnist_inference.py`` beside
it), or a project whose user migrates the driver first::

    y = mnist_inference.inference(x, regularizer)
    loss = xent + tf.add_n(tf.get_collection('losses'))

What carries over without reading that module:

* a call that builds the model from tensors the driver gives it is called in
  the migrated model function as the driver called it; so is a call making
  values the forward code reads (``w = net_layers.weight_variable([784, 10])``)
  when the train op trains every trainable variable (it may make one, which
  TF1 trained; a constant it returns comes back the same). Its TF1 graph code
  is migrated when the user runs tfmigrate on the module (which keeps its
  ``tf.compat.v1`` spellings, computing the same); its variables are recorded
  on the first call and reused by every step (TFM303's towers, which shared
  them by scope reuse: a template), and that first build is traced, so what
  it adds to graph collections stays in that build's graph;
* a read of a collection such a call fills, when only explicit calls fill it
  (``tf.add_to_collection``, the ``tf.compat.v1.losses`` functions): they add
  at each call, so the step's read sees the terms of its own model call.

What stays TF1, with the reason at its line: a read of REGULARIZATION_LOSSES
(TensorFlow fills it when a variable is created with a regularizer: once, in
the first build), and whatever the module does besides building the model --
a queue input pipeline, the optimizer or train op, the session or server,
placeholders it returns for the driver to feed -- each found where the
program's dataflow reaches the module (those are the rule's other reasons).

Each absent module gets one note (a warning: the migrated program now relies
on it) naming what the driver assumes of it and that it must be migrated too.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.program.collections import READERS, collection_key
from migrate.codemod.rules import _cst as C


def absent_module_note(module: str, calls: list[str], read_keys: list[str], shared: bool = False) -> str:
    """The note for the calls (``mnist_inference.inference``) of ``module``,
    which is not in the project; ``read_keys``: the collections the loss reads
    in the step, which the module is assumed to fill at each call; ``shared``:
    towers that shared the variables by reusing their variable scope (so
    ``get_variable``'s, kept by a template) rather than recorded ones."""
    path = module.replace(".", "/") + ".py"
    called = list(dict.fromkeys(calls))
    named = ", ".join(f"`{c}(...)`" for c in called)
    one = len(called) == 1
    it, its, they = ("it", "its", "it") if one else ("them", "their", "they")
    is_, create, add = ("is", "creates", "adds") if one else ("are", "create", "add")
    text = (f"{named} {'comes' if one else 'come'} from `{module}`, which is not in this project (no {path} beside"
            f" this file): the model function calls {it} as this file did, taking {it} to build the model (or its"
            f" variables) from what {they} {is_} given; ")
    if shared:
        text += (f"the towers shared {its} variables by reusing their variable scope, so {they} must create them with"
                 " get_variable: they are made once, by the model's traced first build under the strategy's scope,"
                 " and reused by every replica and step")
    else:
        text += (f"the variables {they} {create} are recorded on the first call (traced under the strategy's scope,"
                 f" so that what {they} {add} to graph collections stays in that build) and reused by every step,"
                 f" so {they} must create them in the same order at each call")
    if read_keys:
        keys = ", ".join(f"'{k}'" for k in read_keys)
        text += (f", and add {its} terms to {keys} at each call (tf.add_to_collection or a tf.losses function), not"
                 " when a variable is created: the step's read sees only the terms of its own call")
    return text


HINT = ("`{module}` must be migrated with this file: run tfmigrate on it (or on a directory holding both); it keeps"
        " its graph code as tf.compat.v1, computing the same, which the step calls")


def absent_calls(tracer, statements) -> dict[str, tuple[list[str], list[str], cst.Call]]:
    """For each module not in the project whose functions ``statements`` call
    (directly or through functions of this file): (the calls' code, the
    collections read by literal key on the way, the first call)."""
    out: dict[str, tuple[list[str], list[str], cst.Call]] = {}
    keys: list[str] = []
    seen: set[int] = set()
    stack = [call for st in statements for call in C.calls_in(st)]
    stack.reverse()
    while stack:
        call = stack.pop()
        if tracer.qualname(call.func, tracer.root) in READERS and call.args:
            key = collection_key(call.args[0].value)
            if key is not None and key not in keys:
                keys.append(key)
        found = tracer.callee(call, tracer.root)
        if found is None:
            continue
        if found[0] == "opaque":
            codes, _, first = out.get(found[1].name, ([], keys, call))
            out[found[1].name] = ([*codes, C.code_of(call.func)], keys, first)
        elif found[2].project is None and id(found[1]) not in seen:
            seen.add(id(found[1]))
            stack.extend(reversed(list(C.calls_in(found[1].body))))
    return out
