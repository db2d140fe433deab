"""Soak: the HTTP server's resident memory across long runs of calls, SSE calls, hang-ups and slow-loris sockets.

    python benchmarks/soak.py [--calls 1000000] [--sse 20000] [--disconnects 20000] [--sockets 10000]

Starts benchmarks/servers/soak_server.py on 127.0.0.1 (pinned to one CPU and this
driver to another when taskset and two CPUs are available), warms every phase up at a
small count (20,000 calls, 1,000 SSE calls and hang-ups, three waves of sockets), then
runs the four measured phases (a count of 0 skips one), sampling the server's VmRSS every
--sample-interval seconds:

1. calls: `tools/call` in a closed loop over --connections keep-alive connections, half
   to `echo` (a sync tool: worker thread), half to `echo_async`; JSON answers.
2. sse: `notify` sends a progress notification and a log message before its result, so
   every answer is an SSE stream; each must hold both and the result.
3. disconnects: a fresh connection calls `hang` (it never returns) and goes away before
   the answer: after its progress event (the call is running) or right after sending
   (it may not have started), by closing (FIN) or resetting (RST), in turn. 20,000 of
   them outnumber the server's 1,024 in-flight slots: one not freed stalls later calls.
4. sockets: connections that send nothing, half a request head, or a head one byte at a
   time, then are left alone: the server's header deadline must close each (with 408
   once bytes came). In waves below --max-connections; a normal call must succeed
   while every wave is open.

Pass (exit 0) only if, for every phase: every count is done with no error (a non-200
status, a JSON-RPC or tool error, a wrong reply, a socket not closed within the header
deadline + 5 s); after the phase and a --settle pause a health call succeeds and the
server's own counters show no `hang` call still running, no more tasks or open fds than
after warm-up, and at most --max-object-growth more live (gc-tracked) objects than at the
previous check-up; the server stays alive and logs nothing after start; and RSS after
the settle pause exceeds RSS at the phase's start by at most --max-growth-mib, and the
last phase's end the first phase's start by at most --max-total-growth-mib. Otherwise
exit 1. Progress goes to stderr; the machine, a Markdown table and the verdict to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from procs import free_port, machine, pinned, stop
from httpload import drive, encode_http, is_error, mcp_request, parse_response
from stdiobench import rss_kib

from mcpcore import defaults

HOST = "127.0.0.1"
HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "soak_server.py"
MIB = 1024  # KiB
REPLY_TIMEOUT = 10.0  # seconds for any single answer the driver waits for
REAP_MARGIN = 5.0  # seconds past the header deadline before an open socket counts as not reaped
RESERVED_CONNECTIONS = 8  # kept free below the server's limit during a wave, for health calls
WARMUP = {"calls": 20_000, "sse": 1_000, "disconnects": 1_000}  # and three waves of sockets
WARMUP_WAVES = 3  # the allocator takes a few waves of ~1,000 open connections to settle
SSE_PARTS = (b"data: ", b'"notifications/progress"', b'"notifications/message"', b'"result"')
LOITER_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\n"


class Unhealthy(Exception):
    """The server did not answer a normal call as it should."""


class Aborted(Exception):
    """A phase could not go on: the server died, or the phase ran out of time."""


@dataclass
class Tally:
    """What a phase's driver did: items done, and errors with the first few reasons."""

    done: int = 0
    errors: int = 0
    reasons: list[str] = field(default_factory=list)

    def error(self, why: str) -> None:
        self.errors += 1
        if len(self.reasons) < 5 and why not in self.reasons:
            self.reasons.append(why)


@dataclass
class Phase:
    name: str
    count: int
    run: Callable[[int, int], Awaitable[Tally]]  # (port, count) -> tally
    tally: Tally = field(default_factory=Tally)
    rss_start: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    elapsed: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)  # the server's counters after the phase
    objects_before: int = 0  # live objects at the previous check-up
    problems: list[str] = field(default_factory=list)

    @property
    def growth(self) -> int:
        return self.rss_end - self.rss_start

    @property
    def object_growth(self) -> int:
        return self.stats["objects"] - self.objects_before


# -- the server --------------------------------------------------------------


class SoakServer:
    """The server subprocess; its stderr goes to a file so anything it logs is seen."""

    def __init__(self, server_file: Path, port: int, max_connections: int, header_timeout: float,
                 cpu: int | None) -> None:
        self.port = port
        self.log = tempfile.TemporaryFile()
        self._log_read = 0
        command = [sys.executable, str(server_file), "--port", str(port), "--max-connections", str(max_connections),
                   "--header-timeout", str(header_timeout)]
        self.process = subprocess.Popen(pinned(None if cpu is None else str(cpu), command),
                                        stdout=subprocess.DEVNULL, stderr=self.log)

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss(self) -> int:
        return rss_kib(self.process.pid)

    def logged(self) -> str:
        """What the server wrote to stderr since the last look."""
        self.log.seek(self._log_read)
        data = self.log.read()
        self._log_read += len(data)
        return data.decode(errors="replace")

    async def ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await checkup(self.port)
                return
            except (OSError, Unhealthy):
                if not self.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start: {self.logged()}") from None
                await asyncio.sleep(0.1)

    def close(self) -> None:
        stop(self.process)
        self.log.close()


def tool_call(port: int, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> bytes:
    """The wire bytes of a 2026-07-28 `tools/call` with its headers."""
    body, headers = mcp_request("tools/call", {"name": tool, "arguments": arguments}, meta=meta)
    return encode_http(f"{HOST}:{port}", "/mcp", body, headers)


async def exchange(port: int, requests: list[bytes]) -> list[tuple[int, bytes]]:
    """Send requests one after another on one keep-alive connection: (status, body) of each answer."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        answers, buffer = [], bytearray()
        for request in requests:
            writer.write(request)
            while (parsed := parse_response(buffer)) is None:
                data = await asyncio.wait_for(reader.read(1 << 16), REPLY_TIMEOUT)
                if not data:
                    raise Unhealthy("the server closed the connection before answering")
                buffer += data
            consumed, status, body = parsed
            del buffer[:consumed]
            answers.append((status, body))
        return answers
    except asyncio.TimeoutError:
        raise Unhealthy(f"no answer within {REPLY_TIMEOUT:.0f} s") from None
    finally:
        writer.close()


async def checkup(port: int) -> dict[str, int]:
    """A health call (an echo must come back) and then the server's counters, on one connection."""
    (status, body), (stats_status, stats_body) = await exchange(
        port, [tool_call(port, "echo", {"text": "health"}), tool_call(port, "stats", {})])
    if is_error(status, body) or b'"text":"health"' not in body:
        raise Unhealthy(f"health call answered {status}: {body[:200]!r}")
    if is_error(stats_status, stats_body):
        raise Unhealthy(f"stats call answered {stats_status}: {stats_body[:200]!r}")
    return json.loads(stats_body)["result"]["structuredContent"]


# -- the phases --------------------------------------------------------------


async def calls(port: int, count: int, connections: int, timeout: float) -> Tally:
    """Plain JSON calls, half to the sync echo, half to the async one, over keep-alive connections."""
    half = count // 2
    runs = await asyncio.gather(*(
        drive(HOST, port, tool_call(port, tool, {"text": "soak"}), max(1, connections // 2), share, timeout, 0.0)
        for tool, share in (("echo", count - half), ("echo_async", half)) if share))
    return _tally_of(runs, "a non-200 status, an error, or a dropped connection")


def _not_streamed(status: int, body: bytes) -> bool:
    return is_error(status, body) or not all(part in body for part in SSE_PARTS)


async def sse(port: int, count: int, connections: int, timeout: float) -> Tally:
    """Calls whose notifications turn the answer into an SSE stream."""
    meta = {"progressToken": "soak", "io.modelcontextprotocol/logLevel": "info"}
    request = tool_call(port, "notify", {}, meta)
    runs = [await drive(HOST, port, request, connections, count, timeout, 0.0, failed=_not_streamed)]
    return _tally_of(runs, "an answer that was not an SSE stream of progress, log message and result")


def _tally_of(runs: list[dict[str, Any]], why: str) -> Tally:
    tally = Tally(done=sum(len(run["latencies"]) for run in runs))
    for _ in range(sum(run["errors"] for run in runs)):
        tally.error(why)
    return tally


async def _hang_up(port: int, request: bytes, cycle: int) -> None:
    """One cycle: call `hang` on a fresh connection, then leave before the answer."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(request)
        if cycle % 2 == 0:  # wait until the call is running: its progress event opened the stream
            head = await asyncio.wait_for(reader.readuntil(b'"notifications/progress"'), REPLY_TIMEOUT)
            if not head.startswith(b"HTTP/1.1 200 ") or b"text/event-stream" not in head.lower():
                raise Unhealthy(f"hang answered {head[:100]!r}")
        else:
            await writer.drain()
        if cycle % 4 >= 2:  # reset rather than close
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        writer.close()


async def disconnects(port: int, count: int, concurrency: int) -> Tally:
    """Calls abandoned mid-way, `concurrency` at a time; the server must cancel each."""
    request = tool_call(port, "hang", {}, {"progressToken": "soak"})
    cycles = iter(range(count))
    tally = Tally()

    async def client() -> None:
        for cycle in cycles:
            try:
                await _hang_up(port, request, cycle)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, Unhealthy) as error:
                tally.error(f"{type(error).__name__}: {error}")
            tally.done += 1

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return tally


class Loiterer:
    """One abandoned socket: silent, half a request head, or a head one byte at a time (kind 0, 1, 2)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, kind: int,
                 byte_interval: float) -> None:
        self.reader, self.writer, self.kind = reader, writer, kind
        self.opened = time.monotonic()
        self.trickle: asyncio.Task[None] | None = None
        if kind == 1:
            writer.write(LOITER_HEAD[: len(LOITER_HEAD) // 2])
        elif kind == 2:
            self.trickle = asyncio.ensure_future(self._dribble(byte_interval))

    @classmethod
    async def open(cls, port: int, kind: int, byte_interval: float) -> "Loiterer":
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer, kind, byte_interval)

    async def _dribble(self, interval: float) -> None:
        for index in range(len(LOITER_HEAD)):  # never the blank line that would end the head
            self.writer.write(LOITER_HEAD[index : index + 1])
            await asyncio.sleep(interval)

    async def reaped(self, within: float) -> str | None:
        """Wait for the server to close the socket: None if it did in time with the right answer, else why not."""
        received = b""
        try:
            while True:
                left = max(0.1, within - (time.monotonic() - self.opened))  # what came while we were busy counts
                data = await asyncio.wait_for(self.reader.read(1 << 16), left)
                if not data:
                    break
                received += data
        except asyncio.TimeoutError:
            return f"a socket of kind {self.kind} was still open after {within:.0f} s"
        except ConnectionResetError:
            pass  # the server's close met our trickle; judge what came before it
        finally:
            if self.trickle is not None:
                self.trickle.cancel()
            self.writer.close()
        if received.startswith(b"HTTP/1.1 408 ") or (self.kind == 0 and not received):
            return None
        return f"a socket of kind {self.kind} got {received[:60]!r} instead of a 408"


async def sockets(port: int, count: int, wave_size: int, header_timeout: float) -> Tally:
    """Slow-loris sockets in waves: each wave opens, a normal call must succeed, then every socket must be reaped."""
    tally = Tally()
    byte_interval = header_timeout / 20  # far too slow to finish a head in time
    while tally.done < count:
        size = min(wave_size, count - tally.done)
        opened = await asyncio.gather(*(Loiterer.open(port, (tally.done + i) % 3, byte_interval) for i in range(size)),
                                      return_exceptions=True)
        loiterers = [item for item in opened if isinstance(item, Loiterer)]
        for failure in (item for item in opened if not isinstance(item, Loiterer)):
            tally.error(f"connect: {failure!r}")
        try:
            await checkup(port)
        except (OSError, Unhealthy) as error:
            tally.error(f"health call during a wave of {size}: {error}")
        verdicts = await asyncio.gather(*(loiterer.reaped(header_timeout + REAP_MARGIN) for loiterer in loiterers))
        for why in verdicts:
            if why is not None:
                tally.error(why)
        tally.done += size
    return tally


# -- measuring -----------------------------------------------------------------


async def watched(server: SoakServer, work: Awaitable[Tally], args: argparse.Namespace) -> tuple[Tally, int]:
    """Run a phase's work while sampling the server's RSS: its tally and the peak RSS."""
    task = asyncio.ensure_future(work)
    started, peak = time.monotonic(), server.rss()
    while not task.done():
        await asyncio.wait({task}, timeout=args.sample_interval)
        if not server.alive():
            task.cancel()
            raise Aborted(f"the server died (exit status {server.process.returncode})")
        if time.monotonic() - started > args.phase_timeout:
            task.cancel()
            raise Aborted(f"not done within --phase-timeout {args.phase_timeout:.0f} s")
        peak = max(peak, server.rss())
    return task.result(), peak


async def measure(server: SoakServer, phase: Phase, args: argparse.Namespace) -> None:
    """Run one phase, then settle and check the server's health and counters; Aborted if the soak cannot go on."""
    phase.rss_start = server.rss()
    started = time.monotonic()
    phase.tally, phase.rss_peak = await watched(server, phase.run(server.port, phase.count), args)
    phase.elapsed = time.monotonic() - started
    await asyncio.sleep(args.settle)
    try:
        phase.stats = await checkup(server.port)
    except (OSError, Unhealthy) as error:
        raise Aborted(f"health call after the phase failed: {error}") from None
    phase.rss_end = server.rss()
    phase.rss_peak = max(phase.rss_peak, phase.rss_end)


def judge(phase: Phase, baseline: dict[str, int], args: argparse.Namespace) -> None:
    """Add to `phase.problems` every pass criterion it violates."""
    tally = phase.tally
    if tally.done < phase.count:
        phase.problems.append(f"{tally.done} of {phase.count} done")
    if tally.errors:
        phase.problems.append(f"{tally.errors} errors ({'; '.join(tally.reasons)})")
    if phase.stats:
        if phase.stats["hang_running"]:
            phase.problems.append(f"{phase.stats['hang_running']} hang calls still running after their clients left")
        for counter in ("tasks", "fds"):
            if phase.stats[counter] > baseline[counter]:
                phase.problems.append(f"{counter} {phase.stats[counter]} > {baseline[counter]} after warm-up")
        if phase.object_growth > args.max_object_growth:
            phase.problems.append(f"{phase.object_growth:+,} live objects (bound {args.max_object_growth:,})")
    if phase.rss_end and phase.growth > args.max_growth_mib * MIB:
        phase.problems.append(f"RSS grew {phase.growth / MIB:+.1f} MiB (bound {args.max_growth_mib} MiB)")


def table(phases: list[Phase]) -> str:
    rows = ["| phase | count | done | errors | RSS start MiB | peak MiB | end MiB | growth MiB | live objects growth "
            "| elapsed s | per s | health after |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in phases:
        end, growth = (f"{p.rss_end / MIB:.1f}", f"{p.growth / MIB:+.1f}") if p.rss_end else ("-", "-")
        objects = f"{p.object_growth:+,}" if p.stats else "-"
        rate = f"{p.tally.done / p.elapsed:,.0f}" if p.elapsed else "-"
        rows.append(f"| {p.name} | {p.count:,} | {p.tally.done:,} | {p.tally.errors} | {p.rss_start / MIB:.1f} "
                    f"| {p.rss_peak / MIB:.1f} | {end} | {growth} | {objects} "
                    f"| {p.elapsed:.1f} | {rate} | {'ok' if p.stats else 'FAILED'} |")
    return "\n".join(rows)


async def soak(server: SoakServer, phases: list[Phase], wave_size: int, args: argparse.Namespace) -> list[str]:
    """Warm up, then measure each phase; the problems found (none: a pass)."""
    await server.ready()
    print(f"# server started: {server.logged().strip() or 'nothing logged'}", file=sys.stderr)  # the random-key warning
    warm_start = server.rss()
    warm = {"sockets": WARMUP_WAVES * wave_size, **WARMUP}
    for phase in phases:
        print(f"# warm-up: {phase.name} x {min(phase.count, warm[phase.name]):,}", file=sys.stderr)
        try:
            tally, _ = await watched(server, phase.run(server.port, min(phase.count, warm[phase.name])), args)
        except Aborted as why:
            return [f"warm-up {phase.name}: {why}"]
        if tally.errors:
            return [f"warm-up {phase.name}: {tally.errors} errors ({'; '.join(tally.reasons)})"]
    await asyncio.sleep(args.settle)
    baseline = await checkup(server.port)
    print(f"# warm-up done: RSS {warm_start / MIB:.1f} -> {server.rss() / MIB:.1f} MiB; {baseline}", file=sys.stderr)
    problems = []
    previous = baseline
    for phase in phases:
        phase.objects_before = previous["objects"]
        try:
            await measure(server, phase, args)
        except Aborted as why:
            phase.problems.append(str(why))
        judge(phase, baseline, args)
        logged = server.logged()
        if logged:
            phase.problems.append(f"the server logged: {logged.strip()[-500:]}")
        problems += [f"{phase.name}: {why}" for why in phase.problems]
        print(f"# {phase.name}: {phase.tally.done:,} in {phase.elapsed:.1f} s, RSS {phase.rss_start / MIB:.1f} -> "
              f"{phase.rss_end / MIB:.1f} MiB (peak {phase.rss_peak / MIB:.1f}), {phase.stats}", file=sys.stderr)
        if not phase.stats:
            break  # aborted: what follows could not be trusted
        previous = phase.stats
    if phases and all(phase.rss_end for phase in phases):
        total = phases[-1].rss_end - phases[0].rss_start
        if total > args.max_total_growth_mib * MIB:
            problems.append(f"RSS grew {total / MIB:+.1f} MiB over all phases (bound {args.max_total_growth_mib} MiB)")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--sse", type=int, default=20_000)
    parser.add_argument("--disconnects", type=int, default=20_000)
    parser.add_argument("--sockets", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections of the calls and sse phases")
    parser.add_argument("--concurrency", type=int, default=16, help="disconnect cycles at a time")
    parser.add_argument("--max-connections", type=int, default=defaults.HTTP_MAX_CONNECTIONS, help="the server's limit")
    parser.add_argument("--header-timeout", type=float, default=defaults.HTTP_HEADER_TIMEOUT, help="the server's deadline")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of quiet before a phase's end is measured")
    parser.add_argument("--phase-timeout", type=float, default=1800.0)
    parser.add_argument("--max-growth-mib", type=float, default=2.0, help="pass bound on each phase's RSS growth")
    parser.add_argument("--max-total-growth-mib", type=float, default=4.0, help="pass bound on growth over all phases")
    parser.add_argument("--max-object-growth", type=int, default=1000,
                        help="pass bound on each phase's growth in live (gc-tracked) objects")
    parser.add_argument("--server", type=Path, default=SERVER, help="a server file taking soak_server.py's options")
    args = parser.parse_args()

    wave_size = args.max_connections - RESERVED_CONNECTIONS
    if wave_size < 1:
        parser.error(f"--max-connections must leave room for {RESERVED_CONNECTIONS} health connections")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a wave holds up to wave_size sockets here and there
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cpus = sorted(os.sched_getaffinity(0))
    pin = shutil.which("taskset") is not None and len(cpus) >= 2
    if pin:
        os.sched_setaffinity(0, {cpus[1]})
    phases = [phase for phase in (
        Phase("calls", args.calls, lambda port, n: calls(port, n, args.connections, args.phase_timeout)),
        Phase("sse", args.sse, lambda port, n: sse(port, n, args.connections, args.phase_timeout)),
        Phase("disconnects", args.disconnects, lambda port, n: disconnects(port, n, args.concurrency)),
        Phase("sockets", args.sockets, lambda port, n: sockets(port, n, wave_size, args.header_timeout)),
    ) if phase.count > 0]
    server = SoakServer(args.server, free_port(), args.max_connections, args.header_timeout, cpus[0] if pin else None)
    try:
        problems = asyncio.run(soak(server, phases, wave_size, args))
    finally:
        server.close()
    placement = f"server on CPU {cpus[0]}, driver on CPU {cpus[1]}" if pin else "server and driver unpinned"
    print(f"Machine: {machine()}; {placement}.")
    print(table(phases))
    if problems:
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print(f"PASS: {', '.join(f'{p.name} {p.count:,}' for p in phases)}; RSS growth within {args.max_growth_mib} MiB "
          f"per phase and {args.max_total_growth_mib} MiB overall; no errors, every health call answered")


if __name__ == "__main__":
    main()
