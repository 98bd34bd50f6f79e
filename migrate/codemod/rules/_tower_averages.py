"""What a tower program's ``ExponentialMovingAverage`` averages (analysis).

Tower scripts average ``tf.trainable_variables() + tf.moving_average_variables()``:
the second list is the TF1 collection ``MOVING_AVERAGE_VARIABLES``, which
layers filled as they were built (the moving means and variances of
``tf.contrib.layers.batch_norm`` / slim's ``batch_norm``) and every earlier
``ExponentialMovingAverage.apply``. TF2 fills no collection, so the list can
be carried over only where it was empty: no code the graph runs (through this
file's helpers and the project's present modules) fills it. A function of a
module that is not in the project cannot be read: then what the collection
held is unknown.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from migrate.codemod.program.tracing import Tracer, own_scope

_FILLERS = ("train.ExponentialMovingAverage",)


class Filler(NamedTuple):
    """Why the collection may hold variables: ``call`` (in the graph's code) runs
    ``what``."""

    call: cst.Call
    what: str
    opaque: bool  # the code is in a module that is not in the project


def _fills(node, qualname: str | None) -> str | None:
    if isinstance(node, cst.Attribute) and node.attr.value == "MOVING_AVERAGE_VARIABLES":
        return "the MOVING_AVERAGE_VARIABLES collection"
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if qualname in _FILLERS:
        return "an ExponentialMovingAverage (its apply adds what it averages)"
    if "batch_norm" in name and not (qualname or "").startswith(("nn.", "layers.", "keras.")):
        return f"`{name}` (a contrib/slim batch norm adds its moving mean and variance)"
    return None


def moving_average_filler(tracer: Tracer, statements) -> Filler | None:
    """The first call of ``statements`` (this file's code) that adds, or may
    add, variables to MOVING_AVERAGE_VARIABLES; None when none does."""
    root = tracer.root
    seen: set[int] = set()

    def scan(node, unit, at: cst.Call | None) -> Filler | None:
        for n in own_scope(node):
            what = _fills(n, tracer.qualname(n.func, unit) if isinstance(n, cst.Call) else None)
            if what is not None:
                return Filler(at or n, what, False)
            if not isinstance(n, cst.Call):
                continue
            found = tracer.callee(n, unit)
            if found is None:
                continue
            if found[0] == "opaque":
                return Filler(at or n, f"`{found[2]}()` of `{found[1].name}`, which is not in this project", True)
            fn, fn_unit = found[1], found[2]
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            inner = scan(fn.body, fn_unit, at or n)
            if inner is not None:
                return inner
        return None

    for statement in statements:
        found = scan(statement, root, None)
        if found is not None:
            return found
    return None
