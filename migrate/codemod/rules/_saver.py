"""What a ``tf.train.Saver(...)`` call was made with, for the rules that carry
a program's own checkpoints over to ``tf.train.Checkpoint`` (TFM301's hand
saves, TFM303's tower programs): only a Saver of all the variables maps onto
the migration's checkpoint of the step counter, optimizer and model."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.rules import _cst as C

_ALL_VARIABLES = {"global_variables", "all_variables"}


def saver_settings(call: cst.Call, qualname, accepted: tuple[str, ...],
                   ignored: frozenset[str] = frozenset()) -> dict[str, str] | cst.Arg:
    """The ``accepted`` keywords of a Saver of all the variables (``Saver()``,
    ``Saver(tf.global_variables())``), by keyword, as code; arguments in
    ``ignored`` are let through. Else the first argument that is neither."""
    settings: dict[str, str] = {}
    for k, arg in enumerate(call.args):
        keyword = None if arg.star else (arg.keyword.value if arg.keyword is not None else
                                         ("var_list" if k == 0 else None))
        if keyword == "var_list" and isinstance(arg.value, cst.Call) and qualname(arg.value.func) in _ALL_VARIABLES \
                and not arg.value.args:
            continue
        if keyword in accepted:
            settings[keyword] = C.code_of(arg.value)
        elif keyword not in ignored:
            return arg
    return settings
