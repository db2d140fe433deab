"""`HttpConfig`: every knob of Streamable HTTP, the built-in server's and the ASGI adapter's alike."""

from __future__ import annotations

from dataclasses import dataclass

from mcpcore._runtime import defaults


@dataclass
class HttpConfig:
    """Every knob of the HTTP transport, with its default."""

    host: str = defaults.HTTP_HOST
    port: int = defaults.HTTP_PORT
    path: str = defaults.HTTP_PATH
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()  # browser pages that may call cross-origin (each also an allowed Origin)
    max_body_bytes: int = defaults.HTTP_MAX_BODY_BYTES
    max_body_chunks: int = defaults.HTTP_MAX_BODY_CHUNKS
    max_header_bytes: int = defaults.HTTP_MAX_HEADER_BYTES
    max_connections: int = defaults.HTTP_MAX_CONNECTIONS
    max_in_flight: int = defaults.HTTP_MAX_IN_FLIGHT
    header_timeout: float = defaults.HTTP_HEADER_TIMEOUT
    body_timeout: float = defaults.HTTP_BODY_TIMEOUT
    keep_alive_timeout: float = defaults.HTTP_KEEP_ALIVE_TIMEOUT
    sse_keepalive: float = defaults.HTTP_SSE_KEEPALIVE
    stateless: bool = False  # 2025-era clients served without sessions: each POST stands on its own
    json_response: bool = False  # never an SSE answer: notifications before a response are dropped (and counted)
    grace_period: float = defaults.HTTP_GRACE_PERIOD
    max_sessions: int = defaults.HTTP_MAX_SESSIONS
    max_sessions_per_principal: int | None = None  # one authenticated principal's share (None: a tenth of max_sessions)
    session_idle_timeout: float = defaults.HTTP_SESSION_IDLE_TIMEOUT
    health_path: str | None = defaults.HTTP_HEALTH_PATH  # None: no liveness probe
    ready_path: str | None = defaults.HTTP_READY_PATH  # None: no readiness probe
    sse_path: str | None = defaults.HTTP_SSE_PATH  # the deprecated HTTP+SSE transport's stream (None or "": not served)
    sse_message_path: str = defaults.HTTP_SSE_MESSAGE_PATH  # ... and where its messages are POSTed
    listen_fd: int | None = None  # an inherited listening socket (worker processes)
    metrics_host: str = "127.0.0.1"  # where `Server(metrics=True)` serves GET /metrics: its own listener,
    metrics_port: int | None = None  # never the public one (None: counted but not served)
