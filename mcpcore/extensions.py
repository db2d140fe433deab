"""Protocol extensions (SEP-2133): `server.extension(id, settings)` and what an extension may add.

An extension has an identifier `{vendor-prefix}/{name}` (`com.example/echo`,
`io.modelcontextprotocol/tasks`) and a settings object the server announces under
`capabilities.extensions[id]` in `server/discover`. It may register methods (each
with the params field that `Mcp-Name` mirrors, so the HTTP header rules and the
router know it) and add fields to the results of existing methods. A client
opts in per request, in `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`;
`ext.declared(ctx)` reads that declaration, and an extension method called by a
client that did not declare the extension gets `-32021` naming it, before its
handler runs (unless registered with `declared=False`). Extensions are served on
the 2026-07-28 wire; the 2025-era wire has no `extensions` capability, so there
they are neither announced nor routed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol, Union

from ._app.signature import run_callback
from ._wire.jsonrpc import MODERN_VERSIONS, missing_capability

if TYPE_CHECKING:
    from ._app.context import Context

__all__ = ["Extension"]

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9-]*(\.[A-Za-z0-9-]+)+/[A-Za-z0-9][A-Za-z0-9._-]*")
_CORE_PREFIXES = ("server/", "tools/", "resources/", "prompts/", "completion/", "subscriptions/", "notifications/",
                  "logging/", "sampling/", "elicitation/", "roots/")
_CORE_NAMES = frozenset({"initialize", "ping"})  # core methods outside any namespace: `pingback/x` is free
# Names an extension's specification reserves (a method in a core namespace, or a prefix of its own):
# open to that extension alone.
_RESERVED = {"resources/directory/read": "io.modelcontextprotocol/skills",  # SEP-2640
             "tasks/": "io.modelcontextprotocol/tasks"}  # SEP-2663

MethodHandler = Callable[[dict[str, Any], "Context"], Union[dict[str, Any], Awaitable[dict[str, Any]]]]
FieldAdder = Callable[[dict[str, Any], "Context"], Union[Mapping[str, Any], Awaitable[Mapping[str, Any]]]]


class MethodTable(Protocol):
    """Where an extension's methods and result fields go: its server's dispatcher."""

    def methods(self) -> frozenset[str]: ...

    def add_method(self, method: str, handler: Callable[..., Awaitable[Any]], name_field: str | None) -> None: ...

    def add_result_fields(self, method: str, add: Callable[[dict[str, Any], Context], Awaitable[None]]) -> None: ...


class Host(Protocol):
    """What an extension reaches of its server (`Server` is one): the dispatcher its methods join."""

    @property
    def dispatcher(self) -> MethodTable: ...


class Extension:
    """One extension of one server (see the module docstring); made by `Server.extension`."""

    def __init__(self, server: Host, identifier: str, settings: Mapping[str, Any] | None = None) -> None:
        if not _IDENTIFIER.fullmatch(identifier):
            raise ValueError(f"an extension identifier is vendor-prefix/name, e.g. com.example/echo; not {identifier!r}")
        self.server = server
        self.id = identifier
        self.settings = dict(settings or {})
        self.methods: dict[str, MethodHandler] = {}

    def declared(self, ctx: Context) -> dict[str, Any] | None:
        """The settings the request's client declared for this extension, or None when it did not
        (always None on the 2025-era wire, which has no extensions)."""
        if ctx.protocol_version not in MODERN_VERSIONS:
            return None
        extensions = ctx.client_capabilities.get("extensions")
        found = extensions.get(self.id) if isinstance(extensions, dict) else None
        return found if isinstance(found, dict) else None

    def method(self, name: str, *, name_field: str | None = None, declared: bool = True) -> Callable[[MethodHandler], MethodHandler]:
        """Register `fn(params, ctx) -> result dict` (sync or async) for the request method `name`.

        `name_field`: the params field `Mcp-Name` mirrors over HTTP (e.g. "taskId"). `declared`:
        refuse (-32021) a client that did not declare this extension."""
        owner = next((owner for reserved, owner in _RESERVED.items() if name.startswith(reserved)), None)
        taken = owner != self.id if owner is not None else name.startswith(_CORE_PREFIXES) or name in _CORE_NAMES
        if taken or name in self.server.dispatcher.methods():
            raise ValueError(f"{name!r} is a method of the protocol or of another extension")

        def register(fn: MethodHandler) -> MethodHandler:
            async def handle(route: Any, params: dict[str, Any], context: Context) -> dict[str, Any]:
                if declared and self.declared(context) is None:
                    raise missing_capability({"extensions": {self.id: {}}})
                result = await run_callback(fn, params, context)
                if not isinstance(result, dict):
                    raise TypeError(f"extension method {name!r} returned {type(result).__name__}, not a dict")
                return result

            self.methods[name] = fn
            self.server.dispatcher.add_method(name, handle, name_field)
            return fn

        return register

    def result_fields(self, method: str) -> Callable[[FieldAdder], FieldAdder]:
        """Register `fn(result, ctx) -> fields` adding fields to every result of `method` (a dict result;
        fields already present are not replaced). Called only for clients that declared the extension."""

        def register(fn: FieldAdder) -> FieldAdder:
            async def add(result: dict[str, Any], context: Context) -> None:
                if self.declared(context) is None:
                    return
                fields = await run_callback(fn, result, context)
                for key, value in dict(fields).items():
                    if key in ("resultType", "_meta"):
                        raise ValueError(f"extension {self.id} may not set {key!r} on a result")
                    result.setdefault(key, value)

            self.server.dispatcher.add_result_fields(method, add)
            return fn

        return register
