"""Middleware: async functions around every call, and the two everyone writes.

A middleware is `async def mw(call, call_next) -> bytes`: it sees the `Call`
(its `message` with method and params, `principal`, `peer`, `headers`), awaits
`call_next(call)` for the encoded result (or lets the `McpError` it raises pass),
and may instead raise an `McpError` itself to answer without running the call.
`Server(middleware=[outer, inner])`: the first one listed is the outermost, so it
sees every call first and its result last. With none installed, calls go straight
to the dispatcher.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from typing import Any, Awaitable, Callable

from ._runtime.call import Call
from ._runtime.limits import Limits, LocalLimiter, rate_limited
from ._wire.jsonrpc import McpError

__all__ = ["Limits", "LocalLimiter", "Middleware", "Next", "RateLimiter", "access_log"]

Next = Callable[[Call], Awaitable[bytes]]
Middleware = Callable[[Call, Next], Awaitable[bytes]]


def chain(middleware: tuple[Middleware, ...], last: Next) -> Next:
    """`last` wrapped in `middleware`, the first one outermost."""
    handler = last
    for outer in reversed(middleware):
        handler = (lambda mw, inner: lambda call: mw(call, inner))(outer, handler)
    return handler


def access_log(logger: logging.Logger | None = None, level: int = logging.INFO) -> Middleware:
    """One log record per call at `level`: method, what it names (a tool, prompt or URI, as the client sent it),
    principal, outcome (`ok`, `tool error` for an `isError` result, `error CODE`, `cancelled`) and duration
    (the `mcpcore.access` logger)."""
    log = logger or logging.getLogger("mcpcore.access")

    async def log_call(call: Call, call_next: Next) -> bytes:
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await call_next(call)
            outcome = "tool error" if b'"isError":true' in result else "ok"  # a tool's failure told to the model
            return result
        except McpError as error:
            outcome = f"error {error.code}"
            raise
        finally:
            if call.cancelled:
                outcome = "cancelled"
            elapsed_ms = (time.perf_counter() - started) * 1000
            method = call.message.get("method")
            params = call.message.get("params")
            target = call.tool or (params.get("name") or params.get("uri") if isinstance(params, dict) else None)
            log.log(
                level, "%s %s by %s: %s in %.1f ms", method, target or "-", call.principal or "-", outcome, elapsed_ms,
                extra={"request_id": call.message.get("id"), "method": method, "tool": call.tool,
                       "principal": call.principal, "outcome": outcome, "duration_ms": elapsed_ms},
            )

    return log_call


class RateLimiter:
    """A token bucket per caller: `rate` calls a second on average, bursts of up to `burst`.

    The caller is the principal when there is one, else the HTTP peer's address,
    else (stdio) the one process. Over the limit, the call is answered with
    `429` and `data.retryAfter` in seconds (HTTP: 429 with `Retry-After`). At
    most `max_callers` buckets are kept; the least recently seen go first.
    """

    def __init__(self, rate: float, burst: int, *, max_callers: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limiter needs rate > 0 and burst >= 1")
        self.rate, self.burst, self.max_callers, self._clock = rate, burst, max_callers, clock
        self._buckets: collections.OrderedDict[Any, tuple[float, float]] = collections.OrderedDict()  # key → (tokens, at)

    @staticmethod
    def caller(call: Call) -> Any:
        if call.principal is not None:
            return ("principal", call.principal)
        return ("peer", call.peer[0]) if call.peer else ("process", None)

    def take(self, key: Any) -> float:
        """Spend one token; 0 when allowed, else the seconds until one is available."""
        now = self._clock()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1 if wait == 0 else tokens, now)
        while len(self._buckets) > self.max_callers:
            self._buckets.popitem(last=False)
        return wait

    async def __call__(self, call: Call, call_next: Next) -> bytes:
        wait = self.take(self.caller(call))
        if wait:
            raise rate_limited(max(1, math.ceil(wait)))
        return await call_next(call)
