"""A server for the client core's tests: calls that only finish together, calls that hang, a crash, and a
question that releases another call.

`build()` returns a fresh `Server` (the HTTP tests); `server` is the one `mcpcore run
tests/servers/client_server.py` serves over stdio. What each call saw is kept per server, so
no test depends on timing: `meet` returns only once `expected` calls of its group are in it at
once, which a client sending one request at a time never achieves.
"""

from __future__ import annotations

import os

import anyio

from mcpcore import Context, Elicit, InputRequired, Server

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def build() -> Server:
    server = Server("client-tests", version="0.0.1")
    groups: dict[str, tuple[list[str], anyio.Event]] = {}
    counts = {"hanging": 0, "cancelled": 0}
    released = anyio.Event()

    @server.tool
    async def meet(label: str, group: str, expected: int, ctx: Context) -> str:
        """Return once `expected` calls of `group` are running at once; progress and a log name the call."""
        arrived, everyone = groups.setdefault(group, ([], anyio.Event()))
        await ctx.progress(1, total=2, message=label)
        arrived.append(label)
        if len(arrived) >= expected:
            everyone.set()
        await everyone.wait()
        await ctx.info(f"{label} met {len(arrived)}")
        await ctx.progress(2, total=2, message=label)
        return label

    @server.tool
    async def hang() -> str:
        """Never return; counted while it runs and when it is cancelled."""
        counts["hanging"] += 1
        try:
            await anyio.sleep_forever()
        finally:
            counts["hanging"] -= 1
            counts["cancelled"] += 1
        return "unreachable"

    @server.tool
    async def tally() -> dict[str, int]:
        """How many `hang` calls run now, and how many have been cancelled."""
        return dict(counts)

    @server.tool
    async def crash(after: int) -> str:
        """End the process (exit status 3) once `after` calls of `hang` are running."""
        with anyio.fail_after(30):
            while counts["hanging"] < after:
                await anyio.sleep(0.01)
        os._exit(3)

    @server.tool
    async def hold() -> str:
        """Return once `greet` has had its answer."""
        await released.wait()
        return "released"

    @server.tool
    async def greet(ctx: Context) -> str:
        """Ask the user's name (an elicitation), then release `hold`."""
        answer = ctx.answer("name")
        if answer is None:
            raise InputRequired(name=Elicit("What is your name?", NAME_FORM))
        released.set()
        return f"Hello, {answer.content['name']}!"

    @server.tool
    def peer(ctx: Context) -> str:
        """The caller's socket address (over HTTP): which connection the call came on."""
        return str(ctx.peer)

    @server.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    return server


server = build()
