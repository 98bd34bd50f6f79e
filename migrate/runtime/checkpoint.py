"""``tfmigrate checkpoint convert``: a legacy job's TF1 checkpoint for its migration, and back.

    tfmigrate checkpoint convert SRC_DIR DST_DIR --program migrated.py

SRC_DIR's newest checkpoint decides the direction. A TF1 (name-based,
``tf.compat.v1.train.Saver``) checkpoint becomes a TF2 (object-based)
checkpoint that the migrated program's ``tf.train.Checkpoint`` restores: its
``CheckpointManager`` finds it in DST_DIR as ``ckpt-<global step>``. A TF2
checkpoint of the migrated program becomes a TF1 one (``model.ckpt-<step>``)
the legacy program restores, so the conversion round-trips.

The mapping comes from the migrated program's source (never run): the
``tf.train.Checkpoint(attr=value, ...)`` it saves and how each value is made.

* ``tf.Variable(..., name="N")`` (also the step counter): TF1's variable ``N``;
* a Keras optimizer: its ``iterations`` continue from TF1's ``global_step``
  (TF1's learning rate was a graph constant: the program's own is kept),
  unless TF1's optimizer state is left out and no schedule takes the step:
  then the optimizer starts afresh, as the program's own TF1 restore does;
* ``tf.compat.v1.make_template("scope", model_fn)``: the model's variables,
  by their TF1 names (the template adds ``scope/``); which names ``model_fn``
  creates is only known when it runs, so every TF1 variable not claimed
  otherwise is handed to it, and one it does not create is ignored by its
  restore (the migrated program's own TF1 restore logs such names).

Everything the migration cannot take is printed, never dropped silently:
optimizer slots (TF1 ``<variable>/Momentum``, ``/Adam``, ``beta1_power``: the
Keras optimizers keep their state in another form), moving averages, a
variable of the TF1 checkpoint the program does not have, and a program
variable the checkpoint lacks.

Exit codes (the CLI's): 0 everything mapped, 1 converted with entries left
out (listed), 2 could not convert (no checkpoint, no ``tf.train.Checkpoint``
in the program, a state object this command cannot mirror).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# TF1 optimizer state: slot suffixes (<variable>/<suffix>) and non-slot accumulators
SLOT_SUFFIXES = ("Momentum", "Adam", "Adam_1", "Adagrad", "Adadelta", "Adadelta_1", "RMSProp", "RMSProp_1",
                 "Ftrl", "Ftrl_1", "ProximalAdagrad", "AdagradDA", "AdagradDA_1", "ExponentialMovingAverage")
OPTIMIZER_ACCUMULATORS = ("beta1_power", "beta2_power")


class ConvertError(Exception):
    """The conversion cannot be done; the message says why."""


@dataclass
class ProgramState:
    """What the migrated program's ``tf.train.Checkpoint`` holds, by attribute."""

    variables: dict[str, str] = field(default_factory=dict)  # attribute -> TF1 name
    # Keras optimizers' attributes -> does a schedule take their step count (iterations)?
    optimizers: dict[str, bool] = field(default_factory=dict)
    template: tuple[str, str] | None = None  # (attribute, variable scope)
    unknown: dict[str, str] = field(default_factory=dict)  # attribute -> what makes it


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def program_state(source: str, filename: str = "<program>") -> ProgramState:
    """The checkpointed state of a migrated program, from its source."""
    tree = ast.parse(source, filename)
    checkpoints = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func) == "tf.train.Checkpoint"]
    if not checkpoints:
        raise ConvertError(f"{filename}: no tf.train.Checkpoint(...) in the program")
    if len(checkpoints) > 1:
        raise ConvertError(f"{filename}: {len(checkpoints)} tf.train.Checkpoint(...) calls; this command converts"
                           " a program with one")
    made = _bindings(tree, checkpoints[0])
    state = ProgramState()
    repeats: dict[str, int] = {}
    for keyword in checkpoints[0].keywords:
        attribute, value = keyword.arg, keyword.value
        if attribute is None:
            raise ConvertError(f"{filename}:{keyword.lineno}: tf.train.Checkpoint(**...): attributes not known")
        call = made.get(value.id) if isinstance(value, ast.Name) else None
        kind = _dotted(call.func) if isinstance(call, ast.Call) else ""
        if kind in ("tf.Variable", "tf.compat.v1.Variable"):
            names = [k.value for k in call.keywords if k.arg == "name"]
            name = names[0].value if names and isinstance(names[0], ast.Constant) else "Variable"
            # TF1's graph numbered repeated names: name, name_1, ...
            repeats[name] = repeats.get(name, -1) + 1
            state.variables[attribute] = f"{name}_{repeats[name]}" if repeats[name] else name
        elif kind.startswith(("tf.keras.optimizers.", "keras.optimizers.")):
            rate = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "learning_rate"), None)
            if isinstance(rate, ast.Name) and rate.id in made:
                rate = made[rate.id]
            state.optimizers[attribute] = rate is not None and "schedules." in ast.unparse(rate)
        elif kind == "tf.compat.v1.make_template" and call.args and isinstance(call.args[0], ast.Constant):
            state.template = (attribute, call.args[0].value)
        else:
            state.unknown[attribute] = ast.unparse(call) if call is not None else ast.unparse(value)
    return state


def _bindings(tree: ast.Module, call: ast.Call) -> dict[str, ast.AST]:
    """What each name holds where `call` reads it: the assignments of the
    function that makes the checkpoint (its nested functions and classes
    aside), before the call, else the module's."""
    def assignments(body: list[ast.stmt]) -> dict[str, ast.AST]:
        found: dict[str, ast.AST] = {}
        stack = list(reversed(body))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Assign) and node.lineno < call.lineno and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                found[node.targets[0].id] = node.value
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
        return found

    made = assignments(tree.body)
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and function.lineno <= call.lineno <= (function.end_lineno or function.lineno) \
                and any(node is call for node in ast.walk(function)):
            made.update(assignments(function.body))  # innermost last: ast.walk goes outside in
    return made


@dataclass
class Conversion:
    """Where each value went, and what was left out (and why)."""

    mapped: list[tuple[str, str]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    written: str = ""


def _escape(name: str) -> str:
    # the object graph's escaping of a local name in a checkpoint key
    return name.replace(".", "..").replace("/", ".S")


def _unescape(name: str) -> str:
    return name.replace(".S", "/").replace("..", ".")


def _is_optimizer_state(key: str, keys: set[str]) -> bool:
    owner, _, suffix = key.rpartition("/")
    return key in OPTIMIZER_ACCUMULATORS or (suffix in SLOT_SUFFIXES and owner in keys)


def tf1_to_tf2(source_path: str, destination: Path, state: ProgramState) -> Conversion:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(source_path)
    keys = set(reader.get_variable_to_shape_map())
    out = Conversion()
    if state.unknown:
        raise ConvertError(
            "the program checkpoints state this command cannot mirror from its source: " + ", ".join(
                f"{attribute}={made}" for attribute, made in state.unknown.items())
            + " (a model whose variables are known only when it runs: start the migrated program on the TF1"
            " directory instead, it restores the TF1 checkpoint by variable name itself)")
    children: dict[str, object] = {}
    claimed: set[str] = set()
    for attribute, name in state.variables.items():
        if name not in keys:
            out.left_out.append((f"program variable {attribute} (TF1 name {name})", "not in the checkpoint"))
            continue
        children[attribute] = tf.Variable(reader.get_tensor(name))
        claimed.add(name)
        out.mapped.append((name, attribute))
    fresh_state = any(_is_optimizer_state(key, keys) for key in keys)
    for attribute, scheduled in state.optimizers.items():
        # as the migrated program's own TF1 restore: the step count continues, unless the
        # optimizer's state starts afresh and no schedule needs the step (Adam's bias correction)
        if "global_step" in keys and (scheduled or not fresh_state):
            children[attribute] = tf.train.Checkpoint(_iterations=tf.Variable(reader.get_tensor("global_step")))
            out.mapped.append(("global_step", f"{attribute}.iterations"))
    if state.optimizers:
        claimed.add("global_step")  # the optimizers' iterations took it
    rest = sorted(keys - claimed)
    model: dict[str, object] = {}
    for key in rest:
        if _is_optimizer_state(key, keys):
            out.left_out.append((key, "TF1 optimizer state: the migrated optimizer keeps its own, started afresh"))
        elif state.template is None:
            out.left_out.append((key, "the program has no variable of this name"))
        else:
            model[key] = tf.Variable(reader.get_tensor(key))
            out.mapped.append((key, f"{state.template[0]}/{key} (scope {state.template[1]}/)"))
    if model:
        children[state.template[0]] = tf.train.Checkpoint(**model)
    step = int(reader.get_tensor("global_step")) if "global_step" in keys else None
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(**children), str(destination), max_to_keep=5)
    out.written = manager.save(checkpoint_number=step)
    return out


def tf2_to_tf1(source_path: str, destination: Path, state: ProgramState) -> Conversion:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(source_path)
    out = Conversion()
    by_attribute = dict(state.variables)
    values: dict[str, object] = {}
    for key in sorted(reader.get_variable_to_shape_map()):
        if key == OBJECT_GRAPH_KEY or not key.endswith(VALUE_SUFFIX):
            continue
        path = key[: -len(VALUE_SUFFIX)]
        head, _, tail = path.partition("/")
        if head in by_attribute and not tail:
            name = by_attribute[head]
        elif state.template is not None and head == state.template[0] and tail:
            name = _unescape(tail)
        elif path == "save_counter":
            continue  # the TF2 checkpoint's own count of saves
        elif head in state.optimizers and tail == "_iterations":
            continue  # TF1's global_step, saved with the step counter
        else:
            why = "no TF1 variable holds it (optimizer state, or not in the program's variables and model)"
            out.left_out.append((path, why))
            continue
        values[name] = tf.Variable(reader.get_tensor(key))
        out.mapped.append((_unescape(path), name))
    if not values:
        raise ConvertError(f"{source_path}: nothing of the program's variables in this checkpoint")
    step = int(values["global_step"].numpy()) if "global_step" in values else None
    saver = tf.compat.v1.train.Saver(var_list=values, max_to_keep=5)
    destination.mkdir(parents=True, exist_ok=True)
    out.written = saver.save(None, str(destination / "model.ckpt"), global_step=step)
    return out


def convert(source: Path, destination: Path, program: Path) -> tuple[Conversion, str]:
    """Converts SRC's newest checkpoint; returns the mapping and the direction."""
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(source))
    if latest is None:
        raise ConvertError(f"{source}: no checkpoint (no 'checkpoint' file naming one)")
    state = program_state(program.read_text(), str(program))
    if OBJECT_GRAPH_KEY in tf.train.load_checkpoint(latest).get_variable_to_shape_map():
        return tf2_to_tf1(latest, destination, state), "TF2 -> TF1"
    return tf1_to_tf2(latest, destination, state), "TF1 -> TF2"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfmigrate checkpoint", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    conv = commands.add_parser("convert", help="convert a checkpoint directory (TF1 <-> the migrated program's TF2)")
    conv.add_argument("source", type=Path, help="directory of the checkpoint to convert (its newest one)")
    conv.add_argument("destination", type=Path, help="directory to write the converted checkpoint into")
    conv.add_argument("--program", type=Path, required=True, help="the migrated program (its source is read)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        conversion, direction = convert(args.source, args.destination, args.program)
    except (ConvertError, OSError, SyntaxError) as e:
        print(f"tfmigrate checkpoint: {e}", file=sys.stderr)
        return 2
    print(f"{direction}: {conversion.written}")
    for src, dst in conversion.mapped:
        print(f"  {src} -> {dst}")
    for what, why in conversion.left_out:
        print(f"  LEFT OUT {what}: {why}")
    return 1 if conversion.left_out else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
