"""`Context`: what a tool, resource or prompt function can know and do mid-call.

Injected into any parameter annotated `Context`. It reads the request's
`_meta` (client capabilities and info, progress token, log level) and sends
request-scoped notifications through the call's writer, only when the client
asked for them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from .._runtime.call import Call, Writer
from .._runtime.clientstate import ClientState, ClientStates
from .._runtime.isolate import IsolatedPool

from .._runtime.idempotency import Idempotency, Scope
from .._runtime.lifespan import Lifespan
from .._runtime.results import ResultPages
from .._runtime.threads import ThreadPool
from .._wire.jsonrpc import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    encode_notification,
    missing_capability,
)

if TYPE_CHECKING:
    from .._wire.protocol import Route
    from ..auth import AccessToken

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}


def missing_capabilities(declared: Any, required: dict[str, Any]) -> dict[str, Any]:
    """The part of `required` that `declared` lacks (nested objects compared key by key)."""
    missing: dict[str, Any] = {}
    for key, needed in required.items():
        have = declared.get(key) if isinstance(declared, dict) else None
        if have is None:
            missing[key] = needed
        elif isinstance(needed, dict) and needed:
            deeper = missing_capabilities(have, needed)
            if deeper:
                missing[key] = deeper
    return missing


class Host(Protocol):
    """What a context reads of its server (`Server` is one): its settings, threads and lifespan."""

    strict: bool
    mask_errors: bool
    threads: ThreadPool
    isolated: IsolatedPool
    lifespan: Lifespan[Any]
    client_states: ClientStates
    idempotency: Idempotency
    result_pages: ResultPages


class Context:
    """Per-call facts and request-scoped notifications (progress, log messages)."""

    __slots__ = ("_call", "_writer", "_server", "request_id", "meta", "_log_rank", "state", "answers")

    def __init__(self, call: Call, writer: Writer, meta: dict[str, Any], server: Host) -> None:
        self._call = call
        self._writer = writer
        self._server = server
        self.request_id = call.message.get("id")
        self.meta = meta
        self.state: Any = None  # the state sealed by an earlier InputRequired, on a retry
        self.answers: dict[str, Any] = {}  # validated answers to what was asked, by name
        level = meta.get(META_LOG_LEVEL)
        self._log_rank = _LEVEL_RANK.get(level) if isinstance(level, str) else None

    def serving(self, server: Host) -> Context:
        """This call's context for an item of another server (one mounted on this call's, `Server.mount`): the
        same call, stream, `_meta`, retry state and answers; that server's settings, threads, lifespan and
        client state."""
        other = Context(self._call, self._writer, self.meta, server)
        other.state, other.answers = self.state, self.answers
        return other

    def call_as(self, route: Route, field: str, value: str) -> Call:
        """This call as the mounted server's middleware sees it: its params' `field` (`name`, `uri`) is the
        item's own, its route the item's; the same caller."""
        call = self._call
        params = call.message.get("params")
        message = {**call.message, "params": {**(params if isinstance(params, dict) else {}), field: value}}
        return dataclasses.replace(call, message=message, route=route, task=None)

    @property
    def protocol_version(self) -> str:
        return self.meta[META_VERSION]

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.meta[META_CAPABILITIES]

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.meta.get(META_CLIENT_INFO)

    @property
    def strict(self) -> bool:
        """Whether arguments are taken only as sent, with no coercion (`Server(strict=True)`)."""
        return self._server.strict

    @property
    def masks_errors(self) -> bool:
        """Whether a tool's unexpected exception is hidden from the client (`Server(mask_errors=True)`)."""
        return self._server.mask_errors

    @property
    def threads(self) -> ThreadPool:
        """The server's worker threads: `await ctx.threads.run(fn, *args)` runs blocking code off the loop."""
        return self._server.threads

    @property
    def isolated(self) -> IsolatedPool:
        """The server's worker processes for isolated tools (`@server.tool(isolate=True)`)."""
        return self._server.isolated

    @property
    def lifespan(self) -> Any:
        """What the server's lifespan start-up yielded (`Server(lifespan=...)`); None without one."""
        return self._server.lifespan.value

    @property
    def client_state(self) -> ClientState:
        """The calling client's state, a small JSON mapping kept between its calls (`await
        ctx.client_state.get(key)`, `set`, `delete`): its 2025-era session's, the stdio process's, or
        on a stateless request its principal's and `_meta["dev.mcpcore/clientStateKey"]`'s (-32602
        when it names neither). Made on use: a call that never reads it pays nothing."""
        call = self._call
        return self._server.client_states.of(call.session, getattr(self._writer, "client_place", None), call.principal,
                                             self.meta)

    @property
    def idempotency(self) -> Idempotency:
        """The server's idempotent tools' bounds and store (`Server(idempotency=...)`)."""
        return self._server.idempotency

    @property
    def caller_scope(self) -> Scope | None:
        """Whose an idempotent tool's stored results are: the principal, else the 2025-era session, else the
        stdio process (its calls all come from one client); None for an anonymous stateless caller."""
        call = self._call
        if call.principal is not None:
            return ("principal", call.principal)
        session = call.session
        if session is not None and session.id is not None and not session.one_request:
            return ("session", session.id)
        if getattr(self._writer, "client_place", None) is not None:
            return ("process", self._server.idempotency.process)
        return None

    @property
    def result_owner(self) -> str:
        """Who may read the rest of a result this call cut: its `caller_scope`; for an anonymous stateless
        caller anyone holding the link (its random id is then the secret)."""
        scope = self.caller_scope
        return "" if scope is None else f"{scope[0]}:{scope[1]}"

    async def fit_result(self, result: dict[str, Any], limit: int) -> dict[str, Any]:
        """A tool's result within `limit` bytes: itself, or its first part and a link to the rest."""
        return await self._server.result_pages.fit(result, limit, self.result_owner)

    @property
    def principal(self) -> str | None:
        """The authenticated caller's subject; None without authentication (stdio, or no `Server(auth=...)`)."""
        return self._call.principal

    @property
    def auth(self) -> AccessToken | None:
        """The caller's verified access token (subject, client id, scopes, expiry, claims); None without one."""
        return self._call.auth

    @property
    def headers(self) -> Mapping[str, str]:
        """The HTTP request's headers (lower-case names, read-only); empty on stdio."""
        return self._call.headers

    @property
    def peer(self) -> tuple[Any, ...] | None:
        """The HTTP client's socket address, e.g. `("127.0.0.1", 50312)`; None on stdio."""
        return self._call.peer

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this call (poll it from sync code)."""
        return self._call.cancelled

    def has_capability(self, **required: Any) -> bool:
        """`ctx.has_capability(elicitation={})` → whether the client declared it."""
        return not missing_capabilities(self.client_capabilities, required)

    def answer(self, name: str) -> Any:
        """The validated answer to the input request `name` (None if not answered):
        an `ElicitAnswer`, a `SampleAnswer` or a list of `Root`."""
        return self.answers.get(name)

    def can_ask(self, request: Any) -> bool:
        """Whether the client declared what an input request (`Elicit`, `Sample`, ...) needs."""
        return request.required_capability(self.client_capabilities) is None

    def require_capability(self, **required: Any) -> None:
        """Raise the `-32021` error naming what the client did not declare."""
        missing = missing_capabilities(self.client_capabilities, required)
        if missing:
            raise missing_capability(missing)

    async def send_notification(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification on this call's stream (nothing once it is cancelled)."""
        if not self._call.cancelled:
            await self._writer.notify(encode_notification(method, params))

    async def close_stream(self) -> None:
        """End this call's HTTP response stream now, before the result (2025-11-25 sessions).

        The call goes on; the client reconnects with `GET` and `Last-Event-ID` and
        receives what follows, the result included (the SSE polling pattern). On
        other wires there is no such stream, and nothing happens.
        """
        close = getattr(self._writer, "close_stream", None)
        if close is not None:
            await close()

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress; sent only when the request carried a `progressToken`."""
        token = self.meta.get("progressToken")
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.send_notification("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message; only when the request set a log level at or below `level`."""
        rank = _LEVEL_RANK.get(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if self._log_rank is None or rank < self._log_rank:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.send_notification("notifications/message", params)

    async def debug(self, data: Any) -> None:
        await self.log("debug", data)

    async def info(self, data: Any) -> None:
        await self.log("info", data)

    async def warning(self, data: Any) -> None:
        await self.log("warning", data)

    async def error(self, data: Any) -> None:
        await self.log("error", data)
