"""Which graph collections a model builder fills, and when (analysis).

A TF1 model module often puts its weight penalties in a collection the
driver sums into the loss (``tf.add_to_collection('losses', regularizer(w))``
in ``inference()``, ``loss = xent + tf.add_n(tf.get_collection('losses'))``).
Inside a ``tf.function`` the v1 collections are those of the function's own
graph: a step that calls the model and then reads the collection sees the
terms this call added, as TF1's read saw the terms of its one build. That
holds for terms added *at each call* (``add_to_collection``, the
``tf.compat.v1.losses`` functions); a term added when a variable is *created*
(``get_variable(..., regularizer=r)``, a ``variable_scope`` or layer
regularizer) is added once, by the build that created it, and a later step
would not see it.

``collection_fills`` reads a builder (through the program functions it
calls, in its module or another present one) and says which collections it
fills at call time, which at creation time, and what it cannot tell (a key
it computes, a function of a module that is not in the project)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.fastcst import code_of
from migrate.codemod.program.tracing import Tracer, Unit, own_scope

# tf.GraphKeys names whose values programs spell either way
GRAPH_KEYS = {"LOSSES": "losses", "REGULARIZATION_LOSSES": "regularization_losses",
              "SUMMARIES": "summaries", "UPDATE_OPS": "update_ops"}
REGULARIZATION = "regularization_losses"
_CREATORS = frozenset({"get_variable", "get_local_variable", "variable_scope"})


def collection_key(node: cst.BaseExpression) -> str | None:
    """The collection a key expression names: a string literal or
    ``tf.GraphKeys.NAME`` of a known name; None otherwise."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.Attribute) and isinstance(node.value, (cst.Attribute, cst.Name)):
        holder = node.value.attr.value if isinstance(node.value, cst.Attribute) else node.value.value
        if holder == "GraphKeys":
            return GRAPH_KEYS.get(node.attr.value)
    return None


@dataclass
class CollectionFills:
    """What a builder adds to collections. Each entry is (key, the call,
    where: "`fn()` of `module`"); ``unknown`` holds (call, why) where the
    reading stopped."""

    at_call: list[tuple[str, cst.Call, str]] = field(default_factory=list)
    at_creation: list[tuple[str, cst.Call, str]] = field(default_factory=list)
    unknown: list[tuple[cst.Call, str]] = field(default_factory=list)

    def created(self, key: str) -> tuple[str, cst.Call, str] | None:
        return next((entry for entry in self.at_creation if entry[0] == key), None)

    def fills(self, key: str) -> bool:
        return any(entry[0] == key for entry in (*self.at_call, *self.at_creation))


def _where(fn: cst.FunctionDef, unit: Unit) -> str:
    return f"`{fn.name.value}()` of {unit.label}"


def collection_fills(tracer: Tracer, fn: cst.FunctionDef, unit: Unit,
                     _found: CollectionFills | None = None, _seen: set[int] | None = None) -> CollectionFills:
    """The collections ``fn`` (a function of the program) fills, with the
    program functions it calls."""
    found = _found if _found is not None else CollectionFills()
    seen = _seen if _seen is not None else set()
    if id(fn) in seen:
        return found
    seen.add(id(fn))
    where = _where(fn, unit)
    for node in own_scope(fn.body):
        if not isinstance(node, cst.Call):
            continue
        q = tracer.qualname(node.func, unit) or ""
        if q in ("add_to_collection", "add_to_collections"):
            keys = _added_keys(node, q)
            if keys is None:
                found.unknown.append((node, f"`{code_of(node.func)}(...)` in {where} names a collection it computes"))
            found.at_call += [(key, node, where) for key in keys or ()]
            continue
        if q in _CREATORS and _regularizer(node, q) is not None:
            found.at_creation.append((REGULARIZATION, node, where))
            continue
        keyword = next((a.keyword.value for a in node.args
                        if a.keyword is not None and a.keyword.value.endswith("_regularizer")
                        and not (isinstance(a.value, cst.Name) and a.value.value == "None")), None)
        if keyword is not None:
            found.at_creation.append((REGULARIZATION, node, where))
            continue
        if q.startswith("losses.") and not q.startswith("losses.get_"):
            key = _loss_collection(node)
            if key is None:
                why = f"`{code_of(node.func)}(...)` in {where} adds its loss to a collection it computes"
                found.unknown.append((node, why))
            elif key:
                found.at_call.append((key, node, where))
            continue
        callee = tracer.callee(node, unit)
        if callee is None:
            continue
        if callee[0] == "opaque":
            why = f"{where} calls `{code_of(node.func)}(...)` of `{callee[1].name}`, which is not in this project"
            found.unknown.append((node, why))
        else:
            collection_fills(tracer, callee[1], callee[2], found, seen)
    return found


def _added_keys(call: cst.Call, q: str) -> list[str] | None:
    arg = next((a.value for a in call.args if a.keyword is None or a.keyword.value in ("name", "names")), None)
    if arg is None:
        return None
    if q == "add_to_collections" and isinstance(arg, (cst.List, cst.Tuple)):
        keys = [collection_key(e.value) for e in arg.elements]
        return None if None in keys else [k for k in keys if k is not None]
    key = collection_key(arg)
    return None if key is None else [key]


def _regularizer(call: cst.Call, q: str) -> cst.BaseExpression | None:
    """The ``regularizer`` a variable creator is given (keyword, or
    ``get_variable``'s fifth positional argument), unless it is None."""
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "regularizer"), None)
    if value is None and q in ("get_variable", "get_local_variable"):
        positional = [a.value for a in call.args if a.keyword is None and a.star == ""]
        value = positional[4] if len(positional) > 4 else None
    if isinstance(value, cst.Name) and value.value == "None":
        return None
    return value


def _loss_collection(call: cst.Call) -> str | None:
    """The collection a ``tf.compat.v1.losses`` function adds its loss to:
    "losses" by default, "" for ``loss_collection=None``, None when computed."""
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "loss_collection"), None)
    if value is None:
        return GRAPH_KEYS["LOSSES"]
    if isinstance(value, cst.Name) and value.value == "None":
        return ""
    return collection_key(value)


# the reads of a collection and the keys each reads (None: named by its arguments)
READERS = {"get_collection": None, "get_collection_ref": None, "losses.get_losses": ("losses",),
           "losses.get_total_loss": ("losses", REGULARIZATION),
           "losses.get_regularization_loss": (REGULARIZATION,),
           "losses.get_regularization_losses": (REGULARIZATION,)}


def collection_reads(tracer: Tracer, fn: cst.FunctionDef, unit: Unit,
                     _seen: set[int] | None = None) -> list[tuple[cst.Call, str, str]]:
    """(read, its TF name, where: "`fn()` of `module`") for each collection
    read in ``fn`` and the program functions it calls."""
    seen = _seen if _seen is not None else set()
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    out: list[tuple[cst.Call, str, str]] = []
    for node in own_scope(fn.body):
        if not isinstance(node, cst.Call):
            continue
        q = tracer.qualname(node.func, unit) or ""
        if q in READERS:
            out.append((node, q, _where(fn, unit)))
            continue
        callee = tracer.callee(node, unit)
        if callee is not None and callee[0] == "function":
            out += collection_reads(tracer, callee[1], callee[2], seen)
    return out
