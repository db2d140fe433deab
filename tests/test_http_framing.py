"""A JSON answer the built-in server frames itself (`_Connection.whole`) is the answer h11 would
have framed, and leaves the connection's h11 state machine where h11's own `send` leaves it."""

from __future__ import annotations

import anyio
import h11
import orjson
import pytest

from conftest import request
from http_client import mcp_headers, running
from mcpcore import Server
from mcpcore.transports.http import _answered

pytestmark = pytest.mark.anyio


def echo_server() -> Server:
    server = Server("framing")

    @server.tool
    async def echo(text: str) -> str:
        return text

    return server


async def answers(port: int, messages: list[tuple[dict, dict[str, str]]]) -> tuple[list[tuple[h11.Response, bytes]], bool]:
    """Post each message (with its extra headers) in turn on one keep-alive connection: the answers
    as an h11 client parses them, and whether the server closed the connection after the last."""
    client = h11.Connection(h11.CLIENT)
    got: list[tuple[h11.Response, bytes]] = []
    with anyio.fail_after(10):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            for message, extra in messages:
                body = orjson.dumps(message)
                headers = {"host": "127.0.0.1", **mcp_headers(message, **extra), "content-length": str(len(body))}
                await stream.send(client.send(h11.Request(method="POST", target="/mcp", headers=list(headers.items())))
                                  + client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage()))
                head, answer = None, b""
                while True:
                    event = client.next_event()
                    if event is h11.NEED_DATA:
                        client.receive_data(await stream.receive())
                    elif isinstance(event, h11.Response):
                        head = event
                    elif isinstance(event, h11.Data):
                        answer += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                got.append((head, answer))  # type: ignore[arg-type]
                if client.our_state is h11.DONE and client.their_state is h11.DONE:
                    client.start_next_cycle()
            try:
                rest = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                rest = b""
    return got, rest == b""


async def test_keep_alive_answers_are_framed_as_h11_frames_them() -> None:
    messages = [(request("tools/call", n, name="echo", arguments={"text": f"hi {n}"}), {}) for n in (1, 2)]
    messages.append((request("tools/call", 3, name="echo", arguments={"text": "bye"}), {"connection": "close"}))
    async with running(echo_server(), via="h11") as http:
        got, closed = await answers(http.port, messages)
    for number, (head, body) in enumerate(got, 1):
        assert head.status_code == 200 and head.reason == b"OK"
        assert dict(head.headers)[b"content-type"] == b"application/json"
        assert int(dict(head.headers)[b"content-length"]) == len(body)
        assert orjson.loads(body)["id"] == number
    assert [orjson.loads(body)["result"]["content"][0]["text"] for _, body in got] == ["hi 1", "hi 2", "bye"]
    assert b"connection" not in dict(got[0][0].headers)
    assert dict(got[2][0].headers)[b"connection"] == b"close"  # h11 framed the last one: it closes
    assert closed


def test_answered_moves_h11_as_its_own_send_does() -> None:
    def served() -> h11.Connection:
        connection = h11.Connection(h11.SERVER)
        connection.receive_data(b"POST /mcp HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}")
        while connection.next_event() is not h11.NEED_DATA:
            pass
        return connection

    sent, framed = served(), served()
    sent.send(h11.Response(status_code=200, headers=[(b"content-length", b"2")]))
    sent.send(h11.Data(data=b"{}"))
    sent.send(h11.EndOfMessage())
    _answered(framed)
    for connection in (sent, framed):
        assert (connection.our_state, connection.their_state) == (h11.DONE, h11.DONE)
        assert not connection.they_are_waiting_for_100_continue
        connection.start_next_cycle()
        assert (connection.our_state, connection.their_state) == (h11.IDLE, h11.IDLE)
