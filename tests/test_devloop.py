"""`mcpcore dev` (restart on change) and `mcpcore config` (client snippets), run as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ROOT, free_port, request
from http_client import HttpClient
from stdio_client import StdioClient

SERVER = '''
from mcpcore import Server

server = Server("dev-demo")


@server.tool
def first() -> str:
    return "one"
'''
SECOND_TOOL = '''

@server.tool
def second() -> str:
    return "two"
'''


def touch_with(path: Path, text: str) -> None:
    path.write_text(text)
    later = time.time() + 2  # a new mtime even on coarse file-system clocks
    os.utime(path, (later, later))


async def tool_names(call: Any) -> list[str]:
    return [t["name"] for t in (await call())["result"]["tools"]]


@pytest.mark.anyio
async def test_dev_over_http_restarts_on_change_and_serves_the_new_code(tmp_path: Path) -> None:
    target = tmp_path / "server.py"
    target.write_text(SERVER)
    port = free_port()
    command = [sys.executable, "-m", "mcpcore", "dev", str(target), "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, start_new_session=True)
    http = type("At", (), {"port": port})

    try:
        async def names() -> list[str]:
            with anyio.fail_after(20):
                while True:
                    try:
                        async with HttpClient.connect(http) as client:  # type: ignore[arg-type]
                            reply = await client.post(request("tools/list"))
                            return [t["name"] for t in reply.json["result"]["tools"]]
                    except OSError:
                        await anyio.sleep(0.1)

        assert await names() == ["first"]
        touch_with(target, SERVER + SECOND_TOOL)
        with anyio.fail_after(20):
            while await names() != ["first", "second"]:
                await anyio.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert b"server.py changed; restarting" in stderr


@pytest.mark.anyio
async def test_dev_over_stdio_keeps_the_client_connected_across_a_restart(tmp_path: Path) -> None:
    target = tmp_path / "server.py"
    target.write_text(SERVER)
    command = [sys.executable, "-m", "mcpcore", "dev", str(target)]
    process = await anyio.open_process(command, cwd=tmp_path, start_new_session=True)
    client = StdioClient(process)
    try:
        assert await tool_names(lambda: client.call("tools/list", 1)) == ["first"]
        touch_with(target, SERVER + SECOND_TOOL)
        names: list[str] = []
        with anyio.fail_after(30):
            for attempt in range(2, 200):  # a request sent while the server restarts gets no answer: ask again
                await anyio.sleep(0.2)
                with anyio.move_on_after(2):
                    names = await tool_names(lambda: client.call("tools/list", attempt))
                if names == ["first", "second"]:
                    break
        await client.close_stdin()
        with anyio.fail_after(20):
            assert await client.wait() == 0
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


def config(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "mcpcore", "config", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def test_config_prints_the_snippet_with_this_interpreter_and_the_absolute_path(tmp_path: Path) -> None:
    shown = config(str(ROOT / "examples" / "echo_server.py"), "--client", "cursor", home=tmp_path, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    entry = json.loads(shown.stdout)["mcpServers"]["echo"]
    assert entry == {"command": sys.executable, "args": ["-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py")]}
    vscode = json.loads(config("examples/echo_server.py", "--client", "vscode", "--name", "mine", home=tmp_path, cwd=ROOT).stdout)
    assert vscode["servers"]["mine"]["type"] == "stdio"


def test_config_write_merges_into_the_clients_file_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = tmp_path / ".cursor" / "mcp.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}))
    written = config(str(ROOT / "examples" / "echo_server.py"), "--client", "cursor", "--write", home=tmp_path, cwd=tmp_path)
    assert written.returncode == 0 and str(settings) in written.stdout, written.stderr
    merged = json.loads(settings.read_text())
    assert merged["theme"] == "dark" and set(merged["mcpServers"]) == {"other", "echo"}
    settings.write_text("[1, 2]")
    refused = config(str(ROOT / "examples" / "echo_server.py"), "--client", "cursor", "--write", home=tmp_path, cwd=tmp_path)
    assert refused.returncode == 1 and "does not hold a JSON object" in refused.stderr and settings.read_text() == "[1, 2]"


def test_config_write_never_writes_through_a_symlink_planted_beside_the_file(tmp_path: Path) -> None:
    """A cloned project may ship `.vscode/mcp.json.mcpcore-tmp` (or any name) pointing at a file of the user's."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    project = tmp_path / "project"
    (project / ".vscode").mkdir(parents=True)
    settings = project / ".vscode" / "mcp.json"
    settings.write_text(json.dumps({"servers": {}}))
    settings.chmod(0o640)
    (project / ".vscode" / "mcp.json.mcpcore-tmp").symlink_to(victim)
    written = config(str(ROOT / "examples" / "echo_server.py"), "--client", "vscode", "--write", home=tmp_path, cwd=project)
    assert written.returncode == 0, written.stderr
    assert victim.read_text() == "precious\n"
    assert set(json.loads(settings.read_text())["servers"]) == {"echo"}
    assert settings.stat().st_mode & 0o777 == 0o640  # the file keeps its permissions
    assert sorted(p.name for p in settings.parent.iterdir()) == ["mcp.json", "mcp.json.mcpcore-tmp"]  # no temporary left


def test_config_write_removes_its_temporary_file_when_the_replace_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcpcore._cli import clientconfig

    def refuse(source: str, target: Any) -> None:
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(clientconfig.os, "replace", refuse)
    monkeypatch.chdir(tmp_path)
    assert clientconfig.configure(str(ROOT / "examples" / "echo_server.py"), True, "echo", "claude-code", True) == 1
    assert list(tmp_path.iterdir()) == []
    assert f"cannot write {tmp_path / '.mcp.json'}: [Errno 13] Permission denied" in capsys.readouterr().err
