"""`server.mount(prefix, other)`: another server's tools, resources, templates and prompts served under a prefix.

Naming (one rule, reversible, so no two mounted items and no two mounts share a name): a prefix is a
letter then letters, digits and `-`; a tool or prompt `name` is served as `prefix_name` and a resource
URI or template `scheme:rest` as `prefix+scheme:rest`. The prefix has no `_` and no `+`, so the first
one ends it: a served name says which mount and which item it is. `_` keeps tool names in the
character set the spec and model APIs allow; the prefix in front of the scheme keeps every URI a
valid absolute URI (a scheme is a letter then letters, digits, `+`, `-`, `.`) whatever its scheme's
own structure, and templates match as before.

Theory of operation. What is mounted is a set of views in the mounting server's catalogs (`Mounted*`),
one per item of the other server, made from the item itself: each is listed as the item is, under its
served name, and reads its scopes, cache hints and the rest from the item. Using one runs the item
with a `Context` of the other server (its lifespan value, threads, settings; the caller's stream,
`_meta` and answers), inside the other server's middleware, so the mounting server's middleware is
outermost, the mounted one's inside it. The mount listens on the other server's bus: a list change
there rebuilds the views of that kind (only what changed is added or removed, and the mounting
server's catalogs announce it), a resource update is announced under its served URI. The other
server's lifespan is entered inside the mounting server's, after its start-up and left before its
shut-down; mounted while serving, it starts in the background (calls wait for it). Unmounting takes
the views out at once and leaves the other server's lifespan once the calls in flight have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterable, Protocol

import orjson

from .._app.catalog import Catalog
from .._app.context import Context
from .._app.prompts import Prompt
from .._app.resources import Resource, ResourceTemplate
from .._app.tools import Tool, check_tool_name
from .._runtime.lifespan import Lifespan
from .._runtime.subscriptions import PROMPTS, RESOURCE, RESOURCES, TOOLS, Bus, Change
from .._wire.inputs import InputRequired
from .._wire.jsonrpc import INTERNAL_ERROR, McpError
from .._wire.protocol import Route, method_route
from .._wire.toolheaders import header_params
from .._wire.uritemplate import UriTemplate

if TYPE_CHECKING:
    from ..middleware import Middleware

log = logging.getLogger("mcpcore.mount")

_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,63}")


class Host(Protocol):
    """What a mount reads of the servers on either side (`Server` is one)."""

    name: str
    tools: Catalog[Tool]
    resources: Catalog[Resource]
    templates: Catalog[ResourceTemplate]
    prompts: Catalog[Prompt]
    middleware: tuple[Middleware, ...]
    lifespan: Lifespan[Any]
    mounts: dict[str, Mount]

    @property
    def bus(self) -> Bus: ...


def check_prefix(prefix: str) -> None:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(f"a mount prefix is a letter then letters, digits and '-' (at most 64 characters), "
                         f"not {prefix!r}: its first '_' or '+' is where a served name leaves it")


def served_name(prefix: str, name: str) -> str:
    """A mounted tool's or prompt's name."""
    return f"{prefix}_{name}"


def served_uri(prefix: str, uri: str) -> str:
    """A mounted resource's URI or template."""
    return f"{prefix}+{uri}"


class _View:
    """A mounted item: its own served key; everything else the mounting server reads is the item's."""

    key_field = "name"  # the entry's field that holds the key

    def __init__(self, mount: Mount, item: Any, key: str) -> None:
        self.mount, self.item, self.key = mount, item, key
        self._entry = {**item.describe(), self.key_field: key}

    def describe(self) -> dict[str, Any]:
        return self._entry

    def __getattr__(self, name: str) -> Any:  # scopes, cache, task, requires, ...: the item's
        return getattr(self.item, name)


class MountedTool(_View):
    plain = False  # its calls run in the other server, inside that server's middleware: never the dispatcher's own

    def __init__(self, mount: Mount, tool: Tool) -> None:
        key = served_name(mount.prefix, tool.key)
        check_tool_name(key)
        super().__init__(mount, tool, key)
        self.route = Route("tools/call", "name", header_params(key, tool.input_schema), target=self)
        self.task = "forbidden"  # a plain call: the other server's tasks are its own (not served here)

    async def call(self, arguments: dict[str, Any], context: Context) -> dict[str, Any]:
        tool: Tool = self.item
        return await self.mount.run(tool.route, "name", tool.key, context, lambda inner: tool.call(arguments, inner))


class MountedPrompt(_View):
    def __init__(self, mount: Mount, prompt: Prompt) -> None:
        super().__init__(mount, prompt, served_name(mount.prefix, prompt.key))

    async def get(self, arguments: Any, context: Context) -> dict[str, Any]:
        prompt: Prompt = self.item
        return await self.mount.run(method_route("prompts/get"), "name", prompt.key, context,
                                    lambda inner: prompt.get(arguments, inner))


class MountedResource(_View):
    key_field = "uri"

    def __init__(self, mount: Mount, resource: Resource | ResourceTemplate) -> None:
        super().__init__(mount, resource, served_uri(mount.prefix, resource.key))

    async def read(self, uri: str, variables: dict[str, str], context: Context) -> list[dict[str, Any]]:
        """The item's contents for the URI it is served at, each content's URI as served too."""
        own = uri[len(self.mount.prefix) + 1:]

        async def read(inner: Context) -> dict[str, Any]:
            return {"contents": await self.item.read(own, variables, inner)}

        result = await self.mount.run(method_route("resources/read"), "uri", own, context, read)
        return [{**content, "uri": served_uri(self.mount.prefix, content["uri"])} if isinstance(content.get("uri"), str)
                else content for content in result["contents"]]


class MountedTemplate(MountedResource):
    key_field = "uriTemplate"

    def __init__(self, mount: Mount, template: ResourceTemplate) -> None:
        super().__init__(mount, template)
        self.template = UriTemplate(self.key)  # the served URIs it matches, with the item's variables


class _Relay:
    """The mount's ear on the other server's bus (a subscriber there)."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount

    def offer(self, change: Change) -> None:
        if change.kind == RESOURCE and change.uri is not None:
            self.mount.host.bus.publish(Change(RESOURCE, served_uri(self.mount.prefix, change.uri)))
        elif change.kind in (TOOLS, PROMPTS, RESOURCES):
            self.mount.sync(change.kind)

    def resync(self) -> None:
        for kind in (TOOLS, PROMPTS, RESOURCES):
            self.mount.sync(kind)


class Mount:
    """One server mounted on another under `prefix`: its views, its lifespan inside the host's, its calls in flight."""

    def __init__(self, host: Host, prefix: str, other: Host) -> None:
        self.host, self.prefix, self.other = host, prefix, other
        self.relay = _Relay(self)
        self.started = asyncio.Event()  # its lifespan entered (or failed to be: `failure`)
        self.failure: BaseException | None = None
        self.entered = False
        self.mounted = True
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def _pairs(self, kind: str) -> Iterable[tuple[Catalog[Any], Catalog[Any], Callable[[Mount, Any], _View]]]:
        """(the host's catalog, the other's, the view) for the catalogs a change of `kind` touches."""
        host, other = self.host, self.other
        if kind == TOOLS:
            yield host.tools, other.tools, MountedTool
        elif kind == PROMPTS:
            yield host.prompts, other.prompts, MountedPrompt
        else:
            yield host.resources, other.resources, MountedResource
            yield host.templates, other.templates, MountedTemplate

    def views(self, kind: str, refuse: bool) -> Iterable[tuple[Catalog[Any], list[_View]]]:
        """The views of the other server's items of `kind` now, with the host's catalog each goes in. An item
        whose served name is not a valid one (a tool name past 128 characters) is a ValueError if `refuse`,
        else left out with a warning."""
        for catalog, items, view in self._pairs(kind):
            made = []
            for item in items:
                try:
                    made.append(view(self, item))
                except ValueError as error:
                    if refuse:
                        raise ValueError(f"mounting at {self.prefix!r}: {error}") from None
                    log.warning("the item %r mounted at %r is not served: %s", item.key, self.prefix, error)
            yield catalog, made

    def _ours(self, found: Any) -> bool:
        return isinstance(found, _View) and found.mount is self

    def planned(self, replace: bool) -> list[tuple[Catalog[Any], list[_View]]]:
        """Every view with the host's catalog it goes in, the host untouched (a ValueError naming the first
        one whose key the host already has, unless `replace`): a mount that fails changes nothing."""
        made = [(catalog, views) for kind in (TOOLS, PROMPTS, RESOURCES) for catalog, views in self.views(kind, True)]
        if not replace:
            for catalog, views in made:
                for view in views:
                    if catalog.get(view.key) is not None:
                        raise ValueError(f"mounting at {self.prefix!r} would serve {view.key!r}, which server "
                                         f"{self.host.name!r} already has; pass replace=True to replace it, or choose "
                                         "another prefix")
        return made

    @staticmethod
    def attach(planned: list[tuple[Catalog[Any], list[_View]]]) -> None:
        """Put the planned views in the host's catalogs."""
        for catalog, views in planned:
            for view in views:
                catalog.add(view)

    def detach(self) -> None:
        """Take every view out of the host's catalogs and stop following the other server."""
        self.mounted = False
        self.other.bus.detach(self.relay)  # type: ignore[arg-type]
        for kind in (TOOLS, PROMPTS, RESOURCES):
            for catalog, _, _ in self._pairs(kind):
                for item in catalog:
                    if self._ours(item):
                        catalog.remove(item.key)

    def sync(self, kind: str) -> None:
        """The other server's items of `kind` changed: the views that are gone or changed leave, the new
        ones come (one whose key the host registered itself is left out, with a warning)."""
        if not self.mounted:
            return
        for catalog, views in self.views(kind, False):
            fresh = {view.key: view for view in views}
            for item in catalog:
                if self._ours(item) and (item.key not in fresh or fresh[item.key].item is not item.item):
                    catalog.remove(item.key)
            for key, view in fresh.items():
                present = catalog.get(key)
                if present is None:
                    catalog.add(view)
                elif not self._ours(present):
                    log.warning("server %r already has %r: the one mounted at %r is not served", self.host.name, key,
                                self.prefix)

    # -- its lifespan, inside the host's ---------------------------------

    async def enter(self) -> None:
        """Follow the other server's changes (what changed since the mount is caught up first), then enter
        its lifespan (its start-up runs, or it is already serving). Only while the host serves: the bus
        delivers on the event loop, which registration before serving has not got."""
        self.other.bus.attach(self.relay)  # type: ignore[arg-type]  # a subscriber: offer and resync
        self.relay.resync()
        self.failure = None
        try:
            await self.other.lifespan.__aenter__()
            self.entered = True
        except BaseException as error:
            self.failure = error
            raise
        finally:
            self.started.set()

    async def enter_in_background(self) -> None:
        """`enter`, for a mount made while the host serves: a failure is logged and told to its callers."""
        try:
            await self.enter()
        except Exception:
            log.exception("the server mounted at %r on %r did not start", self.prefix, self.host.name)
        if not self.mounted:  # unmounted while it started
            await self.leave()

    async def leave(self) -> None:
        self.other.bus.detach(self.relay)  # type: ignore[arg-type]
        if self.entered:
            self.entered = False
            await self.other.lifespan.__aexit__(None, None, None)

    async def retire(self) -> None:
        """Leave the other server's lifespan once the calls in flight have ended (it was unmounted)."""
        try:
            await self.idle.wait()
        finally:
            await self.leave()

    # -- a call of a mounted item --------------------------------------

    async def run(self, route: Route, field: str, own: str, context: Context,
                  work: Callable[[Context], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """`work` (the item's own call) with a context of the other server, inside its middleware. Its
        middleware sees the request as it would have come to it: its own name or URI in `field`."""
        if not self.started.is_set():
            await self.started.wait()
        if (not self.mounted and not self.entered) or self.failure is not None:
            why = f"did not start: {self.failure}" if self.failure is not None else "was unmounted"
            raise McpError(INTERNAL_ERROR, f"the server mounted at {self.prefix!r} {why}")
        inner = context.serving(self.other)
        self.in_flight += 1
        self.idle.clear()
        try:
            if not self.other.middleware:
                return await work(inner)
            return await self._through_middleware(route, field, own, context, inner, work)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def _through_middleware(self, route: Route, field: str, own: str, context: Context, inner: Context,
                                  work: Callable[[Context], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The other server's middleware around `work`: they see the encoded result as they would (an
        input_required one when the item asks); the question itself goes on to the host, which asks it."""
        from ..middleware import chain  # loaded only when a mounted server has middleware

        call = context.call_as(route, field, own)
        asked: list[InputRequired] = []

        async def last(_: Any) -> bytes:
            try:
                return orjson.dumps(await work(inner))
            except InputRequired as ask:
                asked.append(ask)
                return orjson.dumps(ask.result(context.client_capabilities)[0])

        encoded = await chain(self.other.middleware, last)(call)
        if asked:
            raise asked[-1]
        return orjson.loads(encoded)  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def mounted_lifespans(server: Host) -> AsyncIterator[None]:
    """Inside the server's lifespan: each mounted server's, entered in mount order and left in reverse."""
    try:
        for mount in list(server.mounts.values()):
            await mount.enter()
        yield
    finally:
        for mount in reversed(list(server.mounts.values())):
            await mount.leave()
