"""A tower's ``name_scope`` name read to filter graph collections (analysis).

Tower scripts name each tower's scope and collect that tower's losses::

    with tf.name_scope("tower_%d" % i) as scope:
        loss = tower_loss(scope, images, labels)   # tf.add_n(tf.get_collection("losses", scope))

``add_to_collection`` ran in every tower as its ops were built, so the entries
named under the tower's scope are exactly the ones its own code added. A
MirroredStrategy replica traced in a ``tf.function`` builds the same code in a
name scope of its own (the second replica's ops are named ``replica_1/...``):
a ``name_scope`` opened by the replica's model function filters the entries its
code added, as the tower's did. That holds for entries added at each call; the
REGULARIZATION_LOSSES collection is filled by ``get_variable(regularizer=...)``
when it creates a variable -- in TF1 under the first tower's scope only -- and
the scope name may do nothing else (a string given to other code, a layer
scope, a summary name are not reproduced). This module says whether every read
of the name is such a filter, following it into this file's functions and the
project's present modules.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from migrate.codemod.fastcst import code_of
from migrate.codemod.program.tracing import Tracer, own_scope
from migrate.codemod.rules._tower_shapes import first_line

COLLECTION_READS = frozenset({"get_collection", "get_collection_ref"})


class ScopeProblem(NamedTuple):
    node: cst.CSTNode
    why: str


def _reads(node, name: str) -> list[cst.Name]:
    return [n for n in own_scope(node) if type(n) is cst.Name and n.value == name]


def _by_creation(key) -> bool:
    text = code_of(key)
    return "REGULARIZATION_LOSSES" in text or "regularization_losses" in text


def _parameter(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    params = [*fn.params.posonly_params, *fn.params.params]
    if arg.keyword is not None:
        return arg.keyword.value if any(p.name.value == arg.keyword.value for p in
                                        [*params, *fn.params.kwonly_params]) else None
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional):
        return None
    k = next(k for k, a in enumerate(positional) if a is arg)
    return params[k].name.value if k < len(params) else None


def scope_problem(tracer: Tracer, statements, name: str) -> ScopeProblem | None:
    """None when every read of ``name`` in ``statements`` (this file's code) is
    the scope filter of a collection read, directly or as the argument of a
    program function whose parameter is only that; else the first other read."""
    seen: set[tuple[int, str]] = set()

    def check(node, unit, name: str, at) -> ScopeProblem | None:
        reads = _reads(node, name)
        accounted: set[int] = set()
        for call in (n for n in own_scope(node) if type(n) is cst.Call):
            for arg in call.args:
                if not (type(arg.value) is cst.Name and arg.value.value == name):
                    continue
                accounted.add(id(arg.value))
                where = at or call
                q = tracer.qualname(call.func, unit)
                if q in COLLECTION_READS:
                    positional = [a for a in call.args if a.keyword is None]
                    key = positional[0].value if positional else next(
                        (a.value for a in call.args if a.keyword is not None and a.keyword.value == "key"), None)
                    if arg.keyword is not None and arg.keyword.value != "scope" or (
                            arg.keyword is None and (len(positional) < 2 or positional[1] is not arg)):
                        return ScopeProblem(where, f"`{first_line(call)}` reads it as a collection key")
                    if key is None or _by_creation(key):
                        return ScopeProblem(where, f"`{first_line(call)}` filters REGULARIZATION_LOSSES by it, a"
                                            " collection get_variable fills when it creates a variable: in TF1"
                                            " under the first tower's scope only, which no replica reproduces")
                    continue
                found = tracer.callee(call, unit)
                if found is None:
                    return ScopeProblem(where, f"it is given to `{first_line(call)}`, whose code is not in the program"
                                        " (only a collection read filtered by it can be carried over)")
                if found[0] == "opaque":
                    return ScopeProblem(where, f"it is passed to `{found[2]}()` of `{found[1].name}`, which is not"
                                        " in this project: what that code does with the name cannot be read")
                fn, fn_unit = found[1], found[2]
                param = _parameter(fn, call, arg)
                if param is None:
                    return ScopeProblem(where, f"`{first_line(call)}` passes it to `{fn.name.value}()` in a way"
                                        " that cannot be followed")
                if (id(fn), param) in seen:
                    continue
                seen.add((id(fn), param))
                inner = check(fn.body, fn_unit, param, where)
                if inner is not None:
                    return inner
        other = next((r for r in reads if id(r) not in accounted), None)
        if other is not None:
            return ScopeProblem(at or other, "it is read as a value (only a collection read filtered by it can"
                                " be carried over)")
        return None

    for statement in statements:
        found = check(statement, tracer.root, name, None)
        if found is not None:
            return found
    return None
