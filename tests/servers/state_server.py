"""A server for the per-client state tests (`ctx.client_state`): a counter, and a key-value pair of tools,
served with the default bounds (`server`), tight ones (`tight`), or behind bearer tokens (`guarded`)."""

from __future__ import annotations

from typing import Any

from mcpcore import ClientStateLimits, Context, Server
from mcpcore.auth import AccessToken, Auth, StaticTokens

TOKENS = {"ann-token": AccessToken("ann", "app"), "bob-token": AccessToken("bob", "app")}


def build(name: str = "state", **options: Any) -> Server:
    server = Server(name, **options)

    @server.tool
    async def count(ctx: Context) -> int:
        """Add one to this client's counter; the new value."""
        value = await ctx.client_state.get("count", 0) + 1
        await ctx.client_state.set("count", value)
        return value

    @server.tool
    async def remember(key: str, value: Any, ctx: Context) -> str:
        await ctx.client_state.set(key, value)
        return "kept"

    @server.tool
    async def recall(key: str, ctx: Context) -> dict:
        return {"value": await ctx.client_state.get(key)}

    @server.tool
    async def forget(key: str, ctx: Context) -> str:
        await ctx.client_state.delete(key)
        return "forgotten"

    @server.resource("state://count")
    async def current(ctx: Context) -> str:
        return str(await ctx.client_state.get("count", 0))

    return server


server = build()
tight = build("tight", client_state=ClientStateLimits(max_value_bytes=40, max_bytes=60, max_keys=2, max_clients=2,
                                                      ttl=1.0))


def build_guarded() -> Server:
    return build("guarded", auth=Auth(StaticTokens(TOKENS), "http://127.0.0.1/mcp", ("https://auth.example.com",)))


guarded = build_guarded()
