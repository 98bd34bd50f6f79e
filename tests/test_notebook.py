"""Notebooks: code cells migrated as one program, IPython syntax preserved,
JSON written back so that everything but the migrated lines is byte-identical."""

from __future__ import annotations

import difflib
import json

import nbformat
import pytest
from rules_for_tests import REPO_ROOT, register_test_rules, run_tfmigrate

from migrate.codemod.notebook import NotebookError, _Masker, migrate_notebook

MAGICS = REPO_ROOT / "tests" / "data" / "cli" / "magics.ipynb"


@pytest.fixture
def test_rules(monkeypatch):
    register_test_rules(monkeypatch)


def changed_lines(before: bytes, after: bytes) -> list[tuple[str, str]]:
    """(removed, added) line pairs of a line diff."""
    a, b = before.decode().splitlines(), after.decode().splitlines()
    pairs = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            pairs.append(("\n".join(a[i1:i2]), "\n".join(b[j1:j2])))
    return pairs


def notebook_bytes(cells: list[str], **dump_kwargs) -> bytes:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    if dump_kwargs:
        return json.dumps(nb, **dump_kwargs).encode()
    return (nbformat.writes(nb) + "\n").encode()


def test_magics_notebook_round_trips_with_only_the_migrated_line_changed(tmp_path):
    original = MAGICS.read_bytes()
    target = tmp_path / "magics.ipynb"
    target.write_bytes(original)
    proc = run_tfmigrate("--write", "magics.ipynb", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout  # the Supervisor cell needs manual work
    after = target.read_bytes()
    assert changed_lines(original, after) == [
        (
            '    "server = tf.train.Server(cluster, job_name=\\"worker\\", task_index=0)\\n",',
            '    "server = tf.distribute.Server(cluster, job_name=\\"worker\\", task_index=0)\\n",',
        )
    ]
    old, new = nbformat.reads(original.decode(), 4), nbformat.reads(after.decode(), 4)
    nbformat.validate(new)
    assert [c.get("id") for c in new.cells] == [c.get("id") for c in old.cells]
    assert [c.get("outputs") for c in new.cells] == [c.get("outputs") for c in old.cells]
    assert new.metadata == old.metadata
    # migrating the migrated notebook changes nothing
    again = run_tfmigrate("--write", "magics.ipynb", cwd=tmp_path)
    assert target.read_bytes() == after
    assert "1 file changed" not in again.stdout


def test_diagnostics_and_diffs_name_the_cell(tmp_path):
    (tmp_path / "nb.ipynb").write_bytes(MAGICS.read_bytes())
    proc = run_tfmigrate("nb.ipynb", cwd=tmp_path)
    assert "--- a/nb.ipynb [cell 5]\n+++ b/nb.ipynb [cell 5]\n" in proc.stdout
    assert "nb.ipynb[cell 5]:2:10: TFM998 [fixed]" in proc.stdout
    assert "nb.ipynb[cell 6]:1:6: TFM999 tf.train.Supervisor" in proc.stdout
    data = json.loads(run_tfmigrate("--format", "json", "nb.ipynb", cwd=tmp_path).stdout)
    (entry,) = data["files"]
    assert entry["kind"] == "notebook"
    server = next(d for d in entry["diagnostics"] if d["code"] == "TFM998")
    assert (server["cell"], server["line"], server["column"]) == (5, 2, 10)
    cells = json.loads(MAGICS.read_text())["cells"]
    assert server["cell_id"] == cells[4]["id"]


def test_imports_in_one_cell_are_seen_in_another(test_rules):
    raw = notebook_bytes(["import tensorflow as tf1\n", "s = tf1.train.Server(c)\n"])
    result = migrate_notebook(raw)
    assert [c.after for c in result.changes] == ["s = tf1.distribute.Server(c)\n"]
    # without the import cell, tf1 is not TensorFlow and nothing changes
    alone = migrate_notebook(notebook_bytes(["# tensorflow\n", "s = tf1.train.Server(c)\n"]))
    assert not alone.changed


MAGIC_FORMS = {
    "line magic": "%matplotlib inline",
    "magic with args": "%load_ext tensorboard",
    "shell": "!pip install tensorflow==1.15",
    "shell assignment": "files = !ls -1",
    "magic assignment": "out = %sx ls",
    "help": "tf.train.Server?",
    "double help": "tf.train.Server??",
    "prefix help": "?tf.train",
    "continued shell": "!echo one \\\n    two",
    "env": "%env CUDA_VISIBLE_DEVICES=0",
}


@pytest.mark.parametrize("form", MAGIC_FORMS.values(), ids=MAGIC_FORMS.keys())
def test_each_line_magic_form_is_preserved(test_rules, form):
    cell = f"import tensorflow as tf\n{form}\nserver = tf.train.Server(c)\n"
    result = migrate_notebook(notebook_bytes([cell]))
    (change,) = result.changes
    assert change.after == cell.replace("server = tf.train.Server", "server = tf.distribute.Server")


def test_indented_magics_and_cell_magics(test_rules):
    loop = "import tensorflow as tf\nfor i in range(2):\n    %time f(i)\n    !echo $i\n    s = tf.train.Server(c)\n"
    timed = "%%time\ns = tf.train.Server(c)\n"
    bash = "%%bash\ntf.train.Server(c)\n  if [ -z x ]; then echo; fi\n"
    result = migrate_notebook(notebook_bytes([loop, timed, bash]))
    after = {c.cell: c.after for c in result.changes}
    assert after == {
        1: loop.replace("train.Server", "distribute.Server"),
        2: timed.replace("train.Server", "distribute.Server"),
    }  # the %%bash cell is not Python and stays as it is


def test_magic_like_lines_inside_strings_are_code(test_rules):
    masker = _Masker()
    source = "s = '''\n!not a shell\n%not a magic\n'''\n!real shell\nx = 1  # why?\n"
    masked = masker.mask(source)
    assert (
        masked
        == "s = '''\n!not a shell\n%not a magic\n'''\n__tfmigrate_magic__(0)\nx = 1  # why?\n"
    )
    assert masker.restore(masked) == source


def test_percent_operator_on_continuation_lines_is_code(test_rules):
    cell = (
        "import tensorflow as tf\n"
        'msg = ("%d workers"\n'
        "       % 2)\n"
        "rate = 10 \\\n"
        "    % 3\n"
        "s = tf.train.Server(c)\n"
    )
    (change,) = migrate_notebook(notebook_bytes([cell])).changes
    assert change.after == cell.replace("tf.train.Server", "tf.distribute.Server")


def test_notebook_style_is_kept_for_unchanged_parts(test_rules):
    # a notebook not written by nbformat: indent 2, unsorted keys, string
    # sources, escaped non-ASCII, no trailing newline
    nb = {
        "nbformat_minor": 5,
        "nbformat": 4,
        "metadata": {"title": "caf\u00e9"},
        "cells": [
            {
                "source": "# caf\u00e9\nimport tensorflow as tf",
                "cell_type": "code",
                "metadata": {},
                "outputs": [],
                "execution_count": None,
                "id": "one",
            },
            {
                "source": "s = tf.train.Server(c)",
                "cell_type": "code",
                "metadata": {"tags": ["x"]},
                "outputs": [],
                "execution_count": 3,
                "id": "two",
            },
        ],
    }
    raw = json.dumps(nb, indent=2).encode()
    result = migrate_notebook(raw)
    expected = raw.replace(b'"s = tf.train.Server(c)"', b'"s = tf.distribute.Server(c)"')
    assert result.output == expected


def test_compact_notebook_with_line_lists(test_rules):
    raw = notebook_bytes(
        ["import tensorflow as tf\ns = tf.train.Server(c)\nx = 1\n"], separators=(",", ":")
    )
    raw = json.dumps(
        {
            **json.loads(raw),
            "cells": [
                {
                    **json.loads(raw)["cells"][0],
                    "source": ["import tensorflow as tf\n", "s = tf.train.Server(c)\n", "x = 1\n"],
                }
            ],
        },
        separators=(",", ":"),
    ).encode()
    result = migrate_notebook(raw)
    assert result.output == raw.replace(b"tf.train.Server", b"tf.distribute.Server")


def test_crlf_notebook_keeps_its_line_endings(test_rules):
    raw = notebook_bytes(["import tensorflow as tf\ns = tf.train.Server(c)\nx = 1\n"])
    raw = raw.replace(b"\n", b"\r\n")
    result = migrate_notebook(raw)
    assert result.output == raw.replace(b"tf.train.Server", b"tf.distribute.Server")


def test_syntax_error_names_the_cell(tmp_path):
    raw = notebook_bytes(["import tensorflow as tf\n", "x = 1\ndef f(:\n    pass\n"])
    (tmp_path / "bad.ipynb").write_bytes(raw)
    proc = run_tfmigrate("--write", "bad.ipynb", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad.ipynb[cell 2]:2:7: error: syntax error" in proc.stdout
    assert (tmp_path / "bad.ipynb").read_bytes() == raw


def test_non_python_notebook_is_skipped(test_rules):
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}}
    )
    nb.cells = [nbformat.v4.new_code_cell("library(tensorflow)\ntf$train$Server")]
    raw = nbformat.writes(nb).encode()
    result = migrate_notebook(raw)
    assert result.output == raw and result.skipped_reason == "not a Python notebook (r)"


def test_a_rule_removing_a_magic_is_refused():
    masker = _Masker()
    masked = masker.mask("%time f()\n")
    with pytest.raises(NotebookError, match="removed an IPython magic"):
        masker.restore(masked.replace("__tfmigrate_magic__(0)", "pass"))
