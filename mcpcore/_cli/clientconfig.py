"""`mcpcore config TARGET --client NAME`: the configuration snippet that makes a client launch this server.

It names this interpreter (the virtual environment mcpcore is installed in) and
the target's absolute path, so the client starts the server wherever it runs
from. `--write` merges the entry into the client's file, keeping everything
else in it (a file that is not a JSON object is left alone, with an error),
and replaces the file in one step through a fresh temporary file of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CLIENTS", "configure", "snippet"]

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")


def config_file(client: str) -> Path:
    """Where the client reads its MCP servers from (the project's folder for the per-project ones)."""
    home = Path.home()
    if client == "claude-desktop":
        if sys.platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if sys.platform == "win32":
            return Path(os.environ.get("APPDATA", home)) / "Claude" / "claude_desktop_config.json"
        return home / ".config" / "Claude" / "claude_desktop_config.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        return Path.cwd() / ".vscode" / "mcp.json"
    return Path.cwd() / ".mcp.json"  # claude-code, per project


def snippet(target: str, is_file: bool, name: str, client: str) -> dict[str, Any]:
    """`{"mcpServers": {name: entry}}` (VS Code: `{"servers": ...}`) for `mcpcore run TARGET` on stdio
    (TARGET with its file already absolute, `main.absolute_target`)."""
    entry: dict[str, Any] = {"command": sys.executable, "args": ["-m", "mcpcore", "run", target]}
    if not is_file:  # a module is imported from the project folder
        entry["env"] = {"PYTHONPATH": os.getcwd()}
    if client == "vscode":
        return {"servers": {name: {"type": "stdio", **entry}}}
    return {"mcpServers": {name: entry}}


def configure(target: str, is_file: bool, name: str, client: str, write: bool) -> int:
    found = snippet(target, is_file, name, client)
    if not write:
        print(json.dumps(found, indent=2))
        return 0
    path = config_file(client)
    try:
        current = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as error:
        print(f"mcpcore: cannot read {path}: {error}", file=sys.stderr)
        return 1
    if not isinstance(current, dict):
        print(f"mcpcore: {path} does not hold a JSON object; left as it is", file=sys.stderr)
        return 1
    key = next(iter(found))
    servers = current.setdefault(key, {})
    if not isinstance(servers, dict):
        print(f"mcpcore: {path}: {key!r} is not an object; left as it is", file=sys.stderr)
        return 1
    servers.update(found[key])
    try:
        replace_file(path, json.dumps(current, indent=2) + "\n")
    except OSError as error:
        print(f"mcpcore: cannot write {path}: {error}", file=sys.stderr)
        return 1
    print(f"mcpcore: wrote server {name!r} to {path}")
    return 0


def replace_file(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, so the client never reads half a file.

    The temporary file is created new and exclusively (`mkstemp`: O_EXCL, never through
    a symlink), so a name planted beside the file, as a cloned project can ship in its
    `.vscode/`, is never written through. It gets the file's permissions (or the
    umask's, for a new file), reaches the disk before the rename, and is removed if
    anything fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_of(path)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(partial, mode)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):  # the error to report is the one that stopped the write
            os.unlink(partial)
        raise


def _mode_of(path: Path) -> int:
    """The permission bits a rewritten `path` keeps: its own, or a new file's under the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # read by setting it; the CLI runs no other thread here
        os.umask(umask)
        return 0o666 & ~umask
