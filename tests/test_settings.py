"""`mcpcore run` settings from mcpcore.toml / pyproject.toml and MCPCORE_* variables, beneath the flags."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port


SERVER = 'from mcpcore import Server\nserver = Server("configured")\n'


def served_at(folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Start `mcpcore run ARGS` in `folder`, wait for its "serving ... at URL" line, stop it; the URL."""
    return re.search(r"serving 'configured' at (\S+)", banner(folder, *args, env=env)).group(1)  # type: ignore[union-attr]


def banner(folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Start `mcpcore run ARGS` in `folder`, wait for its "serving ..." line, stop it; the line."""
    command = [sys.executable, "-m", "mcpcore", "run", *args]
    process = subprocess.Popen(command, cwd=folder, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, **(env or {})})
    try:
        assert process.stderr is not None
        for line in process.stderr:  # the server runs until stopped: this loop ends at the line or at exit
            if "serving 'configured' at " in line:
                return line
        raise AssertionError(f"exited with {process.wait()} without serving")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_the_flags_beat_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    in_file, in_env, on_line = free_port(), free_port(), free_port()
    (tmp_path / "mcpcore.toml").write_text(f'target = "server.py"\ntransport = "http"\nport = {in_file}\nlog-level = "info"\n')
    assert served_at(tmp_path) == f"http://127.0.0.1:{in_file}/mcp"
    assert served_at(tmp_path, env={"MCPCORE_PORT": str(in_env)}) == f"http://127.0.0.1:{in_env}/mcp"
    assert served_at(tmp_path, "--port", str(on_line), env={"MCPCORE_PORT": str(in_env)}) == f"http://127.0.0.1:{on_line}/mcp"


def test_pyproject_tool_table_and_list_settings(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    port = free_port()
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "x"\n\n[tool.mcpcore]\ntarget = "server.py"\ntransport = "http"\nport = {port}\n'
        'path = "/api"\nallow_host = ["mcp.example.com"]\nlog_level = "info"\n')
    assert served_at(tmp_path) == f"http://127.0.0.1:{port}/api"


@pytest.mark.parametrize(("setting", "env", "flag"), [
    ("stateless = true\n", {}, ()),
    ("", {"MCPCORE_STATELESS": "yes"}, ()),
    ("stateless = false\n", {}, ("--stateless",)),
])
def test_an_on_off_option_from_the_file_the_environment_or_the_line(
        tmp_path: Path, setting: str, env: dict[str, str], flag: tuple[str, ...]) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "mcpcore.toml").write_text(f'target = "server.py"\ntransport = "http"\nport = {free_port()}\n'
                                           f'log_level = "info"\n{setting}')
    assert "(stateless: 2025-era clients get no sessions; no HTTP+SSE)" in banner(tmp_path, *flag, env=env)
    off = banner(tmp_path, env={"MCPCORE_STATELESS": "off"})
    assert "stateless" not in off


@pytest.mark.parametrize(("content", "env", "message"), [
    ('target = "server.py"\nstateless = "sometimes"\n', {}, "mcpcore.toml: stateless: 'sometimes' is not valid"),
    ('target = "server.py"\n', {"MCPCORE_STATELESS": "2"}, "MCPCORE_STATELESS: '2' is not valid"),
    ('target = "server.py"\nprot = 1\n', {}, "mcpcore.toml: unknown setting 'prot'"),
    ('target = "server.py"\nport = "eighty"\n', {}, "mcpcore.toml: port: 'eighty' is not valid (expected a whole number)\n"),
    ('target = "server.py"\n', {"MCPCORE_MAX_CONNECTIONS": "many"},
     "MCPCORE_MAX_CONNECTIONS: 'many' is not valid (expected a whole number)\n"),
    ('target = "server.py"\ngrace_period = "soon"\n', {}, "mcpcore.toml: grace_period: 'soon' is not valid (expected a number)\n"),
    ('target = "server.py"\ntransport = "carrier-pigeon"\n', {},
     "mcpcore.toml: transport: 'carrier-pigeon' is not valid (choose from stdio, http)"),
    ('target = "server.py"\n', {"MCPCORE_TRANSPORT": "htpp"}, "MCPCORE_TRANSPORT: 'htpp' is not valid (choose from stdio, http)"),
    ('target = "server.py"\nlog_format = "xml"\n', {}, "mcpcore.toml: log_format: 'xml' is not valid (choose from text, json)"),
    ('', {}, "run needs a TARGET"),
])
def test_a_bad_setting_is_refused_naming_its_source(tmp_path: Path, content: str, env: dict[str, str], message: str) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "mcpcore.toml").write_text(content)
    done = subprocess.run([sys.executable, "-m", "mcpcore", "run"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_workers_from_the_file_start_once(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    port = free_port()
    (tmp_path / "mcpcore.toml").write_text(f'target = "server.py"\ntransport = "http"\nport = {port}\nworkers = 2\n'
                                           'log_level = "info"\n')
    command = [sys.executable, "-m", "mcpcore", "run"]
    process = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "2 workers serving" in line:
                break
        assert any("2 workers serving" in line for line in lines), lines
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        _, rest = process.communicate(timeout=30)
    assert "workers serving" not in rest  # no worker started workers of its own
