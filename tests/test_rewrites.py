"""`rewrites/` is exactly what tfmigrate makes of `legacy_reference/`, and
every rewrite runs on the local launcher and trains like its legacy program.

Regenerate after a rule change with::

    tfmigrate legacy_reference -o rewrites   (README.md is not copied back)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from migrate.codemod.engine import migrate_source

ROOT = Path(__file__).resolve().parent.parent
LEGACY = ROOT / "legacy_reference"
REWRITES = ROOT / "rewrites"
PROGRAMS = sorted(p.name for p in LEGACY.glob("*.py"))


def test_every_reference_program_has_a_rewrite_and_back():
    assert PROGRAMS, "no reference programs"
    assert sorted(p.name for p in REWRITES.glob("*.py")) == PROGRAMS


@pytest.mark.parametrize("name", PROGRAMS)
def test_rewrite_is_current(name):
    result = migrate_source((LEGACY / name).read_text(encoding="utf-8"), path=str(LEGACY / name))
    committed = (REWRITES / name).read_text(encoding="utf-8")
    assert result.output == committed, f"rewrites/{name} is stale: regenerate it with tfmigrate"
    assert result.manual_work == [], [f"{d.line}:{d.column} {d.code} {d.message}" for d in result.manual_work]


@pytest.mark.parametrize("name", PROGRAMS)
def test_rewrite_is_modern_tf2(name):
    code = (REWRITES / name).read_text(encoding="utf-8")
    tree = ast.parse(code)
    # no legacy distributed construct survives in the code (docstrings may tell the story)
    identifiers = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    identifiers |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    legacy = {"replica_device_setter", "SyncReplicasOptimizer", "MonitoredTrainingSession", "Supervisor",
              "placeholder", "Session", "disable_eager_execution", "disable_v2_behavior", "get_variable_scope"}
    assert not identifiers & legacy, identifiers & legacy
    servers = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "Server"]
    assert all(isinstance(s.value, ast.Attribute) and s.value.attr == "distribute" for s in servers)
    # runs on stock TF 2.21 with Keras 3
    assert "TF_USE_LEGACY_KERAS" not in code and "tf_keras" not in code
    imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "tensorflow" in imports
    # idempotent: migrating the rewrite changes nothing
    assert migrate_source(code).output == code
