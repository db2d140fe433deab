"""The soak server with a leak planted in its sync echo (it keeps 10 KB per call): benchmarks/soak.py must fail on it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "servers"))

import soak_server  # noqa: E402

KEPT: list[str] = []


def echo(text: str) -> str:
    """Return the text, and keep 10 KB for ever."""
    KEPT.append(" " * 10_000)
    return text


soak_server.server.remove_tool("echo")
soak_server.server.add_tool(echo)

if __name__ == "__main__":
    soak_server.main()
