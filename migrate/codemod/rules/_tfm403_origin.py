"""TFM403 analysis: where a ``model_fn`` or ``input_fn`` defined outside the file comes from.

The common layout of an Estimator job (Cloud ML Engine and Kubeflow samples)
is a package ``trainer/`` whose ``task.py`` builds the RunConfig, TrainSpec
and EvalSpec and calls ``train_and_evaluate`` with ``model.model_fn`` and
``model.input_fn`` of ``trainer/model.py``. The migration rewrites the
model_fn itself (the ``EstimatorSpec`` it returns becomes the loss the step
differentiates; its optimizer is built once, by the loop): a model_fn of
another module cannot be carried until that module is rewritten in the same
run as the job that trains it. This stage says precisely where the function
is, so the reason names the module and what it needs.

A project module is found the way TFM301 finds them
(:mod:`migrate.codemod.program.project`): beside the file, or at the root of
the packages holding it; reading it puts it in the file's program (the report
says the file was analysed together with it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from migrate.codemod.program.project import ProjectModule, index_for, is_library
from migrate.codemod.rules import _cst as C


@dataclass(frozen=True)
class Origin:
    """A function the job names that this file imports: ``module`` is the
    dotted module it comes from, ``function`` its name there, ``project`` the
    project module (None for a library), ``definition`` its module-level def
    when the module is present and defines it."""

    code: str
    module: str
    function: str
    project: ProjectModule | None
    definition: cst.FunctionDef | None


def _imports(module: cst.Module) -> dict[str, tuple[str, str | None]]:
    """Module-level imports: bound name -> (dotted module, imported name or None
    for the module itself)."""
    found: dict[str, tuple[str, str | None]] = {}
    for st in module.body:
        if not isinstance(st, cst.SimpleStatementLine):
            continue
        for small in st.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = C.code_of(alias.name)
                    if alias.asname is not None:
                        found[C.code_of(alias.asname.name)] = (dotted, None)
                    else:
                        found[dotted.split(".")[0]] = (dotted.split(".")[0], None)
            elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
                if isinstance(small.names, cst.ImportStar):
                    continue
                base = C.code_of(small.module)
                for alias in small.names:
                    name = C.code_of(alias.name)
                    bound = C.code_of(alias.asname.name) if alias.asname is not None else name
                    found[bound] = (base, name)
    return found


def origin(module: cst.Module, path: str, node: cst.BaseExpression | None) -> Origin | None:
    """Where ``node`` (``model.model_fn``, ``model_fn`` imported ``from
    trainer.model``, ``pkg.model.model_fn``) comes from, or None when it is
    not a function imported by this file."""
    if node is None:
        return None
    dotted = C.code_of(node)
    parts = dotted.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    imports = _imports(module)
    if parts[0] not in imports:
        return None
    base, name = imports[parts[0]]
    if len(parts) == 1:
        if name is None:
            return None
        candidates = [(base, name)]
    else:
        prefix = base if name is None else f"{base}.{name}"
        # ``import trainer.model`` binds ``trainer``: the module is the longest dotted prefix
        candidates = [(".".join([prefix, *parts[1:-1]]), parts[-1])]
    module_name, function = candidates[0]
    if is_library(module_name):
        return Origin(dotted, module_name, function, None, None)
    index = index_for(path)
    found = index.find(module_name, package_roots=True)
    if found is None:
        return Origin(dotted, module_name, function, None, None)
    definition = None
    parsed = index.parse(found)
    if parsed is not None:
        definition = next((st for st in parsed.body if isinstance(st, cst.FunctionDef)
                           and st.name.value == function), None)
    return Origin(dotted, module_name, function, found, definition)


def _shown(path: str) -> str:
    """A module's path as the reason shows it: relative to the cwd when below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def why_not_here(found: Origin, what: str) -> tuple[str, str]:
    """(why, hint) of the decline of a job whose ``what`` (model_fn, input_fn) is ``found``."""
    if found.project is None:
        why = (f"the {what} is `{found.code}`, from the library `{found.module}`: the migration rewrites the"
               f" {what} it calls, and a library's code is not the project's to rewrite")
        return why, f"write the {what} in this file (calling the library's model code), or migrate by hand"
    if not found.project.present:
        why = (f"the {what} is `{found.code}` of `{found.module}`, which is not in this project (no"
               f" {found.module.replace('.', '/')}.py beside this file or at the root of its packages): its"
               " code cannot be read")
        return why, f"run tfmigrate on the directory holding `{found.module}` with this file"
    where = _shown(found.project.path)
    if found.definition is None:
        why = (f"the {what} is `{found.code}`, and `{found.module}` ({where}) defines no module-level function"
               f" `{found.function}` (it is built or bound otherwise there)")
        return why, f"define the {what} as a module-level function, or migrate by hand"
    returns_spec = any(isinstance(n, cst.Call) and C.code_of(n.func).endswith("EstimatorSpec")
                       for n in C.walk(found.definition))
    if what == "model_fn":
        change = ("the EstimatorSpec it returns becomes the loss the training step differentiates, and its"
                  " optimizer is built once by the training loop" if returns_spec else
                  "it returns the loss the training step differentiates")
    else:
        change = "the training loop iterates the tf.data.Dataset it returns, not an iterator's tensors"
    why = (f"the {what} is `{found.code}`, defined in the project module `{found.module}` ({where}), not in this"
           f" file: the migration rewrites that function ({change}), so `{found.module}` must be rewritten in"
           " the same run as this file, as one program, which TFM403 does not do yet")
    hint = (f"move `{found.function}` (and the input_fns) into this file, next to the job, and migrate again;"
            f" or migrate `{where}` and this file together by hand")
    return why, hint
