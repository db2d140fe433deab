"""The HTTP half of the fuzz: raw bytes over real sockets to `mcpcore run ... --transport http`.

Workers (coroutines, each with its own seeded generator) play scenarios:
single requests on a keep-alive connection, pipelined ones, chunked and
trickled bodies, broken heads, truncated and oversized requests, abrupt
disconnects, other methods and paths, multi round-trip retries, listen
streams, and 2025-era sessions (initialize, elicitation answered from another
connection, cancellation, the GET stream, resumption, DELETE). Requests are
written as bytes (so they can be wrong in any way); the server's responses
are parsed by an h11 client state machine and checked by `HttpFuzz.check`.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import h11
import orjson

import fuzz_inputs as gen
from fuzz_inputs import Owed, key_of, owed
from fuzz_report import Report, ServerProcess, clip

TIMEOUT = 20.0  # seconds a response may take before it counts as missing
MAX_BODY_BYTES = 4 * 1024 * 1024  # the server's documented defaults
MAX_BODY_CHUNKS = 16384
SESSION_LIMIT = 16  # --max-sessions for the fuzzed server: small, so the limit is reached now and then
IN_FLIGHT = 32  # --max-in-flight: a burst of connections waits for slots


@dataclass
class Reply:
    """One HTTP response as the client saw it."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    messages: list[dict[str, Any]] = field(default_factory=list)  # from a JSON body or SSE events
    event_ids: list[str] = field(default_factory=list)
    complete: bool = False  # the whole response arrived
    closes: bool = False  # the server ends the connection after it

    @property
    def is_sse(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def responses(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if isinstance(m, dict) and "method" not in m]


class BadResponse(Exception):
    """The server's bytes are not a well-formed HTTP response or SSE stream."""


class _Events:
    """An incremental SSE parser: JSON messages of `data:` events, and every `id:`."""

    def __init__(self) -> None:
        self.buffer = b""
        self.ids: list[str] = []

    def feed(self, data: bytes) -> list[Any]:
        self.buffer += data
        out = []
        while b"\n\n" in self.buffer:
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            lines = []
            for line in block.split(b"\n"):
                name, _, value = line.partition(b":")
                value = value[1:] if value.startswith(b" ") else value
                if name == b"data":
                    lines.append(value)
                elif name == b"id":
                    self.ids.append(value.decode("utf-8", "replace"))
            if any(lines):  # an event with an empty data line only primes a resumable stream
                try:
                    out.append(orjson.loads(b"\n".join(lines)))
                except orjson.JSONDecodeError as error:
                    raise BadResponse(f"an SSE event is not JSON: {error}: {clip(block)}") from None
        return out


OnMessage = Callable[[dict[str, Any]], Awaitable[None]]


class Link:
    """One client TCP connection: raw bytes out; responses parsed by an h11 client state machine.

    h11 is told of a placeholder request per expected response (the real bytes may be
    anything), so it frames the responses, pipelined ones too, exactly as a client would.
    A plain non-blocking socket, not an asyncio stream: when the server closes while we
    still send (it refused the request early), the response already received stays readable.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.h11 = h11.Connection(h11.CLIENT)
        self.eof = False
        self.usable = True  # can carry another request

    @classmethod
    async def open(cls, port: int) -> "Link":
        sock = socket.socket()
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    async def send(self, data: bytes, pieces: int = 1, pause: float = 0.0) -> bool:
        """Write `data` (in `pieces`); False when the server closed the connection first."""
        size = max(1, -(-len(data) // pieces))
        try:
            for start in range(0, len(data), size):
                await self.loop.sock_sendall(self.sock, data[start : start + size])
                if pieces > 1:
                    await asyncio.sleep(pause)
        except OSError:
            self.usable = False
            return False
        return True

    def half_close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def reset(self) -> None:
        """Drop the connection abruptly (TCP RST), as a crashed client does."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()
        self.usable = False

    def close(self) -> None:
        self.usable = False
        self.sock.close()

    async def _read(self, deadline: float) -> bytes:
        remaining = deadline - self.loop.time()
        if remaining <= 0:
            raise asyncio.TimeoutError
        try:
            return await asyncio.wait_for(self.loop.sock_recv(self.sock, 1 << 16), remaining)
        except OSError:  # reset: whatever had arrived was read before
            return b""

    async def reply(
        self, method: str = "POST", on_message: OnMessage | None = None, timeout: float = TIMEOUT,
        until: Callable[[Reply], bool] | None = None,
    ) -> Reply | None:
        """The next response (None if the connection closed before one began).

        `on_message` sees each message of an SSE stream as it comes (to answer the
        server's requests, say); `until` stops reading early (the reply is then
        incomplete and the link unusable).
        Raises BadResponse for malformed bytes and asyncio.TimeoutError.
        """
        if self.eof or self.h11.their_state not in (h11.IDLE, h11.DONE):
            return None  # the connection ended, or its last response was cut: nothing more can come
        if self.h11.our_state is h11.DONE:
            self.h11.start_next_cycle()
        self.h11.send(h11.Request(method=method, target="/", headers=[("host", "fuzz")]))
        self.h11.send(h11.EndOfMessage())
        deadline = asyncio.get_running_loop().time() + timeout
        reply: Reply | None = None
        events = _Events()
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as error:
                self.usable = False
                if self.eof:
                    return reply  # closed in the middle of the response: incomplete
                raise BadResponse(f"not a well-formed HTTP response: {error}") from None
            if event is h11.NEED_DATA:
                data = await self._read(deadline)
                if not data:
                    self.eof, self.usable = True, False
                    if reply is None:
                        return None  # closed before a response began
                # the end of the bytes ends a body framed by the connection's close (an HTTP/1.0 client's stream)
                self.h11.receive_data(data)
            elif isinstance(event, h11.Response):
                headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
                reply = Reply(event.status_code, headers)
            elif isinstance(event, h11.Data) and reply is not None:
                reply.body += event.data
                if reply.is_sse:
                    for message in events.feed(event.data):
                        reply.messages.append(message)
                        if on_message is not None and isinstance(message, dict):
                            await on_message(message)
                    reply.event_ids = events.ids
                if until is not None and until(reply):
                    self.usable = False
                    return reply
            elif isinstance(event, h11.EndOfMessage) and reply is not None:
                reply.complete = True
                reply.closes = self.h11.their_state is not h11.DONE
                self.usable = not reply.closes
                if not reply.is_sse and reply.body:
                    if not reply.headers.get("content-type", "").startswith("application/json"):
                        raise BadResponse(f"a {reply.status} body that is neither JSON nor SSE: {clip(reply.body)}")
                    try:
                        reply.messages = [orjson.loads(reply.body)]
                    except orjson.JSONDecodeError as error:
                        raise BadResponse(f"a JSON body that is not JSON ({error}): {clip(reply.body)}") from None
                return reply
            elif isinstance(event, h11.ConnectionClosed):
                self.usable = False
                return reply
            # InformationalResponse (100 Continue): read on


@dataclass
class Sent:
    """One HTTP request the fuzz sent, and what it is owed."""

    what: str  # for violation examples
    owed: Owed | None  # of its body when that is one JSON-RPC message; None for none (GET) or broken framing
    method: str = "POST"
    valid: bool = False  # a well-formed call with conforming headers: owed a result (202 for a notification)
    required: bool = True  # owed an HTTP response
    initialize: bool = False
    window: "Window | None" = None  # an initialize's: what the server may have held while it was out
    coding: bool = False  # names a transfer coding other than chunked: RFC 9112 section 6.1 answers 501


@dataclass
class Session:
    """A 2025-era session the fuzz opened."""

    id: str
    version: str  # negotiated
    headers: gen.Headers  # what each POST of the session carries
    asking: bool  # declared the capabilities that `ask` and `roots` need

    @property
    def get_headers(self) -> gen.Headers:
        return [(n, v) for n, v in self.headers if n not in ("content-type", "accept")] + [("accept", "text/event-stream")]


class Window:
    """What one initialize may have met while it was out: the server sees it at some moment in between."""

    def __init__(self, taken: int, held: int) -> None:
        self.most_taken = taken  # places the server may have taken, this initialize's own included
        self.fewest_held = held  # sessions the server surely held


class Sessions:
    """The 2025-era sessions the server may hold, as the client can know them (for the 503 rule).

    The server's count is at least `live - deleting` (a session is live here only after the
    server minted it, and a DELETE counts from before it is sent) and at most `live + unknown
    + opening`; each initialize out keeps the extremes of both in its `Window`.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.live = 0  # minted and not yet confirmed deleted
        self.deleting = 0  # DELETEs sent, not yet answered
        self.opening = 0  # initialize requests sent, not yet answered
        self.unknown = 0  # initialize requests whose answer was lost: the server may have opened their sessions
        self._windows: list[Window] = []  # one per initialize out

    def _taken(self) -> int:
        """Places the server may have taken: live sessions, lost answers, and initializes out (each holds one)."""
        return self.live + self.unknown + self.opening

    def _held(self) -> int:
        return self.live - self.deleting

    def _noted(self) -> None:
        taken, held = self._taken(), self._held()
        for window in self._windows:
            window.most_taken = max(window.most_taken, taken)
            window.fewest_held = min(window.fewest_held, held)

    def opened(self, minted: bool) -> None:
        """A session is live (or, `minted` False, may be: its answer was lost)."""
        if minted:
            self.live += 1
        else:
            self.unknown += 1
        self._noted()

    def deleting_one(self, delta: int) -> None:
        """A DELETE goes out (+1) or is answered (-1)."""
        self.deleting += delta
        self._noted()

    def deleted(self) -> None:
        self.live -= 1
        self._noted()

    def begin(self) -> Window:
        """An initialize goes out; what it may meet is tracked until `end`."""
        self.opening += 1
        window = Window(self._taken(), self._held())
        self._windows.append(window)
        return window

    def end(self, window: Window) -> None:
        self.opening -= 1
        self._windows = [other for other in self._windows if other is not window]

    def may_be_full(self, window: Window) -> bool:
        """Whether, at some moment while this initialize was out, the server may have held `limit`
        places besides its own (another initialize's place counts until that one is answered)."""
        return window.most_taken - 1 >= self.limit

    def surely_full(self, window: Window) -> bool:
        """Whether the server held `limit` sessions at every moment this initialize was out."""
        return window.fewest_held >= self.limit


class HttpFuzz:
    """Shared state of the HTTP workers: the server, the tally, the session count."""

    def __init__(self, server: ServerProcess, port: int, report: Report, target: int, health_every: int) -> None:
        self.server = server
        self.port = port
        self.host = f"127.0.0.1:{port}"
        self.report = report
        self.target = target
        self.health_every = health_every
        self.sessions = Sessions(SESSION_LIMIT)

    def violation(self, invariant: str, text: str) -> None:
        self.report.violation(invariant, f"http: {text}")

    @property
    def done(self) -> bool:
        return self.report.inputs["http"] >= self.target or not self.server.alive()

    async def count(self, n: int = 1) -> None:
        """Count `n` inputs sent; a health call whenever a multiple of `health_every` is passed."""
        before = self.report.inputs["http"]
        self.report.inputs["http"] += n
        if before // self.health_every != (before + n) // self.health_every:
            await self.health()

    async def health(self) -> None:
        self.report.health_checks += 1
        if not self.server.check_alive(f"before HTTP health check {self.report.health_checks}"):
            return
        text = f"health {self.report.health_checks}"
        message = gen.Messages(random.Random(0), "health").tool_call("echo", {"text": text}, modern=True)
        try:
            link = await Link.open(self.port)
            await link.send(gen.http_request(gen.mcp_headers(message), gen.dumps(message), host=self.host))
            reply = await link.reply(timeout=10)
            link.close()
        except (OSError, asyncio.TimeoutError, BadResponse) as error:
            self.violation("health", f"check {self.report.health_checks} failed: {error!r}")
            return
        content = reply.responses[0].get("result", {}).get("content") if reply is not None and reply.responses else None
        if reply is None or reply.status != 200 or content != [{"type": "text", "text": text}]:
            self.violation("health", f"check {self.report.health_checks} got {clip(reply)}")

    def check(self, sent: Sent, reply: Reply | None, cancelled: bool = False) -> None:
        """The invariants one response must keep."""
        if reply is None:
            if sent.required and not cancelled:
                self.violation("answered-once", f"no response to {sent.what}")
            return
        status = reply.status
        self.report.statuses[status] += 1
        if status == 503:
            if not (sent.initialize and sent.window is not None and self.sessions.may_be_full(sent.window)):
                self.violation("status", f"503 to {sent.what} with {self.sessions.live} sessions open: {clip(reply.body)}")
        elif status == 501:
            if not sent.coding:
                self.violation("status", f"501 to {sent.what}, which names no transfer coding but chunked: {clip(reply.body)}")
        elif not (200 <= status < 300 or 400 <= status < 500):
            self.violation("status", f"{status} to {sent.what}: {clip(reply.body)}")
        if status == 202 and reply.body:
            self.violation("protocol", f"a 202 with a body to {sent.what}: {clip(reply.body)}")
        responses = reply.responses
        for response in responses:
            self.report.outcome("http", response)
            if response.get("jsonrpc") != "2.0" or ("result" in response) == ("error" in response):
                self.violation("protocol", f"not a JSON-RPC response to {sent.what}: {clip(response)}")
        notes = [m for m in reply.messages if m not in responses]
        if any(not isinstance(m, dict) or m.get("jsonrpc") != "2.0" or not isinstance(m.get("method"), str) for m in notes):
            self.violation("protocol", f"a malformed message on the stream of {sent.what}: {clip(notes)}")
        if len(responses) > 1:
            self.violation("answered-once", f"{len(responses)} responses to {sent.what}")
        key = sent.owed.key if sent.owed is not None else None
        for response in responses:
            got = key_of(response["id"]) if "id" in response else None
            if ("id" in response and got is None) or got not in (None, key):  # null, or another request's id
                self.violation("answered-once", f"the response to {sent.what} carries the id {clip(response.get('id'))}")
            elif reply.is_sse and key is None:
                self.violation("protocol", f"a response on the stream of {sent.what}, which asked for none: {clip(response)}")
        if not reply.complete and sent.required and not cancelled:
            self.violation("protocol", f"the response to {sent.what} was cut off: {clip(reply.body)}")
        elif reply.is_sse and not responses and sent.owed is not None and sent.owed.kind == "id" and not cancelled:
            self.violation("answered-once", f"the stream answering {sent.what} ended without its response")
        if sent.valid and not cancelled:
            self._check_valid(sent, reply, responses)

    def _check_valid(self, sent: Sent, reply: Reply, responses: list[dict[str, Any]]) -> None:
        assert sent.owed is not None
        if reply.status == 503 and sent.initialize:
            return  # the session limit: judged by the status rule
        if sent.owed.kind == "nothing":
            if reply.status != 202:
                self.violation("valid-call", f"{reply.status} to {sent.what}: {clip(reply.body)}")
        elif reply.status != 200 or len(responses) != 1 or "result" not in responses[0] or key_of(responses[0].get("id")) != sent.owed.key:
            self.violation("valid-call", f"{reply.status} to {sent.what}: {clip(reply.body)}")


class HttpWorker:
    """One fuzzing coroutine: its own generator, its own keep-alive connection."""

    def __init__(self, fuzz: HttpFuzz, seed: str) -> None:
        self.fuzz = fuzz
        self.rng = random.Random(seed)
        self.messages = gen.Messages(self.rng, seed)
        self.link: Link | None = None
        self.host = fuzz.host

    async def run(self) -> None:
        scenarios: list[tuple[float, Callable[[], Awaitable[None]]]] = [
            (40, self.keepalive), (8, self.pipelined), (6, self.chunked), (3, self.trickled), (4, self.disconnect),
            (3, self.broken), (3, self.other_requests), (2, self.truncated), (0.5, self.oversized),
            (6, self.legacy_session), (2, self.multi_round_trip), (1, self.listen), (0.05, self.session_flood),
            (0.2, self.burst),
        ]
        weights = [weight for weight, _ in scenarios]
        try:
            while not self.fuzz.done:
                (scenario,) = self.rng.choices([s for _, s in scenarios], weights)
                self.fuzz.report.kinds[f"http {scenario.__name__}"] += 1
                try:
                    await scenario()
                except BadResponse as error:
                    self.fuzz.violation("protocol", f"{scenario.__name__}: {error}")
                    self._drop()
                except asyncio.TimeoutError:
                    self.fuzz.violation("answered-once", f"{scenario.__name__}: no response within {TIMEOUT:g} s")
                    self._drop()
                except (ConnectionError, OSError) as error:
                    if self.fuzz.server.alive():  # else the server-alive check reports it
                        self.fuzz.violation("protocol", f"{scenario.__name__}: the connection failed: {error!r}")
                    self._drop()
        finally:
            self._drop()

    # -- helpers ---------------------------------------------------------------

    async def _link(self) -> Link:
        if self.link is None or not self.link.usable:
            self._drop()
            self.link = await Link.open(self.fuzz.port)
        return self.link

    def _drop(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None

    def _message(self) -> tuple[gen.Headers, bytes, bool, str]:
        """A request or notification, broken or not: (headers, body, valid, what)."""
        rng = self.rng
        modern = rng.random() < 0.9  # a legacy-shaped one outside a session is refused
        message = self.messages.call(modern) if rng.random() < 0.93 else self.messages.notification(modern)
        headers = gen.mcp_headers(message, gen.VERSION if modern else None)
        pick = rng.random()
        if pick < 0.45:
            return headers, gen.dumps(message), modern, "a valid " + _name(message)
        if pick < 0.65:
            return headers, gen.dumps(gen.mutate(message, rng)), False, "a mutated " + _name(message)
        if pick < 0.82:
            return gen.mutate_headers(headers, rng), gen.dumps(message), False, "mis-headed " + _name(message)
        return headers, gen.corrupt(gen.dumps(message), rng), False, "corrupted " + _name(message)

    async def _exchange(self, link: Link, data: bytes, sent: Sent, on_message: OnMessage | None = None) -> Reply | None:
        await link.send(data)
        await self.fuzz.count()
        reply = await link.reply(sent.method, on_message)
        self.fuzz.check(sent, reply)
        return reply

    # -- scenarios ---------------------------------------------------------------

    async def keepalive(self) -> None:
        """One request on the worker's keep-alive connection."""
        headers, body, valid, what = self._message()
        link = await self._link()
        await self._exchange(link, gen.http_request(headers, body, host=self.host), Sent(what, owed(body), valid=valid))

    async def pipelined(self) -> None:
        """Several requests written at once; their responses must come back in order."""
        batch = [self._message() for _ in range(self.rng.randint(2, 6))]
        link = await self._link()
        data = b"".join(gen.http_request(h, b, host=self.host) for h, b, _, _ in batch)
        await link.send(data, pieces=self.rng.choice((1, 1, 3)))
        await self.fuzz.count(len(batch))
        closed = False
        for headers, body, valid, what in batch:
            sent = Sent(f"pipelined {what}", owed(body), valid=valid, required=not closed)
            reply = None if closed else await link.reply()
            self.fuzz.check(sent, reply)
            closed = closed or reply is None or reply.closes or not reply.complete
        if closed:
            self._drop()

    async def chunked(self) -> None:
        """A body in chunked transfer coding (a few chunks, or many tiny ones)."""
        headers, body, valid, what = self._message()
        data = gen.http_request(headers, body, host=self.host, chunks=gen.chunk_sizes(len(body), self.rng))
        if self.rng.random() < 0.2:  # a chunk extension and a trailer are legal too
            head, _, chunks = data.partition(b"\r\n\r\n")
            size, _, rest = chunks.partition(b"\r\n")
            data = head + b"\r\n\r\n" + size + b";ext=1\r\n" + rest[:-5] + b"0\r\nx-trailer: 1\r\n\r\n"
        await self._exchange(await self._link(), data, Sent(f"chunked {what}", owed(body), valid=valid))

    async def trickled(self) -> None:
        """A request in small pieces with pauses (well inside the head and body deadlines)."""
        headers, body, valid, what = self._message()
        link = await self._link()
        data = gen.http_request(headers, body, host=self.host)
        await link.send(data, pieces=min(len(data), self.rng.randint(2, 30)), pause=0.001)
        await self.fuzz.count()
        self.fuzz.check(Sent(f"trickled {what}", owed(body), valid=valid), await link.reply())

    async def disconnect(self) -> None:
        """The client goes away: mid-request, mid-call, or mid-stream (FIN or RST)."""
        rng = self.rng
        link = await Link.open(self.fuzz.port)
        pick = rng.randrange(4)
        if pick == 0:  # part of a request
            headers, body, _, _ = self._message()
            data = gen.http_request(headers, body, host=self.host)
            await link.send(data[: rng.randrange(1, len(data))])
        elif pick == 1:  # a call that takes long
            message = self.messages.tool_call("hang", {}, modern=True)
            await link.send(gen.http_request(gen.mcp_headers(message), gen.dumps(message), host=self.host))
            await asyncio.sleep(rng.choice((0, 0.001, 0.01)))
        elif pick == 2:  # a stream, after its first event
            message = self.messages.tool_call("steps", {"count": 4}, modern=True)
            message["params"]["_meta"]["progressToken"] = "disconnect"
            await link.send(gen.http_request(gen.mcp_headers(message), gen.dumps(message), host=self.host))
            reply = await link.reply(until=lambda r: bool(r.messages))
            self.fuzz.check(Sent("a streaming call", owed(gen.dumps(message))), reply, cancelled=True)
        else:  # a whole request, its response never read
            headers, body, _, _ = self._message()
            await link.send(gen.http_request(headers, body, host=self.host))
        await self.fuzz.count()
        if rng.random() < 0.5:
            link.reset()
        else:
            link.close()

    async def broken(self) -> None:
        """Bytes that are not HTTP/1.1 (after a good request, now and then); then the client stops sending."""
        rng = self.rng
        link = await Link.open(self.fuzz.port)
        first: Sent | None = None
        data = b""
        if rng.random() < 0.3:
            headers, body, valid, what = self._message()
            data = gen.http_request(headers, body, host=self.host)
            first = Sent(what, owed(body), valid=valid)
        tail = rng.choice(gen.BROKEN_HEADS) if rng.random() < 0.7 else bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        await link.send(data + tail)
        await self.fuzz.count(2 if first else 1)
        if first is not None:  # answered before the client stops sending: a half-close may cancel a call
            self.fuzz.check(first, await link.reply())
        link.half_close()
        broken = Sent("broken HTTP", None, required=False, coding=gen.unknown_coding(tail))
        for _ in range(3):  # broken bytes get at most an error response, then the connection ends
            if not link.usable:
                break
            self.fuzz.check(broken, await link.reply())
        link.close()

    async def other_requests(self) -> None:
        """Other methods, paths and HTTP versions; Expect: 100-continue."""
        rng = self.rng
        message = self.messages.call(modern=True)
        headers, body = gen.mcp_headers(message), gen.dumps(message)
        pick = rng.randrange(6)
        link = await self._link()
        if pick == 0:
            method = rng.choice(("GET", "DELETE", "HEAD", "PUT", "OPTIONS", "PATCH", "TRACE"))
            extra = rng.choice(([], [("accept", "text/event-stream")], [("mcp-session-id", "nope")], [("mcp-protocol-version", "2025-11-25")]))
            data = gen.http_request(extra, b"", method=method, host=self.host)
            await self._exchange(link, data, Sent(f"{method} without a session", None, method=method))
        elif pick == 1:
            target = rng.choice(("/", "/mcp/", "/MCP", "//mcp", "/mcp#x", f"http://{self.host}/mcp", "*", "/mcp/../mcp", "/%6dcp"))
            await self._exchange(link, gen.http_request(headers, body, target=target, host=self.host), Sent(f"POST to {target}", owed(body)))
        elif pick == 2:
            target = rng.choice(("/mcp?x=1", "/mcp?", "/mcp?a=%ff&b"))
            data = gen.http_request(headers, body, target=target, host=self.host)
            await self._exchange(link, data, Sent(f"a valid {_name(message)} to {target}", owed(body), valid=True))
        elif pick == 3:
            data = gen.http_request(headers, body, host=self.host, version="1.0")
            await self._exchange(link, data, Sent(f"a valid {_name(message)} over HTTP/1.0", owed(body), valid=True))
        elif pick == 4:
            data = gen.http_request(headers + [("expect", "100-continue")], body, host=self.host)
            await self._exchange(link, data, Sent(f"a valid {_name(message)} expecting 100-continue", owed(body), valid=True))
        else:
            host = rng.choice(("evil.example", "localhost:1", f"[::1]:{self.fuzz.port}", "", f"localhost:{self.fuzz.port}",
                               "127.0.0.1", f"127.0.0.1:{self.fuzz.port}, evil.example"))
            data = gen.http_request(headers, body, host=host)
            await self._exchange(link, data, Sent(f"POST with Host {host!r}", owed(body)))

    async def truncated(self) -> None:
        """A body shorter than its Content-Length, then the client stops sending."""
        headers, body, _, what = self._message()
        data = gen.http_request(headers, body, host=self.host)
        link = await Link.open(self.fuzz.port)
        await link.send(data[: len(data) - self.rng.randint(1, max(1, len(body)))])
        link.half_close()
        await self.fuzz.count()
        self.fuzz.check(Sent(f"truncated {what}", owed(body), required=False), await link.reply())
        link.close()

    async def oversized(self) -> None:
        """Bodies and heads at and over the limits (the server may stop reading and close)."""
        rng = self.rng
        message = self.messages.tool_call("echo", {"text": "big"}, modern=True)
        headers, body = gen.mcp_headers(message), gen.dumps(message)
        link = await Link.open(self.fuzz.port)
        pick = rng.randrange(5)
        if pick == 0:  # exactly at the body limit: served
            padded = b" " * (MAX_BODY_BYTES - len(body)) + body
            data, sent = gen.http_request(headers, padded, host=self.host), Sent("a valid call padded to the body limit", owed(body), valid=True)
        elif pick == 1:  # one byte over, declared
            data = gen.http_request(headers, b"", host=self.host, declared=MAX_BODY_BYTES + 1)
            sent = Sent("a declared body over the limit", owed(body), required=False)
        elif pick == 2:  # over the limit in chunks
            padded = b" " * (MAX_BODY_BYTES + 1 - len(body)) + body
            data = gen.http_request(headers, padded, host=self.host, chunks=[1 << 16] * (len(padded) >> 16))
            sent = Sent("a chunked body over the limit", owed(body), required=False)
        elif pick == 3:  # more chunks than allowed
            padded = b" " * (MAX_BODY_CHUNKS + 10 - len(body)) + body
            data = gen.http_request(headers, padded, host=self.host, chunks=[1] * len(padded))
            sent = Sent("a body in too many chunks", owed(body), required=False)
        else:  # a head over the limit
            data = gen.http_request(headers + [("x-big", "h" * (64 * 1024 + rng.randint(1, 5000)))], body, host=self.host)
            sent = Sent("a head over the limit", owed(body), required=False)
        await link.send(data)
        await self.fuzz.count()
        self.fuzz.check(sent, await link.reply())
        link.close()

    async def burst(self) -> None:
        """Many connections at once, each with a valid call."""

        async def one() -> None:
            message = self.messages.call(modern=True)
            body = gen.dumps(message)
            link = await Link.open(self.fuzz.port)
            try:
                data = gen.http_request(gen.mcp_headers(message), body, host=self.host)
                await self._exchange(link, data, Sent(f"a valid {_name(message)} in a burst", owed(body), valid=True))
            finally:
                link.close()

        outcomes = await asyncio.gather(*(one() for _ in range(self.rng.randint(10, 50))), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def multi_round_trip(self) -> None:
        """A call answered `input_required`, then retried with answers and the sealed state (or a broken one)."""
        rng = self.rng
        name = rng.choice(("ask", "roots"))
        first = self.messages.tool_call(name, {}, modern=True)
        link = await self._link()
        body = gen.dumps(first)
        reply = await self._exchange(link, gen.http_request(gen.mcp_headers(first), body, host=self.host), Sent(f"a valid {name} call", owed(body), valid=True))
        result = reply.responses[0].get("result", {}) if reply is not None and reply.responses else {}
        state = result.get("requestState")
        if not isinstance(state, str):
            return
        answers = {"name": {"action": "accept", "content": {"name": "Ada"}}} if name == "ask" else {"roots": {"roots": []}}
        retry = self.messages.tool_call(name, {}, modern=True)
        retry["params"].update(requestState=state, inputResponses=answers)
        valid = rng.random() < 0.6
        if not valid:
            pick = rng.randrange(3)
            if pick == 0:
                retry["params"]["requestState"] = state[:-2] + ("AA" if not state.endswith("AA") else "BB")  # tampered
            elif pick == 1:
                retry["params"]["name"] = "echo" if name == "ask" else "ask"  # the state is bound to another tool
            else:
                retry["params"]["inputResponses"] = gen.mutate({"x": answers}, rng)
        if not link.usable:
            link = await self._link()
        body = gen.dumps(retry)
        what = f"{'a' if valid else 'a broken'} retry of {name}"
        await self._exchange(link, gen.http_request(gen.mcp_headers(retry), body, host=self.host), Sent(what, owed(body), valid=valid))

    async def listen(self) -> None:
        """A subscriptions/listen stream: acknowledged first, then a resource update; the client leaves."""
        message = self.messages.request("subscriptions/listen", {"notifications": {
            "toolsListChanged": True, "resourceSubscriptions": ["fuzz://readme", "fuzz://data"]}}, modern=True)
        stream = await Link.open(self.fuzz.port)
        await stream.send(gen.http_request(gen.mcp_headers(message), gen.dumps(message), host=self.host))
        await self.fuzz.count()
        reply = await stream.reply(until=lambda r: bool(r.messages))
        ack = reply.messages[0] if reply is not None and reply.status == 200 and reply.messages else None
        if not isinstance(ack, dict) or ack.get("method") != "notifications/subscriptions/acknowledged":
            self.fuzz.violation("protocol", f"a listen stream did not open with its acknowledgement: {clip(reply)}")
        else:
            touch = self.messages.tool_call("touch", {"uri": "fuzz://readme"}, modern=True)
            link = await self._link()
            await self._exchange(link, gen.http_request(gen.mcp_headers(touch), gen.dumps(touch), host=self.host),
                                 Sent("a valid touch", owed(gen.dumps(touch)), valid=True))
        if self.rng.random() < 0.5:
            stream.reset()
        else:
            stream.close()

    # -- 2025-era sessions ---------------------------------------------------------

    async def _initialize(self, version: str, asking: bool) -> Session | None:
        """Open a session (None when refused); `asking`: declare the capabilities `ask` and `roots` need."""
        message = self.messages.initialize(version, dict(gen.ASKING) if asking else {})
        headers = gen.mcp_headers(message, None)
        if self.rng.random() < 0.3:
            headers.append(("mcp-protocol-version", self.rng.choice(gen.LEGACY_VERSIONS)))
        sessions = self.fuzz.sessions
        body = gen.dumps(message)
        window = sessions.begin()
        try:
            reply = await self._exchange(await self._link(), gen.http_request(headers, body, host=self.host),
                                         Sent(f"a valid initialize {version}", owed(body), valid=True, initialize=True,
                                              window=window))
        finally:
            sessions.end(window)
        session_id = reply.headers.get("mcp-session-id") if reply is not None else None
        if reply is None:
            sessions.opened(minted=False)
            return None
        if session_id is None:
            return None
        sessions.opened(minted=True)  # as the header says, even if the stream was cut before the result
        if not reply.responses or "result" not in reply.responses[0]:
            return None
        if sessions.surely_full(window):
            self.fuzz.violation("status", f"initialize opened a session past the limit of {sessions.limit}")
        negotiated = reply.responses[0]["result"]["protocolVersion"]
        return Session(session_id, negotiated, gen.mcp_headers(None, negotiated) + [("mcp-session-id", session_id)], asking)

    async def _delete(self, session: Session) -> None:
        sessions = self.fuzz.sessions
        sessions.deleting_one(+1)
        try:
            data = gen.http_request([("mcp-session-id", session.id)], b"", method="DELETE", host=self.host)
            reply = await self._exchange(await self._link(), data, Sent("DELETE of a session", None, method="DELETE"))
        finally:
            sessions.deleting_one(-1)
        if reply is not None and reply.status == 200:
            sessions.deleted()
        else:
            self.fuzz.violation("protocol", f"DELETE of a live session got {clip(reply)}")

    async def legacy_session(self) -> None:
        """initialize, notifications/initialized, a few calls of every kind, DELETE (now and then while a
        call waits for the client's answer); the session's GET streams end with it."""
        rng = self.rng
        session = await self._initialize(rng.choice(gen.LEGACY_VERSIONS + ("2099-01-01",)), asking=rng.random() < 0.9)
        if session is None:
            return
        initialized = gen.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await self._exchange(await self._link(), gen.http_request(session.headers, initialized, host=self.host),
                             Sent("a valid notifications/initialized", owed(initialized), valid=True))
        streams = []
        if rng.random() < 0.3:
            streams.append(await self._open_get(session))
            if rng.random() < 0.3:
                streams.append(await self._open_get(session))  # a session has one GET stream: this one gets 409
        steps = (self._session_call, self._session_ask, self._session_cancel, self._session_resume, self._session_broken)
        weights = (10, 3 if session.asking else 0, 2, 2 if session.version == "2025-11-25" else 0, 4)
        try:
            try:
                for step in rng.choices(steps, weights, k=rng.randint(1, 8)):
                    self.fuzz.report.kinds[f"http legacy_session {step.__name__.lstrip('_')}"] += 1
                    await step(session)
            finally:
                if session.asking and rng.random() < 0.1:
                    await self._delete_while_asking(session)
                else:
                    await self._delete(session)
            replies = [await self._ended(stream) for stream in streams]
            if sum(reply is not None and reply.status == 200 for reply in replies) > 1:
                self.fuzz.violation("protocol", "two GET streams of one session were open at once")
        finally:
            for stream in streams:
                stream.cancel()
        if rng.random() < 0.2:  # the ended session is gone
            body = gen.dumps(self.messages.call(modern=False))
            reply = await self._exchange(await self._link(), gen.http_request(session.headers, body, host=self.host),
                                         Sent("a call on a deleted session", owed(body)))
            if reply is not None and reply.status != 404:
                self.fuzz.violation("protocol", f"a call on a deleted session got {reply.status}, not 404")

    async def _ended(self, stream: asyncio.Task[Reply | None]) -> Reply | None:
        """A session's GET stream ends (with its HTTP body complete) once the session is deleted."""
        try:
            reply = await asyncio.wait_for(stream, 10)
        except asyncio.TimeoutError:
            self.fuzz.violation("protocol", "the GET stream of a session did not end after its DELETE")
            return None
        self.fuzz.check(Sent("the GET stream of a deleted session", None, method="GET"), reply)
        return reply

    async def _delete_while_asking(self, session: Session) -> None:
        """DELETE while a call waits for the client's answer: its stream ends (cut) and the session is gone."""
        message = self.messages.tool_call("ask", {}, modern=False)
        body = gen.dumps(message)
        asked = asyncio.Event()

        async def on_message(request: dict[str, Any]) -> None:
            if "method" in request and "id" in request:
                asked.set()

        caller = await Link.open(self.fuzz.port)
        try:
            await caller.send(gen.http_request(session.headers, body, host=self.host))
            await self.fuzz.count()
            reading = asyncio.get_running_loop().create_task(caller.reply(on_message=on_message))
            waiting = asyncio.get_running_loop().create_task(asked.wait())
            await asyncio.wait((reading, waiting), timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            await self._delete(session)
            reply = await asyncio.wait_for(reading, TIMEOUT)
            self.fuzz.check(Sent("an ask call whose session was deleted while it asked", owed(body), valid=True), reply, cancelled=True)
        finally:
            caller.close()

    async def _open_get(self, session: Session) -> asyncio.Task[Reply | None]:
        """The session's standalone GET stream, read in a task until it ends."""
        get = await Link.open(self.fuzz.port)
        await get.send(gen.http_request(session.get_headers, b"", method="GET", host=self.host))
        await self.fuzz.count()

        async def read() -> Reply | None:
            try:
                return await get.reply("GET", timeout=60)
            finally:
                get.close()

        return asyncio.get_running_loop().create_task(read())

    async def _answer(self, request: dict[str, Any], session: Session, broken: bool) -> None:
        """POST the client's answer to a server-to-client request (from a connection of its own)."""
        reply = gen.answer(request, self.rng)
        body = gen.dumps(gen.mutate(reply, self.rng) if broken else reply)
        side = await Link.open(self.fuzz.port)
        try:
            sent = Sent(f"{'a broken' if broken else 'an'} answer to {request.get('method')}", owed(body), valid=not broken)
            await self._exchange(side, gen.http_request(session.headers, body, host=self.host), sent)
        finally:
            side.close()

    async def _session_call(self, session: Session) -> None:
        message = self.messages.call(modern=False)
        body = gen.dumps(message)
        await self._exchange(await self._link(), gen.http_request(session.headers, body, host=self.host),
                             Sent(f"a valid session {_name(message)}", owed(body), valid=True))

    async def _session_ask(self, session: Session) -> None:
        """A call that asks the client (elicitation or roots) on its stream, answered from elsewhere.

        A broken answer leaves the question open: the call is then cancelled, as a client would."""
        broken = self.rng.random() < 0.2
        message = self.messages.tool_call(self.rng.choice(("ask", "roots")), {}, modern=False)
        body = gen.dumps(message)

        async def on_message(request: dict[str, Any]) -> None:
            if "method" in request and "id" in request:
                await self._answer(request, session, broken)
                if broken:
                    await self._cancel(session, message["id"])

        link = await self._link()
        await link.send(gen.http_request(session.headers, body, host=self.host))
        await self.fuzz.count()
        reply = await link.reply(on_message=on_message)
        self.fuzz.check(Sent(f"a session {message['params']['name']} call", owed(body), valid=True), reply, cancelled=broken)

    async def _cancel(self, session: Session, request_id: Any) -> None:
        cancel = gen.dumps(gen.cancellation(request_id, modern=False))
        side = await Link.open(self.fuzz.port)
        try:
            await self._exchange(side, gen.http_request(session.headers, cancel, host=self.host),
                                 Sent("a valid cancellation", owed(cancel), valid=True))
        finally:
            side.close()

    async def _session_cancel(self, session: Session) -> None:
        """A call cancelled with notifications/cancelled: no response, or the one it had already earned.

        A hang is cancelled once it reported that it runs (before that, the cancellation
        could overtake the call and be ignored); a nap races with its cancellation."""
        rng = self.rng
        name = rng.choice(("hang", "nap"))
        message = self.messages.tool_call(name, {"seconds": rng.choice((0.0, 0.005, 0.05))} if name == "nap" else {}, modern=False)
        message["params"]["_meta"] = {"progressToken": "cancel"}
        body = gen.dumps(message)
        running = asyncio.Event()

        async def on_message(note: dict[str, Any]) -> None:
            running.set()

        caller = await Link.open(self.fuzz.port)
        try:
            await caller.send(gen.http_request(session.headers, body, host=self.host))
            await self.fuzz.count()
            reading = asyncio.get_running_loop().create_task(caller.reply(on_message=on_message))
            if name == "hang":
                started = asyncio.get_running_loop().create_task(running.wait())
                await asyncio.wait((reading, started), timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
                started.cancel()
                if rng.random() < 0.3:
                    await self._reuse_id(session, message["id"])
            else:
                await asyncio.sleep(rng.choice((0, 0.001, 0.01)))
            await self._cancel(session, message["id"])
            self.fuzz.check(Sent(f"a cancelled {name} call", owed(body), valid=True), await reading, cancelled=True)
        finally:
            caller.close()

    async def _reuse_id(self, session: Session, request_id: Any) -> None:
        """A request reusing the id of one in flight in the session is refused (400, with that id)."""
        again = self.messages.tool_call("echo", {"text": "again"}, modern=False)
        again["id"] = request_id
        body = gen.dumps(again)
        reply = await self._exchange(await self._link(), gen.http_request(session.headers, body, host=self.host),
                                     Sent("a request reusing an id in flight", owed(body)))
        if reply is not None and reply.status != 400:
            self.fuzz.violation("protocol", f"a request reusing an id in flight got {reply.status}, not 400")

    async def _session_resume(self, session: Session) -> None:
        """A 2025-11-25 stream dropped after its first event, resumed with GET and Last-Event-ID."""
        message = self.messages.tool_call("steps", {"count": self.rng.randint(1, 4)}, modern=False)
        message["params"]["_meta"] = {"progressToken": "resume"}
        body = gen.dumps(message)
        first = await Link.open(self.fuzz.port)
        try:
            await first.send(gen.http_request(session.headers, body, host=self.host))
            await self.fuzz.count()
            part = await first.reply(until=lambda r: bool(r.event_ids))
        finally:
            first.close()
        if part is None or not part.event_ids:
            self.fuzz.check(Sent("a resumable call", owed(body), valid=True), part)
            return
        resumed = await Link.open(self.fuzz.port)
        try:
            await resumed.send(gen.http_request(session.get_headers + [("last-event-id", part.event_ids[-1])], b"",
                                                method="GET", host=self.host))
            await self.fuzz.count()
            rest = await resumed.reply("GET")
        finally:
            resumed.close()
        if rest is not None and part.responses:  # answered before the drop: the resumed stream owes nothing more
            rest.messages = part.responses + rest.messages
        self.fuzz.check(Sent("a resumable call, resumed", owed(body), method="GET", valid=True), rest)

    async def _session_broken(self, session: Session) -> None:
        """A broken message or header within a session."""
        rng = self.rng
        message = self.messages.call(modern=False)
        headers, body = session.headers, gen.dumps(message)
        pick = rng.randrange(6)
        if pick == 0:
            body = gen.dumps(gen.mutate(message, rng))
        elif pick == 1:
            body = gen.corrupt(body, rng)
        elif pick == 2:
            headers = gen.mutate_headers(headers, rng)
        elif pick == 3:
            headers = [(n, v) for n, v in headers if n != "mcp-session-id"] + [("mcp-session-id", rng.choice(("", "nope", "x" * 100)))]
        elif pick == 4:  # a second initialize
            message = self.messages.initialize(rng.choice(gen.LEGACY_VERSIONS), {})
            body = gen.dumps(message)
        else:  # a resumption no stream can serve
            event = rng.choice(("nope", "", "s999999.1", "s1.999999", "s1.-1", "."))
            data = gen.http_request(session.get_headers + [("last-event-id", event)], b"", method="GET", host=self.host)
            await self._exchange(await self._link(), data, Sent(f"GET after the unknown event {event!r}", None, method="GET"))
            return
        await self._exchange(await self._link(), gen.http_request(headers, body, host=self.host),
                             Sent(f"a broken session {_name(message)}", owed(body)))

    async def session_flood(self) -> None:
        """Open sessions until the limit refuses one (503), then end them all."""
        opened = []
        try:
            for _ in range(SESSION_LIMIT + 2):
                session = await self._initialize("2025-11-25", asking=False)
                if session is None:
                    break
                opened.append(session)
        finally:
            for session in opened:
                await self._delete(session)


def _name(message: Any) -> str:
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        method = message["method"]
        params = message.get("params")
        if method == "tools/call" and isinstance(params, dict):
            return f"tools/call {params.get('name')}"
        return method
    return "message"


async def run_http(report: Report, count: int, seed: int, workers: int, health_every: int, port: int) -> None:
    """Start the HTTP server, drive `count` inputs at it from `workers` workers, stop it."""
    options = ["--port", str(port), "--max-sessions", str(SESSION_LIMIT), "--max-in-flight", str(IN_FLIGHT)]
    server = ServerProcess(["--transport", "http", *options], report, "http")
    await server.start()
    try:
        if not await server.wait_for(b"serving 'fuzz' at", 30):
            server.check_alive("at start")
            report.violation("server-alive", "http: the server did not start listening within 30 s")
            return
        fuzz = HttpFuzz(server, port, report, count, health_every)
        await asyncio.gather(*(HttpWorker(fuzz, f"{seed}-http-{n}").run() for n in range(workers)))
        if server.check_alive("during the HTTP run"):
            await fuzz.health()
    finally:
        await server.finish(30, terminate=True)
