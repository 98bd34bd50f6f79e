"""TFM103 tf-logging: ``tf.logging.*`` -> ``absl.logging``."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import fast_visit, transform
from migrate.codemod.rules.tfm101_tensorflow_import import attribute_chain
from migrate.codemod.rules.tfm102_absl_flags import (
    BoundNames,
    remove_tf_import_aliases,
    tf_canonical,
)

# tf.logging name -> absl.logging name. The level constants differ in value
# (TF: Python levels, INFO=20; absl: INFO=0) but each maps to its namesake, so
# `set_verbosity(tf.logging.INFO)` -> `set_verbosity(logging.INFO)` keeps meaning.
_SAME = {
    "debug", "info", "warning", "error", "fatal", "log", "vlog", "log_every_n",
    "log_first_n", "log_if", "flush", "set_verbosity", "get_verbosity",
    "DEBUG", "INFO", "WARNING", "ERROR", "FATAL", "WARN",
}
_RENAMED = {"warn": "warning"}


class TfLogging(Rule):
    """Use ``absl.logging`` instead of ``tf.logging``.

    What it does:
        ``tf.logging.info/warning/warn/error/fatal/debug/log/vlog/log_every_n/
        log_first_n/log_if/flush/set_verbosity/get_verbosity`` and the level
        constants (``tf.logging.INFO`` ...) become ``logging.X`` with
        ``from absl import logging``; ``from tensorflow.python.platform import
        tf_logging as logging`` is replaced by the absl import. When the module
        already uses the name ``logging`` (the standard library, usually) the
        import is ``from absl import logging as absl_logging``.

    Why:
        ``tf.logging`` exists in TF2 only as ``tf.compat.v1.logging``.

    Example:
        ``tf.logging.set_verbosity(tf.logging.INFO)`` / ``tf.logging.info("step %d", i)``
        becomes ``logging.set_verbosity(logging.INFO)`` / ``logging.info("step %d", i)``.

    Fix safety:
        Safe for the mapped functions: same signatures, the level constants map
        by name (absl's values differ from TF's, so a *numeric* level passed to
        ``set_verbosity`` would not; those are rare). Messages go to the
        ``absl`` logger instead of the ``tensorflow`` logger, and absl's
        ``set_verbosity`` does not filter TensorFlow's own messages (an info
        diagnostic at each ``set_verbosity`` says how to keep that). Anything else
        under ``tf.logging`` (``TaskLevelStatusMessage``, private members) is
        reported and left.
    """

    code = "TFM103"
    name = "tf-logging"
    triggers = ("logging",)

    VALID = (
        Valid(
            """
            import tensorflow as tf
            from absl import logging

            logging.set_verbosity(logging.INFO)
            logging.info("loss %f", 1.0)
            """
        ),
        Valid(
            """
            import logging
            import tensorflow as tf

            logging.basicConfig(level=logging.INFO)
            tf.get_logger().setLevel("INFO")
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            tf.logging.set_verbosity(tf.logging.INFO)
            tf.logging.info("step %d loss %f", step, loss)
            tf.logging.warn("slow")
            """,
            """
            import tensorflow as tf
            from absl import logging

            logging.set_verbosity(logging.INFO)
            logging.info("step %d loss %f", step, loss)
            logging.warning("slow")
            """,
        ),
        Invalid(
            """
            import logging
            import tensorflow.compat.v1 as tf

            logging.basicConfig()
            tf.compat.v1.logging.log_every_n(tf.logging.INFO, "x", 100)
            """,
            """
            import logging
            import tensorflow.compat.v1 as tf
            from absl import logging as absl_logging

            logging.basicConfig()
            absl_logging.log_every_n(absl_logging.INFO, "x", 100)
            """,
        ),
        Invalid(
            """
            from tensorflow.python.platform import tf_logging as logging
            import tensorflow as tf

            logging.info("hello")
            """,
            """
            import tensorflow as tf
            from absl import logging

            logging.info("hello")
            """,
        ),
        Invalid(
            """
            import tensorflow as tf
            tf.logging.TaskLevelStatusMessage("x")
            tf.logging.error("bad")
            """,
            """
            import tensorflow as tf
            from absl import logging

            tf.logging.TaskLevelStatusMessage("x")
            logging.error("bad")
            """,
            diagnostics=("TFM103",),
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        if not self.ctx.names.any:
            return module
        bound = BoundNames()
        fast_visit(module, bound)
        self.alias = "absl_logging" if "logging" in bound.names else "logging"
        return transform(module, self)

    def _member(self, node: cst.CSTNode) -> str | None:
        """``"info"`` for ``tf.logging.info``; ``""`` for ``tf.logging`` itself."""
        c = tf_canonical(self.ctx.names.full_name(node))
        if c == "logging":
            return ""
        if c is not None and c.startswith("logging."):
            return c[len("logging.") :]
        return None

    def _use(self) -> None:
        if self.alias == "logging":
            self.ctx.require_import("absl", "logging")
        else:
            self.ctx.require_import("absl", "logging", self.alias)

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self._member(node) is None

    def _rewrite(self, original, updated):
        member = self._member(original)
        if member is None:
            return updated
        if member == "":
            self._use()
            return attribute_chain(self.alias)
        head, _, rest = member.partition(".")
        if head in _SAME or head in _RENAMED:
            self._use()
            if head == "set_verbosity":
                self.report(
                    original,
                    "`tf.logging.set_verbosity` -> absl `logging.set_verbosity`",
                    hint="absl's verbosity does not filter TensorFlow's own Python logger; to"
                    " keep silencing TF too, add tf.get_logger().setLevel(\"ERROR\") (same level name)",
                    fixed=True,
                    severity="info",
                )
            return attribute_chain(".".join(filter(None, [self.alias, _RENAMED.get(head, head), rest])))
        self.report(
            original,
            f"`tf.logging.{member}` has no absl.logging equivalent",
            hint="use absl.logging (info/warning/error/log_every_n ...) or the Python"
            " logger from tf.get_logger()",
            fixed=False,
        )
        return updated

    def leave_Attribute(self, original_node, updated_node):
        return self._rewrite(original_node, updated_node)

    def leave_Name(self, original_node, updated_node):
        return self._rewrite(original_node, updated_node)

    def leave_ImportFrom(self, original_node, updated_node):
        def drop(full: str) -> bool:
            if tf_canonical(full) == "logging":
                self._use()
                return True
            return False

        return remove_tf_import_aliases(updated_node, drop)
