"""One Python name per variable in a graph block.

TF1 programs often build layer after layer under the same Python names:

    with tf.name_scope("hidden1"):
        weights = tf.Variable(...)
        hidden1 = tf.nn.relu(tf.matmul(images, weights))
    with tf.name_scope("hidden2"):
        weights = tf.Variable(...)
        hidden2 = tf.nn.relu(tf.matmul(hidden1, weights))

In the graph each ``tf.matmul`` captured the variable bound at that point.
TFM301 creates the variables once under the strategy and runs the rest of the
block in the step function, so every binding of ``weights`` but the last
would be lost there. Here every binding of a variable name but the last gets a
name of its own (``weights_2``, ``weights_3``), and the reads up to the next binding follow
it; the last keeps the program's name, so code after the block is unchanged.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C


def _variable_bindings(statements, is_variable_call) -> dict[str, int]:
    """How many times each name is bound to a new variable in ``statements``
    (nested ``with`` blocks included)."""
    counts: dict[str, int] = {}
    for statement in statements:
        for node in C.walk(statement):
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
                if isinstance(target, cst.Name) and isinstance(node.value, cst.Call) and is_variable_call(node.value):
                    counts[target.value] = counts.get(target.value, 0) + 1
    return counts


class _Renamer(cst.CSTTransformer):
    """Renames, in source order, each binding but the last of the names in
    ``remaining`` and the reads that follow it."""

    def __init__(self, remaining: dict[str, int], taken: set[str], is_variable_call):
        self.remaining = remaining  # name -> bindings still to come
        self.taken = taken
        self.current: dict[str, str] = {}  # name -> the name its reads use now
        self.is_variable_call = is_variable_call
        self.renamed: list[tuple[str, str]] = []

    def visit_FunctionDef(self, node) -> bool:
        return False  # its own scope

    def visit_Lambda(self, node) -> bool:
        return False

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        target = original.targets[0].target if len(original.targets) == 1 else None
        if not (isinstance(target, cst.Name) and target.value in self.remaining
                and isinstance(original.value, cst.Call) and self.is_variable_call(original.value)):
            return updated
        name = target.value
        self.remaining[name] -= 1
        if self.remaining[name] == 0:  # the last binding keeps the program's name
            self.current.pop(name, None)
            return updated.with_changes(targets=[updated.targets[0].with_changes(target=cst.Name(name))])
        self.taken.add(name)  # the first one becomes `name_2`: layer order, from 2 where taken
        fresh = C.fresh(name, self.taken)
        self.current[name] = fresh
        self.renamed.append((name, fresh))
        return updated.with_changes(targets=[updated.targets[0].with_changes(target=cst.Name(fresh))])

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        return updated.with_changes(value=self.current[updated.value]) if updated.value in self.current else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        # `x.weights` is an attribute, not a read of the name `weights`
        if original.attr.value in self.current or original.attr.value in self.remaining:
            return updated.with_changes(attr=original.attr)
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg):
        return updated.with_changes(keyword=original.keyword)  # keyword names are not reads


def distinct_variable_names(statements, is_variable_call, taken: set[str]):
    """(statements with one name per variable, [(name, new name)]); the same
    statements when no name is bound to two variables."""
    counts = _variable_bindings(statements, is_variable_call)
    rebound = {name: n for name, n in counts.items() if n > 1}
    if not rebound:
        return statements, []
    renamer = _Renamer(rebound, taken, is_variable_call)
    # the leave_Assign above renames the binding after its value was visited, so a
    # binding's own value still reads the previous variable, as the TF1 line did
    out = [statement.visit(renamer) for statement in statements]
    return out, renamer.renamed
