"""How to launch a legacy training script and its migration on the local
cluster launcher (:func:`migrate.runtime.cluster.run_cluster`), inferred from source.

Never imports TensorFlow: the strategy comes from the codemod's own program
analysis (:func:`migrate.codemod.rules._program.detect_strategy`), roles from whether
the script reads ``TF_CONFIG`` or defines ``--ps_hosts``/``--worker_hosts``
style flags, and the step/tower knobs from the flags, argparse options or
environment variables the script defines.

Launch shapes (the codemod's mapping, see ``legacy_reference/README.md``):

================  ============================  ======================================
strategy          legacy                        migrated
================  ============================  ======================================
parameter_server  ps:1 + worker:N, ps serves    chief:1 + worker:N + ps:1, worker and
                                                ps serve, the chief runs the loop
multi_worker_...  ps:1 + worker:N, ps serves    worker:N, nobody only serves
mirrored          one process, no roles         one process, no roles
================  ============================  ======================================
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules._cst import walk
from migrate.codemod.rules._program import MIRRORED, MWMS, PSS, detect_strategy, reads_tf_config
from migrate.codemod.tfnames import TFNames

__all__ = [
    "TRAINER_JOBS",
    "LaunchSpec",
    "ProgramInfo",
    "TopologyError",
    "analyze",
    "legacy_launch",
    "migrated_launch",
]

STEP_KNOBS = (
    "steps",
    "train_steps",
    "max_steps",
    "num_steps",
    "training_steps",
    "num_train_steps",
    "max_train_steps",
    "total_steps",
    "number_of_steps",
    "training_iters",
    "training_iterations",
    "num_iterations",
    "iterations",
    "max_iter",
    "max_iters",
    "train_iters",
    "n_steps",
)
TRAINER_JOBS = ("chief", "master", "worker")  # jobs whose tasks run training steps
TOWER_KNOBS = ("num_towers", "num_gpus", "num_replicas", "num_devices")
SEED_KNOBS = ("seed", "random_seed")
# spellings of the role flags (normalized: "-" -> "_"), most common first
ROLE_FLAGS = {
    "job": ("job_name", "job_type", "job"),
    "index": ("task_index", "task_id", "task_idx", "index"),
}

_DEFINE = re.compile(r"DEFINE_(?:integer|string|float|boolean|bool|list|enum|multi_\w+)$")
_ENV_GETTERS = {"get", "getenv"}


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _chief_job(tree: ast.Module) -> str | None:
    """``"master"`` or ``"chief"`` when the script compares a task type with
    it (``task.type == "master"``, ``job_name in ["master", "worker"]``): a
    TF1 cluster whose chief is its own job (Cloud ML Engine, Estimator era)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            items = side.elts if isinstance(side, (ast.List, ast.Tuple, ast.Set)) else [side]
            for item in items:
                if _string(item) in ("master", "chief"):
                    return item.value
    return None


# Keras 3 optimizers whose update is TF1's in exact arithmetic but rounds
# differently: Adam's bias corrections are powers of beta (TF1 multiplied
# accumulators), SGD's momentum folds the rate into its velocity (TF1 scaled
# the accumulator). SGD without momentum, Adagrad and Adadelta are bit-exact.
_ROUNDING_OPTIMIZERS = ("Adam", "AdamW", "Adamax", "Nadam", "SGD")


def _rounding_optimizers(tree: ast.Module) -> tuple[str, ...]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, owner = node.func.attr, node.func.value
        if name not in _ROUNDING_OPTIMIZERS or getattr(owner, "attr", getattr(owner, "id", "")) != "optimizers":
            continue
        if name == "SGD":
            momentum = next((k.value for k in node.keywords if k.arg == "momentum"), None)
            if momentum is None and len(node.args) > 1:
                momentum = node.args[1]
            if momentum is None or (isinstance(momentum, ast.Constant) and not momentum.value):
                continue
            name = "SGD with momentum"
        if name not in found:
            found.append(name)
    return tuple(found)


# TF calls that draw random initial values: explicit random ops and
# initializers, and what defaults to one (get_variable's and the layers'
# glorot_uniform). Without an explicit op-level `seed=` a TF1 graph and its
# eager migration draw different numbers even under the same global seed
# (TF1 derives the op seed from the op's id in the graph, eager from a counter).
_RANDOM_INITIALIZERS = frozenset({
    "random_normal", "truncated_normal", "random_uniform", "normal", "uniform",
    "random_normal_initializer", "truncated_normal_initializer", "random_uniform_initializer",
    "glorot_uniform_initializer", "glorot_normal_initializer", "variance_scaling_initializer",
    "xavier_initializer", "xavier_initializer_conv2d", "variance_scaling", "orthogonal_initializer",
    "uniform_unit_scaling_initializer", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform",
    "glorot_uniform", "glorot_normal", "GlorotUniform", "GlorotNormal", "HeNormal", "HeUniform",
    "LecunNormal", "LecunUniform", "RandomNormal", "RandomUniform", "TruncatedNormal",
    "VarianceScaling", "Orthogonal",
})
# call -> the keyword that would give it a non-random (or seeded) initializer
_DEFAULT_RANDOM = {
    "get_variable": "initializer", "dense": "kernel_initializer", "conv1d": "kernel_initializer",
    "conv2d": "kernel_initializer", "conv3d": "kernel_initializer", "fully_connected": "weights_initializer",
    "Dense": "kernel_initializer", "Conv1D": "kernel_initializer", "Conv2D": "kernel_initializer",
}


def _tf_roots(tree: ast.Module) -> set[str]:
    """Local names bound to TensorFlow (or a module/object from it)."""
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tensorflow" or alias.name.startswith("tensorflow."):
                    roots.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("tensorflow", "keras"):
            roots.update(alias.asname or alias.name for alias in node.names)
    return roots


def _chain(node: ast.AST) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


def unseeded_initializers(tree: ast.Module) -> tuple[str, ...]:
    """Where the program draws random initial values without an op seed
    (``"line 12: truncated_normal_initializer"``): such values differ between
    any two runs of TF1 and its migration, so ``check`` carries the legacy
    values over instead of comparing them."""
    roots = _tf_roots(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain = _chain(node.func)
        if not chain or chain[0] not in roots:
            continue
        name = chain[-1]
        keywords = {k.arg: k.value for k in node.keywords}
        if name in _RANDOM_INITIALIZERS:
            if name in ("normal", "uniform") and "random" not in chain:
                continue
            seed = keywords.get("seed")
            if seed is None or (isinstance(seed, ast.Constant) and seed.value is None):
                found.append(f"line {node.lineno}: {'.'.join(chain)}")
        elif name in _DEFAULT_RANDOM and _DEFAULT_RANDOM[name] not in keywords:
            if name == "get_variable" and len(node.args) > 3:  # get_variable(name, shape, dtype, initializer)
                continue
            if None in keywords:  # **kwargs may carry it
                continue
            found.append(f"line {node.lineno}: {'.'.join(chain)} (default initializer)")
    return tuple(found)


_TRAINING_RANDOMNESS = frozenset({"dropout", "Dropout", "tf1_dropout", "tf1_contrib_dropout", "alpha_dropout",
                                   "GaussianNoise", "GaussianDropout", "random_crop", "random_flip_left_right"})


def training_randomness(tree: ast.Module) -> tuple[str, ...]:
    """Where the program draws random numbers while it trains (dropout and the
    like): TF1 and TF2 draw different streams even under one seed, so such a
    program cannot agree step by step (``"line 30: tf.layers.dropout"``).
    Calls with ``training=False`` or ``keep_prob=1``/``rate=0`` literals do not count."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain = _chain(node.func)
        if not chain or chain[-1] not in _TRAINING_RANDOMNESS:
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        off = [("training", False), ("is_training", False), ("keep_prob", 1), ("keep_prob", 1.0),
               ("rate", 0), ("rate", 0.0)]
        if any(isinstance(keywords.get(k), ast.Constant) and keywords[k].value == v and
               type(keywords[k].value) is type(v) for k, v in off):
            continue
        if chain[-1] in ("dropout", "tf1_dropout") and "training" not in keywords and "layers" in chain:
            continue  # tf.layers.dropout defaults to training=False
        found.append(f"line {node.lineno}: {'.'.join(chain)}")
    return tuple(found)


def _options_and_env(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """(normalized option name -> the spelling the script defines,
    environment variables read by literal name). Options: absl/tf.app
    ``DEFINE_*("name", ...)`` and argparse ``add_argument("-s", "--max-steps")``."""
    options: dict[str, str] = {}
    env: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            # os.environ["X"]
            value = node.value
            if getattr(value, "attr", getattr(value, "id", None)) == "environ":
                name = _string(node.slice)
                if name:
                    env.add(name)
            continue
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if _DEFINE.match(name):
            flag = _string(node.args[0]) if node.args else None
            flag = flag or next((_string(k.value) for k in node.keywords if k.arg == "name"), None)
            if flag:
                options.setdefault(flag.replace("-", "_"), flag)
        elif name == "add_argument":
            for arg in node.args:
                text = _string(arg)
                if text and text.startswith("--") and len(text) > 2:
                    options.setdefault(text[2:].replace("-", "_"), text[2:])
        elif name in _ENV_GETTERS and node.args:
            func = node.func
            owner = func.value if isinstance(func, ast.Attribute) else None
            owner_name = getattr(owner, "attr", getattr(owner, "id", None))
            if (name == "getenv" and owner_name in (None, "os")) or owner_name == "environ":
                text = _string(node.args[0])
                if text:
                    env.add(text)
    return options, env


class TopologyError(Exception):
    """The script's shape is not one ``check`` knows how to launch."""


@dataclass(frozen=True)
class ProgramInfo:
    """What the launcher needs to know about one script."""

    strategy: str | None  # PSS / MWMS / MIRRORED / None
    role_style: str  # "flags" | "tf_config" | "none"
    options: frozenset[str]  # command-line options it defines (flags, argparse), "-" as "_"
    env_reads: frozenset[str]  # environment variables it reads by literal name
    spellings: tuple[tuple[str, str], ...] = ()  # option -> as the script spells it
    distribute_strategy: str | None = None  # the tf.distribute strategy its code names
    chief_job: str | None = None  # "master"/"chief": a TF1 chief job besides the workers
    rounding_optimizers: tuple[str, ...] = ()  # Keras optimizers that round unlike TF1's kernels
    unseeded_initializers: tuple[str, ...] = ()  # random initial values without an op seed
    training_randomness: tuple[str, ...] = ()  # dropout and the like while training

    def spelling(self, option: str) -> str:
        return dict(self.spellings).get(option, option)

    def knob(self, candidates: tuple[str, ...]) -> tuple[str, str] | None:
        """("option"|"env", name as spelled) of the first knob the script defines."""
        for name in candidates:
            if name in self.options:
                return ("option", self.spelling(name))
        for name in candidates:
            if name.upper() in self.env_reads:
                return ("env", name.upper())
        return None


@dataclass
class LaunchSpec:
    """Arguments for :func:`migrate.runtime.cluster.run_cluster`, plus what they mean."""

    strategy: str | None
    jobs: dict[str, int]
    role_style: str
    server_only: tuple[str, ...]
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    flag_names: dict[str, str | None] = field(default_factory=dict)  # run_cluster's flag_names
    # steps the caller must stop the job at: the script defines no step-count option
    step_cap: int | None = None

    def as_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "jobs": dict(self.jobs),
            "role_style": self.role_style,
            "server_only": list(self.server_only),
            "args": list(self.args),
            "env": dict(self.env),
            "notes": list(self.notes),
            "flag_names": dict(self.flag_names),
            "step_cap": self.step_cap,
        }


def _strategy_named(module: cst.Module) -> str | None:
    """The strategy a migration names in its code (not in comments or strings)."""
    names = {node.value for node in walk(module) if isinstance(node, cst.Name)}
    for name, strategy in (
        ("ParameterServerStrategy", PSS),
        ("MultiWorkerMirroredStrategy", MWMS),
        ("MirroredStrategy", MIRRORED),
    ):
        if name in names:
            return strategy
    return None


def analyze(source: str) -> ProgramInfo:
    """Read the launch-relevant facts of a script's source."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise TopologyError(f"cannot parse the script: {e}") from None
    named = _strategy_named(module)
    strategy = detect_strategy(module, TFNames.from_module(module)) or named
    try:
        tree = ast.parse(source)
    except SyntaxError as e:  # libcst accepts some Python 2 that ast does not
        raise TopologyError(f"cannot parse the script: {e}") from None
    spelled, env_reads = _options_and_env(tree)
    options = set(spelled)
    if reads_tf_config(module) and not {"ps_hosts", "worker_hosts"} & options:
        role_style = "tf_config"
    elif {"ps_hosts", "worker_hosts", *ROLE_FLAGS["job"][:2]} & options:
        role_style = "flags"
    elif reads_tf_config(module):
        role_style = "tf_config"
    else:
        role_style = "none"
    return ProgramInfo(
        strategy,
        role_style,
        frozenset(options),
        frozenset(env_reads),
        tuple(sorted(spelled.items())),
        named,
        _chief_job(tree),
        _rounding_optimizers(tree),
        unseeded_initializers(tree),
        training_randomness(tree),
    )


def flag_names(info: ProgramInfo) -> dict[str, str | None]:
    """The launcher's role flags as this script spells them (``--job-name``,
    ``--task_id``, ``--ps-hosts``...); defaults where it defines none."""
    names: dict[str, str | None] = {}
    for role, candidates in ROLE_FLAGS.items():
        found = next((c for c in candidates if c in info.options), None)
        if found is not None:
            names[role] = "--" + info.spelling(found)
    hosts = info.spelling("worker_hosts") if "worker_hosts" in info.options else "worker_hosts"
    names["hosts"] = "--{job}" + hosts[len("worker") :]
    return names


def _knob_args(
    info: ProgramInfo, spec: LaunchSpec, knobs: tuple[str, ...], value: int | None, what: str
) -> None:
    if value is None:
        return
    found = info.knob(knobs)
    if found is None:
        if knobs is STEP_KNOBS:
            spec.step_cap = value
            spec.notes.append(
                f"the script defines no {what} option: check stops the job once it trained {value} steps"
            )
        else:
            spec.notes.append(f"the script defines no {what} option; its default is used")
        return
    kind, name = found
    if kind == "option":
        spec.args.append(f"--{name}={value}")
    else:
        spec.env[name] = str(value)


def legacy_launch(
    info: ProgramInfo, workers: int, steps: int | None, seed: int | None = None
) -> LaunchSpec:
    """How to run the legacy script with ``workers`` workers (towers)."""
    strategy = info.strategy
    if strategy == MIRRORED or (strategy is None and info.role_style == "none"):
        spec = LaunchSpec(strategy, {"worker": 1}, "none", ())
        _knob_args(info, spec, TOWER_KNOBS, workers, "tower-count")
    elif info.role_style == "none":
        raise TopologyError(
            "the script uses a ps/worker strategy but reads neither TF_CONFIG nor "
            "--ps_hosts/--worker_hosts style flags"
        )
    else:
        jobs = {"ps": 1, "worker": workers}
        chief = info.chief_job
        if chief and (info.role_style == "tf_config" or f"{chief}_hosts" in info.options):
            # the chief is a job of its own and trains too: chief + N-1 workers
            jobs = {"ps": 1, chief: 1, "worker": workers - 1} if workers > 1 else {"ps": 1, chief: 1}
            spec_note = f"the script's chief is a '{chief}' job: {chief}:0 is one of the {workers} trainers"
        else:
            spec_note = ""
        spec = LaunchSpec(strategy, jobs, info.role_style, ("ps",))
        if spec_note:
            spec.notes.append(spec_note)
    _knob_args(info, spec, STEP_KNOBS, steps, "step-count")
    _knob_args(info, spec, SEED_KNOBS, seed, "seed")
    if spec.role_style == "flags":
        spec.flag_names = flag_names(info)
    return spec


def migrated_launch(
    info: ProgramInfo,
    legacy: ProgramInfo,
    workers: int,
    steps: int | None,
    seed: int | None = None,
) -> LaunchSpec:
    """How to run the migration (``info``) of ``legacy`` with ``workers`` workers."""
    strategy = info.strategy or legacy.strategy
    role_style = info.role_style if info.role_style != "none" else legacy.role_style
    if strategy == PSS:
        spec = LaunchSpec(
            strategy, {"chief": 1, "worker": workers, "ps": 1}, role_style, ("ps", "worker")
        )
        if role_style == "flags" and "chief_hosts" not in info.options:
            spec.notes.append("the migration defines no --chief_hosts flag")
    elif strategy == MWMS:
        spec = LaunchSpec(strategy, {"worker": workers}, role_style, ())
    elif strategy == MIRRORED or role_style == "none":
        spec = LaunchSpec(strategy, {"worker": 1}, "none", ())
        _knob_args(info, spec, TOWER_KNOBS, workers, "tower-count")
    else:
        spec = LaunchSpec(strategy, {"ps": 1, "worker": workers}, role_style, ("ps",))
        spec.notes.append("no tf.distribute strategy recognised; launched like the legacy job")
    _knob_args(info, spec, STEP_KNOBS, steps, "step-count")
    _knob_args(info, spec, SEED_KNOBS, seed, "seed")
    if spec.role_style == "flags":
        spec.flag_names = flag_names(info if info.role_style == "flags" else legacy)
    return spec
