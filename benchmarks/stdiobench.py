"""stdio driver for MCP servers: lockstep and pipelined rates, cold start, memory.

    python benchmarks/stdiobench.py [--driver auto|compiled|python] -- mcpcore run examples/echo_server.py

Lockstep sends one request and waits for its answer before the next;
pipelined writes a batch from one thread while reading every answer in
another. The rates come from the compiled driver `stdiodrive.c` (built with
`cc` into benchmarks/.venvs on first use, rebuilt when the source is newer) so
the driver's own cost stays out of the figure; without a C compiler, or with
`--driver python`, this script's own Python driver measures them, and the JSON
says which (`"driver"`). Cold start is process start to the first response.
Resident memory (VmRSS) is read from /proc after the first response (idle),
after the first `--leak-first` requests and after `--leak-total` requests.
Prints one JSON object. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import procs

VERSION = "2026-07-28"
HERE = Path(__file__).resolve().parent
DRIVER_SOURCE = HERE / "stdiodrive.c"
DRIVER_BINARY = HERE / ".venvs" / "stdiodrive"  # an ignored build folder
WARMUP = 1000


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
        self.started = time.perf_counter()
        self.process = procs.start(command, cpu, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
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


def build_driver(binary: Path = DRIVER_BINARY) -> Path | None:
    """The compiled driver, built (or rebuilt when its source is newer) with `cc`; None without a compiler."""
    if binary.exists() and binary.stat().st_mtime >= DRIVER_SOURCE.stat().st_mtime:
        return binary
    if shutil.which("cc") is None:
        return None
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(binary), str(DRIVER_SOURCE)], check=True)
    return binary


def compiled_rates(binary: Path, command: Sequence[str], cpu: int | None, count: int) -> dict[str, Any]:
    """Lockstep then pipelined rates measured by stdiodrive on one server, after a lockstep warm-up."""
    runs = f"lockstep {count} 10000000\npipelined {count} 20000000\n"
    done = subprocess.run([str(binary), "lockstep", str(WARMUP), "1", "--", *procs.pinned(cpu, command)],
                          input=runs, capture_output=True, text=True, check=True, timeout=3600)
    _, locked, piped = (json.loads(line) for line in done.stdout.splitlines())
    return {"lockstep_rps": locked["rps"], "lockstep_errors": locked["errors"],
            "pipelined_rps": piped["rps"], "pipelined_errors": piped["errors"], "driver": "compiled"}


def python_rates(server: Server, count: int) -> dict[str, Any]:
    """The same two rates measured by this script's own threads (the fallback: its cost is in the figure)."""
    lockstep(server, WARMUP, 1)
    lock_rate, lock_errors = lockstep(server, count, 10_000_000)
    pipe_rate, pipe_errors = pipelined(server, count, 20_000_000)
    return {"lockstep_rps": round(lock_rate, 1), "lockstep_errors": lock_errors,
            "pipelined_rps": round(pipe_rate, 1), "pipelined_errors": pipe_errors, "driver": "python"}


def memory_growth(command: Sequence[str], cpu: int | None, first: int, total: int) -> dict[str, Any]:
    """Resident memory of one fresh server after `first` and after `total` pipelined requests."""
    server = Server(command, cpu)
    pipelined(server, first, 1)
    report: dict[str, Any] = {"rss_after_first_kib": rss_kib(server.process.pid)}
    done = first
    while done < total:
        batch = min(20000, total - done)
        pipelined(server, batch, 1 + done)
        done += batch
    report["rss_after_total_kib"] = rss_kib(server.process.pid)
    report["leak_requests"] = [first, total]
    server.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="per rate; 0 skips the rates")
    parser.add_argument("--driver", choices=["auto", "compiled", "python"], default="auto",
                        help="who measures the rates: auto is the compiled driver when `cc` can build it")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--leak-first", type=int, default=10000)
    parser.add_argument("--leak-total", type=int, default=0, help="0 skips the memory-growth run")
    parser.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    binary = build_driver() if args.driver != "python" else None
    if args.driver == "compiled" and binary is None:
        parser.error("--driver compiled needs a C compiler (cc)")
    report: dict[str, Any] = {"cold_start_s": round(cold_start(command, args.cpu, args.cold_runs), 4)}
    server = Server(command, args.cpu)
    server.ask(request_line("server/discover", {}, 0))
    time.sleep(0.2)
    report["idle_rss_kib"] = rss_kib(server.process.pid)
    if args.requests and binary is not None:
        report.update(compiled_rates(binary, command, args.cpu, args.requests))
    elif args.requests:
        report.update(python_rates(server, args.requests))
    server.close()
    if args.leak_total:
        report.update(memory_growth(command, args.cpu, args.leak_first, args.leak_total))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
