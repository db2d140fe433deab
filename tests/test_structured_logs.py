"""Log records carry the call's facts; `--log-format json` writes them as JSON lines (a real stdio subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import request

SERVER = '''
from mcpcore import Server
from mcpcore.middleware import access_log

server = Server("logged", middleware=[access_log()])

@server.tool
def explode(reason: str) -> str:
    raise RuntimeError(reason)
'''


def test_json_lines_carry_request_id_method_tool_outcome_and_duration(tmp_path: Path) -> None:
    target = tmp_path / "logged.py"
    target.write_text(SERVER)
    call = request("tools/call", "req-7", name="explode", arguments={"reason": "disk full"})
    done = subprocess.run([sys.executable, "-m", "mcpcore", "run", str(target), "--log-format", "json"],
                          input=json.dumps(call) + "\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert json.loads(done.stdout)["result"]["isError"] is True
    records = [json.loads(line) for line in done.stderr.splitlines()]
    failure = next(r for r in records if r["logger"] == "mcpcore.tools")
    assert failure["level"] == "error" and "disk full" in failure["exception"]
    assert (failure["request_id"], failure["method"], failure["tool"]) == ("req-7", "tools/call", "explode")
    access = next(r for r in records if r["logger"] == "mcpcore.access")
    assert (access["request_id"], access["tool"], access["outcome"]) == ("req-7", "explode", "tool error")
    assert access["duration_ms"] >= 0 and access["time"].endswith("+00:00")
