"""Rate limits and daily quotas that hold across every process and host sharing one Redis.

`Server(middleware=[FleetLimiter(state, Limits(rate=(5, 20), daily=1000))])` with the server's
`RedisState` (or `mcpcore run --redis URL --rate-limit 5:20 --daily-quota 1000`) keeps each
caller's buckets and quotas in Redis instead of in the process: five calls a second with
bursts of twenty, and a thousand tool calls a day, for the whole fleet.

Theory of operation. One call is one script run (EVALSHA; redis-py loads the script on the
first call and again on NOSCRIPT, after a restart or SCRIPT FLUSH): the script reads Redis's
own `TIME`, so hosts whose clocks disagree agree on the buckets, refills and checks every
bucket and quota the call spends from, and spends from all of them or from none. A bucket
is a hash that Redis expires once it would be full again (an idle caller costs nothing),
a quota a hash that expires at the end of its UTC day. Key names are a digest of the
caller and the tool, so a principal of any length or alphabet makes a key of the same
size. While Redis is unreachable the limits are kept per process (`LocalLimiter`), said
in one warning; the next call a second later tries Redis again, and one line says when
the limits are fleet-wide again. Calls no limit applies to never reach Redis.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from ._runtime.call import Call
from ._runtime.limits import Check, Limits, LocalLimiter, Next, Refusal, caller

if TYPE_CHECKING:
    from .redisstate import RedisState

__all__ = ["FleetLimiter", "Limits"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0  # while Redis is away, how long calls are limited per process before it is tried again

# Spend one call from each bucket and quota, or from none. KEYS: one per check. ARGV, three per check:
# "r" (a bucket), its calls a second and its burst; or "q" (a daily quota), its calls and "". Returns
# {0, ""} when the call may go on, else {the refusing check's index (from 1), the seconds to wait}.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local today = math.floor(tonumber(t[1]) / 86400)
local day_end = (today + 1) * 86400
local after, refused, longest = {}, 0, 0
for i, key in ipairs(KEYS) do
  local kind, limit = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1])
  local wait = 0
  if kind == 'r' then
    local burst = tonumber(ARGV[3 * i])
    local held = redis.call('HMGET', key, 't', 'a')
    local tokens = tonumber(held[1]) or burst
    local at = tonumber(held[2]) or now
    tokens = math.min(burst, tokens + math.max(0, now - at) * limit)
    if tokens < 1 then wait = (1 - tokens) / limit end
    after[i] = tokens - 1
  else
    local held = redis.call('HMGET', key, 'd', 'n')
    local used = 0
    if tonumber(held[1]) == today then used = tonumber(held[2]) or 0 end
    if used >= limit then wait = day_end - now end
    after[i] = used + 1
  end
  if wait > longest then refused, longest = i, wait end
end
if refused > 0 then return {refused, string.format('%.6f', longest)} end
for i, key in ipairs(KEYS) do
  if ARGV[3 * i - 2] == 'r' then
    local limit, burst = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
    redis.call('HSET', key, 't', string.format('%.9f', after[i]), 'a', string.format('%.6f', now))
    redis.call('PEXPIRE', key, math.min(math.ceil((burst - after[i]) / limit * 1000) + 1000, 315360000000))
  else
    redis.call('HSET', key, 'd', today, 'n', after[i])
    redis.call('EXPIREAT', key, day_end + 60)
  end
end
return {0, ''}
"""


class FleetLimiter:
    """`Limits` kept in Redis for every process sharing `state` (middleware; see the module docstring).

    `state` is the server's `RedisState` (its client and key prefix); the limiter needs no start of
    its own. `local` keeps the limits while Redis is away (a `LocalLimiter` of the same limits)."""

    def __init__(self, state: RedisState, limits: Limits, *, local: LocalLimiter | None = None) -> None:
        self.limits = limits
        self._state = state
        self._take = state.client.register_script(_TAKE)
        self.local = local or LocalLimiter(limits)
        self._away_until: float | None = None  # while Redis is away: when to try it again

    def key(self, check: Check, who: tuple[str, str]) -> str:
        """A check's Redis key: a fixed-size digest of whose it is and of which tool."""
        digest = hashlib.blake2b("\0".join((*who, check.tool)).encode(errors="surrogatepass"), digest_size=16)
        return self._state.key("limit", "r" if check.kind == "rate" else "q", digest.hexdigest())

    async def take(self, who: tuple[str, str], checks: list[Check]) -> Refusal | None:
        """Spend from every check in Redis (one round trip), or per process while Redis is away."""
        if self._away_until is not None:
            now = time.monotonic()
            if now < self._away_until:
                return self.local.take(who, checks)
            self._away_until = now + RETRY_SECONDS  # this call tries Redis again; the others meanwhile stay local
        args: list[Any] = []
        for check in checks:
            args += ("r", repr(check.limit), check.burst) if check.kind == "rate" else ("q", int(check.limit), "")
        try:
            refused, wait = await self._take(keys=[self.key(check, who) for check in checks], args=args)
        except (RedisError, OSError) as error:
            if self._away_until is None:
                log.warning("fleet-wide rate limits: Redis is unreachable (%s); limiting per process until it returns",
                            error)
            self._away_until = time.monotonic() + RETRY_SECONDS
            return self.local.take(who, checks)
        if self._away_until is not None:
            self._away_until = None
            log.warning("fleet-wide rate limits: Redis is back; limits hold across processes again")
        return Refusal(checks[refused - 1], float(wait)) if refused else None

    async def __call__(self, call: Call, call_next: Next) -> bytes:
        checks = self.limits.checks(call)
        if checks:
            refusal = await self.take(caller(call), checks)
            if refusal is not None:
                raise refusal.error()
        return await call_next(call)
