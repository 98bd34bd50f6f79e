"""Jupyter notebooks: migrate the code cells as one program, write the JSON
back so that everything but the changed cells is byte-identical.

- Code cells are concatenated (with marker statements between them) so a
  rule sees the imports of an earlier cell.
- IPython syntax (``%line`` and ``%%cell`` magics, ``!shell``, ``x = !ls``,
  ``obj?`` help, indented magics, backslash continuations) is replaced by
  placeholder calls that keep the indentation, and restored afterwards.
- The JSON is never re-serialised as a whole: the ``source`` value of each
  changed cell is spliced into the original text in the notebook's own
  style (indentation, list-of-lines or string, escaping), so outputs,
  metadata, ids and key order stay exactly as they were.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from json.decoder import scanstring

from migrate.codemod import py2
from migrate.codemod.engine import Diagnostic, MigrationError, mentions_tensorflow, migrate_source

CELL_MARKER = "__tfmigrate_cell__"
MAGIC_PLACEHOLDER = "__tfmigrate_magic__"

# Cell magics whose body is Python: only their first line is masked.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})


class NotebookError(MigrationError):
    """A notebook that cannot be processed; ``cell`` is the 1-based cell number."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        cell: int | None = None,
    ):
        super().__init__(message, line, column)
        self.cell = cell


@dataclass
class CellChange:
    cell: int  # 1-based position in the notebook
    cell_id: str | None
    before: str
    after: str


@dataclass
class NotebookResult:
    original: bytes
    output: bytes
    diagnostics: list[Diagnostic] = field(default_factory=list)
    changes: list[CellChange] = field(default_factory=list)
    skipped_reason: str | None = None

    @property
    def changed(self) -> bool:
        return self.output != self.original


# --------------------------------------------------------------------------- JSON with positions

_WS = re.compile(r"[ \t\n\r]*")
_LITERAL = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


class _Locator:
    """Finds the text span of every ``cells[i].source`` value; the rest of the
    document is only skipped over (strings via json's C ``scanstring``)."""

    def __init__(self, text: str):
        self.s = text
        self.spans: dict[int, tuple[int, int]] = {}

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()

    def expect(self, i: int, char: str) -> int:
        if self.s[i : i + 1] != char:
            raise ValueError(f"expected {char!r} at offset {i}")
        return i + 1

    def value(self, i: int, path: tuple = ()) -> int:
        i = self.ws(i)
        c = self.s[i : i + 1]
        if c == '"':
            return scanstring(self.s, i + 1)[1]
        if c == "{":
            return self.obj(i, path)
        if c == "[":
            return self.arr(i, path)
        m = _LITERAL.match(self.s, i)
        if not m:
            raise ValueError(f"unexpected character at offset {i}")
        return m.end()

    def obj(self, i: int, path: tuple) -> int:
        i = self.ws(i + 1)
        if self.s[i : i + 1] == "}":
            return i + 1
        while True:
            i = self.ws(i)
            i = self.expect(i, '"')
            key, i = scanstring(self.s, i)
            i = self.expect(self.ws(i), ":")
            start = self.ws(i)
            child = (*path, key)
            i = self.value(start, child)
            if len(child) == 3 and child[0] == "cells" and key == "source":
                self.spans[child[1]] = (start, i)
            i = self.ws(i)
            if self.s[i : i + 1] == ",":
                i += 1
                continue
            return self.expect(i, "}")

    def arr(self, i: int, path: tuple) -> int:
        i = self.ws(i + 1)
        if self.s[i : i + 1] == "]":
            return i + 1
        index = 0
        while True:
            # only the cells array's elements need their index in the path
            i = self.value(i, (*path, index) if path == ("cells",) else (*path, None))
            index += 1
            i = self.ws(i)
            if self.s[i : i + 1] == ",":
                i += 1
                continue
            return self.expect(i, "]")


@dataclass
class _Style:
    indent_unit: str | None  # None: the document is on one line
    ensure_ascii: bool
    item_separator: str


def _detect_style(text: str) -> _Style:
    lines = text.split("\n", 2)
    unit = None
    if len(lines) > 1:
        second = lines[1]
        unit = second[: len(second) - len(second.lstrip(" \t"))] or None
    ensure_ascii = text.isascii() and "\\u" in text
    compact = unit is None and ", " not in text
    return _Style(unit, ensure_ascii, "," if compact else ", ")


def _line_indent(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    line = text[start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _render_source(new: str, old_value, span_text: str, key_indent: str, style: _Style) -> str:
    dumps = lambda v: json.dumps(v, ensure_ascii=style.ensure_ascii)
    if isinstance(old_value, str):
        return dumps(new)
    items = [dumps(line) for line in new.splitlines(keepends=True)]
    if not items:
        return "[]"
    if "\n" in span_text:
        first_nl = span_text.index("\n")
        rest = span_text[first_nl + 1 :]
        item_indent = rest[: len(rest) - len(rest.lstrip(" \t"))]
        close_indent = _line_indent(span_text, len(span_text) - 1)
    elif style.indent_unit is not None and (span_text == "[]" or len(old_value) > 1):
        item_indent = key_indent + style.indent_unit
        close_indent = key_indent
    else:
        separator = style.item_separator
        if len(old_value) > 1:  # follow the list's own spelling
            separator = ", " if '", "' in span_text else ","
        return "[" + separator.join(items) + "]"
    return "[\n" + ",\n".join(item_indent + item for item in items) + "\n" + close_indent + "]"


# --------------------------------------------------------------------------- magics

_ASSIGN_MAGIC = re.compile(r"^[ \t]*[A-Za-z_][\w.\[\], ()*]*?\s*=\s*[!%]")
_HELP = re.compile(r"^[ \t]*(\?{1,2})?[\w.*\[\]%]+(\?{1,2})?[ \t]*$")


def _is_magic_start(line: str) -> bool:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return False
    if stripped[0] in "%!":
        return not stripped.startswith("!=")
    if _ASSIGN_MAGIC.match(line) and not re.match(r"^[^=]*[!<>=]=", line):
        return True
    m = _HELP.match(line)
    return bool(m and (m.group(1) or m.group(2)))


@dataclass
class _ScanState:
    """Where a line starts: inside a triple-quoted string, inside brackets,
    or after a backslash continuation. Magics only start at neither."""

    quote: str | None = None
    depth: int = 0
    continued: bool = False

    @property
    def at_statement_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.continued


def _scan(line: str, state: _ScanState) -> _ScanState:
    """Advance ``state`` over one line of Python."""
    quote, depth = state.quote, state.depth
    i, n = 0, len(line)
    while i < n:
        if quote is not None:
            end = line.find(quote, i)
            if end < 0:
                return _ScanState(quote, depth, False)
            quote = None
            i = end + 3
            continue
        c = line[i]
        if c == "#":
            break
        if c in "\"'":
            if line.startswith(c * 3, i):
                quote = c * 3
                i += 3
                continue
            j = i + 1  # a single-quoted string ends on this line
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    else:
        return _ScanState(quote, depth, quote is None and line.endswith("\\"))
    return _ScanState(quote, depth, False)


class _Masker:
    """Replaces IPython syntax with placeholders; remembers the originals."""

    def __init__(self) -> None:
        self.originals: list[str] = []

    def placeholder(self, indent: str, original_line: str) -> str:
        self.originals.append(original_line)
        return f"{indent}{MAGIC_PLACEHOLDER}({len(self.originals) - 1})"

    def mask(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        first = next((k for k, line in enumerate(lines) if line.strip()), None)
        if first is None or not lines[first].lstrip().startswith("%%"):
            return self._mask_lines(lines)
        words = lines[first].lstrip()[2:].split(None, 1)
        head = (
            "".join(lines[:first])
            + self.placeholder("", _strip_eol(lines[first]))
            + _eol(lines[first])
        )
        if words and words[0] in PYTHON_BODY_CELL_MAGICS:
            return head + self._mask_lines(lines[first + 1 :])
        # %%bash, %%writefile...: nothing in the cell is Python
        return head + "".join(
            self.placeholder("", _strip_eol(line)) + _eol(line) if line.strip() else line
            for line in lines[first + 1 :]
        )

    def _mask_lines(self, lines: list[str]) -> str:
        out: list[str] = []
        state = _ScanState()
        continuation_indent: str | None = None
        for line in lines:
            body, eol = _strip_eol(line), _eol(line)
            if continuation_indent is not None:
                out.append(self.placeholder(continuation_indent, body) + eol)
                if not body.endswith("\\"):
                    continuation_indent = None
                continue
            if state.at_statement_start and _is_magic_start(body):
                indent = body[: len(body) - len(body.lstrip(" \t"))]
                out.append(self.placeholder(indent, body) + eol)
                if body.endswith("\\"):
                    continuation_indent = indent
                continue
            state = _scan(body, state)
            out.append(line)
        return "".join(out)

    def restore(self, text: str) -> str:
        seen = [0] * len(self.originals)

        def put_back(m: re.Match) -> str:
            k = int(m.group(2))
            seen[k] += 1
            return self.originals[k]

        restored = re.sub(
            rf"^([ \t]*){MAGIC_PLACEHOLDER}\((\d+)\)[ \t]*$", put_back, text, flags=re.MULTILINE
        )
        if any(count != 1 for count in seen):
            raise NotebookError(
                "a rule moved or removed an IPython magic line; notebook left unchanged"
                " (please report this)"
            )
        return restored


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def _eol(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


# --------------------------------------------------------------------------- migration


def _cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def load(raw: bytes) -> tuple[str, dict]:
    """Decode and parse notebook bytes; located errors for malformed JSON."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise NotebookError(
            "notebook is not valid UTF-8", line, e.start - raw.rfind(b"\n", 0, e.start)
        ) from None
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as e:
        raise NotebookError(f"malformed notebook JSON: {e.msg}", e.lineno, e.colno) from None
    if not isinstance(nb, dict):
        raise NotebookError("malformed notebook: the top level is not a JSON object", 1, 1)
    if nb.get("nbformat") != 4 or not isinstance(nb.get("cells"), list):
        if "worksheets" in nb or nb.get("nbformat") in (1, 2, 3):
            raise NotebookError(
                f"nbformat {nb.get('nbformat')} notebooks are not supported; upgrade with"
                " `jupyter nbconvert --to notebook --nbformat 4`",
                1,
                1,
            )
        raise NotebookError("malformed notebook: no nbformat 4 'cells' list", 1, 1)
    for index, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or not isinstance(cell.get("source", ""), (str, list)):
            raise NotebookError("malformed notebook cell", cell=index + 1)
    return text, nb


def _language(nb: dict) -> str | None:
    meta = nb.get("metadata") or {}
    language = (meta.get("kernelspec") or {}).get("language") or (
        meta.get("language_info") or {}
    ).get("name")
    return language.lower() if isinstance(language, str) else None


def migrate_notebook(
    raw: bytes,
    *,
    path: str = "<notebook>",
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    max_code_size: int | None = None,
    python2: bool = True,
) -> NotebookResult:
    """Migrate the code cells of notebook ``raw`` as one program.

    ``python2``: code cells written for Python 2 go through the same
    pre-pass as ``.py`` files, cell by cell (:class:`_Python2Cells`), each
    conversion reported as TFM001 on its cell."""
    text, nb = load(raw)
    language = _language(nb)
    if language not in (None, "python", "python2", "python3"):
        return NotebookResult(raw, raw, skipped_reason=f"not a Python notebook ({language})")
    cells = nb["cells"]
    code = [(i, _cell_source(c)) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    if not any(mentions_tensorflow(src) for _, src in code):
        return NotebookResult(raw, raw)

    masker = _Masker()
    masked_cells: dict[int, str] = {}
    for index, source in code:
        masked = masker.mask(source)
        if masked and not masked.endswith("\n"):
            masked += "\n"
        masked_cells[index] = masked
    converted = _Python2Cells(masked_cells, path) if python2 else None
    if converted is not None:
        converted.convert_syntax()
        converted.convert_names(_program(converted.cells)[0])

    line_map: list[tuple[int, int] | None] = []

    def locate(line: int | None) -> tuple[int | None, int | None]:
        """A program line -> (1-based cell, line in the cell as written)."""
        if line is None:
            return None, None
        for candidate in range(line, len(line_map)):
            if line_map[candidate] is not None:
                cell, in_cell = line_map[candidate]
                if converted is not None:
                    in_cell = converted.original_line(cell, in_cell)
                return cell + 1, in_cell
        return None, line

    while True:
        program, line_map[:] = _program(converted.cells if converted else masked_cells)
        if max_code_size and len(program) > max_code_size:
            raise NotebookError(
                f"code cells too large ({len(program) / 1e6:.1f} MB > {max_code_size / 1e6:.1f} MB"
                " limit); use --max-file-size 0 to process them anyway"
            )
        try:
            result = migrate_source(
                program, path=path, select=select, ignore=ignore, cell_marker=rf"{CELL_MARKER}\(\d+\)[ \t]*\r?$"
            )
            break
        except MigrationError as e:
            # Python 3 whose indentation mixes tabs the way the CST parser cannot read
            if converted is None or not e.message.startswith("syntax error") or not converted.reindent():
                cell, line = locate(e.line)
                raise NotebookError(e.message, line, e.column, cell) from None

    diagnostics = list(converted.notes) if converted else []
    for d in result.diagnostics:
        cell, line = locate(d.line)
        diagnostics.append(d.with_location(line or 1, d.column, cell))

    if not result.changed and not (converted and converted.changed):
        return NotebookResult(raw, raw, diagnostics)

    new_sources = _split_program(masker.restore(result.output), [i for i, _ in code])
    locator = _Locator(text)
    try:
        locator.value(0)
    except (ValueError, IndexError) as e:  # json.loads accepted it, so this is our bug
        raise NotebookError(f"cannot locate cell sources in the notebook JSON ({e})") from None
    style = _detect_style(text)
    changes: list[CellChange] = []
    edits: list[tuple[int, int, str]] = []
    for index, before in code:
        after = new_sources[index]
        if not before.endswith("\n") and after.endswith("\n"):
            after = after[:-1]
        if after == before:
            continue
        cell = cells[index]
        changes.append(CellChange(index + 1, cell.get("id"), before, after))
        start, end = locator.spans[index]
        rendered = _render_source(
            after, cell["source"], text[start:end], _line_indent(text, start), style
        )
        if "\r\n" in text:  # JSON written with Windows line endings
            rendered = rendered.replace("\n", "\r\n")
        edits.append((start, end, rendered))
    if not edits:
        return NotebookResult(raw, raw, diagnostics)
    new_text = text
    for start, end, rendered in sorted(edits, reverse=True):
        new_text = new_text[:start] + rendered + new_text[end:]
    _verify(new_text, nb, {c.cell - 1: c.after for c in changes})
    prefix = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    return NotebookResult(raw, prefix + new_text.encode("utf-8"), diagnostics, changes)


def _program(cells: dict[int, str]) -> tuple[str, list[tuple[int, int] | None]]:
    """The code cells as one program (a marker statement before each), and
    for each 1-based program line its (cell index, line in the cell)."""
    parts: list[str] = []
    line_map: list[tuple[int, int] | None] = [None]
    for index, masked in cells.items():
        parts.append(f"{CELL_MARKER}({index})\n")
        line_map.append(None)
        parts.append(masked)
        line_map.extend((index, k) for k in range(1, masked.count("\n") + 1))
    return "".join(parts), line_map


class _Python2Cells:
    """The Python 2 pre-pass of ``.py`` files, cell by cell (IPython runs
    each cell on its own, so each is a complete piece of Python): cells that
    are not Python 3 are converted; Python 3 cells using what only Python 2
    has (``xrange``, ``d.iteritems()``, judged on the whole program: an
    import in one cell binds a name for the next) too; and where the CST
    parser cannot read a cell's tabs, its indentation is expanded. Magics
    are masked already (placeholder calls, valid Python 2 and 3)."""

    def __init__(self, cells: dict[int, str], path: str):
        self.original = dict(cells)
        self.cells = dict(cells)
        self.path = path
        self.notes: list[Diagnostic] = []
        self.reindented = False

    @property
    def changed(self) -> bool:
        return self.cells != self.original

    def _apply(self, index: int, step) -> None:
        try:
            result = step(self.cells[index])
        except MigrationError as e:
            raise NotebookError(e.message, self.original_line(index, e.line), e.column, index + 1) from None
        if result is None:
            return
        new, note = result
        line = self.original_line(index, note.line)
        self.cells[index] = new
        self.notes.append(note.with_location(line or 1, note.column, index + 1))

    def convert_syntax(self) -> None:
        for index, source in self.original.items():
            if not py2.is_python3(source):
                self._apply(index, lambda s: py2.convert(s, self.path, top_level_await=True))

    def convert_names(self, program: str) -> None:
        uses = py2.python2_uses(program)
        if not uses:
            return
        _, line_map = _program(self.cells)
        cells = dict.fromkeys(line_map[line][0] for line, _, _ in uses if line_map[line] is not None)
        for index in cells:
            if py2.python2_uses(self.cells[index]):
                self._apply(index, lambda s: py2.convert(s, self.path, top_level_await=True))

    def reindent(self) -> bool:
        """Expand tabs in indentation in every cell holding some; False when
        done already or nothing changed."""
        if self.reindented:
            return False
        self.reindented = True
        before = dict(self.cells)
        for index in self.cells:
            self._apply(index, lambda s: py2.expand_indentation(s, self.path, top_level_await=True))
        return self.cells != before

    def original_line(self, index: int, line: int | None) -> int | None:
        """A line of the cell as converted -> the line of the cell as written."""
        if line is None or self.cells[index] == self.original[index]:
            return line
        return py2.line_mapping(self.original[index], self.cells[index]).get(line, line)


def _split_program(program: str, indices: list[int]) -> dict[int, str]:
    pieces = re.split(rf"^{CELL_MARKER}\((\d+)\)[ \t]*\r?\n", program, flags=re.MULTILINE)
    # pieces: [before-first-marker, idx, body, idx, body, ...]
    found = [int(k) for k in pieces[1::2]]
    if found != indices:
        raise NotebookError(
            "a rule moved code across notebook cell boundaries; notebook left unchanged"
            " (please report this)"
        )
    bodies = pieces[2::2]
    if indices and pieces[0]:
        # e.g. imports added at the top of the program belong to the first cell
        bodies[0] = pieces[0] + bodies[0]
    return dict(zip(indices, bodies))


def _verify(new_text: str, nb: dict, new_sources: dict[int, str]) -> None:
    """The spliced JSON must parse to the old notebook with only the new sources."""
    try:
        reparsed = json.loads(new_text)
    except json.JSONDecodeError as e:
        raise NotebookError(f"internal error: rewritten notebook JSON is invalid ({e})") from None
    for index, cell in enumerate(reparsed["cells"]):
        expected = new_sources.get(index, _cell_source(nb["cells"][index]))
        if _cell_source(cell) != expected or {k: v for k, v in cell.items() if k != "source"} != {
            k: v for k, v in nb["cells"][index].items() if k != "source"
        }:
            raise NotebookError("internal error: rewritten notebook does not match; left unchanged")
    if {k: v for k, v in reparsed.items() if k != "cells"} != {
        k: v for k, v in nb.items() if k != "cells"
    }:
        raise NotebookError("internal error: rewritten notebook metadata differs; left unchanged")
