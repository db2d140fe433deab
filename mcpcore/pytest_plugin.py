"""An opt-in pytest plugin: put `pytest_plugins = ["mcpcore.pytest_plugin"]` in your conftest.py.

Define a `mcp_server` fixture that returns your `Server`; a test then takes
`mcp_client`, an entered `mcpcore.testing.Client` (async: mark the test
`@pytest.mark.anyio`, with anyio's pytest plugin), or `mcp_sync_client` for a
plain test function. Override `mcp_client_options` to pass `Client` options
(an era, callbacks, `strict=True`).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator

import pytest

from .testing import Client


@pytest.fixture
def mcp_client_options() -> dict[str, Any]:
    """Keyword arguments for `Client` (none by default)."""
    return {}


@pytest.fixture
async def mcp_client(mcp_server: Any, mcp_client_options: dict[str, Any]) -> AsyncIterator[Client]:
    async with Client(mcp_server, **mcp_client_options) as client:
        yield client


@pytest.fixture
def mcp_sync_client(mcp_server: Any, mcp_client_options: dict[str, Any]) -> Iterator[Any]:
    with Client(mcp_server, **mcp_client_options).sync() as client:
        yield client
