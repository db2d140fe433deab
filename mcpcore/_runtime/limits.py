"""Limits per caller and per tool, and their keeper in one process (`LocalLimiter`).

`Limits` says what a caller may do: a token bucket over all its calls (`rate`), one over its
calls of a tool (`tools`), and quotas of tool calls per UTC day (`daily`, `tools_daily`).
`checks` turns one call into the buckets and quotas it spends from; a call spends from all
of them or, refused by one, from none. `LocalLimiter` keeps them in this process; the
fleet-wide keeper (`mcpcore.fleetlimits`) keeps them in Redis and falls back to this one.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from .._wire.jsonrpc import RATE_LIMITED, McpError
from .call import Call

__all__ = ["Check", "Limits", "LocalLimiter", "Refusal", "caller", "rate_limited"]

DAY = 86_400

log = logging.getLogger("mcpcore.limits")


@dataclass(frozen=True)
class Limits:
    """What one caller (its principal, else its address, else the stdio process) may do.

    `rate`: `(calls a second, burst)` over all its calls; `tools`: the same over its calls of
    one tool, by tool name; `daily`: its tool calls per UTC day (a fixed window reset at 00:00
    UTC); `tools_daily`: its calls of one tool per UTC day. Each is optional."""

    rate: tuple[float, int] | None = None
    tools: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    daily: int | None = None
    tools_daily: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rate is not None:
            _check_bucket("rate", *self.rate)
        for tool, (rate, burst) in self.tools.items():
            _check_bucket(f"tool {tool!r}", rate, burst)
        for name, quota in (("daily", self.daily), *((f"tool {tool!r}", n) for tool, n in self.tools_daily.items())):
            if quota is not None and (not isinstance(quota, int) or quota < 1):
                raise ValueError(f"a daily quota ({name}) needs a whole number of calls >= 1, not {quota!r}")

    def __bool__(self) -> bool:
        return bool(self.rate or self.tools or self.daily or self.tools_daily)

    def checks(self, call: Call) -> list[Check]:
        """The buckets and quotas `call` spends from (none: the call is not limited)."""
        found: list[Check] = []
        if self.rate is not None:
            found.append(Check("rate", "", *self.rate))
        tool = call.tool  # "" unless a registered tool: a made-up name is never a key
        if tool:
            if tool in self.tools:
                found.append(Check("rate", tool, *self.tools[tool]))
            if self.daily is not None:
                found.append(Check("day", "", self.daily, 0))
            if tool in self.tools_daily:
                found.append(Check("day", tool, self.tools_daily[tool], 0))
        return found


def _check_bucket(name: str, rate: float, burst: int) -> None:
    if not rate > 0 or not isinstance(burst, int) or burst < 1:
        raise ValueError(f"a rate limit ({name}) needs calls a second > 0 and a whole burst >= 1, not {rate!r}:{burst!r}")


@dataclass(frozen=True, slots=True)
class Check:
    """One bucket (`kind` "rate": `limit` calls a second, `burst`) or quota (`kind` "day": `limit` calls)
    a call spends from; `tool` is "" for the caller's own. A refusal's check may also be the room to
    keep quotas (`kind` "callers": `limit` quotas kept, all spent today)."""

    kind: str
    tool: str
    limit: float
    burst: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """The check that refused a call, and the seconds until it would pass."""

    check: Check
    wait: float

    def error(self) -> McpError:
        """Code 429 with `data.retryAfter` (HTTP: status 429 and `Retry-After`); a quota says it is one,
        and so does a new caller refused because every quota kept is spent today."""
        seconds = max(1, math.ceil(self.wait))
        if self.check.kind == "rate":
            return rate_limited(seconds, self.check.tool)
        if self.check.kind == "callers":
            return McpError(RATE_LIMITED, f"Too many callers today: the server keeps {int(self.check.limit)} daily "
                            f"quotas, all spent today, and starts no new one until they reset at 00:00 UTC, in "
                            f"{seconds} s", {"retryAfter": seconds, "period": "day"})
        quota = int(self.check.limit)
        data: dict[str, Any] = {"retryAfter": seconds, "quota": quota, "period": "day"}
        calls = f"{quota} call{'' if quota == 1 else 's'}"
        if self.check.tool:
            data["tool"] = self.check.tool
            calls += f" of {self.check.tool!r}"
        return McpError(RATE_LIMITED, f"Daily quota used up: {calls} a day; it resets at 00:00 UTC, in {seconds} s", data)


def rate_limited(seconds: int, tool: str = "") -> McpError:
    """The answer to a call over a rate limit: retry in `seconds`."""
    data: dict[str, Any] = {"retryAfter": seconds}
    if tool:
        data["tool"] = tool
    return McpError(RATE_LIMITED, f"Too many requests{f' to {tool!r}' if tool else ''}: retry in {seconds} s", data)


def caller(call: Call) -> tuple[str, str]:
    """Whose budget a call spends: its principal, else its HTTP peer's address, else the stdio process."""
    if call.principal is not None:
        return ("principal", call.principal)
    return ("peer", str(call.peer[0])) if call.peer else ("process", "")


Next = Callable[[Call], Awaitable[bytes]]


def _keep(table: collections.OrderedDict[Any, Any], entries: list[tuple[Any, Any]]) -> int:
    """Write `entries` into `table` as its most recently used; how many of them are new keys."""
    new = 0
    for key, held in entries:
        new += table.pop(key, None) is None
        table[key] = held
    return new


class LocalLimiter:
    """`Limits` kept in this process (middleware): at most `max_callers` buckets and as many daily quotas.

    Dropping a kept entry must never give back a quota spent today. A full table of buckets drops
    the refilled ones (nothing lost), else the least recently used (it comes back full: at most its
    burst given back); a full table of quotas drops those of a past day, and when all are today's
    a call that needs a new one is refused until they reset at 00:00 UTC (kept callers go on)."""

    def __init__(self, limits: Limits, *, max_callers: int = 10_000, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        if max_callers < 2:
            raise ValueError(f"max_callers must be at least 2 (a call may spend from two buckets and two quotas), "
                             f"not {max_callers!r}")
        self.limits, self.max_callers, self._clock, self._wall = limits, max_callers, clock, wall
        # key → (tokens, at, full again at), least recently used first
        self._buckets: collections.OrderedDict[Any, tuple[float, float, float]] = collections.OrderedDict()
        # key → (used, day), least recently spent first: those of a past day come first
        self._quotas: collections.OrderedDict[Any, tuple[int, int]] = collections.OrderedDict()
        self._new_buckets = 0  # buckets made since the last sweep for refilled ones
        self._full_day: int | None = None  # the day the quotas were last said full, to say it once a day

    def take(self, who: tuple[str, str], checks: list[Check]) -> Refusal | None:
        """Spend from every check, or from none and say which refused (the one waited for longest)."""
        now, wall = self._clock(), self._wall()
        today = int(wall // DAY)
        buckets: list[tuple[Any, tuple[float, float, float]]] = []
        quotas: list[tuple[Any, tuple[int, int]]] = []
        refusal: Refusal | None = None
        for check in checks:
            key = (check.kind, who, check.tool)
            if check.kind == "rate":
                tokens, at, _ = self._buckets.get(key, (float(check.burst), now, now))
                tokens = min(float(check.burst), tokens + (now - at) * check.limit)
                wait = 0.0 if tokens >= 1 else (1 - tokens) / check.limit
                buckets.append((key, (tokens - 1, now, now + (check.burst - tokens + 1) / check.limit)))
            else:
                used, day = self._quotas.get(key, (0, today))
                used = used if day == today else 0
                wait = 0.0 if used < check.limit else (today + 1) * DAY - wall
                quotas.append((key, (used + 1, today)))
            if wait and (refusal is None or wait > refusal.wait):
                refusal = Refusal(check, wait)
        if refusal is None and len(self._quotas) + len(quotas) > self.max_callers:
            refusal = self._room_for(quotas, today, wall)
        if refusal is None:
            if quotas:
                _keep(self._quotas, quotas)
            if buckets:
                self._new_buckets += _keep(self._buckets, buckets)
                if len(self._buckets) > self.max_callers:
                    self._drop_buckets(now)
        return refusal

    def _room_for(self, quotas: list[tuple[Any, tuple[int, int]]], today: int, wall: float) -> Refusal | None:
        """Make room for a call's quotas by dropping those of a past day (nothing lost), or refuse the call
        when every quota kept is today's (cost: one step per quota dropped)."""
        held = self._quotas
        while (missing := sum(key not in held for key, _ in quotas)) and len(held) + missing > self.max_callers:
            oldest = next(iter(held))
            if held[oldest][1] == today:
                if self._full_day != today:
                    self._full_day = today
                    log.warning("rate limits: %d daily quotas are kept today, the most this process keeps; calls of "
                                "new callers that need one are refused until 00:00 UTC", self.max_callers)
                return Refusal(Check("callers", "", self.max_callers, 0), (today + 1) * DAY - wall)
            del held[oldest]
        return None

    def _drop_buckets(self, now: float) -> None:
        """Down to `max_callers` buckets: the refilled ones first, then the least recently used. A sweep
        for refilled ones reads the whole table, so it runs at most once per half of it made anew."""
        held = self._buckets
        if self._new_buckets * 2 >= self.max_callers:
            self._new_buckets = 0
            for key in [key for key, (_, _, full_at) in held.items() if full_at <= now]:
                del held[key]
        while len(held) > self.max_callers:
            held.popitem(last=False)

    async def __call__(self, call: Call, call_next: Next) -> bytes:
        checks = self.limits.checks(call)
        if checks:
            refusal = self.take(caller(call), checks)
            if refusal is not None:
                raise refusal.error()
        return await call_next(call)
