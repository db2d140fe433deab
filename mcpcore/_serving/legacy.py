"""The legacy (2025-era) wire: the same app served to clients that open with `initialize`.

`LegacyDispatcher.handle` answers a request of a `Session`: `initialize`
negotiates (a supported version answers with itself, an unknown one with the
newest legacy version), then only `ping` is served until
`notifications/initialized`; after that `ping`, `logging/setLevel`,
`resources/subscribe`/`unsubscribe` (a session follows only resources the
server has, as many as a subscription may) and every feature method the modern
dispatcher has, run by the same handlers. Results follow the negotiated
version's schema: no `resultType`, cache hints or serverInfo stamp, no
structured output or output schemas before 2025-06-18, no icons before
2025-11-25, `-32002` for an unknown
resource. A handler's `InputRequired` becomes real server-to-client requests
on the call's stream; the answers re-enter the handler with its state in the
clear. `Context` reads the session where the modern wire reads `_meta`.
A shared session (`Session.store`) records what `initialize`,
`notifications/initialized`, `logging/setLevel` and `resources/subscribe` or
`unsubscribe` change before the client hears of it, so its next request may go
to another process; `mirror` is a process's copy of a session opened elsewhere.
A stateless server's session lives for one request (`Session.one_request`): its
`initialize` offers no list changes or subscriptions, and what would need the
client later (`resources/subscribe`, a server-to-client request) is refused, as
server-to-client requests are wherever `Session.cannot_ask` says why.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Awaitable

import orjson

from .._app.context import LOG_LEVELS, Context
from .._runtime.call import Call, Writer
from .._runtime.defaults import SESSION_MAX_URI_LENGTH
from .._runtime.session import Session, SessionRecord, Sessions
from .._runtime.subscriptions import PROMPTS, RESOURCES, TOOLS
from .._wire.icons import has_icons
from .._wire.inputs import InputRequired, read_answers
from .._wire.jsonrpc import (
    INVALID_REQUEST,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    McpError,
    ResourceNotFound,
    invalid_params,
    request_params,
)
from .._wire.protocol import INPUT_METHODS, Route
from .shape import Handler, Methods

log = logging.getLogger("mcpcore.legacy")

MAX_INPUT_ROUNDS = 8  # server-to-client request rounds one call may take
INPUT_TIMEOUT = 300.0  # seconds the client has to answer one server-to-client request
# Result fields the 2025-era schemas do not have.
_MODERN_ONLY = frozenset({"resultType", "ttlMs", "cacheScope", "_meta"})
# What versions before 2025-06-18 lack (structured tool output).
_WITHOUT_STRUCTURED = _MODERN_ONLY | {"structuredContent"}
_NEEDS_SESSION = frozenset({"listChanged", "subscribe"})  # capabilities a stateless server cannot keep
_LISTED = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resourceTemplates",
           "prompts/list": "prompts"}  # list methods, and the field of their items


def negotiate(requested: Any) -> str:
    """The version to answer `initialize` with: the requested one if supported, else the newest."""
    return requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]


def has_structured_output(version: str) -> bool:
    return version >= "2025-06-18"


def _drop_unknown_fields(result: dict[str, Any], field: str, version: str) -> None:
    """A list's items without what the negotiated version lacks: icons before 2025-11-25,
    output schemas before 2025-06-18."""
    dropped = set() if has_icons(version) else {"icons"}
    if field == "tools" and not has_structured_output(version):
        dropped.add("outputSchema")
    if dropped:
        result[field] = [{k: v for k, v in item.items() if k not in dropped} for item in result[field]]


LEGACY_TEXT_TAIL = b"}]}}"  # what follows a text answer's text: its result is that one block (`encode_text_result`)


def legacy_result(result: dict[str, Any], version: str) -> dict[str, Any]:
    """A result as the negotiated version's schema has it."""
    dropped = _MODERN_ONLY if has_structured_output(version) else _WITHOUT_STRUCTURED
    if dropped.isdisjoint(result):  # a tool's result mostly: nothing to take out, no copy
        return result
    return {key: value for key, value in result.items() if key not in dropped}


class LegacyDispatcher:
    """Answers the requests of legacy sessions with the modern dispatcher's method handlers."""

    def __init__(self, dispatcher: Methods) -> None:
        self.dispatcher = dispatcher
        self.server = dispatcher.server

    def notified(self, session: Session, message: dict[str, Any]) -> Awaitable[None] | None:
        """A notification from a legacy client (cancellation is the transport's: it knows the calls);
        for a shared session, what records its change (to await before the 202)."""
        method = message["method"]
        if method == "notifications/initialized":
            return session.change({"initialized": True}) if session.negotiated else None
        if method not in ("notifications/cancelled", "notifications/roots/list_changed", "notifications/progress"):
            log.debug("ignored a %s notification from a legacy client", method)
        return None

    def mirror(self, record: SessionRecord, sessions: Sessions) -> Session:
        """This process's copy of a session another process opened (from its shared record)."""
        session = Session(record.id, record.principal, store=sessions.store, ttl=sessions.idle_timeout)
        session.open(record.version, {"clientInfo": record.client_info, "capabilities": record.capabilities},
                     self._offered(), self.server.bus)
        session.follow(record)
        return session

    def _offered(self) -> dict[str, bool]:
        server = self.server
        return {TOOLS: server.has_tools(), PROMPTS: server.has_prompts(), RESOURCES: server.has_resources()}

    async def dispatch(self, call: Call, writer: Writer) -> bytes:
        """The serialized result of a session's request (McpError for an error response)."""
        return orjson.dumps(await self._answer(call, writer))

    async def _answer(self, call: Call, writer: Writer) -> dict[str, Any]:
        session = call.session
        assert isinstance(session, Session)
        method = call.message["method"]
        params = request_params(call.message)
        if method == "initialize":
            result = self._initialize(session, params)
            if session.store is not None:
                await session.share()  # before the reply names the session: its next request may go elsewhere
            return result
        if not session.negotiated:
            raise McpError(INVALID_REQUEST, f"{method} before initialize: open the session with initialize first")
        if method == "ping":
            return {}
        if not session.initialized:
            raise McpError(
                INVALID_REQUEST,
                f"{method} before notifications/initialized: until the client sends it, only ping is served",
            )
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LOG_LEVELS:
                raise invalid_params(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
            if (recording := session.change({"level": level})) is not None:  # shared: recorded first
                await recording
            return {}
        if method in ("resources/subscribe", "resources/unsubscribe"):
            if session.one_request:
                raise McpError(METHOD_NOT_FOUND, f"{method} needs a session, and this server runs stateless: no "
                               "update could reach the client after this answer (initialize offers no subscribe)")
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise invalid_params(f'{method} needs a string "uri"')
            if not self.server.has_resources():
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {method!r}; this server offers no resources")
            follow = method == "resources/subscribe"
            if session.follows(uri) == follow:
                return {}  # already so: a repeat changes nothing and counts once
            if follow:
                self._may_follow(session, uri)
            if (recording := session.change({method.rpartition("/")[2]: uri})) is not None:
                await recording
            return {}
        handler = self.dispatcher.legacy_handler(method)
        if handler is None:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method!r}")
        route = call.route or self.dispatcher.route(call.message)
        context = Context(call, writer, _session_meta(session, params), self.dispatcher.server)
        try:
            try:
                result = await handler(route, params, context)
            except InputRequired as ask:
                if method not in INPUT_METHODS:
                    raise
                result = await self._with_requests(ask, handler, route, params, context, session, writer)
        except ResourceNotFound as missing:
            raise as_legacy(missing) from None
        if isinstance(result, bytes):  # a cached modern page: read back for this wire
            result = orjson.loads(result)
        version: str = session.version  # type: ignore[assignment]
        if method in _LISTED:
            _drop_unknown_fields(result, _LISTED[method], version)
        return legacy_result(result, version)

    def asked(self, ask: InputRequired, call: Call, writer: Writer) -> Awaitable[dict[str, Any] | bytes]:
        """What a session's plain tool call that asks for input answers (`Dispatcher._plain_call`): the
        questions go to the client over the session, and the call runs again, the general way, with the
        answers."""
        session, params = call.session, call.message["params"]
        assert isinstance(session, Session) and call.route is not None
        context = Context(call, writer, _session_meta(session, params), self.dispatcher.server)
        handler = self.dispatcher.legacy_handler("tools/call")
        assert handler is not None  # the call's tool is offered
        return self._with_requests(ask, handler, call.route, params, context, session, writer)

    def _may_follow(self, session: Session, uri: str) -> None:
        """A session follows as many URIs as a subscription may (-32602 past `max_subscription_uris`), each
        of a bounded length (its record holds them all), and only resources: a URI no resource or
        template names is -32002."""
        limit = self.server.subscriptions.max_uris
        if session.followed >= limit:
            raise invalid_params(f"A session may follow at most {limit} resource URIs; unsubscribe from one first")
        if len(uri) > SESSION_MAX_URI_LENGTH:
            raise invalid_params(f"A followed resource URI may be at most {SESSION_MAX_URI_LENGTH} characters long; "
                                 f"this one has {len(uri)}")
        if self.dispatcher.find_resource(uri) is None:
            raise McpError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})

    def _initialize(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        if session.negotiated:
            raise McpError(INVALID_REQUEST, "This session is already initialized; a second initialize is refused")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise invalid_params('initialize needs a string "protocolVersion"')
        if not isinstance(params.get("capabilities", {}), dict):
            raise invalid_params('initialize "capabilities" must be an object')
        server = self.server
        version = negotiate(requested)
        session.open(version, params, self._offered(), server.bus)
        capabilities = server.capabilities(extensions=False)
        if session.one_request:  # nothing reaches a client between its requests: no list changes, no subscriptions
            capabilities = {name: {key: value for key, value in offer.items() if key not in _NEEDS_SESSION}
                            for name, offer in capabilities.items()}
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": server.server_info(icons=has_icons(version)),
        }
        if server.instructions:
            result["instructions"] = server.instructions
        return result

    async def _with_requests(
        self, ask: InputRequired, handler: Handler, route: Route, params: dict[str, Any], context: Context, session: Session,
        writer: Writer,
    ) -> dict[str, Any] | bytes:
        """The handler asked (`ask`): each `InputRequired` becomes requests to the client, answered in turn,
        and the handler runs again with the answers."""
        if session.cannot_ask is not None:  # refused before anything is sent: no answer could come back
            raise McpError(INVALID_REQUEST, f"{route.method} asks the client for input, which {session.cannot_ask}")
        for round_number in range(1, MAX_INPUT_ROUNDS + 1):
            _, payload = ask.result(context.client_capabilities)  # -32021 unless declared
            raw = {}
            for name, request in ask.requests.items():
                wire = request.to_request()
                wire_params = _for_version(wire.get("params"), session.version)  # type: ignore[arg-type]
                try:
                    raw[name] = await session.request(wire["method"], wire_params, writer, INPUT_TIMEOUT)
                except McpError as failed:
                    if route.method != "tools/call":
                        raise  # a protocol error for prompts and resources
                    text = f"Could not get input {name!r} from the client: {failed.message}"
                    return {"content": [{"type": "text", "text": text}], "isError": True}
            context.answers = read_answers(raw, payload["asked"])
            context.state = payload["state"]
            if round_number == MAX_INPUT_ROUNDS:
                break
            try:
                return await handler(route, params, context)
            except InputRequired as again:
                ask = again
        raise McpError(INVALID_REQUEST, f"Gave up after {MAX_INPUT_ROUNDS} rounds of questions to the client")


def _for_version(params: dict[str, Any] | None, version: str) -> dict[str, Any] | None:
    """Request params as the negotiated version has them: no elicitation `mode` before
    2025-11-25, and a fresh `elicitationId` for a URL elicitation (which that version requires)."""
    if params is None:
        return None
    if version < "2025-11-25" and params.get("mode") == "form":
        return {key: value for key, value in params.items() if key != "mode"}
    if params.get("mode") == "url":
        return {**params, "elicitationId": secrets.token_urlsafe(16)}
    return params


def as_legacy(error: McpError) -> McpError:
    """An error as the 2025-era wire answers it: an unknown resource is -32002 there."""
    return McpError(RESOURCE_NOT_FOUND, error.message, error.data) if isinstance(error, ResourceNotFound) else error


def _session_meta(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    """What `Context` reads from `_meta` on the modern wire, taken from the session."""
    meta: dict[str, Any] = {META_VERSION: session.version, META_CAPABILITIES: session.capabilities}
    if session.client_info:
        meta[META_CLIENT_INFO] = session.client_info
    if session.log_level is not None:
        meta[META_LOG_LEVEL] = session.log_level
    request_meta = params.get("_meta")
    if isinstance(request_meta, dict):
        meta.update({k: v for k, v in request_meta.items() if k not in meta})
    return meta
