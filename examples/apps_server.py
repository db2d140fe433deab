"""An MCP App: a dice tool whose results a host that speaks MCP Apps shows in an HTML view.

    mcpcore run examples/apps_server.py                    # stdio
    mcpcore run examples/apps_server.py --transport http   # http://127.0.0.1:8000/mcp

`roll_dice` names its view, `ui://dice/board` (examples/apps/dice.html); a host that
declared the `io.modelcontextprotocol/ui` extension reads it with `resources/read` and
renders each result in a sandboxed iframe. `roll_history` is for the view alone (its
"History" button): the agent never sees it. A client without MCP Apps sees a plain dice
tool answering in text. Both protocol eras, both transports. See docs/apps.md.
"""

import random
from collections import deque
from pathlib import Path

from mcpcore import Server, ToolError, ToolResult
from mcpcore.apps import Apps

server = Server("dice", version="1.0.0")
apps = Apps(server)

BOARD = "ui://dice/board"
apps.html(BOARD, (Path(__file__).parent / "apps" / "dice.html").read_text(encoding="utf-8"),
          name="Dice board", description="The dice of the last roll, and a button to roll again",
          prefers_border=True)

_history: deque[int] = deque(maxlen=10)  # the totals of the last rolls, for the view's History button


@apps.tool(BOARD)
def roll_dice(count: int = 2, sides: int = 6) -> ToolResult:
    """Roll `count` dice of `sides` sides (1-10 dice, 2-100 sides) and say what came up."""
    if not 1 <= count <= 10 or not 2 <= sides <= 100:
        raise ToolError("roll 1 to 10 dice of 2 to 100 sides")
    rolls = [random.randint(1, sides) for _ in range(count)]
    _history.append(sum(rolls))
    text = f"Rolled {count}d{sides}: {', '.join(map(str, rolls))} (total {sum(rolls)})"  # for text-only hosts
    return ToolResult([text], structured={"rolls": rolls, "sides": sides, "total": sum(rolls)})


@apps.tool(BOARD, visibility=["app"])
def roll_history() -> dict:
    """The totals of the last ten rolls, newest last (for the dice board's History button)."""
    return {"totals": list(_history)}


if __name__ == "__main__":
    server.run()
