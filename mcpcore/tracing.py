"""OpenTelemetry tracing: one server span per call, continuing the caller's trace.

`Server(middleware=[tracing()])` with `opentelemetry-api` installed (the
`mcpcore[otel]` extra; imported only here, only when asked). The caller's W3C
trace context is read from the request's `_meta` (`traceparent`, `tracestate`,
`baggage`, as the specification reserves them) or else from the HTTP headers.
Span names and attributes follow the OpenTelemetry semantic conventions for MCP.
"""

from __future__ import annotations

from typing import Any

from . import __version__
from ._runtime.call import Call
from ._wire.jsonrpc import McpError
from .middleware import Middleware, Next

__all__ = ["tracing"]

TRACE_KEYS = ("traceparent", "tracestate", "baggage")
_TARGETS = {"tools/call": ("name", "gen_ai.tool.name"), "prompts/get": ("name", "gen_ai.prompt.name"),
            "resources/read": ("uri", "mcp.resource.uri")}


def _carrier(call: Call, params: dict[str, Any]) -> dict[str, str]:
    meta = params.get("_meta")
    if isinstance(meta, dict):
        found = {key: meta[key] for key in TRACE_KEYS if isinstance(meta.get(key), str)}
        if found:
            return found
    return {key: call.headers[key] for key in TRACE_KEYS if key in call.headers}


def tracing(tracer_provider: Any = None) -> Middleware:
    """A middleware opening one span per call (needs `opentelemetry-api`)."""
    try:
        from opentelemetry import propagate, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
    except ImportError:
        raise ImportError("tracing() needs OpenTelemetry: pip install 'mcpcore[otel]'") from None
    tracer = trace.get_tracer("mcpcore", __version__, tracer_provider=tracer_provider)

    async def trace_call(call: Call, call_next: Next) -> bytes:
        message = call.message
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        method = str(message.get("method"))
        attributes: dict[str, Any] = {"mcp.method.name": method, "jsonrpc.request.id": str(message.get("id")),
                                      "network.transport": "tcp" if call.peer is not None else "pipe"}
        name = method
        field, attribute = _TARGETS.get(method, (None, None))
        target = params.get(field) if field else None
        if isinstance(target, str):
            attributes[attribute] = target  # type: ignore[index]
            name = f"{method} {target}"
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
        if call.session is not None and call.session.id is not None:
            attributes["mcp.session.id"] = call.session.id
        context = propagate.extract(_carrier(call, params))
        with tracer.start_as_current_span(name, context=context, kind=SpanKind.SERVER, attributes=attributes) as span:
            try:
                return await call_next(call)
            except McpError as error:
                span.set_attribute("error.type", str(error.code))
                span.set_attribute("rpc.response.status_code", str(error.code))
                span.set_status(Status(StatusCode.ERROR, error.message))
                raise

    return trace_call
