"""The wire: what MCP messages are, with no I/O and no app.

JSON-RPC framing and errors (`jsonrpc`), the protocol's fixed tables and a request's
`Route` (`protocol`), the JSON Schema validator (`validation`), `x-mcp-header`
bindings (`toolheaders`), sealed `requestState` (`sealing`), input requests
(`inputs`), RFC 6570 URI templates (`uritemplate`) and the official schemas
(`schemas`, loaded only by `Client(strict=True)`).

The bottom layer: it imports nothing else of mcpcore; every other layer may use it.
"""
