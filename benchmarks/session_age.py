"""Does a 2025-era session slow down or grow as it ages? One session driven lockstep, block by block.

    python benchmarks/session_age.py [--blocks 5] [--calls 1000] [--rounds 3] [--root DIR ...]

Starts `mcpcore run examples/echo_server.py --transport http` (from each `--root`, a checkout
of mcpcore with its own `.venv` or this interpreter's: several compare builds, interleaved
round by round) pinned to CPU 0, opens one
2025-11-25 session from this process pinned to CPU 1, and sends `--blocks` blocks of
`--calls` requests (tools/call, ping, tools/list in turn) over one keep-alive connection,
each after the previous answer. Prints JSON: per root and round, each block's requests per
second and the server's RSS after it, and the ratio of the last block's rate to the first's
(1.0: a request costs the same however many came before it in its session).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import procs

ROOT = Path(__file__).resolve().parents[1]
HEAD = "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Connection:
    """One keep-alive connection, lockstep: a request, then its whole (JSON) answer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def post(self, body: bytes, extra: str = "") -> tuple[bytes, bytes]:
        """The head and body of the answer; an error status stops the run (it would measure refusals)."""
        self.sock.sendall(f"{HEAD}{extra}content-length: {len(body)}\r\n\r\n".encode() + body)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(self.buffer) < length:
            self.buffer += self.sock.recv(65536)
        answer, self.buffer = self.buffer[:length], self.buffer[length:]
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.1 202")):
            raise RuntimeError(f"the server refused a request: {head.splitlines()[0]!r} {answer[:200]!r}")
        return head, answer


def open_session(conn: Connection) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "age", "version": "1"}}}
    head, _ = conn.post(json.dumps(init).encode())
    start = head.lower().index(b"mcp-session-id: ") + len(b"mcp-session-id: ")
    session = head[start:].split(b"\r\n")[0].decode()
    extra = f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n"
    conn.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra)
    return extra


def bodies(count: int, start: int) -> list[bytes]:
    kinds = ['"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}', '"method":"ping"',
             '"method":"tools/list"']
    return [f'{{"jsonrpc":"2.0","id":{start + n},{kinds[n % 3]}}}'.encode() for n in range(count)]


def age(root: Path, blocks: int, calls: int) -> dict[str, object]:
    port = procs.free_port()
    venv = root / ".venv" / "bin" / "python"  # a checkout's own environment, where it has one
    python = str(venv) if venv.exists() else sys.executable
    command = [python, "-m", "mcpcore", "run", str(root / "examples" / "echo_server.py"), "--transport", "http",
               "--port", str(port), "--log-level", "error"]
    with procs.listening(command, port, cpu=0, cwd=str(root)) as server:
        conn = Connection(port)
        extra = open_session(conn)
        rates, rss = [], []
        for block in range(blocks):
            work = bodies(calls, 1 + block * calls)
            started = time.perf_counter()
            for body in work:
                conn.post(body, extra)
            rates.append(round(calls / (time.perf_counter() - started)))
            rss.append(rss_kib(server.pid))
        conn.sock.close()
    return {"req_per_s": rates, "rss_kib": rss, "last_over_first": round(rates[-1] / rates[0], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", action="append", type=Path, help="a checkout to run (repeatable; default this one)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {1})  # the load generator on CPU 1, the server on CPU 0
    roots = args.root or [ROOT]
    runs: dict[str, list[dict[str, object]]] = {str(root): [] for root in roots}
    for round_number in range(args.rounds):
        for root in roots[round_number % len(roots):] + roots[:round_number % len(roots)]:  # each goes first in turn
            runs[str(root)].append(age(root.resolve(), args.blocks, args.calls))
    summary = {root: {"last_over_first": [r["last_over_first"] for r in results],
                      "median_last_over_first": statistics.median(r["last_over_first"] for r in results),  # type: ignore[misc]
                      "runs": results} for root, results in runs.items()}
    print(json.dumps({"blocks": args.blocks, "calls_per_block": args.calls, "machine": procs.machine(), "roots": summary},
                     indent=1))


if __name__ == "__main__":
    main()
