"""Streamable HTTP rules end to end, over a real socket on 127.0.0.1: one test per rule."""

from __future__ import annotations

from typing import Any

import anyio
import h11
import orjson
import pytest

from conftest import VERSION, meta, request
from http_client import HttpClient, Reply, mcp_headers, parse_sse, running
from mcpcore import Server
from servers.http_server import Probes, build
from wire_schema import check

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]  # the built-in server, then uvicorn

LIMIT = 10  # seconds any single test step may take


def call(request_id: Any = 1, name: str = "echo", _meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    return request("tools/call", request_id, _meta=_meta, name=name, arguments=arguments)


def echo(request_id: Any = 1, text: str = "hi") -> dict[str, Any]:
    return call(request_id, "echo", text=text)


def error_of(reply: Reply, status: int, code: int, request_id: Any = None) -> dict[str, Any]:
    """The JSON-RPC error of a plain JSON reply, checked against status, code and id."""
    assert reply.status == status, (reply.status, reply.body)
    body = reply.json
    check(body)
    assert body["error"]["code"] == code, body
    if request_id is None:
        assert "id" not in body, body
    else:
        assert body["id"] == request_id, body
    return body["error"]


def prime(client: HttpClient, method: str = "POST") -> None:
    """Advance the client's h11 state as if it had sent a request, without sending anything."""
    client.conn.send(h11.Request(method=method, target="/mcp", headers=[("host", client.host), ("content-length", "0")]))
    client.conn.send(h11.EndOfMessage())


def raw_head(headers: list[tuple[str, str]], method: str = "POST", target: str = "/mcp") -> bytes:
    lines = [f"{method} {target} HTTP/1.1"] + [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send_raw(client: HttpClient, data: bytes) -> Reply:
    """Send hand-made request bytes (which h11 would refuse to produce) and read the reply."""
    prime(client)
    await client.stream.send(data)
    return await client.read_reply()


def conforming_raw(client: HttpClient, message: dict[str, Any], **replace: str) -> list[tuple[str, str]]:
    """Conforming headers as a list, with some values replaced verbatim."""
    body = orjson.dumps(message)
    headers = {"host": client.host, **mcp_headers(message), "content-length": str(len(body))}
    headers.update(replace)
    return list(headers.items())


async def assert_closed(client: HttpClient) -> None:
    """The server closed the connection (EOF or reset) and sent nothing more."""
    with anyio.fail_after(LIMIT):
        try:
            data = await client.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return
    raise AssertionError(f"expected the connection to close, got {data!r}")


async def still_serves(http: Any) -> None:
    """A fresh connection gets an ordinary call answered."""
    async with HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(99, "alive"))
    assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == "alive"


@pytest.fixture
def server():
    return build()


# -- endpoint, method, Origin, Host ----------------------------------------------------------


async def test_wrong_path_is_404(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            body = orjson.dumps(echo())
            await client.send_request("POST", "/other", mcp_headers(echo()), body)
            reply = await client.read_reply()
        error_of(reply, 404, -32600)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize(("version", "words"), [(VERSION, "2025-era sessions"), (None, "Mcp-Session-Id header is required")])
async def test_get_and_delete_without_a_session_are_400(server, method: str, version: str | None, words: str) -> None:
    headers = {"accept": "text/event-stream", **({"mcp-protocol-version": version} if version else {})}
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request(method, "/mcp", headers)
            reply = await client.read_reply()
        error = error_of(reply, 400, -32600)
        assert words in error["message"]


async def test_a_400_to_a_bodyless_get_keeps_the_connection_usable(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("GET", "/mcp", {"accept": "text/event-stream"})
            reply = await client.read_reply()
            assert reply.status == 400 and reply.headers.get("connection") != "close"
            reply = await client.post(echo(2))
        assert reply.status == 200 and reply.json["id"] == 2


async def test_foreign_origin_is_403_with_an_error_without_id(server) -> None:
    async with running(server) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                reply = await client.post(echo(5), mcp_headers(echo(5), origin="http://evil.example.com"))
            error = error_of(reply, 403, -32600)
            assert "evil.example.com" in error["message"]
            assert "connection" not in reply.headers  # the body was read, so the connection stays open
            with anyio.fail_after(LIMIT):
                again = await client.post(echo(6))
            assert again.status == 200 and again.json["id"] == 6
        await still_serves(http)


async def test_loopback_origin_is_allowed(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(5), mcp_headers(echo(5), origin="http://localhost:5173"))
        assert reply.status == 200 and reply.json["id"] == 5


async def test_foreign_host_is_421(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        message = echo(6)
        body = orjson.dumps(message)
        headers = conforming_raw(client, message, host="evil.example.com")
        with anyio.fail_after(LIMIT):
            reply = await send_raw(client, raw_head(headers) + body)
        error = error_of(reply, 421, -32600)
        assert "evil.example.com" in error["message"]


async def test_foreign_host_with_matching_foreign_origin_is_rejected(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        message = echo(6)
        body = orjson.dumps(message)
        headers = conforming_raw(client, message, host="evil.example.com", origin="http://evil.example.com")
        with anyio.fail_after(LIMIT):
            reply = await send_raw(client, raw_head(headers) + body)
        assert 400 <= reply.status < 500
        assert "id" not in reply.json


async def test_own_host_on_the_wrong_port_is_421(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        client.host = f"127.0.0.1:{http.port + 1 if http.port < 65535 else http.port - 1}"
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(6))
        error_of(reply, 421, -32600)


# -- content negotiation and limits ------------------------------------------------------------


async def test_wrong_content_type_is_415(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(), mcp_headers(echo(), **{"content-type": "text/plain"}))
        error_of(reply, 415, -32600)


async def test_json_content_type_with_charset_is_accepted(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(3), mcp_headers(echo(3), **{"content-type": "application/json; charset=utf-8"}))
        assert reply.status == 200 and reply.json["id"] == 3


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "application/json, text/event-stream;q=0"])
async def test_accept_without_both_media_types_is_406(server, accept: str) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(), mcp_headers(echo(), accept=accept))
        error_of(reply, 406, -32600)


async def test_missing_accept_is_406(server) -> None:
    headers = mcp_headers(echo())
    del headers["accept"]
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(), headers)
        error_of(reply, 406, -32600)


async def test_accept_wildcard_is_fine(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(4), mcp_headers(echo(4), accept="*/*"))
        assert reply.status == 200 and reply.json["id"] == 4


async def test_declared_body_over_the_limit_is_413_and_the_server_serves_on(server) -> None:
    async with running(server, max_body_bytes=1000) as http:
        async with HttpClient.connect(http) as client:
            message = echo(1, "x" * 5000)
            body = orjson.dumps(message)
            with anyio.fail_after(LIMIT):
                # Send only the head: the server must answer without reading a body it refuses.
                await client.stream.send(raw_head(conforming_raw(client, message)))
                prime(client)
                reply = await client.read_reply()
            error_of(reply, 413, -32600)
            assert "1000" in reply.json["error"]["message"]
            assert reply.headers["connection"] == "close"
            await assert_closed(client)
            assert len(body) > 1000
        await still_serves(http)


async def test_chunked_body_over_the_limit_is_413_and_the_server_serves_on(server) -> None:
    async with running(server, max_body_bytes=1000) as http:
        async with HttpClient.connect(http) as client:
            message = echo(1, "x" * 5000)
            headers = [(k, v) for k, v in conforming_raw(client, message) if k != "content-length"]
            head = raw_head(headers + [("transfer-encoding", "chunked")])
            body = orjson.dumps(message)
            chunk = f"{len(body):x}\r\n".encode() + body + b"\r\n"  # no terminating chunk: the server stops reading
            with anyio.fail_after(LIMIT):
                await client.stream.send(head + chunk)
                prime(client)
                reply = await client.read_reply()
            error_of(reply, 413, -32600)
            assert reply.headers["connection"] == "close"
        await still_serves(http)


async def test_huge_bodies_do_not_take_the_server_down(server) -> None:
    async with running(server, max_body_bytes=64 * 1024) as http:
        for _ in range(3):
            async with HttpClient.connect(http) as client:
                message = echo(1, "x" * (1024 * 1024))
                data = raw_head(conforming_raw(client, message)) + orjson.dumps(message)

                async def push() -> None:  # the server may close before it has all of the 1 MiB
                    try:
                        await client.stream.send(data)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass

                with anyio.fail_after(LIMIT):
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(push)
                        prime(client)
                        reply = await client.read_reply()
                error_of(reply, 413, -32600)
                assert reply.headers["connection"] == "close"
        await still_serves(http)


@pytest.mark.builtin_http("uvicorn parses the head: its h11 limits answer")
async def test_headers_far_over_the_limit_are_431(server) -> None:
    async with running(server) as http:
        async with HttpClient.connect(http) as client:
            message = echo()
            headers = conforming_raw(client, message, **{"x-padding": "p" * (1024 * 1024)})
            with anyio.fail_after(LIMIT):
                reply = await send_raw(client, raw_head(headers) + orjson.dumps(message))
            error_of(reply, 431, -32600)
            assert reply.headers["connection"] == "close"
        await still_serves(http)


async def test_headers_over_a_configured_limit_are_431(server) -> None:
    async with running(server, max_header_bytes=1024) as http, HttpClient.connect(http) as client:
        message = echo()
        headers = conforming_raw(client, message, **{"x-padding": "p" * 4096})
        with anyio.fail_after(LIMIT):
            reply = await send_raw(client, raw_head(headers) + orjson.dumps(message))
        assert reply.status == 431, reply


# -- malformed or abandoned requests must not take the server down -----------------------------------


async def test_a_client_disconnecting_mid_body_does_not_take_the_server_down(server) -> None:
    async with running(server) as http:
        async with HttpClient.connect(http) as client:
            message = echo(1)
            body = orjson.dumps(message)
            with anyio.fail_after(LIMIT):
                await client.stream.send(raw_head(conforming_raw(client, message)) + body[:10])
        await still_serves(http)


async def test_a_malformed_chunked_body_is_400_and_the_server_serves_on(server) -> None:
    async with running(server) as http:
        async with HttpClient.connect(http) as client:
            message = echo(1)
            headers = [(k, v) for k, v in conforming_raw(client, message) if k != "content-length"]
            with anyio.fail_after(LIMIT):
                await client.stream.send(raw_head(headers + [("transfer-encoding", "chunked")]) + b"zz\r\nabc\r\n")
                prime(client)
                reply = await client.read_reply()
            assert reply.status == 400
            assert reply.headers["connection"] == "close"
        await still_serves(http)


@pytest.mark.builtin_http("uvicorn parses the framing")
async def test_a_transfer_coding_other_than_chunked_is_501_and_the_server_serves_on(server) -> None:
    async with running(server) as http:
        async with HttpClient.connect(http) as client:
            message = echo(1)
            headers = [(k, v) for k, v in conforming_raw(client, message) if k != "content-length"]
            with anyio.fail_after(LIMIT):
                await client.stream.send(raw_head(headers + [("transfer-encoding", "gzip")]))
                prime(client)
                reply = await client.read_reply()
            error_of(reply, 501, -32600)
            assert reply.headers["connection"] == "close"
        await still_serves(http)


@pytest.mark.parametrize("target", ["/mcp", "/elsewhere"])
async def test_head_is_answered_without_a_body_and_the_server_serves_on(server, target: str) -> None:
    async with running(server) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                await client.send_request("HEAD", target, {})
                reply = await client.read_reply()
            assert reply.status == (405 if target == "/mcp" else 404) and reply.body == b""
        await still_serves(http)


# -- bodies ---------------------------------------------------------------------------------------


async def test_invalid_json_is_400_parse_error_without_id(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(None, mcp_headers({}, **{"mcp-method": "tools/list"}), raw=b'{"jsonrpc": "2.0", "id": 1,')
        error_of(reply, 400, -32700)
        # the connection stays usable after a body-level rejection
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(2))
        assert reply.json["id"] == 2


async def test_batch_is_400_invalid_request(server) -> None:
    batch = [echo(1), echo(2)]
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(batch, mcp_headers(echo(1)))
        error = error_of(reply, 400, -32600)
        assert "atch" in error["message"]


async def test_response_body_is_400_invalid_request(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post({"jsonrpc": "2.0", "id": 1, "result": {}}, mcp_headers({}))
        error_of(reply, 400, -32600)


async def test_notification_is_202_with_an_empty_body(server) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"_meta": meta()}}
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(notification)
            assert reply.status == 202 and reply.body == b"" and not reply.messages
            assert reply.headers.get("content-length", "0") == "0"
            reply = await client.post(echo(2))
        assert reply.json["id"] == 2


# -- MCP request headers ----------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["mcp-protocol-version", "mcp-method"])
async def test_missing_standard_header_is_32020(server, header: str) -> None:
    headers = mcp_headers(request("tools/list", 11))
    del headers[header]
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(request("tools/list", 11), headers)
        error = error_of(reply, 400, -32020, 11)
        named = {"mcp-protocol-version": "MCP-Protocol-Version", "mcp-method": "Mcp-Method"}[header]
        assert error["message"].startswith(f"Missing header {named}: "), error


@pytest.mark.parametrize(
    "message",
    [call(12, "echo", text="t"), request("prompts/get", 12, name="greet", arguments={"name": "a"}), request("resources/read", 12, uri="demo://readme")],
    ids=["tools/call", "prompts/get", "resources/read"],
)
async def test_missing_mcp_name_is_32020(server, message: dict[str, Any]) -> None:
    headers = mcp_headers(message)
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            ok = await client.post(message)
            assert ok.status == 200 and "result" in ok.json, ok.body
            del headers["mcp-name"]
            reply = await client.post(message, headers)
        assert error_of(reply, 400, -32020, 12)["message"].startswith("Missing header Mcp-Name: it is required when params.")


async def test_mismatched_mcp_name_is_32020(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(13), mcp_headers(echo(13), **{"mcp-name": "headed"}))
        error = error_of(reply, 400, -32020, 13)
        assert error["message"].startswith("Header mismatch")


async def test_mcp_method_in_another_case_is_32020(server) -> None:
    message = request("tools/list", 14)
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message, **{"mcp-method": "TOOLS/LIST"}))
        error_of(reply, 400, -32020, 14)


async def test_header_names_are_case_insensitive(server) -> None:
    message = echo(15)
    async with running(server) as http, HttpClient.connect(http) as client:
        headers = [
            (name.upper() if name.startswith("mcp-") else name, value) for name, value in conforming_raw(client, message)
        ]
        with anyio.fail_after(LIMIT):
            reply = await send_raw(client, raw_head(headers) + orjson.dumps(message))
        assert reply.status == 200 and reply.json["id"] == 15


async def test_mcp_name_with_surrounding_spaces_is_accepted(server) -> None:
    message = echo(16)
    async with running(server) as http, HttpClient.connect(http) as client:
        headers = conforming_raw(client, message, **{"mcp-name": "  echo  "})
        with anyio.fail_after(LIMIT):
            reply = await send_raw(client, raw_head(headers) + orjson.dumps(message))
        assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == "hi"


async def test_mcp_name_base64_sentinel_is_accepted(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(17), mcp_headers(echo(17), **{"mcp-name": "=?base64?ZWNobw==?="}))
        assert reply.status == 200 and reply.json["id"] == 17


async def test_mcp_name_invalid_base64_is_32020(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(18), mcp_headers(echo(18), **{"mcp-name": "=?base64?ZWNobw?="}))
        error_of(reply, 400, -32020, 18)


async def test_non_ascii_header_value_is_32020(server) -> None:
    message = call(19, "headed", region="Zürich")
    async with running(server) as http, HttpClient.connect(http) as client:
        head = raw_head(conforming_raw(client, message)).replace(
            b"\r\n\r\n", b"\r\nmcp-param-region: Z\xc3\xbcrich\r\n\r\n"
        )
        with anyio.fail_after(LIMIT):
            reply = await send_raw(client, head + orjson.dumps(message))
        error_of(reply, 400, -32020, 19)


HEADED_OK = [
    ({"region": "us-west1"}, {"mcp-param-region": "us-west1"}, "region=us-west1 count=None flag=None"),
    ({"region": "Hello, 世界"}, {"mcp-param-region": "=?base64?SGVsbG8sIOS4lueVjA==?="}, "region=Hello, 世界 count=None flag=None"),
    ({"region": "SGVsbG8="}, {"mcp-param-region": "SGVsbG8="}, "region=SGVsbG8= count=None flag=None"),
    ({"region": "=?base64?SGVsbG8="}, {"mcp-param-region": "=?base64?SGVsbG8="}, "region==?base64?SGVsbG8= count=None flag=None"),
    ({"count": 42}, {"mcp-param-count": "42"}, "region=None count=42 flag=None"),
    ({"count": 42}, {"mcp-param-count": "42.0"}, "region=None count=42 flag=None"),
    ({"flag": True}, {"mcp-param-flag": "true"}, "region=None count=None flag=True"),
    ({"flag": False}, {"mcp-param-flag": "false"}, "region=None count=None flag=False"),
    ({}, {}, "region=None count=None flag=None"),
    (
        {"region": "eu", "count": -7, "flag": True},
        {"mcp-param-region": "eu", "mcp-param-count": "-7", "mcp-param-flag": "true"},
        "region=eu count=-7 flag=True",
    ),
]


@pytest.mark.parametrize("arguments, extra, text", HEADED_OK)
async def test_x_mcp_header_values_that_match_are_accepted(server, arguments: dict[str, Any], extra: dict[str, str], text: str) -> None:
    message = call(20, "headed", **arguments)
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message, **extra))
        assert reply.status == 200, reply.body
        assert reply.json["result"]["content"][0]["text"] == text


HEADED_BAD = [
    ({"region": "us-west1"}, {"mcp-param-region": "us-east1"}),  # mismatch
    ({"region": "us-west1"}, {}),  # missing while the argument is present
    ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8?="}),  # missing padding
    ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVs!!!bG8=?="}),  # not base64
    ({"count": 42}, {"mcp-param-count": "43"}),
    ({"count": 42}, {}),
    ({"flag": True}, {"mcp-param-flag": "True"}),
    ({"flag": False}, {"mcp-param-flag": "0"}),
    ({"flag": False}, {}),
]


@pytest.mark.parametrize("arguments, extra", HEADED_BAD)
async def test_x_mcp_header_values_that_do_not_match_are_32020(server, arguments: dict[str, Any], extra: dict[str, str]) -> None:
    message = call(21, "headed", **arguments)
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message, **extra))
        error = error_of(reply, 400, -32020, 21)
        assert "Mcp-Param-" in error["message"]


async def test_unknown_mcp_param_headers_are_ignored(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(22), mcp_headers(echo(22), **{"mcp-param-region": "anything"}))
        assert reply.status == 200 and reply.json["id"] == 22


# -- versions, _meta, capabilities, methods -------------------------------------------------------------


async def test_header_version_differing_from_meta_is_32020_not_32022(server) -> None:
    message = request("server/discover", 302, _meta=meta(**{"io.modelcontextprotocol/protocolVersion": "v999"}))
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message))
        error_of(reply, 400, -32020, 302)


async def test_unsupported_version_in_both_is_32022_with_supported_and_requested(server) -> None:
    message = request("server/discover", 301, _meta=meta(**{"io.modelcontextprotocol/protocolVersion": "v999.0.0"}))
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message, **{"mcp-protocol-version": "v999.0.0"}))
            discover = await client.post(request("server/discover", 300))
        error = error_of(reply, 400, -32022, 301)
        assert error["data"]["requested"] == "v999.0.0"
        assert error["data"]["supported"] and set(error["data"]["supported"]) <= set(discover.json["result"]["supportedVersions"])


@pytest.mark.parametrize("missing", ["_meta", "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"])
async def test_missing_meta_fields_are_32602(server, missing: str) -> None:
    if missing == "_meta":
        message = {"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": {}}
    else:
        trimmed = meta()
        del trimmed[missing]
        message = request("server/discover", 101, _meta=trimmed)
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message))
        error = error_of(reply, 400, -32602, 101)
    lacking = "params._meta is missing" if missing == "_meta" else f"params._meta is missing {missing!r}"
    assert error["message"] == (f"{lacking}: every request carries 'io.modelcontextprotocol/protocolVersion' and "
                                "'io.modelcontextprotocol/clientCapabilities' in it")


async def test_missing_client_capability_is_32021_with_required_capabilities(server) -> None:
    message = call(40, "needs_sampling")
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message)
            error = error_of(reply, 400, -32021, 40)
            assert error["data"]["requiredCapabilities"] == {"sampling": {}}
            with_sampling = call(41, "needs_sampling", _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}))
            reply = await client.post(with_sampling)
        assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == "sampled"


@pytest.mark.parametrize("method", ["unknown/method", "ping", "initialize", "logging/setLevel", "resources/subscribe"])
async def test_unknown_and_removed_methods_are_404_32601(server, method: str) -> None:
    message = request(method, 50)
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message)
        error_of(reply, 404, -32601, 50)


async def test_session_and_last_event_id_headers_are_ignored(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        extra = {"mcp-session-id": "abc123", "last-event-id": "7"}
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(60), mcp_headers(echo(60), **extra))
            assert reply.status == 200 and reply.json["id"] == 60
            assert "mcp-session-id" not in reply.headers
            discover = await client.post(request("server/discover", 61), mcp_headers(request("server/discover", 61), **extra))
        assert discover.status == 200 and "mcp-session-id" not in discover.headers


@pytest.mark.parametrize("request_id", [7, "str-id", 0, -3])
async def test_errors_echo_the_request_id(server, request_id: Any) -> None:
    message = call(request_id, "no_such_tool")
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            unknown_tool = await client.post(message)
            mismatch = await client.post(echo(request_id), mcp_headers(echo(request_id), **{"mcp-method": "tools/list"}))
            not_found = await client.post(request("nope", request_id))
        error_of(unknown_tool, 400, -32602, request_id)
        error_of(mismatch, 400, -32020, request_id)
        error_of(not_found, 404, -32601, request_id)


# -- SSE ------------------------------------------------------------------------------------------------


async def test_log_notifications_upgrade_the_reply_to_chunked_sse(server) -> None:
    message = call(70, "chatty", _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"}))
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message)
            assert reply.status == 200 and reply.is_sse and reply.chunked
            assert "content-length" not in reply.headers
            assert reply.headers["cache-control"] == "no-cache" and reply.headers["x-accel-buffering"] == "no"
            assert [m.get("method") for m in reply.messages] == ["notifications/message", "notifications/message", None]
            assert reply.messages[0]["params"] == {"level": "info", "data": "first line\nsecond line"}
            assert reply.messages[1]["params"] == {"level": "warning", "data": {"step": 2}}
            assert reply.messages[2]["id"] == 70 and reply.messages[2]["result"]["content"][0]["text"] == "logged"
            # frames: `event: message`, one `data:` line per line of JSON, a blank line after each
            frames = reply.body.split(b"\n\n")
            assert frames[-1] == b"" and len(frames) == 4
            for frame, expected in zip(frames, reply.messages):
                lines = frame.split(b"\n")
                assert lines[0] == b"event: message"
                assert all(line.startswith(b"data: ") for line in lines[1:])
                assert orjson.loads(b"\n".join(line[6:] for line in lines[1:])) == expected
            # the keep-alive connection is reusable after the stream ended
            plain = await client.post(call(71, "chatty"))
        assert not plain.is_sse and plain.json["result"]["content"][0]["text"] == "logged"


async def test_an_idle_sse_stream_gets_keep_alive_comments() -> None:
    probes = Probes()
    message = call(72, "notify_then_block", _meta=meta(**{"io.modelcontextprotocol/logLevel": "debug"}))
    async with running(build(probes), sse_keepalive=0.05) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
            response = await client._next()
            assert isinstance(response, h11.Response) and response.status_code == 200
            assert dict(response.headers)[b"content-type"] == b"text/event-stream"
            raw = b""
            for _ in range(1000):  # bounded: read Data events until a comment line shows up
                event = await client._next()
                assert isinstance(event, h11.Data), event
                raw += event.data
                if any(line.startswith(b":") for line in raw.split(b"\n")):
                    break
            else:
                raise AssertionError("no keep-alive comment")
            assert not probes.finished.is_set()
            probes.release.set()
            for _ in range(1000):  # bounded: the rest of the stream, up to its end
                event = await client._next()
                if isinstance(event, h11.EndOfMessage):
                    break
                raw += event.data
            else:
                raise AssertionError("the stream did not end")
        comment_blocks = [block for block in raw.split(b"\n\n") if block.startswith(b":")]
        assert comment_blocks, raw
        for block in comment_blocks:  # a keep-alive is a block of comment lines only, never inside an event
            assert all(line.startswith(b":") for line in block.split(b"\n")), block
        messages = parse_sse(raw)
        for item in messages:
            check(item, "tools/call")
        assert [m.get("method") for m in messages] == ["notifications/message", None]
        assert messages[-1]["result"]["content"][0]["text"] == "released"


# -- HTTP/1.1 mechanics ----------------------------------------------------------------------------------


async def test_expect_100_continue_gets_100_then_the_answer(server) -> None:
    message = echo(80, "continued")
    body = orjson.dumps(message)
    async with running(server) as http, HttpClient.connect(http) as client:
        headers = [("host", client.host), *mcp_headers(message).items(), ("content-length", str(len(body))), ("expect", "100-continue")]
        with anyio.fail_after(LIMIT):
            await client.stream.send(client.conn.send(h11.Request(method="POST", target="/mcp", headers=headers)))
            interim = await client._next()
            assert isinstance(interim, h11.InformationalResponse) and interim.status_code == 100
            await client.stream.send(client.conn.send(h11.Data(data=body)) + client.conn.send(h11.EndOfMessage()))
            reply = await client.read_reply()
        assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == "continued"


async def test_pipelined_requests_are_answered_in_order(server) -> None:
    first, second = echo(81, "one"), call(82, "chatty", _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"}))
    async with running(server) as http, HttpClient.connect(http) as client:
        other = h11.Connection(h11.CLIENT)
        data = b""
        for conn, message in ((client.conn, first), (other, second)):
            body = orjson.dumps(message)
            fields = [("host", client.host), *mcp_headers(message).items(), ("content-length", str(len(body)))]
            data += conn.send(h11.Request(method="POST", target="/mcp", headers=fields)) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        with anyio.fail_after(LIMIT):
            await client.stream.send(data)  # both requests in one send
            one = await client.read_reply()
            prime(client)
            two = await client.read_reply()
        assert one.status == 200 and one.json["id"] == 81 and one.json["result"]["content"][0]["text"] == "one"
        assert two.is_sse and two.messages[-1]["id"] == 82


async def test_connection_close_from_the_client_closes_after_the_reply(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(83), mcp_headers(echo(83), connection="close"))
        assert reply.status == 200 and reply.json["id"] == 83
        assert reply.headers["connection"] == "close"
        await assert_closed(client)


async def test_two_hundred_concurrent_connections_all_succeed(server) -> None:
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        async with HttpClient.connect(http) as client:
            reply = await client.post(echo(i, f"n{i}"))
            assert reply.status == 200 and reply.json["id"] == i
            results[i] = reply.json["result"]["content"][0]["text"]

    async with running(server) as http:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                for i in range(200):
                    tasks.start_soon(one, i)
    assert results == {i: f"n{i}" for i in range(200)}


# -- cancellation -------------------------------------------------------------------------------------------


async def test_a_disconnect_mid_call_cancels_the_tool() -> None:
    probes = Probes()
    message = call(90, "block")
    async with running(build(probes)) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                await client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
                await probes.started.wait()
        with anyio.fail_after(LIMIT):
            await probes.cancelled.wait()
        assert not probes.finished.is_set()
        await still_serves(http)


async def test_a_disconnect_during_an_sse_stream_cancels_the_tool() -> None:
    probes = Probes()
    message = call(91, "notify_then_block", _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"}))
    async with running(build(probes)) as http:
        async with HttpClient.connect(http) as client:
            with anyio.fail_after(LIMIT):
                await client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
                response = await client._next()
                assert isinstance(response, h11.Response) and response.status_code == 200
                first = await client._next()
                assert isinstance(first, h11.Data)
                assert parse_sse(first.data)[0]["method"] == "notifications/message"
                await probes.started.wait()
        with anyio.fail_after(LIMIT):
            await probes.cancelled.wait()
        assert not probes.finished.is_set()
        await still_serves(http)


# -- slow clients and connection limits ------------------------------------------------------------------------


@pytest.mark.builtin_http("uvicorn reads the head and owns its deadlines")
async def test_a_slow_loris_client_does_not_block_others_and_is_timed_out(server) -> None:
    async with running(server, header_timeout=0.3) as http:
        slow = await anyio.connect_tcp("127.0.0.1", http.port)
        slow_done = anyio.Event()
        received = bytearray()

        async def read_slow() -> None:
            try:
                for _ in range(1000):  # bounded: until the server answers 408 and/or closes
                    received.extend(await slow.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
                pass
            slow_done.set()

        try:
            await slow.send(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{http.port}\r\ncontent-type: appl".encode())
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_slow)
                async with HttpClient.connect(http) as client:
                    with anyio.fail_after(LIMIT):
                        for i in range(5):
                            reply = await client.post(echo(i))
                            assert reply.json["id"] == i
                assert not slow_done.is_set(), "others must be served while the slow client still holds its connection"
                with anyio.fail_after(LIMIT):
                    await slow_done.wait()
        finally:
            await slow.aclose()
        assert received == b"" or bytes(received).startswith(b"HTTP/1.1 408 "), bytes(received)


@pytest.mark.builtin_http("uvicorn owns the connections (--limit-concurrency)")
async def test_over_max_connections_gets_503_with_retry_after(server) -> None:
    async with running(server, max_connections=2) as http:
        async with HttpClient.connect(http) as one, HttpClient.connect(http) as two:
            with anyio.fail_after(LIMIT):
                assert (await one.post(echo(1))).status == 200  # both are accepted and counted
                assert (await two.post(echo(2))).status == 200
            async with HttpClient.connect(http) as third:
                prime(third)  # the server answers without waiting for a request
                with anyio.fail_after(LIMIT):
                    reply = await third.read_reply()
                assert reply.status == 503
                assert reply.headers["retry-after"].isdigit()
                assert reply.headers["connection"] == "close"
                assert "error" in reply.json and "id" not in reply.json
                await assert_closed(third)
            with anyio.fail_after(LIMIT):  # the held connections still work
                assert (await one.post(echo(3))).json["id"] == 3


# -- graceful shutdown ----------------------------------------------------------------------------------------------


@pytest.mark.builtin_http("uvicorn's shutdown; the adapter's drain is tested in test_asgi.py")
async def test_stop_lets_an_in_flight_call_finish_and_refuses_new_connections() -> None:
    probes = Probes()
    message = call(95, "block")
    async with running(build(probes), grace_period=LIMIT) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
            await probes.started.wait()
            http.stop()
            await anyio.wait_all_tasks_blocked()  # the server closed its listener and waits for the call
            with pytest.raises(OSError):
                await anyio.connect_tcp("127.0.0.1", http.port)
            probes.release.set()
            reply = await client.read_reply()
        assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == "released"
        check(reply.json, "tools/call")
        assert reply.headers["connection"] == "close"
        await assert_closed(client)
        assert not probes.cancelled.is_set()


@pytest.mark.builtin_http("uvicorn's shutdown; the adapter's drain is tested in test_asgi.py")
async def test_stop_cancels_calls_still_running_after_the_grace_period() -> None:
    probes = Probes()
    message = call(96, "block")
    async with running(build(probes), grace_period=0.2) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            await client.send_request("POST", "/mcp", mcp_headers(message), orjson.dumps(message))
            await probes.started.wait()
            http.stop()
            await probes.cancelled.wait()
        assert not probes.finished.is_set()
        await assert_closed(client)


# -- transport facts on the call ------------------------------------------------------------------


async def test_a_tool_sees_the_request_headers_and_the_peer_address(server) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        message = request("tools/call", 1, name="caller")
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message, **{"user-agent": "mcpcore-tests/1"}))
    facts = reply.json["result"]["structuredContent"]
    host, port = facts["peer"][:2]
    assert facts["agent"] == "mcpcore-tests/1" and host == "127.0.0.1" and isinstance(port, int) and port > 0
    assert facts["principal"] is None  # nothing authenticates yet


@pytest.mark.parametrize("origin", ["http://[::1", "http://[abc]"])
async def test_an_unparsable_origin_is_403_and_the_connection_stays_usable(server, origin: str) -> None:
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(echo(5), mcp_headers(echo(5), origin=origin))
            error_of(reply, 403, -32600)
            assert (await client.post(echo(6))).json["id"] == 6


async def test_repeated_param_headers_on_the_wire_are_400_32020(server) -> None:
    message = request("tools/call", 3, name="headed", arguments={"region": "us, eu"})
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            fields = conforming_raw(client, message) + [("mcp-param-region", "us"), ("mcp-param-region", "eu")]
            body = orjson.dumps(message)
            data = client.conn.send(h11.Request(method="POST", target="/mcp", headers=fields))
            await client.stream.send(data + client.conn.send(h11.Data(data=body)) + client.conn.send(h11.EndOfMessage()))
            reply = await client.read_reply()
    error_of(reply, 400, -32020, 3)


async def test_a_five_thousand_digit_integer_header_is_400_32020(server) -> None:
    message = request("tools/call", 4, name="headed", arguments={"count": 7})
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, mcp_headers(message, **{"mcp-param-count": "9" * 5000}))
            error_of(reply, 400, -32020, 4)
            assert (await client.post(echo(5))).json["id"] == 5


async def test_a_body_nesting_too_deep_is_400_with_its_id_and_the_server_keeps_serving(server) -> None:
    deep = "[" * 1000 + "1" + "]" * 1000
    body = f'{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":{deep}}}}}}}'.encode()
    message = request("tools/call", 8, name="echo")
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            reply = await client.post(message, raw=body)
            error = error_of(reply, 400, -32600, 8)
            assert "deeper than 128 levels" in error["message"]
            assert (await client.post(echo(9))).json["id"] == 9


def chunked(body: bytes, size: int) -> bytes:
    """`body` in chunked encoding, `size` bytes a chunk, with the terminating chunk."""
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"


@pytest.mark.builtin_http("uvicorn de-chunks the body and hands it over in pieces of its own")
async def test_a_body_in_too_many_tiny_chunks_is_400_and_the_server_serves_on(server) -> None:
    async with running(server, max_body_chunks=500) as http:
        async with HttpClient.connect(http) as client:
            message = echo(1, "x" * 4000)
            headers = [(k, v) for k, v in conforming_raw(client, message) if k != "content-length"]
            with anyio.fail_after(LIMIT):
                await client.stream.send(raw_head(headers + [("transfer-encoding", "chunked")]) + chunked(orjson.dumps(message), 2))
                prime(client)
                reply = await client.read_reply()
            error = error_of(reply, 400, -32600)
            assert "more than 500 chunks" in error["message"] and reply.headers["connection"] == "close"
        async with HttpClient.connect(http) as client:  # a body in a few large chunks is served
            message = echo(2, "y" * 4000)
            headers = [(k, v) for k, v in conforming_raw(client, message) if k != "content-length"]
            with anyio.fail_after(LIMIT):
                await client.stream.send(raw_head(headers + [("transfer-encoding", "chunked")]) + chunked(orjson.dumps(message), 512))
                prime(client)
                reply = await client.read_reply()
            assert reply.json["result"]["content"][0]["text"] == "y" * 4000


async def _trickle(server: Server, phase: str, **timeouts: float) -> None:
    """Send the head or the body one byte at a time, each well inside the timeout: the total is not."""
    async with running(server, **timeouts) as http, HttpClient.connect(http) as client:
        message = echo(1, "x" * 200)
        body = orjson.dumps(message)
        head = raw_head(conforming_raw(client, message))
        trickle = head if phase == "head" else body
        if phase == "body":
            await client.stream.send(head)
        answered = b""
        with anyio.fail_after(LIMIT):
            for byte in trickle:
                try:
                    await client.stream.send(bytes([byte]))
                except (anyio.BrokenResourceError, ConnectionResetError):
                    break
                with anyio.move_on_after(0.05):
                    answered += await client.stream.receive()
                if answered:
                    break
        assert answered.startswith(b"HTTP/1.1 408"), answered[:80]


@pytest.mark.builtin_http("uvicorn reads the head and has no head deadline of its own")
async def test_a_client_trickling_its_head_one_byte_at_a_time_still_meets_its_deadline(server) -> None:
    await _trickle(server, "head", header_timeout=0.3)


async def test_a_client_trickling_its_body_one_byte_at_a_time_still_meets_its_deadline(server) -> None:
    await _trickle(server, "body", body_timeout=0.3)


@pytest.mark.builtin_http("uvicorn reads pipelined requests and owns their buffering")
async def test_a_client_that_pipelines_bad_requests_without_reading_is_not_buffered_for(server) -> None:
    async with running(server) as http:
        stream = await anyio.connect_tcp("127.0.0.1", http.port)
        requests = 40_000
        line = b"GET /nope HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
        async with stream, anyio.create_task_group() as tasks:

            async def send_all() -> None:
                for start in range(0, requests, 1000):
                    await stream.send(line * 1000)

            tasks.start_soon(send_all)
            (connection,) = list(http.connections)
            # Answers fill the socket, the server's send buffer included (megabytes), so it stops reading: some
            # 30,000 requests answered first, which a loaded machine takes well over one step's LIMIT to do.
            with anyio.fail_after(LIMIT * 6):
                while not connection._write_blocked:
                    await anyio.sleep(0.01)
            assert connection._reading_paused
            seen = 0
            buffered = b""
            with anyio.fail_after(LIMIT * 3):  # now read: every request is answered, in order
                while seen < requests:
                    buffered += await stream.receive()
                    seen += buffered.count(b"HTTP/1.1 404")
                    buffered = buffered[buffered.rfind(b"HTTP/1.1 404") + 1 :] if b"HTTP/1.1 404" in buffered else buffered
            assert seen == requests
