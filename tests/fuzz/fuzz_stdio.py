"""The stdio half of the fuzz: lines over real pipes to `mcpcore run tests/fuzz/fuzz_server.py`.

Each stream is one server process: a modern one (its first request is a
2026-07-28 call) or a 2025-era one (it opens with initialize), some through
the portable bridge (MCPCORE_PORTABLE=1). Lines are valid calls and
notifications, slow calls with their cancellations, listen streams, mutated
and corrupted messages, responses nobody asked for, blank and oversized lines.
Every line's due is taken from the oracle as it is written; a reader checks
each output line as it comes and answers the server's own requests (2025-era
elicitation and roots). After stdin closes, the tally must balance:

- a request id sent n times, of which c were cancelled while outstanding, is
  answered at least n - c and at most n times (a cancelled request gets no
  response, or the one it had already earned: the specification's "SHOULD NOT
  send a response" and its race with completion);
- every line owed an id-less error (its id cannot be read, or it exceeds
  --max-line-bytes) gets exactly one; no response carries an id never sent;
- the process exits with status 0.

A modern stream's stdin closes right after its last line, with calls still in
flight (EOF drains them); a 2025-era stream waits first until what it owes is
answered, since a call may still send a request only an open stdin can answer.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import random
from typing import Any

import orjson

import fuzz_inputs as gen
from fuzz_inputs import Key, key_of, owed
from fuzz_report import Report, ServerProcess, clip

MAX_LINE_BYTES = 1 << 20  # --max-line-bytes of the fuzzed server: oversized lines stay cheap to send
NARROW_WINDOW = 4  # --max-in-flight of every fifth stream: calls wait for slots, and cancellations meet held ones
HEALTH_TIMEOUT = 15.0
EXIT_TIMEOUT = 30.0
# The kinds of input, by weight.
KINDS = {
    "valid call": 42, "notification": 5, "slow call": 5, "listen": 1, "mutated": 19, "corrupted": 16,
    "stray cancellation": 3, "stray response": 3, "blank": 2, "near the line limit": 2, "two lines": 2, "reused id": 1,
}


class StdioStream:
    """One server process fed `lines` lines, and the tally of what it owes."""

    def __init__(
        self, report: Report, seed: str, lines: int, health_every: int, legacy: bool, bridge: bool, narrow: bool,
    ) -> None:
        """`bridge`: through the portable bridge; `narrow`: an in-flight window of NARROW_WINDOW calls."""
        self.report = report
        self.label = f"stdio {seed}" + "".join(f" ({what})" for what, on in (
            ("2025-era", legacy), ("bridged", bridge), (f"--max-in-flight {NARROW_WINDOW}", narrow)) if on)
        self.rng = random.Random(seed)
        self.messages = gen.Messages(self.rng, seed)
        self.lines = lines
        self.legacy = legacy
        self.health_every = health_every
        env = {"MCPCORE_PORTABLE": "1"} if bridge else None
        window = ["--max-in-flight", str(NARROW_WINDOW)] if narrow else []
        self.server = ServerProcess(["--max-line-bytes", str(MAX_LINE_BYTES), *window], report, self.label, env)
        self.sent: collections.Counter[Key] = collections.Counter()
        self.cancelled: collections.Counter[Key] = collections.Counter()
        self.answered: collections.Counter[Key] = collections.Counter()
        self.first_line: dict[Key, bytes] = {}
        self.valid: set[Key] = set()  # well-formed calls: a response to one must be a result
        self.anonymous_owed = 0
        self.anonymous_got = 0
        self.waiting: dict[Key, asyncio.Future[dict[str, Any]]] = {}  # health calls
        self.cancels: list[tuple[int, int, Any]] = []  # a heap of (due after line, tie-breaker, request id)
        self.stdin: asyncio.StreamWriter | None = None

    def violation(self, invariant: str, text: str) -> None:
        self.report.violation(invariant, f"{self.label}: {text}")

    # -- what is owed -----------------------------------------------------------

    def _expect(self, data: bytes) -> None:
        """Record what `data` (one line, or several if it holds newlines) is owed, as the server splits it."""
        for line in data.split(b"\n"):
            if not line.strip():
                continue  # blank lines are skipped
            if len(line) > MAX_LINE_BYTES:
                self.anonymous_owed += 1
                continue
            due = owed(line, stdio=True)
            if due.kind == "id":
                assert due.key is not None
                self.sent[due.key] += 1
                self.first_line.setdefault(due.key, line[:200])
            elif due.kind == "anonymous":
                self.anonymous_owed += 1
            elif due.cancels is not None and self.sent[due.cancels] > self.cancelled[due.cancels]:
                self.cancelled[due.cancels] += 1

    def send(self, data: bytes, valid: bool = False, newline: bool = True) -> None:
        """Write one input (buffered: the reader must never wait on stdin, or both pipes could fill)."""
        assert self.stdin is not None
        if self.stdin.is_closing():
            return
        self._expect(data)
        if valid:
            due = owed(data, stdio=True)
            assert due.kind == "id" and due.key is not None, data
            self.valid.add(due.key)
        self.stdin.write(data + b"\n" if newline else data)
        self.report.stdio_lines += data.count(b"\n") + 1

    async def write(self, data: bytes, valid: bool = False, newline: bool = True) -> None:
        """`send`, then wait while the server is not reading."""
        self.send(data, valid, newline)
        assert self.stdin is not None
        await self.stdin.drain()

    # -- reading ------------------------------------------------------------------

    async def read(self, stdout: asyncio.StreamReader) -> None:
        """Check every line the server writes; answer its requests to the client."""
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError) as error:
                self.violation("protocol", f"an output line past the reader's limit: {error}")
                return
            if not line:
                return
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.violation("protocol", f"an output line that is not JSON: {clip(line)}")
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                self.violation("protocol", f"an output line that is not JSON-RPC: {clip(line)}")
            elif "method" in message:
                if "id" in message:
                    await self._server_request(message)
            else:
                self._response(message)

    async def _server_request(self, message: dict[str, Any]) -> None:
        if not self.legacy:
            self.violation("protocol", f"a server-to-client request on the stateless wire: {clip(message)}")
            return
        self.send(gen.dumps(gen.answer(message, self.rng)))

    def _response(self, message: dict[str, Any]) -> None:
        if ("result" in message) == ("error" in message):
            self.violation("protocol", f"a response with neither or both of result and error: {clip(message)}")
        self.report.outcome("stdio", message)
        if "id" not in message:
            self.anonymous_got += 1
            if "error" not in message:
                self.violation("protocol", f"a result without an id: {clip(message)}")
            return
        key = key_of(message["id"])
        if key is None:
            self.violation("answered-once", f"a response whose id no request can have: {clip(message)}")
            return
        self.answered[key] += 1
        if self.answered[key] > self.sent[key]:
            what = "never sent" if not self.sent[key] else f"sent {self.sent[key]} time(s), answered {self.answered[key]}"
            self.violation("answered-once", f"id {key[1]!r} {what}: {clip(message)}")
        if key in self.valid and self.sent[key] == 1 and "error" in message:  # a corrupted line may reuse an id
            self.violation("valid-call", f"{clip(self.first_line.get(key))} got {clip(message)}")
        waiter = self.waiting.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(message)

    # -- writing --------------------------------------------------------------------

    def _call(self) -> dict[str, Any]:
        return self.messages.call(modern=not self.legacy)

    async def _next(self, number: int) -> None:
        """Write the line (or lines) of one input of a kind drawn by weight; then the cancellations now due."""
        rng, modern = self.rng, not self.legacy
        (kind,) = rng.choices(list(KINDS), list(KINDS.values()))
        if kind == "listen" and not modern:
            kind = "valid call"  # subscriptions/listen is 2026-07-28 only
        self.report.kinds[f"stdio {kind}"] += 1
        if kind == "valid call":
            await self.write(gen.dumps(self._call()), valid=True)
        elif kind == "notification":
            await self.write(gen.dumps(self.messages.notification(modern)))
        elif kind == "slow call":  # a hang is always cancelled, a nap now and then
            name = rng.choice(("hang", "nap", "nap") if modern else ("hang", "nap", "ask", "roots"))
            arguments = {"seconds": rng.choice((0.0, 0.001, 0.01, 0.05))} if name == "nap" else {}
            message = self.messages.tool_call(name, arguments, modern)
            await self.write(gen.dumps(message), valid=True)
            if name == "hang" or rng.random() < 0.5:
                self._cancel_later(number + rng.randint(0, 5), message["id"])
        elif kind == "listen":  # answered when stdin closes, unless cancelled
            filters = {"toolsListChanged": True, "resourceSubscriptions": ["fuzz://readme"]}
            message = self.messages.request("subscriptions/listen", {"notifications": filters}, modern)
            await self.write(gen.dumps(message), valid=True)
            if rng.random() < 0.5:
                self._cancel_later(number + rng.randint(0, 20), message["id"])
        elif kind == "mutated":
            await self.write(gen.dumps(gen.mutate(self._call(), rng)) + rng.choice((b"", b"", b"\r")))
        elif kind == "corrupted":
            await self.write(gen.corrupt(gen.dumps(self._call()), rng))
        elif kind == "stray cancellation":
            cancel = gen.cancellation(rng.choice((self.messages.counter, "nope", *gen.ODD_IDS[:12])), modern)
            await self.write(gen.dumps(gen.mutate(cancel, rng) if rng.random() < 0.5 else cancel))
        elif kind == "stray response":
            reply = {"jsonrpc": "2.0", "id": rng.choice(("mcpcore-999999", 1, "x", None)), "result": {}}
            await self.write(gen.dumps(reply if rng.random() < 0.5 else gen.mutate(reply, rng)))
        elif kind == "reused id":  # while a call with the id runs: refused, with the id
            message = self.messages.tool_call("hang", {}, modern)
            again = self.messages.tool_call("echo", {"text": "again"}, modern)
            again["id"] = message["id"]
            await self.write(gen.dumps(message), valid=True)
            await self.write(gen.dumps(again))
            self._cancel_later(number + rng.randint(0, 5), message["id"])
        elif kind == "blank":
            await self.write(rng.choice((b"", b" ", b"\t", b"\r", b"  \r")))
        elif kind == "near the line limit":  # padded just under it, or over it
            encoded = gen.dumps(self.messages.tool_call("echo", {"text": ""}, modern))
            size = MAX_LINE_BYTES + rng.choice((-200, 1, 1000, 300000))
            await self.write(b" " * (size - len(encoded)) + encoded, valid=size <= MAX_LINE_BYTES)
        else:  # two lines in one write
            await self.write(gen.dumps(self._call()) + b"\n" + gen.dumps(self._call()))
        while self.cancels and self.cancels[0][0] <= number:
            _, _, request_id = heapq.heappop(self.cancels)
            await self.write(gen.dumps(gen.cancellation(request_id, modern)))

    def _cancel_later(self, line: int, request_id: Any) -> None:
        """Cancel `request_id` once `line` lines are written."""
        heapq.heappush(self.cancels, (line, self.messages.counter, request_id))  # the counter breaks ties: ids of two types never compare

    async def health(self, number: int) -> None:
        self.report.health_checks += 1
        text = f"health {number}"
        message = self.messages.tool_call("echo", {"text": text}, not self.legacy)
        message["id"] = f"health-{number}"
        waiter = self.waiting[("str", message["id"])] = asyncio.get_running_loop().create_future()
        await self.write(gen.dumps(message), valid=True)
        try:
            reply = await asyncio.wait_for(waiter, HEALTH_TIMEOUT)
        except asyncio.TimeoutError:
            self.violation("health", f"no answer to the health call after line {number} within {HEALTH_TIMEOUT:g} s")
            return
        if reply.get("result", {}).get("content") != [{"type": "text", "text": text}]:
            self.violation("health", f"the health call after line {number} got {clip(reply)}")

    async def _settle(self, seconds: float) -> None:
        """Wait until every request not cancelled is answered (a 2025-era stream, before EOF)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while loop.time() < deadline and any(self.answered[k] < n - self.cancelled[k] for k, n in self.sent.items()):
            await asyncio.sleep(0.02)

    async def run(self, counted: list[int]) -> None:
        """Serve the stream and check its tally; `counted` is the lines sent by all streams so far."""
        process = await self.server.start(pipes=True)
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        reading = asyncio.get_running_loop().create_task(self.read(process.stdout))
        try:
            if self.legacy:
                opening = self.messages.initialize(self.rng.choice(gen.LEGACY_VERSIONS), dict(gen.ASKING))
                opening["id"] = "initialize"
                waiter = self.waiting[("str", "initialize")] = asyncio.get_running_loop().create_future()
                await self.write(gen.dumps(opening), valid=True)
                await asyncio.wait_for(waiter, HEALTH_TIMEOUT)
                await self.write(gen.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            for number in range(1, self.lines + 1):
                await self._next(number)
                counted[0] += 1
                self.report.inputs["stdio"] += 1
                if counted[0] % self.health_every == 0:
                    if not self.server.check_alive(f"before the health check after line {number}"):
                        break
                    await self.health(number)
            while self.cancels:
                _, _, request_id = heapq.heappop(self.cancels)
                await self.write(gen.dumps(gen.cancellation(request_id, not self.legacy)))
            if self.legacy:
                await self._settle(HEALTH_TIMEOUT)
            if self.rng.random() < 0.3:  # the last line may end at EOF without its newline
                await self.write(gen.dumps(self._call()), valid=True, newline=False)
            self.server.check_alive("before stdin closed")
            process.stdin.close()
            await asyncio.wait_for(reading, EXIT_TIMEOUT)
        except (asyncio.TimeoutError, ConnectionError) as error:
            self.violation("server-alive", f"the stream broke off: {error!r}")
        finally:
            if not process.stdin.is_closing():
                process.stdin.close()
            await self.server.finish(EXIT_TIMEOUT, terminate=False)
            reading.cancel()
        self._balance()

    def _balance(self) -> None:
        for key, n in self.sent.items():
            got, cancelled = self.answered[key], self.cancelled[key]
            if got < n - cancelled:
                self.violation("answered-once", f"id {key[1]!r} sent {n} time(s) ({cancelled} cancelled), answered {got}: "
                               f"{clip(self.first_line.get(key))}")
        if self.anonymous_got != self.anonymous_owed:
            self.violation("answered-once", f"{self.anonymous_owed} lines owed an error without an id; {self.anonymous_got} came")


async def run_stdio(report: Report, count: int, seed: int, per_stream: int, health_every: int) -> None:
    """Drive `count` lines through streams of `per_stream` lines, one server process each."""
    counted = [0]
    number = 0
    while counted[0] < count:
        lines = min(per_stream, count - counted[0])
        stream = StdioStream(report, f"{seed}-stdio-{number}", lines, health_every,
                             legacy=number % 3 == 1, bridge=number % 4 == 3, narrow=number % 5 == 2)
        await stream.run(counted)
        number += 1
