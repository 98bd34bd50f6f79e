"""The TensorFlow a legacy program needs, when it is not the one installed.

Estimator left TensorFlow in 2.16, and ``tf.contrib.learn``'s Estimator parts
with it: a legacy job built on them cannot run on today's TensorFlow at all.
``tfmigrate check`` runs its legacy side on TensorFlow 2.15 instead, in a
virtual environment it creates on first use and then reuses, the way
pre-commit keeps its hook environments:

- the environment lives in ``$TFMIGRATE_CACHE/<key>`` (default
  ``~/.cache/tfmigrate/envs/<key>``); the key hashes what makes it (the
  requirements and the Python it is built from), so a different pin or a
  different interpreter gets its own;
- it is built in a temporary directory next to it and renamed into place once
  TensorFlow imports in it, so a half-built environment is never used; a lock
  file serialises concurrent checks wanting the same one (the second waits,
  then finds it ready);
- it holds TensorFlow and what tfmigrate's runtime harness imports there
  (``libcst`` for the legacy rewrites); tfmigrate itself is not installed in it:
  the launcher puts the project on the tasks' ``PYTHONPATH``;
- when it cannot be built (no network, pip failing, a Python TensorFlow has no
  wheels for), :class:`LegacyEnvError` says what failed and the commands that
  build it by hand; check exits 2 with that message.

The interpreter is used as ``DIR/bin/python -m ...``: nothing in the
environment depends on the path it was built at except pip's console scripts,
which are never called.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from migrate.runtime._ast_names import dotted as dotted_name

CACHE_ENV = "TFMIGRATE_CACHE"
READY_FILE = "tfmigrate-ready"  # holds the TensorFlow version the environment imports
ESTIMATOR_TF = "2.15"  # the last TensorFlow with Estimator

# Pins per TensorFlow line: tensorflow-cpu keeps the download small; Estimator
# was a package of its own from 2.0 on. libcst is what the runtime harness's
# TF1-compat rewrites import in the task.
_PINS: dict[str, tuple[str, ...]] = {
    "2.15": ("tensorflow-cpu==2.15.1", "tensorflow-estimator==2.15.0"),
}
_HARNESS_NEEDS = ("libcst>=1.1",)
# TensorFlow lines and the newest Python each has wheels for
_NEWEST_PYTHON = {"2.12": (3, 11), "2.13": (3, 11), "2.14": (3, 11), "2.15": (3, 11)}

PIP_TIMEOUT = 1800.0  # seconds for the whole install (TensorFlow is ~200 MB)
PIP_SOCKET_TIMEOUT = "15"  # seconds per network read: no network fails in seconds


class LegacyEnvError(Exception):
    """The environment could not be created; the message says why and how to do it by hand."""


@dataclass(frozen=True)
class LegacyEnv:
    version: str  # the TensorFlow line asked for ("2.15")
    requirements: tuple[str, ...]
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def ready_file(self) -> Path:
        return self.path / READY_FILE

    def is_ready(self) -> bool:
        return self.ready_file.is_file() and self.python.exists()

    def tf_version(self) -> str | None:
        try:
            return self.ready_file.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def manual_commands(self, base_python: str | None = None) -> str:
        py = shlex.quote(base_python or sys.executable)
        env_py = shlex.quote(str(self.python))
        reqs = " ".join(shlex.quote(r) for r in self.requirements)
        ready = shlex.quote(str(self.ready_file))
        return (
            f"{py} -m venv {shlex.quote(str(self.path))} && "
            f"{env_py} -m pip install {reqs} && "
            f"{env_py} -c 'import tensorflow as tf; print(tf.__version__)' > {ready}"
        )


def normalize_version(version: str) -> str:
    """``"2.15"``, ``"2.15.1"``, ``"2.15.*"`` -> the line ``"2.15"``."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.[\d*]+)?\s*", version)
    if not m:
        raise LegacyEnvError(f"--legacy-tf {version!r}: expected a TensorFlow version such as 2.15")
    return f"{m.group(1)}.{m.group(2)}"


def requirements_for(version: str) -> tuple[str, ...]:
    line = normalize_version(version)
    major, minor = (int(x) for x in line.split("."))
    if major != 2 or minor < 4:
        raise LegacyEnvError(
            f"--legacy-tf {version}: only TensorFlow 2.4 or later has wheels for Python 3; TF 1.x"
            " programs run on the installed TensorFlow through tf.compat.v1"
        )
    pins = _PINS.get(line)
    if pins is None:
        pins = (f"tensorflow-cpu=={line}.*",)
        if minor < 16:
            pins += (f"tensorflow-estimator=={line}.*",)
    return pins + _HARNESS_NEEDS


def cache_root() -> Path:
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tfmigrate" / "envs"


def env_key(requirements: tuple[str, ...], base_python: str | None = None) -> str:
    """A directory name for the environment: readable prefix, hash of what makes it."""
    py = base_python or sys.executable
    what = "\n".join(
        [
            os.path.realpath(py),
            ".".join(map(str, sys.version_info[:3])) if base_python is None else "",
            sys.platform,
            *sorted(requirements),
        ]
    )
    tf = next((r.split("==", 1)[1] for r in requirements if r.startswith("tensorflow")), "tf")
    tf = re.sub(r"[^0-9A-Za-z.]+", "", tf).rstrip(".")
    return f"tf{tf}-py{sys.version_info[0]}{sys.version_info[1]}-" + hashlib.sha256(what.encode()).hexdigest()[:12]


def legacy_env(version: str, root: Path | None = None) -> LegacyEnv:
    """Where the environment for TensorFlow ``version`` is (created or not)."""
    reqs = requirements_for(version)
    return LegacyEnv(normalize_version(version), reqs, (root or cache_root()) / env_key(reqs))


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, even if we die
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: list[str], what: str, timeout: float, env: LegacyEnv, log: Path) -> str:
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise LegacyEnvError(_failure(env, f"{what} took longer than {timeout:.0f} s", "")) from None
    except OSError as e:
        raise LegacyEnvError(_failure(env, f"{what} could not start ({e})", "")) from None
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        raise LegacyEnvError(_failure(env, f"{what} failed (exit {proc.returncode})", proc.stderr or proc.stdout))
    return proc.stdout


def _failure(env: LegacyEnv, what: str, output: str) -> str:
    tail = [ln for ln in output.strip().splitlines() if ln.strip()][-6:]
    shown = ("\n    " + "\n    ".join(tail)) if tail else ""
    return (
        f"cannot create the TensorFlow {env.version} environment for the legacy side in {env.path}:"
        f" {what}{shown}\n"
        f"  Create it by hand (with network access to PyPI), then run check again:\n"
        f"    {env.manual_commands()}"
    )


def ensure(env: LegacyEnv, *, pip_timeout: float = PIP_TIMEOUT, quiet: bool = False) -> LegacyEnv:
    """Create ``env`` unless it is there; return it ready. Raises LegacyEnvError."""
    if env.is_ready():
        return env
    newest = _NEWEST_PYTHON.get(env.version)
    if newest is not None and sys.version_info[:2] > newest:
        raise LegacyEnvError(
            _failure(
                env,
                f"TensorFlow {env.version} has no wheels for Python"
                f" {sys.version_info[0]}.{sys.version_info[1]} (newest: {newest[0]}.{newest[1]})",
                "",
            ).replace(shlex.quote(sys.executable), f"python{newest[0]}.{newest[1]}")
        )
    root = env.path.parent
    with _locked(root / f"{env.path.name}.lock"):
        if env.is_ready():  # another check built it while we waited
            return env
        if env.path.exists():  # a broken leftover (ready file gone): rebuild
            shutil.rmtree(env.path, ignore_errors=True)
        tmp = root / f".{env.path.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        log = root / f"{env.path.name}.log"
        log.write_text("", encoding="utf-8")
        if not quiet:
            print(
                f"tfmigrate check: creating the TensorFlow {env.version} environment for the legacy side"
                f" in {env.path} (once; log {log}) ...",
                file=sys.stderr,
                flush=True,
            )
        start = time.monotonic()
        try:
            _run([sys.executable, "-m", "venv", str(tmp)], "python -m venv", 300, env, log)
            py = str(tmp / "bin" / "python")
            _run(
                [
                    py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                    "--retries", "1", "--timeout", PIP_SOCKET_TIMEOUT, *env.requirements,
                ],
                "pip install " + " ".join(env.requirements),
                pip_timeout,
                env,
                log,
            )
            version = _run(
                [py, "-c", "import tensorflow as tf; print(tf.__version__)"],
                "importing TensorFlow in the new environment",
                300,
                env,
                log,
            ).strip().splitlines()[-1]
            (tmp / READY_FILE).write_text(version + "\n", encoding="utf-8")
            os.rename(tmp, env.path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not quiet:
            print(
                f"tfmigrate check: TensorFlow {version} environment ready in {time.monotonic() - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    return env


# --------------------------------------------------------------------------- which programs need it

_ESTIMATOR_NAMES = re.compile(
    r"\b(?:tf\.(?:compat\.v1\.)?estimator\b|tensorflow\.(?:compat\.v1\.)?estimator\b|tensorflow_estimator\b"
    r"|(?:tf|tensorflow)\.contrib\.learn\b|learn_runner\b|contrib\.learn\b)"
)


def needs_estimator(source: str) -> str | None:
    """Why ``source`` needs a TensorFlow with Estimator (the first use, with its
    line), or None. Uses in comments and strings do not count."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    if tree is None:  # Python 2: code lines, comments stripped
        for n, line in enumerate(source.splitlines(), 1):
            code = line.split("#", 1)[0]
            m = _ESTIMATOR_NAMES.search(code)
            if m:
                return f"line {n}: {m.group(0)}"
        return None
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Import):
            name = next((a.name for a in node.names if _ESTIMATOR_NAMES.search(a.name)), None)
        elif isinstance(node, ast.ImportFrom) and node.module:
            full = [f"{node.module}.{a.name}" for a in node.names]
            name = next((f for f in full if _ESTIMATOR_NAMES.search(f)), None)
        elif isinstance(node, ast.Attribute) and id(node) not in inner:  # whole chains only
            dotted = dotted_name(node)
            if dotted and _ESTIMATOR_NAMES.search(dotted):
                name = dotted
        if name:
            found.append((node.lineno, node.col_offset, name))
    if not found:
        return None
    line, _, name = min(found)
    return f"line {line}: {name}"



# --------------------------------------------------------------------------- NumPy 1's number conversions

_NUMERIC_CONVERSION = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")


def _one_element_shape(node: ast.AST | None) -> bool:
    """``[1]``, ``(1, 1)``: a literal shape of one element that is not a scalar's."""
    return (isinstance(node, (ast.List, ast.Tuple)) and bool(node.elts)
            and all(isinstance(e, ast.Constant) and e.value == 1 for e in node.elts))


def _one_element_value(node: ast.AST | None) -> bool:
    """``[0.3]``, ``[[0.0]]``: a literal initial value of one element, not a scalar."""
    if not isinstance(node, (ast.List, ast.Tuple)) or len(node.elts) != 1:
        return False
    inner = node.elts[0]
    return isinstance(inner, ast.Constant) or _one_element_value(inner)


def _one_element_variables(tree: ast.AST) -> dict[str, int]:
    """Names bound to a variable of one element and a non-scalar shape
    (``tf.get_variable("w", [1])``, ``tf.Variable([0.3])``,
    ``tf.Variable(tf.zeros([1]))``) -> line."""
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)):
            continue
        call, func = node.value, dotted_name(node.value.func) or ""
        keywords = {k.arg: k.value for k in call.keywords}
        if func.endswith("get_variable"):
            shape = call.args[1] if len(call.args) > 1 else keywords.get("shape")
            one = _one_element_shape(shape)
        elif func.endswith("Variable"):
            value = call.args[0] if call.args else keywords.get("initial_value")
            one = _one_element_value(value) or (
                isinstance(value, ast.Call) and _one_element_shape(
                    value.args[0] if value.args else {k.arg: k.value for k in value.keywords}.get("shape")))
        else:
            one = False
        if one:
            out[node.targets[0].id] = node.lineno
    return out


def needs_numpy1(source: str) -> str | None:
    """Why ``source`` needs NumPy 1 (the first use, with its line), or None: it
    formats a value a session run fetched from a one-element variable as a
    number (``w, b = sess.run([weight, bias])``, ``"%f" % w``), which NumPy 1
    converted and NumPy 2 refuses (``only 0-dimensional arrays can be
    converted to Python scalars``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    variables = _one_element_variables(tree)
    if not variables:
        return None
    fetched: dict[str, str] = {}  # bound name -> the variable it holds
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "run"
                and node.value.args):
            continue
        target, fetch = node.targets[0], node.value.args[0]
        if isinstance(target, ast.Name) and isinstance(fetch, ast.Name) and fetch.id in variables:
            fetched[target.id] = fetch.id
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(fetch, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(fetch.elts):
            for t, f in zip(target.elts, fetch.elts):
                if isinstance(t, ast.Name) and isinstance(f, ast.Name) and f.id in variables:
                    fetched[t.id] = f.id
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)
                and isinstance(node.left.value, str)):
            continue
        kinds = []
        for m in _NUMERIC_CONVERSION.finditer(node.left.value):
            key, width, precision, kind = m.groups()
            if kind == "%":
                continue
            if key is not None:
                kinds = []
                break
            kinds += ["d"] * ((width == "*") + (precision == "*")) + [kind]
        operands = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        if len(kinds) != len(operands):
            continue
        for kind, operand in zip(kinds, operands):
            if kind in "diouxXeEfFgGc" and isinstance(operand, ast.Name) and operand.id in fetched:
                held = fetched[operand.id]
                why = (f"line {node.lineno}: `{operand.id}` (the value of `{held}`, a one-element variable,"
                       f" line {variables[held]}) formatted by %{kind}")
                found.append((node.lineno, operand.col_offset, why))
    return min(found)[2] if found else None


def _numpy_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("numpy")
    except metadata.PackageNotFoundError:
        return None


def _numpy_major() -> int | None:
    version = _numpy_version()
    return int(version.split(".")[0]) if version and version.split(".")[0].isdigit() else None


def installed_tf_version() -> str | None:
    """The TensorFlow this interpreter has, from its metadata (no import: seconds saved)."""
    from importlib import metadata

    for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class Choice:
    env: LegacyEnv | None  # None: the installed TensorFlow
    why: str


def choose(requested: str | None, source: str) -> Choice:
    """Which TensorFlow runs the legacy program ``source``: ``requested`` is
    ``--legacy-tf`` (``None``/``"auto"``: Estimator programs get
    :data:`ESTIMATOR_TF` when the installed one has no Estimator;
    ``"installed"``: always the installed one)."""
    installed = installed_tf_version()
    line = normalize_version(installed) if installed else None
    if requested in (None, "auto"):
        uses = needs_estimator(source)
        if uses is None:
            numbers = needs_numpy1(source) if (_numpy_major() or 0) >= 2 else None
            if numbers is None:
                return Choice(None, "")
            return Choice(
                legacy_env(ESTIMATOR_TF),
                f"the program formats a one-element array as a number ({numbers}), which NumPy 1 converted and"
                f" the installed NumPy {_numpy_version()} refuses: it runs where it ran, on TensorFlow"
                f" {ESTIMATOR_TF} with NumPy 1",
            )
        if line is not None and tuple(map(int, line.split("."))) < (2, 16):
            return Choice(None, f"the installed TensorFlow {installed} has Estimator ({uses})")
        return Choice(
            legacy_env(ESTIMATOR_TF),
            f"the program uses Estimator ({uses}), which TensorFlow left in 2.16",
        )
    if requested == "installed":
        return Choice(None, "--legacy-tf installed")
    if normalize_version(requested) == line:
        return Choice(None, f"--legacy-tf {requested}: the installed TensorFlow is {installed}")
    return Choice(legacy_env(requested), f"--legacy-tf {requested}")


def missing_here(source: str) -> str | None:
    """Why ``source`` cannot run on the installed TensorFlow because it uses
    Estimator (the first use, with its line), or None."""
    uses = needs_estimator(source)
    if uses is None:
        return None
    installed = installed_tf_version()
    if installed is not None and tuple(map(int, normalize_version(installed).split("."))) < (2, 16):
        return None
    return f"it uses Estimator ({uses}), which the installed TensorFlow {installed or '(none)'} does not have"


def main(argv: list[str] | None = None) -> int:
    """``python -m migrate.runtime.legacy_env [VERSION]``: create (or show) the environment."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        env = ensure(legacy_env(args[0] if args else ESTIMATOR_TF))
    except LegacyEnvError as e:
        print(f"tfmigrate: {e}", file=sys.stderr)
        return 2
    print(f"{env.python} (TensorFlow {env.tf_version()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
