"""A server for the multi round-trip tests: tools, a prompt and resources that ask for input.

`build()` returns a fresh `Server` (the in-process and HTTP tests); `server` is
the one `mcpcore run tests/servers/mrtr_server.py` serves. Without explicit
keys the seal uses `MCPCORE_STATE_KEYS`, so a test that sets it can forge
state the server accepts (e.g. an already expired one).
"""

from __future__ import annotations

from typing import Any

from mcpcore import Context, Elicit, ElicitUrl, InputRequired, ListRoots, Sample, Server


def form(**fields: str) -> dict[str, Any]:
    """A flat elicitation schema: every field a required string."""
    return {"type": "object", "properties": {f: {"type": "string", "description": d} for f, d in fields.items()}, "required": list(fields)}


NAME_FORM = form(user_name="Your name")
SIZE_FORM = form(size="S, M or L")
COLOUR_FORM = form(colour="Any colour")
TONE_FORM = form(tone="How the interview should sound")
CONSENT_FORM = {"type": "object", "properties": {"show": {"type": "boolean"}}, "required": ["show"]}
SIGN_IN_URL = "https://example.com/sign-in?session=42"


def build(**options: Any) -> Server:
    server = Server("mrtr-tests", version="0.0.1", **options)

    @server.tool
    def ask_name(ctx: Context) -> str:
        """Ask the user's name with a form, then greet them (sync: runs in a worker thread)."""
        answer = ctx.answer("user_name")
        if answer is None:
            raise InputRequired(user_name=Elicit("What is your name?", NAME_FORM))
        if answer.accepted:
            return f"Hello, {answer.content.get('user_name')}!"
        return f"The user chose {answer.action}."

    @server.tool
    async def ask_name_by_returning(ctx: Context) -> Any:
        """Like ask_name, but returns InputRequired instead of raising it."""
        answer = ctx.answer("user_name")
        if answer is None:
            return InputRequired(user_name=Elicit("What is your name?", NAME_FORM), state={"returned": True})
        return f"Returned, then answered: {answer.content.get('user_name')} (state {ctx.state})"

    @server.tool
    async def ask_model(question: str, ctx: Context) -> str:
        """Ask the client's model a question."""
        reply = ctx.answer("reply")
        if reply is None:
            raise InputRequired(reply=Sample(question, max_tokens=50, system_prompt="Answer briefly."))
        return f"{reply.model} ({reply.role}, {reply.stop_reason}) says: {reply.text}"

    @server.tool
    def ask_roots(ctx: Context) -> str:
        """Ask for the client's roots and list them."""
        roots = ctx.answer("roots")
        if roots is None:
            raise InputRequired(roots=ListRoots())
        return "; ".join(f"{type(r).__name__}({r.uri}, {r.name})" for r in roots)

    @server.tool
    async def ask_everything(ctx: Context) -> str:
        """Ask for a name, a model reply and the roots in one round."""
        if ctx.state is None:
            raise InputRequired(
                {
                    "user_name": Elicit("What is your name?", NAME_FORM),
                    "reply": Sample("Say something nice."),
                    "roots": ListRoots(),
                },
                state={"round": 1, "purpose": "everything"},
            )
        name, reply, roots = ctx.answer("user_name"), ctx.answer("reply"), ctx.answer("roots")
        return f"{ctx.state}: name={name.content['user_name']}, model={reply.text}, roots={[r.uri for r in roots]}"

    @server.tool
    def order(item: str, ctx: Context) -> str:
        """Three rounds: a size, then a colour, then the model's confirmation; each
        round's state carries the earlier answers."""
        state = ctx.state or {"round": 0}
        if state["round"] == 0:
            raise InputRequired(size=Elicit(f"Which size of {item}?", SIZE_FORM), state={"round": 1})
        if state["round"] == 1:
            size = ctx.answer("size")
            if size is None:
                raise InputRequired(size=Elicit(f"Which size of {item}?", SIZE_FORM), state=state)
            raise InputRequired(
                colour=Elicit(f"Which colour of {item}?", COLOUR_FORM),
                state={"round": 2, "size": size.content["size"]},
            )
        if state["round"] == 2:
            colour = ctx.answer("colour")
            raise InputRequired(
                confirm=Sample(f"Confirm a {state['size']} {colour.content['colour']} {item}?"),
                state={"round": 3, "size": state["size"], "colour": colour.content["colour"]},
            )
        confirm = ctx.answer("confirm")
        return f"{item}: size={state['size']}, colour={state['colour']}, confirmed by {confirm.model}: {confirm.text}"

    @server.tool
    def pick_colour(ctx: Context) -> str:
        """Ask the user when the client can elicit, else ask the client's model."""
        ask_user = Elicit("Pick a colour", COLOUR_FORM)
        if ctx.state is None:
            if ctx.can_ask(ask_user):
                raise InputRequired(colour=ask_user, state="asked the user")
            raise InputRequired(colour=Sample("Pick a colour."), state="asked the model")
        answer = ctx.answer("colour")
        picked = answer.content["colour"] if ctx.state == "asked the user" else answer.text
        return f"{ctx.state}: {picked}"

    @server.tool
    def insist(ctx: Context) -> str:
        """Always ask for a form and a model reply, whatever the client declared."""
        raise InputRequired(user_name=Elicit("What is your name?", NAME_FORM), reply=Sample("Hi"))

    @server.tool
    def sign_in(ctx: Context) -> str:
        """Send the user to a URL (URL-mode elicitation)."""
        answer = ctx.answer("sign_in")
        if answer is None:
            raise InputRequired(sign_in=ElicitUrl("Sign in to continue.", SIGN_IN_URL), state={"session": 42})
        return f"sign-in {answer.action} for session {ctx.state['session']}"

    @server.tool
    def busy(ctx: Context) -> str:
        """Ask only for a retry (state, no input requests) the first time."""
        if ctx.state is None:
            raise InputRequired(state={"attempt": 1})
        return f"done on attempt {ctx.state['attempt'] + 1}"

    @server.tool(name="interview")
    def interview_tool(topic: str, ctx: Context) -> str:
        """A tool with the same name as a prompt, asking the same question."""
        tone = ctx.answer("tone")
        if tone is None:
            raise InputRequired(tone=Elicit("Which tone?", TONE_FORM))
        return f"tool interview about {topic}, {tone.content['tone']}"

    @server.prompt(name="interview")
    def interview_prompt(topic: str, ctx: Context) -> str:
        """Ask which tone to use, then write the prompt."""
        tone = ctx.answer("tone")
        if tone is None:
            raise InputRequired(tone=Elicit("Which tone?", TONE_FORM), state={"topic": topic})
        return f"Interview me about {topic} in a {tone.content['tone']} tone."

    @server.completion(argument="topic", prompt="interview")
    def complete_topic(value: str) -> list[str]:
        raise InputRequired(topic=Elicit("Which topic?", form(topic="A topic")))

    @server.resource("vault://note", mime_type="text/plain")
    def vault_note(ctx: Context) -> str:
        """A note shown only after the user agrees."""
        consent = ctx.answer("consent")
        if consent is None:
            raise InputRequired(consent=Elicit("Show the note?", CONSENT_FORM))
        return "the note" if consent.accepted and consent.content.get("show") is True else "hidden"

    @server.resource("vault://notes/{name}", mime_type="text/plain")
    def vault_named(name: str, ctx: Context) -> str:
        """A named note shown only after the user agrees."""
        consent = ctx.answer("consent")
        if consent is None:
            raise InputRequired(consent=Elicit(f"Show note {name}?", CONSENT_FORM))
        return f"note {name}"

    return server


server = build()
