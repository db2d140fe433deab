"""The inner-loop commands of the console script: `inspect`, `call`, `read`, `prompt`.

Each loads the TARGET, talks to it in memory through `mcpcore.testing.Client`
(no network, no subprocess; the server's lifespan is entered) and prints what a
client would see. `call` shows progress on stderr and asks elicitation questions
on the terminal. Exit status: 0, or 1 when the answer is an error.
"""

from __future__ import annotations

import signal
import sys
from contextlib import ExitStack
from typing import Any, Callable, Sequence

import anyio
import orjson

from .._serving.server import Server
from .._wire.jsonrpc import McpError
from ..testing import Client
from .runner import signal_receiver

__all__ = ["call", "inspect", "prompt", "read"]


def value(text: str) -> Any:
    """What a value typed on the command line means: JSON when it parses (41, true, {"a": 1}), else the text."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def arguments(pairs: Sequence[str], read: Callable[[str], Any] = value) -> dict[str, Any]:
    """`key=value` pairs as a dict (each value through `read`)."""
    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{pair!r} is not key=value")
        found[key] = read(text)
    return found


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _run(work: Callable[[], Any]) -> int:
    """`work` in an event loop; a Ctrl-C cancels it and comes out as `KeyboardInterrupt`, and what `work`
    raises comes out as itself (not inside the task group's exception group)."""
    interrupted = False
    ended: list[Any] = []  # what `work` returned, or the exception it raised

    async def until_interrupted() -> None:
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                nonlocal interrupted
                with ExitStack() as stack:
                    async for _ in signal_receiver(stack, (signal.SIGINT,)):
                        interrupted = True
                        tasks.cancel_scope.cancel()

            async def run() -> None:
                try:
                    ended.append(await work())
                except Exception as error:
                    ended.append(error)
                tasks.cancel_scope.cancel()

            tasks.start_soon(watch)
            tasks.start_soon(run)

    anyio.run(until_interrupted)
    if interrupted:
        raise KeyboardInterrupt
    if isinstance(ended[0], McpError):
        error = ended[0]
        data = f" {orjson.dumps(error.data).decode()}" if error.data is not None else ""
        print(f"mcpcore: error {error.code}: {error.message}{data}", file=sys.stderr)
        return 1
    if isinstance(ended[0], Exception):
        raise ended[0]
    return ended[0]  # type: ignore[no-any-return]


def inspect(server: Server, as_json: bool = False) -> int:
    """Print the tools (with their schemas), resources, templates and prompts: the lists its capabilities offer."""

    async def work() -> int:
        async with Client(server) as client:
            offered = (await client.discover()).get("capabilities", {})
            found: dict[str, Any] = {"server": {"name": server.name, "version": server.version}}
            lists = (("tools", "tools", client.list_tools), ("resources", "resources", client.list_resources),
                     ("resourceTemplates", "resources", client.list_resource_templates),
                     ("prompts", "prompts", client.list_prompts))
            for kind, capability, listing in lists:
                if capability in offered:  # a list the server does not offer is an error to ask for
                    found[kind] = await listing()
        print(_pretty(found) if as_json else _listing(found))
        return 0

    return _run(work)


def _listing(found: dict[str, Any]) -> str:
    lines = [f"{found['server']['name']} {found['server']['version']}"]
    sections = (("tools", "name"), ("resources", "uri"), ("resourceTemplates", "uriTemplate"), ("prompts", "name"))
    for kind, key in sections:
        if kind not in found:
            continue
        lines += ["", f"{kind} ({len(found[kind])})"]
        for item in found[kind]:
            described = item.get("description", "").split("\n")[0]
            lines.append(f"  {item[key]}" + (f"  — {described}" if described else ""))
            if kind == "tools":
                for name, schema in item["inputSchema"].get("properties", {}).items():
                    required = name in item["inputSchema"].get("required", ())
                    lines.append(f"      {name}: {_kind(schema)}{'' if required else ' (optional)'}")
            if kind == "prompts":
                lines += [f"      {a['name']}{'' if a.get('required') else ' (optional)'}" for a in item.get("arguments", [])]
    return "\n".join(lines)


def _kind(schema: Any) -> str:
    """A parameter's JSON Schema in a few words: `integer`, `"c" | "f"`, `string | null`, `array of string`."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return " | ".join(orjson.dumps(choice).decode() for choice in schema["enum"])
    if "const" in schema:
        return orjson.dumps(schema["const"]).decode()
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            return " | ".join(_kind(choice) for choice in schema[union])
    if isinstance(schema.get("$ref"), str):
        return schema["$ref"].rsplit("/", 1)[-1]
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    if kind == "array" and "items" in schema:
        return f"array of {_kind(schema['items'])}"
    return str(kind)


def _ask(params: dict[str, Any]) -> dict[str, Any]:
    """An elicitation answered on the terminal: each field of the form, or decline with an empty answer."""
    print(params.get("message", ""), file=sys.stderr)
    if params.get("mode") == "url":
        print(f"  open {params.get('url')}", file=sys.stderr)
        return {"action": "accept"}
    content: dict[str, Any] = {}
    for name, schema in params.get("requestedSchema", {}).get("properties", {}).items():
        print(f"  {name} ({schema.get('type', 'string')}): ", end="", file=sys.stderr, flush=True)
        text = sys.stdin.readline().strip()
        if not text:
            return {"action": "decline"}
        content[name] = text if schema.get("type") == "string" else value(text)
    return {"action": "accept", "content": content}


def _progress(params: dict[str, Any]) -> None:
    total = params.get("total")
    message = params.get("message")
    print(f"progress {params.get('progress')}{f'/{total}' if total is not None else ''}"
          f"{f': {message}' if message else ''}", file=sys.stderr)


def call(server: Server, tool: str, pairs: Sequence[str]) -> int:
    """Call one tool; print its text, or its structured content as JSON."""

    found = server.tools.get(tool)
    properties = found.input_schema.get("properties", {}) if found is not None else {}

    def read(key: str, text: str) -> Any:  # a parameter that takes text gets the text as typed ("42" stays "42")
        kind = properties.get(key, {}).get("type")
        return text if kind == "string" or (isinstance(kind, list) and "string" in kind) else value(text)

    given = {key: read(key, text) for key, text in arguments(pairs, str).items()}

    async def work() -> int:
        async with Client(server, elicit=_ask, on_progress=_progress, log_level="info",
                          on_log=lambda p: print(f"log {p.get('level')}: {p.get('data')}", file=sys.stderr)) as client:
            outcome = await client.call_tool(tool, given)
        print(_pretty(outcome.structured) if outcome.structured is not None else outcome.text)
        return 1 if outcome.is_error else 0

    return _run(work)


def read(server: Server, uri: str) -> int:
    """Read one resource; print text contents as they are and binary ones as their size."""

    async def work() -> int:
        async with Client(server) as client:
            for item in await client.read_resource(uri):
                print(item["text"] if "text" in item else f"<{item.get('mimeType', 'binary')}, {len(item.get('blob', ''))} base64 characters>")
        return 0

    return _run(work)


def prompt(server: Server, name: str, pairs: Sequence[str]) -> int:
    """Get one prompt; print its messages."""

    async def work() -> int:
        async with Client(server) as client:
            result = await client.get_prompt(name, arguments(pairs, str))  # prompt arguments are text
        for message in result["messages"]:
            content = message["content"]
            print(f"[{message['role']}] {content.get('text', _pretty(content))}")
        return 0

    return _run(work)
