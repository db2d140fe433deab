"""Several HTTP worker processes sharing one listening socket.

The supervisor binds the socket once and starts N `mcpcore run ... --listen-fd`
children that inherit it; the kernel spreads connections among them. A worker
that dies is restarted (a worker crashing over and over stops the whole
group), and SIGINT/SIGTERM stop every worker gracefully. Because the protocol is
stateless any worker can answer any request; the supervisor hands all workers
one random `requestState` key unless keys are configured, so sealed state
verifies in every worker. Without `--redis`, subscriptions' changes, tasks and
2025-era sessions stay per worker (workers then open no sessions); with it they are
shared (ADR 38).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import Sequence

from mcpcore._runtime.defaults import PORTABLE_ENV, SUPERVISOR_ENV, portable_forced
from mcpcore._wire.sealing import KEYS_ENV

log = logging.getLogger("mcpcore.transports.workers")

CRASH_WINDOW = 10.0  # seconds
CRASH_LIMIT = 5  # crashes within the window before giving up
STOP_TIMEOUT = 15.0


def unsupported() -> str | None:
    """Why `--workers` cannot run here, or None. The workers inherit the listening socket by its fd
    number (`pass_fds`, `socket(fileno=...)`), which only POSIX systems can do; on Windows a socket
    crosses processes only through `socket.share`, which this supervisor does not use."""
    if portable_forced():
        why = f"{PORTABLE_ENV}=1 rules that out, as on Windows"
    elif os.name != "posix":
        why = f"{sys.platform} cannot do that"
    else:
        return None
    return (f"--workers hands one listening socket to its worker processes by fd number, and {why}; run one "
            "process, or several on ports of their own behind a process manager or load balancer (with --stateless, "
            "or --redis URL to share 2025-era sessions)")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.set_inheritable(True)
    return sock


def supervise(worker_args: Sequence[str], host: str, port: int, workers: int, path: str = "/mcp", served: str = "") -> int:
    """Run `workers` children of `mcpcore <worker_args>` on one socket; return an exit status.
    `served`: added to the start-up line (what the workers serve, as the runner says it)."""
    sock = bind(host, port)
    env = dict(os.environ)
    env.setdefault(KEYS_ENV, secrets.token_urlsafe(32))  # one sealing key for the whole group
    env[SUPERVISOR_ENV] = str(os.getpid())  # a worker that outlives us notices, even if we died while it started
    command = [sys.executable, "-m", "mcpcore", *worker_args, "--listen-fd", str(sock.fileno())]
    shown = f"[{host}]" if ":" in host else host
    log.info("%d workers serving at http://%s:%d%s%s", workers, shown, sock.getsockname()[1], path, served)

    def start() -> subprocess.Popen[bytes]:
        # Out of the terminal's process group: Ctrl-C reaches us alone, and we pass it on as one SIGTERM
        # (a worker that got both would take them as two signals and stop without its grace period).
        return subprocess.Popen(command, pass_fds=(sock.fileno(),), env=env, start_new_session=True)

    children = [start() for _ in range(workers)]
    stopping = False
    crashes: list[float] = []

    def stop(signum: int, frame: object) -> None:
        # The first signal only sets the flag: the children are told below, once the loop is out
        # of a restart (told from here, a worker being started, not yet in `children`, would never
        # hear of it). A second one is passed on at once: each worker then stops at once.
        nonlocal stopping
        if stopping:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    status = 0
    while not stopping:
        time.sleep(0.2)
        for index, child in enumerate(children):
            if child.poll() is None or stopping:
                continue
            now = time.monotonic()
            crashes = [t for t in crashes if now - t < CRASH_WINDOW] + [now]
            log.warning("worker %d exited with %s; restarting", child.pid, child.returncode)
            if len(crashes) >= CRASH_LIMIT:
                log.error("workers keep crashing; stopping")
                status = 1
                stop(signal.SIGTERM, None)
                break
            children[index] = start()
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.error("worker %d did not stop within %.0f s; killed it", child.pid, STOP_TIMEOUT)
            child.kill()
            child.wait()
            status = 1
    sock.close()
    return status
