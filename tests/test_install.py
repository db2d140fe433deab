"""The built wheel installs `mcpcore` and `mcpcore.transports`, and no top-level `transports`.

A wheel of this checkout goes into a fresh virtual environment (its runtime
dependencies come from the test environment through a `.pth` line, so no
network is needed); a user project with its own `transports` package beside it
then serves HTTP through `server.run("http")` and answers a real request.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import venv
import zipfile
from pathlib import Path

import anyio
import h11
import orjson
import pytest

from conftest import ROOT, request

USER_SERVER = """
import transports                      # the user's own package, not ours
assert transports.OWNER == "user", transports.__file__

from mcpcore import Server

server = Server("installed")


@server.tool
def echo(text: str) -> str:
    return text


server.run("http", port=0)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source")  # a copy: setuptools writes build/ beside what it builds
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("mcpcore", "transports"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(source)],
        check=True,
    )
    (built,) = out.glob("mcpcore-*.whl")
    return built


def test_the_wheel_holds_mcpcore_transports_and_no_top_level_transports(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "mcpcore/transports/http.py" in names and "mcpcore/transports/stdio.py" in names
    assert not [n for n in names if n.startswith("transports/")]
    top_level = next(n for n in names if n.endswith("top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).split() == [b"mcpcore"]


def test_the_wheel_holds_every_package_of_the_tree(wheel: Path) -> None:
    """A subpackage missing from pyproject's list installs nothing, and an installed `mcpcore` then fails to import."""
    names = set(zipfile.ZipFile(wheel).namelist())
    tree = [init.relative_to(ROOT) for top in ("mcpcore", "transports") for init in (ROOT / top).rglob("__init__.py")]
    installed = [str(Path("mcpcore") / init if init.parts[0] == "transports" else init) for init in tree]
    assert installed and [name for name in installed if name not in names] == []


def _fresh_venv(where: Path, wheel: Path) -> Path:
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    dependencies = {str(Path(module.__file__).resolve().parents[1]) for module in (anyio, h11, orjson)}  # type: ignore[arg-type]
    Path(site, "test_dependencies.pth").write_text("\n".join(sorted(dependencies)) + "\n")
    return python


def test_an_installed_wheel_serves_http_beside_a_user_package_named_transports(tmp_path: Path, wheel: Path) -> None:
    python = _fresh_venv(tmp_path / "venv", wheel)
    project = tmp_path / "project"
    (project / "transports").mkdir(parents=True)
    (project / "transports" / "__init__.py").write_text('OWNER = "user"\n')
    (project / "server.py").write_text(USER_SERVER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    process = subprocess.Popen([str(python), "server.py"], cwd=project, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        url = None
        for _ in range(50):  # the start-up lines, then the URL
            line = process.stderr.readline()
            if not line:
                break
            found = re.search(r"at (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "the server never printed its URL"
        message = request("tools/call", name="echo", arguments={"text": "from a wheel"})
        post = urllib.request.Request(url, data=orjson.dumps(message), method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo",
        })
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 only, never a proxy
        with direct.open(post, timeout=10) as reply:
            body = json.loads(reply.read())
        assert body["result"]["content"] == [{"type": "text", "text": "from a wheel"}]
        probe = "import importlib.util, mcpcore.transports.http as h; print(h.__file__, importlib.util.find_spec('transports'))"
        source, top_level = subprocess.run([str(python), "-c", probe], cwd=tmp_path, env=env, check=True,
                                           capture_output=True, text=True).stdout.split()
        assert source.startswith(str(tmp_path / "venv")) and top_level == "None", (source, top_level)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
