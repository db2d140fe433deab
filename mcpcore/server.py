"""`Server`: the app API (decorators) and the one async handler per call.

`await server.handle(call, writer)` validates a request's `_meta`, dispatches
its method and sends exactly one response through the writer; tools, prompts
and resources may send request-scoped notifications before it. Results that
do not change per call (discover, list pages) are serialized once and reused
until the catalog changes.
"""

from __future__ import annotations

import inspect
import sys
import traceback
from typing import Any, Awaitable, Callable, Sequence, TypeVar, overload

import orjson

from .call import Call, Writer
from .catalog import CacheHints, Catalog
from .context import LOG_LEVELS, Context
from .inputs import InputRequired, read_answers
from .sealing import Sealer, binding
from .subscriptions import (
    PROMPTS,
    RESOURCE,
    RESOURCES,
    SUBSCRIPTION_ID,
    TOOLS,
    Bus,
    Change,
    Filter,
    LocalBus,
    Subscriber,
)
from .prompts import Prompt
from .resources import Resource, ResourceTemplate
from .tools import Tool
from .wire import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    META_CAPABILITIES,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
    METHOD_NOT_FOUND,
    SUPPORTED_VERSIONS,
    McpError,
    encode_error,
    encode_raw_result,
    invalid_params,
    unsupported_version,
)

F = TypeVar("F", bound=Callable[..., Any])
Handler = Callable[[dict[str, Any], Context], Awaitable["dict[str, Any] | bytes"]]

_REMOVED = {
    "ping": "it was removed in protocol 2026-07-28",
    "logging/setLevel": "set io.modelcontextprotocol/logLevel in each request's _meta instead",
    "resources/subscribe": "open a subscriptions/listen stream instead",
    "resources/unsubscribe": "close the subscriptions/listen stream instead",
}
_MAX_COMPLETIONS = 100
# The methods that may answer input_required, and the param naming their target.
_INPUT_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def _missing_meta(field: str) -> McpError:
    return invalid_params(
        f"params._meta is missing {field!r}: every request carries "
        f"{META_VERSION!r} and {META_CAPABILITIES!r}",
        {"field": field},
    )


def request_meta(params: dict[str, Any]) -> dict[str, Any]:
    """The request's `_meta`, checked: required fields, supported version, log level."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise _missing_meta("_meta")
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise _missing_meta(META_VERSION)
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise _missing_meta(META_CAPABILITIES)
    if version not in SUPPORTED_VERSIONS:
        raise unsupported_version(version)
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        raise invalid_params(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    return meta


class Server:
    """An MCP server: register tools, resources and prompts, then run it.

    >>> server = Server("demo", version="1.0.0")
    >>> @server.tool
    ... def echo(text: str) -> str:
    ...     return text
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        instructions: str | None = None,
        *,
        page_size: int = 100,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        state_keys: Sequence[str | bytes] | None = None,
        state_ttl_seconds: float = 600,
        bus: Bus | None = None,
        max_subscriptions: int = 1000,
        max_subscription_uris: int = 1000,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        if ttl_ms is None or cache_scope is None:
            raise ValueError("a server needs a default ttl_ms and cache_scope (per-item hints may be None)")
        self.name = name
        self.version = version
        self.instructions = instructions
        self.cache = CacheHints(ttl_ms, cache_scope)
        self.sealer = Sealer(state_keys, state_ttl_seconds)
        self.bus: Bus = bus or LocalBus()
        self.max_subscriptions = max_subscriptions
        self.max_subscription_uris = max_subscription_uris
        self._subscribers: set[Subscriber] = set()
        self._result_meta = {META_SERVER_INFO: {"name": name, "version": version}}
        self.tools: Catalog[Tool] = Catalog("tools", page_size, self.cache, lambda: self._changed(TOOLS))
        self.resources: Catalog[Resource] = Catalog("resources", page_size, self.cache, lambda: self._changed(RESOURCES))
        self.templates: Catalog[ResourceTemplate] = Catalog(
            "resourceTemplates", page_size, self.cache, lambda: self._changed(RESOURCES)
        )
        self.prompts: Catalog[Prompt] = Catalog("prompts", page_size, self.cache, lambda: self._changed(PROMPTS))
        # (ref type, prompt name or URI, argument) → (function, whether it takes the other arguments)
        self._completions: dict[tuple[str, str, str], tuple[Callable[..., Any], bool]] = {}
        self._discover: bytes | None = None
        self._methods: dict[str, tuple[Handler, Callable[[], bool]]] = {
            "server/discover": (self._on_discover, lambda: True),
            "tools/list": (self._on_tools_list, self._has_tools),
            "tools/call": (self._on_tools_call, self._has_tools),
            "resources/list": (self._on_resources_list, self._has_resources),
            "resources/templates/list": (self._on_templates_list, self._has_resources),
            "resources/read": (self._on_resources_read, self._has_resources),
            "prompts/list": (self._on_prompts_list, self._has_prompts),
            "prompts/get": (self._on_prompts_get, self._has_prompts),
            "completion/complete": (self._on_complete, lambda: bool(self._completions)),
            "subscriptions/listen": (self._on_listen, lambda: True),
        }

    # -- registration ---------------------------------------------------

    @overload
    def tool(self, fn: F) -> F: ...

    @overload
    def tool(self, fn: None = None, **options: Any) -> Callable[[F], F]: ...

    def tool(self, fn: Any = None, **options: Any) -> Any:
        """Register a function as a tool: `@server.tool` or `@server.tool(name=..., ...)`.

        Options: name, title, description, input_schema (raw JSON Schema, kept
        verbatim), output_schema, annotations, requires (client capabilities),
        meta, ttl_ms, cache_scope.
        """
        if fn is None:
            return lambda f: self.tool(f, **options)
        self.add_tool(fn, **options)
        return fn

    def add_tool(self, fn: Callable[..., Any], *, ttl_ms: int | None = None, cache_scope: str | None = None, **options: Any) -> Tool:
        return self.tools.add(Tool(fn, cache=CacheHints(ttl_ms, cache_scope), **options))

    def remove_tool(self, name: str) -> None:
        self.tools.remove(name)

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Register a resource; a URI with `{...}` registers an RFC 6570 template.

        Options: name, title, description, mime_type, ttl_ms, cache_scope.
        """

        def register(fn: F) -> F:
            self.add_resource(fn, uri, **options)
            return fn

        return register

    def add_resource(
        self, fn: Callable[..., Any], uri: str, *, ttl_ms: int | None = None, cache_scope: str | None = None, **options: Any
    ) -> Resource | ResourceTemplate:
        cache = CacheHints(ttl_ms, cache_scope)
        if "{" in uri:
            return self.templates.add(ResourceTemplate(fn, uri, cache=cache, **options))
        return self.resources.add(Resource(fn, uri, cache=cache, **options))

    def remove_resource(self, uri: str) -> None:
        """Remove a resource by URI, or a template by its template string."""
        (self.templates if self.templates.get(uri) is not None else self.resources).remove(uri)

    @overload
    def prompt(self, fn: F) -> F: ...

    @overload
    def prompt(self, fn: None = None, **options: Any) -> Callable[[F], F]: ...

    def prompt(self, fn: Any = None, **options: Any) -> Any:
        """Register a prompt: `@server.prompt` or `@server.prompt(name=..., title=...)`."""
        if fn is None:
            return lambda f: self.prompt(f, **options)
        self.add_prompt(fn, **options)
        return fn

    def add_prompt(self, fn: Callable[..., Any], *, ttl_ms: int | None = None, cache_scope: str | None = None, **options: Any) -> Prompt:
        return self.prompts.add(Prompt(fn, cache=CacheHints(ttl_ms, cache_scope), **options))

    def remove_prompt(self, name: str) -> None:
        self.prompts.remove(name)

    def completion(self, *, argument: str, prompt: str | None = None, resource: str | None = None) -> Callable[[F], F]:
        """Register completions for one argument of a prompt or resource template.

        The function takes the partial `value` (and optionally a dict of the
        other arguments already resolved) and returns a list of strings.
        """
        if (prompt is None) == (resource is None):
            raise ValueError("completion() needs exactly one of prompt=... or resource=...")
        key = ("ref/prompt", prompt, argument) if prompt is not None else ("ref/resource", resource, argument)

        def register(fn: F) -> F:
            self._completions[key] = (fn, len(inspect.signature(fn).parameters) > 1)  # type: ignore[index]
            self._discover = None
            return fn

        return register

    # -- the seam -------------------------------------------------------

    async def handle(self, call: Call, writer: Writer) -> None:
        """Answer one request: notifications (if any) then exactly one response."""
        request_id = call.message.get("id")
        code = None
        try:
            response = encode_raw_result(request_id, await self._dispatch(call, writer))
        except McpError as error:
            code, response = error.code, encode_error(request_id, error)
        except Exception:  # a bug on our side or in user code outside a tool
            traceback.print_exc(file=sys.stderr)
            code, response = INTERNAL_ERROR, encode_error(request_id, McpError(INTERNAL_ERROR, "Internal error"))
        if not call.cancelled:
            await writer.respond(response, code)

    async def _dispatch(self, call: Call, writer: Writer) -> bytes:
        method = call.message["method"]
        params = call.message.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise invalid_params("params must be a JSON object")
        if method == "initialize":
            supported = ", ".join(SUPPORTED_VERSIONS)
            raise McpError(
                METHOD_NOT_FOUND,
                f"initialize is not used by this server; it speaks protocol versions {supported} "
                f"with per-request _meta (see server/discover)",
                {"supported": list(SUPPORTED_VERSIONS)},
            )
        meta = request_meta(params)
        entry = self._methods.get(method)
        if entry is None or not entry[1]():
            reason = _REMOVED.get(method)
            if reason:
                raise McpError(METHOD_NOT_FOUND, f"Method not found: {method!r}; {reason}")
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {method!r}")
        context = Context(call, writer, meta)
        if method in _INPUT_METHODS:
            result = await self._with_inputs(entry[0], method, params, context, call)
        else:
            result = await entry[0](params, context)
        if isinstance(result, bytes):
            return result
        result.setdefault("resultType", "complete")
        result["_meta"] = {**self._result_meta, **result["_meta"]} if "_meta" in result else self._result_meta
        return orjson.dumps(result)

    # -- multi round-trip requests -------------------------------------

    async def _with_inputs(
        self, handler: Handler, method: str, params: dict[str, Any], context: Context, call: Call
    ) -> dict[str, Any] | bytes:
        """Run a handler that may ask for input; on a retry, open its sealed state first."""

        def bound() -> str:  # computed only when state is opened or sealed
            target = params.get(_INPUT_METHODS[method])
            arguments = None if method == "resources/read" else params.get("arguments") or {}
            return binding(method, target if isinstance(target, str) else "", arguments, call.principal)

        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise invalid_params("inputResponses must be an object keyed by input request name")
        asked = None
        if params.get("requestState") is not None:
            payload = self.sealer.open(params["requestState"], bound())
            context.state, asked = payload.get("state"), payload.get("asked") or {}
        context.answers = read_answers(responses or {}, asked)
        try:
            return await handler(params, context)
        except InputRequired as ask:
            result, payload = ask.result(context.client_capabilities)
            result["requestState"] = self.sealer.seal(payload, bound())
            return result

    # -- methods --------------------------------------------------------

    def _has_tools(self) -> bool:
        return len(self.tools) > 0

    def _has_resources(self) -> bool:
        return len(self.resources) + len(self.templates) > 0

    def _has_prompts(self) -> bool:
        return len(self.prompts) > 0

    def _changed(self, kind: str) -> None:
        self._discover = None
        self.bus.publish(Change(kind))

    # -- announcing changes -------------------------------------------

    def notify_tools_changed(self) -> None:
        """Tell subscribers the tool list changed (automatic on add/remove)."""
        self.bus.publish(Change(TOOLS))

    def notify_prompts_changed(self) -> None:
        """Tell subscribers the prompt list changed (automatic on add/remove)."""
        self.bus.publish(Change(PROMPTS))

    def notify_resources_changed(self) -> None:
        """Tell subscribers the resource list changed (automatic on add/remove)."""
        self.bus.publish(Change(RESOURCES))

    def notify_resource_updated(self, uri: str) -> None:
        """Tell subscribers of `uri` that the resource changed."""
        self.bus.publish(Change(RESOURCE, uri))

    def close_subscriptions(self) -> None:
        """End every open subscription gracefully (each gets its final result)."""
        for subscriber in list(self._subscribers):
            subscriber.close()

    def capabilities(self) -> dict[str, Any]:
        """What this server offers right now (as sent by `server/discover`)."""
        capabilities: dict[str, Any] = {"logging": {}}
        if self._completions:
            capabilities["completions"] = {}
        if self._has_prompts():
            capabilities["prompts"] = {"listChanged": True}
        if self._has_resources():
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if self._has_tools():
            capabilities["tools"] = {"listChanged": True}
        return capabilities

    async def _on_discover(self, params: dict[str, Any], context: Context) -> bytes:
        if self._discover is None:
            result: dict[str, Any] = {
                "resultType": "complete",
                "supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": self.capabilities(),
            }
            if self.instructions:
                result["instructions"] = self.instructions
            result.update(ttlMs=self.cache.ttl_ms, cacheScope=self.cache.cache_scope, _meta=self._result_meta)
            self._discover = orjson.dumps(result)
        return self._discover

    async def _on_tools_list(self, params: dict[str, Any], context: Context) -> bytes:
        return self.tools.page(params.get("cursor"), self._result_meta)

    async def _on_resources_list(self, params: dict[str, Any], context: Context) -> bytes:
        return self.resources.page(params.get("cursor"), self._result_meta)

    async def _on_templates_list(self, params: dict[str, Any], context: Context) -> bytes:
        return self.templates.page(params.get("cursor"), self._result_meta)

    async def _on_prompts_list(self, params: dict[str, Any], context: Context) -> bytes:
        return self.prompts.page(params.get("cursor"), self._result_meta)

    async def _on_tools_call(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('tools/call needs a string "name"')
        tool = self.tools.get(name)
        if tool is None:
            raise invalid_params(f"Unknown tool: {name!r}", {"name": name})
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise invalid_params('tools/call "arguments" must be a JSON object')
        return await tool.call(arguments, context)

    async def _on_resources_read(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise invalid_params('resources/read needs a string "uri"')
        found: Resource | ResourceTemplate | None = self.resources.get(uri)
        variables: dict[str, str] | None = {}
        if found is None:
            for template in self.templates:
                variables = template.template.match(uri)
                if variables is not None:
                    found = template
                    break
        if found is None or variables is None:
            raise invalid_params(f"Resource not found: {uri}", {"uri": uri})
        hints = found.cache.over(self.cache)
        contents = await found.read(uri, variables, context)
        return {"contents": contents, "ttlMs": hints.ttl_ms, "cacheScope": hints.cache_scope}

    async def _on_prompts_get(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise invalid_params('prompts/get needs a string "name"')
        prompt = self.prompts.get(name)
        if prompt is None:
            raise invalid_params(f"Unknown prompt: {name!r}", {"name": name})
        return await prompt.get(params.get("arguments"), context)

    async def _on_complete(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise invalid_params('completion/complete needs "ref" and "argument" objects')
        kind = ref.get("type")
        target = ref.get("name") if kind == "ref/prompt" else ref.get("uri") if kind == "ref/resource" else None
        if not isinstance(target, str):
            raise invalid_params('"ref" must be {"type": "ref/prompt", "name": ...} or {"type": "ref/resource", "uri": ...}')
        known = self.prompts.get(target) if kind == "ref/prompt" else (self.templates.get(target) or self.resources.get(target))
        if known is None:
            raise invalid_params(f"Unknown completion reference: {target!r}", {"ref": ref})
        name, value = argument.get("name"), argument.get("value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise invalid_params('"argument" needs string "name" and "value"')
        context_field = params.get("context") or {}
        others = context_field.get("arguments") or {} if isinstance(context_field, dict) else None
        if not isinstance(others, dict) or not all(isinstance(v, str) for v in others.values()):
            raise invalid_params('"context" must be {"arguments": {name: string value}}')
        entry = self._completions.get((kind, target, name))
        values: list[str] = []
        if entry is not None:
            handler, takes_context = entry
            produced = handler(value, others) if takes_context else handler(value)
            if inspect.isawaitable(produced):
                produced = await produced
            values = [str(v) for v in produced]
        return {
            "completion": {
                "values": values[:_MAX_COMPLETIONS],
                "total": len(values),
                "hasMore": len(values) > _MAX_COMPLETIONS,
            }
        }

    async def _on_listen(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        offered = {TOOLS: self._has_tools(), PROMPTS: self._has_prompts(), RESOURCES: self._has_resources()}
        honoured = Filter.honoured(params.get("notifications"), offered, self.max_subscription_uris)
        if len(self._subscribers) >= self.max_subscriptions:
            raise McpError(INVALID_REQUEST, f"Too many open subscriptions (limit {self.max_subscriptions}); close one first")
        subscriber = Subscriber(honoured)
        self._subscribers.add(subscriber)
        self.bus.attach(subscriber)
        try:
            await subscriber.forward(context.request_id, context.send_notification)
        finally:
            self.bus.detach(subscriber)
            self._subscribers.discard(subscriber)
        return {"_meta": {SUBSCRIPTION_ID: context.request_id}}

    # -- running --------------------------------------------------------

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until stdin closes or a signal arrives (blocking)."""
        from .runner import run

        run(self, transport, **options)
