"""Guard for performance-only changes: the codemod's outputs and diagnostics
must stay byte-identical.

    python3 benchmarks/compare_outputs.py save SNAPSHOT [DIR ...]
    python3 benchmarks/compare_outputs.py diff SNAPSHOT [DIR ...]

``save`` runs the engine (in this process, the worktree's package) on every
``.py`` and ``.ipynb`` file under each DIR (default: ``tests/fixtures``,
``legacy_reference``, ``rewrites`` and ``../shared/corpus/dev`` when present)
and on every VALID/INVALID fixture of every rule (all rules, and that rule
alone), and writes one JSON record per input (output text, diagnostics with
every field, applied rules, or the error) to SNAPSHOT. ``diff`` recomputes
them and lists every input whose record differs (exit 1 if any).

Keep SNAPSHOT outside the project: it holds outputs of other people's code.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from migrate.cli import Task, process
from migrate.codemod.engine import MigrationError, dedent, migrate_source
from migrate.codemod.files import DEFAULT_MAX_FILE_SIZE
from migrate.codemod.rules import REGISTRY

DEFAULT_DIRS = [ROOT / "tests" / "fixtures", ROOT / "legacy_reference", ROOT / "rewrites"]
CORPUS = ROOT.parent.parent / "shared" / "corpus" / "dev"


def _record(source: str, select: list[str] | None = None) -> dict:
    try:
        result = migrate_source(source, select=select)
    except MigrationError as e:
        return {"error": str(e)}
    return {
        "output": result.output,
        "applied": result.rules_applied,
        "diagnostics": [dataclasses.asdict(d) for d in result.diagnostics],
    }


def _file_record(path: Path) -> dict:
    """What the CLI computes for the file (Python 2 pre-pass and notebooks included)."""
    kind = "notebook" if path.suffix == ".ipynb" else "python"
    result = process(Task(str(path), kind, "diff", None, None, (), DEFAULT_MAX_FILE_SIZE, True))
    return {
        "status": result.status,
        "diff": result.diff,
        "note": result.note,
        "error": dataclasses.asdict(result.error) if result.error else None,
        "diagnostics": [dataclasses.asdict(d) for d in result.diagnostics],
    }


def records(dirs: list[Path]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for directory in dirs:
        for path in sorted(directory.rglob("*")):
            if path.suffix in (".py", ".ipynb"):
                out[str(path)] = _file_record(path)
    for rule in REGISTRY:
        for kind in ("VALID", "INVALID"):
            for i, case in enumerate(getattr(rule, kind)):
                src = dedent(case.code)
                key = f"{rule.code}-{kind.lower()}{i}"
                out[key + "-all"] = _record(src)
                out[key + "-alone"] = _record(src, select=[rule.code])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "diff"))
    parser.add_argument("snapshot", type=Path)
    parser.add_argument("dirs", nargs="*", type=Path)
    args = parser.parse_args()
    dirs = args.dirs or DEFAULT_DIRS + ([CORPUS] if CORPUS.is_dir() else [])
    start = time.perf_counter()
    now = records([d.resolve() for d in dirs])
    seconds = time.perf_counter() - start
    if args.action == "save":
        args.snapshot.write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"saved {len(now)} records to {args.snapshot} ({seconds:.1f}s)")
        return 0
    before = json.loads(args.snapshot.read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for key in differ:
        print(f"DIFFERS: {key}")
    print(f"{len(now)} records, {len(differ)} differ ({seconds:.1f}s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
