"""JWT and introspection verifiers against a real authorization server stand-in on 127.0.0.1.

Tokens are signed with real RSA and EC keys; the key set, the RFC 8414 metadata and
the introspection endpoint are served over HTTP by a stdlib server in a thread, whose
key set can be made to fail or to hang until released. Verifiers whose cache is under
test get a clock the test moves, so fetches are counted, never timed.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import anyio
import anyio.from_thread
import jwt
import orjson
import pytest
from hypothesis import given, settings, strategies as st
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from conftest import free_port, request
from http_client import HttpClient, Reply, mcp_headers, running
from mcpcore import Context, Server
from mcpcore.auth import Auth, VerifierUnavailable
from mcpcore.oauth import IntrospectionVerifier, JwtVerifier
from test_http_rules import conforming_raw, raw_head, send_raw

pytestmark = pytest.mark.anyio

RESOURCE = "http://127.0.0.1:8000/mcp"
LIMIT = 10.0  # seconds: a bound for what should be at once, never reached unless something hangs


class AuthorizationServer:
    """Metadata, a rotating key set and an introspection endpoint, counting what it serves."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {"k1": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
        self.active: dict[str, dict[str, Any]] = {}  # token → introspection answer
        self.hits: dict[str, int] = {}
        self.jwks_fails = False  # the key set answers 500
        self.jwks_held: threading.Event | None = None  # the key set answers once this is set
        self.jwks_asked = threading.Event()  # a key-set request arrived
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
                    owner.jwks_asked.set()
                    if owner.jwks_held is not None:
                        owner.jwks_held.wait(LIMIT)
                    if owner.jwks_fails:
                        self.send_error(500)
                    else:
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
        """An RSA key's JWK names its algorithm; an EC key's leaves it to the curve."""
        public = self.keys[kid].public_key()
        if isinstance(public, ec.EllipticCurvePublicKey):
            return {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(public)), "kid": kid, "use": "sig"}
        return {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public)), "kid": kid, "use": "sig", "alg": "RS256"}

    def sign(self, kid: str = "k1", **overrides: Any) -> str:
        claims = {"iss": self.issuer, "sub": "alice", "aud": RESOURCE, "exp": time.time() + 300,
                  "scope": "files:read files:write", "client_id": "app", **overrides}
        claims = {name: value for name, value in claims.items() if value is not None}
        algorithm = "ES256" if isinstance(self.keys[kid], ec.EllipticCurvePrivateKey) else "RS256"
        return jwt.encode(claims, self.keys[kid], algorithm=algorithm, headers={"kid": kid})


@pytest.fixture
def issuer() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer()
    thread = threading.Thread(target=server.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        if server.jwks_held is not None:
            server.jwks_held.set()
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


def guarded(issuer: AuthorizationServer, verifier: Any) -> Server:
    """A server whose one tool names the caller and its scopes."""
    server = Server("jwt", auth=Auth(verifier, RESOURCE, (issuer.issuer,)))

    @server.tool
    async def whoami(ctx: Context) -> str:
        return f"{ctx.principal} {sorted(ctx.auth.scopes)}" if ctx.auth else "nobody"

    return server


async def call(client: HttpClient, token: str, request_id: int = 1) -> Reply:
    message = request("tools/call", request_id, name="whoami", arguments={})
    return await client.post(message, {**mcp_headers(message), "authorization": f"Bearer {token}"})


def refused(reply: Reply) -> bool:
    """A 401 with the challenge a client needs to get a better token."""
    challenge = reply.headers.get("www-authenticate", "")
    return reply.status == 401 and challenge.startswith('Bearer error="invalid_token"') and "resource_metadata=" in challenge


async def test_a_server_guarded_by_jwt_serves_the_token_holder_end_to_end(issuer: AuthorizationServer) -> None:
    async with running(guarded(issuer, JwtVerifier(issuer.issuer, RESOURCE))) as http, HttpClient.connect(http) as client:
        good = await call(client, issuer.sign())
        assert good.response["result"]["content"][0]["text"] == "alice ['files:read', 'files:write']"
        assert refused(await call(client, issuer.sign(aud="http://other.example.com/mcp")))


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


def segment(document: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def reheaded(token: str, **header: Any) -> str:
    """The token under another header, its payload and signature kept (what an attacker can rewrite)."""
    return segment(header) + token[token.index("."):]


class Clock:
    """The verifier's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_a_hostile_jwt_is_401_with_its_challenge_never_503(issuer: AuthorizationServer,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    issuer.keys["e1"] = ec.generate_private_key(ec.SECP256R1())  # its JWK names no algorithm
    good, on_ec = issuer.sign(), issuer.sign("e1")
    header, payload, signature = good.split(".")
    hostile = [
        reheaded(good, alg="ES256", kid="k1"),  # the RSA key's public id, an EC algorithm
        reheaded(good, alg="PS256", kid="k1"),  # the key's JWK says RS256
        reheaded(good, alg="HS256", kid="k1"),  # not an allowed algorithm: the public key as an HMAC secret
        reheaded(good, alg="EdDSA", kid="e1"),
        reheaded(on_ec, alg="RS256", kid="e1"),  # an RSA algorithm on the EC key
        reheaded(on_ec, alg="ES512", kid="e1"),  # a P-256 key under another curve's algorithm
        reheaded(good, alg="RS256", kid=["k1"]),
        reheaded(good, alg=None, kid="k1"),
        reheaded(good, alg="RS256", kid="k1", crit="b64"),
        f"{header}.{payload}.!!!",  # not base64
        f"{header}.{payload}.{signature[:-3]}",  # a signature of the wrong length
        f"{header}.{segment({'exp': 'soon'})}.{signature}",
        issuer.sign(exp=10**400),  # a genuine signature over an expiry no float holds
        issuer.sign(exp=float("inf")),
        issuer.sign(exp=float("nan")),
        f"{segment({'alg': 'RS256', 'kid': 'k1', 'x': [[[[]]]] * 1000})}.{payload}.{signature}",
    ]
    caplog.set_level(logging.DEBUG)
    async with running(guarded(issuer, JwtVerifier(issuer.issuer, RESOURCE))) as http, HttpClient.connect(http) as client:
        for request_id, token in enumerate(hostile, 1):
            reply = await call(client, token, request_id)
            assert refused(reply), (token, reply.status)
        assert (await call(client, good)).status == 200 and (await call(client, on_ec)).status == 200
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []


async def test_a_failing_key_server_is_asked_again_only_after_a_back_off(issuer: AuthorizationServer,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    verifier = JwtVerifier(issuer.issuer, RESOURCE, jwks_url=issuer.issuer + "/jwks", clock=clock)
    issuer.jwks_fails = True
    good = issuer.sign()

    async def unknown_key_ids(client: HttpClient, count: int) -> list[int]:
        return [(await call(client, reheaded(good, alg="RS256", kid=f"made-up-{n}"), n)).status for n in range(count)]

    async with running(guarded(issuer, verifier)) as http, HttpClient.connect(http) as client:
        assert await unknown_key_ids(client, 20) == [503] * 20 and issuer.hits["/jwks"] == 1
        reply = await call(client, good)
        assert reply.status == 503 and reply.headers["retry-after"] == "1" and "www-authenticate" not in reply.headers
        for wait, fetched in ((1, 2), (1, 2), (1, 3), (3, 3), (1, 4)):  # 1 s, then 2 s, then 4 s between tries
            clock.now += wait
            assert await unknown_key_ids(client, 3) == [503] * 3 and issuer.hits["/jwks"] == fetched
        issuer.jwks_fails = False
        clock.now += 8
        assert (await call(client, good)).status == 200 and issuer.hits["/jwks"] == 5
    failures = [record for record in caplog.records if record.name == "mcpcore.oauth" and record.levelno == logging.WARNING]
    assert len(failures) == 4 and not [record for record in caplog.records if record.levelno >= logging.ERROR]


async def test_known_keys_go_on_verifying_while_the_key_server_fails_for_stale_seconds(issuer: AuthorizationServer) -> None:
    clock = Clock()
    verifier = JwtVerifier(issuer.issuer, RESOURCE, jwks_url=issuer.issuer + "/jwks", cache_seconds=300,
                           stale_seconds=3600, clock=clock)
    token, unknown = issuer.sign(), reheaded(issuer.sign(), alg="RS256", kid="k9")
    assert await verifier.verify(token) is not None
    issuer.jwks_fails = True
    start = clock.now
    for age, fetched in ((300, 2), (300.5, 2), (1000, 3), (3899, 4)):  # tries 1 s, 2 s, 4 s apart
        clock.now = start + age
        assert (await verifier.verify(token)) is not None  # the cached key, at once; a refresh starts if due
        with pytest.raises(VerifierUnavailable):
            await verifier.verify(unknown)  # joins the refresh in flight, or meets its back-off
        assert issuer.hits["/jwks"] == fetched
    clock.now = start + 3910
    with pytest.raises(VerifierUnavailable):
        await verifier.verify(token)  # too old to trust: only a fetch would do, and it fails
    assert issuer.hits["/jwks"] == 5


async def test_a_token_with_a_cached_key_never_waits_for_a_hanging_key_server(issuer: AuthorizationServer) -> None:
    clock = Clock()
    verifier = JwtVerifier(issuer.issuer, RESOURCE, jwks_url=issuer.issuer + "/jwks", clock=clock)
    async with running(guarded(issuer, verifier)) as http:
        async with HttpClient.connect(http) as client:
            assert (await call(client, issuer.sign())).status == 200
        issuer.jwks_held, issuer.jwks_asked = threading.Event(), threading.Event()
        clock.now += verifier.cache_seconds  # due for a refresh, which will hang
        with anyio.fail_after(LIMIT):
            for subject in ("bob", "carol", "dave"):  # each on a new connection: verified anew
                async with HttpClient.connect(http) as client:
                    assert (await call(client, issuer.sign(sub=subject))).status == 200
                await anyio.to_thread.run_sync(issuer.jwks_asked.wait)  # the refresh is at the key server
            issuer.jwks_held.set()
            async with HttpClient.connect(http) as client:
                assert refused(await call(client, reheaded(issuer.sign(), alg="RS256", kid="k9")))  # waits for it
    assert issuer.hits["/jwks"] == 2  # the first fetch and one refresh, however many asked meanwhile


async def test_one_leeway_for_nbf_and_exp_wherever_expiry_is_checked(issuer: AuthorizationServer) -> None:
    verifier = JwtVerifier(issuer.issuer, RESOURCE, leeway=30)
    expiry = time.time() - 5
    lately, early = issuer.sign(exp=expiry), issuer.sign(nbf=time.time() + 5)
    async with running(guarded(issuer, verifier)) as http, HttpClient.connect(http) as client:
        for request_id, token in enumerate((lately, lately, early), 1):  # the second reuses the connection's verdict
            assert (await call(client, token, request_id)).status == 200
        assert refused(await call(client, issuer.sign(exp=time.time() - 40), 4))
    accepted = await verifier.verify(lately)
    assert accepted is not None and accepted.expires_at == expiry + 30


async def test_introspection_remembers_refusals_briefly_and_within_a_bound(issuer: AuthorizationServer) -> None:
    clock = Clock()
    verifier = IntrospectionVerifier(issuer.issuer + "/introspect", RESOURCE, client_id="mcp", client_secret="s3cret",
                                     refused_seconds=10, max_refused=4, clock=clock)
    issuer.active["good"] = {"active": True, "sub": "bob", "aud": RESOURCE, "exp": time.time() + 300}
    assert await verifier.verify("good") is not None
    for _ in range(3):
        assert await verifier.verify("bogus") is None
    assert issuer.hits["/introspect"] == 2
    flood = [f"flood-{n}-" + "x" * 10_000 for n in range(10)]
    for token in flood:
        assert await verifier.verify(token) is None
    assert issuer.hits["/introspect"] == 12
    assert await verifier.verify(flood[-1]) is None and issuer.hits["/introspect"] == 12
    assert await verifier.verify(flood[0]) is None and issuer.hits["/introspect"] == 13  # pushed out: four are kept
    assert await verifier.verify("good") is not None and issuer.hits["/introspect"] == 13  # kept apart from the flood
    clock.now += 10
    assert await verifier.verify(flood[-1]) is None and issuer.hits["/introspect"] == 14


async def test_an_introspection_endpoint_that_does_not_answer_makes_the_verifier_unavailable() -> None:
    verifier = IntrospectionVerifier(f"http://127.0.0.1:{free_port()}/introspect", RESOURCE, client_id="mcp",
                                     client_secret="s3cret")
    with pytest.raises(VerifierUnavailable):
        await verifier.verify("opaque")


# -- fuzzing the Authorization header ------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None)
FUZZ_HEADER_LIMIT = 4096  # the server's header limit in the fuzz, so a huge value costs little
CONTROLS = frozenset(chr(c) for c in (*range(32), 127)) - {"\t"}  # what HTTP may refuse in a header value: 400

json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
base64url = st.binary(max_size=48).map(lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode())
header_text = st.text(st.characters(max_codepoint=0xFF, exclude_characters="\r\n"), max_size=40)  # as latin-1 decodes
non_ascii = st.text(st.characters(min_codepoint=0x80, exclude_categories=("Cs",)), min_size=1, max_size=10).map(
    lambda text: text.encode().decode("latin-1"))  # UTF-8 bytes on the wire


@st.composite
def jwt_like(draw: st.DrawFn, genuine: list[str]) -> str:
    """A genuine token under a drawn header (`alg` and `kid` swaps), some segments replaced, some added."""
    algorithm = st.sampled_from(["RS256", "ES256", "PS256", "HS256", "EdDSA", "ES512", "none", ""])
    kid = st.sampled_from(["k1", "e1", "k9", ""])
    header = draw(st.fixed_dictionaries(
        {"alg": st.one_of(algorithm, algorithm, algorithm, json_value), "kid": st.one_of(kid, kid, kid, json_value)},
        optional={"typ": json_value, "crit": json_value, "b64": json_value},
    ))
    segments = [segment(header), *draw(st.sampled_from(genuine)).split(".")[1:]]
    for index in draw(st.lists(st.integers(0, 2), max_size=3)):
        segments[index] = draw(base64url | header_text | st.builds(segment, json_value))
    return ".".join(segments + draw(st.lists(base64url, max_size=2)))


def authorization(genuine: list[str]) -> st.SearchStrategy[str]:
    """Authorization values, mostly `Bearer <near-JWT>` (that reaches the verifier); else other schemes,
    any spacing, garbage, non-ASCII, huge."""
    near_jwt = jwt_like(genuine)
    token = st.one_of(near_jwt, near_jwt, header_text, non_ascii, base64url,
                      st.integers(FUZZ_HEADER_LIMIT // 2, FUZZ_HEADER_LIMIT * 2).map(lambda size: "x" * size))
    spaces = st.text(" \t", max_size=30)
    bearer = st.builds(lambda *parts: "".join(parts), spaces, st.sampled_from(["Bearer", "bearer", "BEARER"]),
                       spaces.map(lambda gap: " " + gap), token, spaces)
    scheme = st.sampled_from(["Basic", "Token", "Bearer:", "", "Bearer,", "Bearer\t"]) | header_text
    other = st.builds(lambda *parts: "".join(parts), spaces, scheme, spaces, token, spaces)
    return st.one_of(bearer, bearer, other)


def expected(value: str) -> set[int]:
    """401 with a challenge, unless HTTP itself refuses the header: 400 for a control character h11 refuses,
    431 past the header limit."""
    statuses = {401, 400} if CONTROLS.intersection(value) else {401}
    return statuses | {431} if len(value) > FUZZ_HEADER_LIMIT // 2 else statuses


async def ask(http: Any, value: str) -> Reply:
    """One request on its own connection (a refusal of malformed HTTP closes it) with this Authorization."""
    message = request("tools/call", 1, name="whoami", arguments={})
    with anyio.fail_after(LIMIT):
        async with HttpClient.connect(http) as client:
            head = raw_head(conforming_raw(client, message, authorization=value))
            return await send_raw(client, head + orjson.dumps(message))


def test_fuzzed_authorization_headers_are_401_with_a_challenge_and_the_server_stays_up(issuer: AuthorizationServer) -> None:
    issuer.keys["e1"] = ec.generate_private_key(ec.SECP256R1())
    genuine = [issuer.sign(), issuer.sign("e1"), issuer.sign(exp=10**400)]
    verifier = JwtVerifier(issuer.issuer, RESOURCE, jwks_url=issuer.issuer + "/jwks")
    serving = running(guarded(issuer, verifier), max_header_bytes=FUZZ_HEADER_LIMIT)
    with anyio.from_thread.start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(serving) as http:

        @FUZZ
        @given(authorization(genuine))
        def refused_with_a_challenge(value: str) -> None:
            reply = portal.call(ask, http, value)
            assert reply.status in expected(value), (value[:200], reply.status, reply.body[:200])
            assert reply.status != 401 or refused(reply), reply.headers

        refused_with_a_challenge()
        assert portal.call(ask, http, f"Bearer {genuine[0]}").status == 200
    assert issuer.hits["/jwks"] <= 2  # made-up key ids fetch the key set at most once a minute
