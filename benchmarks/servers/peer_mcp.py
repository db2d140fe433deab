"""The official Python SDK (mcp 2.3.0) serving echo: stateless JSON-response HTTP, stateful
(sessions: `http-stateful`), or stdio.

    python peer_mcp.py stdio | python peer_mcp.py http PORT | python peer_mcp.py http-stateful PORT
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    if sys.argv[1] in ("http", "http-stateful"):
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), json_response=True,
                   stateless_http=sys.argv[1] == "http")
    else:
        server.run()
