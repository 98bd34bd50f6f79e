"""Dotted names in a Python ``ast`` (``os.path.exists`` from its attribute chain)."""

from __future__ import annotations

import ast


def chain(node: ast.AST) -> list[str]:
    """``["os", "path", "exists"]`` for ``os.path.exists``; ``[]`` when the
    chain does not start at a plain name (a call's result, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


def dotted(node: ast.AST) -> str | None:
    """``"os.path.exists"`` for ``os.path.exists``, else None."""
    return ".".join(chain(node)) or None
