"""The mcpcore server the benchmarks drive: 50 tools, among them `echo` and `progress3`.

MCPCORE_BENCH_ASYNC=1 makes `echo` an async function (no worker-thread hop).
"""

import os

from mcpcore import Context, Server

server = Server("bench", version="1.0.0")

if os.environ.get("MCPCORE_BENCH_ASYNC") == "1":

    @server.tool
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

else:

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text


@server.tool
async def progress3(ctx: Context) -> str:
    """Report three progress steps, then answer."""
    for step in (1, 2, 3):
        await ctx.progress(step, total=3)
    return "done"


def _filler(number: int):
    def tool(city: str, days: int = 1, detail: bool = False) -> str:
        return f"{city} {days} {detail} {number}"

    tool.__doc__ = f"Filler tool number {number}, so that tools/list carries 50 tools."
    return tool


for _number in range(48):
    server.add_tool(_filler(_number), name=f"tool_{_number:02d}")
