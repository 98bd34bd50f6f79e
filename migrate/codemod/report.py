"""Result reporting: text (diff + located diagnostics), JSON, SARIF 2.1.0,
and the one-line summary.

Text: ``path:line:col: CODE [fixed] message`` (``path[cell N]:line:col`` in
notebooks), errors as ``path:line:col: error: message``.

JSON (``schema_version`` 1)::

    {"tool": "tfmigrate", "version", "schema_version", "mode": "diff|write|output",
     "summary": {"files", "changed", "errors", "skipped", "diagnostics", "manual_work", "text"},
     "files": [{"path", "kind": "python|notebook|launcher", "status": "unchanged|changed|error|skipped",
                "changed", "written", "output_path", "note", "diff",
                "program": {"modules", "migrated_together"} | null,
                "error": {"message", "line", "column", "cell"} | null,
                "diagnostics": [{"code", "rule", "path", "line", "column", "end_line",
                                 "end_column", "cell", "cell_id", "severity", "message",
                                 "hint", "reference", "manual_work",
                                 "fix": {"available", "applied", "safety"}}]}]}

Lines and columns are 1-based; in notebooks they count within the cell and
``cell`` is the 1-based position of the cell in the notebook (markdown cells
included). ``fix.safety`` is the rule's ``fix_safety`` attribute when it has one.
``program`` lists the modules of the project (beside the file, or at the root
of its packages) the migration read, and whether the file's training was
migrated with them (``migrated_together``) or they were only analysed.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from migrate import __version__
from migrate.codemod.engine import Diagnostic

JSON_SCHEMA_VERSION = 1
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/tfmigrate/tfmigrate"


@dataclass
class FileError:
    message: str
    line: int | None = None
    column: int | None = None
    cell: int | None = None


@dataclass
class FileResult:
    path: str  # as displayed: relative to the cwd when possible
    kind: str  # "python" | "notebook" | "launcher"
    status: str  # "unchanged" | "changed" | "error" | "skipped"
    diagnostics: list[Diagnostic] = field(default_factory=list)
    diff: str = ""
    error: FileError | None = None
    written: bool = False
    output_path: str | None = None
    note: str | None = None  # why skipped, etc.
    cell_ids: dict[int, str] = field(default_factory=dict)  # notebook cell number -> id
    # the project modules this file's migration read (as displayed), and whether
    # its training was migrated with them (one program) or only analysed with them
    program: list[str] = field(default_factory=list)
    program_migrated: bool = False
    # what the migrated program needs from its launchers (migrate.launchers.Topology)
    topology: object | None = None

    @property
    def manual_work(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.fixed]


@dataclass
class RuleInfo:
    code: str
    name: str
    summary: str
    doc: str
    fix_safety: str | None


def rule_info(code: str) -> RuleInfo:
    from migrate.codemod.py2 import PY2_CODE, PY2_NAME
    from migrate.codemod.rules import REGISTRY

    if code == PY2_CODE:
        return RuleInfo(
            code,
            PY2_NAME,
            "Python 2 source converted to Python 3 before the TensorFlow rules ran.",
            "A file that is not valid Python 3 goes through a fissix (lib2to3) pre-pass.",
            "review",
        )
    for rule in REGISTRY:
        if rule.code == code:
            doc = inspect.cleandoc(rule.__doc__ or "")
            return RuleInfo(
                code, rule.name, doc_summary(doc), doc, getattr(rule, "fix_safety", None)
            )
    return RuleInfo(code, code.lower(), "", "", None)


_DOC_HEADERS = {"what it does", "why", "example", "examples", "fix safety", "summary"}


def doc_summary(doc: str) -> str:
    """The first sentence of a rule docstring, skipping section headers
    such as 'What it does'."""
    paragraph: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        text = line.strip()
        if text.lower().strip("#:-= ") in _DOC_HEADERS or set(text) <= set("-=~"):
            if paragraph:
                break
            continue
        if not text:
            if paragraph:
                break
            continue
        paragraph.append(text)
    summary = " ".join(paragraph)
    end = summary.find(". ")
    return summary[: end + 1] if end >= 0 else summary


# --------------------------------------------------------------------------- diffs


def unified_diff(before: str, after: str, path: str, label: str = "") -> str:
    suffix = f" [{label}]" if label else ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{'' if os.path.isabs(path) else 'a/'}{path}{suffix}",
        tofile=f"{'' if os.path.isabs(path) else 'b/'}{path}{suffix}",
    )
    out = []
    for line in lines:
        line = line.replace("\r\n", "\n")
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# --------------------------------------------------------------------------- text


def location(path: str, line: int | None, column: int | None, cell: int | None) -> str:
    where = f"{path}[cell {cell}]" if cell is not None else path
    if line is None:
        return where
    return f"{where}:{line}:{column or 1}"


def format_text(results: list[FileResult], *, show_diff: bool) -> str:
    out: list[str] = []
    for r in results:
        if show_diff and r.diff:
            out.append(r.diff)
        if r.error is not None:
            e = r.error
            out.append(f"{location(r.path, e.line, e.column, e.cell)}: error: {e.message}\n")
        if r.program:
            how = "migrated as one program with" if r.program_migrated else "analysed together with"
            out.append(f"{r.path}: {how} {', '.join(r.program)}\n")
        for d in r.diagnostics:
            tag = " [fixed]" if d.fixed else ""
            out.append(f"{location(r.path, d.line, d.column, d.cell)}: {d.code}{tag} {d.message}\n")
            if d.hint and not d.fixed:
                out.append(f"    hint: {d.hint}\n")
            if d.reference and not d.fixed:
                out.append(f"    see: {d.reference}\n")
    return "".join(out)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(results: list[FileResult], mode: str) -> str:
    changed = sum(r.status == "changed" for r in results)
    errors = sum(r.status == "error" for r in results)
    diagnostics = sum(len(r.diagnostics) for r in results)
    manual = sum(len(r.manual_work) for r in results)
    verb = {"diff": "would change", "write": "changed", "output": "migrated"}[mode]
    parts = [f"{_plural(changed, 'file')} {verb}"]
    parts.append(
        f"{_plural(diagnostics, 'diagnostic')} ({manual} need{'s' if manual == 1 else ''} manual work)"
    )
    if errors:
        parts.append(f"{_plural(errors, 'file')} could not be processed")
    skipped = sum(r.status == "skipped" for r in results)
    return f"{', '.join(parts)} ({_plural(len(results), 'file')} checked, {skipped} without TensorFlow)"


# --------------------------------------------------------------------------- JSON


def _diagnostic_json(path: str, d: Diagnostic, written: bool, cell_ids: dict[int, str]) -> dict:
    info = rule_info(d.code)
    return {
        "code": d.code,
        "rule": info.name,
        "path": path,
        "line": d.line,
        "column": d.column,
        "end_line": d.end_line,
        "end_column": d.end_column,
        "cell": d.cell,
        "cell_id": cell_ids.get(d.cell) if d.cell is not None else None,
        "severity": d.severity,
        "message": d.message,
        "hint": d.hint or None,
        "reference": d.reference or None,
        "manual_work": not d.fixed,
        "fix": {
            "available": d.fixed,
            "applied": d.fixed and written,
            "safety": info.fix_safety,
        },
    }


def to_json(results: list[FileResult], mode: str) -> dict:
    files = []
    for r in results:
        files.append(
            {
                "path": r.path,
                "kind": r.kind,
                "status": r.status,
                "changed": r.status == "changed",
                "written": r.written,
                "output_path": r.output_path,
                "note": r.note,
                "error": None
                if r.error is None
                else {
                    "message": r.error.message,
                    "line": r.error.line,
                    "column": r.error.column,
                    "cell": r.error.cell,
                },
                "diff": r.diff or None,
                # the project modules this file's migration read (its program)
                "program": {"modules": r.program, "migrated_together": r.program_migrated} if r.program else None,
                "diagnostics": [
                    _diagnostic_json(r.path, d, r.written, r.cell_ids) for d in r.diagnostics
                ],
            }
        )
    return {
        "tool": "tfmigrate",
        "version": __version__,
        "schema_version": JSON_SCHEMA_VERSION,
        "mode": mode,
        "summary": {
            "files": len(results),
            "changed": sum(r.status == "changed" for r in results),
            "errors": sum(r.status == "error" for r in results),
            "skipped": sum(r.status == "skipped" for r in results),
            "diagnostics": sum(len(r.diagnostics) for r in results),
            "manual_work": sum(len(r.manual_work) for r in results),
            "text": summary(results, mode),
        },
        "files": files,
    }


# --------------------------------------------------------------------------- SARIF


def _uri(path: str) -> tuple[str, str | None]:
    p = Path(path)
    if p.is_absolute():
        return p.as_uri(), None
    return p.as_posix(), "%SRCROOT%"


def _artifact(path: str) -> dict:
    uri, base = _uri(path)
    return {"uri": uri, "uriBaseId": base} if base else {"uri": uri}


def _region(line: int | None, column: int | None, end_line=None, end_column=None) -> dict:
    region: dict = {}
    if line is not None:
        region["startLine"] = max(1, line)
        region["startColumn"] = max(1, column or 1)
        if end_line is not None:
            region["endLine"] = end_line
            if end_column is not None:
                region["endColumn"] = end_column
    return region


_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def to_sarif(results: list[FileResult]) -> dict:
    codes = sorted({d.code for r in results for d in r.diagnostics})
    rules = []
    for code in codes:
        info = rule_info(code)
        rules.append(
            {
                "id": code,
                "name": info.name,
                "shortDescription": {"text": info.summary or info.name},
                "fullDescription": {"text": info.doc or info.summary or info.name},
                "help": {"text": info.doc or info.summary or info.name},
                "properties": {"fix_safety": info.fix_safety},
            }
        )
    index = {code: i for i, code in enumerate(codes)}
    sarif_results = []
    for r in results:
        for d in r.diagnostics:
            text = d.message + (f"\nhint: {d.hint}" if d.hint else "")
            properties = {"fixed": d.fixed, "manual_work": not d.fixed}
            if d.cell is not None:
                properties["cell"] = d.cell
            location = {
                "physicalLocation": {
                    "artifactLocation": _artifact(r.path),
                    "region": _region(d.line, d.column, d.end_line, d.end_column),
                }
            }
            if d.cell is not None:
                location["message"] = {"text": f"cell {d.cell}"}
            sarif_results.append(
                {
                    "ruleId": d.code,
                    "ruleIndex": index[d.code],
                    "level": "note" if d.fixed else _LEVEL.get(d.severity, "warning"),
                    "message": {"text": text},
                    "locations": [location],
                    "properties": properties,
                }
            )
    notifications = []
    for r in results:
        if r.error is None:
            continue
        region = _region(r.error.line, r.error.column)
        physical: dict = {"artifactLocation": _artifact(r.path)}
        if region:
            physical["region"] = region
        note = {
            "level": "error",
            "message": {"text": r.error.message},
            "locations": [{"physicalLocation": physical}],
        }
        if r.error.cell is not None:
            note["properties"] = {"cell": r.error.cell}
        notifications.append(note)
    run = {
        "tool": {
            "driver": {
                "name": "tfmigrate",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(os.getcwd()).as_uri() + "/"}},
        "results": sarif_results,
        "invocations": [
            {
                "executionSuccessful": not notifications,
                "toolExecutionNotifications": notifications,
            }
        ],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def dumps(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
