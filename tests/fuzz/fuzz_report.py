"""The fuzz run's tally and its server processes.

`Report` counts inputs, HTTP statuses and JSON-RPC outcomes, and keeps every
broken invariant with a few examples. `ServerProcess` runs `python -m mcpcore
run tests/fuzz/fuzz_server.py ...` as a real subprocess, reads its stderr as it
comes (so the pipe never fills) and, once it has stopped, reports any traceback
or unhandled-exception text in it.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).resolve().parent / "fuzz_server.py"
EXAMPLES_PER_VIOLATION = 5

# The invariants, each named once: a broken one is a violation.
INVARIANTS = {
    "server-alive": "the server process stays up, and exits with status 0 when stopped (SIGTERM; stdin EOF)",
    "answered-once": "every request is answered exactly once (a cancelled one at most once), with its own id",
    "status": "HTTP statuses are 2xx or 4xx; 503 only while the documented session limit is reached, 501 only for a "
              "transfer coding other than chunked (RFC 9112 section 6.1)",
    "protocol": "what the server writes is well-formed HTTP, SSE and JSON-RPC, and streams end as documented",
    "valid-call": "a well-formed call with conforming headers gets a result, not an error",
    "stderr": "no traceback or unhandled-exception text on the server's stderr",
    "health": "a tools/call of echo succeeds after every N inputs",
}

# Text that only a failure the runtime did not handle writes to stderr.
FAULT_MARKERS = (
    "Traceback (most recent call last)",
    "Exception in callback",
    "exception was never retrieved",
    "Task was destroyed but it is pending",
    "Unhandled exception",
    "internal error answering",
    "fault on an HTTP connection",
    "failed outside its handler",
)


class Report:
    """Counts and violations of one fuzz run."""

    def __init__(self) -> None:
        self.inputs: collections.Counter[str] = collections.Counter()  # "http" requests, "stdio" inputs (a line or more each)
        self.stdio_lines = 0  # every line written, cancellations and answers to the server included
        self.kinds: collections.Counter[str] = collections.Counter()  # HTTP scenarios and stdio inputs played, by kind
        self.statuses: collections.Counter[int] = collections.Counter()
        self.outcomes: dict[str, collections.Counter[str]] = {"http": collections.Counter(), "stdio": collections.Counter()}
        self.violations: collections.Counter[str] = collections.Counter()
        self.examples: dict[str, list[str]] = collections.defaultdict(list)
        self.health_checks = 0

    def violation(self, invariant: str, example: str) -> None:
        assert invariant in INVARIANTS, invariant
        self.violations[invariant] += 1
        if len(self.examples[invariant]) < EXAMPLES_PER_VIOLATION:
            self.examples[invariant].append(example if len(example) <= 600 else example[:600] + "...")

    def outcome(self, transport: str, response: dict[str, Any]) -> None:
        """Count a JSON-RPC response: "result", or its error code."""
        error = response.get("error")
        self.outcomes[transport]["result" if "result" in response else str(error.get("code") if isinstance(error, dict) else "?")] += 1

    def summary(self) -> dict[str, Any]:
        return {
            "inputs": dict(self.inputs),
            "stdio_lines": self.stdio_lines,
            "kinds": dict(sorted(self.kinds.items())),
            "http_statuses": {str(status): count for status, count in sorted(self.statuses.items())},
            "jsonrpc_outcomes": {transport: dict(counts.most_common()) for transport, counts in self.outcomes.items()},
            "health_checks": self.health_checks,
            "violations": dict(self.violations),
            "examples": dict(self.examples),
        }


def clip(data: Any, limit: int = 200) -> str:
    text = repr(data)
    return text if len(text) <= limit else text[:limit] + "..."


class ServerProcess:
    """One `mcpcore run` subprocess of the fuzz server."""

    def __init__(self, args: list[str], report: Report, label: str, env: dict[str, str] | None = None) -> None:
        self.command = [sys.executable, "-m", "mcpcore", "run", str(SERVER), *args]
        self.report = report
        self.label = label
        self.env = {**os.environ, "MCPCORE_STATE_KEYS": "fuzz-state-key-0123456789", **(env or {})}
        self.process: asyncio.subprocess.Process | None = None
        self.stderr = bytearray()
        self._reading: asyncio.Task[None] | None = None

    async def start(self, pipes: bool = False) -> asyncio.subprocess.Process:
        """Start it; with `pipes`, its stdin and stdout are ours (stdio), else closed (HTTP)."""
        channel = asyncio.subprocess.PIPE if pipes else asyncio.subprocess.DEVNULL
        self.process = await asyncio.create_subprocess_exec(
            *self.command, stdin=channel, stdout=channel, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=self.env,
            limit=1 << 22,
        )
        self._reading = asyncio.get_running_loop().create_task(self._read_stderr())
        return self.process

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while chunk := await self.process.stderr.read(1 << 16):
            self.stderr += chunk

    async def wait_for(self, text: bytes, seconds: float) -> bool:
        """Whether `text` appears on stderr within `seconds` (the server says it is listening)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while text not in self.stderr and loop.time() < deadline and self.alive():
            await asyncio.sleep(0.02)
        return text in self.stderr

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def check_alive(self, when: str) -> bool:
        if self.alive():
            return True
        code = self.process.returncode if self.process is not None else None
        self.report.violation("server-alive", f"{self.label}: the server exited with status {code} {when}")
        return False

    async def finish(self, seconds: float, terminate: bool) -> None:
        """Wait for the exit (after SIGTERM if `terminate`): status 0 within `seconds`, else a violation.

        Whatever happens it is killed if still running, and its stderr is scanned.
        """
        assert self.process is not None
        try:
            if terminate and self.alive():
                self.process.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.wait_for(self.process.wait(), seconds)
            except asyncio.TimeoutError:
                self.report.violation("server-alive", f"{self.label}: the server did not exit within {seconds:g} s")
            else:
                if code != 0:
                    self.report.violation("server-alive", f"{self.label}: the server exited with status {code}")
        finally:
            await self.kill()
        self._scan()

    async def kill(self) -> None:
        """Kill it if still running, and reap it (cleanup on any path)."""
        if self.process is None:
            return
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        if self._reading is not None:
            await asyncio.wait_for(self._reading, 10)

    def _scan(self) -> None:
        lines = self.stderr.decode("utf-8", "replace").splitlines()
        number = 0
        while number < len(lines):
            if any(marker in lines[number] for marker in FAULT_MARKERS):
                self.report.violation("stderr", f"{self.label}: " + "\n".join(lines[number : number + 12]))
                number += 12  # one fault is one violation, though its log line and traceback both match
            else:
                number += 1
