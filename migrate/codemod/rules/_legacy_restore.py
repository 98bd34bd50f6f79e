"""Resuming a migrated job from the checkpoint its TF1 job left (TFM301's emitted code).

A team migrating a running job starts the migrated program on the legacy job's
checkpoint directory. What is there is a TF1 *name-based* checkpoint
(``tf.compat.v1.train.Saver``: one value per variable name, no object graph);
``tf.train.Checkpoint.restore`` falls back to matching such a checkpoint by name
but, with a Keras 3 optimizer in the checkpoint, leaves it unable to build its
slots (the first step raises ``AssertionError``), and it never sees a TF1 name
the migration changed (``make_template``'s ``model/`` scope). TensorFlow's
guide (guide/migrate/migrating_checkpoints, "Load a TF1 checkpoint in TF2")
reads the values with ``tf.train.load_checkpoint`` and assigns them; the
emitted helper does that when the newest checkpoint has no object graph, and
restores a TF2 checkpoint as before otherwise::

    if checkpoint_manager is not None and checkpoint_manager.latest_checkpoint:
        restore_checkpoint(checkpoint, checkpoint_manager.latest_checkpoint,
                           [global_step, hid_w, hid_b], opt)

Each variable (and moving-average shadow) takes the value saved under its TF1
name (eager variables keep the names TF1's graph gave them, except the repeats
TF1 numbered ``name_1``, ..., which the helper numbers the same way, in
creation order). A Keras optimizer's
``iterations`` (its schedule's step) continue from TF1's ``global_step``, unless
its per-variable state starts afresh (TF1's slots are not carried over: a Keras
optimizer has no public accessor for its own) and its rate is constant: then
the optimizer starts afresh as a whole (Adam's bias correction with it).
Nothing is dropped silently: a variable the checkpoint lacks raises, what the
checkpoint holds that the program does not take (optimizer slots, moving
averages the program dropped) is logged by name, and TFM301 reports at the
optimizer which TF1 slots a resume leaves at their initial values. ``tfmigrate checkpoint convert`` converts such a directory offline.

Fix safety: the helper only runs when a checkpoint exists; a TF2 checkpoint is
restored exactly as before.
"""

from __future__ import annotations

REFERENCE = "https://www.tensorflow.org/guide/migrate/migrating_checkpoints"

# TF1 optimizers whose slots (and non-slot accumulators) are saved in the checkpoint:
# the checkpoint names of what they keep per variable, and what a resume leaves out
SLOTTED_OPTIMIZERS = {
    "MomentumOptimizer": "<variable>/Momentum",
    "AdamOptimizer": "<variable>/Adam, <variable>/Adam_1, beta1_power, beta2_power",
    "AdagradOptimizer": "<variable>/Adagrad",
    "AdadeltaOptimizer": "<variable>/Adadelta, <variable>/Adadelta_1",
    "RMSPropOptimizer": "<variable>/RMSProp, <variable>/RMSProp_1",
    "FtrlOptimizer": "<variable>/Ftrl, <variable>/Ftrl_1",
    "ProximalAdagradOptimizer": "<variable>/ProximalAdagrad",
    "AdagradDAOptimizer": "<variable>/AdagradDA, <variable>/AdagradDA_1, <name>_global_step",
}


def helper_code(name: str, scope: str | None, continue_iterations: bool) -> str:
    """The module-level restore function: `scope` is the scope the migration
    put the model's variables in (``make_template("model", ...)``'s variable
    scope, or the model function's name scope for the ``tf.Variable`` objects
    it records), which TF1's names did not have."""
    signature = "checkpoint, path, variables" + (", optimizer" if continue_iterations else "")
    tf1_name = 'variable.name.split(":")[0]'
    if scope:
        tf1_name += f'.removeprefix("{scope}/")'
    iterations = (
        "    if \"global_step\" in saved:\n"
        "        # the optimizer's step count (its schedule's step) continues from TF1's\n"
        "        optimizer.iterations.assign(reader.get_tensor(\"global_step\"))\n"
        if continue_iterations else ""
    )
    return (
        f"def {name}({signature}):\n"
        # one line: the module's indentation may not be 4 spaces, and the rest of a docstring keeps its own
        "    \"\"\"Restores `checkpoint` from `path`, or from the TF1 job's checkpoint by variable name.\"\"\"\n"
        "    reader = tf.train.load_checkpoint(path)\n"
        "    saved = reader.get_variable_to_shape_map()\n"
        "    if \"_CHECKPOINTABLE_OBJECT_GRAPH\" in saved:\n"
        "        checkpoint.restore(path)\n"
        "        return\n"
        "    by_name, repeats = {}, {}\n"
        "    for variable in variables:\n"
        f"        name = {tf1_name}\n"
        "        # TF1's graph numbered a repeated name: name, name_1, name_2, ...\n"
        "        repeats[name] = repeats.get(name, -1) + 1\n"
        "        by_name[f\"{name}_{repeats[name]}\" if repeats[name] else name] = variable\n"
        "    missing = sorted(set(by_name) - set(saved))\n"
        "    if missing:\n"
        "        raise ValueError(f\"{path} has no value for {', '.join(missing)}\")\n"
        "    for name, variable in by_name.items():\n"
        "        variable.assign(reader.get_tensor(name))\n"
        + iterations +
        "    left = sorted(set(saved) - set(by_name))\n"
        "    if left:\n"
        "        tf.get_logger().warning(\"%s: not restored, nothing in this program takes them: %s\",\n"
        "                                path, \", \".join(left))\n"
    )


def restore_call(helper: str, checkpoint: str, path: str, variables: list[str], optimizer: str | None) -> str:
    listed = ", ".join(variables)
    call = f"{helper}({checkpoint}, {path}, [{listed}]"
    return call + (f", {optimizer})" if optimizer else ")")


def slots_note(optimizer: str, slots: str, step_continues: bool) -> str:
    step = ("its step count continues from TF1's global_step (the learning-rate schedule needs it)" if step_continues
            else "it starts afresh, its step count with it")
    return (
        f"the TF1 {optimizer} kept per-variable state in the checkpoint ({slots}), which the migrated optimizer"
        " keeps in its own form: a migrated job resumed from the TF1 job's checkpoint restores the variables and"
        f" the global step, and the optimizer's state starts at its initial values ({step}; the program logs"
        " the names it leaves out)"
    )
