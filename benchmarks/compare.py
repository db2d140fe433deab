"""One command for the whole comparison: `python benchmarks/compare.py` → benchmarks/RESULTS.md and scale.svg.

The chart is written beside the report; in the repository benchmarks/scale.svg is a link to
docs/scale.svg, so the guide's performance page shows the same file. `--redraw` draws it
again from the report's req/s table without measuring (after a change to svgchart.py).

Creates virtual environments under benchmarks/.venvs for mcpcore (installed from
this checkout, not editable), mcpcore with uvloop, the official SDK (mcp 2.3.0)
and FastMCP 4.2.3. Servers run pinned to CPU 0 and are driven from CPU 1: over
HTTP by wrk through benchmarks/wrk/mcp.lua (httpload.py when wrk is missing),
over stdio by the compiled driver stdiodrive.c (stdiobench.py's Python driver
without a C compiler); the report names the generator used. Servers take turns
within each slot (one connection count in one round), the first turn passing
to the next server each round, and every ratio is taken
between figures of the same round, then shown as the median with the (min–max)
over rounds, so noise from the shared machine shows as spread instead of a
skewed ratio. `--instructions` adds callgrind's instructions per request
(benchmarks/instructions.py: about 3 more minutes, needs valgrind).
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

import httpload
import procs
import svgchart
import wrkload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"
SERVERS = HERE / "servers"
BENCH = str(SERVERS / "mcpcore_bench.py")
PEERS = {
    "mcpcore": [str(ROOT)],
    "mcpcore-uvloop": [f"{ROOT}[uvloop]"],
    "mcpcore-extras": [f"{ROOT}[jwt]", "uvicorn==0.54.0", "httptools==0.9.0"],  # ASGI servers, JWT
    "mcp": ["mcp==2.3.0"],
    "fastmcp": ["fastmcp==4.2.3"],
    "mcp-proxy": ["mcp-proxy==0.13.0"],  # a peer of the gateway (benchmarks/gateway.py)
}
SERVER_CPU, LOAD_CPU = 0, 1
CONNECTIONS = (1, 16, 64, 256, 1000)
HEADLINE = 64  # the connection count of the headline table and most targets
# Servers run from here, not from the checkout's root, where `python -m mcpcore` (as --workers starts its
# workers) would import the source tree instead of the installed package.
SERVER_CWD = str(VENVS)
MAX_CONNECTIONS = "4096"  # mcpcore's default, 1,000, leaves no room beside wrk's 1,000 for its probe connection

CEILING, SYNC, ASYNC, UVLOOP = "raw h11 + asyncio ceiling", "mcpcore (sync echo)", "mcpcore (async echo)", "mcpcore[uvloop] (async echo)"
ASGI_H11, ASGI_HTTPTOOLS = "mcpcore ASGI under uvicorn --http h11 (async echo)", "mcpcore ASGI under uvicorn --http httptools (async echo)"
SDK, FASTMCP = "official SDK mcp 2.3.0", "FastMCP 4.2.3"
STDIO_CEILING, LINE_LOOP = "bare asyncio pipe echo (ceiling)", "blocking Python line loop (reference)"
STDIO_FLOOR = "asyncio MCP floor: parse, task, echo, dump (reference)"
EXAMPLE = "mcpcore echo example (sync, 4 tools)"  # the small server whose start-up and memory the targets bound

SHARED_START, SHARED_END = "<!-- sharedstate: written by benchmarks/sharedstate.py -->", "<!-- /sharedstate -->"
SESSION_START, SESSION_END = "<!-- session_load: written by benchmarks/session_load.py -->", "<!-- /session_load -->"
GATEWAY_START, GATEWAY_END = "<!-- gateway: written by benchmarks/gateway.py -->", "<!-- /gateway -->"
FLEET_START, FLEET_END = "<!-- fleetlimits: written by benchmarks/fleetlimits.py -->", "<!-- /fleetlimits -->"
Run = dict[str, Any]  # one measurement: rps, p50_ms, p99_ms, errors … or {"failed": why}
STARTED = time.monotonic()


def progress(message: str) -> None:
    """A line on stderr with the minutes so far, so whoever runs the whole benchmark can tell how far it is."""
    print(f"# {(time.monotonic() - STARTED) / 60:5.1f} min  {message}", file=sys.stderr, flush=True)


@functools.cache
def venv_python(name: str) -> str:
    """The interpreter of a benchmark venv, created on first use; mcpcore's is refreshed once per run."""
    home = VENVS / name
    python = home / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEERS[name]], check=True)
    elif name.startswith("mcpcore"):  # always measure the current checkout
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(ROOT)], check=True)
    return str(python)


def version_of(python: str, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip() or "?"


@dataclass(frozen=True)
class Server:
    """A server to measure: `command` names its venv's interpreter "{python}", its `mcpcore` script "{mcpcore}"
    and its port "{port}"."""

    label: str
    venv: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cpu: int | None = SERVER_CPU
    settle: float = 0.0  # seconds to wait after the port opens (worker processes start behind it)

    def argv(self, port: int = 0) -> list[str]:
        python = venv_python(self.venv)
        names = {"{python}": python, "{mcpcore}": str(Path(python).with_name("mcpcore"))}
        return [names.get(part, part.replace("{port}", str(port))) for part in self.command]


def mcpcore(label: str, venv: str, flavour: str, *extra: str, http: bool = True, **options: Any) -> Server:
    """The bench server (50 tools) with `echo` as a def ("sync") or an async def ("async")."""
    transport = ("--transport", "http", "--port", "{port}", "--max-connections", MAX_CONNECTIONS) if http else ()
    return Server(label, venv, ("{mcpcore}", "run", BENCH, *transport, *extra),
                  {"MCPCORE_BENCH_ASYNC": "1" if flavour == "async" else "0"}, **options)


def asgi_server(label: str, parser: str) -> Server:
    """The bench server through the ASGI adapter under uvicorn (asyncio loop, no access log)."""
    command = ("{python}", "-m", "uvicorn", "--app-dir", str(SERVERS), "asgi_bench:app", "--port", "{port}",
               "--http", parser, "--loop", "asyncio", "--no-access-log", "--log-level", "warning", "--backlog", "2048")
    return Server(label, "mcpcore-extras", command, {"MCPCORE_BENCH_ASYNC": "1"})


def http_servers(uvloop: bool) -> list[Server]:
    """The pinned servers of the scale curve, the ceiling first."""
    servers = [Server(CEILING, "mcpcore", ("{python}", str(SERVERS / "ceiling_http.py"), "{port}")),
               mcpcore(SYNC, "mcpcore", "sync"), mcpcore(ASYNC, "mcpcore", "async")]
    if uvloop:
        servers.append(mcpcore(UVLOOP, "mcpcore-uvloop", "async"))
    servers += [asgi_server(ASGI_H11, "h11"), asgi_server(ASGI_HTTPTOOLS, "httptools")]
    return servers + [Server(SDK, "mcp", ("{python}", str(SERVERS / "peer_mcp.py"), "http", "{port}")),
                      Server(FASTMCP, "fastmcp", ("{python}", str(SERVERS / "peer_fastmcp.py"), "http", "{port}"))]


def worker_servers() -> list[Server]:
    """mcpcore with one and with two worker processes, unpinned: the workers and wrk share both cores."""
    return [mcpcore(f"mcpcore (async echo), {n} worker{'s' * (n > 1)}, unpinned", "mcpcore", "async",
                    "--workers", str(n), cpu=None, settle=1.0) for n in (1, 2)]


def stdio_servers(uvloop: bool) -> list[Server]:
    """The stdio servers, the bare asyncio pipe echo (the ceiling) first."""
    servers = [Server(STDIO_CEILING, "mcpcore", ("{python}", str(SERVERS / "ceiling_stdio.py"))),
               Server(LINE_LOOP, "mcpcore", ("{python}", str(SERVERS / "lineloop_stdio.py"))),
               Server(STDIO_FLOOR, "mcpcore", ("{python}", str(SERVERS / "floor_stdio.py"))),
               mcpcore(SYNC, "mcpcore", "sync", http=False), mcpcore(ASYNC, "mcpcore", "async", http=False)]
    if uvloop:
        servers.append(mcpcore(UVLOOP, "mcpcore-uvloop", "async", http=False))
    servers.append(Server(EXAMPLE, "mcpcore", ("{mcpcore}", "run", str(ROOT / "examples" / "echo_server.py"))))
    return servers + [Server(SDK, "mcp", ("{python}", str(SERVERS / "peer_mcp.py"), "stdio")),
                      Server(FASTMCP, "fastmcp", ("{python}", str(SERVERS / "peer_fastmcp.py"), "stdio"))]


@dataclass(frozen=True)
class Scenario:
    """One kind of request, spelled for wrk's mcp.lua and for httpload.py alike."""

    target: str  # a tool to call, or a method (it holds a slash)
    arguments: str = "{}"
    meta: str = ""  # extra _meta members, e.g. '"progressToken":"p"'

    @property
    def method(self) -> str:
        return self.target if "/" in self.target else "tools/call"

    def lua_args(self) -> list[str]:
        return [self.target, self.arguments, *([self.meta] if self.meta else [])]

    def httpload_args(self) -> list[str]:
        return ["--method", self.method, "--tool", self.target, "--arguments", self.arguments, "--meta", "{" + self.meta + "}"]

    def request(self) -> tuple[bytes, dict[str, str]]:
        return httpload.build_request(self.method, self.target, self.arguments, "{" + self.meta + "}")


ECHO = Scenario("echo", '{"text":"hello"}')
SCENARIOS = {  # mcpcore's own ratios, on the async bench server
    "tools/call echo (JSON)": ECHO,
    "tools/list, 50 tools": Scenario("tools/list"),
    "progress3 without token (JSON)": Scenario("progress3"),
    "progress3 with token (SSE, 3 events)": Scenario("progress3", meta='"progressToken":"p"'),
}


@dataclass(frozen=True)
class Harness:
    """What every measurement of one invocation shares: its options and its HTTP load generator."""

    args: argparse.Namespace
    wrk: str | None  # wrk's version line; None when the Python fallback drives HTTP

    def load(self, url: str, scenario: Scenario, connections: int, threads: int = 1, cpu: int | None = LOAD_CPU) -> Run:
        """One closed-loop run after a warm-up run of the same shape."""
        if self.wrk is None:
            command = [sys.executable, str(HERE / "httpload.py"), "--url", url, "--connections", str(connections),
                       "--duration", str(self.args.duration), "--warmup", str(self.args.warmup),
                       "--processes", str(threads), *scenario.httpload_args()]
            return json.loads(subprocess.run(procs.pinned(cpu, command), capture_output=True, text=True,
                                             check=True, timeout=self.args.duration + 300).stdout)
        if self.args.warmup:
            wrkload.load(url, connections, self.args.warmup, scenario.lua_args(), threads, cpu)
        return wrkload.load(url, connections, self.args.duration, scenario.lua_args(), threads, cpu)


def failed(reason: str) -> Run:
    """A slot that produced no figure: the last line of why (a traceback's is the exception), counted as an error."""
    return {"failed": reason.strip().splitlines()[-1][:300] if reason.strip() else "failed", "errors": 1}


def probe(url: str, scenario: Scenario) -> str | None:
    """One request by a Python client before the load: a server that answers errors is not measured as fast."""
    body, headers = scenario.request()
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        connection.request("POST", parts.path, body, headers)
        response = connection.getresponse()
        status, answer = response.status, response.read()
    except (OSError, http.client.HTTPException) as error:
        return f"probe request failed: {error!r}"
    finally:
        connection.close()
    return f"probe answered {status}: {answer[:200]!r}" if httpload.is_error(status, answer) else None


def measure(harness: Harness, server: Server, loads: Sequence[tuple[Scenario, int]], threads: int = 1,
            cpu: int | None = LOAD_CPU) -> list[Run]:
    """Start `server` once and apply each (scenario, connections) load in turn; failures are recorded, not raised."""
    port = procs.free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with procs.listening(server.argv(port), port, server.cpu, server.env, SERVER_CWD):
            time.sleep(server.settle)
            return [_one_load(harness, url, scenario, connections, threads, cpu) for scenario, connections in loads]
    except RuntimeError as error:
        return [failed(f"{server.label}: {error}")] * len(loads)


def _one_load(harness: Harness, url: str, scenario: Scenario, connections: int, threads: int, cpu: int | None) -> Run:
    problem = probe(url, scenario)
    if problem:
        return failed(problem)
    try:
        return harness.load(url, scenario, connections, threads, cpu)
    except (RuntimeError, ValueError, subprocess.SubprocessError) as error:
        return failed(str(error))


def in_turn(servers: Sequence[Server], round_number: int) -> list[Server]:
    """`servers` in the order they run in round `round_number` (from 1): each round starts one later,
    so that no server always runs first (here the one run second in a pair measures lower)."""
    start = (round_number - 1) % len(servers) if servers else 0
    return [*servers[start:], *servers[:start]]


def run_http(harness: Harness) -> dict[str, Any]:
    """Round after round: every server at every connection count, then the workers, then the scenarios."""
    args = harness.args
    pinned_servers, workers = http_servers(args.uvloop), worker_servers()
    scale: dict[str, dict[int, list[Run]]] = {s.label: {c: [] for c in args.connections} for s in pinned_servers}
    by_workers: dict[str, dict[int, list[Run]]] = {s.label: {c: [] for c in args.connections} for s in workers}
    scenarios: dict[str, list[Run]] = {name: [] for name in SCENARIOS}
    bench = mcpcore("bench", "mcpcore", "async")
    for round_number in range(1, args.rounds + 1):
        for connections in args.connections:
            progress(f"HTTP round {round_number}/{args.rounds}, {connections:,} connections")
            for server in in_turn(pinned_servers, round_number):  # servers take turns within the slot
                scale[server.label][connections] += measure(harness, server, [(ECHO, connections)])
            for server in in_turn(workers, round_number):
                by_workers[server.label][connections] += measure(harness, server, [(ECHO, connections)], threads=2, cpu=None)
        progress(f"HTTP round {round_number}/{args.rounds}, scenarios")
        results = measure(harness, bench, [(scenario, HEADLINE) for scenario in SCENARIOS.values()])
        for name, result in zip(SCENARIOS, results):
            scenarios[name].append(result)
    return {"scale": scale, "workers": by_workers, "scenarios": scenarios}


def stdio_bench(server: Server, *options: str) -> Run:
    """stdiobench.py on CPU 1 driving `server` on CPU 0; a failure is recorded, not raised."""
    command = [sys.executable, str(HERE / "stdiobench.py"), "--cpu", str(SERVER_CPU), *options, "--", *server.argv()]
    try:
        done = subprocess.run(procs.pinned(LOAD_CPU, command), capture_output=True, text=True, check=True,
                              timeout=3600, env={**os.environ, **server.env}, cwd=SERVER_CWD)
    except subprocess.CalledProcessError as error:
        return failed(error.stderr or str(error))
    except subprocess.TimeoutExpired as error:
        return failed(str(error))
    return json.loads(done.stdout)


def run_stdio(args: argparse.Namespace) -> dict[str, Any]:
    """Rates, cold start and idle memory round after round, then one long run per mcpcore server for growth."""
    servers = stdio_servers(args.uvloop)
    runs: dict[str, list[Run]] = {server.label: [] for server in servers}
    for round_number in range(1, args.rounds + 1):
        progress(f"stdio round {round_number}/{args.rounds}")
        for server in in_turn(servers, round_number):
            runs[server.label].append(stdio_bench(server, "--requests", str(args.stdio_requests)))
    progress("stdio memory growth")
    leak = {server.label: stdio_bench(server, "--requests", "0", "--cold-runs", "1", "--leak-first", "10000",
                                      "--leak-total", str(args.leak_total))
            for server in servers if server.label.startswith("mcpcore")}
    return {"runs": runs, "leak": leak}


def run_instructions() -> dict[str, int] | str:
    """callgrind's instructions per request on each hot path, or why they could not be counted."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed"
    progress("instructions per request (callgrind)")
    with tempfile.TemporaryDirectory() as folder:
        figures = Path(folder) / "instructions.json"
        done = subprocess.run([sys.executable, str(HERE / "instructions.py"), "--python", venv_python("mcpcore-extras"),
                               "--json", str(figures)], stdout=sys.stderr, cwd=ROOT)
        return json.loads(figures.read_text()) if done.returncode == 0 else f"instructions.py exited with {done.returncode}"


# Figures: per-round ratios and their spread.

def usable(run: Run, key: str) -> bool:
    return "failed" not in run and isinstance(run.get(key), (int, float)) and run[key] > 0


def values(runs: Sequence[Run], key: str = "rps") -> list[float]:
    return [run[key] for run in runs if usable(run, key)]


def ratios(runs: Sequence[Run], reference: Sequence[Run], key: str = "rps") -> list[float]:
    """Each round's figure over the reference's from the same round; rounds where either failed drop out."""
    return [run[key] / ref[key] for run, ref in zip(runs, reference) if usable(run, key) and usable(ref, key)]


def median(numbers: Sequence[float]) -> float | None:
    return statistics.median(numbers) if numbers else None


def marked_section(text: str, start: str, end: str) -> str:
    """The section of a RESULTS.md text between two markers, markers included ("" without one):
    what another script wrote, kept when this one rewrites the page."""
    if start not in text or end not in text:
        return ""
    return start + text.split(start, 1)[1].split(end, 1)[0] + end + "\n"


def shared_section(text: str) -> str:
    """The section of a RESULTS.md text that benchmarks/sharedstate.py wrote ("" without one)."""
    return marked_section(text, SHARED_START, SHARED_END)


def spread(numbers: Sequence[float], pattern: str = "{:.2f}") -> str:
    """'0.78 (0.74–0.81)': the median, then the lowest and highest round ('—' when nothing was measured)."""
    if not numbers:
        return "—"
    middle = pattern.format(statistics.median(numbers))
    if len(numbers) == 1:
        return middle
    return f"{middle} ({pattern.format(min(numbers))}–{pattern.format(max(numbers))})"


def number(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "—" if value is None else pattern.format(value)


def errors(runs: Sequence[Run]) -> int:
    return sum(run.get("errors", 0) for run in runs)


def inverse(numbers: Sequence[float]) -> list[float]:
    return [1 / value for value in numbers]


# The report.

def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unavailable"


def versions(uvloop: bool) -> str:
    core = venv_python("mcpcore")
    found = {name: version_of(core, name) for name in ("mcpcore", "anyio", "h11", "orjson")}
    found["mcp"] = version_of(venv_python("mcp"), "mcp")
    found["fastmcp"] = version_of(venv_python("fastmcp"), "fastmcp")
    if uvloop:
        found["uvloop"] = version_of(venv_python("mcpcore-uvloop"), "uvloop")
    return ", ".join(f"{name} {version}" for name, version in found.items())


def drivers(harness: Harness, stdio: dict[str, Any]) -> list[str]:
    """Which load generators produced the figures, said loudly when one is a Python fallback."""
    if harness.wrk:
        http_line = (f"HTTP: wrk ({harness.wrk}), one thread pinned to CPU {LOAD_CPU}, through `benchmarks/wrk/mcp.lua`, "
                     f"request timeout {wrkload.TIMEOUT}; the workers rows use two wrk threads, unpinned.")
    else:
        http_line = ("HTTP: **Python fallback load generator — may be the bottleneck** (`benchmarks/httpload.py`; "
                     "wrk was not found: install it, e.g. `apt-get install wrk`, for figures that bound the servers only).")
    used = {run.get("driver") for runs in stdio["runs"].values() for run in runs}
    if "python" not in used:
        stdio_line = "stdio: the compiled driver `benchmarks/stdiodrive.c` (cold start, idle and long-run memory: `stdiobench.py`)."
    else:
        stdio_line = ("stdio: **Python fallback driver — may be the bottleneck** (`benchmarks/stdiobench.py`; "
                      "no C compiler `cc` was found to build `benchmarks/stdiodrive.c`).")
    return [f"Load generators — {http_line}", "", f"Load generators — {stdio_line}"]


def header(harness: Harness, stdio: dict[str, Any], started: str, finished: str, loads: tuple[str, str]) -> list[str]:
    args = harness.args
    return [
        "# mcpcore benchmark results",
        "",
        f"Generated by `python benchmarks/compare.py`, run from {started} to {finished}: {args.rounds} interleaved "
        f"round{'s' * (args.rounds > 1)}, each started by the next server; HTTP runs {args.duration} s each after a {args.warmup} s warm-up, a fresh server per slot; "
        f"servers pinned to CPU {SERVER_CPU}, load generators to CPU {LOAD_CPU}.",
        "",
        *drivers(harness, stdio),
        "",
        f"Load average (1, 5, 15 min, `/proc/loadavg`): {loads[0]} at the start, {loads[1]} at the end.",
        "",
        f"Machine: {procs.machine()}.",
        f"Versions: {versions(args.uvloop)}.",
        "",
        "How to read: req/s and latencies are medians over the rounds. A ratio (`x ceiling`, `x official SDK`) is "
        "taken within each round, between figures measured minutes apart at most, and shown as the median over "
        "rounds with the lowest and highest round in brackets: `0.78 (0.74–0.81)`. The mcpcore sync and async "
        "rows run `benchmarks/servers/mcpcore_bench.py` (50 tools), whose `echo` is a def (run on mcpcore's worker "
        "pool) or an async def; the echo example row runs `examples/echo_server.py`.",
    ]


def headline(scale: dict[str, dict[int, list[Run]]]) -> list[str]:
    """The HTTP echo table at the headline connection count."""
    at = {label: slots.get(HEADLINE, []) for label, slots in scale.items()}
    lines = [f"## HTTP `tools/call` echo, {HEADLINE} connections", "",
             "| server | req/s | x ceiling | x official SDK | p50 ms | p99 ms | p99 x ceiling | errors |",
             "|---|---|---|---|---|---|---|---|"]
    for label, runs in at.items():
        lines.append(
            f"| {label} | {number(median(values(runs)))} | {spread(ratios(runs, at[CEILING]))} "
            f"| {spread(ratios(runs, at.get(SDK, [])))} | {number(median(values(runs, 'p50_ms')), '{:.1f}')} "
            f"| {number(median(values(runs, 'p99_ms')), '{:.1f}')} | {spread(ratios(runs, at[CEILING], 'p99_ms'))} "
            f"| {errors(runs)} |")
    return lines


def _grid(title: str, labels: Sequence[str], connections: Sequence[int], cell: Callable[[str, int], str]) -> list[str]:
    """A table with one row per server and one column per connection count."""
    return [title, "", "| server | " + " | ".join(f"{c:,}" for c in connections) + " |",
            "|---|" + "---|" * len(connections),
            *(f"| {label} | " + " | ".join(cell(label, c) for c in connections) + " |" for label in labels)]


def scale_tables(http: dict[str, Any], chart_name: str) -> list[str]:
    """The scale curve: the chart, then req/s, ratio to the ceiling and p99 by connection count."""
    slots = {**http["scale"], **http["workers"]}
    connections = sorted({c for by_count in slots.values() for c in by_count})
    ceiling = http["scale"][CEILING]
    one, two = (http["workers"][label] for label in http["workers"])

    def rate(label: str, c: int) -> str:
        bad = errors(slots[label][c])
        return number(median(values(slots[label][c]))) + (f" ({bad:,} errors)" if bad else "")

    return [
        "## HTTP scale curve: `tools/call` echo by keep-alive connections", "",
        f"![req/s by connections, one line per server]({chart_name})", "",
        "A slot where a server failed (did not start, refused, timed out) shows its errors here and its reason "
        "under Failed slots.", "",
        *_grid("### req/s", list(slots), connections, rate), "",
        *_grid("### x ceiling (same round)", [label for label in http["scale"] if label != CEILING], connections,
               lambda label, c: spread(ratios(slots[label][c], ceiling[c]))), "",
        *_grid("### p99 latency, ms", list(slots), connections,
               lambda label, c: number(median(values(slots[label][c], "p99_ms")), "{:.1f}")), "",
        *_grid("### mcpcore async echo: 2 workers over 1 (same round; unpinned, two wrk threads)", ["2 / 1"],
               connections, lambda label, c: spread(ratios(two[c], one[c]))), "",
        *_grid("### The ASGI adapter under uvicorn over the built-in server, async echo (same round)",
               [label for label in (ASGI_H11, ASGI_HTTPTOOLS) if label in http["scale"]], connections,
               lambda label, c: spread(ratios(slots[label][c], slots[ASYNC][c]))),
    ]


def scenario_table(scenarios: dict[str, list[Run]]) -> list[str]:
    echo, plain = scenarios["tools/call echo (JSON)"], scenarios["progress3 without token (JSON)"]
    lines = [f"## HTTP scenarios on mcpcore (async bench server, 50 tools, {HEADLINE} connections)", "",
             "| scenario | req/s | ratio (same round) | p99 ms | errors |", "|---|---|---|---|---|"]
    for name, runs in scenarios.items():
        sse = name.startswith("progress3 with")
        base, base_name = (plain, "JSON progress3") if sse else (echo, "echo")
        lines.append(f"| {name} | {number(median(values(runs)))} | {spread(ratios(runs, base))} x {base_name} "
                     f"| {number(median(values(runs, 'p99_ms')), '{:.1f}')} | {errors(runs)} |")
    return lines


def stdio_tables(stdio: dict[str, Any], leak_total: int) -> list[str]:
    runs = stdio["runs"]
    ceiling = runs[STDIO_CEILING]
    lines = ["## stdio `tools/call` echo", "",
             "| server | lockstep req/s | lockstep x ceiling | pipelined req/s | pipelined x ceiling | cold start ms "
             "| idle RSS MiB | errors |", "|---|---|---|---|---|---|---|---|"]
    for label, rows in runs.items():
        bad = sum(row.get("lockstep_errors", 0) + row.get("pipelined_errors", 0) + row.get("errors", 0) for row in rows)
        cold_ms = median([seconds * 1000 for seconds in values(rows, "cold_start_s")])
        idle_mib = median([kib / 1024 for kib in values(rows, "idle_rss_kib")])
        lines.append(
            f"| {label} | {number(median(values(rows, 'lockstep_rps')))} | {spread(ratios(rows, ceiling, 'lockstep_rps'))} "
            f"| {number(median(values(rows, 'pipelined_rps')))} | {spread(ratios(rows, ceiling, 'pipelined_rps'))} "
            f"| {number(cold_ms)} | {number(idle_mib, '{:.1f}')} | {bad} |")
    lines += ["", "## stdio memory over a long run", "",
              f"| server | RSS after 10,000 MiB | RSS after {leak_total:,} MiB | growth MiB |", "|---|---|---|---|"]
    for label, result in stdio["leak"].items():
        if "failed" in result:
            lines.append(f"| {label} | failed: {result['failed']} | | |")
            continue
        first, total = result["rss_after_first_kib"] / 1024, result["rss_after_total_kib"] / 1024
        lines.append(f"| {label} | {first:.1f} | {total:.1f} | {total - first:+.1f} |")
    return lines


def instructions_table(figures: dict[str, int] | str | None) -> list[str]:
    lines = ["## Instructions per request (callgrind)", ""]
    if figures is None:
        return lines + ["Not counted in this run: `python benchmarks/compare.py --instructions` adds this table "
                        "(`benchmarks/instructions.py`, about 3 more minutes, needs valgrind)."]
    if isinstance(figures, str):
        return lines + [f"Not counted: {figures}."]
    lines += ["A machine-independent figure: each hot path driven in-process over a fake socket or pipe, "
              "`benchmarks/instructions.py` (no client, kernel or scheduler cost). An HTTP path is set against "
              "the h11 ceiling; a stdio path against the asyncio MCP floor (`servers/floor_stdio.py`: parse, a task, "
              "the echo, dump, nothing more) fed the same way.", "",
              "| path | instructions per request | x reference |", "|---|---|---|"]
    for path, count in figures.items():
        reference = "http-ceiling" if path.startswith("http") else "stdio-floor-pipelined" if path.endswith("pipelined") \
            else "stdio-floor" if path.startswith("stdio") else None
        base = figures.get(reference) if reference and reference != path else None
        relative = f"{count / base:.2f} x {reference}" if base else ""
        lines.append(f"| {path} | {count:,} | {relative} |")
    return lines


def failures(http: dict[str, Any], stdio: dict[str, Any]) -> list[str]:
    """Every slot that produced no figure, with why, so a missing number is never silent."""
    found = []
    for group in ("scale", "workers"):
        for label, slots in http[group].items():
            found += [(f"HTTP {label}, {c:,} connections, round {i}", run["failed"])
                      for c, runs in slots.items() for i, run in enumerate(runs, 1) if "failed" in run]
    for name, runs in http["scenarios"].items():
        found += [(f"HTTP scenario {name}, round {i}", run["failed"]) for i, run in enumerate(runs, 1) if "failed" in run]
    for label, runs in stdio["runs"].items():
        found += [(f"stdio {label}, round {i}", run["failed"]) for i, run in enumerate(runs, 1) if "failed" in run]
    if not found:
        return []
    return ["## Failed slots", "", "| slot | why |", "|---|---|", *(f"| {slot} | {why} |" for slot, why in found), ""]


Check = tuple[str, str, bool | None]


def check(name: str, numbers: Sequence[float], passes: Callable[[float], bool], pattern: str = "{:.2f}x") -> Check:
    """A target row: the spread over rounds, judged on the median (None when nothing was measured)."""
    middle = median(numbers)
    return name, spread(numbers, pattern), None if middle is None else passes(middle)


def targets(http: dict[str, Any], stdio: dict[str, Any], leak_total: int) -> list[str]:
    """The issue's targets, checked against this run."""
    scale, scenarios, runs = http["scale"], http["scenarios"], stdio["runs"]

    def at(label: str, connections: int = HEADLINE) -> list[Run]:
        return scale.get(label, {}).get(connections, [])

    leak = stdio["leak"].get(EXAMPLE, {})
    growth = ([(leak["rss_after_total_kib"] - leak["rss_after_first_kib"]) / 1024]
              if "rss_after_total_kib" in leak else [])
    rows = [check(f"HTTP sync echo >= 0.9x async echo at {c:,} connections", ratios(at(SYNC, c), at(ASYNC, c)),
                  lambda r: r >= 0.9) for c in (64, 256)]
    rows += [
        check("HTTP sync echo >= 0.7x async echo at 1 connection", ratios(at(SYNC, 1), at(ASYNC, 1)), lambda r: r >= 0.7),
        check(f"HTTP async echo >= 0.85x ceiling at {HEADLINE} connections", ratios(at(ASYNC), at(CEILING)), lambda r: r >= 0.85),
        check(f"HTTP async echo p99 <= 1.5x ceiling's at {HEADLINE} connections",
              ratios(at(ASYNC), at(CEILING), "p99_ms"), lambda r: r <= 1.5),
        check(f"HTTP async echo with the uvloop extra >= 0.9x ceiling at {HEADLINE} connections",
              ratios(at(UVLOOP), at(CEILING)), lambda r: r >= 0.9),
        *(check(f"HTTP {label} >= 5x official SDK at {HEADLINE} connections", ratios(at(label), at(SDK)), lambda r: r >= 5)
          for label in (SYNC, ASYNC)),
        check("HTTP tools/list (50 tools) within 10% of echo",
              ratios(scenarios["tools/list, 50 tools"], scenarios["tools/call echo (JSON)"]), lambda r: r >= 0.9),
        check("SSE call (3 progress events) costs <= 2x a JSON call", inverse(ratios(
            scenarios["progress3 with token (SSE, 3 events)"], scenarios["progress3 without token (JSON)"])), lambda r: r <= 2),
        check("stdio sync pipelined >= 40,000 req/s", values(runs[SYNC], "pipelined_rps"), lambda r: r >= 40000, "{:,.0f}"),
        check("stdio sync lockstep >= 0.6x bare asyncio pipe echo",
              ratios(runs[SYNC], runs[STDIO_CEILING], "lockstep_rps"), lambda r: r >= 0.6),
        check("stdio async lockstep >= 0.85x bare asyncio pipe echo",
              ratios(runs[ASYNC], runs[STDIO_CEILING], "lockstep_rps"), lambda r: r >= 0.85),
        check("stdio async pipelined >= 75,000 req/s", values(runs[ASYNC], "pipelined_rps"), lambda r: r >= 75000, "{:,.0f}"),
        check("cold start to first stdio response <= 150 ms (echo example)",
              [s * 1000 for s in values(runs[EXAMPLE], "cold_start_s")], lambda ms: ms <= 150, "{:.0f} ms"),
        check("idle resident memory <= 25 MiB (echo example)",
              [kib / 1024 for kib in values(runs[EXAMPLE], "idle_rss_kib")], lambda mib: mib <= 25, "{:.1f} MiB"),
        check(f"memory after {leak_total:,} requests within 5 MiB of after 10,000 (echo example)", growth,
              lambda mib: abs(mib) <= 5, "{:+.1f} MiB"),
    ]
    verdict = {True: "yes", False: "no", None: "not measured"}
    return ["## Targets, checked against this run", "", "Ratios are judged on their median over rounds.", "",
            "| target | measured | met |", "|---|---|---|",
            *(f"| {name} | {measured} | {verdict[ok]} |" for name, measured, ok in rows)]


def scale_series(http: dict[str, Any]) -> svgchart.Series:
    """The scale curve: median req/s by connections, one line per server (workers included)."""
    return {label: [(float(c), statistics.median(values(runs))) for c, runs in slots.items() if values(runs)]
            for label, slots in {**http["scale"], **http["workers"]}.items()}


def reported_series(report_text: str) -> svgchart.Series:
    """The scale curve read back from a report's req/s table (what `--redraw` draws): no run needed."""
    table = report_text.split("## HTTP scale curve", 1)[1].split("### req/s", 1)[1].split("\n\n###", 1)[0]
    header, _, *rows = [line.strip("|").split("|") for line in table.strip().splitlines()]
    connections = [float(cell.replace(",", "")) for cell in header[1:]]
    medians = [[cell.split("(")[0].strip() for cell in cells[1:]] for cells in rows]  # "4,953 (2 errors)" → "4,953"
    return {cells[0].strip(): [(c, float(rate.replace(",", ""))) for c, rate in zip(connections, rates) if rate != "—"]
            for cells, rates in zip(rows, medians)}


def chart(series: svgchart.Series, rounds: int) -> str:
    return svgchart.line_chart(series, f"HTTP tools/call echo, median of {rounds} round{'s' * (rounds > 1)}",
                               "keep-alive connections (log scale)", "requests per second")


def report(harness: Harness, results: dict[str, Any], chart_name: str) -> str:
    http, stdio = results["http"], results["stdio"]
    sections = [
        header(harness, stdio, results["started"], results["finished"], results["load_average"]),
        headline(http["scale"]), scale_tables(http, chart_name), scenario_table(http["scenarios"]),
        stdio_tables(stdio, harness.args.leak_total), instructions_table(results.get("instructions")),
        targets(http, stdio, harness.args.leak_total),
    ]
    lines = [line for section in sections for line in (*section, "")]
    lines += failures(http, stdio)
    for kept in ("ROBUSTNESS.md", "HISTORY.md"):  # the soak and fuzz figures, then the history: not made here
        path = HERE / kept
        if path.exists():
            lines += [path.read_text().strip(), ""]
    return "\n".join(lines)


def raise_open_file_limit() -> None:
    """1,000 connections need more descriptors than the common soft limit (1,024) leaves wrk and the servers."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def connection_list(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(part) for part in text.split(",") if part.strip()}))


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per HTTP run (whole seconds, as wrk takes them)")
    parser.add_argument("--warmup", type=int, default=1, help="seconds of load before each HTTP run, not counted")
    parser.add_argument("--connections", type=connection_list, default=CONNECTIONS,
                        help=f"comma-separated connection counts of the scale curve ({','.join(map(str, CONNECTIONS))})")
    parser.add_argument("--stdio-requests", type=int, default=20000)
    parser.add_argument("--leak-total", type=int, default=200000)
    parser.add_argument("--no-uvloop", dest="uvloop", action="store_false")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per request under callgrind (about 3 more minutes; needs valgrind)")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"), help="the report; scale.svg is written beside it")
    parser.add_argument("--raw", default=str(VENVS / "results.json"), help="where to keep the raw numbers")
    parser.add_argument("--redraw", action="store_true",
                        help="measure nothing: redraw scale.svg from the req/s table of --output (give its --rounds)")
    return parser.parse_args()


def main() -> None:
    args = options()
    output = Path(args.output)
    if args.redraw:
        (output.parent / "scale.svg").write_text(chart(reported_series(output.read_text()), args.rounds))
        progress(f"redrew {output.parent / 'scale.svg'} from {output}")
        return
    raise_open_file_limit()
    for name in PEERS if args.uvloop else (name for name in PEERS if name != "mcpcore-uvloop"):
        venv_python(name)  # set up before the first measurement, not during one
    harness = Harness(args, wrkload.version())
    started, load_at_start = time.strftime("%Y-%m-%d %H:%M"), load_average()
    results: dict[str, Any] = {"http": run_http(harness), "stdio": run_stdio(args)}
    if args.instructions:
        results["instructions"] = run_instructions()
    results.update(started=started, finished=time.strftime("%Y-%m-%d %H:%M"), load_average=(load_at_start, load_average()),
                   wrk=harness.wrk)
    Path(args.raw).parent.mkdir(parents=True, exist_ok=True)
    Path(args.raw).write_text(json.dumps(results, indent=1))
    (output.parent / "scale.svg").write_text(chart(scale_series(results["http"]), args.rounds))
    previous = output.read_text() if output.exists() else ""  # sharedstate.py, session_load.py, gateway.py, fleetlimits.py: their own
    kept = "".join("\n" + section for section in (shared_section(previous), marked_section(previous, SESSION_START, SESSION_END),
                                                 marked_section(previous, GATEWAY_START, GATEWAY_END),
                                                 marked_section(previous, FLEET_START, FLEET_END)) if section)
    output.write_text(report(harness, results, "scale.svg") + kept)
    progress(f"wrote {output} and {output.parent / 'scale.svg'}")


if __name__ == "__main__":
    main()
