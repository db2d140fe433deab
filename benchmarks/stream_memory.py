"""What a held keep-alive connection and a live SSE stream cost the server, in RSS.

    python benchmarks/stream_memory.py [--count 128]

Starts `mcpcore run servers/hold_server.py --transport http` and, from this process over
raw sockets: warms it up on 8 connections; opens `--count` idle connections; has each
serve one call; then opens `--count` more whose `hold` call streams a progress
notification and waits (a live SSE stream each); then releases them all. Prints JSON: the
server's RSS after each step and the difference per connection or stream, in bytes.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

import procs

HERE = Path(__file__).resolve().parent
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def request(port: int, tool: str, arguments: dict[str, object], request_id: int, progress: bool = False) -> bytes:
    meta = {**META, "progressToken": f"p{request_id}"} if progress else META
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments, "_meta": meta}}).encode()
    return (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            f"Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def read_until(sock: socket.socket, marker: bytes) -> None:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"the server closed the connection before {marker!r}")
        data += chunk


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def measure(count: int) -> dict[str, object]:
    port = procs.free_port()
    command = [sys.executable, "-m", "mcpcore", "run", str(HERE / "servers" / "hold_server.py"), "--transport", "http",
               "--port", str(port), "--max-connections", str(2 * count + 64), "--log-level", "warning"]
    with procs.listening(command, port) as server:
        def settled() -> int:
            time.sleep(0.5)
            return rss_kib(server.pid)

        def connect(n: int) -> list[socket.socket]:
            return [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]

        def echo_on(sockets: list[socket.socket], rounds: int) -> None:
            for number in range(rounds):
                for sock in sockets:
                    sock.sendall(request(port, "echo", {"text": "hi"}, number))
                    read_until(sock, b'"hi"')

        echo_on(connect(8), 50)
        steps = {"warm": settled()}
        idle = connect(count)
        steps["idle connections"] = settled()
        echo_on(idle, 1)
        steps["after one call each"] = settled()
        held = connect(count)
        for number, sock in enumerate(held):
            sock.sendall(request(port, "hold", {}, number, progress=True))
        for sock in held:
            read_until(sock, b"notifications/progress")
        steps["live streams"] = settled()
        releaser = socket.create_connection(("127.0.0.1", port))
        releaser.sendall(request(port, "release", {}, 0))
        for sock in held:
            read_until(sock, b'"done"')
        steps["streams ended"] = settled()
        for sock in [*idle, *held, releaser]:
            sock.close()

    def per(later: str, earlier: str) -> int:
        return round((steps[later] - steps[earlier]) * 1024 / count)

    return {"count": count, "rss_kib": steps, "bytes_per_idle_connection": per("idle connections", "warm"),
            "bytes_per_connection_after_a_call": per("after one call each", "warm"),
            "bytes_per_live_stream": per("live streams", "after one call each"),
            "bytes_per_stream_once_ended": per("streams ended", "after one call each")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=128)
    print(json.dumps(measure(parser.parse_args().count), indent=2))


if __name__ == "__main__":
    main()
