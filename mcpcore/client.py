"""`mcpcore.client`: an MCP client for both protocol eras, in memory, over stdio, Streamable HTTP or HTTP+SSE.

    async with Client.stdio(["python", "server.py"]) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})

Theory of operation. The client builds each request the way a conforming client
does (on the 2026-07-28 wire with the `_meta` block, on a 2025-era one after an
`initialize` that opens a session) and hands it to a channel: `server.handle`
with a writer of its own for a `Server` in this process (`Client(server)`), or
one of `mcpcore.transports.remote`: a subprocess (`Client.stdio(command)`), a
Streamable HTTP URL (`Client.http(url)`) or an HTTP+SSE one (`Client.sse(url)`).
Many requests may run at once on one client (in tasks of a task group): each
gets its own response, progress (by its `progressToken`) and logs, and a
request cancelled by its caller's cancel scope is cancelled on the server
(`notifications/cancelled` on a shared stream, a closed connection over HTTP).
A notification no request owns (a list change, or a log while several requests
run over stdio or HTTP+SSE) goes to `on_notification`. A server that goes away
fails every request in flight with a `ConnectionError`.

A JSON-RPC error raises `McpError` (`InvalidParams` for -32602); a tool's
`isError` result does not. What the server asks of the client is answered by
the callbacks given: `elicit` (a form or URL elicitation's params → its
result), `sample` (a sampling request's params → a `CreateMessageResult`) and
`roots` (a list of root URIs), or by `on_request` (the whole request → its
result) for a caller that relays them (`mcpcore.gateway`). The client declares
exactly the capabilities its callbacks cover, and on the 2026 wire retries an
`input_required` result with the answers and the sealed state, as many rounds
as the server asks; on a 2025-era wire it answers the session's
server-to-client requests (over stdio and HTTP+SSE in a task of their own,
while other requests go on). Progress and log
notifications go to `on_progress` / `on_log` and are kept on each `Outcome` (a
tool call asks for progress unless told `progress=False`; other requests when
`on_progress` is given, or `request(..., progress=True)`). The listeners run
on the channel's reader: they must not wait for another request of the same
client. `strict=True` checks every message against the era's official JSON
Schema (needs `jsonschema`). `Client.sync()` gives the same methods for code
without an event loop. `mcpcore.testing.Client` is this client.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence

import anyio
import orjson

from . import __version__
from ._app.signature import run_callback
from ._runtime.call import Call
from ._runtime.clientstate import Bucket
from ._runtime.session import Session
from ._serving.server import Server
from ._wire.jsonrpc import (
    INVALID_PARAMS,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    MODERN_VERSIONS,
    InvalidParams,
    McpError,
    SessionExpired,
)

__all__ = ["Client", "Outcome", "Subscription"]

Answer = Callable[[dict[str, Any]], "Any | Awaitable[Any]"]
Listener = Callable[[dict[str, Any]], "Any | Awaitable[Any]"]
MAX_ROUNDS = 16  # input_required rounds before the client gives up on a server that keeps asking
CLIENT_INFO = {"name": "mcpcore", "version": __version__}


@dataclass
class Outcome:
    """One request's result with the notifications that came before it."""

    result: dict[str, Any]
    notifications: list[dict[str, Any]] = field(default_factory=list)

    @property
    def content(self) -> list[dict[str, Any]]:
        return self.result.get("content", [])

    @property
    def structured(self) -> Any:
        """A tool's `structuredContent` (None without one)."""
        return self.result.get("structuredContent")

    @property
    def is_error(self) -> bool:
        return bool(self.result.get("isError"))

    @property
    def text(self) -> str:
        """The text items of the content, joined by newlines."""
        return "\n".join(item["text"] for item in self.content if item.get("type") == "text")

    @property
    def progress(self) -> list[dict[str, Any]]:
        """The params of each progress notification, in order (`call_tool` asks for them by default;
        another request, only with `request(..., progress=True)` or a client's `on_progress`)."""
        return [n["params"] for n in self.notifications if n.get("method") == "notifications/progress"]

    @property
    def logs(self) -> list[dict[str, Any]]:
        """The params of each log message notification, in order."""
        return [n["params"] for n in self.notifications if n.get("method") == "notifications/message"]


Heard = Callable[[dict[str, Any]], Awaitable["dict[str, Any] | None"]]  # a message from the server → a reply, if one is due


class _Memory:
    """The server in this process: each request through `server.handle`, as a transport would."""

    def __init__(self, server: Server, principal: str | None, auth: Any) -> None:
        self.server, self.principal, self.auth = server, principal, auth
        self.session: Session | None = None  # the 2025-era session, from initialize on
        self.client_state = Bucket()  # its state on the 2026-07-28 wire: one client, as over stdio

    async def open(self, answer: Any = None, unowned: Any = None) -> None:
        await self.server.lifespan.__aenter__()  # each call's messages reach its own writer: nothing to route

    async def close(self) -> None:
        if self.session is not None:
            self.session.close()
        await self.server.lifespan.__aexit__(None, None, None)

    async def exchange(self, message: dict[str, Any], heard: Heard, legacy: bool) -> dict[str, Any] | None:
        if legacy and message["method"] == "initialize":
            self.session = Session(None, self.principal)
        writer = _Recorder(heard, self.session, self.client_state)
        await self.server.handle(Call(message, principal=self.principal, auth=self.auth, session=self.session), writer)
        return writer.response

    async def notify(self, message: dict[str, Any]) -> None:
        if self.session is not None:
            self.server.dispatcher.legacy.notified(self.session, message)


class _Recorder:
    """The writer of one in-memory call: every message to `heard`, a server request's answer to the session."""

    def __init__(self, heard: Heard, session: Session | None, client_place: Bucket) -> None:
        self.heard = heard
        self.session = session
        self.client_place = client_place  # the in-memory client's state (`ctx.client_state`), as stdio's writers have
        self.response: dict[str, Any] | None = None

    async def notify(self, message: bytes) -> None:
        reply = await self.heard(orjson.loads(message))
        if reply is not None:
            assert self.session is not None, "a server request outside a session"
            self.session.deliver(reply)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        self.response = orjson.loads(message)


class Client:
    """An MCP client for `server`, in memory (see the module docstring); `Client.stdio(command)`,
    `Client.http(url)` and `Client.sse(url)` the same client against a server in a subprocess or at a URL."""

    def __init__(
        self,
        server: Server | None,
        *,
        era: str = MODERN_VERSIONS[0],
        elicit: Answer | None = None,
        sample: Answer | None = None,
        roots: Sequence[str] | None = None,
        on_progress: Listener | None = None,
        on_log: Listener | None = None,
        on_notification: Listener | None = None,
        on_request: Answer | None = None,
        log_level: str | None = None,
        principal: str | None = None,
        auth: Any = None,
        strict: bool = False,
        client_info: Mapping[str, Any] = CLIENT_INFO,
        extensions: Mapping[str, Mapping[str, Any]] | None = None,
        _channel: Any = None,
    ) -> None:
        if era not in (*MODERN_VERSIONS, *LEGACY_VERSIONS):
            raise ValueError(f"unknown protocol version {era!r}; one of {', '.join((*MODERN_VERSIONS, *LEGACY_VERSIONS))}")
        self.server = server
        self.era = era
        self.legacy = era in LEGACY_VERSIONS
        self.elicit, self.sample, self.roots = elicit, sample, roots
        self.on_progress, self.on_log, self.on_notification = on_progress, on_log, on_notification
        self.on_request = on_request  # every server-to-client request but ping, before the callbacks
        self.on_renewed: Callable[[], Any] | None = None  # after a forgotten 2025-era session is opened anew
        self.log_level = log_level
        self.principal, self.auth = (principal if principal is not None else getattr(auth, "subject", None)), auth
        self.client_info = dict(client_info)
        self.capabilities = self._capabilities()
        if extensions:  # the protocol extensions this client declares, with their settings
            self.capabilities["extensions"] = {key: dict(value) for key, value in extensions.items()}
        if _channel is None and server is None:
            raise ValueError("Client(server) needs a Server; use Client.stdio(command) for a subprocess")
        self._channel = _channel or _Memory(server, self.principal, auth)  # type: ignore[arg-type]
        self.server_info: dict[str, Any] = {}  # what initialize or server/discover said
        self._validate = _validator(era) if strict else None
        self._ids = itertools.count(1)
        self._entered = False
        self._renewing: anyio.Lock | None = None  # made on the first session renewal, inside the event loop

    @classmethod
    def stdio(cls, command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
              **options: Any) -> Client:
        """The same client against a server in a subprocess, over its stdin and stdout, e.g.
        `Client.stdio([sys.executable, "-m", "mcpcore", "run", "server.py"])`. Options as for `Client`,
        less `principal` and `auth` (stdio has no authentication)."""
        from .transports.remote import StdioChannel

        return cls(None, _channel=StdioChannel(command, env, cwd), **options)

    @classmethod
    def http(cls, url: str, *, token: str | None = None, headers: Mapping[str, str] | None = None,
             name_fields: Mapping[str, str] | None = None, **options: Any) -> Client:
        """The same client against a server at a Streamable HTTP URL (`http://127.0.0.1:8000/mcp`), with a
        bearer `token` if given. `name_fields`: extension methods → the params field their `Mcp-Name`
        header mirrors (`{"com.example/echo/say": "name"}`), as registered with `name_field=`; the core's
        and the Tasks extension's are known. Options as for `Client`, less `principal` and `auth`."""
        from .transports.remote import HttpChannel

        extra = dict(headers or {})
        if token is not None:
            extra["authorization"] = f"Bearer {token}"
        era = options.get("era", MODERN_VERSIONS[0])
        return cls(None, _channel=HttpChannel(url, extra, era, name_fields), **options)

    @classmethod
    def sse(cls, url: str, *, token: str | None = None, headers: Mapping[str, str] | None = None,
            **options: Any) -> Client:
        """The same client against a server at an HTTP+SSE URL (the deprecated 2024-11-05 transport,
        `http://127.0.0.1:8000/sse`): its stream's `endpoint` event names where messages are POSTed, and
        every answer comes on the stream. A 2025-era session: `era` is one of those (2024-11-05 by default)."""
        from .transports.remote import SseChannel

        extra = dict(headers or {})
        if token is not None:
            extra["authorization"] = f"Bearer {token}"
        options.setdefault("era", "2024-11-05")
        if options["era"] not in LEGACY_VERSIONS:
            raise ValueError(f"HTTP+SSE carries a 2025-era session; era is one of {', '.join(LEGACY_VERSIONS)}")
        return cls(None, _channel=SseChannel(url, extra, options["era"]), **options)

    def _capabilities(self) -> dict[str, Any]:
        declared: dict[str, Any] = {}
        if self.elicit is not None or self.on_request is not None:
            declared["elicitation"] = {"form": {}, "url": {}}
        if self.sample is not None or self.on_request is not None:
            declared["sampling"] = {}
        if self.roots is not None or self.on_request is not None:
            declared["roots"] = {} if not self.legacy else {"listChanged": False}
        return declared

    # -- lifetime -------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self._channel.open(self._asked, self._unowned)
        self._entered = True
        try:
            if self.legacy:
                await self._initialize()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._entered:
            self._entered = False
            await self._channel.close()

    async def fall_back(self, era: str = LEGACY_VERSIONS[0]) -> dict[str, Any]:
        """Open a 2025-era session (`initialize` at `era`) on a client made for the 2026-07-28 wire, whose
        `server/discover` probe the server did not answer as a modern server would; requests go on that
        session from then on. What `initialize` answered."""
        if era not in LEGACY_VERSIONS:
            raise ValueError(f"a 2025-era session is one of {', '.join(LEGACY_VERSIONS)}, not {era!r}")
        self.legacy = True
        self._speak(era)
        self.capabilities = {**self._capabilities(), **({"extensions": self.capabilities["extensions"]}
                                                        if "extensions" in self.capabilities else {})}
        await self._initialize()
        return self.server_info

    def _speak(self, era: str) -> None:
        """Use 2025-era revision `era` from now on: validation, and an HTTP channel's MCP-Protocol-Version header."""
        self.era = era
        if self._validate is not None:
            self._validate = _validator(era)
        if hasattr(self._channel, "version"):
            self._channel.version = era

    async def _initialize(self) -> None:
        params = {"protocolVersion": self.era, "capabilities": self.capabilities, "clientInfo": self.client_info}
        self.server_info = (await self.request("initialize", params)).result
        answered = self.server_info.get("protocolVersion")
        if answered != self.era and answered in LEGACY_VERSIONS:  # the server's choice holds for the session
            self._speak(answered)
        await self.notify("notifications/initialized")
        if self.log_level is not None:
            await self.request("logging/setLevel", {"level": self.log_level})

    @contextlib.contextmanager
    def sync(self) -> Iterator[_SyncClient]:
        """The client for code without an event loop: the same methods, called plainly."""
        from anyio.from_thread import start_blocking_portal

        with start_blocking_portal() as portal, portal.wrap_async_context_manager(self):  # one task enters and leaves
            yield _SyncClient(self, portal)

    # -- the protocol ---------------------------------------------------------

    async def request(self, method: str, params: Mapping[str, Any] | None = None, *, progress: bool = False) -> Outcome:
        """Send one request (with its input rounds); its result and notifications. Errors raise `McpError`."""
        params = dict(params or {})
        heard: list[dict[str, Any]] = []
        for _ in range(MAX_ROUNDS):
            response = await self._send(method, params, progress, heard)
            assert response is not None, f"the server sent no response to {method}"
            if "error" in response:
                raise _raised(response["error"])
            result = response["result"]
            if result.get("resultType") != "input_required":
                return Outcome(result, heard)
            params["inputResponses"] = {name: (await self._answer_request(asked))["result"]
                                        for name, asked in (result.get("inputRequests") or {}).items()}
            params.pop("requestState", None)  # sent back only as the server gave it: never as null
            if "requestState" in result:
                params["requestState"] = result["requestState"]
        raise AssertionError(f"the server asked for input {MAX_ROUNDS} times in a row for one {method}")

    async def send(self, method: str, params: Mapping[str, Any] | None = None, *, progress: bool = False,
                   on_notification: Listener | None = None) -> dict[str, Any]:
        """One request, one round: its result as the server sent it, an `input_required` one included, for
        a caller that answers it itself (`mcpcore.gateway` asks its own client); the request's notifications
        go to `on_notification` as they come. Errors raise `McpError`."""
        response = await self._send(method, dict(params or {}), progress, [], on_notification)
        assert response is not None, f"the server sent no response to {method}"
        if "error" in response:
            raise _raised(response["error"])
        return response["result"]

    async def wait_gone(self) -> None:
        """Return once the server is gone: a subprocess that exited or closed its stdout, an HTTP+SSE
        stream that ended, a Streamable HTTP server a request could not reach (or whose connection broke
        before an answer's head). An in-memory server has no such moment: it waits until cancelled."""
        gone = getattr(self._channel, "gone", None)
        if gone is None:
            await anyio.sleep_forever()
        else:
            await gone.wait()

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (2025-era sessions: it reaches the session)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": dict(params or {})}
        await self._channel.notify(message)

    def _message(self, method: str, params: dict[str, Any], progress: bool) -> dict[str, Any]:
        """A request as a conforming client of the era writes it."""
        request_id = next(self._ids)
        params = dict(params)
        meta = dict(params.pop("_meta", None) or {})
        if not self.legacy:  # the 2026-07-28 wire: every request says who asks
            meta.setdefault(META_VERSION, self.era)
            meta.setdefault(META_CAPABILITIES, self.capabilities)
            meta.setdefault(META_CLIENT_INFO, self.client_info)
            if self.log_level is not None:
                meta.setdefault(META_LOG_LEVEL, self.log_level)
        if progress or self.on_progress is not None:
            meta.setdefault("progressToken", f"progress-{request_id}")
        if meta:
            params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    async def _send(self, method: str, params: dict[str, Any], progress: bool, heard: list[dict[str, Any]],
                    listener: Listener | None = None) -> dict[str, Any] | None:
        """One request through the channel; its notifications appended to `heard` (and given to `listener`),
        its response returned."""
        message = self._message(method, params, progress)
        broken: list[Exception] = []

        async def hear(received: dict[str, Any]) -> dict[str, Any] | None:
            try:
                self._checked(received)
            except Exception as violation:  # raised after the call: raised in a tool's await, the tool would catch it
                broken.append(violation)
            if "id" in received and "method" in received:  # a 2025-era server-to-client request
                try:
                    return await self._answer_request(received)
                except McpError as error:  # the answer is an error of its own (`on_request` relaying one)
                    return {"jsonrpc": "2.0", "id": received.get("id"), "error": error.to_dict()}
            if listener is None:
                heard.append(received)  # kept for the `Outcome`; a listener hears them instead (a listen could last long)
            await self._heard(received)
            if listener is not None:
                await run_callback(listener, received)
            return None

        try:
            response = await self._channel.exchange(message, hear, self.legacy)
        except SessionExpired as expired:  # a new session, and the request again, once
            await self._renew(expired.session_id)
            response = await self._channel.exchange(message, hear, self.legacy)
        if broken:
            raise broken[0]
        if response is not None:
            self._checked(response, method)
        return response

    async def _renew(self, expired: str) -> None:
        """A new 2025-era session over Streamable HTTP in place of the one the server answered 404 for
        (as the specification says); requests that hear of the same 404 at once open one session. It is
        initialized as the first was (its `log_level` set again), then `on_renewed` is called."""
        if self._renewing is None:
            self._renewing = anyio.Lock()
        async with self._renewing:
            if self._channel.session_id == expired:
                self._channel.session_id = None
                await self._initialize()
                if self.on_renewed is not None:  # what the old session had learnt may differ now (a gateway re-reads)
                    await run_callback(self.on_renewed)

    async def _answer_request(self, asked: dict[str, Any]) -> dict[str, Any]:
        """The response to what the server asked (a server-to-client request, or an input request)."""
        method, params = asked.get("method"), asked.get("params") or {}
        if method != "ping" and self.on_request is not None:
            result = await run_callback(self.on_request, asked)
        elif method == "elicitation/create" and self.elicit is not None:
            result = await run_callback(self.elicit, params)
        elif method == "sampling/createMessage" and self.sample is not None:
            result = await run_callback(self.sample, params)
        elif method == "roots/list" and self.roots is not None:
            result = {"roots": [{"uri": uri} for uri in self.roots]}
        elif method == "ping":
            result = {}
        else:
            raise AssertionError(f"the server asked {method!r} and this client has no callback for it")
        return {"jsonrpc": "2.0", "id": asked.get("id"), "result": result}

    async def _asked(self, asked: dict[str, Any]) -> dict[str, Any]:
        """A server-to-client request that came on a shared stream: its response, an error if none can be given."""
        try:
            return await self._answer_request(self._checked(asked))
        except McpError as error:  # the answer is an error of its own (`on_request` relaying one)
            return {"jsonrpc": "2.0", "id": asked.get("id"), "error": error.to_dict()}
        except Exception as error:
            code = -32601 if isinstance(error, AssertionError) else -32603
            return {"jsonrpc": "2.0", "id": asked.get("id"), "error": {"code": code, "message": str(error)}}

    async def _unowned(self, notification: dict[str, Any]) -> None:
        """A notification no request in flight owns: the client's listeners."""
        await self._heard(self._checked(notification))
        if self.on_notification is not None:
            await run_callback(self.on_notification, notification)

    async def _heard(self, notification: dict[str, Any]) -> None:
        method = notification.get("method")
        if method == "notifications/progress" and self.on_progress is not None:
            await run_callback(self.on_progress, notification["params"])
        elif method == "notifications/message" and self.on_log is not None:
            await run_callback(self.on_log, notification["params"])

    def _checked(self, message: dict[str, Any], method: str | None = None) -> dict[str, Any]:
        if self._validate is not None:
            self._validate(message, method)
        return message

    # -- the methods people call ---------------------------------------------

    @contextlib.asynccontextmanager
    async def listen(self, *, tools: bool = False, prompts: bool = False, resources: bool = False,
                     uris: Sequence[str] = (), task_ids: Sequence[str] = ()) -> AsyncIterator[Subscription]:
        """An open `subscriptions/listen` (2026-07-28, in memory): `await sub.next()` is the next change
        notification (list changes, `resources/updated` for `uris`, `notifications/tasks` for
        `task_ids`); leaving the block cancels it."""
        if self.legacy or not isinstance(self._channel, _Memory):
            raise NotImplementedError("listen() serves the 2026-07-28 wire in memory; use call notifications otherwise")
        import anyio

        wanted: dict[str, Any] = {"toolsListChanged": tools, "promptsListChanged": prompts,
                                  "resourcesListChanged": resources}
        if uris:
            wanted["resourceSubscriptions"] = list(uris)
        if task_ids:
            wanted["taskIds"] = list(task_ids)
        message = self._message("subscriptions/listen", {"notifications": wanted}, False)
        sink, source = anyio.create_memory_object_stream[dict[str, Any]](256)

        async def hear(received: dict[str, Any]) -> None:
            await sink.send(self._checked(received))

        async def serve() -> None:
            response = await self._channel.exchange(message, hear, False)
            if response is not None and "error" in response:
                await sink.send(response)  # raised by the subscription's next()

        refused: McpError | None = None
        async with anyio.create_task_group() as tasks, sink, source:
            tasks.start_soon(serve)
            subscription = Subscription(source)
            try:
                subscription.acknowledged = (await subscription.next())["params"]
            except McpError as error:
                refused = error  # raised outside the task group, as itself
            else:
                yield subscription
            tasks.cancel_scope.cancel()
        if refused is not None:
            raise refused

    async def discover(self) -> dict[str, Any]:
        """`server/discover` (2026-07-28), or what `initialize` answered (2025 eras)."""
        if self.legacy:
            return self.server_info
        self.server_info = (await self.request("server/discover")).result
        return self.server_info

    async def _pages(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = (await self.request(method, {"cursor": cursor} if cursor else None)).result
            items += result.get(key, [])
            cursor = result.get("nextCursor")
            if not cursor:
                return items

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool, all pages followed."""
        tools = await self._pages("tools/list", "tools")
        if getattr(self._channel, "wants_tools", False):
            self._channel.learn(tools)  # which arguments an HTTP request mirrors in headers
        return tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *, progress: bool = True) -> Outcome:
        """Call a tool. It asks for progress notifications (a `progressToken`), kept on `Outcome.progress`;
        `progress=False` asks for none, as a client that wants none would (unless `on_progress` is given)."""
        if getattr(self._channel, "wants_tools", False) and name not in self._channel.tools:
            await self.list_tools()
        return await self.request("tools/call", {"name": name, "arguments": dict(arguments or {})}, progress=progress)

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._pages("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._pages("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """A resource's contents."""
        return (await self.request("resources/read", {"uri": uri})).result["contents"]

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._pages("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A prompt's result (`description`, `messages`)."""
        return (await self.request("prompts/get", {"name": name, "arguments": dict(arguments or {})})).result

    async def complete(self, ref: Mapping[str, Any] | None = None, argument: str | None = None, value: str = "",
                       context: Mapping[str, str] | None = None, *, prompt: str | None = None,
                       resource: str | None = None) -> list[str]:
        """Completion values for one argument, named as `@server.completion` names it:
        `complete(prompt="greet", argument="name", value="Al")` or `complete(resource="file:///{path}",
        argument="path", value="src/")`; `context`: the other arguments already chosen. A raw `ref`
        (`{"type": "ref/prompt", "name": ...}`, `{"type": "ref/resource", "uri": ...}`) still works."""
        if argument is None:
            raise TypeError("complete() needs argument=: the name of the argument to complete")
        params: dict[str, Any] = {"ref": _reference(ref, prompt, resource), "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        return (await self.request("completion/complete", params)).result["completion"]["values"]


class Subscription:
    """An open `subscriptions/listen` (`Client.listen`)."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self.acknowledged: dict[str, Any] = {}  # the server's acknowledgement: what it will send

    async def next(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next notification (TimeoutError when none comes within `timeout` seconds; the
        `McpError` when the server refused the subscription)."""
        import anyio

        with anyio.fail_after(timeout):
            received = await self._source.receive()
        if "error" in received:
            raise _raised(received["error"])
        return received


def _reference(ref: Any, prompt: str | None, resource: str | None) -> dict[str, Any]:
    """The `ref` of a completion request, from exactly one of a raw ref, a prompt name or a template URI."""
    given = [name for name, value in (("ref", ref), ("prompt=", prompt), ("resource=", resource)) if value is not None]
    if len(given) != 1:
        raise TypeError(f"complete() takes exactly one of prompt=NAME, resource=URI_TEMPLATE or a raw ref; "
                        f"got {' and '.join(given) if given else 'none'}")
    if isinstance(ref, str):
        raise TypeError(f"complete(): a raw ref is a mapping ({{'type': 'ref/prompt', 'name': ...}}); "
                        f"for a prompt or template by name say prompt={ref!r} or resource={ref!r}")
    if prompt is not None:
        return {"type": "ref/prompt", "name": prompt}
    if resource is not None:
        return {"type": "ref/resource", "uri": resource}
    return dict(ref)


def _raised(error: dict[str, Any]) -> McpError:
    """The exception for a JSON-RPC error object."""
    code, text, data = error.get("code", 0), error.get("message", ""), error.get("data")
    return InvalidParams(text, data) if code == INVALID_PARAMS else McpError(code, text, data)


class _SyncClient:
    """`Client.sync()`: each coroutine method of the client, run to completion in a portal."""

    def __init__(self, client: Client, portal: Any) -> None:
        self._client, self._portal = client, portal

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute
        return lambda *args, **kwargs: self._portal.call(lambda: attribute(*args, **kwargs))


def _validator(era: str) -> Callable[[dict[str, Any], str | None], Any]:
    """Checks a server's message against the official schema of `era` (jsonschema must be installed)."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        raise ImportError("Client(strict=True) needs the jsonschema package: pip install jsonschema") from None
    from ._wire.schemas import check, check_legacy

    return check_legacy if era in LEGACY_VERSIONS else check
