"""A deliberately broken rule for the output-gate tests: its output parses
(``ast.parse`` accepts it) but does not compile. Loaded in-process by
monkeypatching the registry, and into the console script via
``TFMIGRATE_EXTRA_RULES=tests.gate_rules_for_tests:RepeatKeywordForTests``.
"""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Rule


class RepeatKeywordForTests(Rule):
    """Repeat the first keyword argument of ``tf.train.Server(...)`` (test rule).

    Why: a rewrite that ``ast.parse`` accepts and ``compile()`` refuses
    (``keyword argument repeated``), the shape of a real rule bug.
    Example: ``tf.train.Server(c, job_name="ps")`` ->
    ``tf.train.Server(c, job_name="ps", job_name="ps")``.
    Fix safety: broken on purpose.
    """

    code = "TFM996"
    name = "test-repeat-keyword"
    triggers = ("Server",)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.qualname(original.func) not in ("train.Server", "distribute.Server"):
            return updated
        keywords = [a for a in updated.args if a.keyword is not None]
        if not keywords:
            return updated
        self.report(original, "repeated a keyword on purpose", fixed=True)
        return updated.with_changes(args=[*updated.args, keywords[0]])
