"""`Server`: the app API — register tools, resources, prompts and completions, then run.

What is registered lives in catalogs (`_app/catalog.py`). A request is answered by
the `Dispatcher` (`dispatch.py`; `route` and `handle` hand over to it),
argument completions by `Completions` (`_app/completions.py`) and
`subscriptions/listen` by `Subscriptions` (`_runtime/subscriptions.py`). A change to
what is offered reaches open subscriptions through the bus.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, AsyncContextManager, AsyncIterator, Awaitable, Callable, Protocol, Sequence, TypeVar, overload

from .._app.catalog import CacheHints, Catalog
from .._app.completions import Completions
from .._app.prompts import Prompt
from .._app.resources import Resource, ResourceTemplate
from .._app.tools import Tool
from .._runtime.call import Call, Writer
from .._runtime.clientstate import ClientStateLimits, ClientStates
from .._runtime.defaults import SUBSCRIPTION_MAX_URIS, SYNC_MAX_THREADS
from .._runtime.idempotency import Idempotency, IdempotencyLimits
from .._runtime.lifespan import Lifespan
from .._runtime.isolate import IsolatedPool
from .._runtime.results import ResultBudget, ResultPages, ResultStoreLimits, budget_bytes
from .._runtime.subscriptions import PROMPTS, RESOURCE, RESOURCES, TOOLS, Bus, Change, LocalBus, Subscriptions, on_the_loop
from .._runtime.threads import ThreadPool
from .._wire.icons import Icon, icons_to_wire
from .._wire.jsonrpc import META_SERVER_INFO
from .._wire.protocol import Route
from .._wire.sealing import DEFAULT_TTL_SECONDS, Sealer
from ..extensions import Extension
from ..routes import CustomRoute, RouteFunction, custom_route
from ..tasks import Tasks
from .dispatch import Dispatcher
from .mount import Mount, check_prefix, mounted_lifespans

if TYPE_CHECKING:  # imported only where used: a server without them does not load them
    from ..apps import Apps
    from .._runtime.metrics import Metrics
    from .._runtime.clientstate import StateStore
    from .._runtime.idempotency import OnceStore
    from .._runtime.results import ResultStore
    from .._runtime.session import SessionStore
    from ..auth import Auth
    from ..middleware import Middleware
    from ..taskstore import TaskStore

F = TypeVar("F", bound=Callable[..., Any])
LifespanFactory = Callable[["Server"], AsyncContextManager[Any]]  # `Server(lifespan=...)`: start-up, yield, shut-down


@contextlib.asynccontextmanager
async def _within(server: Server) -> AsyncIterator[None]:
    """What the lifespan holds inside the app's: the mounted servers', then the isolated tools' workers, stopped last."""
    try:
        async with mounted_lifespans(server):
            yield
    finally:
        await server.isolated.aclose()


class SharedState(Protocol):
    """What several processes of one server share (`Server(store=...)`; `redisstate.RedisState`)."""

    bus: Bus  # changes, to the subscriptions of every process
    tasks: TaskStore  # tasks, reachable from every process
    sessions: SessionStore | None  # 2025-era HTTP sessions, served by every process (None: each process its own)
    client_states: StateStore  # stateless clients' state (`ctx.client_state`), reachable from every process
    idempotency: OnceStore  # idempotent tools' claims and results, shared by every process
    results: ResultStore  # the rests of results cut to their budget, readable through every process

    async def start(self, server: Server) -> None:
        """Connect and check (the lifespan's first step); raise when it cannot serve."""

    async def aclose(self) -> None:
        """Disconnect (the lifespan's last step)."""


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
        state_ttl_seconds: float = DEFAULT_TTL_SECONDS,
        bus: Bus | None = None,
        max_subscriptions: int = 1000,
        max_subscription_uris: int = SUBSCRIPTION_MAX_URIS,
        max_threads: int = SYNC_MAX_THREADS,
        isolate_workers: int | None = None,
        lifespan: LifespanFactory | None = None,
        auth: Auth | None = None,
        metrics: bool = False,
        middleware: Sequence[Middleware] = (),
        mask_errors: bool = False,
        strict: bool = False,
        store: SharedState | None = None,
        icons: Sequence[Icon | dict[str, Any]] = (),
        client_state: ClientStateLimits | None = None,
        idempotency: IdempotencyLimits | None = None,
        result_budget: ResultBudget | int | None = None,
        result_store: ResultStoreLimits | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        if ttl_ms is None or cache_scope is None:
            raise ValueError("a server needs a default ttl_ms and cache_scope (per-item hints may be None)")
        self.name = name
        self.version = version
        self.instructions = instructions
        self.icons = icons_to_wire(icons, f"server {name!r}")  # shown for the server: initialize, server/discover
        self.cache = CacheHints(ttl_ms, cache_scope)
        self.sealer = Sealer(state_keys, state_ttl_seconds)
        self.store = store  # state shared with other processes (redisstate.py): its bus and task store
        self.subscriptions = Subscriptions(bus or (store.bus if store else LocalBus()), max_subscriptions, max_subscription_uris)
        self.result_meta = {META_SERVER_INFO: {"name": name, "version": version}}
        self.tools: Catalog[Tool] = Catalog("tools", page_size, self.cache, lambda: self._changed(TOOLS))
        self.resources: Catalog[Resource] = Catalog("resources", page_size, self.cache, lambda: self._changed(RESOURCES))
        self.templates: Catalog[ResourceTemplate] = Catalog(
            "resourceTemplates", page_size, self.cache, lambda: self._changed(RESOURCES)
        )
        self.prompts: Catalog[Prompt] = Catalog("prompts", page_size, self.cache, lambda: self._changed(PROMPTS))
        self.completions = Completions()
        self.threads = ThreadPool(max_threads)
        self.isolated = IsolatedPool(isolate_workers)  # isolated tools' worker processes (None: min(4, CPUs)), stopped with the lifespan
        self.auth = auth  # HTTP requests need a bearer token it accepts (stdio is unauthenticated)
        self.middleware = tuple(middleware)  # around every call, the first one outermost (middleware.py)
        self.strict = strict  # arguments only as sent: no "41" read as 41 (a tool's strict= overrides it)
        self.mask_errors = mask_errors  # a tool's unexpected exception: a generic message and a logged reference
        self.custom_routes: dict[str, CustomRoute] = {}  # plain HTTP routes beside the endpoint (routes.py)
        self.extensions: dict[str, Extension] = {}  # by identifier (extensions.py)
        self.offers_resources = False  # True: resources are announced and served even while none is registered
        self._tasks: Tasks | None = None  # the Tasks extension, once a tool or the app asks for it
        self.apps: Apps | None = None  # the MCP Apps extension, once `Apps(server)` declares it (apps.py)
        self.metrics: Metrics | None = None  # counted when on; the HTTP server serves /metrics
        if metrics:
            from .._runtime.metrics import Metrics

            self.metrics = Metrics()
        self.mounts: dict[str, Mount] = {}  # other servers served under a prefix, by prefix (`mount`)
        # every transport serves inside `async with server.lifespan`; the mounted servers' lifespans inside it
        self.lifespan: Lifespan[Server] = Lifespan(self, lifespan, lambda: _within(self))
        self.client_states = ClientStates(client_state, store.client_states if store else None)  # `ctx.client_state`
        self.idempotency = Idempotency(idempotency, store.idempotency if store else None)  # `@tool(idempotent=...)`
        self.result_pages = ResultPages(result_store, store.results if store else None)  # cut results' rests
        self.result_budget: int | None = None  # bytes of a tool result's content (`set_result_budget`)
        self.dispatcher = Dispatcher(self)
        self.set_result_budget(result_budget)

    @property
    def tasks(self) -> Tasks:
        """The Tasks extension (`mcpcore.tasks`), declared on first use: a tool registered with
        `task="optional"` or `"required"` uses it; `server.tasks.configure(...)` sets it up."""
        if self._tasks is None:
            self._tasks = Tasks(self)
        return self._tasks

    def use_store(self, store: SharedState) -> None:
        """Share state with other processes through `store` (before serving): its bus carries changes,
        its task store keeps tasks, its session store 2025-era HTTP sessions, its state store the stateless
        clients' state, its once-store idempotent tools' results (`mcpcore run --redis URL` does this with a
        `RedisState`)."""
        if self.lifespan.entered:
            raise RuntimeError("use_store() comes before the server serves")
        self.store = store
        self.subscriptions.bus = store.bus
        self.client_states.store = store.client_states
        self.idempotency.store = store.idempotency
        self.result_pages.store = store.results
        if self._tasks is not None:
            self._tasks.store = store.tasks

    def set_result_budget(self, budget: ResultBudget | int | None) -> None:
        """The budget of every tool result (a tool's own `result_budget=` overrides it; None: none): bytes of
        JSON content, or `ResultBudget(tokens=...)`. A result over it is cut: its first part, then a
        `resource_link` to the rest, which `resources/read` serves to the same caller (`_runtime/results.py`)."""
        limit = budget_bytes(budget)
        if limit is False:
            raise ValueError("a server's result_budget is a number of bytes, a ResultBudget or None")
        self.result_budget = limit  # type: ignore[assignment]
        for tool in self.tools:
            if isinstance(tool, Tool):  # not a mounted server's (its own server's budget applies)
                tool.apply_budget(self.result_budget)
        self._offer_result_pages()

    def _offer_result_pages(self) -> None:
        """A server that may cut results serves `resources/read` of their links, with or without resources."""
        if not self.offers_resources and any(
                getattr(tool, "result_budget", None) is not None for tool in self.tools):
            self.offers_resources = True
            self.dispatcher.forget_discover()

    @property
    def offers_tasks(self) -> bool:
        """Whether the Tasks extension is declared (without declaring it)."""
        return self._tasks is not None

    @property
    def bus(self) -> Bus:
        """Where changes to what is offered are announced (`Server(bus=...)`)."""
        return self.subscriptions.bus

    # -- registration ---------------------------------------------------

    @overload
    def tool(self, fn: F) -> F: ...

    @overload
    def tool(self, fn: None = None, **options: Any) -> Callable[[F], F]: ...

    def tool(self, fn: Any = None, **options: Any) -> Any:
        """Register a function as a tool: `@server.tool` or `@server.tool(name=..., ...)`.

        Options: name, title, description, input_schema (raw JSON Schema, kept
        verbatim), output_schema, annotations, requires (client capabilities),
        meta, ttl_ms, cache_scope, scopes (OAuth scopes a caller's token needs, with
        `Server(auth=...)`), inline (a sync function runs on the event loop instead of
        a worker thread: only for trivial, never-blocking functions), strict (True: no
        argument coercion for this tool; None: the server's `strict`), task ("optional" or
        "required": a client that declared the Tasks extension gets a task to poll;
        default "forbidden"), task_after_input (gather MRTR input before becoming a task),
        icons (a list of `Icon`, shown beside the tool by clients that draw them),
        isolate (True: run it in a worker process, killable; `timeout` seconds and `memory` bytes bound
        each call: docs/tools.md, "Killable tools"),
        idempotent (True, or a window in seconds: runs at most once per caller and
        `_meta["dev.mcpcore/idempotencyKey"]`, else arguments, within the window; see docs/tools.md),
        result_budget (bytes, or a `ResultBudget`, its results may take: more is cut and the rest linked;
        None: the server's `result_budget`; False: none for this tool), replace (True: take the place of a
        tool of the same name; without it that is a ValueError).
        """
        if fn is None:
            return lambda f: self.tool(f, **options)
        self.add_tool(fn, **options)
        return fn

    def add_tool(self, fn: Callable[..., Any], *, ttl_ms: int | None = None, cache_scope: str | None = None,
                 replace: bool = False, **options: Any) -> Tool:
        tool = Tool(fn, cache=CacheHints(ttl_ms, cache_scope), **options)
        _vacant(self.tools, tool.key, "a tool named", "remove_tool", replace)
        if tool.task != "forbidden":
            self.tasks  # declares the extension
        tool.apply_budget(self.result_budget)
        added = self.tools.add(tool)
        self._offer_result_pages()
        return added

    def remove_tool(self, name: str) -> None:
        self.tools.remove(name)

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Register a resource; a URI with `{...}` registers an RFC 6570 template.

        Options: name, title, description, mime_type, ttl_ms, cache_scope, scopes (OAuth
        scopes a caller's token needs to read it, with `Server(auth=...)`), icons (a list of `Icon`),
        replace (True: take the place of what is registered at the same URI; without it that is a
        ValueError).
        """
        if not isinstance(uri, str):  # `@server.resource` with no URI: the function arrived in its place
            raise TypeError('server.resource needs the URI first: @server.resource("scheme://path") '
                            '(or a template, "scheme://{name}"), not a bare @server.resource')

        def register(fn: F) -> F:
            self.add_resource(fn, uri, **options)
            return fn

        return register

    def add_resource(
        self, fn: Callable[..., Any], uri: str, *, ttl_ms: int | None = None, cache_scope: str | None = None,
        replace: bool = False, **options: Any
    ) -> Resource | ResourceTemplate:
        cache = CacheHints(ttl_ms, cache_scope)
        if "{" in uri:
            template = ResourceTemplate(fn, uri, cache=cache, **options)
            _vacant(self.templates, uri, "a resource template", "remove_resource", replace)
            return self.templates.add(template)
        resource = Resource(fn, uri, cache=cache, **options)
        _vacant(self.resources, uri, "a resource at", "remove_resource", replace)
        return self.resources.add(resource)

    def remove_resource(self, uri: str) -> None:
        """Remove a resource by URI, or a template by its template string."""
        (self.templates if self.templates.get(uri) is not None else self.resources).remove(uri)

    @overload
    def prompt(self, fn: F) -> F: ...

    @overload
    def prompt(self, fn: None = None, **options: Any) -> Callable[[F], F]: ...

    def prompt(self, fn: Any = None, **options: Any) -> Any:
        """Register a prompt: `@server.prompt` or `@server.prompt(name=..., title=...)`.

        Options: name, title, description, ttl_ms, cache_scope, scopes (OAuth scopes a
        caller's token needs to get it, with `Server(auth=...)`), icons (a list of `Icon`), replace
        (True: take the place of a prompt of the same name; without it that is a ValueError).
        """
        if fn is None:
            return lambda f: self.prompt(f, **options)
        self.add_prompt(fn, **options)
        return fn

    def add_prompt(self, fn: Callable[..., Any], *, ttl_ms: int | None = None, cache_scope: str | None = None,
                   replace: bool = False, **options: Any) -> Prompt:
        prompt = Prompt(fn, cache=CacheHints(ttl_ms, cache_scope), **options)
        _vacant(self.prompts, prompt.key, "a prompt named", "remove_prompt", replace)
        return self.prompts.add(prompt)

    def remove_prompt(self, name: str) -> None:
        self.prompts.remove(name)

    def mount(self, prefix: str, other: Any, *, replace: bool = False) -> None:
        """Serve another server's tools, resources, templates and prompts here, under `prefix`: `other` is a
        `Server` in this process or a `Gateway` (its upstream, proxied). A tool or prompt `name` is served
        as `prefix_name`, a resource URI or template `scheme:rest` as `prefix+scheme:rest` (the prefix is a
        letter then letters, digits and `-`). Mounting what would take a name this server has is a
        ValueError, unless `replace=True`. Calls run the other server's own items, inside its middleware
        (this server's is outermost) and its lifespan (entered inside this server's); its changes are
        announced here. May be called while serving."""
        check_prefix(prefix)
        other = getattr(other, "server", other)  # a Gateway serves its upstream from its server
        if not isinstance(other, Server):
            raise TypeError(f"server.mount takes a Server or a Gateway, not {type(other).__name__}")
        if _reaches(other, self):
            raise ValueError(f"server {other.name!r} is, or mounts, server {self.name!r}: mounting it would loop")
        if prefix in self.mounts and not replace:
            raise ValueError(f"something is already mounted at {prefix!r}; pass replace=True to replace it, "
                             f"or call server.unmount({prefix!r}) first")
        mount = Mount(self, prefix, other)
        planned = mount.planned(replace)  # before the old mount leaves: a new one that cannot be made changes nothing
        if prefix in self.mounts:
            self.unmount(prefix)
        mount.attach(planned)
        self.mounts[prefix] = mount
        self._offer_result_pages()  # its tools' results may be cut: their links are read here
        if self.lifespan.entered:
            on_the_loop(lambda: self.lifespan.spawn(mount.enter_in_background()))

    def unmount(self, prefix: str) -> None:
        """Stop serving what is mounted at `prefix`: its items leave the lists at once (announced); calls in
        flight finish, then the other server's lifespan is left."""
        mount = self.mounts.pop(prefix, None)
        if mount is None:
            raise KeyError(f"nothing is mounted at {prefix!r}")
        mount.detach()
        if mount.entered:
            on_the_loop(lambda: self.lifespan.spawn(mount.retire()))

    def completion(self, *, argument: str, prompt: str | None = None, resource: str | None = None) -> Callable[[F], F]:
        """Register completions for one argument of a prompt or resource template.

        The function takes the partial `value` (and optionally a dict of the
        other arguments already resolved) and returns a list of strings.
        """
        if (prompt is None) == (resource is None):
            raise ValueError("completion() needs exactly one of prompt=... or resource=...")
        kind, target = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource)

        def register(fn: F) -> F:
            self.completions.add(fn, kind, target, argument)  # type: ignore[arg-type]
            self.dispatcher.forget_discover()
            return fn

        return register

    def extension(self, identifier: str, settings: dict[str, Any] | None = None) -> Extension:
        """Declare a protocol extension (announced in `server/discover`); register its methods and
        result fields on what this returns (see `mcpcore.extensions`)."""
        if identifier in self.extensions:
            raise ValueError(f"extension {identifier!r} is already declared")
        found = self.extensions[identifier] = Extension(self, identifier, settings)
        self.dispatcher.forget_discover()
        return found

    def custom_route(
        self, path: str, *, methods: Sequence[str] = ("GET",), public: bool = False
    ) -> Callable[[RouteFunction], RouteFunction]:
        """Serve `fn(request: HttpRequest) -> HttpResponse | dict | list` at `path` over HTTP (both
        HTTP transports; not a web framework, see `mcpcore.routes`). With `Server(auth=...)` it needs
        a token like the endpoint unless `public=True`. A sync function runs on the worker pool."""

        def register(fn: RouteFunction) -> RouteFunction:
            self.custom_routes[path] = custom_route(path, fn, methods, public, tuple(self.custom_routes))
            return fn

        return register

    # -- the seam -------------------------------------------------------

    def route(self, message: dict[str, Any]) -> Route:
        """What a request is (see `Dispatcher.route`); transports put it on the `Call`."""
        return self.dispatcher.route(message)

    def handle(self, call: Call, writer: Writer) -> Awaitable[None]:
        """Answer one request: notifications (if any) then exactly one response (await what this
        returns: the dispatcher's own coroutine, with no frame of the server's around it)."""
        return self.dispatcher.handle(call, writer)

    # -- what is offered --------------------------------------------------

    def server_info(self, icons: bool = True) -> dict[str, Any]:
        """The server's `Implementation` (`initialize`'s serverInfo, `server/discover`'s serverInfo stamp);
        `icons=False` for a revision without them. Other results carry only name and version."""
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        if icons and self.icons:
            info["icons"] = self.icons
        return info

    def has_tools(self) -> bool:
        return len(self.tools) > 0

    def has_resources(self) -> bool:
        return self.offers_resources or len(self.resources) + len(self.templates) > 0

    def has_prompts(self) -> bool:
        return len(self.prompts) > 0

    def check(self) -> None:
        """Raise ValueError naming what cannot be served as registered where registration could not tell,
        decorators running in any order (a tool naming a view the server lacks): run at start-up."""
        if self.apps is not None:
            self.apps.check()

    def _changed(self, kind: str) -> None:
        self.dispatcher.forget_discover()
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
        self.subscriptions.close_all()

    def capabilities(self, extensions: bool = True) -> dict[str, Any]:
        """What this server offers right now (as sent by `server/discover`; the 2025-era
        `initialize` leaves out `extensions`, which its revisions do not define)."""
        capabilities: dict[str, Any] = {"logging": {}}
        if extensions and self.extensions:
            capabilities["extensions"] = {ext.id: ext.settings for ext in self.extensions.values()}
        if self.completions:
            capabilities["completions"] = {}
        if self.has_prompts():
            capabilities["prompts"] = {"listChanged": True}
        if self.has_resources():
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if self.has_tools():
            capabilities["tools"] = {"listChanged": True}
        return capabilities

    # -- running --------------------------------------------------------

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until stdin closes or a signal arrives (blocking)."""
        from .._cli.runner import run

        run(self, transport, **options)


def _reaches(start: Server, target: Server) -> bool:
    """Whether `start` is `target` or mounts it, however deep."""
    seen, todo = set(), [start]
    while todo:
        server = todo.pop()
        if server is target:
            return True
        if id(server) not in seen:
            seen.add(id(server))
            todo.extend(mount.other for mount in server.mounts.values())  # type: ignore[misc]
    return False


def _vacant(catalog: Catalog[Any], key: str, what: str, remover: str, replace: bool) -> None:
    """Refuse a second registration under one name or URI, unless the author says `replace=True`: one
    silently taking the place of another is almost always a copy-paste slip."""
    if not replace and catalog.get(key) is not None:
        raise ValueError(f"{what} {key!r} is already registered; pass replace=True to replace it, "
                         f"or call server.{remover}({key!r}) first")
