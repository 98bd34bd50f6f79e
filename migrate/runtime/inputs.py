"""Input files a script reads that are not there, found before anything runs.

Real training scripts read data files they do not ship (``open("./train-data.txt")``
in a batch generator, ``np.loadtxt(FLAGS.data_file)`` with a default path).
Launched as they are, every worker dies on a ``FileNotFoundError`` after the
cluster has started; ``check`` says it in seconds instead, with the line that
reads the file and what would provide it.

Statically, without running anything: a read (``open`` in a read mode,
``np.loadtxt``/``np.load``/``np.genfromtxt``, ``pd.read_csv``, ``tf.gfile.Open``/
``GFile``/``tf.io.gfile.GFile``) of a path known in the source -- a string
literal, a parameter of a module function every call of which passes one, or an
option whose default is one -- reached from the module's top level (the
``__main__`` block, ``tf.app.run``/``app.run(main)``) through calls of the
module's own functions. A read inside a ``try`` that handles errors, or a path
tested with ``os.path.exists``/``isfile`` first, is the script's own business.
Relative paths are resolved where the tasks run (check's working directory).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from migrate.runtime._ast_names import dotted

_READERS = {
    "open": 0, "io.open": 0, "codecs.open": 0,
    "np.loadtxt": 0, "numpy.loadtxt": 0, "np.load": 0, "numpy.load": 0,
    "np.genfromtxt": 0, "numpy.genfromtxt": 0,
    "pd.read_csv": 0, "pandas.read_csv": 0,
    "tf.gfile.Open": 0, "tf.gfile.GFile": 0, "tf.io.gfile.GFile": 0, "gfile.Open": 0, "gfile.GFile": 0,
}


@dataclass(frozen=True)
class MissingInput:
    path: str  # as the script spells it
    resolved: str  # where the tasks would look for it
    line: int  # the read
    origin: str  # how the path reaches the read ("a literal", "get_data('./x') at line 107", "--data_file's default")
    option: str | None = None  # the option that would provide it, as spelled

    def message(self) -> str:
        where = f"line {self.line}" + (f" ({self.origin})" if self.origin else "")
        provide = (f"pass --{self.option}=PATH after `--` (check passes arguments after -- to both scripts)"
                   if self.option else
                   f"run check from the directory holding {self.path}" if not os.path.isabs(self.path) else
                   f"provide {self.path}")
        return f"{where} reads {self.path}, which does not exist ({self.resolved}): {provide}"



def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _reads(call: ast.Call, name: str) -> bool:
    """A read, not a write: open's mode (positional or keyword) has no w/a/x/+."""
    if name not in ("open", "io.open", "codecs.open", "tf.gfile.Open", "tf.gfile.GFile", "tf.io.gfile.GFile",
                    "gfile.Open", "gfile.GFile"):
        return True
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return True
    text = _string(mode)
    return text is not None and not set(text) & set("wax+")


class _Module:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.option_defaults: dict[str, tuple[str, str]] = {}  # option -> (default, spelling)
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = dotted(call.func) or ""
            first = _string(call.args[0]) if call.args else None
            if first is None:
                continue
            if func.rpartition(".")[2].startswith("DEFINE_") and len(call.args) > 1:
                default = _string(call.args[1])
                if default:
                    self.option_defaults[first] = (default, first)
            elif func.endswith("add_argument") and first.startswith("-"):
                default = next((_string(k.value) for k in call.keywords if k.arg == "default"), None)
                dest = first.lstrip("-").replace("-", "_")
                if default:
                    self.option_defaults[dest] = (default, first.lstrip("-"))

    def reached(self) -> list[ast.AST]:
        """The top-level code and the module functions it calls, transitively."""
        seen: set[str] = set()
        out: list[ast.AST] = [n for n in self.tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                            ast.ClassDef))]
        todo = list(out)
        while todo:
            node = todo.pop()
            for sub in ast.walk(node):
                names = []
                if isinstance(sub, ast.Call):
                    names.append(dotted(sub.func))
                    # app.run(main) / tf.app.run(main=main): the entry point handed over
                    names += [a.id for a in sub.args if isinstance(a, ast.Name)]
                    names += [k.value.id for k in sub.keywords if isinstance(k.value, ast.Name)]
                    if (dotted(sub.func) or "").endswith("app.run") and not sub.args and not sub.keywords:
                        names.append("main")  # tf.app.run() runs __main__.main
                for name in names:
                    if name in self.functions and name not in seen:
                        seen.add(name)
                        out.append(self.functions[name])
                        todo.append(self.functions[name])
        return out

    def call_sites(self, function: str) -> list[ast.Call]:
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and dotted(n.func) == function]


def _guarded(tree: ast.AST) -> set[int]:
    """id() of nodes inside a try with handlers, or an if testing a path's existence."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = None
        if isinstance(node, ast.Try) and node.handlers:
            body = node.body
        elif isinstance(node, ast.If) and any(
            (dotted(c.func) or "").endswith(("path.exists", "path.isfile", "gfile.Exists", "gfile.exists"))
            for c in ast.walk(node.test) if isinstance(c, ast.Call)
        ):
            body = node.body + node.orelse
        for stmt in body or ():
            out.update(id(n) for n in ast.walk(stmt))
    return out


def missing_inputs(source: str, cwd: str | None = None) -> list[MissingInput]:
    """The files ``source`` reads that are not there (see the module doc)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    cwd = cwd or os.getcwd()
    module = _Module(tree)
    guarded = _guarded(tree)
    found: dict[str, MissingInput] = {}
    for scope in module.reached():
        function = scope.name if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        params = [a.arg for a in scope.args.args] if function else []
        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
            name = dotted(call.func)
            if name not in _READERS or id(call) in guarded or not call.args or not _reads(call, name):
                continue
            for path, origin, option in _paths(call.args[0], function, params, module):
                resolved = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
                if path and not os.path.exists(resolved) and path not in found:
                    found[path] = MissingInput(path, resolved, call.lineno, origin, option)
    return sorted(found.values(), key=lambda m: m.line)


def _paths(arg: ast.AST, function: str | None, params: list[str], module: _Module):
    """(path, how it gets here, option) for each value ``arg`` is known to take."""
    text = _string(arg)
    if text is not None:
        yield text, "", None
        return
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.attr in module.option_defaults:
        default, spelled = module.option_defaults[arg.attr]
        yield default, f"--{spelled}'s default", spelled
        return
    if isinstance(arg, ast.Name) and function and arg.id in params:
        at = params.index(arg.id)
        for site in module.call_sites(function):
            value = site.args[at] if at < len(site.args) else next(
                (k.value for k in site.keywords if k.arg == arg.id), None)
            literal = _string(value)
            if literal is not None:
                yield literal, f"the path {function}() is given at line {site.lineno}", None
