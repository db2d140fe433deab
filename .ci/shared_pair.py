"""Two mcpcore processes sharing one redis-server, behind the tests' round-robin proxy on PORT.

    python .ci/shared_pair.py PORT TARGET

What `.ci/conformance` runs the suite against to show that two processes behind a load
balancer without sticky sessions behave like one: every request of a client goes to
the other process than its last one. Runs until SIGTERM, then stops all it started.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from round_robin_proxy import RoundRobinProxy  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_accepting(port: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"shared_pair: nothing accepted connections on port {port}")


async def serve(port: int, backends: list[int]) -> None:
    async with RoundRobinProxy(backends, port):
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                return


def main() -> None:
    port, target = int(sys.argv[1]), sys.argv[2]
    redis_port, backends = free_port(), [free_port(), free_port()]
    redis_server = shutil.which("redis-server") or sys.exit("shared_pair: redis-server is not installed")
    started = [subprocess.Popen([redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no"], stdout=subprocess.DEVNULL)]
    try:
        wait_until_accepting(redis_port)
        env = {**os.environ, "MCPCORE_STATE_KEYS": secrets.token_hex(32)}  # one key ring for both processes
        for backend in backends:
            started.append(subprocess.Popen(
                [sys.executable, "-m", "mcpcore", "run", target, "--transport", "http", "--port", str(backend),
                 "--redis", f"redis://127.0.0.1:{redis_port}/0", "--log-level", "warning"], env=env))
        for backend in backends:
            wait_until_accepting(backend)
        anyio.run(serve, port, backends)
    finally:
        for process in reversed(started):
            process.send_signal(signal.SIGTERM)
        for process in reversed(started):
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    main()
