"""The modules of a project: the ``.py`` files beside the one being migrated.

A TF1 driver often imports its model from a module next to it (``import
mnist_inference``, ``from cifar10 import inference``). The index answers
whether such a module is part of the project (present beside the file), and
parses it once, so the tracer can look into its functions. A module that is
imported like a project module but is not present is *absent*: its code
cannot be read, and callers treat its functions as opaque."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass

import libcst as cst

# Top-level packages programs import that are libraries, never the project's
# own model code (the standard library is known from sys.stdlib_module_names).
_LIBRARIES = frozenset({
    "tensorflow", "tf_keras", "keras", "numpy", "scipy", "pandas", "sklearn", "six", "absl", "matplotlib",
    "PIL", "cv2", "h5py", "yaml", "json", "requests", "tqdm", "horovod", "torch", "google", "tensorboard",
    "pyspark", "tensorflowonspark", "gym", "nltk", "gensim", "imageio", "skimage", "seaborn", "future",
    "past", "builtins", "__future__", "mock", "pytest", "attr", "dataclasses", "typing_extensions",
})


def is_library(module_name: str) -> bool:
    """A module of the standard library or a known third-party package."""
    top = module_name.split(".", 1)[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names


@dataclass(frozen=True)
class ProjectModule:
    """A module imported by a file of the project: its dotted name, and its
    file when it is present beside the importing file (None: absent)."""

    name: str
    path: str | None

    @property
    def present(self) -> bool:
        return self.path is not None


class ProjectIndex:
    """The sibling modules of one directory, parsed on demand and once."""

    def __init__(self, directory: str | None):
        self.directory = directory
        self._parsed: dict[str, tuple[int, cst.Module | None]] = {}

    def find(self, module_name: str, package_roots: bool = False) -> ProjectModule | None:
        """The project module ``module_name`` (``a`` or ``pkg.a``): present when
        ``a.py`` (or ``pkg/a.py``, ``a/__init__.py``) is beside the file (or,
        with ``package_roots``, at the root of the packages holding it), absent
        when not there and not a library; None for a library.

        The model tracer looks beside the file only: a present module's
        functions are read, and one building its model with layers (not
        ``get_variable``/``Variable``) would be declined where an absent one is
        taken as an opaque builder, so widening what it reads waits for that."""
        if is_library(module_name):
            return None
        if self.directory is None:
            return ProjectModule(module_name, None)
        parts = module_name.split(".")
        for root in self._roots() if package_roots else [self.directory]:
            for candidate in (os.path.join(root, *parts) + ".py", os.path.join(root, *parts, "__init__.py")):
                if os.path.isfile(candidate):
                    return ProjectModule(module_name, candidate)
        return ProjectModule(module_name, None)

    def _roots(self) -> list[str]:
        """Where the file's imports are resolved: its own directory, then, when
        it is in a package (``inception/inception/train.py`` importing ``from
        inception import model``), each enclosing package's parent directory,
        the root such absolute imports are written from."""
        roots = [self.directory]
        here = self.directory
        while os.path.isfile(os.path.join(here, "__init__.py")):
            parent = os.path.dirname(here)
            if parent == here:
                break
            roots.append(parent)
            here = parent
        return roots

    def parse(self, module: ProjectModule) -> cst.Module | None:
        """The parsed code of a present module; None when absent or unreadable
        (not UTF-8, a syntax error: the caller treats it as absent)."""
        if module.path is None:
            return None
        try:
            stamp = os.stat(module.path).st_mtime_ns
        except OSError:
            return None
        known = self._parsed.get(module.path)
        if known is None or known[0] != stamp:  # parsed again when the file changed (--write)
            try:
                with open(module.path, encoding="utf-8") as handle:
                    known = (stamp, cst.parse_module(handle.read()))
            except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
                known = (stamp, None)
            self._parsed[module.path] = known
        if known[1] is not None and _READING:
            _READING[-1].add(module.path)
        return known[1]


# the present modules read while one file is migrated (innermost migration last):
# what its output may depend on, for the report of files migrated as one program
_READING: list[set[str]] = []


@contextlib.contextmanager
def reads():
    """Collect the paths of the project modules parsed for the analysis
    inside the ``with`` (one file's migration)."""
    found: set[str] = set()
    _READING.append(found)
    try:
        yield found
    finally:
        _READING.pop()


@functools.lru_cache(maxsize=64)
def index_for(path: str) -> ProjectIndex:
    """The index of the directory holding ``path`` (a file being migrated;
    ``<string>`` and other non-files get an index with no directory)."""
    directory = os.path.dirname(os.path.abspath(path)) if path and not path.startswith("<") else None
    if directory is not None and not os.path.isdir(directory):
        directory = None
    return ProjectIndex(directory)
