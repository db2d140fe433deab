"""Legacy session churn: RSS before, at the peak and after N abandoned 2025-era sessions expire.

    python benchmarks/sessions.py [--sessions 10000] [--idle 2]

Starts `mcpcore run examples/echo_server.py --transport http` with a short session idle
timeout; then, for each round, opens N sessions (initialize + notifications/initialized,
one call each) over one keep-alive connection, abandons them, waits until the sweeper
has ended them all, and records the server's RSS at the peak and after expiry. Prints
JSON. A second round that does not grow RSS shows the memory of expired sessions is
reused (CPython's allocator seldom hands freed memory back to the OS).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def post(conn: http.client.HTTPConnection, message: dict, headers: dict) -> http.client.HTTPResponse:
    conn.request("POST", "/mcp", json.dumps(message), headers)
    reply = conn.getresponse()
    reply.read()
    return reply


def open_session(conn: http.client.HTTPConnection, number: int) -> None:
    init = {"jsonrpc": "2.0", "id": number, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "churn", "version": "1"}}}
    reply = post(conn, init, HEADERS)
    session = {**HEADERS, "mcp-session-id": reply.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    assert post(conn, call, session).status == 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--idle", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), "--transport", "http",
               "--port", str(port), "--max-sessions", str(args.sessions + 10), "--session-idle-timeout", str(args.idle),
               "--log-level", "error"]
    server = subprocess.Popen(command)
    try:
        for _ in range(100):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                open_session(conn, 0)
                break
            except OSError:
                time.sleep(0.1)
        for number in range(200):  # warm up: allocator arenas, caches
            open_session(conn, number)
        time.sleep(args.idle + 2)
        before = rss_kib(server.pid)
        rounds = []
        for _ in range(args.rounds):
            started = time.monotonic()
            for number in range(args.sessions):
                open_session(conn, number)
            opened = time.monotonic() - started
            peak = rss_kib(server.pid)
            time.sleep(args.idle + 3)  # idle expiry, checked every second by the sweeper
            rounds.append({"seconds_to_open": round(opened, 2), "rss_peak_kib": peak, "rss_after_expiry_kib": rss_kib(server.pid)})
        conn.close()
        print(json.dumps({"sessions_per_round": args.sessions, "rss_before_kib": before, "rounds": rounds}))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
