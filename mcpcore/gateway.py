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
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import anyio

from ._app.context import Context
from ._app.prompts import Prompt
from ._app.resources import Resource, ResourceTemplate
from ._app.tools import Tool
from ._serving.server import Server
from ._gateway.eras import DEFAULT_HOLD, RELAYED_CAPABILITIES, HeldCalls, UpstreamInput, relay, settle_era, wire_answer
from ._wire.inputs import InputRequired
from ._wire.jsonrpc import INTERNAL_ERROR, META_CAPABILITIES, META_LOG_LEVEL, METHOD_NOT_FOUND, McpError
from .client import Client

__all__ = ["Gateway", "DEFAULT_TIMEOUT", "DEFAULT_HOLD", "RESTART_DELAYS"]

log = logging.getLogger("mcpcore.gateway")

DEFAULT_TIMEOUT = 60.0  # seconds one forwarded request may take (an elicitation round is the client's, not counted)
RESTART_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0)  # seconds before each restart of an upstream that keeps exiting
_RESULT_ENVELOPE = ("resultType", "_meta")  # what the gateway's own wire adds to a result again


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
    `timeout` bounds each forwarded request; `hold` how long a call a 2025-era upstream holds open
    waits for its client's answer; `restart_delays` are the back-off between restarts (the last one
    repeats). Other keyword arguments go to `Server` (auth, metrics, middleware, ...).
    """

    def __init__(self, connect: Callable[[], Client | Awaitable[Client]], *, name: str = "mcpcore-gateway",
                 timeout: float = DEFAULT_TIMEOUT, hold: float = DEFAULT_HOLD, restart_delays: Sequence[float] = RESTART_DELAYS,
                 **server_options: Any) -> None:
        if timeout <= 0:
            raise ValueError("the upstream timeout must be a positive number of seconds")
        self.connect = connect
        self.timeout = timeout
        self.held = HeldCalls(timeout, hold)  # calls on a 2025-era upstream's session
        self.restart_delays = tuple(restart_delays) or RESTART_DELAYS
        self.server = Server(name, lifespan=self._lifespan, **server_options)
        self.server.offers_resources = True  # the upstream's resources come at start, and may come back after a restart
        self.client: Client | None = None  # the upstream's client while it is up
        self._up: anyio.Event | None = None

    # -- the upstream's life ---------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lifespan(self, server: Server) -> AsyncIterator[Gateway]:
        # An asyncio task of its own, not a task group: the server's first user to enter its lifespan and
        # the last to leave need not be one task (see `Lifespan.spawn`).
        self._up = anyio.Event()
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
        start must succeed: a gateway whose upstream cannot start at all refuses to serve."""
        failures = 0
        while True:
            try:
                client = self.connect()
                if inspect.isawaitable(client):  # a remote upstream: which transport it serves is asked first
                    client = await client
                if client.on_notification is None:
                    client.on_notification = _unowned
                if client.on_request is None:  # a 2025-era upstream's requests, asked of the calling client
                    client.on_request = self.held.asked
                    client.capabilities.update(RELAYED_CAPABILITIES)
                async with client:
                    await self._mirror(client)
                    self.client, failures = client, 0
                    assert self._up is not None
                    self._up.set()
                    if not started.done():
                        started.set_result(None)
                    await client.wait_gone()
                    self.client, self._up = None, anyio.Event()  # before closing it: new calls wait for the next one
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

    async def _mirror(self, client: Client) -> None:
        """Register what the upstream offers (the lists it answers) in place of what was registered before."""
        discovered = await settle_era(client, self.timeout)
        if discovered.get("instructions") and not self.server.instructions:
            self.server.instructions = discovered["instructions"]
        offered = discovered.get("capabilities") or {}
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
                if catalog.get(item.key) is not None:
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
            await relay(context, notification)

        try:
            # `fail_after`'s work without its wrappers (a context manager generator, backend look-ups): one per call
            with anyio.CancelScope(deadline=anyio.current_time() + self.timeout):
                return await client.send(method, params, progress="progressToken" in context.meta, on_notification=heard)
        except ConnectionError as gone:
            raise McpError(INTERNAL_ERROR, f"the upstream server went away during {method} ({gone}); "
                                           "the gateway is opening it again") from None
        raise McpError(INTERNAL_ERROR, f"the upstream server did not answer {method} within {self.timeout:g} s")

    async def forward_asking(self, method: str, params: dict[str, Any], context: Context) -> dict[str, Any]:
        """`forward`, with the upstream's questions asked of the caller: an `input_required` result is
        raised as `InputRequired` (its requests as they are, its requestState as the sealed state), and
        the retry (`context.state` set) carries the answers and that requestState back upstream. On a 2025-era
        upstream's session the call is held open across the rounds instead (`mcpcore._gateway.eras.HeldCalls`)."""
        client = await self._client()
        if client.legacy:
            return _bare(await self.held.forward(client, method, params, context))
        if context.state is not None:
            params = {**params, "inputResponses": {name: wire_answer(answer) for name, answer in context.answers.items()}}
            if context.state.get("requestState") is not None:
                params["requestState"] = context.state["requestState"]
        result = await self.forward(method, params, context)
        if result.get("resultType") == "input_required":
            asked = {name: UpstreamInput(request) for name, request in (result.get("inputRequests") or {}).items()}
            raise InputRequired(asked, state={"requestState": result.get("requestState")})  # type: ignore[arg-type]
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
