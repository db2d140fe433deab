"""Diagnostics: one `logging` hierarchy under the `mcpcore` logger, never stdout.

Every module logs to a logger under `mcpcore` named for its job (`mcpcore.dispatch`,
`mcpcore.tools`, `mcpcore.transports.http`, ...), so a library user routes or
silences them the standard way; the names are part of the API and stay put when
the code behind them moves between private modules. Tracebacks of user code and
transport faults are logged with `exc_info`; with no logging configured at all,
Python's last-resort handler still prints warnings and errors to stderr. Running a server (the CLI,
`Server.run`) adds a stderr handler through `configure` unless the application
configured logging itself.

Records logged while a call runs carry its facts as attributes (`CallFilter`:
`request_id`, `method`, `tool`, `principal`; the access log adds `outcome` and
`duration_ms`), and `JsonFormatter` writes one JSON object per record for log
shippers (`mcpcore run --log-format json`).
"""

from __future__ import annotations

import contextvars
import datetime
import logging
import sys
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ._runtime.call import Call

__all__ = ["CallFilter", "JsonFormatter", "configure"]

ROOT_LOGGER = "mcpcore"
LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("text", "json")
DEFAULT_LEVEL = "info"
CALL_FIELDS = ("request_id", "method", "tool", "principal", "outcome", "duration_ms")

# The running call's facts, not the call: a context copied while a call runs (a connection it
# opened, a timer) can outlive it by far, and a call holds its session and message.
call_facts: contextvars.ContextVar[tuple[Any, Any, str | None, str | None] | None] = contextvars.ContextVar(
    "mcpcore_call_facts", default=None)


def facts_of(call: Call) -> tuple[Any, Any, str | None, str | None]:
    """A call's request id, method, tool and principal, as its log records carry them."""
    message, route = call.message, call.route
    tool = route.target if route is not None else None  # `call.tool`, without its frame
    return message.get("id"), message.get("method"), tool.key if tool is not None else None, call.principal


class CallFilter(logging.Filter):
    """Adds the running call's request id, method, tool and principal to each record (if not already set)."""

    def filter(self, record: logging.LogRecord) -> bool:
        facts = call_facts.get()
        if facts is not None:
            for name, value in zip(CALL_FIELDS, facts):
                if not hasattr(record, name):
                    setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the call's facts, the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CALL_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure(level: str = DEFAULT_LEVEL, log_format: str = "text") -> None:
    """Log `mcpcore` records at `level` and above to stderr as `mcpcore: message` (or JSON lines).

    Leaves logging alone when the application (or an earlier call) already set up
    handlers, on the root logger or on `mcpcore`.
    """
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(level.upper())
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter("mcpcore: %(message)s"))
    handler.addFilter(CallFilter())
    logger.addHandler(handler)
