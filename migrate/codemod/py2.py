"""A Python 2 -> 3 pre-pass, so legacy TensorFlow code written for Python 2
(print statements, ``except E, e:``, ``iteritems``, mixed tabs and spaces)
can still be migrated.

Sources that are *not* valid Python 3 go through it (``ast.parse`` decides;
libcst would accept ``except E, e:`` as a tuple clause). :func:`convert` also
converts valid Python 3 sources that use names only Python 2 has
(:func:`python2_uses`: a bare ``xrange``/``unicode``/``raw_input``/
``basestring``/``long`` nothing in the module binds, ``d.iteritems()``,
``d.has_key(k)``): those parse, then fail on Python 3 with a NameError or
AttributeError (TFM901 reports them when they reach the rules). The
conversion uses fissix, the maintained fork of lib2to3, with the fixers that
keep behaviour (e.g. ``d.keys()`` -> ``list(d.keys())``) and without the
purely stylistic ones; fissix changes only the constructs its fixers match,
so every other line stays byte-identical.

Python 3 whose indentation mixes tabs and spaces in a way libcst's tokenizer
cannot read (Python reads it with 8-column tab stops) is re-indented with
those stops (:func:`expand_indentation`). Notebooks get the same pre-pass
cell by cell (:mod:`migrate.codemod.notebook`).
"""

from __future__ import annotations

import ast
import difflib
import logging
import re
from functools import lru_cache

from migrate.codemod.engine import Diagnostic, MigrationError, compile_error

PY2_CODE = "TFM001"
PY2_NAME = "python2-conversion"

FIXERS = (
    "apply",
    "basestring",
    "buffer",
    "dict",
    "except",
    "exec",
    "execfile",
    "exitfunc",
    "filter",
    "funcattrs",
    "getcwdu",
    "has_key",
    "imports",
    "imports2",
    "input",
    "intern",
    "isinstance",
    "itertools",
    "itertools_imports",
    "long",
    "map",
    "metaclass",
    "methodattrs",
    "ne",
    "next",
    "nonzero",
    "numliterals",
    "operator",
    "print",
    "raise",
    "raw_input",
    "reduce",
    "reload",
    "renames",
    "repr",
    "standarderror",
    "sys_exc",
    "throw",
    "tuple_params",
    "types",
    "unicode",
    "urllib",
    "xrange",
    "xreadlines",
    "zip",
)


# Builtins only Python 2 has (a NameError on Python 3 unless the module binds
# the name, e.g. `from six.moves import xrange`) and dict methods only Python 2
# dicts have, each with its Python 3 spelling (for diagnostics).
PY2_ONLY_BUILTINS = {
    "xrange": "range",
    "unicode": "str",
    "raw_input": "input",
    "basestring": "str",
    "long": "int",
    "unichr": "chr",
}
PY2_ONLY_METHODS = {
    "iteritems": ".items()",
    "itervalues": ".values()",
    "iterkeys": ".keys()",
    "has_key": "`key in d`",
}


# any of the names above as a word: without one, there is nothing to find (and the
# source need not be parsed; the CLI asks this of every file)
_PY2_WORDS = re.compile(r"\b(?:" + "|".join([*PY2_ONLY_BUILTINS, *PY2_ONLY_METHODS]) + r")\b")


def python2_uses(source: str | ast.AST) -> list[tuple[int, int, str]]:
    """Where a valid Python 3 module uses what only Python 2 has: (line,
    1-based column, ``"xrange"`` or ``".iteritems"``), in source order. A
    builtin counts only when nothing in the module binds its name (scope-blind:
    any assignment, import, parameter or definition of it anywhere); none
    counts when an ``import *`` could bind it. Empty for anything that does not
    parse."""
    if isinstance(source, str):
        if source.isascii() and not _PY2_WORDS.search(source):
            return []  # none of the names occurs (an ASCII identifier is a whole word)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return []
    else:
        tree = source
    bound: set[str] = set()
    star = False
    names: list[tuple[int, int, str]] = []
    methods: list[tuple[int, int, str]] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            if not isinstance(n.ctx, ast.Load):
                bound.add(n.id)
            elif n.id in PY2_ONLY_BUILTINS:
                names.append((n.lineno, n.col_offset + 1, n.id))
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.alias):
            star = star or n.name == "*"
            bound.add(n.asname or n.name.partition(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            bound.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in PY2_ONLY_METHODS
        ):
            methods.append((n.func.end_lineno or n.lineno, n.func.end_col_offset - len(n.func.attr) + 1,
                            "." + n.func.attr))
    if star:
        names = []
    return sorted([u for u in names if u[2] not in bound] + methods)


def _check_compiles(code: str, path: str, top_level_await: bool) -> None:
    """Raise the SyntaxError ``compile()`` raises: what the pre-pass hands on
    may be written as it is (when no rule changes it), so it must compile."""
    error = compile_error(code, path, top_level_await)
    if error is not None:
        raise error


def is_python3(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


@lru_cache(maxsize=2)
def _tool(python3_syntax: bool = False):
    """The fissix tool and the set its fixers record their names in when they
    change something. ``python3_syntax``: the source is valid Python 3, so
    ``print(a, b)`` is a call (no print statement in the grammar)."""
    # fissix logs every fixer it loads at INFO on the root logger
    logging.getLogger("RefactoringTool").setLevel(logging.WARNING)
    from fissix.refactor import RefactoringTool

    tool = RefactoringTool(
        [f"fissix.fixes.fix_{name}" for name in FIXERS], options={"print_function": python3_syntax}
    )
    applied: set[str] = set()
    for fixer in tool.pre_order + tool.post_order:
        if type(fixer).__module__.endswith(".fix_print"):
            _print_one_parenthesized_expression(fixer)
        _record_changes(fixer, applied)
    return tool, applied


def _print_one_parenthesized_expression(fixer) -> None:
    """``print ("%d" % x)`` is already a Python 3 call: keep its parentheses
    (fissix wraps it again, ``print(("%d" % x))``). A parenthesised tuple
    ``print ("a", x)`` still becomes ``print(("a", x))``: Python 2 printed the
    tuple."""
    from fissix.pygram import python_symbols as syms

    transform = fixer.transform

    def transform_print(node, results):
        args = node.children[1:] if node.type == syms.print_stmt else []
        if len(args) == 1 and _parenthesized_expression(args[0], syms):
            args[0].prefix = ""
            return None
        return transform(node, results)

    fixer.transform = transform_print


def _parenthesized_expression(node, syms) -> bool:
    """``( expr )`` with one expression inside: no tuple, generator or yield."""
    children = getattr(node, "children", [])
    return (
        node.type == syms.atom
        and len(children) == 3
        and children[0].value == "("
        and children[2].value == ")"
        and children[1].type not in (syms.testlist_gexp, syms.yield_expr)
    )


def _record_changes(fixer, applied: set[str]) -> None:
    name = type(fixer).__module__.rsplit(".fix_", 1)[-1]
    transform = fixer.transform

    def recording(node, results):
        before, parent = str(node), node.parent
        new = transform(node, results)
        # a fixer may also replace the node in its parent itself (fix_next)
        if new is not None or str(node) != before or node.parent is not parent:
            applied.add(name)
        return new

    fixer.transform = recording


def _expand_indent_tabs(source: str) -> str:
    """Python 2 reads a tab as 'to the next multiple of 8'; Python 3 refuses
    mixed indentation. Expand tabs in indentation only, never inside
    multi-line strings."""
    from fissix.pgen2 import token, tokenize

    in_string: set[int] = set()
    lines = source.splitlines(keepends=True)
    readline = iter(lines).__next__
    try:
        for tok_type, _, start, end, _ in tokenize.generate_tokens(readline):
            if tok_type == token.STRING and end[0] > start[0]:
                in_string.update(range(start[0] + 1, end[0] + 1))
    except (tokenize.TokenError, StopIteration, IndentationError):
        pass
    out = []
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip(" \t")
        indent = line[: len(line) - len(stripped)]
        if "\t" in indent and number not in in_string:
            line = indent.expandtabs(8) + stripped
        out.append(line)
    return "".join(out)


def convert(source: str, path: str = "<string>", *, top_level_await: bool = False) -> tuple[str, Diagnostic]:
    """Convert Python 2 ``source`` to Python 3: a source that is not Python 3,
    or Python 3 syntax that uses what only Python 2 has (:func:`python2_uses`;
    ValueError when it uses nothing of that). ``top_level_await``: the
    source is a notebook cell (IPython runs a top-level ``await``).

    Returns the converted source, which compiles, and the TFM001 diagnostic
    that tells the user it happened, located at the first line that is not
    Python 3. Raises :class:`MigrationError`, located at the original syntax
    error, when the source is neither Python 3 nor convertible Python 2.
    """
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        original_error = e
    else:
        return _convert_python3_syntax(source, tree, path, top_level_await)
    steps: list[str] = []
    text = source if source.endswith("\n") else source + "\n"
    try:
        converted, fixers = _to_python3(text, path, original_error, top_level_await)
    except TabError:
        # Python 2 accepted mixed tabs/spaces; expand only when it matters
        # so consistently tab-indented files keep their tabs.
        text = _expand_indent_tabs(text)
        steps.append("tabs in indentation expanded")
        try:
            converted, fixers = _to_python3(text, path, original_error, top_level_await)
        except SyntaxError as e:
            raise _error(
                original_error, f"after the Python 2 conversion: {e.msg} at line {e.lineno}"
            )
    except SyntaxError as e:
        raise _error(original_error, f"after the Python 2 conversion: {e.msg} at line {e.lineno}")
    if fixers:
        steps.append("fixers: " + ", ".join(fixers))
    if not source.endswith("\n") and converted.endswith("\n"):
        converted = converted[:-1]
    diagnostic = Diagnostic(
        code=PY2_CODE,
        message=f"converted from Python 2 ({'; '.join(steps)})",
        line=original_error.lineno or 1,
        column=original_error.offset or 1,
        hint="review the converted code; the TensorFlow rules ran on the Python 3 version",
        fixed=True,
        severity="info",
    )
    return converted, diagnostic


def _convert_python3_syntax(source: str, tree: ast.Module, path: str, top_level_await: bool) -> tuple[str, Diagnostic]:
    """Python 2 code that parses as Python 3 (see :func:`python2_uses`)."""
    uses = python2_uses(tree)
    if not uses:
        raise ValueError("convert() called on Python 3 code that uses nothing only Python 2 has")
    text = source if source.endswith("\n") else source + "\n"
    tool, applied = _tool(True)
    applied.clear()
    line, column, _ = uses[0]
    try:
        converted = str(tool.refactor_string(text, path))
        _check_compiles(converted, path, top_level_await)
    except Exception as e:  # noqa: BLE001 - fissix on odd input: report, never crash the run
        raise MigrationError(
            f"Python 2 names in valid Python 3 syntax could not be converted ({type(e).__name__}: {e})",
            line,
            column,
        ) from None
    if not source.endswith("\n") and converted.endswith("\n"):
        converted = converted[:-1]
    shown = ", ".join(dict.fromkeys(f"`{name}`" for _, _, name in uses))
    diagnostic = Diagnostic(
        code=PY2_CODE,
        message=f"converted from Python 2 (valid Python 3 syntax using {shown}, which only Python 2"
        f" has; fixers: {', '.join(sorted(applied))})",
        line=line,
        column=column,
        hint="review the converted code; the TensorFlow rules ran on the Python 3 version",
        fixed=True,
        severity="info",
    )
    return converted, diagnostic


def _to_python3(
    text: str, path: str, original_error: SyntaxError, top_level_await: bool
) -> tuple[str, list[str]]:
    """fissix output, checked by ``compile()`` (raises its SyntaxError)."""
    if is_python3(text):
        _check_compiles(text, path, top_level_await)
        return text, []
    converted, fixers = _run_fissix(text, path, original_error)
    _check_compiles(converted, path, top_level_await)
    return converted, fixers


def _run_fissix(text: str, path: str, original_error: SyntaxError) -> tuple[str, list[str]]:
    from fissix.pgen2.parse import ParseError
    from fissix.pgen2.tokenize import TokenError

    tool, applied = _tool()
    applied.clear()
    try:
        tree = tool.refactor_string(text, path)
    except ParseError as e:
        # Locate where the Python 2 grammar fails too: that is the real error.
        line, col = e.context[1]
        if line == original_error.lineno:
            raise _error(original_error, "not Python 2 either") from None
        raise MigrationError(
            "syntax error: invalid syntax (neither valid Python 3 nor Python 2)", line, col + 1
        ) from None
    except (TokenError, IndentationError, SyntaxError):
        raise _error(original_error, "not Python 2 either") from None
    except Exception as e:  # noqa: BLE001 - a fixer crashing on odd input must not end the run
        raise _error(
            original_error, f"the Python 2 conversion failed ({type(e).__name__}: {e})"
        ) from None
    return str(tree), sorted(applied)


def _error(original: SyntaxError, detail: str) -> MigrationError:
    return MigrationError(
        f"syntax error: {original.msg} (not valid Python 3; {detail})",
        original.lineno,
        original.offset,
    )


def expand_indentation(source: str, path: str = "<string>", *, top_level_await: bool = False) -> tuple[str, Diagnostic] | None:
    """Python 3 that the CST parser cannot tokenize because of how its
    indentation mixes tabs and spaces (``8 spaces + tab`` then ``tab + 8
    spaces + tab``: Python reads both with 8-column tab stops, libcst's
    tokenizer finds no matching block): the same source with the tabs of its
    indentation expanded to 8-column stops, which is how Python 2 and 3 read
    them, strings untouched. None when no indentation holds a tab (or the
    expanded source does not compile)."""
    expanded = _expand_indent_tabs(source)
    line = next(
        (n for n, (a, b) in enumerate(zip(source.splitlines(), expanded.splitlines()), 1) if a != b), None
    )
    if line is None or compile_error(expanded, path, top_level_await) is not None:
        return None
    diagnostic = Diagnostic(
        code=PY2_CODE,
        message="indentation mixing tabs and spaces re-indented: tabs in indentation expanded to"
        " 8-column stops, as Python reads them (the parser the rules use cannot read this mix)",
        line=line,
        column=1,
        hint="review the re-indented lines; nothing but leading whitespace changed",
        fixed=True,
        severity="info",
    )
    return expanded, diagnostic


def line_mapping(original: str, converted: str) -> dict[int, int]:
    """1-based lines of ``converted`` -> the lines of ``original`` they come from."""
    a = original.splitlines()
    b = converted.splitlines()
    mapping: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        for k, j in enumerate(range(j1, j2)):
            mapping[j + 1] = (i1 + k if tag == "equal" else min(i1 + k, max(i2 - 1, i1))) + 1
    return mapping


def map_lines_back(
    original: str, converted: str, diagnostics: list[Diagnostic]
) -> list[Diagnostic]:
    """Diagnostics located in ``converted`` -> lines of ``original``."""
    if original == converted:
        return diagnostics
    mapping = line_mapping(original, converted)
    return [d.with_location(mapping.get(d.line, d.line), d.column, d.cell) for d in diagnostics]
