"""The soak script runs every phase against a real server, and fails on a server that leaks.

Tiny counts and a short header deadline keep each run to a few seconds; only the
script's own verdict (exit status, table, verdict line) is checked, never timing.
Beside it, an in-process server shows what the 2025-era phases judge, through the
running endpoint: a session keeps no resumable stream that nothing can resume.
"""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from conftest import ROOT, legacy
from http_client import HttpClient, SseStream, running
from process_group import run_in_own_group
from test_legacy_http import initialize, session_headers

sys.path.insert(0, str(ROOT / "benchmarks" / "servers"))

import soak_server  # noqa: E402

SOAK = [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--settle", "0.3", "--sample-interval", "0.1",
        "--header-timeout", "0.5", "--max-connections", "60", "--concurrency", "4"]
MODERN = {"calls": "1,000", "sse": "100", "disconnects": "100", "sockets": "60"}
SESSIONS = {"session": "3,000", "abandoned": "300", "resume": "300", "subscribe": "2,000"}  # the 2025-era phases
NONE_OF = [option for name in (*MODERN, *SESSIONS) for option in (f"--{name}", "0")]
LIMIT = 30  # seconds for the in-process session test: it takes well under one


def run_soak(*options: str) -> subprocess.CompletedProcess[str]:
    """Run the script in its own process group, killed afterwards with its server whatever happened."""
    return run_in_own_group([*SOAK, *options], stderr=subprocess.PIPE)


def table_rows(stdout: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): [cell.strip() for cell in cells] for cells in rows[1:]}


def counts(phases: dict[str, str]) -> list[str]:
    return [option for name, count in phases.items() for option in (f"--{name}", count.replace(",", ""))]


def test_a_short_soak_passes_every_phase_and_reports_it() -> None:
    result = run_soak(*counts(MODERN), *counts(SESSIONS))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = table_rows(result.stdout)
    assert list(rows) == [*MODERN, *SESSIONS]
    for name, count in {**MODERN, **SESSIONS}.items():
        assert rows[name][1:4] == [count, count, "0"] and rows[name][-1] == "ok", rows[name]
    assert result.stdout.splitlines()[-1].startswith("PASS: ")


def test_a_server_that_keeps_memory_per_call_fails_the_soak() -> None:
    leaky = str(ROOT / "tests" / "servers" / "leaky_soak_server.py")
    result = run_soak(*NONE_OF, "--server", leaky, "--calls", "3000")
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = result.stdout.splitlines()[-1]
    assert verdict.startswith("FAIL: calls: RSS grew") and "bound 2.0 MiB" in verdict, verdict
    assert list(table_rows(result.stdout)) == ["calls"]


STREAMED = 5  # calls whose answers stream: their events stay stored, so they can be resumed
PLAIN = 300  # requests answered with one JSON body: nothing to resume
CANCELLED = 5  # calls cancelled with notifications/cancelled once running: their progress event is stored


async def cancel_a_running_hang(client: HttpClient, http: object, session_id: str, request_id: int) -> None:
    """`hang` on a connection of its own, cancelled once its progress event shows it runs; its stream ends."""
    async with HttpClient.connect(http) as caller:
        stream = SseStream(caller, "tools/call", legacy=True)
        call = legacy("tools/call", request_id, name="hang", arguments={}, _meta={"progressToken": "soak"})
        await stream.open(call, session_headers(session_id))
        assert (await stream.next())["method"] == "notifications/progress"
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
        assert (await client.post(cancel, session_headers(session_id), legacy=True)).status == 202
        assert await stream.next() is None  # no response to a cancelled request


@pytest.mark.anyio
@pytest.mark.usefixtures("http_flavour")
async def test_a_2025_session_keeps_no_stream_that_nothing_can_resume() -> None:
    """After many requests in one session, its store holds only the streams a Last-Event-ID can still
    resume (those with events still stored: the streamed and the cancelled calls), not one per request."""
    async with running(soak_server.server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            session_id = await initialize(client)
            headers = session_headers(session_id)
            plain = (legacy("ping", 0), legacy("tools/list", 0), legacy("tools/call", 0, name="echo", arguments={"text": "x"}))
            for number in range(1, PLAIN + 1):
                reply = await client.post({**plain[number % 3], "id": number}, headers, legacy=True)
                assert reply.status == 200 and "result" in reply.json, reply.body
            for number in range(PLAIN + 1, PLAIN + STREAMED + 1):
                call = legacy("tools/call", number, name="notify", arguments={}, _meta={"progressToken": number})
                streamed = await client.post(call, headers, legacy=True)
                assert streamed.is_sse and streamed.response["result"]["content"][0]["text"] == "done", streamed.body
            for number in range(PLAIN + STREAMED + 1, PLAIN + STREAMED + CANCELLED + 1):
                await cancel_a_running_hang(client, http, session_id, number)
            census = soak_server.stream_census(http)
    assert census["sessions"] == 1 and census["unusable_streams"] == 0, census
    assert census["streams"] <= STREAMED + CANCELLED, census
