"""Token verifiers for real authorization servers: JWT access tokens (JWKS) and RFC 7662 introspection.

Both accept only tokens issued for this server: a JWT's `aud` must name the
resource, and so must an introspection answer's `aud` when it has one. Key sets,
metadata and introspection answers are fetched with the standard library in a
worker thread (the loop never blocks) and cached with a bound. A token that is
malformed, forged or refused is `None` (a 401), whatever the crypto library raises
on it; only a verifier that cannot reach its key set or introspection endpoint
raises (`VerifierUnavailable`, a 503). `JwtVerifier` needs PyJWT with its crypto
extra (`pip install 'mcpcore[jwt]'`), imported only when one is built.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import json
import logging
import math
import time
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import anyio.to_thread

from .auth import AccessToken, VerifierUnavailable

__all__ = ["IntrospectionVerifier", "JwtVerifier"]

log = logging.getLogger(__name__)
FETCH_TIMEOUT = 10.0  # seconds for one metadata, key set or introspection request
MAX_RESPONSE_BYTES = 1024 * 1024
ROTATION_SECONDS = 60.0  # at most one key-set fetch this often for a key id the cache does not hold
FIRST_RETRY_SECONDS, LAST_RETRY_SECONDS = 1.0, 60.0  # back-off after failed fetches: doubling, then capped
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})


def _fetch(url: str, form: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None) -> Any:
    """GET (or POST a form to) `url` and parse its JSON answer; blocking, so run it in a thread."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    wanted = {"accept": "application/json", **(headers or {})}
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=wanted), timeout=FETCH_TIMEOUT) as answer:
        body = answer.read(MAX_RESPONSE_BYTES + 1)
    if len(body) > MAX_RESPONSE_BYTES:
        raise ValueError(f"{url} answered with more than {MAX_RESPONSE_BYTES} bytes")
    return json.loads(body)


async def fetch_json(url: str, form: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None) -> Any:
    return await anyio.to_thread.run_sync(_fetch, url, form, headers)


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """`scope` as a space-separated string (RFC 9068, RFC 7662) or `scp` as a list."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    return frozenset(s for s in scp if isinstance(s, str)) if isinstance(scp, list) else frozenset()


def _audiences(claims: Mapping[str, Any]) -> tuple[str, ...]:
    aud = claims.get("aud")
    return (aud,) if isinstance(aud, str) else tuple(a for a in aud if isinstance(a, str)) if isinstance(aud, list) else ()


def _instant(value: Any) -> float | None:
    """A JSON number as seconds since the epoch; None for anything else (a string, a bool, NaN, 1e400)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an integer past any float
        return None
    return seconds if math.isfinite(seconds) else None


def _token(claims: Mapping[str, Any], leeway: float = 0.0) -> AccessToken | None:
    """The caller the claims name, or None without a subject or with an `exp` that is no instant.

    `expires_at` is when the token stops being accepted here: its `exp` plus the
    verifier's leeway, so the authorization layer and a connection's remembered
    verdict end it where the verifier does.
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return None
    expiry = claims.get("exp")
    expires_at = _instant(expiry)
    if expiry is not None and expires_at is None:
        return None
    client = claims.get("client_id", claims.get("azp"))
    return AccessToken(
        subject,
        client if isinstance(client, str) else None,
        _scopes(claims),
        None if expires_at is None else expires_at + leeway,
        dict(claims),
    )


class _Key(NamedTuple):
    """A key of the key set and the algorithms (of those the verifier allows) it verifies."""

    key: Any
    algorithms: frozenset[str]


class JwtVerifier:
    """JWT access tokens signed by `issuer`, for `audience` (this server's resource URL).

    The key set comes from `jwks_url`, or from the issuer's RFC 8414 / OpenID
    metadata. It is refreshed in the background once it is `cache_seconds` old, and
    fetched at once, at most once a minute, when a token names a key it does not hold
    (a key rotation). At most one fetch is in flight, and a token whose key is cached
    never waits for it. After a failed fetch the next waits 1 s, then twice as long
    each time up to a minute; meanwhile the keys held go on verifying tokens, until
    they are `cache_seconds + stale_seconds` old. `jwks=` gives a fixed key set (a
    JWKS document) instead, never fetched. `leeway` applies to `nbf` and `exp` alike.
    """

    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        jwks_url: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        algorithms: Iterable[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        cache_seconds: float = 300.0,
        stale_seconds: float = 3600.0,
        leeway: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import jwt
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise ImportError("JwtVerifier needs PyJWT: pip install 'mcpcore[jwt]'") from None
        self._jwt = jwt
        self.issuer, self.audience = issuer, audience
        self.algorithms = frozenset(algorithms)
        self.cache_seconds, self.stale_seconds, self.leeway, self._clock = cache_seconds, stale_seconds, leeway, clock
        self._jwks_url = jwks_url
        self._keys: dict[str, _Key] = {}
        self._fetched_at = float("-inf")
        self._failures = 0  # key-set fetches failed in a row
        self._retry_at = float("-inf")  # no fetch before this, after a failed one
        self._fetching: asyncio.Task[bool] | None = None
        self._fixed = jwks is not None
        if jwks is not None:
            self._keys = self._load(jwks)

    def _load(self, document: Any) -> dict[str, _Key]:
        """The usable keys of a JWKS document, by key id; a document without a key list is an error."""
        entries = document.get("keys") if isinstance(document, Mapping) else None
        if not isinstance(entries, list):
            raise ValueError(f"{self._jwks_url or 'the given key set'} is not a JWKS document")
        keys = {}
        for entry in entries:
            usable = self._usable(entry)
            if usable is None:
                log.debug("skipped a key of %s: %.200r", self._jwks_url or "the given key set", entry)
            else:
                keys[usable[0]] = usable[1]
        return keys

    def _usable(self, entry: Any) -> tuple[str, _Key] | None:
        """A key-set entry as its key id and key, or None when no algorithm allowed here can use it.

        A key verifies the algorithm its `alg` names; without one, an RSA key verifies
        RS* and PS*, any other key its curve's only algorithm. Tying each key to its
        algorithms refuses a token whose header names another (an `alg` swap) before
        the crypto library sees it.
        """
        try:
            jwk = self._jwt.PyJWK(entry)
            named = entry.get("alg")
            kid = entry.get("kid", "")
            algorithms = {named} if named else RSA_ALGORITHMS if jwk.key_type == "RSA" else {jwk.algorithm_name}
        except Exception:  # not a key PyJWT can build (PyJWKError, or a malformed entry's TypeError)
            return None
        usable = self.algorithms.intersection(algorithms)
        return (kid, _Key(jwk.key, usable)) if isinstance(kid, str) and usable else None

    async def _discover(self) -> str:
        base = self.issuer.rstrip("/")
        parts = urllib.parse.urlsplit(base)
        tenant = parts.path
        root = f"{parts.scheme}://{parts.netloc}"
        for url in (f"{root}/.well-known/oauth-authorization-server{tenant}", f"{root}/.well-known/openid-configuration{tenant}",
                    f"{base}/.well-known/openid-configuration"):
            try:
                metadata = await fetch_json(url)
            except Exception:  # the next well-known form, as RFC 8414 and OpenID Connect allow
                continue
            if isinstance(metadata, dict) and metadata.get("issuer") == self.issuer and isinstance(metadata.get("jwks_uri"), str):
                return metadata["jwks_uri"]
        raise LookupError(f"no authorization server metadata with a jwks_uri for issuer {self.issuer}")

    async def _fetch_keys(self) -> bool:
        """Fetch the key set (finding where it is the first time); False when that failed, with a back-off set."""
        try:
            if self._jwks_url is None:
                self._jwks_url = await self._discover()
            keys = self._load(await fetch_json(self._jwks_url))
        except Exception as error:  # unreachable, an error status, not JSON, not a key set
            self._failures += 1
            wait = min(LAST_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2.0 ** min(self._failures - 1, 16))
            self._retry_at = self._clock() + wait
            log.warning("could not fetch the key set of %s (%s); the next try in %g s at the earliest",
                        self.issuer, error, wait)
            return False
        else:
            self._keys, self._fetched_at, self._failures, self._retry_at = keys, self._clock(), 0, float("-inf")
            return True
        finally:
            self._fetching = None

    def _refresh(self, rotation: bool = False) -> asyncio.Task[bool] | None:
        """The key-set fetch in flight, started now unless it must wait: after a failed fetch, for
        the back-off; for a key id the cache does not hold (`rotation`), a minute after the last fetch."""
        if self._fetching is not None:
            return self._fetching
        now = self._clock()
        if now < self._retry_at or (rotation and now - self._fetched_at < min(ROTATION_SECONDS, self.cache_seconds)):
            return None
        self._fetching = asyncio.get_running_loop().create_task(self._fetch_keys())
        return self._fetching

    async def _key(self, kid: str) -> _Key | None:
        """The key `kid` names, or None when the issuer has none by that id.

        A cached key is answered at once: while fresh, or while a refresh (started here
        if due) runs or fails, for `stale_seconds` more. Otherwise this waits for the
        one fetch in flight, and raises `VerifierUnavailable` when there is no key set to ask.
        """
        if self._fixed:
            return self._keys.get(kid)
        age = self._clock() - self._fetched_at
        cached = self._keys.get(kid)
        if cached is not None and age < self.cache_seconds + self.stale_seconds:
            if age >= self.cache_seconds:
                self._refresh()  # this caller does not wait for it
            return cached
        fetch = self._refresh(rotation=cached is None)
        if fetch is None and self._failures == 0:
            return None  # the key set was fetched less than a minute ago and has no such key
        if fetch is None or not await asyncio.shield(fetch):  # shielded: a caller that leaves does not cancel it
            raise VerifierUnavailable(f"the key set of {self.issuer} cannot be fetched now")
        return self._keys.get(kid)

    def _header(self, token: str) -> tuple[str, str] | None:
        """The key id (empty when none is named) and algorithm of the token's header, when both are strings."""
        try:
            header = self._jwt.get_unverified_header(token)
        except Exception:  # not a JWT: PyJWTError, or whatever an older PyJWT raises on a hostile header
            return None
        kid, alg = header.get("kid", ""), header.get("alg")
        return (kid, alg) if isinstance(kid, str) and isinstance(alg, str) else None

    def _decode(self, token: str, key: Any, algorithm: str) -> AccessToken | None:
        """The caller a token names when its signature and claims hold, else None.

        A pure computation on the token's bytes and a key already held: whatever it
        raises (PyJWT's errors, or a TypeError, ValueError or OverflowError from the
        crypto library on a key it cannot use, bad base64 or huge numbers) says the
        token is not valid, never that the verifier is down.
        """
        jwt = self._jwt
        try:
            claims = jwt.decode(
                token, key, algorithms=[algorithm], audience=self.audience, issuer=self.issuer,
                leeway=self.leeway, options={"require": ["exp", "sub", "aud", "iss"]},
            )
        except Exception as error:
            log.debug("refused a token: %s: %s", type(error).__name__, error)
            return None
        return _token(claims, self.leeway)

    async def verify(self, token: str) -> AccessToken | None:
        named = self._header(token)
        if named is None:
            return None
        kid, algorithm = named
        key = await self._key(kid)
        if key is None or algorithm not in key.algorithms:
            return None  # no such key, or an algorithm this key does not sign with
        return self._decode(token, key.key, algorithm)


class _Answers:
    """Introspection answers until each one's own instant, at most `limit` of them, the oldest
    dropped first. Keyed by the token's SHA-256, so a long token costs no more than a short one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: collections.OrderedDict[bytes, tuple[float, AccessToken | None]] = collections.OrderedDict()

    def get(self, digest: bytes, now: float) -> tuple[float, AccessToken | None] | None:
        entry = self._entries.get(digest)
        if entry is not None and entry[0] <= now:
            del self._entries[digest]
            return None
        return entry

    def put(self, digest: bytes, until: float, answer: AccessToken | None) -> None:
        self._entries[digest] = (until, answer)
        self._entries.move_to_end(digest)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)


class IntrospectionVerifier:
    """Opaque tokens checked at an RFC 7662 introspection endpoint, with the server's client credentials.

    An accepted token is remembered for `cache_seconds` (never past its expiry), for
    at most `max_cached` tokens; a refused one for `refused_seconds`, for at most
    `max_refused` tokens, apart, so a flood of bogus tokens costs one request each
    and neither grows memory nor pushes out the accepted ones.
    """

    def __init__(
        self,
        endpoint: str,
        audience: str,
        *,
        client_id: str,
        client_secret: str,
        cache_seconds: float = 60.0,
        max_cached: int = 10_000,
        refused_seconds: float = 10.0,
        max_refused: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint, self.audience = endpoint, audience
        credentials = base64.b64encode(f"{urllib.parse.quote(client_id)}:{urllib.parse.quote(client_secret)}".encode())
        self._headers = {"authorization": "Basic " + credentials.decode()}
        self.cache_seconds, self.refused_seconds, self._clock = cache_seconds, refused_seconds, clock
        self._accepted, self._refused = _Answers(max_cached), _Answers(max_refused)

    async def _introspect(self, token: str) -> AccessToken | None:
        """Ask the endpoint; raises `VerifierUnavailable` when it cannot answer."""
        try:
            answer = await fetch_json(self.endpoint, {"token": token, "token_type_hint": "access_token"}, self._headers)
        except Exception as error:  # unreachable, an error status, not JSON
            log.warning("the introspection endpoint %s did not answer: %s", self.endpoint, error)
            raise VerifierUnavailable(f"the introspection endpoint {self.endpoint} did not answer") from error
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return None
        if self.audience not in _audiences(answer):
            return None  # not issued for this server (an answer without `aud` cannot show that it was)
        return _token(answer)

    async def verify(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self._clock()
        cached = self._accepted.get(digest, now) or self._refused.get(digest, now)
        if cached is not None:
            return cached[1]
        found = await self._introspect(token)
        if found is None:
            self._refused.put(digest, now + self.refused_seconds, None)
        else:
            until = now + self.cache_seconds
            self._accepted.put(digest, until if found.expires_at is None else min(until, found.expires_at), found)
        return found
