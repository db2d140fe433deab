"""Asking the user (multi round-trip requests) and announcing changes (subscriptions).

    mcpcore run examples/ask_server.py --transport http
"""

from mcpcore import Context, Elicit, InputRequired, McpError, Server

server = Server("ask", version="1.0.0")

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool
def greet(ctx: Context) -> str:
    """Ask for the user's name, then greet them."""
    answer = ctx.answer("name")
    if answer is None:  # first round; a client without elicitation gets -32021
        raise InputRequired(name=Elicit("What is your name?", NAME_FORM), state={"asked": "name"})
    if answer.accepted and answer.content.get("name"):
        return f"Hello, {answer.content['name']}!"
    return "No problem, maybe another time."


@server.tool
def touch(uri: str) -> str:
    """Announce that a resource changed to every subscription that follows it."""
    if not uri:
        raise McpError(-32602, "uri must not be empty")
    server.notify_resource_updated(uri)
    return "touched"


@server.resource("demo://note", mime_type="text/plain")
def note() -> str:
    """A note that subscribers can follow."""
    return "Remember to drink water."
