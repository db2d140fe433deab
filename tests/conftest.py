"""Shared fixtures: the anyio backend and request builders."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

VERSION = "2026-07-28"
LEGACY_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
ALL_VERSIONS = [VERSION, *LEGACY_VERSIONS]  # what discover and -32022 list


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test using `http_flavour` runs on the built-in server, then on the ASGI adapter under uvicorn;
    one marked `builtin_http` tests what uvicorn does in its place (its sockets, limits, shutdown), so
    it runs on the built-in server alone."""
    if "http_flavour" in metafunc.fixturenames:
        builtin_only = metafunc.definition.get_closest_marker("builtin_http") is not None
        metafunc.parametrize("http_flavour", ["h11"] if builtin_only else ["h11", "asgi"], indirect=True)


@pytest.fixture
def http_flavour(request: pytest.FixtureRequest) -> Any:
    """Which server `http_client.running` starts (see `pytest_generate_tests`)."""
    import http_client

    http_client.flavour = request.param
    yield request.param
    http_client.flavour = "h11"


def meta(**extra: Any) -> dict[str, Any]:
    """A valid request `_meta`; keyword arguments are added to it."""
    base: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpcore-tests", "version": "0"},
    }
    base.update(extra)
    return base


def request(method: str, request_id: Any = 1, _meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    """A 2026-07-28 request with a valid `_meta` unless one is given."""
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": _meta or meta()}}


def tool_call(request_id: Any, name: str, **arguments: Any) -> dict[str, Any]:
    """A 2026-07-28 `tools/call` request for tool `name` with these arguments."""
    return request("tools/call", request_id, name=name, arguments=arguments)


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now (for servers that bind it themselves)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def legacy(method: str, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    """A 2025-era request: no `_meta` claim (the session negotiated the version)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        message["params"] = params
    return message


def _interop_package(name: str) -> Path:
    """The folder of npm package `name` in tests/interop/node_modules, where a first use installs everything
    tests/interop/package.json pins (with the machine's Node and npm)."""
    assert shutil.which("node") and shutil.which("npm"), "the interop tests with npm clients need Node.js and npm on PATH"
    interop = ROOT / "tests" / "interop"
    folder = interop / "node_modules" / name
    if not (folder / "package.json").exists():
        subprocess.run([shutil.which("npm"), "install", "--no-audit", "--no-fund", "--silent"], cwd=interop, check=True,
                       timeout=300)
    return folder


@pytest.fixture(scope="session")
def ts_client() -> list[str]:
    """The command running tests/interop/ts_client.mjs (the TypeScript SDK v1 client), installed on first use."""
    _interop_package("@modelcontextprotocol/sdk")
    return [shutil.which("node"), str(ROOT / "tests" / "interop" / "ts_client.mjs")]  # type: ignore[list-item]


@pytest.fixture(scope="session")
def inspector_cli() -> list[str]:
    """The command running the MCP Inspector's command line (`mcp-inspector --cli`), installed on first use."""
    import json

    folder = _interop_package("@modelcontextprotocol/inspector")
    launcher = json.loads((folder / "package.json").read_text())["bin"]["mcp-inspector"]
    return [shutil.which("node"), str(folder / launcher), "--cli"]  # type: ignore[list-item]
