"""Generate ``migrate/codemod/data/tf_api.json`` from the installed TensorFlow (dev-time only).

The codemod never imports TensorFlow; it reads the JSON this script writes:

- ``v2``: public names of the TF2 root API (``tf.X``), modules included.
- ``v1``: public names of ``tf.compat.v1`` (what TF1 code could spell as ``tf.X``).
- ``same``: v1 names whose object *is* the TF2 object of the same name, so
  ``tf.compat.v1.X`` can be spelled ``tf.X`` without changing behaviour.
- ``renames``: tf_upgrade_v2's renames (``all_renames_v2.symbol_renames``) to a
  non-compat TF2 name, kept only when the target *is* the v1 object
  (``log`` -> ``math.log``); argument-changing renames are left to compat.v1.
- ``contrib_renames``: tf_upgrade_v2's ``tf.contrib.X`` renames whose target
  exists in TF 2.21 (``contrib.cluster_resolver.TFConfigClusterResolver`` ->
  ``distribute.cluster_resolver.TFConfigClusterResolver``).
- ``keras2_only``: compat.v1 modules served by Keras 2 only (``layers``,
  ``nn.rnn_cell``): unavailable with Keras 3, the TF 2.21 default.
- ``pre1``: names TensorFlow removed or renamed before 1.0 (``scalar_summary``,
  ``train.SummaryWriter``, ``mul``) -> their TF 1.x successor (a ``tf.compat.v1``
  name), with the old positional parameters and keyword renames when the call
  changed (:data:`PRE_1_0`); ``new`` is the successor's parameter list, read
  from the installed TensorFlow. ``removed`` says the old name is in neither
  API any more.
- ``reorders``: TF 1.x names whose positional argument order changed in 1.0
  (``concat(concat_dim, values)`` -> ``concat(values, axis)``), same format.

Names are relative to the TF root (``"train.Server"``). Run::

    python scripts/gen_tf_api.py            # writes migrate/codemod/data/tf_api.json
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "migrate" / "codemod" / "data" / "tf_api.json"


# Public namespaces that are plain modules rather than generated _api modules.
_PUBLIC_MODULES = ("tensorflow.experimental", "tensorflow.dtensor", "tensorflow.security")


def _is_api_module(obj) -> bool:
    if not isinstance(obj, types.ModuleType):
        return False
    name = getattr(obj, "__name__", "") or ""
    return name.startswith("tensorflow._api.") or name.startswith(_PUBLIC_MODULES)


def _is_keras_loader(obj) -> bool:
    return type(obj).__name__ == "KerasLazyLoader"


def walk(root, prefix: str = "", seen=None, out=None, keras_loaders=None):
    """Public names under ``root``: {dotted name: object}; Keras lazy loaders
    are recorded in ``keras_loaders`` and not entered."""
    seen = set() if seen is None else seen
    out = {} if out is None else out
    keras_loaders = [] if keras_loaders is None else keras_loaders
    for attr in sorted(dir(root)):
        if attr.startswith("_"):
            continue
        name = f"{prefix}{attr}"
        if name in ("compat", "keras") or name.startswith("compat."):
            # compat.* is how v1/v2 are reached, never a name of its own;
            # tf.keras is Keras 3 itself (walked separately if ever needed).
            if name == "keras":
                out[name] = None
            continue
        try:
            obj = getattr(root, attr)
        except (AttributeError, ImportError, ValueError):  # Keras-2-only APIs under Keras 3
            continue
        if _is_keras_loader(obj):
            keras_loaders.append(name)
            out[name] = None
            continue
        out[name] = obj
        if _is_api_module(obj) and id(obj) not in seen:
            seen.add(id(obj))
            walk(obj, name + ".", seen, out, keras_loaders)
    return out, keras_loaders


def _same(a, b) -> bool:
    """The same API object; v2 endpoints may wrap the v1 function in a
    dispatch decorator (``tf.math.log``), so compare the unwrapped functions."""
    if a is b:
        return True
    if callable(a) and callable(b) and not isinstance(a, type):
        try:
            if inspect.unwrap(a) is inspect.unwrap(b):
                return True
        except ValueError:
            pass
    return type(a) in (int, float, str, bool) and type(a) is type(b) and a == b


# Pre-1.0 name -> (TF 1.x successor, old positional parameters or None when the
# call is unchanged, old keyword -> new keyword; None: no counterpart). The
# successor's own parameters are read from the installed TensorFlow, and every
# entry is checked against them. The summary ops' old ``name`` was the op
# name; the successors' ``name`` is the tag, so it has no counterpart.
PRE_1_0: dict[str, tuple[str, list[str] | None, dict[str, str | None]]] = {
    "scalar_summary": ("summary.scalar", ["tags", "values", "collections", "name"],
                       {"tags": "name", "values": "tensor", "name": None}),
    "histogram_summary": ("summary.histogram", ["tag", "values", "collections", "name"],
                          {"tag": "name", "name": None}),
    "image_summary": ("summary.image", ["tag", "tensor", "max_images", "collections", "name"],
                      {"tag": "name", "max_images": "max_outputs", "name": None}),
    "audio_summary": ("summary.audio", ["tag", "tensor", "sample_rate", "max_outputs", "collections", "name"],
                      {"tag": "name", "name": None}),
    "merge_summary": ("summary.merge", None, {}),
    "merge_all_summaries": ("summary.merge_all", None, {}),
    "train.SummaryWriter": ("summary.FileWriter", None, {}),
    "initialize_all_variables": ("global_variables_initializer", None, {}),
    "initialize_local_variables": ("local_variables_initializer", None, {}),
    "initialize_variables": ("variables_initializer", None, {}),
    "initialize_all_tables": ("tables_initializer", None, {}),
    "all_variables": ("global_variables", None, {}),
    "mul": ("multiply", None, {}),
    "sub": ("subtract", None, {}),
    "neg": ("negative", None, {}),
    "inv": ("reciprocal", None, {}),
    "pack": ("stack", None, {}),
    "unpack": ("unstack", None, {}),
    "select": ("where", ["condition", "t", "e", "name"], {"t": "x", "e": "y"}),
    "complex_abs": ("abs", None, {}),
    "batch_matmul": ("matmul", ["x", "y", "adj_x", "adj_y", "name"],
                     {"x": "a", "y": "b", "adj_x": "adjoint_a", "adj_y": "adjoint_b"}),
    "listdiff": ("setdiff1d", ["x", "y", "out_idx", "name"], {"out_idx": "index_dtype"}),
    "image.per_image_whitening": ("image.per_image_standardization", None, {}),
    "nn.rnn": ("nn.static_rnn", None, {}),
    "nn.bidirectional_rnn": ("nn.static_bidirectional_rnn", None, {}),
}

# TF 1.x name -> (old positional parameters, old keyword -> new keyword): the
# name stayed, the positional order changed in 1.0.
REORDERS: dict[str, tuple[list[str], dict[str, str | None]]] = {
    "concat": (["concat_dim", "values", "name"], {"concat_dim": "axis"}),
    "split": (["split_dim", "num_split", "value", "name"],
              {"split_dim": "axis", "num_split": "num_or_size_splits"}),
    "nn.softmax_cross_entropy_with_logits": (["logits", "labels", "dim", "name"], {}),
    "nn.sparse_softmax_cross_entropy_with_logits": (["logits", "labels", "name"], {}),
    "nn.sigmoid_cross_entropy_with_logits": (["logits", "targets", "name"], {"targets": "labels"}),
}


def _parameters(obj) -> list[str]:
    """Positional-or-keyword parameter names of a function or class, in order."""
    target = obj.__init__ if isinstance(obj, type) else obj
    params = list(inspect.signature(target).parameters.values())
    if isinstance(obj, type):
        params = params[1:]  # self
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _call_table(v1, v2, old_name, target, old, kw) -> dict:
    """One ``pre1``/``reorders`` entry, checked against the installed TensorFlow."""
    if target not in v1 or v1[target] is None:
        raise SystemExit(f"{old_name}: successor tf.compat.v1.{target} does not exist")
    entry: dict = {"to": target}
    if old is not None:
        new = _parameters(v1[target])
        for p in old:
            mapped = kw.get(p, p)
            if mapped is not None and mapped not in new:
                raise SystemExit(f"{old_name}: `{p}` -> `{mapped}` is no parameter of {target}{new}")
        entry.update(old=old, new=new, kw=kw)
    entry["removed"] = old_name not in v1 and old_name not in v2
    return entry


def main() -> int:
    import tensorflow as tf
    from tensorflow.tools.compatibility import all_renames_v2

    v2, _ = walk(tf)
    v1, keras2_only = walk(tf.compat.v1)
    keras2_only = sorted(n for n in keras2_only if n != "keras")

    same = sorted(
        n for n, obj in v1.items()
        if n in v2 and obj is not None and not _is_api_module(obj) and _same(obj, v2[n])
    )
    renames = {}
    for old, new in all_renames_v2.symbol_renames.items():
        if not (old.startswith("tf.") and new.startswith("tf.")) or new.startswith("tf.compat."):
            continue
        old, new = old[3:], new[3:]
        if old in same or old not in v1 or new not in v2:
            continue
        if _same(v1[old], v2[new]):
            renames[old] = new

    # tf.contrib.X -> TF2 (or compat.v1) name, tf_upgrade_v2's curated list,
    # kept when the target exists in TF 2.21
    contrib_renames = {}
    for old, new in all_renames_v2.symbol_renames.items():
        if not old.startswith("tf.contrib.") or not new.startswith("tf."):
            continue
        target = new[3:]
        bare = target[len("compat.v1."):] if target.startswith("compat.v1.") else None
        if (bare is not None and bare in v1) or (bare is None and target in v2):
            contrib_renames[old[3:]] = target

    pre1 = {name: _call_table(v1, v2, name, *spec) for name, spec in sorted(PRE_1_0.items())}
    reorders = {name: _call_table(v1, v2, name, name, *spec) for name, spec in sorted(REORDERS.items())}

    data = {
        "tf_version": tf.__version__,
        "v2": sorted(v2),
        "v1": sorted(v1),
        "same": same,
        "renames": dict(sorted(renames.items())),
        "keras2_only": keras2_only,
        "contrib_renames": dict(sorted(contrib_renames.items())),
        "pre1": pre1,
        "reorders": reorders,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, separators=(",", ":"), sort_keys=False) + "\n")
    print(
        f"{OUT}: v2={len(v2)} v1={len(v1)} same={len(same)} renames={len(renames)}"
        f" keras2_only={len(keras2_only)} contrib_renames={len(contrib_renames)} pre1={len(pre1)}"
        f" reorders={len(reorders)} bytes={OUT.stat().st_size}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
