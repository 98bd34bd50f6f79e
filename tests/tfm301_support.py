"""What the TFM301 tests share: migrate a fixture (checking it parses,
compiles and is idempotent) and find things in it."""

from __future__ import annotations

import ast
import textwrap

from migrate.codemod.engine import dedent, migrate_source


def migrate(source: str, select=None):
    src = dedent(source)
    ast.parse(src)
    select = list(select) if select is not None else None
    result = migrate_source(src, select=select)
    compile(result.output, "<migrated>", "exec")
    assert migrate_source(result.output, select=select).output == result.output
    return result


def manual(result):
    return [d for d in result.manual_work if d.code == "TFM301"]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(dedent(source).splitlines(), 1) if text in line)


def tail_from(code: str, text: str) -> str:
    lines = dedent(code).splitlines()
    start = next(i for i, line in enumerate(lines) if text in line)
    return textwrap.dedent("\n".join(lines[start:])) + "\n"
