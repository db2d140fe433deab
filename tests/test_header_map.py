"""The request header map (`exchange.header_map`): the same map with its decoded-value cache,
which is bounded and never holds a credential or a session id."""

from __future__ import annotations

import pytest

from mcpcore.transports._http import exchange
from mcpcore.transports._http.exchange import header_map


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange, "_DECODED", {})  # other tests' servers (each on its own port) fill it


def test_a_cached_header_maps_as_a_decoded_one() -> None:
    raw = [(b"Host", b"127.0.0.1:8000"), (b"Mcp-Name", b"echo"), (b"X-Tag", b"a"), (b"x-tag", b"b"),
           (b"Authorization", b"Bearer secret"), (b"Mcp-Session-Id", b"s1")]
    first, second = header_map(raw), header_map(raw)
    assert first == second == (
        {"host": "127.0.0.1:8000", "mcp-name": "echo", "x-tag": "a, b", "authorization": "Bearer secret",
         "mcp-session-id": "s1"},
        sum(len(name) + len(value) + 4 for name, value in raw), frozenset({"x-tag"}))
    kept = {value for _, value in exchange._DECODED}
    assert b"127.0.0.1:8000" in kept and b"echo" in kept
    assert not kept & {b"Bearer secret", b"s1", b"a", b"b"}


def test_the_cache_stays_within_its_bound_and_a_client_cannot_fill_it_for_good() -> None:
    for number in range(exchange._DECODED_MAX + 50):
        headers, _, _ = header_map([(b"mcp-name", f"tool_{number}".encode())])
        assert headers == {"mcp-name": f"tool_{number}"}
        assert len(exchange._DECODED) <= exchange._DECODED_MAX
    header_map([(b"mcp-name", b"echo")])
    assert (b"mcp-name", b"echo") in exchange._DECODED  # a full table started again: new values are kept


def test_a_long_value_is_decoded_each_time_not_kept() -> None:
    long = b"agent/" + b"x" * exchange._DECODED_LONGEST
    assert header_map([(b"user-agent", long)])[0] == {"user-agent": long.decode()}
    assert not exchange._DECODED
