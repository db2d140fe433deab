"""Where tasks live: the `TaskRecord`, the `TaskStore` interface and the in-memory store.

A store keeps records by task id, creates one within the limits in one atomic
step (`create` checks them as it writes, so concurrent creates never pass them),
and applies every change as one atomic read-modify-write (`update` with a pure
function of the stored record), so two processes, or a tool finishing while a
client cancels, never lose each other's writes. Records are plain JSON values (`to_json` / `from_json`), so a store
may keep them anywhere; `MemoryTaskStore` keeps them in this process, which is
why several worker processes need a shared store. Every store passes the
contract suite in `tests/task_store_contract.py`.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

__all__ = ["MemoryTaskStore", "TaskRecord", "TaskStore", "TERMINAL", "TooManyTasks"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class TaskRecord:
    """One task: who owns it, what it runs, and where it stands (times are epoch seconds)."""

    task_id: str
    principal: str | None  # only its owner may see or touch it
    tool: str
    arguments: dict[str, Any]
    meta: dict[str, Any]  # the creating request's _meta: what the client declared
    created_at: float
    updated_at: float
    ttl_ms: int | None  # None: kept until deleted
    poll_interval_ms: int
    status: str = "working"
    status_message: str | None = None
    result: dict[str, Any] | None = None  # completed
    error: dict[str, Any] | None = None  # failed
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)  # outstanding, by key
    asked: dict[str, list[str]] = field(default_factory=dict)  # key → [the function's name for it, kind]
    answers: dict[str, Any] = field(default_factory=dict)  # the function's name → raw answer, for its next round
    kinds: dict[str, str] = field(default_factory=dict)  # the function's name → kind of what was answered
    state: Any = None  # what the function's last InputRequired carried
    used_keys: list[str] = field(default_factory=list)  # every key ever issued: keys are never reused
    round: int = 1

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires_at(self) -> float | None:
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000

    def expired(self, now: float) -> bool:
        """Whether its TTL has ended by `now`."""
        expires = self.expires_at
        return expires is not None and expires <= now

    def changed(self, now: float, **fields: Any) -> TaskRecord:
        """A copy with `fields` replaced and `updated_at` set to `now`."""
        return dataclasses.replace(self, updated_at=now, **fields)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskRecord:
        return cls(**data)


RecordChange = Callable[[TaskRecord], "TaskRecord | None"]  # the new record, or None to leave it as it is


class TooManyTasks(Exception):
    """A create refused: the store holds `limit` records already (in all, or of the record's principal)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the store holds {limit} tasks already")
        self.limit = limit


class TaskStore(Protocol):
    """What the Tasks extension needs from a store. All methods are coroutines; `update` is atomic."""

    async def create(self, record: TaskRecord, *, max_tasks: int | None = None,
                     max_tasks_per_principal: int | None = None) -> None:
        """Store a new record; when this returns, `get` finds it (from any process sharing the store).
        An id already stored raises `ValueError` and changes nothing. When the store holds `max_tasks`
        records, or `max_tasks_per_principal` of the record's principal (as `count` counts them; None:
        no limit), it raises `TooManyTasks` naming that limit and changes nothing. The check and the
        write are one atomic step: concurrent creates, from any processes, never pass a limit."""

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None when unknown or past its TTL."""

    async def update(self, task_id: str, change: RecordChange) -> tuple[TaskRecord, TaskRecord] | None:
        """Apply `change` atomically; (before, after) — equal when it changed nothing — or None when unknown."""

    async def delete(self, task_id: str) -> None:
        """Forget a record (unknown ids are ignored)."""

    async def expire(self, now: float) -> list[str]:
        """Delete the records whose TTL ended by `now`; their ids."""

    async def count(self, principal: str | None) -> tuple[int, int]:
        """How many records are stored: in all, and owned by `principal`."""


class MemoryTaskStore:
    """The in-process store: a dict, with a heap of expiry times (records are immutable, so
    handing them out is safe; `create` checks the limits and `update` runs its change without
    awaiting, so both are atomic; a heap entry is checked against the record when it comes due)."""

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._expiries: list[tuple[float, str]] = []
        self._owned: dict[str | None, int] = {}

    async def create(self, record: TaskRecord, *, max_tasks: int | None = None,
                     max_tasks_per_principal: int | None = None) -> None:
        if record.task_id in self._records:
            raise ValueError(f"task {record.task_id!r} exists")
        held = ((max_tasks, len(self._records)), (max_tasks_per_principal, self._owned.get(record.principal, 0)))
        for limit, count in held:  # no await from here to the write: atomic on the event loop
            if limit is not None and count >= limit:
                raise TooManyTasks(limit)
        self._records[record.task_id] = record
        self._owned[record.principal] = self._owned.get(record.principal, 0) + 1
        if record.expires_at is not None:
            heapq.heappush(self._expiries, (record.expires_at, record.task_id))

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        return None if record is None or record.expired(time.time()) else record  # expired: not yet swept

    async def update(self, task_id: str, change: RecordChange) -> tuple[TaskRecord, TaskRecord] | None:
        before = await self.get(task_id)
        if before is None:
            return None
        after = change(before) or before
        self._records[task_id] = after
        if after.expires_at is not None and after.expires_at != before.expires_at:
            heapq.heappush(self._expiries, (after.expires_at, task_id))  # the earlier entry is skipped when due
        return before, after

    async def delete(self, task_id: str) -> None:
        record = self._records.pop(task_id, None)
        if record is not None:
            self._owned[record.principal] -= 1
            if not self._owned[record.principal]:
                del self._owned[record.principal]

    async def expire(self, now: float) -> list[str]:
        gone = []
        while self._expiries and self._expiries[0][0] <= now:
            _, task_id = heapq.heappop(self._expiries)
            record = self._records.get(task_id)  # the entry may be stale: a TTL since changed, an id reused
            if record is not None and record.expired(now):
                await self.delete(task_id)
                gone.append(task_id)
        return gone

    async def count(self, principal: str | None) -> tuple[int, int]:
        return len(self._records), self._owned.get(principal, 0)
