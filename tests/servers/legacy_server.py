"""A server for the dual-era tests: the same app code a 2026 client and a 2025-era session both use."""

from __future__ import annotations

from typing import Any

import anyio

from mcpcore import Context, Elicit, InputRequired, Sample, Server

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def build(**options: Any) -> Server:
    """A fresh server (tests that change what is offered get their own); `options` go to `Server`."""
    server = Server("legacy-tests", version="0.0.1", instructions="Tools for both eras.", **options)

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    def weather(city: str) -> dict:
        """Structured output: structuredContent from 2025-06-18 on."""
        return {"city": city, "high": 21}

    @server.tool
    def greet(ctx: Context) -> str:
        """Ask for a name (an elicitation), then greet."""
        answer = ctx.answer("name")
        if answer is None:
            raise InputRequired(name=Elicit("What is your name?", NAME_FORM), state={"round": 1})
        assert ctx.state == {"round": 1}
        return f"Hello, {answer.content['name']}!" if answer.accepted else "Maybe next time."

    @server.tool
    def haiku(ctx: Context) -> str:
        """Ask the client's model for a poem (sampling)."""
        answer = ctx.answer("poem")
        if answer is None:
            raise InputRequired(poem=Sample("Write a haiku.", max_tokens=50))
        return f"The model wrote: {answer.text}"

    @server.tool
    async def steps(ctx: Context) -> str:
        """Progress and log messages before the result."""
        for step in (1, 2, 3):
            await ctx.progress(step, total=3)
            await ctx.info(f"step {step}")
            await anyio.sleep(0.05)  # work between reports (the TS v1 client drops progress that trails the result)
        return f"done for {ctx.client_info.get('name') if ctx.client_info else None} on {ctx.protocol_version}"

    @server.tool
    async def polled(ctx: Context) -> str:
        """Progress, then the stream ends early; the rest (more progress, the result) after a resume."""
        await ctx.progress(1, total=2)
        await ctx.close_stream()
        await anyio.sleep(0.05)
        await ctx.progress(2, total=2)
        return "polled"

    @server.tool
    def add_tool(name: str) -> str:
        """Register a tool at runtime (announces tools/list_changed)."""
        server.add_tool(lambda: name, name=name, description="added at runtime")
        return "added"

    @server.tool
    def touch(uri: str) -> str:
        """Announce that a resource changed."""
        server.notify_resource_updated(uri)
        return "touched"

    @server.resource("demo://note", mime_type="text/plain")
    def note() -> str:
        """A note to follow."""
        return "Remember to drink water."

    @server.prompt
    def plan(city: str) -> str:
        """Plan a trip."""
        return f"Plan a trip to {city}."

    return server


server = build()
