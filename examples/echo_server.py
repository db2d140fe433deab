"""A minimal mcpcore server: `mcpcore run examples/echo_server.py`."""

import anyio

from mcpcore import Context, Server

server = Server("echo", version="1.0.0", instructions="Echoes text back; shows progress, a resource and a prompt.")


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
async def progress(ctx: Context) -> str:
    """Work in three steps, reporting progress after each, then say done."""
    for step in range(1, 4):
        await anyio.sleep(0.05)
        await ctx.progress(step, total=3, message=f"step {step} of 3")
    return "done"


@server.resource("demo://readme", mime_type="text/plain")
def readme() -> str:
    """A short text about this server."""
    return "This server echoes text and reports progress."


@server.prompt
def summarize(text: str) -> str:
    """Ask the model to summarize a text."""
    return f"Summarize this in one sentence:\n\n{text}"
