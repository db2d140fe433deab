"""`Sealer` and `binding`: integrity, expiry, binding and key rotation of `requestState`."""

from __future__ import annotations

import base64
import types

import orjson
import pytest

from mcpcore import McpError
from mcpcore._wire import sealing
from mcpcore._wire.sealing import KEYS_ENV, Sealer, binding

KEY_A = b"key-A-0123456789abcdef"
KEY_B = b"key-B-0123456789abcdef"
BOUND = binding("tools/call", "ask_name", {"city": "Paris"}, "alice")
PAYLOAD = {"state": {"round": 2, "answers": ["Ada"]}, "asked": {"user_name": "elicitation"}}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def refused(sealer: Sealer, token: object, bound: str = BOUND) -> str:
    """The -32602 message `open` refuses the token with."""
    with pytest.raises(McpError) as caught:
        sealer.open(token, bound)
    assert caught.value.code == -32602
    return caught.value.message


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A settable clock for `sealing` only: `clock[0] = t`."""
    now = [1_000_000.25]
    monkeypatch.setattr(sealing, "time", types.SimpleNamespace(time=lambda: now[0]))
    return now


def test_a_sealed_payload_opens_to_itself_plus_expiry_and_binding(clock: list[float]) -> None:
    sealer = Sealer([KEY_A], ttl_seconds=600)
    token = sealer.seal(PAYLOAD, BOUND)
    assert token.startswith("v1.") and token.count(".") == 2
    opened = sealer.open(token, BOUND)
    assert opened == {**PAYLOAD, "exp": 1_000_600.25, "bind": BOUND}


def test_the_token_is_url_safe_text() -> None:
    token = Sealer([KEY_A]).seal({"state": "ünïcode/+?&=", "asked": {}}, BOUND)
    assert set(token) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def test_a_changed_body_is_refused_as_modified() -> None:
    sealer = Sealer([KEY_A])
    version, body, mac = sealer.seal(PAYLOAD, BOUND).split(".")
    forged = orjson.loads(unb64(body))
    forged["state"]["round"] = 99
    message = refused(sealer, f"{version}.{b64(orjson.dumps(forged))}.{mac}")
    assert message == "Invalid requestState: it was modified or not issued by this server"


def test_a_changed_mac_is_refused_as_modified() -> None:
    sealer = Sealer([KEY_A])
    token = sealer.seal(PAYLOAD, BOUND)
    assert "modified" in refused(sealer, token + "-TAMPERED")
    version, body, mac = token.split(".")
    flipped = bytes([unb64(mac)[0] ^ 1]) + unb64(mac)[1:]
    assert "modified or not issued by this server" in refused(sealer, f"{version}.{body}.{b64(flipped)}")


def test_a_swapped_body_fails_the_mac_before_it_is_parsed() -> None:
    sealer = Sealer([KEY_A])
    version, _, mac = sealer.seal(PAYLOAD, BOUND).split(".")
    message = refused(sealer, f"{version}.{b64(b'not json')}.{mac}")
    assert message == "Invalid requestState: it was modified or not issued by this server"


def test_a_correctly_signed_body_that_is_not_json_is_refused_as_malformed() -> None:
    sealer = Sealer([KEY_A])
    body = b64(b"not json")
    mac = b64(sealer._mac(KEY_A, body))
    message = refused(sealer, f"v1.{body}.{mac}")
    assert message == "Invalid requestState: it is malformed; send back the value the server gave"


@pytest.mark.parametrize("token", [None, 42, ["v1", "a", "b"], "", "v1.only-two", "v1.a.b.c", "no dots at all"])
def test_anything_but_three_dot_separated_parts_is_refused_as_malformed(token: object) -> None:
    assert "malformed" in refused(Sealer([KEY_A]), token)


def test_bad_base64_in_the_mac_is_refused_as_not_issued_here() -> None:
    sealer = Sealer([KEY_A])
    version, body, _ = sealer.seal(PAYLOAD, BOUND).split(".")
    assert "modified or not issued" in refused(sealer, f"{version}.{body}.A")  # cannot be a valid MAC


def test_a_non_ascii_token_is_refused_as_not_issued_here() -> None:
    sealer = Sealer([KEY_A])
    version, body, mac = sealer.seal(PAYLOAD, BOUND).split(".")
    assert "modified or not issued" in refused(sealer, f"{version}.{body}é.{mac}")


def test_an_unknown_version_prefix_is_refused_naming_it() -> None:
    sealer = Sealer([KEY_A])
    _, body, mac = sealer.seal(PAYLOAD, BOUND).split(".")
    assert refused(sealer, f"v2.{body}.{mac}") == "Invalid requestState: unknown format 'v2'"


def test_a_token_past_its_expiry_is_refused_as_expired(clock: list[float]) -> None:
    sealer = Sealer([KEY_A], ttl_seconds=60)
    token = sealer.seal(PAYLOAD, BOUND)
    clock[0] += 59
    assert sealer.open(token, BOUND)["state"] == PAYLOAD["state"]
    clock[0] += 2
    assert refused(sealer, token) == "Invalid requestState: it has expired; start the request again without it"


def test_a_tiny_ttl_expires_without_moving_the_clock() -> None:
    sealer = Sealer([KEY_A], ttl_seconds=-1)
    assert "expired" in refused(sealer, sealer.seal(PAYLOAD, BOUND))


def test_a_token_is_valid_for_its_whole_ttl_even_below_a_second(clock: list[float]) -> None:
    sealer = Sealer([KEY_A], ttl_seconds=0.5)
    token = sealer.seal(PAYLOAD, BOUND)
    clock[0] += 0.4
    assert sealer.open(token, BOUND)["state"] == PAYLOAD["state"]


def test_expiry_is_checked_after_integrity(clock: list[float]) -> None:
    sealer = Sealer([KEY_A], ttl_seconds=1)
    token = sealer.seal(PAYLOAD, BOUND)
    clock[0] += 3600
    assert "modified" in refused(sealer, token + "x")


@pytest.mark.parametrize(
    "other",
    [
        binding("prompts/get", "ask_name", {"city": "Paris"}, "alice"),
        binding("tools/call", "other_tool", {"city": "Paris"}, "alice"),
        binding("tools/call", "ask_name", {"city": "Lyon"}, "alice"),
        binding("tools/call", "ask_name", {"city": "Paris", "extra": 1}, "alice"),
        binding("tools/call", "ask_name", {"city": "Paris"}, "bob"),
        binding("tools/call", "ask_name", {"city": "Paris"}, None),
    ],
    ids=["other method", "other name", "other argument value", "extra argument", "other principal", "no principal"],
)
def test_a_token_bound_to_another_request_is_refused(other: str) -> None:
    sealer = Sealer([KEY_A])
    token = sealer.seal(PAYLOAD, BOUND)
    assert refused(sealer, token, other) == "Invalid requestState: it was issued for a different request"


def test_after_rotation_a_token_sealed_by_the_old_key_still_opens() -> None:
    old = Sealer([KEY_A]).seal(PAYLOAD, BOUND)
    rotated = Sealer([KEY_B, KEY_A])
    assert rotated.open(old, BOUND)["state"] == PAYLOAD["state"]
    fresh = rotated.seal(PAYLOAD, BOUND)
    assert Sealer([KEY_B]).open(fresh, BOUND)["state"] == PAYLOAD["state"]  # the first key signs
    assert "modified" in refused(Sealer([KEY_A]), fresh)


def test_a_token_from_a_key_not_in_the_list_is_refused() -> None:
    token = Sealer([KEY_A]).seal(PAYLOAD, BOUND)
    assert "not issued by this server" in refused(Sealer([KEY_B]), token)


def test_without_keys_each_sealer_has_its_own_random_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    first, second = Sealer(), Sealer()
    assert first.configured is False and len(first.keys) == 1 and len(first.keys[0]) == 32
    assert first.keys != second.keys
    assert "not issued by this server" in refused(second, first.seal(PAYLOAD, BOUND))


@pytest.mark.parametrize(("keys", "length"), [([b"short"], 5), (["fifteen-chars!!"], 15), ([KEY_A, b"x" * 15], 15)])
def test_keys_shorter_than_sixteen_bytes_are_refused(keys: list, length: int) -> None:
    with pytest.raises(ValueError, match=f"^state_keys: every key must be at least 16 bytes long, not {length}$"):
        Sealer(keys)


def test_a_sixteen_byte_key_and_text_keys_are_accepted() -> None:
    assert Sealer([b"x" * 16]).keys == [b"x" * 16]
    assert Sealer(["sixteen-chars-ok"]).keys == [b"sixteen-chars-ok"]
    assert Sealer([KEY_A]).configured is True


def test_keys_come_from_the_environment_when_none_are_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYS_ENV, f" {KEY_B.decode()} , {KEY_A.decode()},")
    sealer = Sealer()
    assert sealer.configured is True
    assert sealer.keys == [KEY_B, KEY_A]
    assert sealer.open(Sealer([KEY_A]).seal(PAYLOAD, BOUND), BOUND)["asked"] == PAYLOAD["asked"]
    assert Sealer([KEY_B]).open(sealer.seal(PAYLOAD, BOUND), BOUND)["asked"] == PAYLOAD["asked"]


def test_given_keys_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYS_ENV, KEY_B.decode())
    assert Sealer([KEY_A]).keys == [KEY_A]


def test_a_short_key_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYS_ENV, "tiny")
    with pytest.raises(ValueError, match="^MCPCORE_STATE_KEYS: every key must be at least 16 bytes long, not 4$"):
        Sealer()


def test_an_empty_environment_variable_means_unconfigured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYS_ENV, " , ")
    sealer = Sealer()
    assert sealer.configured is False and len(sealer.keys) == 1


def test_binding_is_the_same_whatever_the_order_of_keys_in_the_arguments() -> None:
    one = binding("tools/call", "t", {"a": 1, "b": {"x": [1, {"p": 1, "q": 2}], "y": None}}, "alice")
    two = binding("tools/call", "t", {"b": {"y": None, "x": [1, {"q": 2, "p": 1}]}, "a": 1}, "alice")
    assert one == two
    assert len(one) == 43  # a base64url SHA-256 digest without padding


def test_binding_tells_apart_what_names_a_request() -> None:
    base = ("tools/call", "t", {"a": 1}, "alice")
    variants = [
        ("prompts/get", "t", {"a": 1}, "alice"),
        ("tools/call", "u", {"a": 1}, "alice"),
        ("tools/call", "t", {"a": 2}, "alice"),
        ("tools/call", "t", {"a": "1"}, "alice"),
        ("tools/call", "t", [1], "alice"),
        ("tools/call", "t", {"a": 1}, None),
    ]
    digests = {binding(*base)} | {binding(*v) for v in variants}
    assert len(digests) == len(variants) + 1
    assert binding(*base) == binding(*base)


def test_only_the_canonical_spelling_of_a_token_opens() -> None:
    sealer = Sealer([b"k" * 32])
    token = sealer.seal({"state": 1}, BOUND)
    version, body, mac = token.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    same_bytes = mac[:-1] + alphabet[alphabet.index(mac[-1]) ^ 1]  # the last character's unused low bits
    assert unb64(same_bytes) == unb64(mac)
    spellings = [f"{version}.{body}.{mac}==", f"{version}.{body}.{same_bytes}"]
    if set(mac) & set("-_"):
        spellings.append(f"{version}.{body}.{mac.replace('-', '+').replace('_', '/')}")
    assert sealer.open(token, BOUND)["state"] == 1
    for spelling in spellings:
        assert "modified or not issued" in refused(sealer, spelling)
