"""The option that chooses between synchronous and asynchronous training in
a legacy ps/worker script, and how ``check`` launches the legacy job so it
trains the way its migration does.

Scripts of the TF1 distributed-MNIST family build a ``SyncReplicasOptimizer``
only under an option (``if FLAGS.sync_replicas:``, ``is_sync = FLAGS.is_sync
== 1; if is_sync:``, ``if args.mode == "sync":``) whose default is often the
asynchronous mode. A sync strategy (MultiWorkerMirroredStrategy) reproduces
the sync branch only, and ParameterServerStrategy the async one: compared
with the script at its default, a correct migration of the other branch would
differ from step 1. ``check`` runs the legacy job in the mode the migration
carries and says so in the report, with the line of the switch: that the
default mode is not what the migration trains is a real semantic difference
the user must know about (the codemod reports it too).

Never imports TensorFlow.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["SyncSwitch", "find_sync_switch"]

_SYNC_OPTIMIZERS = ("SyncReplicasOptimizer", "SyncReplicasOptimizerV2")
_DEFINE_PREFIX = "DEFINE_"
# options and values that say which task a process is, not how it trains
_ROLE_OPTIONS = frozenset({"job_name", "job_type", "job", "task_type", "role", "task_index", "task_id", "task"})
_ROLE_NAMES = frozenset({"ps", "worker", "chief", "master", "evaluator"})


@dataclass(frozen=True)
class SyncSwitch:
    """An option whose value selects the branch building a SyncReplicasOptimizer."""

    option: str  # as the script spells it (no leading dashes)
    # the value selecting the sync branch; True/False: a truth test (`if FLAGS.x:`,
    # `if not FLAGS.async_mode:`, or the optimizer in the `else:` branch)
    sync_value: object
    default: object  # the option's default
    kind: str  # "absl_bool" | "store_true" | "argparse_bool" | "value"
    line: int  # the `if` choosing the branch
    optimizer_line: int  # where the branch builds the SyncReplicasOptimizer

    @property
    def default_is_sync(self) -> bool:
        return _selects(self.default, self.sync_value)

    def argument(self, sync: bool) -> str | None:
        """The command-line argument putting the script in sync (or async)
        mode; None where the script's parser cannot express it."""
        flag = f"--{self.option}"
        if isinstance(self.sync_value, bool):
            truth = self.sync_value == sync  # the option's truth value wanted
            if self.kind == "store_true":
                return flag if truth else None
            if self.kind == "absl_bool":
                return f"{flag}={'true' if truth else 'false'}"
            if self.kind == "argparse_bool":
                # argparse's type=bool is bool(text): only the empty string is false
                return f"{flag}=True" if truth else f"{flag}="
            return f"{flag}={1 if truth else 0}"
        if sync:
            return f"{flag}={self.sync_value}"
        if isinstance(self.sync_value, int):
            return f"{flag}={0 if self.sync_value != 0 else 1}"
        return None  # a string mode ("sync"): which other value means async is the script's business

    def as_dict(self) -> dict:
        return {
            "option": self.option,
            "sync_value": self.sync_value,
            "default": self.default,
            "line": self.line,
            "optimizer_line": self.optimizer_line,
        }


def _selects(value: object, sync_value: object) -> bool:
    if isinstance(sync_value, bool):
        return bool(value) == sync_value
    return value == sync_value


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _Unknown


class _Unknown:
    """A default that is not a literal."""


def _definitions(tree: ast.Module) -> dict[str, tuple[str, object, str]]:
    """option (``-`` as ``_``) -> (spelling, default, kind), for absl/tf.app
    ``DEFINE_*`` and argparse ``add_argument``."""
    found: dict[str, tuple[str, object, str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if name.startswith(_DEFINE_PREFIX):
            spelled = _string(node.args[0]) if node.args else _string(keywords.get("name"))
            if not spelled:
                continue
            default = node.args[1] if len(node.args) > 1 else keywords.get("default")
            kind = "absl_bool" if name in ("DEFINE_bool", "DEFINE_boolean") else "value"
            found.setdefault(spelled.replace("-", "_"), (spelled, _literal(default), kind))
        elif name == "add_argument":
            spelled = next(
                (s[2:] for s in map(_string, node.args) if s and s.startswith("--") and len(s) > 2), None
            )
            if not spelled:
                continue
            action = _string(keywords.get("action"))
            type_name = getattr(keywords.get("type"), "id", None)
            if action in ("store_true", "store_false"):
                default = _literal(keywords["default"]) if "default" in keywords else action == "store_false"
                kind = "store_true" if action == "store_true" else "value"
                if action == "store_false":
                    continue  # an option that can only switch something off
            else:
                default = _literal(keywords.get("default"))
                kind = "argparse_bool" if type_name == "bool" else "value"
            found.setdefault(spelled.replace("-", "_"), (spelled, default, kind))
    return found


def _aliases(tree: ast.Module) -> dict[str, ast.AST]:
    """Names bound once to an expression (``is_sync = FLAGS.is_sync == 1``)."""
    bound: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in bound.items() if len(values) == 1}


def _condition(test: ast.AST, options: dict, aliases: dict, depth: int = 0) -> tuple[str, object] | None:
    """(option, value selecting the body) for a test on one option: a truth
    test (``FLAGS.x``, ``args.x``, a local bound to one) or an equality with
    a literal (``FLAGS.x == 1``, ``mode == "sync"``)."""
    if depth > 3:
        return None
    if isinstance(test, ast.Attribute) and test.attr in options:
        return (test.attr, True)
    if isinstance(test, ast.Name):
        if test.id in aliases:
            return _condition(aliases[test.id], options, aliases, depth + 1)
        return None
    if isinstance(test, ast.Call) and _call_name(test) in ("int", "bool") and len(test.args) == 1:
        return _condition(test.args[0], options, aliases, depth + 1)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _condition(test.operand, options, aliases, depth + 1)
        if inner is not None and isinstance(inner[1], bool):
            return (inner[0], not inner[1])
        return None
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
    ):
        inner = _condition(test.left, options, aliases, depth + 1)
        if inner is not None and inner[1] is True and not isinstance(test.comparators[0].value, bool):
            return (inner[0], test.comparators[0].value)
    return None


def _builds_sync_optimizer(statements: list[ast.stmt]) -> ast.Call | None:
    return next(
        (
            sub for stmt in statements for sub in ast.walk(stmt)
            if isinstance(sub, ast.Call) and _call_name(sub) in _SYNC_OPTIMIZERS
        ),
        None,
    )


def find_sync_switch(tree: ast.Module) -> SyncSwitch | None:
    """The option whose ``if`` branch builds the script's SyncReplicasOptimizer
    (the first such branch), or None."""
    options = _definitions(tree)
    if not options:
        return None
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        in_body, in_else = _builds_sync_optimizer(node.body), _builds_sync_optimizer(node.orelse)
        if (in_body is None) == (in_else is None):
            continue  # neither branch, or both: the option does not choose the mode
        condition = _condition(node.test, options, aliases)
        if condition is None:
            continue
        option, value = condition
        built = in_body or in_else
        if in_else is not None:
            if not isinstance(value, bool):
                continue  # `!= "sync"`-like negations of a mode are not read
            value = not value
        if option in _ROLE_OPTIONS or value in _ROLE_NAMES:
            continue  # the worker's branch of a role test: an enclosing `if`, not a mode
        spelled, default, kind = options[option]
        if default is _Unknown:
            continue
        return SyncSwitch(spelled, value, default, kind, node.lineno, built.lineno)
    return None
