"""One command for the whole comparison: `python benchmarks/compare.py` → benchmarks/RESULTS.md.

Creates virtual environments under benchmarks/.venvs for mcpcore (installed
from this checkout, not editable), mcpcore with uvloop, the official SDK
(mcp==2.3.0) and FastMCP (4.x); starts each server pinned to CPU 0 and drives
it from CPU 1 (`httpload.py`, `stdiobench.py`), interleaving servers round by
round so machine noise hits all of them alike; reports medians and ratios
against the raw h11 ceiling and against the official SDK.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"
SERVERS = HERE / "servers"
PEERS = {
    "mcpcore": [str(ROOT)],
    "mcpcore-uvloop": [f"{ROOT}[uvloop]"],
    "mcp": ["mcp==2.3.0"],
    "fastmcp": ["fastmcp==4.2.3"],
}
SERVER_CPU, LOAD_CPU = "0", "1"


def venv_python(name: str) -> str:
    """The interpreter of a benchmark venv, created (and mcpcore refreshed) on demand."""
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pinned(cpu: str | None, command: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *command] if cpu is not None and shutil.which("taskset") else command


@dataclass
class HttpServer:
    label: str
    venv: str
    command: list[str]  # "{port}" is replaced
    env: dict[str, str] = field(default_factory=dict)
    cpu: str | None = SERVER_CPU

    def start(self, port: int) -> subprocess.Popen[bytes]:
        python = venv_python(self.venv)
        command = [python if part == "{python}" else part.replace("{port}", str(port)) for part in self.command]
        process = subprocess.Popen(pinned(self.cpu, command), env={**os.environ, **self.env},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        _wait_ready(port)
        return process


def _wait_ready(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not start")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def http_load(port: int, args: argparse.Namespace, *extra: str, cpu: str | None = LOAD_CPU) -> dict[str, Any]:
    command = [sys.executable, str(HERE / "httpload.py"), "--url", f"http://127.0.0.1:{port}/mcp",
               "--connections", str(args.connections), "--duration", str(args.duration), "--warmup", "1", *extra]
    output = subprocess.run(pinned(cpu, command), capture_output=True, text=True, check=True).stdout
    return json.loads(output)


def stdio_bench(python: str, server_args: list[str], *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    command = [sys.executable, str(HERE / "stdiobench.py"), "--cpu", SERVER_CPU, *extra, "--", python, *server_args]
    output = subprocess.run(pinned(LOAD_CPU, command), capture_output=True, text=True, check=True, cwd=ROOT,
                            env={**os.environ, **(env or {})}).stdout
    return json.loads(output)


MCPCORE_HTTP = ["{python}", "-m", "mcpcore", "run", "examples/echo_server.py", "--transport", "http", "--port", "{port}"]
BENCH_HTTP = ["{python}", "-m", "mcpcore", "run", "benchmarks/servers/mcpcore_bench.py", "--transport", "http", "--port", "{port}"]


def http_servers(with_uvloop: bool) -> list[HttpServer]:
    servers = [
        HttpServer("raw h11 + asyncio ceiling", "mcpcore", ["{python}", str(SERVERS / "ceiling_http.py"), "{port}"]),
        HttpServer("mcpcore (sync echo, worker thread)", "mcpcore", MCPCORE_HTTP),
        HttpServer("mcpcore (async echo)", "mcpcore", BENCH_HTTP, {"MCPCORE_BENCH_ASYNC": "1"}),
    ]
    if with_uvloop:
        servers.append(HttpServer("mcpcore[uvloop] (async echo)", "mcpcore-uvloop", BENCH_HTTP, {"MCPCORE_BENCH_ASYNC": "1"}))
    servers += [
        HttpServer("official SDK mcp 2.3.0", "mcp", ["{python}", str(SERVERS / "peer_mcp.py"), "http", "{port}"]),
        HttpServer("FastMCP 4.2.3", "fastmcp", ["{python}", str(SERVERS / "peer_fastmcp.py"), "http", "{port}"]),
    ]
    return servers


ECHO = ("--method", "tools/call", "--tool", "echo", "--arguments", '{"text": "hello"}')
SCENARIOS = {  # mcpcore's own ratios, on the async bench server
    "tools/call echo (JSON)": ECHO,
    "tools/list, 50 tools": ("--method", "tools/list"),
    "progress3 without token (JSON)": ("--method", "tools/call", "--tool", "progress3", "--arguments", "{}"),
    "progress3 with token (SSE, 3 events)": ("--method", "tools/call", "--tool", "progress3", "--arguments", "{}",
                                             "--meta", '{"progressToken": "p"}'),
}


def run_http(args: argparse.Namespace) -> dict[str, Any]:
    servers = http_servers(args.uvloop)
    echo_runs: dict[str, list[dict[str, Any]]] = {s.label: [] for s in servers}
    scenario_runs: dict[str, list[dict[str, Any]]] = {name: [] for name in SCENARIOS}
    worker_runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    bench_async = HttpServer("bench", "mcpcore", BENCH_HTTP, {"MCPCORE_BENCH_ASYNC": "1"})
    for round_number in range(args.rounds):
        print(f"# HTTP round {round_number + 1}/{args.rounds}", file=sys.stderr)
        for server in servers:
            port = free_port()
            process = server.start(port)
            try:
                echo_runs[server.label].append(http_load(port, args, *ECHO))
            finally:
                stop(process)
        port = free_port()
        process = bench_async.start(port)
        try:
            for name, extra in SCENARIOS.items():
                scenario_runs[name].append(http_load(port, args, *extra))
        finally:
            stop(process)
        for workers in (1, 2):  # unpinned: the workers and the load generator share both cores
            port = free_port()
            spread = HttpServer("workers", "mcpcore", BENCH_HTTP + ["--workers", str(workers)],
                                {"MCPCORE_BENCH_ASYNC": "1"}, cpu=None)
            process = spread.start(port)
            time.sleep(1.0)  # let every worker bind before loading
            try:
                worker_runs[workers].append(http_load(port, args, *ECHO, "--processes", "2", cpu=None))
            finally:
                stop(process)
    return {"echo": echo_runs, "scenarios": scenario_runs, "workers": worker_runs}


def run_stdio(args: argparse.Namespace) -> dict[str, Any]:
    core = venv_python("mcpcore")
    rows = {
        "raw Python line loop ceiling": (core, [str(SERVERS / "lineloop_stdio.py")], {}),
        "mcpcore (sync echo, worker thread)": (core, ["-m", "mcpcore", "run", "examples/echo_server.py"], {}),
        "mcpcore (async echo)": (core, ["-m", "mcpcore", "run", "benchmarks/servers/mcpcore_bench.py"],
                                 {"MCPCORE_BENCH_ASYNC": "1"}),
    }
    if args.uvloop:
        rows["mcpcore[uvloop] (async echo)"] = (venv_python("mcpcore-uvloop"),
                                                ["-m", "mcpcore", "run", "benchmarks/servers/mcpcore_bench.py"],
                                                {"MCPCORE_BENCH_ASYNC": "1"})
    rows["official SDK mcp 2.3.0"] = (venv_python("mcp"), [str(SERVERS / "peer_mcp.py"), "stdio"], {})
    rows["FastMCP 4.2.3"] = (venv_python("fastmcp"), [str(SERVERS / "peer_fastmcp.py"), "stdio"], {})
    results: dict[str, list[dict[str, Any]]] = {label: [] for label in rows}
    for round_number in range(args.rounds):
        print(f"# stdio round {round_number + 1}/{args.rounds}", file=sys.stderr)
        for label, (python, server_args, env) in rows.items():
            results[label].append(stdio_bench(python, server_args, "--requests", str(args.stdio_requests), env=env))
    leak = {
        label: stdio_bench(python, server_args, "--requests", "1000", "--cold-runs", "1",
                           "--leak-first", "10000", "--leak-total", str(args.leak_total), env=env)
        for label, (python, server_args, env) in rows.items()
        if label.startswith("mcpcore")
    }
    return {"runs": results, "leak": leak}


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def machine() -> dict[str, str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": str(os.cpu_count()), "python": platform.python_version(), "os": platform.platform()}


def report(http: dict[str, Any], stdio: dict[str, Any], args: argparse.Namespace, started: str) -> str:
    core = venv_python("mcpcore")
    versions = {
        "mcpcore": version_of(core, "mcpcore"), "anyio": version_of(core, "anyio"), "h11": version_of(core, "h11"),
        "orjson": version_of(core, "orjson"), "mcp": version_of(venv_python("mcp"), "mcp"),
        "fastmcp": version_of(venv_python("fastmcp"), "fastmcp"),
    }
    if args.uvloop:
        versions["uvloop"] = version_of(venv_python("mcpcore-uvloop"), "uvloop")
    info = machine()
    lines = [
        "# mcpcore benchmark results",
        "",
        f"Generated by `python benchmarks/compare.py`, run started {started} "
        f"({args.rounds} interleaved rounds, medians; HTTP: {args.connections} keep-alive connections, "
        f"{args.duration:g} s per run after 1 s warm-up; server pinned to CPU {SERVER_CPU}, load generator to CPU {LOAD_CPU}).",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, {info['os']}.",
        "Versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()) + ".",
        "",
        "## HTTP `tools/call` echo",
        "",
        "| server | req/s | x ceiling | x official SDK | p50 ms | p99 ms | p99 x ceiling | errors | load-gen CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    echo = http["echo"]
    ceiling_label, sdk_label = "raw h11 + asyncio ceiling", "official SDK mcp 2.3.0"
    ceiling_rps, sdk_rps = median(echo[ceiling_label], "rps"), median(echo[sdk_label], "rps")
    ceiling_p99 = median(echo[ceiling_label], "p99_ms")
    for label, runs in echo.items():
        rps, p99 = median(runs, "rps"), median(runs, "p99_ms")
        cpu_share = median(runs, "loadgen_cpu_s") / args.duration
        lines.append(
            f"| {label} | {rps:,.0f} | {rps / ceiling_rps:.2f} | {rps / sdk_rps:.2f} | {median(runs, 'p50_ms'):.1f} "
            f"| {p99:.1f} | {p99 / ceiling_p99:.2f} | {sum(r['errors'] for r in runs)} | {cpu_share:.0%} |"
        )
    scenarios = http["scenarios"]
    echo_rps = median(scenarios["tools/call echo (JSON)"], "rps")
    json_rps = median(scenarios["progress3 without token (JSON)"], "rps")
    lines += [
        "",
        "## HTTP scenarios on mcpcore (async bench server, 50 tools)",
        "",
        "| scenario | req/s | ratio | p99 ms | errors |",
        "|---|---|---|---|---|",
    ]
    for name, runs in scenarios.items():
        rps = median(runs, "rps")
        base = json_rps if name.startswith("progress3 with") else echo_rps
        ratio = f"{rps / base:.2f} x {'JSON progress3' if base is json_rps else 'echo'}"
        lines.append(f"| {name} | {rps:,.0f} | {ratio} | {median(runs, 'p99_ms'):.1f} | {sum(r['errors'] for r in runs)} |")
    one, two = median(http["workers"][1], "rps"), median(http["workers"][2], "rps")
    lines += [
        "",
        "## HTTP workers (async echo; server and load generator unpinned on both cores)",
        "",
        "| workers | req/s | ratio |",
        "|---|---|---|",
        f"| 1 | {one:,.0f} | 1.00 |",
        f"| 2 | {two:,.0f} | {two / one:.2f} |",
        "",
        "## stdio `tools/call` echo",
        "",
        "| server | lockstep req/s | pipelined req/s | cold start ms | idle RSS MiB |",
        "|---|---|---|---|---|",
    ]
    for label, runs in stdio["runs"].items():
        lines.append(
            f"| {label} | {median(runs, 'lockstep_rps'):,.0f} | {median(runs, 'pipelined_rps'):,.0f} "
            f"| {median(runs, 'cold_start_s') * 1000:.0f} | {median(runs, 'idle_rss_kib') / 1024:.1f} |"
        )
    lines += ["", "## stdio memory over a long run", "", "| server | RSS after 10,000 MiB | RSS after "
              f"{args.leak_total:,} MiB | growth MiB |", "|---|---|---|---|"]
    for label, result in stdio["leak"].items():
        first, total = result["rss_after_first_kib"] / 1024, result["rss_after_total_kib"] / 1024
        lines.append(f"| {label} | {first:.1f} | {total:.1f} | {total - first:+.1f} |")
    lines += ["", *targets(http, stdio, args)]
    history = HERE / "HISTORY.md"
    if history.exists():
        lines += ["", history.read_text().strip()]
    lines.append("")
    return "\n".join(lines)


def targets(http: dict[str, Any], stdio: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """The issue's targets, checked against this run."""
    echo, runs = http["echo"], stdio["runs"]
    ceiling, sdk = median(echo["raw h11 + asyncio ceiling"], "rps"), median(echo["official SDK mcp 2.3.0"], "rps")
    ceiling_p99 = median(echo["raw h11 + asyncio ceiling"], "p99_ms")
    sync, fast = "mcpcore (sync echo, worker thread)", "mcpcore (async echo)"
    scenarios = http["scenarios"]
    leak = stdio["leak"][sync]
    rows = []
    for label in (sync, fast):
        rps, p99 = median(echo[label], "rps"), median(echo[label], "p99_ms")
        rows += [
            (f"HTTP echo >= 0.85x ceiling ({label})", f"{rps / ceiling:.2f}x", rps / ceiling >= 0.85),
            (f"HTTP echo >= 5x official SDK ({label})", f"{rps / sdk:.2f}x", rps / sdk >= 5),
            (f"HTTP p99 <= 2x ceiling's ({label})", f"{p99 / ceiling_p99:.2f}x", p99 / ceiling_p99 <= 2),
        ]
    listed = median(scenarios["tools/list, 50 tools"], "rps") / median(scenarios["tools/call echo (JSON)"], "rps")
    sse = median(scenarios["progress3 with token (SSE, 3 events)"], "rps")
    plain = median(scenarios["progress3 without token (JSON)"], "rps")
    rows.append(("HTTP tools/list (50 tools) within 10% of echo", f"{listed:.2f}x", listed >= 0.9))
    rows.append(("SSE call (3 progress events) costs <= 2x a JSON call", f"{plain / sse:.2f}x", plain / sse <= 2))
    for label in (sync, fast):
        lock, pipe = median(runs[label], "lockstep_rps"), median(runs[label], "pipelined_rps")
        rows.append((f"stdio lockstep >= 15,000 req/s ({label})", f"{lock:,.0f}", lock >= 15000))
        rows.append((f"stdio pipelined >= 25,000 req/s ({label})", f"{pipe:,.0f}", pipe >= 25000))
    cold, idle = median(runs[sync], "cold_start_s") * 1000, median(runs[sync], "idle_rss_kib") / 1024
    growth = (leak["rss_after_total_kib"] - leak["rss_after_first_kib"]) / 1024
    rows += [
        ("cold start to first stdio response <= 150 ms", f"{cold:.0f} ms", cold <= 150),
        ("idle resident memory <= 25 MiB", f"{idle:.1f} MiB", idle <= 25),
        (f"memory after {args.leak_total:,} requests within 5 MiB of after 10,000", f"{growth:+.1f} MiB", abs(growth) <= 5),
    ]
    lines = ["## Targets, checked against this run", "", "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {'yes' if ok else 'no'} |" for name, value, ok in rows]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--stdio-requests", type=int, default=20000)
    parser.add_argument("--leak-total", type=int, default=200000)
    parser.add_argument("--no-uvloop", dest="uvloop", action="store_false")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"))
    parser.add_argument("--raw", default=str(HERE / ".venvs" / "results.json"), help="where to keep the raw numbers")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M")
    http = run_http(args)
    stdio = run_stdio(args)
    Path(args.raw).write_text(json.dumps({"started": started, "http": http, "stdio": stdio}, indent=1))
    Path(args.output).write_text(report(http, stdio, args, started))
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
