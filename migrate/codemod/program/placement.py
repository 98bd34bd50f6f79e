"""How a node of the graph is placed when no replica_device_setter block
holds it: the ``with`` items around it that choose devices, and where the
device function they use comes from.

Real programs place variables on the parameter servers in other ways than
``tf.train.replica_device_setter``: Inception's own slim library gives
``device=VariableDeviceChooser(num_ps)`` to an ``arg_scope``, TF-Slim's
``model_deploy`` returns device strings or functions from a
``DeploymentConfig``. This module names them for a located reason. It reads
code only."""

from __future__ import annotations

import builtins

import libcst as cst

from migrate.codemod.fastcst import children, code_of
from migrate.codemod.program.project import index_for


def _enclosing_withs(module: cst.Module, target: cst.CSTNode) -> list[cst.With]:
    """The ``with`` statements around ``target``, outermost first."""
    path: list[cst.CSTNode] = []

    def walk(node: cst.CSTNode) -> bool:
        if node is target:
            return True
        path.append(node)
        if any(walk(child) for child in children(node)):
            return True
        path.pop()
        return False

    walk(module)
    return [node for node in path if type(node) is cst.With]


def _head(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, (cst.Attribute, cst.Call)):
        expr = expr.value if isinstance(expr, cst.Attribute) else expr.func
    return expr.value if isinstance(expr, cst.Name) else None


def _origin(module: cst.Module, name: str, path: str | None) -> str | None:
    """Where ``name`` comes from: a project module that is absent (not beside
    the file), or the call it is bound to (``deploy_config =
    model_deploy.DeploymentConfig(...)``) and that call's origin."""
    index = index_for(path or "<string>")
    for node in _walk(module):
        if isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(getattr(node, "names", None),
                                                                              cst.ImportStar):
            source = code_of(node.module) if isinstance(node, cst.ImportFrom) and node.module is not None else ""
            for alias in node.names:
                bound = alias.asname.name.value if alias.asname else code_of(alias.name).split(".")[0]
                if bound != name:
                    continue
                dotted = f"{source}.{code_of(alias.name)}" if source else code_of(alias.name)
                found = index.find(dotted, package_roots=True) or (index.find(source, package_roots=True) if source else None)
                if found is not None and not found.present:
                    return f"`{name}` comes from `{dotted}`, which is not in this project"
                return None
    for node in _walk(module):
        if type(node) is cst.Assign and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and (
                node.targets[0].target.value == name) and isinstance(node.value, cst.Call):
            made = f"`{name}` is a `{code_of(node.value.func)}(...)`"
            head = _head(node.value.func)
            further = _origin(module, head, path) if head and head != name else None
            return f"{made}; {further}" if further else made
        if type(node) is cst.Assign and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and (
                node.targets[0].target.value == name) and isinstance(node.value, cst.Attribute):
            return f"`{name}` is `{code_of(node.value)}`"
    return None


def _walk(module: cst.Module):
    stack = [module]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def describe(module: cst.Module, node: cst.CSTNode, qualname, path: str | None) -> str | None:
    """What places ``node`` when it is not in a replica_device_setter block:
    a device function given to ``tf.device`` or as the ``device=`` of another
    ``with`` item (an ``arg_scope``), with where it comes from; None when no
    ``with`` around it chooses devices."""
    found: list[str] = []
    for with_node in reversed(_enclosing_withs(module, node)):  # innermost first
        for item in with_node.items:
            call = item.item
            if not isinstance(call, cst.Call):
                continue
            if qualname(call.func) == "device" and call.args:
                device = call.args[0].value
                if isinstance(device, (cst.SimpleString, cst.FormattedString, cst.BinaryOperation)):
                    continue  # a device string pins ops to a task; it places no variables on the ps
                chooser, how = device, "`tf.device(...)`"
            else:
                chooser = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"),
                               None)
                if chooser is None:
                    continue
                how = f"the `device=` of `{code_of(call.func)}(...)`"
            head = _head(chooser)
            origin = _origin(module, head, path) if head else None
            found.append(f"`{code_of(chooser)}`, {how}" + (f" ({origin})" if origin else ""))
    return "; ".join(found) if found else None


def receivers(module: cst.Module, node: cst.CSTNode, path: str | None) -> str | None:
    """The calls that take the value ``node`` is assigned to (``optimizer =
    tf.train.SyncReplicasOptimizer(...)`` then ``model_deploy.optimize_clones(
    clones, optimizer)``, ``slim.learning.train(..., sync_optimizer=optimizer)``),
    other than its own methods, with where their functions come from."""
    name = None
    for statement in _walk(module):
        if type(statement) is cst.Assign and statement.value is node and len(statement.targets) == 1 and isinstance(
                statement.targets[0].target, cst.Name):
            name = statement.targets[0].target.value
    if name is None:
        return None
    found: list[str] = []
    for call in _walk(module):
        if type(call) is not cst.Call or call is node:
            continue
        if not any(type(n) is cst.Name and n.value == name for arg in call.args for n in _walk(arg.value)):
            continue
        head = _head(call.func)
        if head == name or (head is not None and hasattr(builtins, head)):
            continue  # its own methods, and builtins (an error message naming it)
        text = f"`{code_of(call.func)}(...)`"
        origin = _origin(module, head, path) if head else None
        text += f" ({origin})" if origin else ""
        if text not in found:
            found.append(text)
    return ", ".join(found) if found else None
