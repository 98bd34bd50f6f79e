"""The ``tfmigrate`` command line.

    tfmigrate PATH...                 show the diff and diagnostics (read-only)
    tfmigrate --write PATH...         apply the changes in place (atomic writes)
    tfmigrate PATH -o OUT             write migrated copies (file -> file, dir -> tree)
    tfmigrate --format json|sarif     machine-readable results on stdout
    tfmigrate rules                   list the registered rules
    tfmigrate demo                    migrate the bundled legacy reference program
    tfmigrate check ... / reference ...   equivalence check / reference programs
    tfmigrate checkpoint convert SRC DST --program P   a TF1 checkpoint for the migration, and back

Exit codes: 0 nothing to change and no manual work; 1 changes pending or
manual work reported; 2 some input could not be processed or a path named on
the command line yields no file (the others still were; each says why), or a
usage error.

``TFMIGRATE_EXTRA_RULES=module:Class,...`` appends plugin rules to the
registry (for plugins and tests). This module never imports TensorFlow.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import os
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from migrate import __version__
from migrate.codemod import config, files
from migrate.codemod.report import FileError as ReportedError
from migrate.codemod.report import FileResult

EXTRA_RULES_ENV = "TFMIGRATE_EXTRA_RULES"
SUBCOMMANDS = ("rules", "demo", "check", "reference", "checkpoint")
# Below this many files a process pool costs more than it saves.
POOL_THRESHOLD = 8


class UsageError(Exception):
    pass


# --------------------------------------------------------------------------- plugins


def load_extra_rules(spec: str | None = None) -> None:
    """Append the rule classes named in ``$TFMIGRATE_EXTRA_RULES``."""
    spec = os.environ.get(EXTRA_RULES_ENV, "") if spec is None else spec
    if not spec.strip():
        return
    from migrate.codemod.rules import REGISTRY

    for item in filter(None, (s.strip() for s in spec.split(","))):
        module_name, _, class_name = item.partition(":")
        if not class_name:
            raise UsageError(f"{EXTRA_RULES_ENV}: expected module:Class, got {item!r}")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as e:
            raise UsageError(f"{EXTRA_RULES_ENV}: cannot load {item}: {e}") from None
        if cls not in REGISTRY:
            REGISTRY.append(cls)


# --------------------------------------------------------------------------- per file


@dataclass(frozen=True)
class Task:
    path: str  # as found (given on the command line or walked)
    kind: str  # "python" | "notebook"
    mode: str  # "diff" | "write" | "output"
    output_path: str | None
    select: tuple[str, ...] | None
    ignore: tuple[str, ...]
    max_file_size: int
    python2: bool


def _error_result(task: Task, message: str, line=None, column=None, cell=None) -> FileResult:
    return FileResult(
        task.path, task.kind, "error", error=ReportedError(message, line, column, cell)
    )


def process(task: Task) -> FileResult:
    """Migrate one file; never raises (errors become an ``error`` result)."""
    from migrate.codemod.engine import MigrationError

    raw = None
    try:
        raw = files.read_bytes(Path(task.path), max_size=None)
        if task.kind == "notebook":
            result = _process_notebook(task, raw)
        else:
            result = _process_python(task, raw)
    except files.FileError as e:
        result = _error_result(task, e.message, e.line, e.column)
    except MigrationError as e:
        result = _error_result(task, e.message, e.line, e.column, getattr(e, "cell", None))
    except Exception as e:  # noqa: BLE001 - a rule crash must not stop the run or touch the file
        result = _error_result(
            task,
            f"internal error: {type(e).__name__}: {e}; file left unchanged (please report this)",
        )
    if task.mode == "output" and raw is not None and not result.written:
        # -o DIR yields a complete tree: unchanged and unprocessable files as they are
        try:
            files.atomic_write(Path(task.output_path), raw, durable=False)
            result.written, result.output_path = True, task.output_path
        except OSError as e:
            result.status = "error"
            result.error = ReportedError(f"cannot write {task.output_path}: {e.strerror or e}")
    return result


def _write(task: Task, result: FileResult, data: bytes) -> None:
    target = Path(task.output_path if task.mode == "output" else task.path)
    try:
        files.atomic_write(target, data, durable=task.mode == "write")
    except OSError as e:
        raise files.FileError(
            f"cannot write {target}: {e.strerror or e}; file left unchanged"
        ) from None
    result.written, result.output_path = True, str(target)


def _process_python(task: Task, raw: bytes) -> FileResult:
    from migrate.codemod import py2
    from migrate.codemod.engine import MigrationError, migrate_source
    from migrate.codemod.report import unified_diff
    from migrate.launchers.topology import of_program

    files.check_not_binary(raw)
    if b"tensorflow" not in raw:
        return FileResult(task.path, "python", "skipped", note="does not mention tensorflow")
    files.check_size(len(raw), task.max_file_size)
    decoded = files.decode_source(raw)
    text = decoded.text
    converted, notes, steps_done = text, [], set()
    if task.python2 and py2.python2_uses(text):
        # valid Python 3 syntax that only runs on Python 2 (a bare xrange, d.iteritems())
        converted, note = py2.convert(text, task.path)
        notes.append(note)
        steps_done.add("convert")
    while True:
        try:
            result = migrate_source(converted, path=task.path, select=task.select, ignore=task.ignore)
            break
        except MigrationError as e:
            step = _python2_step(text, converted, steps_done, task.path, e) if task.python2 else None
            if step is None:
                if converted is not text and e.line is not None:
                    e.line = py2.line_mapping(text, converted).get(e.line, e.line)
                raise
            converted, note = step
            notes.append(note)
    output, diagnostics = result.output, result.diagnostics
    if notes:
        diagnostics = [*notes, *py2.map_lines_back(text, converted, result.diagnostics)]
    fr = FileResult(task.path, "python", "unchanged", diagnostics)
    if result.project_files:
        fr.program = [_displayed(p) for p in result.project_files]
        fr.program_migrated = _trains_on_strategy(output) and not _trains_on_strategy(text)
    fr.topology = of_program(Path(task.path), output) if output != text or "tf.distribute" in output else None
    if output != text:
        data = files.encode_source(output, decoded)
        fr.status = "changed"
        fr.diff = unified_diff(text, output, task.path)
        if task.mode in ("write", "output"):
            _write(task, fr, data)
    return fr


def _displayed(path: str) -> str:
    """A path as the report shows paths: relative to the cwd when below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _trains_on_strategy(code: str) -> bool:
    return any(f"tf.distribute.{name}" in code for name in (
        "ParameterServerStrategy", "MultiWorkerMirroredStrategy", "MirroredStrategy"))


def _python2_step(text: str, converted: str, done: set[str], path: str, error) -> tuple | None:
    """The pre-pass step that may get past ``error`` (the engine could not
    parse ``converted``): Python 2 syntax is converted, then indentation
    whose tabs the CST parser cannot read (Python 3 can) is expanded; None
    when neither applies or both were done (``done`` records them)."""
    from migrate.codemod import py2

    if not error.message.startswith("syntax error"):
        return None
    if "convert" not in done and not py2.is_python3(text):
        done.add("convert")
        return py2.convert(text, path)
    if "reindent" not in done and py2.is_python3(converted):
        done.add("reindent")
        return py2.expand_indentation(converted, path)
    return None


def _process_notebook(task: Task, raw: bytes) -> FileResult:
    from migrate.codemod.notebook import migrate_notebook
    from migrate.codemod.report import unified_diff

    if b"tensorflow" not in raw:
        return FileResult(task.path, "notebook", "skipped", note="does not mention tensorflow")
    nb = migrate_notebook(
        raw,
        path=task.path,
        select=task.select,
        ignore=task.ignore,
        max_code_size=task.max_file_size,
        python2=task.python2,
    )
    fr = FileResult(task.path, "notebook", "unchanged", nb.diagnostics)
    if nb.skipped_reason:
        fr.status, fr.note = "skipped", nb.skipped_reason
    fr.cell_ids = {c.cell: c.cell_id for c in nb.changes if c.cell_id}
    if nb.changed:
        fr.status = "changed"
        fr.diff = "".join(
            unified_diff(c.before, c.after, task.path, f"cell {c.cell}") for c in nb.changes
        )
        if task.mode in ("write", "output"):
            _write(task, fr, nb.output)
    return fr


def _init_worker(extra_rules: str) -> None:
    load_extra_rules(extra_rules)


# --------------------------------------------------------------------------- progress


class Progress:
    """A one-line ``[n/total] path`` display on a terminal's stderr."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 1
        self.width = shutil.get_terminal_size((80, 20)).columns - 1

    def update(self, path: str) -> None:
        self.done += 1
        if self.enabled:
            text = f"[{self.done}/{self.total}] {path}"[: self.width]
            sys.stderr.write("\r" + text.ljust(self.width))
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def run_tasks(tasks: list[Task], jobs: int, progress: Progress) -> list[FileResult]:
    results: list[FileResult] = []
    if jobs <= 1 or len(tasks) < POOL_THRESHOLD:
        for task in tasks:
            results.append(process(task))
            progress.update(task.path)
        return results
    workers = min(jobs, len(tasks))
    # Largest files first, in small chunks: a file's time grows with its size,
    # and a large one handed out last keeps one worker busy while the others
    # are idle. (The caller orders the results.)
    chunksize = max(1, min(16, len(tasks) // (workers * 32)))
    tasks = sorted(tasks, key=_size, reverse=True)
    context = multiprocessing.get_context()
    if context.get_start_method() == "fork":
        _preload()  # once here rather than in every worker: forked workers share it
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(os.environ.get(EXTRA_RULES_ENV, ""),),
    ) as pool:
        for result in pool.map(process, tasks, chunksize=chunksize):
            results.append(result)
            progress.update(result.path)
    return results


def _preload() -> None:
    """What every worker needs before its first file: the rules, the launch
    topology reader, and the tables of libcst's node types the engine's walks
    read (importing and filling them costs about as much as migrating a few
    files)."""
    from migrate.codemod import fastcst
    from migrate.codemod.rules import REGISTRY  # noqa: F401 - imported for the workers
    from migrate.launchers import topology  # noqa: F401

    fastcst.prepare_tables()


def _size(task: Task) -> int:
    try:
        return os.stat(task.path).st_size
    except OSError:
        return 0  # reported when the worker reads it


# --------------------------------------------------------------------------- argument parsing


def available_cores() -> int:
    """Cores this process may run on (respects CPU affinity in containers)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _codes(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [c.strip().upper() for v in values for c in v.split(",") if c.strip()]


def _patterns(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfmigrate",
        description="Migrate TensorFlow 1.x distributed code (ps/worker, SyncReplicas, towers,"
        " Supervisor) to tf.distribute. Read-only unless --write or -o is given.",
        epilog="Other commands: tfmigrate rules | demo | check | reference | checkpoint (see `tfmigrate CMD -h`)."
        " A path literally named like a command can be given as ./NAME."
        " Exit codes: 0 nothing to do, 1 changes pending or manual work reported,"
        " 2 some file could not be processed, a named path yields no file, or usage error."
        f" Plugins/tests: {EXTRA_RULES_ENV}=module:Class,... adds rules.",
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="files or directories (.py, .ipynb)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("-w", "--write", action="store_true", help="apply the changes in place")
    mode.add_argument(
        "-o", "--output", metavar="OUT", help="write migrated copies to OUT (one input path)"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "sarif"),
        default="text",
        help="output format on stdout (default: text)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=available_cores(),
        help="parallel processes (default: all cores)",
    )
    parser.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="only these rule codes or prefixes (comma-separated; ALL)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        metavar="CODES",
        help="skip these rule codes or prefixes (comma-separated)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        metavar="PATTERNS",
        help="gitignore-style patterns replacing the default excludes",
    )
    parser.add_argument(
        "--extend-exclude",
        action="append",
        metavar="PATTERNS",
        help="gitignore-style patterns added to the excludes",
    )
    parser.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply excludes to files named explicitly too (for pre-commit)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="PYPROJECT",
        help="use this pyproject.toml instead of searching upwards",
    )
    parser.add_argument("--no-config", action="store_true", help="ignore [tool.tfmigrate] settings")
    parser.add_argument(
        "--max-file-size",
        type=int,
        metavar="BYTES",
        help=f"report larger files instead of parsing them (default"
        f" {files.DEFAULT_MAX_FILE_SIZE}; 0: no limit)",
    )
    parser.add_argument(
        "--no-python2",
        dest="python2",
        action="store_false",
        help="report Python 2 files as errors instead of converting them first",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument(
        "--no-launchers",
        action="store_true",
        help="leave launch configurations (TFJob/Kubernetes/compose YAML, shell and Slurm scripts that start"
        " a migrated program in the directories named) as they are",
    )
    parser.add_argument("--version", action="version", version=f"tfmigrate {__version__}")
    return parser


# --------------------------------------------------------------------------- migrate command


def _output_targets(paths: list[Path], out: Path, discovered: files.Discovery):
    """Map each input file to its copy under ``out``."""
    if len(paths) != 1:
        raise UsageError("-o/--output takes exactly one input path")
    source = paths[0]
    if source.resolve() == out.resolve():
        raise UsageError("-o/--output must differ from the input path")
    if source.is_dir():
        if out.exists() and not out.is_dir():
            raise UsageError(f"-o {out}: the input is a directory, so the output must be one too")
        return lambda f: out / f.relative_to(source)
    target = out / source.name if out.is_dir() else out
    return lambda f: target


def migrate_command(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    paths = [Path(p) for p in args.paths]
    mode = "write" if args.write else "output" if args.output else "diff"
    try:
        cfg = config.Config() if args.no_config else config.discover(paths[0], args.config)
    except config.ConfigError as e:
        print(f"tfmigrate: config error: {e}", file=sys.stderr)
        return 2
    select = _codes(args.select) or cfg.select
    ignore = _codes(args.ignore) if args.ignore is not None else cfg.ignore
    exclude = _patterns(args.exclude) if args.exclude is not None else cfg.exclude
    extend_exclude = cfg.extend_exclude + (_patterns(args.extend_exclude) or [])
    max_size = args.max_file_size if args.max_file_size is not None else cfg.max_file_size
    max_size = files.DEFAULT_MAX_FILE_SIZE if max_size is None else max_size
    _warn_unknown_codes(select, "select")
    _warn_unknown_codes(ignore, "ignore")

    out = Path(args.output) if args.output else None
    skip_dirs = (out,) if out is not None else ()
    found = files.discover(
        paths,
        exclude=exclude,
        extend_exclude=extend_exclude,
        exclude_base=cfg.base,
        force_exclude=args.force_exclude,
        skip_dirs=skip_dirs,
        collect_others=out is not None,
        pattern_origins=_pattern_origins(args, cfg),
    )
    for given, why in found.skipped:
        print(f"tfmigrate: {given}: not processed: {why}", file=sys.stderr)
    target_of = _output_targets(paths, out, found) if out is not None else None

    tasks = [
        Task(
            path=str(f),
            kind="notebook" if f.suffix == ".ipynb" else "python",
            mode=mode,
            output_path=str(target_of(f)) if target_of else None,
            select=tuple(select) if select else None,
            ignore=tuple(ignore or ()),
            max_file_size=max_size,
            python2=args.python2,
        )
        for f in found.files
    ]
    progress = Progress(len(tasks), sys.stderr.isatty() and not args.no_progress)
    try:
        results = run_tasks(tasks, args.jobs, progress)
    finally:
        progress.close()
    for given, message in found.errors:
        results.append(FileResult(str(given), "python", "error", error=ReportedError(message)))
    if target_of is not None:
        for other in found.others:
            try:
                target = target_of(other)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(other, target)
            except OSError as e:
                results.append(
                    FileResult(
                        str(other),
                        "other",
                        "error",
                        error=ReportedError(f"cannot copy: {e.strerror or e}"),
                    )
                )
    if not args.no_launchers:
        results += _migrate_launchers(paths, results, mode, target_of, out, max_size)
    results.sort(key=lambda r: r.path)
    return _report(results, mode, args.format)


def _migrate_launchers(paths: list[Path], results: list[FileResult], mode: str, target_of, out: Path | None,
                       max_size: int) -> list[FileResult]:
    """The launch configurations under the directories named that start a
    migrated program, rewritten to the topology it now needs (see
    :mod:`migrate.launchers`)."""
    from migrate import launchers
    from migrate.codemod.engine import Diagnostic
    from migrate.codemod.report import unified_diff

    topologies = [r.topology for r in results if r.topology is not None]
    if not topologies:
        return []
    skip_root = out.resolve() if out is not None else None
    found = launchers.find_launchers([p for p in paths if p.is_dir()],
                                     skip=lambda p: skip_root is not None and p.resolve() == skip_root)
    launched: list[FileResult] = []
    for path in found:
        try:
            raw = files.read_bytes(path, max_size=min(max_size, launchers.MAX_LAUNCHER_SIZE))
            files.check_not_binary(raw)
            decoded = files.decode_source(raw)
            rewrite = launchers.rewrite_launcher(path, decoded.text, topologies)
        except files.FileError as e:
            launched.append(FileResult(str(path), "launcher", "error", error=ReportedError(e.message, e.line, e.column)))
            continue
        except launchers.LauncherError as e:
            launched.append(FileResult(str(path), "launcher", "error",
                                       error=ReportedError(f"{e}; file left unchanged", e.line, e.column)))
            continue
        if rewrite is None:
            continue
        result = FileResult(str(path), "launcher", "unchanged", [
            Diagnostic(e.code, e.message, e.line, e.column, fixed=e.fixed,
                       severity="info" if e.fixed else "warning") for e in rewrite.edits])
        if rewrite.text != decoded.text:
            result.status = "changed"
            result.diff = unified_diff(decoded.text, rewrite.text, str(path))
            if mode in ("write", "output"):
                target = Path(target_of(path)) if mode == "output" else path
                try:
                    files.atomic_write(target, files.encode_source(rewrite.text, decoded), durable=mode == "write")
                    result.written, result.output_path = True, str(target)
                except OSError as e:
                    result.status = "error"
                    result.error = ReportedError(f"cannot write {target}: {e.strerror or e}; file left unchanged")
        launched.append(result)
    return launched


def _pattern_origins(args: argparse.Namespace, cfg: config.Config) -> dict[str, str]:
    """Exclude pattern -> where it was set, for the message of a path that
    yields no file."""
    origins: dict[str, str] = {}
    where = f"[tool.tfmigrate] {{}} in {cfg.path}"
    if args.exclude is not None:
        origins.update(dict.fromkeys(_patterns(args.exclude) or [], "--exclude"))
    elif cfg.exclude is not None:
        origins.update(dict.fromkeys(cfg.exclude, where.format("exclude")))
    origins.update(dict.fromkeys(cfg.extend_exclude, where.format("extend-exclude")))
    origins.update(dict.fromkeys(_patterns(args.extend_exclude) or [], "--extend-exclude"))
    return origins


def _warn_unknown_codes(codes: list[str] | None, option: str) -> None:
    from migrate.codemod.py2 import PY2_CODE
    from migrate.codemod.rules import REGISTRY

    for code in codes or []:
        if (
            code != "ALL"
            and not any(r.code.startswith(code) for r in REGISTRY)
            and code != PY2_CODE
        ):
            print(
                f"tfmigrate: warning: --{option} {code} matches no registered rule", file=sys.stderr
            )


def _report(results: list[FileResult], mode: str, fmt: str) -> int:
    from migrate.codemod import report

    line = report.summary(results, mode)
    if fmt == "json":
        sys.stdout.write(report.dumps(report.to_json(results, mode)))
        print(line, file=sys.stderr)
    elif fmt == "sarif":
        sys.stdout.write(report.dumps(report.to_sarif(results)))
        print(line, file=sys.stderr)
    else:
        sys.stdout.write(report.format_text(results, show_diff=mode == "diff"))
        print(line)
    sys.stdout.flush()
    return exit_code(results, mode)


def exit_code(results: list[FileResult], mode: str) -> int:
    if any(r.status == "error" for r in results):
        return 2
    if any(r.manual_work for r in results):
        return 1
    if mode == "diff" and any(r.status == "changed" for r in results):
        return 1
    return 0


# --------------------------------------------------------------------------- other commands


def rules_command(argv: list[str]) -> int:
    from migrate.codemod.report import rule_info
    from migrate.codemod.rules import REGISTRY

    parser = argparse.ArgumentParser(
        prog="tfmigrate rules", description="List the registered rules."
    )
    parser.parse_args(argv)
    if not REGISTRY:
        print("no rules registered")
        return 0
    width = max(len(r.name) for r in REGISTRY)
    for rule in REGISTRY:
        print(f"{rule.code}  {rule.name.ljust(width)}  {rule_info(rule.code).summary}")
    return 0


def _delegate(module_name: str, command: str, argv: list[str]) -> int:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        print(
            f"tfmigrate {command}: not available yet in this version ({module_name} is missing)",
            file=sys.stderr,
        )
        return 2
    code = module.main(argv)
    return int(code or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        load_extra_rules()
    except UsageError as e:
        print(f"tfmigrate: {e}", file=sys.stderr)
        return 2
    if argv and argv[0] in SUBCOMMANDS:
        command, rest = argv[0], argv[1:]
        if command == "rules":
            return rules_command(rest)
        if command == "demo":
            return _delegate("migrate.runtime.demo", command, rest)
        return _delegate(f"migrate.runtime.{command}", command, rest)
    try:
        return migrate_command(argv)
    except UsageError as e:
        print(f"tfmigrate: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tfmigrate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
