"""The server on AWS Lambda, behind API Gateway or a function URL: `handler` is the entry point.

    pip install mcpcore mangum
    # Lambda handler setting: lambda_handler.handler; environment: MCPCORE_ALLOWED_HOST=<your API's
    # host name>, MCPCORE_STATE_KEYS=<one secret for every instance> (see docs/deploying.md)

Mangum (a maintained ASGI adapter for Lambda) turns each invocation's event into one ASGI
request to the server's ASGI app and its answer into the response Lambda returns. An
invocation may land on a fresh instance, and instances share nothing, so the app serves
2025-era clients stateless (each POST stands on its own) and answers JSON only (API Gateway
buffers the whole response anyway); the 2026-07-28 wire is stateless by design. See
docs/deploying.md, "Serverless".
"""

import os

from mangum import Mangum

from mcpcore import Server, asgi

server = Server("lambda-demo", version="1.0.0")


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


app = asgi.app(server, stateless=True, json_response=True,
               allowed_hosts=(os.environ.get("MCPCORE_ALLOWED_HOST", "localhost"),))
handler = Mangum(app, lifespan="auto")
