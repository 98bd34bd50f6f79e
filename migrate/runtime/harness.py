"""Boot hook of ``tfmigrate check``: observe an unmodified training program.

Activated in a cluster task with ``TFMIGRATE_BOOT_HOOKS=migrate.runtime.harness``
(see :mod:`migrate.runtime.taskboot`); configured by environment variables, so the
program itself is never edited:

``TFMIGRATE_HARNESS`` (comma-separated features)
    ``record``  record per-step training losses (below);
    ``init``    dump the initial values of trainable variables (npz);
    ``robust``  defuse the known hang points of legacy ps/worker code;
    ``isolate`` keep checkpoints inside the harness directory: a path the
                script hard-codes (``checkpoint_dir="/tmp/train_logs"``)
                maps to ``<dir>/checkpoints/tmp/train_logs``, so one run
                never restores what another run (or the other side) saved;
    ``hide``    hide ``TFMIGRATE_LOSS_LOG`` from the program, so only the
                harness records losses (to verify the harness itself);
    ``tf1layers`` where Keras 3 left ``tf.compat.v1.layers`` without its
                functions (no tf-keras), provide TF1's dense, conv2d,
                max_pooling2d, average_pooling2d, flatten and dropout from
                :mod:`migrate.codemod.tf1_layers` -- the code TFM104 writes into
                migrations -- so a legacy program that uses them can run;
    ``contrib`` provide the ``tf.contrib`` members of
                :data:`migrate.runtime.legacy_compat.CONTRIB_PROVIDED` in every
                spelling TF 1.x had, exactly as TF 1.x ran them
                (:mod:`migrate.runtime.contrib_standin`);
    ``mnist``   serve ``tensorflow.examples.tutorials.mnist.input_data``
                (removed in TF 2, it downloaded MNIST) from
                :mod:`migrate.runtime.mnist_standin`: the same API on deterministic
                synthetic data, the same for both sides of a check.
``TFMIGRATE_CLUSTER``       the launcher's cluster (JSON ``{job: [address, ...]}``): whatever
                            cluster the program builds (``ClusterSpec``, ``ClusterDef``,
                            ``ServerDef``, a ``TF_CONFIG`` it writes, a resolver's spec) is
                            mapped onto it task by task (job and index), so hard-coded
                            hosts (``pc-01:2222``, docker names, remote IPs) become the
                            launcher's loopback ports; session targets naming a mapped
                            address follow. The mapping is written to the notes
                            (``cluster_map``) for the report.
``TFMIGRATE_STD_SERVER``    with ``TFMIGRATE_CLUSTER``: this task is not the program but a
                            standard TensorFlow server for its place in the launcher's
                            cluster (what a script that hard-codes its own role, e.g. an
                            in-graph client ``Server(cluster, "worker", 2)``, expects the
                            other tasks to run)
``TFMIGRATE_TF_CONFIG``     with ``TFMIGRATE_CLUSTER``: also set ``TF_CONFIG`` for this task
                            (a script reading its role from flags or from TF_CONFIG)
``TFMIGRATE_HARNESS_DIR``   where the harness writes (default: beside the loss log,
                            else a new temp dir)
``TFMIGRATE_ALIGN_INIT``    npz of initial values to carry into this job by name
``TFMIGRATE_SEED``          seed numpy, ``random`` and TensorFlow's global seeds
``TFMIGRATE_HARNESS_BARRIER``  with ``robust``: how many tasks train; each
                            waits at its first training step until all got there

What it records, per task (``TFMIGRATE_TASK``), in the harness directory:

- legacy graph programs: ``Optimizer.compute_gradients``/``apply_gradients``
  are wrapped to remember which train op belongs to which loss tensor (the
  mean of the losses whose gradients it applies: one per tower). A patched
  ``Session.run`` adds that loss to any fetch containing the train op and
  writes it down; the caller gets exactly its original results. This also
  covers ``MonitoredSession``/``Supervisor``, which end in ``Session.run``.
  File ``harness-losses-<task>.jsonl`` (the :mod:`migrate.runtime.losslog` format,
  ``step`` = the task's n-th training step, plus ``time``: when it returned).
- tf.function programs (the migrations): ``GradientTape.gradient(target)``
  attaches a ``tf.print`` of the loss (``target``, or ``target.op.inputs[0]``
  when target is the loss divided or multiplied by a constant, as in
  ``loss / strategy.num_replicas_in_sync``) and of the replica id. The print
  goes to ``file://`` so it works where the function runs, also on a remote
  ParameterServerStrategy worker (all tasks share this machine). The loss is
  printed as the bits of a float64, so nothing is lost to formatting. File
  ``harness-print-<task>.txt``, lines ``TFMH <replica id> <int64 bits> <unix time>``.
- ``harness-init-<task>.npz``: trainable variables' initial values (legacy:
  read just before the task's first training step; tf.function programs:
  captured when each variable is created).
- ``harness-notes-<task>.json``: which hang defusers and alignments fired.

Nothing here may break the program: every observer swallows its own errors.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

FEATURES_ENV = "TFMIGRATE_HARNESS"
DIR_ENV = "TFMIGRATE_HARNESS_DIR"
ALIGN_ENV = "TFMIGRATE_ALIGN_INIT"
SEED_ENV = "TFMIGRATE_SEED"
BARRIER_ENV = "TFMIGRATE_HARNESS_BARRIER"  # number of tasks that train
LOSS_LOG_ENV = "TFMIGRATE_LOSS_LOG"
CLUSTER_ENV = "TFMIGRATE_CLUSTER"
STD_SERVER_ENV = "TFMIGRATE_STD_SERVER"
TF_CONFIG_TOO_ENV = "TFMIGRATE_TF_CONFIG"
DEVICE_FILTERS_ENV = "TFMIGRATE_DEVICE_FILTERS"  # "0": robust adds no device_filters

PRINT_TAG = "TFMH"
RECOVERY_WAIT_CAP_SECS = 1.0
STOP_GRACE_CAP_SECS = 2.0
BARRIER_MAX_SECS = 60.0


def task_name() -> str:
    return os.environ.get("TFMIGRATE_TASK", "worker:0")


def _file_stem(task: str) -> str:
    return task.replace(":", "-").replace("/", "_")


def losses_path(directory: Path, task: str) -> Path:
    return directory / f"harness-losses-{_file_stem(task)}.jsonl"


def print_path(directory: Path, task: str) -> Path:
    return directory / f"harness-print-{_file_stem(task)}.txt"


def init_path(directory: Path, task: str) -> Path:
    return directory / f"harness-init-{_file_stem(task)}.npz"


def own_init_path(directory: Path, task: str) -> Path:
    """The migrated program's own initial draws of the values ``align`` replaced."""
    return directory / f"harness-own-init-{_file_stem(task)}.npz"


def notes_path(directory: Path, task: str) -> Path:
    return directory / f"harness-notes-{_file_stem(task)}.json"


def decode_print_line(line: str) -> tuple[str, float] | None:
    """``TFMH <replica> <bits> [<unix time>]`` -> (replica id, loss), else None."""
    parts = line.split()
    if len(parts) not in (3, 4) or parts[0] != PRINT_TAG:
        return None
    try:
        bits = int(parts[2])
    except ValueError:
        return None
    return parts[1], struct.unpack("<d", struct.pack("<q", bits))[0]


def print_line_time(line: str) -> float | None:
    """The time stamp of a ``TFMH`` line (when the step's loss was computed)."""
    parts = line.split()
    if len(parts) != 4 or parts[0] != PRINT_TAG:
        return None
    try:
        return float(parts[3])
    except ValueError:
        return None


def strip_variable_name(name: str) -> str:
    return name.removesuffix(":0")


def match_names(wanted: list[str], available: list[str]) -> dict[str, str]:
    """Pair each name of ``wanted`` with the one name of ``available`` that is
    equal to it, or of which it is a ``/``-suffix, or vice versa (scopes such
    as a template's ``model/`` prefix differ between legacy and migration).
    Ambiguous or missing names are left out."""
    out: dict[str, str] = {}
    for w in wanted:
        if w in available:
            out[w] = w
            continue
        hits = [a for a in available if a.endswith("/" + w) or w.endswith("/" + a)]
        if len(hits) == 1:
            out[w] = hits[0]
    return out


# Where tf.distribute keeps its own code: a variable constructed directly from
# there (not through a creator scope the program's own tf.Variable entered) is
# the strategy's bookkeeping, e.g. the collective ops' ordering token that every
# MultiWorkerMirroredStrategy makes at construction, never a model variable.
_DISTRIBUTE_DIR = os.sep + os.path.join("tensorflow", "python", "distribute") + os.sep


def made_by_distribution_machinery(caller) -> bool:
    """Whether the frame that called a Variable constructor is tf.distribute's
    own code: such variables exist in the migrated program only, take the
    unnamed ``Variable`` names the program's own variables would get, and must
    neither be paired with legacy variables nor shift their numbering."""
    return _DISTRIBUTE_DIR in caller.f_code.co_filename


# The names TF gives variables created without one: ``Variable``, ``Variable_3``,
# ``scope/Variable_1``. Their numbers count every unnamed variable made before,
# so they pair legacy and migrated values only while both made the same ones.
UNNAMED_VARIABLE = re.compile(r"(?:^|/)Variable(?:_\d+)?$")


def pair_initial_values(legacy: dict, migrated: dict) -> dict[str, str]:
    """Pair legacy with migrated variables (name -> array, in creation order).

    Named variables by name (``match_names``), where the shapes agree.
    Unnamed ones (``Variable_N``) by creation order: each legacy one with the
    next migrated unnamed variable of its shape. Their numbers only count the
    unnamed variables made before, and the migration may make some the legacy
    program did not (a library's bookkeeping), shifting every number after
    them; where nothing shifted, the order pairs them as their names do. A
    legacy variable with no partner of its shape stays unpaired."""
    named_legacy = [n for n in legacy if not UNNAMED_VARIABLE.search(n)]
    named_migrated = [n for n in migrated if not UNNAMED_VARIABLE.search(n)]
    pairs = {
        lname: mname
        for lname, mname in match_names(named_legacy, named_migrated).items()
        if _shape(legacy[lname]) == _shape(migrated[mname])
    }
    unnamed_migrated = [m for m in migrated if UNNAMED_VARIABLE.search(m)]
    position = 0
    for lname, value in legacy.items():
        if not UNNAMED_VARIABLE.search(lname):
            continue
        for i in range(position, len(unnamed_migrated)):
            if _shape(migrated[unnamed_migrated[i]]) == _shape(value):
                pairs[lname] = unnamed_migrated[i]
                position = i + 1
                break
    return pairs


def _shape(value) -> tuple:
    return tuple(getattr(value, "shape", ()))


class _Harness:
    def __init__(self) -> None:
        self.features = {
            f.strip() for f in os.environ.get(FEATURES_ENV, "record").split(",") if f.strip()
        }
        self.task = task_name()
        loss_log = os.environ.get(LOSS_LOG_ENV)
        # Never the working directory: outside a launcher, a private temp dir.
        default_dir = (
            Path(loss_log).parent
            if loss_log
            else Path(tempfile.gettempdir()) / f"tfmigrate-harness-{os.getpid()}"
        )
        self.dir = Path(os.environ.get(DIR_ENV) or default_dir)
        self.lock = threading.Lock()
        self.notes: dict[str, object] = {"task": self.task, "fired": []}
        self.train_ops: dict[object, object] = {}  # train Operation -> loss Tensor
        self.pending_losses: list[object] = []
        self.last_losses: list[object] = []  # of the train op registered last
        self.depth = threading.local()
        self.steps_recorded = 0
        self.started = False  # this task ran its first training step
        self.init_saved = False  # tf.function programs: initial values saved at the first trace
        self.created_init: dict[str, object] = {}
        self.own_init: dict[str, object] = {}
        self.align_seen: dict[str, int] = {}
        self.capture_seen: dict[str, int] = {}
        self.align_values: dict[str, object] = {}
        self.aligned: list[str] = []
        self.align_used: set[str] = set()  # legacy names whose values went to a variable
        if "hide" in self.features:
            os.environ.pop(LOSS_LOG_ENV, None)

    # ------------------------------------------------------------ notes

    def fired(self, what: str) -> None:
        with self.lock:
            fired = self.notes["fired"]
            if what not in fired:
                fired.append(what)
        self.write_notes()

    def failed(self, error: Exception) -> None:
        """An observer failed: note it (the program carries on unobserved)."""
        with self.lock:
            errors = self.notes.setdefault("errors", [])
            if len(errors) < 20:
                errors.append(repr(error)[:300])

    def write_notes(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.notes["aligned"] = list(self.aligned)
            notes_path(self.dir, self.task).write_text(json.dumps(self.notes), encoding="utf-8")
        except OSError:
            pass

    # ------------------------------------------------------------ install

    def install(self) -> None:
        import tensorflow as tf

        self.tf = tf
        seed = os.environ.get(SEED_ENV)
        if seed:
            self.seed(int(seed))
        if "record" in self.features or "init" in self.features:
            self.patch_optimizers()
            self.patch_session_run()
        if "record" in self.features:
            self.patch_gradient_tape()
        if "init" in self.features or os.environ.get(ALIGN_ENV):
            self.patch_variable_creation()
        if "robust" in self.features:
            self.patch_hang_points()
        if os.environ.get(CLUSTER_ENV):
            self.patch_cluster()
            if os.environ.get(STD_SERVER_ENV):
                self.serve_forever()
        if "isolate" in self.features:
            self.patch_checkpoint_paths()
        if "tf1layers" in self.features:
            self.provide_tf1_layers()
        if "mnist" in self.features:
            self.provide_mnist_reader()
        if "contrib" in self.features:
            self.provide_contrib()
        atexit.register(self.at_exit)

    def seed(self, seed: int) -> None:
        import random

        import numpy as np

        random.seed(seed)
        np.random.seed(seed)
        self.tf.random.set_seed(seed)
        # Graph-mode programs build in the global default graph after
        # disable_eager_execution(), or in a `with tf.Graph().as_default():` of
        # their own; a graph's seed is its own, so every graph gets it.
        self.tf.compat.v1.get_default_graph().seed = seed
        from tensorflow.python.framework import ops

        original_init = ops.Graph.__init__

        def init_seeded(graph, *args, **kwargs):
            original_init(graph, *args, **kwargs)
            if type(graph) is not ops.Graph:
                return  # a tf.function's graph takes the seed of its context itself
            try:
                graph.seed = seed
            except Exception as e:  # noqa: BLE001 - observing must never break the program
                self.failed(e)

        ops.Graph.__init__ = init_seeded
        self.notes["seed"] = seed

    # ------------------------------------------------------------ legacy: train ops

    def _depth(self) -> int:
        return getattr(self.depth, "value", 0)

    def patch_optimizers(self) -> None:
        from tensorflow.python.training import optimizer as optimizer_lib

        harness = self
        base = optimizer_lib.Optimizer
        classes = [base]
        stack = list(base.__subclasses__())
        while stack:
            cls = stack.pop()
            classes.append(cls)
            stack.extend(cls.__subclasses__())

        def wrap_compute(original):
            def compute_gradients(self, loss, *args, **kwargs):
                if harness._depth() == 0 and not callable(loss):
                    harness.pending_losses.append(loss)
                harness.depth.value = harness._depth() + 1
                try:
                    return original(self, loss, *args, **kwargs)
                finally:
                    harness.depth.value -= 1

            return compute_gradients

        def wrap_apply(original):
            def apply_gradients(self, *args, **kwargs):
                outer = harness._depth() == 0
                harness.depth.value = harness._depth() + 1
                try:
                    result = original(self, *args, **kwargs)
                finally:
                    harness.depth.value -= 1
                if outer:
                    harness.register_train_op(result)
                return result

            return apply_gradients

        for cls in classes:
            if "compute_gradients" in cls.__dict__:
                cls.compute_gradients = wrap_compute(cls.__dict__["compute_gradients"])
            if "apply_gradients" in cls.__dict__:
                cls.apply_gradients = wrap_apply(cls.__dict__["apply_gradients"])

        # `grads = tf.gradients(loss, params)` then `apply_gradients(zip(grads, params))`:
        # the loss is the one given to tf.gradients (the public names only: the
        # optimizers' own calls go through the module they import)
        def wrap_gradients(original):
            def gradients(ys, *args, **kwargs):
                if harness._depth() == 0 and not callable(ys):
                    harness.pending_losses.append(ys)
                harness.depth.value = harness._depth() + 1
                try:
                    return original(ys, *args, **kwargs)
                finally:
                    harness.depth.value -= 1

            return gradients

        import importlib

        # (imported first: importing the v1 namespace later would bind its names anew)
        for namespace in (self.tf, importlib.import_module("tensorflow.compat.v1")):
            original = getattr(namespace, "gradients", None)
            if original is not None:
                namespace.gradients = wrap_gradients(original)

    def register_train_op(self, train_op) -> None:
        losses, self.pending_losses = self.pending_losses, []
        try:
            tf = self.tf
            if tf.executing_eagerly():
                return
            op = getattr(train_op, "op", train_op)
            if not losses:
                # gradients computed earlier and applied again (DOWNPOUR: a
                # local optimizer's gradients summed into a global one's
                # update): the losses they were computed from
                losses = self.last_losses
            losses = [t for t in losses if getattr(t, "graph", None) is op.graph]
            if not losses:
                return
            self.last_losses = losses
            # One loss per tower: averaged by ``check`` in float64, like the
            # per-replica losses of a migration.
            self.train_ops[op] = losses
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    def _find_train_op(self, fetches, depth: int = 0):
        if depth > 6 or not self.train_ops:
            return None
        if isinstance(fetches, dict):
            items = fetches.values()
        elif isinstance(fetches, (list, tuple)):
            items = fetches
        else:
            op = getattr(fetches, "op", fetches)
            try:
                return op if op in self.train_ops else self._grouped_train_op(op)
            except TypeError:
                return None
        for item in items:
            found = self._find_train_op(item, depth + 1)
            if found is not None:
                return found
        return None

    def _grouped_train_op(self, op, limit: int = 400):
        """The train op an op runs with it: `tf.group(train_op, ema_op)`,
        `with tf.control_dependencies([train_op]): ema.apply(...)` (the
        op the session runs is then the moving averages' update, which
        depends on the optimizer's). Found through the op's control and data
        inputs, a few hundred ops at most; remembered per op."""
        cache = self.__dict__.setdefault("_grouped", {})
        if op in cache:
            return cache[op]
        found, seen, queue = None, {op}, [op]
        while queue and found is None and len(seen) < limit:
            current = queue.pop(0)
            for dep in [*getattr(current, "control_inputs", ()), *(t.op for t in getattr(current, "inputs", ()))]:
                if dep in self.train_ops:
                    found = dep
                    break
                if dep not in seen and dep.type not in ("VarHandleOp", "VariableV2", "Placeholder", "Const"):
                    seen.add(dep)
                    queue.append(dep)
        cache[op] = found
        return found

    def patch_session_run(self) -> None:
        from tensorflow.python.client import session as session_lib

        harness = self
        original = session_lib.BaseSession.run

        def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
            train_op = harness._find_train_op(fetches) if harness.train_ops else None
            if train_op is None or getattr(harness.depth, "in_run", False):
                return original(self, fetches, feed_dict, options, run_metadata)
            loss = harness.train_ops[train_op]
            harness.depth.in_run = True
            try:
                if not harness.started:
                    harness.started = True
                    # Initial values first: once the barrier opens, other
                    # workers may update the shared variables.
                    if "init" in harness.features:
                        harness.dump_graph_init(self, train_op.graph)
                    harness.start_barrier()
                results, loss_value = original(
                    self, (fetches, loss), feed_dict, options, run_metadata
                )
            finally:
                harness.depth.in_run = False
            harness.record_losses(loss_value)
            return results

        session_lib.BaseSession.run = run

    def start_barrier(self) -> None:
        """Hold this task's first training step until every worker reached
        its own (files in the harness directory; at most BARRIER_MAX_SECS).
        Otherwise a chief that is ready first can train the whole job before
        a non-chief has its session, the "late non-chief" of legacy code."""
        wanted = os.environ.get(BARRIER_ENV, "")
        if "robust" not in self.features or not wanted.isdigit():
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / f"harness-ready-{_file_stem(self.task)}").touch()
            deadline = time.monotonic() + BARRIER_MAX_SECS
            while time.monotonic() < deadline:
                if len(list(self.dir.glob("harness-ready-*"))) >= int(wanted):
                    self.fired("start barrier")
                    return
                time.sleep(0.05)
            self.fired("start barrier timed out")
        except OSError as e:
            self.failed(e)

    def record_losses(self, values) -> None:
        """Record this task's next training step: one loss, or one per tower
        of an in-graph step (``check`` averages them in float64, as it does
        the per-replica losses of a migration), with the time it ended (the
        job's order of updates for asynchronous runs)."""
        if "record" not in self.features:
            return
        try:
            many = len(values) > 1
            now = time.time()
            lines = [
                json.dumps(
                    {
                        "step": self.steps_recorded,
                        "task": f"{self.task}/tower:{i}" if many else self.task,
                        "loss": float(v),
                        "time": now,
                    }
                )
                for i, v in enumerate(values)
            ]
            self.steps_recorded += 1
            self.dir.mkdir(parents=True, exist_ok=True)
            with open(losses_path(self.dir, self.task), "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
        except (OSError, TypeError, ValueError):
            pass

    def dump_graph_init(self, session, graph) -> None:
        try:
            variables = graph.get_collection(self.tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
            values = session.run(variables) if variables else []
            self.save_init({strip_variable_name(v.name): val for v, val in zip(variables, values)})
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    def save_init(self, values: dict, path_of=init_path) -> None:
        import numpy as np

        if not values:
            return
        if path_of(self.dir, self.task).exists():
            return  # a restarted task (fault injection) restores, it does not initialise
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            # np.savez keys cannot hold "/" reliably: store names separately.
            names = list(values)
            arrays = {f"v{i}": np.asarray(values[n]) for i, n in enumerate(names)}
            np.savez(path_of(self.dir, self.task), __names__=np.array(names), **arrays)
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    # ------------------------------------------------------------ tf.function: tape

    def patch_gradient_tape(self) -> None:
        from tensorflow.python.eager import backprop

        harness = self
        original = backprop.GradientTape.gradient

        def gradient(self, target, sources, *args, **kwargs):
            result = original(self, target, sources, *args, **kwargs)
            harness.observe_target(target)
            return result

        backprop.GradientTape.gradient = gradient

    def observe_target(self, target) -> None:
        tf = self.tf
        try:
            if not isinstance(target, tf.Tensor) or target.shape.rank != 0:
                return
            if not target.dtype.is_floating:
                return
            if self.created_init and not self.init_saved:
                # the model exists once its first step is traced: its initial values
                # are saved now, not only at exit (check may stop the job early)
                self.init_saved = True
                self.save_init(self.created_init)
                self.save_init(self.own_init, own_init_path)
            if tf.executing_eagerly() and not tf.inside_function():
                self.record_losses([float(target.numpy())])
                return
            loss = _unscaled_loss(target)
            context = tf.distribute.get_replica_context()
            replica = context.replica_id_in_sync_group if context is not None else 0
            bits = tf.bitcast(tf.cast(loss, tf.float64), tf.int64)
            self.dir.mkdir(parents=True, exist_ok=True)
            tf.print(
                PRINT_TAG,
                replica,
                bits,
                tf.timestamp(),
                output_stream="file://" + str(print_path(self.dir, self.task).resolve()),
            )
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    # ------------------------------------------------------------ variables

    def patch_variable_creation(self) -> None:
        import numpy as np
        from tensorflow.python.ops import variables

        harness = self
        align = os.environ.get(ALIGN_ENV)
        if align:
            try:
                with np.load(align) as data:
                    names = [str(n) for n in data["__names__"]]
                    self.align_values = {n: data[f"v{i}"] for i, n in enumerate(names)}
            except (OSError, KeyError, ValueError):
                self.align_values = {}
        original = variables.VariableMetaclass.__call__
        local = threading.local()

        def call(cls, *args, **kwargs):
            outer = not getattr(local, "busy", False)
            if not outer or made_by_distribution_machinery(sys._getframe(1)):
                return original(cls, *args, **kwargs)
            local.busy = True
            try:
                if harness.align_values:
                    args, kwargs = harness.align_initial_value(args, kwargs)
                var = original(cls, *args, **kwargs)
            finally:
                local.busy = False
            harness.capture_initial_value(var)
            return var

        variables.VariableMetaclass.__call__ = call

    def align_initial_value(self, args, kwargs):
        tf = self.tf
        try:
            if len(args) == 1 and "initial_value" not in kwargs:
                # tf.Variable(initial, name=...): the one positional argument is the
                # initial value in every Variable class's signature
                args, kwargs = (), {**kwargs, "initial_value": args[0]}
            if args or "initial_value" not in kwargs:
                return args, kwargs
            if kwargs.get("trainable") is False:
                return args, kwargs
            name = strip_variable_name(str(kwargs.get("name") or "Variable"))
            # eager code (a migrated model built under variable_scope) keeps its
            # scope in the eager context, not in the default graph
            scope = tf.get_current_name_scope().rstrip("/")
            full = self.graph_unique(f"{scope}/{name}" if scope else name, self.align_seen)
            name = full.rpartition("/")[2]
            matched = match_names([full], list(self.align_values)) or match_names(
                [name], list(self.align_values)
            )
            original_value = kwargs["initial_value"]
            initial = original_value() if callable(original_value) else original_value
            initial = tf.convert_to_tensor(initial)
            legacy = next(iter(matched.values()), None)
            if UNNAMED_VARIABLE.search(full):
                # unnamed variables pair in creation order (pair_initial_values):
                # the next unused legacy one of this shape
                legacy = next(
                    (
                        n for n, v in self.align_values.items()
                        if n not in self.align_used and UNNAMED_VARIABLE.search(n)
                        and _shape(v) == tuple(initial.shape)
                    ),
                    None,
                )
            if legacy is None:
                return args, kwargs
            value = self.align_values[legacy]
            if tuple(initial.shape) != tuple(value.shape):
                return args, kwargs
            self.align_used.add(legacy)
            kwargs = dict(kwargs)
            if tf.executing_eagerly():
                self.own_init[full] = initial.numpy()  # what the migration itself drew
            kwargs["initial_value"] = tf.constant(value, dtype=initial.dtype)
            self.aligned.append(f"{full}<-{legacy}")
            self.fired("align_init")
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)
        return args, kwargs

    @staticmethod
    def graph_unique(name: str, seen: dict[str, int]) -> str:
        """``name`` as a TF1 graph named its n-th use: ``Variable``,
        ``Variable_1``... (eager TF2 names every unnamed tf.Variable
        ``Variable``; the legacy graph's names are what values pair by)."""
        count = seen.get(name, 0)
        seen[name] = count + 1
        return f"{name}_{count}" if count else name

    def capture_initial_value(self, var) -> None:
        if "init" not in self.features or not self.tf.executing_eagerly():
            return
        try:
            if self.tf.inside_function() or not var.trainable:
                return
            self.created_init[self.graph_unique(strip_variable_name(var.name), self.capture_seen)] = var.numpy()
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    # ------------------------------------------------------------ tf.compat.v1.layers

    def provide_tf1_layers(self) -> None:
        import contextlib
        import types

        import tensorflow.compat.v1 as v1  # noqa: PLR0402 - the module programs import, not always tf.compat.v1

        # Keras 3 raises "`dense` is not available with Keras 3"; tf-keras with
        # TF_USE_LEGACY_KERAS has the originals, which then run
        with contextlib.suppress(Exception):
            v1.layers.dense  # noqa: B018
            return
        try:
            from migrate.codemod import tf1_layers

            harness = self

            used: set[str] = set()

            def announced(name, function):
                def layer(*args, **kwargs):
                    if name not in used:
                        used.add(name)
                        harness.fired(f"tf.compat.v1.layers.{name} run as tfmigrate's TF1 code (Keras 3 removed it)")
                    return function(*args, **kwargs)

                return layer

            provided = {
                name: announced(name, getattr(tf1_layers, f"tf1_{name}"))
                for name in ("dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten", "dropout",
                             "batch_normalization")
            }

            class Layers(types.ModuleType):
                def __getattr__(self, name):
                    raise AttributeError(
                        f"`tf.compat.v1.layers.{name}` is not available with Keras 3; tfmigrate check"
                        f" provides only {', '.join(sorted(provided))} (install tf-keras for the rest)"
                    )

            module = Layers("tensorflow.compat.v1.layers")
            module.__dict__.update(provided)
            for namespace in {id(v1): v1, id(self.tf.compat.v1): self.tf.compat.v1}.values():
                namespace.layers = module
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    def provide_contrib(self) -> None:
        try:
            import tensorflow.compat.v1 as v1  # noqa: PLR0402 - the module programs import

            from migrate.runtime import contrib_standin

            contrib = contrib_standin.build(self.tf, v1, self.fired)
            for namespace in {id(v1): v1, id(self.tf): self.tf, id(self.tf.compat.v1): self.tf.compat.v1}.values():
                namespace.contrib = contrib
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    def provide_mnist_reader(self) -> None:
        import sys
        import types

        try:
            from migrate.runtime import mnist_standin

            harness = self

            def read_data_sets(*args, **kwargs):
                harness.fired(
                    "tensorflow.examples.tutorials.mnist.input_data.read_data_sets served by tfmigrate's"
                    " synthetic stand-in (TF 2 removed the reader)"
                )
                return mnist_standin.read_data_sets(*args, **kwargs)

            reader = types.ModuleType("tensorflow.examples.tutorials.mnist.input_data")
            reader.__dict__.update(
                read_data_sets=read_data_sets, DataSet=mnist_standin.DataSet,
                dense_to_one_hot=mnist_standin.dense_to_one_hot,
            )
            parent = sys.modules["tensorflow"]
            path = "tensorflow"
            for part in ("examples", "tutorials", "mnist"):
                path += "." + part
                module = sys.modules.get(path)
                if module is None:
                    module = types.ModuleType(path)
                    module.__path__ = []  # a package: its children import from sys.modules
                    sys.modules[path] = module
                setattr(parent, part, module)
                parent = module
            sys.modules[reader.__name__] = reader
            parent.input_data = reader
            # the tutorial's model module (mnist.inference/loss/training), gone with it
            from tensorflow.compat import v1

            model = mnist_standin.tutorial_model(v1)
            sys.modules[model.__name__] = model
            parent.mnist = model
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)

    # ------------------------------------------------------------ the cluster

    def map_cluster(self, cluster: dict) -> dict | None:
        """``{job: {index: address}}`` as the program built it -> the
        launcher's (None: leave it alone). Every job the launcher runs takes
        the launcher's tasks; jobs it runs that the program's cluster lacks
        (a migration's ``chief``) are added; other jobs stay as they are.
        Clusters sharing no job with the launcher's (empty ones, TF's own
        ``localhost`` job) are left alone."""
        launcher = self.launcher_cluster
        if not cluster or not set(cluster) & set(launcher):
            return None
        mapped = {}
        for job, tasks in cluster.items():
            if job not in launcher:
                mapped[job] = dict(tasks)
                continue
            mapped[job] = dict(enumerate(launcher[job]))
            for index, address in tasks.items():
                key = f"{job}:{index}"
                if key in self.cluster_map:
                    continue
                new = launcher[job][index] if index < len(launcher[job]) else None
                self.cluster_map[key] = {"script": address, "launcher": new}
                if new is not None and address != new:
                    self.address_map[address] = new
        for job, addresses in launcher.items():
            if job not in mapped:
                mapped[job] = dict(enumerate(addresses))
                for index, address in enumerate(addresses):
                    self.cluster_map.setdefault(f"{job}:{index}", {"script": None, "launcher": address})
        return mapped

    def serve_forever(self) -> None:
        """Be a standard server for this task of the launcher's cluster."""
        job, _, index = self.task.partition(":")
        cluster = self.tf.train.ClusterSpec(self.launcher_cluster)
        server = self.tf.distribute.Server(cluster, job_name=job, task_index=int(index), start=True)
        print(f"tfmigrate check: standard server for {self.task} at {server.target}", flush=True)
        server.join()

    def patch_cluster(self) -> None:
        from tensorflow.python.training import server_lib

        harness = self
        try:
            self.launcher_cluster = {
                job: list(addresses) for job, addresses in json.loads(os.environ[CLUSTER_ENV]).items()
            }
        except (ValueError, AttributeError):
            return
        self.cluster_map: dict[str, dict] = {}
        self.address_map: dict[str, str] = {}
        if os.environ.get(TF_CONFIG_TOO_ENV) and not os.environ.get("TF_CONFIG"):
            # a script taking its role from flags and from TF_CONFIG alike
            job, _, index = self.task.partition(":")
            os.environ["TF_CONFIG"] = json.dumps(
                {"cluster": self.launcher_cluster, "task": {"type": job, "index": int(index or 0)}}
            )
        self.notes["cluster_map"] = self.cluster_map
        spec_init = server_lib.ClusterSpec.__init__

        def init(spec, cluster):
            spec_init(spec, cluster)
            try:
                mapped = harness.map_cluster(spec._cluster_spec)
                if mapped is not None and mapped != spec._cluster_spec:
                    spec._cluster_spec = {job: mapped[job] for job in sorted(mapped)}
                    spec._make_cluster_def()
                    harness.fired("cluster mapped onto the launcher's ports")
            except Exception as e:  # noqa: BLE001 - observing must never break the program
                harness.failed(e)

        server_lib.ClusterSpec.__init__ = init
        make_server_def = server_lib._make_server_def

        def make_server_def_mapped(*args, **kwargs):
            server_def = make_server_def(*args, **kwargs)
            try:
                # a ServerDef passed as such never goes through ClusterSpec
                mapped = server_lib.ClusterSpec(server_def.cluster)
                server_def.cluster.CopyFrom(mapped.as_cluster_def())
            except Exception as e:  # noqa: BLE001
                harness.failed(e)
            return server_def

        server_lib._make_server_def = make_server_def_mapped

        from tensorflow.python.client import session as session_lib

        session_init = session_lib.BaseSession.__init__

        def session_init_mapped(session, target="", graph=None, config=None):
            try:
                if isinstance(target, bytes):
                    target = target.decode()
                if isinstance(target, str) and target.startswith("grpc://"):
                    address = target[len("grpc://"):]
                    if address in harness.address_map:
                        target = "grpc://" + harness.address_map[address]
                        harness.fired("session target mapped onto the launcher's ports")
            except Exception as e:  # noqa: BLE001
                harness.failed(e)
            session_init(session, target, graph, config)

        session_lib.BaseSession.__init__ = session_init_mapped

    # ------------------------------------------------------------ checkpoints

    def isolated_path(self, path):
        """``path`` (a checkpoint directory or file prefix) inside this run's
        harness directory; paths already there are kept (``{run_dir}``
        arguments, a restarted chief reading what it saved)."""
        if not path or not isinstance(path, (str, os.PathLike)):
            return path
        try:
            base = self.dir.resolve()
            full = Path(os.path.abspath(os.fspath(path)))
            if full == base or base in full.parents:
                return path
            mapped = base / "checkpoints" / str(full).lstrip(os.sep)
            mapped.parent.mkdir(parents=True, exist_ok=True)
            self.fired(f"checkpoints redirected: {os.fspath(path)} -> {mapped}")
            return str(mapped)
        except Exception as e:  # noqa: BLE001 - observing must never break the program
            self.failed(e)
            return path

    def patch_checkpoint_paths(self) -> None:
        import inspect
        import sys

        from tensorflow.python.checkpoint import checkpoint_management
        from tensorflow.python.training import monitored_session, supervisor
        from tensorflow.python.training import saver as saver_lib

        harness = self
        self.tf.compat.v1.train.MonitoredTrainingSession  # noqa: B018 - load the lazy API module

        def mapped(function, *names):
            """``function`` with its ``names`` arguments isolated; the same
            object replaces the original in every module that exports it."""
            signature = inspect.signature(function)

            def wrapper(*args, **kwargs):
                try:
                    bound = signature.bind(*args, **kwargs)
                    for name in names:
                        if name in bound.arguments:
                            bound.arguments[name] = harness.isolated_path(bound.arguments[name])
                    args, kwargs = bound.args, bound.kwargs
                except TypeError:
                    pass  # let the original report the bad call
                return function(*args, **kwargs)

            return wrapper

        functions = [
            (monitored_session.MonitoredTrainingSession, ("checkpoint_dir", "summary_dir")),
            (checkpoint_management.latest_checkpoint, ("checkpoint_dir",)),
            (checkpoint_management.get_checkpoint_state, ("checkpoint_dir",)),
        ]
        for original, names in functions:
            replacement = mapped(original, *names)
            for module in list(sys.modules.values()):
                for attr, value in list(getattr(module, "__dict__", {}).items()):
                    if value is original:
                        setattr(module, attr, replacement)
        for cls, method, names in (
            (supervisor.Supervisor, "__init__", ("logdir",)),
            (saver_lib.Saver, "save", ("save_path",)),
            (saver_lib.Saver, "restore", ("save_path",)),
            (checkpoint_management.CheckpointManager, "__init__", ("directory",)),
        ):
            setattr(cls, method, mapped(getattr(cls, method), *names))

    # ------------------------------------------------------------ hang points

    def patch_hang_points(self) -> None:
        """Defuse what makes unmodified legacy ps/worker code hang or stall,
        from outside (each verified by ``tests/test_check.py`` on a fixture
        without the in-script remedies)."""
        from tensorflow.python.client import session as session_lib
        from tensorflow.python.training import coordinator, session_manager
        from tensorflow.python.training import sync_replicas_optimizer as sync_lib

        harness = self
        job, _, index = self.task.partition(":")

        # Non-chiefs poll for the chief's initialization every 30 s.
        sm_init = session_manager.SessionManager.__init__

        def sm_init_capped(self, *args, **kwargs):
            sm_init(self, *args, **kwargs)
            if self._recovery_wait_secs > RECOVERY_WAIT_CAP_SECS:
                self._recovery_wait_secs = RECOVERY_WAIT_CAP_SECS
                harness.fired("recovery_wait_secs capped")

        session_manager.SessionManager.__init__ = sm_init_capped

        # Closing waits up to 120 s for a sync chief's blocked queue runner;
        # what happens after the grace period is unchanged, only sooner.
        join = coordinator.Coordinator.join

        def join_capped(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
            if stop_grace_period_secs > STOP_GRACE_CAP_SECS:
                stop_grace_period_secs = STOP_GRACE_CAP_SECS
                harness.fired("stop grace period capped")
            try:
                return join(self, threads, stop_grace_period_secs, ignore_live_threads)
            except RuntimeError as e:
                # A sync chief's token queue runner stays blocked once the
                # other workers are done: TF1 raised this after the grace
                # period (Supervisor.stop), after training. Its threads are
                # daemons; what is left only ends the program.
                stragglers = str(e).partition("still running:")[2].split()
                if not stragglers or not all(n.startswith("QueueRunnerThread") for n in stragglers):
                    raise
                harness.fired("blocked queue-runner threads left at stop")
                return None

        coordinator.Coordinator.join = join_capped

        # Default num_tokens=-1 hands the chief spare tokens: it then trains
        # steps alone instead of in lockstep.
        sync = sync_lib.SyncReplicasOptimizer
        init_tokens = sync.get_init_tokens_op
        make_hook = sync.make_session_run_hook

        def get_init_tokens_op(self, num_tokens=-1):
            if num_tokens == -1:
                num_tokens = 0
                harness.fired("sync num_tokens=0")
            return init_tokens(self, num_tokens)

        def make_session_run_hook(self, is_chief, num_tokens=-1):
            if num_tokens == -1:
                num_tokens = 0
                harness.fired("sync num_tokens=0")
            return make_hook(self, is_chief, num_tokens)

        sync.get_init_tokens_op = get_init_tokens_op
        sync.make_session_run_hook = make_session_run_hook

        # The common loop "while not should_stop(): step = run(global_step);
        # run(train_op)" calls run after another worker's last step made a
        # StopAtStepHook request a stop: MonitoredSession raises
        # RuntimeError. End the loop the way exhausted input does instead
        # (OutOfRangeError, which the session's ``with`` block swallows).
        from tensorflow.python.framework import errors
        from tensorflow.python.training import monitored_session

        ms_run = monitored_session._MonitoredSession.run

        def run_or_stop(self, *args, **kwargs):
            try:
                return ms_run(self, *args, **kwargs)
            except RuntimeError as e:
                if "should_stop" not in str(e):
                    raise
                harness.fired("run after stop ended as OutOfRange")
                raise errors.OutOfRangeError(None, None, "stop requested by another worker") from e

        monitored_session._MonitoredSession.run = run_or_stop

        # Without device_filters a worker's session waits for every task of
        # the cluster, so a worker starting after the chief exited hangs.
        # (not for a script that is an in-graph client: it places ops on the
        # other tasks, often after opening its session)
        # A ps that opens a session of its own (done-queues: it dequeues one
        # token per finished worker) is filtered to the ps job: unfiltered,
        # its session polls every worker before they start, and a channel
        # left backing off from that fails the first worker's step that
        # reads a tensor back from it ("failed to connect", a flaky start).
        if job in ("worker", "master", "chief", "ps") and index.isdigit() and os.environ.get(DEVICE_FILTERS_ENV) != "0":
            filters = ["/job:ps"] if job == "ps" else ["/job:ps", f"/job:{job}/task:{index}"]
            session_init = session_lib.Session.__init__

            own = {f"/job:{job}/task:{index}", f"/job:{job}/replica:0/task:{index}"}

            def places_elsewhere(graph) -> bool:
                """In-graph replication: the graph runs ops on other trainer
                tasks, which filters would hide from the session."""
                try:
                    graph = graph or harness.tf.compat.v1.get_default_graph()
                    for op in graph.get_operations():
                        device = op.device
                        if device and "/job:ps" not in device and "/job:" in device:
                            prefix = device.split("/device:")[0].rstrip("/")
                            if prefix not in own and not any(prefix.startswith(o + "/") for o in own):
                                return True
                except Exception as e:  # noqa: BLE001 - observing must never break the program
                    harness.failed(e)
                return False

            def session_init_filtered(self, target="", graph=None, config=None):
                remote = isinstance(target, str) and target.startswith("grpc://")
                if remote and (config is None or not list(config.device_filters)) and not places_elsewhere(graph):
                    new = harness.tf.compat.v1.ConfigProto()
                    if config is not None:
                        new.CopyFrom(config)
                    new.device_filters.extend(filters)
                    config = new
                    harness.fired("device_filters added")
                session_init(self, target, graph, config)

            session_lib.Session.__init__ = session_init_filtered

    # ------------------------------------------------------------ exit

    def at_exit(self) -> None:
        if self.created_init:
            self.save_init(self.created_init)
        self.save_init(self.own_init, own_init_path)
        self.notes["steps_recorded"] = self.steps_recorded
        self.write_notes()


def _unscaled_loss(target):
    """``loss / c`` or ``loss * c`` with a constant ``c`` -> ``loss``."""
    op = target.op
    if op.type in ("RealDiv", "Div", "Mul", "TrueDiv") and len(op.inputs) == 2:
        first, second = op.inputs
        if second.op.type == "Const" and first.shape.rank == 0:
            return first
        if op.type == "Mul" and first.op.type == "Const" and second.shape.rank == 0:
            return second
    return target


def _activated() -> bool:
    # Install only inside a task booted with this hook; importing the module
    # elsewhere (e.g. for its helpers) must not import TensorFlow.
    hooks = os.environ.get("TFMIGRATE_BOOT_HOOKS", "")
    return __name__ in [h.strip() for h in hooks.split(",")]


if _activated():
    _harness = _Harness()
    _harness.install()
