"""TFM102 absl-flags: ``tf.app.flags`` / ``tf.flags`` / ``tf.app.run`` -> absl."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import fast_visit, transform
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules.tfm101_tensorflow_import import attribute_chain
from migrate.codemod.tfnames import canonical, dotted

# TF <= 1.4 flags took these keywords; TF 1.5+ translated them for absl.
# Flags absl defines itself (absl.logging, absl.app), which TF 2 imports: a
# script's own DEFINE of one raises DuplicateFlagError unless it may override.
ABSL_OWN_FLAGS = frozenset({
    "log_dir", "logtostderr", "alsologtostderr", "v", "verbosity", "stderrthreshold", "showprefixforinfo",
    "logger_levels", "run_with_pdb", "pdb_post_mortem", "pdb", "run_with_profiling", "profile_file",
    "use_cprofile_for_profiling", "only_check_args",
})
_DEFINE_KEYWORDS = {"flag_name": "name", "default_value": "default", "docstring": "help"}
# Private TF modules that legacy code imported the same objects from.
_PRIVATE = {
    "tensorflow.python.platform.flags": "flags",
    "tensorflow.python.platform.app": "app",
    "tensorflow.python.platform.tf_logging": "logging",
}


def tf_canonical(full: str | None) -> str | None:
    """``canonical`` that also knows the private ``tensorflow.python.platform`` modules."""
    if full is None:
        return None
    for private, public in _PRIVATE.items():
        if full == private or full.startswith(private + "."):
            return public + full[len(private) :]
    return canonical(full)


class BoundNames(cst.CSTVisitor):
    """Names bound anywhere in the module other than by ``import``s of
    tensorflow or absl, and other than ``keep(value)`` assignments."""

    def __init__(self, keep=lambda value: False) -> None:
        super().__init__()
        self.keep = keep
        self.names: set[str] = set()
        self.top_level_functions: set[str] = set()
        self._depth = 0

    def _target(self, t: cst.BaseExpression) -> None:
        if isinstance(t, cst.Name):
            self.names.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                self._target(el.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.keep(node.value):
            for t in node.targets:
                self._target(t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._target(node.asname.name)

    def visit_Param(self, node: cst.Param) -> None:
        self._target(node.name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.names.add(node.name.value)
        if self._depth == 0:
            self.top_level_functions.add(node.name.value)
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.names.add(node.name.value)
        self._depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._depth -= 1

    def visit_Import(self, node: cst.Import) -> bool:
        for a in node.names:
            name = dotted(a.name) or ""
            if name.split(".")[0] in ("tensorflow", "absl"):
                continue
            local = dotted(a.asname.name) if a.asname else name.split(".")[0]
            if local:
                self.names.add(local)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        mod = dotted(node.module) if node.module is not None else ""
        if (mod or "").split(".")[0] in ("tensorflow", "absl") or isinstance(node.names, cst.ImportStar):
            return False
        for a in node.names:
            local = dotted(a.asname.name) if a.asname else dotted(a.name)
            if local:
                self.names.add(local)
        return False


def remove_tf_import_aliases(node: cst.ImportFrom, drop) -> cst.ImportFrom | cst.RemovalSentinel:
    """Drop the aliases of a ``from tensorflow... import`` for which ``drop(full)`` holds."""
    if isinstance(node.names, cst.ImportStar) or node.relative or node.module is None:
        return node
    mod = dotted(node.module) or ""
    if not (mod == "tensorflow" or mod.startswith("tensorflow.")):
        return node
    keep = [a for a in node.names if not drop(f"{mod}.{dotted(a.name)}")]
    if len(keep) == len(node.names):
        return node
    if not keep:
        return cst.RemoveFromParent()
    keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(names=keep)


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either order, any quotes)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


class AbslFlags(Rule):
    """Use absl's ``flags`` and ``app`` instead of ``tf.app.flags``/``tf.flags``/``tf.app.run``.

    What it does:
        ``tf.app.flags.X`` / ``tf.flags.X`` / ``tf.compat.v1.flags.X`` become
        ``flags.X`` with ``from absl import flags``; the idiom
        ``flags = tf.app.flags`` is removed; ``tf.app.run()`` becomes
        ``app.run(main)`` (the module's ``main``), ``tf.app.run(main=main,
        argv=...)`` becomes ``app.run(main=main, argv=...)``. TF <= 1.4 keyword
        names (``flag_name=``, ``default_value=``, ``docstring=``) are renamed to
        absl's. TF <= 1.4's ``FLAGS._parse_flags()`` becomes
        ``FLAGS(sys.argv, known_only=True)``; ``FLAGS.__flags`` is reported
        (``FLAGS.flag_values_dict()``). A module that never calls
        ``tf.app.run`` read FLAGS through TF's lazy parsing; absl needs an
        explicit parse, inserted after the last top-level ``DEFINE_*`` (or at
        the top of the ``__main__`` block).

    Why:
        ``tf.app``/``tf.flags`` exist in TF2 only under ``tf.compat.v1`` as thin
        wrappers around absl; TF2 programs use absl directly.

    Example:
        ``flags = tf.app.flags`` / ``flags.DEFINE_integer("task_index", 0, "")`` /
        ``FLAGS = flags.FLAGS`` / ``tf.app.run()`` becomes
        ``from absl import app, flags`` / ``flags.DEFINE_integer("task_index", 0, "")`` /
        ``FLAGS = flags.FLAGS`` / ``app.run(main)``.

    Fix safety:
        The flags objects are the same (TF's flags module re-exports absl's).
        ``tf.app.run`` parsed argv with ``known_only=True`` (undefined
        ``--flags`` were ignored, as argparse scripts need); absl's ``app.run``
        rejects them, so in modules that use argparse the call keeps that
        behaviour with ``flags_parser=lambda argv: flags.FLAGS(argv,
        known_only=True)``. Elsewhere undefined flags now fail loudly. If
        ``flags``/``app`` already name something else in the module,
        ``import absl.flags``/``import absl.app`` is used instead. A bare
        ``tf.app.run()`` without a module-level ``main`` is reported and left.
    """

    code = "TFM102"
    name = "absl-flags"
    triggers = ("flags", "app.run", "import app")

    VALID = (
        Valid(
            """
            import tensorflow as tf
            from absl import app, flags

            flags.DEFINE_integer("task_index", 0, "index")
            FLAGS = flags.FLAGS

            def main(argv):
                print(tf.constant(FLAGS.task_index))

            app.run(main)
            """
        ),
        Valid(
            """
            import tensorflow as tf
            import argparse
            parser = argparse.ArgumentParser()
            flags = parser.parse_args()
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            tf.app.flags.DEFINE_string("log_dir", "/tmp/logs", "where summaries go")
            tf.app.flags.DEFINE_integer("v", 0, "verbosity")
            FLAGS = tf.app.flags.FLAGS
            """,
            """
            import tensorflow as tf
            import sys
            from absl import flags

            flags.DEFINE_string("log_dir", "/tmp/logs", "where summaries go", allow_override=True)
            flags.DEFINE_integer("v", 0, "verbosity", allow_override=True)
            flags.FLAGS(sys.argv, known_only=True)
            FLAGS = flags.FLAGS
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            flags = tf.app.flags
            flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
            flags.DEFINE_integer("task_index", 0, "Index of task within the job")
            FLAGS = flags.FLAGS


            def main(_):
                print(FLAGS.job_name)


            if __name__ == "__main__":
                tf.app.run()
            """,
            """
            import tensorflow as tf
            from absl import app, flags

            flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
            flags.DEFINE_integer("task_index", 0, "Index of task within the job")
            FLAGS = flags.FLAGS


            def main(_):
                print(FLAGS.job_name)


            if __name__ == "__main__":
                app.run(main)
            """,
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            tf.flags.DEFINE_float("learning_rate", 0.01, "lr")
            FLAGS = tf.app.flags.FLAGS
            tf.app.run(main=train, argv=[sys.argv[0]] + unparsed)
            """,
            """
            import tensorflow.compat.v1 as tf
            from absl import app, flags

            flags.DEFINE_float("learning_rate", 0.01, "lr")
            FLAGS = flags.FLAGS
            app.run(main=train, argv=[sys.argv[0]] + unparsed)
            """,
        ),
        Invalid(
            """
            import tensorflow as tf
            tf.compat.v1.flags.DEFINE_string(flag_name="data_dir", default_value="/tmp", docstring="data")
            tf.compat.v1.app.run(main)
            """,
            """
            import tensorflow as tf
            from absl import app, flags

            flags.DEFINE_string(name="data_dir", default="/tmp", help="data")
            app.run(main)
            """,
        ),
        Invalid(
            """
            from tensorflow.python.platform import flags
            from tensorflow.python.platform import app
            import tensorflow as tf
            FLAGS = flags.FLAGS
            flags.DEFINE_integer("batch_size", 128, "batch")
            app.run()
            """,
            """
            from tensorflow.python.platform import app
            import tensorflow as tf
            from absl import flags

            FLAGS = flags.FLAGS
            flags.DEFINE_integer("batch_size", 128, "batch")
            app.run()
            """,
            diagnostics=("TFM102",),
        ),
        Invalid(
            """
            import tensorflow as tf

            tf.app.flags.DEFINE_integer("epochs", 3, "epochs")
            FLAGS = tf.app.flags.FLAGS

            def main():
                print(FLAGS.epochs)

            if __name__ == '__main__':
                main()
            """,
            """
            import tensorflow as tf
            import sys
            from absl import flags

            flags.DEFINE_integer("epochs", 3, "epochs")
            flags.FLAGS(sys.argv, known_only=True)
            FLAGS = flags.FLAGS

            def main():
                print(FLAGS.epochs)

            if __name__ == '__main__':
                main()
            """,
        ),
        Invalid(
            """
            import tensorflow as tf
            tf.app.flags.DEFINE_integer("epochs", 3, "epochs")
            EPOCHS = tf.app.flags.FLAGS.epochs
            """,
            """
            import tensorflow as tf
            import sys
            from absl import flags

            flags.DEFINE_integer("epochs", 3, "epochs")
            flags.FLAGS(sys.argv, known_only=True)
            EPOCHS = flags.FLAGS.epochs
            """,
        ),
        Invalid(
            """
            import argparse
            import tensorflow as tf

            def main(_):
                print(FLAGS.train_dir)

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--train_dir", default="/tmp/train")
                FLAGS, unparsed = parser.parse_known_args()
                tf.app.run()
            """,
            """
            import argparse
            import tensorflow as tf
            from absl import app, flags

            def main(_):
                print(FLAGS.train_dir)

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--train_dir", default="/tmp/train")
                FLAGS, unparsed = parser.parse_known_args()
                app.run(main, flags_parser=lambda argv: flags.FLAGS(argv, known_only=True))
            """,
        ),
        Invalid(
            """
            import tensorflow as tf
            FLAGS = tf.app.flags.FLAGS
            tf.app.flags.DEFINE_integer("steps", 10, "")
            FLAGS._parse_flags()
            for k, v in FLAGS.__flags.items():
                print(k, v)
            """,
            """
            import tensorflow as tf
            import sys
            from absl import flags

            FLAGS = flags.FLAGS
            flags.DEFINE_integer("steps", 10, "")
            FLAGS(sys.argv, known_only=True)
            for k, v in FLAGS.__flags.items():
                print(k, v)
            """,
            diagnostics=("TFM102",),
        ),
        Invalid(
            # a flag read while the module is imported: tf.app.flags parsed
            # sys.argv there, absl would raise UnparsedFlagAccessError
            """
            import tensorflow as tf
            tf.app.flags.DEFINE_integer("seed", 0, "")
            FLAGS = tf.app.flags.FLAGS
            tf.set_random_seed(FLAGS.seed)

            def main(_):
                print(FLAGS.seed)

            if __name__ == "__main__":
                tf.app.run()
            """,
            """
            import tensorflow as tf
            import sys
            from absl import app, flags

            flags.DEFINE_integer("seed", 0, "")
            FLAGS = flags.FLAGS
            flags.FLAGS(sys.argv, known_only=True)
            tf.set_random_seed(FLAGS.seed)

            def main(_):
                print(FLAGS.seed)

            if __name__ == "__main__":
                app.run(main)
            """,
        ),
        Invalid(
            """
            import tensorflow as tf
            from flask import Flask
            app = Flask(__name__)
            flags = {"a": 1}
            tf.app.flags.DEFINE_integer("steps", 10, "")

            def main(argv):
                pass

            tf.app.run()
            """,
            """
            import tensorflow as tf
            from flask import Flask
            import absl.app
            import absl.flags

            app = Flask(__name__)
            flags = {"a": 1}
            absl.flags.DEFINE_integer("steps", 10, "")

            def main(argv):
                pass

            absl.app.run(main)
            """,
        ),
        Invalid(
            # flags read through a module alias, main() called without app.run
            """
            import tensorflow as tf

            flags = tf.app.flags
            flags.DEFINE_integer("steps", 10, "training steps")
            FLAGS = flags.FLAGS


            def main():
                print(FLAGS.steps)


            if __name__ == "__main__":
                main()
            """,
            """
            import tensorflow as tf
            import sys
            from absl import flags

            flags.DEFINE_integer("steps", 10, "training steps")
            FLAGS = flags.FLAGS


            def main():
                print(FLAGS.steps)


            if __name__ == "__main__":
                flags.FLAGS(sys.argv, known_only=True)
                main()
            """,
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        if not self.ctx.names.any:
            return module
        bound = BoundNames(keep=lambda v: self._kind(v)[0] == "flags" and not self._kind(v)[1])
        fast_visit(module, bound)
        self.has_main = "main" in bound.top_level_functions or "main" in self.ctx.names.bindings
        self.flags_expr = "absl.flags" if "flags" in bound.names else "flags"
        # A bare `app.run()` with no `main` to pass stays on TF's wrapper (it
        # finds __main__.main itself): keep an imported TF `app` then.
        tf_app_import = tf_canonical(self.ctx.names.bindings.get("app")) == "app"
        self.keep_tf_app = tf_app_import and not self.has_main
        self.app_expr = "absl.app" if "app" in bound.names or self.keep_tf_app else "app"
        self._removed: set[int] = set()
        # argparse scripts pass their own --flags through tf.app.run, which
        # ignored flags absl does not know (known_only=True): keep that.
        self.tolerant = "argparse" in bound.names
        self._top_index = {id(st): i for i, st in enumerate(module.body)}
        self._main_guard = next(
            (i for i, st in enumerate(module.body) if isinstance(st, cst.If) and _is_main_guard(st.test)), None
        )
        self._current_top: cst.CSTNode | None = None
        self._last_define: int | None = None  # index of the last top-level DEFINE_* statement
        self._run_seen = False
        self._first_flags_ref: cst.CSTNode | None = None
        self._parse_inserted = False
        self._early_read = self._first_import_time_read(module)
        out = transform(module, self)
        if self._first_flags_ref is not None and not self._run_seen and not self._parse_inserted:
            self.report(
                self._first_flags_ref,
                "absl flags are parsed by app.run(); this module never calls it (tf.app.flags parsed"
                " sys.argv on first access), so reading FLAGS raises UnparsedFlagAccessError",
                hint="call `flags.FLAGS(sys.argv, known_only=True)` before the first FLAGS read,"
                " or run main through `app.run(main)`",
                fixed=False,
            )
        return out

    def _first_import_time_read(self, module: cst.Module) -> int | None:
        """Index of the first top-level statement that reads a flag value while
        the module is imported (before app.run() could parse the command line):
        tf.app.flags parsed sys.argv on that first access, absl raises there."""
        aliases: set[str] = set()
        for i, statement in enumerate(module.body):
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.If)):
                continue  # bodies run later (the __main__ guard: in the flow app.run starts)
            names, value, _ = C.assignment(statement)
            if value is not None and self._kind(value) == ("flags", "FLAGS"):
                aliases.update(names)
                continue
            for node in C.walk(statement):
                # a private attribute (`FLAGS._parse_flags()`) is the script parsing them itself
                if type(node) is cst.Attribute and node.attr.value.startswith("_"):
                    return None
                if type(node) is cst.Attribute and not node.attr.value.startswith("DEFINE"):
                    base = node.value
                    if (type(base) is cst.Name and base.value in aliases) or self._kind(base) == ("flags", "FLAGS"):
                        return i
        return None

    def _insert_parse_before(self, original: cst.Module, body: list, at: int) -> list:
        parse = cst.SimpleStatementLine(
            body=[cst.Expr(cst.parse_expression(f"{self.flags_expr}.FLAGS(sys.argv, known_only=True)"))]
        )
        self.ctx.require_import("sys")
        self._parse_inserted = True
        self.report(
            original.body[at],
            "flags are parsed explicitly (`FLAGS(sys.argv, known_only=True)`) before this first read at"
            " import time: absl parses them only in app.run(), tf.app.flags did on first access",
            fixed=True,
            severity="info",
        )
        return [*body[:at], parse, *body[at:]]

    def _insert_parse(self, original: cst.Module, body: list) -> list:
        """No app.run(): parse the command line explicitly, as tf.app.flags did on
        first access: after the last top-level DEFINE_*, else first thing in the
        ``if __name__ == "__main__":`` block."""
        parse = cst.SimpleStatementLine(
            body=[cst.Expr(cst.parse_expression(f"{self.flags_expr}.FLAGS(sys.argv, known_only=True)"))]
        )
        if self._last_define is not None:
            at = self._last_define
            body = [*body[: at + 1], parse, *body[at + 1 :]]
        elif self._main_guard is not None and isinstance(body[self._main_guard].body, cst.IndentedBlock):
            at = self._main_guard
            guard = body[at]
            block = guard.body.with_changes(body=[parse, *guard.body.body])
            body = [*body[:at], guard.with_changes(body=block), *body[at + 1 :]]
        else:
            return body
        self.ctx.require_import("sys")
        self._parse_inserted = True
        self.report(
            original.body[at],
            "flags are parsed explicitly (`FLAGS(sys.argv, known_only=True)`): absl parses them"
            " only in app.run(), tf.app.flags did on first access",
            fixed=True,
            severity="info",
        )
        return body

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if id(node) in self._top_index:
            self._current_top = node

    # what a TF expression is: ("flags"|"app"|"run"|"", rest)
    def _kind(self, node: cst.CSTNode) -> tuple[str, str]:
        c = tf_canonical(self.ctx.names.full_name(node))
        if c is None:
            return "", ""
        for prefix in ("app.flags", "flags"):
            if c == prefix:
                return "flags", ""
            if c.startswith(prefix + "."):
                return "flags", c[len(prefix) + 1 :]
        if c == "app":
            return "app", ""
        if c == "app.run":
            return "run", ""
        return "", ""

    def _use(self, which: str) -> None:
        expr = self.flags_expr if which == "flags" else self.app_expr
        if expr.startswith("absl."):
            self.ctx.require_import(expr)
        else:
            self.ctx.require_import("absl", expr)

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value == "__flags":
            self._report_dunder_flags(node)
        return self._kind(node)[0] == ""

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute):
        return self._rewrite(original_node, updated_node)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name):
        return self._rewrite(original_node, updated_node)

    def _rewrite(self, original, updated):
        kind, rest = self._kind(original)
        if kind == "flags":
            self._use("flags")
            if self._first_flags_ref is None and rest:
                self._first_flags_ref = original
            new = self.flags_expr + ("." + rest if rest else "")
        elif kind == "app" and not self.keep_tf_app:
            self._use("app")
            new = self.app_expr
        else:
            return updated
        return attribute_chain(new)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call):
        kind, rest = self._kind(original_node.func)
        func = dotted(original_node.func) or ""
        if kind == "run" or func in ("app.run", "absl.app.run"):
            self._run_seen = True
        if kind == "flags" and rest.startswith("DEFINE"):
            if self._current_top is not None:
                self._last_define = self._top_index[id(self._current_top)]
            args = [
                a.with_changes(keyword=cst.Name(_DEFINE_KEYWORDS[a.keyword.value]))
                if a.keyword is not None and a.keyword.value in _DEFINE_KEYWORDS
                else a
                for a in updated_node.args
            ]
            name = next((a.value for a in args if a.keyword is None or a.keyword.value == "name"), None)
            if (
                isinstance(name, cst.SimpleString)
                and name.evaluated_value in ABSL_OWN_FLAGS
                and not any(a.keyword is not None and a.keyword.value == "allow_override" for a in args)
            ):
                # absl defines it already (absl.logging, imported by TensorFlow):
                # a second definition raises DuplicateFlagError at import
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(cst.Arg(keyword=cst.Name("allow_override"), value=cst.Name("True"),
                                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                          whitespace_after=cst.SimpleWhitespace(""))))
                self.report(original_node, f"--{name.evaluated_value} is also a flag of absl's own (absl.logging,"
                            " which TensorFlow 2 imports): defined with allow_override=True, as a second"
                            " definition raises DuplicateFlagError", fixed=True, severity="info")
            return updated_node.with_changes(args=args)
        if kind != "run":
            return self._explicit_parse(original_node, updated_node)
        if not original_node.args and not self.has_main:
            self.report(
                original_node,
                "`tf.app.run()` without arguments calls the `main` of `__main__`;"
                " this module defines no `main`",
                hint="call `app.run(<your main function>)` with `from absl import app`",
                fixed=False,
            )
            return updated_node
        args = list(updated_node.args) or [cst.Arg(cst.Name("main"))]
        self._use("app")
        if self.tolerant and not any(a.keyword and a.keyword.value == "flags_parser" for a in args):
            self._use("flags")
            args[-1] = args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            args.append(
                cst.Arg(
                    keyword=cst.Name("flags_parser"),
                    value=cst.parse_expression(f"lambda argv: {self.flags_expr}.FLAGS(argv, known_only=True)"),
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                    ),
                )
            )
        return updated_node.with_changes(func=attribute_chain(self.app_expr + ".run"), args=args)

    def _explicit_parse(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """Explicit parsing: ``FLAGS(argv)`` / ``FLAGS.mark_as_parsed()`` count as the
        parse; TF <= 1.4's ``FLAGS._parse_flags()`` (parse_known_args of sys.argv)
        becomes its exact absl form ``FLAGS(sys.argv, known_only=True)``."""
        func = original.func
        func_name = dotted(func) or ""
        if self._kind(func) == ("flags", "FLAGS") or func_name.endswith("FLAGS") or isinstance(func, cst.Attribute) and func.attr.value == "mark_as_parsed":
            self._run_seen = True
        elif (
            isinstance(func, cst.Attribute)
            and func.attr.value == "_parse_flags"
            and (dotted(func.value) or "").endswith("FLAGS")
            and not original.args
        ):
            self._run_seen = True
            self.ctx.require_import("sys")
            self.report(original, "`FLAGS._parse_flags()` -> `FLAGS(sys.argv, known_only=True)`", fixed=True)
            owner = updated.func.value if isinstance(updated.func, cst.Attribute) else updated.func
            return cst.Call(func=owner, args=cst.parse_expression("f(sys.argv, known_only=True)").args)
        return updated

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # FLAGS.__dict__["__flags"]
        if node.value.strip("\"'") == "__flags":
            self._report_dunder_flags(node)

    def _report_dunder_flags(self, node: cst.CSTNode) -> None:
        self.report(
            node,
            "`FLAGS.__flags` is a TF <= 1.4 internal (a dict of values then, of Flag objects later)",
            hint="use `FLAGS.flag_values_dict()` for a {name: value} dict",
            fixed=False,
        )

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if original_node is self._current_top:
            self._current_top = None
        # `flags = tf.app.flags`: the absl import replaces it
        if len(original_node.body) == 1 and isinstance(original_node.body[0], cst.Assign):
            assign = original_node.body[0]
            if (
                len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)
                and assign.targets[0].target.value == self.flags_expr
                and self._kind(assign.value) == ("flags", "")
            ):
                self._use("flags")
                if self._first_flags_ref is None and self._main_guard is not None:
                    # `flags = tf.app.flags` in a program: its flags are read through
                    # this alias (now absl's module), so they need parsing as any others
                    self._first_flags_ref = original_node
                # removed by the enclosing block, which keeps its blank lines/comments
                marker = updated_node.with_changes(body=[cst.Pass()])
                self._removed.add(id(marker))
                return marker
        return updated_node

    def _drop_removed(self, body):
        out, carry = [], []
        for stmt in body:
            if id(stmt) in self._removed:
                carry.extend(stmt.leading_lines)
                continue
            if carry:
                stmt = stmt.with_changes(leading_lines=[*carry, *stmt.leading_lines])
                carry = []
            out.append(stmt)
        return out

    def leave_IndentedBlock(self, original_node, updated_node):
        if not self._removed:
            return updated_node
        body = self._drop_removed(updated_node.body)
        if not body:
            body = [cst.SimpleStatementLine(body=[cst.Pass()])]
        return updated_node.with_changes(body=body)

    def leave_Module(self, original_node, updated_node):
        body = list(updated_node.body)
        if self._early_read is not None and len(body) == len(original_node.body):
            body = self._insert_parse_before(original_node, body, self._early_read)
        elif not self._run_seen and self._first_flags_ref is not None:
            body = self._insert_parse(original_node, body)
        if self._removed:
            body = self._drop_removed(body)
        return updated_node.with_changes(body=body)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom):
        def drop(full: str) -> bool:
            c = tf_canonical(full)
            if c in ("flags", "app.flags"):
                self._use("flags")
                return True
            if c == "app" and not self.keep_tf_app:
                self._use("app")
                return True
            return False

        return remove_tf_import_aliases(updated_node, drop)
