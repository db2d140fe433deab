"""The tests check every message the server sends against the official wire schema of its era
(`mcpcore.schemas`, which carries the schemas; `MCP_SPEC_DIR` points at another copy)."""

from mcpcore.schemas import check, check_legacy, validator

__all__ = ["check", "check_legacy", "validator"]
