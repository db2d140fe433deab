"""The MCP Apps extension (`io.modelcontextprotocol/ui`, SEP-1865): tools that come with an HTML view.

`Apps(server)` declares the extension (announced in `server/discover`). A UI resource
is an HTML document at a `ui://` URI, served with the MIME type
`text/html;profile=mcp-app` (`apps.resource(uri)` over a function returning the
HTML, or `apps.html(uri, text)`), with what the host needs to sandbox it (`csp`,
`permissions`, `domain`, `prefers_border`) as `_meta.ui` on its listing and on what
`resources/read` returns. A tool names its view with `_meta.ui.resourceUri`
(`@apps.tool(uri)`), and who may call it with `_meta.ui.visibility` (`"model"`, the
agent; `"app"`, the view).

A client opts in by declaring the extension with `mimeTypes` naming the app MIME type:
per request in `_meta` on the 2026-07-28 wire, in `initialize` on a 2025-era session
(both are `ctx.client_capabilities`, which the specification's own example uses
for the older revisions). A client that did not is served the server as if it had
no views, as the specification's "Server Behavior" asks: its `tools/list` carries no
`_meta.ui`, leaves out the tools only an app may call and the `ui://` resources, and
calling an app-only tool is `-32021` naming the extension. Checked at registration:
the URI scheme, the settings' names and values; checked when the server starts
(`Server.check`, decorators running in any order): every tool's `resourceUri` names
a UI resource of this server. See ADR 47.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from ._app.catalog import CacheHints, Catalog
from ._app.resources import Resource
from ._app.tools import Tool
from ._wire.jsonrpc import INTERNAL_ERROR, MISSING_CLIENT_CAPABILITY, McpError

if TYPE_CHECKING:
    from ._app.context import Context
    from ._runtime.lifespan import Lifespan
    from .extensions import Extension

__all__ = ["EXTENSION", "MIME_TYPE", "Apps"]

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
SCHEME = "ui://"
VISIBILITY = ("model", "app")  # who may call a tool: the agent, the view; both when not said
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
_ORIGIN = re.compile(r"(https?|wss?)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?")
_DEPRECATED_KEY = "ui/resourceUri"  # the flat form the specification deprecates: never sent, stripped like ui

F = TypeVar("F", bound=Callable[..., Any])


class Host(Protocol):
    """What the extension reaches of its server (`Server` is one)."""

    apps: Apps | None
    offers_resources: bool
    tools: Catalog[Tool]
    resources: Catalog[Resource]
    lifespan: Lifespan[Any]

    def extension(self, identifier: str, settings: dict[str, Any] | None = None) -> Extension: ...

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> Tool: ...


def _ui(entry: Mapping[str, Any]) -> Any:
    meta = entry.get("_meta")
    return meta.get("ui") if isinstance(meta, dict) else None


def _visibility(entry: Mapping[str, Any]) -> Sequence[str]:
    ui = _ui(entry)
    found = ui.get("visibility") if isinstance(ui, dict) else None
    return found if isinstance(found, list) else VISIBILITY


def _check_uri(uri: Any, what: str) -> str:
    if not isinstance(uri, str) or not uri.startswith(SCHEME) or len(uri) == len(SCHEME) or "{" in uri:
        raise ValueError(f"{what}: a UI resource URI is a fixed ui:// URI (e.g. ui://weather/dashboard), not {uri!r}")
    return uri


def _check_visibility(visibility: Any, what: str) -> list[str]:
    if isinstance(visibility, str) or not isinstance(visibility, (list, tuple)) or not visibility \
            or not set(visibility) <= set(VISIBILITY) or len(set(visibility)) != len(visibility):
        raise ValueError(f"{what}: visibility is a non-empty list of 'model' and 'app', not {visibility!r}")
    return list(visibility)


def _resource_meta(csp: Mapping[str, Iterable[str]] | None, permissions: Iterable[str], domain: str | None,
                   prefers_border: bool | None, uri: str) -> dict[str, Any]:
    """A UI resource's `_meta.ui` (what the host sandboxes it with), checked."""
    ui: dict[str, Any] = {}
    if csp:
        unknown = sorted(set(csp) - set(CSP_KEYS))
        if unknown:
            raise ValueError(f"UI resource {uri}: csp has no {', '.join(unknown)}; its keys are {', '.join(CSP_KEYS)}")
        ui["csp"] = {}
        for key, origins in csp.items():
            listed = [origins] if isinstance(origins, str) else list(origins)
            bad = [origin for origin in listed if not isinstance(origin, str) or not _ORIGIN.fullmatch(origin)]
            if bad:
                raise ValueError(f"UI resource {uri}: csp {key} takes origins such as https://api.example.com or "
                                 f"https://*.example.com (no path), not {bad[0]!r}")
            ui["csp"][key] = listed
    asked = [permissions] if isinstance(permissions, str) else list(permissions)
    if asked:
        unknown = sorted(set(asked) - set(PERMISSIONS))
        if unknown:
            raise ValueError(f"UI resource {uri}: no permission {', '.join(unknown)}; one of {', '.join(PERMISSIONS)}")
        ui["permissions"] = {name: {} for name in asked}
    if domain is not None:
        if not isinstance(domain, str) or not domain:
            raise ValueError(f"UI resource {uri}: domain is the host's name for a dedicated origin, not {domain!r}")
        ui["domain"] = domain
    if prefers_border is not None:
        ui["prefersBorder"] = bool(prefers_border)
    return ui


class AppResource(Resource):
    """A UI resource: HTML served with the app MIME type and the resource's `_meta.ui` on each content."""

    def __init__(self, fn: Callable[..., Any], uri: str, *, ui: dict[str, Any], **options: Any) -> None:
        super().__init__(fn, uri, mime_type=MIME_TYPE, **options)
        if any(param.required for param in self.info.params):
            raise ValueError(f"UI resource {uri}: {self.info.name}() takes no arguments (a Context at most)")
        self.ui = ui
        listed = super().describe()
        self._listing = {**listed, "_meta": {**listed.get("_meta", {}), "ui": ui}} if ui else listed

    def describe(self) -> dict[str, Any]:
        return self._listing

    def contents(self, uri: str, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, (str, bytes, bytearray)):
            raise McpError(INTERNAL_ERROR, f"UI resource {uri} must give its HTML as str or bytes, "
                           f"not {type(value).__name__}", {"uri": uri})
        contents = super().contents(uri, value)
        if self.ui:
            contents[0]["_meta"] = {"ui": self.ui}
        return contents


class _WithoutApps:
    """The lists as a client that did not declare MCP Apps sees them (a catalog `View`): no tool only an
    app may call, no `ui://` resource, and no tool's `_meta.ui`."""

    key = "without-apps"

    def shows(self, item: Any) -> bool:
        entry = item.describe()
        return not str(entry.get("uri", "")).startswith(SCHEME) and "model" in _visibility(entry)

    def describe(self, item: Any) -> dict[str, Any]:
        entry = item.describe()
        meta = entry.get("_meta")
        if not isinstance(meta, dict) or ("ui" not in meta and _DEPRECATED_KEY not in meta):
            return entry
        rest = {key: value for key, value in meta.items() if key not in ("ui", _DEPRECATED_KEY)}
        plain = {key: value for key, value in entry.items() if key != "_meta"}
        if rest:
            plain["_meta"] = rest
        return plain


class Apps:
    """The MCP Apps of one server (see the module docstring): `Apps(server)` declares the extension;
    `resource`/`html` serve views, `tool` registers a tool with one."""

    def __init__(self, server: Host) -> None:
        if server.apps is not None:
            raise ValueError("this server already serves MCP Apps: make one Apps(server) and share it")
        self.server = server
        self.without = _WithoutApps()
        server.offers_resources = True  # a view is read with resources/read, even before one is registered
        self.extension = server.extension(EXTENSION, {})
        server.apps = self

    # -- registration -----------------------------------------------------

    def resource(self, uri: str, *, csp: Mapping[str, Iterable[str]] | None = None, permissions: Iterable[str] = (),
                 domain: str | None = None, prefers_border: bool | None = None, ttl_ms: int | None = None,
                 cache_scope: str | None = None, **options: Any) -> Callable[[F], F]:
        """Serve a function's HTML (str or bytes; it may take a Context) as the view at `uri` (`ui://...`).

        `csp`: the origins the view reaches, by `connectDomains`, `resourceDomains`, `frameDomains`,
        `baseUriDomains` (none: the host's restrictive default); `permissions`: any of camera, microphone,
        geolocation, clipboardWrite; `domain`: a dedicated origin, in the host's format; `prefers_border`:
        whether the host draws a border. Other options as for `server.resource` (name, title, description, ...)."""
        _check_uri(uri, "apps.resource")
        ui = _resource_meta(csp, permissions, domain, prefers_border, uri)

        def register(fn: F) -> F:
            if self.server.resources.get(uri) is not None:
                raise ValueError(f"UI resource {uri} is already served")
            self.server.resources.add(AppResource(fn, uri, ui=ui, cache=CacheHints(ttl_ms, cache_scope), **options))
            return fn

        return register

    def html(self, uri: str, text: str | bytes, **options: Any) -> None:
        """Serve fixed HTML as the view at `uri` (options as for `resource`; `name` defaults to the URI after `ui://`)."""
        _check_uri(uri, "apps.html")
        if not isinstance(text, (str, bytes)):
            raise ValueError(f"UI resource {uri}: the HTML is str or bytes, not {type(text).__name__}")
        options.setdefault("name", uri[len(SCHEME):])

        def page() -> str | bytes:
            return text

        self.resource(uri, **options)(page)

    def tool(self, resource_uri: str, *, visibility: Sequence[str] | None = None, **options: Any) -> Callable[[F], F]:
        """Register a function as a tool whose results the view at `resource_uri` renders. `visibility`:
        who may call it, `["model", "app"]` when not given; `["app"]` for a tool only the view calls
        (a refresh button), hidden from the agent. Other options as for `server.tool`."""
        ui: dict[str, Any] = {"resourceUri": _check_uri(resource_uri, "apps.tool")}
        if visibility is not None:
            ui["visibility"] = _check_visibility(visibility, "apps.tool")
        meta = dict(options.pop("meta", None) or {})
        if "ui" in meta or _DEPRECATED_KEY in meta:
            raise ValueError("apps.tool sets meta['ui'] itself: give the view as resource_uri, not in meta")
        meta["ui"] = ui

        def register(fn: F) -> F:
            tool = self.server.add_tool(fn, meta=meta, **options)
            if self.server.lifespan.entered:  # registered while serving: no start-up check comes after it
                self._check_tool(tool.describe())
            return fn

        return register

    # -- checks -----------------------------------------------------------

    def check(self) -> None:
        """Raise ValueError for a tool whose `_meta.ui` names no UI resource of this server (or is malformed):
        run when the server starts, once every decorator has run."""
        for tool in self.server.tools:
            self._check_tool(tool.describe())

    def _check_tool(self, entry: Mapping[str, Any]) -> None:
        ui = _ui(entry)
        if ui is None:
            return
        what = f"tool {entry['name']!r}"
        if not isinstance(ui, dict):
            raise ValueError(f"{what}: _meta.ui is an object (resourceUri, visibility), not {ui!r}")
        if "visibility" in ui:
            _check_visibility(ui["visibility"], what)
        if "resourceUri" in ui:
            uri = _check_uri(ui["resourceUri"], what)
            found = self.server.resources.get(uri)
            if found is None or getattr(found, "mime_type", None) != MIME_TYPE:
                kind = "no resource" if found is None else f"a {found.mime_type or 'untyped'} resource"
                raise ValueError(f"{what} names the view {uri}, but this server has {kind} there; serve it with "
                                 f"@apps.resource({uri!r}) or apps.html({uri!r}, ...)")

    # -- per request ------------------------------------------------------

    def declared(self, ctx: Context) -> dict[str, Any] | None:
        """The settings the request's client declared for MCP Apps, or None when it did not declare the
        extension with `mimeTypes` naming `text/html;profile=mcp-app` (either era)."""
        extensions = ctx.client_capabilities.get("extensions")
        found = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
        if not isinstance(found, dict):
            return None
        mime_types = found.get("mimeTypes")
        return found if isinstance(mime_types, list) and MIME_TYPE in mime_types else None

    def view(self, ctx: Context) -> _WithoutApps | None:
        """How the lists appear to this request's client: as registered (None) when it declared MCP Apps."""
        return None if self.declared(ctx) is not None else self.without

    def may_call(self, tool: Tool, ctx: Context) -> None:
        """Refuse (-32021) a client without MCP Apps a tool only an app may call."""
        if "model" not in _visibility(tool.describe()) and self.declared(ctx) is None:
            raise McpError(MISSING_CLIENT_CAPABILITY,
                           f"Tool {tool.key!r} is called only by an MCP App (visibility ['app']): a client declares "
                           f"the extension {EXTENSION} with mimeTypes [{MIME_TYPE!r}] to call it",
                           {"requiredCapabilities": {"extensions": {EXTENSION: {"mimeTypes": [MIME_TYPE]}}}})
