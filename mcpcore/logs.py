"""Diagnostics: one `logging` hierarchy under the `mcpcore` logger, never stdout.

Every module logs to `logging.getLogger(__name__)` (`mcpcore.dispatch`,
`mcpcore.tools`, `mcpcore.transports.http`, ...), so a library user routes or
silences them the standard way. Tracebacks of user code and transport faults are
logged with `exc_info`; with no logging configured at all, Python's last-resort
handler still prints warnings and errors to stderr. Running a server (the CLI,
`Server.run`) adds a stderr handler through `configure` unless the application
configured logging itself.
"""

from __future__ import annotations

import logging
import sys

ROOT_LOGGER = "mcpcore"
LEVELS = ("debug", "info", "warning", "error", "critical")
DEFAULT_LEVEL = "info"


def configure(level: str = DEFAULT_LEVEL) -> None:
    """Log `mcpcore` records at `level` and above to stderr as `mcpcore: message`.

    Leaves logging alone when the application (or an earlier call) already set up
    handlers, on the root logger or on `mcpcore`.
    """
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(level.upper())
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mcpcore: %(message)s"))
    logger.addHandler(handler)
