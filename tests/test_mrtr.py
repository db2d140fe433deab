"""Multi round-trip requests: asking for input, sealed state, and retries.

The flows run three ways against the same server (`tests/servers/mrtr_server.py`):
in memory through `Server.handle`, over stdio to a `mcpcore run` subprocess, and
over HTTP to a real socket. Every message received is checked against the wire
schema by the helpers. Rules that need an in-process hook (the caller's
principal, a completion handler) use a server defined in this file.
"""

from __future__ import annotations

import base64
import contextlib
import sys
from itertools import count
from typing import Any, AsyncIterator

import anyio
import orjson
import pytest

from conftest import ROOT, meta, request
from http_client import HttpClient, running
from mcpcore import Call, Context, Elicit, ElicitUrl, InputRequired, ListRoots, Root, Sample, Server
from mcpcore._cli.main import load_target
from mcpcore._wire.sealing import KEYS_ENV, Sealer, binding
from memory import MemoryWriter, exchange
from servers.mrtr_server import CONSENT_FORM, NAME_FORM, SIGN_IN_URL
from stdio_client import serve
from wire_schema import validator

pytestmark = pytest.mark.anyio

KEY = "mrtr-tests-state-key-0123456789"
MRTR_SERVER = ROOT / "tests" / "servers" / "mrtr_server.py"
ASK_SERVER = ROOT / "examples" / "ask_server.py"
TRANSPORTS = ["memory", "stdio", "http", "asgi"]  # asgi: the ASGI adapter under uvicorn

EVERYTHING = {"elicitation": {}, "sampling": {}, "roots": {}}
ELICIT = {"elicitation": {"form": {}}}
SAMPLING = {"sampling": {}}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def sampled(text: str, model: str = "test-model-1", **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": model, **extra}


def state_payload(token: str) -> dict[str, Any]:
    """The readable payload of a sealed requestState (the seal is integrity, not secrecy)."""
    body = token.split(".")[1]
    return orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


class Peer:
    """A client on one transport: `await peer.call(method, caps, **params)` → the response message."""

    def __init__(self, kind: str, send: Any) -> None:
        self.kind = kind
        self._send = send
        self._ids = count(1)

    async def call(self, method: str, caps: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        _meta = meta(**{"io.modelcontextprotocol/clientCapabilities": caps or {}})
        message = request(method, f"{self.kind}-{next(self._ids)}", _meta=_meta, **params)
        with anyio.fail_after(10):
            response = await self._send(message)
        assert response["id"] == message["id"]
        return response

    async def result(self, method: str, caps: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        response = await self.call(method, caps, **params)
        assert "result" in response, response
        return response["result"]

    async def error(self, method: str, caps: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        response = await self.call(method, caps, **params)
        assert "error" in response, response
        return response["error"]

    async def asked(self, method: str, caps: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        """A result that must be input_required and valid as an InputRequiredResult."""
        result = await self.result(method, caps, **params)
        assert result["resultType"] == "input_required", result
        validator("InputRequiredResult").validate(result)
        assert isinstance(result["requestState"], str)
        assert "ttlMs" not in result and "cacheScope" not in result
        return result


@contextlib.asynccontextmanager
async def open_peer(kind: str, target: str) -> AsyncIterator[Peer]:
    """A peer talking to the server at `target` (a file path) on one transport."""
    if kind == "memory":
        server = load_target(target)

        async def send_memory(message: dict[str, Any]) -> dict[str, Any]:
            response = (await exchange(server, message)).response
            assert response is not None
            return response

        yield Peer(kind, send_memory)
    elif kind == "stdio":
        async with serve([sys.executable, "-m", "mcpcore", "run", target]) as client:

            async def send_stdio(message: dict[str, Any]) -> dict[str, Any]:
                await client.send(message)
                return await client.response_to(message["id"])

            yield Peer(kind, send_stdio)
            await client.close_stdin()
            with anyio.fail_after(10):
                assert await client.wait() == 0
    else:
        via = "asgi" if kind == "asgi" else "h11"
        async with running(load_target(target), via=via) as http, HttpClient.connect(http) as client:

            async def send_http(message: dict[str, Any]) -> dict[str, Any]:
                reply = await client.post(message)
                assert len(reply.messages) == 1 and not reply.is_sse
                return reply.messages[0]

            yield Peer(kind, send_http)


@pytest.fixture(params=TRANSPORTS)
async def peer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Peer]:
    """A peer of the MRTR test server; its state key is KEY (through the environment)."""
    monkeypatch.setenv(KEYS_ENV, KEY)
    async with open_peer(request.param, f"{MRTR_SERVER}:build") as client:
        yield client


# -- elicitation ----------------------------------------------------------


async def test_the_first_call_asks_for_a_form_and_the_accepted_retry_is_answered(peer: Peer) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name")
    assert set(first) == {"resultType", "inputRequests", "requestState", "_meta"}
    assert first["inputRequests"] == {
        "user_name": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM},
        }
    }
    assert first["_meta"] == {"io.modelcontextprotocol/serverInfo": {"name": "mrtr-tests", "version": "0.0.1"}}
    done = await peer.result(
        "tools/call", ELICIT, name="ask_name",
        inputResponses={"user_name": accept(user_name="Ada")}, requestState=first["requestState"],
    )
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert "isError" not in done


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_tool_as_the_users_choice(peer: Peer, action: str) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name")
    done = await peer.result(
        "tools/call", ELICIT, name="ask_name",
        inputResponses={"user_name": {"action": action}}, requestState=first["requestState"],
    )
    assert done["content"] == [{"type": "text", "text": f"The user chose {action}."}]


async def test_an_empty_elicitation_capability_means_form_mode(peer: Peer) -> None:
    first = await peer.asked("tools/call", {"elicitation": {}}, name="ask_name")
    assert first["inputRequests"]["user_name"]["params"]["mode"] == "form"


# -- sampling and roots ---------------------------------------------------


async def test_a_sampling_answer_is_offered_with_its_text_role_and_model(peer: Peer) -> None:
    first = await peer.asked("tools/call", SAMPLING, name="ask_model", arguments={"question": "2+2?"})
    assert first["inputRequests"] == {
        "reply": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
                "maxTokens": 50,
                "systemPrompt": "Answer briefly.",
            },
        }
    }
    done = await peer.result(
        "tools/call", SAMPLING, name="ask_model", arguments={"question": "2+2?"},
        inputResponses={"reply": sampled("Four.", model="m-7", stopReason="endTurn")},
        requestState=first["requestState"],
    )
    assert done["content"] == [{"type": "text", "text": "m-7 (assistant, endTurn) says: Four."}]


async def test_a_sampling_answer_with_a_list_of_blocks_joins_the_text(peer: Peer) -> None:
    first = await peer.asked("tools/call", SAMPLING, name="ask_model", arguments={"question": "hi"})
    blocks = [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]
    done = await peer.result(
        "tools/call", SAMPLING, name="ask_model", arguments={"question": "hi"},
        inputResponses={"reply": {"role": "assistant", "content": blocks, "model": "m"}},
        requestState=first["requestState"],
    )
    assert done["content"][0]["text"] == "m (assistant, None) says: Hello"


async def test_roots_arrive_as_a_list_of_root(peer: Peer) -> None:
    first = await peer.asked("tools/call", {"roots": {}}, name="ask_roots")
    assert first["inputRequests"] == {"roots": {"method": "roots/list"}}
    roots = [{"uri": "file:///home/ada/project", "name": "project"}, {"uri": "file:///tmp"}]
    done = await peer.result(
        "tools/call", {"roots": {}}, name="ask_roots",
        inputResponses={"roots": {"roots": roots}}, requestState=first["requestState"],
    )
    assert done["content"][0]["text"] == "Root(file:///home/ada/project, project); Root(file:///tmp, None)"


async def test_one_round_asks_for_a_form_a_model_reply_and_the_roots_with_state(peer: Peer) -> None:
    first = await peer.asked("tools/call", EVERYTHING, name="ask_everything")
    assert {k: v["method"] for k, v in first["inputRequests"].items()} == {
        "user_name": "elicitation/create",
        "reply": "sampling/createMessage",
        "roots": "roots/list",
    }
    done = await peer.result(
        "tools/call", EVERYTHING, name="ask_everything", requestState=first["requestState"],
        inputResponses={
            "user_name": accept(user_name="Ada"),
            "reply": sampled("You are great."),
            "roots": {"roots": [{"uri": "file:///w"}]},
        },
    )
    text = done["content"][0]["text"]
    assert text == "{'round': 1, 'purpose': 'everything'}: name=Ada, model=You are great., roots=['file:///w']"


# -- several rounds -------------------------------------------------------


async def test_three_rounds_each_get_a_new_state_carrying_the_earlier_answers(peer: Peer) -> None:
    args = {"item": "shirt"}
    one = await peer.asked("tools/call", EVERYTHING, name="order", arguments=args)
    assert list(one["inputRequests"]) == ["size"]
    assert state_payload(one["requestState"])["state"] == {"round": 1}

    two = await peer.asked(
        "tools/call", EVERYTHING, name="order", arguments=args,
        inputResponses={"size": accept(size="M")}, requestState=one["requestState"],
    )
    assert list(two["inputRequests"]) == ["colour"]
    assert state_payload(two["requestState"])["state"] == {"round": 2, "size": "M"}

    # the size answer sent again is ignored: round three only reads what round two asked
    three = await peer.asked(
        "tools/call", EVERYTHING, name="order", arguments=args,
        inputResponses={"colour": accept(colour="teal"), "size": accept(size="XXL")},
        requestState=two["requestState"],
    )
    assert list(three["inputRequests"]) == ["confirm"]
    assert three["inputRequests"]["confirm"]["params"]["messages"][0]["content"]["text"] == "Confirm a M teal shirt?"
    assert state_payload(three["requestState"])["state"] == {"round": 3, "size": "M", "colour": "teal"}
    assert len({one["requestState"], two["requestState"], three["requestState"]}) == 3

    done = await peer.result(
        "tools/call", EVERYTHING, name="order", arguments=args,
        inputResponses={"confirm": sampled("Yes.")}, requestState=three["requestState"],
    )
    assert done["content"][0]["text"] == "shirt: size=M, colour=teal, confirmed by test-model-1: Yes."


async def test_a_retry_without_the_answer_is_asked_again(peer: Peer) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name")
    again = await peer.asked("tools/call", ELICIT, name="ask_name", requestState=first["requestState"])
    assert again["inputRequests"] == first["inputRequests"]
    other_key = await peer.asked(
        "tools/call", ELICIT, name="ask_name",
        inputResponses={"something_else": accept(user_name="Ada")}, requestState=again["requestState"],
    )
    assert list(other_key["inputRequests"]) == ["user_name"]


async def test_answers_sent_up_front_without_state_are_read_by_their_shape(peer: Peer) -> None:
    done = await peer.result(
        "tools/call", ELICIT, name="ask_name",
        inputResponses={"user_name": accept(user_name="Eve"), "extra": {"unknown": True}, "other": 12345},
    )
    assert done["content"][0]["text"] == "Hello, Eve!"


async def test_malformed_answers_without_state_are_ignored_and_asked_again(peer: Peer) -> None:
    again = await peer.asked("tools/call", ELICIT, name="ask_name", inputResponses={"user_name": {"action": "maybe"}})
    assert list(again["inputRequests"]) == ["user_name"]


async def test_unknown_extra_answers_are_ignored(peer: Peer) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name")
    done = await peer.result(
        "tools/call", ELICIT, name="ask_name", requestState=first["requestState"],
        inputResponses={"user_name": accept(user_name="Ada"), "bogus": 12345, "also": {"action": "maybe"}},
    )
    assert done["content"][0]["text"] == "Hello, Ada!"


async def test_a_state_only_result_lets_the_client_retry_at_once(peer: Peer) -> None:
    first = await peer.asked("tools/call", {}, name="busy")
    assert "inputRequests" not in first
    done = await peer.result("tools/call", {}, name="busy", requestState=first["requestState"])
    assert done["content"][0]["text"] == "done on attempt 2"


async def test_returning_input_required_works_like_raising_it(peer: Peer) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name_by_returning")
    assert list(first["inputRequests"]) == ["user_name"]
    done = await peer.result(
        "tools/call", ELICIT, name="ask_name_by_returning",
        inputResponses={"user_name": accept(user_name="Ada")}, requestState=first["requestState"],
    )
    assert done["content"][0]["text"] == "Returned, then answered: Ada (state {'returned': True})"


# -- malformed input ------------------------------------------------------


@pytest.mark.parametrize(
    "tool, caps, answer, why",
    [
        ("ask_name", ELICIT, 12345, "expected an object"),
        ("ask_name", ELICIT, {"action": "maybe"}, 'action must be "accept", "decline" or "cancel"'),
        ("ask_name", ELICIT, {"content": {"user_name": "Ada"}}, 'action must be "accept"'),
        ("ask_name", ELICIT, {"action": "accept", "content": {"user_name": {"first": "Ada"}}}, "content must be an object"),
        ("ask_name", ELICIT, {"action": "accept", "content": ["Ada"]}, "content must be an object"),
        ("ask_roots", {"roots": {}}, {"roots": "file:///"}, "roots must be a list of objects with a uri"),
        ("ask_roots", {"roots": {}}, {"roots": [{"name": "no uri"}]}, "roots must be a list of objects with a uri"),
    ],
)
async def test_a_malformed_answer_is_invalid_params_naming_its_key(
    peer: Peer, tool: str, caps: dict[str, Any], answer: Any, why: str
) -> None:
    first = await peer.asked("tools/call", caps, name=tool)
    (key,) = first["inputRequests"]
    kind = {"ask_name": "elicitation", "ask_roots": "roots"}[tool]
    error = await peer.error(
        "tools/call", caps, name=tool, inputResponses={key: answer}, requestState=first["requestState"]
    )
    assert error["code"] == -32602
    assert error["message"].startswith(f"inputResponses[{key!r}] is not a valid {kind} result: ")
    assert why in error["message"]
    assert error["data"] == {"inputResponse": key}


@pytest.mark.parametrize(
    "answer",
    [
        {"role": "assistant", "content": {"type": "text", "text": "x"}},
        {"role": "system", "content": {"type": "text", "text": "x"}, "model": "m"},
        {"role": "assistant", "content": "x", "model": "m"},
        {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": 7},
    ],
    ids=["no model", "bad role", "content not an object", "model not a string"],
)
async def test_a_malformed_sampling_answer_is_invalid_params(peer: Peer, answer: dict[str, Any]) -> None:
    first = await peer.asked("tools/call", SAMPLING, name="ask_model", arguments={"question": "q"})
    error = await peer.error(
        "tools/call", SAMPLING, name="ask_model", arguments={"question": "q"},
        inputResponses={"reply": answer}, requestState=first["requestState"],
    )
    assert error["code"] == -32602
    assert error["message"] == "inputResponses['reply'] is not a valid sampling result: needs role, content and model"


@pytest.mark.parametrize("responses", [[], "user_name", 5, True])
async def test_input_responses_that_are_not_an_object_are_invalid_params(peer: Peer, responses: Any) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name")
    error = await peer.error(
        "tools/call", ELICIT, name="ask_name", inputResponses=responses, requestState=first["requestState"]
    )
    assert error["code"] == -32602
    assert error["message"] == "inputResponses must be an object keyed by input request name"


# -- the seal -------------------------------------------------------------


async def test_tampered_state_is_refused(peer: Peer) -> None:
    first = await peer.asked("tools/call", ELICIT, name="ask_name")
    answers = {"user_name": accept(user_name="Ada")}
    for forged in (first["requestState"] + "-TAMPERED", "v1.e30." + first["requestState"].split(".")[2], "opaque", 7):
        error = await peer.error("tools/call", ELICIT, name="ask_name", inputResponses=answers, requestState=forged)
        assert error["code"] == -32602
        assert error["message"].startswith("Invalid requestState: ")
    error = await peer.error(
        "tools/call", ELICIT, name="ask_name", inputResponses=answers, requestState=first["requestState"] + "-TAMPERED"
    )
    assert error["message"] == "Invalid requestState: it was modified or not issued by this server"


async def test_expired_state_is_refused(peer: Peer) -> None:
    expired = Sealer([KEY], ttl_seconds=-60).seal(
        {"state": None, "asked": {"user_name": "elicitation"}}, binding("tools/call", "ask_name", {}, None)
    )
    error = await peer.error(
        "tools/call", ELICIT, name="ask_name", inputResponses={"user_name": accept(user_name="Ada")}, requestState=expired
    )
    assert error == {
        "code": -32602,
        "message": "Invalid requestState: it has expired; start the request again without it",
    }


async def test_state_forged_with_the_servers_key_is_accepted_and_with_another_key_refused(peer: Peer) -> None:
    bound = binding("tools/call", "ask_name", {}, None)
    payload = {"state": None, "asked": {"user_name": "elicitation"}}
    answers = {"user_name": accept(user_name="Ada")}
    ours = Sealer([KEY]).seal(payload, bound)
    done = await peer.result("tools/call", ELICIT, name="ask_name", inputResponses=answers, requestState=ours)
    assert done["content"][0]["text"] == "Hello, Ada!"
    theirs = Sealer(["another-key-0123456789abcdef"]).seal(payload, bound)
    error = await peer.error("tools/call", ELICIT, name="ask_name", inputResponses=answers, requestState=theirs)
    assert error["message"] == "Invalid requestState: it was modified or not issued by this server"


async def test_state_replayed_on_another_tool_arguments_or_method_is_refused(peer: Peer) -> None:
    different = "Invalid requestState: it was issued for a different request"
    name_state = (await peer.asked("tools/call", ELICIT, name="ask_name"))["requestState"]
    model_state = (await peer.asked("tools/call", SAMPLING, name="ask_model", arguments={"question": "2+2?"}))["requestState"]
    tool_state = (await peer.asked("tools/call", ELICIT, name="interview", arguments={"topic": "owls"}))["requestState"]
    note_state = (await peer.asked("resources/read", ELICIT, uri="vault://notes/a"))["requestState"]
    replays = [
        ("tools/call", {"name": "ask_name_by_returning", "requestState": name_state}),
        ("tools/call", {"name": "ask_model", "arguments": {"question": "3+3?"}, "requestState": model_state}),
        ("tools/call", {"name": "ask_model", "arguments": {"question": "2+2?", "x": 1}, "requestState": model_state}),
        ("prompts/get", {"name": "interview", "arguments": {"topic": "owls"}, "requestState": tool_state}),
        ("resources/read", {"uri": "vault://notes/b", "requestState": note_state}),
        ("resources/read", {"uri": "vault://note", "requestState": name_state}),
    ]
    for method, params in replays:
        error = await peer.error(method, EVERYTHING, **params)
        assert (error["code"], error["message"]) == (-32602, different), (method, params)


# -- capabilities ---------------------------------------------------------


async def test_a_handler_asks_the_model_when_the_client_declared_only_sampling(peer: Peer) -> None:
    first = await peer.asked("tools/call", SAMPLING, name="pick_colour")
    assert list(first["inputRequests"]) == ["colour"]
    assert first["inputRequests"]["colour"]["method"] == "sampling/createMessage"
    done = await peer.result(
        "tools/call", SAMPLING, name="pick_colour",
        inputResponses={"colour": sampled("Mauve")}, requestState=first["requestState"],
    )
    assert done["content"][0]["text"] == "asked the model: Mauve"


async def test_the_same_handler_asks_the_user_when_the_client_can_elicit(peer: Peer) -> None:
    first = await peer.asked("tools/call", EVERYTHING, name="pick_colour")
    assert first["inputRequests"]["colour"]["method"] == "elicitation/create"
    done = await peer.result(
        "tools/call", EVERYTHING, name="pick_colour",
        inputResponses={"colour": accept(colour="teal")}, requestState=first["requestState"],
    )
    assert done["content"][0]["text"] == "asked the user: teal"


@pytest.mark.parametrize(
    "caps, missing",
    [
        ({}, {"elicitation": {"form": {}}, "sampling": {}}),
        (SAMPLING, {"elicitation": {"form": {}}}),
        ({"elicitation": {"url": {}}, "sampling": {}}, {"elicitation": {"form": {}}}),
    ],
)
async def test_asking_for_what_the_client_did_not_declare_is_32021(
    peer: Peer, caps: dict[str, Any], missing: dict[str, Any]
) -> None:
    error = await peer.error("tools/call", caps, name="insist")
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": missing}


async def test_url_elicitation_needs_the_url_mode(peer: Peer) -> None:
    for caps in ({"elicitation": {}}, ELICIT):
        error = await peer.error("tools/call", caps, name="sign_in")
        assert error["code"] == -32021
        assert error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    caps = {"elicitation": {"url": {}}}
    first = await peer.asked("tools/call", caps, name="sign_in")
    assert first["inputRequests"] == {
        "sign_in": {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in to continue.", "url": SIGN_IN_URL}}
    }
    done = await peer.result(
        "tools/call", caps, name="sign_in", inputResponses={"sign_in": {"action": "accept"}}, requestState=first["requestState"]
    )
    assert done["content"][0]["text"] == "sign-in accept for session 42"


# -- which methods may ask ------------------------------------------------


async def test_prompts_get_can_ask_for_input(peer: Peer) -> None:
    first = await peer.asked("prompts/get", ELICIT, name="interview", arguments={"topic": "owls"})
    assert first["inputRequests"]["tone"]["params"]["message"] == "Which tone?"
    assert state_payload(first["requestState"])["state"] == {"topic": "owls"}
    done = await peer.result(
        "prompts/get", ELICIT, name="interview", arguments={"topic": "owls"},
        inputResponses={"tone": accept(tone="playful")}, requestState=first["requestState"],
    )
    assert done["resultType"] == "complete"
    assert done["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Interview me about owls in a playful tone."}}
    ]


async def test_resources_read_can_ask_for_input_and_its_question_has_no_cache_hints(peer: Peer) -> None:
    first = await peer.asked("resources/read", ELICIT, uri="vault://note")
    assert first["inputRequests"]["consent"]["params"]["requestedSchema"] == CONSENT_FORM
    done = await peer.result(
        "resources/read", ELICIT, uri="vault://note",
        inputResponses={"consent": accept(show=True)}, requestState=first["requestState"],
    )
    assert done["contents"] == [{"uri": "vault://note", "mimeType": "text/plain", "text": "the note"}]
    assert (done["ttlMs"], done["cacheScope"]) == (0, "private")
    declined = await peer.result(
        "resources/read", ELICIT, uri="vault://note",
        inputResponses={"consent": {"action": "decline"}}, requestState=first["requestState"],
    )
    assert declined["contents"][0]["text"] == "hidden"


async def test_a_resource_template_can_ask_for_input(peer: Peer) -> None:
    first = await peer.asked("resources/read", ELICIT, uri="vault://notes/x1")
    assert first["inputRequests"]["consent"]["params"]["message"] == "Show note x1?"
    done = await peer.result(
        "resources/read", ELICIT, uri="vault://notes/x1",
        inputResponses={"consent": accept(show=True)}, requestState=first["requestState"],
    )
    assert done["contents"][0]["text"] == "note x1"


async def test_a_completion_handler_raising_input_required_is_an_error_not_a_question(peer: Peer) -> None:
    response = await peer.call(
        "completion/complete", EVERYTHING,
        ref={"type": "ref/prompt", "name": "interview"}, argument={"name": "topic", "value": "o"},
    )
    assert "result" not in response
    assert response["error"] == {"code": -32603, "message": "Internal error"}


@pytest.mark.parametrize(
    "method, params, key",
    [
        ("tools/list", {}, "tools"),
        ("prompts/list", {}, "prompts"),
        ("resources/list", {}, "resources"),
        ("resources/templates/list", {}, "resourceTemplates"),
        ("server/discover", {}, "capabilities"),
    ],
)
async def test_other_methods_ignore_request_state_and_answer_complete(
    peer: Peer, method: str, params: dict[str, Any], key: str
) -> None:
    result = await peer.result(
        method, EVERYTHING, requestState="not even a token", inputResponses={"x": {"action": "accept"}}, **params
    )
    assert result["resultType"] == "complete"
    assert key in result


# -- examples/ask_server.py -----------------------------------------------


@pytest.fixture(params=TRANSPORTS)
async def ask_peer(request: pytest.FixtureRequest) -> AsyncIterator[Peer]:
    async with open_peer(request.param, str(ASK_SERVER)) as client:
        yield client


@pytest.mark.parametrize(
    "answer, text",
    [
        (accept(name="Grace"), "Hello, Grace!"),
        (accept(name=""), "No problem, maybe another time."),
        ({"action": "decline"}, "No problem, maybe another time."),
        ({"action": "cancel"}, "No problem, maybe another time."),
    ],
)
async def test_the_ask_example_greets_by_name_or_politely_gives_up(ask_peer: Peer, answer: dict[str, Any], text: str) -> None:
    first = await ask_peer.asked("tools/call", {"elicitation": {}}, name="greet")
    assert first["inputRequests"]["name"]["params"]["message"] == "What is your name?"
    done = await ask_peer.result(
        "tools/call", {"elicitation": {}}, name="greet", inputResponses={"name": answer}, requestState=first["requestState"]
    )
    assert done["content"] == [{"type": "text", "text": text}]


async def test_the_ask_example_needs_elicitation(ask_peer: Peer) -> None:
    error = await ask_peer.error("tools/call", SAMPLING, name="greet")
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert "elicitation" in error["message"]


# -- in process only ------------------------------------------------------


def principal_server() -> Server:
    server = Server("principals", state_keys=[KEY])

    @server.tool
    def whoami(ctx: Context) -> str:
        """Ask for a name; say who asked."""
        if ctx.answer("user_name") is None:
            raise InputRequired(user_name=Elicit("Name?", NAME_FORM))
        return f"{ctx.principal} is {ctx.answer('user_name').content['user_name']}"

    return server


async def call_as(server: Server, principal: str | None, **params: Any) -> dict[str, Any]:
    message = request("tools/call", 1, _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": ELICIT}), **params)
    writer = MemoryWriter("tools/call")
    await server.handle(Call(message, principal=principal), writer)
    assert writer.response is not None
    return writer.response


async def test_state_issued_to_one_principal_is_refused_for_another() -> None:
    server = principal_server()
    first = (await call_as(server, "alice", name="whoami"))["result"]
    answers = {"user_name": accept(user_name="Alice")}
    bob = await call_as(server, "bob", name="whoami", inputResponses=answers, requestState=first["requestState"])
    assert bob["error"]["message"] == "Invalid requestState: it was issued for a different request"
    anonymous = await call_as(server, None, name="whoami", inputResponses=answers, requestState=first["requestState"])
    assert anonymous["error"]["code"] == -32602
    alice = await call_as(server, "alice", name="whoami", inputResponses=answers, requestState=first["requestState"])
    assert alice["result"]["content"][0]["text"] == "alice is Alice"


async def test_a_server_opens_state_sealed_by_another_process_with_the_same_keys() -> None:
    one, two = principal_server(), principal_server()
    first = (await call_as(one, None, name="whoami"))["result"]
    done = await call_as(
        two, None, name="whoami", inputResponses={"user_name": accept(user_name="Ada")}, requestState=first["requestState"]
    )
    assert done["result"]["content"][0]["text"] == "None is Ada"


async def test_state_that_cannot_be_serialized_is_an_internal_error_not_a_crash() -> None:
    server = Server("unserializable", state_keys=[KEY])

    @server.tool
    def odd() -> str:
        raise InputRequired(state={1, 2})

    response = (await exchange(server, request("tools/call", 1, name="odd"))).response
    assert response is not None and response["error"]["code"] == -32603


@pytest.mark.parametrize(
    "request_, caps, allowed",
    [
        (Elicit("m", NAME_FORM), {"elicitation": {}}, True),
        (Elicit("m", NAME_FORM), {"elicitation": {"form": {}}}, True),
        (Elicit("m", NAME_FORM), {"elicitation": {"form": {}, "url": {}}}, True),
        (Elicit("m", NAME_FORM), {"elicitation": {"url": {}}}, False),
        (Elicit("m", NAME_FORM), {"sampling": {}}, False),
        (ElicitUrl("m", SIGN_IN_URL), {"elicitation": {}}, False),
        (ElicitUrl("m", SIGN_IN_URL), {"elicitation": {"url": {}}}, True),
        (Sample("q"), {"sampling": {}}, True),
        (Sample("q"), {"elicitation": {}}, False),
        (ListRoots(), {"roots": {}}, True),
        (ListRoots(), {"roots": {"listChanged": True}}, True),
        (ListRoots(), {}, False),
    ],
)
async def test_can_ask_follows_the_declared_capabilities(request_: Any, caps: dict[str, Any], allowed: bool) -> None:
    seen: list[bool] = []
    server = Server("can-ask", state_keys=[KEY])

    @server.tool
    def probe(ctx: Context) -> str:
        seen.append(ctx.can_ask(request_))
        return "probed"

    message = request("tools/call", 1, _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": caps}), name="probe")
    await exchange(server, message)
    assert seen == [allowed]


def test_root_answers_compare_as_values() -> None:
    assert Root("file:///a", "a") == Root("file:///a", "a")
    assert Root("file:///a").name is None
