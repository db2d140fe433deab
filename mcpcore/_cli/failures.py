"""Failures a user causes, said in a line or two: where their own code broke, why a port is refused.

The console script shows these instead of a traceback (which `--log-level debug`
still prints): a TARGET whose import raises is named with the user's own frame,
not the loader's; a port another process holds is named with the option that
avoids it. Anything else is not the user's doing and keeps its traceback.
"""

from __future__ import annotations

import errno
import functools
import importlib.util
import os
import sysconfig
import traceback

__all__ = ["cannot_listen", "in_user_code", "sole"]


def _folders(*found: str | None) -> tuple[str, ...]:
    return tuple({os.path.join(os.path.realpath(folder), "") for folder in found if folder})


@functools.cache
def _not_users() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """mcpcore's folders (`transports/` is one of its own in a source checkout), and the installed code's."""
    transports = importlib.util.find_spec("mcpcore.transports")
    ours = _folders(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    *(transports.submodule_search_locations or ()) if transports else ())
    paths = sysconfig.get_paths()
    return ours, _folders(*(paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")))


_LISTEN_FIXES = {
    errno.EADDRINUSE: "address already in use (try --port 0)",
    errno.EACCES: "permission denied (ports below 1024 need privileges: try --port 0 or one above 1023)",
    errno.EADDRNOTAVAIL: "no such address on this machine (try --host 127.0.0.1)",
}


def sole(error: BaseException) -> BaseException:
    """The one exception inside nested exception groups of one (a task group wraps a failing start), else `error`."""
    while isinstance(getattr(error, "exceptions", None), tuple) and len(error.exceptions) == 1:  # type: ignore[attr-defined]
        error = error.exceptions[0]  # type: ignore[attr-defined]
    return error


def cannot_listen(error: BaseException, host: str, port: int) -> str | None:
    """`cannot listen on HOST:PORT: why (the fix)` for a refused bind, else None."""
    found = sole(error)
    if not isinstance(found, OSError) or found.errno not in _LISTEN_FIXES:
        return None
    shown = f"[{host}]" if ":" in host else host
    return f"cannot listen on {shown}:{port}: {_LISTEN_FIXES[found.errno]}"


def in_user_code(error: BaseException) -> str:
    """`Kind: message`, then where in the user's own code it was raised (the deepest frame outside mcpcore,
    the standard library and installed packages; failing that, outside mcpcore)."""
    said = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1]
    if isinstance(error, SyntaxError) and error.filename:
        return f"{said}\n  at {error.filename}:{error.lineno}: {(error.text or '').strip()}"
    ours, installed = _not_users()
    frames = traceback.extract_tb(error.__traceback__)
    outside_mcpcore = [f for f in frames if not f.filename.startswith("<") and not _within(f.filename, ours)]
    users = [f for f in outside_mcpcore if not _within(f.filename, installed)] or outside_mcpcore
    if not users:
        return said
    frame = users[-1]
    return f"{said}\n  at {frame.filename}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"


def _within(filename: str, folders: tuple[str, ...]) -> bool:
    return os.path.realpath(filename).startswith(folders)
