"""Streamable HTTP, shared by the built-in server (`transports.http`) and the ASGI adapter (`transports.asgi`).

An `Exchange` is one HTTP request's MCP handling (`exchange`): the validation
ladder (`rules`), then a `Call` answered by an `HttpWriter` (`writer`: one JSON
body, or an SSE stream once a notification comes first, framed by `sse`), with
resumable streams for 2025-era sessions (`resume`), configured by one `HttpConfig`
(`config`). No socket and no ASGI here: each side feeds an exchange and sends the h11
events it emits.
"""
