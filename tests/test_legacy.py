"""The pure parts of the 2025-era wire: negotiation, result shapes, request params, the session registry."""

from __future__ import annotations

import pytest

from mcpcore.legacy import _for_version, legacy_result, negotiate
from mcpcore.session import Session, Sessions
from mcpcore.wire import McpError


@pytest.mark.parametrize(("asked", "answered"), [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"), ("2026-07-28", "2025-11-25"), ("1.0", "2025-11-25"), (None, "2025-11-25"),
])
def test_negotiation_answers_a_supported_version_with_itself_and_anything_else_with_the_newest(asked: object, answered: str) -> None:
    assert negotiate(asked) == answered


def test_legacy_results_drop_2026_fields_and_structured_output_before_2025_06_18() -> None:
    result = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "_meta": {"x": 1}, "content": [], "structuredContent": {"a": 1}}
    assert legacy_result(result, "2025-06-18") == {"content": [], "structuredContent": {"a": 1}}
    assert legacy_result(result, "2025-03-26") == {"content": []}


def test_request_params_follow_the_version() -> None:
    form = {"mode": "form", "message": "m", "requestedSchema": {}}
    assert _for_version(form, "2025-06-18") == {"message": "m", "requestedSchema": {}}
    assert _for_version(form, "2025-11-25") == form
    url = _for_version({"mode": "url", "message": "m", "url": "https://example.com"}, "2025-11-25")
    other = _for_version({"mode": "url", "message": "m", "url": "https://example.com"}, "2025-11-25")
    assert url and other and len(url["elicitationId"]) >= 16 and url["elicitationId"] != other["elicitationId"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reserved_places_count_against_the_limit_and_abandon_frees_them() -> None:
    sessions = Sessions(2, 60, Clock())
    sessions.reserve(None)
    sessions.reserve(None)
    with pytest.raises(McpError, match="limit 2"):
        sessions.reserve(None)
    assert sessions.abandon(Session("failed")) is None  # nothing to forget without a store
    sessions.reserve(None)


def test_zero_places_means_no_sessions_with_a_reason() -> None:
    with pytest.raises(McpError, match="run one worker"):
        Sessions(0, 60, Clock()).reserve(None)


def test_idle_sessions_expire_unless_a_call_is_in_flight() -> None:
    clock = Clock()
    sessions = Sessions(10, 5, clock)
    idle, busy = Session("idle"), Session("busy")
    for session in (idle, busy):
        sessions.reserve(None)
        sessions.add(session)
    busy.calls[1] = object()  # type: ignore[assignment]
    clock.now = 6
    sessions.expire()
    assert sessions.get("idle") is None and idle.closed
    assert sessions.get("busy") is busy and not busy.closed


def test_a_session_delivers_only_responses_it_waits_for() -> None:
    session = Session("s")
    assert session.deliver({"jsonrpc": "2.0", "id": "mcpcore-1", "result": {}}) is False
    assert session.deliver({"jsonrpc": "2.0", "id": [1], "result": {}}) is False


def test_a_shared_sessions_copy_never_goes_back_to_an_older_state_of_its_record() -> None:
    from mcpcore.session import SessionRecord

    copy = Session("s")
    copy.version = "2025-11-25"
    copy.apply({"subscribe": "demo://a"}, revision=2)  # told by the process that made it
    copy.follow(SessionRecord("s", None, "2025-11-25", {}, {}, revision=1))  # a read that left Redis before it
    assert copy.changes.filter.uris == {"demo://a"} and copy.revision == 2
    copy.apply({"unsubscribe": "demo://a"}, revision=2)  # the same revision again: already reflected
    assert copy.changes.filter.uris == {"demo://a"}
    copy.follow(SessionRecord("s", None, "2025-11-25", {}, {}, True, "debug", frozenset({"demo://b"}), revision=3))
    assert (copy.initialized, copy.log_level, copy.changes.filter.uris, copy.revision) == (True, "debug", {"demo://b"}, 3)


def test_kept_events_resume_only_from_an_event_whose_successors_are_all_kept() -> None:
    from mcpcore.transports.resume import kept_after

    kept = [("t-s1.2", b"a", False), ("t-s2.1", b"", False), ("t-s1.3", b"b", False), ("t-s1.4", b"r", True)]
    assert kept_after(kept, "t-s1.1") == [("t-s1.2", b"a", False), ("t-s1.3", b"b", False), ("t-s1.4", b"r", True)]
    assert kept_after(kept, "t-s1.3") == [("t-s1.4", b"r", True)]
    assert kept_after(kept, "t-s1.4") == []  # after the response: nothing more
    assert kept_after(kept[2:], "t-s1.1") is None  # t-s1.2 left the store
    assert kept_after(kept, "t-s1.9") is None and kept_after(kept, "u-s1.2") is None  # never sent here, or anywhere


def test_subscribing_changes_the_followed_set_in_place_rather_than_copying_it() -> None:
    from mcpcore.subscriptions import LocalBus

    session = Session("s")
    session.open("2025-11-25", {}, {"resourcesListChanged": True}, LocalBus())
    followed = session.changes.filter.uris
    for n in range(1000):
        session.subscribe(f"demo://{n}", True)
    session.subscribe("demo://0", False)
    assert session.changes.filter.uris is followed and len(followed) == session.followed == 999  # never copied
