"""A plain tool's call, run by the dispatcher itself (ADR 13 item 14), answers as the general path does."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import meta
from mcpcore import Elicit, InputRequired, Server, ToolError, ToolResult
from mcpcore._runtime.call import Call
from mcpcore._runtime.session import Session
from mcpcore._wire.jsonrpc import LEGACY_VERSIONS, McpError, ResourceNotFound

_behaviour: list[Any] = [("return", "")]  # what the tools do on their next call


def _act() -> Any:
    kind, value = _behaviour[0]
    if kind == "raise":
        raise value
    return value


async def said(text: str, count: int = 0) -> Any:
    return _act()


async def point(x: int) -> dict[str, int]:
    return _act()


def said_in_a_thread(text: str, count: int = 0) -> Any:
    return _act()


SERVER = Server("plain")
for _tool in (said, point, said_in_a_thread):
    SERVER.add_tool(_tool)


_VALUES = st.one_of(st.text(max_size=8), st.integers(-3, 3), st.booleans(), st.none(), st.just([1]), st.just({"a": 1}))
_ARGUMENTS = st.one_of(  # half of them what one of the tools takes as sent
    st.fixed_dictionaries({"text": st.text(max_size=5)}, optional={"count": st.integers(-3, 3)}),
    st.fixed_dictionaries({"x": st.integers(-3, 3)}),
    st.dictionaries(st.sampled_from(["text", "count", "x", "other"]), _VALUES, max_size=3),
    st.none(), st.just([]), st.just("text"),
)
_OUTCOMES = st.one_of(
    st.tuples(st.just("return"), st.one_of(st.text(), st.just("\ud800"), st.integers(), st.none(),
                                           st.just({"x": 1}), st.just(ToolResult(content=[], is_error=True)))),
    st.tuples(st.just("raise"), st.sampled_from([ToolError("told"), ValueError("bug"), McpError(-32602, "refused"),
                                                 InputRequired(name=Elicit("Name?", {"type": "object"}), state=[1])])),
    st.tuples(st.just("return"), st.just(InputRequired(state="s"))),
)
_METAS = st.one_of(st.just(meta()), st.sampled_from([{}, meta(**{"io.modelcontextprotocol/protocolVersion": "1999-01-01"}), None]))
_EXTRA = st.one_of(st.just({}), st.sampled_from([{"requestState": "not sealed"}, {"inputResponses": {}}]))


async def _no_outbox(data: bytes) -> None: ...


def _session(version: str) -> Session:
    """A 2025-era session of `version`, initialized as a client does it."""
    session = Session(outbox=_no_outbox)
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    anyio.run(_answer, SERVER, hello, session)
    SERVER.dispatcher.legacy.notified(session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert session.initialized and session.version == version
    return session


async def _answer(server: Server, message: dict[str, Any], session: Session | None = None) -> tuple[Any, int | None, str]:
    answers: list[tuple[bytes, int | None]] = []

    class Writer:
        async def notify(self, data: bytes) -> None: ...

        async def respond(self, data: bytes, error_code: int | None = None) -> None:
            answers.append((data, error_code))

    coroutine = server.handle(Call(message, server.route(message), session=session), Writer())
    name = coroutine.cr_code.co_name
    await coroutine
    (data, code), = answers
    answer = orjson.loads(data)
    if "requestState" in answer.get("result", {}):  # sealed with a fresh nonce each time: opened, then compared
        state = answer["result"].pop("requestState")
        answer["result"]["sealed"] = isinstance(state, str) and len(state) > 0
    return answer, code, name


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["said", "point", "said_in_a_thread"]), _ARGUMENTS, _OUTCOMES, _METAS, _EXTRA, st.booleans(),
       st.sampled_from([None, *LEGACY_VERSIONS]))
@example("said", {"text": "hi"}, ("return", "hi"), meta(), {}, False, None)  # the commonest call
@example("said", {"text": "hi"}, ("return", "\ud800"), meta(), {}, False, None)  # text JSON cannot carry
@example("point", {"x": 1}, ("return", {"x": 2}), meta(), {}, False, None)  # structured output
@example("said", {"text": "hi"}, ("return", ToolResult(content=["a"], is_error=True)), meta(), {}, False, None)
@example("said", {"text": "hi"}, ("raise", ToolError("told")), meta(), {}, False, None)
@example("said", {"text": "hi"}, ("raise", ValueError("bug")), meta(), {}, False, None)
@example("said", {"text": "hi"}, ("raise", ValueError("bug")), meta(), {}, True, None)  # masked
@example("said", {"text": "hi"}, ("raise", McpError(-32602, "refused")), meta(), {}, False, None)
@example("said", {"text": "hi"}, ("raise", InputRequired(name=Elicit("Name?", {"type": "object"}))), meta(), {}, False, None)
@example("said", {"text": "hi"}, ("return", InputRequired(state="s")), meta(), {}, False, None)
@example("said_in_a_thread", {"text": "hi"}, ("return", "hi"), meta(), {}, False, None)
@example("said_in_a_thread", {"text": "hi"}, ("raise", ValueError("bug")), meta(), {}, False, None)
@example("said", {"text": "hi"}, ("return", "hi"), meta(**{"io.modelcontextprotocol/protocolVersion": "1"}), {}, False, None)
def test_a_plain_call_answers_as_the_general_path_does(
    name: str, arguments: Any, outcome: Any, request_meta: Any, extra: dict[str, Any], mask_errors: bool,
    version: str | None,
) -> None:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    if request_meta is not None:
        params["_meta"] = request_meta
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    tool = SERVER.tools.get(name)
    SERVER.mask_errors, _behaviour[0] = mask_errors, outcome
    session = None if version is None else _session(version)  # a 2025-era call, in a session of that version
    try:
        plain, plain_code, plain_way = anyio.run(_answer, SERVER, message, session)
        tool.plain = False
        general, general_code, general_way = anyio.run(_answer, SERVER, message, session)
    finally:
        tool.plain = True
        if isinstance(outcome[1], BaseException):  # shared by examples: its traceback would keep this one's frames
            outcome[1].__traceback__ = outcome[1].__context__ = None
        if session is not None:
            session.close()  # off the server's bus
    assert (plain_way, general_way) == ("_plain_call", "_handle")
    for answer in (plain, general):  # a masked error names a fresh reference each time
        content = answer.get("result", {}).get("content") or [{}]
        if "(reference " in content[0].get("text", ""):
            content[0]["text"] = content[0]["text"].rsplit("reference", 1)[0]
    assert (plain, plain_code) == (general, general_code)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
@pytest.mark.parametrize("outcome", [("return", "hi"), ("return", {"x": 2}), ("raise", ResourceNotFound("file:///gone")),
                                     ("return", InputRequired(state="s")), ("raise", ValueError("bug"))])
def test_a_plain_call_in_a_session_answers_as_the_general_path_does(version: str, outcome: Any) -> None:
    for name, arguments in (("said", {"text": "hi"}), ("point", {"x": 1})):
        test_a_plain_call_answers_as_the_general_path_does.hypothesis.inner_test(  # type: ignore[attr-defined]
            name, arguments, outcome, meta(), {}, False, version)
