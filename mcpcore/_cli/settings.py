"""`mcpcore run` settings from a file and the environment, beneath the command line.

Each setting is a `mcpcore run` option, named with underscores or dashes (`port`,
`log_level`, `allow_host`, `cors_origin`, ..., and `target`). The first found wins: the command
line, then an environment variable `MCPCORE_<NAME>` (`MCPCORE_PORT=9000`; a list
option takes comma-separated values), then `mcpcore.toml` in the current folder
(its top level, or a `[tool.mcpcore]` table), else the `[tool.mcpcore]` table of
`pyproject.toml` there, then the defaults. An unknown name or a value of the
wrong type is an error naming the file or variable. Reading TOML needs Python
3.11's `tomllib` (or the `tomli` package on 3.10).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = ["SettingsError", "flag", "load"]

PREFIX = "MCPCORE_"
LISTS = {"allowed_hosts": "allow_host", "allowed_origins": "allow_origin", "cors_origins": "cors_origin",  # dest → name
         "tool_rate_limits": "tool_rate_limit", "tool_daily_quotas": "tool_daily_quota"}


class SettingsError(ValueError):
    """A setting that cannot be used, said with where it came from."""


def flag(text: str) -> bool:
    """An on/off option's value as text (`MCPCORE_STATELESS=1`); TOML gives a boolean itself."""
    value = _FLAG_WORDS.get(text.strip().lower())
    if value is None:
        raise ValueError(f"say one of {', '.join(_FLAG_WORDS)}")
    return value


_FLAG_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib as toml
    except ImportError:  # Python 3.10
        try:
            import tomli as toml  # type: ignore[no-redef]
        except ImportError:
            raise SettingsError(f"{path}: reading TOML needs Python 3.11 or the tomli package") from None
    try:
        return toml.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SettingsError(f"{path}: {error}") from None


def file_settings(folder: Path) -> tuple[dict[str, Any], str]:
    """The settings table of `mcpcore.toml` or `pyproject.toml` in `folder`, and the file's name ("" without one)."""
    own = folder / "mcpcore.toml"
    if own.is_file():
        found = _toml(own)
        table = found.get("tool", {}).get("mcpcore", found) if isinstance(found.get("tool"), dict) else found
        return dict(table), str(own)
    project = folder / "pyproject.toml"
    if project.is_file():
        table = _toml(project).get("tool", {}).get("mcpcore")
        if isinstance(table, dict):
            return dict(table), str(project)
    return {}, ""


def load(kinds: Mapping[str, Callable[[str], Any]], environ: Mapping[str, str] | None = None,
         folder: Path | None = None) -> dict[str, Any]:
    """The settings the environment and the file give, by option dest (`kinds`: dest → parser of a text value)."""
    environ = os.environ if environ is None else environ
    names = {LISTS.get(dest, dest): dest for dest in kinds}
    table, source = file_settings(folder or Path.cwd())
    found: dict[str, Any] = {}
    for key, value in table.items():
        dest = names.get(key.replace("-", "_"))
        if dest is None:
            raise SettingsError(f"{source}: unknown setting {key!r}; known: {', '.join(sorted(names))}")
        found[dest] = _checked(dest, value, kinds[dest], f"{source}: {key}")
    for name, dest in names.items():
        text = environ.get(PREFIX + name.upper())
        if text is not None:
            where = f"{PREFIX}{name.upper()}"
            found[dest] = [_parsed(kinds[dest], part.strip(), where) for part in text.split(",") if part.strip()] \
                if dest in LISTS else _parsed(kinds[dest], text, where)
    return found


_EXPECTED = {int: "expected a whole number", float: "expected a number"}  # said instead of int()'s own words


def _parsed(kind: Callable[[str], Any], text: str, where: str) -> Any:
    try:
        return kind(text)
    except (TypeError, ValueError) as error:
        raise SettingsError(f"{where}: {text!r} is not valid ({_EXPECTED.get(kind, error)})") from None


def _checked(dest: str, value: Any, kind: Callable[[str], Any], where: str) -> Any:
    if dest in LISTS:
        if isinstance(value, str):
            value = [value]
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise SettingsError(f"{where}: expected a list of strings, not {value!r}")
        return value
    if isinstance(value, bool) and kind is flag:
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SettingsError(f"{where}: expected a string or a number, not {value!r}")
    return _parsed(kind, str(value), where)
