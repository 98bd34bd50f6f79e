"""``tf.train.Saver`` checkpoints of a tower program (analysis and emitted code).

The shape tower scripts write::

    saver = tf.train.Saver(tf.global_variables())
    ...
    for step in range(max_steps):
        ...
        if step % 1000 == 0:
            saver.save(sess, os.path.join(train_dir, "model.ckpt"), global_step=step)

``Saver.save`` wrote every global variable as ``<path>-<step>``, kept the
``max_to_keep`` (5) newest and listed them in the directory's ``checkpoint``
file, which ``tf.train.latest_checkpoint`` reads. In TF2 a ``tf.train.Checkpoint``
of the step counter, the optimizer and the model (and the moving averages)
saved by a ``tf.train.CheckpointManager`` with the same directory, name and
count writes the same files. Any other use of the saver (``restore``, a
variable list, a returned path) is declined by the rule.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._saver import saver_settings


class SaverPlan(NamedTuple):
    """A saver the migration can carry over: what ``max_to_keep`` it had and
    the ``saver.save(...)`` statements."""

    name: str
    made: cst.CSTNode
    max_to_keep: str
    saves: list[cst.SimpleStatementLine]


def saver_problem(name: str, made: cst.CSTNode, uses, sessions: set[str], qualname) -> tuple[cst.CSTNode, str] | SaverPlan:
    """A plan for ``name = tf.train.Saver(...)`` whose every use is a statement
    ``name.save(sess, path, global_step=n)``; else (the node, why not)."""
    _, call, _ = C.assignment(made)
    settings = saver_settings(call, qualname, ("max_to_keep",))
    if isinstance(settings, cst.Arg):
        return made, (f"`{C.code_of(settings).strip().rstrip(',')}`: TFM303 carries over a Saver of all the variables"
                      " (`tf.train.Saver()` or `tf.train.Saver(tf.global_variables())`, optionally max_to_keep=)")
    max_to_keep = settings.get("max_to_keep", "5")
    saves = []
    for use in uses:
        lone = C.single_expr(use)
        if not (isinstance(lone, cst.Call) and isinstance(lone.func, cst.Attribute)
                and isinstance(lone.func.value, cst.Name) and lone.func.value.value == name
                and lone.func.attr.value == "save"):
            return use, "it is used otherwise than in a statement `saver.save(sess, path, global_step=step)`"
        positional = [a for a in lone.args if a.keyword is None]
        keywords = {a.keyword.value for a in lone.args if a.keyword is not None}
        session = positional[0].value if positional else None
        if not (len(positional) == 2 and keywords == {"global_step"} and isinstance(session, cst.Name)
                and session.value in sessions) or any(a.star for a in lone.args):
            return use, ("its save is not `saver.save(sess, path, global_step=step)` (the session, the path and the"
                         " step number, no other argument)")
        saves.append(use)
    if not saves:
        return made, "it is never saved"
    return SaverPlan(name, made, max_to_keep, saves)


class _SaveCalls(cst.CSTTransformer):
    """`saver.save(sess, path, global_step=n)` -> `save_checkpoint(path, n)`."""

    def __init__(self, plans: list[SaverPlan], function: str):
        super().__init__()
        self.saves = {id(s): plan for plan in plans for s in plan.saves}
        self.function = function

    def leave_SimpleStatementLine(self, original, updated):
        if id(original) not in self.saves:
            return updated
        call = C.single_expr(original)
        path = C.code_of(call.args[1].value)
        step = C.code_of(C.arg(call, None, "global_step"))
        return updated.with_changes(body=[cst.Expr(C.expr(f"{self.function}({path}, {step})"))])


def rewrite_saves(statements, plans: list[SaverPlan], function: str):
    return [st.visit(_SaveCalls(plans, function)) for st in statements]


def checkpoint_code(plan: SaverPlan, checkpoint: str, function: str, tracked: list[str], averages: str | None) -> str:
    """The checkpoint of what the saver saved, and the function saving it."""
    items = [f"{n}={n}" for n in dict.fromkeys(tracked)]
    if averages is not None:
        items.append(f"moving_averages={averages}")
    listed = ", ".join(items)
    if len(listed) > 80:
        listed = "\n    " + ",\n    ".join(items)
    return (
        f"{checkpoint} = tf.train.Checkpoint({listed})\n"
        f"def {function}(path, number):\n"
        f"    # Saved as <path>-<number>; the {plan.max_to_keep} newest are kept and listed in the\n"
        "    # directory's checkpoint file (tf.train.latest_checkpoint reads it).\n"
        "    manager = tf.train.CheckpointManager(\n"
        f"        {checkpoint}, os.path.dirname(path), max_to_keep={plan.max_to_keep},"
        " checkpoint_name=os.path.basename(path))\n"
        "    manager.save(checkpoint_number=number)\n"
    )
