"""Several processes with and without shared state on Redis: throughput, and how fast a change travels.

    python benchmarks/sharedstate.py [--rounds 3] [--seconds 5] [--changes 300] [--write]

Needs wrk and redis-server (OS packages) and mcpcore with the redis extra in this
interpreter. Two measurements, with a fresh redis-server and fresh servers each:

- throughput of an async `tools/call` echo at 64 keep-alive connections (wrk, one
  thread, through wrk/mcp.lua) for one process and for `--workers 2`, each with and
  without `--redis`, interleaved in every round: a stateless call never touches
  Redis, so the ratios show what sharing costs the calls that do not need it. One
  process is pinned to CPU 0 and wrk to CPU 1; two workers cannot be pinned apart
  from wrk on two cores, so those rows run unpinned;
- what a 2025-era session's request costs when its record lives in Redis: one client
  opens a session (`initialize`) and makes `--session-calls` `tools/call` echoes one at
  a time over keep-alive connections, on one process without Redis, on one process with
  `--redis`, and alternately on two `--redis` processes (each call to the other one);
  the figure is the median round trip as this Python client sees it;
- the delay of a change from one process to another: a `subscriptions/listen`
  stream is open on process A, process B's `announce` tool says the tool list
  changed and answers with when; the delay is when A's stream delivers the
  notification minus that (one host, one clock), over `--changes` announcements
  made one at a time.

`--write` puts the report into benchmarks/RESULTS.md between its markers (compare.py,
whose same-round ratios and spreads this report uses, keeps that section when it rewrites
the file). Standard library only, besides the servers it starts.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import sys
import time
import contextlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import compare
import procs
import wrkload

HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "shared_bench.py"
RESULTS = HERE / "RESULTS.md"
KEYS = {"MCPCORE_STATE_KEYS": "benchmark-shared-key-0123456789abcdef"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
CONFIGS = [("1 process", 1, False), ("1 process, --redis", 1, True),
           ("--workers 2", 2, False), ("--workers 2, --redis", 2, True)]


@contextmanager
def redis_server() -> Iterator[str]:
    port = procs.free_port()
    command = [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no"]
    with procs.listening(command, port, cpu=1):
        yield f"redis://127.0.0.1:{port}/0"


def mcpcore_run(port: int, workers: int, redis: str | None) -> list[str]:
    command = [sys.executable, "-m", "mcpcore", "run", str(SERVER), "--transport", "http", "--port", str(port),
               "--log-level", "warning", "--workers", str(workers)]
    return command + (["--redis", redis] if redis else [])


def throughput(rounds: int, seconds: int) -> dict[str, list[dict[str, Any]]]:
    """Each config's wrk figures, one per round, the configs interleaved within every round."""
    found: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in CONFIGS}
    for round_number in range(rounds):
        for name, workers, shared in CONFIGS:
            with redis_server() as redis:
                port = procs.free_port()
                with procs.listening(mcpcore_run(port, workers, redis if shared else None), port,
                                     cpu=0 if workers == 1 else None, env=KEYS):
                    url = f"http://127.0.0.1:{port}/mcp"
                    wrkload.load(url, 64, 1, ["echo"], cpu=1)  # warm-up
                    figures = wrkload.load(url, 64, seconds, ["echo"], cpu=1 if workers == 1 else None)
            figures.pop("wrk")
            found[name].append(figures)
            print(f"round {round_number + 1}: {name}: {figures['rps']:,.0f} req/s", file=sys.stderr)
    return found


SESSION_CONFIGS = [("1 process", 1, False), ("1 process, --redis", 1, True), ("2 processes, --redis, alternating", 2, True)]
LEGACY = "2025-11-25"


def session_round_trips(ports: list[int], calls: int) -> list[float]:
    """Milliseconds per `tools/call` of one 2025-era session, the calls sent to `ports` in turn."""
    connections = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for port in ports]
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

    def send(n: int, message: dict[str, Any]) -> http.client.HTTPResponse:
        connection = connections[n % len(connections)]
        connection.request("POST", "/mcp", json.dumps(message), headers)
        response = connection.getresponse()
        response.read()
        if response.status not in (200, 202):
            raise RuntimeError(f"a session request got HTTP {response.status}")
        return response

    try:
        opened = send(0, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        headers.update({"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": LEGACY})
        send(1, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        round_trips = []
        for n in range(calls):
            started = time.perf_counter()
            send(n, {"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}})
            round_trips.append((time.perf_counter() - started) * 1000)
        return round_trips
    finally:
        for connection in connections:
            connection.close()


def session_costs(rounds: int, calls: int) -> dict[str, list[float]]:
    """Each session config's median round trip, one per round, interleaved within every round."""
    found: dict[str, list[float]] = {name: [] for name, _, _ in SESSION_CONFIGS}
    for round_number in range(rounds):
        for name, count, shared in SESSION_CONFIGS:
            with redis_server() as redis, contextlib.ExitStack() as stack:
                ports = [procs.free_port() for _ in range(count)]
                for port in ports:
                    stack.enter_context(procs.listening(mcpcore_run(port, 1, redis if shared else None), port, cpu=0, env=KEYS))
                session_round_trips(ports, 200)  # warm-up
                found[name].append(statistics.median(session_round_trips(ports, calls)))
            print(f"round {round_number + 1}: {name}: {found[name][-1]:.3f} ms per session call", file=sys.stderr)
    return found


def post(port: int, method: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                       "params": {"name": name, "arguments": arguments, "_meta": META}})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/mcp", body, {"content-type": "application/json", "accept": "application/json, text/event-stream",
                                                  "mcp-protocol-version": "2026-07-28", "mcp-method": method, "mcp-name": name})
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


class Listener:
    """A `subscriptions/listen` stream for tool-list changes, read from a plain socket."""

    def __init__(self, port: int) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen",
                           "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                f"Mcp-Method: subscriptions/listen\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.socket.sendall(head + body)
        self.buffer = b""
        self.wait_for(b"notifications/subscriptions/acknowledged")

    def wait_for(self, marker: bytes) -> float:
        """Block until `marker` arrives; the time it did."""
        while marker not in self.buffer:
            chunk = self.socket.recv(65536)
            if not chunk:
                raise RuntimeError("the listen stream ended")
            self.buffer += chunk
        self.buffer = self.buffer.split(marker, 1)[1]
        return time.time()

    def close(self) -> None:
        self.socket.close()


def propagation(changes: int) -> list[float]:
    """Milliseconds from B's announcement to its arrival on A's listen stream, one change at a time."""
    delays = []
    with redis_server() as redis:
        a, b = procs.free_port(), procs.free_port()
        with procs.listening(mcpcore_run(a, 1, redis), a, cpu=0, env=KEYS), \
                procs.listening(mcpcore_run(b, 1, redis), b, cpu=1, env=KEYS):
            listener = Listener(a)
            try:
                for _ in range(changes):
                    answer = post(b, "tools/call", "announce", {})
                    announced = float(answer["result"]["content"][0]["text"])
                    arrived = listener.wait_for(b"notifications/tools/list_changed")
                    delays.append((arrived - announced) * 1000)
            finally:
                listener.close()
    return delays


def report(found: dict[str, list[dict[str, Any]]], sessions: dict[str, list[float]], delays: list[float], rounds: int,
           seconds: int) -> str:
    lines = [
        compare.SHARED_START,
        "## Several processes: shared state on Redis",
        "",
        f"Generated by `python benchmarks/sharedstate.py` on {time.strftime('%Y-%m-%d %H:%M')}: {rounds} interleaved rounds, "
        f"wrk at 64 connections for {seconds} s after a 1 s warm-up, a fresh redis-server and fresh servers per slot; "
        "one process pinned to CPU 0 and wrk to CPU 1, the two-worker rows unpinned. Load average at the end: "
        f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}.",
        "",
        "Stateless `tools/call` echo (async). A ratio is taken within each round; median (lowest–highest round).",
        "",
        "| configuration | req/s | p99 ms | x the same without Redis |",
        "|---|---|---|---|",
    ]
    for name, workers, shared in CONFIGS:
        runs = found[name]
        plain = found["1 process" if workers == 1 else "--workers 2"]
        ratio = compare.spread(compare.ratios(runs, plain)) if shared else "1.00"
        rps = statistics.median(run["rps"] for run in runs)
        p99 = statistics.median(run["p99_ms"] for run in runs)
        errors = sum(run["errors"] for run in runs)
        lines.append(f"| {name} | {rps:,.0f} | {p99:.1f} | {ratio} |" + (f" ({errors} errors)" if errors else ""))
    lines += [
        "",
        "A 2025-era session's `tools/call` (async echo), one at a time from one Python client over keep-alive "
        "connections, every process pinned to CPU 0: the median round trip per round, then its median (lowest–highest "
        "round) and the ratio to one process without Redis, taken within each round.",
        "",
        "| configuration | ms per call | x 1 process |",
        "|---|---|---|",
    ]
    plain = sessions["1 process"]
    for name, _, shared in SESSION_CONFIGS:
        costs = sessions[name]
        ratio = compare.spread([cost / base for cost, base in zip(costs, plain)]) if shared else "1.00"
        lines.append(f"| {name} | {statistics.median(costs):.3f} ({min(costs):.3f}–{max(costs):.3f}) | {ratio} |")
    ordered = sorted(delays)
    p99 = ordered[max(0, round(len(ordered) * 0.99) - 1)]
    lines += [
        "",
        f"A change announced in one process (`notify_tools_changed()` in a tool of process B) reaching a "
        f"`subscriptions/listen` stream of another (A), through Redis pub/sub, over {len(delays)} changes made one "
        f"at a time: p50 {statistics.median(delays):.2f} ms, p99 {p99:.2f} ms, max {max(delays):.2f} ms.",
        compare.SHARED_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--session-calls", type=int, default=2000)
    parser.add_argument("--write", action="store_true", help="put the report into benchmarks/RESULTS.md")
    args = parser.parse_args()
    if wrkload.version() is None or shutil.which("redis-server") is None:
        sys.exit("sharedstate.py needs wrk and redis-server (apt-get install wrk redis-server)")
    os.environ.update(KEYS)
    text = report(throughput(args.rounds, args.seconds), session_costs(args.rounds, args.session_calls),
                  propagation(args.changes), args.rounds, args.seconds)
    print(text)
    if args.write:
        current = RESULTS.read_text()
        kept = compare.shared_section(current)
        RESULTS.write_text((current.replace(kept, "") if kept else current).rstrip("\n") + "\n\n" + text)


if __name__ == "__main__":
    main()
