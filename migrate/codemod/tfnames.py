"""Which local names refer to TensorFlow, and what an expression means.

Legacy code spells the same API many ways::

    import tensorflow as tf;               tf.train.Server
    import tensorflow.compat.v1 as tf;     tf.train.Server
    import tensorflow as tf1;              tf1.compat.v1.train.Server
    from tensorflow.compat import v1;      v1.train.Server
    from tensorflow.train import Server;   Server
    from tensorflow import train as tr;    tr.Server

:meth:`TFNames.qualname` maps all of them to one canonical name relative to
the TensorFlow root with ``compat.v1``/``compat.v2`` removed:
``"train.Server"``. ``tensorflow`` itself canonicalises to ``""``.

Cheap by design: one walk over import statements, no libcst metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.fastcst import fast_visit

_COMPAT_PREFIXES = ("compat.v1.", "compat.v2.")


def dotted(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    parts = []
    # exact type checks: libcst node classes are ABCs, and isinstance on them
    # is slow enough to show in the engine's profile
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def canonical(full: str) -> str | None:
    """``tensorflow.compat.v1.train.Server`` -> ``train.Server``; non-TF -> None."""
    if full == "tensorflow":
        return ""
    if not full.startswith("tensorflow."):
        return None
    rest = full[len("tensorflow.") :]
    # `import tensorflow.compat.v1 as tf; tf.compat.v1.X` is valid (compat
    # modules contain compat again): strip every leading compat prefix.
    while True:
        if rest in ("compat.v1", "compat.v2"):
            return ""
        for p in _COMPAT_PREFIXES:
            if rest.startswith(p):
                rest = rest[len(p) :]
                break
        else:
            break
    if rest.startswith(("python.", "_api.")):
        return None
    return rest


def _import_target(node: cst.BaseExpression) -> str:
    return dotted(node) or ""


@dataclass
class TFNames:
    # local name -> full dotted module/object path it is bound to ("tensorflow.compat.v1")
    bindings: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_module(cls, module: cst.Module) -> TFNames:
        collector = _ImportCollector()
        fast_visit(module, collector)
        return cls(collector.bindings)

    @property
    def any(self) -> bool:
        return bool(self.bindings)

    def full_name(self, node: cst.CSTNode) -> str | None:
        head = node
        while type(head) is cst.Attribute:
            head = head.value
        if type(head) is not cst.Name or head.value not in self.bindings:
            return None  # not bound to an import: no string to build
        d = dotted(node)
        head, _, tail = d.partition(".")
        return self.bindings[head] + ("." + tail if tail else "")

    def qualname(self, node: cst.CSTNode) -> str | None:
        full = self.full_name(node)
        return canonical(full) if full else None

    def is_v1_alias(self, local: str) -> bool:
        return self.bindings.get(local) == "tensorflow.compat.v1"

    def root_alias(self) -> str | None:
        """A local name bound to the TF2 root (``import tensorflow as tf``)."""
        for local, full in self.bindings.items():
            if full == "tensorflow":
                return local
        return None


class _ImportCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.bindings: dict[str, str] = {}

    # expressions never contain imports: do not descend into them
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in node.body)

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = _import_target(alias.name)
            if not (full == "tensorflow" or full.startswith("tensorflow.")):
                continue
            if alias.asname is not None:
                local = dotted(alias.asname.name)
                if local:
                    self.bindings[local] = full
            else:
                # `import tensorflow.compat.v1` binds `tensorflow`
                self.bindings["tensorflow"] = "tensorflow"
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None:
            return False
        mod = _import_target(node.module)
        if not (mod == "tensorflow" or mod.startswith("tensorflow.")):
            return False
        if isinstance(node.names, cst.ImportStar):
            return False
        for alias in node.names:
            name = dotted(alias.name)
            if not name:
                continue
            local = dotted(alias.asname.name) if alias.asname is not None else name
            if local:
                self.bindings[local] = f"{mod}.{name}"
        return False
