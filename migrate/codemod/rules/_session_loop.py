"""Analysis of a TF1 session loop's hooks, shared by TFM301's session stage.

A ``MonitoredTrainingSession`` (or ``MonitoredSession``) is given its hooks
as written by people: a list literal, a name bound to one a few statements
earlier (``hooks = [sync_hook, stop_hook]``), positionally, or as
``chief_only_hooks``. These helpers find every such hook expression, so the
rule sees the ``StopAtStepHook`` bounding the loop wherever it was put.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C

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
