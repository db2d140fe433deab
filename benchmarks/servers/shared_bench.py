"""The server of benchmarks/sharedstate.py: an async `echo`, and `announce`, which says the tool list changed.

`announce` answers with the time it announced, so a listener in another process can
tell how long the change took to reach it (one host, one clock).
"""

import time

from mcpcore import Server

server = Server("shared-bench", version="1.0.0")


@server.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
def announce() -> str:
    """Tell every subscription that the tool list changed; answer with when (epoch seconds)."""
    announced = time.time()
    server.notify_tools_changed()
    return repr(announced)
