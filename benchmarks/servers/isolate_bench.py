"""Three `tools/call` echoes for benchmarks/isolate.py: async (on the event loop), sync (a worker
thread) and isolated (a worker process, `isolate=True`)."""

from mcpcore import Server

server = Server("isolate-bench")


@server.tool
async def echo_async(text: str) -> str:
    return text


@server.tool
def echo_sync(text: str) -> str:
    return text


@server.tool(isolate=True)
def echo_isolated(text: str) -> str:
    return text
