"""Files on disk: discovery, decoding, and writing without ever corrupting one.

- :func:`discover` walks paths (files and directories) the way users expect
  from a code-mod tool: ``.py`` and ``.ipynb`` only, ``.gitignore``-aware,
  default excludes (``.git``, virtualenvs, ``build``, ``.ipynb_checkpoints``...),
  symlinked directories not followed.
- :func:`decode_source` honours PEP 263 coding cookies and BOMs and remembers
  the newline style so :func:`encode_source` writes back the same bytes for
  unchanged text.
- :func:`atomic_write` writes a temp file in the same directory, fsyncs it
  and ``os.replace``-s it over the target, keeping the file mode.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

SOURCE_SUFFIXES = (".py", ".ipynb")

# Directory names never worth entering (ruff/black use a similar list).
DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    ".venv",
    "venv",
    ".env",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    "node_modules",
    "site-packages",
    "build",
    "dist",
    "_build",
    "buck-out",
)

# A source larger than this is reported instead of parsed: libcst needs
# ~10 s per MB on a busy 2-core machine, and such files are almost always
# generated (protobuf stubs, embedded data) rather than hand-written.
DEFAULT_MAX_FILE_SIZE = 1024 * 1024


class FileError(Exception):
    """A file that cannot be processed; ``line``/``column`` locate it when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


# --------------------------------------------------------------------------- discovery


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    # Paths given on the command line that are unusable or yield no file to
    # process: (path, message saying why).
    errors: list[tuple[Path, str]] = field(default_factory=list)
    # Other files under the given directories (for ``-o DIR``: copied as they are).
    others: list[Path] = field(default_factory=list)
    # Files named explicitly and left out by ``force_exclude``: (path, why).
    skipped: list[tuple[Path, str]] = field(default_factory=list)


@dataclass
class _Skips:
    """What a walk left out and why: (kind, reason) -> how many."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    found: int = 0  # files to process (also those another given path found first)

    def add(self, kind: str, detail: str = "") -> None:
        self.counts[(kind, detail)] = self.counts.get((kind, detail), 0) + 1

    def explain(self, most: int = 4) -> str:
        """Why nothing was found, e.g. "2 paths ignored by .gitignore
        (/r/.gitignore line 3: `build/`)"; the ``most`` first reasons."""
        parts = []
        for (kind, detail), count in list(self.counts.items())[:most]:
            one, many, label = {
                "gitignore": ("path", "paths", "ignored by .gitignore"),
                "exclude": ("path", "paths", "excluded by the exclude pattern"),
                "virtualenv": ("virtualenv directory", "virtualenv directories", "not entered"),
                "symlink": ("symbolic link", "symbolic links", "not followed"),
                "other": ("file", "files", "not Python or a notebook (.py, .ipynb)"),
            }[kind]
            parts.append(f"{count} {one if count == 1 else many} {label}" + (f" {detail}" if detail else ""))
        if len(self.counts) > most:
            parts.append(f"{len(self.counts) - most} other reasons")
        return "; ".join(parts) if parts else "the directory is empty"


def _is_virtualenv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def _gitignore_spec(directory: Path) -> GitIgnoreSpec | None:
    try:
        text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return GitIgnoreSpec.from_lines(text.splitlines())


def _ancestor_gitignores(root: Path) -> list[tuple[Path, GitIgnoreSpec]]:
    """``.gitignore`` files above ``root`` up to the enclosing repository's top."""
    found: list[tuple[Path, GitIgnoreSpec]] = []
    for parent in root.parents:
        spec = _gitignore_spec(parent)
        if spec is not None:
            found.append((parent, spec))
        if (parent / ".git").exists():
            return list(reversed(found))
    # Not inside a repository: parent .gitignore files do not apply.
    return []


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, GitIgnoreSpec]]) -> str | None:
    """Which ``.gitignore`` ignores ``path``: "(FILE line N: `PATTERN`)", else None."""
    for base, spec in specs:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if is_dir:
            rel += "/"
        found = spec.check_file(rel)
        if found.include:
            pattern = getattr(spec.patterns[found.index], "pattern", None) if found.index is not None else None
            where = f" line {found.index + 1}: `{pattern}`" if pattern else ""
            return f"({base / '.gitignore'}{where})"
    return None


def discover(
    paths: list[Path],
    *,
    exclude: list[str] | None = None,
    extend_exclude: list[str] | None = None,
    exclude_base: Path | None = None,
    force_exclude: bool = False,
    skip_dirs: tuple[Path, ...] = (),
    collect_others: bool = False,
    pattern_origins: dict[str, str] | None = None,
) -> Discovery:
    """Expand ``paths`` into the ``.py``/``.ipynb`` files to process.

    ``exclude`` replaces :data:`DEFAULT_EXCLUDES`, ``extend_exclude`` adds to
    them; both are gitignore-style patterns relative to ``exclude_base``
    (where the config lives) and also match bare names anywhere. Files named
    explicitly are always processed unless ``force_exclude`` (pre-commit
    passes file names one by one; those are then ``skipped``, with why). A
    directory that yields no file is an error saying why (``.gitignore``,
    which exclude pattern and where it was set: ``pattern_origins``, files
    of other kinds).
    """
    patterns = list(DEFAULT_EXCLUDES if exclude is None else exclude) + list(extend_exclude or [])
    exclude_spec = GitIgnoreSpec.from_lines(patterns)
    origins = dict(pattern_origins or {})
    if exclude is None:
        for pattern in DEFAULT_EXCLUDES:
            origins.setdefault(pattern, "one of the default excludes")
    base = (exclude_base or Path.cwd()).resolve()
    skip = {p.resolve() for p in skip_dirs}
    result = Discovery()
    seen: set[Path] = set()

    def excluded(path: Path, is_dir: bool, resolved: Path | None = None) -> str | None:
        """Why the exclude patterns leave ``path`` out: "`PATTERN` (ORIGIN)", else None."""
        suffix = "/" if is_dir else ""
        found = exclude_spec.check_file(path.name + suffix)
        if not found.include:
            try:
                rel = (resolved or path.resolve()).relative_to(base).as_posix()
            except ValueError:
                return None
            found = exclude_spec.check_file(rel + suffix)
            if not found.include:
                return None
        pattern = patterns[found.index]
        origin = origins.get(pattern)
        return f"`{pattern}`" + (f" ({origin})" if origin else "")

    def add(path: Path, resolved: Path | None = None) -> None:
        key = resolved or path.resolve()
        if key not in seen:
            seen.add(key)
            result.files.append(path)

    for given in paths:
        if given.is_symlink() and not given.exists():
            result.errors.append((given, f"broken symbolic link (points to {os.readlink(given)})"))
            continue
        if not given.exists():
            result.errors.append((given, "no such file or directory"))
            continue
        if given.is_dir():
            errors_before = len(result.errors)
            skips = _walk(given, excluded, skip, result, add, collect_others)
            if not skips.found and len(result.errors) == errors_before:
                result.errors.append((given, f"no Python or notebook file to process here: {skips.explain()}"))
            continue
        why = excluded(given, False) if force_exclude else None
        if why is not None:
            result.skipped.append((given, f"excluded by the exclude pattern {why} (--force-exclude)"))
            continue
        if not _python_or_notebook(given):
            why = "not a Python or notebook file (.py, .ipynb, or a script whose #! line runs python)"
            # pre-commit names files its own way (SConstruct is Python to it): skip them quietly there
            (result.skipped if force_exclude else result.errors).append((given, why))
            continue
        add(given)
    return result


def _python_or_notebook(path: Path) -> bool:
    """A named file tfmigrate reads: a Python or notebook suffix, or a
    ``#!`` line that runs python (an unreadable file is let through: reading
    it reports why)."""
    if path.suffix in (*SOURCE_SUFFIXES, ".pyw", ".pyi"):
        return True
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return True
    return first.startswith(b"#!") and b"python" in first


def _walk(root, excluded, skip, result: Discovery, add, collect_others: bool) -> _Skips:
    root_resolved = root.resolve()
    specs = _ancestor_gitignores(root_resolved)
    skips = _Skips()

    def unlistable(error: OSError) -> None:
        result.errors.append((Path(error.filename), f"cannot list directory: {error.strerror}"))

    # os.walk does not follow symlinked directories: no loops, no escaping the tree.
    for dirpath, dirnames, filenames in os.walk(root, onerror=unlistable):
        current = Path(dirpath)
        # symlinked directories are not entered, so this is current.resolve()
        resolved_dir = root_resolved / os.path.relpath(dirpath, root)
        own = _gitignore_spec(current)
        if own is not None:
            specs = [*specs, (resolved_dir, own)]
        keep = []
        for name in sorted(dirnames):
            sub, resolved = current / name, resolved_dir / name
            if resolved in skip:
                continue
            if (why := excluded(sub, True, resolved)) is not None:
                skips.add("exclude", why)
            elif _is_virtualenv(sub):
                skips.add("virtualenv")
            elif (why := _ignored(resolved, True, specs)) is not None:
                skips.add("gitignore", why)
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = current / name
            if path.is_symlink():
                # Processing a link would either touch a file outside the
                # tree or process its target twice; the target is found
                # on its own when it lives in the tree.
                skips.add("symlink")
                continue
            resolved = resolved_dir / name
            if (why := excluded(path, False, resolved)) is not None:
                skips.add("exclude", why)
            elif (why := _ignored(resolved, False, specs)) is not None:
                skips.add("gitignore", why)
            elif name.endswith(SOURCE_SUFFIXES):
                skips.found += 1
                add(path, resolved)
            else:
                skips.add("other")
                if collect_others:
                    result.others.append(path)
    return skips


# --------------------------------------------------------------------------- reading


@dataclass
class DecodedSource:
    text: str
    encoding: str  # as for bytes.decode; "utf-8-sig" when the file had a BOM
    crlf: bool  # every line ends with \r\n


def read_bytes(path: Path, max_size: int | None = None) -> bytes:
    """The file's bytes, or a clear :class:`FileError` (unreadable, not a
    regular file, too large)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileError("no such file") from None
    except OSError as e:
        raise FileError(f"cannot stat file: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise FileError("not a regular file")
    check_size(st.st_size, max_size)
    try:
        with open(path, "rb") as f:
            return f.read()
    except PermissionError:
        raise FileError("permission denied: cannot read file") from None
    except OSError as e:
        raise FileError(f"cannot read file: {e.strerror or e}") from None


def check_size(size: int, max_size: int | None, what: str = "file") -> None:
    if max_size and size > max_size:
        raise FileError(
            f"{what} too large ({size / 1e6:.1f} MB > {max_size / 1e6:.1f} MB limit);"
            " use --max-file-size 0 to process it anyway"
        )


def check_not_binary(data: bytes) -> None:
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        column = nul - (data.rfind(b"\n", 0, nul) + 1) + 1
        raise FileError("binary file (contains a NUL byte); not a Python source", line, column)


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, column


def decode_source(data: bytes) -> DecodedSource:
    """Decode a Python source like the interpreter does (BOM, PEP 263 cookie,
    default UTF-8), with a located error when that fails."""
    check_not_binary(data)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        # e.g. an unknown codec in the cookie, or a cookie contradicting the BOM
        raise FileError(f"bad encoding declaration: {e.msg}", 1, 1) from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        line, column = _position(data, e.start)
        declared = encoding if encoding not in ("utf-8", "utf-8-sig") else None
        advice = (
            f"the file declares {declared} but is not valid {declared}"
            if declared
            else "not valid UTF-8 and no coding cookie; add e.g. '# -*- coding: latin-1 -*-' on"
            " line 1 or re-encode the file as UTF-8"
        )
        raise FileError(
            f"cannot decode byte 0x{data[e.start]:02x}: {advice}", line, column
        ) from None
    except LookupError:
        raise FileError(f"unknown encoding {encoding!r}", 1, 1) from None
    lf = text.count("\n")
    crlf = lf > 0 and text.count("\r\n") == lf
    return DecodedSource(text, encoding, crlf)


def encode_source(text: str, like: DecodedSource) -> bytes:
    """Encode migrated ``text`` the way the original was stored."""
    if like.crlf:
        # rules insert lines with "\n"; keep the file uniformly CRLF
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    try:
        return text.encode(like.encoding)
    except UnicodeEncodeError as e:
        raise FileError(
            f"the migrated code cannot be stored in the file's encoding {like.encoding}"
            f" ({e.reason}); file left unchanged"
        ) from None


# --------------------------------------------------------------------------- writing


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path``'s content with ``data`` so that readers see either the
    old or the new file, never a truncated one. A symlink is written through
    (its target changes, the link stays). ``durable=False`` skips the fsyncs
    (for fresh copies under ``-o``, where no user file is at stake)."""
    target = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tfmigrate")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not durable:
        return
    try:
        dir_fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
