"""Pinning, starting and stopping the processes a benchmark runs, and naming the machine: one helper for every tool here.

Standard library only.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence


def pinned(cpu: int | str | None, command: Sequence[str]) -> list[str]:
    """`command` held to one CPU, so a server and its load generator never share a core."""
    if cpu is None or shutil.which("taskset") is None:
        return list(command)
    return ["taskset", "-c", str(cpu), *command]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(command: Sequence[str], cpu: int | str | None = None, env: dict[str, str] | None = None,
          **popen: object) -> subprocess.Popen[bytes]:
    """Start `command` pinned to `cpu`, with `env` added to ours, quiet unless told otherwise."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen(pinned(cpu, command), env={**os.environ, **(env or {})}, **popen)  # type: ignore[call-overload]


def stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM first (servers drain and exit; unlike SIGINT, a shell's `&` cannot have it ignored), then SIGKILL."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Return once something accepts on `port`; fail early if the process died instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with status {process.returncode} before listening on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"did not listen on port {port} within {timeout:g} s")


@contextmanager
def listening(command: Sequence[str], port: int, cpu: int | str | None = None, env: dict[str, str] | None = None,
              cwd: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A server process for the length of a `with` block, stopped however the block ends."""
    process = start(command, cpu, env, cwd=cwd)
    try:
        wait_for_port(port, process)
        yield process
    finally:
        stop(process)


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time used so far by process `pid` and every process under it (a proxy's
    upstream too): under a busy machine's load, CPU per request still compares servers where req/s cannot."""
    usage: dict[int, tuple[int, int]] = {}  # pid → (parent, ticks used)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        usage[int(stat.parent.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, grew = {pid}, True
    while grew:
        below = {child for child, (parent, _) in usage.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return sum(usage[member][1] for member in tree if member in usage) / os.sysconf("SC_CLK_TCK")


def machine() -> str:
    model = "?"
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}"
