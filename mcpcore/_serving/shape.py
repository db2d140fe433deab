"""`App`: the server as the request path sees it, a protocol, so the path needs no `Server` import.

`Server` (server.py) builds its `Dispatcher` (dispatch.py) from itself, and the
dispatcher hands 2025-era sessions to the `LegacyDispatcher` (legacy.py): each
side names only the shape it reads here, so the three import one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from .._app.catalog import CacheHints, Catalog
from .._app.completions import Completions
from .._app.context import Context
from .._app.context import Host as ContextHost
from .._app.prompts import Prompt
from .._app.resources import Resource, ResourceTemplate
from .._app.tools import Tool
from .._runtime.subscriptions import Bus, Subscriptions
from .._wire.protocol import Route
from .._wire.sealing import Sealer
from ..tasks import Tasks

if TYPE_CHECKING:  # loaded only by a server that uses them
    from ..apps import Apps
    from .._runtime.metrics import Metrics
    from ..auth import Auth
    from ..middleware import Middleware

Handler = Callable[[Route, dict[str, Any], Context], Awaitable["dict[str, Any] | bytes"]]  # one method, both eras


class App(ContextHost, Protocol):
    """What the request path reads of a server (`Server` is one)."""

    name: str
    version: str
    instructions: str | None
    auth: Auth | None
    cache: CacheHints
    completions: Completions
    metrics: Metrics | None
    middleware: tuple[Middleware, ...]
    result_meta: dict[str, Any]
    sealer: Sealer
    subscriptions: Subscriptions
    tools: Catalog[Tool]
    resources: Catalog[Resource]
    templates: Catalog[ResourceTemplate]
    prompts: Catalog[Prompt]
    apps: Apps | None
    mounts: dict[str, Any]  # other servers served under a prefix (`mount.Mount`, by prefix)

    @property
    def tasks(self) -> Tasks: ...

    @property
    def offers_tasks(self) -> bool: ...

    @property
    def bus(self) -> Bus: ...

    def has_tools(self) -> bool: ...

    def has_resources(self) -> bool: ...

    def has_prompts(self) -> bool: ...

    def capabilities(self, extensions: bool = True) -> dict[str, Any]: ...

    def server_info(self, icons: bool = True) -> dict[str, Any]: ...


class Methods(Protocol):
    """What the 2025-era wire borrows from the modern dispatcher (`Dispatcher` is one)."""

    server: App

    def route(self, message: dict[str, Any]) -> Route: ...

    def legacy_handler(self, method: str) -> Handler | None: ...

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None: ...
