"""A stdio MCP server that speaks only the 2025 era: the official Python SDK (PyPI `mcp`) in its
handshake-only loop (`serve_loop`, the loop its Streamable HTTP manager serves sessions with), so
`server/discover` is refused and the gateway must open with `initialize`.

Its tools ask the client the 2025 way, with server-to-client requests during the call: `ask_name`
elicits a form, `ask_model` samples, `ask_roots` lists the roots; `slow_steps` reports progress
and logs; `grow` adds a tool, announcing it during its own call; `echo` answers at once; `asking` counts the `ask_name` calls waiting for their answer.
"""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from pydantic import BaseModel

app = MCPServer("python-legacy-upstream", instructions="A 2025-era test upstream.")


class Name(BaseModel):
    name: str


@app.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


ASKING = {"now": 0}  # ask_name calls waiting for their elicitation's answer


@app.tool()
async def ask_name(ctx: Context) -> str:
    """Elicit the user's name."""
    ASKING["now"] += 1
    try:
        answer = await ctx.elicit("What is your name?", Name)
    finally:
        ASKING["now"] -= 1
    return f"hello {answer.data.name}" if answer.action == "accept" else f"no name ({answer.action})"


@app.tool()
def asking() -> int:
    """How many ask_name calls wait for their answer (one cancelled, or answered with an error, waits no more)."""
    return ASKING["now"]


@app.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Sample the client's model."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))
    sampled = await ctx.session.create_message([message], max_tokens=50)
    return f"the model said: {sampled.content.text}"


@app.tool()
async def ask_roots(ctx: Context) -> str:
    """List the client's roots."""
    listed = await ctx.session.list_roots()
    return ", ".join(str(root.uri) for root in listed.roots)


@app.tool()
async def slow_steps(steps: int, ctx: Context) -> str:
    """Report progress and log each step."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps)
        await ctx.info(f"step {step + 1}")
        await anyio.sleep(0.05)
    return f"{steps} steps"


@app.tool()
async def grow(name: str, ctx: Context) -> str:
    """Register a tool named `name` and announce the list change during this call, on its own stream."""

    def grown() -> str:
        return f"I am {name}"

    app.add_tool(grown, name=name, description="added while serving")
    await ctx.session.send_tool_list_changed()
    return "grown"


async def main() -> None:
    server = app._lowlevel_server
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        await serve_loop(server, read, write, lifespan_state=state, init_options=server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
