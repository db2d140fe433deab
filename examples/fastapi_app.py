"""An MCP server mounted in a FastAPI app, served by uvicorn:

    pip install -e '.[test]'          (FastAPI and uvicorn are test dependencies, not mcpcore's)
    uvicorn --app-dir examples fastapi_app:app --port 8000

The MCP endpoint is http://127.0.0.1:8000/mcp; FastAPI's own routes sit beside it. Any
mcpcore `Server` mounts the same way: here it is the conformance suite's everything server,
which CI runs the official conformance legs against through this very app.
"""

from __future__ import annotations

from everything_server import server
from fastapi import FastAPI

from mcpcore import asgi

mcp = asgi.app(server)  # endpoint /mcp, probes /healthz and /readyz, as on the built-in server
app = FastAPI(lifespan=mcp.lifespan)  # optional: without it the first request starts the server


@app.get("/hello")
def hello() -> dict[str, str]:
    """An ordinary FastAPI route beside the MCP endpoint."""
    return {"hello": "world"}


app.mount("/", mcp)  # last: FastAPI's routes match first, everything else is the MCP app's
