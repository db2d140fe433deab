"""`Metrics`: counters and latency histograms in the Prometheus text format, with no dependency.

Off unless `Server(metrics=True)`; then the dispatcher records every call's
method, tool, outcome and duration, the HTTP transport its refusals by status,
and `render` adds the live gauges a transport passes in (in-flight calls,
connections, sessions...). Label values come from closed sets only (known
methods, registered tools, HTTP statuses), so a client sending made-up method
names cannot grow the series without bound.
"""

from __future__ import annotations

import bisect
import collections
from typing import Mapping

from .._wire.protocol import HTTP_STATUS

__all__ = ["Metrics"]

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
KNOWN_METHODS = frozenset({
    "server/discover", "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
    "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "completion/complete", "logging/setLevel", "subscriptions/listen",
})
_ERROR_CODES = frozenset(HTTP_STATUS)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Histogram:
    __slots__ = ("counts", "total", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)  # the last one is +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1


class Metrics:
    """What a server has done since it started, and how long it took."""

    def __init__(self) -> None:
        self.calls: collections.Counter[tuple[str, str, str]] = collections.Counter()  # (method, tool, outcome)
        self.errors: collections.Counter[int] = collections.Counter()  # by JSON-RPC code
        self.durations: dict[str, _Histogram] = collections.defaultdict(_Histogram)  # by method
        self.rejections: collections.Counter[int] = collections.Counter()  # HTTP refusals by status
        self.dropped_notifications = 0  # not sent: the server answers JSON only

    def call_ended(self, method: str, tool: str, code: int | None, cancelled: bool, seconds: float) -> None:
        method = method if method in KNOWN_METHODS else "other"
        outcome = "cancelled" if cancelled else "ok" if code is None else "error"
        self.calls[(method, tool, outcome)] += 1
        if code is not None and not cancelled:
            self.errors[code if code in _ERROR_CODES else 0] += 1
        self.durations[method].observe(seconds)

    def rejected(self, status: int) -> None:
        self.rejections[status] += 1

    def notification_dropped(self) -> None:
        self.dropped_notifications += 1

    def render(self, gauges: Mapping[str, tuple[str, float]]) -> bytes:
        """The text exposition format; `gauges` maps a name to (help, value)."""
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")

        family("mcpcore_calls_total", "counter", "Calls ended, by method, tool and outcome (ok, error, cancelled).")
        for (method, tool, outcome), n in sorted(self.calls.items()):
            out.append(f'mcpcore_calls_total{{method="{method}",tool="{_label(tool)}",outcome="{outcome}"}} {n}')
        family("mcpcore_call_errors_total", "counter", "Calls answered with a JSON-RPC error, by code (0: any other).")
        for code, n in sorted(self.errors.items()):
            out.append(f'mcpcore_call_errors_total{{code="{code}"}} {n}')
        family("mcpcore_call_duration_seconds", "histogram", "Time from the start of a call to its end, by method.")
        for method, histogram in sorted(self.durations.items()):
            running = 0
            for bound, n in zip((*map(repr, BUCKETS), "+Inf"), histogram.counts):
                running += n
                out.append(f'mcpcore_call_duration_seconds_bucket{{method="{method}",le="{bound}"}} {running}')
            out.append(f'mcpcore_call_duration_seconds_sum{{method="{method}"}} {histogram.total!r}')
            out.append(f'mcpcore_call_duration_seconds_count{{method="{method}"}} {histogram.count}')
        family("mcpcore_http_rejections_total", "counter", "HTTP requests refused before a call, by status.")
        for status, n in sorted(self.rejections.items()):
            out.append(f'mcpcore_http_rejections_total{{status="{status}"}} {n}')
        family("mcpcore_notifications_dropped_total", "counter",
               "Notifications of a call not sent because the server answers JSON only (--json-response).")
        out.append(f"mcpcore_notifications_dropped_total {self.dropped_notifications}")
        for name, (help_text, value) in gauges.items():
            family(name, "gauge", help_text)
            out.append(f"{name} {value:g}")
        return ("\n".join(out) + "\n").encode()
