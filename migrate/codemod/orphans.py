"""What a migration orphaned: bindings nothing reads any more, and comments
about TF1 machinery the program no longer has.

The rules replace TF1 plumbing (a device setter, a SyncReplicasOptimizer, a
Supervisor) by a strategy; the names that only fed that plumbing
(``worker_device = "/job:worker/task:%d" % task_index``, ``is_chief``,
``num_workers = len(worker_hosts)``, an import of ``SummaryWriterCache``) and
the comments that explained it ("The supervisor takes care of session
initialization") are then dead text a reviewer would ask to remove.

:func:`tidy` is the engine's last stage, on the migrated code of a file:

- a binding is removed when the legacy program read the name and the migrated
  one reads it nowhere (so the migration, not the author, made it dead), the
  bound value has no effect of its own (literals, names, attributes,
  arithmetic, ``len``/``split``/``format``-style calls, ``ClusterSpec``), it is
  the statement's only target and its block keeps another statement; a
  ``def``/``class`` without decorators and an import alias likewise. At
  module level only in a program (a ``__main__`` guard or a top-level
  ``main()``/``app.run``): a library's names may be read by its importers.
  Repeated until nothing more is orphaned (removing ``cluster = ClusterSpec(
  {"ps": ps_hosts, ...})`` can orphan ``ps_hosts``).
- a comment the legacy file had, in a paragraph (consecutive comment lines)
  that names a TF1 construct the migrated code no longer contains (a
  Supervisor, a MonitoredTrainingSession, a device setter, SyncReplicas, queue
  runners or tokens, a session and its options, a TF1 queue), or a name the
  legacy code bound and the migrated code no longer has at all
  (``local_init_op``, ``average_gradients``), or a label the legacy docstring
  defined in a paragraph that went (``# REMEDY 2``), is removed with its
  paragraph; a trailing comment alone. Comments the rules wrote are never
  touched.
- a report read from a ``RunMetadata`` that no call fills any more
  (:mod:`migrate.codemod.empty_metadata`) goes, with the helpers only it read.
- so is such a paragraph of a docstring the legacy file had (a docstring left
  with no paragraph goes, when its body keeps a statement).

Both work on lines, with ``ast`` positions and ``tokenize``: the rest of the
file keeps its bytes. The engine compiles the result like any other output.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterable

from migrate.codemod.empty_metadata import empty_metadata_lines

# TF1 constructs a comment can describe: (what a comment says, what code that
# has the construct contains). A comment naming one is stale when the
# migrated code contains none of the construct's code.
_CONSTRUCTS: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = tuple(
    (re.compile(said, re.IGNORECASE), re.compile(code))
    for said, code in (
        (r"supervisor|\bsv\.", r"\bSupervisor\b"),
        (r"monitored\s*(training\s*)?session|mon_sess", r"\bMonitored(Training)?Session\b"),
        (r"device[\s_-]*setter|replica[\s_-]*device|device[\s_-]*replica", r"\breplica_device_setter\b"),
        (r"sync[\s_-]*replicas?|replicas_to_aggregate", r"\bSyncReplicasOptimizer\b"),
        (r"queue[\s_-]*runners?|sync[\s_-]*tokens?|token[\s_-]*queue",
         r"\b(QueueRunner|start_queue_runners|get_chief_queue_runner|get_init_tokens_op|queue_runner)\b"),
        (r"\bTF\s?1(\.x)?\b", r"\b(disable_eager_execution|disable_v2_behavior)\b"),
        # a session's options and waits: device filters, the session manager's
        # recovery wait, the stop grace period
        (r"\bsess(ion)?s?\b|managed_session|prepare_or_wait|device[\s_-]*filters?|recovery[\s_-]*wait|stop[\s_-]*grace",
         r"\b(Session|InteractiveSession|managed_session|MonitoredTrainingSession|MonitoredSession|prepare_or_wait)"),
        # TF1's queues (tickets handed out through a FIFOQueue on a ps, signals,
        # input queues); a program keeping a queue (Python's too) keeps the comments
        (r"\bqueues?\b|\b(en|de)queu\w*",
         r"\w*Queue\b|\b(enqueue|dequeue)\w*|\bqueue\b"),
    )
)

# calls whose result depends only on their arguments (no effect to keep)
_PURE_CALLS = frozenset({
    "len", "int", "float", "str", "bool", "list", "tuple", "dict", "set", "frozenset", "sorted",
    "range", "min", "max", "abs", "round", "zip", "enumerate", "repr",
    "ClusterSpec",  # tf.train.ClusterSpec(...) only holds its dict
    "ConfigProto", "GPUOptions", "RunOptions", "RunMetadata",  # session messages: data only
})
_PURE_METHODS = frozenset({
    "split", "rsplit", "strip", "lstrip", "rstrip", "format", "join", "lower", "upper", "replace",
    "startswith", "endswith", "get", "keys", "values", "items", "copy", "as_dict", "num_tasks",
    "job_tasks", "task_address", "task_indices",
})
_PURE_FUNCTIONS = frozenset({"os.path.join", "os.environ.get", "os.getenv", "json.loads"})


def tidy(source: str, output: str, cell_marker: str | None = None, *,
         trees: tuple[ast.Module, ast.Module] | None = None) -> str:
    """``output`` (the migrated code of ``source``) without the bindings and
    comments the migration orphaned; ``output`` itself when there are none.
    ``trees``: the ``ast`` of ``source`` and of ``output`` when the caller has
    them (the engine parsed both; they are only read here)."""
    try:
        legacy = trees[0] if trees else ast.parse(source)
    except SyntaxError:
        return output
    read_before = _reads(legacy)
    tidied = output
    tree: ast.Module | None = None  # the ast of ``tidied`` when parsed
    for _ in range(8):  # each round can orphan what a removed binding read
        try:
            tree = trees[1] if trees and tidied is output else ast.parse(tidied)
        except SyntaxError:  # not ours to fix: the engine's gate reports it
            return output
        doomed = empty_metadata_lines(source, tree, tidied) or _orphaned_lines(tree, tidied, read_before)
        if not doomed:
            break
        tidied = _drop_lines(tidied, doomed, cell_marker)
        tree = None
    said_of = removed_machinery(source, tidied)
    if not said_of:
        return tidied
    code = _drop_stale_comments(source, tidied, cell_marker, said_of)
    if code is not tidied:
        said_of, tree = removed_machinery(source, code), None
    documented = _drop_stale_docstring_paragraphs(source, code, said_of, tree)
    if documented == code:
        return code
    # a label the docstring defined ("each marked REMEDY") went with its paragraph
    return _drop_stale_comments(source, documented, cell_marker, _removed_labels(source, documented))


# --------------------------------------------------------------------------- bindings

# ``list(ast.walk(tree))`` of the last trees walked: the stages below read
# every node of the same tree several times a round (trees are only read).
# ``_under`` lists them in ``ast.walk``'s order (breadth first, fields in order)
# without its generator per node, which cost more than the stages reading them.
_WALKS: list[tuple[ast.AST, list[ast.AST]]] = []


def _walk(tree: ast.AST) -> list[ast.AST]:
    for known, nodes in _WALKS:
        if known is tree:
            return nodes
    nodes = _under(tree)  # (breadth first, as ast.walk)
    _WALKS.insert(0, (tree, nodes))
    del _WALKS[2:]
    return nodes



def _under(node: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(node))``: breadth first, fields in order."""
    nodes = [node]
    ast_node = ast.AST
    for n in nodes:  # (the list grows while it is read)
        for name in n._fields:
            value = getattr(n, name, None)
            if isinstance(value, ast_node):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend(item for item in value if isinstance(item, ast_node))
    return nodes


def _reads(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    names.update(_flag_reads(tree))
    return names


def _flag_objects(tree: ast.AST) -> set[str]:
    """Names bound to a flags object (``FLAGS = tf.app.flags.FLAGS``) that the
    code only reads attributes of: setting one of its values nobody reads is
    dead (``FLAGS.ps_hosts = ps_hosts_str`` once the ps hosts are unread)."""
    bound = {t.id for n in _walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute)
             and n.value.attr == "FLAGS" for t in n.targets if isinstance(t, ast.Name)}
    if not bound:
        return set()
    as_values = {id(n.value) for n in _walk(tree) if isinstance(n, ast.Attribute)}
    whole = {n.id for n in _walk(tree) if isinstance(n, ast.Name) and n.id in bound
             and isinstance(n.ctx, ast.Load) and id(n) not in as_values}
    return bound - whole  # a flags object handed around whole may have any value read


def _flag_reads(tree: ast.AST) -> set[str]:
    """``FLAGS.name`` read, as the pseudo-name ``"FLAGS.name"``."""
    objects = _flag_objects(tree)
    return {f"{n.value.id}.{n.attr}" for n in _walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) and n.value.id in objects}


def _names_read_by_string(tree: ast.Module) -> set[str]:
    """Names spelled as strings where Python reads them by name: ``__all__``
    and ``getattr``/``hasattr`` of a module (``globals()`` and the like make
    the whole file off limits, see :func:`_dynamic`)."""
    found: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            found.update(n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant)
                         and isinstance(n.value, str))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2:
            found.update(n.value for n in ast.walk(node.args[1]) if isinstance(n, ast.Constant)
                         and isinstance(n.value, str))
    return found


def _is_program(tree: ast.Module) -> bool:
    """A script (run, not imported): a ``__main__`` guard, ``main()``/``app.run`` or training at top level."""
    for statement in tree.body:
        if isinstance(statement, (ast.With, ast.For, ast.While)):
            return True
        if isinstance(statement, ast.If) and any(isinstance(n, (ast.With, ast.For, ast.While))
                                                 for n in _under(statement)):
            return True  # a role branch that trains (`if FLAGS.job_name == "worker":`)
        if isinstance(statement, ast.If) and "__main__" in ast.unparse(statement.test):
            return True
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = ast.unparse(statement.value.func)
            if func in ("main", "app.run", "tf.app.run", "tf.compat.v1.app.run", "absl.app.run"):
                return True
    return False


def _dynamic(tree: ast.AST) -> bool:
    """Code that reads names by string (``globals()``, ``locals()``, ``vars()``, ``eval``, ``exec``)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id in ("globals", "locals", "vars", "eval", "exec") for n in _walk(tree))


def _pure(value: ast.expr) -> bool:
    for node in _under(value):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                if func.id not in _PURE_CALLS:
                    return False
            elif isinstance(func, ast.Attribute):
                dotted = ast.unparse(func)
                if not (func.attr in _PURE_CALLS or func.attr in _PURE_METHODS or dotted in _PURE_FUNCTIONS):
                    return False
            else:
                return False
        elif isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
    return True


def _bodies(tree: ast.AST) -> Iterable[tuple[ast.AST, list[ast.stmt]]]:
    for node in _walk(tree):
        fields, handlers = _BLOCK_FIELDS.get(type(node)) or _block_fields(type(node))
        for field in fields:
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield node, body
        if handlers:
            for handler in getattr(node, "handlers", ()):
                yield handler, handler.body


# node type -> (which of "body", "orelse", "finalbody" it has, whether it has "handlers")
_BLOCK_FIELDS: dict[type, tuple[tuple[str, ...], bool]] = {}


def _block_fields(kind: type) -> tuple[tuple[str, ...], bool]:
    found = _BLOCK_FIELDS[kind] = (tuple(f for f in ("body", "orelse", "finalbody") if f in kind._fields),
                                   "handlers" in kind._fields)
    return found


def _bound_names(statement: ast.stmt, flag_objects: frozenset[str] = frozenset()) -> list[str] | None:
    """The names a removable statement binds, else None (a flag value it sets:
    the pseudo-name ``"FLAGS.name"``)."""
    if isinstance(statement, ast.Assign):
        if len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name) and _pure(statement.value):
            return [statement.targets[0].id]
        target = statement.targets[0] if len(statement.targets) == 1 else None
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                target.value.id in flag_objects and _pure(statement.value):
            return [f"{target.value.id}.{target.attr}"]
        return None
    if isinstance(statement, ast.AnnAssign):
        if isinstance(statement.target, ast.Name) and statement.value is not None and _pure(statement.value):
            return [statement.target.id]
        return None
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None if statement.decorator_list else [statement.name]
    if isinstance(statement, ast.Import):
        if any(a.name.split(".")[0] == "tensorflow" for a in statement.names):
            return None  # the program's TensorFlow, wherever the migration moved its uses
        return [(a.asname or a.name).split(".")[0] for a in statement.names]
    if isinstance(statement, ast.ImportFrom):
        if statement.module == "__future__" or any(a.name == "*" for a in statement.names):
            return None
        return [a.asname or a.name for a in statement.names]
    return None


def _orphaned_lines(tree: ast.Module, code: str, read_before: set[str]) -> dict[int, tuple[int, str | None]]:
    """{first line of a span to drop: (its last line, None)} or, for an import
    keeping its other names, {its line: (its line, its new text)}."""
    if _dynamic(tree):
        return {}
    read_now = _reads(tree)
    strings = _names_read_by_string(tree)
    lines = code.splitlines()
    program = _is_program(tree)
    scopes = [(parent, body) for parent, body in _bodies(tree)
              if not isinstance(parent, ast.ClassDef) and (program or not isinstance(parent, ast.Module))]
    bindings: dict[str, int] = {}
    for node in _walk(tree):
        if type(node) in _BINDING_KINDS:
            for name in _binds(node):
                bindings[name] = bindings.get(name, 0) + 1
    flag_objects = frozenset(_flag_objects(tree))
    simple: dict[str, int] = {}  # bindings by statements this stage may remove
    for _, body in scopes:
        for statement in body:
            for name in _bound_names(statement, flag_objects) or ():
                simple[name] = simple.get(name, 0) + 1
    dead = {name for name, count in simple.items()
            if name in read_before and name not in read_now and not name.startswith("__")
            and bindings.get(name) == count and name not in strings}
    if not dead:
        return {}

    def removable(statement: ast.stmt) -> bool:
        if isinstance(statement, ast.If):
            return _pure(statement.test) and all(removable(s) for s in statement.body + statement.orelse)
        names = _bound_names(statement, flag_objects)
        return bool(names) and set(names) <= dead and _whole_lines(statement, lines)

    doomed: dict[int, tuple[int, str | None]] = {}
    for parent, body in scopes:
        gone = [s for s in body if removable(s)]
        if len(gone) == len(body):
            if isinstance(parent, ast.If) and body is parent.orelse and not isinstance(parent, ast.Module):
                header = _else_line(parent, lines)
                if header is not None:  # the whole `else:`/`elif` branch goes
                    doomed[header] = (body[-1].end_lineno, None)
                continue
            gone = gone[:-1]  # a block keeps a statement
        for statement in gone:
            doomed[statement.lineno] = (statement.end_lineno, None)
        for statement in body:
            if statement in gone or not isinstance(statement, (ast.Import, ast.ImportFrom)):
                continue
            names = _bound_names(statement)
            if names and set(names) & dead and statement.lineno == statement.end_lineno \
                    and _whole_lines(statement, lines):
                rest = [a for a, n in zip(statement.names, names, strict=True) if n not in dead]
                text = ast.unparse(type(statement)(**{**statement.__dict__, "names": rest}))
                doomed[statement.lineno] = (statement.lineno, lines[statement.lineno - 1][:statement.col_offset] + text)
    # spans inside a span already dropped
    return {first: span for first, span in doomed.items()
            if not any(other < first <= end for other, (end, _) in doomed.items())}


def _else_line(statement: ast.If, lines: list[str]) -> int | None:
    """The line of the ``else:``/``elif`` that starts ``statement``'s orelse."""
    first = statement.orelse[0]
    if isinstance(first, ast.If) and len(statement.orelse) == 1 and first.col_offset == statement.col_offset:
        return first.lineno  # elif
    indent = statement.col_offset
    for number in range(first.lineno - 1, statement.body[-1].end_lineno, -1):
        text = lines[number - 1]
        if re.match(r"else\s*:", text[indent:]) and not text[:indent].strip():
            return number
    return None


# the node types :func:`_binds` finds names in
_BINDING_KINDS = frozenset({ast.Name, ast.Attribute, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                            ast.ImportFrom, ast.ExceptHandler, ast.arg})


def _binds(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
        return [f"{node.value.id}.{node.attr}"]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    return []


def _whole_lines(statement: ast.stmt, lines: list[str]) -> bool:
    """The statement has its lines to itself (no ``;`` neighbour, not on its parent's header line)."""
    first = lines[statement.lineno - 1].encode()
    if first[:statement.col_offset].strip():
        return False
    last = lines[statement.end_lineno - 1].encode()[statement.end_col_offset:].decode(errors="replace").strip()
    return not last or last.startswith("#")


def _drop_lines(code: str, doomed: dict[int, tuple[int, str | None]], cell_marker: str | None) -> str:
    lines = code.splitlines(keepends=True)
    marker = re.compile(cell_marker) if cell_marker else None
    dropped: set[int] = set()
    for first, (end, replacement) in doomed.items():
        if replacement is None:
            dropped.update(range(first, end + 1))
    for first, (end, replacement) in doomed.items():
        if replacement is not None:
            continue
        # The comment paragraph right above a dropped statement described it
        # when, the statement gone, it is followed by a blank line, the end of
        # its block or of the file: it is left describing nothing then.
        after = next((n for n in range(end + 1, len(lines) + 1) if n not in dropped), None)
        indent = _indent(lines[first - 1])
        if after is not None and lines[after - 1].strip() and _indent(lines[after - 1]) >= indent \
                and not (marker and marker.match(lines[after - 1])):
            continue
        above = first - 1
        while above >= 1 and above not in dropped and lines[above - 1].lstrip().startswith("#") \
                and _indent(lines[above - 1]) == indent and not (marker and marker.match(lines[above - 1])):
            dropped.add(above)
            above -= 1
    out: list[str] = []
    blank_runs: list[list[str]] = []  # blank lines since the last kept line with text
    for number, line in enumerate(lines, 1):
        if number in dropped:
            if blank_runs and blank_runs[-1]:
                blank_runs.append([])
            continue
        if not line.strip():
            if not blank_runs:
                blank_runs.append([])
            blank_runs[-1].append(line)
            continue
        # blank lines a removal brought together: as many as the widest gap was
        out.extend(max(blank_runs, key=len, default=[]))
        blank_runs = []
        replacement = doomed.get(number, (0, None))[1]
        if replacement is not None:
            line = replacement + line[len(line.rstrip("\r\n")):]
        out.append(line)
    out.extend(max(blank_runs, key=len, default=[]))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# --------------------------------------------------------------------------- comments


def _comments(code: str) -> list[tuple[int, int, str, bool]]:
    """(line, column, text, alone on its line) of each comment."""
    return _tokens(code)[0]


# (text, its comments, its code tokens joined) of the last texts tokenized: the
# stages below read the input's and the output's tokens several times each
# (pure-Python ``tokenize`` cost about half of this module's time)
_TOKENS: list[tuple[str, list[tuple[int, int, str, bool]], str]] = []


def _tokens(code: str) -> tuple[list[tuple[int, int, str, bool]], str]:
    """(:func:`_comments`, :func:`_without_comments_and_strings`) of ``code``, tokenized once."""
    for known, comments, names in _TOKENS:
        if known is code or known == code:
            return comments, names
    if _SCAN_IS_TOKENIZE and not any(c in code for c in _SCAN_LEAVES):
        comments, names = _scan(code)
    else:
        comments, names = _tokenize(code)
    _TOKENS.insert(0, (code, comments, names))
    del _TOKENS[4:]
    return comments, names


# Strings and comments as ``tokenize`` finds them in code that parses: a
# comment runs to the end of its line; a string (its prefix not part of a
# longer name: ``x or'a'`` is the name ``or`` and a string) runs to its closing
# quotes, a backslash escaping any character. Up to Python 3.11 an f-string is
# one string token as well (3.12 tokenizes its parts); lone carriage returns,
# form feeds and the like are left to ``tokenize``. (Checked against tokenize
# on the standard library and the installed packages: same comments, same
# names in the code between them; five times faster than pure-Python tokenize.)
_SCANNED = re.compile(r"""
    \#[^\r\n]*
  | (?:(?<!\w)[bBrRuUfF]{1,2})?
    (?: '''(?:[^'\\]|\\[\s\S]|'(?!''))*'''
      | \"\"\"(?:[^"\\]|\\[\s\S]|"(?!""))*\"\"\"
      | '(?:[^'\\\n]|\\[\s\S])*'
      | "(?:[^"\\\n]|\\[\s\S])*" )
""", re.VERBOSE)
_SCAN_IS_TOKENIZE = sys.version_info < (3, 12)
_SCAN_LEAVES = ("\r", "\x0c", "\x0b", "\x00")


def _scan(code: str) -> tuple[list[tuple[int, int, str, bool]], str]:
    """:func:`_tokenize` by :data:`_SCANNED`: the code text has each string and
    comment replaced by a blank (the names in it are the same)."""
    comments: list[tuple[int, int, str, bool]] = []
    parts: list[str] = []
    at, line, counted = 0, 1, 0
    for match in _SCANNED.finditer(code):
        start = match.start()
        parts += (code[at:start], " ")
        at = match.end()
        text = match.group()
        if text[0] == "#":
            line += code.count("\n", counted, start)
            counted = start
            line_start = code.rfind("\n", 0, start) + 1
            comments.append((line, start - line_start, text, not code[line_start:start].strip()))
    parts.append(code[at:])
    return comments, "".join(parts)


def _tokenize(code: str) -> tuple[list[tuple[int, int, str, bool]], str]:
    """(comments, the other tokens but strings joined by blanks)."""
    comments: list[tuple[int, int, str, bool]] = []
    kept: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            kind = token.type
            if kind == tokenize.COMMENT:
                line, column = token.start
                comments.append((line, column, token.string, not token.line[:column].strip()))
            elif kind != tokenize.STRING:
                kept.append(token.string)
        names = " ".join(kept)
    except (tokenize.TokenError, SyntaxError):
        comments, names = [], code
    return comments, names


def removed_machinery(source: str, output: str) -> list[re.Pattern[str]]:
    """Patterns of what a comment says about each TF1 construct ``source``
    has in its code and ``output`` (its migration) no longer has."""
    # A construct's code is a name, found in the tokens only where the text has it too:
    # the (pure-Python) tokenizing is done only for the constructs the text names.
    named = [(said, code_re) for said, code_re in _CONSTRUCTS if code_re.search(source)]
    if not named:
        return []
    legacy_code = _without_comments_and_strings(source)
    had = [(said, code_re) for said, code_re in named if code_re.search(legacy_code)]
    migrated_code = _without_comments_and_strings(output) if any(
        code_re.search(output) for _, code_re in had) else ""
    return [said for said, code_re in had if not code_re.search(migrated_code)] + _removed_names(
        source, output) + _removed_labels(source, output)


# A name a comment can only mean as code: snake_case with an underscore
# (``local_init_op``, ``average_gradients``) or CamelCase (``ChiefHook``).
_CODE_NAME = re.compile(r"^(?:_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+|_*[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)$")


def _removed_names(source: str, output: str) -> list[re.Pattern[str]]:
    """What a comment says about the names the legacy program bound (a
    ``def``, a class, an assignment) that its migration no longer has at all
    (``local_init_op``, ``average_gradients``): such a comment describes code
    that is gone."""
    if source == output:
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    bound = set()
    for node in _walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    bound = {name for name in bound if _CODE_NAME.match(name)}
    if not bound:
        return []
    migrated = set(re.findall(r"\w+", _without_comments_and_strings(output)))
    gone = sorted(bound - migrated)
    if not gone:
        return []
    return [re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, gone)) + r")(?![\w=])")]


_LABEL = re.compile(r"\b([A-Z]{3,})\s+\d+\b")


def _removed_labels(source: str, output: str) -> list[re.Pattern[str]]:
    """What a comment says with a label the legacy docstring defined ("Remedies
    applied below, each marked \"REMEDY\"": ``# REMEDY 2``) when the migrated
    text no longer defines it (the paragraph defining it went)."""
    labels = {match.group(1) for _, _, text, _ in _comments(source) for match in _LABEL.finditer(text)}
    if not labels:
        return []
    legacy_text, migrated_text = _without_comments(source), _without_comments(output)
    gone = sorted(label for label in labels
                  if re.search(rf"\b{label}\b", legacy_text) and not re.search(rf"\b{label}\b", migrated_text))
    return [re.compile(rf"\b({'|'.join(gone)})\s+\d+\b")] if gone else []


def _without_comments(code: str) -> str:
    """``code`` with its comments cut (strings kept: a docstring defines labels)."""
    lines = code.splitlines(keepends=True)
    for line, column, _, _ in reversed(_comments(code)):
        lines[line - 1] = lines[line - 1][:column]
    return "".join(lines)


def _drop_stale_comments(source: str, code: str, cell_marker: str | None,
                         said_of: list[re.Pattern[str]]) -> str:
    """``code`` without the comment paragraphs the legacy ``source`` had that
    say one of ``said_of`` (:func:`removed_machinery`)."""
    if not said_of:
        return code
    legacy_comments = {text.strip() for _, _, text, _ in _comments(source)}
    marker = re.compile(cell_marker) if cell_marker else None
    lines = code.splitlines(keepends=True)
    comments = [c for c in _comments(code) if not (marker and marker.match(lines[c[0] - 1]))]
    # paragraphs: runs of comment-only lines on consecutive lines, same indentation, same author
    paragraphs: list[list[tuple[int, int, str, bool]]] = []
    for comment in comments:
        if not comment[3]:
            paragraphs.append([comment])
            continue
        last = paragraphs[-1][-1] if paragraphs else None
        if last is not None and last[3] and last[0] == comment[0] - 1 and last[1] == comment[1] \
                and (last[2].strip() in legacy_comments) == (comment[2].strip() in legacy_comments):
            paragraphs[-1].append(comment)
        else:
            paragraphs.append([comment])
    drop_lines: set[int] = set()
    cut: dict[int, int] = {}
    for paragraph in paragraphs:
        if not all(text.strip() in legacy_comments for _, _, text, _ in paragraph):
            continue  # a rule wrote (part of) it
        text = _prose(" ".join(t.lstrip("#").strip() for _, _, t, _ in paragraph))
        if not any(said.search(text) for said in said_of):
            continue
        for line, column, _, alone in paragraph:
            if alone:
                drop_lines.add(line)
            else:
                cut[line] = column
    if not drop_lines and not cut:
        return code
    out = []
    for number, line in enumerate(lines, 1):
        if number in drop_lines:
            continue
        if number in cut:
            ending = line[len(line.rstrip("\r\n")):]
            line = line[:cut[number]].rstrip() + ending
        out.append(line)
    return "".join(out)


def _prose(text: str) -> str:
    """What a comment says, without the file names it mentions: ``sync_replicas.py``
    names a program, not the construct."""
    return re.sub(r"[\w./-]+\.py\b", "", text)


def _without_comments_and_strings(code: str) -> str:
    """The code's names and operators: what a construct's code pattern should match."""
    return _tokens(code)[1]


# --------------------------------------------------------------------------- docstrings

_DOCSTRING = re.compile(r"(?s)^([rRuU]?)(\"\"\"|\'\'\')(.*)\2$")


def _drop_stale_docstring_paragraphs(source: str, code: str, said_of: list[re.Pattern[str]],
                                     tree: ast.Module | None = None) -> str:
    """``code`` without the docstring paragraphs the legacy ``source`` had
    that say one of ``said_of``; ``tree``: the ast of ``code`` when known."""
    if not said_of:
        return code
    if tree is None:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return code
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    data = code.encode()
    edits: list[tuple[int, int, str]] = []  # byte span -> new text
    for node in _walk(tree):
        if not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body:
            continue
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        begin = starts[first.lineno - 1] + first.col_offset
        end = starts[first.end_lineno - 1] + first.end_col_offset
        segment = data[begin:end].decode()
        match = _DOCSTRING.match(segment)
        if match is None or segment not in source:  # a docstring the rules wrote, or not a plain literal
            continue
        prefix, quotes, body = match.groups()
        lead = re.match(r"\s*", body).group(0)
        trail = body[len(body.rstrip()):]
        core = body[len(lead):len(body) - len(trail)] if body.strip() else ""
        # (separator before, paragraph); the summary line is a paragraph of its own
        pieces = re.split(r"(\n[ \t]*\n)", core)
        paragraphs = [("", pieces[0]), *zip(pieces[1::2], pieces[2::2], strict=True)]
        summary, newline, rest = paragraphs[0][1].partition("\n")
        if rest and re.search(r"[.!?:]\s*$", summary):
            paragraphs[0:1] = [("", summary), (newline, rest)]
        original = list(paragraphs)
        stale = [any(said.search(_prose(p)) for said in said_of) for _, p in paragraphs]
        for at, (separator, paragraph) in enumerate(paragraphs):
            # "Training (TF1, on a Supervisor) of ...": the aside goes, the sentence stays
            trimmed = _without_stale_asides(paragraph, said_of)
            if stale[at] and trimmed is not None:
                paragraphs[at], stale[at] = (separator, trimmed), False
        for at in range(len(paragraphs) - 2, -1, -1):
            # a paragraph introducing one that goes ("Remedies applied below:") goes with it
            if not stale[at] and stale[at + 1] and paragraphs[at][1].rstrip().endswith(":"):
                stale[at] = True
        for at in range(len(paragraphs) - 1):
            # an example of how to start the program stays, with an introduction of its own
            if stale[at] and not stale[at + 1] and paragraphs[at][1].rstrip().endswith("::") \
                    and _RUNS_PROGRAM.search(paragraphs[at + 1][1]):
                indent = re.match(r"\s*", paragraphs[at][1]).group(0)
                paragraphs[at], stale[at] = (paragraphs[at][0], f"{indent}Each task is started like this::"), False
        summary_of = _strategy_summary(code) if isinstance(node, ast.Module) else None
        if stale[0] and summary_of is not None:
            # the summary line said what the program was; it says what it is now
            paragraphs[0], stale[0] = ("", summary_of), False
        kept = [piece for piece, gone in zip(paragraphs, stale, strict=True) if not gone]
        if kept == original:
            continue
        if kept:
            first = kept[0][1].lstrip() if "\n" not in lead else kept[0][1]
            joined = first + "".join(sep + p for sep, p in kept[1:])
            edits.append((begin, end, f"{prefix}{quotes}{lead}{joined}{trail}{quotes}"))
        elif len(node.body) > 1 and _alone_on_lines(lines, first):
            # no paragraph left: the docstring goes, with its lines
            edits.append((starts[first.lineno - 1], starts[first.end_lineno], ""))
    for begin, end, text in sorted(edits, reverse=True):
        data = data[:begin] + text.encode() + data[end:]
    return data.decode()


_RUNS_PROGRAM = re.compile(r"\bpython[\d.]*\s+\S+\.py\b")
_ASIDE = re.compile(r"(\s*)(\([^()]*\))( ?)")
_STRATEGY_SUMMARIES = {
    "ParameterServerStrategy": "Parameter-server training with tf.distribute.ParameterServerStrategy: a chief"
                               " task coordinates, workers run the steps, ps tasks hold the variables.",
    "MultiWorkerMirroredStrategy": "Synchronous data-parallel training on several workers with"
                                   " tf.distribute.MultiWorkerMirroredStrategy.",
    "MirroredStrategy": "Synchronous data-parallel training on this machine's devices with"
                        " tf.distribute.MirroredStrategy.",
}


def _without_stale_asides(paragraph: str, said_of: list[re.Pattern[str]]) -> str | None:
    """``paragraph`` without the parenthesized asides that name removed
    machinery, when that leaves a paragraph that names none; else None."""
    def cut(aside: re.Match[str]) -> str:
        if not any(said.search(_prose(aside.group(2))) for said in said_of):
            return aside.group(0)
        # an aside starting a line leaves the line break (and the indent) before what follows
        return aside.group(1) if "\n" in aside.group(1) else aside.group(3)

    trimmed = _ASIDE.sub(cut, paragraph)
    if trimmed == paragraph or any(said.search(_prose(trimmed)) for said in said_of) or not trimmed.strip():
        return None
    return trimmed


def _strategy_summary(code: str) -> str | None:
    """What a migrated program is, in a docstring's summary line: the one
    strategy kind it builds."""
    built = set(re.findall(r"\b(ParameterServerStrategy|MultiWorkerMirroredStrategy|MirroredStrategy)\s*\(", code))
    return _STRATEGY_SUMMARIES[built.pop()] if len(built) == 1 else None


def _alone_on_lines(lines: list[str], statement: ast.stmt) -> bool:
    return _whole_lines(statement, [line.rstrip("\r\n") for line in lines])
