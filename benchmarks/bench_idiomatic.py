"""Would a TF2 reviewer merge it? Review figures of what tfmigrate makes of a directory.

    python3 benchmarks/bench_idiomatic.py DIR [--all] [--write] [--results FILE]

For each ``.py`` file under DIR whose training tfmigrate migrates (its output
builds a tf.distribute strategy; ``--all``: every changed file), the migrated
copy (written to a temporary directory; DIR is only read) is measured against
what issue 16 asks of migrated code and TensorFlow's TF2 guides:

- ``pyflakes``: warnings pyflakes gives on the output that it did not give on
  the input (unused names and imports the migration left, undefined names);
- ``make_template``: uses of ``tf.compat.v1.make_template``;
- ``compat.v1``: ``tf.compat.v1.`` names in code (TF1 initializers' draws are
  one legitimate use; everything else is TF1 left in);
- ``stacking``: host-side step-stacking plumbing (``steps_in_flight``,
  ``pending_steps``, ``train_steps(*stacked)``);
- ``tf.data``: whether input goes through ``tf.data`` and a strategy dataset
  API (``distribute_datasets_from_function``,
  ``experimental_distribute_dataset``, ``create_per_worker_dataset``);
- ``stale text``: comments and docstring paragraphs the legacy file had that
  name TF1 machinery (Supervisor, MonitoredTrainingSession, device setter,
  SyncReplicas, queue runners/tokens, sessions) the output no longer has.

``--write`` keeps the table in the ``idiomatic`` section of
``benchmarks/RESULTS-realworld.md``.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tempfile
import tokenize
from pathlib import Path

from pyflakes import api as pyflakes_api
from pyflakes import reporter as pyflakes_reporter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_sections import replace_section

from migrate import cli
from migrate.codemod.orphans import removed_machinery

RESULTS = Path(__file__).resolve().parent / "RESULTS-realworld.md"
_STRATEGY = re.compile(r"\b(ParameterServerStrategy|MultiWorkerMirroredStrategy|MirroredStrategy)\s*\(")
_STACKING = re.compile(r"\b(steps_in_flight|pending_steps|queue_pending_steps|_Pipeliner)\b|\*stacked\b")
_DATASET_API = re.compile(r"\b(distribute_datasets_from_function|experimental_distribute_dataset|"
                          r"create_per_worker_dataset)\b")


def pyflakes_messages(code: str) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    pyflakes_api.check(code, "<file>", pyflakes_reporter.Reporter(out, err))
    # the message without its location: the same finding before and after a migration
    return sorted(re.sub(r"^<file>:\d+:\d+:? ", "", line) for line in out.getvalue().splitlines())


def _code_tokens(code: str) -> str:
    try:
        return " ".join(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                        if t.type not in (tokenize.COMMENT, tokenize.STRING))
    except (tokenize.TokenError, SyntaxError):
        return code


def stale_text(source: str, output: str) -> int:
    """Comment paragraphs and docstring paragraphs of ``source`` still in
    ``output`` that name TF1 machinery ``output`` no longer has."""
    gone = removed_machinery(source, output)
    if not gone:
        return 0
    legacy = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            legacy.add(token.string.strip())
    count = 0
    paragraph: list[str] = []
    for line in [*output.splitlines(), ""]:
        text = line.strip()
        if text.startswith("#") and text in legacy:
            paragraph.append(text)
            continue
        if paragraph and any(said.search(" ".join(paragraph)) for said in gone):
            count += 1
        paragraph = []
    tree = ast.parse(output)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and doc in source:
                count += sum(any(s.search(p) for s in gone) for p in re.split(r"\n[ \t]*\n", doc))
    return count


def measure(source: str, output: str) -> dict:
    code = _code_tokens(output)
    before = pyflakes_messages(source)
    after = pyflakes_messages(output)
    new = [m for m in after if m not in before]
    return {
        "pyflakes": len(new),
        "make_template": len(re.findall(r"\bmake_template\b", code)),
        "compat_v1": len(re.findall(r"\bcompat \. v1\b", code)),
        "stacking": len(_STACKING.findall(code)),
        "tf_data": "yes" if re.search(r"\bdata \. Dataset\b", code) and _DATASET_API.search(code) else "no",
        "stale_text": stale_text(source, output),
        "pyflakes_examples": new[:2],
    }


def run(directory: Path, every: bool) -> list[tuple[str, dict]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfmigrate-idiomatic-") as tmp:
        for path in sorted(directory.rglob("*.py")):
            target = Path(tmp) / path.relative_to(directory)
            target.parent.mkdir(parents=True, exist_ok=True)
            task = cli.Task(path=str(path), kind="python", mode="output", output_path=str(target), select=None,
                            ignore=(), max_file_size=10_000_000, python2=True)
            result = cli.process(task)
            if result.status != "changed":
                continue
            source, output = path.read_text(encoding="utf-8", errors="replace"), target.read_text(encoding="utf-8")
            if not every and not _STRATEGY.search(_code_tokens(output)):
                continue
            try:
                rows.append((str(path.relative_to(directory)), measure(source, output)))
            except SyntaxError:
                continue
    return rows


def table(rows: list[tuple[str, dict]], directory: Path) -> str:
    intro = (f"What tfmigrate makes of the files of `{directory.name}` whose training it migrates, as a TF2"
             " reviewer reads it (`benchmarks/bench_idiomatic.py`): new pyflakes warnings, `make_template`,"
             " `tf.compat.v1` names in code, step-stacking plumbing, `tf.data` with a strategy dataset API,"
             " comment/docstring paragraphs about TF1 machinery the output no longer has.")
    lines = [
        intro,
        "",
        "| file | pyflakes | make_template | compat.v1 | stacking | tf.data | stale text |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in rows:
        lines.append(f"| {name} | {m['pyflakes']} | {m['make_template']} | {m['compat_v1']} | {m['stacking']} |"
                     f" {m['tf_data']} | {m['stale_text']} |")
    if rows:
        total = {k: sum(m[k] for _, m in rows) for k in ("pyflakes", "make_template", "compat_v1", "stacking",
                                                         "stale_text")}
        clean = sum(m["pyflakes"] == 0 for _, m in rows)
        with_data = sum(m["tf_data"] == "yes" for _, m in rows)
        summary = (f"{len(rows)} files: {clean} pyflakes-clean; totals: {total['pyflakes']} new pyflakes"
                   f" warnings, {total['make_template']} make_template, {total['compat_v1']} compat.v1 names,"
                   f" {total['stacking']} stacking names, {with_data} with tf.data input,"
                   f" {total['stale_text']} stale paragraphs")
        lines += ["", summary]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--all", action="store_true", help="every file tfmigrate changes, not only migrated training")
    parser.add_argument("--write", action="store_true", help=f"keep the table in {RESULTS.name}")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("-v", "--verbose", action="store_true", help="show the new pyflakes warnings")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"bench_idiomatic: {args.directory} is not a directory", file=sys.stderr)
        return 2
    rows = run(args.directory, args.all)
    text = table(rows, args.directory)
    print(text)
    if args.verbose:
        for name, m in rows:
            for message in m["pyflakes_examples"]:
                print(f"  {name}: {message}")
    if args.write:
        replace_section(args.results, "idiomatic", "## Read as a TF2 reviewer\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
