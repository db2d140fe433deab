"""Drive `Server.handle` in memory: a writer that records and schema-checks output."""

from __future__ import annotations

from typing import Any

import orjson

from mcpcore import Call, Server
from wire_schema import check


class MemoryWriter:
    """Records notifications and the one response of a call."""

    def __init__(self, method: str | None = None) -> None:
        self.method = method
        self.notifications: list[dict[str, Any]] = []
        self.response: dict[str, Any] | None = None

    async def notify(self, message: bytes) -> None:
        assert self.response is None, "notification after the response"
        self.notifications.append(check(orjson.loads(message)))

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        assert self.response is None, "second response for one call"
        self.response = check(orjson.loads(message), self.method)
        assert error_code == self.response.get("error", {}).get("code"), "error_code must match the body"


async def exchange(server: Server, message: dict[str, Any]) -> MemoryWriter:
    """Handle one request and return the writer holding what was sent."""
    writer = MemoryWriter(message.get("method"))
    await server.handle(Call(message), writer)
    assert writer.response is not None, "no response was sent"
    return writer


async def result_of(server: Server, message: dict[str, Any]) -> dict[str, Any]:
    response = (await exchange(server, message)).response
    assert response is not None and "result" in response, response
    return response["result"]


async def error_of(server: Server, message: dict[str, Any]) -> dict[str, Any]:
    response = (await exchange(server, message)).response
    assert response is not None and "error" in response, response
    return response["error"]
