"""Real-code scoreboard: what tfmigrate makes of every file of a directory, and why.

    python3 benchmarks/bench_realworld.py DIR [--write] [--results FILE]

For each ``.py`` / ``.ipynb`` file under DIR (read in place, never copied into
the project; migrated copies go to a temporary directory): migrated or
declined, the reason codes of its manual-work diagnostics, whether the output
compiles, the number of manual items, the seconds tfmigrate took on it, and a
``check`` column. Totals at the end.

The ``check`` column is ``-`` (not measured) unless ``--check`` is given:
then ``python3 -m migrate check FILE --steps 20`` (no other option, as a new
user runs it) is run on each file that can run offline, one at a time (each
takes 30-300 s on a loopback cluster), and the column holds its verdict as
its report.json gives it: ``equivalent``, ``not equivalent`` or ``error``
(check could not compare; exit 2), with the reason listed under the table.
"Can run offline": the corpus MANIFEST.tsv beside DIR (or ``--manifest``)
says ``runnable_offline`` yes, or the file's only download is TF1's MNIST
tutorial reader, which check serves from its stand-in (the file imports
``tensorflow.examples.tutorials.mnist``). ``--check-only NAME...`` limits
the checked files to those named (file names or their ``NN_`` prefixes).

"migrated" is the definition of the project's scoreboard
(``../shared/tools/realcode_score.py``): the output compiles, its code uses a
tf.distribute strategy, and no legacy construct is left as code (for
notebooks: in code cells). Each file goes through the CLI's own per-file step
(``migrate.cli.process``, Python 2 pre-pass and notebooks included) and its
diagnostics are read from the record ``python3 -m migrate --format json``
prints for it (``migrate.codemod.report.to_json``), never from text.

Reason codes group the diagnostics that need manual work: the rule code plus
a slug of the message's first clause, with quoted code left out (so
``TFM402-removed-tf-contrib`` groups every tf.contrib leftover); a file the
tool cannot process gets ``ERR-`` plus the slug of its error.

``--write`` puts the table in the ``scoreboard`` section of
``benchmarks/RESULTS-realworld.md`` (``bench_codemod.py --dir`` owns the
``speed`` section of the same file), the check verdicts included: one line
per checked file under the table (verdict, when, the check's wall time, its
reason). Files not checked in this run (no ``--check``, or not named by
``--check-only``) keep the verdict the file already records for them, with
its date, so the slow column survives a quick rewrite of the scoreboard.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime as dt
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from results_sections import replace_section

from migrate.cli import Task, process
from migrate.codemod import report
from migrate.codemod.files import DEFAULT_MAX_FILE_SIZE

# realcode_score.py's definition of "migrated", kept identical
LEGACY = {"replica_device_setter", "SyncReplicasOptimizer", "MonitoredTrainingSession", "Supervisor",
          "placeholder", "Session", "MonitoredSession", "Estimator", "train_and_evaluate"}
STRATEGIES = {"ParameterServerStrategy", "MultiWorkerMirroredStrategy", "MirroredStrategy",
              "CentralStorageStrategy", "TPUStrategy"}


@dataclasses.dataclass
class Row:
    """One file of the scoreboard."""

    file: str  # relative to DIR
    status: str  # "migrated" | "declined" | "error" (tool could not process it) | "skipped"
    outcome: str  # realcode_score's verdict: "migrated", "does not compile", "left: ...", "no output"
    compiles: bool
    manual: int  # diagnostics that need manual work
    reasons: list[str]  # reason codes, "CODE-slug" or "CODE-slug x3"
    seconds: float
    check: str = "-"  # tfmigrate check's verdict for files that run offline ("-": not measured)
    check_reason: str = ""  # check's reason, for a verdict other than equivalent
    check_when: str = ""  # when that check ran ("YYYY-MM-DD HH:MM" UTC)
    check_seconds: float | None = None  # its wall time


def code_of(path: Path) -> str:
    """The file's code: a notebook's code cells without magics (as realcode_score reads it)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return text
    lines: list[str] = []
    for cell in json.loads(text).get("cells", []):
        if cell.get("cell_type") == "code":
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            lines += [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def outcome(path: Path) -> tuple[str, bool]:
    """(realcode_score's verdict on an output file, whether it compiles)."""
    try:
        code = code_of(path)
        tree = ast.parse(code)
        compile(code, str(path), "exec")
    except (SyntaxError, ValueError, KeyError, json.JSONDecodeError):
        return "does not compile", False
    names = {n.attr if isinstance(n, ast.Attribute) else n.id
             for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Name))}
    left = sorted(names & LEGACY)
    if names & STRATEGIES and not left:
        return "migrated", True
    return "left: " + (", ".join(left) or "no strategy"), True


# message openings that say where, not why (TFM901's, TFM303's per loop)
_GENERIC_OPENINGS = re.compile(r"^(legacy distributed construct left: |tower loop `[^`]*`: )")
_STOPWORDS = frozenset({
    "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "with", "from", "and", "or", "as", "is",
    "are", "was", "were", "be", "it", "its", "this", "that", "these", "those", "which", "who", "here",
    "there", "than", "per", "would",
})


def slug(message: str, rule_name: str = "", words: int = 4) -> str:
    """A short stable slug of a diagnostic: its first clause, quoted code and
    filler words left out (``"`tf.contrib.slim` was removed with tf.contrib (TF 2.0)"``
    -> ``"removed-tf-contrib"``)."""
    text = message
    if rule_name and text.startswith(rule_name + ": "):
        text = text[len(rule_name) + 2:]
    text = _GENERIC_OPENINGS.sub("", text)
    text = re.sub(r"`[^`]*`", "", text).replace("'s ", " ")
    head = re.split(r" \(|;|: ", text, maxsplit=1)[0]
    if not re.search(r"[A-Za-z0-9]", head):  # all quoted code: the explanation in parentheses
        inside = re.search(r"\(([^)]*)\)", text)
        head = inside.group(1) if inside else text
    tokens = [t for t in re.findall(r"[a-z0-9_]+", head.lower()) if t not in _STOPWORDS]
    return "-".join(tokens[:words])


def reason_codes(record: dict) -> list[str]:
    """Reason codes of one file's JSON record (``--format json``), most frequent first."""
    if record.get("error"):
        return ["ERR-" + (slug(record["error"]["message"]) or "unprocessable")]
    counts = Counter(
        f"{d['code']}-{slug(d['message'], d.get('rule') or '')}".rstrip("-")
        for d in record["diagnostics"]
        if d["manual_work"]
    )
    return [code if n == 1 else f"{code} x{n}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def score_file(path: Path, root: Path, out_dir: Path) -> Row:
    target = out_dir / path.relative_to(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    task = Task(
        path=str(path),
        kind="notebook" if path.suffix == ".ipynb" else "python",
        mode="output",
        output_path=str(target),
        select=None,
        ignore=(),
        max_file_size=DEFAULT_MAX_FILE_SIZE,
        python2=True,
    )
    start = time.perf_counter()
    result = process(task)
    seconds = time.perf_counter() - start
    record = report.to_json([result], "output")["files"][0]
    verdict, compiles = outcome(target) if target.exists() else ("no output", False)
    if record.get("error"):
        status = "error"
    elif result.status == "skipped":
        status = "skipped"
    else:
        status = "migrated" if verdict == "migrated" else "declined"
    return Row(
        file=str(path.relative_to(root)),
        status=status,
        outcome=verdict,
        compiles=compiles,
        manual=sum(1 for d in record["diagnostics"] if d["manual_work"]),
        reasons=reason_codes(record),
        seconds=seconds,
    )


def score(root: Path) -> list[Row]:
    from migrate.codemod.engine import migrate_source

    migrate_source("import tensorflow as tf\n")  # imports and rule tables, outside the first file's time
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file())
    with tempfile.TemporaryDirectory(prefix="tfmigrate-realworld-") as out:
        return [score_file(p, root, Path(out)) for p in files]


# ------------------------------------------------------------------ check column

MNIST_READER = re.compile(r"tensorflow\.examples\.tutorials(\.mnist|\s+import\s+mnist)")
CHECK_STEPS = 20
CHECK_TIMEOUT = 900  # s; check's own cluster timeouts end it well before


def offline_files(root: Path, manifest: Path | None) -> set[str]:
    """Files (relative to ``root``) that ``tfmigrate check`` can run offline:
    the manifest's ``runnable_offline`` says yes, or the only download is TF1's
    MNIST reader (check serves it from its stand-in)."""
    marked: dict[str, str] = {}
    if manifest is not None and manifest.is_file():
        lines = manifest.read_text(encoding="utf-8").splitlines()
        header = lines[0].split("\t") if lines else []
        if "file" in header and "runnable_offline" in header:
            name_at, offline_at = header.index("file"), header.index("runnable_offline")
            for line in lines[1:]:
                cells = line.split("\t")
                if len(cells) > max(name_at, offline_at):
                    marked[cells[name_at]] = cells[offline_at].strip().lower()
    found = set()
    for path in sorted(root.rglob("*.py")):
        name = str(path.relative_to(root))
        offline = marked.get(name, marked.get(path.name, "")).startswith("yes")
        if offline or MNIST_READER.search(path.read_text(encoding="utf-8", errors="replace")):
            found.add(name)
    return found


def check_verdict(path: Path, out: Path, timeout: float = CHECK_TIMEOUT) -> tuple[str, str]:
    """(verdict, reason) of ``python3 -m migrate check path --steps 20``,
    read from the report.json it writes; its own process group is ended on
    timeout (check reaps its clusters itself)."""
    import signal
    import subprocess

    command = [sys.executable, "-m", "migrate", "check", str(path), "--steps", str(CHECK_STEPS), "--out", str(out)]
    proc = subprocess.Popen(
        command, cwd=HERE.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return "error", f"check ran past {timeout:.0f} s"
    left = survivors(out)
    if left:
        for pid in left:  # the check's own tasks, found by the run directory they log to
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return "error", f"check exited {code} leaving {len(left)} task process(es) running (pids {left})"
    try:
        report_json = json.loads((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return "error", f"check exited {code} without a report"
    verdict = str(report_json.get("verdict", "error")).replace("_", " ")
    # the run's temporary directory says nothing about the file: named, not spelled out
    reason = str(report_json.get("reason") or "").replace(str(out), "<check dir>")
    return verdict, "" if verdict == "equivalent" else reason


def survivors(out: Path) -> list[int]:
    """Processes still running that a check writing to ``out`` started: every
    task it launches has its loss log (``TFMIGRATE_LOSS_LOG``) under ``out``."""
    marker = f"TFMIGRATE_LOSS_LOG={out.resolve()}/".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(item.startswith(marker) for item in environ.split(b"\0")):
            found.append(int(entry.name))
    return sorted(found)


def wanted(name: str, only: list[str] | None) -> bool:
    if not only:
        return True
    base = Path(name).name
    return any(base == o or base.startswith(o.rstrip("_") + "_") for o in only)


def add_check_column(rows: list[Row], root: Path, manifest: Path | None, only: list[str] | None) -> None:
    eligible = offline_files(root, manifest)
    with tempfile.TemporaryDirectory(prefix="tfmigrate-realworld-check-") as out:
        for row in rows:
            if row.file not in eligible or not wanted(row.file, only):
                continue
            print(f"  check {row.file} ...", file=sys.stderr, flush=True)
            row.check_when = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}"
            start = time.monotonic()
            row.check, row.check_reason = check_verdict(root / row.file, Path(out) / Path(row.file).stem)
            row.check_seconds = time.monotonic() - start
            print(f"    {row.check} in {row.check_seconds:.0f} s", file=sys.stderr, flush=True)


# one line per checked file under the table: what carries a verdict from one --write to the next
CHECK_LINE = re.compile(
    r"^- (?P<file>.+?): (?P<verdict>equivalent|not equivalent|error)"
    r" \(checked (?P<when>\d{4}-\d\d-\d\d \d\d:\d\d) UTC, (?P<seconds>\d+) s\)(?:: (?P<reason>.*))?$"
)


def carry_checks(rows: list[Row], results: Path, eligible: set[str]) -> int:
    """Rows of files that run offline but were not checked in this run keep
    the verdict an earlier ``--check --write`` recorded in ``results`` (with
    its date): a scoreboard rewritten without ``--check`` (seconds) does not
    drop the check column (minutes per file). Returns how many were kept."""
    try:
        text = results.read_text(encoding="utf-8")
    except OSError:
        return 0
    begin, end = text.find("<!-- begin scoreboard -->"), text.find("<!-- end scoreboard -->")
    earlier = {}
    for line in text[begin:end].splitlines() if begin >= 0 and end > begin else []:
        m = CHECK_LINE.match(line)
        if m:
            earlier[m["file"]] = m
    kept = 0
    for row in rows:
        m = earlier.get(row.file)
        if row.check != "-" or m is None or row.file not in eligible:
            continue
        row.check, row.check_reason = m["verdict"], m["reason"] or ""
        row.check_when, row.check_seconds = m["when"], float(m["seconds"])
        kept += 1
    return kept


def totals(rows: list[Row]) -> dict:
    n = len(rows)
    return {
        "files": n,
        "migrated": sum(r.status == "migrated" for r in rows),
        "compile_pct": 100.0 * sum(r.compiles for r in rows) / n if n else 0.0,
        "manual": sum(r.manual for r in rows),
        "seconds": sum(r.seconds for r in rows),
    }


def format_table(rows: list[Row], command: str) -> str:
    t = totals(rows)
    lines = [
        "## Scoreboard",
        "",
        f"Command: `{command}`  ",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        (
            f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}"
            " (seconds: one process, one file at a time, other jobs on the machine included)"
        ),
        "",
        "| file | result | reasons (manual-work diagnostics) | compiles | manual | seconds | check |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for r in rows:
        result = r.status if r.status != "declined" else f"declined ({r.outcome})"
        lines.append(
            f"| {r.file} | {result} | {', '.join(r.reasons) or '-'} | {'yes' if r.compiles else 'no'}"
            f" | {r.manual} | {r.seconds:.2f} | {r.check} |"
        )
    lines += [
        "",
        (
            f"**Totals: migrated {t['migrated']}/{t['files']}, outputs compile {t['compile_pct']:.0f} %,"
            f" {t['manual']} manual items, {t['seconds']:.1f} s.**"
        ),
    ]
    checked = [r for r in rows if r.check != "-"]
    if checked:
        equivalent = sum(r.check == "equivalent" for r in checked)
        when = sorted({r.check_when for r in checked if r.check_when})
        lines += [
            "",
            (
                f"**check (`python3 -m migrate check FILE --steps {CHECK_STEPS}`, files that run offline):"
                f" equivalent {equivalent}/{len(checked)}.** Each file's verdict, when it was checked"
                + (f" ({when[0]} .. {when[-1]} UTC: a scoreboard written without `--check` keeps the earlier verdicts)"
                   if len(when) > 1 else "")
                + ", the check's wall time, and why it is not equivalent:"
            ),
            "",
        ]
        for r in checked:
            reason = " ".join(r.check_reason.split())
            seconds = f"{r.check_seconds:.0f}" if r.check_seconds is not None else "0"
            lines.append(
                f"- {r.file}: {r.check} (checked {r.check_when or '?'} UTC, {seconds} s)" + (f": {reason}" if reason else "")
            )
    reasons = Counter()
    for r in rows:
        if r.status != "migrated":
            for code in r.reasons:
                reasons[code.split(" x")[0]] += 1
    if reasons:
        lines += ["", "Reason codes of the files not migrated (files with each):", ""]
        lines += [f"- `{code}`: {n}" for code, n in reasons.most_common()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="directory of real code (read in place)")
    parser.add_argument("--write", action="store_true", help="write the scoreboard section of --results")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS-realworld.md")
    parser.add_argument("--check", action="store_true", help="fill the check column (slow: minutes per file)")
    parser.add_argument("--manifest", type=Path, default=None, help="MANIFEST.tsv (default: beside DIR)")
    parser.add_argument("--check-only", nargs="+", default=None, metavar="NAME", help="check only these files")
    args = parser.parse_args(argv)
    root = args.dir.resolve()
    rows = score(root)
    manifest = args.manifest or root.parent / "MANIFEST.tsv"
    if args.check:
        add_check_column(rows, root, manifest, args.check_only)
    if args.write:
        carry_checks(rows, args.results, offline_files(root, manifest))
    command = "python3 benchmarks/bench_realworld.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = format_table(rows, command)
    print(text)
    if args.write:
        replace_section(args.results, "scoreboard", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
