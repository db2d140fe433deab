"""What `LocalLimiter` drops when its tables are full: never a quota spent today. A flood of new callers
(many addresses, many tokens) neither resets another caller's quota nor its own; once every quota kept
is today's, new ones are refused until midnight UTC. Clocks are injected, so every count is exact."""

from __future__ import annotations

import logging
import anyio
import pytest

from conftest import tool_call
from http_client import HttpClient, Reply, mcp_headers, running
from servers.limits_server import AnyToken, build
from mcpcore.auth import Auth
from mcpcore._runtime.limits import DAY, Check, Limits, LocalLimiter, Refusal

DAILY = Check("day", "", 2, 0)
RATE = Check("rate", "", 1.0, 10)  # ten calls at once, then one a second


class Clocks:
    """The limiter's monotonic clock (`now`) and wall clock (`wall`, seconds since the epoch)."""

    def __init__(self) -> None:
        self.now, self.wall = 0.0, 10 * DAY + 3600.0

    def limiter(self, limits: Limits = Limits(), max_callers: int = 4) -> LocalLimiter:
        return LocalLimiter(limits, max_callers=max_callers, clock=lambda: self.now, wall=lambda: self.wall)


def who(name: str) -> tuple[str, str]:
    return ("peer", name)


def kind(refusal: Refusal | None) -> str | None:
    return None if refusal is None else refusal.check.kind


def test_a_flood_of_new_callers_never_gives_back_a_quota_spent_today() -> None:
    clocks = Clocks()
    limiter = clocks.limiter()
    assert [kind(limiter.take(who("victim"), [DAILY])) for _ in range(3)] == [None, None, "day"]
    assert [kind(limiter.take(who("flooder"), [DAILY])) for _ in range(3)] == [None, None, "day"]
    flood = [kind(limiter.take(who(f"2001:db8::{n:x}"), [DAILY])) for n in range(1000)]
    assert flood[:2] == [None, None] and set(flood[2:]) == {"callers"}  # room for two more, then none
    assert kind(limiter.take(who("victim"), [DAILY])) == "day"
    assert kind(limiter.take(who("flooder"), [DAILY])) == "day"
    assert len(limiter._quotas) == 4


def test_once_every_quota_kept_is_todays_a_new_caller_is_refused_until_midnight(
        caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    limiter = clocks.limiter(max_callers=2)
    assert limiter.take(who("a"), [DAILY]) is None and limiter.take(who("b"), [DAILY]) is None
    with caplog.at_level(logging.WARNING, logger="mcpcore.limits"):
        refused = [limiter.take(who(f"new{n}"), [DAILY]) for n in range(3)]
    assert all(kind(refusal) == "callers" for refusal in refused)
    error = refused[0].error()  # type: ignore[union-attr]
    assert error.code == 429 and error.data == {"retryAfter": DAY - 3600, "period": "day"}
    assert str(error) == ("Too many callers today: the server keeps 2 daily quotas, all spent today, and starts no "
                          "new one until they reset at 00:00 UTC, in 82800 s")
    assert [record.getMessage() for record in caplog.records] == [
        "rate limits: 2 daily quotas are kept today, the most this process keeps; calls of new callers that need "
        "one are refused until 00:00 UTC"]  # once a day, not once a call
    assert limiter.take(who("a"), [DAILY]) is None  # callers kept go on
    assert kind(limiter.take(who("a"), [DAILY])) == "day"
    clocks.wall += DAY - 3600  # midnight: yesterday's quotas lose nothing when dropped
    assert limiter.take(who("new0"), [DAILY]) is None  # in b's place (spent least recently)
    assert limiter.take(who("a"), [DAILY]) is None  # a new day's quota, not the old one
    with caplog.at_level(logging.WARNING, logger="mcpcore.limits"):
        assert kind(limiter.take(who("new1"), [DAILY])) == "callers"
    assert len(caplog.records) == 2  # said again on the new day


def test_a_refused_call_spends_nothing_and_a_call_without_a_quota_is_never_refused_for_room() -> None:
    clocks = Clocks()
    limiter = clocks.limiter(max_callers=2)
    assert limiter.take(who("a"), [DAILY]) is None and limiter.take(who("b"), [DAILY]) is None
    assert kind(limiter.take(who("c"), [RATE, DAILY])) == "callers"
    assert who("c") not in {key[1] for key in limiter._buckets}  # all or nothing: its bucket unspent
    assert limiter.take(who("c"), [RATE]) is None  # a listing or a ping needs no quota


def test_quotas_of_a_past_day_and_refilled_buckets_are_dropped_first() -> None:
    clocks = Clocks()
    limiter = clocks.limiter(max_callers=3)
    assert [kind(limiter.take(who("drained"), [RATE])) for _ in range(11)] == [None] * 10 + ["rate"]
    clocks.now = 1.0
    for name in ("b", "c"):
        assert limiter.take(who(name), [RATE]) is None  # each full again at 2.0
    clocks.now = 3.0
    assert limiter.take(who("d"), [RATE]) is None
    assert [kind(limiter.take(who("drained"), [RATE])) for _ in range(4)] == [None] * 3 + ["rate"]  # 3 s, 3 calls
    assert [key[1][1] for key in limiter._buckets] == ["d", "drained"]  # b and c, refilled, lost nothing

    limiter = clocks.limiter(max_callers=3)
    limiter.take(who("yesterday"), [DAILY])
    clocks.wall += DAY
    assert limiter.take(who("x"), [DAILY]) is None and limiter.take(who("y"), [DAILY]) is None
    assert limiter.take(who("z"), [DAILY]) is None  # yesterday's dropped, not x's or y's
    assert kind(limiter.take(who("w"), [DAILY])) == "callers"
    assert [key[1][1] for key in limiter._quotas] == ["x", "y", "z"]


def test_a_partly_drained_bucket_is_dropped_least_recently_used_when_none_is_refilled() -> None:
    clocks = Clocks()
    limiter = clocks.limiter(max_callers=2)
    for name in ("a", "b", "c"):
        assert limiter.take(who(name), [RATE]) is None
    assert [key[1][1] for key in limiter._buckets] == ["b", "c"]  # a gives back at most its burst


def test_the_tables_stay_bounded_whatever_the_callers_and_days() -> None:
    clocks = Clocks()
    limiter = clocks.limiter(max_callers=16)
    slow = [Check("rate", "", 0.5, 3), Check("rate", "slow", 0.1, 1), Check("day", "", 3, 0), Check("day", "slow", 2, 0)]
    listing = slow[:1]
    answers: dict[str | None, int] = {}
    for n in range(4000):
        clocks.now += 0.01
        clocks.wall += 60.0  # a day every 1440 calls
        answer = kind(limiter.take(who(f"10.0.0.{n % 13}"), slow if n % 3 else listing))
        answers[answer] = answers.get(answer, 0) + 1
        assert len(limiter._buckets) <= 16 and len(limiter._quotas) <= 16
    assert set(answers) == {None, "rate", "day", "callers"}, answers


def test_a_limiter_needs_room_for_one_call() -> None:
    with pytest.raises(ValueError, match="max_callers must be at least 2"):
        LocalLimiter(Limits(daily=1), max_callers=1)


async def _as(port: int, principal: str) -> Reply:
    message = tool_call(1, "ping")
    async with HttpClient.connect(_Port(port)) as http:  # type: ignore[arg-type]
        with anyio.fail_after(10):
            return await http.post(message, {**mcp_headers(message), "authorization": f"Bearer {principal}"})


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port


@pytest.mark.anyio
async def test_over_http_a_flood_of_tokens_gets_a_clear_429_and_resets_no_quota() -> None:
    server = build("limits", Auth(AnyToken(), "http://127.0.0.1/mcp", ("https://auth.example.com",)))
    server.middleware = (LocalLimiter(Limits(daily=1), max_callers=2), *server.middleware)
    async with running(server) as http:
        assert (await _as(http.port, "victim")).status == 200
        flood = [await _as(http.port, f"token-{n}") for n in range(20)]
        victim = await _as(http.port, "victim")
    assert [reply.status for reply in flood] == [200] + [429] * 19
    error = flood[1].response["error"]
    assert error["code"] == 429 and error["data"]["period"] == "day" and "quota" not in error["data"]
    assert error["message"].startswith("Too many callers today: the server keeps 2 daily quotas")
    assert flood[1].headers["retry-after"] == str(error["data"]["retryAfter"])
    assert victim.status == 429 and victim.response["error"]["message"].startswith("Daily quota used up: 1 call a day")
