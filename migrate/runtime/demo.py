"""``tfmigrate demo``: the first command a newcomer runs.

Migrates the bundled legacy reference program (``legacy_reference/async_ps.py``,
an asynchronous parameter-server training script), shows the diff and the
diagnostics, writes the migrated program next to a copy of the original, and,
when ``tfmigrate check`` is available, runs the equivalence check on the pair.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import migrate

REFERENCE_NAME = "async_ps.py"


def reference_dir() -> Path:
    return Path(migrate.__file__).resolve().parent.parent / "legacy_reference"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tfmigrate demo",
        description="Migrate the bundled legacy ps/worker program, show the diff, and check"
        " the migrated program trains the same (when `tfmigrate check` is available)."
        " Other options (e.g. --steps 20) are passed to `tfmigrate check`.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="directory for the original and migrated copies (default: a new temporary directory)",
    )
    parser.add_argument("--no-check", action="store_true", help="only show the migration")
    args, check_args = parser.parse_known_args(argv)

    from migrate.cli import Task, process
    from migrate.codemod.report import format_text, summary

    source = reference_dir() / REFERENCE_NAME
    if not source.is_file():
        print(
            f"tfmigrate demo: the bundled reference program is missing (expected {source});"
            " it ships with the source checkout of tfmigrate",
            file=sys.stderr,
        )
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="tfmigrate-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    original = out / "legacy_async_ps.py"
    migrated = out / "migrated_async_ps.py"
    shutil.copyfile(source, original)

    print(f"Migrating {source} (a TF1 asynchronous parameter-server training program)\n")
    task = Task(
        path=str(original),
        kind="python",
        mode="output",
        output_path=str(migrated),
        select=None,
        ignore=(),
        max_file_size=0,
        python2=True,
    )
    result = process(task)
    sys.stdout.write(format_text([result], show_diff=True))
    print(summary([result], "output"))
    if result.status == "error":
        return 2
    print(f"\nOriginal: {original}\nMigrated: {migrated}")

    if args.no_check:
        return 1 if result.manual_work else 0
    if importlib.util.find_spec("migrate.runtime.check") is None:
        print("\nThe equivalence check (`tfmigrate check`) is not available yet in this version.")
        return 1 if result.manual_work else 0
    # One worker by default: asynchronous training is then exactly reproducible and
    # the check compares step by step (a newcomer sees 0.0 differences in ~1 min).
    defaults = [] if any(a.startswith("--workers") for a in check_args) else ["--workers", "1"]
    if not any(a.startswith("--steps") for a in check_args):
        defaults += ["--steps", "20"]
    check_argv = [str(original), str(migrated), "--out", str(out / "check"), *defaults, *check_args]
    print(f"\nRunning: tfmigrate check {' '.join(check_argv)}\n", flush=True)
    from migrate.runtime import check

    return int(check.main(check_argv) or 0)
