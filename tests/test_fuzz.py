"""The bundled fuzz script, briefly: a few thousand inputs each way at real server processes, no invariant broken.

The full run (100,000 of each, `tests/fuzz/fuzz.py` with its defaults) is in
benchmarks/RESULTS.md; this one keeps the script and the invariants honest in CI.
Beside it, random operations on 2025-era sessions against an in-process server, whose
sessions and stream stores are then looked at directly.
"""

from __future__ import annotations

import gc
import itertools
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import h11
import pytest

from conftest import LEGACY_VERSIONS, ROOT, VERSION, legacy
from http_client import HttpClient, Reply, SseStream, running
from mcpcore._wire.protocol import http_status
from process_group import run_in_own_group
from test_legacy_http import BASE, initialize, session_headers

sys.path.insert(0, str(ROOT / "benchmarks" / "servers"))

import soak_server  # noqa: E402

HTTP_INPUTS = 3000
STDIO_INPUTS = 3000


def test_a_short_fuzz_run_over_http_and_stdio_breaks_no_invariant(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    command = [
        sys.executable, str(ROOT / "tests" / "fuzz" / "fuzz.py"), "--http", str(HTTP_INPUTS), "--stdio", str(STDIO_INPUTS),
        "--stdio-stream", "1000", "--health-every", "1000", "--seed", "7", "--json", str(summary_file),
    ]
    done = run_in_own_group(command, cwd=ROOT, stderr=subprocess.STDOUT)  # the script and every server it starts
    output = done.stdout
    assert done.returncode == 0, output
    summary = json.loads(summary_file.read_text())
    assert summary["violations"] == {}, output
    assert summary["inputs"]["http"] >= HTTP_INPUTS and summary["inputs"]["stdio"] >= STDIO_INPUTS, output
    assert summary["health_checks"] >= 6, output


# -- 2025-era sessions, in process: random session operations, and what the server holds afterwards ------------

SEEDS = (1, 2, 3)
STEPS = 250  # operations per seed
MAX_SESSIONS = 6  # small, so the limit's 503 is met
FUZZ_LIMIT = 60  # seconds for one seed's run: it takes a few
RESUME_LIMIT = 10  # seconds for a resumption of a stream that ended: it takes milliseconds
VERSIONS = (*LEGACY_VERSIONS, VERSION, "1999-01-01", "", "2025-11-25 ")
NAMES_A_RESOURCE = re.compile(r"soak://note/[^/?#,&]+")  # the soak server's one template, soak://note/{number}
URIS = ("soak://note/1", "soak://note/2", "soak://note/999", "file:///etc/passwd", "", "x" * 300, "soak://note/{n}")
MALFORMED = (b"{", b"[]", b'"ping"', b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
             b'{"jsonrpc":"2.0","id":{},"method":"ping"}', b'{"jsonrpc":"2.0","id":1,"method":7}', b"\xff\xfe", b"null")
UNSERVED = ("prompts/list", "fuzz/unknown")  # the server offers no prompts
SERVED = ("ping", "tools/list", "resources/list", "resources/templates/list", "echo", "notify",
          "subscribe", "unsubscribe", "setLevel", *UNSERVED)
NO_EVENTS = ("nope", "", "s999999.1", "s1.-1", "s1.999999", ".")  # Last-Event-IDs no stream of a short run has
SESSION_CLIENT = {"name": "fuzz", "version": "1"}
ERROR_CODES = {-32700, -32600, -32601, -32602, -32002}  # parse, request, method, params; resource not found


def answered(reply: Reply) -> Reply:
    """A reply, once it is seen to be no 5xx but the session limit's 503 (which `initialize` checks it is owed)."""
    assert reply.status < 500 or reply.status == 503, (reply.status, reply.body)
    return reply


def refused(reply: Reply) -> int:
    """The error code of a JSON-RPC error answer, which must come with its code's HTTP status."""
    code = reply.response["error"]["code"]
    assert code in ERROR_CODES and reply.status == http_status(code), (reply.status, reply.body)
    return code


@dataclass
class FuzzSession:
    id: str
    version: str
    initialized: bool = False
    event_ids: list[str] = field(default_factory=list)  # of finished streams: each can be resumed (a short run
    # stores far fewer than a session's 256 events, so none has left the store)
    cancelled_ids: list[str] = field(default_factory=list)  # the last event of each cancelled call's stream


class SessionFuzz:
    """Random operations on 2025-era sessions over a real socket, each answer checked as it comes.

    The client's own record of the live sessions is exact (one client, requests in turn, no idle
    expiry), so it says which answer each operation is owed: the limit's 503 included."""

    def __init__(self, http: Any, foreign_id: str, seed: int) -> None:
        self.http, self.foreign_id = http, foreign_id
        self.rng = random.Random(seed)
        self.live: dict[str, FuzzSession] = {}
        self.ended: list[str] = []
        self.ids = itertools.count(1)
        self.client: HttpClient | None = None
        self.sentinel: FuzzSession | None = None

    async def connection(self) -> HttpClient:
        """The keep-alive connection, a new one once the server closed the last."""
        if self.client is None or self.client.conn.our_state is not h11.IDLE:
            if self.client is not None:
                await self.client.stream.aclose()
            self.client = HttpClient(await anyio.connect_tcp("127.0.0.1", self.http.port), f"127.0.0.1:{self.http.port}")
        return self.client

    async def close(self) -> None:
        if self.client is not None:
            await self.client.stream.aclose()

    async def send(self, method: str, headers: dict[str, str]) -> Reply:
        """A GET or DELETE; no 5xx answer but the session limit's 503 (which only initialize may get)."""
        client = await self.connection()
        await client.send_request(method, "/mcp", headers)
        return answered(await client.read_reply())

    async def post(self, session: FuzzSession | None, message: Any, raw: bytes | None = None,
                   session_id: str | None = None) -> Reply:
        """POST a message (of a session, or naming `session_id`); each JSON-RPC message is schema-checked."""
        if session is not None:
            headers = session_headers(session.id, session.version)
        else:
            headers = dict(BASE) if session_id is None else session_headers(session_id)
        return answered(await (await self.connection()).post(message, headers, raw=raw, legacy=True))

    def request(self, method: str, **params: Any) -> dict[str, Any]:
        return legacy(method, next(self.ids), **params)

    # -- the operations -------------------------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> FuzzSession | None:
        """initialize: 503 at the limit, 400 without a string version or with odd capabilities, else a session."""
        reply = await self.post(None, self.request("initialize", **params))
        if len(self.live) + (self.sentinel is not None) >= MAX_SESSIONS:
            assert reply.status == 503 and reply.response["error"]["code"] == -32600, reply.body  # the documented limit
            return None
        if not isinstance(params["protocolVersion"], str) or not isinstance(params["capabilities"], dict):
            assert refused(reply) == -32602 and "mcp-session-id" not in reply.headers, reply.headers
            return None
        assert reply.status == 200, reply.body
        version = reply.response["result"]["protocolVersion"]
        assert version == (params["protocolVersion"] if params["protocolVersion"] in LEGACY_VERSIONS else LEGACY_VERSIONS[0])
        return FuzzSession(reply.headers["mcp-session-id"], version)

    async def opened(self) -> None:
        """initialize with random params, and (mostly) notifications/initialized."""
        rng = self.rng
        params: dict[str, Any] = {"protocolVersion": rng.choice(VERSIONS), "capabilities": rng.choice(({}, {"roots": {}})),
                                  "clientInfo": SESSION_CLIENT}
        if rng.random() < 0.15:
            params[rng.choice(("protocolVersion", "capabilities"))] = rng.choice((None, 7, [], "x"))
        session = await self.initialize(params)
        if session is None:
            return
        self.live[session.id] = session
        if rng.random() < 0.85:
            await self.notify(session, "notifications/initialized")
            session.initialized = True

    async def notify(self, session: FuzzSession, method: str, **params: Any) -> None:
        note: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}
        reply = await self.post(session, note)
        assert reply.status == 202 and reply.body == b"", (method, reply.status, reply.body)

    def pick(self) -> FuzzSession | None:
        return self.rng.choice(list(self.live.values())) if self.live else None

    async def served(self) -> None:
        """A request of a live session: a result when the session may ask it, else an error with its id."""
        session = self.pick()
        if session is None:
            return
        kind = self.rng.choice(SERVED)
        message = self._served(kind)
        reply = await self.post(session, message)
        response = reply.response
        assert response["id"] == message["id"], reply.body
        owed = session.initialized or kind == "ping"
        if kind in UNSERVED or not owed or (kind in ("subscribe", "unsubscribe") and not isinstance(message["params"]["uri"], str)):
            refused(reply)
            return
        if kind == "subscribe" and not NAMES_A_RESOURCE.fullmatch(message["params"]["uri"]):
            assert refused(reply) == -32002, reply.body  # only resources can be followed
            return
        assert reply.status == 200 and "result" in response, (kind, reply.body)
        if reply.is_sse:
            session.event_ids += re.findall(r"^id: (\S+)$", reply.body.decode(), re.MULTILINE)

    def _served(self, kind: str) -> dict[str, Any]:
        rng = self.rng
        if kind in ("subscribe", "unsubscribe"):
            return self.request(f"resources/{kind}", uri=rng.choice((*URIS, 7, None)))
        if kind == "setLevel":
            return self.request("logging/setLevel", level=rng.choice(("debug", "info", "error")))
        if kind == "echo":
            return self.request("tools/call", name="echo", arguments={"text": "fuzz"})
        if kind == "notify":
            return self.request("tools/call", name="notify", arguments={}, _meta={"progressToken": next(self.ids)})
        return self.request(kind)

    async def unowned(self) -> None:
        """A request naming no session (400), an unknown, ended, or other server's one (404)."""
        rng = self.rng
        choice = rng.choice(("missing", "unknown", "ended", "foreign"))
        session_id = {"unknown": "nope" + str(rng.randrange(10**9)), "ended": rng.choice(self.ended or ["gone"]),
                      "foreign": self.foreign_id}.get(choice)
        message = self.request("tools/list")
        reply = await self.post(None, message, session_id=session_id)
        assert reply.status == (400 if choice == "missing" else 404), reply.body  # 404: the session is not here
        assert reply.response["id"] == message["id"] and reply.response["error"]["code"] == -32600, reply.body

    async def notification(self) -> None:
        session = self.pick()
        if session is not None:
            method = self.rng.choice(("notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
                                      "notifications/fuzz"))
            await self.notify(session, method, requestId=self.rng.randrange(10**6), progressToken="x", progress=1)

    async def malformed(self) -> None:
        """A broken body within a session: a 4xx with a JSON-RPC error (or a 202 if it reads as a notification)."""
        session = self.pick()
        if session is None:
            return
        refused(await self.post(session, None, raw=self.rng.choice(MALFORMED)))

    async def delete(self) -> None:
        rng = self.rng
        session = self.pick() if rng.random() < 0.8 else None
        session_id = session.id if session is not None else rng.choice((*self.ended, "nope", self.foreign_id))
        reply = await self.send("DELETE", session_headers(session_id))
        assert reply.status == (200 if session is not None else 404), (reply.status, reply.body)
        if session is not None:
            del self.live[session.id]
            self.ended.append(session.id)

    async def resume(self) -> None:
        """GET with a Last-Event-ID: a finished call's stream resumes (200, the rest of it: at most its response),
        a cancelled call's ends without a response (or is 404: let go of), any other id is 4xx; none hangs."""
        session = self.pick()
        if session is None:
            return
        kind = self.rng.choice(("finished", "cancelled", "unknown"))
        ids = {"finished": session.event_ids, "cancelled": session.cancelled_ids}.get(kind) or NO_EVENTS
        event = self.rng.choice(ids)
        headers = {"accept": "text/event-stream", "mcp-session-id": session.id, "mcp-protocol-version": session.version,
                   "last-event-id": event}
        with anyio.move_on_after(RESUME_LIMIT) as waited:
            reply = await self.send("GET", headers)
        assert not waited.cancel_called, f"the resumption after {kind} event {event!r} did not end in {RESUME_LIMIT} s"
        responses = [message for message in reply.messages if "id" in message and "method" not in message]
        if ids is NO_EVENTS:
            assert 400 <= reply.status < 500, (event, reply.status, reply.body)
        elif kind == "cancelled" and reply.status == 404:
            refused(reply)
        else:
            assert reply.status == 200 and reply.is_sse, (kind, event, reply.status, reply.body)
            assert len(responses) <= (1 if kind == "finished" else 0), reply.body

    async def listen_and_drop(self) -> None:
        """The session's standalone GET stream, opened on a connection of its own and dropped (or 409: the last one
        dropped is not yet noticed)."""
        session = self.pick()
        if session is None:
            return
        async with HttpClient.connect(self.http) as side:
            headers = {"accept": "text/event-stream", "mcp-session-id": session.id, "mcp-protocol-version": session.version}
            await side.send_request("GET", "/mcp", headers)
            response = await side._next()
            assert isinstance(response, h11.Response) and response.status_code in (200, 409), response

    async def cancel(self) -> None:
        """A running `hang` cancelled with notifications/cancelled: its stream ends with no response."""
        session = self.pick()
        if session is None or not session.initialized:
            return
        call = self.request("tools/call", name="hang", arguments={}, _meta={"progressToken": "fuzz"})
        async with HttpClient.connect(self.http) as caller:
            stream = SseStream(caller, "tools/call", legacy=True)
            await stream.open(call, session_headers(session.id, session.version))
            assert (await stream.next())["method"] == "notifications/progress"
            await self.notify(session, "notifications/cancelled", requestId=call["id"])
            assert await stream.next() is None
        session.cancelled_ids += stream.event_ids[-1:]  # a 2025-11-25 stream has ids

    async def sentinel_works(self) -> None:
        """The session no operation touches still serves its calls."""
        assert self.sentinel is not None
        message = self.request("tools/call", name="echo", arguments={"text": "sentinel"})
        reply = await self.post(self.sentinel, message)
        assert reply.status == 200 and reply.response["result"]["content"][0]["text"] == "sentinel", reply.body

    async def run(self, steps: int) -> None:
        """Open the sentinel session, then `steps` random operations, the sentinel checked after each."""
        self.sentinel = await self.initialize({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": SESSION_CLIENT})
        assert self.sentinel is not None
        await self.notify(self.sentinel, "notifications/initialized")
        operations = (self.opened, self.served, self.unowned, self.notification, self.malformed, self.delete, self.resume,
                      self.listen_and_drop, self.cancel)
        weights = (3, 10, 2, 2, 2, 2, 2, 1, 1)
        for _ in range(steps):
            await self.rng.choices(operations, weights)[0]()
            await self.sentinel_works()

    async def end_all(self) -> None:
        """DELETE every live session, the sentinel's too."""
        assert self.sentinel is not None
        for session_id in [*self.live, self.sentinel.id]:
            assert (await self.send("DELETE", session_headers(session_id))).status == 200


@pytest.mark.anyio
@pytest.mark.parametrize("seed", SEEDS)
async def test_random_2025_session_operations_keep_every_invariant(seed: int) -> None:
    """Every answer has its status and JSON-RPC shape, no 5xx but the session limit's 503, a session no operation
    touches keeps working; at the end the server holds exactly the live sessions, their stores keep no stream
    nothing can resume but the last of each, and once they are deleted it holds no session and no store."""
    async with running(soak_server.server, via="h11", max_sessions=MAX_SESSIONS) as http, \
            running(soak_server.server, via="h11") as other:
        fuzz = SessionFuzz(http, "", seed)
        try:
            with anyio.fail_after(FUZZ_LIMIT):
                async with HttpClient.connect(other) as elsewhere:
                    fuzz.foreign_id = await initialize(elsewhere)
                await fuzz.run(STEPS)
                census = soak_server.stream_census(http)
                assert census["sessions"] == len(fuzz.live) + 1, census
                assert census["unusable_streams"] <= census["sessions"], census
                await fuzz.end_all()
        finally:
            await fuzz.close()
        gc.collect()
        assert len(http.sessions) == 0 and len(http.stores) == 0
