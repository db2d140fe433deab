"""Multi round-trip requests: asking the client for input, and reading its answers.

A tool, prompt or resource function raises (or returns) `InputRequired` with
named input requests (`Elicit`, `ElicitUrl`, `Sample`, `ListRoots`) and
optional state. The runtime checks the client declared what each request
needs, seals the state, and answers `resultType: "input_required"`. On the
retry the answers to what was asked are validated and offered as
`ctx.answer(name)`; keys that were not asked for are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .jsonrpc import McpError, invalid_params, missing_capability


@dataclass(frozen=True)
class Elicit:
    """Ask the user to fill in a form (`requestedSchema`: flat object of primitives)."""

    message: str
    schema: dict[str, Any]
    kind = "elicitation"

    def required_capability(self, declared: Mapping[str, Any]) -> dict[str, Any] | None:
        modes = declared.get("elicitation")
        if isinstance(modes, dict) and ("form" in modes or not ({"form", "url"} & modes.keys())):
            return None  # an empty elicitation capability means form mode
        return {"elicitation": {"form": {}}}

    def to_request(self) -> dict[str, Any]:
        params = {"mode": "form", "message": self.message, "requestedSchema": self.schema}
        return {"method": "elicitation/create", "params": params}


@dataclass(frozen=True)
class ElicitUrl:
    """Send the user to a URL to complete an interaction out of band."""

    message: str
    url: str
    kind = "elicitation"

    def required_capability(self, declared: Mapping[str, Any]) -> dict[str, Any] | None:
        modes = declared.get("elicitation")
        return None if isinstance(modes, dict) and "url" in modes else {"elicitation": {"url": {}}}

    def to_request(self) -> dict[str, Any]:
        return {"method": "elicitation/create", "params": {"mode": "url", "message": self.message, "url": self.url}}


@dataclass(frozen=True)
class Sample:
    """Ask the client's model for a completion; `prompt` is a user message or a message list."""

    prompt: str | list[dict[str, Any]]
    max_tokens: int = 1000
    system_prompt: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kind = "sampling"

    def required_capability(self, declared: Mapping[str, Any]) -> dict[str, Any] | None:
        return None if isinstance(declared.get("sampling"), dict) else {"sampling": {}}

    def to_request(self) -> dict[str, Any]:
        messages = (
            [{"role": "user", "content": {"type": "text", "text": self.prompt}}]
            if isinstance(self.prompt, str)
            else self.prompt
        )
        params: dict[str, Any] = {"messages": messages, "maxTokens": self.max_tokens, **self.extra}
        if self.system_prompt is not None:
            params["systemPrompt"] = self.system_prompt
        return {"method": "sampling/createMessage", "params": params}


@dataclass(frozen=True)
class ListRoots:
    """Ask the client for its filesystem roots."""

    kind = "roots"

    def required_capability(self, declared: Mapping[str, Any]) -> dict[str, Any] | None:
        return None if isinstance(declared.get("roots"), dict) else {"roots": {}}

    def to_request(self) -> dict[str, Any]:
        return {"method": "roots/list"}


InputRequest = Elicit | ElicitUrl | Sample | ListRoots


class InputRequired(Exception):
    """Raise (or return) to ask the client for input and retry.

    `InputRequired(name=Elicit(...), state={...})`, or pass a dict of requests
    first when names are not identifiers. `state` is any JSON value; it comes
    back sealed as `ctx.state` on the retry.
    """

    def __init__(self, requests: Mapping[str, InputRequest] | None = None, *, state: Any = None, **named: InputRequest):
        super().__init__("input required")
        self.requests: dict[str, InputRequest] = {**(requests or {}), **named}
        self.state = state

    def result(self, declared: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The `input_required` result (without its requestState) and the payload to seal.

        Raises -32021 when a request needs a capability the client did not declare.
        """
        missing: dict[str, Any] = {}
        for request in self.requests.values():
            _merge(missing, request.required_capability(declared) or {})
        if missing:
            raise missing_capability(missing)
        result: dict[str, Any] = {"resultType": "input_required"}
        if self.requests:
            result["inputRequests"] = {name: request.to_request() for name, request in self.requests.items()}
        payload = {"state": self.state, "asked": {name: request.kind for name, request in self.requests.items()}}
        return result, payload


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def read_answers(responses: Mapping[str, Any], asked: Mapping[str, str] | None) -> dict[str, Any]:
    """Validated answers: to what the sealed state says was asked (malformed → -32602),
    or, on a retry without state, those recognised by their shape."""
    if asked is not None:
        return {name: parse_answer(name, kind, responses[name]) for name, kind in asked.items() if name in responses}
    return {name: answer for name, raw in responses.items() if (answer := guess_answer(raw))}


@dataclass(frozen=True)
class ElicitAnswer:
    """The user's answer to an `Elicit`/`ElicitUrl`: accept, decline or cancel."""

    action: str
    content: dict[str, Any] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


@dataclass(frozen=True)
class SampleAnswer:
    """The client model's reply to a `Sample`."""

    role: str
    content: Any
    model: str
    stop_reason: str | None = None

    @property
    def text(self) -> str:
        """The text of the reply (text blocks joined)."""
        blocks = self.content if isinstance(self.content, list) else [self.content]
        return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


@dataclass(frozen=True)
class Root:
    uri: str
    name: str | None = None


def _malformed(key: str, kind: str, why: str) -> Exception:
    return invalid_params(f"inputResponses[{key!r}] is not a valid {kind} result: {why}", {"inputResponse": key})


def guess_answer(raw: Any) -> ElicitAnswer | SampleAnswer | list[Root] | None:
    """An answer recognised by its shape (for retries that carry no requestState), else None."""
    if not isinstance(raw, dict):
        return None
    kind = "elicitation" if "action" in raw else "sampling" if "model" in raw else "roots" if "roots" in raw else None
    if kind is None:
        return None
    try:
        return parse_answer("", kind, raw)
    except McpError:
        return None


def parse_answer(key: str, kind: str, raw: Any) -> ElicitAnswer | SampleAnswer | list[Root]:
    """Validate one answer against the kind of request that asked for it."""
    if not isinstance(raw, dict):
        raise _malformed(key, kind, "expected an object")
    if kind == "elicitation":
        action, content = raw.get("action"), raw.get("content", {})
        if action not in ("accept", "decline", "cancel"):
            raise _malformed(key, kind, 'action must be "accept", "decline" or "cancel"')
        if not isinstance(content, dict) or not all(
            isinstance(v, (str, int, float, bool)) or (isinstance(v, list) and all(isinstance(i, str) for i in v))
            for v in content.values()
        ):
            raise _malformed(key, kind, "content must be an object of strings, numbers, booleans or string lists")
        return ElicitAnswer(action, content)
    if kind == "sampling":
        role, content, model = raw.get("role"), raw.get("content"), raw.get("model")
        if role not in ("user", "assistant") or not isinstance(model, str) or not isinstance(content, (dict, list)):
            raise _malformed(key, kind, "needs role, content and model")
        return SampleAnswer(role, content, model, raw.get("stopReason"))
    roots = raw.get("roots")
    if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
        raise _malformed(key, kind, "roots must be a list of objects with a uri")
    return [Root(r["uri"], r.get("name")) for r in roots]
