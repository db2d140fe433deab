"""Two mcpcore processes sharing one redis-server, behind the tests' round-robin proxy on PORT.

    python .ci/shared_pair.py PORT TARGET

What `.ci/conformance` runs the suite against to show that two processes behind a load
balancer without sticky sessions behave like one: every request of a client goes to
the other process than its last one. Runs until SIGTERM, then stops all it started.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
import procs  # noqa: E402
from round_robin_proxy import RoundRobinProxy  # noqa: E402


async def relay(port: int, backends: list[int]) -> None:
    async with RoundRobinProxy(backends, port):
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                return


def main() -> None:
    port, target = int(sys.argv[1]), sys.argv[2]
    redis_server = shutil.which("redis-server") or sys.exit("shared_pair: redis-server is not installed")
    redis_port, backends = procs.free_port(), [procs.free_port(), procs.free_port()]
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(procs.start([redis_server, "--port", str(redis_port), "--bind", "127.0.0.1",
                                    "--save", "", "--appendonly", "no"]))
        procs.wait_for_port(redis_port, started[0])
        keys = {"MCPCORE_STATE_KEYS": secrets.token_hex(32)}  # one key ring for both processes
        for backend in backends:
            started.append(procs.start([sys.executable, "-m", "mcpcore", "run", target, "--transport", "http",
                                        "--port", str(backend), "--redis", f"redis://127.0.0.1:{redis_port}/0",
                                        "--log-level", "warning"], env=keys, stderr=None))
        for backend, process in zip(backends, started[1:]):
            procs.wait_for_port(backend, process)
        anyio.run(relay, port, backends)
    finally:
        for process in reversed(started):
            procs.stop(process)


if __name__ == "__main__":
    main()
