"""`--rate-limit`, `--tool-rate-limit`, `--daily-quota`, `--tool-daily-quota`: their values, and the
limiter they install (per process, or fleet-wide with `--redis`)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from .._runtime.limits import Limits, LocalLimiter
from .._serving.server import Server


def rate_limit(text: str) -> tuple[float, int]:
    """`RATE[:BURST]`: calls a second, and the burst (the rate rounded up, at least 1, when left out)."""
    rate_text, _, burst_text = text.partition(":")
    rate = float(rate_text)
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError("the rate is calls a second, a number > 0")
    burst = int(burst_text) if burst_text else max(1, math.ceil(rate))
    if burst < 1:
        raise ValueError("the burst is a whole number of calls >= 1")
    return rate, burst


def quota(text: str) -> int:
    """A daily quota: a whole number of calls >= 1."""
    calls = int(text)
    if calls < 1:
        raise ValueError("a daily quota is a whole number of calls >= 1")
    return calls


def _per_tool(items: list[str] | None, parse: Any, option: str) -> dict[str, Any]:
    """`TOOL=VALUE` items by tool name (the last given for a tool wins)."""
    found: dict[str, Any] = {}
    for item in items or ():
        tool, sep, value = item.partition("=")
        if not sep or not tool:
            raise ValueError(f"{option} takes TOOL=VALUE, not {item!r}")
        try:
            found[tool] = parse(value)
        except ValueError as error:
            raise ValueError(f"{option} {item!r}: {error}") from None
    return found


def add_options(parser: argparse.ArgumentParser) -> None:
    limits = parser.add_argument_group("limits (per caller: its principal, else its address; fleet-wide with --redis)")
    limits.add_argument("--rate-limit", type=rate_limit, metavar="RATE[:BURST]",
                        help="calls a second each caller may make, with bursts of BURST (e.g. 5:20)")
    limits.add_argument("--tool-rate-limit", dest="tool_rate_limits", action="append", metavar="TOOL=RATE[:BURST]",
                        help="the same for each caller's calls of one tool (repeatable)")
    limits.add_argument("--daily-quota", type=quota, metavar="N", help="tool calls each caller may make per UTC day")
    limits.add_argument("--tool-daily-quota", dest="tool_daily_quotas", action="append", metavar="TOOL=N",
                        help="calls of one tool each caller may make per UTC day (repeatable)")


def limits_from(args: argparse.Namespace) -> Limits:
    """The limits the options name (empty without any); a bad one raises ValueError saying which."""
    return Limits(rate=args.rate_limit, daily=args.daily_quota,
                  tools=_per_tool(args.tool_rate_limits, rate_limit, "--tool-rate-limit"),
                  tools_daily=_per_tool(args.tool_daily_quotas, quota, "--tool-daily-quota"))


def install(server: Server, limits: Limits, state: Any = None) -> None:
    """The limiter outermost among the server's middleware: in Redis when `state` (a `RedisState`) is given."""
    if state is not None:
        from ..fleetlimits import FleetLimiter

        limiter: Any = FleetLimiter(state, limits)
    else:
        limiter = LocalLimiter(limits)
    server.middleware = (limiter, *server.middleware)
