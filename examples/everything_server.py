"""The "everything" server: the fixtures of the official MCP conformance suite.

It serves both protocol eras from one app: the stateless 2026-07-28 wire and 2025-era
sessions (2025-11-25 back to 2024-11-05), where the tools that ask the client (sampling,
elicitation, roots) send it real requests. Over HTTP that is Streamable HTTP at /mcp and,
for 2024-11-05 clients, the HTTP+SSE transport at /sse; without --transport, stdio.
Every name, URI and literal string below is one the suite sends or looks for.
Registration order is list order, so `test_simple_text` comes first.

From the root of a clone, after the README's quick start:

    .venv/bin/mcpcore inspect examples/everything_server.py
    .venv/bin/mcpcore run examples/everything_server.py --transport http --port 8850

then point a client at http://127.0.0.1:8850/mcp (or /sse). `bash .ci/conformance` runs the
official suite against it over HTTP and writes CONFORMANCE.md; it needs the suite's runner
script beside the clone (../shared/conformance/run.sh, or CONF_RUN_SH) and Node.
"""

from __future__ import annotations

import base64
import io
import wave
from pathlib import Path

import anyio

from mcpcore import (
    Audio,
    Context,
    Elicit,
    EmbeddedResource,
    Image,
    InputRequired,
    ListRoots,
    McpError,
    Sample,
    Server,
    ToolError,
    ToolResult,
)
from mcpcore.skills import Skills

server = Server("mcp-conformance-test-server", version="0.1.0")

# A 1x1 PNG, as base64 text.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _silent_wav(frames: int = 800, rate: int = 8000) -> bytes:
    """A tenth of a second of 8-bit mono silence, as a WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(1)
        wav.setframerate(rate)
        wav.writeframes(b"\x80" * frames)
    return buffer.getvalue()


WAV = _silent_wav()


def form(**properties: str) -> dict:
    """An elicitation form of required fields: `form(name="string")`."""
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


# -- tools: content types ----------------------------------------------------


@server.tool
def test_simple_text() -> str:
    """Return a simple text response."""
    return "This is a simple text response for testing."


@server.tool
def test_image_content() -> Image:
    """Return a 1x1 PNG image."""
    return Image(PNG, "image/png")


@server.tool
def test_audio_content() -> Audio:
    """Return a short WAV clip."""
    return Audio(WAV, "audio/wav")


@server.tool
def test_embedded_resource() -> EmbeddedResource:
    """Return an embedded text resource."""
    return EmbeddedResource("test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain")


@server.tool
def test_multiple_content_types() -> list:
    """Return text, an image and an embedded resource together."""
    return [
        "Multiple content types test:",
        Image(PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource", text='{"test": "data", "value": 123}', mime_type="application/json"
        ),
    ]


@server.tool
def test_error_handling() -> ToolResult:
    """Always fail with a tool error (isError), not a protocol error."""
    return ToolResult(["This tool intentionally returns an error for testing"], is_error=True)


# -- tools: notifications on the call's stream --------------------------------


@server.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50 and 100 of 100, about 50 ms apart."""
    for done in (0, 50, 100):
        if done:
            await anyio.sleep(0.05)
        await ctx.progress(done, total=100, message=f"{done}% done")
    return f"Progress complete (token {ctx.meta.get('progressToken')})"


@server.tool
async def test_logging_tool(ctx: Context) -> str:
    """Log three messages; they are sent only if the request set a log level."""
    await ctx.info("Tool execution started")
    await ctx.info("Tool processing data")
    await ctx.info("Tool execution completed")
    return "Logging complete"


@server.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Log three messages about 50 ms apart (2025-era sessions set the level with logging/setLevel)."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(text)
        await anyio.sleep(0.05)
    return "Logging complete"


@server.tool
async def test_reconnection(ctx: Context) -> str:
    """SSE polling (SEP-1699): end the response stream early; the client resumes it with GET."""
    await ctx.close_stream()
    await anyio.sleep(0.1)
    return "Reconnection test completed"


# -- tools: asking the client (2025-era sessions get real requests) ------------


@server.tool
def test_sampling(prompt: str, ctx: Context) -> str:
    """Ask the client's model to answer a prompt."""
    answer = ctx.answer("reply")
    if answer is None:
        raise InputRequired(reply=Sample(prompt, max_tokens=100))
    return f"LLM response: {answer.text}"


@server.tool
def test_elicitation(message: str, ctx: Context) -> str:
    """Ask the user for a username and an email."""
    answer = ctx.answer("info")
    if answer is None:
        raise InputRequired(info=Elicit(message, form(username="string", email="string")))
    return f"User response: action={answer.action}, content={answer.content}"


SEP1034_DEFAULTS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Your name", "default": "John Doe"},
        "age": {"type": "integer", "description": "Your age", "default": 30},
        "score": {"type": "number", "description": "Your score", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verified?", "default": True},
    },
}


@server.tool
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """An elicitation whose fields carry default values (SEP-1034)."""
    answer = ctx.answer("profile")
    if answer is None:
        raise InputRequired(profile=Elicit("Confirm your profile", SEP1034_DEFAULTS))
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


SEP1330_ENUMS = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"},
        ]}},
    },
}


@server.tool
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """An elicitation with every enum style (SEP-1330)."""
    answer = ctx.answer("choices")
    if answer is None:
        raise InputRequired(choices=Elicit("Pick your options", SEP1330_ENUMS))
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


# -- tools: capabilities, schemas and headers ---------------------------------


@server.tool(requires={"sampling": {}})
def test_missing_capability() -> str:
    """Needs a client that declared sampling (otherwise -32021)."""
    return "The client declared sampling."


@server.tool
def test_streaming_elicitation(ctx: Context) -> str:
    """Ask for a name through the result (never a request on the response stream)."""
    answer = ctx.answer("user_name")
    if answer is None:
        raise InputRequired(user_name=Elicit("What is your name?", form(name="string")))
    return f"Hello, {answer.content.get('name', 'stranger')}!"


@server.tool(
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region", "description": "A region name"}},
    }
)
def test_x_mcp_header(region: str = "<none>") -> str:
    """Echo `region`, which clients also send in the Mcp-Param-Region header."""
    return f"region={region}"


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(**arguments: object) -> dict:
    """Accept arguments described by a JSON Schema 2020-12 input schema (kept verbatim)."""
    return {"received": arguments}


# -- tools: changing the lists at runtime -------------------------------------


def test_dynamic_tool() -> str:
    """A tool that exists only briefly."""
    return "dynamic"


def test_dynamic_prompt() -> str:
    """A prompt that exists only briefly."""
    return "dynamic"


@server.tool
async def test_trigger_tool_change() -> str:
    """Add and remove a tool; open subscriptions are told the tool list changed."""
    server.add_tool(test_dynamic_tool)
    server.remove_tool("test_dynamic_tool")
    return "Tool list changed"


@server.tool
async def test_trigger_prompt_change() -> str:
    """Add and remove a prompt; open subscriptions are told the prompt list changed."""
    server.add_prompt(test_dynamic_prompt)
    server.remove_prompt("test_dynamic_prompt")
    return "Prompt list changed"


# -- tools: multi round-trip requests (input_required) ------------------------


@server.tool
def test_input_required_result_elicitation(ctx: Context) -> str:
    """Ask the user's name with a form, then greet them."""
    answer = ctx.answer("user_name")
    if answer is None:  # first round, or the answer is missing: ask (again)
        raise InputRequired(user_name=Elicit("What is your name?", form(name="string")))
    if not answer.accepted:
        return f"No name given ({answer.action})."
    return f"Hello, {answer.content.get('name')}!"


@server.tool
def test_input_required_result_sampling(ctx: Context) -> str:
    """Ask the client's model a question, then report its answer."""
    answer = ctx.answer("capital_question")
    if answer is None:
        raise InputRequired(capital_question=Sample("What is the capital of France?", max_tokens=100))
    return f"The model said: {answer.text}"


@server.tool
def test_input_required_result_list_roots(ctx: Context) -> str:
    """Ask the client for its roots, then list them."""
    roots = ctx.answer("client_roots")
    if roots is None:
        raise InputRequired(client_roots=ListRoots())
    return "Roots: " + ", ".join(root.uri for root in roots)


@server.tool
def test_input_required_result_request_state(ctx: Context) -> str:
    """Ask for a confirmation, carrying state to the retry."""
    answer = ctx.answer("confirm")
    if answer is None or ctx.state != {"step": "confirm"}:
        raise InputRequired(confirm=Elicit("Please confirm", form(ok="boolean")), state={"step": "confirm"})
    return "state-ok" if answer.accepted and answer.content.get("ok") else "state-ok, not confirmed"


@server.tool
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Ask for a name, a greeting from the model and the roots, all at once."""
    name, greeting, roots = ctx.answer("user_name"), ctx.answer("greeting"), ctx.answer("client_roots")
    if name is None or greeting is None or roots is None:
        raise InputRequired(
            user_name=Elicit("What is your name?", form(name="string")),
            greeting=Sample("Write a one-line greeting.", max_tokens=100),
            client_roots=ListRoots(),
            state={"asked": ["user_name", "greeting", "client_roots"]},
        )
    return f"{greeting.text} {name.content.get('name')} ({len(roots)} roots)"


@server.tool
def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds of questions: a name, then a favourite color."""
    state = ctx.state or {}
    name, color = ctx.answer("step1"), ctx.answer("step2")
    if state.get("round") == 2 and color is not None:
        return f"{state['name']} likes {color.content.get('color')}."
    if state.get("round") == 1 and name is not None:
        raise InputRequired(
            step2=Elicit("Step 2: What is your favorite color?", form(color="string")),
            state={"round": 2, "name": name.content.get("name")},
        )
    raise InputRequired(step1=Elicit("Step 1: What is your name?", form(name="string")), state={"round": 1})


@server.tool
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Ask with state; a retry whose requestState was altered is refused (-32602)."""
    answer = ctx.answer("confirm")
    if answer is None:
        raise InputRequired(confirm=Elicit("Please confirm", form(ok="boolean")), state={"step": "confirm"})
    return "State verified"


@server.tool
def test_input_required_result_capabilities(ctx: Context) -> str:
    """Ask only for what the client declared it can answer."""
    wanted = {
        "user_input": Elicit("What is your name?", form(name="string")),
        "sample": Sample("Say hello.", max_tokens=100),
        "client_roots": ListRoots(),
    }
    if all(ctx.answer(name) is None for name in wanted):
        askable = {name: request for name, request in wanted.items() if ctx.can_ask(request)}
        if askable:
            raise InputRequired(askable)
        return "This client can answer no input requests."
    answered = sorted(name for name in wanted if ctx.answer(name) is not None)
    return "Answered: " + ", ".join(answered)


# -- tools: the Tasks extension (SEP-2663) -------------------------------------
# A client that declares io.modelcontextprotocol/tasks gets a task handle to poll
# from the task="optional"/"required" tools; other clients get the plain call.


@server.tool
def greet(name: str) -> str:
    """Greet someone (an ordinary tool: never a task)."""
    return f"Hello, {name}!"


@server.tool(task="optional")
async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "job") -> str:
    """Work for `seconds`, reporting progress each second; a task when the client can poll."""
    for done in range(int(seconds)):
        await ctx.progress(done, seconds, f"{label}: {done} of {seconds:g} s")
        await anyio.sleep(1)
    await anyio.sleep(seconds - int(seconds))
    return f"{label}: computed in {seconds:g} s"


@server.tool(task="required")
async def failing_job() -> str:
    """Fail after a second, as a tool reports failure (the task completes with isError)."""
    await anyio.sleep(1)
    raise ToolError("The job failed: nothing to process")


@server.tool(task="optional")
async def protocol_error_job() -> str:
    """Fail with a protocol error (the task fails with the JSON-RPC error inlined)."""
    await anyio.sleep(0.2)
    raise McpError(-32603, "The job hit an internal error")  # JSON-RPC: internal error


@server.tool(task="optional")
def confirm_delete(filename: str, ctx: Context) -> str:
    """Ask before deleting `filename` (a task waits in input_required for the answer)."""
    answer = ctx.answer("confirmation")
    if answer is None:
        raise InputRequired(confirmation=Elicit(f"Delete {filename}?", form(confirm="boolean")))
    confirmed = answer.accepted and answer.content.get("confirm") is True
    return f"Deleted {filename}" if confirmed else f"Kept {filename}"


@server.tool(task="optional")
def multi_input(ctx: Context) -> str:
    """Ask two questions at once; answers may come one at a time."""
    first, second = ctx.answer("first"), ctx.answer("second")
    if first is None or second is None:
        raise InputRequired(first=Elicit("First name?", form(name="string")),
                            second=Elicit("Second name?", form(name="string")))
    return f"Got {first.content.get('name')} and {second.content.get('name')}"


@server.tool(task="required", task_after_input=True)
async def test_tool_with_task(ctx: Context) -> str:
    """Ask the user's name in the request (MRTR), then greet them from a task."""
    answer = ctx.answer("user_name")
    if answer is None:
        raise InputRequired(user_name=Elicit("What is your name?", form(name="string")))
    await anyio.sleep(0.5)
    return f"Hello, {answer.content.get('name')}! (from a task)"


# -- resources -----------------------------------------------------------------


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return base64.b64decode(PNG)


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource 2025-era sessions can subscribe to."""
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> dict:
    """Data for any id, from a URI template."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


# -- prompts -------------------------------------------------------------------


@server.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """A prompt that embeds a resource."""
    return [
        EmbeddedResource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"),
        "Please process the embedded resource above.",
    ]


@server.prompt
def test_prompt_with_image() -> list:
    """A prompt that includes an image."""
    return [Image(PNG, "image/png"), "Please analyze the image above."]


@server.prompt
def test_input_required_result_prompt(ctx: Context) -> str:
    """Ask which context to use, then build the prompt with it."""
    answer = ctx.answer("user_context")
    if answer is None:
        raise InputRequired(user_context=Elicit("What context should the prompt use?", form(context="string")))
    return f"Use this context: {answer.content.get('context')}"


@server.completion(prompt="test_prompt_with_arguments", argument="arg1")
def complete_arg1(value: str) -> list:
    """Suggestions for arg1 that start with what was typed."""
    return [choice for choice in ("alpha", "beta", "gamma") if choice.startswith(value)]


# -- the Skills extension (SEP-2640) --------------------------------------------
# Two skills from examples/skills/; the first listed has a subdirectory, which the
# suite's resources/directory/read checks descend into.

Skills(server).add_directory(Path(__file__).parent / "skills")
