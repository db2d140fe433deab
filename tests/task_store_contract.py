"""The contract every `TaskStore` must keep, as a base class to subclass with a `task_store` fixture.

    class TestRedisTaskStore(TaskStoreContract):
        @pytest.fixture
        async def task_store(self):
            ...  # yield a fresh, empty store

Expiry is checked with explicit `now` values passed to `expire` (never by
sleeping); `get` reads the real clock, so records that must still be visible
are created now with TTLs of minutes.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import orjson
import pytest

from mcpcore.taskstore import TaskRecord, TaskStore, TooManyTasks

__all__ = ["TaskStoreContract", "make_record"]

MINUTE_MS = 60_000


def make_record(task_id: str = "task-1", principal: str | None = "alice", *, ttl_ms: int | None = 10 * MINUTE_MS,
                created_at: float | None = None, **fields: Any) -> TaskRecord:
    """A record as the Tasks extension stores one at creation (created now unless told)."""
    created = time.time() if created_at is None else created_at
    return TaskRecord(task_id=task_id, principal=principal, tool="work", arguments={"n": 1}, meta={"k": "v"},
                      created_at=created, updated_at=created, ttl_ms=ttl_ms, poll_interval_ms=500, **fields)


def append_key(key: str) -> Any:
    """A change that appends `key` to the record's `used_keys`."""
    def change(record: TaskRecord) -> TaskRecord:
        return record.changed(time.time(), used_keys=[*record.used_keys, key])

    return change


class TaskStoreContract:
    """The contract tests; a subclass provides a `task_store` fixture yielding a fresh store."""

    pytestmark = pytest.mark.anyio

    # -- create / get ----------------------------------------------------------

    async def test_a_created_record_is_found_by_get(self, task_store: TaskStore) -> None:
        record = make_record()
        await task_store.create(record)
        assert await task_store.get("task-1") == record

    async def test_creating_an_id_that_exists_is_refused_and_keeps_the_first_record(self, task_store: TaskStore) -> None:
        first = make_record("task-1", "alice")
        await task_store.create(first)
        with pytest.raises(ValueError, match="exists"):
            await task_store.create(make_record("task-1", "bob"))
        assert await task_store.get("task-1") == first
        assert await task_store.count("alice") == (1, 1) and await task_store.count("bob") == (1, 0)

    async def test_get_of_an_unknown_id_is_none(self, task_store: TaskStore) -> None:
        await task_store.create(make_record("task-1"))
        assert await task_store.get("task-2") is None

    async def test_create_of_an_existing_id_raises_and_keeps_the_first_record(self, task_store: TaskStore) -> None:
        first = make_record(principal="alice")
        await task_store.create(first)
        with pytest.raises(Exception):
            await task_store.create(make_record(principal="mallory"))
        assert await task_store.get("task-1") == first
        assert await task_store.count("mallory") == (1, 0)

    # -- limits ------------------------------------------------------------------

    @pytest.mark.parametrize(("limits", "room"), [({"max_tasks": 4}, 3), ({"max_tasks_per_principal": 3}, 3)],
                             ids=["in-all", "per-principal"])
    async def test_concurrent_creates_under_a_limit_store_exactly_the_room_left_and_refuse_the_rest(
            self, task_store: TaskStore, limits: dict[str, int], room: int) -> None:
        """The check and the write are one step: creates that all count before any writes would all pass."""
        await task_store.create(make_record("bob-1", "bob"))  # counts in all, not as alice's
        created: list[str] = []
        refused: list[int] = []

        async def create(n: int) -> None:
            await anyio.sleep(0)  # interleave the creators
            try:
                await task_store.create(make_record(f"alice-{n}", "alice"), **limits)
            except TooManyTasks as full:
                refused.append(full.limit)
            else:
                created.append(f"alice-{n}")

        async with anyio.create_task_group() as creators:
            for n in range(40):
                creators.start_soon(create, n)
        (limit,) = limits.values()
        assert len(created) == room and refused == [limit] * (40 - room)
        assert await task_store.count("alice") == (room + 1, room)
        assert [n for n in range(40) if await task_store.get(f"alice-{n}") is not None] == sorted(
            int(task_id.removeprefix("alice-")) for task_id in created)

    async def test_a_create_at_a_limit_names_it_and_changes_nothing_while_other_principals_go_on(
            self, task_store: TaskStore) -> None:
        await task_store.create(make_record("a1", "alice"), max_tasks=2, max_tasks_per_principal=1)
        with pytest.raises(TooManyTasks) as full:
            await task_store.create(make_record("a2", "alice"), max_tasks=2, max_tasks_per_principal=1)
        assert full.value.limit == 1 and await task_store.get("a2") is None
        await task_store.create(make_record("b1", "bob"), max_tasks=2, max_tasks_per_principal=1)
        with pytest.raises(TooManyTasks) as full:
            await task_store.create(make_record("c1", "carol"), max_tasks=2, max_tasks_per_principal=1)
        assert full.value.limit == 2 and await task_store.get("c1") is None
        assert await task_store.count("carol") == (2, 0)
        await task_store.delete("a1")
        await task_store.create(make_record("c1", "carol"), max_tasks=2, max_tasks_per_principal=1)  # room again

    # -- update ----------------------------------------------------------------

    async def test_update_applies_the_change_and_returns_before_and_after(self, task_store: TaskStore) -> None:
        record = make_record()
        await task_store.create(record)
        changed = await task_store.update("task-1", lambda r: r.changed(r.updated_at + 1, status="completed",
                                                                       result={"content": []}))
        assert changed is not None
        before, after = changed
        assert before == record
        assert (after.status, after.result, after.updated_at) == ("completed", {"content": []}, record.updated_at + 1)
        assert await task_store.get("task-1") == after

    async def test_update_whose_change_returns_none_leaves_the_record_and_returns_it_twice(self, task_store: TaskStore) -> None:
        record = make_record()
        await task_store.create(record)
        assert await task_store.update("task-1", lambda r: None) == (record, record)
        assert await task_store.get("task-1") == record

    async def test_update_of_an_unknown_id_returns_none_and_creates_nothing(self, task_store: TaskStore) -> None:
        assert await task_store.update("task-1", append_key("k")) is None
        assert await task_store.get("task-1") is None
        assert await task_store.count("alice") == (0, 0)

    async def test_concurrent_updates_of_one_record_lose_nothing(self, task_store: TaskStore) -> None:
        await task_store.create(make_record())
        seen: list[tuple[TaskRecord, TaskRecord]] = []

        async def append(n: int) -> None:
            await anyio.sleep(0)  # interleave the writers
            changed = await task_store.update("task-1", append_key(f"k{n}"))
            assert changed is not None
            seen.append(changed)

        async with anyio.create_task_group() as writers:
            for n in range(100):
                writers.start_soon(append, n)
        final = await task_store.get("task-1")
        assert final is not None
        assert sorted(final.used_keys) == sorted(f"k{n}" for n in range(100))
        assert all(after.used_keys[:-1] == before.used_keys for before, after in seen)  # each change saw the latest

    async def test_concurrent_updates_of_many_records_keep_them_apart(self, task_store: TaskStore) -> None:
        for n in range(20):
            await task_store.create(make_record(f"task-{n}"))

        async def append(n: int, key: str) -> None:
            await anyio.sleep(0)
            await task_store.update(f"task-{n}", append_key(key))

        async with anyio.create_task_group() as writers:
            for n in range(20):
                for key in ("a", "b", "c", "d", "e"):
                    writers.start_soon(append, n, key)
        for n in range(20):
            record = await task_store.get(f"task-{n}")
            assert record is not None and sorted(record.used_keys) == ["a", "b", "c", "d", "e"]

    # -- delete ----------------------------------------------------------------

    async def test_delete_forgets_the_record_and_ignores_unknown_ids(self, task_store: TaskStore) -> None:
        await task_store.create(make_record("task-1"))
        await task_store.create(make_record("task-2"))
        await task_store.delete("task-1")
        await task_store.delete("task-1")  # twice: ignored
        await task_store.delete("never-created")
        assert await task_store.get("task-1") is None
        assert await task_store.get("task-2") is not None
        assert await task_store.count("alice") == (1, 1)

    # -- expiry ----------------------------------------------------------------

    async def test_expire_removes_only_the_records_past_their_ttl(self, task_store: TaskStore) -> None:
        now = time.time()
        short, long, forever = (make_record("short", ttl_ms=MINUTE_MS, created_at=now),
                                make_record("long", ttl_ms=10 * MINUTE_MS, created_at=now),
                                make_record("forever", ttl_ms=None, created_at=now))
        for record in (short, long, forever):
            await task_store.create(record)
        assert await task_store.expire(now + 30) == []
        assert await task_store.expire(now + 120) == ["short"]
        assert await task_store.get("short") is None
        assert await task_store.get("long") == long and await task_store.get("forever") == forever
        assert await task_store.expire(now + 120) == []  # already gone: not reported again
        assert await task_store.expire(now + 3600) == ["long"]
        assert await task_store.expire(now + 10**9) == []
        assert await task_store.get("forever") == forever

    async def test_expire_counts_a_record_whose_ttl_ends_exactly_at_now(self, task_store: TaskStore) -> None:
        record = make_record(ttl_ms=MINUTE_MS)
        await task_store.create(record)
        assert record.expires_at is not None
        assert await task_store.expire(record.expires_at - 0.001) == []
        assert await task_store.expire(record.expires_at) == ["task-1"]

    async def test_get_hides_a_record_past_its_ttl_before_expire_runs(self, task_store: TaskStore) -> None:
        await task_store.create(make_record("stale", ttl_ms=1000, created_at=time.time() - 10))
        ancient = make_record("ancient", ttl_ms=None, created_at=0.0)
        await task_store.create(ancient)
        assert await task_store.get("stale") is None
        assert await task_store.get("ancient") == ancient

    async def test_expire_spares_a_record_created_again_under_a_deleted_ones_id(self, task_store: TaskStore) -> None:
        now = time.time()
        await task_store.create(make_record(ttl_ms=MINUTE_MS, created_at=now))
        await task_store.delete("task-1")
        again = make_record(ttl_ms=None, created_at=now)
        await task_store.create(again)
        assert await task_store.expire(now + 120) == []
        assert await task_store.get("task-1") == again

    @pytest.mark.parametrize(("old_ms", "new_ms", "gone"), [(MINUTE_MS, 10 * MINUTE_MS, []),
                                                              (10 * MINUTE_MS, MINUTE_MS, ["task-1"])])
    async def test_expire_follows_a_ttl_changed_by_update(self, task_store: TaskStore, old_ms: int, new_ms: int,
                                                          gone: list[str]) -> None:
        now = time.time()
        await task_store.create(make_record(ttl_ms=old_ms, created_at=now))
        await task_store.update("task-1", lambda r: r.changed(now, ttl_ms=new_ms))
        assert await task_store.expire(now + 120) == gone  # the ttlMs of a task MAY change over its life

    # -- count -----------------------------------------------------------------

    async def test_count_gives_all_and_per_principal_and_follows_create_delete_and_expire(self, task_store: TaskStore) -> None:
        now = time.time()
        assert await task_store.count("alice") == (0, 0)
        await task_store.create(make_record("a1", "alice", created_at=now))
        await task_store.create(make_record("a2", "alice", created_at=now))
        await task_store.create(make_record("b1", "bob", ttl_ms=MINUTE_MS, created_at=now))
        await task_store.create(make_record("n1", None, created_at=now))
        assert [await task_store.count(p) for p in ("alice", "bob", None, "nobody")] == [(4, 2), (4, 1), (4, 1), (4, 0)]
        await task_store.delete("a1")
        assert await task_store.count("alice") == (3, 1)
        assert await task_store.expire(now + 120) == ["b1"]
        assert await task_store.count("bob") == (2, 0)
        await task_store.delete("n1")
        assert await task_store.count(None) == (1, 0)

    async def test_update_changes_no_count(self, task_store: TaskStore) -> None:
        await task_store.create(make_record())
        await task_store.update("task-1", lambda r: r.changed(time.time(), status="cancelled"))
        assert await task_store.count("alice") == (1, 1)

    # -- records as JSON ---------------------------------------------------------

    @pytest.mark.parametrize("fields", [
        {},
        {"status": "input_required", "status_message": "waiting", "state": {"step": [1, {"deep": None}]},
         "input_requests": {"confirm.2": {"method": "elicitation/create", "params": {"mode": "form", "message": "Sure?",
                                                                                    "requestedSchema": {}}}},
         "asked": {"confirm.2": ["confirm", "elicitation"]}, "answers": {"first": {"action": "accept", "content": {}}},
         "kinds": {"first": "elicitation"}, "used_keys": ["confirm", "confirm.2"], "round": 3},
        {"status": "failed", "error": {"code": -32603, "message": "Internal error", "data": {"x": 1.5}}},
        {"status": "completed", "result": {"resultType": "complete", "content": [{"type": "text", "text": "é ✓"}]}},
    ], ids=["fresh", "input_required", "failed", "completed"])
    async def test_records_round_trip_through_json_unchanged(self, task_store: TaskStore, fields: dict[str, Any]) -> None:
        record = make_record(principal=None, ttl_ms=None, **fields)
        assert TaskRecord.from_json(orjson.loads(orjson.dumps(record.to_json()))) == record
        await task_store.create(record)
        assert await task_store.get("task-1") == record
