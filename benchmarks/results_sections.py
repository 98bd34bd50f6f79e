"""Sections of a results file that different benchmark scripts own.

``benchmarks/RESULTS-realworld.md`` holds the real-code scoreboard
(``bench_realworld.py --write``) and the real-code speed figures
(``bench_codemod.py --dir``): each script rewrites only its own section,
between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``, and keeps the rest
of the file (the other section, hand-written readings) as it is.
"""

from __future__ import annotations

from pathlib import Path

TITLE = "# Real code: scoreboard and speed\n"


def replace_section(path: Path, name: str, text: str) -> str:
    """Write ``text`` as section ``name`` of ``path`` (appended when new); returns the file's text."""
    begin, end = f"<!-- begin {name} -->\n", f"<!-- end {name} -->\n"
    block = begin + text.rstrip("\n") + "\n" + end
    old = path.read_text(encoding="utf-8") if path.exists() else TITLE
    start = old.find(begin)
    stop = old.find(end, start + 1) if start >= 0 else -1
    if start >= 0 and stop >= 0:
        new = old[:start] + block + old[stop + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + block
    path.write_text(new, encoding="utf-8")
    return new
