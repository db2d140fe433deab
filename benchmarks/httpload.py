"""HTTP load generator for MCP servers: keep-alive connections, pre-encoded requests.

    python benchmarks/httpload.py --url http://127.0.0.1:8000/mcp --connections 64 \
        --duration 10 --method tools/call --processes 1

Each connection sends one request, waits for the whole response, and repeats
(closed loop). Requests are encoded once; responses are framed by a minimal
parser (Content-Length or chunked). Prints one JSON object: requests/s,
p50/p90/p99/max latency in ms, errors, and the load generator's own CPU time,
so a run can show it was not the bottleneck. Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import time
from typing import Any, Callable
from urllib.parse import urlsplit

VERSION = "2026-07-28"


def mcp_request(method: str, params: dict[str, Any], request_id: int = 1,
                meta: dict[str, Any] | None = None) -> tuple[bytes, dict[str, str]]:
    """A 2026-07-28 request body and its required headers; `meta` adds to its `_meta` (a progressToken, a logLevel)."""
    params = {**params, "_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpcore-httpload", "version": "1"},
        **(meta or {}),
    }}
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if method in ("tools/call", "prompts/get"):
        headers["Mcp-Name"] = params["name"]
    elif method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    return body, headers


def build_request(method: str, tool: str = "echo", arguments: str = "{}", meta: str = "{}") -> tuple[bytes, dict[str, str]]:
    """`mcp_request` from command-line spellings: arguments and extra _meta members as JSON objects."""
    params: dict[str, Any] = {"name": tool, "arguments": json.loads(arguments)} if method == "tools/call" else {}
    return mcp_request(method, params, meta=json.loads(meta))


def encode_http(host: str, path: str, body: bytes, headers: dict[str, str], method: str = "POST") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def parse_response(buffer: bytes | bytearray) -> tuple[int, int, bytes] | None:
    """(bytes consumed, status, body) for the first complete response, else None."""
    head_end = buffer.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = bytes(buffer[:head_end]).lower()
    status = int(head[9:12])
    start = head_end + 4
    marker = head.find(b"\r\ncontent-length:")
    if marker >= 0:
        value_end = head.find(b"\r\n", marker + 2)
        length = int(head[marker + 17 : value_end if value_end >= 0 else None].strip())
        if len(buffer) < start + length:
            return None
        return start + length, status, bytes(buffer[start : start + length])
    if b"\r\ntransfer-encoding: chunked" in head:
        body = bytearray()
        position = start
        while True:
            line_end = buffer.find(b"\r\n", position)
            if line_end < 0:
                return None
            size = int(bytes(buffer[position:line_end]).split(b";")[0], 16)
            if size == 0:
                if len(buffer) < line_end + 4:
                    return None
                return line_end + 4, status, bytes(body)
            if len(buffer) < line_end + 2 + size + 2:
                return None
            body += buffer[line_end + 2 : line_end + 2 + size]
            position = line_end + 2 + size + 2
    return start, status, b""  # no body (e.g. 202)


def is_error(status: int, body: bytes) -> bool:
    return status != 200 or b'"error":{' in body or b'"isError":true' in body


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), int(fraction * len(sorted_values) + 0.999999)))
    return sorted_values[rank - 1]


def summarize(latencies: list[float], errors: int, elapsed: float, cpu: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "errors": errors,
        "seconds": round(elapsed, 3),
        "rps": round(len(ordered) / elapsed, 1) if elapsed > 0 else 0.0,
        "p50_ms": round(percentile(ordered, 0.50) * 1000, 3),
        "p90_ms": round(percentile(ordered, 0.90) * 1000, 3),
        "p99_ms": round(percentile(ordered, 0.99) * 1000, 3),
        "max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 3),
        "loadgen_cpu_s": round(cpu, 3),
    }


class _Connection(asyncio.Protocol):
    """One keep-alive connection in a closed loop."""

    def __init__(self, request: bytes, run: "_Run") -> None:
        self.request = request
        self.run = run
        self.buffer = bytearray()
        self.sent_at = 0.0
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._send()

    def _send(self) -> None:
        if self.run.done():
            assert self.transport is not None
            self.transport.close()
            return
        self.sent_at = time.perf_counter()
        assert self.transport is not None
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        parsed = parse_response(self.buffer)
        if parsed is None:
            return
        consumed, status, body = parsed
        del self.buffer[:consumed]
        self.run.record(time.perf_counter() - self.sent_at, self.run.failed(status, body))
        self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.run.done():
            self.run.errors += 1
        if not self.closed.done():
            self.closed.set_result(None)


class _Run:
    def __init__(self, limit: int, deadline: float, warmup_until: float, failed: Callable[[int, bytes], bool]) -> None:
        self.limit = limit
        self.failed = failed
        self.deadline = deadline
        self.warmup_until = warmup_until
        self.latencies: list[float] = []
        self.errors = 0
        self.started = 0.0
        self.finished = asyncio.get_running_loop().create_future()

    def done(self) -> bool:
        return self.finished.done()

    def record(self, latency: float, error: bool) -> None:
        if self.finished.done():
            return
        now = time.perf_counter()
        if now < self.warmup_until:
            return
        if not self.started:
            self.started = now
        self.latencies.append(latency)
        self.errors += error
        if len(self.latencies) >= self.limit or now >= self.deadline:
            self.finished.set_result(now)


async def drive(host: str, port: int, request: bytes, connections: int, limit: int, duration: float, warmup: float,
                failed: Callable[[int, bytes], bool] = is_error) -> dict[str, Any]:
    """Send `request` over `connections` keep-alive connections in a closed loop until `limit` answers
    were measured or `duration` passed; `failed(status, body)` says which answers count as errors."""
    loop = asyncio.get_running_loop()
    now = time.perf_counter()
    run = _Run(limit, now + warmup + duration, now + warmup, failed)
    protocols = []
    for _ in range(connections):
        _, protocol = await loop.create_connection(lambda: _Connection(request, run), host, port)
        protocols.append(protocol)
    cpu_before = time.process_time()
    try:
        ended = await asyncio.wait_for(run.finished, warmup + duration + 30)
    except asyncio.TimeoutError:
        ended = time.perf_counter()
        run.errors += 1
    cpu = time.process_time() - cpu_before
    for protocol in protocols:
        if protocol.transport is not None:
            protocol.transport.close()
    return {"latencies": run.latencies, "errors": run.errors, "elapsed": ended - (run.started or ended), "cpu": cpu}


def _worker(args: tuple[Any, ...]) -> dict[str, Any]:
    return asyncio.run(drive(*args))


def load(url: str, body: bytes, headers: dict[str, str], connections: int = 64, requests: int = 10**9,
         duration: float = 10.0, warmup: float = 1.0, processes: int = 1) -> dict[str, Any]:
    """Run the closed-loop load and return the summary."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    wire = encode_http(f"{host}:{port}", parts.path or "/", body, headers)
    per_process = [connections // processes + (1 if i < connections % processes else 0) for i in range(processes)]
    jobs = [(host, port, wire, n, max(1, requests // processes), duration, warmup) for n in per_process if n]
    if len(jobs) == 1:
        results = [_worker(jobs[0])]
    else:
        with multiprocessing.Pool(len(jobs)) as pool:
            results = pool.map(_worker, jobs)
    latencies = [value for result in results for value in result["latencies"]]
    elapsed = max(result["elapsed"] for result in results)
    return summarize(latencies, sum(r["errors"] for r in results), elapsed, sum(r["cpu"] for r in results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/mcp")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--requests", type=int, default=10**9, help="stop after this many measured requests")
    parser.add_argument("--duration", type=float, default=10.0, help="stop after this many measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--method", default="tools/call", choices=["tools/call", "tools/list", "server/discover"])
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--arguments", default='{"text": "hello"}')
    parser.add_argument("--meta", default="{}", help="extra _meta JSON, e.g. a progressToken")
    args = parser.parse_args()
    body, headers = build_request(args.method, args.tool, args.arguments, args.meta)
    result = load(args.url, body, headers, args.connections, args.requests, args.duration, args.warmup, args.processes)
    result["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["pid"] = os.getpid()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
