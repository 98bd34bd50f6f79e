"""Analysis of a TF1 session loop's hooks, shared by TFM301's session stage.

A ``MonitoredTrainingSession`` (or ``MonitoredSession``) is given its hooks
as written by people: a list literal, a name bound to one a few statements
earlier (``hooks = [sync_hook, stop_hook]``), positionally, or as
``chief_only_hooks``. These helpers find every such hook expression, so the
rule sees the ``StopAtStepHook`` bounding the loop wherever it was put.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _builtin_hooks
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._program import PSS

# where each session class takes its hooks: (keyword, position)
HOOK_ARGUMENTS = {
    "train.MonitoredTrainingSession": (("hooks", 4), ("chief_only_hooks", 5)),
    "train.MonitoredSession": (("hooks", 1),),
    "train.SingularMonitoredSession": (("hooks", 0),),
}


def hook_arguments(call: cst.Call, qualname) -> list[cst.BaseExpression]:
    """The expressions a session call is given as hooks (each a list, a
    tuple, a name or another expression), in argument order."""
    wanted = HOOK_ARGUMENTS.get(qualname(call.func) or "")
    if wanted is None:
        # Supervisor sessions and plain Sessions take no hooks; a session of
        # an unknown class is read by keyword only
        wanted = (("hooks", None), ("chief_only_hooks", None))
    out = []
    for keyword, position in wanted:
        value = C.arg(call, position, keyword)
        if value is not None and not (isinstance(value, cst.Name) and value.value == "None"):
            out.append(value)
    return out


def hook_list_names(statements, qualname, is_session) -> set[str]:
    """Names passed as a session's hooks (`hooks=hooks`): the statements
    binding them configure the session loop, not the graph."""
    names = set()
    for statement in statements:
        for call in C.calls_in(statement):
            if is_session(call):
                names.update(value.value for value in hook_arguments(call, qualname) if isinstance(value, cst.Name))
    return names


class HookList:
    """A session's hook list followed through the statements building it:
    its hooks (``conditional``: the ids of those only some branch adds), the
    names bound on the way and the statements binding them."""

    def __init__(self, hooks, conditional, names, statements):
        self.hooks: list[cst.BaseExpression] = hooks
        self.conditional: set[int] = conditional
        self.names: set[str] = names
        self.statements: set[int] = statements


def follow_hook_list(name: str, statements) -> HookList | None:
    """The hooks the list ``name`` holds after ``statements`` (in order): list
    literals, names of other lists, ``a + b`` of those, rebinding
    (``hooks = hooks + [NanTensorHook(loss)]``), ``append``/``extend``/``+=``,
    and lists bound in both branches of an ``if`` (a hook only one branch
    adds is conditional). None when any step is something else."""
    env: dict[str, tuple | None] = {}  # name -> (hooks, conditional ids, names, statements), None: unknown

    def value_of(node):
        if isinstance(node, (cst.List, cst.Tuple)):
            if any(isinstance(el, cst.StarredElement) for el in node.elements):
                return None
            return ([el.value for el in node.elements], set(), set(), set())
        if isinstance(node, cst.Name):
            return env.get(node.value)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            left, right = value_of(node.left), value_of(node.right)
            if left is None or right is None:
                return None
            return (left[0] + right[0], left[1] | right[1], left[2] | right[2], left[3] | right[3])
        return None

    def bind(target: str, value, statement):
        if value is None:
            env[target] = None
            return
        env[target] = (value[0], value[1], value[2] | {target}, value[3] | {id(statement)})

    def run(block):
        for statement in block:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                            small.targets[0].target, cst.Name):
                        target = small.targets[0].target.value
                        if isinstance(small.value, (cst.List, cst.Tuple, cst.BinaryOperation)) or (
                                isinstance(small.value, cst.Name) and small.value.value in env) or target in env:
                            bind(target, value_of(small.value), statement)
                    elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and (
                            small.target.value in env):
                        now, added = env[small.target.value], value_of(small.value)
                        ok = now is not None and added is not None and isinstance(small.operator, cst.AddAssign)
                        bind(small.target.value, (now[0] + added[0], now[1] | added[1], now[2] | added[2],
                                                  now[3] | added[3]) if ok else None, statement)
                    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(
                            small.value.func, cst.Attribute) and isinstance(small.value.func.value, cst.Name) and (
                            small.value.func.value.value in env):
                        owner, method = small.value.func.value.value, small.value.func.attr.value
                        now, arg = env[owner], C.arg(small.value, 0, None)
                        added = ([arg], set(), set(), set()) if method == "append" and arg is not None else (
                            value_of(arg) if method == "extend" else None)
                        ok = now is not None and added is not None
                        bind(owner, (now[0] + added[0], now[1] | added[1], now[2] | added[2], now[3] | added[3])
                             if ok else None, statement)
            elif isinstance(statement, cst.If):
                before = dict(env)
                run(C.body_of(statement.body))
                taken = dict(env)
                env.clear()
                env.update(before)
                other = statement.orelse
                if isinstance(other, cst.If):
                    run([other])
                elif other is not None:
                    run(C.body_of(other.body))
                for key in set(taken) | set(env):
                    a, b = taken.get(key), env.get(key)
                    if a is None or b is None:
                        env[key] = None
                        continue
                    ids_a, ids_b = {C.code_of(h) for h in a[0]}, {C.code_of(h) for h in b[0]}
                    hooks = a[0] + [h for h in b[0] if C.code_of(h) not in ids_a]
                    conditional = a[1] | b[1] | {id(h) for h in hooks if (C.code_of(h) in ids_a) != (
                        C.code_of(h) in ids_b)}
                    env[key] = (hooks, conditional, a[2] | b[2], a[3] | b[3])
            elif isinstance(statement, cst.With):
                run(C.body_of(statement.body))
            elif isinstance(statement, (cst.For, cst.While, cst.Try, cst.FunctionDef, cst.ClassDef)):
                # bound in a loop, a handler or another scope: not followed
                for n in {n for node in C.walk(statement) for n in C.assignment(node)[0]} & set(env):
                    env[n] = None

    run(list(statements))
    found = env.get(name)
    if found is None:
        return None
    return HookList(*found)


def is_sync_hook(hook, bindings) -> bool:
    """`opt.make_session_run_hook(is_chief)`, or a name bound (once) to it:
    SyncReplicasOptimizer's own hook, gone with the optimizer."""
    if isinstance(hook, cst.Name):
        bound = bindings.get(hook.value)
        hook = bound[0] if isinstance(bound, list) and len(bound) == 1 else bound
    return (isinstance(hook, cst.Call) and isinstance(hook.func, cst.Attribute)
            and hook.func.attr.value == "make_session_run_hook")


def followable(followed: HookList | None, bindings) -> bool:
    """A followed hook list whose every hook only some branch adds is
    SyncReplicas' own: the hooks that bound or drive the loop are certain."""
    return followed is not None and all(
        id(h) not in followed.conditional or is_sync_hook(h, bindings) for h in followed.hooks)


def followed_hook_names(statements, qualname, is_session) -> set[str]:
    """The names bound on the way to a session's hook list that
    ``follow_hook_list`` follows through ``statements`` (a single literal
    aside: read as it always was)."""
    out: set[str] = set()
    bindings: dict[str, list[cst.BaseExpression]] = {}
    for statement in statements:
        for node in C.walk(statement):
            names, value, _ = C.assignment(node)
            if len(names) == 1 and value is not None:
                bindings.setdefault(names[0], []).append(value)
    for name in hook_list_names(statements, qualname, is_session):
        followed = follow_hook_list(name, statements)
        if followable(followed, bindings) and len(followed.statements) > 1:
            out |= followed.names
    return out


def unread_hook_lists(statements, scope, qualname, is_session) -> list[str]:
    """The hooks given to a session of ``statements`` that the session stage
    does not read for a StopAtStepHook: a name bound to anything but one list
    literal (`hooks = sync_hooks + [stop_hook]`, bound in both branches of an
    `if`), or an expression (`hooks=base_hooks + extra`); each as a clause."""
    bindings: dict[str, list[cst.BaseExpression]] = {}
    for statement in [*scope, *statements]:
        for node in C.walk(statement):
            names, value, _ = C.assignment(node)
            if len(names) == 1 and value is not None and all(v is not value for v in bindings.get(names[0], [])):
                bindings.setdefault(names[0], []).append(value)
    out = []
    for statement in statements:
        for call in C.calls_in(statement):
            if not is_session(call):
                continue
            for given in hook_arguments(call, qualname):
                if isinstance(given, (cst.List, cst.Tuple)):
                    continue
                if isinstance(given, cst.Name):
                    values = bindings.get(given.value, [])
                    if len(values) == 1 and isinstance(values[0], (cst.List, cst.Tuple)):
                        continue
                    if followable(follow_hook_list(given.value, scope), bindings):
                        continue
                    shown = " and ".join(f"`{C.code_of(v)}`" for v in values[-2:]) or "elsewhere"
                    out.append(f"the session's hooks `{given.value}` are bound as {shown}, a list this rule does not"
                               " follow for a StopAtStepHook")
                else:
                    out.append(f"the session's hooks are `{C.code_of(given)}`, a list this rule does not follow for a"
                               " StopAtStepHook")
    return out


# ---------------------------------------------------------------- the program's own hooks

HOOK_BASE = "train.SessionRunHook"
# hook method -> the parameters TF1 passed (besides self) that the migrated call no longer has
HOOK_METHODS = {
    "begin": (),
    "after_create_session": ("session", "coord"),
    "before_run": ("run_context",),
    "after_run": ("run_context", "run_values"),
    "end": ("session",),
}


@dataclass
class ProgramHook:
    """A SessionRunHook subclass of the program whose methods become calls at
    the same points of the loop: begin() and after_create_session() where the
    session was made, before_run() and after_run(results) around each train
    step, end() where the session ended."""

    instance: str  # the hook object's name in the loop
    make: cst.BaseExpression | None  # `LoggerHook()` when it was made inside the hooks list
    element: cst.BaseExpression  # the hooks-list element (a call or a name)
    cls: cst.ClassDef
    new_cls: cst.ClassDef
    methods: set[str]  # the hook methods still called
    fetch: cst.BaseExpression | None  # what before_run's SessionRunArgs fetched
    reads_results: bool
    stops: bool  # after_run calls run_context.request_stop()
    chief: str | None = None  # a chief-only hook's guard: the session's is_chief, where every worker loops

    @property
    def title(self) -> str:
        return self.cls.name.value


def _param(function: cst.FunctionDef, k: int) -> str | None:
    params = function.params.params
    return params[k].name.value if k < len(params) else None


def hook_class(module, name: str, qualname) -> cst.ClassDef | None:
    """The program's `class <name>(tf.train.SessionRunHook)`, if it is one."""
    found = [n for n in C.walk(module) if isinstance(n, cst.ClassDef) and n.name.value == name]
    if len(found) != 1:
        return None
    bases = [qualname(b.value) for b in found[0].bases]
    return found[0] if HOOK_BASE in bases or any(b and b.startswith("train.") and b.endswith("Hook") for b in bases) \
        else None


STOP_AT_STEP = "train.StopAtStepHook"
# what StopAtStepHook's own methods do, written out for a subclass that keeps them
# (`results` is the global step its before_run fetched; the step counter is the
# hook's own `self._global_step_tensor`, given when the hook is made)
_STOP_AT_STEP_METHODS = {
    "after_create_session": (
        "def after_create_session(self, session, coord):\n"
        "    if self._last_step is None:\n"
        "        self._last_step = session.run(self._global_step_tensor) + self._num_steps\n"),
    "after_run": (
        "def after_run(self, run_context, run_values):\n"
        "    if run_values.results + 1 >= self._last_step:\n"
        "        run_context.request_stop()\n"),
}


class _StepReads(cst.CSTTransformer):
    """`session.run(self._global_step_tensor)` (also through
    `run_context.session`) -> the counter's value, read eagerly."""

    def leave_Call(self, original, updated):
        if isinstance(updated.func, cst.Attribute) and updated.func.attr.value == "run" and len(updated.args) == 1 and (
                C.code_of(updated.args[0].value) == "self._global_step_tensor"):
            return C.expr("int(self._global_step_tensor.numpy())")
        return updated


def _stop_at_step_subclass(cls: cst.ClassDef, global_step: str | None) -> cst.ClassDef | tuple[cst.CSTNode, str]:
    """A `tf.train.StopAtStepHook` subclass as a plain SessionRunHook: the
    state StopAtStepHook keeps (`_num_steps`, `_last_step`, the step counter
    given when it is made), and its own methods the subclass does not
    override, written out; reads of the counter through a session read it
    eagerly. (node, why) when the subclass relies on more of it."""
    if global_step is None:
        return cls, "the training has no global step for StopAtStepHook's state to read"
    methods = {st.name.value: st for st in cls.body.body if isinstance(st, cst.FunctionDef)}
    for name in ("__init__", "begin", "before_run"):
        if name in methods:
            return methods[name], (f"it overrides {name}(), which sets up what StopAtStepHook's own methods read"
                                   " (its step counter and limits)")
    for node in C.walk(cls):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super":
            return node, "it calls StopAtStepHook's own methods through super()"
    body = [st for st in cls.body.body]
    init = C.stmt("def __init__(self, global_step, num_steps=None, last_step=None):\n"
                  "    # the step counter and the step limits the stop test reads\n"
                  "    self._global_step_tensor = global_step\n"
                  "    self._num_steps = num_steps\n"
                  "    self._last_step = last_step\n")
    docstring = 1 if body and isinstance(C.single_expr(body[0]), (cst.SimpleString, cst.ConcatenatedString)) else 0
    first = [init] + [C.stmt(code) for name, code in _STOP_AT_STEP_METHODS.items() if name not in methods]
    first = [st.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for st in first]
    body = body[:docstring] + first + [
        st.with_changes(leading_lines=[cst.EmptyLine(indent=False), *C.strip_blank_lines(st.leading_lines)])
        if isinstance(st, cst.FunctionDef) else st for st in body[docstring:]]
    new = cls.with_changes(body=cls.body.with_changes(body=body), bases=[cst.Arg(C.expr("tf.train.SessionRunHook"))])
    return new.visit(_StepReads())


def plan_program_hook(cls: cst.ClassDef, qualname, fetchable, global_step: str | None = None
                      ) -> tuple[dict, cst.CSTNode, str] | dict:
    """The migrated class and what its calls need, or (…, node, why) when its
    body does something the loop cannot do at that point."""
    bases = [qualname(b.value) for b in cls.bases]
    if bases == [STOP_AT_STEP]:
        written = _stop_at_step_subclass(cls, global_step)
        if isinstance(written, tuple):
            return {}, *written
        plan = plan_program_hook(written, lambda node: HOOK_BASE if C.code_of(node) == "tf.train.SessionRunHook"
                                 else qualname(node), lambda name: fetchable(name) or name == global_step)
        if isinstance(plan, dict):
            plan["fetch"] = plan["fetch"] or C.expr(global_step)  # what StopAtStepHook's before_run fetched
            plan["counter"] = True  # made with the step counter
        return plan
    if bases != [HOOK_BASE]:
        base = next((C.code_of(b.value) for b in cls.bases if qualname(b.value) != HOOK_BASE), "")
        return {}, cls, (f"it extends `{base}`, whose own before_run/after_run (and private state such as"
                         " `self._last_step`) it relies on")
    info = {"methods": set(), "fetch": None, "reads_results": False, "stops": False}
    methods = {}
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value in HOOK_METHODS:
            methods[statement.name.value] = statement
    if not methods:
        return {}, cls, "it defines none of begin, after_create_session, before_run, after_run, end"
    new_methods = {}
    for name, function in methods.items():
        passed = [_param(function, k + 1) for k in range(len(HOOK_METHODS[name]))]
        for call in C.calls_in(function):
            q = qualname(call.func)
            if q is not None and not q.startswith("logging.") and not (
                    name == "before_run" and q == "train.SessionRunArgs"):
                return {}, call, (f"its {name}() calls `{C.code_of(call.func)}`, a TensorFlow graph or session"
                                  " operation with no place in a TF2 loop")
        body = function.body
        if name == "before_run":
            statements = list(body.body)
            last = statements[-1] if statements else None
            ret = last.body[0] if isinstance(last, cst.SimpleStatementLine) and isinstance(
                last.body[0], cst.Return) else None
            if any(isinstance(n, cst.Return) and (ret is None or n is not ret) for n in C.walk(body)):
                return {}, function, "its before_run() returns before its end"
            if ret is not None and ret.value is not None and not (isinstance(ret.value, cst.Name)
                                                                   and ret.value.value == "None"):
                args = ret.value
                fetch = C.arg(args, 0, "fetches") if isinstance(args, cst.Call) and qualname(
                    args.func) == "train.SessionRunArgs" else None
                if fetch is None or len(args.args) != 1 or not (
                        isinstance(fetch, cst.Name) and fetchable(fetch.value)):
                    return {}, ret, ("its before_run() asks for something a training step cannot return"
                                     " (fetches other than one tensor of the graph block, feeds or options)")
                info["fetch"] = fetch
            if ret is not None:
                statements = statements[:-1]
            body = body.with_changes(body=statements)
        context, values = (passed + [None, None])[:2] if name == "after_run" else (None, None)
        for statement in body.body:
            for n in C.walk(statement):
                if isinstance(n, cst.Name) and n.value in {p for p in passed if p} and name != "after_run":
                    # located on its statement: a bare name's text also appears in the signature
                    return {}, statement, (f"its {name}() uses `{n.value}` (TF1's {n.value}), which a TF2 loop"
                                           " does not have")
        if name == "after_run":
            body, problem = _after_run_body(body, context, values, info)
            if problem is not None:
                return {}, problem[0], problem[1]
        if not body.body:
            continue
        params = [function.params.params[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)] + (
            [cst.Param(cst.Name("results"))] if name == "after_run" and info["reads_results"] else [])
        if len(params) > 1:
            params[0] = params[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        new_methods[name] = function.with_changes(params=function.params.with_changes(params=params), body=body)
        info["methods"].add(name)
    new_body = []
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value in methods:
            if statement.name.value in new_methods:
                new_body.append(new_methods[statement.name.value])
            continue
        new_body.append(statement)
    if info["stops"]:
        docstring = 1 if new_body and isinstance(C.single_expr(new_body[0]), (cst.SimpleString,
                                                                              cst.ConcatenatedString)) else 0
        new_body.insert(docstring, C.stmt("stop_requested = False  # set by after_run(): the loop ends after this step\n"))
    if not new_body:
        new_body = [C.stmt("pass\n")]
    info["new_cls"] = cls.with_changes(bases=[], lpar=cst.MaybeSentinel.DEFAULT, rpar=cst.MaybeSentinel.DEFAULT,
                                       body=cls.body.with_changes(body=new_body))
    return info


class _AfterRun(cst.CSTTransformer):
    def __init__(self, context, values, info):
        super().__init__()
        self.context, self.values, self.info = context, values, info
        self.problem = None

    def leave_Attribute(self, original, updated):
        if isinstance(original.value, cst.Name) and original.value.value == self.values and (
                original.attr.value == "results"):
            self.info["reads_results"] = True
            return cst.Name("results")
        return updated

    def leave_Call(self, original, updated):
        func = original.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and (
                func.value.value == self.context and func.attr.value == "request_stop" and not original.args):
            self.info["stops"] = True
            return C.expr("setattr(self, 'stop_requested', True)")
        return updated


def _after_run_body(body, context, values, info):
    allowed = set()
    for n in C.walk(body):
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and (
                (n.value.value == values and n.attr.value == "results")
                or (n.value.value == context and n.attr.value == "request_stop")):
            allowed.add(id(n.value))
    for statement in body.body:
        for n in C.walk(statement):
            if isinstance(n, cst.Name) and n.value in {context, values} - {None} and id(n) not in allowed:
                why = f"its after_run() uses `{n.value}` beyond run_values.results and run_context.request_stop()"
                return body, (statement, why)
    rewriter = _AfterRun(context, values, info)
    new = body.visit(rewriter)
    # `setattr(self, ...)` stood in for the call inside expressions; a statement of its own reads plainly
    statements = []
    for statement in new.body:
        lone = C.single_expr(statement)
        if lone is not None and C.code_of(lone) == "setattr(self, 'stop_requested', True)":
            statement = C.stmt("self.stop_requested = True\n").with_changes(leading_lines=statement.leading_lines)
        statements.append(statement)
    return new.with_changes(body=[_plain_stops(s) for s in statements]), None


class _PlainStops(cst.CSTTransformer):
    def leave_SimpleStatementLine(self, original, updated):
        lone = C.single_expr(updated)
        if lone is not None and C.code_of(lone) == "setattr(self, 'stop_requested', True)":
            return C.stmt("self.stop_requested = True\n").with_changes(leading_lines=updated.leading_lines)
        return updated


def _plain_stops(statement):
    return statement.visit(_PlainStops())


def _snake(name: str) -> str:
    out = "".join("_" + c.lower() if c.isupper() else c for c in name.lstrip("_")).lstrip("_")
    return out or "hook"


def carry_program_hooks(rule, graph, scope, after, reference: str):
    """`after` with each of the program's own SessionRunHooks (given to a
    session of `after`) called at the same points of the loop, its class
    rewritten as a plain class (``rule.class_rewrites``); a hook whose body
    does what a TF2 loop cannot is reported where it does it, and left to
    the session stage (which drops it with the session, reported)."""
    qualname = rule.qualname
    rule.hook_stops, rule.hook_objects, rule.carried_hook_classes = [], set(), set()  # this block's
    sessions: set[str] = set()
    lists: dict[str, cst.List] = {}
    bound: dict[str, cst.Call] = {}
    for statement in [*scope, *after]:
        for node in C.walk(statement):
            names, value, _ = C.assignment(node)
            if len(names) == 1 and isinstance(value, cst.List):
                lists[names[0]] = value
            if len(names) == 1 and isinstance(value, cst.Call):
                bound[names[0]] = value
                if rule._is_session_call(value):
                    sessions.add(names[0])
            if isinstance(node, cst.With):
                sessions.update(n for item in node.items if isinstance(item.item, cst.Call)
                                and rule._is_session_call(item.item) and item.asname is not None
                                for n in C.target_names(item.asname.name))
    hooks: list[ProgramHook] = []
    holders: dict[int, int] = {}  # id of a session call -> how many of its hooks are carried
    chief_only = []
    passed: set[str] = set()  # hook lists given to a session by name
    for statement in after:
        for call in C.calls_in(statement):
            if not rule._is_session_call(call):
                continue
            for k, given in enumerate(hook_arguments(call, qualname)):
                if isinstance(given, cst.Name):
                    passed.add(given.value)
                elements = given.elements if isinstance(given, cst.List) else (
                    lists[given.value].elements if isinstance(given, cst.Name) and given.value in lists else ())
                for element in elements:
                    hook = _program_hook(rule, graph, element.value, bound, reference)
                    if hook is None:
                        hook = _builtin_hook(rule, graph, element.value, bound, after, sessions)
                    if hook is None:
                        continue
                    if C.arg(call, None, "chief_only_hooks") is given:
                        chief_only.append((hook, _chief_guard(call, sessions)))
                    hooks.append(hook)
                    holders[id(call)] = holders.get(id(call), 0) + 1
    if not hooks:
        return after
    if chief_only and rule.strategy != PSS:
        # every worker runs the loop: the chief's calls go under the session's own is_chief
        declined = []
        for hook, chief in chief_only:
            if getattr(hook, "stops", False) or chief is False:
                why = ("its request_stop() would end the loop on the chief only, while the other workers' steps"
                       " wait for it" if hook.stops else "the session's is_chief reads the TF1 session or calls a function,"
                       " which the loop cannot test as it is")
                rule.report(hook.element, f"the hook `{hook.title}` ran on the chief only"
                            f" (chief_only_hooks); under MultiWorkerMirroredStrategy every worker runs the loop, and"
                            f" {why}", hint="call its code in the loop under `if strategy.cluster_resolver.task_id"
                            " == 0:`", reference=reference, fixed=False)
                rule.declined_hooks[hook.title] = f"it ran on the chief only, and {why}"
                declined.append(hook)
            else:
                hook.chief = chief  # None: is_chief was left at True, every task ran it
        hooks = [h for h in hooks if h not in declined]
        if not hooks:
            return after
    placer = _PlaceHookCalls(rule, graph, hooks, sessions, lists)
    new = placer.block(after)
    # a hook list the graph block builds (`hooks = [StopHook(...)]`, `hooks.append(sync_hook)`)
    # configured the TF1 session, as the TF1 hooks in it did: it goes with that session
    graph.state = [st for st in graph.state if not _builds_hook_list(st, passed)]
    # a TensorFlow hook bound to a name goes with its calls
    made = {h.instance for h in hooks if isinstance(h, _builtin_hooks.BuiltinHook) and h.instance}
    graph.state = [st for st in graph.state if not set(C.assignment(st)[0]) & made]
    for hook in hooks:
        if isinstance(hook, _builtin_hooks.BuiltinHook):
            rule.__dict__.setdefault("handled_builtin_hooks", set()).add(C.code_of(hook.call))
            if hook.kind == _builtin_hooks.NAN:
                rule.ctx.require_import("math")
            rule.report(hook.element, f"the session hook `tf.train.{hook.title}(...)` is now code of the loop:"
                        f" {hook.where()}", fixed=True, severity="info", reference=reference)
            continue
        rule.class_rewrites[C.code_of(hook.cls)] = hook.new_cls
        rule.hook_objects.add(hook.instance)
        rule.carried_hook_classes.add(hook.cls.name.value)
        if hook.stops:
            rule.hook_stops.append(hook.instance)
        rule.report(hook.element, f"the session hook `{hook.cls.name.value}` is now a plain object whose methods the"
                    f" loop calls where the session called them ({_where(hook)})"
                    + ("; its request_stop() ends the loop" if hook.stops else ""),
                    fixed=True, severity="info", reference=reference)
    return new


def _chief_guard(call: cst.Call, sessions: set[str]) -> str | None | bool:
    """The code of a MonitoredTrainingSession's is_chief (None when it is
    left at True; False when it reads a session, gone after the migration,
    or calls something)."""
    chief = C.arg(call, 1, "is_chief")
    if chief is None:
        return None
    if isinstance(chief, cst.Name) and chief.value == "True":
        return None
    if C.names_used(chief) & sessions or any(True for _ in C.calls_in(chief)):
        return False
    return C.code_of(chief)


def _builds_hook_list(statement, names: set[str]) -> bool:
    bound, value, _ = C.assignment(statement)
    if len(bound) == 1 and bound[0] in names and isinstance(value, (cst.List, cst.Tuple)):
        return True
    lone = C.single_expr(statement)
    if isinstance(lone, cst.Call) and isinstance(lone.func, cst.Attribute) and lone.func.attr.value in (
            "append", "extend") and isinstance(lone.func.value, cst.Name) and lone.func.value.value in names:
        return True
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    return isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and small.target.value in names


def _where(hook: ProgramHook) -> str:
    places = {"begin": "begin() before the loop", "after_create_session": "after_create_session() before the loop",
              "before_run": "before_run() before each train step",
              "after_run": "after_run() after it" + (", given the value its SessionRunArgs fetched, which the step"
                                                      " now returns" if hook.reads_results else ""),
              "end": "end() after the loop"}
    return ", ".join(text for method, text in places.items() if method in hook.methods)


def _program_hook(rule, graph, element, bound, reference) -> ProgramHook | None:
    made, instance = element, None
    if isinstance(element, cst.Name) and element.value in bound:
        made, instance = bound[element.value], element.value
    if not (isinstance(made, cst.Call) and isinstance(made.func, cst.Name)):
        return None
    cls = hook_class(rule.ctx.module, made.func.value, rule.qualname)
    if cls is None:
        return None
    plan = plan_program_hook(cls, rule.qualname, lambda name: name in graph.compute_names
                             or name == graph.global_step, graph.global_step)
    if not isinstance(plan, tuple) and plan.get("counter"):
        if instance is not None:  # made elsewhere: its call would have to be given the step counter there
            plan = ({}, element, (f"it is made before the session (`{instance} = {C.code_of(made)}`), where the"
                                  " step counter StopAtStepHook reads is not given to it"))
        else:
            made = made.with_changes(args=[cst.Arg(cst.Name(graph.global_step), comma=cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))), *made.args])
    if isinstance(plan, tuple):
        _, node, why = plan
        rule.report(node, f"the session hook `{cls.name.value}` cannot become calls in the TF2 loop: {why}",
                    hint="do what the hook did inside the training loop by hand (TF2 has no session hooks)",
                    reference=reference, fixed=False)
        rule.declined_hooks[cls.name.value] = why
        return None
    name = instance or C.fresh(_snake(cls.name.value), rule.taken)
    return ProgramHook(instance=name, make=None if instance else made, element=element, cls=cls,
                       new_cls=plan["new_cls"], methods=plan["methods"], fetch=plan["fetch"],
                       reads_results=plan["reads_results"], stops=plan["stops"])


def _builtin_hook(rule, graph, element, bound, after, sessions) -> _builtin_hooks.BuiltinHook | None:
    """TensorFlow's NanTensorHook or LoggingTensorHook as code of the loop
    (_builtin_hooks); None for another hook, or one declined (reported, left
    to the session stage, which drops it with the session)."""
    made, instance = element, None
    if isinstance(element, cst.Name) and element.value in bound:
        made, instance = bound[element.value], element.value
    if not isinstance(made, cst.Call):
        return None
    planned = _builtin_hooks.plan(made, rule.qualname,
                                  lambda name: name in graph.compute_names or name == graph.global_step)
    if planned is not None and not isinstance(planned, tuple):
        other = _builtin_hooks.other_runs(after, sessions, graph.train_op)
        if other is not None:
            planned = other, (f"the session also runs `{C.code_of(C.arg(other, 0, 'fetches'))}`, and the hook saw that"
                              " run too: the loop runs its code after train steps only")
    if planned is None:
        return None
    if isinstance(planned, tuple):
        node, why = planned
        title = rule.qualname(made.func).rpartition(".")[2]
        rule.report(node, f"the session hook `tf.train.{title}(...)` cannot become code of the TF2 loop: {why}",
                    hint=f"do what {title} did after each train step in the loop by hand (TF2 has no session hooks)",
                    reference=REFERENCE_HOOKS, fixed=False)
        rule.__dict__.setdefault("handled_builtin_hooks", set()).add(C.code_of(made))
        return None
    planned.element, planned.instance = element, instance
    if planned.kind == _builtin_hooks.LOGGING:
        planned.counter = C.fresh("logged_steps", rule.taken)
        rule.taken.add(planned.counter)
    return planned


REFERENCE_HOOKS = "https://www.tensorflow.org/guide/migrate/sessionrunhook_callback"


def _guarded(hook: ProgramHook, code: str) -> str:
    """``code`` (calls of ``hook``), under its chief guard if it has one."""
    if not code or hook.chief is None:
        return code
    return f"if {hook.chief}:\n" + "".join(f"    {line}\n" for line in code.splitlines())


class _PlaceHookCalls:
    """Puts the hooks' calls at the points of the loop where the session made them."""

    def __init__(self, rule, graph, hooks, sessions, lists):
        self.rule, self.graph, self.hooks, self.sessions, self.lists = rule, graph, hooks, sessions, lists
        self.results = {h.instance: C.fresh(f"{h.instance}_results", rule.taken) for h in hooks if h.reads_results}

    def start(self) -> list[cst.BaseStatement]:
        code = ""
        for h in self.hooks:
            if isinstance(h, _builtin_hooks.BuiltinHook):
                code += _guarded(h, h.start_code())
                continue
            if h.make is not None:
                code += f"{h.instance} = {C.code_of(h.make)}\n"
            code += _guarded(h, "".join(f"{h.instance}.{m}()\n" for m in ("begin", "after_create_session")
                                        if m in h.methods))
        return C.stmts(code) if code else []

    def end(self) -> list[cst.BaseStatement]:
        code = "".join(_guarded(h, f"{h.instance}.end()\n") for h in self.hooks
                       if not isinstance(h, _builtin_hooks.BuiltinHook) and "end" in h.methods)
        return C.stmts(code) if code else []

    def _session_of(self, node) -> bool:
        """Is `node` the `with` or assignment making the session the hooks were given to?"""
        if isinstance(node, cst.With):
            calls = [i.item for i in node.items if isinstance(i.item, cst.Call)]
        else:
            _, value, _ = C.assignment(node)
            calls = [value] if isinstance(value, cst.Call) else []
        for call in calls:
            if not self.rule._is_session_call(call):
                continue
            for given in hook_arguments(call, self.rule.qualname):
                if isinstance(given, cst.Name):
                    given = self.lists.get(given.value)
                if isinstance(given, cst.List) and any(self._carried(el.value) for el in given.elements):
                    return True
        return False

    def _train_run(self, statement) -> tuple[cst.Call, list, cst.BaseExpression | None] | None:
        _, value, assign = C.assignment(statement)
        call = value if assign is not None else C.single_expr(statement)
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "run"
                and isinstance(call.func.value, cst.Name) and call.func.value.value in self.sessions):
            return None
        fetches = C.arg(call, 0, "fetches")
        items = [el.value for el in fetches.elements] if isinstance(fetches, (cst.List, cst.Tuple)) else [fetches]
        if not any(isinstance(i, cst.Name) and i.value == self.graph.train_op for i in items):
            return None
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        return call, items, target

    def _around_run(self, statement, found):
        call, items, target = found
        list_shape = isinstance(C.arg(call, 0, "fetches"), (cst.List, cst.Tuple))
        if target is None:
            targets = ["_"] * len(items)
        elif list_shape and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(items):
            targets = [C.code_of(el.value) for el in target.elements]
        elif not list_shape:
            targets = [C.code_of(target)]
        else:
            return [statement]
        item_code = [C.code_of(i) for i in items]
        fetched = {c: t for c, t in zip(item_code, targets) if t != "_"}
        before, after = [], []
        for h in self.hooks:
            if isinstance(h, _builtin_hooks.BuiltinHook):
                values = {}
                for fetch in h.fetches:
                    if fetch not in fetched:
                        fetched[fetch] = C.fresh(f"{fetch}_value", self.rule.taken)
                        self.rule.taken.add(fetched[fetch])
                        item_code.append(fetch)
                        targets.append(fetched[fetch])
                    values[fetch] = fetched[fetch]
                after.append(_guarded(h, h.after_code(values)))
                continue
            if "before_run" in h.methods:
                before.append(_guarded(h, f"{h.instance}.before_run()\n"))
            if h.reads_results:
                fetch = C.code_of(h.fetch)
                if fetch not in fetched:
                    fetched[fetch] = self.results[h.instance]
                    item_code.append(fetch)
                    targets.append(fetched[fetch])
                after.append(_guarded(h, f"{h.instance}.after_run({fetched[fetch]})\n"))
            elif "after_run" in h.methods:
                after.append(_guarded(h, f"{h.instance}.after_run()\n"))
        if len(item_code) != len(items) or (target is None and not list_shape and len(item_code) > 1):
            args = list(call.args)
            args[0] = args[0].with_changes(value=C.expr("[" + ", ".join(item_code) + "]"))
            new_call = call.with_changes(args=args)
            statement = C.stmt(f"{', '.join(targets)} = {C.code_of(new_call)}\n").with_changes(
                leading_lines=statement.leading_lines)
        out = C.stmts("".join(before)) if before else []
        if out:
            out[0] = out[0].with_changes(leading_lines=statement.leading_lines)
            statement = statement.with_changes(leading_lines=[])
        return out + [statement] + (C.stmts("".join(after)) if after else [])

    def block(self, statements, descend: bool = True):
        """`statements` with the calls placed; `descend`: also in their inner
        blocks (the nested transformer handles each inner block once, bottom-up)."""
        out = []
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                lone = C.single_expr(statement)
                if isinstance(lone, cst.Call) and isinstance(lone.func, cst.Attribute) and (
                        lone.func.attr.value == "close" and isinstance(lone.func.value, cst.Name)
                        and lone.func.value.value in self.sessions):
                    out += self.end() + [statement]
                    continue
                if set(C.assignment(statement)[0]) & {h.instance for h in self.hooks if isinstance(
                        h, _builtin_hooks.BuiltinHook) and h.instance}:
                    continue  # a TensorFlow hook made for the session: its code is the loop's now
                found = self._train_run(statement)
                if found is not None:
                    out += self._around_run(statement, found)
                    continue
                out.append(self._drop_elements(statement))
                if self._session_of(statement):
                    out += self.start()
                continue
            session = isinstance(statement, cst.With) and self._session_of(statement)
            if descend:
                statement = self._nested(statement)
            if session:
                statement = statement.with_changes(
                    items=[self._drop_elements(i) for i in statement.items],
                    body=statement.body.with_changes(body=self.start() + list(C.body_of(statement.body)) + self.end()))
            out.append(statement)
        return out

    def _nested(self, statement):
        return C.map_inner_blocks(statement, lambda statements: self.block(statements, descend=False))

    def _carried(self, element) -> bool:
        # by code too: the nested transformer hands over rebuilt nodes
        return id(element) in {id(h.element) for h in self.hooks} or (
            C.code_of(element) in {C.code_of(h.element) for h in self.hooks})

    def _drop_elements(self, node):
        """The carried hooks leave the session's hook lists."""
        placer = self

        class _Drop(cst.CSTTransformer):
            def leave_List(self, original, updated):
                kept = [el for el, was in zip(updated.elements, original.elements) if not placer._carried(was.value)]
                if len(kept) == len(updated.elements):
                    return updated
                if kept:
                    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(elements=kept)

        return node.visit(_Drop())


# ---------------------------------------------------------------- Supervisor.is_chief

def note_supervisor_chief(chiefs: dict, names, call: cst.Call) -> None:
    """`sv = tf.train.Supervisor(is_chief=..., ...)`: what `sv.is_chief` reads
    (True, TF1's default, when not given); None where the name is bound to
    Supervisors told different things."""
    given = C.arg(call, 0, "is_chief")
    code = C.code_of(given) if given is not None else "True"
    if given is not None and not isinstance(given, (cst.Name, cst.Attribute)):
        code = code if given.lpar else f"({code})"
    for name in names:
        chiefs[name] = code if chiefs.get(name, code) == code else None


def supervisor_chief_read(original: cst.Attribute, updated, chiefs: dict):
    if isinstance(original.value, cst.Name) and original.attr.value == "is_chief" and (
            chiefs.get(original.value.value) is not None):
        return C.expr(chiefs[original.value.value])
    return updated
