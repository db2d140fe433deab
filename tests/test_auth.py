"""Bearer-token authorization on a real HTTP server on 127.0.0.1 (the static verifier)."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import orjson
import pytest

from conftest import legacy, request, tool_call
from http_client import HttpClient, mcp_headers, running
from mcpcore import Context, Server
from mcpcore.auth import AccessToken, Auth, StaticTokens, VerifierUnavailable

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_flavour")]  # the built-in server, then uvicorn

RESOURCE = "http://127.0.0.1:8000/mcp"
METADATA_URL = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
TOKENS = {
    "alice-token": AccessToken("alice", "client-a", frozenset({"files:read"})),
    "writer-token": AccessToken("bob", "client-b", frozenset({"files:read", "files:write"})),
    "old-token": AccessToken("carol", None, frozenset({"files:read"}), expires_at=time.time() - 60),
}


class Broken:
    """A verifier with a defect: it raises what no verifier should."""

    async def verify(self, token: str) -> AccessToken | None:
        raise ConnectionError("the key server is unreachable")


class Unavailable:
    """A verifier that cannot decide now, and says so."""

    async def verify(self, token: str) -> AccessToken | None:
        raise VerifierUnavailable("the key server is unreachable")


def guarded(verifier: Any = None) -> Server:
    auth = Auth(verifier or StaticTokens(TOKENS), RESOURCE, ("https://auth.example.com",), scopes=("files:read",))
    server = Server("guarded", auth=auth)

    @server.tool
    async def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return f"{ctx.principal} via {ctx.auth.client_id}"

    @server.tool(scopes=["files:write"])
    async def write(path: str) -> str:
        return f"wrote {path}"

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


async def test_a_legacy_session_belongs_to_the_principal_that_opened_it() -> None:
    opening = legacy("initialize", 1, protocolVersion="2025-06-18", capabilities={}, clientInfo={"name": "t", "version": "0"})
    async with running(guarded()) as http, HttpClient.connect(http) as client:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        opened = await client.post(opening, {**headers, "authorization": "Bearer alice-token"}, legacy=True)
        session = opened.headers["mcp-session-id"]
        ping = legacy("ping", 2)
        session_headers = {**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        theirs = await client.post(ping, {**session_headers, "authorization": "Bearer writer-token"}, legacy=True)
        assert theirs.status == 404
        mine = await client.post(ping, {**session_headers, "authorization": "Bearer alice-token"}, legacy=True)
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
