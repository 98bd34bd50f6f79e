"""The Python 2 pre-pass (TFM001) on what it used to miss: notebooks whose
code cells are Python 2 (converted cell by cell, magics kept, located by
cell), and indentation mixing tabs and spaces the way Python reads with
8-column tab stops but the CST parser cannot tokenize. Fixtures written for
these tests."""

from __future__ import annotations

import json

import libcst as cst
import nbformat
import pytest
from rules_for_tests import register_test_rules, run_tfmigrate

from migrate.codemod import py2
from migrate.codemod.notebook import NotebookError, migrate_notebook


@pytest.fixture
def test_rules(monkeypatch):
    register_test_rules(monkeypatch)


def notebook(cells: list[str]) -> bytes:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    return (nbformat.writes(nb) + "\n").encode()


def sources(raw: bytes) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(raw)["cells"]]


# --------------------------------------------------------------------------- notebooks

PY2_CELLS = [
    "import tensorflow as tf\n%matplotlib inline",
    "hosts = {'ps': ['localhost:2222']}\nprint 'hosts:', hosts",
    (
        "cluster = tf.train.ClusterSpec(hosts)\nfor attempt in xrange(2):\n    !echo {attempt}\n"
        "server = tf.train.Server(cluster)"
    ),
]


def test_python2_cells_are_converted_one_by_one_and_magics_kept(test_rules):
    raw = notebook(PY2_CELLS)
    result = migrate_notebook(raw, path="nb.ipynb")
    assert sources(result.output) == [
        PY2_CELLS[0],
        "hosts = {'ps': ['localhost:2222']}\nprint('hosts:', hosts)",
        (
            "cluster = tf.train.ClusterSpec(hosts)\nfor attempt in range(2):\n    !echo {attempt}\n"
            "server = tf.distribute.Server(cluster)"
        ),
    ]
    notes = [(d.cell, d.line, d.message) for d in result.diagnostics if d.code == "TFM001"]
    assert [(cell, line) for cell, line, _ in notes] == [(2, 2), (3, 2)]
    assert "fixers: print" in notes[0][2] and "`xrange`" in notes[1][2]
    # the migrated notebook is Python 3: a second run changes nothing
    again = migrate_notebook(result.output, path="nb.ipynb")
    assert again.output == result.output
    assert not [d for d in again.diagnostics if d.code == "TFM001"]


def test_a_python2_notebook_is_converted_even_when_no_rule_changes_it(test_rules):
    raw = notebook(["import tensorflow as tf", "print 'version', tf.__version__"])
    result = migrate_notebook(raw, path="nb.ipynb")
    assert sources(result.output)[1] == "print('version', tf.__version__)"
    assert [d.code for d in result.diagnostics] == ["TFM001"]


def test_a_name_an_earlier_cell_binds_is_not_python2(test_rules):
    """``from six.moves import xrange`` in one cell binds it for the next."""
    raw = notebook(["import tensorflow as tf\nfrom six.moves import xrange", "steps = list(xrange(3))"])
    result = migrate_notebook(raw, path="nb.ipynb")
    assert result.output == raw and result.diagnostics == []


def test_a_cell_neither_python3_nor_python2_is_located_and_left_alone(test_rules):
    raw = notebook(["import tensorflow as tf", "x = 1\nprint 'x', x\ndef f(:\n    pass"])
    with pytest.raises(NotebookError) as raised:
        migrate_notebook(raw, path="nb.ipynb")
    assert (raised.value.cell, raised.value.line) == (2, 3)
    assert "neither valid Python 3 nor Python 2" in raised.value.message


def test_cli_converts_python2_notebooks_unless_told_not_to(tmp_path):
    raw = notebook(PY2_CELLS)
    target = tmp_path / "nb.ipynb"
    target.write_bytes(raw)
    refused = run_tfmigrate("--write", "--no-python2", "nb.ipynb", cwd=tmp_path)
    assert refused.returncode == 2
    assert "nb.ipynb[cell 2]:2:1: error: syntax error: Missing parentheses" in refused.stdout
    assert target.read_bytes() == raw
    proc = run_tfmigrate("--write", "nb.ipynb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "nb.ipynb[cell 2]:2:1: TFM001 [fixed] converted from Python 2 (fixers: print)" in proc.stdout
    assert "print('hosts:', hosts)" in sources(target.read_bytes())[1]


# --------------------------------------------------------------------------- tab indentation

# Valid Python 3 (and 2): with 8-column tab stops the blocks are at 8, 16 and
# 24 columns. libcst's tokenizer finds no matching block for the dedent.
TAB_MIX = (
    "import tensorflow as tf\n"
    "\n"
    "def report(values):\n"
    "        for value in values:\n"
    "        \tif value:\n"
    "\t        \tprint('value:\\t%s' % value)\n"
    "        return '''\n"
    "\tkept as it is\n"
    "'''\n"
    "server = tf.train.Server(cluster)\n"
)


def test_the_tab_mix_is_python_but_not_readable_by_the_cst_parser():
    compile(TAB_MIX, "tabs.py", "exec")
    with pytest.raises(cst.ParserSyntaxError):
        cst.parse_module(TAB_MIX)


def test_tab_mix_is_reindented_with_8_column_stops():
    expanded, note = py2.expand_indentation(TAB_MIX, "tabs.py")
    assert expanded.splitlines()[4:8] == [
        " " * 16 + "if value:",
        " " * 24 + "print('value:\\t%s' % value)",
        "        return '''",
        "\tkept as it is",  # inside a string: not indentation
    ]
    assert (note.code, note.line) == ("TFM001", 5)
    cst.parse_module(expanded)
    assert py2.expand_indentation("if x:\n    y = 1\n") is None


def test_cli_migrates_a_file_with_the_tab_mix(tmp_path):
    target = tmp_path / "tabs.py"
    target.write_text(TAB_MIX)
    proc = run_tfmigrate("--write", "tabs.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "tabs.py:5:1: TFM001 [fixed] indentation mixing tabs and spaces re-indented" in proc.stdout
    migrated = target.read_text()
    assert "tf.distribute.Server(cluster)" in migrated and "\tkept as it is\n" in migrated
    assert "\t" not in "".join(line[: len(line) - len(line.lstrip())] for line in migrated.splitlines()[:7])
    again = run_tfmigrate("--write", "tabs.py", cwd=tmp_path)
    assert again.returncode == 0 and "TFM001" not in again.stdout


def test_cli_without_the_python2_pass_reports_the_tab_mix(tmp_path):
    target = tmp_path / "tabs.py"
    target.write_text(TAB_MIX)
    proc = run_tfmigrate("--write", "--no-python2", "tabs.py", cwd=tmp_path)
    assert proc.returncode == 2 and "tabs.py:" in proc.stdout and "error: syntax error" in proc.stdout
    assert target.read_text() == TAB_MIX


def test_tab_error_on_python3_is_read_with_python2_tab_stops():
    """Python 3 refuses (TabError); Python 2 read a tab as 8 columns, so
    ``finish()`` (8 spaces) is in the ``if ready:`` block, after the loop."""
    source = (
        "import tensorflow as tf\n"
        "if ready:\n"
        "\tfor step in steps:\n"
        "\t\trun(step)\n"
        "        finish()\n"
    )
    with pytest.raises(TabError):
        compile(source, "old.py", "exec")
    converted, note = py2.convert(source, "old.py")
    assert converted.splitlines()[2:] == ["        for step in steps:", "                run(step)", "        finish()"]
    assert (note.line, "tabs in indentation expanded" in note.message) == (5, True)


def test_tab_mix_in_a_notebook_cell_is_reindented(test_rules):
    cell = TAB_MIX.replace("import tensorflow as tf\n\n", "")
    raw = notebook(["import tensorflow as tf", cell])
    result = migrate_notebook(raw, path="nb.ipynb")
    after = sources(result.output)[1]
    assert "tf.distribute.Server(cluster)" in after and " " * 24 + "print(" in after
    assert [(d.code, d.cell, d.line) for d in result.diagnostics if d.code == "TFM001"] == [("TFM001", 2, 3)]
