"""What the fuzz sends, and what the server owes each message.

`Messages` builds valid JSON-RPC messages for `fuzz_server.py` (both eras) from
a seeded `random.Random`; `mutate` breaks a message's structure and `corrupt`
its bytes. `owed(data)` is the oracle: an independent reading of the JSON-RPC
rules (with the standard library's json, not the server's orjson) saying
whether one framed message is owed one response carrying its id, one error
response without an id (its id cannot be read), or nothing (a notification or
a response). Ids are compared as `Key`s, so 1 and "1" never match.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import random
import re
from dataclasses import dataclass
from typing import Any, Iterator

import orjson

VERSION = "2026-07-28"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
ASKING = {"elicitation": {}, "roots": {}}  # what a client must declare to be asked by `ask` and `roots`

Key = tuple[str, Any]  # ("int", 5) or ("str", "5"): the JSON type is part of an id


def key_of(value: Any) -> Key | None:
    """The key of a request id the server can read back: a string, or an integer orjson keeps exact."""
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**64:
        return ("int", value)
    return None


# -- the oracle -----------------------------------------------------------------


@dataclass(frozen=True)
class Owed:
    """What the server owes one message."""

    kind: str  # "id": one response with `key`; "anonymous": one id-less error; "nothing"
    key: Key | None = None
    method: str | None = None  # of a request or notification
    cancels: Key | None = None  # the id a well-formed notifications/cancelled names


ANONYMOUS = Owed("anonymous")
NOTHING = Owed("nothing")


class _NotJson(ValueError):
    """Text the JSON grammar (RFC 8259) or a double cannot hold."""


def _constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJson("a number too large for a double")
    return value


def _int(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value < 2**64:
        try:
            float(value)  # beyond 64 bits a parser keeps a double, which may overflow
        except OverflowError:
            raise _NotJson("an integer too large for a double") from None
    return value


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# The deepest document the server's parser (orjson) reads; RFC 8259 section 9 lets a parser set one. The
# standard library's own limit follows Python's recursion limit, so the fuzz never nests 900 to 1,100 levels.
PARSER_DEPTH = 1024


def _deeper_than_parser(data: bytes) -> bool:
    """Whether arrays and objects in the text `data` nest past PARSER_DEPTH (brackets in strings do not count)."""
    if data.count(b"[") + data.count(b"{") <= PARSER_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > PARSER_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def parse(data: bytes) -> Any:
    """The JSON value of `data`, or `_NotJson` (UTF-8 only; no NaN, no lone surrogates, at most PARSER_DEPTH levels)."""
    if _deeper_than_parser(data):
        raise _NotJson("nested too deep to parse")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_constant, parse_float=_float, parse_int=_int)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _NotJson(str(error)) from None
    if _SURROGATE_ESCAPE.search(data):
        for text in _strings(value):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise _NotJson("a lone surrogate") from None
    return value


MAX_NESTING = 128  # levels of arrays and objects; a deeper message is refused (over stdio a notification or response is just dropped)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels (the outermost is level 1), layer by layer."""
    level, layer = 1, [value]
    while True:
        layer = [node for node in layer if isinstance(node, (dict, list))]
        if not layer:
            return False
        if level > limit:
            return True
        layer = [child for node in layer for child in (node.values() if isinstance(node, dict) else node)]
        level += 1


def owed(data: bytes, stdio: bool = False) -> Owed:
    """What the server owes one framed message (see the module docstring); over stdio, a notification
    or response too deep to serve is owed nothing (JSON-RPC never answers them), over HTTP its POST a 400."""
    try:
        message = parse(data)
    except _NotJson:
        return ANONYMOUS
    if not isinstance(message, dict):
        return ANONYMOUS  # a batch or a scalar
    key = key_of(message.get("id"))
    refused = Owed("id", key) if key is not None else ANONYMOUS
    if message.get("jsonrpc") != "2.0":
        return refused
    method = message.get("method")
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            verdict = NOTHING  # a response from the client
        else:
            return refused
    elif not isinstance(method, str):
        return refused
    elif "id" not in message:
        params = message.get("params")
        cancels = key_of(params.get("requestId")) if isinstance(params, dict) else None
        verdict = Owed("nothing", method=method, cancels=cancels if method == "notifications/cancelled" else None)
    elif key is None:
        return ANONYMOUS
    else:
        verdict = Owed("id", key, method)
    if not _deeper_than(message, MAX_NESTING):
        return verdict
    return NOTHING if stdio and verdict.kind == "nothing" else refused


def dumps(message: Any) -> bytes:
    """Compact JSON; integers past 64 bits (which orjson refuses to write) through the standard library."""
    try:
        return orjson.dumps(message)
    except TypeError:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


# -- valid messages -----------------------------------------------------------

_WORDS = ("alpha", "beta", "gamma", "delta", "fuzz", "mcp", "x", "")
_ODD_TEXT = ("é", "中文", "😀", "\u202eRTL", "zero\u200bwidth", "nul\u0000byte", "line\nbreak", 'quote"back\\slash',
             "tab\there", "\u00ff\u0100", "\U0010ffff", "<script>", "%2F..%2F", "=?base64?aGk=?=")


class Messages:
    """Valid JSON-RPC messages for the fuzz server, with ids unique to this generator.

    Valid ids are `prefix`-tagged strings or integers from 10**6 up, so they never
    meet the fixed odd ids that mutations use.
    """

    def __init__(self, rng: random.Random, prefix: str) -> None:
        self.rng = rng
        self.prefix = prefix
        self.counter = 10**6

    def next_id(self) -> int | str:
        self.counter += 1
        pick = self.rng.random()
        if pick < 0.5:
            return self.counter
        if pick < 0.9:
            return f"{self.prefix}-{self.counter}"
        return f"{self.rng.choice(_ODD_TEXT)}-{self.prefix}-{self.counter}"

    def text(self, long: bool = True) -> str:
        """A string argument: words, odd characters, now and then a long one."""
        pick = self.rng.random()
        if pick < 0.5:
            return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(0, 4)))
        if pick < 0.9 or not long:
            return "".join(self.rng.choice(_ODD_TEXT) for _ in range(self.rng.randint(1, 3)))
        return self.rng.choice("ab\u00e9😀") * self.rng.choice((1000, 10000, 100000))

    def rich_arguments(self) -> dict[str, Any]:
        """Arguments for the `rich` tool: some of its properties, each plausible or any value."""
        rng = self.rng
        plausible = {
            "code": "AB-12", "count": rng.choice((0, 5, 100, 7)), "ratio": rng.choice((0.5, 1, 0)), "tags": ["x", "y"],
            "choice": rng.choice(("a", 1, None, "c")), "either": rng.choice(("s", 3, 3.5)), "mixed": {"ab": 1},
            "present": 0, "tree": nested_tree(rng.randint(0, 70)), "shaped": rng.choice(("s", [1, "x"], [])),
        }
        return {name: value if rng.random() < 0.5 else any_value(rng) for name, value in plausible.items() if rng.random() < 0.4}

    def segment(self) -> str:
        """A URI path segment that matches a plain `{id}` template variable."""
        return "".join(self.rng.choice("abcXYZ019-_.~") for _ in range(self.rng.randint(1, 12))) + \
            self.rng.choice(("", "%20", "%C3%A9"))

    def meta(self, caps: dict[str, Any] | None = None) -> dict[str, Any]:
        """A valid request `_meta`, sometimes with a log level and a progress token."""
        meta: dict[str, Any] = {META_VERSION: VERSION, META_CAPABILITIES: caps if caps is not None else {}}
        if self.rng.random() < 0.5:
            meta["io.modelcontextprotocol/clientInfo"] = {"name": "mcpcore-fuzz", "version": "1"}
        if self.rng.random() < 0.2:
            meta["io.modelcontextprotocol/logLevel"] = self.rng.choice(("debug", "info", "error"))
        if self.rng.random() < 0.2:
            meta["progressToken"] = self.rng.choice((self.counter, f"p-{self.counter}"))
        return meta

    def request(self, method: str, params: dict[str, Any] | None, modern: bool, caps: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id(), "method": method}
        if modern:
            params = {**(params or {}), "_meta": self.meta(caps)}
        if params is not None:
            message["params"] = params
        return message

    def tool_call(self, name: str, arguments: dict[str, Any], modern: bool) -> dict[str, Any]:
        caps = ASKING if name in ("ask", "roots") else None
        return self.request("tools/call", {"name": name, "arguments": arguments}, modern, caps)

    def call(self, modern: bool) -> dict[str, Any]:
        """A valid request the fuzz server answers with a result at once (nothing slow or long-lived)."""
        rng = self.rng
        pick = rng.randrange(17)
        if pick == 0:
            return self.tool_call("echo", {"text": self.text()}, modern)
        if pick == 15:
            return self.tool_call("rich", self.rich_arguments(), modern)
        if pick == 1:
            big = (2**63 - 1, -(2**63), 2**64 - 1, 0, -1)
            return self.tool_call("add", {"a": rng.choice((rng.randint(-1000, 1000),) + big), "b": rng.randint(-9, 9)}, modern)
        if pick == 2:
            point: dict[str, Any] = {"x": rng.randint(-5, 5)}
            if rng.random() < 0.5:
                point.update(y=rng.randint(-5, 5), label=rng.choice((None, self.text(long=False))))
            arguments: dict[str, Any] = {"point": point, "colour": rng.choice(("red", "green")), "size": rng.choice("sml")}
            if rng.random() < 0.5:
                arguments["tags"] = [self.text(long=False) for _ in range(rng.randint(0, 3))]
            return self.tool_call("shapes", arguments, modern)
        if pick == 3:
            optional = {"region": self.text(long=False), "count": rng.choice((0, -7, 42, 2**53)), "flag": rng.random() < 0.5}
            return self.tool_call("headed", {k: v for k, v in optional.items() if rng.random() < 0.6}, modern)
        if pick == 4:
            return self.tool_call("steps", {"count": rng.randint(0, 4)}, modern)
        if pick == 5:
            return self.tool_call("nap", {"seconds": rng.choice((0, 0.001, 0.01))}, modern)
        if pick == 6 and modern:  # a 2025-era client must answer these: the session flows call them themselves
            return self.tool_call(rng.choice(("ask", "roots")), {}, modern)
        if pick == 7:
            return self.tool_call("touch", {"uri": rng.choice(("fuzz://readme", "fuzz://data"))}, modern)
        if pick == 8:
            return self.request(rng.choice(("tools/list", "resources/list", "resources/templates/list", "prompts/list")), {}, modern)
        if pick == 9:
            label = "".join(rng.choice("abcxyz019") for _ in range(rng.randint(1, 6)))
            uri = rng.choice((
                "fuzz://readme", "fuzz://data", f"fuzz://items/{self.segment()}", f"fuzz://files/{self.segment()}/{self.segment()}",
                f"fuzz://search?q={self.segment()}", f"fuzz://search?page=2&q={self.segment()}", "fuzz://search",
                f"fuzz://tree/{self.segment()}/{self.segment()}", f"fuzz://tree/{self.segment()}?depth=3",
                f"fuzz://doc.{label}", f"fuzz://doc.{label};version=2", f"fuzz://doc.{label}#{label}",
            ))
            return self.request("resources/read", {"uri": uri}, modern)
        if pick == 10:
            arguments = {"name": self.text()}
            if rng.random() < 0.5:
                arguments["style"] = rng.choice(("plain", "pirate", self.text(long=False)))
            return self.request("prompts/get", {"name": "greet", "arguments": arguments}, modern)
        if pick == 11:
            ref, argument = rng.choice((
                ({"type": "ref/prompt", "name": "greet"}, "style"),
                ({"type": "ref/resource", "uri": "fuzz://items/{id}"}, "id"),
            ))
            return self.request("completion/complete", {"ref": ref, "argument": {"name": argument, "value": self.text(long=False)}}, modern)
        if pick == 12:
            return self.request("server/discover", {}, modern) if modern else self.request("ping", None, modern)
        if pick == 13 and not modern:
            return self.request("logging/setLevel", {"level": rng.choice(("debug", "info", "warning", "emergency"))}, modern)
        if pick == 14 and not modern:
            method = rng.choice(("resources/subscribe", "resources/unsubscribe"))
            return self.request(method, {"uri": rng.choice(("fuzz://readme", "fuzz://data"))}, modern)
        return self.tool_call("echo", {"text": self.text(long=False)}, modern)  # pick 16, and what one era lacks

    def notification(self, modern: bool) -> dict[str, Any]:
        """A notification the server takes silently."""
        method = self.rng.choice(("notifications/initialized", "notifications/roots/list_changed", "notifications/progress",
                                  "notifications/whatever"))
        params: dict[str, Any] = {"progressToken": 1, "progress": 1} if method == "notifications/progress" else {}
        if modern:
            params["_meta"] = self.meta()
        return {"jsonrpc": "2.0", "method": method, "params": params}

    def initialize(self, version: str, caps: dict[str, Any]) -> dict[str, Any]:
        params = {"protocolVersion": version, "capabilities": caps, "clientInfo": {"name": "mcpcore-fuzz", "version": "1"}}
        return {"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize", "params": params}


def cancellation(request_id: Any, modern: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"requestId": request_id, "reason": "fuzz"}
    if modern:
        params["_meta"] = {META_VERSION: VERSION, META_CAPABILITIES: {}}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def answer(request: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A client's valid answer to a server-to-client request (now and then a JSON-RPC error, which is valid too)."""
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    if rng.random() < 0.1:
        reply["error"] = {"code": -1, "message": "the user said no"}
    elif request["method"] == "elicitation/create":
        reply["result"] = rng.choice(({"action": "accept", "content": {"name": "Ada"}}, {"action": "decline"}, {"action": "cancel"}))
    elif request["method"] == "roots/list":
        reply["result"] = {"roots": [{"uri": "file:///tmp", "name": "tmp"}][: rng.randint(0, 1)]}
    else:
        reply["error"] = {"code": -32601, "message": "not supported"}
    return reply


# -- breaking messages --------------------------------------------------------

# Ids the protocol refuses or that test the edges: never used by valid messages.
ODD_IDS: tuple[Any, ...] = (True, False, None, 5.0, 1e2, -0.5, [1], {"a": 1}, "", "dup", 0, -1, 2**63 - 1, -(2**63),
                            2**64 - 1, 2**64, -(2**63) - 1, 10**30)
_ODD_VALUES: tuple[Any, ...] = (None, True, 0, -1, 1.5, "", "x" * 300, [], [None], {}, {"": {}}, 2**70)
# Levels of nesting in an argument, which sits 3 levels deep: around the bound of 128 (orjson writes up to 254).
_DEPTHS = (124, 125, 126, 200, 250)
# Levels of arrays in raw bytes: parsed and refused, or past the parser's limit (none near Python's recursion limit).
_RAW_DEPTHS = (600, 2000, 50000)


def any_value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, nested a little: numbers at the edges of the types, odd strings."""
    pick = rng.random()
    if depth >= 3 or pick < 0.6:
        return rng.choice((None, True, False, 0, -1, 5, 2**53 + 1, 2**63, 10**20, 0.5, -0.0, 1e308, 3.0,
                           rng.choice(_ODD_TEXT), "AB-12", "x", ""))
    if pick < 0.8:
        return [any_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(("a", "child", "n", "x", "", "B", "ö")): any_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def odd_uri(rng: random.Random) -> str:
    """A URI-ish string near the templates: reserved characters, broken and valid percent-escapes."""
    pieces = ("/", "?", "#", "&", "=", ";", ".", ",", "+", "*", "{", "}", "%", "%2F", "%2f", "%G1", "%C3%A9", "%00",
              "é", " ", "~", "items", "files", "tree", "doc", "search", "q", "page", "depth", "version", "a", "")
    return rng.choice(("fuzz://", "fuzz:", "FUZZ://", "", "file:///")) + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))


def nested_tree(levels: int) -> dict[str, Any]:
    """`levels` nodes of the `rich` tool's recursive `tree` argument."""
    node: dict[str, Any] = {"n": levels}
    for level in range(levels - 1):
        node = {"child": node, "n": level}
    return node


def nested(levels: int, rng: random.Random) -> Any:
    """A scalar inside `levels` arrays and objects."""
    value: Any = rng.choice((1, "x", None))
    for _ in range(levels):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def mutate(message: dict[str, Any], rng: random.Random) -> Any:
    """A structurally broken copy of `message` (wrong types, missing or odd members, deep nesting, batches)."""
    broken = copy.deepcopy(message)
    params = broken.get("params") if isinstance(broken.get("params"), dict) else None
    meta = params.get("_meta") if params is not None and isinstance(params.get("_meta"), dict) else None
    pick = rng.randrange(20)
    if pick == 0:
        broken["id"] = rng.choice(ODD_IDS)
    elif pick == 1:
        broken.pop("id", None)
    elif pick == 2:
        broken["method"] = rng.choice((1, None, ["tools/call"], {"m": 1}, True, "", "tools/cal", "TOOLS/LIST", "ping",
                                       "initialize", "notifications/cancelled", "subscriptions/listen", "rpc.discover"))
    elif pick == 3:
        broken.pop("method", None)
    elif pick == 4:
        if rng.random() < 0.5:
            broken.pop("jsonrpc", None)
        else:
            broken["jsonrpc"] = rng.choice(("1.0", 2.0, 2, None, "2.0 ", ""))
    elif pick == 5:
        broken["params"] = rng.choice(([], "params", 5, None, True, [{"name": "echo"}]))
    elif pick == 6:
        broken.pop("params", None)
    elif pick == 7 and meta is not None:
        field = rng.choice((META_VERSION, META_CAPABILITIES, "io.modelcontextprotocol/logLevel", "progressToken"))
        if rng.random() < 0.3:
            meta.pop(field, None)
        else:
            meta[field] = rng.choice(_ODD_VALUES + ("2025-11-25", "2099-01-01", "2026-07-28 ", "loud"))
    elif pick == 8 and params is not None:
        params["_meta"] = rng.choice(_ODD_VALUES)
    elif pick == 9 and params is not None:
        field = rng.choice(("name", "uri", "cursor", "ref", "argument", "level", "protocolVersion", "capabilities"))
        params[field] = odd_uri(rng) if rng.random() < 0.5 else rng.choice(_ODD_VALUES + ("nope", "fuzz://items/a%2Fb", "echo "))
    elif pick == 10 and params is not None:
        arguments = params.get("arguments")
        if isinstance(arguments, dict) and arguments and rng.random() < 0.7:
            arguments[rng.choice(sorted(arguments))] = any_value(rng)
        else:
            params["arguments"] = rng.choice(_ODD_VALUES + ({"unknown": 1},)) if rng.random() < 0.5 else any_value(rng)
    elif pick == 11 and params is not None:
        params["arguments"] = {"text": nested(rng.choice(_DEPTHS), rng)}
    elif pick == 12 and params is not None:
        params["arguments"] = {"text": "z" * rng.choice((65536, 300000, 1100000))}
    elif pick == 13:
        return rng.choice(([broken], [broken, broken], [], [1], [broken, {"jsonrpc": "2.0", "method": "x"}]))
    elif pick == 14:
        return rng.choice((1, "message", None, True, 1.5, [], {}))
    elif pick == 15:
        broken.pop("method", None)
        broken[rng.choice(("result", "error"))] = rng.choice(({}, {"code": 1, "message": "m"}, None))
    elif pick == 16 and params is not None:
        params["requestState"] = rng.choice(("v1.e30.AAAA", "garbage", "", 5, {"s": 1}))
        params["inputResponses"] = rng.choice(({"name": {"action": "accept", "content": {"name": 1}}}, [], "x", {"name": None}))
    elif pick == 17:
        broken[rng.choice(("extra", "result", "error", "id2", ""))] = rng.choice(_ODD_VALUES)
    elif pick == 18 and params is not None:
        params["notifications"] = rng.choice(({"toolsListChanged": "yes"}, {"resourceSubscriptions": ["a"] * 2000},
                                              {"resourceSubscriptions": "fuzz://readme"}, []))
    else:
        broken["id"] = rng.choice(ODD_IDS)
        broken["method"] = rng.choice((None, 7, "tools/call"))
    return broken


def corrupt(data: bytes, rng: random.Random) -> bytes:
    """Broken bytes of an encoded message: cut, flipped, padded, not UTF-8, not JSON at all."""
    pick = rng.randrange(13)
    if pick == 0 and len(data) > 1:
        return data[: rng.randrange(1, len(data))]  # a proper prefix of an object is never JSON
    if pick == 1:
        at = rng.randrange(len(data))
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if pick == 2:
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice((b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b",", b"}", b"]", b'"', b"\\")) + data[at:]
    if pick == 3:
        return data + rng.choice((b",", b"}", b" x", b"\x00", b"{}", b" \r", b"\t"))
    if pick == 4:
        return b"\xef\xbb\xbf" + data
    if pick == 5 and data.startswith(b"{"):
        return b'{"id":' + dumps(rng.choice(ODD_IDS)) + b"," + data[1:]  # a duplicate key: the later one wins
    if pick == 6 and b'"text":"' in data:
        return data.replace(b'"text":"', b'"text":"\\ud800', 1)
    if pick == 7 and data.startswith(b"{"):
        return b'{"nan":' + rng.choice((b"NaN", b"Infinity", b"-Infinity", b"1e400", b"01", b"+1", b".5")) + b"," + data[1:]
    if pick == 8:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))).replace(b"\n", b" ")
    if pick == 9:
        return rng.choice((b"null", b"[]", b"{}", b"[{}]", b'"str"', b"123", b"true", b"{", b"[", b"\"", b"{{}}"))
    if pick == 10:
        return rng.choice((b"  ", b"\t", b"\r")) + data + rng.choice((b"", b" ", b"\r"))
    if pick == 11 and data.startswith(b"{"):
        depth = rng.choice(_RAW_DEPTHS)
        return b'{"deep":' + b"[" * depth + b"]" * depth + b"," + data[1:]
    return data.replace(b'"jsonrpc":"2.0"', b'"jsonrpc":"2.0","jsonrpc":"1.0"', 1)


# -- HTTP requests ------------------------------------------------------------

NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
HEADED = {"region": ("mcp-param-region", "string"), "count": ("mcp-param-count", "integer"), "flag": ("mcp-param-flag", "boolean")}


def header_value(value: str) -> str:
    """A header value: plain visible ASCII as is, anything else as `=?base64?...?=`."""
    if all(" " <= ch <= "~" for ch in value) and value == value.strip() and not value.startswith("=?base64?"):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


Headers = list[tuple[str, str]]


def mcp_headers(message: Any, version: str | None = VERSION) -> Headers:
    """The headers a conforming client sends with `message` (a 2025-era one: `version` of its session, or None)."""
    headers: Headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    if version is not None:
        headers.append(("mcp-protocol-version", version))
    if version != VERSION or not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return headers
    method = message["method"]
    headers.append(("mcp-method", method))
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    name = params.get(NAME_FIELDS.get(method, ""))
    if isinstance(name, str):
        headers.append(("mcp-name", header_value(name)))
    arguments = params.get("arguments")
    if method == "tools/call" and params.get("name") == "headed" and isinstance(arguments, dict):
        for argument, (header, kind) in HEADED.items():
            value = arguments.get(argument)
            if kind == "boolean" and isinstance(value, bool):
                headers.append((header, "true" if value else "false"))
            elif kind == "integer" and isinstance(value, int):
                headers.append((header, str(value)))
            elif isinstance(value, str):
                headers.append((header, header_value(value)))
    return headers


_HEADER_VALUES = {
    "content-type": ("text/plain", "application/json; charset=utf-8", "APPLICATION/JSON", "", "application/jsonx",
                     "multipart/form-data; boundary=x", "application/json;", "*/*"),
    "accept": ("application/json", "text/event-stream", "*/*", "application/*, text/*", "application/json;q=0, text/event-stream",
               "", "text/event-stream;q=0.5, application/json;q=abc", "application/json, text/event-stream;q=0"),
    "mcp-protocol-version": ("2025-11-25", "2099-01-01", "", "2026-07-28 ", "2024-11-05", "garbage"),
    "mcp-method": ("tools/list", "TOOLS/CALL", "", "tools/call ", "=?base64?dG9vbHMvbGlzdA==?="),
    "mcp-name": ("echo", "nope", "=?base64?!!!?=", "=?base64?ZWNobw==?=", "=?base64??=", "\u00e9cho", "fuzz://readme"),
    "mcp-param-count": ("1.0", "1e1", "9" * 5000, "-0", " 1", "0x10", "42"),
    "mcp-param-flag": ("TRUE", "1", "yes", "false"),
    "mcp-param-region": ("=?base64?w6k=?=", "\u00e9", ""),
    "origin": ("http://evil.example", "null", "http://[::1", "http://localhost:1", "file://", "http://127.0.0.1",
               "https://localhost", "http://evil.example:80@127.0.0.1", ""),
    "mcp-session-id": ("no-such-session", "", "x" * 200),
    "last-event-id": ("0", "nope", ""),
    "expect": ("100-continue",),
    "host": ("evil.example", "localhost", "127.0.0.1:1", ""),  # a second Host header
    "connection": ("close", "keep-alive", "upgrade"),
    "user-agent": ("\u00ff\u00fe", "fuzz/1.0"),
}


def mutate_headers(headers: Headers, rng: random.Random) -> Headers:
    """Headers with one fault: dropped, repeated, changed, odd bytes, or an extra one."""
    headers = list(headers)
    pick = rng.randrange(5)
    if pick == 0 and headers:
        del headers[rng.randrange(len(headers))]
    elif pick == 1 and headers:
        name, value = rng.choice(headers)
        headers.append((name, value if rng.random() < 0.5 else rng.choice(_HEADER_VALUES.get(name, ("other",)))))
    elif pick == 2 and headers:
        at = rng.randrange(len(headers))
        name = headers[at][0]
        headers[at] = (rng.choice((name, name.upper(), name.title())), rng.choice(_HEADER_VALUES.get(name, ("", "x"))))
    else:
        name = rng.choice(sorted(_HEADER_VALUES))
        headers.append((name, rng.choice(_HEADER_VALUES[name])))
    return headers


def http_request(
    headers: Headers, body: bytes = b"", *, method: str = "POST", target: str = "/mcp", host: str | None = None,
    chunks: list[int] | None = None, version: str = "1.1", declared: int | None = None,
) -> bytes:
    """One HTTP/1.x request as bytes: Content-Length framing (`declared`, or the body's length),
    or chunked with the given chunk sizes."""
    lines = [f"{method} {target} HTTP/{version}"]
    if host is not None:
        lines.append(f"host: {host}")
    lines += [f"{name}: {value}" for name, value in headers]
    if chunks is None:
        if body or method == "POST" or declared is not None:
            lines.append(f"content-length: {len(body) if declared is None else declared}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body
    lines.append("transfer-encoding: chunked")
    out = [("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")]
    position = 0
    for size in chunks:
        piece = body[position : position + size]
        position += len(piece)
        if piece:
            out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
    if position < len(body):
        out.append(b"%x\r\n%s\r\n" % (len(body) - position, body[position:]))
    out.append(b"0\r\n\r\n")
    return b"".join(out)


MAX_TINY_CHUNKS = 2000  # well inside the server's bound on pieces of one body (16,384)


def chunk_sizes(length: int, rng: random.Random) -> list[int]:
    """Random chunk sizes that cover `length` bytes: a few chunks, or many tiny ones and then the rest."""
    sizes, left = [], length
    small = rng.random() < 0.2
    while left > 0:
        size = rng.randint(1, 8) if small and len(sizes) < MAX_TINY_CHUNKS else rng.randint(1, left)
        sizes.append(size)
        left -= size
    return sizes


def unknown_coding(data: bytes) -> bool:
    """Whether a request head names a transfer coding other than chunked (RFC 9112 section 6.1 answers 501)."""
    head = data.split(b"\r\n\r\n", 1)[0].replace(b"\r\n", b"\n")
    for line in head.split(b"\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"transfer-encoding" and value.strip().lower() != b"chunked":
            return True
    return False


# Request heads that are not HTTP/1.1 as h11 reads it; each is sent with its connection closed after.
BROKEN_HEADS: tuple[bytes, ...] = (
    b"GARBAGE\r\n\r\n",
    b"POST /mcp HTTP/9.9\r\nhost: h\r\n\r\n",
    b"POST  /mcp HTTP/1.1\r\nhost: h\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\nbad header: 1\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\nno-colon\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n12345",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ncontent-length: +5\r\n\r\n12345",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ncontent-length: abc\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ntransfer-encoding: gzip\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: h\r\n folded: value\r\n\r\n",
    b"POST /mcp HTTP/1.1\nhost: h\ncontent-length: 2\n\n{}",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS client hello
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\n\r\n",  # no Host
    b"POST /\xff\xfe HTTP/1.1\r\nhost: h\r\n\r\n",
    b"\r\n\r\n\r\n",
)
