"""`mcpcore.testing.Client`: test your server as a client would, in memory (no socket, no subprocess).

    async with Client(server) as client:
        result = await client.call_tool("echo", {"text": "hi"})
        assert result.text == "hi"

It is the client of `mcpcore.client`, named `mcpcore-testing` in the `clientInfo`
it sends: each request is built as a conforming client builds it and handed to
`server.handle` with a writer of its own, exactly as a transport would, so what a
test sees is what a client would get. A JSON-RPC error raises `McpError`
(`InvalidParams` for -32602); a tool's `isError` result does not. What the
server asks of the client is answered by the callbacks given: `elicit` (a form
or URL elicitation's params → its result), `sample` (a sampling request's
params → a `CreateMessageResult`) and `roots` (a list of root URIs); on the 2026
wire an `input_required` result is retried with the answers and the sealed
state. Progress and log notifications go to `on_progress` / `on_log` and are
kept on each `Outcome` (a tool call asks for progress unless told
`progress=False`). `strict=True` checks every message against the era's official
JSON Schema (needs `jsonschema`). `Client.sync()` gives the same methods for
code without an event loop; `Client.stdio(command)`, `Client.http(url)` and
`Client.sse(url)` the same client against a server in a subprocess or at a URL.
Requests may run at once (see `mcpcore.client`).
"""

from __future__ import annotations

from typing import Any, Mapping

from . import client
from .client import Outcome, Subscription

__all__ = ["Client", "Outcome", "Subscription"]

CLIENT_INFO = {"name": "mcpcore-testing", "version": "1"}


class Client(client.Client):
    """`mcpcore.client.Client`, telling the server it is a test's (`clientInfo` `mcpcore-testing`)."""

    def __init__(self, server: Any, *, client_info: Mapping[str, Any] = CLIENT_INFO, **options: Any) -> None:
        super().__init__(server, client_info=client_info, **options)
