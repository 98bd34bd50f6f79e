"""The output gate: what tfmigrate writes compiles (``compile()``, not only
``ast.parse``). A rule whose change does not compile is named, located in the
input, the file is left byte-identical and the run goes on (exit 2)."""

from __future__ import annotations

import ast
import json

import nbformat
import pytest
from gate_rules_for_tests import RepeatKeywordForTests
from rules_for_tests import EXTRA_RULES_ENV, LEGACY, RenameServerForTests, run_tfmigrate

import migrate.codemod.rules
from migrate.codemod.engine import MigrationError, migrate_source
from migrate.codemod.notebook import NotebookError, migrate_notebook

GATE_RULES_ENV = EXTRA_RULES_ENV + ",tests.gate_rules_for_tests:RepeatKeywordForTests"

# the server line is rewritten by both rules; only the second one breaks it
SERVER_WITH_KEYWORDS = LEGACY
SERVER_WITHOUT_KEYWORDS = (
    "import tensorflow as tf\n"
    "\n"
    "cluster = tf.train.ClusterSpec({'worker': ['localhost:2223']})\n"
    "server = tf.train.Server(cluster)\n"
)


@pytest.fixture
def gate_rules(monkeypatch):
    monkeypatch.setattr(migrate.codemod.rules, "REGISTRY", [RenameServerForTests, RepeatKeywordForTests])


def test_the_broken_shape_parses_but_does_not_compile():
    code = "f(job_name='ps', job_name='ps')\n"
    ast.parse(code)
    with pytest.raises(SyntaxError, match="keyword argument repeated"):
        compile(code, "<test>", "exec")


def test_output_that_does_not_compile_names_the_rule_that_broke_it(gate_rules):
    with pytest.raises(MigrationError) as raised:
        migrate_source(SERVER_WITH_KEYWORDS, path="train.py")
    error = raised.value
    assert "the rewrite by TFM996 (test-repeat-keyword) does not compile" in error.message
    assert "keyword argument repeated: job_name" in error.message
    assert "TFM998" not in error.message  # its rename compiles
    assert (error.line, error.column) == (4, 1)  # the server line of the input


def test_output_that_compiles_passes_the_gate(gate_rules):
    result = migrate_source(SERVER_WITHOUT_KEYWORDS, path="train.py")
    assert "tf.distribute.Server(cluster)" in result.output
    compile(result.output, "train.py", "exec")


def test_input_that_parses_but_does_not_compile_is_reported_at_its_own_line(gate_rules):
    source = SERVER_WITHOUT_KEYWORDS + "if server:\n    pass\nreturn server\n"
    with pytest.raises(MigrationError) as raised:
        migrate_source(source, path="train.py")
    assert "'return' outside function (the file parses but does not compile)" in raised.value.message
    assert raised.value.line == 7


def test_cli_leaves_the_broken_file_identical_and_goes_on(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(SERVER_WITH_KEYWORDS)
    fine = tmp_path / "fine.py"
    fine.write_text(SERVER_WITHOUT_KEYWORDS)
    proc = run_tfmigrate("--write", "--no-progress", ".", cwd=tmp_path, env={"TFMIGRATE_EXTRA_RULES": GATE_RULES_ENV})
    assert proc.returncode == 2, proc.stdout
    assert broken.read_text() == SERVER_WITH_KEYWORDS
    assert "tf.distribute.Server(cluster)" in fine.read_text()
    assert (
        "broken.py:4:1: error: internal error: the rewrite by TFM996 (test-repeat-keyword) does not compile"
        " (keyword argument repeated: job_name, line 4 of the rewritten code" in proc.stdout
    )


def notebook(cells: list[str]) -> bytes:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    return (nbformat.writes(nb) + "\n").encode()


def test_notebook_output_that_does_not_compile_is_located_by_cell(gate_rules):
    raw = notebook(["import tensorflow as tf\n%matplotlib inline", "s = tf.train.Server(c, job_name='ps')"])
    with pytest.raises(NotebookError) as raised:
        migrate_notebook(raw, path="nb.ipynb")
    error = raised.value
    assert (error.cell, error.line, error.column) == (2, 1, 1)
    assert "TFM996 (test-repeat-keyword) does not compile" in error.message


def test_notebook_top_level_await_compiles(gate_rules):
    """IPython runs a cell's top-level ``await``: not a compile error there."""
    raw = notebook(["import asyncio\nimport tensorflow as tf", "await asyncio.sleep(0)\ns = tf.train.Server(c)"])
    result = migrate_notebook(raw, path="nb.ipynb")
    cells = json.loads(result.output)["cells"]
    assert "".join(cells[1]["source"]) == "await asyncio.sleep(0)\ns = tf.distribute.Server(c)"


def test_notebook_cells_compile_one_by_one(gate_rules):
    """IPython compiles each cell on its own: a cell may start with its own
    ``from __future__`` import (the joined program would not compile)."""
    raw = notebook(
        ["import tensorflow as tf", "from __future__ import print_function\nprint('ready')", "s = tf.train.Server(c)"]
    )
    result = migrate_notebook(raw, path="nb.ipynb")
    cells = json.loads(result.output)["cells"]
    assert "".join(cells[2]["source"]) == "s = tf.distribute.Server(c)"


def test_a_notebook_cell_that_does_not_compile_on_its_own_is_reported(gate_rules):
    raw = notebook(["import tensorflow as tf\ns = tf.train.Server(c)", "x = 1\nreturn x"])
    with pytest.raises(NotebookError) as raised:
        migrate_notebook(raw, path="nb.ipynb")
    error = raised.value
    assert (error.cell, error.line) == (2, 2)
    assert "'return' outside function (the file parses but does not compile)" in error.message
