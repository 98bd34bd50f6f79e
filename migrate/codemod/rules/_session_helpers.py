"""TFM301, functions the session loop hands its session to: an evaluation helper
(``evaluate(sess, step, test_x, test_y)``, ``Test(sess, ..., global_step, loss,
...)``) running graph values of the device-setter block in that session, the
values reached through its parameters or as module globals the block
publishes (``global x, y, loss``).

analysis (``find``)
    which module functions receive a session of the region, what each of their
    ``sess.run(...)`` calls runs in the block's terms (its parameters mapped to
    the arguments every call site passes, its globals to the block's names),
    or why one cannot be carried (a located reason)
plan
    each run is an evaluation fetch of the region, so the rule writes one
    evaluation tf.function per distinct fetch set, as for the loop's own runs
emitted code (``rewrite_function``, ``rewrite_call``)
    the helper takes those evaluation functions where it took the session and
    calls them where it ran the session, with the same feeds; the parameters
    that only carried graph values go, at its definition and its calls; the
    block's ``global`` statement stops publishing the graph values
    (``unpublished``)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._dataflow import graph_names
from migrate.codemod.rules._graph import Graph

_FUNCTION_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


@dataclass
class HandedSession:
    """A module function a session of the region is handed to."""

    function: cst.FunctionDef
    session_param: str  # its parameter taking the session, or the module global it reads
    # its parameters carrying the block's graph values -> the block's names
    graph_params: dict[str, str] = field(default_factory=dict)
    runs: list = field(default_factory=list)  # (its run call, the _Fetch in the block's terms)
    calls: list[cst.Call] = field(default_factory=list)  # where the region calls it
    session_global: bool = False  # it reads the session as a module global (a script's)

    @property
    def name(self) -> str:
        return self.function.name.value


@dataclass
class Declined:
    node: cst.CSTNode  # where the reason is located
    why: str
    function: str = ""  # the helper
    calls: list[cst.Call] = field(default_factory=list)  # where the session is handed to it
    session: str = ""  # the session handed over (or read as a module global)
    handed: bool = True  # handed as an argument (not read as a module global)

    def reason(self) -> str:
        if not self.function or not self.handed:
            return self.why
        return f"the session loop hands the TF1 session `{self.session}` to `{self.function}()`, and {self.why}"


def _params(function: cst.FunctionDef) -> list[cst.Param] | None:
    """The function's parameters when they are plain (no `*args`, `**kwargs`,
    keyword-only or positional-only ones), else None."""
    p = function.params
    if p.posonly_params or p.kwonly_params or p.star_kwarg is not None or isinstance(p.star_arg, cst.Param):
        return None
    return list(p.params)


def _bind(call: cst.Call, params: list[cst.Param]) -> dict[str, cst.BaseExpression] | None:
    """Each parameter's argument at this call (its default when not passed),
    None for a call spelled with `*`/`**` or not matching the parameters."""
    names = [p.name.value for p in params]
    out: dict[str, cst.BaseExpression] = {}
    positional = 0
    for a in call.args:
        if a.star:
            return None
        if a.keyword is None:
            if positional >= len(names):
                return None
            out[names[positional]] = a.value
            positional += 1
        elif a.keyword.value in names and a.keyword.value not in out:
            out[a.keyword.value] = a.value
        else:
            return None
    for p in params:
        if p.name.value not in out:
            if p.default is None:
                return None
            out[p.name.value] = p.default
    return out


def _own_names(function: cst.FunctionDef) -> set[str]:
    """Names the function binds in its own scope (parameters aside)."""
    out: set[str] = set()
    stack = list(C.body_of(function.body))
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in (cst.FunctionDef, cst.ClassDef):
            out.add(node.name.value)
            continue
        if kind is cst.Lambda:
            continue
        if kind is cst.AssignTarget or kind in (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr):
            out.update(C.target_names(node.target))
        elif kind is cst.AsName:
            out.update(C.target_names(node.name))
        elif kind is cst.Global:
            out.difference_update(n.name.value for n in node.names)
        stack.extend(C.children(node))
    return out


def _run_positions(run: cst.Call) -> tuple[list[cst.CSTNode], list[cst.BaseExpression], cst.BaseExpression | None]:
    """(the nodes naming graph values: fetches and fed keys, the fed values,
    the feed) of ``sess.run(fetches, feed_dict)``."""
    fetches = C.arg(run, 0, "fetches")
    feed = C.arg(run, 1, "feed_dict")
    graph_nodes: list[cst.CSTNode] = [fetches] if fetches is not None else []
    values: list[cst.BaseExpression] = []
    if isinstance(feed, cst.Dict):
        for element in feed.elements:
            if isinstance(element, cst.DictElement):
                graph_nodes.append(element.key)
                values.append(element.value)
            else:
                values.append(element.value)
    elif feed is not None:
        values.append(feed)
    return graph_nodes, values, feed


class _Rename(cst.CSTTransformer):
    def __init__(self, renamed: dict[str, str]):
        super().__init__()
        self.renamed = renamed

    def leave_Name(self, original, updated):
        new = self.renamed.get(updated.value)
        return updated if new is None else updated.with_changes(value=new)


def _in_block_terms(run: cst.Call, renamed: dict[str, str]) -> cst.Call:
    """The run call with its fetches and fed keys named as the block names them
    (the fed values stay the helper's own expressions)."""
    fetches = C.arg(run, 0, "fetches")
    feed = C.arg(run, 1, "feed_dict")
    rename = _Rename(renamed)
    args = [cst.Arg(fetches.visit(rename))]
    if isinstance(feed, cst.Dict):
        feed = feed.with_changes(elements=[
            el.with_changes(key=el.key.visit(rename)) if isinstance(el, cst.DictElement) else el
            for el in feed.elements])
    if feed is not None:
        args.append(cst.Arg(feed, keyword=cst.Name("feed_dict")))
    return cst.Call(func=run.func, args=args)


def _occurrences(node: cst.CSTNode, name: str) -> int:
    return sum(1 for n in C.walk(node) if type(n) is cst.Name and n.value == name)


def _published(statements) -> set[str]:
    """Names a `global` statement among ``statements`` (the block's) declares."""
    out: set[str] = set()
    for statement in statements:
        for node in C.walk(statement):
            if type(node) is cst.Global:
                out.update(n.name.value for n in node.names)
    return out


def find(region, statements, module: cst.Module, graph: Graph, block, at_module_level: bool,
         make_fetch) -> tuple[list[HandedSession], list[Declined]]:
    """The module functions ``statements`` (the session region) hand a session
    to, each with its runs in the block's terms; or why one cannot be carried.
    ``block``: the device-setter block's statements (its `global`s);
    ``make_fetch(call)``: the region's understanding of a run call."""
    sessions = region.sessions
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef}
    if not sessions or not functions:
        return [], []
    found: dict[str, list[tuple[cst.Call, str]]] = {}
    reading: dict[str, str] = {}  # functions reading a session as a module global -> its name
    for statement in statements:
        for call in C.calls_in(statement):
            if not (isinstance(call.func, cst.Name) and call.func.value in functions):
                continue
            function = functions[call.func.value]
            handed = [a for a in call.args if isinstance(a.value, cst.Name) and a.value.value in sessions]
            global_session = sorted(_free_reads(function) & sessions)
            if handed:
                found.setdefault(call.func.value, []).append((call, handed[0].value.value))
            elif global_session:
                found.setdefault(call.func.value, []).append((call, global_session[0]))
                reading[call.func.value] = global_session[0]
    if not found:
        return [], []
    values = graph_names(graph) - graph.dropped
    published = _published(block) if not at_module_level else values
    out: list[HandedSession] = []
    declined: list[Declined] = []
    for name, calls in found.items():
        session_global = reading.get(name)
        if session_global is not None and not at_module_level:
            result = Declined(functions[name], f"`{name}()` runs the TF1 session `{session_global}` as a module global"
                              " the training function publishes (`global`), and the evaluation functions replacing"
                              " its runs are local to that function")
        else:
            result = _analyze(functions[name], calls, module, graph, values, published, sessions, make_fetch,
                              session_global)
        if isinstance(result, Declined):
            result.function, result.calls, result.session = name, [call for call, _ in calls], calls[0][1]
            result.handed = session_global is None
            declined.append(result)
        else:
            out.append(result)
    return out, declined


def _free_reads(function: cst.FunctionDef) -> set[str]:
    """Names the function reads and neither binds nor takes as a parameter."""
    params = {p.name.value for p in function.params.params}
    return C.names_used(function.body) - _own_names(function) - params


def _analyze(function, calls, module, graph: Graph, values: set[str], published: set[str], sessions,
             make_fetch, session_global: str | None = None) -> HandedSession | Declined:
    """``session_global``: the session the function reads as a module global
    (a script's), None when its callers hand it over."""
    name = function.name.value
    first = calls[0][0]
    params = _params(function)
    if params is None:
        return Declined(first, f"`{name}()` is handed the TF1 session and takes `*args`, `**kwargs` or keyword-only"
                        " parameters, whose arguments this rule cannot follow to the graph values it runs")
    inside = {id(call) for call, _ in calls}
    elsewhere = next((c for c in C.calls_in(module) if isinstance(c.func, cst.Name) and c.func.value == name
                      and id(c) not in inside), None)
    if elsewhere is not None:
        return Declined(first, f"`{name}()` is also called as `{C.code_of(elsewhere)}` outside this training's"
                        " session code, where no evaluation function can be handed to it")
    bound = [_bind(call, params) for call, _ in calls]
    if any(b is None for b in bound):
        return Declined(first, f"`{name}()` is handed the TF1 session in a call whose arguments do not match its"
                        " parameters one for one")
    session_params = {p for b in bound for p, v in b.items() if isinstance(v, cst.Name) and v.value in sessions}
    if session_global is not None:
        session_params = {session_global}
    if len(session_params) != 1:
        return Declined(first, f"`{name}()` is handed the TF1 session through different parameters")
    session_param = session_params.pop()
    own = _own_names(function)
    if session_param in own:
        return Declined(function, f"`{name}()` binds its session parameter `{session_param}` again")
    runs: list[cst.Call] = []
    for node in C.walk(function.body):
        if type(node) in _FUNCTION_SCOPES and session_param in C.names_used(node):
            return Declined(node, f"`{name}()` uses the TF1 session `{session_param}` in a nested function or class")
        if type(node) is cst.Call and isinstance(node.func, cst.Attribute) and isinstance(
                node.func.value, cst.Name) and node.func.value.value == session_param and node.func.attr.value == "run":
            runs.append(node)
    run_ids = {id(run) for run in runs}
    uses = _occurrences(function.body, session_param)
    if uses != len(runs):
        other = next((n for n in C.walk(function.body) if type(n) is cst.SimpleStatementLine
                      and _occurrences(n, session_param) > sum(1 for c in C.calls_in(n) if id(c) in run_ids)),
                     function)
        return Declined(other, f"`{name}()` uses the TF1 session `{session_param}` otherwise than to run graph"
                        " values (`sess.run(...)`), which TF2 has no counterpart for")
    if not runs:
        return Declined(first, f"`{name}()` is handed the TF1 session but runs nothing in it")
    parameter_names = {p.name.value for p in params}
    renamed: dict[str, str] = {}
    graph_params: dict[str, str] = {}
    in_runs: dict[str, int] = {}
    for run in runs:
        graph_nodes, fed_values, feed = _run_positions(run)
        if feed is not None and not isinstance(feed, cst.Dict):
            return Declined(run, f"`{name}()` runs the session with `feed_dict={C.code_of(feed)}`, a feed this rule"
                            " cannot read key by key (it maps literal `{placeholder: value}` feeds onto the arguments"
                            " of an evaluation function)")
        for node in graph_nodes:
            for used in C.names_used(node):
                in_runs[used] = in_runs.get(used, 0) + _occurrences(node, used)
                if used in renamed:
                    continue
                if used in parameter_names:
                    passed = {C.code_of(b[used]) for b in bound}
                    arg = bound[0][used]
                    if len(passed) != 1 or not isinstance(arg, cst.Name) or arg.value not in values:
                        return Declined(run, f"`{name}()` runs its parameter `{used}` in the TF1 session, and its"
                                        f" callers pass {', '.join(f'`{p}`' for p in sorted(passed))}, not one graph"
                                        " value of the device-setter block")
                    renamed[used] = arg.value
                    graph_params[used] = arg.value
                elif used in own:
                    return Declined(run, f"`{name}()` runs `{used}`, which it builds itself, in the TF1 session: a"
                                    " graph value made outside the device-setter block has no evaluation function")
                elif used in values and used in published:
                    renamed[used] = used
                else:
                    return Declined(run, f"`{name}()` runs `{used}` in the TF1 session, which is no graph value the"
                                    " device-setter block builds and publishes")
        for value in fed_values:
            read = C.names_used(value) & (set(graph_params) | {session_param})
            if read:
                return Declined(run, f"`{name}()` feeds the graph value `{min(read)}` as data")
    for used, count in in_runs.items():
        if _occurrences(function.body, used) != count:
            where = next((n for n in C.walk(function.body) if type(n) is cst.SimpleStatementLine
                          and _occurrences(n, used) > sum(_occurrences(c, used) for c in C.calls_in(n)
                                                          if id(c) in run_ids)), function)
            return Declined(where, f"`{name}()` uses `{used}`, a graph value of the device-setter block, otherwise"
                            " than as a fetch or fed key of its session runs: no evaluation function hands a graph"
                            " value out")
    handed = HandedSession(function=function, session_param=session_param, graph_params=graph_params,
                           calls=[call for call, _ in calls], session_global=session_global is not None)
    for run in runs:
        fetch = make_fetch(_in_block_terms(run, renamed))
        placeholders = set(graph.placeholder_names)
        fed = [el.key.value for el in (fetch.feed.elements if isinstance(fetch.feed, cst.Dict) else ())
               if isinstance(el, cst.DictElement) and isinstance(el.key, cst.Name)]
        foreign = [k for k in fed if k not in placeholders]
        if foreign:
            return Declined(run, f"`{name}()` feeds `{foreign[0]}`, which is no placeholder of the device-setter block")
        if not fetch.ok or fetch.train or fetch.dropped_only or not fetch.values or fetch.values != fetch.names:
            what = ("the train op" if fetch.train else "TF1 graph plumbing (a summary, queue or initializer op)"
                    if fetch.ok else "fetches this rule cannot map")
            return Declined(run, f"`{name}()` runs {what} in the TF1 session it is handed; TFM301 carries over a"
                            " helper's runs of graph values the block computes (an evaluation), not its training")
        handed.runs.append((run, fetch))
    return handed


def unpublished(statement: cst.BaseStatement, graph: Graph, carried: list[HandedSession],
                module: cst.Module) -> cst.BaseStatement | None:
    """The block's `global ...` statement without the graph values it published
    for the carried helpers only (placeholders and computed tensors live in the
    step and evaluation functions now); the statement itself when it publishes
    nothing of theirs, None when nothing is left to publish."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and type(statement.body[0]) is cst.Global):
        return statement
    from migrate.codemod.rules._dataflow import global_readers
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
            params += [param.with_changes(name=cst.Name(fn), default=None, equal=cst.MaybeSentinel.DEFAULT,
                                          annotation=None) for fn in functions]
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


class _ReplaceCalls(cst.CSTTransformer):
    def __init__(self, replaced: dict[int, cst.BaseExpression]):
        super().__init__()
        self.replaced = replaced

    def leave_Call(self, original, updated):
        return self.replaced.get(id(original), updated)


# ---------------------------------------------------------------- the rule's stages
def plan(rule, region, after, graph: Graph, block, at_module_level: bool) -> tuple[list[HandedSession], list[Declined]]:
    """Find the helpers ``after`` hands its session to; each carried helper's
    runs become evaluation fetches of ``region`` (one evaluation function per
    distinct fetch set, shared with the loop's own), and the block's `global`
    statement (in ``graph.state``) stops publishing what they ran."""
    from migrate.codemod.rules._tfm301_session import _Fetch

    def make_fetch(call):
        return _Fetch(call, graph, region.state_names, region._is_dropped_expr)

    carried, declined = find(region, after, rule.ctx.module, graph, block, at_module_level, make_fetch)
    for line, conditions in _lines(after):
        for call in C.calls_in(line):
            if _method_of(call, rule.ctx.module, region.bindings) is None:
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
    from migrate.codemod.rules._dataflow import unfed_placeholders
    from migrate.codemod.rules._tfm301_loop import _SessionRewriter

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


def handed_elsewhere(reader: cst.CSTNode, sessions: set[str], module: cst.Module, bindings,
                     under: str = "") -> str | None:
    """What a statement handing the session to code this rule does not carry
    does with it (``data_provider.init(sess)`` of a class keeping it for runs
    of its own), for the located reason; None when it hands no session on.
    ``under``: the condition it is made under, said after what it does."""
    for call in C.calls_in(reader):
        handed = next((a.value.value for a in call.args if isinstance(a.value, cst.Name)
                       and a.value.value in sessions), None)
        if handed is None or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "run"):
            continue
        what = f"it hands the TF1 session `{handed}` to `{C.code_of(call.func)}(...)`"
        method = _method_of(call, module, bindings)
        if method is None:
            return (what + ", code this rule does not follow: it carries over the functions of this module handed"
                    " the session that run graph values of the block in it, as evaluation functions")
        cls, function = method
        kept = _kept_as(function, call, handed)
        runs = [c for c in C.calls_in(cls) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "run"
                and kept is not None and C.code_of(c.func.value) == f"self.{kept}" and c.args]
        codes = list(dict.fromkeys(" ".join(C.code_of(c).split()) for c in runs))
        shown = ", ".join(f"`{code}`" for code in codes[:2])
        detail = (f", which keeps it as `self.{kept}`" + (f" for session runs of its own ({shown}"
                                                          f"{', ...' if len(codes) > 2 else ''})" if runs else "")
                  if kept is not None else ", which uses it")
        return (f"{what} (a method of `{cls.name.value}`, a class of this module){detail}{under}: TF2 has no session to"
                " hand over, and this rule carries over only the runs of functions handed the session that evaluate"
                " graph values of the block")
    return None


def _method_of(call: cst.Call, module: cst.Module, bindings):
    """(class, method) a call `obj.m(...)` reaches, `obj` made by `Cls(...)`
    of this module (``bindings``: name -> the call binding it)."""
    if not (isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)):
        return None
    made = bindings.get(call.func.value.value)
    if not (isinstance(made, cst.Call) and isinstance(made.func, cst.Name)):
        return None
    cls = next((st for st in module.body if type(st) is cst.ClassDef and st.name.value == made.func.value), None)
    if cls is None:
        return None
    function = next((st for st in C.body_of(cls.body) if type(st) is cst.FunctionDef
                     and st.name.value == call.func.attr.value), None)
    return (cls, function) if function is not None else None


def _kept_as(function: cst.FunctionDef, call: cst.Call, handed: str) -> str | None:
    """The attribute of `self` the method stores the handed session in."""
    params = [p.name.value for p in function.params.params][1:]
    param = None
    for k, a in enumerate(call.args):
        if isinstance(a.value, cst.Name) and a.value.value == handed:
            param = a.keyword.value if a.keyword is not None else (params[k] if k < len(params) else None)
    if param is None:
        return None
    for node in C.walk(function.body):
        _, value, assign = C.assignment(node)
        if assign is not None and isinstance(value, cst.Name) and value.value == param:
            for target in assign.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                    return t.attr.value
    return None


def _lines(statements, conditions=()):
    """Each simple statement of ``statements`` (nested blocks included, not
    nested functions or classes), with the tests of the `if`s around it."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement, list(conditions)
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(statement, cst.If):
            yield from _lines(C.body_of(statement.body), (*conditions, statement.test))
            if statement.orelse is not None:
                inner = [statement.orelse] if isinstance(statement.orelse, cst.If) else C.body_of(statement.orelse.body)
                yield from _lines(inner, conditions)
        else:
            for child in C.children(statement):
                if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                    yield from _lines(C.body_of(child), conditions)
                elif isinstance(child, (cst.Else, cst.Finally, cst.ExceptHandler)):
                    yield from _lines(C.body_of(child.body), conditions)
                elif isinstance(child, cst.BaseStatement):
                    yield from _lines([child], conditions)
