"""The serverless recipe (examples/lambda_handler.py): the ASGI adapter under Mangum, one cold start per invocation.

Each invocation runs in a fresh Python process that imports the handler module and
calls `handler(event, context)` once, as a Lambda instance that has just started does,
with events in the shapes API Gateway sends: an HTTP API (payload 2.0, as function URLs
send too) for a 2026-07-28 `tools/call`, and a REST API (payload 1.0) for a stateless
2025-era exchange: `initialize`, then a call that names no session, each on its own
instance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from conftest import ROOT, meta

pytest.importorskip("mangum", reason="the serverless recipe's adapter is in the test extra")

HOST = "abc123.execute-api.eu-west-1.amazonaws.com"
INVOKE = ("import json, sys, runpy; handler = runpy.run_path(sys.argv[1])['handler']; "
          "print(json.dumps(handler(json.loads(sys.stdin.read()), None)))")


def invoke(event: dict[str, Any], allowed_host: str = HOST) -> dict[str, Any]:
    """One invocation on a cold instance: a new process imports the handler and answers `event`."""
    done = subprocess.run([sys.executable, "-c", INVOKE, str(ROOT / "examples" / "lambda_handler.py")],
                          input=json.dumps(event), capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "MCPCORE_ALLOWED_HOST": allowed_host})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def http_api_event(message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event."""
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": "/mcp", "rawQueryString": "",
        "headers": {"host": HOST, "x-forwarded-proto": "https", "x-forwarded-port": "443", **headers},
        "requestContext": {"http": {"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9",
                                    "userAgent": "test"}, "domainName": HOST, "stage": "$default", "requestId": "r-1",
                           "accountId": "123456789012", "apiId": "abc123", "time": "02/Dec/2026:12:00:00 +0000",
                           "timeEpoch": 1796212800000},
        "body": json.dumps(message), "isBase64Encoded": False,
    }


def rest_api_event(message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """An API Gateway REST API (payload format 1.0) event."""
    every = {"Host": HOST, "X-Forwarded-Proto": "https", "X-Forwarded-Port": "443", **headers}
    return {
        "resource": "/mcp", "path": "/mcp", "httpMethod": "POST", "headers": every,
        "multiValueHeaders": {name: [value] for name, value in every.items()},
        "queryStringParameters": None, "multiValueQueryStringParameters": None, "pathParameters": None,
        "stageVariables": None,
        "requestContext": {"resourcePath": "/mcp", "httpMethod": "POST", "path": "/prod/mcp", "stage": "prod",
                           "requestId": "r-2", "accountId": "123456789012", "apiId": "abc123",
                           "identity": {"sourceIp": "203.0.113.9"}},
        "body": json.dumps(message), "isBase64Encoded": False,
    }


JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def test_a_2026_call_through_an_http_api_event() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": meta()}}
    answer = invoke(http_api_event(message, {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                             "mcp-name": "echo"}))
    assert answer["statusCode"] == 200 and answer["headers"]["content-type"] == "application/json"
    assert json.loads(answer["body"])["result"]["content"] == [{"type": "text", "text": "hello"}]


def test_a_stateless_2025_exchange_through_rest_api_events() -> None:
    opening = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    opened = invoke(rest_api_event(opening, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}))
    assert opened["statusCode"] == 200
    assert "mcp-session-id" not in {name.lower() for name in opened.get("headers", {})}
    assert json.loads(opened["body"])["result"]["protocolVersion"] == "2025-11-25"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "again"}}}
    answered = invoke(rest_api_event(call, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                            "MCP-Protocol-Version": "2025-11-25"}))
    assert answered["statusCode"] == 200
    assert json.loads(answered["body"])["result"]["content"] == [{"type": "text", "text": "again"}]


def test_a_host_the_function_was_not_told_of_is_refused() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta()}}
    answer = invoke(http_api_event(message, {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                             "mcp-name": "echo"}), allowed_host="elsewhere.example.com")
    assert answer["statusCode"] == 421 and "is not served here" in json.loads(answer["body"])["error"]["message"]
