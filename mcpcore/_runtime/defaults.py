"""Every default limit and setting of the runtime, written once.

The transports' configuration (`HttpConfig`, `StdioSession`), the CLI's help
and its worker supervisor all read them here, so a default cannot drift
between the code and what `mcpcore run --help` says.
"""

from __future__ import annotations

import os

MIB = 1024 * 1024

# sync functions (tools, resources, prompts defined with `def`)
SYNC_MAX_THREADS = 40  # worker threads at most, abandoned ones included
SYNC_IDLE_TIMEOUT = 10.0  # seconds an idle worker thread lives

# isolated tools (`@server.tool(isolate=True)`): worker processes
ISOLATE_WORKERS = 4  # worker processes at most, fewer on a machine with fewer CPUs (`Server(isolate_workers=...)`)
ISOLATE_START_TIMEOUT = 30.0  # seconds a new worker gets to start (its interpreter and mcpcore imported)
ISOLATE_STOP_GRACE = 2.0  # seconds an idle worker gets to exit once its stdin closes, at shut-down, before SIGKILL
ISOLATE_MAX_LINE_BYTES = 64 * MIB  # longest line a worker may send (a result, a progress or log message)

# dependencies (`Depends`)
DEPENDENCY_CLEANUP_TIMEOUT = 10.0  # seconds a call's generator dependencies get to clean up, shielded from its cancellation

# stdio
STDIO_MAX_IN_FLIGHT = 128  # concurrent calls before reading pauses
STDIO_MAX_LINE_BYTES = 64 * MIB  # longest accepted message line
STDIO_GRACE_PERIOD = 2.0  # seconds in-flight calls get after stdin closes
STDIO_MAX_HELD = 256  # requests read ahead while the window is full; then reading pauses

# Streamable HTTP
HTTP_HOST = "127.0.0.1"
HTTP_PORT = 8000
HTTP_PATH = "/mcp"
HTTP_MAX_BODY_BYTES = 4 * MIB
HTTP_MAX_BODY_CHUNKS = 16384  # pieces (chunked encoding, or reads) one body may arrive in
HTTP_MAX_HEADER_BYTES = 64 * 1024
HTTP_MAX_CONNECTIONS = 1000  # open connections before new ones get 503
HTTP_MAX_IN_FLIGHT = 1024  # concurrent calls before new ones wait for a slot
HTTP_HEADER_TIMEOUT = 10.0  # seconds for a request head to arrive
HTTP_BODY_TIMEOUT = 30.0  # seconds for a request body to arrive
HTTP_KEEP_ALIVE_TIMEOUT = 30.0  # seconds an idle keep-alive connection stays open
HTTP_SSE_KEEPALIVE = 15.0  # seconds of silence before an SSE stream gets a comment line
HTTP_GRACE_PERIOD = 5.0  # seconds in-flight calls get at shutdown
HTTP_MAX_SESSIONS = 1000  # live 2025-era sessions before initialize is refused
# One authenticated principal may hold max_sessions // HTTP_SESSION_SHARE of them (at least 1) unless
# max_sessions_per_principal says otherwise; anonymous clients have no share (auth names no one).
HTTP_SESSION_SHARE = 10
HTTP_SESSION_IDLE_TIMEOUT = 1800.0  # seconds a 2025-era session lives without a request
HTTP_SESSION_EVENTS = 256  # a 2025-11-25 session's stored stream events, for Last-Event-ID (in memory, or in Redis)
HTTP_SESSION_EVENT_BYTES = 256 * 1024  # ... and their message bytes in memory (the newest event is kept whatever its size)
HTTP_HEALTH_PATH = "/healthz"  # liveness probe: 200 while the process serves
HTTP_READY_PATH = "/readyz"  # readiness probe: 200 while serving, 503 once draining
HTTP_SSE_PATH = "/sse"  # the deprecated HTTP+SSE transport (2024-11-05): GET opens a session's stream
HTTP_SSE_MESSAGE_PATH = "/messages"  # ... and its messages are POSTed here (?session_id=...)
HTTP_SSE_MAX_CALLS = 128  # requests one HTTP+SSE session may have in flight (each POST is answered 202 at once)

# subscriptions (`subscriptions/listen`, and a 2025-era session's `resources/subscribe`)
SUBSCRIPTION_MAX_URIS = 1000  # resource URIs one subscription or session may follow
SESSION_MAX_URI_LENGTH = 4096  # characters of a URI a 2025-era session follows (its record holds them all)

SUPERVISOR_ENV = "MCPCORE_SUPERVISOR_PID"  # set for a process a supervisor started (workers, `mcpcore dev`): it stops when that one dies

# "1": take the portable paths on every platform, as Windows must (docs/deploying.md): stdio through a
# socket pair fed by threads, SIGINT/SIGTERM by `signal.signal`, and `--workers` refused
PORTABLE_ENV = "MCPCORE_PORTABLE"


def portable_forced() -> bool:
    """Whether `MCPCORE_PORTABLE=1` asks for the portable paths where the native ones would work."""
    return os.environ.get(PORTABLE_ENV) == "1"
