"""The soak script runs every phase against a real server, and fails on a server that leaks.

Tiny counts and a short header deadline keep each run to a few seconds; only the
script's own verdict (exit status, table, verdict line) is checked, never timing.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT
from process_group import run_in_own_group

SOAK = [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--settle", "0.3", "--sample-interval", "0.1",
        "--header-timeout", "0.5", "--max-connections", "60", "--concurrency", "4"]


def run_soak(*options: str) -> subprocess.CompletedProcess[str]:
    """Run the script in its own process group, killed afterwards with its server whatever happened."""
    return run_in_own_group([*SOAK, *options], stderr=subprocess.PIPE)


def table_rows(stdout: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): [cell.strip() for cell in cells] for cells in rows[1:]}


def test_a_short_soak_passes_every_phase_and_reports_it() -> None:
    result = run_soak("--calls", "1000", "--sse", "100", "--disconnects", "100", "--sockets", "60")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = table_rows(result.stdout)
    assert list(rows) == ["calls", "sse", "disconnects", "sockets"]
    for name, count in (("calls", "1,000"), ("sse", "100"), ("disconnects", "100"), ("sockets", "60")):
        assert rows[name][1:4] == [count, count, "0"] and rows[name][-1] == "ok", rows[name]
    assert result.stdout.splitlines()[-1].startswith("PASS: ")


def test_a_server_that_keeps_memory_per_call_fails_the_soak() -> None:
    leaky = str(ROOT / "tests" / "servers" / "leaky_soak_server.py")
    result = run_soak("--server", leaky, "--calls", "3000", "--sse", "0", "--disconnects", "0", "--sockets", "0")
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = result.stdout.splitlines()[-1]
    assert verdict.startswith("FAIL: calls: RSS grew") and "bound 2.0 MiB" in verdict, verdict
    assert list(table_rows(result.stdout)) == ["calls"]
