"""The tests check every message the server sends against the official wire schema of its era
(`mcpcore._wire.schemas`, which carries the schemas; `MCP_SPEC_DIR` points at another copy)."""

from mcpcore._wire.schemas import check, check_legacy, validator

__all__ = ["check", "check_legacy", "validator"]
