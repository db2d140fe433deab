"""FastMCP (4.x) serving echo: stateless JSON-response HTTP, stateful (sessions: `http-stateful`),
or stdio.

    python peer_fastmcp.py stdio | python peer_fastmcp.py http PORT | python peer_fastmcp.py http-stateful PORT
"""

import sys

from fastmcp import FastMCP

server = FastMCP("echo")


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    if sys.argv[1] in ("http", "http-stateful"):
        server.run(
            transport="http", host="127.0.0.1", port=int(sys.argv[2]), json_response=True,
            stateless_http=sys.argv[1] == "http", show_banner=False, log_level="warning",
        )
    else:
        server.run(show_banner=False)
