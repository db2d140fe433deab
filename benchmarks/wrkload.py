"""The native HTTP load generator: wrk driven through benchmarks/wrk/mcp.lua, its report parsed.

wrk (an OS package) keeps the load generator's own cost far below a Python
server's, which `httpload.py` cannot promise; `parse` turns wrk's text report
into the same keys `httpload.py` prints (rps, p50_ms, p99_ms, errors), so the
harness can use either. Standard library only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Sequence

import procs

SCRIPT = Path(__file__).resolve().parent / "wrk" / "mcp.lua"
TIMEOUT = "10s"  # wrk's default (2 s) would count a slow peer's answers at 1,000 connections as timeouts
_TIME_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")


def version() -> str | None:
    """wrk's version line, or None when wrk is not installed."""
    if shutil.which("wrk") is None:
        return None
    done = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    first = (done.stdout or done.stderr).strip().splitlines()
    return first[0].split(" Copyright")[0] if first else "wrk"


def milliseconds(text: str) -> float:
    """A wrk duration such as '114.00us' or '1.20s' in milliseconds."""
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if match is None:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(match.group(1)) * _TIME_UNITS[match.group(2)]


def parse(report: str) -> dict[str, Any]:
    """The figures of one `wrk --latency` report; errors = non-2xx/3xx answers + socket errors."""
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", report, re.M)
    count = re.search(r"^\s*(\d+) requests in ([\d.]+\w+),", report, re.M)
    if rate is None or count is None:
        raise ValueError(f"not a wrk report:\n{report}")
    percentiles = {int(p): milliseconds(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)\s*$", report, re.M)}
    if not {50, 99} <= percentiles.keys():
        raise ValueError(f"no latency distribution (run wrk with --latency):\n{report}")
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", report)
    sockets = _SOCKET_ERRORS.search(report)
    socket_errors = dict(zip(("connect", "read", "write", "timeout"), map(int, sockets.groups() if sockets else (0,) * 4)))
    bad_answers = int(non_2xx.group(1)) if non_2xx else 0
    return {
        "rps": float(rate.group(1)),
        "requests": int(count.group(1)),
        "seconds": round(milliseconds(count.group(2)) / 1000, 3),
        "p50_ms": percentiles[50],
        "p99_ms": percentiles[99],
        "non_2xx": bad_answers,
        "socket_errors": socket_errors,
        "errors": bad_answers + sum(socket_errors.values()),
    }


def command(url: str, connections: int, seconds: int, script_args: Sequence[str], threads: int = 1,
            script: Path = SCRIPT) -> list[str]:
    """The wrk command line for one closed-loop run of `mcp.lua` (or another script of `wrk/`)."""
    return ["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{seconds}s", f"--timeout={TIMEOUT}",
            "--latency", "-s", str(script), url, "--", *script_args]


def load(url: str, connections: int, seconds: int, script_args: Sequence[str], threads: int = 1,
         cpu: int | str | None = None, script: Path = SCRIPT) -> dict[str, Any]:
    """Run wrk once (pinned to `cpu`): its parsed figures, and its report kept under "wrk" for a later look."""
    done = subprocess.run(procs.pinned(cpu, command(url, connections, seconds, script_args, threads, script)),
                          capture_output=True, text=True, timeout=seconds + 120)
    if done.returncode != 0:
        raise RuntimeError(f"wrk exited with status {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}")
    return {**parse(done.stdout), "wrk": done.stdout}
