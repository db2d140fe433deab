"""Authorization as an OAuth 2.1 resource server: verify bearer tokens, challenge, publish metadata.

Sans-IO, like the rest of the core: `Auth.authenticate` takes the request's
`Authorization` header and answers with an `AccessToken` or an `AuthFailure`
(status, `WWW-Authenticate` value, message); the HTTP transport turns a failure
into its 401 or 403. Tokens are checked by a `TokenVerifier`, which must accept
only tokens issued for this server (its audience or resource): tokens are never
passed on to anything else. stdio is unauthenticated by design, as the
specification says; its calls have no principal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Protocol

__all__ = ["AccessToken", "Auth", "AuthFailure", "StaticTokens", "TokenVerifier", "VerifierUnavailable"]


@dataclass(frozen=True)
class AccessToken:
    """What a verified token says about the caller."""

    subject: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None  # seconds since the epoch, when the token stops being accepted here
    claims: Mapping[str, Any] = field(default_factory=dict)

    def lifetime(self, now: float | None = None) -> float | None:
        """Seconds until the token expires (0 once it has), or None when it does not: how long a
        stream opened with it may last."""
        if self.expires_at is None:
            return None
        return max(0.0, self.expires_at - (time.time() if now is None else now))


class TokenVerifier(Protocol):
    """Checks a bearer token: the caller it names, or None when it is not valid here.

    A token that is malformed, forged, expired or for another server is None (a 401),
    never an exception; a verifier that cannot decide now (its key set or introspection
    endpoint unreachable) raises `VerifierUnavailable` (a 503 with `Retry-After`).
    """

    async def verify(self, token: str) -> AccessToken | None: ...


class VerifierUnavailable(Exception):
    """A verifier cannot decide now: the request gets 503 with `Retry-After`. The verifier has
    said why in its own log when its fetch failed, so the transport does not log it per request."""


class StaticTokens:
    """A fixed table of tokens, for development and tests (issued for this server by construction)."""

    def __init__(self, tokens: Mapping[str, AccessToken]) -> None:
        self._tokens = dict(tokens)

    async def verify(self, token: str) -> AccessToken | None:
        return self._tokens.get(token)


@dataclass(frozen=True)
class AuthFailure:
    """Why a request may not proceed: 401 (no valid token) or 403 (a scope is missing)."""

    status: int
    challenge: str  # the WWW-Authenticate header value
    message: str


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Auth:
    """A server's authorization settings: who verifies tokens, and what it tells clients.

    `resource` is the MCP endpoint's canonical URL (`https://mcp.example.com/mcp`);
    `authorization_servers` the issuers clients get tokens from; `scopes` what every
    request needs (tools can require more, `@server.tool(scopes=[...])`).
    `implied_scopes` maps a broader scope to the narrower ones it implies
    (`{"files:admin": ["files:write"], "files:write": ["files:read"]}`), followed
    transitively: a verified token holds what it names and what that implies. Scopes
    imply nothing by their names alone; a verifier may also expand scopes itself.
    `list_by_scope=True` lists (tools, prompts, resources, templates) only what the token's
    scopes permit; by default lists show everything, so a client learns of what it may not
    use yet and, using it, gets the 403 that names the scopes to step up to.
    """

    verifier: TokenVerifier
    resource: str
    authorization_servers: tuple[str, ...]
    scopes: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    resource_name: str | None = None
    implied_scopes: Mapping[str, Iterable[str]] = field(default_factory=dict, hash=False)
    list_by_scope: bool = False

    def __post_init__(self) -> None:
        if not self.resource.startswith(("https://", "http://")):
            raise ValueError("Auth(resource=...) must be the MCP endpoint's absolute URL, e.g. https://mcp.example.com/mcp")
        if not self.authorization_servers:
            raise ValueError("Auth(authorization_servers=...) must name at least one issuer")
        if any(isinstance(narrower, str) for narrower in self.implied_scopes.values()):
            raise ValueError('Auth(implied_scopes=...) maps a scope to a list of scopes, e.g. {"files:admin": ["files:read"]}')
        object.__setattr__(self, "implied_scopes", {broad: tuple(narrower) for broad, narrower in self.implied_scopes.items()})

    @property
    def metadata_url(self) -> str:
        """Where the RFC 9728 document is served: the path-suffixed well-known URI."""
        scheme, _, rest = self.resource.partition("://")
        authority, slash, path = rest.partition("/")
        suffix = f"/{path}".rstrip("/") if slash else ""
        return f"{scheme}://{authority}/.well-known/oauth-protected-resource{suffix}"

    @property
    def metadata_paths(self) -> tuple[str, ...]:
        """The paths that serve the document: path-suffixed first, then the root form."""
        path = self.metadata_url.split("://", 1)[1].partition("/")[2]
        return tuple(dict.fromkeys(("/" + path, "/.well-known/oauth-protected-resource")))

    def metadata(self) -> dict[str, Any]:
        """The Protected Resource Metadata document (RFC 9728)."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        supported = tuple(dict.fromkeys((*self.scopes_supported, *self.scopes)))
        if supported:
            document["scopes_supported"] = list(supported)
        if self.resource_name:
            document["resource_name"] = self.resource_name
        return document

    def _challenge(self, scopes: Iterable[str] = (), error: str | None = None, description: str | None = None) -> str:
        parts = []
        if error:
            parts.append(f"error={_quoted(error)}")
        if description:
            parts.append(f"error_description={_quoted(description)}")
        scope = " ".join(scopes)
        if scope:
            parts.append(f"scope={_quoted(scope)}")
        parts.append(f"resource_metadata={_quoted(self.metadata_url)}")
        return "Bearer " + ", ".join(parts)

    async def authenticate(self, authorization: str | None, now: float | None = None) -> AccessToken | AuthFailure:
        """The caller named by an `Authorization: Bearer` header, or the 401 to answer."""
        if authorization is None:
            return AuthFailure(401, self._challenge(self.scopes), "Authorization required: send a bearer token")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return self._invalid("the Authorization header must be 'Bearer <token>'")
        found = await self.verifier.verify(token)
        if found is None:
            return self._invalid("the token is not valid for this server")
        if found.expires_at is not None and found.expires_at <= (time.time() if now is None else now):
            return self._invalid("the token has expired")
        if self.implied_scopes:
            found = replace(found, scopes=self.granted(found.scopes))
        return self.check_scopes(found, self.scopes) or found

    def granted(self, scopes: Iterable[str]) -> frozenset[str]:
        """The scopes named and, transitively, every scope they imply (`implied_scopes`)."""
        held, unexpanded = set(scopes), list(scopes)
        while unexpanded:
            for narrower in self.implied_scopes.get(unexpanded.pop(), ()):
                if narrower not in held:
                    held.add(narrower)
                    unexpanded.append(narrower)
        return frozenset(held)

    def _invalid(self, why: str) -> AuthFailure:
        return AuthFailure(401, self._challenge(self.scopes, "invalid_token", why), f"Unauthorized: {why}")

    def check_scopes(self, token: AccessToken, required: Iterable[str]) -> AuthFailure | None:
        """The 403 naming every scope an operation needs, when the token lacks one of them."""
        needed = tuple(required)
        if not needed or set(needed) <= token.scopes:
            return None
        missing = ", ".join(s for s in needed if s not in token.scopes)
        why = f"this operation needs the scope(s) {missing}"
        return AuthFailure(403, self._challenge(needed, "insufficient_scope", why), f"Forbidden: {why}")
