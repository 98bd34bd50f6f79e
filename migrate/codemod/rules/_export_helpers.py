"""TFM301, an export for serving written in a helper the training hands its
session to (analysis and rewrite).

    with tf.Session() as sess:
        ... training ...
        export_model(sess, {"x": x}, {"y": y})

    def export_model(sess, inputs_signature, outputs_signature):
        saver = tf.train.Saver(sharded=True)
        model_exporter = exporter.Exporter(saver)
        model_exporter.init(sess.graph.as_graph_def(), named_graph_signatures={
            "inputs": exporter.generic_signature(inputs_signature),
            "outputs": exporter.generic_signature(outputs_signature)})
        model_exporter.export(FLAGS.export_dir, tf.constant(FLAGS.export_version), sess)

The helper's statements are the export the training function would have
written after its loop: where the helper is called once, as a statement, with
names for its parameters, and is straight-line code binding no name the
training function uses, its body takes the call's place (parameters read as
the names passed), so that the export is carried over as one written there
(_serving_export). The helper goes when nothing else refers to it.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _dataflow


class _Rename(cst.CSTTransformer):
    """Reads of the parameters become the values passed."""

    def __init__(self, values: dict[str, cst.BaseExpression]):
        super().__init__()
        self.values = values

    def leave_Name(self, original, updated):
        return self.values.get(updated.value, updated)

    def visit_Attribute(self, node) -> bool:
        return False  # (the attribute's own name is no read: its value is renamed on leaving)

    def leave_Attribute(self, original, updated):
        return updated.with_changes(value=updated.value.visit(self))

    def visit_Arg(self, node) -> bool:
        return True

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)


def _reads(body, name: str) -> int:
    """How often ``body`` reads ``name`` (an attribute's own name is no read)."""
    attributes = {id(node.attr) for st in body for node in C.walk(st) if type(node) is cst.Attribute}
    return sum(1 for st in body for node in C.walk(st)
               if type(node) is cst.Name and node.value == name and id(node) not in attributes)


def _plain_value(value: cst.BaseExpression) -> bool:
    """A value whose evaluation does nothing but read names and literals
    (`{"x": x}`): evaluated where the helper read it, it gives the same."""
    return not any(isinstance(node, (cst.Call, cst.Await, cst.Yield, cst.Lambda, cst.NamedExpr, cst.Subscript,
                                     cst.Attribute, cst.GeneratorExp, cst.ListComp, cst.DictComp, cst.SetComp))
                   for node in C.walk(value))


def _exporting_helper(statement, functions, calls, qualname):
    """(helper, call) when ``statement`` is a call of a module function that
    exports a graph for serving and can take its place."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    expression = statement.body[0]
    call = expression.value if isinstance(expression, cst.Expr) else None
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return None
    helper = functions.get(call.func.value)
    if helper is None or calls.get(call.func.value, 0) != 1:
        return None
    if _dataflow.graph_export(helper.body, qualname) is None:
        return None
    params = helper.params
    if params.star_arg is not cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg or (
            params.posonly_params):
        return None
    if len(call.args) != len(params.params) or any(a.keyword is not None or a.star for a in call.args):
        return None
    body = C.body_of(helper.body)
    if _dataflow.bound_names(body) & {p.name.value for p in params.params}:
        return None  # a parameter rebound in the helper: not a value read as passed
    for param, argument in zip(params.params, call.args):
        # a name is read as it is; a literal of names where the helper read it once
        if not isinstance(argument.value, cst.Name) and not (
                _plain_value(argument.value) and _reads(body, param.name.value) <= 1):
            return None
    if any(not isinstance(st, cst.SimpleStatementLine) for st in body):
        return None
    if any(isinstance(node, (cst.Return, cst.Global, cst.Nonlocal, cst.Yield, cst.Await))
           for st in body for node in C.walk(st)):
        return None
    return helper, call


def inline(statements, module: cst.Module, qualname, used: set[str]):
    """``statements`` with the calls of exporting helpers replaced by their
    bodies, and the helpers' names; None when there is none to inline."""
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef}
    called = {call.func.value for st in statements for call in C.calls_in(st) if type(call.func) is cst.Name}
    functions = {name: fn for name, fn in functions.items()
                 if name in called and _dataflow.graph_export(fn.body, qualname) is not None}
    if not functions:
        return None
    calls: dict[str, int] = {}
    for node in C.walk(module):
        if type(node) is cst.Name and node.value in functions:
            calls[node.value] = calls.get(node.value, 0) + 1
    for name in functions:  # (its own definition's name is no call)
        calls[name] = calls.get(name, 0) - 1
    inlined: list[str] = []

    def rewrite(block):
        out = []
        for statement in block:
            found = _exporting_helper(statement, functions, calls, qualname)
            if found is None:
                out.append(statement)
                continue
            helper, call = found
            body = list(C.body_of(helper.body))
            if body and C.single_expr(body[0]) is not None and isinstance(C.single_expr(body[0]), cst.SimpleString):
                body = body[1:]  # its docstring
            bound = _dataflow.bound_names(body)
            if not body or bound & (used | C.names_used(call)):
                out.append(statement)
                continue
            values = {p.name.value: a.value for p, a in zip(helper.params.params, call.args)}
            body = [st.visit(_Rename(values)) for st in body]
            body[0] = body[0].with_changes(leading_lines=[*statement.leading_lines, *body[0].leading_lines])
            out += body
            inlined.append(helper.name.value)
        return out

    new = [C.map_inner_blocks(st, rewrite) for st in rewrite(list(statements))]
    return (new, inlined) if inlined else None
