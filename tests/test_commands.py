"""The inner-loop commands (`mcpcore inspect`, `call`, `read`, `prompt`) as a user runs them: real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from conftest import ROOT

ECHO = str(ROOT / "examples" / "echo_server.py")
ASK = str(ROOT / "examples" / "ask_server.py")


def mcpcore(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpcore", *args], capture_output=True, text=True, input=stdin,
                          timeout=60, cwd=ROOT)


def test_inspect_lists_tools_with_their_arguments_resources_and_prompts() -> None:
    shown = mcpcore("inspect", ECHO)
    assert shown.returncode == 0, shown.stderr
    assert "tools (" in shown.stdout and "  echo  — Return the text unchanged." in shown.stdout
    assert "      text: string" in shown.stdout and "demo://readme" in shown.stdout and "summarize" in shown.stdout
    listed = orjson.loads(mcpcore("inspect", ECHO, "--json").stdout)
    assert [t["name"] for t in listed["tools"]][:2] == ["echo", "progress"]
    assert listed["tools"][0]["inputSchema"]["required"] == ["text"]


def test_inspect_asks_only_for_the_lists_the_server_offers() -> None:
    shown = mcpcore("inspect", ASK)  # tools and resources, no prompts
    assert shown.returncode == 0, shown.stderr
    assert "tools (2)" in shown.stdout and "resources (1)" in shown.stdout and "prompts" not in shown.stdout
    listed = mcpcore("inspect", ASK, "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(orjson.loads(listed.stdout)) == ["resourceTemplates", "resources", "server", "tools"]


def test_inspect_shows_choices_unions_and_lists_as_the_schema_gives_them() -> None:
    from mcpcore._cli.commands import _kind

    assert _kind({"enum": ["c", "f"], "default": "c"}) == '"c" | "f"'
    assert _kind({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert _kind({"type": "array", "items": {"type": "integer"}}) == "array of integer"
    assert _kind({"$ref": "#/$defs/Forecast"}) == "Forecast" and _kind({"const": 3}) == "3" and _kind({}) == "any"
    assert _kind({"type": ["string", "null"]}) == "string | null"


def test_call_prints_the_answer_and_progress_and_fails_on_an_error() -> None:
    echoed = mcpcore("call", ECHO, "echo", "text=hello there")
    assert echoed.returncode == 0 and echoed.stdout == "hello there\n", echoed.stderr
    stepped = mcpcore("call", ECHO, "progress")
    assert stepped.stdout == "done\n" and "progress 3/3: step 3 of 3" in stepped.stderr
    unknown = mcpcore("call", ECHO, "nope")
    assert unknown.returncode == 1 and "error -32602" in unknown.stderr
    malformed = mcpcore("call", ECHO, "echo", "text")
    assert malformed.returncode == 2 and "'text' is not key=value" in malformed.stderr


def test_call_asks_an_elicitation_on_the_terminal() -> None:
    answered = mcpcore("call", ASK, "greet", stdin="Ada\n")
    assert answered.returncode == 0 and answered.stdout == "Hello, Ada!\n", answered.stderr
    assert "What is your name?" in answered.stderr
    declined = mcpcore("call", ASK, "greet", stdin="\n")
    assert declined.stdout == "No problem, maybe another time.\n"


def test_read_and_prompt() -> None:
    assert mcpcore("read", ECHO, "demo://readme").stdout == "This server echoes text and reports progress.\n"
    got = mcpcore("prompt", ECHO, "summarize", "text=true")
    assert got.returncode == 0 and got.stdout == "[user] Summarize this in one sentence:\n\ntrue\n", got.stderr


def test_call_passes_text_as_typed_to_a_text_parameter() -> None:
    assert mcpcore("call", ECHO, "echo", "text=42").stdout == "42\n"
    assert mcpcore("call", ECHO, "echo", "text=true").stdout == "true\n"


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", [["inspect", ECHO], ["inspect", ECHO, "--json"], ["call", ECHO, "echo", "text=hi"],
                                     ["config", ECHO, "--client", "vscode"]])
def test_a_reader_that_left_is_no_traceback(command: list[str], buffered: bool) -> None:
    """`mcpcore inspect app.py | head -1`: the pipe's reader is gone before the listing is written (by print
    itself, unbuffered, or by the flush at exit)."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    if not buffered:
        environment["PYTHONUNBUFFERED"] = "1"
    reader, writer = os.pipe()
    os.close(reader)  # gone before anything is written: every write to the pipe fails
    try:
        ended = subprocess.run([sys.executable, "-m", "mcpcore", *command], stdout=writer, stderr=subprocess.PIPE,
                               text=True, timeout=60, cwd=ROOT, env=environment)
    finally:
        os.close(writer)
    assert ended.returncode == 1 and ended.stderr == ""


@pytest.mark.parametrize(("command", "missing"), [(["call", ECHO], "tool"), (["prompt", ECHO], "name")])
def test_a_missing_name_is_the_only_argument_said_to_be_required(command: list[str], missing: str) -> None:
    said = mcpcore(*command)
    assert said.returncode == 2 and said.stderr.endswith(f"error: the following arguments are required: {missing}\n")
