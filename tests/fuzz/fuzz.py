"""Fuzz a real mcpcore server over HTTP and stdio, and check that it keeps its invariants.

    .venv/bin/python tests/fuzz/fuzz.py --http 100000 --stdio 100000 --seed 1

Starts `python -m mcpcore run tests/fuzz/fuzz_server.py --transport http
--port N` and drives generated requests at it over real sockets
(`fuzz_http.py`); then runs stdio server processes over real pipes
(`fuzz_stdio.py`). Inputs come from a generator seeded with `--seed`
(`fuzz_inputs.py`): valid calls of every method of both protocol eras,
sessions, cancellations, and broken ones of every kind. Prints a summary
(counts by HTTP status and by JSON-RPC outcome, each broken invariant with a
few examples, elapsed time) and exits 1 if any invariant was broken.

The invariants (`fuzz_report.INVARIANTS`):

- server-alive: the server runs at every health check and at the end, and exits
  with status 0 on SIGTERM (HTTP) or after stdin closes (stdio).
- answered-once: over HTTP, each request written whole gets exactly one response,
  in order on its connection (pipelined ones too) unless a response before it closed
  the connection; that response holds at most one JSON-RPC response, with the
  request's id or with none (when the server could not read one); a stream that
  ends holds its response; a 2025-11-25 stream and its resumption hold it once
  between them. A request the client cut short, broke at the HTTP level, or
  cancelled (disconnect, notifications/cancelled, DELETE) is owed at most one.
  Over stdio: see `fuzz_stdio`.
- status: 2xx or 4xx; 503 only to initialize while the sessions the client may
  hold reach --max-sessions; 501 only to a head naming a transfer coding but chunked.
- protocol: well-formed HTTP (as h11 reads it), JSON bodies and lines, JSON-RPC
  messages in SSE events; a 202 has no body; a GET stream carries no response and
  ends when its session is deleted; a second GET stream is refused; a request
  reusing an id in flight in its session is 400; a deleted session is 404.
- valid-call: a well-formed call with conforming headers gets 200 and a result
  with its id (a notification: 202); over stdio, a result.
- stderr: no traceback or unhandled-exception text on the server's stderr.
- health: a tools/call of echo returns its text, every --health-every inputs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import sys
import time
from typing import Any

from fuzz_http import run_http
from fuzz_report import INVARIANTS, Report
from fuzz_stdio import run_stdio


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in counts.items()) or "none"


def render(summary: dict[str, Any]) -> str:
    """The summary as text, for a terminal or a log."""
    lines = [
        f"mcpcore fuzz: seed {summary['seed']}, {summary['inputs'].get('http', 0):,} HTTP requests and "
        f"{summary['inputs'].get('stdio', 0):,} stdio inputs ({summary['stdio_lines']:,} lines) in {summary['elapsed_s']:.1f} s",
        f"machine: {summary['machine']}",
        f"HTTP statuses: {_counts(summary['http_statuses'])}",
        f"JSON-RPC responses over HTTP: {_counts(summary['jsonrpc_outcomes']['http'])}",
        f"JSON-RPC responses over stdio: {_counts(summary['jsonrpc_outcomes']['stdio'])}",
        f"health checks passed: {summary['health_checks'] - summary['violations'].get('health', 0):,} of {summary['health_checks']:,}",
    ]
    if not summary["violations"]:
        lines.append(f"violations: none (invariants: {', '.join(INVARIANTS)})")
    for invariant, count in summary["violations"].items():
        lines.append(f"VIOLATED {invariant} ({INVARIANTS[invariant]}): {count:,} time(s), e.g.")
        lines += [f"  - {example}" for example in summary["examples"][invariant]]
    return "\n".join(lines)


async def fuzz(args: argparse.Namespace) -> dict[str, Any]:
    report = Report()
    machine = _machine()
    started = time.perf_counter()
    if args.http:
        await run_http(report, args.http, args.seed, args.workers, args.health_every, args.port or free_port())
    if args.stdio:
        await run_stdio(report, args.stdio, args.seed, args.stdio_stream, args.health_every)
    summary = report.summary()
    summary.update(seed=args.seed, elapsed_s=round(time.perf_counter() - started, 1), machine=machine)
    return summary


def _machine() -> str:
    """CPU, cores, load when the run started, Python: what the figures depend on."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = f", load average {os.getloadavg()[0]:.1f} at start" if hasattr(os, "getloadavg") else ""
    return f"{model}, {os.cpu_count()} cores{load}, Python {platform.python_version()}, {platform.system()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--http", type=int, default=100_000, help="HTTP requests to send (0: none)")
    parser.add_argument("--stdio", type=int, default=100_000, help="stdio lines to send (0: none)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--stdio-stream", type=int, default=10_000, help="lines per stdio server process")
    parser.add_argument("--health-every", type=int, default=5_000, help="inputs between health calls, per transport")
    parser.add_argument("--port", type=int, default=0, help="port of the HTTP server (0: a free one)")
    parser.add_argument("--json", metavar="FILE", help="also write the summary as JSON to FILE")
    args = parser.parse_args()
    summary = asyncio.run(fuzz(args))
    print(render(summary))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=2)
    sys.exit(1 if summary["violations"] else 0)


if __name__ == "__main__":
    main()
