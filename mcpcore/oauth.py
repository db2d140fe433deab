"""Token verifiers for real authorization servers: JWT access tokens (JWKS) and RFC 7662 introspection.

Both accept only tokens issued for this server: a JWT's `aud` must name the
resource, and so must an introspection answer's `aud` when it has one. Key sets,
metadata and introspection answers are fetched with the standard library in a
worker thread (the loop never blocks) and cached with a bound. `JwtVerifier` needs
PyJWT with its crypto extra (`pip install 'mcpcore[jwt]'`), imported only when one
is built.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import time
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable, Mapping

import anyio.to_thread

from .auth import AccessToken

__all__ = ["IntrospectionVerifier", "JwtVerifier"]

log = logging.getLogger(__name__)
FETCH_TIMEOUT = 10.0  # seconds for one metadata, key set or introspection request
MAX_RESPONSE_BYTES = 1024 * 1024


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


def _token(claims: Mapping[str, Any]) -> AccessToken | None:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return None
    client = claims.get("client_id", claims.get("azp"))
    expiry = claims.get("exp")
    return AccessToken(
        subject,
        client if isinstance(client, str) else None,
        _scopes(claims),
        float(expiry) if isinstance(expiry, (int, float)) and not isinstance(expiry, bool) else None,
        dict(claims),
    )


class JwtVerifier:
    """JWT access tokens signed by `issuer`, for `audience` (this server's resource URL).

    The key set comes from `jwks_url`, or from the issuer's RFC 8414 / OpenID
    metadata; it is refreshed every `cache_seconds`, and at most once a minute when a
    token names a key it does not hold (a key rotation). `jwks=` gives a fixed key set
    (a JWKS document) instead, never fetched.
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
        leeway: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import jwt
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise ImportError("JwtVerifier needs PyJWT: pip install 'mcpcore[jwt]'") from None
        self._jwt = jwt
        self.issuer, self.audience = issuer, audience
        self.algorithms = tuple(algorithms)
        self.cache_seconds, self.leeway, self._clock = cache_seconds, leeway, clock
        self._jwks_url = jwks_url
        self._keys: dict[str, Any] = {}
        self._fetched_at = float("-inf")
        self._fixed = jwks is not None
        if jwks is not None:
            self._keys = self._load(jwks)
        self._lock = anyio.Lock()

    def _load(self, document: Any) -> dict[str, Any]:
        """The usable keys of a JWKS document, by key id."""
        keys = {}
        for entry in document.get("keys", []) if isinstance(document, Mapping) else []:
            try:
                keys[entry.get("kid", "")] = self._jwt.PyJWK(entry).key
            except Exception:  # a key of a type or algorithm we cannot use: skip it
                log.debug("skipped a key of %s: %r", self._jwks_url or "the given key set", entry.get("kid"))
        return keys

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

    async def _refresh(self, why_now: bool) -> None:
        if self._fixed:
            return
        async with self._lock:
            age = self._clock() - self._fetched_at
            if age < (60.0 if why_now else self.cache_seconds):
                return  # fetched recently (perhaps by a concurrent caller)
            if self._jwks_url is None:
                self._jwks_url = await self._discover()
            self._keys, self._fetched_at = self._load(await fetch_json(self._jwks_url)), self._clock()

    async def verify(self, token: str) -> AccessToken | None:
        jwt = self._jwt
        try:
            kid = jwt.get_unverified_header(token).get("kid", "")
        except jwt.PyJWTError:
            return None
        await self._refresh(why_now=False)
        if kid not in self._keys:
            await self._refresh(why_now=True)
        key = self._keys.get(kid)
        if key is None:
            return None
        try:
            claims = jwt.decode(
                token, key, algorithms=list(self.algorithms), audience=self.audience, issuer=self.issuer,
                leeway=self.leeway, options={"require": ["exp", "sub", "aud", "iss"]},
            )
        except jwt.PyJWTError:
            return None
        return _token(claims)


class IntrospectionVerifier:
    """Opaque tokens checked at an RFC 7662 introspection endpoint, with the server's client credentials.

    An active answer is cached for `cache_seconds` (never past the token's expiry),
    for at most `max_cached` tokens.
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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint, self.audience = endpoint, audience
        credentials = base64.b64encode(f"{urllib.parse.quote(client_id)}:{urllib.parse.quote(client_secret)}".encode())
        self._headers = {"authorization": "Basic " + credentials.decode()}
        self.cache_seconds, self.max_cached, self._clock = cache_seconds, max_cached, clock
        self._cache: collections.OrderedDict[str, tuple[float, AccessToken]] = collections.OrderedDict()

    async def verify(self, token: str) -> AccessToken | None:
        now = self._clock()
        cached = self._cache.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        self._cache.pop(token, None)
        answer = await fetch_json(self.endpoint, {"token": token, "token_type_hint": "access_token"}, self._headers)
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return None
        audiences = _audiences(answer)
        if self.audience not in audiences:
            return None  # not issued for this server (an answer without `aud` cannot show that it was)
        found = _token(answer)
        if found is None:
            return None
        until = now + self.cache_seconds if found.expires_at is None else min(now + self.cache_seconds, found.expires_at)
        self._cache[token] = (until, found)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        return found
