"""An mcpcore upstream for the gateway's tests of what changes while it runs: a tool that registers another
tool (a list change), one that announces a resource update, and completions for a prompt and a template.
Run as `mcpcore run tests/upstreams/changing_server.py` (stdio) behind `mcpcore proxy`."""

from __future__ import annotations

from mcpcore import Server

NAMES = ["Ada", "Alan", "Grace"]

server = Server("changing-upstream", version="0.0.1")


@server.tool
def add_tool(name: str) -> str:
    """Register a tool at run time (announces tools/list_changed)."""
    server.add_tool(lambda: f"I am {name}", name=name, description="added at run time")
    return "added"


@server.tool
def touch(uri: str) -> str:
    """Announce that a resource changed."""
    server.notify_resource_updated(uri)
    return "touched"


@server.resource("demo://note", mime_type="text/plain")
def note() -> str:
    """A note to follow."""
    return "Remember to drink water."


@server.resource("demo://people/{name}", mime_type="text/plain")
def person(name: str) -> str:
    """One person, by name."""
    return f"{name} was here."


@server.prompt
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}!"


@server.completion(prompt="greet", argument="name")
def greet_names(value: str) -> list[str]:
    return [name for name in NAMES if name.startswith(value)]


@server.completion(resource="demo://people/{name}", argument="name")
def people_names(value: str) -> list[str]:
    return [name for name in NAMES if name.lower().startswith(value.lower())]
