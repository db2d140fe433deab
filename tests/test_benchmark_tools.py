"""The bundled load tools parse, count and summarize correctly (no timing asserted here)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import anyio
import pytest

from conftest import ROOT
from http_client import running
from mcpcore._cli.main import load_target

sys.path.insert(0, str(ROOT / "benchmarks"))

import compare  # noqa: E402
import httpload  # noqa: E402
import sharedstate  # noqa: E402
import stdiobench  # noqa: E402
import svgchart  # noqa: E402
import wrkload  # noqa: E402

SAMPLES = ROOT / "tests" / "samples"  # wrk reports captured from real runs against this project's servers
SVG = "{http://www.w3.org/2000/svg}"


def test_parse_response_with_content_length_returns_the_body_and_bytes_used() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1"
    assert httpload.parse_response(raw) == (len(raw) - len(b"HTTP/1.1"), 200, b"hello")


def test_parse_response_waits_for_a_complete_body() -> None:
    assert httpload.parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel") is None
    assert httpload.parse_response(b"HTTP/1.1 200 OK\r\nContent-Len") is None


def test_parse_response_joins_chunked_bodies() -> None:
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert httpload.parse_response(raw) == (len(raw), 200, b"abcde")
    assert httpload.parse_response(raw[:-3]) is None


def test_parse_response_without_body_framing_consumes_the_head() -> None:
    raw = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    assert httpload.parse_response(raw) == (len(raw), 202, b"")


def test_errors_are_non_200_statuses_json_rpc_errors_and_tool_errors() -> None:
    assert not httpload.is_error(200, b'{"result":{"content":[]}}')
    assert httpload.is_error(400, b"{}")
    assert httpload.is_error(200, b'{"error":{"code":-32602}}')
    assert httpload.is_error(200, b'{"result":{"isError":true}}')


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert httpload.percentile(values, 0.50) == 50.0
    assert httpload.percentile(values, 0.99) == 99.0
    assert httpload.percentile(values, 1.0) == 100.0
    assert httpload.percentile([], 0.5) == 0.0


def test_summary_counts_requests_errors_and_rate() -> None:
    summary = httpload.summarize([0.001, 0.002, 0.003, 0.004], errors=1, elapsed=2.0, cpu=0.5)
    assert summary["requests"] == 4 and summary["errors"] == 1 and summary["rps"] == 2.0
    assert summary["p50_ms"] == 2.0 and summary["max_ms"] == 4.0 and summary["loadgen_cpu_s"] == 0.5


def test_mcp_request_carries_the_required_headers() -> None:
    body, headers = httpload.mcp_request("tools/call", {"name": "echo", "arguments": {}})
    message = json.loads(body)
    assert message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert headers["Mcp-Method"] == "tools/call" and headers["Mcp-Name"] == "echo"
    wire = httpload.encode_http("h:1", "/mcp", body, headers)
    assert wire.startswith(b"POST /mcp HTTP/1.1\r\nHost: h:1\r\n") and wire.endswith(body)


def test_mcp_request_adds_extra_meta_beside_the_required_fields() -> None:
    body, _ = httpload.mcp_request("tools/call", {"name": "echo", "arguments": {}}, meta={"progressToken": "p"})
    meta = json.loads(body)["params"]["_meta"]
    assert meta["progressToken"] == "p" and meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


def test_stdio_answers_are_counted_per_line_with_errors() -> None:
    data = b'{"result":{}}\n{"error":{"code":1}}\n{"result":{"isError":true}}\n'
    assert stdiobench.count_answers(data) == (3, 2)
    assert stdiobench.count_answers(b"") == (0, 0)


def test_stdio_request_lines_are_single_json_lines() -> None:
    line = stdiobench.echo_line(7)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["id"] == 7


@pytest.mark.anyio
async def test_http_load_generator_counts_every_answer_of_a_real_server() -> None:
    server = load_target(str(ROOT / "examples" / "echo_server.py"))
    async with running(server) as http:
        command = [sys.executable, str(ROOT / "benchmarks" / "httpload.py"), "--url", f"http://127.0.0.1:{http.port}/mcp",
                   "--connections", "4", "--requests", "200", "--duration", "10", "--warmup", "0"]
        with anyio.fail_after(30):
            result = await anyio.run_process(command)
    summary = json.loads(result.stdout)
    assert summary["requests"] >= 200 and summary["errors"] == 0
    assert 0 < summary["p50_ms"] <= summary["p99_ms"] <= summary["max_ms"]


def test_stdio_python_driver_measures_a_real_server() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "stdiobench.py"), "--driver", "python", "--requests", "300",
               "--cold-runs", "1", "--", sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py")]
    report = json.loads(subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout)
    assert report["driver"] == "python"
    assert report["lockstep_errors"] == 0 and report["pipelined_errors"] == 0
    assert report["lockstep_rps"] > 0 and report["pipelined_rps"] > 0
    assert report["idle_rss_kib"] > 1000 and report["cold_start_s"] > 0


# wrk's report, parsed


def wrk_sample(name: str) -> dict:
    return wrkload.parse((SAMPLES / name).read_text())


def test_wrk_report_gives_rate_count_and_percentiles_in_milliseconds() -> None:
    figures = wrk_sample("wrk-ceiling-1-connection.txt")
    assert figures["rps"] == 6458.08 and figures["requests"] == 12947 and figures["seconds"] == 2.0
    assert figures["p50_ms"] == pytest.approx(0.114) and figures["p99_ms"] == pytest.approx(41.03)
    assert figures["errors"] == 0 and figures["non_2xx"] == 0
    assert figures["socket_errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0}


def test_wrk_report_of_an_sse_run_reads_like_any_other() -> None:
    figures = wrk_sample("wrk-sse-progress3.txt")
    assert figures["rps"] == 2462.62 and figures["requests"] == 5023
    assert figures["p50_ms"] == pytest.approx(17.56) and figures["p99_ms"] == pytest.approx(186.22)
    assert figures["errors"] == 0


def test_wrk_report_in_seconds_with_trailing_blanks_still_gives_percentiles() -> None:
    figures = wrk_sample("wrk-sdk-1000-connections.txt")  # the official SDK at 1,000 connections
    assert figures["p50_ms"] == pytest.approx(1170.0) and figures["p99_ms"] == pytest.approx(1810.0)
    assert figures["rps"] == 595.78 and figures["requests"] == 1236 and figures["seconds"] == 2.07


def test_wrk_non_2xx_answers_and_socket_errors_count_as_errors() -> None:
    refused = wrk_sample("wrk-non-2xx.txt")  # 100 connections against --max-connections 20: 503s
    assert refused["non_2xx"] == 1696 and refused["errors"] == 1696 and refused["requests"] == 2250
    killed = wrk_sample("wrk-socket-errors.txt")  # the server killed a second into the run
    assert killed["socket_errors"] == {"connect": 0, "read": 63, "write": 40570, "timeout": 0}
    assert killed["errors"] == 63 + 40570 and killed["non_2xx"] == 0


def test_wrk_durations_convert_every_unit_and_garbage_is_refused() -> None:
    assert [wrkload.milliseconds(t) for t in ("250.00us", "1.50ms", "2.00s", "1.00m")] == [0.25, 1.5, 2000.0, 60000.0]
    with pytest.raises(ValueError):
        wrkload.milliseconds("fast")
    with pytest.raises(ValueError):
        wrkload.parse("unable to connect to 127.0.0.1:1 Connection refused\n")
    without_latency = (SAMPLES / "wrk-sse-progress3.txt").read_text().replace("99%", "98%")
    with pytest.raises(ValueError, match="latency distribution"):
        wrkload.parse(without_latency)


def test_wrk_command_pins_one_thread_per_connection_at_most_and_passes_the_script_arguments() -> None:
    command = wrkload.command("http://h/mcp", 1, 5, ["progress3", "{}", '"progressToken":"p"'], threads=2)
    assert command[:5] == ["wrk", "-t1", "-c1", "-d5s", f"--timeout={wrkload.TIMEOUT}"]
    assert "--latency" in command and command[command.index("-s") + 1] == str(wrkload.SCRIPT)
    assert command[-5:] == ["http://h/mcp", "--", "progress3", "{}", '"progressToken":"p"']


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
@pytest.mark.anyio
async def test_wrk_script_sends_calls_lists_and_sse_calls_a_real_server_answers() -> None:
    os.environ.pop("MCPCORE_BENCH_ASYNC", None)
    server = load_target(str(ROOT / "benchmarks" / "servers" / "mcpcore_bench.py"))
    async with running(server) as http:
        url = f"http://127.0.0.1:{http.port}/mcp"
        for script_args in (["echo", '{"text":"hello"}'], ["tools/list"], ["progress3", "{}", '"progressToken":"p"']):
            with anyio.fail_after(30):
                done = await anyio.run_process(wrkload.command(url, 2, 1, script_args))
            figures = wrkload.parse(done.stdout.decode())
            assert figures["requests"] > 0 and figures["errors"] == 0, script_args


# per-round ratios and their spread


def test_each_round_starts_with_the_next_server_so_none_always_runs_first() -> None:
    servers = [compare.mcpcore(name, "mcpcore", "async") for name in ("a", "b", "c")]
    orders = [[server.label for server in compare.in_turn(servers, round_number)] for round_number in (1, 2, 3, 4)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert compare.in_turn([], 2) == []


def test_ratios_pair_rounds_and_drop_the_rounds_where_either_side_failed() -> None:
    runs = [{"rps": 80.0}, compare.failed("did not start"), {"rps": 90.0}, {"rps": 70.0}]
    ceiling = [{"rps": 100.0}, {"rps": 100.0}, {"rps": 0.0}, {"rps": 140.0}]
    assert compare.ratios(runs, ceiling) == [0.8, 0.5]
    assert compare.ratios([{"p99_ms": 3.0}], [{"p99_ms": 2.0}], "p99_ms") == [1.5]
    assert compare.values(runs) == [80.0, 90.0, 70.0]


def test_spread_is_the_median_then_the_lowest_and_highest_round() -> None:
    assert compare.spread([0.81, 0.74, 0.78]) == "0.78 (0.74–0.81)"
    assert compare.spread([0.5]) == "0.50"
    assert compare.spread([]) == "—"
    assert compare.spread([40000.0, 52000.0], "{:,.0f}") == "46,000 (40,000–52,000)"


def test_a_target_is_judged_on_the_median_and_unmeasured_when_nothing_was() -> None:
    assert compare.check("t", [0.8, 0.95, 0.92], lambda r: r >= 0.9) == ("t", "0.92x (0.80x–0.95x)", True)
    assert compare.check("t", [], lambda r: r >= 0.9)[2] is None


def test_failures_keep_only_the_last_line_of_a_traceback() -> None:
    assert compare.failed("Traceback …\n  File x\nRuntimeError: no port\n") == {"failed": "RuntimeError: no port", "errors": 1}


def fake_results(connections: tuple[int, ...]) -> dict:
    """A whole run's results with made-up figures, shaped as compare.py keeps them."""
    def http_run(rps: float) -> dict:
        return {"rps": rps, "p50_ms": 1000 / rps, "p99_ms": 3000 / rps, "errors": 0}

    def stdio_run(rate: float) -> dict:
        return {"lockstep_rps": rate, "pipelined_rps": rate * 5, "lockstep_errors": 0, "pipelined_errors": 0,
                "cold_start_s": 0.12, "idle_rss_kib": 24000, "driver": "compiled"}

    http_labels = [s.label for s in compare.http_servers(uvloop=True)]
    worker_labels = [s.label for s in compare.worker_servers()]
    stdio_labels = [s.label for s in compare.stdio_servers(uvloop=True)]
    return {
        "http": {
            "scale": {label: {c: [http_run(1000.0 * (i + 1)), http_run(1100.0 * (i + 1))] for c in connections}
                      for i, label in enumerate(http_labels)},
            "workers": {label: {c: [http_run(500.0 * (i + 1))] * 2 for c in connections} for i, label in enumerate(worker_labels)},
            "scenarios": {name: [http_run(900.0), compare.failed("probe answered 500")] for name in compare.SCENARIOS},
        },
        "stdio": {
            "runs": {label: [stdio_run(10000.0 + i), stdio_run(11000.0 + i)] for i, label in enumerate(stdio_labels)},
            "leak": {label: {"rss_after_first_kib": 25000, "rss_after_total_kib": 25600} for label in stdio_labels
                     if label.startswith("mcpcore")},
        },
        "started": "2026-12-01 10:00", "finished": "2026-12-01 10:30", "load_average": ("0.10 0.20 0.30", "1.00 0.50 0.40"),
    }


def test_the_report_carries_generators_load_spreads_targets_and_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "versions", lambda uvloop: "mcpcore 0.1.0")  # no venvs needed
    args = argparse.Namespace(rounds=2, duration=5, warmup=1, uvloop=True, leak_total=200000)
    text = compare.report(compare.Harness(args, None), fake_results((1, 64)), "scale.svg")
    assert "Python fallback load generator — may be the bottleneck" in text
    assert "the compiled driver `benchmarks/stdiodrive.c`" in text
    assert "0.10 0.20 0.30 at the start, 1.00 0.50 0.40 at the end" in text
    assert "![req/s by connections, one line per server](scale.svg)" in text
    assert "| mcpcore (sync echo) | 2,100 | 2.00 (2.00–2.00) |" in text  # 2,000 and 2,200 over 1,000 and 1,100
    assert "| HTTP sync echo >= 0.9x async echo at 256 connections | — | not measured |" in text
    assert "| HTTP scenario tools/list, 50 tools, round 2 | probe answered 500 |" in text
    assert "| stdio async pipelined >= 75,000 req/s |" in text and "--instructions" in text
    counted = {**fake_results((64,)), "instructions": {"http-echo": 50000, "stdio-echo": 40000, "stdio-sync-echo": 60000,
                                                       "stdio-floor": 20000, "http-ceiling": 25000}}
    wrk_text = compare.report(compare.Harness(args, "wrk 4.1.0"), counted, "scale.svg")
    assert "HTTP: wrk (wrk 4.1.0), one thread pinned to CPU 1" in wrk_text and "fallback load generator" not in wrk_text
    assert "| http-echo | 50,000 | 2.00 x http-ceiling |" in wrk_text and "| stdio-echo | 40,000 | 2.00 x stdio-floor |" in wrk_text
    assert "| stdio-sync-echo | 60,000 | 3.00 x stdio-floor |" in wrk_text and "| stdio-floor | 20,000 |  |" in wrk_text


# the scale chart


def test_scale_chart_is_well_formed_svg_with_one_polyline_and_legend_entry_per_server() -> None:
    series = {"ceiling": [(1.0, 4000.0), (16.0, 8000.0), (1000.0, 7000.0)], "mcpcore <async>": [(1.0, 3000.0), (1000.0, 6000.0)],
              "peer & co": [(16.0, 900.0)]}
    root = ElementTree.fromstring(svgchart.line_chart(series, "HTTP echo", "connections (log scale)", "req/s"))
    lines = root.findall(f"{SVG}polyline")
    assert root.tag == f"{SVG}svg" and len(lines) == 3
    assert [line.find(f"{SVG}title").text for line in lines] == list(series)
    texts = [element.text for element in root.iter(f"{SVG}text")]
    assert {"ceiling", "mcpcore <async>", "peer & co", "connections (log scale)", "req/s", "HTTP echo"} <= set(texts)
    assert {"1", "16", "1,000"} <= set(texts) and "10,000" in texts  # a tick per measured x; y up to a round number


def test_scale_chart_x_axis_is_logarithmic_and_y_grows_upwards() -> None:
    root = ElementTree.fromstring(svgchart.line_chart({"s": [(1.0, 0.0), (10.0, 50.0), (100.0, 100.0)]}, "t", "x", "y"))
    points = [tuple(map(float, pair.split(","))) for pair in root.find(f"{SVG}polyline").get("points").split()]
    (x1, y1), (x10, y10), (x100, y100) = points
    assert x10 - x1 == pytest.approx(x100 - x10, abs=0.2) and x1 < x10 < x100
    assert y1 > y10 > y100


def test_every_scale_chart_series_is_drawn_in_a_style_of_its_own_with_its_legend_under_the_plot() -> None:
    series = {f"server number {index} with a long label (async echo)": [(1.0, 100.0 * index), (64.0, 50.0)]
              for index in range(len(svgchart.COLOURS) + 3)}
    root = ElementTree.fromstring(svgchart.line_chart(series, "t", "x", "y"))
    styles = [(line.get("stroke"), line.get("stroke-dasharray")) for line in root.findall(f"{SVG}polyline")]
    assert len(set(styles)) == len(series)
    width = float(root.get("width"))
    axis_bottom = max(float(line.get("y2")) for line in root.findall(f"{SVG}line") if line.get("stroke") == "black")
    legend = [text for text in root.iter(f"{SVG}text") if text.text in series]
    assert len(legend) == len(series) and all(float(text.get("y")) > axis_bottom for text in legend)
    assert len({text.get("x") for text in legend}) == 2  # two columns: the plot keeps the chart's width
    assert all(float(text.get("x")) + svgchart.CHAR_WIDTH * len(text.text) <= width for text in legend)


def test_the_scale_chart_redraws_from_the_reports_own_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "versions", lambda uvloop: "mcpcore 0.1.0")
    args = argparse.Namespace(rounds=2, duration=5, warmup=1, uvloop=True, leak_total=200000)
    results = fake_results((1, 64))
    results["http"]["scale"]["FastMCP 4.2.3"][64] = [compare.failed("did not start")] * 2
    text = compare.report(compare.Harness(args, None), results, "scale.svg")
    reported = compare.reported_series(text)
    assert reported == {label: [(c, round(y)) for c, y in line] for label, line in compare.scale_series(results["http"]).items()}
    assert reported["FastMCP 4.2.3"] == [(1.0, 8400.0)]  # the failed slot is left out, not drawn as zero


def test_nice_ceiling_rounds_up_to_one_two_or_five_times_a_power_of_ten() -> None:
    assert [svgchart.nice_ceiling(v) for v in (0, 7, 8476, 12000, 50000)] == [1.0, 10, 10000, 20000, 50000]


# the compiled stdio driver


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_stdiodrive_builds_and_counts_every_answer_of_a_real_server(tmp_path: Path) -> None:
    binary = stdiobench.build_driver(tmp_path / "stdiodrive")
    assert binary is not None and os.access(binary, os.X_OK)
    built = binary.stat().st_mtime
    assert stdiobench.build_driver(binary) == binary and binary.stat().st_mtime == built  # not rebuilt when current
    server = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py")]
    rates = stdiobench.compiled_rates(binary, server, None, 300)
    assert rates["driver"] == "compiled" and rates["lockstep_errors"] == 0 and rates["pipelined_errors"] == 0
    assert rates["lockstep_rps"] > 0 and rates["pipelined_rps"] > 0
    done = subprocess.run([str(binary), "pipelined", "200", "1", "--", *server], input="lockstep 100 500\n",
                          capture_output=True, text=True, check=True, timeout=120)
    assert [json.loads(line)["answers"] for line in done.stdout.splitlines()] == [200, 100]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_stdiodrive_counts_error_answers_and_missing_ones(tmp_path: Path) -> None:
    binary = stdiobench.build_driver(tmp_path / "stdiodrive")
    assert binary is not None
    # Answers the first ten lines, every other one with an error, then closes its stdout and reads on.
    server = ("import os, sys\n"
              "for i, _ in enumerate(sys.stdin):\n"
              "    if i < 10:\n"
              "        os.write(1, b'{\"error\":{\"code\":1}}\\n' if i % 2 else b'{\"result\":{}}\\n')\n"
              "    if i == 9:\n"
              "        os.close(1)\n")
    done = subprocess.run([str(binary), "pipelined", "20", "1", "--", sys.executable, "-c", server],
                          capture_output=True, text=True, check=True, timeout=60)
    figures = json.loads(done.stdout)
    assert figures["answers"] == 10 and figures["errors"] == 5 + 10  # five error answers, ten never answered


def test_the_shared_state_report_gives_same_round_ratios_and_survives_a_rewrite_of_results() -> None:
    def run(rps: float) -> dict:
        return {"rps": rps, "p99_ms": 9.0, "errors": 0}

    found = {"1 process": [run(100), run(200)], "1 process, --redis": [run(90), run(220)],
             "--workers 2": [run(150), run(150)], "--workers 2, --redis": [run(75), run(150)]}
    sessions = {"1 process": [0.5, 1.0], "1 process, --redis": [0.6, 1.5], "2 processes, --redis, alternating": [1.0, 1.0]}
    text = sharedstate.report(found, sessions, [1.0, 2.0, 3.0, 10.0], rounds=2, seconds=5)
    assert "| 1 process, --redis | 155 | 9.0 | 1.00 (0.90–1.10) |" in text  # ratios per round: 0.9 and 1.1
    assert "| 1 process, --redis | 1.050 (0.600–1.500) | 1.35 (1.20–1.50) |" in text  # 0.6/0.5 and 1.5/1.0
    assert "| 2 processes, --redis, alternating | 1.000 (1.000–1.000) | 1.50 (1.00–2.00) |" in text
    assert "| --workers 2, --redis | 112 | 9.0 | 0.75 (0.50–1.00) |" in text
    assert "p50 2.50 ms, p99 10.00 ms, max 10.00 ms" in text
    page = "# results\n\nsome table\n\n" + text
    assert compare.shared_section(page) == text and compare.shared_section("# results") == ""


def test_an_instruction_regression_is_judged_against_the_reference_when_both_runs_have_it() -> None:
    from instructions import regressed

    then = {"http-ceiling": 500_000, "http-echo": 750_000, "stdio-echo": 170_000}
    # A slower build of CPython: everything dearer by 10%, the ratio to the ceiling unchanged.
    assert regressed({"http-ceiling": 550_000, "http-echo": 825_000}, then, 0.03) == []
    # The MCP layer dearer: 800,000 / 500,000 = 1.6x against 1.5x.
    (line,) = regressed({"http-ceiling": 500_000, "http-echo": 800_000}, then, 0.03)
    assert line.startswith("http-echo costs 1.600x http-ceiling, over 1.500x (+6.7%)")
    # No reference measured: judged in instructions.
    assert regressed({"stdio-echo": 175_000}, then, 0.03) == []
    (line,) = regressed({"stdio-echo": 180_000}, then, 0.03)
    assert line.startswith("stdio-echo costs 180,000 per request, over 170,000")
    assert regressed({"http-sync-echo": 10**9}, then, 0.03) == []  # not in the baseline: nothing to judge


@pytest.mark.anyio
async def test_the_session_script_drives_one_real_session_with_ids_of_its_own() -> None:
    """Many connections in one 2025-era session: a repeated id in flight would be refused (400)."""
    import session_load

    os.environ["MCPCORE_BENCH_ASYNC"] = "1"
    try:
        server = load_target(str(ROOT / "benchmarks" / "servers" / "mcpcore_bench.py"))
    finally:
        os.environ.pop("MCPCORE_BENCH_ASYNC", None)
    async with running(server) as http:
        session_id, version = await anyio.to_thread.run_sync(session_load.open_session, http.port)
        assert version == "2025-11-25"
        command = wrkload.command(f"http://127.0.0.1:{http.port}/mcp", 8, 1, [session_id, version], threads=2,
                                  script=session_load.SESSION_SCRIPT)
        with anyio.fail_after(30):
            done = await anyio.run_process(command)
        figures = wrkload.parse(done.stdout.decode())
        assert figures["requests"] > 0 and figures["errors"] == 0


def test_the_session_summary_gives_medians_and_the_session_against_each_other_server_per_round() -> None:
    import session_load

    rates = {session_load.SESSION: (900.0, 1000.0, 1100.0), session_load.MODERN: (1000.0, 1000.0, 1000.0),
             session_load.SDK: (300.0, 250.0, 200.0)}
    runs = [{"server": label, "connections": 64, "round": r, "rps": rps, "errors": 0}
            for label, per_round in rates.items() for r, rps in enumerate(per_round)]
    row = session_load.summary(runs, [64], 3)["64"]
    assert row["median_rps"] == {session_load.SESSION: 1000.0, session_load.MODERN: 1000.0, session_load.SDK: 250.0}
    assert row[f"session / {session_load.MODERN}"] == [0.9, 1.0, 1.1]
    assert row[f"session / {session_load.SDK}"] == [3.0, 4.0, 5.5]
    assert row["errors"] == {session_load.SESSION: 0, session_load.MODERN: 0, session_load.SDK: 0}


def test_the_session_report_is_a_marked_section_that_a_compare_rewrite_keeps(tmp_path: Path) -> None:
    import session_load

    runs = [{"server": label, "connections": 64, "round": r, "rps": rps, "p99_ms": 2.0, "errors": 0}
            for label, rps in ((session_load.MODERN, 1000.0), (session_load.SESSION, 950.0), (session_load.SDK, 190.0),
                               (session_load.FASTMCP, 95.0)) for r in range(2)]
    result = {"machine": "m", "wrk": "w", "seconds": 5, "rounds": 2, "runs": runs, "summary": session_load.summary(runs, [64], 2)}
    section = session_load.report(result)
    assert "| 64 | 1,000 (2.0) | 950 (2.0) | 190 (2.0) | 95 (2.0) | 0.95 (0.95–0.95) | 5.00 (5.00–5.00) | 10.00 (10.00–10.00) | 0 |" in section
    page = "# results\n\n" + section + "\n" + compare.SHARED_START + "\nshared\n" + compare.SHARED_END + "\n"
    assert compare.marked_section(page, compare.SESSION_START, compare.SESSION_END) == section


def test_the_stream_memory_script_holds_live_streams_on_a_real_server_and_releases_them() -> None:
    import stream_memory

    found = stream_memory.measure(8)  # raises unless every held call streamed, then answered "done" once released
    assert found["count"] == 8
    assert list(found["rss_kib"]) == ["warm", "idle connections", "after one call each", "live streams", "streams ended"]
    assert all(isinstance(kib, int) and kib > 0 for kib in found["rss_kib"].values())


def test_every_piece_of_the_tools_call_path_runs_to_its_end_outside_an_event_loop() -> None:
    """What benchmarks/pieces.py counts under callgrind, each piece called once (no valgrind here)."""
    probe = "import pieces; found = pieces.pieces(); print(sorted(found)); [piece() for piece in found.values()]"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT / "benchmarks", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "'handle'" in done.stdout and "'toolcall'" in done.stdout


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_the_gateway_benchmark_drives_a_real_gateway_on_both_wires_and_reports_each_figure() -> None:
    """benchmarks/gateway.py's load on `mcpcore proxy` in front of the stdio bench server, briefly (no peers:
    their venvs are the benchmark's own)."""
    import gateway
    import procs

    port = procs.free_port()
    serve = [sys.executable, "-m", "mcpcore", "proxy", "--transport", "http", "--port", str(port), "--",
             sys.executable, "-m", "mcpcore", "run", compare.BENCH]
    with procs.listening(serve, port, env={"MCPCORE_BENCH_ASYNC": "1"}, cwd=str(ROOT)) as process:
        measured = {wire: gateway.drive(f"http://127.0.0.1:{port}/mcp", process.pid, wire, [1, 4], 1, 0)
                    for wire in (gateway.MODERN, gateway.SESSION)}
    for wire, runs in measured.items():
        assert [run.get("failed") for run in runs] == [None, None], wire
        assert all(run["requests"] > 0 and run["errors"] == 0 and run["cpu_us_per_call"] > 0 for run in runs), runs
    by_count = {wire: {"1": [runs[0]], "4": [runs[1]]} for wire, runs in measured.items()}
    result = {"started": "s", "finished": "f", "machine": "m", "wrk": "w", "versions": "v", "load_average": ["1", "1"],
              "rounds": 1, "seconds": 1, "warmup": 0, "connections": [1, 4],
              "runs": {gateway.GATEWAY: by_count, gateway.DIRECT: by_count}}  # the gateway against itself: ratios of 1
    section = gateway.report(result)
    assert section.startswith(gateway.START) and section.rstrip().endswith(gateway.END)
    assert f"| gateway {gateway.MODERN} ÷ {gateway.DIRECT} {gateway.MODERN} | 1.00 | 1.00 |" in section
    assert f"| {gateway.SESSION} | 0 | 0 |" in section  # no latency, no CPU time added to itself
    assert f"| {gateway.MCP_PROXY} | {gateway.SESSION} | — (—) | — (—) | 0 |" in section  # not measured, said so
