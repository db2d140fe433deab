"""`mcpcore dev TARGET [run options]`: `mcpcore run` in a child process, restarted when a source file changes.

The supervisor polls the modification times of the `.py` files under the
target's folder (twice a second; no file-watching dependency). On a change it
stops the child (SIGTERM, then SIGKILL after the grace period) and starts a new
one. Over HTTP the new child binds the same port; over stdio the supervisor
holds the client's pipes and forwards lines to whichever child is running, so
the client stays connected: the stateless 2026-07-28 wire goes on unharmed, a
2025-era session must `initialize` again, and a request in flight at the
restart gets no answer (the log says so). Diagnostics go to stderr at debug level.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Iterator, Sequence

from .._runtime.defaults import SUPERVISOR_ENV

POLL_SECONDS = 0.5
STOP_SECONDS = 5.0
SKIPPED = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox", "build", "dist"}


def _say(message: str) -> None:
    print(f"mcpcore dev: {message}", file=sys.stderr, flush=True)


def sources(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not d.startswith(".")]
        yield from (Path(root) / name for name in files if name.endswith(".py"))


def snapshot(folder: Path) -> dict[Path, float]:
    """Each source file's modification time (a file gone between listing and reading is skipped)."""
    found = {}
    for path in sources(folder):
        try:
            found[path] = path.stat().st_mtime
        except OSError:
            pass
    return found


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _copy(source: IO[bytes], sink: IO[bytes]) -> None:
    for line in iter(source.readline, b""):
        sink.write(line)
        sink.flush()


def run(target_folder: Path, run_args: Sequence[str], stdio: bool) -> int:
    """Supervise `mcpcore run RUN_ARGS` until interrupted (or stdin ends, on stdio)."""
    command = [sys.executable, "-m", "mcpcore", "run", *run_args]
    if "--log-level" not in run_args:
        command += ["--log-level", "debug"]
    lock = threading.Lock()
    ended = threading.Event()
    child: subprocess.Popen[bytes] | None = None

    env = {**os.environ, SUPERVISOR_ENV: str(os.getpid())}  # a child outliving us (killed) stops by itself

    def start() -> subprocess.Popen[bytes]:
        started = subprocess.Popen(command, stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE if stdio else None, env=env)
        if stdio:
            threading.Thread(target=_copy, args=(started.stdout, sys.stdout.buffer), daemon=True).start()
        return started

    def forward_stdin() -> None:  # the client's lines to whichever child runs now
        for line in iter(sys.stdin.buffer.readline, b""):
            with lock:
                current = child
            try:
                assert current is not None and current.stdin is not None
                current.stdin.write(line)
                current.stdin.flush()
            except (OSError, AssertionError):
                _say("a line arrived while the server restarted; it was dropped")
        ended.set()

    child = start()
    if stdio:
        threading.Thread(target=forward_stdin, daemon=True).start()
    seen = snapshot(target_folder)
    _say(f"watching {target_folder} for changes")
    try:
        while not ended.wait(POLL_SECONDS):
            now = snapshot(target_folder)
            if now != seen:
                changed = sorted(str(p.relative_to(target_folder)) for p in set(now) ^ set(seen) | {
                    p for p in now.keys() & seen.keys() if now[p] != seen[p]})
                seen = now
                _say(f"{', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''} changed; restarting")
                with lock:
                    old = child
                    child = None
                _stop(old)
                with lock:
                    child = start()
    except KeyboardInterrupt:
        pass
    finally:
        if child is not None:
            _stop(child)
    return 0

