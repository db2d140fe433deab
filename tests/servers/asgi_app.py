"""The HTTP test server (http_server.py) as an ASGI app, for ASGI servers that run in a process of their own."""

from http_server import build

from mcpcore import asgi

app = asgi.app(build())
