"""Fixture tests for every registered rule (Fixit/pyupgrade style).

Each rule carries its own ``VALID`` (must not change, must not report) and
``INVALID`` (before -> after, plus the unfixed diagnostics expected) cases;
this file runs them through the real engine with only that rule selected.
"""

from __future__ import annotations

import ast

import pytest

from migrate.codemod.engine import Invalid, Valid, dedent, migrate_source
from migrate.codemod.rules import REGISTRY


def _cases(kind):
    for rule in REGISTRY:
        for i, case in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, case, id=f"{rule.code}-{rule.name}-{kind.lower()}{i}")


def test_registry_codes_unique_and_well_formed():
    codes = [r.code for r in REGISTRY]
    assert len(codes) == len(set(codes))
    names = [r.name for r in REGISTRY]
    assert len(names) == len(set(names))
    for r in REGISTRY:
        assert r.code.startswith("TFM") and r.code[3:].isdigit() and len(r.code) == 6, r.code


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.code)
def test_every_rule_has_fixtures_and_docstring(rule):
    assert rule.VALID, f"{rule.code} has no no-op fixture"
    assert rule.INVALID, f"{rule.code} has no invalid fixture"
    assert any(c.expected is not None or c.diagnostics for c in rule.INVALID)
    doc = (rule.__doc__ or "").lower()
    for section in ("why", "example", "fix safety"):
        assert section in doc, f"{rule.code} docstring lacks '{section}'"


@pytest.mark.parametrize("rule,case", list(_cases("VALID")))
def test_valid_fixture_is_untouched(rule, case: Valid):
    src = dedent(case.code)
    result = migrate_source(src, select=[rule.code])
    assert result.output == src
    assert [d.code for d in result.manual_work] == []


@pytest.mark.parametrize("rule,case", list(_cases("INVALID")))
def test_invalid_fixture(rule, case: Invalid):
    src = dedent(case.code)
    result = migrate_source(src, select=[rule.code])
    expected = src if case.expected is None else dedent(case.expected)
    assert result.output == expected
    assert sorted(d.code for d in result.manual_work) == sorted(case.diagnostics)
    for d in result.diagnostics:
        assert 1 <= d.line <= max(1, len(src.splitlines())), d
        assert d.column >= 1 and d.message
    ast.parse(result.output)
    # idempotent: the rule has nothing more to do on its own output
    again = migrate_source(result.output, select=[rule.code])
    assert again.output == result.output
