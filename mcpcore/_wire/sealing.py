"""Sealed `requestState`: integrity, expiry and binding for state sent through clients.

A sealed token is `v1.<payload>.<mac>` (base64url). The payload carries the
handler's state, an expiry, what was asked, and a digest binding it to one
request: the method, the tool/prompt name or URI, a digest of the arguments
and the authenticated principal. The MAC is HMAC-SHA256 under the first key of
a rotation list; any listed key verifies. The seal gives integrity, expiry and
binding, not confidentiality (the payload is readable) and not single use.
"""

from __future__ import annotations

import base64
import binascii
import os
import time
from typing import Any, Sequence

import orjson

from .jsonrpc import invalid_params

VERSION = "v1"
DEFAULT_TTL_SECONDS = 600
KEYS_ENV = "MCPCORE_STATE_KEYS"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def binding(method: str, target: str, arguments: Any, principal: str | None) -> str:
    """A digest naming one request: method, name or URI, arguments, principal."""
    import hashlib  # here, not at import: idle servers do not pay for it

    material = orjson.dumps([method, target, arguments, principal], option=orjson.OPT_SORT_KEYS)
    return _b64(hashlib.sha256(material).digest())


def keys_from_env() -> list[bytes]:
    """Keys from `MCPCORE_STATE_KEYS` (comma-separated; the first one signs)."""
    return [k.strip().encode() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]


class Sealer:
    """Seals and opens request state with HMAC-SHA256 under a key rotation list."""

    def __init__(self, keys: Sequence[str | bytes] | None = None, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        given = [k.encode() if isinstance(k, str) else bytes(k) for k in (keys or ())]
        source = "state_keys" if given else KEYS_ENV  # named in the error: a bad key may come from either
        given = given or keys_from_env()
        short = [len(k) for k in given if len(k) < 16]
        if short:
            raise ValueError(f"{source}: every key must be at least 16 bytes long, not {short[0]}")
        self.configured = bool(given)
        self.keys = given or [os.urandom(32)]
        self.ttl_seconds = ttl_seconds

    def _mac(self, key: bytes, body: str) -> bytes:
        import hashlib
        import hmac

        return hmac.new(key, f"{VERSION}.{body}".encode(), hashlib.sha256).digest()

    def seal(self, payload: dict[str, Any], bound_to: str) -> str:
        expires = round(time.time() + self.ttl_seconds, 3)
        body = _b64(orjson.dumps({**payload, "exp": expires, "bind": bound_to}))
        return f"{VERSION}.{body}.{_b64(self._mac(self.keys[0], body))}"

    def open(self, token: Any, bound_to: str) -> dict[str, Any]:
        """The payload of a genuine, fresh token for this request (else -32602)."""
        if not isinstance(token, str) or token.count(".") != 2:
            raise invalid_params("Invalid requestState: it is malformed; send back the value the server gave")
        version, body, mac = token.split(".")
        if version != VERSION:
            raise invalid_params(f"Invalid requestState: unknown format {version!r}")
        from hmac import compare_digest

        try:
            given = _unb64(mac)
        except (binascii.Error, ValueError):
            given = b""
        if _b64(given) != mac:  # one canonical spelling only: no padding, no +/, no stray low bits
            given = b""
        if not any(compare_digest(given, self._mac(key, body)) for key in self.keys):
            raise invalid_params("Invalid requestState: it was modified or not issued by this server")
        try:
            payload = orjson.loads(_unb64(body))
        except (binascii.Error, ValueError, orjson.JSONDecodeError):
            raise invalid_params("Invalid requestState: it is malformed; send back the value the server gave") from None
        if not isinstance(payload, dict) or payload.get("exp", 0) < time.time():
            raise invalid_params("Invalid requestState: it has expired; start the request again without it")
        if payload.get("bind") != bound_to:
            raise invalid_params("Invalid requestState: it was issued for a different request")
        return payload
