"""tools/call inside one 2025-era session under load, against the 2026-07-28 echo and the peers' sessions.

    python benchmarks/session_load.py [--connections 1,64,256] [--seconds 10] [--rounds 3] [--json out.json]

Each round starts every server in turn pinned to CPU 0 (the bench server's async echo;
the official SDK and FastMCP in stateful mode, JSON responses), opens one session from
this process (initialize, then notifications/initialized) and drives it with wrk pinned
to CPU 1 (`wrk/session.lua`: every request in that session, each with an id of its
own), at each connection count; the 2026-07-28 echo of the same mcpcore server
(`wrk/mcp.lua`, no session) is the reference. Rounds interleave the servers. Prints a
table (`--write` puts it into benchmarks/RESULTS.md, `--json` keeps every run; `--report
FILE` renders a kept run again). Needs wrk; the peers' venvs are made on first use
(benchmarks/.venvs, as compare.py makes them).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import compare
import procs
import wrkload

SESSION_SCRIPT = Path(__file__).resolve().parent / "wrk" / "session.lua"
MODERN, SESSION = "mcpcore 2026-07-28 echo (no session)", "mcpcore 2025-11-25 session"
SDK, FASTMCP = "official SDK 2.3.0 session (stateful)", "FastMCP 4.2.3 session (stateful)"


def targets() -> list[tuple[str, compare.Server]]:
    """(label, server) in the order a round runs them; mcpcore's server serves both of its rows."""
    ours = compare.mcpcore(SESSION, "mcpcore", "async")
    return [
        (MODERN, ours),
        (SESSION, ours),
        (SDK, compare.Server(SDK, "mcp", ("{python}", str(compare.SERVERS / "peer_mcp.py"), "http-stateful", "{port}"))),
        (FASTMCP, compare.Server(FASTMCP, "fastmcp",
                                 ("{python}", str(compare.SERVERS / "peer_fastmcp.py"), "http-stateful", "{port}"))),
    ]


def open_session(port: int) -> tuple[str, str]:
    """Open a session on the server at `port`: its `Mcp-Session-Id` and the negotiated version."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    connection.request("POST", "/mcp", json.dumps(initialize), headers)
    response = connection.getresponse()
    body = response.read()
    session_id = response.getheader("mcp-session-id")
    if response.status != 200 or session_id is None:
        raise RuntimeError(f"initialize opened no session: {response.status} {body[:300]!r}")
    version = json.loads(body.split(b"data: ", 1)[-1])["result"]["protocolVersion"]
    headers.update({"mcp-session-id": session_id, "mcp-protocol-version": version})
    connection.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers)
    answered = connection.getresponse()
    answered.read()
    if answered.status not in (200, 202):
        raise RuntimeError(f"notifications/initialized was refused: {answered.status}")
    connection.close()
    return session_id, version


def measure(label: str, server: compare.Server, connections: list[int], seconds: int) -> list[dict[str, Any]]:
    """One server's runs at each connection count (after a short warm-up at the first)."""
    port = procs.free_port()
    runs = []
    with procs.listening(server.argv(port), port, server.cpu, {**server.env}, cwd=compare.SERVER_CWD):
        url = f"http://127.0.0.1:{port}/mcp"
        if label == MODERN:
            script, arguments = wrkload.SCRIPT, ["echo", '{"text":"hello"}']
        else:
            session_id, version = open_session(port)
            script, arguments = SESSION_SCRIPT, [session_id, version]
        wrkload.load(url, connections[0], 2, arguments, cpu=compare.LOAD_CPU, script=script)  # warm-up, not kept
        for count in connections:
            run = wrkload.load(url, count, seconds, arguments, cpu=compare.LOAD_CPU, script=script)
            run.pop("wrk")
            runs.append({"server": label, "connections": count, **run})
            time.sleep(1)
    return runs


def summary(runs: list[dict[str, Any]], connections: list[int], rounds: int) -> dict[str, Any]:
    """Per connection count: each server's median rate, and mcpcore's session against the others, per round."""
    table: dict[str, Any] = {}
    for count in connections:
        rate = {(run["server"], run["round"]): run["rps"] for run in runs if run["connections"] == count}
        labels = sorted({label for label, _ in rate})
        row: dict[str, Any] = {"median_rps": {label: statistics.median(rate[label, r] for r in range(rounds)) for label in labels}}
        for other in labels:
            if other != SESSION:
                ratios = [rate[SESSION, r] / rate[other, r] for r in range(rounds) if rate.get((other, r))]
                row[f"session / {other}"] = [round(ratio, 3) for ratio in ratios]
        row["errors"] = {label: sum(run["errors"] for run in runs if run["server"] == label and run["connections"] == count)
                         for label in labels}
        table[str(count)] = row
    return table


def report(result: dict[str, Any]) -> str:
    """The RESULTS.md section of a run (between session_load's markers, which compare.py keeps)."""
    runs, rounds = result["runs"], result["rounds"]
    labels = (MODERN, SESSION, SDK, FASTMCP)
    lines = [
        compare.SESSION_START,
        "## tools/call inside one 2025-era session (`benchmarks/session_load.py`)",
        "",
        f"{result['machine']}; {result['wrk']}; {rounds} rounds of {result['seconds']} s, servers in turn "
        f"(each round starts with the next); server on CPU {compare.SERVER_CPU}, wrk on CPU {compare.LOAD_CPU}. "
        "One session per server, opened before the runs; every request in it has an id of its own. The peers run "
        "stateful with JSON responses. Ratios are per round (session ÷ other in the same round): the median, then "
        "the lowest and highest.",
        "",
        "| connections | " + " | ".join(f"{label} req/s (p99 ms)" for label in labels)
        + " | session ÷ 2026 echo | session ÷ SDK | session ÷ FastMCP | errors |",
        "|---" * (len(labels) + 5) + "|",
    ]
    for count, row in result["summary"].items():
        chosen = [run for run in runs if run["connections"] == int(count)]
        cells = []
        for label in labels:
            mine = [run for run in chosen if run["server"] == label]
            p99 = statistics.median(run["p99_ms"] for run in mine) if mine else None
            cells.append(f"{compare.number(row['median_rps'].get(label))} ({compare.number(p99, '{:.1f}')})")
        ratios = [compare.spread(row.get(f"session / {other}", [])) for other in (MODERN, SDK, FASTMCP)]
        lines.append(f"| {count} | " + " | ".join(cells + ratios) + f" | {sum(row['errors'].values())} |")
    return "\n".join(lines + [compare.SESSION_END, ""])


def write(section: str) -> None:
    """Put `section` into benchmarks/RESULTS.md in place of the one there, or at its end."""
    results = Path(__file__).resolve().parent / "RESULTS.md"
    current = results.read_text()
    kept = compare.marked_section(current, compare.SESSION_START, compare.SESSION_END)
    results.write_text((current.replace(kept, "") if kept else current).rstrip("\n") + "\n\n" + section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", default="1,64,256")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write", action="store_true", help="put the report into benchmarks/RESULTS.md")
    parser.add_argument("--report", type=Path, help="only render a previous --json output (with --write: into RESULTS.md)")
    args = parser.parse_args()
    if args.report:
        section = report(json.loads(args.report.read_text()))
        print(section)
        if args.write:
            write(section)
        return
    if wrkload.version() is None:
        raise SystemExit("session_load: wrk is not installed (apt-get install -y wrk)")
    connections = [int(count) for count in args.connections.split(",")]
    chosen = targets()
    for name in {server.venv for _, server in chosen}:
        compare.venv_python(name)  # made (or refreshed) before the first measurement
    runs: list[dict[str, Any]] = []
    for round_number in range(args.rounds):
        for label, server in compare.in_turn(chosen, round_number + 1):  # each round starts with the next one
            compare.progress(f"round {round_number + 1}: {label}")
            runs += [{**run, "round": round_number} for run in measure(label, server, connections, args.seconds)]
    result = {"machine": procs.machine(), "wrk": wrkload.version(), "seconds": args.seconds, "rounds": args.rounds,
              "summary": summary(runs, connections, args.rounds), "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    section = report(result)
    print(section)
    if args.write:
        write(section)


if __name__ == "__main__":
    sys.exit(main())
