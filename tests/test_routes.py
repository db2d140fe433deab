"""Custom routes beside the MCP endpoint (`@server.custom_route`), on the built-in server and under uvicorn."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from conftest import request
from http_client import HttpClient, running
from mcpcore import Server
from mcpcore.auth import AccessToken, Auth, StaticTokens
from mcpcore.routes import HttpRequest, HttpResponse
from mcpcore.transports.http import HttpConfig, HttpServer

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]

RESOURCE = "http://127.0.0.1:8000/mcp"


def routed(auth: Auth | None = None) -> Server:
    server = Server("routed", version="1.2.3", auth=auth)
    seen: list[HttpRequest] = []
    server.seen = seen  # type: ignore[attr-defined]

    @server.tool
    def echo(text: str) -> str:
        return text

    @server.custom_route("/version", public=True)
    async def version(req: HttpRequest) -> dict[str, str]:
        seen.append(req)
        return {"version": server.version}

    @server.custom_route("/hooks/changed", methods=["POST"])
    def changed(req: HttpRequest) -> HttpResponse:  # a sync function: on the worker pool
        seen.append(req)
        server.remove_tool(req.json()["tool"])
        return HttpResponse("removed", status=202, headers={"x-hook": "1"})

    @server.custom_route("/broken", public=True)
    async def broken(req: HttpRequest) -> Any:
        raise RuntimeError("the route's own bug")

    @server.custom_route("/bad-header", public=True)
    async def bad_header(req: HttpRequest) -> HttpResponse:
        return HttpResponse("x", headers={"x-bad": "a\r\nb"})

    return server


async def get(client: HttpClient, target: str, headers: dict[str, str] | None = None) -> Any:
    await client.send_request("GET", target, headers)
    return await client.read_reply()


async def test_a_route_answers_beside_the_endpoint_and_the_connection_serves_on() -> None:
    server = routed()
    async with running(server) as http, HttpClient.connect(http) as client:
        reply = await get(client, "/version?verbose=1")
        assert reply.status == 200 and reply.json == {"version": "1.2.3"} and reply.body == b'{"version":"1.2.3"}'
        (seen,) = server.seen  # type: ignore[attr-defined]
        assert (seen.method, seen.path, seen.query) == ("GET", "/version", "verbose=1")
        call = request("tools/call", 1, name="echo", arguments={"text": "still here"})
        assert (await client.post(call)).json["result"]["content"][0]["text"] == "still here"
        await client.send_request("HEAD", "/version")
        head = await client.read_reply()
        assert head.status == 200 and head.body == b"" and head.headers["content-length"] == "19"


async def test_a_post_route_gets_its_body_and_answers_its_own_status_and_headers() -> None:
    server = routed()
    async with running(server) as http, HttpClient.connect(http) as client:
        body = orjson.dumps({"tool": "echo"})
        await client.send_request("POST", "/hooks/changed", {"content-type": "application/json"}, body)
        reply = await client.read_reply()
        assert reply.status == 202 and reply.body == b"removed" and reply.headers["x-hook"] == "1"
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
        assert server.tools.get("echo") is None
        assert server.seen[0].body == body and server.seen[0].headers["content-type"] == "application/json"  # type: ignore[attr-defined]


async def test_a_route_refuses_other_methods_foreign_origins_and_large_bodies() -> None:
    async with running(routed(), max_body_bytes=64) as http, HttpClient.connect(http) as client:
        await client.send_request("DELETE", "/version")
        refused = await client.read_reply()
        assert refused.status == 405 and refused.headers["allow"] == "GET, HEAD"
        foreign = await get(client, "/version", {"origin": "https://evil.example"})
        assert foreign.status == 403
        await client.send_request("POST", "/hooks/changed", {}, b"x" * 65)
        assert (await client.read_reply()).status == 413


async def test_a_failing_route_is_500_and_the_server_goes_on() -> None:
    async with running(routed()) as http, HttpClient.connect(http) as client:
        assert (await get(client, "/broken")).status == 500
        assert (await get(client, "/bad-header")).status == 500
        assert (await get(client, "/version")).status == 200


async def test_with_auth_a_route_needs_a_token_unless_public() -> None:
    tokens = StaticTokens({"t": AccessToken("alice", scopes=frozenset())})
    server = routed(Auth(tokens, RESOURCE, ("https://auth.example.com",)))
    async with running(server) as http, HttpClient.connect(http) as client:
        assert (await get(client, "/version")).status == 200
        body = orjson.dumps({"tool": "echo"})
        await client.send_request("POST", "/hooks/changed", {}, body)
        anonymous = await client.read_reply()
        assert anonymous.status == 401 and "resource_metadata=" in anonymous.headers["www-authenticate"]
        await client.send_request("POST", "/hooks/changed", {"authorization": "Bearer t"}, body)
        assert (await client.read_reply()).status == 202
        assert server.seen[-1].auth.subject == "alice"  # type: ignore[attr-defined]


async def test_a_route_cannot_take_a_path_the_transport_serves() -> None:
    server = Server("clash")

    @server.custom_route("/healthz")
    async def mine(req: HttpRequest) -> str:
        return "mine"

    with pytest.raises(ValueError, match="'/healthz' is a path the HTTP transport serves itself"):
        HttpServer(server, HttpConfig(port=0))
    with pytest.raises(ValueError, match="absolute path"):
        server.custom_route("version")(mine)
    with pytest.raises(ValueError, match="already a custom route"):
        server.custom_route("/healthz", methods=["POST"])(mine)
    with pytest.raises(ValueError, match="needs HTTP methods"):
        server.custom_route("/x", methods=["BREW"])(mine)
    async with running(Server("plain")) as http, HttpClient.connect(http) as client:
        assert (await get(client, "/version")).status == 404  # no routes: the endpoint's 404


async def test_a_route_may_answer_any_status_and_no_content_but_not_a_body_with_204() -> None:
    server = Server("statuses")

    @server.custom_route("/odd", public=True)
    async def odd(req: HttpRequest) -> HttpResponse:
        return HttpResponse("odd", status=299)

    @server.custom_route("/empty", public=True)
    async def empty(req: HttpRequest) -> HttpResponse:
        return HttpResponse(None, status=204)

    @server.custom_route("/wrong", public=True)
    async def wrong(req: HttpRequest) -> HttpResponse:
        return HttpResponse("text", status=204)

    async with running(server) as http, HttpClient.connect(http) as client:
        assert (await get(client, "/odd")).status == 299
        emptied = await get(client, "/empty")
        assert emptied.status == 204 and emptied.body == b""
        assert (await get(client, "/wrong")).status == 500
        assert (await get(client, "/odd")).status == 299  # the connection serves on
