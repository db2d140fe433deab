"""A server for the rate limit and quota tests: three tools, and behind bearer tokens (`guarded`) whose
principal is the token itself, so a client picks any principal (a hostile one too)."""

from __future__ import annotations

from mcpcore import Server
from mcpcore.auth import AccessToken, Auth


class AnyToken:
    """Every token is valid and names itself as the principal."""

    async def verify(self, token: str) -> AccessToken:
        return AccessToken(token, "app")


def build(name: str, auth: Auth | None = None) -> Server:
    server = Server(name, auth=auth)

    @server.tool
    def ping() -> str:
        return "pong"

    @server.tool
    def slow() -> str:
        """A tool with a rate limit of its own."""
        return "done"

    @server.tool
    def send() -> str:
        """A tool with a daily quota of its own."""
        return "sent"

    return server


server = build("limits")
guarded = build("limits", Auth(AnyToken(), "http://127.0.0.1/mcp", ("https://auth.example.com",)))
