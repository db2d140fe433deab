"""The request path inside the core: route a request, check its `_meta`, run its method.

`Dispatcher.route(message)` says once what a request is (`protocol.Route`);
`Dispatcher.handle(call, writer)` checks the request's `_meta`, runs the
method and sends exactly one response through the writer (tools, prompts and
resources may send request-scoped notifications before it). A method that may
answer `input_required` runs behind the sealing front: a retry's sealed
`requestState` is opened before the handler runs, and an `InputRequired` it
raises is sealed into the result. Results that do not change per call
(discover, list pages) are serialized once and reused until the catalog changes.
The transports' side of the path is `transports/_calls.py`.
"""

from __future__ import annotations

import difflib
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

import orjson

from .._app.catalog import View
from .._app.context import LOG_LEVELS, Context
from .._app.resources import Resource, ResourceTemplate
from .._runtime.call import Call, Writer
from .._runtime.results import SCHEME as RESULT_SCHEME
from .._runtime.subscriptions import PROMPTS, RESOURCES, TOOLS
from .._wire.inputs import InputRequired, read_answers
from .._wire.jsonrpc import (
    INTERNAL_ERROR,
    META_CAPABILITIES,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
    McpError,
    ResourceNotFound,
    encode_error,
    encode_raw_result,
    encode_text_result,
    invalid_params,
    request_params,
    unsupported_version,
)
from .._wire.protocol import INPUT_METHODS, NAME_FIELDS, REMOVED_METHODS, Route, method_route
from .._wire.sealing import binding
from ..logs import call_facts, facts_of
from .legacy import LEGACY_TEXT_TAIL, LegacyDispatcher, as_legacy, legacy_result
from .shape import App, Handler

if TYPE_CHECKING:
    from .._app.tools import Tool
    from .._runtime.metrics import Metrics

log = logging.getLogger("mcpcore.dispatch")

_MODERN_ONLY_METHODS = frozenset({"server/discover", "subscriptions/listen"})
MAX_SUGGESTED_NAME = 128  # the longest tool name; a longer unknown name gets no "did you mean"


def _missing_meta(field: str) -> McpError:
    """-32602 for a request without `_meta`, or whose `_meta` lacks `field`."""
    what = "params._meta is missing" if field == "_meta" else f"params._meta is missing {field!r}"
    return invalid_params(f"{what}: every request carries {META_VERSION!r} and {META_CAPABILITIES!r} in it", {"field": field})


def request_meta(params: dict[str, Any]) -> dict[str, Any]:
    """The request's `_meta`, checked: required fields, supported version, log level."""
    meta = params.get("_meta")
    if (meta.__class__ is dict and meta.get(META_VERSION) in MODERN_VERSIONS and meta.get(META_CAPABILITIES).__class__ is dict
            and meta.get(META_LOG_LEVEL) is None):  # the commonest `_meta`, valid at one look (parsed: exact types)
        return meta
    if not isinstance(meta, dict):
        raise _missing_meta("_meta")
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise _missing_meta(META_VERSION)
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise _missing_meta(META_CAPABILITIES)
    if version not in MODERN_VERSIONS:
        raise unsupported_version(version)
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        raise invalid_params(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    return meta


def _binding(route: Route, params: dict[str, Any], context: Context) -> str:
    """What sealed state is bound to: the method, its target and arguments, the caller."""
    method = route.method
    target = params.get(NAME_FIELDS[method])
    arguments = None if method == "resources/read" else params.get("arguments") or {}
    return binding(method, target if isinstance(target, str) else "", arguments, context.principal)


class Dispatcher:
    """Answers the requests of one `Server` (its catalogs, sealer and subscriptions)."""

    def __init__(self, server: App) -> None:
        self.server = server
        self._discover: bytes | None = None
        self._tail: tuple[dict[str, Any] | None, bytes] = (None, b"")  # `_text_tail`, for the server's result `_meta`
        # method → (handler, whether the server offers it right now)
        self._methods: dict[str, tuple[Handler, Callable[[], bool]]] = {
            "server/discover": (self._on_discover, lambda: True),
            "tools/list": (self._on_tools_list, server.has_tools),
            "tools/call": (self._on_tools_call, server.has_tools),
            "resources/list": (self._on_resources_list, server.has_resources),
            "resources/templates/list": (self._on_templates_list, server.has_resources),
            "resources/read": (self._on_resources_read, server.has_resources),
            "prompts/list": (self._on_prompts_list, server.has_prompts),
            "prompts/get": (self._on_prompts_get, server.has_prompts),
            "completion/complete": (self._on_complete, lambda: bool(server.completions)),
            "subscriptions/listen": (self._on_listen, lambda: True),
        }
        self._routes = {method: method_route(method) for method in self._methods}
        self._extension_methods: set[str] = set()  # served on the 2026-07-28 wire only
        self._result_fields: dict[str, list[Callable[[dict[str, Any], Context], Awaitable[None]]]] = {}
        self.legacy = LegacyDispatcher(self)

    def methods(self) -> frozenset[str]:
        """The request methods this dispatcher knows (offered now or not)."""
        return frozenset(self._methods)

    def add_method(self, method: str, handler: Handler, name_field: str | None) -> None:
        """An extension's method, routed with the params field `Mcp-Name` mirrors."""
        self._methods[method] = (handler, lambda: True)
        self._routes[method] = Route(method, name_field)
        self._extension_methods.add(method)

    def add_result_fields(self, method: str, add: Callable[[dict[str, Any], Context], Awaitable[None]]) -> None:
        """An extension's fields for the complete results of `method`."""
        self._result_fields.setdefault(method, []).append(add)

    def forget_discover(self) -> None:
        """What is offered changed: build the discover result again on its next request."""
        self._discover = None

    # -- the seam -------------------------------------------------------

    def route(self, message: dict[str, Any]) -> Route:
        """What a request (already classified as one) is; its tool looked up once."""
        method = message["method"]
        if method == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            tool = self.server.tools.get(name) if isinstance(name, str) else None
            if tool is not None:
                return tool.route
        return self._routes.get(method) or method_route(method)

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The resource a URI names, or the first template matching it, with the template's values."""
        found = self.server.resources.get(uri)
        if found is not None:
            return found, {}
        for template in self.server.templates:
            variables = template.template.match(uri)
            if variables is not None:
                return template, variables
        return None

    def required_scopes(self, route: Route, message: dict[str, Any]) -> tuple[str, ...]:
        """The OAuth scopes a request needs beyond the server's: those of its tool, of its prompt, or of
        the resources it reads or follows (a subscription hears only of what its caller may read).
        Completing an argument of a prompt or template needs what using it needs: the values are its data."""
        if route.target is not None:
            return route.target.scopes
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if route.method == "completion/complete":
            return self._ref_scopes(params.get("ref"))
        if route.method == "prompts/get" and isinstance(params.get("name"), str):
            prompt = self.server.prompts.get(params["name"])
            return () if prompt is None else prompt.scopes
        uris: Any = ()
        if route.method in ("resources/read", "resources/subscribe"):
            uris = (params.get("uri"),)
        elif route.method == "subscriptions/listen" and isinstance(params.get("notifications"), dict):
            uris = params["notifications"].get("resourceSubscriptions") or ()
        needed: dict[str, None] = {}
        for uri in uris if isinstance(uris, (list, tuple)) else ():
            resolved = self.find_resource(uri) if isinstance(uri, str) else None
            needed.update(dict.fromkeys(resolved[0].scopes if resolved else ()))
        return tuple(needed)

    def _ref_scopes(self, ref: Any) -> tuple[str, ...]:
        """The scopes of what a completion `ref` names: a prompt, or a resource template (or resource)."""
        if not isinstance(ref, dict):
            return ()
        kind, server = ref.get("type"), self.server
        if kind == "ref/prompt" and isinstance(ref.get("name"), str):
            found: Any = server.prompts.get(ref["name"])
        elif kind == "ref/resource" and isinstance(ref.get("uri"), str):
            found = server.templates.get(ref["uri"]) or server.resources.get(ref["uri"])
        else:
            return ()
        return () if found is None else found.scopes

    def legacy_handler(self, method: str) -> Handler | None:
        """The handler of a feature method the legacy wire shares, if the server offers it now."""
        entry = self._methods.get(method)
        if entry is None or method in _MODERN_ONLY_METHODS or method in self._extension_methods or not entry[1]():
            return None
        return entry[0]

    def handle(self, call: Call, writer: Writer) -> Awaitable[None]:
        """Answer one request: notifications (if any) then exactly one response (await what this
        returns: a call of a plain tool on a server with nothing else in play is run by `_plain_call`)."""
        route, server = call.route, self.server
        tool = None if route is None else route.target
        if (tool is not None and tool.plain and not server.middleware and server.metrics is None
                and server.apps is None and "tools/call" not in self._result_fields):
            return self._plain_call(call, tool, writer)
        return self._handle(call, writer)

    async def _handle(self, call: Call, writer: Writer) -> None:
        call_facts.set(facts_of(call))  # for the log records of this call (its task's own context)
        server = self.server
        metrics = server.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        request_id = call.message.get("id")
        code: int | None = INTERNAL_ERROR  # until known (a cancelled call is counted as such)
        dispatch = self._dispatch if call.session is None else self.legacy.dispatch
        try:
            try:
                if server.middleware:
                    from ..middleware import chain  # loaded only by a server that has middleware

                    result = await chain(server.middleware, lambda current: dispatch(current, writer))(call)
                else:
                    result = await dispatch(call, writer)
                code, response = None, encode_raw_result(request_id, result)
            except McpError as error:
                code, response = error.code, encode_error(request_id, error)
            except Exception:  # a bug on our side or in user code outside a tool
                log.exception("internal error answering %s request %r", call.message.get("method"), request_id)
                response = encode_error(request_id, McpError(INTERNAL_ERROR, "Internal error"))
            if not call.cancelled:
                await writer.respond(response, code)
        finally:
            if metrics is not None:
                self._count(metrics, call, code, time.perf_counter() - started)

    @staticmethod
    def _count(metrics: Metrics, call: Call, code: int | None, seconds: float) -> None:
        route = call.route
        method = route.method if route is not None else str(call.message.get("method"))
        metrics.call_ended(method, call.tool, code, call.cancelled, seconds)

    async def _dispatch(self, call: Call, writer: Writer) -> bytes:
        if call.route is None:
            call.route = self.route(call.message)
        route = call.route
        method = route.method
        params = request_params(call.message)
        if method == "initialize":
            raise McpError(
                METHOD_NOT_FOUND,
                "initialize is not used on the stateless wire: this request claims protocol "
                f"{MODERN_VERSIONS[0]} in _meta; send initialize without that claim to open a "
                f"2025-era session (versions {', '.join(SUPPORTED_VERSIONS)}; see server/discover)",
                {"supported": list(SUPPORTED_VERSIONS)},
            )
        meta = request_meta(params)
        entry = self._methods.get(method)
        if entry is None or not entry[1]():
            reason = REMOVED_METHODS.get(method)
            if reason:
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {method!r}; {reason}")
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method!r}")
        context = Context(call, writer, meta, self.server)
        if method not in INPUT_METHODS:
            result = await entry[0](route, params, context)
        else:  # behind the sealing front (no frame of its own: every tools/call passes here)
            if params.get("inputResponses") is not None or params.get("requestState") is not None:
                self._retried(route, params, context)
            try:
                result = await entry[0](route, params, context)
            except InputRequired as ask:
                result = self._asked(ask, route, params, context)
        adders = self._result_fields.get(method)
        if adders:
            result = orjson.loads(result) if isinstance(result, bytes) else result  # a cached page, opened for them
            if result.get("resultType", "complete") == "complete":
                for add in adders:
                    await add(result, context)
        return result if isinstance(result, bytes) else self._serialized(result)

    def _serialized(self, result: dict[str, Any]) -> bytes:
        """A result's JSON, its `resultType` defaulted and the server's `_meta` under its own."""
        result_meta = self.server.result_meta
        result.setdefault("resultType", "complete")
        result["_meta"] = {**result_meta, **result["_meta"]} if "_meta" in result else result_meta
        return orjson.dumps(result)

    def _asked(self, ask: InputRequired, route: Route, params: dict[str, Any], context: Context) -> dict[str, Any]:
        """The result of a call that asks for input: what it asks, and its state sealed to this call."""
        result, payload = ask.result(context.client_capabilities)
        result["requestState"] = self.server.sealer.seal(payload, _binding(route, params, context))
        return result

    async def _plain_call(self, call: Call, tool: Tool, writer: Writer) -> None:
        """A `tools/call` of a `plain` tool on a server with no middleware, metrics, MCP Apps or
        result fields of extensions, in either era: `_handle`, `_dispatch` (or the legacy
        dispatcher's `_answer`), `_on_tools_call` and `Tool.call` folded into one coroutine for
        that case (ADR 13 item 14), which makes no `Context` unless the tool asks for input, and
        frames a text answer from prebuilt bytes. Arguments `quick` does not accept, a retry's
        `inputResponses` or `requestState` and a session not yet initialized go the general way,
        before the function runs; the answers are those of the general way, byte for byte."""
        call_facts.set(facts_of(call))  # for the log records of this call (its task's own context)
        message, session = call.message, call.session
        params = message["params"]  # an object: the route found its tool by name
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if (not tool.quick(arguments) or "inputResponses" in params or "requestState" in params
                or (session is not None and not session.initialized)):  # type: ignore[attr-defined]
            return await self._handle(call, writer)
        request_id = message["id"]
        code: int | None = INTERNAL_ERROR
        try:
            meta = request_meta(params) if session is None else None  # a session's `_meta` is its own
            try:
                direct = tool.direct
                value = await (direct(**arguments) if direct is not None
                               else self.server.threads.submit(tool.threaded, (), arguments))
                if value.__class__ is not str and isinstance(value, InputRequired):  # the same as raising it
                    raise value
            except McpError:
                raise
            except InputRequired as ask:
                result = (self._asked(ask, call.route, params, Context(call, writer, meta, self.server))  # type: ignore[arg-type]
                          if session is None else await self.legacy.asked(ask, call, writer))
            except Exception as error:
                result = tool.failed(error, self.server.mask_errors)
            else:  # the commonest answer, text, is framed from bytes
                result = None if value.__class__ is str and not tool.structured else tool.shape(value)
            if session is not None:
                response = (encode_text_result(request_id, value, LEGACY_TEXT_TAIL) if result is None
                            else encode_raw_result(request_id, orjson.dumps(legacy_result(result, session.version))))  # type: ignore[arg-type, attr-defined]
            elif result is None:
                response = encode_text_result(request_id, value, self._text_tail())
            else:
                response = encode_raw_result(request_id, self._serialized(result))  # type: ignore[arg-type]
            code = None
        except McpError as error:
            error = error if session is None else as_legacy(error)
            code, response = error.code, encode_error(request_id, error)
        except Exception:  # a bug on our side
            log.exception("internal error answering tools/call request %r", request_id)
            response = encode_error(request_id, McpError(INTERNAL_ERROR, "Internal error"))
        if not call.cancelled:
            await writer.respond(response, code)

    def _text_tail(self) -> bytes:
        """What follows a text answer's text: the rest of the result `_serialized` would make of it."""
        result_meta = self.server.result_meta
        if self._tail[0] is not result_meta:
            rest = orjson.dumps({"resultType": "complete", "_meta": result_meta})
            self._tail = (result_meta, b"}]," + rest[1:] + b"}")
        return self._tail[1]

    def _retried(self, route: Route, params: dict[str, Any], context: Context) -> None:
        """A retry of a method that asked for input: its answers, read against the sealed state
        it carries back (opened first: it says what was asked)."""
        responses, state = params.get("inputResponses"), params.get("requestState")
        if responses is not None and not isinstance(responses, dict):
            raise invalid_params("inputResponses must be an object keyed by input request name")
        asked = None
        if state is not None:
            payload = self.server.sealer.open(state, _binding(route, params, context))
            context.state, asked = payload.get("state"), payload.get("asked") or {}
        context.answers = read_answers(responses or {}, asked)

    # -- methods --------------------------------------------------------

    async def _on_discover(self, route: Route, params: dict[str, Any], context: Context) -> bytes:
        if self._discover is None:
            server = self.server
            result: dict[str, Any] = {
                "resultType": "complete",
                "supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": server.capabilities(),
            }
            if server.instructions:
                result["instructions"] = server.instructions
            meta = {**server.result_meta, META_SERVER_INFO: server.server_info()}  # the server's icons are shown here
            result.update(ttlMs=server.cache.ttl_ms, cacheScope=server.cache.cache_scope, _meta=meta)
            self._discover = orjson.dumps(result)
        return self._discover

    async def _on_tools_list(self, route: Route, params: dict[str, Any], context: Context) -> bytes:
        return self.server.tools.page(params.get("cursor"), self.server.result_meta, self._shown(context),
                                      self._view(context))

    async def _on_resources_list(self, route: Route, params: dict[str, Any], context: Context) -> bytes:
        return self.server.resources.page(params.get("cursor"), self.server.result_meta, self._shown(context),
                                          self._view(context))

    async def _on_templates_list(self, route: Route, params: dict[str, Any], context: Context) -> bytes:
        return self.server.templates.page(params.get("cursor"), self.server.result_meta, self._shown(context))

    async def _on_prompts_list(self, route: Route, params: dict[str, Any], context: Context) -> bytes:
        return self.server.prompts.page(params.get("cursor"), self.server.result_meta, self._shown(context))

    def _view(self, context: Context) -> View | None:
        """How the lists appear to the caller: as registered (None), unless the server serves MCP Apps and
        the caller did not declare them (`apps.py`)."""
        apps = self.server.apps
        return None if apps is None else apps.view(context)

    def _shown(self, context: Context) -> Callable[[Any], bool] | None:
        """Which items a list shows its caller: all (None), unless the server lists by scope
        (`Auth(list_by_scope=True)`) and the caller has a token: then what its scopes permit."""
        auth, token = self.server.auth, context.auth
        if auth is None or token is None or not auth.list_by_scope:
            return None
        return lambda item: token.scopes.issuperset(item.scopes)

    def _suggestion(self, name: str, items: Iterable[Any], context: Context) -> str:
        """`; did you mean 'search'?` for a misspelt name: the closest name the caller may see, if one is close."""
        if len(name) > MAX_SUGGESTED_NAME:  # no name is that long: nothing to compare (and a bound on the work)
            return ""
        shown, view = self._shown(context), self._view(context)
        names = [item.key for item in items if (shown is None or shown(item)) and (view is None or view.shows(item))]
        close = difflib.get_close_matches(name, names, n=1)
        return f"; did you mean {close[0]!r}?" if close else ""

    def _on_tools_call(self, route: Route, params: dict[str, Any], context: Context) -> Awaitable[dict[str, Any]]:
        """The checks of the request itself, then the tool's own coroutine (or the task's) to await:
        no frame of the dispatcher's stays around the tool while it runs."""
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('tools/call needs a string "name"')
        tool = route.target
        if tool is None:
            raise invalid_params(f"Unknown tool: {name!r}{self._suggestion(name, self.server.tools, context)}", {"name": name})
        if self.server.apps is not None:
            self.server.apps.may_call(tool, context)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise invalid_params('tools/call "arguments" must be a JSON object')
        if tool.task != "forbidden":
            return self.server.tasks.call(tool, arguments, params, context)
        return tool.call(arguments, context)

    async def _on_resources_read(self, route: Route, params: dict[str, Any], context: Context) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise invalid_params('resources/read needs a string "uri"')
        if uri.startswith(RESULT_SCHEME):  # the rest of a result cut to its budget: its caller's only
            page = await self.result_page(uri, context.result_owner)
            if page is None:
                raise ResourceNotFound(uri)  # unknown, expired and another caller's alike: existence is not told
            return {**orjson.loads(page), "ttlMs": 0, "cacheScope": "private"}
        resolved = self.find_resource(uri)
        if resolved is None:
            raise ResourceNotFound(uri)
        found, variables = resolved
        hints = found.cache.over(self.server.cache)
        contents = await found.read(uri, variables, context)
        return {"contents": contents, "ttlMs": hints.ttl_ms, "cacheScope": hints.cache_scope}

    async def result_page(self, uri: str, owner: str) -> bytes | None:
        """A page of a cut result: from this server's store, else from a mounted server's (a mounted tool
        cuts its result into its own server's store)."""
        page = await self.server.result_pages.read(uri, owner)
        for mount in () if page is not None else self.server.mounts.values():
            page = await mount.other.dispatcher.result_page(uri, owner)
            if page is not None:
                break
        return page

    async def _on_prompts_get(self, route: Route, params: dict[str, Any], context: Context) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('prompts/get needs a string "name"')
        prompt = self.server.prompts.get(name)
        if prompt is None:
            raise invalid_params(f"Unknown prompt: {name!r}{self._suggestion(name, self.server.prompts, context)}",
                                 {"name": name})
        return await prompt.get(params.get("arguments"), context)

    async def _on_complete(self, route: Route, params: dict[str, Any], context: Context) -> dict[str, Any]:
        server = self.server

        def known(kind: str, target: str) -> bool:
            if kind == "ref/prompt":
                return server.prompts.get(target) is not None
            return server.templates.get(target) is not None or server.resources.get(target) is not None

        return await server.completions.complete(params, known, context)

    async def _on_listen(self, route: Route, params: dict[str, Any], context: Context) -> dict[str, Any]:
        server = self.server
        offered = {TOOLS: server.has_tools(), PROMPTS: server.has_prompts(), RESOURCES: server.has_resources()}
        wanted = params.get("notifications")
        task_ids = frozenset()
        if server.offers_tasks and isinstance(wanted, dict) and "taskIds" in wanted:
            task_ids = await server.tasks.followed(wanted["taskIds"], context)
        lifetime = None if context.auth is None else context.auth.lifetime()
        return await server.subscriptions.listen(wanted, offered, context.request_id, context.send_notification, task_ids,
                                                 lifetime)
