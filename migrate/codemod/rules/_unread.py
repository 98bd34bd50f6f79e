"""Bindings a rewrite left unread.

When TFM201 drops the ``"ps"`` job from a MultiWorkerMirroredStrategy cluster,
the name that held the ps hosts (``ps_hosts = FLAGS.ps_hosts.split(",")``,
``from settings import ps_addrs``) is often read nowhere else any more: a
leftover of the TF1 cluster. :func:`drop_unread` removes its one binding when
nothing in the module reads the name and the bound value has no effect of its
own (a literal, a name, an attribute, ``.split()`` of one; an import alias
when the statement imports other names too). Comments above a removed
statement stay, on the next statement.
"""

from __future__ import annotations

import ast

import libcst as cst

from migrate.codemod.fastcst import module_code, transform


def _pure(value: ast.expr) -> bool:
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if not (isinstance(func, ast.Attribute) and func.attr in ("split", "strip")):
                return False
        elif not isinstance(node, (ast.Name, ast.Attribute, ast.Constant, ast.List, ast.Tuple, ast.Load)):
            return False
    return True


def unread(code: str, names: set[str]) -> set[str]:
    """Those of ``names`` that ``code`` binds exactly once (a plain assignment
    of an effect-free value, or an import alias) and never reads."""
    tree = ast.parse(code)
    loads: set[str] = set()
    strings: list[str] = []
    bindings: dict[str, int] = {}
    pure: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                loads.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            loads.update(node.names)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Name) and t.id in names:
                        bindings[t.id] = bindings.get(t.id, 0) + 1
                        pure[t.id] = len(node.targets) == 1 and isinstance(target, ast.Name) and _pure(node.value)
        else:
            # other kinds of binding (augmented, annotated, loop and with targets, defs): leave alone
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                others = [node.name]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr,
                                   ast.comprehension)):
                others = [t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                others = [t.id for item in node.items if item.optional_vars is not None
                          for t in ast.walk(item.optional_vars) if isinstance(t, ast.Name)]
            elif isinstance(node, ast.ExceptHandler) and node.name:
                others = [node.name]
            else:
                others = []
            for name in set(others) & names:
                bindings[name] = bindings.get(name, 0) + 2
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound in names:
                    bindings[bound] = bindings.get(bound, 0) + 1
                    # the module is still imported for its other names (its import has effects)
                    pure[bound] = isinstance(node, ast.ImportFrom) and len(node.names) > 1
    return {
        name for name in names
        if bindings.get(name) == 1 and pure.get(name) and name not in loads
        and not any(name in s for s in strings)
    }


class _Drop(cst.CSTTransformer):
    def __init__(self, names: set[str]):
        self.names = names

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._body(updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._body(updated.body))

    def _body(self, body):
        out: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for at, statement in enumerate(body):
            kept = self._statement(statement)
            if kept is None and (at + 1 < len(body) or not _has_comment(statement)):
                carried += list(statement.leading_lines)
                continue
            kept = kept if kept is not None else statement
            if carried:
                kept = kept.with_changes(leading_lines=[*carried, *kept.leading_lines])
                carried = []
            out.append(kept)
        return out

    def _statement(self, statement):
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return statement
        small = statement.body[0]
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value in self.names
        ):
            return None
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            aliases = [a for a in small.names if not (isinstance(a.name, cst.Name) and a.asname is None
                                                      and a.name.value in self.names)]
            if len(aliases) == len(small.names):
                return statement
            aliases[-1] = aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return statement.with_changes(body=[small.with_changes(names=aliases)])
        return statement


def _has_comment(statement) -> bool:
    return any(line.comment is not None for line in statement.leading_lines)


def drop_unread(module: cst.Module, names: set[str]) -> cst.Module:
    # (the engine's cached generation: the statements left as they are come back for the output)
    dead = unread(module_code(module), names) if names else set()
    if not dead:
        return module
    return transform(module, _Drop(dead))
