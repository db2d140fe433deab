"""tools/call echo through `mcpcore proxy` in front of a stdio server, against mcpcore over HTTP directly and the peers' proxies.

    python benchmarks/gateway.py [--connections 1,64] [--seconds 5] [--rounds 3] [--json out.json] [--write]

The upstream is mcpcore's own bench server (`servers/mcpcore_bench.py`, async echo, 50
tools) run over stdio by `mcpcore run`, the same command behind every proxy. In front
of it: the gateway (`mcpcore proxy --transport http -- mcpcore run ...`), driven on the
2026-07-28 wire (`wrk/mcp.lua`) and in one 2025-11-25 session (`wrk/session.lua`, the
session opened as `session_load.py` opens it); `mcp-proxy` 0.13.0 and FastMCP 4.2.3's
proxy (`servers/peer_fastmcp_proxy.py`), each in one session of its own, as both speak
only the 2025 era (and open the upstream with `initialize`; the gateway asks it on the
2026 wire). The reference is the same bench server served over HTTP by mcpcore itself,
on both wires. Each proxy and its upstream run pinned to CPU 0 (the upstream inherits
the pin), wrk to CPU 1; each round starts every server in turn, the first turn passing
to the next server each round, and ratios are taken within a round. At one connection
the added latency per call is the mean call time (1 / req/s) through the gateway less
the direct one, on the same wire. Prints a table (`--write` puts it into
benchmarks/RESULTS.md, `--json` keeps every run; `--report FILE` renders a kept run
again). Needs wrk; the venvs are made on first use (benchmarks/.venvs, as compare.py
makes them).
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

import compare
import httpload
import procs
import session_load
import wrkload

START, END = compare.GATEWAY_START, compare.GATEWAY_END
MODERN, SESSION = "2026-07-28", "2025-11-25 session"  # the wires
DIRECT, GATEWAY = "mcpcore over HTTP directly", "mcpcore proxy (gateway)"
MCP_PROXY, FASTMCP_PROXY = "mcp-proxy 0.13.0", "FastMCP 4.2.3 proxy"
Row = tuple[str, str]  # (server label, wire)
ROWS: tuple[Row, ...] = ((DIRECT, MODERN), (DIRECT, SESSION), (GATEWAY, MODERN), (GATEWAY, SESSION),
                         (MCP_PROXY, SESSION), (FASTMCP_PROXY, SESSION))


@dataclass(frozen=True)
class Target:
    """One server started per round, and the wires it is driven on."""

    server: compare.Server
    wires: tuple[str, ...]


def upstream() -> list[str]:
    """The stdio upstream every proxy starts: the bench server with its async echo, under mcpcore's venv.
    Through `env`, as mcp-proxy hands its upstream only a few variables of its own environment."""
    mcpcore = str(Path(compare.venv_python("mcpcore")).with_name("mcpcore"))
    return ["env", "MCPCORE_BENCH_ASYNC=1", mcpcore, "run", compare.BENCH]


def targets() -> list[Target]:
    """The servers in the order a round runs them (each round then starts one later)."""
    http = ("--transport", "http", "--port", "{port}", "--max-connections", compare.MAX_CONNECTIONS)
    gateway = compare.Server(GATEWAY, "mcpcore", ("{mcpcore}", "proxy", *http, "--", *upstream()))
    mcp_proxy = compare.Server(MCP_PROXY, "mcp-proxy", ("{python}", "-m", "mcp_proxy", "--port", "{port}",
                                                        "--log-level", "WARNING", "--", *upstream()))
    fastmcp = compare.Server(FASTMCP_PROXY, "fastmcp",
                             ("{python}", str(compare.SERVERS / "peer_fastmcp_proxy.py"), "{port}", "--", *upstream()))
    return [Target(compare.mcpcore(DIRECT, "mcpcore", "async"), (MODERN, SESSION)), Target(gateway, (MODERN, SESSION)),
            Target(mcp_proxy, (SESSION,)), Target(fastmcp, (SESSION,))]


def session_probe(port: int, session_id: str, version: str) -> str | None:
    """One echo in the session before the load: a proxy that answers errors is not measured as fast."""
    call = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hello"}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-session-id": session_id, "mcp-protocol-version": version}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/mcp", json.dumps(call), headers)
        response = connection.getresponse()
        status, answer = response.status, response.read()
    finally:
        connection.close()
    if httpload.is_error(status, answer) or b'"hello"' not in answer:
        return f"the session's probe call answered {status}: {answer[:200]!r}"
    return None


def drive(url: str, server: int, wire: str, connections: Sequence[int], seconds: int, warmup: int) -> list[compare.Run]:
    """wrk at each connection count on one wire (a warm-up run before each), with the CPU time the server process
    `server` and its upstream spent per call; a failure is recorded, not raised."""
    port = urlsplit(url).port
    try:
        if wire == MODERN:
            problem, script, arguments = compare.probe(url, compare.ECHO), wrkload.SCRIPT, compare.ECHO.lua_args()
        else:
            session_id, version = session_load.open_session(port)
            problem = session_probe(port, session_id, version)
            script, arguments = session_load.SESSION_SCRIPT, [session_id, version]
        if problem:
            return [compare.failed(problem)] * len(connections)
        runs = []
        for count in connections:
            if warmup:
                wrkload.load(url, count, warmup, arguments, cpu=compare.LOAD_CPU, script=script)
            used = procs.cpu_seconds(server)
            run = wrkload.load(url, count, seconds, arguments, cpu=compare.LOAD_CPU, script=script)
            run["cpu_us_per_call"] = (procs.cpu_seconds(server) - used) * 1e6 / max(run["requests"], 1)
            runs.append({key: value for key, value in run.items() if key != "wrk"})
        return runs
    except (OSError, RuntimeError, ValueError, http.client.HTTPException) as error:
        return [compare.failed(f"{wire}: {error!r}")] * len(connections)


def measure(target: Target, connections: Sequence[int], seconds: int, warmup: int) -> dict[Row, list[compare.Run]]:
    """Start the target's server once and drive it on each of its wires."""
    server, port = target.server, procs.free_port()
    try:
        with procs.listening(server.argv(port), port, server.cpu, server.env, compare.SERVER_CWD) as process:
            return {(server.label, wire): drive(f"http://127.0.0.1:{port}/mcp", process.pid, wire, connections, seconds, warmup)
                    for wire in target.wires}
    except RuntimeError as error:
        return {(server.label, wire): [compare.failed(f"{server.label}: {error}")] * len(connections) for wire in target.wires}


def run(connections: Sequence[int], seconds: int, warmup: int, rounds: int) -> dict[str, Any]:
    """Every target in every round; runs[label][wire][connections] is a list with one run per round."""
    chosen = targets()
    runs: dict[str, dict[str, dict[str, list[compare.Run]]]] = {}
    for label, wire in ROWS:
        runs.setdefault(label, {})[wire] = {str(count): [] for count in connections}
    started, load_at_start = time.strftime("%Y-%m-%d %H:%M"), compare.load_average()
    for round_number in range(1, rounds + 1):
        for target in compare.in_turn(chosen, round_number):
            compare.progress(f"round {round_number}/{rounds}: {target.server.label}")
            for (label, wire), measured in measure(target, connections, seconds, warmup).items():
                for count, one in zip(connections, measured):
                    runs[label][wire][str(count)].append(one)
    return {"machine": procs.machine(), "wrk": wrkload.version(), "started": started,
            "finished": time.strftime("%Y-%m-%d %H:%M"), "load_average": [load_at_start, compare.load_average()],
            "versions": versions(), "seconds": seconds, "warmup": warmup, "rounds": rounds,
            "connections": list(connections), "runs": runs}


def versions() -> str:
    names = {"mcpcore": "mcpcore", "mcp-proxy": "mcp-proxy", "fastmcp": "fastmcp"}
    found = [f"{package} {compare.version_of(compare.venv_python(venv), package)}" for venv, package in names.items()]
    return ", ".join([*found, f"mcp {compare.version_of(compare.venv_python('mcp-proxy'), 'mcp')} (under mcp-proxy)"])


def added_microseconds(runs: Sequence[compare.Run], reference: Sequence[compare.Run]) -> list[float]:
    """Per round, the mean time of one lockstep call less the reference's (1 / req/s each), in µs."""
    return [1e6 / run["rps"] - 1e6 / ref["rps"] for run, ref in zip(runs, reference)
            if compare.usable(run, "rps") and compare.usable(ref, "rps")]


def added_cpu(runs: Sequence[compare.Run], reference: Sequence[compare.Run]) -> list[float]:
    """Per round, the CPU time one call costs the server (and its upstream) more than the reference, in µs."""
    key = "cpu_us_per_call"
    return [run[key] - ref[key] for run, ref in zip(runs, reference) if compare.usable(run, key) and compare.usable(ref, key)]


def report(result: dict[str, Any]) -> str:
    """The RESULTS.md section of a run (between this script's markers, which compare.py keeps)."""
    runs, counts = result["runs"], [str(count) for count in result["connections"]]

    def at(label: str, wire: str, count: str) -> list[compare.Run]:
        return runs.get(label, {}).get(wire, {}).get(count, [])

    head = "| server | wire | " + " | ".join(f"{int(c):,} conn. req/s (p99 ms)" for c in counts)
    lines = [
        START, "## `tools/call` echo through the gateway (`benchmarks/gateway.py`)", "",
        f"Run from {result['started']} to {result['finished']}; {result['machine']}; {result['wrk']}; {result['versions']}. "
        f"Load average {result['load_average'][0]} at the start, {result['load_average'][1]} at the end. "
        f"{result['rounds']} round{'s' * (result['rounds'] > 1)} of {result['seconds']} s per run after a {result['warmup']} s warm-up, a fresh "
        f"server per round, servers in turn (each round starts with the next); server and its upstream on CPU "
        f"{compare.SERVER_CPU}, wrk (one thread) on CPU {compare.LOAD_CPU}.",
        "",
        "The upstream behind every proxy is mcpcore's bench server (`benchmarks/servers/mcpcore_bench.py`, async "
        "echo, 50 tools) over stdio: `mcpcore run mcpcore_bench.py`. The direct rows serve that server over HTTP with "
        "`mcpcore run --transport http`. The 2026-07-28 wire is `wrk/mcp.lua` (no session); a 2025-11-25 session is "
        "opened once per server (initialize, notifications/initialized) and driven by `wrk/session.lua`. The peers "
        "speak only the 2025 era and run stateful with JSON responses. Ratios are per round, then the median with "
        "the lowest and highest round.",
        "",
        head + " | errors |", "|---|---|" + "---|" * len(counts) + "---|",
    ]
    for label, wire in ROWS:
        cells = [f"{compare.number(compare.median(compare.values(at(label, wire, c))))} "
                 f"({compare.number(compare.median(compare.values(at(label, wire, c), 'p99_ms')), '{:.1f}')})" for c in counts]
        bad = sum(compare.errors(at(label, wire, c)) for c in counts)
        lines.append(f"| {label} | {wire} | " + " | ".join(cells) + f" | {bad} |")
    lines += ["", "Server CPU time per call, µs (user + system time over the run of the server process and its upstream, "
                  "÷ calls; the machine's other load disturbs it less than req/s), and its ratio to the direct server's "
                  "on the same wire in the same round:", "",
              "| server | wire | " + " | ".join(f"{int(c):,} conn. µs (x direct)" for c in counts) + " |",
              "|---|---|" + "---|" * len(counts)]
    for label, wire in ROWS:
        cells = [f"{compare.number(compare.median(compare.values(at(label, wire, c), 'cpu_us_per_call')))} ("
                 f"{compare.spread(compare.ratios(at(label, wire, c), at(DIRECT, wire, c), 'cpu_us_per_call'))})" for c in counts]
        lines.append(f"| {label} | {wire} | " + " | ".join(cells) + " |")
    lines += ["", "| req/s ratio (same round) | " + " | ".join(f"{int(c):,} connection{'s' * (c != '1')}" for c in counts) + " |",
              "|---|" + "---|" * len(counts)]
    pairs = [((GATEWAY, MODERN), (DIRECT, MODERN)), ((GATEWAY, SESSION), (DIRECT, SESSION)),
             ((GATEWAY, SESSION), (MCP_PROXY, SESSION)), ((GATEWAY, SESSION), (FASTMCP_PROXY, SESSION)),
             ((GATEWAY, MODERN), (MCP_PROXY, SESSION)), ((GATEWAY, MODERN), (FASTMCP_PROXY, SESSION))]
    for (label, wire), (other, other_wire) in pairs:
        cells = [compare.spread(compare.ratios(at(label, wire, c), at(other, other_wire, c))) for c in counts]
        lines.append(f"| gateway {wire} ÷ {other} {other_wire} | " + " | ".join(cells) + " |")
    if "1" in counts:
        lines += ["", "Added latency per call at one connection (lockstep: the mean call time, 1 / req/s, through the "
                      "gateway less the direct one in the same round; the CPU time per call the gateway and its upstream "
                      "spend beyond the direct server's, which bounds what they add on an idle core but for the wake-ups; "
                      "and the median call time, wrk's p50):", "",
                  "| wire | added µs per call (mean) | added CPU µs per call | gateway p50 ms | direct p50 ms |",
                  "|---|---|---|---|---|"]
        for wire in (MODERN, SESSION):
            through, direct = at(GATEWAY, wire, "1"), at(DIRECT, wire, "1")
            lines.append(f"| {wire} | {compare.spread(added_microseconds(through, direct), '{:.0f}')} "
                         f"| {compare.spread(added_cpu(through, direct), '{:.0f}')} "
                         f"| {compare.number(compare.median(compare.values(through, 'p50_ms')), '{:.2f}')} "
                         f"| {compare.number(compare.median(compare.values(direct, 'p50_ms')), '{:.2f}')} |")
    if "64" in counts:
        goals = [compare.check(f"gateway {wire} >= 0.5x mcpcore directly at 64 connections (req/s)",
                               compare.ratios(at(GATEWAY, wire, "64"), at(DIRECT, wire, "64")), lambda r: r >= 0.5)
                 for wire in (MODERN, SESSION)]
        goals += [compare.check(f"gateway {SESSION} >= 5x {peer} at 64 connections (req/s)",
                                compare.ratios(at(GATEWAY, SESSION, "64"), at(peer, SESSION, "64")), lambda r: r >= 5)
                  for peer in (MCP_PROXY, FASTMCP_PROXY)]
        verdict = {True: "yes", False: "no", None: "not measured"}
        lines += ["", "| goal (issue 26), judged on the median | measured | met |", "|---|---|---|",
                  *(f"| {name} | {measured} | {verdict[ok]} |" for name, measured, ok in goals)]
    failures = [(f"{label}, {wire}, {int(c):,} connections, round {i}", one["failed"])
                for label, wire in ROWS for c in counts for i, one in enumerate(at(label, wire, c), 1) if "failed" in one]
    if failures:
        lines += ["", "| failed slot | why |", "|---|---|", *(f"| {slot} | {why} |" for slot, why in failures)]
    return "\n".join(lines + [END, ""])


def write(section: str) -> None:
    """Put `section` into benchmarks/RESULTS.md in place of the one there, or at its end."""
    results = Path(__file__).resolve().parent / "RESULTS.md"
    current = results.read_text()
    kept = compare.marked_section(current, START, END)
    results.write_text((current.replace(kept, "") if kept else current).rstrip("\n") + "\n\n" + section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=compare.connection_list, default=(1, 64))
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="seconds of load before each run, not counted")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write", action="store_true", help="put the report into benchmarks/RESULTS.md")
    parser.add_argument("--report", type=Path, help="only render a previous --json output (with --write: into RESULTS.md)")
    args = parser.parse_args()
    if args.report:
        result = json.loads(args.report.read_text())
    else:
        if wrkload.version() is None:
            raise SystemExit("gateway: wrk is not installed (apt-get install -y wrk)")
        compare.raise_open_file_limit()
        for name in ("mcpcore", "mcp-proxy", "fastmcp"):
            compare.venv_python(name)  # made (or refreshed) before the first measurement
        result = run(args.connections, args.seconds, args.warmup, args.rounds)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
    section = report(result)
    print(section)
    if args.write:
        write(section)


if __name__ == "__main__":
    sys.exit(main())
