"""One OpenTelemetry server span per call, continuing the caller's trace (real HTTP on 127.0.0.1)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import meta, request
from http_client import HttpClient, mcp_headers, running
from mcpcore import Server
from mcpcore.tracing import tracing

pytestmark = pytest.mark.anyio

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def traced() -> tuple[Server, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server = Server("traced", middleware=[tracing(provider)])

    @server.tool
    async def weather(city: str) -> str:
        return f"sunny in {city}"

    return server, exporter


async def test_a_call_gets_a_server_span_in_the_trace_its_meta_names() -> None:
    server, exporter = traced()
    message = request("tools/call", 2, meta(traceparent=PARENT), name="weather", arguments={"city": "Oslo"})
    async with running(server) as http, HttpClient.connect(http) as client:
        assert (await client.post(message, mcp_headers(message))).response["result"]
    (span,) = exporter.get_finished_spans()
    assert span.name == "tools/call weather" and span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID and format(span.parent.span_id, "016x") == "00f067aa0ba902b7"
    attributes: dict[str, Any] = dict(span.attributes)
    assert attributes == {"mcp.method.name": "tools/call", "jsonrpc.request.id": "2", "network.transport": "tcp",
                          "gen_ai.tool.name": "weather", "gen_ai.operation.name": "execute_tool"}


async def test_the_http_header_carries_the_trace_when_meta_does_not_and_errors_mark_the_span() -> None:
    server, exporter = traced()
    message = request("tools/call", 3, name="nowhere", arguments={})
    async with running(server) as http, HttpClient.connect(http) as client:
        await client.post(message, {**mcp_headers(message), "traceparent": PARENT})
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "-32602"
