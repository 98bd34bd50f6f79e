"""TFM301, plan and emitted code for the functions the session loop hands its
session to (analysed by _session_helpers.py).

plan (``plan``)
    each run of a carried helper is an evaluation fetch of the session region,
    so the rule writes one evaluation tf.function per distinct fetch set, shared
    with the loop's own runs; the block's ``global`` statement stops publishing
    the graph values (``unpublished``)
emitted code (``emit``, ``rewrite_function``, ``rewrite_call``)
    the helper takes those evaluation functions where it took the session and
    calls them where it ran the session, with the same feeds; the parameters
    that only carried graph values go, at its definition and its calls
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._dataflow import (
    global_readers,
    helper_export,
    unbound_reason,
    unfed_placeholders,
)
from migrate.codemod.rules._graph import Graph
from migrate.codemod.rules._session_helpers import (
    Declined,
    HandedSession,
    find,
    handed_elsewhere,
    method_of,
    simple_lines,
)
from migrate.codemod.rules._tfm301_session import _Fetch


def unpublished(statement: cst.BaseStatement, graph: Graph, carried: list[HandedSession],
                module: cst.Module) -> cst.BaseStatement | None:
    """The block's `global ...` statement without the graph values it published
    for the carried helpers only (placeholders and computed tensors live in the
    step and evaluation functions now); the statement itself when it publishes
    nothing of theirs, None when nothing is left to publish."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and type(statement.body[0]) is cst.Global):
        return statement
    gone = set(graph.placeholder_names) | graph.compute_names
    names = [n.name.value for n in statement.body[0].names]
    carried_names = {h.name for h in carried}
    dropped = [n for n in names if n in gone and set(global_readers(module, [n])) <= carried_names]
    if not dropped:
        return statement
    kept = [n for n in names if n not in dropped]
    if not kept:
        return None
    small = statement.body[0]
    new_names = [cst.NameItem(cst.Name(n), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                 for n in kept]
    new_names[-1] = new_names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return statement.with_changes(body=[small.with_changes(names=new_names)])


# ---------------------------------------------------------------- emitted code
def evaluation_names(handed: HandedSession, region) -> list[str]:
    """The evaluation functions the helper calls, in the order it first runs them."""
    out: list[str] = []
    for _, fetch in handed.runs:
        canonical = region.eval_fetches.get(fetch.key(), fetch)
        fn = region.eval_names[id(canonical)]
        if fn not in out:
            out.append(fn)
    return out


def rewrite_function(handed: HandedSession, region, arguments) -> cst.FunctionDef | None:
    """The helper taking its evaluation functions where it took the session,
    calling them where it ran it; ``arguments(fetch, params)``: the code of an
    evaluation call's arguments from a run's feed (None: not all fed)."""
    functions = evaluation_names(handed, region)
    replaced: dict[int, cst.BaseExpression] = {}
    for run, fetch in handed.runs:
        canonical = region.eval_fetches.get(fetch.key(), fetch)
        feed = C.arg(run, 1, "feed_dict")
        if isinstance(feed, cst.Name) and feed.value in handed.feeds:
            # `feed = {x: xs}` keyed by the evaluation function's parameter names
            args = _named_feed_arguments(feed.value, fetch, canonical.params)
            replaced[id(handed.feeds[feed.value])] = _string_keys(handed.feeds[feed.value], handed.renamed)
        else:
            args = arguments(fetch, canonical.params)
        if args is None:
            return None
        fn = region.eval_names[id(canonical)]
        replaced[id(run)] = C.expr(f"tf.nest.map_structure(lambda value: value.numpy(), {fn}({args}))")
    body = handed.function.body.visit(_ReplaceCalls(replaced))
    params = []
    for param in handed.function.params.params:
        name = param.name.value
        if name == handed.session_param and not handed.session_global:
            # every call passes them; a default stays only where a parameter before it has one
            defaulted = any(p.default is not None for p in params)
            params += [param.with_changes(name=cst.Name(fn), annotation=None, **(
                {} if defaulted else {"default": None, "equal": cst.MaybeSentinel.DEFAULT})) for fn in functions]
        elif name not in handed.graph_params:
            params.append(param)
    params = _commas(params)
    return handed.function.with_changes(params=handed.function.params.with_changes(params=params), body=body)


def rewrite_call(handed: HandedSession, call: cst.Call, region) -> cst.Call:
    """A call of the helper passing its evaluation functions for the session
    and no longer the graph values (they are the evaluation functions' own)."""
    functions = evaluation_names(handed, region)
    params = [p.name.value for p in handed.function.params.params]
    if handed.session_global:
        functions = []  # the evaluation functions are module globals it reads as it read the session
    args = []
    positional = 0
    for a in call.args:
        if a.keyword is None:
            param = params[positional]
            positional += 1
        else:
            param = a.keyword.value
        if param == handed.session_param:
            if a.keyword is None:
                args += [a.with_changes(value=cst.Name(fn)) for fn in functions]
            else:
                args += [a.with_changes(keyword=cst.Name(fn), value=cst.Name(fn)) for fn in functions]
        elif param not in handed.graph_params:
            args.append(a)
    return call.with_changes(args=_commas(args))


def _commas(items):
    """Items of a parameter or argument list, separated by `, ` (the last one
    keeps its own comma: a trailing comma stays)."""
    out = []
    for k, item in enumerate(items):
        if k < len(items) - 1 and (item.comma is cst.MaybeSentinel.DEFAULT):
            item = item.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elif k == len(items) - 1 and item.comma is not cst.MaybeSentinel.DEFAULT and not (
                items and items[-1] is item and _trailing(item)):
            item = item.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        out.append(item)
    return out


def _trailing(item) -> bool:
    """Whether the item's comma is a trailing one kept before a line break."""
    comma = item.comma
    return isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)


def _named_feed_arguments(name: str, fetch, params: list[str]) -> str | None:
    """An evaluation call's arguments from a feed dict bound to ``name``: the
    dict itself when it feeds exactly the parameters, else each one of them."""
    keys = [el.key.value for el in fetch.feed.elements if isinstance(el, cst.DictElement)]
    if not set(params) <= set(keys):
        return None
    if sorted(keys) == sorted(params):
        return f"**{name}"
    return ", ".join(f'{name}["{p}"]' for p in params)


def _string_keys(feed: cst.Dict, renamed: dict[str, str]) -> cst.Dict:
    """`{x_ph: xs}` -> `{"x": xs}`: keyed by the evaluation function's parameters."""
    return feed.with_changes(elements=[
        el.with_changes(key=cst.SimpleString(f'"{renamed.get(el.key.value, el.key.value)}"'))
        if isinstance(el, cst.DictElement) and isinstance(el.key, cst.Name) else el for el in feed.elements])


class _ReplaceCalls(cst.CSTTransformer):
    def __init__(self, replaced: dict[int, cst.BaseExpression]):
        super().__init__()
        self.replaced = replaced

    def leave_Call(self, original, updated):
        return self.replaced.get(id(original), updated)

    def leave_Dict(self, original, updated):
        return self.replaced.get(id(original), updated)


# ---------------------------------------------------------------- the rule's stages
def plan(rule, region, after, graph: Graph, block, at_module_level: bool) -> tuple[list[HandedSession], list[Declined]]:
    """Find the helpers ``after`` hands its session to; each carried helper's
    runs become evaluation fetches of ``region`` (one evaluation function per
    distinct fetch set, shared with the loop's own), and the block's `global`
    statement (in ``graph.state``) stops publishing what they ran."""

    def make_fetch(call):
        return _Fetch(call, graph, region.state_names, region._is_dropped_expr)

    carried, declined = find(region, after, rule.ctx.module, graph, block, at_module_level, make_fetch,
                             rule.qualname)
    for line, conditions in simple_lines(after):
        exporting = helper_export(line, rule.ctx.module, rule.qualname)
        handed_on = sorted(C.names_used(line) & region.sessions)
        if exporting is not None and handed_on:  # left to the export's own reason, said here
            why = unbound_reason(handed_on, graph, region.sessions, line, None, rule.ctx.module, exporting)
            declined.append(Declined(line, why.removeprefix("training not migrated: "), hint=(
                f"write the export of `{exporting[0]}()` in the training function after its loop, then migrate"
                " again (or export with tf.saved_model.save(module, export_dir, signatures=...) by hand)")))
        for call in C.calls_in(line):
            if method_of(call, rule.ctx.module, region.bindings) is None:
                continue
            # under a mode of the program (`if FLAGS.mode == "queue":`), the user may choose another
            under = f" (under `if {C.code_of(conditions[-1])}:`)" if conditions else ""
            why = handed_elsewhere(call, region.sessions, rule.ctx.module, region.bindings, under)
            if why is not None:  # an object of the program keeping the session for runs of its own
                declined.append(Declined(line, why))
    for handed in carried:
        for run, fetch in handed.runs:
            region.fetch_by_call[id(run)] = fetch
            region.eval_fetches.setdefault(fetch.key(), fetch)
        for call in handed.calls:
            region.handed_calls[id(call)] = handed
        region.evaluating_helpers.add(handed.name)
    if carried:
        state = []
        for statement in graph.state:
            new = unpublished(statement, graph, carried, rule.ctx.module)
            if new is not None:
                state.append(new)
        graph.state = state
    return carried, declined


def emit(rule, region, carried: list[HandedSession]) -> Declined | None:
    """The carried helpers rewritten (``rule.helper_rewrites``), once the
    evaluation functions are named; why one cannot be, if so."""
    from migrate.codemod.rules._tfm301_loop import _SessionRewriter  # (it imports this module)

    arguments = _SessionRewriter(region)._args
    for handed in carried:
        new = rewrite_function(handed, region, arguments)
        if new is None:
            run, fetch = next((run, fetch) for run, fetch in handed.runs if arguments(
                fetch, region.eval_fetches.get(fetch.key(), fetch).params) is None)
            canonical = region.eval_fetches.get(fetch.key(), fetch)
            unfed = unfed_placeholders(fetch.feed, canonical.params, region.graph)
            missing = ", ".join(f"`{n}`" for n in unfed) or "a placeholder"
            return Declined(run, f"`{handed.name}()` runs {', '.join(f'`{v}`' for v in fetch.values)} feeding no"
                            f" {missing}, which {'it needs' if len(fetch.values) == 1 else 'they need'}: TF1 raised"
                            " InvalidArgumentError there")
        rule.helper_rewrites[C.code_of(handed.function)] = new
        region.helper_evaluations.update(evaluation_names(handed, region))
    return None
