"""TFM301, a TF1 ``Saver`` used by hand in the session's code (analysis and
emitted code).

The shape people wrote around a session::

    saver = tf.train.Saver(max_to_keep=3)
    ...
    latest = tf.train.latest_checkpoint(train_dir)
    if latest:
        saver.restore(sess, latest)
    while step < last_step:
        ...
        if step % 100 == 0:
            saver.save(sess, os.path.join(train_dir, "model.ckpt"), global_step=step)

``Saver.save`` wrote every global variable as ``<path>-<step>``, kept the
``max_to_keep`` (5) newest it wrote and listed them in the directory's
``checkpoint`` file, which ``tf.train.latest_checkpoint`` and
``tf.train.get_checkpoint_state`` read; ``Saver.restore`` read them all back.
In TF2 the migration's ``tf.train.Checkpoint`` (step counter, optimizer, model,
moving averages: what the Saver held) saved by a ``tf.train.CheckpointManager``
of the same directory, name and count writes the same files and the same
``checkpoint`` file, at the same steps; the restore reads them (or the TF1
job's own checkpoint, by name, as the migration's restore-on-start does:
``_legacy_restore``). Both calls keep their place in the loop (their
guards, their prints).

Declined, with the statement and why: a Saver of some variables only, other
Saver options, a save without ``global_step`` (TF1 wrote ``<path>`` itself and
listed it as the latest; a manager numbers what it writes), and any other use
of the saver (handed to a function, its ``last_checkpoints`` read).
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._saver import saver_settings

# Saver arguments that change only how the files are laid out or kept
_LAYOUT_ARGS = {"sharded", "write_version", "pad_step_number", "save_relative_paths", "filename"}


class HandSaver(NamedTuple):
    """A Saver the migration carries over: its save and restore statements."""

    name: str
    made: cst.CSTNode  # the statement binding it
    max_to_keep: str
    every_n_hours: str | None
    saves: dict[int, cst.SimpleStatementLine]  # id -> `saver.save(sess, path, global_step=n)`
    restores: dict[int, cst.SimpleStatementLine]  # id -> `saver.restore(sess, path)`


def savers_made(statements, qualname) -> dict[str, cst.SimpleStatementLine]:
    """``name = tf.train.Saver(...)`` statements of ``statements`` (at any depth)."""
    out: dict[str, cst.SimpleStatementLine] = {}
    for statement in statements:
        for node in C.walk(statement):
            if not isinstance(node, cst.SimpleStatementLine):
                continue
            names, value, _ = C.assignment(node)
            if len(names) == 1 and isinstance(value, cst.Call) and qualname(value.func) == "train.Saver":
                out[names[0]] = node
    return out


def read_by_hand(name: str, node: cst.CSTNode) -> bool:
    """Whether ``node`` reads ``name`` otherwise than as the ``saver=`` of a
    TF1 construct (a Supervisor's, a Scaffold's, a CheckpointSaverHook's:
    its checkpointing is the session's, which the migration maps itself)."""
    handed = {id(a.value) for a in C.walk(node) if isinstance(a, cst.Arg) and a.keyword is not None
              and a.keyword.value == "saver" and isinstance(a.value, cst.Name) and a.value.value == name}
    if not handed:
        return name in C.names_used(node)
    not_reads = {id(n.attr) for n in C.walk(node) if isinstance(n, cst.Attribute)} | {
        id(n.keyword) for n in C.walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return any(isinstance(n, cst.Name) and n.value == name and id(n) not in handed | not_reads
               for n in C.walk(node))


def _uses(name: str, statements, made: cst.CSTNode) -> list[cst.CSTNode]:
    """The simple statements of ``statements`` reading ``name`` by hand (and
    compound statements reading it in their head), besides its binding."""
    out = []
    for statement in statements:
        for node in C.walk(statement):
            if isinstance(node, cst.SimpleStatementLine) and node is not made and read_by_hand(name, node):
                out.append(node)
            elif isinstance(node, cst.BaseCompoundStatement) and not isinstance(node, cst.FunctionDef):
                # a saver read in a loop's or an if's test, a `with` item
                head = [getattr(node, "test", None), getattr(node, "iter", None),
                        *(i.item for i in getattr(node, "items", ()))]
                if any(h is not None and read_by_hand(name, h) for h in head):
                    out.append(node)
    return out


def _saver_call(statement, name: str) -> tuple[cst.Call, str | None] | None:
    """(the call, the name its result is bound to) for a statement that is
    `name.save(...)`/`name.restore(...)`, or `x = name.save(...)`."""
    call = C.single_expr(statement)
    target = None
    if call is None:
        names, value, assign = C.assignment(statement)
        if assign is None or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        call, target = value, names[0]
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name) and call.func.value.value == name):
        return None
    return call, target


def plan(name: str, made: cst.SimpleStatementLine, statements, sessions: set[str], qualname,
         monitored: set[str] = frozenset()):
    """A HandSaver for ``name`` bound by ``made`` and used in ``statements``
    (``sessions``: the TF1 sessions, ``monitored`` those of a MonitoredSession
    kind); else (the node, why it cannot be carried over)."""
    _, call, _ = C.assignment(made)
    settings = saver_settings(call, qualname, ("max_to_keep", "keep_checkpoint_every_n_hours"), _LAYOUT_ARGS)
    if isinstance(settings, cst.Arg):
        return made, (f"its Saver is made with `{C.code_of(settings).strip().rstrip(',')}`: TFM301 carries over a Saver"
                      " of all the variables (`tf.train.Saver()` or `tf.train.Saver(tf.global_variables())`,"
                      " optionally max_to_keep= or keep_checkpoint_every_n_hours=), which the migration's"
                      " tf.train.Checkpoint of the step counter, optimizer and model holds")
    max_to_keep, every_n_hours = settings.get("max_to_keep", "5"), settings.get("keep_checkpoint_every_n_hours")
    saves: dict[int, cst.SimpleStatementLine] = {}
    restores: dict[int, cst.SimpleStatementLine] = {}
    shape = ("`saver.save(sess, path, global_step=step)` or `saver.restore(sess, path)` statements in the"
             " session's code")
    for use in _uses(name, statements, made):
        found = _saver_call(use, name) if isinstance(use, cst.SimpleStatementLine) else None
        if found is None or found[0].func.attr.value not in ("save", "restore"):
            return use, (f"it uses the Saver `{name}` otherwise than in {shape}, the uses the migration maps onto"
                         " its tf.train.Checkpoint")
        call, target = found
        method = call.func.attr.value
        session = C.arg(call, 0, "sess")
        path = C.arg(call, 1, "save_path")
        if not (isinstance(session, cst.Name) and session.value in sessions) or path is None or any(
                a.star for a in call.args):
            return use, (f"its `{name}.{method}(...)` does not name the training session and a path: TFM301 maps"
                         f" {shape}")
        if method == "save" and session.value in monitored:
            # Saver.save checks for a tf.Session; a MonitoredSession is none
            return use, (f"its `{name}.save({session.value}, ...)` is given a MonitoredSession, which TF1's"
                         " Saver.save refuses (TypeError: 'sess' must be a Session): the TF1 program failed here,"
                         " and a migration that saves would not do what it did")
        if method == "restore":
            if len(call.args) != 2 or target is not None:
                return use, f"its `{name}.restore(...)` is not a statement `{name}.restore(sess, path)`"
            restores[id(use)] = use
            continue
        known = {"sess", "save_path", "global_step", "write_meta_graph"}
        keywords = [a.keyword.value for a in call.args if a.keyword is not None]
        positional = [a for a in call.args if a.keyword is None]
        if len(positional) > 3 or set(keywords) - known:
            extra = ", ".join(f"`{k}=`" for k in sorted(set(keywords) - known)) or "more positional arguments"
            return use, (f"its `{name}.save(...)` passes {extra}: TFM301 maps a save of the session, a path and"
                         " the step number (`write_meta_graph=` aside: TF2 has no graph to write)")
        if C.arg(call, 2, "global_step") is None:
            return use, (f"its `{name}.save(sess, path)` has no global_step: TF1 wrote `path` itself and listed it"
                         " as the directory's latest checkpoint, which a tf.train.CheckpointManager (numbering what"
                         " it writes) does not reproduce")
        saves[id(use)] = use
    if not saves and not restores:
        return made, f"the Saver `{name}` is never used in {shape}"
    return HandSaver(name, made, max_to_keep, every_n_hours, saves, restores)


def function_code(saver: HandSaver, checkpoint: str, function: str) -> str:
    """Source of the function saving ``checkpoint`` as ``saver.save`` did."""
    every = f", keep_checkpoint_every_n_hours={saver.every_n_hours}" if saver.every_n_hours is not None else ""
    return (
        f"def {function}(path, number):\n"
        f"    # Saved as <path>-<number>; the {saver.max_to_keep} newest are kept and listed in the\n"
        "    # directory's checkpoint file (tf.train.latest_checkpoint reads it).\n"
        "    manager = tf.train.CheckpointManager(\n"
        f"        {checkpoint}, os.path.dirname(path), max_to_keep={saver.max_to_keep}{every},"
        " checkpoint_name=os.path.basename(path))\n"
        "    return manager.save(checkpoint_number=number)\n"
    )


def rewritten(original, updated, saver: HandSaver, checkpoint: str, function: str, restore):
    """``updated`` (the rewritten ``original``, one of the saver's statements)
    with its save or restore done through the checkpoint (``restore(path)``:
    the code restoring a path)."""
    call, target = _saver_call(updated, saver.name)
    path = C.code_of(C.arg(call, 1, "save_path"))
    if id(original) in saver.restores:
        code = restore(path)
    else:
        code = f"{function}({path}, {C.code_of(C.arg(call, 2, 'global_step'))})"
    if target is not None:
        code = f"{target} = {code}"
    new = C.stmt(code + "\n")
    return new.with_changes(leading_lines=updated.leading_lines, trailing_whitespace=updated.trailing_whitespace)
