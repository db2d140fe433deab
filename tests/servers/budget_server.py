"""A server for the result budget tests (`result_budget=`): a long listing, mixed content with a large image,
a structured table, a tool whose budget is off; with a budget of 4096 bytes (`server`), none in code (`plain`,
given one by `--result-budget`), tight store bounds (`tight`), or behind bearer tokens (`guarded`)."""

from __future__ import annotations

from typing import Any

from mcpcore import Image, ResultStoreLimits, Server, ToolResult
from mcpcore.auth import AccessToken, Auth, StaticTokens

BUDGET = 4096
TOKENS = {"ann-token": AccessToken("ann", "app"), "bob-token": AccessToken("bob", "app")}
PIXELS = bytes(range(256)) * 40  # 10,240 bytes: as base64, larger than any page


def listing_text(count: int) -> str:
    """The listing's text: lines of ASCII, accented letters, CJK and emoji, quotes and control characters
    (escaped in JSON: they take more bytes there than in UTF-8)."""
    return "".join(f"{n}\tfile-{n}.txt — café 文件 🎉 \"quoted\" \x01\n" for n in range(count))


def build(name: str = "budget", **options: Any) -> Server:
    server = Server(name, **options)

    @server.tool
    def listing(count: int) -> str:
        """A listing of `count` lines."""
        return listing_text(count)

    @server.tool
    def picture(count: int) -> ToolResult:
        """A caption, a large image, then a listing."""
        return ToolResult(["A picture:", Image(PIXELS), listing_text(count)])

    @server.tool
    def table(rows: int) -> dict[str, list[str]]:
        """A structured table of `rows` rows."""
        return {"rows": [f"row {n}" for n in range(rows)]}

    @server.tool(result_budget=False)
    def everything(count: int) -> str:
        """A listing of `count` lines, never cut."""
        return listing_text(count)

    return server


server = build(result_budget=BUDGET)
plain = build("plain")
tight = build("tight", result_budget=BUDGET, result_store=ResultStoreLimits(max_entries=2, max_bytes=20_000))
guarded = build("guarded", result_budget=BUDGET,
                auth=Auth(StaticTokens(TOKENS), "http://127.0.0.1/mcp", ("https://auth.example.com",)))
