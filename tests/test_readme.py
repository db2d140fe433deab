"""The README's Python example runs and does what the README says."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT, request
from memory import result_of

pytestmark = pytest.mark.anyio


def readme_python() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "the README has a Python example"
    return "\n".join(blocks)


def test_readme_quick_start_commands_match_ci() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in readme


async def test_readme_example_server_answers_as_documented() -> None:
    namespace: dict = {}
    exec(compile(readme_python(), "README.md", "exec"), namespace)
    server = namespace["server"]
    tools = await result_of(server, request("tools/list"))
    assert [t["name"] for t in tools["tools"]] == ["forecast", "slow_report", "raw"]
    called = await result_of(server, request("tools/call", name="forecast", arguments={"city": "Paris"}))
    assert called["structuredContent"] == {"city": "Paris", "high": 21.5, "unit": "c"}
    bad = await result_of(server, request("tools/call", name="forecast", arguments={"city": "Paris", "days": "2"}))
    assert bad["isError"] and "days: expected integer, got string" in bad["content"][0]["text"]
    atlantis = await result_of(server, request("tools/call", name="forecast", arguments={"city": "Atlantis"}))
    assert atlantis["isError"] and "no weather under the sea" in atlantis["content"][0]["text"]
    today = await result_of(server, request("resources/read", uri="weather://city/Oslo/today"))
    assert today["contents"][0]["text"] == "Sunny in Oslo"
    done = await result_of(
        server, request("completion/complete", ref={"type": "ref/prompt", "name": "plan_trip"}, argument={"name": "city", "value": "P"})
    )
    assert done["completion"]["values"] == ["Paris", "Prague"]
