"""Bad and odd input: every case gets a located, clear message and the right
exit code, unprocessable files stay byte-identical, and what is written keeps
the file's encoding, BOM and line endings.

One ``--write`` run (and one read-only text run) over a tree holding every
case at once: it also shows that one bad file does not stop the others.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat

import pytest
from rules_for_tests import LEGACY, REPO_ROOT, register_test_rules, run_tfmigrate

from migrate import cli
from migrate.codemod import files

BIG = 3 * 1024 * 1024

# name -> (bytes, text-mode message regex (path:line:col: error: ...))
BAD = {
    "syntax.py": (
        b"import tensorflow as tf\nx = (1,\n",
        r"bad/syntax\.py:2:5: error: syntax error: '\(' was never closed",
    ),
    "binary.py": (
        b"import tensorflow\n\x00\x01\x02garbage",
        r"bad/binary\.py:2:1: error: binary file \(contains a NUL byte\)",
    ),
    "latin1_no_cookie.py": (
        b"import tensorflow as tf\nname = 'caf\xe9'\n",
        (
            r"bad/latin1_no_cookie\.py:2:12: error: cannot decode byte 0xe9: not valid UTF-8 and no"
            r" coding cookie"
        ),
    ),
    "wrong_cookie.py": (
        b"# -*- coding: ascii -*-\nimport tensorflow as tf\nname = 'caf\xe9'\n",
        (
            r"bad/wrong_cookie\.py:3:12: error: cannot decode byte 0xe9: the file declares ascii but is"
            r" not valid ascii"
        ),
    ),
    "unknown_cookie.py": (
        b"# coding: klingon\nimport tensorflow as tf\n",
        r"bad/unknown_cookie\.py:1:1: error: bad encoding declaration: unknown encoding: klingon",
    ),
    "big.py": (
        b"import tensorflow as tf\n" + b"x = 1\n" * (BIG // 6),
        r"bad/big\.py: error: file too large \(3\.1 MB > 1\.0 MB limit\); use --max-file-size 0",
    ),
    "broken.ipynb": (
        b'{"cells": [\n  {"cell_type": "code",\n   "source": "import tensorflow"\n  }\n',
        r"bad/broken\.ipynb:5:1: error: malformed notebook JSON: Expecting ',' delimiter",
    ),
    "old.ipynb": (
        json.dumps(
            {"nbformat": 3, "worksheets": [{"cells": []}], "metadata": {}, "x": "tensorflow"}
        ).encode(),
        r"bad/old\.ipynb:1:1: error: nbformat 3 notebooks are not supported",
    ),
    "crash.py": (
        b"import tensorflow as tf  # CRASH_ME\n",
        (
            r"bad/crash\.py: error: internal error: RuntimeError: rule exploded on purpose; file left"
            r" unchanged"
        ),
    ),
}

CRLF = LEGACY.replace("\n", "\r\n").encode()
GOOD = {
    "crlf.py": CRLF,
    "bom.py": b"\xef\xbb\xbf" + LEGACY.encode(),
    "latin1_cookie.py": b"# -*- coding: latin-1 -*-\n" + LEGACY.encode() + b"name = 'caf\xe9'\n",
    "empty.py": b"",
    "big_without_tf.py": b"x = 1\n" * (BIG // 6),
    "python2.py": b"import tensorflow as tf\nprint 'starting'\ntry:\n    s = tf.train.Server(c)\n"
    b"except ValueError, e:\n    print e\n",
    "target.py": LEGACY.encode(),
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    (root / "bad").mkdir()
    (root / "good").mkdir()
    (root / "elsewhere").mkdir()
    for name, (data, _) in BAD.items():
        (root / "bad" / name).write_bytes(data)
    for name, data in GOOD.items():
        (root / "good" / name).write_bytes(data)
    os.mkfifo(root / "bad" / "fifo.py")
    (root / "bad" / "dangling.py").symlink_to(root / "does-not-exist.py")
    (root / "good" / "link_in_tree.py").symlink_to(root / "good" / "target.py")
    (root / "elsewhere" / "real.py").write_bytes(LEGACY.encode())
    (root / "explicit_link.py").symlink_to(root / "elsewhere" / "real.py")
    if os.geteuid() != 0:  # root reads anything; see test_unreadable_file_as_root
        (root / "bad" / "unreadable.py").write_bytes(LEGACY.encode())
        os.chmod(root / "bad" / "unreadable.py", 0)
    before = {
        p: p.read_bytes() for p in (root / "bad").iterdir() if p.is_file() and os.access(p, os.R_OK)
    }
    args = ("good", "bad", "bad/dangling.py", "explicit_link.py")
    text = run_tfmigrate(*args, cwd=root)
    written = run_tfmigrate("--write", "--format", "json", *args, cwd=root)
    results = {f["path"]: f for f in json.loads(written.stdout)["files"]}
    return root, before, text, written, results


def test_exit_code_is_2_and_good_files_are_still_written(matrix):
    root, _, text, written, results = matrix
    assert text.returncode == 2 and written.returncode == 2
    assert results["good/target.py"]["written"] is True
    assert "tf.distribute.Server" in (root / "good" / "target.py").read_text()


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_gets_a_located_message_and_stays_byte_identical(matrix, name):
    root, before, text, _, results = matrix
    data, message = BAD[name]
    assert re.search("^" + message, text.stdout, re.MULTILINE), text.stdout
    entry = results[f"bad/{name}"]
    assert entry["status"] == "error" and entry["written"] is False
    assert (root / "bad" / name).read_bytes() == data == before[root / "bad" / name]


def test_not_a_regular_file(matrix):
    _, _, text, _, results = matrix
    assert "bad/fifo.py: error: not a regular file" in text.stdout
    assert results["bad/fifo.py"]["status"] == "error"


def test_dangling_symlink(matrix):
    root, _, text, _, _ = matrix
    assert re.search(
        r"^bad/dangling\.py: error: broken symbolic link \(points to .*does-not-exist\.py\)",
        text.stdout,
        re.MULTILINE,
    )
    assert (root / "bad" / "dangling.py").is_symlink()


def test_symlinks_are_written_through_and_not_followed_in_trees(matrix):
    root, _, _, _, results = matrix
    # given explicitly: the target is migrated, the link stays a link
    assert (root / "explicit_link.py").is_symlink()
    assert "tf.distribute.Server" in (root / "elsewhere" / "real.py").read_text()
    # found in a tree: skipped, its target is processed once on its own
    assert "good/link_in_tree.py" not in results
    assert (root / "good" / "link_in_tree.py").is_symlink()
    assert len(results["good/target.py"]["diagnostics"]) == 1


def test_crlf_line_endings_are_kept(matrix):
    root, *_ = matrix
    assert (root / "good" / "crlf.py").read_bytes() == CRLF.replace(
        b"tf.train.Server", b"tf.distribute.Server"
    )


def test_bom_is_kept(matrix):
    root, *_ = matrix
    expected = b"\xef\xbb\xbf" + LEGACY.replace("tf.train.Server", "tf.distribute.Server").encode()
    assert (root / "good" / "bom.py").read_bytes() == expected


def test_coding_cookie_encoding_is_kept(matrix):
    root, *_, results = matrix
    expected = GOOD["latin1_cookie.py"].replace(b"tf.train.Server", b"tf.distribute.Server")
    assert (root / "good" / "latin1_cookie.py").read_bytes() == expected
    assert results["good/latin1_cookie.py"]["status"] == "changed"


def test_empty_and_big_files_without_tensorflow_are_skipped_untouched(matrix):
    root, _, _, _, results = matrix
    for name in ("empty.py", "big_without_tf.py"):
        assert results[f"good/{name}"]["status"] == "skipped"
        assert (root / "good" / name).read_bytes() == GOOD[name]


def test_python2_file_is_converted_and_reported(matrix):
    """TFM001 is located at the first line that is not Python 3 (the print statement)."""
    root, _, text, _, results = matrix
    assert re.search(
        r"^good/python2\.py:2:1: TFM001 \[fixed\] converted from Python 2 \(fixers: except,"
        r" print\)",
        text.stdout,
        re.MULTILINE,
    )
    assert (root / "good" / "python2.py").read_text() == (
        "import tensorflow as tf\nprint('starting')\ntry:\n    s = tf.distribute.Server(c)\n"
        "except ValueError as e:\n    print(e)\n"
    )
    codes = [d["code"] for d in results["good/python2.py"]["diagnostics"]]
    assert codes == ["TFM001", "TFM998"]


def test_python2_conversion_can_be_turned_off(tmp_path):
    data = GOOD["python2.py"]
    (tmp_path / "old.py").write_bytes(data)
    proc = run_tfmigrate("--write", "--no-python2", "old.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert re.search(
        r"^old\.py:2:1: error: syntax error: Missing parentheses in call to 'print'",
        proc.stdout,
        re.MULTILINE,
    )
    assert (tmp_path / "old.py").read_bytes() == data


def test_big_file_can_be_allowed(tmp_path):
    (tmp_path / "a.py").write_bytes(LEGACY.encode())
    small_limit = run_tfmigrate("--max-file-size", "50", "a.py", cwd=tmp_path)
    assert small_limit.returncode == 2 and "file too large" in small_limit.stdout
    no_limit = run_tfmigrate("--max-file-size", "0", "a.py", cwd=tmp_path)
    assert no_limit.returncode == 1 and "TFM998" in no_limit.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_unreadable_file(matrix):
    root, _, text, _, _ = matrix
    assert "bad/unreadable.py: error: permission denied: cannot read file" in text.stdout
    os.chmod(root / "bad" / "unreadable.py", stat.S_IRUSR)
    assert (root / "bad" / "unreadable.py").read_bytes() == LEGACY.encode()


@pytest.mark.skipif(os.geteuid() != 0, reason="covered through the console script as non-root")
def test_unreadable_file_as_root(tmp_path, monkeypatch, capsys):
    # root bypasses file modes, so make open() fail like it does for a user
    register_test_rules(monkeypatch)
    locked = tmp_path / "locked.py"
    locked.write_bytes(LEGACY.encode())
    (tmp_path / "ok.py").write_bytes(LEGACY.encode())

    def denying_open(path, *args, **kwargs):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(files, "open", denying_open, raising=False)
    code = cli.main(["--write", "--jobs", "1", str(locked), str(tmp_path / "ok.py")])
    out = capsys.readouterr().out
    assert code == 2
    assert f"{locked}: error: permission denied: cannot read file" in out
    assert locked.read_bytes() == LEGACY.encode()
    assert "tf.distribute.Server" in (tmp_path / "ok.py").read_text()


def test_legacy_python2_file_with_mixed_tabs_and_spaces(tmp_path):
    legacy = (REPO_ROOT / "tests" / "data" / "cli" / "legacy_py2.py").read_bytes()
    (tmp_path / "legacy.py").write_bytes(legacy)
    proc = run_tfmigrate("--write", "legacy.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert re.search(
        r"^legacy\.py:6:3: TFM001 \[fixed\] converted from Python 2 \(tabs in indentation expanded;"
        r" fixers: dict, except, has_key, print\)",
        proc.stdout,
        re.MULTILINE,
    )
    migrated = (tmp_path / "legacy.py").read_text()
    ast.parse(migrated)
    assert "hosts.items()" in migrated and '"ps" in hosts' in migrated
    assert 'print("ps present", file=sys.stderr)' in migrated
    assert "except ValueError as e:" in migrated and "tf.distribute.Server(" in migrated
    assert "\t" not in migrated  # Python 2 tab stops made explicit
    # the converted file is Python 3 now: a second run has nothing to do
    again = run_tfmigrate("--write", "legacy.py", cwd=tmp_path)
    assert again.returncode == 0 and "TFM001" not in again.stdout


def test_python2_only_names_in_a_file_that_parses_as_python3(tmp_path):
    """`xrange(...)` and `d.iteritems()` parse as Python 3 but fail when run:
    such a file goes through the same fissix pre-pass (TFM001, located at
    the first Python 2 use); lines without Python 2 constructs keep their
    bytes."""
    source = (
        "import tensorflow as tf\n"
        "\n"
        "HPARAMS = {'lr': 0.1}\n"
        "for key, value in HPARAMS.iteritems():\n"
        "    print('%s=%s' % (key, value))\n"
        "steps = [i * 2 for i in xrange(10)]\n"
    )
    (tmp_path / "old.py").write_text(source)
    proc = run_tfmigrate("--write", "old.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert re.search(r"^old\.py:4:\d+: TFM001 \[fixed\] converted from Python 2", proc.stdout, re.MULTILINE)
    migrated = (tmp_path / "old.py").read_text()
    assert "HPARAMS.items()" in migrated and "range(10)" in migrated and "xrange" not in migrated
    assert "print('%s=%s' % (key, value))\n" in migrated and "HPARAMS = {'lr': 0.1}\n" in migrated
    again = run_tfmigrate("--write", "old.py", cwd=tmp_path)
    assert again.returncode == 0 and "TFM001" not in again.stdout
