"""stdio driver for MCP servers: lockstep and pipelined rates, cold start, memory.

    python benchmarks/stdiobench.py -- mcpcore run examples/echo_server.py

Lockstep sends one request and waits for its answer before the next;
pipelined writes a batch from one thread while reading every answer in
another. Cold start is process start to the first response. Resident memory
(VmRSS) is read from /proc after the first response (idle), after the first
`--leak-first` requests and after `--leak-total` requests. Prints one JSON
object. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import threading
import time
from typing import Any, Sequence

VERSION = "2026-07-28"


def request_line(method: str, params: dict[str, Any], request_id: int) -> bytes:
    params = {**params, "_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


def echo_line(request_id: int) -> bytes:
    return request_line("tools/call", {"name": "echo", "arguments": {"text": "hello"}}, request_id)


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS line")


def count_answers(data: bytes) -> tuple[int, int]:
    """(complete lines, lines that are errors) in a chunk of server output."""
    lines = data.split(b"\n")[:-1]  # the part after the last newline is not a complete line
    return len(lines), sum(1 for line in lines if b'"error":{' in line or b'"isError":true' in line)


class Server:
    """A server subprocess spoken to through raw pipe fds (the driver must stay cheap)."""

    def __init__(self, command: Sequence[str], cpu: int | None = None) -> None:
        prefix = ["taskset", "-c", str(cpu)] if cpu is not None else []
        self.started = time.perf_counter()
        self.process = subprocess.Popen(prefix + list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, bufsize=0)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.in_fd, self.out_fd = self.process.stdin.fileno(), self.process.stdout.fileno()
        self.buffer = b""

    def readline(self) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line, self.buffer = self.buffer[: end + 1], self.buffer[end + 1 :]
                return line
            chunk = os.read(self.out_fd, 1 << 16)
            if not chunk:
                line, self.buffer = self.buffer, b""
                return line
            self.buffer += chunk

    def ask(self, line: bytes) -> bytes:
        os.write(self.in_fd, line)
        return self.readline()

    def close(self) -> None:
        self.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def cold_start(command: Sequence[str], cpu: int | None, runs: int) -> float:
    """Median seconds from process start to the first response."""
    times = []
    for _ in range(runs):
        server = Server(command, cpu)
        server.ask(request_line("server/discover", {}, 0))
        times.append(time.perf_counter() - server.started)
        server.close()
    return statistics.median(times)


def lockstep(server: Server, count: int, first_id: int = 1) -> tuple[float, int]:
    errors = 0
    started = time.perf_counter()
    for i in range(first_id, first_id + count):
        answer = server.ask(echo_line(i))
        errors += b'"error":{' in answer or b'"isError":true' in answer
    return count / (time.perf_counter() - started), errors


def pipelined(server: Server, count: int, first_id: int = 1) -> tuple[float, int]:
    payload = b"".join(echo_line(i) for i in range(first_id, first_id + count))
    result = {"lines": 0, "errors": 0}

    def read_all() -> None:
        pending = b""
        while result["lines"] < count:
            chunk = os.read(server.out_fd, 1 << 20)
            if not chunk:
                break
            pending += chunk
            cut = pending.rfind(b"\n") + 1
            lines, errors = count_answers(pending[:cut])
            pending = pending[cut:]
            result["lines"] += lines
            result["errors"] += errors

    reader = threading.Thread(target=read_all)
    started = time.perf_counter()
    reader.start()
    view = memoryview(payload)
    while view:
        view = view[os.write(server.in_fd, view) :]
    reader.join()
    elapsed = time.perf_counter() - started
    return result["lines"] / elapsed, result["errors"] + (count - result["lines"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--leak-first", type=int, default=10000)
    parser.add_argument("--leak-total", type=int, default=0, help="0 skips the memory-growth run")
    parser.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    report: dict[str, Any] = {"cold_start_s": round(cold_start(command, args.cpu, args.cold_runs), 4)}
    server = Server(command, args.cpu)
    server.ask(request_line("server/discover", {}, 0))
    time.sleep(0.2)
    report["idle_rss_kib"] = rss_kib(server.process.pid)
    lockstep(server, 1000, 1)  # warm up
    rate, errors = lockstep(server, args.requests, 10_000_000)
    report["lockstep_rps"], report["lockstep_errors"] = round(rate, 1), errors
    rate, errors = pipelined(server, args.requests, 20_000_000)
    report["pipelined_rps"], report["pipelined_errors"] = round(rate, 1), errors
    if args.leak_total:
        fresh = Server(command, args.cpu)
        pipelined(fresh, args.leak_first, 1)
        report["rss_after_first_kib"] = rss_kib(fresh.process.pid)
        done = args.leak_first
        while done < args.leak_total:
            batch = min(20000, args.leak_total - done)
            pipelined(fresh, batch, 1 + done)
            done += batch
        report["rss_after_total_kib"] = rss_kib(fresh.process.pid)
        report["leak_requests"] = [args.leak_first, args.leak_total]
        fresh.close()
    server.close()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
