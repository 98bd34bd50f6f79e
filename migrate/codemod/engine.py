"""The rewrite engine: runs the registered rules over one Python source.

Public API (the CLI, notebooks, ``check`` and tests use only this):

- :func:`migrate_source` -> :class:`MigrationResult`
- :class:`Diagnostic`, :class:`MigrationError`

Rules live one per file in :mod:`migrate.codemod.rules`; each is a libcst transformer
(:class:`Rule`) with a stable code. The engine never imports TensorFlow.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import gc
import itertools
import os
import re
import sys
import textwrap
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider
from pyflakes import checker as pyflakes_checker
from pyflakes import messages as pyflakes_messages

from migrate.codemod.fastcst import (
    PlainCodegenState,
    cached_walk,
    clear_caches,
    module_code,
    statement_position,
    transform,
)
from migrate.codemod.orphans import tidy
from migrate.codemod.program.project import reads as project_reads
from migrate.codemod.tfnames import TFNames
from migrate.codemod.usage import follow_topology

DOCS_BASE = "legacy_reference/"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Diagnostic:
    """A located finding. ``line``/``column`` are 1-based and refer to the
    *input* source. ``fixed`` says whether the rule rewrote the construct
    (informational) or left manual work (``fixed=False``)."""

    code: str
    message: str
    line: int
    column: int
    hint: str = ""
    reference: str = ""
    fixed: bool = False
    severity: str = "warning"  # "error" | "warning" | "info"
    cell: int | None = None  # notebook cell index, set by the notebook layer
    end_line: int | None = None
    end_column: int | None = None

    def with_location(self, line: int, column: int, cell: int | None = None) -> Diagnostic:
        return replace(self, line=line, column=column, cell=cell)


class MigrationError(Exception):
    """The source could not be processed (e.g. a syntax error). Located when possible."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.line}:{self.column or 1}: {self.message}"
        return self.message


@dataclass
class MigrationResult:
    original: str
    output: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    rules_applied: list[str] = field(default_factory=list)
    # the project modules (paths) the rules read to migrate this file: its program
    project_files: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.output != self.original

    @property
    def manual_work(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.fixed]


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Valid:
    """A fixture the rule must leave unchanged (and report nothing on)."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """A fixture the rule must rewrite to ``expected`` (``None``: left as is)
    while reporting exactly the ``diagnostics`` codes (unfixed findings)."""

    code: str
    expected: str | None = None
    diagnostics: tuple[str, ...] = ()


class RuleContext:
    """What a rule sees besides the tree: TF alias analysis of the module
    as it is when the rule starts, reporting, and imports to add."""

    def __init__(self, module: cst.Module, path: str, source: str | None = None):
        self.module = module
        self.path = path
        self.names = _tf_names(module)
        self.qualname = self.names.qualname  # the method below, without a call in between
        # the file as it came, before any rule (the engine passes it: generating
        # the module's code for every rule was the engine's largest cost)
        self.source = module.code if source is None else source
        self.reports: list[tuple[cst.CSTNode, str, str, str, str, bool, str]] = []
        self.imports: list[tuple[str, str | None, str | None]] = []

    def qualname(self, node: cst.CSTNode) -> str | None:
        """Canonical TensorFlow name of an expression, e.g. ``tf1.train.Server``
        -> ``"train.Server"`` (compat.v1/v2 stripped), or None."""
        return self.names.qualname(node)

    def require_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        self.imports.append((module, obj, asname))

    def report(
        self,
        node: cst.CSTNode,
        code: str,
        message: str,
        *,
        hint: str = "",
        reference: str = "",
        fixed: bool = False,
        severity: str = "warning",
    ) -> None:
        self.reports.append((node, code, message, hint, reference, fixed, severity))


class _Names(TFNames):
    """TFNames whose ``qualname`` answers once per node: the rules ask it
    about the same calls again and again (every analysis of a block)."""

    def __init__(self, bindings: dict[str, str]):
        super().__init__(bindings)
        self._qualnames: dict[int, tuple[cst.CSTNode, str | None]] = {}

    def qualname(self, node: cst.CSTNode) -> str | None:
        found = self._qualnames.get(id(node))
        if found is not None and found[0] is node:
            return found[1]
        q = TFNames.qualname(self, node)
        self._qualnames[id(node)] = (node, q)
        return q


_BINDINGS: list[tuple[cst.Module, dict[str, str]]] = []


def _tf_names(module: cst.Module) -> TFNames:
    """``TFNames.from_module(module)``; the import scan is done once per module
    (a rule that changes nothing hands the next one the same module)."""
    for known, bindings in _BINDINGS:
        if known is module:
            return _Names(dict(bindings))
    bindings = TFNames.from_module(module).bindings
    _BINDINGS.insert(0, (module, dict(bindings)))
    del _BINDINGS[4:]
    return _Names(bindings)


class Rule(cst.CSTTransformer):
    """Base class of every rule. Subclasses set the class attributes and
    implement ``visit_*``/``leave_*`` (plain libcst, no matchers or metadata
    for speed), or override :meth:`transform` for whole-module work.

    Docstring shape (ruff style): what it does / why / example / fix safety.
    """

    code: ClassVar[str] = "TFM000"
    name: ClassVar[str] = "base"
    # The rule runs only on sources containing at least one of these
    # substrings (a cheap gate before any tree walk). Empty: always runs.
    triggers: ClassVar[tuple[str, ...]] = ()
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, ctx: RuleContext):
        super().__init__()
        self.ctx = ctx
        qualname = getattr(ctx, "qualname", None)
        if qualname is not None:  # the method below, without two calls in between
            self.qualname = qualname

    # convenience
    def qualname(self, node: cst.CSTNode) -> str | None:
        return self.ctx.qualname(node)

    def report(self, node: cst.CSTNode, message: str, **kw) -> None:
        code = kw.pop("code", self.code)
        self.ctx.report(node, code, message, **kw)

    def transform(self, module: cst.Module) -> cst.Module:
        return transform(module, self)

    @classmethod
    def applies_to(cls, source: str) -> bool:
        return not cls.triggers or any(t in source for t in cls.triggers)


# --------------------------------------------------------------------------- engine


def _syntax_check(source: str, path: str) -> ast.Module:
    """libcst accepts some Python 2 (``except E, e:``) as a tuple clause;
    ``ast`` does not, so it decides what is Python 3."""
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as e:
        raise MigrationError(f"syntax error: {e.msg}", e.lineno, e.offset) from None
    except ValueError as e:  # e.g. null bytes
        raise MigrationError(f"cannot parse: {e}") from None


# where ``str.splitlines`` splits and ``ast`` does not start a line (``\r``: a
# lone one in a string; CRLF sources take the tokenizing path too)
_ODD_LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


class _Locator:
    """Where a reported node is in the *input* source, found by its text.

    Rules report on nodes of trees earlier rules already rebuilt, so node
    identity is lost; resolving libcst positions for every reporting rule
    (and mapping them back through a diff) was the engine's largest cost.
    The first line of the node's code is searched in the input instead; the
    k-th report of the same text maps to its k-th occurrence. Only that first
    line is generated; a node spanning several lines ends where the input's
    ``ast`` node starting at the same place ends."""

    def __init__(self, original: str, tree: ast.Module):
        self.lines = original.splitlines()
        # (Python 3.12's tokenize splits f-strings into tokens of their own)
        self.plain_lines = sys.version_info < (3, 12) and not any(c in original for c in _ODD_LINE_BREAKS)
        self.tree = tree
        self.seen: dict[str, int] = {}
        self._ends: dict[tuple[int, int], tuple[int, int]] | None = None
        self._text: str | None = None  # the lines joined by newlines, and where each starts in it
        self._starts: list[int] = []
        self._masks: dict[int, list[tuple[int, int]]] | None = None

    def fresh(self) -> _Locator:
        """A locator for another run over the same input: no report seen yet;
        the spans and ends found so far are shared (they depend only on the input)."""
        other = _Locator.__new__(_Locator)
        other.__dict__.update(self.__dict__)
        other.seen = {}
        return other

    def share(self, fresh: _Locator) -> None:
        """Keep what ``fresh`` (from :meth:`fresh`) found about the input."""
        self._masks = self._masks if self._masks is not None else fresh._masks
        self._ends = self._ends if self._ends is not None else fresh._ends
        if self._text is None:
            self._text, self._starts = fresh._text, fresh._starts

    def _masked(self) -> dict[int, list[tuple[int, int]]]:
        """Line -> column spans of comments and strings: text there is not
        code (``# import tensorflow as tf`` on line 1, a usage docstring)."""
        if self._masks is None and self.plain_lines:
            self._masks = self._ast_masks()
        if self._masks is None:
            self._masks = {}
            readline = iter([line + "\n" for line in self.lines]).__next__
            try:
                for tok in tokenize.generate_tokens(readline):
                    if tok.type not in (tokenize.COMMENT, tokenize.STRING):
                        continue
                    (l0, c0), (l1, c1) = tok.start, tok.end
                    for line in range(l0, l1 + 1):
                        start = c0 if line == l0 else 0
                        end = c1 if line == l1 else len(self.lines[line - 1])
                        self._masks.setdefault(line, []).append((start, end))
            except (tokenize.TokenError, SyntaxError, IndexError):
                pass  # unfinished input: search everything
        return self._masks

    def _ast_masks(self) -> dict[int, list[tuple[int, int]]]:
        """The spans of :meth:`_masked` without tokenizing the input (pure-Python
        ``tokenize`` cost more than every rule but one): strings are the input
        ``ast``'s string constants and f-strings, comments the rest of a line
        from a ``#`` outside them. Where they differ from the tokens (the
        blanks between implicitly concatenated strings), no searched text
        starts: it starts with code."""
        masks: dict[int, list[tuple[int, int]]] = {}
        lines = self.lines
        stack: list[ast.AST] = [self.tree]
        ast_node = ast.AST
        while stack:
            n = stack.pop()
            kind = n.__class__
            if kind is ast.JoinedStr or (kind is ast.Constant and isinstance(n.value, (str, bytes))):
                l0, l1 = n.lineno, n.end_lineno
                c0, c1 = self._char_col(l0, n.col_offset), self._char_col(l1, n.end_col_offset)
                for line in range(l0, l1 + 1):
                    start = c0 if line == l0 else 0
                    end = c1 if line == l1 else len(lines[line - 1])
                    masks.setdefault(line, []).append((start, end))
                continue  # nothing in an f-string is code
            for name in n._fields:
                value = getattr(n, name, None)
                if type(value) is list:
                    stack.extend(v for v in value if isinstance(v, ast_node))
                elif isinstance(value, ast_node):
                    stack.append(value)
        for i, line in enumerate(lines, 1):
            col = line.find("#")
            spans = masks.get(i, ())
            while col >= 0 and any(a <= col < b for a, b in spans):
                col = line.find("#", col + 1)
            if col >= 0:
                masks.setdefault(i, []).append((col, len(line)))
        return masks

    def _find(self, snippet: str, nth: int) -> tuple[int, int] | None:
        """The ``nth`` hit of ``snippet`` in code (else in comments and strings),
        hits in line and column order. ``snippet`` is one stripped line (no line
        break), so it is searched in the lines joined by newlines."""
        code_hits, other_hits = [], []
        masks = self._masked()
        if self._text is None:
            self._text = "\n".join(self.lines)
            self._starts = list(itertools.accumulate((len(line) + 1 for line in self.lines[:-1]), initial=0))
        text, starts = self._text, self._starts
        at = text.find(snippet)
        while at >= 0:
            i = bisect.bisect_right(starts, at)  # 1-based line
            col = at - starts[i - 1]
            inside = any(a <= col < b for a, b in masks.get(i, ()))
            (other_hits if inside else code_hits).append((i, col + 1))
            if len(code_hits) > nth:
                return code_hits[nth]
            at = text.find(snippet, at + 1)
        hits = code_hits or other_hits
        if not hits:
            return None
        return hits[min(nth, len(hits) - 1)]

    def _char_col(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def _end(self, line: int, col: int) -> tuple[int, int] | None:
        """End (1-based, exclusive column) of the widest input ``ast`` node
        that starts at ``line``:``col``."""
        if self._ends is None:
            self._ends = ends = {}
            # _char_col is the identity on ASCII lines (and outside the input)
            other = {i for i, text in enumerate(self.lines, 1) if not text.isascii()}
            for n in _ast_nodes(self.tree):
                if getattr(n, "end_lineno", None) is None:
                    continue
                start_line, end_line = n.lineno, n.end_lineno
                start_col = self._char_col(start_line, n.col_offset) if start_line in other else n.col_offset
                end_col = self._char_col(end_line, n.end_col_offset) if end_line in other else n.end_col_offset
                key = (start_line, start_col + 1)
                end = (end_line, end_col + 1)
                if key not in ends or end > ends[key]:
                    ends[key] = end
        return self._ends.get((line, col))

    def locate(self, node: cst.CSTNode) -> tuple[int, int, int, int] | None:
        text, whole = first_line_code(node)
        lines = [line.strip() for line in text.splitlines()]
        first = next((line for line in lines if line and not line.startswith("#")), None)
        if first is None:
            return None
        for snippet in (first, first.replace("tf.compat.v1.", "tf."), first[:40]):
            nth = self.seen.get(snippet, 0)
            found = self._find(snippet, nth)
            if found is not None:
                self.seen[snippet] = nth + 1
                line, col = found
                body = text.rstrip().splitlines()
                if whole and len(body) > 1:
                    return line, col, line + len(body) - 1, len(body[-1].rstrip()) + 1
                end = None if whole else self._end(line, col)
                return (line, col, *end) if end else (line, col, line, col + len(first))
        return None


class _FirstLineDone(Exception):
    pass


class _FirstLineState(PlainCodegenState):
    """Code generation that stops after the first line with code on it: a
    reported node may be a whole training loop, and generating it just to
    read its first line cost more than the rule that reported it."""

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value:
            done = "".join(self.tokens).split("\n")[:-1]
            if any(line.strip() and not line.strip().startswith("#") for line in done):
                raise _FirstLineDone


def first_line_code(node: cst.CSTNode) -> tuple[str, bool]:
    """The node's code up to its first line with code, and whether that is all of it."""
    state = _FirstLineState(default_indent=_EMPTY.default_indent, default_newline=_EMPTY.default_newline)
    try:
        node._codegen(state)
    except _FirstLineDone:
        return "".join(state.tokens), False
    return "".join(state.tokens), True


_EMPTY = cst.Module(body=[])


def _resolve_reports(ctx: RuleContext, module: cst.Module, locator: _Locator, position_of) -> list[Diagnostic]:
    if not ctx.reports:
        return []
    out = []
    for node, code, message, hint, reference, fixed, severity in ctx.reports:
        where = locator.locate(node)
        if where is None:
            # new code with no counterpart in the input: position in this rule's input tree
            pos = position_of(module, node)
            where = (pos.start.line, pos.start.column + 1, pos.end.line, pos.end.column + 1) if pos else (1, 1, 1, 1)
        line, col, end_line, end_col = where
        out.append(
            Diagnostic(
                code=code,
                message=message,
                line=line,
                column=col,
                hint=hint,
                reference=reference,
                fixed=fixed,
                severity=severity,
                end_line=end_line,
                end_column=end_col,
            )
        )
    return out


def _import_key(statement: cst.CSTNode) -> list[tuple[str, str | None, str | None]]:
    """What a top-level import line binds: (module, name, alias) triples."""
    out: list[tuple[str, str | None, str | None]] = []
    if not isinstance(statement, cst.SimpleStatementLine):
        return out
    for small in statement.body:
        if isinstance(small, cst.Import):
            for a in small.names:
                alias = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
                out.append((_dotted(a.name), None, alias))
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            if isinstance(small.names, cst.ImportStar):
                continue
            for a in small.names:
                alias = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
                out.append((_dotted(small.module), _dotted(a.name), alias))
    return out


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _add_imports(module: cst.Module, imports: Iterable[tuple[str, str | None, str | None]]) -> cst.Module:
    """Add missing top-level imports after the last existing one (after the
    docstring and ``__future__`` imports when there is none). A plain
    replacement for libcst's AddImportsVisitor, which is matcher-based and
    dominated the engine's run time."""
    wanted = list(dict.fromkeys(imports))
    if not wanted:
        return module
    body = list(module.body)
    present = {key for st in body for key in _import_key(st)}
    last_import = -1
    for i, st in enumerate(body):
        if _import_key(st) or (isinstance(st, cst.SimpleStatementLine) and i == 0
                               and isinstance(st.body[0], cst.Expr)
                               and isinstance(st.body[0].value, (cst.SimpleString, cst.ConcatenatedString))):
            last_import = i
        elif last_import >= 0 or not isinstance(st, cst.SimpleStatementLine):
            break
    new_lines: list[cst.BaseStatement] = []
    from_groups: dict[str, list[str]] = {}
    for mod, obj, asname in sorted(wanted, key=lambda w: (w[0], w[1] or "", w[2] or "")):
        if (mod, obj, asname) in present:
            continue
        if obj is None:
            code = f"import {mod}" + (f" as {asname}" if asname else "")
            new_lines.append(cst.parse_statement(code + "\n"))
        else:
            from_groups.setdefault(mod, []).append(obj + (f" as {asname}" if asname else ""))
    for mod, names in from_groups.items():
        new_lines.append(cst.parse_statement(f"from {mod} import {', '.join(sorted(set(names)))}\n"))
    if not new_lines:
        return module
    rest = body[last_import + 1 :]
    if rest and not _import_key(rest[0]) and not any(line.comment is None for line in rest[0].leading_lines[:1]):
        # a blank line between the import block and the code, as isort would
        rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(), *rest[0].leading_lines])
    return module.with_changes(body=body[: last_import + 1] + new_lines + rest)


def mentions_tensorflow(source: str) -> bool:
    """Byte-level pre-filter: a file that never says 'tensorflow' is not ours."""
    return "tensorflow" in source


def selected_rules(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[type[Rule]]:
    from migrate.codemod.rules import REGISTRY

    def matches(code: str, prefixes: Iterable[str]) -> bool:
        return any(code.startswith(p) or p == "ALL" for p in prefixes)

    rules = list(REGISTRY)
    if select:
        sel = list(select)
        rules = [r for r in rules if matches(r.code, sel)]
    if ignore:
        ign = list(ignore)
        rules = [r for r in rules if not matches(r.code, ign)]
    return rules


def migrate_source(
    source: str,
    *,
    path: str = "<string>",
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    cell_marker: str | None = None,
) -> MigrationResult:
    """Run the selected rules over ``source`` and return the result.

    Raises :class:`MigrationError` when the source is not valid Python 3 or
    the rewritten code would not compile (nothing is ever written then).
    ``cell_marker``: a regular expression matching the line that starts each
    cell of a notebook program; each cell must compile on its own then, as
    IPython compiles them (a top-level ``await`` or a cell's own
    ``from __future__`` import is fine).
    """
    if not mentions_tensorflow(source):
        return MigrationResult(source, source)
    # The rules allocate hundreds of thousands of CST nodes and none of them
    # is in a reference cycle (libcst nodes do not point to their parents):
    # the cyclic collector's passes over them found nothing to free and cost
    # about a seventh of the engine's time. Whatever cyclic garbage this run
    # makes (exceptions' frames) is collected after it, at the next pass.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _migrate(source, path, select, ignore, cell_marker)
    finally:
        # the caches of node walks, code and names hold this source's trees
        clear_caches()
        _BINDINGS.clear()
        _AST_NODES.clear()
        if collecting:
            gc.enable()


def _migrate(
    source: str, path: str, select: Iterable[str] | None, ignore: Iterable[str] | None, cell_marker: str | None
) -> MigrationResult:
    tree = _syntax_check(source, path)
    try:
        module = original = cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise MigrationError(f"syntax error: {e.message}", e.raw_line, e.raw_column + 1) from None

    rules = [r for r in selected_rules(select, ignore) if r.applies_to(source)]
    runs = _Runs(original, source, path, tree)
    with project_reads() as read:
        module, diagnostics, applied = runs.run(rules)
    output = runs.checked_code(module, applied)
    gated: list[Diagnostic] = []
    training_rules_ran = any(r.code in _TRAINING_RULES for r in rules)
    while output is not source:
        # The cluster rules only serve the training rewrite: where TF1
        # training that needs the TF1 cluster is still in the output, a
        # resolver, a chief or a serving branch would break it (a session on
        # a `server` that now exists on another branch, a device setter over
        # a cluster without its ps). Leave the cluster as TF1 then
        # (only when a training rule ran: selected alone, a cluster rule does
        # what it was asked to.)
        dropped = [r for r in rules if r.code in _CLUSTER_RULES and r.code in applied]
        # Rules that only prepare TF1 code for the training rewrite (TFM300
        # inlines a graph builder) are undone too when that rewrite did not
        # happen; TFM301's own diagnostic names the builder.
        prepared = [r for r in rules if r.code in _TRAINING_PREP_RULES and r.code in applied]
        leftover = (
            _tf1_training_left(output[1], tree) if (dropped or prepared) and training_rules_ran else None
        )
        if leftover is not None:
            if dropped:
                # and a strategy the training rule built would run next to the
                # TF1 server on the same task (its port is taken): all or nothing
                dropped += [r for r in rules if r.code == "TFM301" and r.code in applied]
                gated.extend(_cluster_kept(r, leftover, tree) for r in dropped)
            if prepared:
                # why the training stayed TF1 once the builder was inlined: the
                # run without the inlining only sees the builder's call
                found_with = f" (found with the rewrite of {' and '.join(r.code for r in prepared)} applied)"
                gated.extend(replace(d, message=d.message + found_with)
                             for d in diagnostics if d.code == "TFM301" and not d.fixed and d.severity != "info")
            dropped += prepared
        else:
            # A rewrite must not read names it no longer defines (a statement
            # a rule dropped that the code around it still uses, when another
            # rule could not take over that code; a name read before the
            # statement that now binds it): find the rule whose change did
            # that, keep its input, and say what is left to do by hand.
            introduced = runs.introduced_names(output[1])
            if introduced:
                dropped = _culprits(runs, rules, applied)
                gated.extend(_unsafe_rewrite(r, introduced, tree, diagnostics) for r in dropped)
            else:
                # A TF1 server the cluster rules declined to rewrite (they
                # report why) or could not see (a helper built it), next to
                # the strategy the training rule built: both would serve this
                # task. All or nothing.
                if "TFM301" not in applied:
                    break
                dropped = [r for r in rules if r.code == "TFM301"]
                server = _tf1_server_left(output[1])
                if server is not None:
                    gated.extend(_cluster_kept(r, server, tree) for r in dropped)
                else:
                    server = _opaque_server_left(output[1], tree)
                    if server is None:
                        break
                    gated.extend(_opaque_server_kept(r, server, tree) for r in dropped)
        rules = [r for r in rules if r not in dropped]
        module, diagnostics, applied = runs.run(rules)
        output = runs.checked_code(module, applied)
    if output is not source:
        tidied = tidy(source, output[0], cell_marker, trees=(tree, output[1]))
        tidied, usage_changes = follow_topology(path, source, tidied)
        diagnostics.extend(Diagnostic("TFM506", message, line, 1, fixed=True, severity="info")
                           for line, message in usage_changes)
        if tidied != output[0]:
            output = (tidied, ast.parse(tidied, filename=path))
        _compile_gate(output, runs, rules, applied, cell_marker)
    if output is not source:
        # an import of a removed module that a later rule wrote out (TFM300: TF's MNIST tutorial
        # module) is no longer the program's: its report goes with it
        diagnostics = [d for d in diagnostics if not _removed_import_gone(d, output[1])]
    # a reason found with a builder inlined that the final run also gives is said once
    final = {(d.code, d.line, d.column, d.message) for d in diagnostics}
    diagnostics.extend(d for d in gated if (
        d.code, d.line, d.column, _FOUND_WITH.sub("", d.message)) not in final or not _FOUND_WITH.search(d.message))
    output = output if output is source else output[0]
    diagnostics.sort(key=lambda d: (d.line, d.column, d.code))
    own = os.path.abspath(path) if not path.startswith("<") else None
    return MigrationResult(source, output, _dedupe(diagnostics), applied, sorted(p for p in read if p != own))


class _Runs:
    """The rules' runs over one input. The gates above rerun the rules with
    some left out (up to one run per applied rule, to find the culprit): a
    rule's rewrite and reports depend only on the module it is handed and the
    path, so each rule is transformed once per distinct input module, and a
    rerun redoes only the rules after the first one left out that changed
    the code. Reports are located again on every run (the locator counts the
    k-th report of a text per run), and outputs are parsed and checked for
    undefined names once each."""

    def __init__(self, original: cst.Module, source: str, path: str, tree: ast.Module):
        self.original = original
        self.source = source
        self.path = path
        self.tree = tree
        self.locator = _Locator(source, tree)
        # (rule, id(input module)) -> (input module, output module, ctx, changed)
        self._transforms: dict[tuple[type[Rule], int], tuple[cst.Module, cst.Module, RuleContext, bool]] = {}
        # id(module) -> (module, its libcst positions)
        self._positions: dict[int, tuple[cst.Module, object]] = {}
        # (id(module), id(node)) -> (module, node, its position there)
        self._node_positions: dict[tuple[int, int], tuple[cst.Module, cst.CSTNode, object]] = {}
        # id(module) -> (module, _checked_code of it)
        self._checked: dict[int, tuple[cst.Module, object]] = {}
        self._undefined_in_source: frozenset[str] | None = None

    def run(self, rules: list[type[Rule]]):
        """(module with the rules' changes and the imports they need, diagnostics, applied codes)"""
        diagnostics: list[Diagnostic] = []
        applied: list[str] = []
        pending_imports: list[tuple[str, str | None, str | None]] = []
        locator = self.locator.fresh()
        module = self.original
        for rule_cls in rules:
            key = (rule_cls, id(module))
            known = self._transforms.get(key)
            if known is None or known[0] is not module:
                ctx = RuleContext(module, self.path, self.source)  # the file as it came: what reports can be located in
                new_module = rule_cls(ctx).transform(module)
                changed = new_module is not module and not new_module.deep_equals(module)
                known = self._transforms[key] = (module, new_module, ctx, changed)
            _, new_module, ctx, changed = known
            diagnostics.extend(_resolve_reports(ctx, module, locator, self._position))
            pending_imports.extend(ctx.imports)
            if changed:
                applied.append(rule_cls.code)
                module = new_module
        self.locator.share(locator)
        if applied:
            if _uses_unbound_tf(module):
                # rules spell new code from `tf`; make sure it is TensorFlow's root
                pending_imports.append(("tensorflow", None, "tf"))
            module = _add_imports(module, pending_imports)
        return module, diagnostics, applied

    def _position(self, module: cst.Module, node: cst.CSTNode):
        """libcst's position of ``node`` in ``module``, generating only the
        top-level statement holding it when it is found there exactly once."""
        key = (id(module), id(node))
        known = self._node_positions.get(key)
        if known is not None and known[0] is module and known[1] is node:
            return known[2]
        try:
            position = statement_position(module, node)
            self._node_positions[key] = (module, node, position)
            return position
        except LookupError:
            pass
        known = self._positions.get(id(module))
        if known is None or known[0] is not module:
            positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            known = self._positions[id(module)] = (module, positions)
        return known[1].get(node)

    def checked_code(self, module: cst.Module, applied: list[str]):
        """:func:`_checked_code`, once per module (``_add_imports`` hands back
        the module it was given when no import is missing)."""
        if not applied:
            return self.source
        known = self._checked.get(id(module))
        if known is None or known[0] is not module:
            known = self._checked[id(module)] = (module, _checked_code(module, applied, self.source, self.path))
        return known[1]

    def introduced_names(self, output: ast.Module) -> list[str]:
        """Names ``output`` reads undefined that the input did not."""
        undefined_after = undefined_names(output)
        if not undefined_after:
            return []
        if self._undefined_in_source is None:
            self._undefined_in_source = undefined_names(self.tree)
        return sorted(undefined_after - self._undefined_in_source)


def _checked_code(module: cst.Module, applied: list[str], source: str, path: str):
    """``source`` itself when nothing changed, else (code, its ast); raises
    when the code does not parse: a rule bug, never handed out."""
    if not applied:
        return source
    output = module_code(module)
    if output == source:
        return source
    try:
        return output, ast.parse(output, filename=path)
    except SyntaxError as e:
        raise MigrationError(
            f"internal error: rewritten code does not parse ({e.msg} at line {e.lineno});"
            " file left unchanged, please report this",
            1,
            1,
        ) from None


def compile_error(code: str | ast.Module, path: str, top_level_await: bool = False) -> SyntaxError | None:
    """What ``compile()`` refuses in ``code`` (source or its ``ast``), else None.
    ``ast.parse`` is not enough: a repeated keyword argument, a duplicate
    parameter, ``return`` or ``await`` outside a function parse but do not
    compile."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0
    try:
        compile(code, path, "exec", flags=flags, dont_inherit=True)
    except SyntaxError as e:
        return e
    except ValueError as e:  # e.g. null bytes in a source
        return SyntaxError(str(e))
    return None


def _program_compile_error(code: str, tree: ast.Module, path: str, cell_marker: str | None) -> SyntaxError | None:
    """:func:`compile_error` of a module, or of each cell of a notebook
    program (``cell_marker``: see :func:`migrate_source`). The text before
    the first marker belongs to the first cell (imports added on top), the
    marker lines are compiled as blank lines and each cell is preceded by
    blank lines, so errors are located at program lines."""
    if cell_marker is None:
        return compile_error(tree, path)
    marker = re.compile(cell_marker)
    lines = code.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if marker.match(line)]
    bounds = [0, *starts[1:], len(lines)]
    for start, end in itertools.pairwise(bounds):
        cell = "".join("\n" if marker.match(line) else line for line in lines[start:end])
        error = compile_error("\n" * start + cell, path, top_level_await=True)
        if error is not None:
            return error
    return None


def _compile_gate(output, runs: _Runs, rules, applied, cell_marker: str | None) -> None:
    """Raise a located :class:`MigrationError` naming the rule whose change
    makes the output not compile: the first rule, in run order, after whose
    change the code no longer compiles (all the applied ones when only their
    combination fails). The file is then left as it is."""
    source, path, tree = runs.source, runs.path, runs.tree
    error = _program_compile_error(output[0], output[1], path, cell_marker)
    if error is None:
        return
    refused = _program_compile_error(source, tree, path, cell_marker)
    if refused is not None:  # Python refuses the input too: nothing a rule did
        raise MigrationError(
            f"syntax error: {refused.msg} (the file parses but does not compile)", refused.lineno, refused.offset
        )
    culprits = [r for r in rules if r.code in applied]
    for k, rule_cls in enumerate(rules, 1):
        if rule_cls.code not in applied:
            continue
        module, _, applied_now = runs.run(rules[:k])
        code = runs.checked_code(module, applied_now)
        if code is not source and _program_compile_error(code[0], code[1], path, cell_marker) is not None:
            culprits = [rule_cls]
            break
    names = ", ".join(f"{r.code} ({r.name})" for r in culprits)
    out_lines = output[0].splitlines()
    shown = out_lines[error.lineno - 1].strip() if error.lineno and 0 < error.lineno <= len(out_lines) else ""
    line, column = _input_position(source, output[0], error.lineno or 1, error.offset or 1)
    raise MigrationError(
        f"internal error: the rewrite by {names} does not compile ({error.msg}, line {error.lineno} of the"
        f" rewritten code{': `' + shown[:80] + '`' if shown else ''}); file left unchanged, please report this",
        line,
        column,
    )


def _input_position(source: str, output: str, line: int, column: int) -> tuple[int, int]:
    """The input line an output line comes from (for new code: the first
    line of the input it replaces, or the line it is inserted before); the
    column when the line is unchanged, else the input line's first column
    with code."""
    a, b = source.splitlines(), output.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if j1 <= line - 1 < j2:
            if tag == "equal":
                return i1 + line - 1 - j1 + 1, column
            at = min(i1, max(len(a) - 1, 0))
            while at + 1 < len(a) and not a[at].strip():
                at += 1
            text = a[at] if a else ""
            return at + 1, len(text) - len(text.lstrip()) + 1
    return 1, 1


def _culprits(runs: _Runs, rules: list[type[Rule]], applied: list[str]) -> list[type[Rule]]:
    """The applied rules to leave out so that no name is left undefined: the
    latest single one that suffices, else the latest ones cumulatively."""
    def still_broken(kept: list[type[Rule]]) -> bool:
        module, _, applied_now = runs.run(kept)
        output = runs.checked_code(module, applied_now)
        return output is not runs.source and bool(runs.introduced_names(output[1]))

    candidates = [r for r in reversed(rules) if r.code in applied]
    for rule_cls in candidates:
        if not still_broken([r for r in rules if r is not rule_cls]):
            return [rule_cls]
    dropped: list[type[Rule]] = []
    for rule_cls in candidates:
        dropped.append(rule_cls)
        if not still_broken([r for r in rules if r not in dropped]):
            break
    return dropped


def _unsafe_rewrite(
    rule_cls: type[Rule], names: list[str], tree: ast.Module, earlier: list[Diagnostic]
) -> Diagnostic:
    """Located at the input's first read of a name, else where the rule
    reported its rewrite (``earlier``: its diagnostics when it was applied)."""
    where = next(
        ((n.lineno, n.col_offset + 1) for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in names),
        None,
    ) or next(((d.line, d.column) for d in earlier if d.code == rule_cls.code), (1, 1))
    shown = ", ".join(f"`{n}`" for n in names[:5]) + (", ..." if len(names) > 5 else "")
    return Diagnostic(
        code=rule_cls.code,
        message=(
            f"{rule_cls.name}: not rewritten here; the rewrite would leave {shown} used but no longer"
            " defined (the code around it does not have the shape this rule migrates)"
        ),
        line=where[0],
        column=where[1],
        hint="migrate this part by hand; the other rules' changes are kept",
        fixed=False,
        severity="warning",
    )


_AST_NODES: list[tuple[ast.AST, list[ast.AST]]] = []


def _ast_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of an ``ast`` tree (any order); ``ast.walk`` without its
    per-node generators, which cost more than the engine's use of them. The
    input's and the output's lists are kept (the gates and the locator read
    them several times); callers do not change the trees."""
    for known, nodes in _AST_NODES:
        if known is tree:
            return nodes
    nodes = _walk_ast(tree)
    _AST_NODES.insert(0, (tree, nodes))
    del _AST_NODES[4:]
    return nodes


def _walk_ast(tree: ast.AST) -> list[ast.AST]:
    out, stack = [], [tree]
    ast_node = ast.AST
    while stack:
        n = stack.pop()
        out.append(n)
        for name in n._fields:
            value = getattr(n, name, None)
            if type(value) is list:
                stack.extend(v for v in value if isinstance(v, ast_node))
            elif isinstance(value, ast_node):
                stack.append(value)
    return out


_UNDEFINED = (pyflakes_messages.UndefinedName, pyflakes_messages.UndefinedLocal)


def undefined_names(tree: ast.Module) -> frozenset[str]:
    """Names the module reads where nothing binds them: by scope (a name
    bound in one function is undefined in another) and, at module level, in
    statement order (read before the line that binds it). pyflakes's
    analysis, run on the ``ast`` the engine parses anyway; only compared
    before and after a rewrite, so names a script gets from elsewhere
    (``import *``, ``globals()``) are undefined on both sides alike."""
    checker = pyflakes_checker.Checker(tree, filename="<tfmigrate>")
    return frozenset(m.message_args[0] for m in checker.messages if isinstance(m, _UNDEFINED))


# TF1 training constructs that run on the TF1 cluster (ClusterSpec + Server).
_TF1_CLUSTER_TRAINING = frozenset(
    {"replica_device_setter", "SyncReplicasOptimizer", "MonitoredTrainingSession", "Supervisor"}
)
_CLUSTER_RULES = ("TFM201", "TFM202")
# calls connecting a TF1 session to a master: TFM202 hands them the resolver in a server's
# place (rules/_server_flow.py) for TFM301 to replace; one left in the output is TF1 training
SESSION_SINKS = frozenset({"Session", "InteractiveSession", "MonitoredTrainingSession", "prepare_or_wait_for_session",
                            "managed_session", "ChiefSessionCreator", "WorkerSessionCreator"})
_TRAINING_PREP_RULES = ("TFM300", "TFM304", "TFM305")
_FOUND_WITH = re.compile(r" \(found with the rewrite of [A-Z0-9 and]+ applied\)$")
_TRAINING_RULES = ("TFM301", "TFM303")


_REMOVED_IMPORT = re.compile(r"^`(tensorflow\.examples[\w.]*)` was removed from TensorFlow 2$")


def _removed_import_gone(diagnostic: Diagnostic, output: ast.Module) -> bool:
    """TFM101's report of an import of a module TF 2 removed, when the
    output imports nothing of that module any more."""
    found = _REMOVED_IMPORT.match(diagnostic.message) if diagnostic.code == "TFM101" else None
    if found is None:
        return False
    module = found.group(1)
    for node in _ast_nodes(output):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module == module or node.module.startswith(module + ".")):
            return False
        if isinstance(node, ast.Import) and any(
                a.name == module or a.name.startswith(module + ".") for a in node.names):
            return False
    return True


def _first_named(tree: ast.AST, names: frozenset[str] | set[str]) -> ast.AST | None:
    """The first ``name`` or ``x.name`` in ``tree`` with one of ``names``."""
    found = [
        n
        for n in _ast_nodes(tree)
        if (isinstance(n, ast.Attribute) and n.attr in names)
        or (isinstance(n, ast.Name) and n.id in names)
    ]
    return min(found, key=lambda n: (n.lineno, n.col_offset), default=None)


def _tf1_training_left(output: ast.Module, source: ast.Module) -> str | None:
    """The first construct of TF1 distributed training still in ``output``:
    a device setter, SyncReplicas, a TF1 training session, or the target of
    a server the input created (``master=server.target``); else None."""
    servers = {
        target.id
        for n in _ast_nodes(source)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "attr", getattr(n.value.func, "id", None)) == "Server"
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    # a name the rules bound to TF2's server (`server = tf.distribute.Server(...)` in the
    # serving branch) is that server: its target read by a log line is no TF1 training
    servers -= {
        target.id
        for n in _ast_nodes(output)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
        and n.value.func.attr == "Server"
        and isinstance(n.value.func.value, ast.Attribute)
        and n.value.func.value.attr == "distribute"
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    found = [
        n
        for n in _ast_nodes(output)
        if n.__class__ is ast.Attribute
        and n.attr == "target"
        and isinstance(n.value, ast.Name)
        and n.value.id in servers
    ]
    # a TF1 session given the resolver TFM202 carried in the place of a server handed on to it
    found += [
        n
        for n in _ast_nodes(output)
        if n.__class__ is ast.Call
        and getattr(n.func, "attr", getattr(n.func, "id", None)) in SESSION_SINKS
        and any(isinstance(a, ast.Name) and a.id == "cluster_resolver"
                for a in [*n.args, *(k.value for k in n.keywords)])
    ]
    first = _first_named(output, _TF1_CLUSTER_TRAINING)
    if first is not None:
        found.append(first)
    if not found:
        return None
    first = min(found, key=lambda n: (n.lineno, n.col_offset))
    if isinstance(first, ast.Name):
        return first.id
    if isinstance(first, ast.Call):
        return ast.unparse(first.func)
    return f"{first.value.id}.target" if first.attr == "target" else first.attr


def _tf1_server_left(output: ast.Module) -> str | None:
    """``Server`` when ``output`` still builds a TF1 server (``tf.train.Server(...)``)."""
    for n in _ast_nodes(output):
        if (
            n.__class__ is ast.Call
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "Server"
            and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == "train"
        ):
            return "Server"
    return None


def _opaque_server_left(output: ast.Module, source: ast.Module) -> str | None:
    """The name of a server the ps branch of ``output`` still joins
    (``if job_name == "ps": server.join()``) that the input got from a call
    other than a Server constructor (``cluster, server, ... = setup_cluster()``,
    ``ctx.start_cluster_server()``): a TF1 server built out of the rules'
    sight, which serves on the worker tasks too, where the strategy would be."""
    made_elsewhere = set()
    for n in _ast_nodes(source):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            func = n.value.func
            called = getattr(func, "attr", getattr(func, "id", ""))
            if called == "Server":
                continue
            for target in n.targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Name):
                        made_elsewhere.add(t.id)
    for n in _ast_nodes(output):
        if not (n.__class__ is ast.If and isinstance(n.test, ast.Compare) and len(n.test.comparators) == 1):
            continue
        sides = [n.test.left, n.test.comparators[0]]
        if not any(isinstance(side, ast.Constant) and side.value == "ps" for side in sides):
            continue
        for statement in n.body:
            call = statement.value if isinstance(statement, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "join"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id in made_elsewhere
            ):
                return call.func.value.id
    return None


def _server_helper(server: str, tree: ast.Module) -> tuple[str, str]:
    """(how the input names the call that built ``server``, where that helper
    comes from) -- ``("ctx.start_cluster_server(...)", "")``,
    ``("setup_cluster(...)", " (imported from `setup_clusters`)")``."""
    for n in _ast_nodes(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
            isinstance(t, ast.Name) and t.id == server for target in n.targets for t in ast.walk(target)
        ):
            func = n.value.func
            name = ast.unparse(func)
            origin = ""
            if isinstance(func, ast.Name):
                for i in _ast_nodes(tree):
                    if isinstance(i, ast.ImportFrom) and any((a.asname or a.name) == func.id for a in i.names):
                        origin = f" (imported from `{i.module}`)"
                    elif isinstance(i, ast.FunctionDef) and i.name == func.id:
                        origin = " (defined in this file)"
            return f"{name}(...)", origin
    return "", ""


def _opaque_server_kept(rule_cls: type[Rule], server: str, tree: ast.Module) -> Diagnostic:
    at = _first_named(tree, {server})
    helper, origin = _server_helper(server, tree)
    built = f"`{helper}`{origin}" if helper else "a helper"
    if helper.endswith(".start_cluster_server(...)"):
        # TensorFlowOnSpark's TFNode: the cluster's jobs are set by TFCluster.run in the Spark driver
        hint = ("TensorFlowOnSpark assigns the ps/worker jobs in the Spark driver: run TFCluster.run(...,"
                " master_node='chief') there (TensorFlowOnSpark then exports TF_CONFIG to every executor) and build"
                " the strategy from tf.distribute.cluster_resolver.TFConfigClusterResolver() in this function"
                " instead of calling start_cluster_server; see legacy_reference/async_ps.py")
    else:
        hint = ("build the cluster where the training is (ClusterSpec + tf.train.Server with job_name/task_index,"
                " TF_CONFIG, or a tf.distribute.cluster_resolver such as SlurmClusterResolver for a Slurm"
                " allocation), then run tfmigrate again; or see legacy_reference/async_ps.py")
    return Diagnostic(
        code=rule_cls.code,
        message=(
            f"{rule_cls.name}: training not migrated: `{server}` is a TF1 server built by {built}, out of the"
            " cluster rules' sight (they rewrite a ClusterSpec and tf.train.Server built in this program); it also"
            " serves on the worker tasks, where the strategy would be built (ParameterServerStrategy needs a chief"
            " task and serving-only workers; MultiWorkerMirroredStrategy starts its own server on the task's"
            " address)"
        ),
        line=at.lineno if at else 1,
        column=at.col_offset + 1 if at else 1,
        hint=hint,
        fixed=False,
        severity="warning",
    )


# what each cluster rule rewrites, to locate its finding in the input
_CLUSTER_RULE_SUBJECT = {"TFM201": "ClusterSpec", "TFM202": "Server"}


def _cluster_kept(rule_cls: type[Rule], leftover: str, tree: ast.Module) -> Diagnostic:
    subject = _first_named(tree, {_CLUSTER_RULE_SUBJECT.get(rule_cls.code, "")})
    at_leftover = _first_named(tree, {leftover.rpartition(".")[2]})
    if rule_cls.code in _CLUSTER_RULES:
        message = (
            f"{rule_cls.name}: cluster left as TF1 because TF1 code that runs on it is not migrated"
            f" (`{leftover}`); a resolver, a chief task or serving-only workers would break that code"
        )
        hint = (
            "see the TFM301/TFM303 diagnostics for why the training was not migrated; once it is,"
            " run tfmigrate again and the cluster is migrated with it"
        )
    else:
        subject = at_leftover
        message = (
            f"{rule_cls.name}: training not migrated: the program still uses the TF1 cluster"
            f" (`{leftover}`) in code this rule does not migrate, and a tf.distribute strategy"
            " cannot run next to a TF1 server on the same task"
        )
        hint = "migrate the server/role handling around the training by hand (see legacy_reference/)"
    subject = subject or at_leftover
    return Diagnostic(
        code=rule_cls.code,
        message=message,
        line=subject.lineno if subject else 1,
        column=subject.col_offset + 1 if subject else 1,
        hint=hint,
        fixed=False,
        severity="warning",
    )


def _uses_unbound_tf(module: cst.Module) -> bool:
    if "tf" in _tf_names(module).bindings:
        return False
    return any(
        type(n) is cst.Attribute and type(n.value) is cst.Name and n.value.value == "tf"
        for n in cached_walk(module)
    )


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen = set()
    out = []
    for d in diags:
        key = (d.code, d.line, d.column, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def dedent(code: str) -> str:
    """Fixture helper: strip common indentation and a leading newline."""
    return textwrap.dedent(code).lstrip("\n")
