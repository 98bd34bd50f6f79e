"""``[tool.tfmigrate]`` in ``pyproject.toml``.

Keys (all optional)::

    [tool.tfmigrate]
    select = ["TFM2", "TFM301"]    # rule codes or prefixes ("ALL")
    ignore = ["TFM9"]
    exclude = ["build", "third_party/"]   # replaces the default excludes
    extend-exclude = ["generated/"]       # adds to them
    max-file-size = 1048576               # bytes; 0 = no limit

The nearest ``pyproject.toml`` with a ``[tool.tfmigrate]`` table, walking up
from the first path given, applies; exclude patterns are gitignore-style,
relative to that file's directory. Command-line options override it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

KNOWN_KEYS = {"select", "ignore", "exclude", "extend-exclude", "max-file-size"}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    path: Path | None = None  # the pyproject.toml it came from
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    max_file_size: int | None = None

    @property
    def base(self) -> Path:
        return self.path.parent if self.path else Path.cwd()


def _string_list(table: dict, key: str, source: Path) -> list[str] | None:
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: [tool.tfmigrate] {key} must be a list of strings")
    return value


def load(path: Path) -> Config:
    if tomllib is None:
        raise ConfigError(
            f"{path}: reading pyproject.toml on Python 3.10 needs the 'tomli' package"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    table = data.get("tool", {}).get("tfmigrate")
    if table is None:
        return Config(path=path)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.tfmigrate] must be a table")
    table = {k.replace("_", "-"): v for k, v in table.items()}
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown [tool.tfmigrate] key(s): {', '.join(unknown)}"
            f" (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    max_size = table.get("max-file-size")
    if max_size is not None and (not isinstance(max_size, int) or max_size < 0):
        raise ConfigError(f"{path}: [tool.tfmigrate] max-file-size must be a non-negative integer")
    return Config(
        path=path,
        select=_string_list(table, "select", path),
        ignore=_string_list(table, "ignore", path) or [],
        exclude=_string_list(table, "exclude", path),
        extend_exclude=_string_list(table, "extend-exclude", path) or [],
        max_file_size=max_size,
    )


def _has_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "[tool.tfmigrate]" in text or "tool.tfmigrate" in text


def find(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.tfmigrate] table above ``start``."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and _has_table(pyproject):
            return pyproject
    return None


def discover(start: Path, explicit: Path | None = None) -> Config:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such config file")
        return load(explicit)
    found = find(start)
    return load(found) if found else Config()
