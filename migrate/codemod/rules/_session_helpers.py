"""TFM301, analysis of the functions the session loop hands its session to: an
evaluation helper (``evaluate(sess, step, test_x, test_y)``, ``Test(sess, ...,
global_step, loss, ...)``) running graph values of the device-setter block in
that session, the values reached through its parameters or as module globals
the block publishes (``global x, y, loss``), or a script's helper reading the
session itself as a module global.

``find``: which module functions receive (or read) a session of the region,
what each of their ``sess.run(...)`` calls runs in the block's terms (its
parameters mapped to the arguments every call site passes, its globals to the
block's names), or why one cannot be carried (a located reason);
``handed_elsewhere``: what code the rule does not carry does with a session
handed to it (an object of the program keeping it). The plan and the emitted
code are _session_helpers_emit.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.program.tracing import own_scope
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._dataflow import bound_names, graph_export, graph_names
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
    feeds: dict[str, cst.Dict] = field(default_factory=dict)  # its feed dicts bound to names
    renamed: dict[str, str] = field(default_factory=dict)  # its names of graph values -> the block's

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
    hint: str = ""  # what to do, when the rule's general hint does not say it

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
    declared_global = {n.name.value for node in own_scope(function.body) if type(node) is cst.Global
                       for n in node.names}
    return bound_names(list(C.body_of(function.body))) - declared_global


def _run_positions(run: cst.Call, feeds: dict[str, cst.Dict]) -> tuple[
        list[cst.CSTNode], list[cst.BaseExpression], cst.BaseExpression | None]:
    """(the nodes naming graph values: fetches and fed keys, the fed values,
    the feed) of ``sess.run(fetches, feed_dict)``; ``feeds``: the helper's
    feed dicts bound to names (`feed = {x: xs}` before `sess.run(loss, feed)`)."""
    fetches = C.arg(run, 0, "fetches")
    feed = C.arg(run, 1, "feed_dict")
    if isinstance(feed, cst.Name) and feed.value in feeds:
        feed = feeds[feed.value]
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


def _local_feeds(function: cst.FunctionDef, runs: list[cst.Call]) -> dict[str, cst.Dict]:
    """The helper's names bound once to a literal dict and read only as the
    feed of its runs (`feed = {images: xs, labels: ys}`, `sess.run(loss, feed)`)."""
    fed_by_name: dict[str, int] = {}
    for run in runs:
        feed = C.arg(run, 1, "feed_dict")
        if isinstance(feed, cst.Name):
            fed_by_name[feed.value] = fed_by_name.get(feed.value, 0) + 1
    out: dict[str, cst.Dict] = {}
    for name, count in fed_by_name.items():
        bindings = [C.assignment(n) for n in C.walk(function.body) if type(n) is cst.SimpleStatementLine
                    and name in C.assignment(n)[0]]
        if (len(bindings) == 1 and bindings[0][0] == [name] and isinstance(bindings[0][1], cst.Dict)
                and _occurrences(function.body, name) == count + 1):
            out[name] = bindings[0][1]
    return out


class _Rename(cst.CSTTransformer):
    def __init__(self, renamed: dict[str, str]):
        super().__init__()
        self.renamed = renamed

    def leave_Name(self, original, updated):
        new = self.renamed.get(updated.value)
        return updated if new is None else updated.with_changes(value=new)


def _in_block_terms(run: cst.Call, renamed: dict[str, str], feeds: dict[str, cst.Dict]) -> cst.Call:
    """The run call with its fetches and fed keys named as the block names them
    (the fed values stay the helper's own expressions), its feed spelled out."""
    fetches = C.arg(run, 0, "fetches")
    feed = C.arg(run, 1, "feed_dict")
    if isinstance(feed, cst.Name) and feed.value in feeds:
        feed = feeds[feed.value]
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
         make_fetch, qualname) -> tuple[list[HandedSession], list[Declined]]:
    """The module functions ``statements`` (the session region) hand a session
    to, each with its runs in the block's terms; or why one cannot be carried.
    ``block``: the device-setter block's statements (its `global`s);
    ``make_fetch(call)``: the region's understanding of a run call. A function
    exporting the graph for serving is left to the reason the rule gives it."""
    sessions = region.sessions
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef
                 and graph_export(st.body, qualname) is None}
    if not sessions or not functions:
        return [], []
    calls_of: dict[str, list[tuple[cst.Call, str]]] = {}  # every call of a module function in the region
    wanted: set[str] = set()  # the functions handed a session or reading one
    reading: dict[str, str] = {}  # functions reading a session as a module global -> its name
    for statement in statements:
        for call in C.calls_in(statement):
            if not (isinstance(call.func, cst.Name) and call.func.value in functions):
                continue
            name = call.func.value
            handed = [a for a in call.args if isinstance(a.value, cst.Name) and a.value.value in sessions]
            global_session = sorted(_free_reads(functions[name]) & sessions)
            calls_of.setdefault(name, []).append((call, handed[0].value.value if handed else ""))
            if handed:
                wanted.add(name)
            elif global_session:
                wanted.add(name)
                reading[name] = global_session[0]
    found = {name: calls for name, calls in calls_of.items() if name in wanted}
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
            session = next(handed for _, handed in calls if handed) if session_global is None else session_global
            result.function, result.calls, result.session = name, [call for call, _ in calls], session
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
    callees = {id(c.func) for c in C.calls_in(module)}
    if any(type(n) is cst.Name and n.value == name and id(n) not in callees for n in C.walk(module)
           if n is not function.name):
        return Declined(first, f"`{name}()` is also referred to otherwise than by a call (passed on as a value),"
                        " where its callers would still hand it the session")
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
    if session_global is None and not all(isinstance(b[session_param], cst.Name) and b[session_param].value in sessions
                                          for b in bound):
        return Declined(first, f"`{name}()` is called with the TF1 session as `{session_param}` here and without it"
                        " elsewhere in the session code")
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
    feeds = _local_feeds(function, runs)
    for run in runs:
        graph_nodes, fed_values, feed = _run_positions(run, feeds)
        if feed is not None and not isinstance(feed, cst.Dict):
            return Declined(run, f"`{name}()` runs the session with `feed_dict={C.code_of(feed)}`, a feed this rule"
                            " cannot read key by key (it maps `{placeholder: value}` feeds, literal or bound once to a"
                            " name read only there, onto the arguments of an evaluation function)")
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
                           calls=[call for call, _ in calls], session_global=session_global is not None,
                           feeds=feeds, renamed=renamed)
    for run in runs:
        fetch = make_fetch(_in_block_terms(run, renamed, feeds))
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
        method = method_of(call, module, bindings)
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


def method_of(call: cst.Call, module: cst.Module, bindings):
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


def simple_lines(statements, conditions=()):
    """Each simple statement of ``statements`` (nested blocks included, not
    nested functions or classes), with the tests of the `if`s around it."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement, list(conditions)
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(statement, cst.If):
            yield from simple_lines(C.body_of(statement.body), (*conditions, statement.test))
            if statement.orelse is not None:
                inner = [statement.orelse] if isinstance(statement.orelse, cst.If) else C.body_of(statement.orelse.body)
                yield from simple_lines(inner, conditions)
        else:
            for child in C.children(statement):
                if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                    yield from simple_lines(C.body_of(child), conditions)
                elif isinstance(child, (cst.Else, cst.Finally, cst.ExceptHandler)):
                    yield from simple_lines(C.body_of(child.body), conditions)
                elif isinstance(child, cst.BaseStatement):
                    yield from simple_lines([child], conditions)
