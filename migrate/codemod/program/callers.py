"""Where the values a training function works on come from when they are its
parameters: the cluster a device setter is given, the master a session
connects to.

A library module of a project (``trainer_lib.train(target, cluster_spec)``)
builds the graph, the device setter and the session loop on a cluster its
caller made: the driver parses the flags, builds the ``ClusterSpec`` and the
``tf.train.Server`` and passes ``server.target`` and the spec in. A strategy
built inside the library cannot see that cluster, and the caller's TF1 server
keeps the task's port; this module finds those parameters and the calls that
pass them (in the same file and in the sibling modules importing it), so the
rule can say where the cluster is made. It reads code only."""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from migrate.codemod.fastcst import children, code_of
from migrate.codemod.program.tracing import own_scope

# the session constructors and methods that take the master a TF1 server serves
_MASTER_TAKERS = {"MonitoredTrainingSession": ("master", 0), "Session": ("target", 0),
                  "InteractiveSession": ("target", 0), "prepare_or_wait_for_session": ("master", 0),
                  "managed_session": ("master", 0)}


@dataclass(frozen=True)
class CallSite:
    """A call of a function of the project: the file (relative to the
    function's own directory), its line, and the call's code."""

    path: str
    line: int
    code: str

    def describe(self) -> str:
        return f"{self.path}:{self.line} (`{self.code}`)"


def parameter_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return {p.name.value for p in every}


def _arg(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if position < len(positional) else None


def _root_name(expr: cst.BaseExpression | None) -> str | None:
    """``target`` for ``target``, ``server`` for ``server.target``."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _callee_name(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def cluster_parameters(function: cst.FunctionDef, setters: list[cst.Call],
                       sessions: list[cst.Call]) -> list[tuple[str, str]]:
    """The parameters of ``function`` that the training's cluster comes in
    through: (parameter, what it is) for the ``cluster=`` of a device setter
    and the master of a training session, in that order."""
    params = parameter_names(function)
    found: list[tuple[str, str]] = []
    for setter in setters:
        name = _root_name(_arg(setter, 4, "cluster"))
        if name in params and all(name != n for n, _ in found):
            found.append((name, "the device setter's cluster"))
    for session in sessions:
        taker = _MASTER_TAKERS.get(_callee_name(session) or "")
        if taker is None:
            continue
        name = _root_name(_arg(session, taker[1], taker[0]))
        if name in params and all(name != n for n, _ in found):
            found.append((name, "the master its session connects to"))
    return found


def session_calls(statements) -> list[cst.Call]:
    """Calls in these statements that take a TF1 master (sessions, Supervisor's)."""
    out = []
    for statement in statements:
        for node in own_scope(statement):
            if type(node) is cst.Call and _callee_name(node) in _MASTER_TAKERS:
                out.append(node)
    return out


def _line_of(module: cst.Module, node: cst.CSTNode) -> int:
    # positions without a metadata pass: count the lines of the code before the node
    code = module.code
    text = code_of(node)
    at = code.find(text)
    return code.count("\n", 0, at) + 1 if at >= 0 else 1


def _calls_named(module: cst.Module, callee: str, via_module: str | None) -> list[cst.Call]:
    """Calls of ``callee`` (``callee(...)``), or of ``<via_module>.callee(...)``
    when ``via_module`` is the name the importing file binds the module to."""
    out = []
    stack = [module]
    while stack:
        node = stack.pop()
        if type(node) is cst.Call:
            func = node.func
            if via_module is None and isinstance(func, cst.Name) and func.value == callee or (via_module is not None and isinstance(func, cst.Attribute) and func.attr.value == callee
                  and code_of(func.value) == via_module):
                out.append(node)
        stack.extend(children(node))
    return out


def _import_bindings(module: cst.Module, stem: str, callee: str) -> tuple[list[str], bool]:
    """How a file refers to module ``stem``: the names it binds the module to
    (``import stem``, ``from pkg import stem as s``), and whether it imports
    ``callee`` from it by name (``from stem import callee``)."""
    bound: list[str] = []
    direct = False
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = code_of(alias.name)
                    if dotted.split(".")[-1] == stem:
                        bound.append(alias.asname.name.value if alias.asname else dotted)
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                source = code_of(small.module) if small.module is not None else ""
                for alias in small.names:
                    name = alias.name.value if isinstance(alias.name, cst.Name) else code_of(alias.name)
                    if name == stem:
                        bound.append(alias.asname.name.value if alias.asname else name)
                    elif name == callee and source.split(".")[-1] == stem:
                        direct = direct or alias.asname is None
    return bound, direct


def callers(path: str | None, module: cst.Module, function: cst.FunctionDef,
            other_files_only: bool = False) -> list[CallSite]:
    """Calls of module-level ``function`` of the file at ``path``: in the file
    itself (unless ``other_files_only``), and in the ``.py`` files beside it
    that import it."""
    name = function.name.value
    if function not in module.body:
        return []  # a method or a nested function: its callers are not found by name
    sites = [] if other_files_only else [
        CallSite(os.path.basename(path) if path else "this file", _line_of(module, call), code_of(call))
        for call in _calls_named(module, name, None)]
    if not path or path.startswith("<"):
        return sites
    directory = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return sites
    for entry in entries:
        sibling = os.path.join(directory, entry)
        if not entry.endswith(".py") or entry == os.path.basename(path):
            continue
        try:
            with open(sibling, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        if stem not in text:
            continue  # cheap filter before parsing: the file never names the module
        try:
            other = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        bound, direct = _import_bindings(other, stem, name)
        calls = [c for via in bound for c in _calls_named(other, name, via)]
        if direct:
            calls += _calls_named(other, name, None)
        sites += [CallSite(entry, _line_of(other, call), code_of(call)) for call in calls]
    return sites


@dataclass(frozen=True)
class HandedServer:
    """A call of a project module's function that is given a TF1 server (or
    its target) to train on: ``trainer.train(..., master, ...)`` after
    ``master = server.target``."""

    call: cst.Call
    given: str  # the argument's code, with what it holds: "`master` (`server.target`)"
    module: str  # the project module's dotted name
    present: bool


def _assigned_from(module: cst.Module, names: set[str]) -> dict[str, str]:
    """Names bound to an expression reading one of ``names`` (``master =
    server.target``): name -> the expression's code, followed once more."""
    out: dict[str, str] = {}
    for _ in range(2):
        for node in own_scope_all(module):
            if type(node) is cst.Assign and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                target = node.targets[0].target.value
                if target not in names and target not in out and _reads(node.value, names | set(out)):
                    out[target] = code_of(node.value)
    return out


def own_scope_all(module: cst.Module):
    stack = [module]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def _reads(expr: cst.BaseExpression, names: set[str]) -> bool:
    return any(type(n) is cst.Name and n.value in names for n in own_scope_all(expr))


def servers_handed_over(module: cst.Module, server_names: set[str], imported) -> list[HandedServer]:
    """The calls of project modules' functions that receive one of these
    servers (``server``, ``server.target``, or a name bound to it).
    ``imported(head)`` answers the project module (name, present) a name
    refers to, or None (a library, or a local)."""
    holders = _assigned_from(module, server_names)
    out: list[HandedServer] = []
    for call in own_scope_all(module):
        if type(call) is not cst.Call:
            continue
        func = call.func
        head = func
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name) or head is func:
            continue  # a module's function is called through the module's name
        found = imported(head.value)
        if found is None:
            continue
        for arg in call.args:
            if _reads(arg.value, server_names):
                given = f"`{code_of(arg.value)}`"
            else:
                held = next((n for n in holders if _reads(arg.value, {n})), None)
                if held is None:
                    continue
                given = f"`{code_of(arg.value)}` (`{holders[held]}`)"
            out.append(HandedServer(call, given, found[0], found[1]))
            break
    return out


def project_imports(module: cst.Module, index) -> dict[str, tuple[str, bool]]:
    """Names this file binds to modules of the project: name -> (dotted
    module, present). ``from pkg import mod`` binds ``mod`` to ``pkg.mod``
    when that is a module of the project, else to ``pkg`` itself."""
    out: dict[str, tuple[str, bool]] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = code_of(alias.name)
                    found = index.find(dotted, package_roots=True)
                    if found is not None:
                        local = alias.asname.name.value if alias.asname else dotted.split(".")[0]
                        out[local] = (dotted if alias.asname or "." not in dotted else local, found.present)
            elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative and (
                    not isinstance(small.names, cst.ImportStar)):
                source = code_of(small.module)
                for alias in small.names:
                    if not isinstance(alias.name, cst.Name):
                        continue
                    local = alias.asname.name.value if alias.asname else alias.name.value
                    sub = index.find(f"{source}.{alias.name.value}", package_roots=True)
                    whole = index.find(source, package_roots=True)
                    if sub is not None and sub.present:
                        out[local] = (sub.name, True)
                    elif whole is not None and whole.present and _binds(index.parse(whole), alias.name.value):
                        out[local] = (source, True)  # a function of the module (or of the package's __init__)
                    elif whole is not None:
                        out[local] = (f"{source}.{alias.name.value}", False)
    return out


def _binds(module: cst.Module | None, name: str) -> bool:
    """Whether a module binds ``name`` at its top level (def, class, assignment, import)."""
    if module is None:
        return False
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value == name:
            return True
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
                    return True
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar) and any(
                        (a.asname.name.value if a.asname else code_of(a.name).split(".")[0]) == name
                        for a in small.names):
                    return True
    return False


_TRAINING_SESSIONS = frozenset({"train.Supervisor", "train.MonitoredTrainingSession", "train.MonitoredSession"})
_SESSION_OPENERS = frozenset({"managed_session", "prepare_or_wait_for_session"})


@dataclass(frozen=True)
class SessionOnParameters:
    """A training session of a function that runs what the function is given:
    ``run_training(train_op, loss, global_step)`` opening a Supervisor and
    running ``train_op`` (directly or through ``train_step(sess, train_op)``)."""

    session: cst.Call  # the Supervisor / MonitoredTrainingSession call
    runs: tuple[str, ...]  # the parameters it runs
    through: str | None  # the helper call they go through, when not sess.run directly


def _session_names(function: cst.FunctionDef, made: cst.Call, qualname) -> set[str]:
    """Names the session built from ``made`` goes by in ``function``."""
    holder: set[str] = set()
    names: set[str] = set()
    for node in own_scope(function.body):
        if type(node) is cst.Assign and node.value is made:
            holder |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
            if qualname(made.func) != "train.Supervisor":
                names |= holder
    for node in own_scope(function.body):
        value, target = None, None
        if type(node) is cst.Assign and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            value, target = node.value, node.targets[0].target.value
        elif type(node) is cst.WithItem and node.asname is not None and isinstance(node.asname.name, cst.Name):
            value, target = node.item, node.asname.name.value
        if not isinstance(value, cst.Call):
            continue
        if value is made or (isinstance(value.func, cst.Attribute) and value.func.attr.value in _SESSION_OPENERS
                             and isinstance(value.func.value, cst.Name) and value.func.value.value in holder):
            names.add(target)
    return names


def _run_by_helper(helper: cst.FunctionDef, call: cst.Call, sessions: set[str]) -> list[str]:
    """The argument names of ``call`` (of module function ``helper``) that the
    helper runs in the session it is given (``train_step(sess, train_op)``
    whose body runs ``sess.run([train_op, ...])``)."""
    positional = [p.name.value for p in helper.params.params]
    bound: dict[str, cst.BaseExpression] = {}
    for k, arg in enumerate(call.args):
        if arg.star:
            return []
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg.value
        elif k < len(positional):
            bound[positional[k]] = arg.value
    session_params = {p for p, v in bound.items() if isinstance(v, cst.Name) and v.value in sessions}
    ran: set[str] = set()
    for node in own_scope(helper.body):
        if (type(node) is cst.Call and isinstance(node.func, cst.Attribute) and node.func.attr.value == "run"
                and isinstance(node.func.value, cst.Name) and node.func.value.value in session_params and node.args):
            ran |= {n.value for n in own_scope_all(node.args[0].value) if type(n) is cst.Name}
    return [v.value for p, v in bound.items() if p in ran and isinstance(v, cst.Name)]


def sessions_on_parameters(module: cst.Module, function: cst.FunctionDef, qualname) -> list[SessionOnParameters]:
    """The training sessions of ``function`` whose runs are its parameters."""
    helpers = {st.name.value: st for st in module.body if isinstance(st, cst.FunctionDef)}
    params = parameter_names(function)
    out = []
    for made in own_scope(function.body):
        if type(made) is not cst.Call or qualname(made.func) not in _TRAINING_SESSIONS:
            continue
        sessions = _session_names(function, made, qualname)
        runs: list[str] = []
        through = None
        for call in own_scope(function.body):
            if type(call) is not cst.Call:
                continue
            args = [a.value for a in call.args]
            if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "run"
                    and isinstance(call.func.value, cst.Name) and call.func.value.value in sessions and args):
                runs += [n.value for n in own_scope_all(args[0]) if type(n) is cst.Name and n.value in params]
            elif isinstance(call.func, cst.Name) and call.func.value in helpers and any(
                    isinstance(a, cst.Name) and a.value in sessions for a in args):
                given = [n for n in _run_by_helper(helpers[call.func.value], call, sessions) if n in params]
                if given:
                    runs += given
                    through = through or code_of(call)
        if runs:
            out.append(SessionOnParameters(made, tuple(dict.fromkeys(runs)), through))
    return out
