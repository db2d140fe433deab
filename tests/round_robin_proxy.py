"""A round-robin HTTP proxy for tests: each request goes to the next backend, on a connection of its own.

A load balancer without sticky sessions spreads one client's requests over every
process; this one does it as unkindly as possible, request by request, so two
consecutive requests of one client never reach the same process. Responses are
relayed event by event (an SSE stream arrives as it is written), and `Host` names the
backend, as a reverse proxy sets it by default. Loopback only.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import anyio
import anyio.abc
import h11


class RoundRobinProxy:
    """`async with RoundRobinProxy(ports) as proxy:` listens on `proxy.port` until the block ends."""

    def __init__(self, backends: Sequence[int], port: int = 0) -> None:
        self._next = itertools.cycle(backends)
        self.port = port  # 0: any free one
        self.served: list[int] = []  # the backend of each request, in order

    async def __aenter__(self) -> RoundRobinProxy:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        self.port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._listener.serve, self._relay_connection)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self._tasks.cancel_scope.cancel()
        await self._tasks.__aexit__(None, None, None)
        await self._listener.aclose()

    async def _relay_connection(self, client: anyio.abc.SocketStream) -> None:
        """Relay one client connection's requests; a client or backend that goes away ends this
        connection only (never the listener, which would take every other client with it)."""
        try:
            await self._relay_requests(client)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, h11.ProtocolError, OSError):
            pass

    async def _relay_requests(self, client: anyio.abc.SocketStream) -> None:
        downstream = h11.Connection(h11.SERVER)
        async with client:
            while True:
                request = await _next_event(downstream, client)
                if not isinstance(request, h11.Request):
                    return  # the client closed the connection (or sent something this proxy ignores)
                body = b""
                while isinstance(event := await _next_event(downstream, client), h11.Data):
                    body += event.data
                backend = next(self._next)
                self.served.append(backend)
                await self._relay_request(backend, request, body, downstream, client)
                if downstream.our_state is not h11.DONE or downstream.their_state is not h11.DONE:
                    return
                downstream.start_next_cycle()

    async def _relay_request(self, backend: int, request: h11.Request, body: bytes,
                             downstream: h11.Connection, client: anyio.abc.SocketStream) -> None:
        upstream = h11.Connection(h11.CLIENT)
        # The Host the backend serves, as a reverse proxy sets it by default (nginx's $proxy_host).
        headers = [(name, f"127.0.0.1:{backend}".encode() if name == b"host" else value) for name, value in request.headers]
        forwarded = h11.Request(method=request.method, target=request.target, headers=headers)
        async with await anyio.connect_tcp("127.0.0.1", backend) as server:
            for event in (forwarded, h11.Data(data=body), h11.EndOfMessage()):
                if not isinstance(event, h11.Data) or event.data:
                    await server.send(upstream.send(event))
            while True:
                event = await _next_event(upstream, server)
                if isinstance(event, (h11.Response, h11.InformationalResponse)):
                    await client.send(downstream.send(h11.Response(status_code=event.status_code, headers=event.headers,
                                                                   reason=event.reason)))
                elif isinstance(event, h11.Data):
                    await client.send(downstream.send(event))
                else:
                    await client.send(downstream.send(h11.EndOfMessage()))
                    return


async def _next_event(connection: h11.Connection, stream: anyio.abc.SocketStream) -> Any:
    while (event := connection.next_event()) is h11.NEED_DATA:
        try:
            connection.receive_data(await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            connection.receive_data(b"")
    return event
