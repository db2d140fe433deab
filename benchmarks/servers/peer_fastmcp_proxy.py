"""FastMCP (4.x)'s proxy (`create_proxy`, its recommended way) in front of a stdio server, served over
stateful JSON-response HTTP, as peer_fastmcp.py serves its own echo.

    python peer_fastmcp_proxy.py PORT -- CMD ARGS...
"""

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

if __name__ == "__main__":
    port, command = int(sys.argv[1]), sys.argv[sys.argv.index("--") + 1:]
    proxy = create_proxy(StdioTransport(command=command[0], args=command[1:]), name="proxy")
    proxy.run(transport="http", host="127.0.0.1", port=port, json_response=True, stateless_http=False,
              show_banner=False, log_level="warning")
