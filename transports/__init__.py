"""I/O for mcpcore, installed as `mcpcore.transports`: it imports the core, never the reverse.

Each transport owns one module: `stdio` (newline-delimited JSON-RPC on stdin/stdout),
`http` (the built-in HTTP/1.1 server on h11; its worker processes in `_workers`) and
`asgi` (the same HTTP handling under any ASGI server); `remote` is the client side
that `mcpcore.testing.Client` uses to reach a server in another process. What the
built-in server and the ASGI adapter share is `_http` (one request's exchange, its
rules, writer and resumable streams); `_calls` classifies a message and runs it in
the in-flight window for every transport (the adapter through `_http`), and `_flow`
is write flow control for the asyncio protocols of `http` and `stdio`.
"""
