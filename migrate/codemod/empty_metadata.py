"""Reports read from a ``RunMetadata`` nothing fills any more.

A TF1 program traced a session run to see where its ops ran::

    run_metadata = tf.RunMetadata() if step == 0 else None
    sess.run(train_op, options=trace_options, run_metadata=run_metadata)
    if step == 0:
        placement = tower_devices(run_metadata)
        for name in sorted(placement):
            print(name, "ran on", placement[name])

The migration calls a ``tf.function`` where the session ran: nothing fills the
``RunMetadata`` (a ``tf.function`` call takes no ``run_metadata``), so the
report reads an empty message and prints nothing. That code is dead; a
reviewer would ask to remove it (TensorFlow 2 reports placement with
``tf.debugging.set_log_device_placement`` or the profiler).

:func:`empty_metadata_lines` finds it in the migrated code: the bindings of a
``RunMetadata()`` (also ``RunMetadata() if cond else None``) when the legacy
program passed one to a run and the migrated program passes none, and, block
by block, every statement that reads such a name or a name bound from one (an
assignment, a call statement, a ``for`` over it); an ``if`` whose branches all
go goes with them. Nothing is removed when such a name is read anywhere else
(returned, a condition, another scope): the stage then leaves the file as it
is. The caller (:func:`migrate.codemod.orphans.tidy`) drops the lines and then
the helpers and constants only those reports read.
"""

from __future__ import annotations

import ast
import re

_FILLED = re.compile(r"[(,]\s*run_metadata\s*=(?!=)")
_SESSIONS = re.compile(r"\b(Session|MonitoredTrainingSession|MonitoredSession|managed_session|prepare_or_wait)\b")


def empty_metadata_lines(source: str, tree: ast.Module, code: str) -> dict[int, tuple[int, None]]:
    """{first line: (last line, None)} of the statements of ``code`` (whose
    ast is ``tree``) that only report an empty ``RunMetadata``."""
    if "RunMetadata" not in code or not _FILLED.search(source) or _FILLED.search(code) or _SESSIONS.search(code):
        return {}
    lines = code.splitlines()
    spans: dict[int, tuple[int, None]] = {}
    for scope in ast.walk(tree):
        if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            spans.update(_scope_lines(scope, lines))
    return {first: span for first, span in spans.items()
            if not any(other < first <= end for other, (end, _) in spans.items())}


def _scope_lines(scope: ast.AST, lines: list[str]) -> dict[int, tuple[int, None]]:
    own = _own_nodes(scope)
    empty = {node.targets[0].id for node in own if isinstance(node, ast.Assign) and len(node.targets) == 1
             and isinstance(node.targets[0], ast.Name) and _is_new_metadata(node.value)}
    if not empty:
        return {}
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) and set(n.names) & empty for n in own):
        return {}
    blocks = [body for node in own for field in ("body", "orelse", "finalbody")
              if isinstance(body := getattr(node, field, None), list) and body and isinstance(body[0], ast.stmt)
              and not (node is not scope and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    removed: list[ast.stmt] = []
    for _ in range(8):  # names bound from an empty report are empty too
        before = len(empty)
        removed = [statement for body in blocks for statement in _doomed(body, empty, lines)]
        if len(empty) == before:
            break
    gone = {id(n) for statement in removed for n in ast.walk(statement)}
    if any(isinstance(n, ast.Name) and n.id in empty and id(n) not in gone for n in own):
        return {}  # read where the report's code cannot follow: leave it
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and n is not scope
           and _reads(n, empty) and id(n) not in gone for n in own):
        return {}  # a closure reads it
    return {s.lineno: (s.end_lineno, None) for s in removed}


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope`` outside the functions and classes it defines
    (those nodes themselves included)."""
    out, todo = [], [scope]
    while todo:
        node = todo.pop()
        out.append(node)
        if node is not scope and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _is_new_metadata(value: ast.expr) -> bool:
    if isinstance(value, ast.IfExp):
        return all(_is_new_metadata(v) or (isinstance(v, ast.Constant) and v.value is None)
                   for v in (value.body, value.orelse)) and any(
            _is_new_metadata(v) for v in (value.body, value.orelse))
    if not (isinstance(value, ast.Call) and not value.args and not value.keywords):
        return False
    func = value.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "RunMetadata"


def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names for n in ast.walk(node))


def _doomed(body: list[ast.stmt], empty: set[str], lines: list[str]) -> list[ast.stmt]:
    """The statements of ``body`` that bind or read only the empty report;
    the names they bind join ``empty``."""
    out = []
    for statement in body:
        if not _whole_lines(statement, lines):
            continue
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name) and (
                    _is_new_metadata(statement.value) or _reads(statement.value, empty)):
            empty.add(statement.targets[0].id)
            out.append(statement)
        elif isinstance(statement, ast.Expr) and _reads(statement, empty):
            out.append(statement)
        elif isinstance(statement, ast.For) and not statement.orelse and _reads(statement.iter, empty):
            out.append(statement)  # a loop over an empty report runs no iteration
        elif isinstance(statement, ast.If) and not _reads(statement.test, empty) and not _calls(statement.test):
            inner = _doomed(statement.body, empty, lines)
            other = _doomed(statement.orelse, empty, lines) if statement.orelse else []
            if len(inner) == len(statement.body) and len(other) == len(statement.orelse):
                out.append(statement)
    return out


def _calls(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


def _whole_lines(statement: ast.stmt, lines: list[str]) -> bool:
    if lines[statement.lineno - 1][:statement.col_offset].strip():
        return False
    rest = lines[statement.end_lineno - 1][statement.end_col_offset:].strip()
    return not rest or rest.startswith("#")
