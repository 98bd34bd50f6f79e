"""A loss reading a graph collection that the model builders fill (analysis
for TFM301).

    y = model_def.inference(x, regularizer)   # tf.add_to_collection('losses', regularizer(w))
    loss = xent + tf.add_n(tf.get_collection('losses'))

In a ``tf.function`` the v1 collections belong to the function's graph: the
migrated step calls the model, whose code adds its terms to the step's own
collection, and the read that follows sees exactly those, as TF1's read saw
the terms of the graph's one build. The model's first build (under the
strategy's scope) must then be traced as well: an eager build would leave
its terms in the global graph, which every later trace copies in.

That carries over what the builders add *at each call*. It cannot carry
over what they add when a variable is *created* (a ``get_variable`` or
``variable_scope`` regularizer: once, by the first build, which the steps
would not see), what a module that is not in the project may add (its code
cannot be read), a key or scope the read computes, or a key the builder
computes: those decline, with the reason."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.program.collections import (
    READERS,
    REGULARIZATION,
    CollectionFills,
    collection_key,
)
from migrate.codemod.program.model import ModelBuilder, ProgramModel
from migrate.codemod.rules import _cst as C

READS = frozenset(READERS)


@dataclass(frozen=True)
class Decline:
    at: cst.Call  # the read
    why: str
    hint: str


def read_keys(call: cst.Call, q: str) -> tuple[str, ...] | None:
    """The collections a read reads; None when it is filtered by a scope or
    names one the migration cannot know."""
    keys = READERS[q]
    if keys is not None:
        return keys if not call.args else None
    arg = call.args[0] if len(call.args) == 1 else None
    if arg is None or arg.star or (arg.keyword is not None and arg.keyword.value != "key"):
        return None
    key = collection_key(call.args[0].value)
    return (key,) if key is not None else None


_HINT = "return the penalty terms from the model code and add them to the loss explicitly, then migrate again"


@dataclass(frozen=True)
class Read:
    """A collection read the step makes: ``call``, reported at ``at`` (the
    read itself, or the block's call of the function holding it)."""

    at: cst.CSTNode
    call: cst.Call
    q: str
    where: str = ""  # " in `loss()` of `net`" for a read in a function the block calls


def decline(builders: list[ModelBuilder], fills: list[tuple[cst.Call, CollectionFills]], reads: list[Read],
            own_creation: tuple[cst.CSTNode, str] | None) -> Decline | None:
    """Why the collection ``reads`` of the step cannot be kept there, given
    the model ``builders`` of other modules the block calls, what the program
    functions it calls fill (``fills``: the block's call, what its function
    fills) and a term the block's own code adds when it creates a variable;
    None when they can: every collection read is filled at each call."""
    for read in reads:
        text = f"the loss reads a collection (`{C.code_of(read.call)}`{read.where})"
        keys = read_keys(read.call, read.q)
        if keys is None:
            return Decline(read.at, f"{text} by a name or a scope the migration cannot follow, and the model code"
                           " may fill it at each call or when it creates a variable", _HINT)
        if REGULARIZATION in keys and own_creation is not None:
            node, what = own_creation
            return Decline(read.at, f"{text} that {what} (`{C.code_of(node).strip()}`) fills when it creates its"
                           " variable: TF1 added that term once, at creation, and a tf.function step would not"
                           " see it", _HINT)
        for builder in builders:
            if builder.opaque and REGULARIZATION in keys:
                path = builder.module.name.replace(".", "/") + ".py"
                return Decline(read.at, f"{text} that the model builder `{builder.code}(...)` may fill:"
                               f" `{builder.module.name}` is not in this project (no {path} beside this file), and"
                               " TensorFlow fills REGULARIZATION_LOSSES when a variable is created with a regularizer"
                               " (get_variable, a layer's kernel_regularizer): once, by the model's first build,"
                               " which a tf.function step would not see; whether it does so cannot be read",
                               f"put {path} beside this file: a model that adds its terms to the collection at each"
                               " call is migrated with the read kept in the step; or " + _HINT)
        for call, found in fills:
            if found.unknown:
                return Decline(read.at, f"{text} that `{C.code_of(call.func)}(...)` may fill: {found.unknown[0][1]},"
                               " which the migration cannot follow", _HINT)
            for key in keys:
                created = found.created(key)
                if created is not None:
                    _, node, where = created
                    return Decline(read.at, f"{text} that `{C.code_of(call.func)}(...)` fills when it creates a"
                                   f" variable (`{C.code_of(node.func)}(...)` given a regularizer, in {where}): TF1"
                                   " added that term once, at creation, and a tf.function step would not see it",
                                   _HINT)
    return None


def builder_regularization(program: ProgramModel, builders: list[ModelBuilder]) -> tuple[cst.CSTNode, str] | None:
    """A REGULARIZATION_LOSSES term a model builder of another module adds
    (or may: its module is absent, or it adds to a key it computes), which a
    loss summing the block's own regularized variables would lose: (the
    builder's call, what adds it)."""
    for builder in builders:
        if builder.opaque:
            return builder.call, (f"what the model builder `{builder.code}(...)` of `{builder.module.name}`, which is"
                                  " not in this project, may add")
        fills = program.collections_filled(builder)
        if fills is None:
            continue
        if fills.unknown:
            return builder.call, f"what the model builder `{builder.code}(...)` may add ({fills.unknown[0][1]})"
        entry = fills.created(REGULARIZATION) or next((e for e in fills.at_call if e[0] == REGULARIZATION), None)
        if entry is not None:
            _, node, where = entry
            return builder.call, f"the term that `{C.code_of(node.func)}(...)` in {where} adds, through the model builder"
    return None


class _ScopeReads(cst.CSTTransformer):
    """``get_collection(key)`` -> ``get_collection(key, scope)`` (and
    ``scope=`` for the tf.compat.v1.losses readers)."""

    def __init__(self, qualname, scope: str):
        super().__init__()
        self.qualname = qualname
        self.scope = scope

    def leave_Call(self, original, updated):
        q = self.qualname(original.func)
        if q not in READS:
            return updated
        if q in ("get_collection", "get_collection_ref"):
            arg = cst.Arg(cst.Name(self.scope))
        else:
            arg = cst.Arg(cst.Name(self.scope), keyword=cst.Name("scope"),
                          equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        args = list(updated.args)
        if args:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, arg])


# the model function's name scope: the collection reads' filter; tf.Variable objects the model
# creates take it as a prefix (get_variable's names are the variable scope's), which a resume from
# the TF1 job's checkpoint strips to find their TF1 names
NAME_SCOPE = "forward"


def scoped(body: list, suite, qualname, scope: str) -> list:
    """The model function's statements under a name scope of their own, the
    collection reads filtered by it: with several replicas on a worker, each
    runs the model in the same step graph (the second under ``replica_1/``),
    and its read must see only the terms its own call added."""
    block = C.stmt(f"with tf.compat.v1.name_scope(\"{NAME_SCOPE}\") as {scope}:\n    pass\n")
    comment = C.stmts("# Each replica runs the model under a name scope of its own (the second one's ops\n"
                      "# are named replica_1/...): read by that scope, the collection gives the terms of its own call.\n"
                      "pass\n")[0].leading_lines
    statements = [st.visit(_ScopeReads(qualname, scope)) for st in body]
    return [block.with_changes(body=C.indented(statements, suite), leading_lines=comment)]
