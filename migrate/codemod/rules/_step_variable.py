"""Analysis: which value a TF1 session fetch of the global step returned when
the same ``sess.run`` also ran the train op that advances it.

``_, step = sess.run([train_op, global_step])`` has no ordering between the
fetch and the increment; what it returned depended on where the step lived
and on what kind of variable it was (measured on TF 2.21 and 2.15 running
TF1 graphs, ``tf.compat.v1``):

- a step on a **parameter server** (``replica_device_setter``, a ps placed by
  hand), fetched by a worker: the value **before** the step's update, with
  reference and resource variables alike. The worker asks for the value when
  its run starts; the ps can only apply the update after the worker's
  gradients arrive. So a ps/worker loop ``while step < N`` trains N steps and
  ``step % k`` sees 0, 1, 2, ...; TFM301's step functions read the step
  before ``apply_gradients`` for that reason.
- a step in the **fetching process** (in-graph towers, one machine): a
  *reference* variable (TF 1.x's default in graph mode) is fetched through an
  alias of its buffer, copied out when the run ends, so the fetch returns the
  value **after** the update (1, 2, 3, ...); a *resource* variable's read is a
  copy made before the update, so it returns the value before it.

:func:`resource_step` decides the variable kind for the second case.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._graph import GLOBAL_STEP_CREATORS, VARIABLE_CREATORS

# Program-wide switches of the variable kind, in the order the program calls them:
# True -> resource variables from then on, False -> reference variables.
_KIND_SWITCHES = {
    "enable_resource_variables": True,
    "enable_v2_behavior": True,
    "disable_resource_variables": False,
    "disable_v2_behavior": False,
}


def resource_step(module: cst.Module, qualname, step_name: str) -> bool:
    """Whether the legacy program's global step ``step_name`` is a resource
    variable when TF1 ran it.

    In order: ``use_resource=`` on the call creating it, or on a
    ``variable_scope`` around that call; else the program's own switches
    (``enable_resource_variables()``, ``disable_v2_behavior()``...); a program
    that only turns eager execution off (``disable_eager_execution()``) was
    written for TF 2.x, which makes resource variables; otherwise TF 1.x's
    default: reference variables.
    """
    creation = _creation_choice(module, qualname, step_name)
    if creation is not None:
        return creation
    kind = None
    eager_off = False
    for call in C.calls_in(module):
        q = qualname(call.func)
        if q in _KIND_SWITCHES:
            kind = _KIND_SWITCHES[q]
        elif q == "disable_eager_execution":
            eager_off = True
    if kind is not None:
        return kind
    return eager_off


def _creation_choice(module: cst.Module, qualname, step_name: str) -> bool | None:
    """``use_resource=True/False`` where the step is created: on the creating
    call itself or on an enclosing ``variable_scope``; None if not said."""
    found: list[bool | None] = []

    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.scopes: list[bool | None] = []  # enclosing `with variable_scope(...)` choices

        def visit_With(self, node: cst.With) -> None:
            choice = None
            for item in node.items:
                if isinstance(item.item, cst.Call) and qualname(item.item.func) == "variable_scope":
                    choice = _literal_bool(C.arg(item.item, None, "use_resource"))
            self.scopes.append(choice)

        def leave_With(self, original_node: cst.With) -> None:
            self.scopes.pop()

        def visit_Assign(self, node: cst.Assign) -> None:
            if not isinstance(node.value, cst.Call):
                return
            if [t for target in node.targets for t in C.target_names(target.target)] != [step_name]:
                return
            q = qualname(node.value.func)
            if q not in VARIABLE_CREATORS | GLOBAL_STEP_CREATORS:
                return
            own = _literal_bool(C.arg(node.value, None, "use_resource"))
            inherited = next((s for s in reversed(self.scopes) if s is not None), None)
            found.append(own if own is not None else inherited)

    module.visit(Finder())
    said = [choice for choice in found if choice is not None]
    return said[-1] if said else None


def _literal_bool(node: cst.BaseExpression | None) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None
