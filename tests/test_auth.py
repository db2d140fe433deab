"""Bearer-token authorization on a real HTTP server on 127.0.0.1 (the static verifier)."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import orjson
import pytest

from conftest import legacy, request, tool_call
from http_client import HttpClient, SseStream, mcp_headers, running
from mcpcore import Context, Server
from mcpcore.auth import AccessToken, Auth, StaticTokens, VerifierUnavailable

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]  # the built-in server, then uvicorn

RESOURCE = "http://127.0.0.1:8000/mcp"
METADATA_URL = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
TOKENS = {
    "alice-token": AccessToken("alice", "client-a", frozenset({"files:read"})),
    "writer-token": AccessToken("bob", "client-b", frozenset({"files:read", "files:write"})),
    "old-token": AccessToken("carol", None, frozenset({"files:read"}), expires_at=time.time() - 60),
    "admin-token": AccessToken("dana", "client-d", frozenset({"files:admin"})),
}
IMPLIED = {"files:admin": ["files:write"], "files:write": ["files:read"]}


class Broken:
    """A verifier with a defect: it raises what no verifier should."""

    async def verify(self, token: str) -> AccessToken | None:
        raise ConnectionError("the key server is unreachable")


class Unavailable:
    """A verifier that cannot decide now, and says so."""

    async def verify(self, token: str) -> AccessToken | None:
        raise VerifierUnavailable("the key server is unreachable")


def guarded(verifier: Any = None, **settings: Any) -> Server:
    auth = Auth(verifier or StaticTokens(TOKENS), RESOURCE, ("https://auth.example.com",), scopes=("files:read",),
                implied_scopes=IMPLIED, **settings)
    server = Server("guarded", auth=auth, cache_scope="public")

    @server.tool
    async def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return f"{ctx.principal} via {ctx.auth.client_id}"

    @server.tool(scopes=["files:write"])
    async def write(path: str) -> str:
        return f"wrote {path}"

    @server.tool
    async def held_scopes(ctx: Context) -> str:
        assert ctx.auth is not None
        return " ".join(sorted(ctx.auth.scopes))

    @server.prompt(scopes=["files:write"])
    def draft(topic: str) -> str:
        return f"Write about {topic}"

    @server.resource("files://secret", scopes=["files:write"])
    def secret() -> str:
        return "the plans"

    @server.resource("files://drafts/{name}", scopes=["files:write"])
    def drafted(name: str) -> str:
        return f"draft {name}"

    @server.resource("files://readme")
    def readme() -> str:
        return "read me"

    @server.completion(prompt="draft", argument="topic")
    def topics(value: str) -> list[str]:
        return ["the merger", "the layoffs"]

    @server.completion(resource="files://drafts/{name}", argument="name")
    def draft_names(value: str) -> list[str]:
        return ["plan-b", "plan-c"]

    return server


async def post(client: HttpClient, message: dict[str, Any], token: str | None) -> Any:
    headers = mcp_headers(message)
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return await client.post(message, headers)


async def test_the_protected_resource_metadata_is_public_at_both_well_known_paths() -> None:
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            await client.send_request("GET", path, {"origin": "https://app.example.com"})
            reply = await client.read_reply()
            assert reply.status == 200 and reply.headers["access-control-allow-origin"] == "*"
            assert orjson.loads(reply.body) == {
                "resource": RESOURCE,
                "authorization_servers": ["https://auth.example.com"],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["files:read"],
            }


async def test_no_token_or_a_bad_one_is_401_with_a_challenge_naming_the_metadata() -> None:
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        missing = await post(client, tool_call(1, "whoami"), None)
        assert missing.status == 401
        assert missing.headers["www-authenticate"] == f'Bearer scope="files:read", resource_metadata="{METADATA_URL}"'
        for token, why in (("nope", "not valid for this server"), ("old-token", "expired")):
            reply = await post(client, tool_call(2, "whoami"), token)
            challenge = reply.headers["www-authenticate"]
            assert reply.status == 401 and challenge.startswith('Bearer error="invalid_token"') and why in challenge
            assert why in reply.json["error"]["message"]
        basic = tool_call(3, "whoami")
        reply = await client.post(basic, {**mcp_headers(basic), "authorization": "Basic YWxpY2U6cHc="})
        assert reply.status == 401 and 'error="invalid_token"' in reply.headers["www-authenticate"]


async def test_a_valid_token_reaches_the_tool_and_a_missing_scope_is_403_naming_it() -> None:
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        reply = await post(client, tool_call(1, "whoami"), "alice-token")
        assert reply.response["result"]["content"][0]["text"] == "alice via client-a"
        denied = await post(client, tool_call(2, "write", path="/a"), "alice-token")
        assert denied.status == 403 and denied.json["id"] == 2
        challenge = denied.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="files:write"' in challenge
        assert f'resource_metadata="{METADATA_URL}"' in challenge
        allowed = await post(client, tool_call(3, "write", path="/a"), "writer-token")
        assert allowed.response["result"]["content"][0]["text"] == "wrote /a"


async def test_a_broader_scope_passes_for_the_narrower_ones_it_implies_and_the_tool_sees_them_all() -> None:
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        wrote = await post(client, tool_call(1, "write", path="/a"), "admin-token")
        assert wrote.status == 200 and wrote.response["result"]["content"][0]["text"] == "wrote /a"
        held = await post(client, tool_call(2, "held_scopes"), "admin-token")
        assert held.response["result"]["content"][0]["text"] == "files:admin files:read files:write"
        narrow = await post(client, tool_call(3, "held_scopes"), "alice-token")
        assert narrow.response["result"]["content"][0]["text"] == "files:read"  # implied downwards only


LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
         "resources/templates/list": "resourceTemplates"}


def names(result: dict[str, Any]) -> set[str]:
    """What a list result shows: names and URIs (templates by their URI template)."""
    field = next(key for key in LISTS.values() if key in result)
    return {entry.get("uri") or entry.get("uriTemplate") or entry["name"] for entry in result[field]}


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("list_by_scope", [True, False], ids=["by-scope", "everything"])
async def test_lists_by_scope_show_only_what_the_token_permits_and_by_default_show_everything(
        era: str, list_by_scope: bool) -> None:
    async with running(guarded(list_by_scope=list_by_scope)) as http, HttpClient.connect(http) as client:

        async def listed(request_id: int, method: str, token: str) -> dict[str, Any]:
            if era == "2026-07-28":
                reply = await post(client, request(method, request_id), token)
            else:
                reply = await client.post(legacy(method, request_id), await open_legacy(client, token), legacy=True)
            assert reply.status == 200, reply.body
            return reply.response["result"]

        reader = {method: await listed(n, method, "alice-token") for n, method in enumerate(LISTS)}
        writer = {method: await listed(n, method, "writer-token") for n, method in enumerate(LISTS)}
    assert names(writer["tools/list"]) == {"whoami", "write", "held_scopes"}
    assert names(writer["prompts/list"]) == {"draft"}
    assert names(writer["resources/list"]) == {"files://secret", "files://readme"}
    assert names(writer["resources/templates/list"]) == {"files://drafts/{name}"}
    scopes = {result.get("cacheScope") for result in (*reader.values(), *writer.values())}
    unhinted = era == "2025-11-25"  # its results carry no cache hints
    if not list_by_scope:
        assert reader == writer and scopes == ({None} if unhinted else {"public"})
        return
    assert names(reader["tools/list"]) == {"whoami", "held_scopes"} and not names(reader["prompts/list"])
    assert names(reader["resources/list"]) == {"files://readme"} and not names(reader["resources/templates/list"])
    assert scopes == ({None} if unhinted else {"private"})  # the list varies by caller


@pytest.mark.parametrize("message", [
    request("prompts/get", 1, name="draft", arguments={"topic": "x"}),
    request("resources/read", 1, uri="files://secret"),
    request("resources/read", 1, uri="files://drafts/plan"),
    request("subscriptions/listen", 1, notifications={"resourceSubscriptions": ["files://readme", "files://secret"]}),
], ids=["prompt", "resource", "template", "listen"])
async def test_prompts_and_resources_can_require_a_scope_too(message: dict[str, Any]) -> None:
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        refused = await post(client, message, "alice-token")
        assert refused.status == 403 and 'scope="files:write"' in refused.headers["www-authenticate"]
        assert refused.json["id"] == 1
        if message["method"] == "subscriptions/listen":
            return  # allowed, it would stream until the server stops; the refusal is what is tested here
        served = await post(client, message, "writer-token")
        assert served.status == 200 and "result" in served.json
        plain = await post(client, request("resources/read", 2, uri="files://readme"), "alice-token")
        assert plain.status == 200 and plain.json["result"]["contents"][0]["text"] == "read me"


LEGACY_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def open_legacy(client: HttpClient, token: str, version: str = "2025-11-25") -> dict[str, str]:
    """Open a 2025-era session as the token's caller; the headers its requests carry."""
    opening = legacy("initialize", 0, protocolVersion=version, capabilities={}, clientInfo={"name": "t", "version": "0"})
    headers = {**LEGACY_HEADERS, "authorization": f"Bearer {token}"}
    opened = await client.post(opening, headers, legacy=True)
    assert opened.status == 200, opened.body
    headers.update({"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version})
    initialized = await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers, legacy=True)
    assert initialized.status == 202
    return headers


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("ref", [
    {"type": "ref/prompt", "name": "draft"},
    {"type": "ref/resource", "uri": "files://drafts/{name}"},
], ids=["prompt", "template"])
async def test_completing_an_argument_needs_the_scopes_of_what_it_completes(era: str, ref: dict[str, Any]) -> None:
    argument = {"name": "topic" if ref["type"] == "ref/prompt" else "name", "value": ""}
    async with running(guarded()) as http, HttpClient.connect(http) as client:

        async def complete(request_id: int, token: str) -> Any:
            if era == "2026-07-28":
                return await post(client, request("completion/complete", request_id, ref=ref, argument=argument), token)
            message = legacy("completion/complete", request_id, ref=ref, argument=argument)
            return await client.post(message, await open_legacy(client, token), legacy=True)

        refused = await complete(1, "alice-token")
        assert refused.status == 403 and refused.json["id"] == 1 and "result" not in refused.json
        challenge = refused.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="files:write"' in challenge
        served = await complete(2, "writer-token")
        assert served.status == 200 and len(served.response["result"]["completion"]["values"]) == 2


async def test_a_legacy_session_belongs_to_the_principal_that_opened_it() -> None:
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        session_headers = await open_legacy(client, "alice-token", "2025-06-18")
        ping = legacy("ping", 2)
        theirs = await client.post(ping, {**session_headers, "authorization": "Bearer writer-token"}, legacy=True)
        assert theirs.status == 404
        mine = await client.post(ping, session_headers, legacy=True)
        assert mine.status == 200 and mine.response["result"] == {}


@pytest.mark.parametrize(("verifier", "tracebacks"), [(Broken(), 2), (Unavailable(), 0)], ids=["defect", "unavailable"])
async def test_a_verifier_that_fails_or_cannot_decide_is_503_and_the_server_goes_on(
        verifier: Any, tracebacks: int, caplog: pytest.LogCaptureFixture) -> None:
    async with running(guarded(verifier)) as http, HttpClient.connect(http) as client:
        for request_id in (1, 2):
            reply = await post(client, tool_call(request_id, "whoami"), "alice-token")
            assert reply.status == 503 and reply.headers["retry-after"] == "1"
    assert len([record for record in caplog.records if record.levelno >= logging.ERROR]) == tracebacks


def test_auth_settings_are_checked_and_the_metadata_url_follows_the_endpoint() -> None:
    with pytest.raises(ValueError, match="absolute URL"):
        Auth(StaticTokens({}), "/mcp", ("https://auth.example.com",))
    with pytest.raises(ValueError, match="at least one issuer"):
        Auth(StaticTokens({}), RESOURCE, ())
    with pytest.raises(ValueError, match="a list of scopes"):
        Auth(StaticTokens({}), RESOURCE, ("https://auth.example.com",), implied_scopes={"files:admin": "files:read"})
    root = Auth(StaticTokens({}), "https://mcp.example.com", ("https://auth.example.com",))
    assert root.metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert root.metadata_paths == ("/.well-known/oauth-protected-resource",)


class Counting:
    """A verifier that counts its calls; "soon" expires a moment after it is first verified."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def verify(self, token: str) -> AccessToken | None:
        self.calls.append(token)
        if token == "soon":
            return AccessToken("eve", scopes=frozenset({"files:read"}), expires_at=time.time() + 0.3)
        return AccessToken(token, scopes=frozenset({"files:read"})) if token in ("ann", "bob") else None


@pytest.mark.builtin_http("the verdict is remembered per connection, which the ASGI server holds, not the adapter")
async def test_a_keep_alive_connection_verifies_a_repeated_token_once_until_it_expires() -> None:
    counting = Counting()
    server = guarded(counting)
    async with running(server) as http, HttpClient.connect(http) as client:
        for request_id in (1, 2, 3):
            assert (await post(client, tool_call(request_id, "whoami"), "ann")).status == 200
        assert counting.calls == ["ann"]
        assert (await post(client, tool_call(4, "whoami"), "bob")).status == 200  # another token: asked again
        assert (await post(client, tool_call(5, "whoami"), "soon")).status == 200
        await anyio.sleep(0.4)
        assert (await post(client, tool_call(6, "whoami"), "soon")).status == 200  # expired: asked again
        assert counting.calls == ["ann", "bob", "soon", "soon"]
        async with HttpClient.connect(http) as other:
            assert (await post(other, tool_call(7, "whoami"), "ann")).status == 200
    assert counting.calls[-1] == "ann" and len(counting.calls) == 5  # a new connection asks the verifier itself


async def test_a_listen_ends_with_its_complete_result_when_its_token_expires() -> None:
    async with running(guarded(Counting())) as http, HttpClient.connect(http) as client:
        stream = SseStream(client)
        message = request("subscriptions/listen", 1, notifications={"toolsListChanged": True})
        await stream.open(message, {**mcp_headers(message), "authorization": "Bearer soon"})
        with anyio.fail_after(10):  # the token lasts 0.3 s; without an end the stream stays open
            acknowledged = await stream.next()
            final = await stream.next()
            after = await stream.next()
    assert acknowledged is not None and acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert final is not None and final["id"] == 1 and final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1 and after is None


async def test_a_2025_get_stream_ends_when_its_token_expires() -> None:
    async with running(guarded(Counting())) as http, HttpClient.connect(http) as client:
        session = await open_legacy(client, "soon")
        async with HttpClient.connect(http) as other:
            stream = SseStream(other, legacy=True)
            wanted = ("authorization", "mcp-session-id", "mcp-protocol-version")
            await stream.open_get({name: session[name] for name in wanted})
            with anyio.fail_after(10):  # the token lasts 0.3 s; without an end the stream stays open
                heard = await stream.next()
    assert heard is None and stream.ended
