"""JWT and introspection verifiers against a real authorization server stand-in on 127.0.0.1.

Tokens are signed with real RSA keys; the key set, the RFC 8414 metadata and the
introspection endpoint are served over HTTP by a stdlib server in a thread.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from conftest import request
from http_client import HttpClient, mcp_headers, running
from mcpcore import Context, Server
from mcpcore.auth import Auth
from mcpcore.oauth import IntrospectionVerifier, JwtVerifier

pytestmark = pytest.mark.anyio

RESOURCE = "http://127.0.0.1:8000/mcp"


class AuthorizationServer:
    """Metadata, a rotating key set and an introspection endpoint, counting what it serves."""

    def __init__(self) -> None:
        self.keys = {"k1": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
        self.active: dict[str, dict[str, Any]] = {}  # token → introspection answer
        self.hits: dict[str, int] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, document: Any) -> None:
                body = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                owner.hits[self.path] = owner.hits.get(self.path, 0) + 1
                if self.path == "/.well-known/oauth-authorization-server":
                    self._json({"issuer": owner.issuer, "jwks_uri": owner.issuer + "/jwks"})
                elif self.path == "/jwks":
                    self._json({"keys": [owner.jwk(kid) for kid in owner.keys]})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                owner.hits[self.path] = owner.hits.get(self.path, 0) + 1
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["content-length"])).decode())
                assert self.headers["authorization"].startswith("Basic ")
                self._json(owner.active.get(form["token"][0], {"active": False}))

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.http.server_address[1]}"

    def jwk(self, kid: str) -> dict[str, Any]:
        key = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
        return {**key, "kid": kid, "use": "sig", "alg": "RS256"}

    def sign(self, kid: str = "k1", **overrides: Any) -> str:
        claims = {"iss": self.issuer, "sub": "alice", "aud": RESOURCE, "exp": time.time() + 300,
                  "scope": "files:read files:write", "client_id": "app", **overrides}
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode(claims, self.keys[kid], algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def issuer() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer()
    thread = threading.Thread(target=server.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.http.shutdown()
        server.http.server_close()


async def test_a_jwt_from_the_issuer_for_this_resource_is_accepted(issuer: AuthorizationServer) -> None:
    verifier = JwtVerifier(issuer.issuer, RESOURCE)
    token = await verifier.verify(issuer.sign())
    assert token is not None and token.subject == "alice" and token.client_id == "app"
    assert token.scopes == {"files:read", "files:write"} and token.claims["iss"] == issuer.issuer
    await verifier.verify(issuer.sign())
    assert issuer.hits == {"/.well-known/oauth-authorization-server": 1, "/jwks": 1}  # discovered once, keys cached


@pytest.mark.parametrize(
    "overrides",
    [
        {"aud": "http://other.example.com/mcp"},  # issued for another server: never accepted
        {"exp": time.time() - 3600},
        {"iss": "http://127.0.0.1:1"},
        {"sub": None},
        {"exp": None},
    ],
    ids=["other-audience", "expired", "other-issuer", "no-subject", "no-expiry"],
)
async def test_a_jwt_that_is_not_for_us_or_not_valid_now_is_refused(issuer: AuthorizationServer, overrides: dict[str, Any]) -> None:
    assert await JwtVerifier(issuer.issuer, RESOURCE).verify(issuer.sign(**overrides)) is None


async def test_a_forged_or_garbled_jwt_is_refused(issuer: AuthorizationServer) -> None:
    verifier = JwtVerifier(issuer.issuer, RESOURCE)
    header, payload, signature = issuer.sign().split(".")
    forged = jwt.encode({"iss": issuer.issuer, "sub": "mallory", "aud": RESOURCE, "exp": time.time() + 300},
                        rsa.generate_private_key(public_exponent=65537, key_size=2048), algorithm="RS256",
                        headers={"kid": "k1"})
    assert await verifier.verify(forged) is None
    assert await verifier.verify(f"{header}.{payload}.{signature[::-1]}") is None
    assert await verifier.verify("not a jwt") is None
    unsigned = jwt.encode({"iss": issuer.issuer, "sub": "x", "aud": RESOURCE, "exp": time.time() + 300}, None, algorithm="none")
    assert await verifier.verify(unsigned) is None


async def test_a_rotated_key_is_fetched_when_a_token_names_it(issuer: AuthorizationServer) -> None:
    verifier = JwtVerifier(issuer.issuer, RESOURCE, jwks_url=issuer.issuer + "/jwks")
    assert await verifier.verify(issuer.sign()) is not None
    issuer.keys["k2"] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert await verifier.verify(issuer.sign("k2")) is None  # fetched less than a minute ago: not again yet
    stale = JwtVerifier(issuer.issuer, RESOURCE, jwks_url=issuer.issuer + "/jwks", clock=lambda: time.time() + 3600)
    stale._fetched_at = time.time()  # as if fetched an hour before its clock
    assert await stale.verify(issuer.sign("k2")) is not None


async def test_introspection_accepts_active_tokens_for_this_resource_and_caches_them(issuer: AuthorizationServer) -> None:
    verifier = IntrospectionVerifier(issuer.issuer + "/introspect", RESOURCE, client_id="mcp", client_secret="s3cret")
    issuer.active["opaque-1"] = {"active": True, "sub": "bob", "aud": [RESOURCE], "scope": "files:read",
                                 "exp": time.time() + 300}
    issuer.active["elsewhere"] = {"active": True, "sub": "bob", "aud": "http://other.example.com/mcp"}
    issuer.active["no-audience"] = {"active": True, "sub": "bob"}
    token = await verifier.verify("opaque-1")
    assert token is not None and token.subject == "bob" and token.scopes == {"files:read"}
    assert await verifier.verify("opaque-1") == token and issuer.hits["/introspect"] == 1
    for refused in ("elsewhere", "no-audience", "unknown"):
        assert await verifier.verify(refused) is None


async def test_a_server_guarded_by_jwt_serves_the_token_holder_end_to_end(issuer: AuthorizationServer) -> None:
    server = Server("jwt", auth=Auth(JwtVerifier(issuer.issuer, RESOURCE), RESOURCE, (issuer.issuer,)))

    @server.tool
    async def whoami(ctx: Context) -> str:
        return f"{ctx.principal} {sorted(ctx.auth.scopes)}" if ctx.auth else "nobody"

    message = request("tools/call", 1, name="whoami", arguments={})
    async with running(server) as http, HttpClient.connect(http) as client:
        good = await client.post(message, {**mcp_headers(message), "authorization": f"Bearer {issuer.sign()}"})
        assert good.response["result"]["content"][0]["text"] == "alice ['files:read', 'files:write']"
        other = issuer.sign(aud="http://other.example.com/mcp")
        refused = await client.post(message, {**mcp_headers(message), "authorization": f"Bearer {other}"})
        assert refused.status == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]


def test_a_fetch_refuses_an_oversized_answer(issuer: AuthorizationServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpcore import oauth

    monkeypatch.setattr(oauth, "MAX_RESPONSE_BYTES", 10)
    with pytest.raises(ValueError, match="more than 10 bytes"):
        oauth._fetch(issuer.issuer + "/jwks")


async def test_a_fixed_key_set_is_used_without_fetching(issuer: AuthorizationServer) -> None:
    verifier = JwtVerifier(issuer.issuer, RESOURCE, jwks={"keys": [issuer.jwk("k1")]})
    assert (await verifier.verify(issuer.sign())) is not None
    issuer.keys["k2"] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert await verifier.verify(issuer.sign("k2")) is None and issuer.hits == {}
