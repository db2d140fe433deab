"""The era adapter of `mcpcore.gateway`: which era the upstream speaks, and, for one that speaks only
the 2025 era, how its server-to-client requests during a forwarded call reach the calling client.

Era. At start the gateway's client probes with `server/discover` on the 2026-07-28 wire, as the
stdio binding's backward-compatibility rule says: a `DiscoverResult` or a recognised modern error
(`UnsupportedProtocolVersionError`) is a modern upstream; any other error, or no answer within
`PROBE_TIMEOUT`, is a 2025-era one, and the client falls back to `initialize` +
`notifications/initialized` (`Client.fall_back`), whose result stands for the discover answer.

Held calls. On a 2025-era session the upstream asks for input with real requests while the call is
open (`elicitation/create`, `sampling/createMessage`, `roots/list`). The gateway runs each forwarded
call in an asyncio task of its own (`HeldCall`), so the call stays in flight when the calling client
is asked: the upstream's request is raised as the gateway's own `InputRequired`, its state naming
the held call by a random key (sealed by mcpcore for a 2026 client; a 2025-era client gets the
request on its session from mcpcore's legacy layer, in the same call). The retry's answer goes back
to the held request, and the call goes on. A call waiting for its client is bounded in number
(`MAX_HELD`) and time (`hold`): one whose client never retries is cancelled upstream.

Which call asked: the client core answers a server request from the exchange it came in (HTTP:
`_ASKING`, set in the call's task) or from its reader (stdio, whose requests name no call): then it
is the one request in flight that is not already waiting for its client; with several, the gateway
cannot tell, and the upstream gets an error saying so. Requests forwarded as they are (a
`completion/complete`, an extension's method, the gateway's own list reads) count among those in
flight (`HeldCalls.unrelayed`) but relay no question: one asked during them, or in their HTTP
response stream, is refused, never handed to a call that happens to run beside them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Iterator, Mapping

import anyio

from .._app.context import LOG_LEVELS, Context
from .._wire.inputs import ElicitAnswer, InputRequired, Root, SampleAnswer
from .._wire.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, UNSUPPORTED_VERSION, McpError
from ..client import Client

log = logging.getLogger("mcpcore.gateway")

PROBE_TIMEOUT = 10.0  # seconds the server/discover probe may take before the upstream is taken for a 2025-era one
DEFAULT_HOLD = 300.0  # seconds a call held upstream waits for its client's retry
MAX_HELD = 128  # calls held upstream at once, each waiting for its client's answer
RELAYED_CAPABILITIES = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}  # on a 2025-era session
_KINDS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


@dataclass(frozen=True)
class UpstreamInput:
    """One input request of the upstream (an `input_required` entry, or a 2025-era server-to-client
    request), passed on as the upstream wrote it."""

    request: dict[str, Any]

    @property
    def kind(self) -> str:
        method = self.request.get("method")
        if method not in _KINDS:
            raise McpError(INTERNAL_ERROR, f"the upstream server asked for input by {method!r}, which is not an input request")
        return _KINDS[method]

    def required_capability(self, declared: Mapping[str, Any]) -> dict[str, Any] | None:
        if self.kind != "elicitation":
            return None if isinstance(declared.get(self.kind), dict) else {self.kind: {}}
        mode = (self.request.get("params") or {}).get("mode", "form")
        modes = declared.get("elicitation")
        if isinstance(modes, dict) and (mode in modes or (mode == "form" and not ({"form", "url"} & modes.keys()))):
            return None
        return {"elicitation": {mode: {}}}

    def to_request(self) -> dict[str, Any]:
        return {key: value for key, value in self.request.items() if key in ("method", "params")}


def wire_answer(answer: Any) -> dict[str, Any]:
    """A validated answer (`ctx.answers`) as the result object the upstream asked for."""
    if isinstance(answer, ElicitAnswer):
        return {"action": answer.action, "content": answer.content} if answer.content else {"action": answer.action}
    if isinstance(answer, SampleAnswer):
        sampled = {"role": answer.role, "content": answer.content, "model": answer.model}
        return sampled if answer.stop_reason is None else {**sampled, "stopReason": answer.stop_reason}
    roots: list[Root] = answer
    return {"roots": [{"uri": root.uri} if root.name is None else {"uri": root.uri, "name": root.name} for root in roots]}


async def relay(context: Context | None, notification: dict[str, Any],
                elsewhere: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> None:
    """An upstream call's progress or log notification, to the client whose call it is (filtered by its level).
    Any other notification heard with the call (a list change, a resource update) is not the call's: to `elsewhere`."""
    relayed = notification.get("params") or {}
    if notification.get("method") not in ("notifications/progress", "notifications/message"):
        if elsewhere is not None:
            await elsewhere(notification)
    elif context is None:
        log.debug("the upstream said, while its caller was away: %s %s", notification.get("method"), relayed)
    elif notification.get("method") == "notifications/progress" and "progress" in relayed:
        await context.progress(relayed["progress"], relayed.get("total"), relayed.get("message"))
    elif notification.get("method") == "notifications/message" and relayed.get("level") in LOG_LEVELS:
        await context.log(relayed["level"], relayed.get("data"), relayed.get("logger"))


async def settle_era(client: Client, timeout: float) -> dict[str, Any]:
    """The upstream's discover answer: `server/discover`, or (a 2025-era upstream) its `initialize` result
    in that shape, the client then on the 2025-era session. A modern error is raised as it came."""
    if not client.legacy:
        try:
            with anyio.fail_after(min(timeout, PROBE_TIMEOUT)):
                return await client.discover()
        except McpError as refused:
            if refused.code == UNSUPPORTED_VERSION:
                raise
            log.info("the upstream refused server/discover (%s): opening a 2025-era session", refused.message)
        except TimeoutError:
            log.info("the upstream did not answer server/discover: opening a 2025-era session")
        await client.fall_back()
    initialized = client.server_info
    if "logging" in (initialized.get("capabilities") or {}):
        client.log_level = "debug"  # each caller's own level filters its logs; set again on a renewed session
        await client.request("logging/setLevel", {"level": "debug"})
    return {"supportedVersions": [initialized.get("protocolVersion", client.era)],
            **{key: initialized[key] for key in ("capabilities", "instructions") if key in initialized},
            "_meta": {"io.modelcontextprotocol/serverInfo": initialized.get("serverInfo") or {}}}


_ASKING: contextvars.ContextVar[HeldCall | str | None] = contextvars.ContextVar("mcpcore_gateway_asking", default=None)
_KEYS = itertools.count(1)


class HeldCall:
    """One request forwarded on the upstream's 2025-era session, in a task of its own: what it asks the
    caller comes as events (the request and the future its answer goes to), then its end."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.context: Context | None = None  # the caller of the round under way; none while it is held
        self.events: asyncio.Queue[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]] | None] = asyncio.Queue()
        self.asked: dict[str, asyncio.Future[dict[str, Any]]] = {}  # questions out to the caller, by input name
        self.task: asyncio.Task[dict[str, Any]] | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self.names = (f"input-{number}" for number in itertools.count(1))

    def start(self, work: Coroutine[Any, Any, dict[str, Any]]) -> None:
        async def run() -> dict[str, Any]:
            _ASKING.set(self)
            return await work

        self.task = asyncio.get_running_loop().create_task(run())
        self.task.add_done_callback(lambda _: self.events.put_nowait(None))

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """The upstream's request, asked of the caller: its answer (an McpError for an error)."""
        answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.events.put_nowait((request, answered))
        return await answered

    @property
    def waiting(self) -> bool:
        """Whether the call waits for its caller (a question out or queued): it is not the one asking now."""
        return bool(self.asked) or not self.events.empty()

    def end(self, why: str) -> None:
        """Cancel the call upstream (the client core sends `notifications/cancelled`); its questions get an error."""
        if self.expiry is not None:
            self.expiry.cancel()
        if self.task is not None:
            self.task.cancel()
        for answered in self.asked.values():
            if not answered.done():
                answered.set_exception(McpError(INVALID_REQUEST, why))
        self.asked.clear()
        queued = []  # questions not yet asked of the caller get the same error (the end marker stays queued)
        while not self.events.empty():
            queued.append(self.events.get_nowait())
        for event in queued:
            if event is None:
                self.events.put_nowait(None)
            elif not event[1].done():
                event[1].set_exception(McpError(INVALID_REQUEST, why))


class HeldCalls:
    """The calls forwarded on a 2025-era upstream session, and those of them held for their client's answer."""

    def __init__(self, timeout: float, hold: float,
                 elsewhere: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> None:
        if hold <= 0:
            raise ValueError("the time a held upstream call waits for its client must be a positive number of seconds")
        self.timeout, self.hold = timeout, hold
        self.elsewhere = elsewhere  # what hears the notifications a call carries that are not its own
        self.calls: dict[str, HeldCall] = {}  # every call in flight upstream, by key
        self.held: dict[str, HeldCall] = {}  # those waiting for their client's retry
        self.plain: list[str] = []  # what each request in flight that relays no question is (see `unrelayed`)

    @contextlib.contextmanager
    def unrelayed(self, what: str) -> Iterator[None]:
        """Around a request on the session that relays no question (`what`: its method): a question in its
        HTTP response stream is refused, and on stdio it counts among the requests a question may come from."""
        self.plain.append(what)
        token = _ASKING.set(what)
        try:
            yield
        finally:
            _ASKING.reset(token)
            self.plain.remove(what)

    async def asked(self, request: dict[str, Any]) -> dict[str, Any]:
        """`Client.on_request` of the upstream's client: the upstream's request, asked of the call's caller."""
        call = _ASKING.get() or self._only_running(request.get("method"))
        if isinstance(call, str):
            raise McpError(METHOD_NOT_FOUND, f"the gateway relays {request.get('method')} only during a tool call, "
                                             f"a resource read or a prompt, not during {call}")
        return await call.ask(request)

    def _only_running(self, method: Any) -> HeldCall | str:
        running: list[HeldCall | str] = [call for call in self.calls.values() if not call.waiting]
        running += self.plain
        if len(running) == 1:
            return running[0]
        if not running:
            raise McpError(METHOD_NOT_FOUND, f"the gateway relays {method} only during a call from its client")
        raise McpError(INTERNAL_ERROR, f"the gateway cannot tell which of {len(running)} calls in flight sent {method} "
                                       "(a request on stdio names no call)")

    async def forward(self, client: Client, method: str, params: dict[str, Any], context: Context) -> dict[str, Any]:
        """`method` on the upstream's session; its result, or the next question raised as `InputRequired`.
        The retry (`context.state` naming a held call) answers the question and goes on with that call."""
        if context.state is None:
            call = self._start(client, method, params, context)
        else:
            call = self._resume(context)
        call.context = context
        try:
            while True:
                with anyio.fail_after(self.timeout):
                    event = await call.events.get()
                if event is None:
                    return self._ended(call, method)
                request, answered = event
                question = UpstreamInput(request)
                try:
                    missing = question.required_capability(context.client_capabilities)
                except McpError as error:
                    answered.set_exception(error)
                    continue
                if missing is not None:
                    answered.set_exception(McpError(METHOD_NOT_FOUND, f"the calling client cannot answer {request['method']}"
                                                                      f" (it declared no {question.kind} capability)"))
                    continue
                name = next(call.names)
                call.asked[name] = answered
                self._hold(call, method)
                raise InputRequired({name: question}, state={"held": call.key})  # type: ignore[dict-item]
        except InputRequired:
            raise
        except TimeoutError:
            self._drop(call, "the call timed out")
            raise McpError(INTERNAL_ERROR, f"the upstream server did not answer {method} within {self.timeout:g} s") from None
        except BaseException:
            self._drop(call, "the caller went away")
            raise
        finally:
            call.context = None

    def _start(self, client: Client, method: str, params: dict[str, Any], context: Context) -> HeldCall:
        call = HeldCall(f"{next(_KEYS)}-{secrets.token_urlsafe(12)}")

        async def heard(notification: dict[str, Any]) -> None:
            await relay(call.context, notification, self.elsewhere)

        call.start(client.send(method, params, progress="progressToken" in context.meta, on_notification=heard))
        self.calls[call.key] = call
        return call

    def _resume(self, context: Context) -> HeldCall:
        key = context.state.get("held") if isinstance(context.state, dict) else None
        call = self.held.pop(key, None) if isinstance(key, str) else None
        if call is None:
            raise McpError(INVALID_REQUEST, "the upstream call this retry answers is no longer held (answered already, "
                                            f"or not retried within {self.hold:g} s)")
        if call.expiry is not None:
            call.expiry.cancel()
        for name, answered in call.asked.items():
            if name in context.answers:
                answered.set_result(wire_answer(context.answers[name]))
            else:
                answered.set_exception(McpError(INVALID_REQUEST, f"the client's retry did not answer {name!r}"))
        call.asked.clear()
        return call

    def _hold(self, call: HeldCall, method: str) -> None:
        if len(self.held) >= MAX_HELD:
            self._drop(call, "too many calls wait for their clients")
            raise McpError(INTERNAL_ERROR, f"{method} asks its client for input, and {MAX_HELD} upstream calls wait for "
                                           "their clients' answers already; try again later")
        self.held[call.key] = call
        call.expiry = asyncio.get_running_loop().call_later(self.hold, self._expire, call)

    def _expire(self, call: HeldCall) -> None:
        if self.held.pop(call.key, None) is not None:
            log.info("a call held upstream was not retried by its client within %g s: cancelled", self.hold)
            self._drop(call, f"the client did not answer within {self.hold:g} s")

    def _drop(self, call: HeldCall, why: str) -> None:
        self.calls.pop(call.key, None)
        self.held.pop(call.key, None)
        call.end(why)

    def _ended(self, call: HeldCall, method: str) -> dict[str, Any]:
        self.calls.pop(call.key, None)
        assert call.task is not None
        try:
            return call.task.result()
        except ConnectionError as gone:
            raise McpError(INTERNAL_ERROR, f"the upstream server went away during {method} ({gone})") from None

