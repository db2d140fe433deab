"""A server that names its shared state in code, `Server(store=RedisState(url))` as docs/running.md
shows, and registers its tools at import, before anything serves it; served with `mcpcore run`
and no `--redis`. The URL is the test's redis-server, from `MCPCORE_TEST_REDIS_URL`."""

from __future__ import annotations

import os

from mcpcore import Server
from mcpcore.redisstate import RedisState

server = Server("store-in-code", store=RedisState(os.environ["MCPCORE_TEST_REDIS_URL"]))


@server.tool
def greet(name: str) -> str:
    return f"Hello, {name}!"


@server.tool
def add_tool(name: str) -> str:
    """Register a tool named `name` while serving (from a worker thread)."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name)
    return f"added tool {name}"
