"""Benchmark: ``tfmigrate -o`` against ``tf_upgrade_v2 --intree/--outtree`` and a
bare libcst parse+regenerate, on the same generated tree (or real code).

    python benchmarks/bench_codemod.py [--files 500] [--tf-fraction 0.2] [--jobs N]
    python benchmarks/bench_codemod.py --dir DIR   # the .py files under DIR

With ``--dir`` the tools run on a temporary copy of the ``.py`` files under
DIR (nothing of DIR is kept), the per-file table lists every file with its
engine / bare ratio, and the figures go to their own section of
``benchmarks/RESULTS-realworld.md``. A Python 2 file is timed on the Python 3
text the engine sees (the ``fissix`` pre-pass, not timed, converts it first).

Measures, on a deterministic tree (``gen_tree.py``: a fifth of the files are
legacy TF1 distributed code):

1. end to end, wall clock, each tool as a subprocess writing an output tree
   (one warm-up run each, then ``--e2e-rounds`` rounds run alternately, the
   median reported; bytecode written as an installed tool has it):
   ``tfmigrate -o OUT TREE`` (all registered rules, ``--jobs N``),
   ``tf_upgrade_v2 --intree TREE --outtree OUT`` (ships with TensorFlow),
   and a bare libcst script (read, parse, regenerate, write every ``.py``);
2. per file, in this process, on the files that use TensorFlow: the engine
   with all rules (``migrate_source``) against ``libcst.parse_module(..).code``,
   the two timed alternately file by file (this machine's speed drifts), the
   median of 5 rounds reported.

Prints the ratios and writes ``benchmarks/RESULTS.md``. Targets (from the
issue): tfmigrate at least 2x faster than tf_upgrade_v2 end to end; the
engine at most 2x the bare libcst round trip per file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from gen_tree import generate_tree
from results_sections import replace_section

BARE_LIBCST = r"""
import os, sys, libcst
src, dst = sys.argv[1], sys.argv[2]
for dirpath, _, names in os.walk(src):
    for name in names:
        path = os.path.join(dirpath, name)
        out = os.path.join(dst, os.path.relpath(path, src))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        data = open(path, encoding="utf-8").read()
        if name.endswith(".py"):
            try:
                data = libcst.parse_module(data).code
            except libcst.ParserSyntaxError:
                pass  # (Python 2 in real trees) copied as it is
        with open(out, "w", encoding="utf-8") as f:
            f.write(data)
"""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def tool_env(base: dict | None = None) -> dict:
    """The environment each timed tool runs in. PYTHONDONTWRITEBYTECODE is
    dropped: with it every start compiles the whole package from source
    again, which is not how an installed tool runs (pip compiles a package's
    bytecode at install time; tf_upgrade_v2 runs from TensorFlow's)."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _timed(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=tool_env(env), cwd=cwd, timeout=3600,
                          check=False)
    return time.perf_counter() - start, proc


def _tfmigrate_cmd() -> list[str]:
    # `python3 -m migrate` from the checkout this script is in (cwd first on
    # sys.path): an installed `tfmigrate` may be another copy of the package
    return [sys.executable, "-m", "migrate"]


def run_tfmigrate(tree: Path, out: Path, jobs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TFMIGRATE_EXTRA_RULES"}
    seconds, proc = _timed(
        [
            *_tfmigrate_cmd(),
            "--format",
            "json",
            "--no-progress",
            "--jobs",
            str(jobs),
            "-o",
            str(out),
            str(tree),
        ],
        env,
        HERE.parent,
    )
    if proc.returncode not in (0, 1, 2) or not proc.stdout.startswith("{"):
        raise SystemExit(f"tfmigrate failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    summary = json.loads(proc.stdout)["summary"]
    return {"seconds": seconds, "exit": proc.returncode, "summary": summary}


def run_tf_upgrade_v2(tree: Path, out: Path, report: Path) -> dict | None:
    exe = shutil.which("tf_upgrade_v2")
    if exe is None:
        return None
    seconds, proc = _timed(
        [exe, "--intree", str(tree), "--outtree", str(out), "--reportfile", str(report)]
    )
    if proc.returncode != 0:
        return {"seconds": seconds, "exit": proc.returncode, "error": proc.stderr[-2000:]}
    return {"seconds": seconds, "exit": proc.returncode}


def run_bare_libcst(tree: Path, out: Path) -> dict:
    seconds, proc = _timed([sys.executable, "-c", BARE_LIBCST, str(tree), str(out)])
    if proc.returncode != 0:
        raise SystemExit(f"bare libcst failed:\n{proc.stderr[-2000:]}")
    return {"seconds": seconds}


def engine_input(text: str) -> str | None:
    """The Python 3 text the engine runs on for a file (Python 2 converted
    as the CLI does), None when the engine cannot process it."""
    from migrate.codemod import py2
    from migrate.codemod.engine import MigrationError, migrate_source

    try:
        migrate_source(text)
        return text
    except MigrationError:
        pass
    try:
        converted, _ = py2.convert(text)
        migrate_source(converted)
        return converted
    except (MigrationError, ValueError):
        return None


def end_to_end(tree: Path, work: Path, jobs: int, rounds: int) -> tuple[dict, dict | None, dict]:
    """The three end-to-end runs: one untimed warm-up each (bytecode written,
    files in the page cache), then ``rounds`` rounds run alternately (this
    machine's speed drifts), each tool's median round reported."""
    runs: dict[str, list[dict]] = {"tfmigrate": [], "tf_upgrade_v2": [], "bare": []}
    for k in range(rounds + 1):
        for name, results in runs.items():
            out = work / f"out_{name}"
            shutil.rmtree(out, ignore_errors=True)
            if name == "tfmigrate":
                result = run_tfmigrate(tree, out, jobs)
            elif name == "tf_upgrade_v2":
                result = run_tf_upgrade_v2(tree, out, work / "tf_upgrade_v2_report.txt")
            else:
                result = run_bare_libcst(tree, out)
            if result is not None and k:
                results.append(result)
    picked = {}
    for name, results in runs.items():
        if not results:
            picked[name] = None
            continue
        results.sort(key=lambda r: r["seconds"])
        picked[name] = dict(results[len(results) // 2], rounds=[round(r["seconds"], 2) for r in results])
    return picked["tfmigrate"], picked["tf_upgrade_v2"], picked["bare"]


def per_file_overhead(tree: Path, per_rule: bool, rounds: int = 5) -> dict:
    """Engine against the bare round trip on the TensorFlow files, timed file
    by file in alternation (bare, engine, bare, engine, ...): this machine's
    speed drifts by up to 2x within a minute, and alternating exposes both
    sides to the same drift. Each round sums the files; the median round is
    reported, and per file the median of its rounds."""
    import libcst

    from migrate.codemod.engine import mentions_tensorflow, migrate_source
    from migrate.codemod.rules import REGISTRY

    named = {}
    for path in sorted(tree.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if mentions_tensorflow(text):
            # warm up on the way: imports, caches of node-type tables
            source = engine_input(text)
            if source is not None:
                named[str(path.relative_to(tree))] = source
    tf_sources = list(named.values())

    clock = time.perf_counter
    round_times = []
    file_times: dict[str, list[tuple[float, float]]] = {name: [] for name in named}
    for _ in range(rounds):
        bare = engine = 0.0
        for name, s in named.items():
            start = clock()
            _ = libcst.parse_module(s).code
            middle = clock()
            migrate_source(s)
            end = clock()
            bare += middle - start
            engine += end - middle
            file_times[name].append((middle - start, end - middle))
        round_times.append((engine / bare, bare, engine))
    _, bare, engine = sorted(round_times)[len(round_times) // 2]
    files = []
    for name, times in file_times.items():
        file_bare = sorted(b for b, _ in times)[len(times) // 2]
        file_engine = sorted(e for _, e in times)[len(times) // 2]
        files.append({"file": name, "bare": file_bare, "engine": file_engine, "ratio": file_engine / file_bare})
    rules = {}
    if per_rule:
        for rule in REGISTRY:
            start = clock()
            for s in tf_sources:
                migrate_source(s, select=[rule.code])
            rules[rule.code] = clock() - start
    return {
        "tf_files": len(tf_sources),
        "rounds": rounds,
        "round_ratios": [round(r[0], 3) for r in round_times],
        "ratio_spread": (
            round(min(r[0] for r in round_times), 2),
            round(max(r[0] for r in round_times), 2),
        ),
        "bare_seconds": bare,
        "engine_seconds": engine,
        "rules": [r.code for r in REGISTRY],
        "per_rule_seconds": rules,
        "files": files,
    }


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def write_results(
    path: Path, args, counts: dict, tfm: dict, tfu: dict | None, bare: dict, per_file: dict
) -> str:
    speedup = tfu["seconds"] / tfm["seconds"] if tfu and tfu.get("exit") == 0 else None
    engine_ratio = per_file["engine_seconds"] / per_file["bare_seconds"]
    overhead = (per_file["engine_seconds"] - per_file["bare_seconds"]) / per_file["bare_seconds"]
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?", "?", "?")
    lines = [
        "# Codemod benchmark",
        "",
        (
            f"Command: `python benchmarks/bench_codemod.py --files {args.files} --tf-fraction {args.tf_fraction}"
            f" --jobs {args.jobs}`  "
        ),
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        (
            f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()},"
            f" libcst {_version('libcst')}, tensorflow-cpu {_version('tensorflow-cpu')}  "
        ),
        (
            f"Load average at the end: {', '.join(f'{x:.2f}' if isinstance(x, float) else x for x in load)}"
            " (other jobs on the machine skew wall-clock figures)  "
        ),
        (
            f"Tree: {counts['files']} files, {counts['tf_files']} use TensorFlow, {counts['bytes'] / 1e6:.2f} MB"
            " (`benchmarks/gen_tree.py`, seed 0)  "
        ),
        f"Rules registered: {len(per_file['rules'])} ({', '.join(per_file['rules']) or 'none'})",
        "",
        "## End to end (wall clock, output tree written)",
        "",
        "| tool | seconds | vs tfmigrate |",
        "|---|---:|---:|",
        f"| `tfmigrate -o` (--jobs {args.jobs}) | {tfm['seconds']:.2f} | 1.00x |",
    ]
    if tfu is None:
        lines.append("| `tf_upgrade_v2 --intree/--outtree` | not installed | n/a |")
    elif tfu.get("exit") != 0:
        lines.append(f"| `tf_upgrade_v2 --intree/--outtree` | failed (exit {tfu['exit']}) | n/a |")
    else:
        lines.append(
            f"| `tf_upgrade_v2 --intree/--outtree` | {tfu['seconds']:.2f} | {_ratio(tfu['seconds'], tfm['seconds'])} |"
        )
    lines += [
        (
            f"| bare libcst parse+regenerate, every file, 1 process | {bare['seconds']:.2f} |"
            f" {_ratio(bare['seconds'], tfm['seconds'])} |"
        ),
        "",
        f"tfmigrate summary: {tfm['summary']['text']} (exit {tfm['exit']}).",
        "",
        f"**Speed-up over tf_upgrade_v2: {f'{speedup:.2f}x' if speedup else 'n/a'}** (target: >= 2x).",
        "",
        (
            f"## Per file, TensorFlow files only (one process; files timed alternately, median of"
            f" {per_file['rounds']} rounds; round ratios {per_file['ratio_spread'][0]}-{per_file['ratio_spread'][1]}x)"
        ),
        "",
        "| | seconds | per file |",
        "|---|---:|---:|",
        (
            f"| bare libcst parse + regenerate | {per_file['bare_seconds']:.2f} |"
            f" {1000 * per_file['bare_seconds'] / max(1, per_file['tf_files']):.1f} ms |"
        ),
        (
            f"| engine, all rules (`migrate_source`) | {per_file['engine_seconds']:.2f} |"
            f" {1000 * per_file['engine_seconds'] / max(1, per_file['tf_files']):.1f} ms |"
        ),
        "",
        (
            f"**Engine / bare round trip: {engine_ratio:.2f}x**; rule overhead beyond the round trip:"
            f" {overhead:.2f}x the round trip (target: at most 2x)."
        ),
    ]
    if per_file["per_rule_seconds"]:
        lines += ["", "| rule alone | seconds | vs bare |", "|---|---:|---:|"]
        for code, seconds in per_file["per_rule_seconds"].items():
            lines.append(f"| {code} | {seconds:.2f} | {seconds / per_file['bare_seconds']:.2f}x |")
    if len(per_file["rules"]) < 5:
        lines += [
            "",
            (
                "Note: few rules are registered yet, so the rule-overhead figure is not"
                " representative of the finished tool; rerun at the end."
            ),
        ]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def copy_python_files(src: Path, dst: Path) -> dict:
    """The ``.py`` files under ``src`` copied to ``dst`` (same relative paths): every
    tool then sees the same tree, and nothing else of ``src``."""
    count = tf_files = size = 0
    for path in sorted(src.rglob("*.py")):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        target.write_bytes(data)
        count += 1
        tf_files += b"tensorflow" in data
        size += len(data)
    return {"files": count, "tf_files": tf_files, "bytes": size}


def realworld_section(args, counts: dict, tfm: dict, tfu: dict | None, bare: dict, per_file: dict) -> str:
    """The speed section of RESULTS-realworld.md for ``--dir``."""
    speedup = tfu["seconds"] / tfm["seconds"] if tfu and tfu.get("exit") == 0 else None
    engine_ratio = per_file["engine_seconds"] / per_file["bare_seconds"]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    files = sorted(per_file["files"], key=lambda f: -f["ratio"])
    over = [f for f in files if f["ratio"] > 10]
    tfu_cell = (
        "not installed" if tfu is None
        else f"failed (exit {tfu['exit']})" if tfu.get("exit") != 0
        else f"{tfu['seconds']:.2f} {tfu['rounds']}"
    )
    lines = [
        "## Speed on real code",
        "",
        (
            f"Command: `python3 benchmarks/bench_codemod.py --dir {args.dir} --jobs {args.jobs} --rounds {args.rounds}"
            f" --e2e-rounds {args.e2e_rounds}`  "
        ),
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        (
            f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()},"
            f" libcst {_version('libcst')}, tensorflow-cpu {_version('tensorflow-cpu')}; load average at the end"
            f" {', '.join(f'{x:.2f}' for x in load)} (other jobs on the machine skew wall-clock figures)  "
        ),
        (
            f"Input: the {counts['files']} `.py` files of the directory ({counts['tf_files']} mention TensorFlow,"
            f" {counts['bytes'] / 1e6:.2f} MB), copied to a temporary tree every tool reads"
        ),
        "",
        (
            f"End to end: each tool once untimed (bytecode written, files cached), then {args.e2e_rounds} rounds run"
            " alternately; the median round (all rounds in brackets):"
        ),
        "",
        "| end to end, output tree written | seconds | vs tfmigrate |",
        "|---|---:|---:|",
        f"| `tfmigrate -o` (--jobs {args.jobs}) | {tfm['seconds']:.2f} {tfm['rounds']} | 1.00x |",
        f"| `tf_upgrade_v2 --intree/--outtree` | {tfu_cell} | {_ratio(tfu and tfu.get('seconds'), tfm['seconds'])} |",
        (
            f"| bare libcst parse+regenerate, 1 process | {bare['seconds']:.2f} {bare['rounds']} |"
            f" {_ratio(bare['seconds'], tfm['seconds'])} |"
        ),
        "",
        f"**tfmigrate vs tf_upgrade_v2 end to end: {f'{speedup:.2f}x faster' if speedup else 'n/a'}** (target >= 2x).",
        "",
        (
            f"Per file, in one process, engine (`migrate_source`, all rules) against a bare libcst"
            f" parse + regenerate of the same text, timed alternately file by file, median of {per_file['rounds']}"
            f" rounds (round ratios {per_file['ratio_spread'][0]}-{per_file['ratio_spread'][1]}x),"
            f" {per_file['tf_files']} files the engine processes:"
        ),
        "",
        (
            f"**Engine / bare round trip overall: {engine_ratio:.2f}x** ({per_file['engine_seconds']:.2f} s vs"
            f" {per_file['bare_seconds']:.2f} s; target <= 3x); **worst file {files[0]['ratio']:.1f}x**"
            f" ({files[0]['file']}); files over 10x: {', '.join(f['file'] for f in over) or 'none'} (target: none)."
        ) if files else "No file to time.",
        "",
        "| file | bare ms | engine ms | engine / bare |",
        "|---|---:|---:|---:|",
        *(f"| {f['file']} | {1000 * f['bare']:.1f} | {1000 * f['engine']:.1f} | {f['ratio']:.1f}x |" for f in files),
    ]
    return "\n".join(lines) + "\n"


def main_dir(args) -> int:
    """``--dir``: the same measurements on the ``.py`` files of a real directory."""
    work = Path(tempfile.mkdtemp(prefix="tfmigrate-bench-dir-"))
    try:
        tree = work / "tree"
        counts = copy_python_files(args.dir.resolve(), tree)
        print(f"tree: {counts}", flush=True)
        tfm, tfu, bare = end_to_end(tree, work, args.jobs, args.e2e_rounds)
        print(f"tfmigrate -o: {tfm['seconds']:.2f}s ({tfm['summary']['text']})", flush=True)
        print("tf_upgrade_v2: " + ("not installed" if tfu is None else f"{tfu['seconds']:.2f}s (exit {tfu['exit']})"),
              flush=True)
        print(f"bare libcst: {bare['seconds']:.2f}s", flush=True)
        per_file = per_file_overhead(tree, args.per_rule, args.rounds)
        text = realworld_section(args, counts, tfm, tfu, bare, per_file)
        print()
        print(text)
        if args.write:
            replace_section(args.realworld_results, "speed", text)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Time tfmigrate against tf_upgrade_v2 and bare libcst."
    )
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--tf-fraction", type=float, default=0.2)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--per-rule", action="store_true", help="also time each rule alone")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--keep", type=Path, help="keep the generated tree and outputs here")
    parser.add_argument("--dir", type=Path, help="measure on the .py files under DIR instead of a generated tree")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the per-file timing (median reported)")
    parser.add_argument("--e2e-rounds", type=int, default=3,
                        help="timed rounds of the end-to-end runs, after one warm-up (median reported)")
    parser.add_argument("--write", action="store_true",
                        help="with --dir: write the speed section of benchmarks/RESULTS-realworld.md")
    parser.add_argument("--realworld-results", type=Path, default=HERE / "RESULTS-realworld.md")
    args = parser.parse_args()
    if args.dir is not None:
        return main_dir(args)

    work = args.keep or Path(tempfile.mkdtemp(prefix="tfmigrate-bench-"))
    try:
        tree = work / "tree"
        if tree.exists():
            shutil.rmtree(tree)
        counts = generate_tree(tree, args.files, args.tf_fraction)
        for name in ("out_tfmigrate", "out_tf_upgrade_v2", "out_libcst"):
            shutil.rmtree(work / name, ignore_errors=True)
        print(f"tree: {counts}", flush=True)
        tfm, tfu, bare = end_to_end(tree, work, args.jobs, args.e2e_rounds)
        print(f"tfmigrate -o: {tfm['seconds']:.2f}s ({tfm['summary']['text']})", flush=True)
        print(
            "tf_upgrade_v2: "
            + ("not installed" if tfu is None else f"{tfu['seconds']:.2f}s (exit {tfu['exit']})"),
            flush=True,
        )
        print(f"bare libcst: {bare['seconds']:.2f}s", flush=True)
        per_file = per_file_overhead(tree, args.per_rule, args.rounds)
        print(
            f"per file: bare {per_file['bare_seconds']:.2f}s, engine {per_file['engine_seconds']:.2f}s"
            f" over {per_file['tf_files']} TF files",
            flush=True,
        )
        text = write_results(args.results, args, counts, tfm, tfu, bare, per_file)
        print()
        print(text)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
