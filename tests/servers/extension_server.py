"""A server with a custom extension (`com.example/echo`): the extension tests run it in memory, over HTTP and
as a stdio subprocess (`mcpcore run tests/servers/extension_server.py`)."""

from __future__ import annotations

from typing import Any

from mcpcore import Context, Server

ECHO = "com.example/echo"


def extended() -> Server:
    """A fresh server: a plain tool, an opt-in method with a name field, an open method, a result field."""
    server = Server("extended")
    echo = server.extension(ECHO, {"maxLength": 10})

    @server.tool
    def plain(text: str) -> str:
        return text

    @echo.method("com.example/echo/say", name_field="word")
    async def say(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"said": params["word"][: echo.settings["maxLength"]], "clientSettings": echo.declared(ctx)}

    @echo.method("com.example/echo/open", declared=False)
    def open_to_all(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"open": True}

    @echo.result_fields("tools/call")
    def stamp(result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"echoed": len(result["content"])}

    return server


server = extended()
