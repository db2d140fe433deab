"""The gateway's parts beside `mcpcore.gateway`: `eras` (which era the upstream speaks, and a 2025-era
upstream's server-to-client requests asked of the calling client)."""
