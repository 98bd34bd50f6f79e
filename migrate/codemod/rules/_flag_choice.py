"""Which branch of ``if <flag test>: ... else: ...`` a legacy program runs by
default, read from the flag's definition (``tf.app.flags``/absl ``DEFINE_*``,
argparse ``add_argument``). Used where both branches build training (a sync
and an async mode chosen on the command line): the default run's mode is the
one migrated."""

from __future__ import annotations

import ast

import libcst as cst

from migrate.codemod.rules import _cst as C

_DEFINERS = {"DEFINE_boolean", "DEFINE_bool", "DEFINE_integer", "DEFINE_string", "DEFINE_float", "DEFINE_enum"}


def flag_default(module: cst.Module, name: str) -> tuple[bool, object] | None:
    """(found, default value) of the command-line flag ``name``; None when no
    definition of it is found, (True, None) for no default. A default that is
    not a literal gives None (unknown)."""
    for call in C.calls_in(module):
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if method in _DEFINERS:
            flag = C.arg(call, 0, "name") or C.arg(call, 0, "flag_name")
            if isinstance(flag, cst.SimpleString) and flag.evaluated_value == name:
                default = C.arg(call, 1, "default") or C.arg(call, 1, "default_value")
                return _literal(default)
        elif method == "add_argument" and call.args and isinstance(call.args[0].value, cst.SimpleString):
            option = call.args[0].value.evaluated_value
            dest = C.arg(call, None, "dest")
            dest = dest.evaluated_value if isinstance(dest, cst.SimpleString) else option.lstrip("-").replace("-", "_")
            if dest != name:
                continue
            default = C.arg(call, None, "default")
            if default is not None:
                return _literal(default)
            action = C.arg(call, None, "action")
            if isinstance(action, cst.SimpleString):
                return {"store_true": (True, False), "store_false": (True, True)}.get(action.evaluated_value,
                                                                                     (True, None))
            return True, None
    return None


def _literal(node) -> tuple[bool, object] | None:
    if node is None:
        return True, None
    try:
        return True, ast.literal_eval(C.code_of(node))
    except (ValueError, SyntaxError):
        return None


def _bound_once(module: cst.Module, name: str):
    """The value of the one assignment to ``name`` in the module, else None."""
    bound = [node.value for node in C.walk(module) if isinstance(node, cst.Assign)
             and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
             and node.targets[0].target.value == name]
    return bound[0] if len(bound) == 1 else None


def _flag_name(module: cst.Module, expr) -> str | None:
    """``FLAGS.x`` / ``args.x``, or a name bound once to one (``x = FLAGS.x``)."""
    if isinstance(expr, cst.Name):
        expr = _bound_once(module, expr.value)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return expr.attr.value
    return None


def default_truth(module: cst.Module, test) -> tuple[str, bool] | None:
    """(flag name, whether ``test`` holds with the flag at its default), or
    None when ``test`` is not a readable test of one flag's default."""
    negate = False
    if isinstance(test, cst.Name):  # `is_sync = (FLAGS.is_sync == 1)` ... `if is_sync:`
        value = _bound_once(module, test.value)
        if isinstance(value, (cst.Comparison, cst.UnaryOperation)):
            test = value
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negate, test = True, test.expression
    compared = None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            return None
        try:
            compared = ast.literal_eval(C.code_of(target.comparator))
        except (ValueError, SyntaxError):
            return None
        negate ^= isinstance(target.operator, cst.NotEqual)
        test = test.left
    name = _flag_name(module, test)
    if name is None:
        return None
    found = flag_default(module, name)
    if found is None:
        return None
    default = found[1]
    holds = bool(default) if compared is None else default == compared
    return name, holds ^ negate


def dropped_branch(module: cst.Module, statement: cst.If):
    """The branch (an IndentedBlock or Else) the default run does not take, or
    None when the default cannot be read."""
    if statement.orelse is None:
        return None
    truth = default_truth(module, statement.test)
    if truth is None:
        return None
    return statement.orelse if truth[1] else statement.body
