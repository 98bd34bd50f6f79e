"""Placeholders a device-setter block reads but that were made before it, for
TFM301: which ones can be made in the block instead (analysis), and the small
transforms the rule composes to move them (a placeholder-making function
inlined, the statements left behind dropped with their comments kept).

A script often makes its inputs first, at module level or at the top of its
training function, and builds the model from them inside the
``with tf.device(replica_device_setter(...)):`` block::

    x = tf.placeholder(tf.float32, [None, 784])
    if FLAGS.job_name == "worker":
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            logits = tf.matmul(x, w)
        ...
        sess.run(train_op, feed_dict={x: batch})

A placeholder holds no variable, so the device setter never placed anything of
it: made at the top of the block, it is the same graph input, and it becomes a
step argument like the block's own placeholders. That is exact only when
nothing else reads it: every read of the name lies in the block or after it in
the same body (the session code whose runs become steps), the name is bound
once in its scope, and the names its call reads are not rebound between where
it was made and the block. The same holds for ``x, y = placeholder_inputs(n)``
of a module function that only makes the placeholders it returns (TF1's
tutorial shape), which is inlined in the block.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._dataflow import bound_names
from migrate.codemod.rules._graph import PLACEHOLDERS


def _placeholder_name(statement, qualname) -> str | None:
    """`x = tf.placeholder(...)` (one plain name, one call): the name."""
    names, value, assign = C.assignment(statement)
    if assign is None or len(names) != 1 or len(assign.targets) != 1:
        return None
    if not isinstance(assign.targets[0].target, cst.Name) or not isinstance(value, cst.Call):
        return None
    return names[0] if qualname(value.func) in PLACEHOLDERS else None


def _own_scope_binds(function: cst.FunctionDef | cst.Lambda, name: str) -> bool:
    """Does the function bind ``name`` itself (a parameter or a local), so that
    its reads of the name are not reads of the module's?"""
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    if any(p.name.value == name for p in every):
        return True
    if isinstance(function, cst.Lambda):
        return False
    for node in C.walk(function.body):
        if type(node) is cst.Global and any(n.name.value == name for n in node.names):
            return False
    return name in bound_names(C.body_of(function.body))


def _reads(nodes, name: str) -> int:
    """How many times ``nodes`` read or bind ``name`` as the module's name
    (a function binding it itself, as a parameter or a local, is skipped)."""
    count = 0
    stack: list[cst.CSTNode] = list(nodes)
    while stack:
        node = stack.pop()
        if type(node) in (cst.FunctionDef, cst.Lambda) and _own_scope_binds(node, name):
            continue
        if type(node) is cst.Name and node.value == name:
            count += 1
        elif type(node) in (cst.Attribute, cst.Arg):
            stack.append(node.value)  # `obj.x`, `f(x=...)`: no reads of `x`
            continue
        stack.extend(C.children(node))
    return count


def _function_of(module: cst.Module, block) -> cst.FunctionDef | None:
    """The innermost function of ``module`` around ``block`` (one of its
    nodes), None when it is at the module's top level."""
    stack: list[tuple[cst.CSTNode, cst.FunctionDef | None]] = [(module, None)]
    while stack:
        node, function = stack.pop()
        if node is block:
            return function
        if type(node) is cst.FunctionDef:
            function = node
        stack.extend((child, function) for child in C.children(node))
    return None


def outer_placeholders(body, i: int, original_block, module: cst.Module, qualname):
    """The placeholders made before the device-setter block ``body[i]`` that
    can be made at its top instead: [(names, statement, index)] in the order
    they were made, ``index`` the statement's in ``body``, or None for a
    statement of an enclosing block's (the function's or the module's top
    level) when ``body`` is a nested block.
    ``original_block`` is the block holding ``body`` in ``module``, the tree
    the rule walks (None: ``body`` is the module's own).

    Every read of the name must lie in ``body[i:]``: the reads are counted
    there and in the name's whole scope, and the counts must agree."""
    inner = list(C.body_of(body[i].body))
    read = set().union(*(C.names_used(st) for st in inner)) if inner else set()
    own = {p for st in inner if (p := _placeholder_name(st, qualname))}
    candidates: list[tuple[int | None, cst.BaseStatement]] = list(enumerate(body[:i]))
    function = None if original_block is None else _function_of(module, original_block)
    scope = list(module.body) if function is None else list(C.body_of(function.body))
    # from the function's top level (`x = tf.placeholder(...)` before `if job == "ps": ... else: <block>`)
    enclosing = [] if function is None or original_block is function.body else scope
    candidates += [(None, st) for st in enclosing]
    if original_block is not None:
        candidates += [(None, st) for st in module.body]
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef}
    found: list[tuple[list[str], cst.BaseStatement, int | None]] = []
    seen: set[str] = set()
    for k, statement in candidates:
        names = _made_names(statement, qualname, functions)
        if not names or not set(names) & read or set(names) & (own | seen):
            continue
        seen.update(names)
        in_function = k is None and any(st is statement for st in enclosing)
        if k is None and not in_function and function is not None and any(
                _own_scope_binds(function, n) for n in names):
            continue  # the block's function has a name of its own
        where = module.body if k is None and not in_function else scope
        if any(_reads(where, n) != _reads(body[i:], n) + 1 for n in names):  # + 1: the statement's own target
            continue
        # the call's arguments must mean the same at the top of the block
        rebound: set[str] = set()
        for st in (body[k + 1:i] if k is not None else []):
            rebound.update(C.assignment(st)[0])
        if in_function:  # bound again anywhere after it in the function
            rebound = bound_names(enclosing[next(j for j, st in enumerate(enclosing) if st is statement) + 1:])
        elif k is None and function is not None:
            rebound = bound_names(C.body_of(function.body))  # the function's own names shadow the module's
        if C.names_used(statement) & (rebound - set(names)):
            continue
        found.append((names, statement, k))
    return found


def _made_names(statement, qualname, functions) -> list[str]:
    """The names a statement binds to placeholders: `x = tf.placeholder(...)`,
    or `x, y = placeholder_inputs(...)` of a module function making only the
    placeholders it returns (which the block then inlines)."""
    name = _placeholder_name(statement, qualname)
    if name is not None:
        return [name]
    names, value, assign = C.assignment(statement)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in functions):
        return []
    maker = _placeholder_maker(functions[value.func.value], qualname)
    target = assign.targets[0].target if len(assign.targets) == 1 else None
    if maker is None or not isinstance(target, (cst.Name, cst.Tuple, cst.List)) or len(names) != len(maker[1]):
        return []
    return names


def without(statements, dropped, following=None) -> list[cst.BaseStatement]:
    """``statements`` less those whose ids are in ``dropped``, the comments
    above a dropped one kept above the statement that follows it (the last
    ones above ``following``, a list holding the statement after them, when
    there is one): comments are the program's text, never lost."""
    out: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    for statement in statements:
        if id(statement) in dropped:
            carried += [line for line in statement.leading_lines if line.comment is not None]
            continue
        if carried:
            statement = statement.with_changes(leading_lines=[*statement.leading_lines, *carried])
            carried = []
        out.append(statement)
    if carried and following:
        following[0] = following[0].with_changes(leading_lines=[*following[0].leading_lines, *carried])
    return out


def _pure(expr) -> bool:
    """An argument that can be read twice with no effect: a name, an
    attribute of one, a literal, or a tuple/list/arithmetic of those."""
    kind = type(expr)
    if kind in (cst.Name, cst.Integer, cst.Float, cst.SimpleString):
        return True
    if kind is cst.Attribute:
        return _pure(expr.value)
    if kind is cst.UnaryOperation:
        return _pure(expr.expression)
    if kind is cst.BinaryOperation:
        return _pure(expr.left) and _pure(expr.right)
    if kind in (cst.Tuple, cst.List):
        return all(isinstance(el, cst.Element) and _pure(el.value) for el in expr.elements)
    return False


def _placeholder_maker(function: cst.FunctionDef, qualname) -> tuple[list[cst.BaseStatement], list[str]] | None:
    """(placeholder statements, returned names) of a function that only makes
    placeholders and returns them (TF1's tutorial ``placeholder_inputs``):
    a docstring, ``name = tf.placeholder(...)`` statements, ``return a, b``."""
    if function.decorators or function.asynchronous:
        return None
    params = function.params
    if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None or params.posonly_params:
        return None
    body = list(C.body_of(function.body))
    if body and C.single_expr(body[0]) is not None and isinstance(C.single_expr(body[0]), cst.SimpleString):
        body = body[1:]  # the docstring
    if len(body) < 2 or not isinstance(body[-1], cst.SimpleStatementLine) or type(body[-1].body[0]) is not cst.Return:
        return None
    returned = body[-1].body[0].value
    items = [returned] if isinstance(returned, cst.Name) else (
        [el.value for el in returned.elements] if isinstance(returned, (cst.Tuple, cst.List)) else [])
    if not items or not all(isinstance(v, cst.Name) for v in items):
        return None
    made = [_placeholder_name(st, qualname) for st in body[:-1]]
    names = [v.value for v in items]
    if None in made or len(set(made)) != len(made) or sorted(names) != sorted(made):
        return None
    return body[:-1], names


class _Substitute(cst.CSTTransformer):
    """Names read in an expression replaced by expressions (an attribute's
    name and a keyword are no reads: they are put back)."""

    def __init__(self, values: dict[str, cst.BaseExpression]):
        super().__init__()
        self.values = values

    def leave_Name(self, original, updated):
        return self.values.get(updated.value, updated)

    def leave_Attribute(self, original, updated):
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)


def scope_names(module: cst.Module, original_block) -> set[str]:
    """The names the function around ``original_block`` binds itself (its
    parameters and locals): what would shadow a module name there."""
    function = None if original_block is None else _function_of(module, original_block)
    if function is None:
        return set()
    params = function.params
    return bound_names(C.body_of(function.body)) | {
        p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}


def inline_placeholder_makers(inner, module: cst.Module, qualname, shadowing: set[str]):
    """``x, y = placeholder_inputs(batch)`` in the block, where the module
    function only makes the placeholders it returns: its placeholder
    statements made in the block instead, under the block's names, its
    parameters read as the call's arguments (pure ones: they are read once per
    placeholder), where ``shadowing`` (the block function's own names)
    hides none of the module names it reads. Returns (new statements, names
    of the functions inlined), or None when there is none."""
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef}
    out: list[cst.BaseStatement] = []
    inlined: list[str] = []
    for statement in inner:
        names, value, assign = C.assignment(statement)
        function = functions.get(value.func.value) if (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Name)) else None
        maker = _placeholder_maker(function, qualname) if function is not None else None
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        if maker is None or target is None or len(names) != len(maker[1]) or not isinstance(
                target, (cst.Name, cst.Tuple, cst.List)) or isinstance(target, cst.Name) != (len(maker[1]) == 1):
            out.append(statement)
            continue
        made, returned = maker
        values = _arguments(function, value)
        free = set().union(*(C.names_used(st) for st in made)) - set(values or ())
        if values is None or free & shadowing:  # a module name the block's function has one of its own for
            out.append(statement)
            continue
        renamed = dict(zip(returned, names))
        new = []
        for k, st in enumerate(made):
            call = C.assignment(st)[1].visit(_Substitute(values))
            code = f"{renamed[_placeholder_name(st, qualname)]} = {C.code_of(call)}\n"
            new.append(C.stmt(code).with_changes(leading_lines=statement.leading_lines if k == 0 else []))
        # in the order the block names them, as the call's targets read
        order = {name: j for j, name in enumerate(names)}
        out += sorted(new, key=lambda st: order[C.assignment(st)[0][0]])
        inlined.append(function.name.value)
    return (out, inlined) if inlined else None


def _arguments(function: cst.FunctionDef, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """Parameter -> the call's (pure) argument or the parameter's default."""
    params = [*function.params.params, *function.params.kwonly_params]
    values: dict[str, cst.BaseExpression] = {}
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) > len(function.params.params):
        return None
    for param, arg in zip(function.params.params, positional):
        values[param.name.value] = arg.value
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value in values or arg.keyword.value not in {p.name.value for p in params}:
                return None
            values[arg.keyword.value] = arg.value
    for param in params:
        if param.name.value not in values:
            if param.default is None:
                return None
            values[param.name.value] = param.default
    return values if all(_pure(v) for v in values.values()) else None
