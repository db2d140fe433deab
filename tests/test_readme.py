"""The README's Python example (and the guide's asking example) runs and does what the text says."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from conftest import ROOT, meta, request
from memory import error_of, result_of

pytestmark = pytest.mark.anyio


def sample(page: str, index: int) -> str:
    """Python example number `index` of `page` (README.md, docs/...)."""
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)[index]


def sample_server(page: str, index: int):
    """Run Python example number `index` of `page` and return its `server`."""
    namespace: dict = {}
    exec(compile(sample(page, index), page, "exec"), namespace)
    return namespace["server"]


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    (command,) = re.findall(r"Run the tests:\n\n```sh\n(.+)\n```", readme)
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert f"{command} || exit 1" in ci_lines  # run as written; its failure (at any step) fails CI


async def test_readme_example_server_answers_as_documented() -> None:
    server = sample_server("README.md", 0)
    tools = await result_of(server, request("tools/list"))
    assert [t["name"] for t in tools["tools"]] == ["forecast", "slow_report", "raw", "season_outlook"]
    called = await result_of(server, request("tools/call", name="forecast", arguments={"city": "Paris"}))
    assert called["structuredContent"] == {"city": "Paris", "high": 21.5, "unit": "c"}
    bad = await result_of(server, request("tools/call", name="forecast", arguments={"city": "Paris", "days": "two"}))
    assert bad["isError"] and "days: expected integer, got string (days: the string 'two' does not read as integer)" \
        in bad["content"][0]["text"]
    atlantis = await result_of(server, request("tools/call", name="forecast", arguments={"city": "Atlantis"}))
    assert atlantis["isError"] and atlantis["content"][0]["text"] == "no weather under the sea"  # a ToolError: its text as is
    today = await result_of(server, request("resources/read", uri="weather://city/Oslo/today"))
    assert today["contents"][0]["text"] == "Sunny in Oslo"
    done = await result_of(
        server, request("completion/complete", ref={"type": "ref/prompt", "name": "plan_trip"}, argument={"name": "city", "value": "P"})
    )
    assert done["completion"]["values"] == ["Paris", "Prague"]
    trip = await result_of(server, request("prompts/get", name="plan_trip", arguments={"city": "Oslo", "days": "5"}))
    assert trip["messages"][0]["content"]["text"] == "Plan a 5-day trip to Oslo."
    bad_trip = await error_of(server, request("prompts/get", name="plan_trip", arguments={"city": "Oslo", "days": "five"}))
    assert bad_trip["code"] == -32602 and "days" in bad_trip["message"]


async def test_readme_example_runs_a_task_and_serves_its_custom_extension() -> None:
    from mcpcore import McpError
    from mcpcore.testing import Client

    server = sample_server("README.md", 0)
    async with Client(server) as plain:
        outlook = await plain.call_tool("season_outlook", {"city": "Oslo"})
        assert outlook.text == "A mild season in Oslo"  # no Tasks extension declared: the plain call
        with pytest.raises(McpError) as refused:
            await plain.request("com.example/units/convert", {"unit": "f", "value": 20})
        assert refused.value.code == -32021
    extensions = {"io.modelcontextprotocol/tasks": {}, "com.example/units": {}}
    async with Client(server, extensions=extensions) as client:
        announced = (await client.discover())["capabilities"]["extensions"]
        assert announced["com.example/units"] == {"systems": ["c", "f"]}
        handle = (await client.request("tools/call", {"name": "season_outlook", "arguments": {"city": "Oslo"}})).result
        assert handle["resultType"] == "task"
        for _ in range(200):
            task = (await client.request("tasks/get", {"taskId": handle["taskId"]})).result
            if task["status"] == "completed":
                break
            await anyio.sleep(0.01)
        assert task["result"]["content"][0]["text"] == "A mild season in Oslo"
        converted = await client.request("com.example/units/convert", {"unit": "f", "value": 20})
        assert converted.result["value"] == 68.0


async def test_readme_custom_extension_over_a_stdio_subprocess(tmp_path: Path) -> None:
    """The README's example as a file run by `mcpcore run`: its extension announced and served over real pipes."""
    import sys

    from mcpcore.testing import Client

    target = tmp_path / "weather.py"
    target.write_text(sample("README.md", 0))
    command = [sys.executable, "-m", "mcpcore", "run", str(target)]
    async with Client.stdio(command, cwd=str(ROOT), strict=True, extensions={"com.example/units": {}}) as client:
        with anyio.fail_after(20):
            announced = (await client.discover())["capabilities"]["extensions"]
            converted = await client.request("com.example/units/convert", {"unit": "f", "value": 20})
    assert announced["com.example/units"] == {"systems": ["c", "f"]} and converted.result["value"] == 68.0


async def test_guide_asking_example_elicits_or_falls_back_to_sampling() -> None:
    server = sample_server("docs/asking-the-user.md", 0)
    caps = "io.modelcontextprotocol/clientCapabilities"
    first = await result_of(server, request("tools/call", _meta=meta(**{caps: {"elicitation": {}}}), name="greet"))
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["name"]["method"] == "elicitation/create"
    retry = await result_of(
        server,
        request(
            "tools/call",
            _meta=meta(**{caps: {"elicitation": {}}}),
            name="greet",
            requestState=first["requestState"],
            inputResponses={"name": {"action": "accept", "content": {"name": "Ada"}}},
        ),
    )
    assert retry["content"][0]["text"] == "Hello, Ada!"
    sampled = await result_of(server, request("tools/call", _meta=meta(**{caps: {"sampling": {}}}), name="greet"))
    assert sampled["inputRequests"]["name"]["method"] == "sampling/createMessage"


def test_the_readmes_stdio_one_liner_answers() -> None:
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    (line, target) = re.findall(r"^echo '(\{.*\})' \| \.venv/bin/mcpcore run (\S+)$", readme, re.M)[0]
    done = subprocess.run([sys.executable, "-m", "mcpcore", "run", target], input=line + "\n", capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0 and '"text":"hi"' in done.stdout, done.stderr
