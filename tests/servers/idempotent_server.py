"""A server for the idempotent tool tests: every run of a tool is one line in a log of runs (a list in this
process, or the file `MCPCORE_TEST_RUNS` names, so runs in several processes add up), and a result names the
run that made it. `hold` waits while the file `MCPCORE_TEST_RUNS` + ".hold" exists; `guarded` takes any bearer
token as its principal."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from mcpcore import Context, Elicit, IdempotencyLimits, InputRequired, McpError, Server
from mcpcore.auth import AccessToken, Auth


class AnyToken:
    """Every token is valid and names itself as the principal."""

    async def verify(self, token: str) -> AccessToken:
        return AccessToken(token, "app")


class Runs:
    """The runs so far: in `lines`, and in the file named by `MCPCORE_TEST_RUNS` when set."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        named = os.environ.get("MCPCORE_TEST_RUNS")
        self.file = Path(named) if named else None

    def record(self, what: str) -> int:
        self.lines.append(what)
        if self.file is None:
            return len(self.lines)
        with self.file.open("a") as runs:
            runs.write(what + "\n")
        return len(self.file.read_text().splitlines())


def build(name: str = "idempotent", **options: Any) -> Server:
    server = Server(name, **options)
    runs = server.runs = Runs()  # type: ignore[attr-defined]
    server.gate = None  # type: ignore[attr-defined]  # an anyio.Event `slow` waits for, set by a test

    @server.tool(idempotent=True)
    def send(to: str) -> str:
        """Send a message (a side effect to run once)."""
        return f"run {runs.record('send ' + to)}: sent to {to}"

    @server.tool(idempotent=True)
    async def slow(to: str) -> str:
        """Send once the test opens the gate."""
        runs.record("slow started")
        await server.gate.wait()  # type: ignore[attr-defined]
        return f"run {runs.record('slow ' + to)}: sent to {to}"

    @server.tool(idempotent=True)
    def broken(to: str) -> str:
        runs.record("broken " + to)
        raise RuntimeError("the mail server said no")

    @server.tool(idempotent=True)
    async def refused(to: str) -> str:
        """A protocol error on its first run while the gate is shut: not stored."""
        number = runs.record("refused " + to)
        if number == 1:
            await server.gate.wait()  # type: ignore[attr-defined]
            raise McpError(-32602, "not now")
        return f"run {number}: sent to {to}"

    @server.tool(idempotent=0.2)
    def brief(to: str) -> str:
        """Idempotent for a fifth of a second only."""
        return f"run {runs.record('brief ' + to)}: sent to {to}"

    @server.tool(idempotent=True)
    def big(size: int) -> str:
        return f"run {runs.record('big')}:" + "x" * size

    @server.tool(idempotent=True)
    async def hold(to: str) -> str:
        """Wait while the hold file exists (a test kills the process meanwhile), then send."""
        marker = runs.file.with_suffix(".hold")  # type: ignore[union-attr]
        runs.record("hold started")
        while marker.exists():
            await anyio.sleep(0.02)
        return f"run {runs.record('hold ' + to)}: sent to {to}"

    @server.tool(idempotent=True)
    def greet(to: str, ctx: Context) -> str:
        """Ask the client who sends (MRTR): the question is not stored, the answered run is."""
        answer = ctx.answer("sender")
        if answer is None:
            raise InputRequired(sender=Elicit("Who sends?", {"type": "object", "properties": {"name": {"type": "string"}},
                                                              "required": ["name"]}))
        return f"run {runs.record('greet ' + to)}: {answer.content['name']} greets {to}"

    @server.tool
    def plain(to: str) -> str:
        return f"run {runs.record('plain ' + to)}: sent to {to}"

    return server


LIMITS = IdempotencyLimits(max_result_bytes=2000, lease=1.0)
server = build(idempotency=LIMITS)
guarded = build(idempotency=LIMITS, auth=Auth(AnyToken(), "http://127.0.0.1/mcp", ("https://auth.example.com",)))
