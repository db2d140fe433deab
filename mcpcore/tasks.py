"""The Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): a tool call answered with a handle.

Theory of operation. A tool registered with `task="optional"` or `task="required"`
is run as a task for a client that declared the extension on its request (the
2026-07-28 wire only); other clients get the ordinary synchronous call, or
`-32021` naming the extension when the tool requires it. The task is stored
before the reply (`TaskStore.create`), the reply is the flat `CreateTaskResult`,
and the function runs in the background of the server's lifespan, so a closed
response stream never stops it.

A task runs in rounds, like an MRTR call: a round ends in a result (`completed`,
an `isError` result included), a protocol error (`failed`) or an `InputRequired`.
Its requests become the task's outstanding `inputRequests` (status
`input_required`) under keys never reused in the task's life; `tasks/update`
takes valid answers to outstanding keys and ignores the rest; once none is
outstanding the next round runs with the answers (`ctx.answer`) and the state
(`ctx.state`), as a retry would. `tasks/cancel` settles the task to `cancelled`
and cancels its round. Every transition is one atomic `TaskStore.update` that
never leaves a terminal status, so a late result cannot undo a cancellation.

A tool registered with `task_after_input=True` gathers its input first: a call
without `inputResponses` runs in the request (its `InputRequired` is an ordinary
`input_required` result), and the retry that brings the answers becomes the
task. `ctx.progress(...)` in a task sets its `statusMessage`; log messages have
nowhere to go and are dropped. A round runs as the request that started it (the call, or
the `tasks/update` that answered the last request): its `ctx.auth` is that request's verified
token, held in memory and never stored. Tasks are bounded in number, in all and per
principal (the store checks the limits in the step that writes a task, so calls
at once, through any processes sharing it, never pass them), and expire `ttl_ms`
after creation; a task is seen only by the
principal that created it (`-32602` for anyone else, as for an unknown id).
"""

from __future__ import annotations

import logging
import secrets
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

import anyio
import orjson

from ._app.catalog import Catalog
from ._app.context import Context
from ._app.context import Host as ContextHost
from ._app.tools import TASK_MODES, Tool
from ._runtime.call import Call
from ._runtime.subscriptions import TASK, Bus, Change, Subscriptions
from ._wire.inputs import ElicitAnswer, InputRequired, SampleAnswer, parse_answer, read_answers
from ._wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    LATEST_VERSION,
    META_LOG_LEVEL,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    McpError,
    invalid_params,
    missing_capability,
)
from .extensions import Extension
from .taskstore import MemoryTaskStore, TaskRecord, TaskStore, TooManyTasks

if TYPE_CHECKING:
    from .auth import AccessToken

__all__ = ["NAME_FIELDS", "TASKS", "TASK_MODES", "Tasks"]

log = logging.getLogger(__name__)

TASKS = "io.modelcontextprotocol/tasks"
NAME_FIELDS = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}  # what Mcp-Name mirrors
_SWEEP_SECONDS = 1.0  # how often, at most, expired tasks are swept
MAX_ROUNDS = 1_000  # rounds one task may run, answered ones included (an InputRequired without requests
# starts the next round at once: without a bound, such a function would spin)
_STORE_RETRIES = (0.1, 0.2, 0.5, 1, 2, 4, 8, 16)  # waits between tries of a run's store operation: about 30 s in all
_LEAST = {"ttl_ms": 1, "poll_interval_ms": 0, "max_tasks": 0, "max_tasks_per_principal": 0}  # each setting's lowest value
# (a TTL of 0 would make a task unknown before its handle is sent: the spec wants tasks/get to find it by then)


class SharedTasks(Protocol):
    """State shared with other processes, as tasks see it: where they are kept (`SharedState` is one)."""

    tasks: TaskStore


class Host(ContextHost, Protocol):
    """What the Tasks extension needs of its server (`Server` is one), besides what a context reads."""

    tools: Catalog[Tool]
    subscriptions: Subscriptions

    @property
    def store(self) -> SharedTasks | None: ...

    @property
    def bus(self) -> Bus: ...

    def extension(self, identifier: str, settings: dict[str, Any] | None = None) -> Extension: ...


class Tasks:
    """The Tasks extension of one server (`server.tasks`); made when a tool first asks for it.

    Settings (change them before serving, or with `configure`): `store` (a `TaskStore`;
    in memory by default), `ttl_ms` (how long a task is kept after creation; None: until
    deleted), `poll_interval_ms` (what clients are told to wait between polls),
    `max_tasks` and `max_tasks_per_principal` (stored tasks, finished ones included).
    """

    def __init__(self, server: Host) -> None:
        self.server = server
        self.store: TaskStore = server.store.tasks if server.store is not None else MemoryTaskStore()
        self.ttl_ms: int | None = 3_600_000
        self.poll_interval_ms = 500
        self.max_tasks = 10_000
        self.max_tasks_per_principal = 1_000
        self._running: dict[str, anyio.CancelScope] = {}  # the rounds running in this process
        self._swept = 0.0
        self._watched: Any = None  # the bus that tells this process of tasks cancelled elsewhere
        self.extension = server.extension(TASKS)
        for method, handler in (("tasks/get", self._on_get), ("tasks/update", self._on_update), ("tasks/cancel", self._on_cancel)):
            self.extension.method(method, name_field=NAME_FIELDS[method])(handler)
        server.subscriptions.describers[TASK] = self._describe

    def configure(self, **settings: Any) -> Tasks:
        """Set any of the settings by name: `server.tasks.configure(ttl_ms=600_000)`; all of them or,
        when one is unknown or out of range, none."""
        for name, value in settings.items():
            if name != "store" and name not in _LEAST:
                raise TypeError(f"Tasks has no setting {name!r}")
            if name in _LEAST and not (name == "ttl_ms" and value is None) and (
                    not isinstance(value, int) or isinstance(value, bool) or value < _LEAST[name]):
                unlimited = " or None (kept until the server stops)" if name == "ttl_ms" else ""
                raise ValueError(f"{name} must be an integer >= {_LEAST[name]}{unlimited}, not {value!r}")
        for name, value in settings.items():
            setattr(self, name, value)
        return self

    @property
    def per_process(self) -> bool:
        """Whether tasks live in this process only (the in-memory store): other processes cannot see them."""
        return isinstance(self.store, MemoryTaskStore)

    # -- tools/call -----------------------------------------------------------

    async def call(self, tool: Tool, arguments: dict[str, Any], params: dict[str, Any], context: Context) -> dict[str, Any]:
        """Answer `tools/call` of a task-capable tool: as a task when the client declared the extension."""
        if self.extension.declared(context) is None:
            if tool.task == "required":
                if context.protocol_version in MODERN_VERSIONS:
                    raise missing_capability({"extensions": {TASKS: {}}})
                # the 2025-era wire has neither the extension nor -32021; 2025-11-25 answers a call that
                # cannot run as the tool requires with -32601
                raise McpError(METHOD_NOT_FOUND, f"Tool {tool.key!r} runs only as a task, which needs protocol "
                               f"version {LATEST_VERSION} and the {TASKS} extension")
            return await tool.call(arguments, context)
        if tool.task_after_input and params.get("inputResponses") is None and params.get("requestState") is None:
            return await tool.call(arguments, context)
        if not self.server.lifespan.entered:  # checked before a record exists that nothing would run
            raise RuntimeError("a task runs in the server's lifespan: serve the server (or enter `server.lifespan`) first")
        with anyio.CancelScope(shield=True):  # a record written is a task started, even if the request is cancelled
            record = await self._create(tool, arguments, params.get("inputResponses") or {}, context)
            self.server.lifespan.spawn(self._run(record.task_id, context.auth))
        return {"resultType": "task", **_handle(record)}

    async def _create(self, tool: Tool, arguments: dict[str, Any], responses: Mapping[str, Any], context: Context) -> TaskRecord:
        now = time.time()
        await self._sweep(now)
        meta = {key: value for key, value in context.meta.items() if key not in (META_LOG_LEVEL, "progressToken")}
        record = TaskRecord(
            task_id=secrets.token_hex(16),
            principal=context.principal,
            tool=tool.key,
            arguments=arguments,
            meta=meta,
            created_at=now,
            updated_at=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            state=context.state,
            answers={name: responses[name] for name in context.answers if name in responses},
            kinds={name: _kind(answer) for name, answer in context.answers.items()},
        )
        try:
            await self._store_new(record)
        except TooManyTasks:  # expired ones first make room
            self._swept = 0.0
            await self._sweep(now)
            try:
                await self._store_new(record)
            except TooManyTasks as full:
                message = f"Too many tasks (limit {full.limit}); let some finish and expire first"
                raise McpError(INVALID_REQUEST, message) from None
        return record

    async def _store_new(self, record: TaskRecord) -> None:
        """Store a new task unless that passes a limit: the store checks them in the step that writes,
        so concurrent calls, in this process or others sharing the store, never pass one."""
        await self.store.create(record, max_tasks=self.max_tasks, max_tasks_per_principal=self.max_tasks_per_principal)

    # -- rounds ---------------------------------------------------------------

    async def _run(self, task_id: str, token: AccessToken | None) -> None:
        """Run rounds while the task is working (a round that asks for nothing goes straight on), as the
        request that started them: `token` is its verified token (`ctx.auth`), held in memory only."""
        if not self.per_process and self._watched is not self.server.bus:
            self._watched = self.server.bus
            self._watched.attach(_CancelWatcher(self))
        while True:
            record = await self._persist(task_id, "read", lambda: self.store.get(task_id))
            if record is None or record.status != "working":
                return
            with anyio.CancelScope() as scope:
                self._running[task_id] = scope
                try:
                    outcome = await self._round(record, token)
                except BaseException:  # stopping, cancelled or expired: only a stop leaves it unsettled
                    with anyio.CancelScope(shield=True):
                        stopped = McpError(INTERNAL_ERROR, "The server stopped before the task finished")
                        await self._persist(task_id, "settled", lambda: self._update(task_id, _failed(stopped)))
                    raise
                finally:
                    del self._running[task_id]
            if scope.cancelled_caught:
                return  # cancelled or expired: the store already says so
            changed = await self._persist(task_id, "stored", lambda: self._update(task_id, outcome))
            if changed is None or changed[1].round == record.round:
                return

    async def _persist(self, task_id: str, what: str, operation: Callable[[], Awaitable[Any]]) -> Any:
        """Run a store operation of a task's run, retrying while the store is away (a shared one may be);
        None, and a logged error, when it stays away."""
        for wait in _STORE_RETRIES:
            try:
                return await operation()
            except McpError as error:
                failure = error
                await anyio.sleep(wait)
        log.error("task %s could not be %s (%s); it stays as it was until it expires", task_id, what, failure)
        return None

    async def _round(self, record: TaskRecord, token: AccessToken | None) -> Any:
        """Run the function once; the change to the record that its outcome makes."""
        tool = self.server.tools.get(record.tool)
        if tool is None:
            return _failed(McpError(INTERNAL_ERROR, f"The tool {record.tool!r} is no longer offered"))
        meta = {**record.meta, "progressToken": record.task_id}
        call = Call({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": record.tool, "_meta": meta}},
                    route=tool.route, principal=record.principal, auth=token)
        context = Context(call, _StatusWriter(self, record.task_id), meta, self.server)
        context.state = record.state
        context.answers = read_answers(record.answers, record.kinds)
        try:
            result = await tool.call(dict(record.arguments), context)
        except InputRequired as ask:
            try:
                asked, payload = ask.result(context.client_capabilities)
            except McpError as error:
                return _failed(error)
            return _asking(asked.get("inputRequests", {}), payload)
        except McpError as error:
            return _failed(error)
        except Exception:
            log.exception("task %s of tool %r raised", record.task_id, record.tool)
            return _failed(McpError(INTERNAL_ERROR, "Internal error"))
        return _settle("completed", result={"resultType": "complete", **result})

    async def status_message(self, task_id: str, message: str) -> None:
        """Set a working task's `statusMessage` (what `ctx.progress` in a task does); a store that is
        away loses the message, not the task."""
        def change(record: TaskRecord) -> TaskRecord | None:
            return record.changed(time.time(), status_message=message) if record.status == "working" else None

        try:
            await self._update(task_id, change)
        except McpError as error:
            log.warning("task %s: its status message was not stored (%s)", task_id, error)

    async def _update(self, task_id: str, change: Any) -> tuple[TaskRecord, TaskRecord] | None:
        """Change a record in the store; subscriptions following the task hear of it."""
        changed = await self.store.update(task_id, change)
        if changed is not None and changed[0] != changed[1]:
            self.server.bus.publish(Change(TASK, task_id))
        return changed

    async def _describe(self, task_id: str) -> dict[str, Any] | None:
        """A `notifications/tasks` body: the task as `tasks/get` would show it now."""
        record = await self.store.get(task_id)
        return None if record is None else _detailed(record)

    async def followed(self, wanted: Any, context: Context) -> frozenset[str]:
        """The tasks a `subscriptions/listen` asking for `taskIds` may follow: the caller's own."""
        if self.extension.declared(context) is None:
            raise missing_capability({"extensions": {TASKS: {}}})
        if not isinstance(wanted, list) or not all(isinstance(task_id, str) for task_id in wanted):
            raise invalid_params("notifications.taskIds must be a list of task id strings")
        if len(wanted) > self.server.subscriptions.max_uris:
            raise invalid_params(f"A subscription may follow at most {self.server.subscriptions.max_uris} tasks")
        owned = set()
        for task_id in wanted:
            record = await self.store.get(task_id)
            if record is not None and record.principal == context.principal:
                owned.add(task_id)
        return frozenset(owned)

    async def _sweep(self, now: float) -> None:
        """Forget expired tasks; their rounds, here or in a process sharing the store, are cancelled."""
        if now - self._swept < _SWEEP_SECONDS:
            return
        self._swept = now
        for task_id in await self.store.expire(now):
            self._stop_round(task_id)
            self.server.bus.publish(Change(TASK, task_id))  # elsewhere: the watcher finds no record

    # -- the tasks/* methods ----------------------------------------------------

    async def _owned(self, params: dict[str, Any], context: Context) -> TaskRecord:
        """The caller's task named by `params.taskId` (-32602 when unknown, expired or not theirs)."""
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise invalid_params('this request needs a string "taskId"')
        await self._sweep(time.time())
        record = await self.store.get(task_id)
        if record is None or record.principal != context.principal:
            raise invalid_params(f"Unknown task: {task_id!r} (never created, expired, or not yours)", {"taskId": task_id})
        return record

    async def _on_get(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        return _detailed(await self._owned(params, context))

    async def _on_update(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        record = await self._owned(params, context)
        responses = params.get("inputResponses")
        if not isinstance(responses, dict):
            raise invalid_params('tasks/update needs an "inputResponses" object keyed by input request')
        changed = await self._update(record.task_id, _answering(responses))
        if changed is not None and changed[0].status == "input_required" and changed[1].status == "working":
            self.server.lifespan.spawn(self._run(record.task_id, context.auth))
        return {}

    async def _on_cancel(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        record = await self._owned(params, context)
        await self._update(record.task_id, _settle("cancelled", status_message="Cancelled by the client"))
        self._stop_round(record.task_id)
        return {}

    def _stop_round(self, task_id: str) -> None:
        """Cancel the task's round, if one runs in this process."""
        scope = self._running.get(task_id)
        if scope is not None:
            scope.cancel()


class _CancelWatcher:
    """Hears of task changes made by other processes: a round running here whose task was settled
    elsewhere (cancelled, or expired) is cancelled."""

    def __init__(self, tasks: Tasks) -> None:
        self._tasks = tasks

    def offer(self, change: Change) -> None:
        if change.kind == TASK and change.uri in self._tasks._running:
            self._check_soon(change.uri)

    def resync(self) -> None:
        for task_id in list(self._tasks._running):
            self._check_soon(task_id)

    def _check_soon(self, task_id: str) -> None:
        if self._tasks.server.lifespan.entered:  # stopping: the rounds are being cancelled anyway
            self._tasks.server.lifespan.spawn(self._check(task_id))

    async def _check(self, task_id: str) -> None:
        try:
            record = await self._tasks.store.get(task_id)
        except McpError:  # the store is away: the round goes on, and the next change checks again
            return
        if record is None or record.terminal:
            self._tasks._stop_round(task_id)


class _StatusWriter:
    """A task round's writer: progress becomes the task's statusMessage; nothing else has a reader."""

    def __init__(self, tasks: Tasks, task_id: str) -> None:
        self._tasks, self._task_id = tasks, task_id

    async def notify(self, message: bytes) -> None:
        sent = orjson.loads(message)
        if sent.get("method") == "notifications/progress":
            params = sent["params"]
            total = params.get("total")
            text = params.get("message") or (f"{params['progress']:g}/{total:g}" if total else f"{params['progress']:g}")
            await self._tasks.status_message(self._task_id, text)

    async def respond(self, message: bytes, error_code: int | None = None) -> None:
        raise RuntimeError("a task round has no response: its outcome goes to the task store")


# -- changes to a record (pure functions of the stored record, for TaskStore.update) ----------


def _settle(status: str, status_message: str | None = None, **fields: Any) -> Any:
    """Move a task that is not finished to a terminal status (a working status message is dropped)."""
    def change(record: TaskRecord) -> TaskRecord | None:
        if record.terminal:
            return None
        return record.changed(time.time(), status=status, input_requests={}, asked={}, status_message=status_message, **fields)

    return change


def _failed(error: McpError) -> Any:
    """Fail a task that is not finished with a protocol error, inlined, its message the status message."""
    return _settle("failed", status_message=error.message, error=error.to_dict())


def _asking(requests: dict[str, dict[str, Any]], payload: dict[str, Any]) -> Any:
    """Publish a round's input requests under keys the task has never used (none: go on at once)."""
    def change(record: TaskRecord) -> TaskRecord | None:
        if record.terminal:
            return None
        if not requests and record.round >= MAX_ROUNDS:  # a function that asks for nothing, forever
            stuck = McpError(INTERNAL_ERROR, f"The tool asked for no input {record.round} rounds running; it was stopped")
            return _failed(stuck)(record)
        used, outstanding, asked = list(record.used_keys), {}, {}
        for name, request in requests.items():
            key, n = name, 1
            while key in used:
                n += 1
                key = f"{name}.{n}"
            used.append(key)
            outstanding[key], asked[key] = request, [name, payload["asked"][name]]
        return record.changed(
            time.time(), status="input_required" if outstanding else "working", input_requests=outstanding,
            asked=asked, answers={}, kinds={}, state=payload["state"], used_keys=used,
            round=record.round + (0 if outstanding else 1), status_message=None,
        )

    return change


def _answering(responses: dict[str, Any]) -> Any:
    """Take the valid answers to outstanding requests; the next round once none is left."""
    def change(record: TaskRecord) -> TaskRecord | None:
        if record.status != "input_required":
            return None
        outstanding, answers, kinds = dict(record.input_requests), dict(record.answers), dict(record.kinds)
        for key, raw in responses.items():
            if key not in outstanding:
                continue  # unknown, already answered, or from another round: ignored
            name, kind = record.asked[key]
            try:
                parse_answer(key, kind, raw)
            except McpError:
                continue  # malformed: the request stays outstanding
            del outstanding[key]
            answers[name], kinds[name] = raw, kind
        if len(outstanding) == len(record.input_requests):
            return None
        if outstanding:
            return record.changed(time.time(), input_requests=outstanding, answers=answers, kinds=kinds)
        return record.changed(time.time(), status="working", input_requests={}, asked={}, answers=answers,
                              kinds=kinds, round=record.round + 1)

    return change


# -- the wire ---------------------------------------------------------------------------------


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _handle(record: TaskRecord) -> dict[str, Any]:
    """The `Task` fields (what `CreateTaskResult` carries, flat)."""
    task: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status,
        "createdAt": _timestamp(record.created_at),
        "lastUpdatedAt": _timestamp(record.updated_at),
        "ttlMs": record.ttl_ms,
        "pollIntervalMs": record.poll_interval_ms,
    }
    if record.status_message is not None:
        task["statusMessage"] = record.status_message
    return task


def _detailed(record: TaskRecord) -> dict[str, Any]:
    """The `DetailedTask` for the task's status: its requests, result or error inlined."""
    task = _handle(record)
    if record.status == "input_required":
        task["inputRequests"] = record.input_requests
    elif record.status == "completed":
        task["result"] = record.result
    elif record.status == "failed":
        task["error"] = record.error
    return task


def _kind(answer: Any) -> str:
    """The kind of request a parsed answer answers."""
    return "elicitation" if isinstance(answer, ElicitAnswer) else "sampling" if isinstance(answer, SampleAnswer) else "roots"
