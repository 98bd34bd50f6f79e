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
import os
import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.codemod.rules._cst import walk
from migrate.codemod.rules._program import MIRRORED, MWMS, PSS, detect_strategy, reads_tf_config
from migrate.codemod.tfnames import TFNames
from migrate.runtime._ast_names import chain as name_chain
from migrate.runtime.sync_switch import SyncSwitch, find_sync_switch

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
    "max_step",
    "max_number_of_steps",
    "num_batches",
    "max_iter",
    "max_iters",
    "train_iters",
    "n_steps",
)
TRAINER_JOBS = ("chief", "master", "worker")  # jobs whose tasks run training steps
# output directories a script takes as options: pointed inside each run's own
# directory ({run_dir} is substituted per run), so no run reads what another
# wrote and nothing lands in /tmp or the working directory
OUTPUT_DIR_KNOBS = (
    "log_dir", "logdir", "logs_dir", "logs_path", "train_dir", "checkpoint_dir", "ckpt_dir", "model_dir",
    "summaries_dir", "summary_dir", "tensorboard_dir", "export_dir", "output_dir", "save_dir", "job_dir",
)
TOWER_KNOBS = ("num_towers", "num_gpus", "num_replicas", "num_devices")
SEED_KNOBS = ("seed", "random_seed")
DEFAULT_WORKERS = 2
TF_CONFIG_TOO_ENV = "TFMIGRATE_TF_CONFIG"  # the harness writes TF_CONFIG from the launcher's cluster
# spellings of the role flags (normalized: "-" -> "_"), most common first
ROLE_FLAGS = {
    "job": ("job_name", "job_type", "job"),
    "index": ("task_index", "task_id", "task_idx", "index", "task"),
}

# environment variables scripts take their role from (Kubernetes/docker
# templates, Spark/YARN wrappers): launched with one value per task
ROLE_ENV = {
    "job": ("JOB_NAME", "TASK_TYPE", "JOB_TYPE", "ROLE", "TF_ROLE", "TASK_ROLE"),
    "index": ("TASK_INDEX", "TASK_ID", "TASK_IDX", "INDEX", "TF_TASK_INDEX"),
}
# rank variables whose mapping to ps/worker is the script's own code
RANK_ENV = ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK")

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
    if needs_estimator_cluster(tree):
        return "chief"  # RunConfig refuses a TF_CONFIG cluster without one
    return None


def needs_estimator_cluster(tree: ast.Module) -> bool:
    """An Estimator program (``tf.estimator.RunConfig`` / ``train_and_evaluate``
    reading TF_CONFIG): its cluster has a ``chief`` job that trains."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("train_and_evaluate", "RunConfig"):
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "estimator":
                return True
            if isinstance(value, ast.Name) and value.id in ("estimator", "tf_estimator"):
                return True
    return False


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


def _tutorial_aliases(tree: ast.Module) -> set[str]:
    """Local names bound to TF1's MNIST tutorial model module
    (``from tensorflow.examples.tutorials.mnist import mnist``)."""
    module = "tensorflow.examples.tutorials.mnist"
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            out.update(alias.asname or alias.name for alias in node.names if alias.name == "mnist")
        elif isinstance(node, ast.Import):
            out.update(alias.asname for alias in node.names if alias.name == module + ".mnist" and alias.asname)
    return out



def unseeded_initializers(tree: ast.Module) -> tuple[str, ...]:
    """Where the program draws random initial values without an op seed
    (``"line 12: truncated_normal_initializer"``): such values differ between
    any two runs of TF1 and its migration, so ``check`` carries the legacy
    values over instead of comparing them."""
    roots = _tf_roots(tree)
    tutorial = _tutorial_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain = name_chain(node.func)
        if not chain or chain[0] not in roots:
            continue
        name = chain[-1]
        keywords = {k.arg: k.value for k in node.keywords}
        if chain[0] in tutorial and chain[1:] == ["inference"]:
            # the MNIST tutorial's model draws its weights with tf.truncated_normal, no seed
            found.append(f"line {node.lineno}: {'.'.join(chain)} (truncated_normal weights)")
        elif name in _RANDOM_INITIALIZERS:
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
        chain = name_chain(node.func)
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
        elif name in ("add_argument", "option", "add_option"):  # argparse, click, optparse
            for arg in node.args:
                text = _string(arg)
                if text and text.startswith("--") and len(text) > 2:
                    text = text.split("/")[0].split("=")[0]  # click's "--flag/--no-flag"
                    options.setdefault(text[2:].replace("-", "_"), text[2:])
        elif name == "getopt" and len(node.args) >= 3 and isinstance(node.args[2], (ast.List, ast.Tuple)):
            for arg in node.args[2].elts:  # getopt long options: "job_name="
                text = _string(arg)
                if text:
                    options.setdefault(text.rstrip("=").replace("-", "_"), text.rstrip("="))
        elif name == "startswith" and node.args and (_string(node.args[0]) or "").startswith("--"):
            text = _string(node.args[0])[2:].rstrip("=")  # hand-parsed: arg.startswith("--job_name=")
            if text:
                options.setdefault(text.replace("-", "_"), text)
        elif name in _ENV_GETTERS and node.args:
            func = node.func
            owner = func.value if isinstance(func, ast.Attribute) else None
            owner_name = getattr(owner, "attr", getattr(owner, "id", None))
            if (name == "getenv" and owner_name in (None, "os")) or owner_name == "environ":
                text = _string(node.args[0])
                if text:
                    env.add(text)
    return options, env


def _argv_positions(tree: ast.Module) -> dict[str, int]:
    """Roles a script reads by position (``job_name = sys.argv[1]``,
    ``task_index = int(sys.argv[2])``): role -> argv index."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
        if not name:
            continue
        for sub in ast.walk(node.value):
            if (
                isinstance(sub, ast.Subscript)
                and name_chain(sub.value) == ["sys", "argv"]
                and isinstance(sub.slice, ast.Constant)
                and isinstance(sub.slice.value, int)
            ):
                for role, candidates in ROLE_FLAGS.items():
                    if name.lower() in candidates or name.lower() in ("job", "role", "task_type"):
                        found.setdefault("job" if name.lower() in ("role", "task_type") else role, sub.slice.value)
    return found


def _fixed_role(tree: ast.Module) -> tuple[str, int, int] | None:
    """``tf.train.Server(cluster, job_name="worker", task_index=2)`` with
    literals: the script is always that task (an in-graph client), the rest
    of its cluster is expected to run standard servers. (job, index, line)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node) != "Server":
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        if node.args and isinstance(node.args[0], (ast.Name, ast.Call)) and len(node.args) == 1 and not keywords:
            # Server(SERVER_DEF): the role is the ServerDef's
            definition = node.args[0]
            if isinstance(definition, ast.Name):
                definition = next(
                    (a.value for a in ast.walk(tree) if isinstance(a, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == definition.id for t in a.targets)),
                    None,
                )
            if isinstance(definition, ast.Call) and _call_name(definition) == "ServerDef":
                keywords = {k.arg: k.value for k in definition.keywords}
        job = keywords.get("job_name", node.args[1] if len(node.args) > 1 else None)
        index = keywords.get("task_index", node.args[2] if len(node.args) > 2 else None)
        if _string(job) and isinstance(index, ast.Constant) and isinstance(index.value, int):
            return job.value, index.value, node.lineno
    return None


def _server_line(tree: ast.Module) -> int | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == "Server":
            return node.lineno
    return None


def chief_only_code(tree: ast.Module) -> tuple[int, str] | None:
    """(line, what) of code TF1 lets only the chief run, run by every worker:
    ``sv.summary_computed(...)`` of a ``Supervisor`` made with a computed
    ``is_chief`` and no summary writer of its own, outside any test of the
    chief. TF1's Supervisor writes summaries on the chief only; on another
    worker the call raises (``Writing a summary requires a summary writer``)."""
    supervisors = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and _call_name(node.value) == "Supervisor":
            keywords = {k.arg: k.value for k in node.value.keywords}
            chief = keywords.get("is_chief")
            if chief is not None and not isinstance(chief, ast.Constant) and "summary_writer" not in keywords:
                supervisors.add(node.targets[0].id)
    if not supervisors:
        return None
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ("chief" in ast.unparse(node.test)
                                         or re.search(r"index\b\s*==\s*0", ast.unparse(node.test))):
            for stmt in node.body:
                guarded.update(id(n) for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "summary_computed" and isinstance(node.func.value, ast.Name)
                and node.func.value.id in supervisors and id(node) not in guarded):
            return node.lineno, (f"{node.func.value.id}.summary_computed(...), which TF1's Supervisor allows"
                                 " only on the chief (the one with a summary writer)")
    return None


def _first_line(tree: ast.Module, names: set[str]) -> int | None:
    """The first line reading one of the environment variables ``names``."""
    lines = [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, (ast.Call, ast.Subscript)) and _env_read_names(node) & names
    ]
    return min(lines) if lines else None


def _role_by_host_match(tree: ast.Module, path: str | None = None) -> tuple[str, int, dict] | None:
    """``if FLAGS.ip in ps_hosts: job_name = "ps"``: a script that finds its
    role by looking an option's value up in its own literal host lists.
    (option, line, {job: hosts})."""
    resolver = _ClusterResolver(tree, os.path.dirname(os.path.abspath(path)) if path else None)
    option, line, hosts = None, None, {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        if not (
            len(test.ops) == 1
            and isinstance(test.ops[0], ast.In)
            and isinstance(test.left, ast.Attribute)
            and isinstance(test.comparators[0], ast.Name)
        ):
            continue
        try:
            found = resolver.resolve(test.comparators[0])
        except _Unresolved:
            continue
        if found.kind != "list" or not found.hosts:
            continue
        jobs = _jobs_assigned(node.body)
        if len(jobs) == 1 and option in (None, test.left.attr):
            option, line = test.left.attr, line or node.lineno
            hosts[jobs.pop()] = found.hosts
    return (option, line, hosts) if option else None


def _jobs_assigned(body: list[ast.stmt]) -> set[str]:
    return {
        sub.value for stmt in body for sub in ast.walk(stmt)
        if isinstance(sub, ast.Constant) and sub.value in ("ps", "worker", "chief", "master")
    }


def _role_switch(tree: ast.Module) -> tuple[str, str] | None:
    """``if FLAGS.chief: job_name = "chief"`` heading a host lookup (the
    chief a ParameterServerStrategy migration adds to such a program, on a
    machine of the cluster): (job, option)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Attribute)
                and isinstance(node.test.value, ast.Name) and len(node.orelse) == 1
                and isinstance(node.orelse[0], ast.If) and isinstance(node.orelse[0].test, ast.Compare)):
            continue
        jobs = _jobs_assigned(node.body)
        if jobs in ({"chief"}, {"master"}):
            return jobs.pop(), node.test.attr
    return None


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
    script_cluster: ScriptCluster | None = None  # the cluster shape the script fixes itself
    role_env: tuple[tuple[str, str], ...] = ()  # role -> environment variable it is read from
    argv_roles: tuple[tuple[str, int], ...] = ()  # role -> sys.argv position
    role_match: tuple[str, int, dict] | None = None  # (option, line, {job: hosts}): role by host lookup
    server_line: int | None = None  # where the script builds its tf.train.Server
    rank_env: tuple[str, int] | None = None  # (variable, line) a rank-only role source
    fixed_role: tuple[str, int, int] | None = None  # (job, index, line): the role it hard-codes
    reads_tf_config: bool = False
    deleted_env: tuple[str, ...] = ()  # `del os.environ["X"]`: variables it expects to be set
    sync_switch: SyncSwitch | None = None  # the option choosing sync/async training
    role_switch: tuple[str, str] | None = None  # (job, boolean option) tested before that lookup
    chief_only: tuple[int, str] | None = None  # (line, what): code only a TF1 chief can run, run by all

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
    # roles given other than as flags/TF_CONFIG: role -> env var, role -> argv
    # position, (option, {job: literal hosts}) looked up by the script
    role_env: dict[str, str] = field(default_factory=dict)
    argv_roles: dict[str, int] = field(default_factory=dict)
    role_match: tuple[str, dict[str, tuple[str, ...]]] | None = None
    role_switch: tuple[str, str] | None = None  # (job, boolean option) naming that job's task
    script_cluster: dict | None = None  # the cluster the script fixes (for the report)
    fixed_task: str | None = None  # "worker:2": the task a script hard-coding its role is
    # the legacy job put in the training mode its migration carries: the
    # switch, the argument given, and whether the script's default differs
    mode_switch: dict | None = None
    workers_reason: str | None = None  # why the worker count is not the default

    @property
    def launcher_style(self) -> str:
        """run_cluster's role_style: roles by env/argv/host lookup still get
        the launcher's ports (as "flags" with no role flags)."""
        return "flags" if self.role_style in ("env", "argv", "match", "fixed") else self.role_style

    def task_env(self, job: str, index: int) -> dict[str, str]:
        if self.fixed_task is not None:
            # every other task of its cluster: a standard server (harness)
            return {} if f"{job}:{index}" == self.fixed_task else {"TFMIGRATE_STD_SERVER": "1"}
        return {
            var: job if role == "job" else str(index) for role, var in self.role_env.items()
        }

    def task_args(self, job: str, index: int) -> list[str]:
        argv = []
        if self.argv_roles:
            values = {"job": job, "index": str(index)}
            argv += [values[role] for role, _ in sorted(self.argv_roles.items(), key=lambda item: item[1])]
        if self.role_switch is not None and self.role_switch[0] == job:
            return argv + [f"--{self.role_switch[1]}"]
        if self.role_match is not None:
            option, hosts = self.role_match
            host = hosts.get(job, ())[index] if index < len(hosts.get(job, ())) else None
            if host is not None:
                argv.append(f"--{option}={host}")
        return argv

    def as_dict(self) -> dict:
        return {
            "role_env": dict(self.role_env),
            "argv_roles": dict(self.argv_roles),
            "role_match": None if self.role_match is None else self.role_match[0],
            "role_switch": None if self.role_switch is None else "--" + self.role_switch[1],
            "fixed_task": self.fixed_task,
            "script_cluster": self.script_cluster,
            "strategy": self.strategy,
            "jobs": dict(self.jobs),
            "role_style": self.role_style,
            "server_only": list(self.server_only),
            "args": list(self.args),
            "env": dict(self.env),
            "notes": list(self.notes),
            "flag_names": dict(self.flag_names),
            "step_cap": self.step_cap,
            "mode_switch": self.mode_switch,
            "workers_reason": self.workers_reason,
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


def analyze(source: str, path: str | None = None) -> ProgramInfo:
    """Read the launch-relevant facts of a script's source (``path``: where
    its sibling modules are, for a cluster kept in a settings module)."""
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
    cluster = find_script_cluster(tree, path)
    role_env = tuple(
        (role, next(v for v in names if v in env_reads))
        for role, names in ROLE_ENV.items()
        if any(v in env_reads for v in names)
    )
    argv_roles = tuple(sorted(_argv_positions(tree).items()))
    role_match = _role_by_host_match(tree, path)
    role_switch = _role_switch(tree) if role_match is not None else None
    rank = next((v for v in RANK_ENV if v in env_reads), None)
    fixed = _fixed_role(tree)
    role_flags = {*ROLE_FLAGS["job"], *ROLE_FLAGS["index"]}
    if reads_tf_config(module) and not {"ps_hosts", "worker_hosts"} & options:
        role_style = "tf_config"
    elif {"ps_hosts", "worker_hosts"} & options or role_flags & options:
        role_style = "flags"
    elif reads_tf_config(module):
        role_style = "tf_config"
    elif role_env and dict(role_env).get("job"):
        role_style = "env"
    elif dict(argv_roles).get("job") is not None:
        role_style = "argv"
    elif role_match is not None:
        role_style = "match"
    elif fixed is not None and cluster is not None:
        role_style = "fixed"
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
        cluster,
        role_env,
        argv_roles,
        role_match,
        _server_line(tree),
        (rank, _first_line(tree, {rank}) or 0) if rank else None,
        fixed,
        reads_tf_config(module),
        tuple(sorted({
            _string(t.slice) for node in ast.walk(tree) if isinstance(node, ast.Delete) for t in node.targets
            if isinstance(t, ast.Subscript) and name_chain(t.value)[-1:] == ["environ"] and _string(t.slice)
        })),
        find_sync_switch(tree),
        role_switch,
        chief_only_code(tree),
    )


def flag_names(info: ProgramInfo) -> dict[str, str | None]:
    """The launcher's role flags as this script spells them (``--job-name``,
    ``--task_id``, ``--ps-hosts``...); defaults where it defines none."""
    names: dict[str, str | None] = {}
    for role, candidates in ROLE_FLAGS.items():
        found = next((c for c in candidates if c in info.options), None)
        if found is not None:
            names[role] = "--" + info.spelling(found)
    # only flags the script defines: absl and argparse reject the others
    for role in ROLE_FLAGS:
        names.setdefault(role, None)
    if "worker_hosts" in info.options:
        names["hosts"] = "--{job}" + info.spelling("worker_hosts")[len("worker") :]
    else:
        names["hosts"] = None
    return names


def _output_dir_args(info: ProgramInfo, spec: LaunchSpec) -> None:
    for knob in OUTPUT_DIR_KNOBS:
        if knob in info.options:
            spec.args.append(f"--{info.spelling(knob)}={{run_dir}}/{knob}")


# options a script takes the size of its cluster from (done-queues sized by
# them, replicas_to_aggregate): given the launched counts
WORKER_COUNT_KNOBS = ("num_workers", "workers", "worker_count", "n_workers", "worker_replicas", "num_worker")
PS_COUNT_KNOBS = ("num_ps", "ps", "ps_count", "num_parameter_servers", "n_ps", "num_ps_tasks", "ps_tasks")
GPU_KNOBS = ("num_gpus", "gpus", "n_gpus", "gpu_num", "num_gpu")


def _cpu_only_args(info: ProgramInfo, spec: LaunchSpec) -> None:
    """A ps/worker script's GPU-count option is 0: check's clusters run on
    the CPU (scripts refuse more workers than GPUs, or pin /gpu:N)."""
    for knob in GPU_KNOBS:
        if knob in info.options:
            spec.args.append(f"--{info.spelling(knob)}=0")
            spec.notes.append(f"--{info.spelling(knob)}=0: check's clusters run on the CPU")
            return


def _count_args(info: ProgramInfo, spec: LaunchSpec) -> None:
    """Cluster-size options the script defines get the launched counts."""
    for knobs, job in ((WORKER_COUNT_KNOBS, "worker"), (PS_COUNT_KNOBS, "ps")):
        found = next((k for k in knobs if k in info.options), None)
        if found and job in spec.jobs:
            spec.args.append(f"--{info.spelling(found)}={spec.jobs[job]}")


def _mode_switch_args(info: ProgramInfo, spec: LaunchSpec, strategy: str | None) -> None:
    """A script choosing sync or async training by an option runs in the
    mode ``strategy`` trains: sync for MultiWorkerMirrored/Mirrored, async for
    ParameterServerStrategy. Where that is not the script's default, the
    report says so: the migration then does not reproduce the default mode."""
    switch = info.sync_switch
    if switch is None or strategy not in (MWMS, MIRRORED, PSS):
        return
    sync = strategy != PSS
    argument = switch.argument(sync)
    mode = "sync" if sync else "async"
    default_mode = "sync" if switch.default_is_sync else "async"
    spec.mode_switch = {
        **switch.as_dict(),
        "mode": mode,
        "default_mode": default_mode,
        "argument": argument,
    }
    if default_mode == mode:
        return
    if argument is None:
        spec.notes.append(
            f"--{switch.option} (line {switch.line}) chooses sync or async training and check cannot"
            f" tell which value means {mode}: the legacy job runs at its default ({default_mode})"
        )
        spec.mode_switch["argument"] = None
        return
    spec.args.append(argument)
    spec.notes.append(
        f"{argument}: the migration trains the {mode} branch of line {switch.line}"
        f" (SyncReplicasOptimizer, line {switch.optimizer_line}); at its default the script trains"
        f" {default_mode}, which the migration does not reproduce"
    )


def _needs_a_chief_role(info: ProgramInfo) -> None:
    """A ParameterServerStrategy program runs its training loop in a chief
    task. One that finds its role only by looking an option up in its own
    host lists, none of them a chief's, can never be that task: refused
    before launch, located."""
    if info.role_match is None or info.role_style != "match":
        return
    option, line, hosts = info.role_match
    if {"chief", "master"} & set(hosts) or info.role_switch is not None:
        return
    raise TopologyError(
        f"the migrated program uses ParameterServerStrategy, whose training loop runs in a chief task, but it"
        f" takes its role only from --{info.spelling(option)} looked up in its {'/'.join(sorted(hosts))} host"
        f" lists (line {line}): no task can be its chief. Give it a chief (a chief host list, or"
        " --job_name/--task_index flags or TF_CONFIG) and check again"
    )


def _cannot_launch(info: ProgramInfo) -> TopologyError:
    """Why a ps/worker script gives no way to tell its tasks apart, located,
    and what would."""
    where = f" (line {info.server_line})" if info.server_line else ""
    if info.rank_env:
        var, line = info.rank_env
        return TopologyError(
            f"the script takes its role from the rank variable {var} (line {line}) and maps ranks to ps/worker"
            f" in code check cannot read; it builds its tf.train.Server{where} from that: give it"
            " --job_name/--task_index flags or read TF_CONFIG, then check again"
        )
    return TopologyError(
        f"the script uses a ps/worker strategy but nothing tells its tasks apart: it builds its"
        f" tf.train.Server{where} without reading TF_CONFIG, role flags (--job_name/--task_index), role"
        " environment variables (JOB_NAME/TASK_INDEX) or sys.argv; define --job_name and --task_index"
        " (absl or argparse) or read TF_CONFIG, then check again"
    )


def _script_jobs(info: ProgramInfo, workers: int | None, spec_notes: list[str]) -> dict[str, int] | None:
    """The legacy job's tasks from the script's own cluster; ``workers``
    (an explicit --workers) replaces its worker count (check's harness maps
    the script's cluster onto the launcher's, so the lists follow)."""
    cluster = info.script_cluster
    if cluster is None or info.role_style == "tf_config":
        return None
    jobs = {job: count for job, count in cluster.jobs}
    if "ps" in jobs:
        jobs = {"ps": jobs.pop("ps"), **jobs}
    spec_notes.append(
        f"cluster from the script (line {cluster.line}, {cluster.how}): "
        + ", ".join(f"{job}:{count}" for job, count in jobs.items())
    )
    if workers is not None and "worker" in jobs and workers != jobs["worker"]:
        spec_notes.append(f"--workers {workers} replaces the script's {jobs['worker']} workers")
        jobs["worker"] = workers
    return jobs


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
    info: ProgramInfo,
    workers: int | None,
    steps: int | None,
    seed: int | None = None,
    migrated_strategy: str | None = None,
) -> LaunchSpec:
    """How to run the legacy script with ``workers`` workers (towers); None:
    as many as its own cluster has, else DEFAULT_WORKERS. ``migrated_strategy``:
    the strategy its migration's code uses; a script with a sync/async switch
    is run in the mode that strategy trains (None: at the script's default)."""
    strategy = info.strategy
    notes: list[str] = []
    if workers is None and info.chief_only is not None and strategy != MIRRORED:
        # its other workers raise as written: the job runs as its chief alone
        line, what = info.chief_only
        workers = 1
        notes.append(f"1 worker: every worker runs {what} (line {line}), so the others raise as written;"
                     " --workers N runs more")
    count = workers if workers is not None else DEFAULT_WORKERS
    if (strategy == MIRRORED and info.role_style != "fixed") or (
        strategy is None and info.role_style == "none" and info.script_cluster is None
    ):
        spec = LaunchSpec(strategy, {"worker": 1}, "none", ())
        _knob_args(info, spec, TOWER_KNOBS, count, "tower-count")
    elif info.role_style == "none":
        raise _cannot_launch(info)
    else:
        jobs = _script_jobs(info, workers, notes)
        chief = info.chief_job
        if jobs is not None:
            pass
        elif chief and (info.role_style == "tf_config" or f"{chief}_hosts" in info.options):
            # the chief is a job of its own and trains too: chief + N-1 workers
            jobs = {"ps": 1, chief: 1, "worker": count - 1} if count > 1 else {"ps": 1, chief: 1}
            notes.append(f"the script's chief is a '{chief}' job: {chief}:0 is one of the {count} trainers")
        else:
            jobs = {"ps": 1, "worker": count}
        server_only = tuple(job for job in ("ps",) if job in jobs)
        if info.role_style == "fixed":
            job, index, line = info.fixed_role
            if index >= jobs.get(job, 0):
                raise TopologyError(
                    f"the script hard-codes its role {job}:{index} (line {line}) outside its own cluster"
                    f" ({', '.join(f'{j}:{n}' for j, n in jobs.items())}, line {info.script_cluster.line})"
                )
            server_only = tuple(f"{j}:{i}" for j, n in jobs.items() for i in range(n) if (j, i) != (job, index))
            notes.append(f"the script is always {job}:{index} (line {line}); the other tasks of its cluster"
                         " run standard TensorFlow servers")
        spec = LaunchSpec(strategy, jobs, info.role_style, server_only)
        spec.notes += notes
        spec.workers_reason = next((n for n in notes if n.startswith("1 worker: every worker runs")), None)
        if info.role_style == "fixed":
            spec.fixed_task = f"{info.fixed_role[0]}:{info.fixed_role[1]}"
            spec.env["TFMIGRATE_DEVICE_FILTERS"] = "0"  # it places ops on the other tasks
        if strategy != MIRRORED:
            _cpu_only_args(info, spec)
            _count_args(info, spec)
        if info.reads_tf_config and spec.role_style != "tf_config":
            # flags and TF_CONFIG both (a TF_CONFIG it finds overrides its flags)
            spec.env[TF_CONFIG_TOO_ENV] = "1"
        if info.role_style == "env":
            spec.role_env = dict(info.role_env)
        elif info.role_style == "argv":
            spec.argv_roles = dict(info.argv_roles)
        elif info.role_style == "match":
            spec.role_match = (info.role_match[0], dict(info.role_match[2]))
        if info.script_cluster is not None:
            spec.script_cluster = info.script_cluster.as_dict()
            if info.script_cluster.choice is not None:
                option, value, _ = info.script_cluster.choice
                spec.args.append(f"--{info.spelling(option)}={value}")
    _mode_switch_args(info, spec, migrated_strategy)
    _knob_args(info, spec, STEP_KNOBS, steps, "step-count")
    _knob_args(info, spec, SEED_KNOBS, seed, "seed")
    _output_dir_args(info, spec)
    # `del os.environ["http_proxy"]`: set (empty) so the script can delete it
    spec.env.update({name: "" for name in info.deleted_env})
    if spec.role_style == "flags":
        spec.flag_names = flag_names(info)
    elif spec.launcher_style == "flags":
        spec.flag_names = {"job": None, "index": None, "hosts": None}
    return spec


def migrated_launch(
    info: ProgramInfo,
    legacy: ProgramInfo,
    workers: int | None,
    steps: int | None,
    seed: int | None = None,
    ps: int = 1,
) -> LaunchSpec:
    """How to run the migration (``info``) of ``legacy`` with ``workers``
    workers (None: DEFAULT_WORKERS) and ``ps`` parameter servers."""
    workers = DEFAULT_WORKERS if workers is None else workers
    strategy = info.strategy or legacy.strategy
    role_style = info.role_style if info.role_style != "none" else legacy.role_style
    if strategy == PSS:
        _needs_a_chief_role(info)
        spec = LaunchSpec(
            strategy, {"chief": 1, "worker": workers, "ps": ps}, role_style, ("ps", "worker")
        )
        if role_style == "flags" and "chief_hosts" not in info.options:
            spec.notes.append("the migration defines no --chief_hosts flag")
    elif strategy == MWMS:
        spec = LaunchSpec(strategy, {"worker": workers}, role_style, ())
    elif strategy == MIRRORED or role_style == "none":
        spec = LaunchSpec(strategy, {"worker": 1}, "none", ())
        _knob_args(info, spec, TOWER_KNOBS, workers, "tower-count")
    else:
        spec = LaunchSpec(strategy, {"ps": ps, "worker": workers}, role_style, ("ps",))
        spec.notes.append("no tf.distribute strategy recognised; launched like the legacy job")
    if spec.role_style == "env":
        spec.role_env = dict(info.role_env or legacy.role_env)
    elif spec.role_style == "argv":
        spec.argv_roles = dict(info.argv_roles or legacy.argv_roles)
    elif spec.role_style == "match" and info.role_style == "match":
        # the migration finds its role as the legacy job did (a chief by its option)
        spec.role_match = (info.role_match[0], dict(info.role_match[2]))
        spec.role_switch = info.role_switch
    elif spec.role_style == "match":
        spec.role_style = "flags"  # the migration's resolver takes --job_name/--task_index
    if strategy in (PSS, MWMS):
        _cpu_only_args(info, spec)
        _count_args(info, spec)
    if info.reads_tf_config and spec.role_style == "flags":
        spec.env[TF_CONFIG_TOO_ENV] = "1"
    spec.env.update({name: "" for name in info.deleted_env})
    chooser = (info.script_cluster or legacy.script_cluster)
    if chooser is not None and chooser.choice is not None and chooser.choice[0] in info.options:
        spec.args.append(f"--{info.spelling(chooser.choice[0])}={chooser.choice[1]}")
    _knob_args(info, spec, STEP_KNOBS, steps, "step-count")
    _knob_args(info, spec, SEED_KNOBS, seed, "seed")
    _output_dir_args(info, spec)
    if spec.role_style == "flags":
        spec.flag_names = flag_names(info if info.role_style == "flags" else legacy)
    elif spec.launcher_style == "flags":
        spec.flag_names = {"job": None, "index": None, "hosts": None}
    return spec


# --------------------------------------------------------------------------- the script's own cluster
#
# Real scripts fix their cluster in many ways: literal host lists beside the
# ClusterSpec, a dict read from an environment variable with a literal
# fallback (docker hostnames), a sibling settings module, a ClusterDef/JobDef
# ServerDef, a TF_CONFIG they write themselves, or a choice among literal
# clusters by a flag (``clusterSpec[FLAGS.deploy_mode]``). check owns the
# cluster at run time (the harness maps every task to the launcher's ports);
# statically it only needs the shape: which jobs, how many tasks each.


@dataclass(frozen=True)
class ScriptCluster:
    """The cluster shape a script fixes itself."""

    jobs: tuple[tuple[str, int], ...]  # job -> task count, in the script's order
    line: int  # where the script builds it
    how: str  # "literal host lists", "CLUSTER_CONFIG env var, else literal", ...
    # a flag choosing among literal clusters: (option as spelled, chosen value, {value: jobs})
    choice: tuple[str, str, tuple[tuple[str, tuple[tuple[str, int], ...]], ...]] | None = None
    # what the script's own hosts are (job -> literal addresses), where literal
    hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def as_dict(self) -> dict:
        return {
            "jobs": dict(self.jobs),
            "line": self.line,
            "how": self.how,
            "choice": None if self.choice is None else {"option": self.choice[0], "value": self.choice[1]},
        }


class _Unresolved(Exception):
    pass


@dataclass
class _Resolved:
    """A value statically resolved: a cluster (job -> list), a list (count,
    maybe literal hosts), or a choice of clusters keyed by a flag."""

    kind: str  # "cluster" | "list" | "choice"
    jobs: dict | None = None  # cluster: job -> (count, hosts or None)
    count: int | None = None  # list
    hosts: tuple[str, ...] | None = None  # list: literal entries
    choices: dict | None = None  # choice: key -> cluster _Resolved
    chooser: str | None = None  # choice: the flag name
    via: set = field(default_factory=set)  # notes: "env:NAME", "module:settings.py", "flags"


class _ClusterResolver:
    """Resolves expressions of one module (and its sibling modules) to
    cluster shapes; never executes anything."""

    def __init__(self, tree: ast.Module, directory: str | None, depth: int = 0) -> None:
        self.tree = tree
        self.directory = directory
        self.depth = depth
        self.assignments: dict[str, list[ast.AST]] = {}
        self.imports: dict[str, tuple[str, str | None]] = {}  # local -> (module, name or None)
        self.functions = {
            node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assignments.setdefault(target.id, []).append(node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    self.assignments.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (alias.name, None)
        self.defaults: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _DEFINE.match(_call_name(node)) and len(node.args) >= 2:
                name = _string(node.args[0])
                if name and isinstance(node.args[1], ast.Constant):
                    self.defaults[name] = node.args[1].value
            elif isinstance(node, ast.Call) and _call_name(node) == "add_argument":
                names = [_string(a) for a in node.args]
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                for name in names:
                    if name and name.startswith("--") and isinstance(default, ast.Constant):
                        self.defaults[name[2:].replace("-", "_")] = default.value
        self.seen: set[int] = set()

    # ---- modules

    def sibling(self, module: str) -> _ClusterResolver | None:
        if self.directory is None or self.depth > 1 or "." in module:
            return None
        path = os.path.join(self.directory, module + ".py")
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            return None
        return _ClusterResolver(tree, self.directory, self.depth + 1)

    # ---- expressions

    def name(self, name: str) -> _Resolved:
        if name in self.imports:
            module, member = self.imports[name]
            other = self.sibling(module)
            if other is not None and member is not None:
                found = other.name(member)
                found.via.add(f"module:{module}.py")
                return found
        candidates = self.assignments.get(name, [])
        envs = set()
        for value in candidates:
            if id(value) in self.seen:
                continue
            self.seen.add(id(value))
            try:
                found = self.resolve(value)
            except _Unresolved as e:
                if str(e).startswith("env:"):
                    envs.add(str(e))
                continue
            finally:
                self.seen.discard(id(value))
            found.via |= envs
            if len(candidates) > 1 and found.kind == "cluster":
                found.via |= {f"env:{env}" for env in self._env_names(candidates)}
            return found
        raise _Unresolved(next(iter(envs), f"name:{name}"))

    def _env_names(self, candidates: list[ast.AST]) -> set[str]:
        names = set()
        for value in candidates:
            for node in ast.walk(value):
                if isinstance(node, ast.Name) and node.id in self.assignments:
                    for source in self.assignments[node.id]:
                        names |= _env_read_names(source)
                names |= _env_read_names(node) if isinstance(node, ast.Call) else set()
        return names

    def resolve(self, node: ast.AST) -> _Resolved:
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = node.value.id
            if owner in self.imports and self.imports[owner][1] is None:
                other = self.sibling(self.imports[owner][0])
                if other is not None:
                    found = other.name(node.attr)
                    found.via.add(f"module:{self.imports[owner][0]}.py")
                    return found
            raise _Unresolved("flags" if owner.lower() in ("flags", "args", "opts", "options") else "attr")
        if isinstance(node, ast.Dict):
            return self.cluster_dict(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            hosts = tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
            if any(isinstance(e, ast.Starred) for e in node.elts):
                raise _Unresolved("starred")
            return _Resolved("list", count=len(node.elts), hosts=hosts if len(hosts) == len(node.elts) else None)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            return self.comprehension(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.resolve(node.left), self.resolve(node.right)
            if left.kind == right.kind == "list":
                hosts = left.hosts + right.hosts if left.hosts is not None and right.hosts is not None else None
                return _Resolved("list", count=left.count + right.count, hosts=hosts, via=left.via | right.via)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        raise _Unresolved(type(node).__name__)

    def comprehension(self, node: ast.ListComp) -> _Resolved:
        iterable = node.generators[0].iter
        if node.generators[0].ifs:
            raise _Unresolved("filtered comprehension")
        if isinstance(iterable, ast.Call) and _call_name(iterable) == "zip" and iterable.args:
            counts = []
            for arg in iterable.args:
                try:
                    counts.append(self.resolve(arg).count)
                except _Unresolved:
                    pass
            counts = [c for c in counts if c is not None]
            if counts:
                return _Resolved("list", count=min(counts))
        if isinstance(iterable, ast.Call) and _call_name(iterable) == "range":
            values = [a.value for a in iterable.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
            if len(values) == len(iterable.args) and values:
                return _Resolved("list", count=len(range(*values)))
        found = self.resolve(iterable)
        if found.kind == "list":
            return _Resolved("list", count=found.count, via=found.via)
        raise _Unresolved("comprehension")

    def subscript(self, node: ast.Subscript) -> _Resolved:
        base = self.resolve(node.value)
        if base.kind != "choice-table":
            raise _Unresolved("subscript")
        key = node.slice
        flag = None
        if isinstance(key, ast.Attribute):
            flag = key.attr
        elif isinstance(key, ast.Constant) and key.value in base.choices:
            return base.choices[key.value]
        if flag is None:
            raise _Unresolved("subscript")
        return _Resolved("choice", choices=base.choices, chooser=flag, via=base.via)

    def cluster_dict(self, node: ast.Dict) -> _Resolved:
        keys = [_string(k) for k in node.keys]
        if not keys or None in keys:
            raise _Unresolved("dict")
        # {"single": ClusterSpec(...), "cluster": ...}: a table of clusters
        if all(isinstance(v, (ast.Name, ast.Call, ast.Dict)) for v in node.values):
            tables = {}
            for key, value in zip(keys, node.values):
                try:
                    found = self.resolve(value)
                except _Unresolved:
                    break
                if found.kind != "cluster":
                    break
                tables[key] = found
            else:
                if "cluster" in keys and len(keys) <= 3 and set(keys) <= {"cluster", "task", "environment", "rpc_layer"}:
                    return tables["cluster"]  # a TF_CONFIG dict
                return _Resolved("choice-table", choices=tables)
        if "cluster" in keys:
            return self.resolve(node.values[keys.index("cluster")])  # a TF_CONFIG dict
        jobs = {}
        via: set = set()
        for key, value in zip(keys, node.values):
            if isinstance(value, ast.Dict):  # {index: address}
                count = len(value.keys)
                hosts = tuple(v.value for v in value.values if isinstance(v, ast.Constant))
                jobs[key] = (count, hosts if len(hosts) == count else None)
                continue
            found = self.resolve(value)
            if found.kind != "list":
                raise _Unresolved("dict value")
            jobs[key] = (found.count, found.hosts)
            via |= found.via
        return _Resolved("cluster", jobs=jobs, via=via)

    def call(self, node: ast.Call) -> _Resolved:
        name = _call_name(node)
        if name in ("ClusterSpec", "dict") and node.args:
            return self.resolve(node.args[0])
        if name == "ClusterSpec" and node.keywords:
            raise _Unresolved("ClusterSpec(**)")
        if name == "ClusterDef":
            jobs_arg = next((k.value for k in node.keywords if k.arg == "job"), node.args[0] if node.args else None)
            if isinstance(jobs_arg, (ast.List, ast.Tuple)):
                jobs = {}
                for job in jobs_arg.elts:
                    if not isinstance(job, ast.Call) or _call_name(job) != "JobDef":
                        raise _Unresolved("JobDef")
                    kw = {k.arg: k.value for k in job.keywords}
                    job_name = _string(kw.get("name"))
                    tasks = kw.get("tasks")
                    if job_name is None or not isinstance(tasks, ast.Dict):
                        raise _Unresolved("JobDef")
                    hosts = tuple(v.value for v in tasks.values if isinstance(v, ast.Constant))
                    jobs[job_name] = (len(tasks.keys), hosts if len(hosts) == len(tasks.keys) else None)
                return _Resolved("cluster", jobs=jobs)
        if name == "ServerDef":
            cluster = next((k.value for k in node.keywords if k.arg == "cluster"), None)
            if cluster is not None:
                return self.resolve(cluster)
        if isinstance(node.func, ast.Name) and name in self.functions and id(node) not in self.seen:
            # cluster_from_env(): what the function returns where literal
            function = self.functions[name]
            self.seen.add(id(node))
            try:
                for ret in (n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None):
                    try:
                        found = self.resolve(ret.value)
                    except _Unresolved:
                        continue
                    found.via |= {f"env:{env}" for env in _env_read_names(function)}
                    return found
            finally:
                self.seen.discard(id(node))
        if name in ("literal_eval", "loads", "eval"):
            envs = set()
            for arg in node.args:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Name):
                        for source in self.assignments.get(sub.id, []):
                            envs |= _env_read_names(source)
                    if isinstance(sub, (ast.Call, ast.Subscript)):
                        envs |= _env_read_names(sub)
            raise _Unresolved(f"env:{min(envs)}" if envs else "parsed")
        if name == "split" and isinstance(node.func, ast.Attribute):
            text = _string(node.func.value)
            sep = _string(node.args[0]) if node.args else None
            if text is not None:
                return _Resolved("list", count=len(text.split(sep)), hosts=tuple(text.split(sep)))
            owner = node.func.value
            if isinstance(owner, ast.Attribute):
                raise _Unresolved("flags")
        raise _Unresolved(f"call:{name}")


def _env_read_names(node: ast.AST) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _call_name(sub) in _ENV_GETTERS and sub.args:
            text = _string(sub.args[0])
            if text:
                names.add(text)
        elif isinstance(sub, ast.Subscript) and getattr(sub.value, "attr", getattr(sub.value, "id", None)) == "environ":
            text = _string(sub.slice)
            if text:
                names.add(text)
    return names


_CLUSTER_CALLS = ("ClusterSpec", "ClusterDef", "Server")


def _flatten_jobs(resolved: _Resolved) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    jobs = tuple((job, count) for job, (count, _) in resolved.jobs.items())
    hosts = tuple((job, hosts) for job, (_, hosts) in resolved.jobs.items() if hosts)
    return jobs, hosts


def find_script_cluster(tree: ast.Module, path: str | None = None) -> ScriptCluster | None:
    """The cluster shape the script fixes itself (literal host lists, a
    literal fallback to an environment variable, a sibling settings module, a
    ClusterDef, a literal TF_CONFIG, a flag choosing among literal clusters),
    or None when its cluster comes from flags, TF_CONFIG or code that cannot
    be read statically."""
    resolver = _ClusterResolver(tree, os.path.dirname(os.path.abspath(path)) if path else None)
    # the cluster a Server is built with first, then any ClusterSpec/ClusterDef
    servers = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _call_name(node) == "Server" and (node.args or node.keywords)
    ]
    calls = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _call_name(node) in ("ClusterSpec", "ClusterDef") and (node.args or node.keywords)
    ]
    # a TF_CONFIG the script writes itself: os.environ["TF_CONFIG"] = json.dumps({...})
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Subscript) and _string(t.slice) == "TF_CONFIG" for t in node.targets
        ):
            calls.append(node.value)
    ordered = sorted(servers, key=lambda n: n.lineno) + sorted(calls, key=lambda n: n.lineno)
    for node in ordered:
        if isinstance(node, ast.Call) and _call_name(node) == "Server":
            target = next((k.value for k in node.keywords if k.arg == "server_or_cluster_def"), None)
            target = target or (node.args[0] if node.args else None)
            if target is None:
                continue
        else:
            target = node.args[0] if isinstance(node, ast.Call) and _call_name(node) == "ClusterSpec" else node
        if isinstance(target, ast.Call) and _call_name(target) in ("dumps",) and target.args:
            target = target.args[0]
        try:
            found = resolver.resolve(target)
        except _Unresolved:
            continue
        if found.kind == "choice":
            default = resolver.defaults.get(found.chooser)
            table = {key: _flatten_jobs(value)[0] for key, value in found.choices.items()}
            if default not in table:
                default = next(iter(table))
            jobs, hosts = _flatten_jobs(found.choices[default])
            return ScriptCluster(
                jobs, node.lineno, f"one of {len(table)} literal clusters chosen by --{found.chooser}",
                (found.chooser, default, tuple(table.items())), hosts,
            )
        if found.kind != "cluster" or not found.jobs:
            continue
        jobs, hosts = _flatten_jobs(found)
        envs = sorted(v[4:] for v in found.via if v.startswith("env:"))
        modules = sorted(v[7:] for v in found.via if v.startswith("module:"))
        if envs:
            how = f"the {envs[0]} environment variable, else literal host lists"
        elif modules:
            how = f"literal host lists in the sibling module {modules[0]}"
        elif "ClusterDef" in {
            _call_name(n) for value in (node, *resolver_values(resolver, target))
            for n in ast.walk(value) if isinstance(n, ast.Call)
        }:
            how = "a literal ClusterDef"
        elif not isinstance(node, ast.Call):
            how = "a literal TF_CONFIG the script writes"
        else:
            how = "literal host lists"
        return ScriptCluster(jobs, node.lineno, how, None, hosts)
    return None


def resolver_values(resolver: _ClusterResolver, node: ast.AST) -> list[ast.AST]:
    """The expressions a name stands for (for describing where a cluster comes from)."""
    if isinstance(node, ast.Name):
        values = list(resolver.assignments.get(node.id, []))
        for value in list(values):
            values += resolver_values(resolver, value) if isinstance(value, ast.Name) else []
            for sub in ast.walk(value):
                if isinstance(sub, ast.Name) and sub is not value:
                    values += resolver.assignments.get(sub.id, [])
        return values
    return [node]
