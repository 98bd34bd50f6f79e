"""benchmarks/bench_realworld.py: the real-code scoreboard, run on three small
programs of our own (tests/data/realworld): one the codemod migrates, one it
declines with located reasons, one that does not parse."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_realworld
from results_sections import replace_section

DATA = ROOT / "tests" / "data" / "realworld"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    tree = tmp_path_factory.mktemp("realworld")
    for path in DATA.glob("*.py"):
        shutil.copy(path, tree / path.name)
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    rows = bench_realworld.score(tree)
    # the scoreboard reads the directory in place and never writes there
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == before
    return {r.file: r for r in rows}


def test_every_file_gets_a_row(rows):
    assert sorted(rows) == ["estimator_declines.py", "python2_broken.py", "sync_linear_migrates.py"]
    for row in rows.values():
        assert row.seconds > 0
        assert row.check == "-"


def test_migrated_file(rows):
    row = rows["sync_linear_migrates.py"]
    assert (row.status, row.outcome, row.compiles) == ("migrated", "migrated", True)
    assert row.manual == len(row.reasons) == 0


def test_declined_file_says_why(rows):
    row = rows["estimator_declines.py"]
    assert row.status == "declined"
    assert row.outcome == "left: Estimator"
    assert row.compiles
    assert row.manual >= 1
    assert row.reasons and all(r.startswith("TFM401-") for r in row.reasons), row.reasons
    assert "TFM401-returned-model_fn" in row.reasons


def test_unparsable_file_is_an_error(rows):
    row = rows["python2_broken.py"]
    assert (row.status, row.compiles, row.manual) == ("error", False, 0)
    assert row.reasons == ["ERR-syntax-error"]


def test_totals_and_table(rows):
    ordered = [rows[name] for name in sorted(rows)]
    t = bench_realworld.totals(ordered)
    assert (t["files"], t["migrated"], t["manual"]) == (3, 1, rows["estimator_declines.py"].manual)
    assert round(t["compile_pct"]) == 67
    text = bench_realworld.format_table(ordered, "python3 benchmarks/bench_realworld.py DIR")
    assert "| sync_linear_migrates.py | migrated | - | yes | 0 |" in text
    assert "| python2_broken.py | error | ERR-syntax-error | no | 0 |" in text
    assert "**Totals: migrated 1/3, outputs compile 67 %" in text


def test_slug_groups_by_kind_not_by_name():
    slug = bench_realworld.slug
    assert slug("`tf.contrib.slim` was removed with tf.contrib (TF 2.0)") == "removed-tf-contrib"
    assert slug("`tf.contrib.layers` was removed with tf.contrib (TF 2.0)") == "removed-tf-contrib"
    assert slug("legacy distributed construct left: `tf.placeholder` (graph input fed through feed_dict)") == (
        "graph-input-fed-through"
    )
    assert slug("graph-to-strategy: not rewritten here; the rewrite ...", "graph-to-strategy") == "not-rewritten"


def test_sections_of_the_results_file_are_kept_apart(tmp_path):
    results = tmp_path / "RESULTS.md"
    replace_section(results, "scoreboard", "table 1\n")
    replace_section(results, "speed", "speed 1\n")
    replace_section(results, "scoreboard", "table 2\n")
    text = results.read_text()
    assert "table 2" in text and "speed 1" in text and "table 1" not in text
    assert text.index("table 2") < text.index("speed 1")


def test_offline_files_from_the_manifest_and_the_mnist_reader(tmp_path):
    corpus = tmp_path / "dev"
    corpus.mkdir()
    (corpus / "01_marked.py").write_text("import tensorflow as tf\n")
    (corpus / "02_reader.py").write_text(
        "import tensorflow as tf\nfrom tensorflow.examples.tutorials.mnist import input_data\n"
    )
    (corpus / "03_downloads.py").write_text("import urllib.request\nimport tensorflow as tf\n")
    (tmp_path / "MANIFEST.tsv").write_text(
        "file\trepo\trunnable_offline\tnotes\n"
        "01_marked.py\tx/y\tyes\t-\n02_reader.py\tx/y\tno\tMNIST\n03_downloads.py\tx/y\tno\tCIFAR\n"
    )
    assert bench_realworld.offline_files(corpus, tmp_path / "MANIFEST.tsv") == {"01_marked.py", "02_reader.py"}
    assert bench_realworld.offline_files(corpus, None) == {"02_reader.py"}
    assert bench_realworld.wanted("sub/02_reader.py", ["02"]) and not bench_realworld.wanted("01_marked.py", ["02"])


def test_check_column_holds_checks_own_verdict(rows, tmp_path):
    """--check runs `python3 -m migrate check FILE --steps 20` on the offline
    files and keeps the verdict its report.json gives; the others stay '-'."""
    tree = tmp_path / "corpus"
    tree.mkdir()
    for path in DATA.glob("*.py"):
        shutil.copy(path, tree / path.name)
    manifest = tmp_path / "MANIFEST.tsv"
    manifest.write_text("file\trunnable_offline\nsync_linear_migrates.py\tyes\nestimator_declines.py\tno\n")
    checked = [bench_realworld.Row(**{**vars(r), "check": "-"}) for r in rows.values()]
    bench_realworld.add_check_column(checked, tree, manifest, None)
    verdicts = {r.file: (r.check, r.check_reason) for r in checked}
    assert verdicts["sync_linear_migrates.py"] == ("equivalent", "")
    assert verdicts["estimator_declines.py"][0] == verdicts["python2_broken.py"][0] == "-"
    table = bench_realworld.format_table(checked, "bench")
    assert "equivalent 1/1" in table
    [line] = [ln for ln in table.splitlines() if ln.startswith("- sync_linear_migrates.py: equivalent (checked ")]
    assert bench_realworld.CHECK_LINE.match(line)
    assert not bench_realworld.survivors(tmp_path)


def test_a_scoreboard_written_without_check_keeps_the_recorded_verdicts(rows, tmp_path):
    """--write without --check (or with --check-only naming other files) keeps
    each offline file's verdict, reason, date and wall time from the results
    file; a file no longer offline, or one just checked, is not overwritten."""
    results = tmp_path / "RESULTS-realworld.md"
    first = [bench_realworld.Row(**vars(r)) for r in rows.values()]
    by_name = {r.file: r for r in first}
    by_name["sync_linear_migrates.py"].check = "equivalent"
    by_name["estimator_declines.py"].check = "error"
    by_name["estimator_declines.py"].check_reason = "the legacy script cannot run:\n line 3 | imports x"
    for r in first:
        r.check_when, r.check_seconds = "2026-11-24 21:40", 42.4
    replace_section(results, "scoreboard", bench_realworld.format_table(first, "bench --check --write"))

    again = [bench_realworld.Row(**vars(r)) for r in rows.values()]
    kept = bench_realworld.carry_checks(again, results, {"sync_linear_migrates.py", "estimator_declines.py"})
    assert kept == 2
    got = {r.file: (r.check, r.check_reason, r.check_when, r.check_seconds) for r in again}
    assert got["sync_linear_migrates.py"] == ("equivalent", "", "2026-11-24 21:40", 42.0)
    assert got["estimator_declines.py"] == ("error", "the legacy script cannot run: line 3 | imports x",
                                            "2026-11-24 21:40", 42.0)
    assert got["python2_broken.py"][0] == "-"
    table = bench_realworld.format_table(again, "bench --write")
    assert "| sync_linear_migrates.py | migrated | - | yes | 0 |" in table
    assert "equivalent 1/2" in table

    fresh = {r.file: bench_realworld.Row(**vars(r)) for r in rows.values()}
    just_checked = fresh["estimator_declines.py"]
    just_checked.check, just_checked.check_when = "not equivalent", "2026-11-24 22:00"
    # sync_linear_migrates.py no longer counted as offline: its old verdict is not carried
    assert bench_realworld.carry_checks(list(fresh.values()), results, {"estimator_declines.py"}) == 0
    assert (just_checked.check, just_checked.check_when) == ("not equivalent", "2026-11-24 22:00")
    assert fresh["sync_linear_migrates.py"].check == "-"


def test_survivors_are_the_processes_logging_under_a_checks_directory(tmp_path):
    import subprocess
    import time

    out = tmp_path / "out"
    env = {**os.environ, "TFMIGRATE_LOSS_LOG": str(out / "legacy-run0" / "losses-worker-0.jsonl")}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while proc.pid not in bench_realworld.survivors(out) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bench_realworld.survivors(out) == [proc.pid]
        assert not bench_realworld.survivors(tmp_path / "other")
    finally:
        proc.kill()
        proc.wait()
    assert not bench_realworld.survivors(out)
