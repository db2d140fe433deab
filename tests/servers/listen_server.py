"""A server for the subscription tests: tools that change the catalog and announce updates.

`build()` returns a fresh `Server` (used in process by the HTTP tests); `server`
is the one `mcpcore run tests/servers/listen_server.py` serves, and
`mcpcore run tests/servers/listen_server.py:bare` serves `bare()`, a server
with one tool and no prompts or resources (`:limited` one with small limits).

`add_tool` and `add_prompt` are sync, so they run in a worker thread and
announce through the thread path of the bus; the others are async.
"""

from __future__ import annotations

from typing import Any

from mcpcore import Server

NOTE_URIS = ("demo://a", "demo://b")


def build(**options: Any) -> Server:
    server = Server("listen-tests", version="0.0.1", **options)

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    def add_tool(name: str) -> str:
        """Register a tool named `name` (from a worker thread)."""

        def added() -> str:
            return f"I am {name}"

        server.add_tool(added, name=name, description=f"Added at runtime as {name}")
        return f"added tool {name}"

    @server.tool
    async def remove_tool(name: str) -> str:
        """Remove the tool named `name`."""
        server.remove_tool(name)
        return f"removed tool {name}"

    @server.tool
    def add_prompt(name: str) -> str:
        """Register a prompt named `name` (from a worker thread)."""

        def added() -> str:
            return f"prompt {name}"

        server.add_prompt(added, name=name, description=f"Added at runtime as {name}")
        return f"added prompt {name}"

    @server.tool
    async def remove_prompt(name: str) -> str:
        """Remove the prompt named `name`."""
        server.remove_prompt(name)
        return f"removed prompt {name}"

    @server.tool
    async def touch(uri: str) -> str:
        """Announce that the resource at `uri` changed."""
        server.notify_resource_updated(uri)
        return f"touched {uri}"

    @server.prompt
    def base() -> str:
        """A prompt that is always there."""
        return "base prompt"

    for uri in NOTE_URIS:
        server.add_resource(lambda uri=uri: f"note at {uri}", uri, name=uri.rsplit("/", 1)[-1], mime_type="text/plain")
    return server


def bare(**options: Any) -> Server:
    """A server with one tool and neither prompts nor resources."""
    server = Server("listen-bare", version="0.0.1", **options)

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


server = build()


def limited(**options: Any) -> Server:
    """The test server with small subscription limits: 2 open subscriptions, 3 URIs each."""
    return build(max_subscriptions=2, max_subscription_uris=3, **options)
