"""Limits per caller and per tool, and their keeper in one process (`LocalLimiter`).

`Limits` says what a caller may do: a token bucket over all its calls (`rate`), one over its
calls of a tool (`tools`), and quotas of tool calls per UTC day (`daily`, `tools_daily`).
`checks` turns one call into the buckets and quotas it spends from; a call spends from all
of them or, refused by one, from none. `LocalLimiter` keeps them in this process; the
fleet-wide keeper (`mcpcore.fleetlimits`) keeps them in Redis and falls back to this one.
"""

from __future__ import annotations

import collections
import math
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from .._wire.jsonrpc import RATE_LIMITED, McpError
from .call import Call

__all__ = ["Check", "Limits", "LocalLimiter", "Refusal", "caller", "rate_limited"]

DAY = 86_400


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
    a call spends from; `tool` is "" for the caller's own."""

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
        """Code 429 with `data.retryAfter` (HTTP: status 429 and `Retry-After`); a quota says it is one."""
        seconds = max(1, math.ceil(self.wait))
        if self.check.kind == "rate":
            return rate_limited(seconds, self.check.tool)
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


class LocalLimiter:
    """`Limits` kept in this process (middleware): at most `max_callers` buckets and quotas, the least
    recently used dropped first (a dropped bucket is full again, a dropped quota unspent)."""

    def __init__(self, limits: Limits, *, max_callers: int = 10_000, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.limits, self.max_callers, self._clock, self._wall = limits, max_callers, clock, wall
        self._held: collections.OrderedDict[Any, tuple[float, float]] = collections.OrderedDict()  # key → (tokens | used, at | day)

    def take(self, who: tuple[str, str], checks: list[Check]) -> Refusal | None:
        """Spend from every check, or from none and say which refused (the one waited for longest)."""
        now, wall = self._clock(), self._wall()
        today = wall // DAY
        after: list[tuple[Any, tuple[float, float]]] = []
        refusal: Refusal | None = None
        for check in checks:
            key = (check.kind, who, check.tool)
            if check.kind == "rate":
                tokens, at = self._held.get(key, (float(check.burst), now))
                tokens = min(float(check.burst), tokens + (now - at) * check.limit)
                wait = 0.0 if tokens >= 1 else (1 - tokens) / check.limit
                after.append((key, (tokens - 1, now)))
            else:
                used, day = self._held.get(key, (0.0, today))
                used = used if day == today else 0.0
                wait = 0.0 if used < check.limit else (today + 1) * DAY - wall
                after.append((key, (used + 1, today)))
            if wait and (refusal is None or wait > refusal.wait):
                refusal = Refusal(check, wait)
        if refusal is None:
            for key, held in after:
                self._held.pop(key, None)
                self._held[key] = held
            while len(self._held) > self.max_callers:
                self._held.popitem(last=False)
        return refusal

    async def __call__(self, call: Call, call_next: Next) -> bytes:
        checks = self.limits.checks(call)
        if checks:
            refusal = self.take(caller(call), checks)
            if refusal is not None:
                raise refusal.error()
        return await call_next(call)
