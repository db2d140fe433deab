"""`mcpcore.gateway`: serve another MCP server (the upstream) from an mcpcore `Server`, as if its tools,
resources, templates and prompts were local.

    gateway = Gateway(lambda: Client.stdio(["bash", "server.sh"]))
    gateway.server.run("http", port=8000)      # `mcpcore proxy --transport http -- bash server.sh`

Theory of operation. The upstream is reached through one `mcpcore.client.Client`, opened in the
server's lifespan: its lists are read and registered as stand-ins (`UpstreamTool`, ...) whose
calls forward the request upstream and return its result as it is (content, structuredContent,
isError; a JSON-RPC error keeps its code and message). Many calls share the one client (its ids
multiplex them); each call's progress and log notifications go to the calling client through its
`Context`; a caller that cancels or disconnects cancels its forwarded call (the client sends
`notifications/cancelled`). A call is bounded by `timeout`; an upstream that exits (or a remote one
out of reach) fails the calls in flight with a clear error and is opened again after a back-off.

Era translation: the upstream is asked on the 2026-07-28 wire, whichever era the calling client
speaks (mcpcore answers 2025-era clients' `initialize` and keeps their sessions), unless it refuses
the `server/discover` probe: then on a 2025-era session (`mcpcore._gateway.eras`), each call held
open upstream while its questions are asked of the caller as below. An upstream
`input_required` result is raised as this server's own `InputRequired`, carrying the upstream's
input requests as they are and its `requestState` as the sealed state: a 2026 client gets it as
mcpcore's own multi round-trip request, a 2025-era client as real `elicitation/create`,
`sampling/createMessage` or `roots/list` requests on its session; the answers go back upstream as
the retry's `inputResponses` with the upstream `requestState`.

Following the upstream: while it is up, the gateway holds one `subscriptions/listen` of its own upstream
(list changes, and updates of every resource it lists); a list change reads the lists again and is
announced to the gateway's own listen and GET streams, an update reaches the clients that follow its URI.
`completion/complete` is forwarded while the upstream offers completions, and the Tasks and Skills
extensions are declared and their methods forwarded when the upstream declares them (`FORWARDED_EXTENSIONS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import anyio

from ._app.completions import Completions
from ._app.context import Context
from ._app.prompts import Prompt
from ._app.resources import Resource, ResourceTemplate
from ._app.tools import Tool
from ._runtime.subscriptions import METHODS, PROMPTS, RESOURCES, TOOLS, Change
from ._serving.server import Server
from ._gateway.eras import DEFAULT_HOLD, RELAYED_CAPABILITIES, HeldCalls, UpstreamInput, relay, settle_era, wire_answer
from ._wire.inputs import InputRequired
from ._wire.jsonrpc import INTERNAL_ERROR, META_CAPABILITIES, META_LOG_LEVEL, METHOD_NOT_FOUND, McpError
from .client import Client
from .skills import EXTENSION as SKILLS
from .tasks import NAME_FIELDS as TASK_NAME_FIELDS
from .tasks import TASKS

__all__ = ["Gateway", "DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_HOLD", "RESTART_DELAYS"]

log = logging.getLogger("mcpcore.gateway")

DEFAULT_TIMEOUT = 60.0  # seconds one forwarded request may take (an elicitation round is the client's, not counted)
DEFAULT_CONNECT_TIMEOUT = 60.0  # seconds to start (or reach) the upstream and read its lists: an `npx` start may be slow
RESTART_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0)  # seconds before each restart of an upstream that keeps exiting
LISTEN_AGAIN_DELAY = 1.0  # seconds before an upstream listen the upstream ended is opened again
_RESULT_ENVELOPE = ("resultType", "_meta")  # what the gateway's own wire adds to a result again
_LIST_CHANGES = {METHODS[kind]: kind for kind in (TOOLS, PROMPTS, RESOURCES)}  # an upstream notification → its change
# The extensions forwarded when the upstream declares them: method → (the field Mcp-Name mirrors, whether a
# client must declare the extension to call it), as the extension registers its methods (tasks.py, skills.py).
FORWARDED_EXTENSIONS: dict[str, dict[str, tuple[str | None, bool]]] = {
    TASKS: {method: (name_field, True) for method, name_field in TASK_NAME_FIELDS.items()},
    SKILLS: {"skills/list": (None, False), "skills/get": (None, False), "resources/directory/read": (None, False)},
}


class UpstreamDidNotStart(RuntimeError):
    """The upstream could not be started (or its lists not read) at the gateway's start-up."""


async def _listed(listing: Callable[[], Awaitable[list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """What one list method answers; nothing when the upstream does not know the method."""
    try:
        return await listing()
    except McpError as error:
        if error.code != METHOD_NOT_FOUND:
            raise
        return []


def _unowned(notification: dict[str, Any]) -> None:
    """An upstream notification no call owns (a log while several calls run: the wire names no request)."""
    log.debug("the upstream said, for no one call: %s %s", notification.get("method"), notification.get("params"))


def _bare(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key not in _RESULT_ENVELOPE}


class Gateway:
    """An upstream MCP server served by `self.server` (an mcpcore `Server` named `name`).

    `connect` makes a fresh, unopened `Client` for the upstream (called again for each restart), or a coroutine
    that gives one (which may ask the upstream first; its failure counts as the upstream's);
    `timeout` bounds each forwarded request; `connect_timeout` each start of the upstream (its client
    made, which may ask a remote upstream first, then its handshake and lists: a start past it fails, as
    one that cannot start); `hold` how long a call a 2025-era upstream holds open waits for its client's
    answer; `restart_delays` are the back-off between restarts (the last one repeats). Other keyword
    arguments go to `Server` (auth, metrics, middleware, ...).
    """

    def __init__(self, connect: Callable[[], Client | Awaitable[Client]], *, name: str = "mcpcore-gateway",
                 timeout: float = DEFAULT_TIMEOUT, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 hold: float = DEFAULT_HOLD, restart_delays: Sequence[float] = RESTART_DELAYS, **server_options: Any) -> None:
        if timeout <= 0:
            raise ValueError("the upstream timeout must be a positive number of seconds")
        if connect_timeout <= 0:
            raise ValueError("the upstream connect timeout must be a positive number of seconds")
        self.connect = connect
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.held = HeldCalls(timeout, hold, self._changed)  # calls on a 2025-era upstream's session
        self.restart_delays = tuple(restart_delays) or RESTART_DELAYS
        self.server = Server(name, lifespan=self._lifespan, **server_options)
        self.server.offers_resources = True  # the upstream's resources come at start, and may come back after a restart
        self.server.completions = UpstreamCompletions(self)
        self.client: Client | None = None  # the upstream's client while it is up
        self.offered: dict[str, Any] = {}  # the upstream's capabilities, as it last said
        self._up: anyio.Event | None = None
        self._stale: anyio.Event  # set when the upstream said a list changed: its lists are read again (made in the lifespan)
        self._announced: set[str] = set()  # the list kinds it said changed since the lists were last read

    # -- the upstream's life ---------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lifespan(self, server: Server) -> AsyncIterator[Gateway]:
        # An asyncio task of its own, not a task group: the server's first user to enter its lifespan and
        # the last to leave need not be one task (see `Lifespan.spawn`).
        self._up, self._stale = anyio.Event(), anyio.Event()
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keeper = asyncio.get_running_loop().create_task(self._keep_up(started))
        try:
            await started
            yield self
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def _keep_up(self, started: asyncio.Future[None]) -> None:
        """Open the upstream and mirror it; once it is gone, open it again after a back-off. The first
        start must succeed: a gateway whose upstream cannot start at all refuses to serve. Each start (the
        client made, which may ask a remote upstream, its handshake and lists read) is bounded by
        `connect_timeout`; the client is opened and closed outside that bound, as its channel's task group
        must be left in the cancel scope it was entered in, and a cancelled close would leave a process."""
        failures = 0
        while True:
            try:
                deadline = anyio.current_time() + self.connect_timeout
                with anyio.CancelScope(deadline=deadline) as bound:
                    client = await self._made()
                if bound.cancelled_caught:
                    raise self._not_started()
                async with client:
                    with anyio.CancelScope(deadline=deadline) as bound:
                        await self._mirror(client)
                    if bound.cancelled_caught:
                        raise self._not_started()
                    self.client, failures = client, 0
                    assert self._up is not None
                    self._up.set()
                    if not started.done():
                        started.set_result(None)
                    async with anyio.create_task_group() as following:
                        following.start_soon(self._follow, client)
                        await client.wait_gone()
                        self.client, self._up = None, anyio.Event()  # at once, before closing it: new calls wait for the next one
                        following.cancel_scope.cancel()
                    log.warning("the upstream server is gone; opening it again")
            except Exception as error:  # it could not start, or its lists could not be read
                if not started.done():
                    started.set_exception(UpstreamDidNotStart(f"the upstream server did not start: {error}"))
                    return
                log.warning("the upstream server could not be started again: %s", error)
            finally:
                if self.client is not None:
                    self.client, self._up = None, anyio.Event()
            await anyio.sleep(self.restart_delays[min(failures, len(self.restart_delays) - 1)])
            failures += 1

    def _not_started(self) -> TimeoutError:
        """What a start past `connect_timeout` fails with (said after "the upstream server did not start: ")."""
        return TimeoutError(f"it did not answer its handshake and lists within {self.connect_timeout:g} s "
                            "(--upstream-connect-timeout, or Gateway(connect_timeout=...))")

    async def _made(self) -> Client:
        """A new, unopened client for the upstream, its hooks set."""
        client = self.connect()
        if inspect.isawaitable(client):  # a remote upstream: which transport it serves is asked first
            client = await client
        if client.on_notification is None:
            client.on_notification = self._changed
        if client.on_renewed is None:  # a renewed 2025-era session may be a restarted server's: read again
            client.on_renewed = self._lists_changed
        if client.on_request is None:  # a 2025-era upstream's requests, asked of the calling client
            client.on_request = self.held.asked
            client.capabilities.update(RELAYED_CAPABILITIES)
        return client

    async def _mirror(self, client: Client) -> None:
        """Register what the upstream offers (the lists it answers) in place of what was registered before."""
        discovered = await settle_era(client, self.timeout)
        if discovered.get("instructions") and not self.server.instructions:
            self.server.instructions = discovered["instructions"]
        offered = discovered.get("capabilities") or {}
        if offered != self.offered:  # what the gateway announces follows (completions, extensions)
            self.offered = offered
            self._offer_extensions(offered)
            self.server.dispatcher.forget_discover()
        tools = await _listed(client.list_tools) if "tools" in offered else []
        resources = await _listed(client.list_resources) if "resources" in offered else []
        templates = await _listed(client.list_resource_templates) if "resources" in offered else []
        prompts = await _listed(client.list_prompts) if "prompts" in offered else []
        for catalog, items in ((self.server.tools, self._stand_ins(UpstreamTool, tools)),
                               (self.server.resources, self._stand_ins(UpstreamResource, resources)),
                               (self.server.templates, self._stand_ins(UpstreamTemplate, templates)),
                               (self.server.prompts, self._stand_ins(UpstreamPrompt, prompts))):
            for key in [item.key for item in catalog if item.key not in {new.key for new in items}]:
                catalog.remove(key)
            for item in items:
                if (old := catalog.get(item.key)) is not None:
                    if getattr(old, "_entry", None) == item._entry:
                        continue  # unchanged: not announced as a change
                    catalog.remove(item.key)
                catalog.add(item)

    def _stand_ins(self, kind: Any, entries: list[dict[str, Any]]) -> list[Any]:
        """A stand-in for each entry; one mcpcore cannot serve (a tool name with a `/`) is left out, said once."""
        made = []
        for entry in entries:
            try:
                made.append(kind(self, entry))
            except (KeyError, TypeError, ValueError) as error:
                log.warning("the upstream's %s is not served: %s (%s)", kind.__name__[8:].lower(), entry, error)
        return made

    def _offer_extensions(self, offered: dict[str, Any]) -> None:
        """Declare each extension the gateway knows how to forward (Tasks, Skills) as the upstream declares
        it, its methods forwarded (once: an upstream started again without it answers them with its own error)."""
        declared = offered.get("extensions") or {}
        for identifier, methods in FORWARDED_EXTENSIONS.items():
            settings = declared.get(identifier)
            if not isinstance(settings, dict) or identifier in self.server.extensions:
                continue
            extension = self.server.extension(identifier, settings)
            for method, (name_field, needs_declaring) in methods.items():
                extension.method(method, name_field=name_field, declared=needs_declaring)(
                    functools.partial(self._forward_method, method))

    async def _forward_method(self, method: str, params: dict[str, Any], context: Context) -> dict[str, Any]:
        """An extension's method, forwarded as it came."""
        return _bare(await self.forward(method, {key: value for key, value in params.items() if key != "_meta"}, context))

    # -- the upstream's changes -----------------------------------------------

    async def _follow(self, client: Client) -> None:
        """Hear the upstream's changes while it is up, on one `subscriptions/listen` of its own: its list
        changes and updates of every resource it lists (the gateway's own subscriptions then reach only
        the clients that follow that URI). A list change reads the lists again; what changed is announced
        by the catalogs. The listen is opened again when the listed resources change; each acknowledgement
        reads the lists again, so a change made while no listen was open is not missed. An upstream
        without listens (or a 2025-era one, whose changes come unasked) is followed by `_changed` only."""
        offered = self.offered
        if not client.legacy and any((offered.get(kind) or {}).get(flag) for kind, flag in
                                     (("tools", "listChanged"), ("prompts", "listChanged"),
                                      ("resources", "listChanged"), ("resources", "subscribe"))):
            while True:
                uris = self._followed_uris()
                async with anyio.create_task_group() as listening:
                    listening.start_soon(self._listen, client, uris, listening.cancel_scope)
                    while self._followed_uris() == uris:
                        await self._reread(client)
                    listening.cancel_scope.cancel()
        while True:
            await self._reread(client)

    def _followed_uris(self) -> list[str]:
        """The upstream resources the gateway follows: every one it lists (as many as a listen may follow)."""
        listed = sorted(resource.key for resource in self.server.resources if isinstance(resource, UpstreamResource))
        return listed[:self.server.subscriptions.max_uris]

    async def _listen(self, client: Client, uris: list[str], scope: anyio.CancelScope) -> None:
        """One upstream listen for list changes and `uris`, until cancelled; one the upstream refuses or ends is logged."""
        offered = self.offered
        wanted: dict[str, Any] = {TOOLS: "tools" in offered, PROMPTS: "prompts" in offered, RESOURCES: "resources" in offered}
        if uris and (offered.get("resources") or {}).get("subscribe"):
            wanted["resourceSubscriptions"] = uris
        try:
            await client.send("subscriptions/listen", {"notifications": wanted}, on_notification=self._changed)
        except McpError as error:
            log.warning("the upstream server refused subscriptions/listen (%s): its changes are not followed", error.message)
            await anyio.sleep_forever()  # not asked again until its resources change
        except ConnectionError as broken:  # a server gone is found by the next listen, and `_keep_up` starts it again
            log.info("the upstream server's subscriptions/listen broke (%s); listening again in %g s", broken,
                     LISTEN_AGAIN_DELAY)
        else:
            log.info("the upstream server ended its subscriptions/listen; listening again in %g s", LISTEN_AGAIN_DELAY)
        await anyio.sleep(LISTEN_AGAIN_DELAY)
        scope.cancel()  # `_follow` opens the next one

    async def _reread(self, client: Client) -> None:
        """Wait for a list change, then read the lists again (a failure is logged: the next change tries again)."""
        await self._stale.wait()
        self._stale = anyio.Event()
        try:
            with anyio.fail_after(self.timeout), \
                    (self.held.unrelayed("the gateway's own reading of its lists") if client.legacy else contextlib.nullcontext()):
                await self._mirror(client)
        except (McpError, TimeoutError) as error:
            log.warning("the upstream server's lists could not be read again: %s", error)
        announced, self._announced = self._announced, set()  # taken once read: a cancelled read loses none
        for kind in announced:  # passed on even when the lists read the same (it may have changed and back)
            self.server.bus.publish(Change(kind))

    def _lists_changed(self) -> None:
        """The upstream's lists may have changed unannounced: `_follow` reads them again."""
        self._stale.set()

    async def _changed(self, notification: dict[str, Any]) -> None:
        """An upstream notification outside any call: a list change marks the lists stale (read again by
        `_follow`, never here: this runs in the client's reader), a resource update is announced to the
        gateway's subscribers of that URI; anything else is logged."""
        method = notification.get("method")
        params = notification.get("params") or {}
        if method in _LIST_CHANGES:
            self._announced.add(_LIST_CHANGES[method])
            self._stale.set()
        elif method == "notifications/subscriptions/acknowledged":
            self._stale.set()
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            self.server.notify_resource_updated(params["uri"])
        else:
            _unowned(notification)

    async def _client(self) -> Client:
        """The upstream's client, waiting (within the timeout) while it is being started again."""
        if self.client is not None:
            return self.client
        assert self._up is not None, "the gateway serves only inside its server's lifespan"
        with anyio.move_on_after(self.timeout):
            await self._up.wait()
        if self.client is None:
            raise McpError(INTERNAL_ERROR, f"the upstream server is not available (not back within {self.timeout:g} s)")
        return self.client

    # -- forwarding -----------------------------------------------------------

    async def forward(self, method: str, params: dict[str, Any], context: Context) -> dict[str, Any]:
        """`method` upstream with `params` and the caller's capabilities and log level; the result as the upstream sent it.
        Its progress and logs go to the caller as they come; a timeout or an upstream that exits is a
        clear JSON-RPC error, an upstream error is raised as it came."""
        client = await self._client()
        if not client.legacy:  # a 2025-era session has these once, from initialize (the gateway's own)
            meta = {META_CAPABILITIES: context.client_capabilities}  # the upstream asks only what the caller can answer
            if (level := context.meta.get(META_LOG_LEVEL)) is not None:
                meta[META_LOG_LEVEL] = level
            params = {**params, "_meta": meta}

        async def heard(notification: dict[str, Any]) -> None:
            await relay(context, notification, self._changed)

        try:
            # `fail_after`'s work without its wrappers (a context manager generator, backend look-ups): one per call
            # On a 2025-era session a question asked during it is refused, not handed to another call beside it
            with anyio.CancelScope(deadline=anyio.current_time() + self.timeout), \
                    (self.held.unrelayed(method) if client.legacy else contextlib.nullcontext()):
                return await client.send(method, params, progress="progressToken" in context.meta, on_notification=heard)
        except ConnectionError as gone:
            raise McpError(INTERNAL_ERROR, f"the upstream server went away during {method} ({gone})") from None
        raise McpError(INTERNAL_ERROR, f"the upstream server did not answer {method} within {self.timeout:g} s")

    async def forward_asking(self, method: str, params: dict[str, Any], context: Context) -> dict[str, Any]:
        """`forward`, with the upstream's questions asked of the caller: an `input_required` result is
        raised as `InputRequired` (its requests as they are, its requestState as the sealed state), and
        the retry (`context.state` set) carries the answers and that requestState back upstream. On a 2025-era
        upstream's session the call is held open across the rounds instead (`mcpcore._gateway.eras.HeldCalls`)."""
        client = await self._client()
        if client.legacy:
            return _bare(await self.held.forward(client, method, params, context))
        if context.answers or context.state is not None:  # answers without state too: the upstream reads them by shape
            params = {**params, "inputResponses": {name: wire_answer(answer) for name, answer in context.answers.items()}}
        if context.state is not None and context.state.get("requestState") is not None:
            params["requestState"] = context.state["requestState"]
        result = await self.forward(method, params, context)
        if result.get("resultType") == "input_required":
            asked = {name: UpstreamInput(request) for name, request in (result.get("inputRequests") or {}).items()}
            raise InputRequired(asked, state={"requestState": result.get("requestState")})  # type: ignore[arg-type]
        if result.get("resultType") == "task":  # a call the upstream runs as a task (the Tasks extension): its handle
            return {**_bare(result), "resultType": "task"}
        return _bare(result)


def _stand_in(**arguments: Any) -> None:
    """The function a stand-in is built around: never called, as the stand-in's own method forwards."""


class UpstreamTool(Tool):
    """An upstream tool: listed as the upstream lists it; a call forwards its arguments as they are
    (the upstream validates them) and returns the upstream's result."""

    def __init__(self, gateway: Gateway, entry: dict[str, Any]) -> None:
        super().__init__(_stand_in, name=entry["name"], input_schema=entry.get("inputSchema") or {"type": "object"})
        self.gateway, self._entry = gateway, entry

    async def call(self, arguments: dict[str, Any], context: Context) -> dict[str, Any]:
        return await self.gateway.forward_asking("tools/call", {"name": self.key, "arguments": arguments}, context)


class UpstreamResource(Resource):
    """An upstream resource: a read forwards its URI."""

    def __init__(self, gateway: Gateway, entry: dict[str, Any]) -> None:
        super().__init__(_stand_in, entry["uri"])
        self.gateway, self._entry = gateway, entry

    async def read(self, uri: str, variables: dict[str, str], context: Context) -> list[dict[str, Any]]:
        return (await self.gateway.forward_asking("resources/read", {"uri": uri}, context))["contents"]


class UpstreamTemplate(ResourceTemplate):
    """An upstream resource template: a read of a URI it matches forwards that URI."""

    def __init__(self, gateway: Gateway, entry: dict[str, Any]) -> None:
        super().__init__(_stand_in, entry["uriTemplate"])
        self.gateway, self._entry = gateway, entry

    async def read(self, uri: str, variables: dict[str, str], context: Context) -> list[dict[str, Any]]:
        return (await self.gateway.forward_asking("resources/read", {"uri": uri}, context))["contents"]


class UpstreamPrompt(Prompt):
    """An upstream prompt: a get forwards its arguments as they are."""

    def __init__(self, gateway: Gateway, entry: dict[str, Any]) -> None:
        super().__init__(_stand_in, name=entry["name"])
        self.gateway, self._entry = gateway, entry

    async def get(self, arguments: Any, context: Context) -> dict[str, Any]:
        params = {"name": self.key, **({"arguments": arguments} if arguments is not None else {})}
        return await self.gateway.forward_asking("prompts/get", params, context)


class UpstreamCompletions(Completions):
    """`completion/complete`, forwarded when the upstream offers completions (its prompts and templates are
    the gateway's); completions registered on the gateway's own server answer otherwise."""

    def __init__(self, gateway: Gateway) -> None:
        super().__init__()
        self.gateway = gateway

    def __bool__(self) -> bool:
        return "completions" in self.gateway.offered or super().__bool__()

    async def complete(self, params: dict[str, Any], known: Callable[[str, str], bool], context: Context) -> dict[str, Any]:
        if "completions" not in self.gateway.offered:
            return await super().complete(params, known, context)
        forwarded = {key: value for key, value in params.items() if key != "_meta"}
        return _bare(await self.gateway.forward("completion/complete", forwarded, context))
