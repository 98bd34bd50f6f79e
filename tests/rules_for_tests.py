"""Small rules used only by the CLI, notebook and bad-input tests, so those
tests do not depend on which real rules exist. Loaded in-process by
monkeypatching ``migrate.codemod.rules.REGISTRY`` and into the console script via
``TFMIGRATE_EXTRA_RULES=tests.rules_for_tests:RenameServerForTests,...``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst

from migrate.codemod.engine import Rule
from migrate.codemod.tfnames import dotted

EXTRA_RULES_VAR = "TFMIGRATE_EXTRA_RULES"


class RenameServerForTests(Rule):
    """Rename ``tf.train.Server`` to ``tf.distribute.Server`` (test rule).

    Why: gives the tests a rule that changes code and reports a fixed finding.
    Example: ``tf.train.Server(spec)`` -> ``tf.distribute.Server(spec)``.
    Fix safety: safe.
    """

    code = "TFM998"
    name = "test-rename-server"
    triggers = ("Server",)
    fix_safety = "safe"

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        if self.qualname(original) != "train.Server":
            return updated
        name = dotted(original) or ""
        root = name.split(".", 1)[0]
        self.report(original, "tf.train.Server is tf.distribute.Server in TF2", fixed=True)
        return cst.parse_expression(f"{root}.distribute.Server")


class FlagSupervisorForTests(Rule):
    """Report ``tf.train.Supervisor`` as manual work without changing it (test rule).

    Why: gives the tests a finding that needs a human.
    Example: ``tf.train.Supervisor(...)`` is reported, not rewritten.
    Fix safety: no fix.
    """

    code = "TFM999"
    name = "test-flag-supervisor"
    triggers = ("Supervisor",)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.qualname(node) == "train.Supervisor":
            self.report(
                node,
                "tf.train.Supervisor has no TF2 equivalent",
                hint="use a tf.function step in a loop with tf.train.CheckpointManager",
            )


class CrashForTests(Rule):
    """Raise on sources containing ``CRASH_ME`` (test rule).

    Why: shows a rule bug is reported per file and never corrupts the file.
    Example: ``import tensorflow  # CRASH_ME`` -> internal error, file untouched.
    Fix safety: no fix.
    """

    code = "TFM997"
    name = "test-crash"
    triggers = ("CRASH_ME",)

    def transform(self, module: cst.Module) -> cst.Module:
        raise RuntimeError("rule exploded on purpose")


ALL_TEST_RULES = (RenameServerForTests, FlagSupervisorForTests, CrashForTests)
EXTRA_RULES_ENV = ",".join(f"tests.rules_for_tests:{cls.__name__}" for cls in ALL_TEST_RULES)

# --------------------------------------------------------------------------- running the CLI

REPO_ROOT = Path(__file__).resolve().parent.parent


def tfmigrate_command() -> list[str]:
    """The installed console script (``pip install -e .``), else ``python -m migrate``."""
    script = shutil.which("tfmigrate")
    return [script] if script else [sys.executable, "-m", "migrate"]


def run_tfmigrate(
    *args,
    cwd,
    extra_rules: bool = True,
    only_test_rules: bool = True,
    env: dict | None = None,
    timeout=180,
    **kwargs,
) -> subprocess.CompletedProcess:
    """Run the real console script. By default only the test rules run
    (``--select TFM99``) so results do not depend on the project's rules."""
    args = [str(a) for a in args]
    if only_test_rules and not (args and args[0] in ("rules", "demo", "check", "reference")):
        args = ["--select", "TFM99", *args]
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), environment.get("PYTHONPATH", "")) if p
    )
    environment[EXTRA_RULES_VAR] = EXTRA_RULES_ENV if extra_rules else ""
    environment.update(env or {})
    kwargs.setdefault("capture_output", True)
    return subprocess.run(
        [*tfmigrate_command(), *args],
        cwd=cwd,
        env=environment,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,
    )


def register_test_rules(monkeypatch) -> None:
    """In-process: make the registry exactly the test rules."""
    import migrate.codemod.rules

    monkeypatch.setattr(migrate.codemod.rules, "REGISTRY", list(ALL_TEST_RULES))


LEGACY = (
    "import tensorflow as tf\n"
    "\n"
    "cluster = tf.train.ClusterSpec({'ps': ['localhost:2222']})\n"
    "server = tf.train.Server(cluster, job_name='ps', task_index=0)\n"
)
MANUAL = "import tensorflow as tf\nsv = tf.train.Supervisor(logdir='/tmp/x')\n"
CLEAN = "import tensorflow as tf\nx = tf.constant(1)\n"
