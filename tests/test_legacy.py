"""The pure parts of the 2025-era wire: negotiation, result shapes, request params, the session registry."""

from __future__ import annotations

import pytest

from mcpcore._serving.legacy import _for_version, legacy_result, negotiate
from mcpcore._runtime.session import Session, Sessions
from mcpcore._wire.jsonrpc import McpError


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
    with pytest.raises(McpError, match="ask its operator for --stateless or a session limit"):
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
    from mcpcore._runtime.session import SessionRecord

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
    from mcpcore.transports._http.resume import kept_after

    kept = [("t-s1.2", b"a", False), ("t-s2.1", b"", False), ("t-s1.3", b"b", False), ("t-s1.4", b"r", True)]
    assert kept_after(kept, "t-s1.1") == [("t-s1.2", b"a", False), ("t-s1.3", b"b", False), ("t-s1.4", b"r", True)]
    assert kept_after(kept, "t-s1.3") == [("t-s1.4", b"r", True)]
    assert kept_after(kept, "t-s1.4") == []  # after the response: nothing more
    assert kept_after(kept[2:], "t-s1.1") is None  # t-s1.2 left the store
    assert kept_after(kept, "t-s1.9") is None and kept_after(kept, "u-s1.2") is None  # never sent here, or anywhere


def test_subscribing_changes_the_followed_set_in_place_rather_than_copying_it() -> None:
    from mcpcore._runtime.subscriptions import LocalBus

    session = Session("s")
    session.open("2025-11-25", {}, {"resourcesListChanged": True}, LocalBus())
    followed = session.changes.filter.uris
    for n in range(1000):
        session.subscribe(f"demo://{n}", True)
    session.subscribe("demo://0", False)
    assert session.changes.filter.uris is followed and len(followed) == session.followed == 999  # never copied


class RecordingSink:
    """What a connection holding a resumable stream was sent, as (kind, message) pairs."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.responded = False

    async def prime(self, event_id: str, retry_ms: int) -> None:
        self.sent.append(("prime", b""))

    async def notify(self, message: bytes, event_id: str) -> None:
        self.sent.append(("event", message))

    async def respond(self, message: bytes, error_code: int | None = None, event_id: str | None = None) -> None:
        self.sent.append(("response", message))
        self.responded = True

    async def replay(self, events: list[tuple[bytes, str]], final: tuple[bytes, str] | None) -> None:
        self.sent += [("event", message) for message, _ in events]
        if final is not None:
            await self.respond(final[0])

    async def finish(self) -> None:
        self.sent.append(("finish", b""))


@pytest.mark.anyio
async def test_a_resumption_while_the_response_is_kept_in_the_shared_store_gets_it_once() -> None:
    import anyio

    from mcpcore.transports._http.resume import StreamStore

    written = anyio.Event()
    keeping, release = anyio.Event(), anyio.Event()

    async def keep(event: tuple[str, bytes, bool]) -> None:  # the shared store: slow to take the response
        if event[2]:
            keeping.set()
            await release.wait()
            written.set()

    store = StreamStore(shared=keep)
    first, resumed = RecordingSink(), RecordingSink()
    stream = store.open(first, lambda: None)  # type: ignore[arg-type]
    await stream.notify(b"progress")
    async with anyio.create_task_group() as group:
        group.start_soon(stream.respond, b"result")
        with anyio.fail_after(5):
            await keeping.wait()  # the response is recorded, and being written to the shared store
            group.start_soon(stream.resume, f"{stream.stream_id}.2", resumed)  # after the progress event
            await anyio.sleep(0)
            release.set()
            await written.wait()
    assert resumed.sent == [("response", b"result")]
    assert first.sent == [("prime", b""), ("event", b"progress"), ("response", b"result")]
