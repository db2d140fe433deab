"""A test client that runs a server command as a real subprocess over real pipes.

Every line the server writes must be one JSON message valid on the wire;
notifications are kept per request id (progress token) and in arrival order.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import anyio
import anyio.abc
import orjson

from conftest import ROOT, request
from wire_schema import check, check_legacy

SERVE_ECHO = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py")]


class StdioClient:
    def __init__(self, process: anyio.abc.Process, checker: Callable[[Any, str | None], Any] = check) -> None:
        self.process = process
        self.check = checker
        self._buffer = b""
        self.received: list[dict[str, Any]] = []
        self._claimed: set[int] = set()  # responses already handed out by `response_to`
        self.methods: dict[Any, str] = {}

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:
            self.methods[message["id"]] = message["method"]
        await self.send_raw(orjson.dumps(message) + b"\n")

    async def read(self) -> dict[str, Any]:
        """The next message; the line must be exactly one valid JSON-RPC message."""
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = orjson.loads(line)
        self.check(message, self.methods.get(message.get("id")))
        self.received.append(message)
        return message

    async def response_to(self, request_id: Any) -> dict[str, Any]:
        """The response to `request_id`, whether it came already (answers may come in any order) or comes next."""
        for message in self.received:
            if message.get("id") == request_id and "method" not in message and id(message) not in self._claimed:
                self._claimed.add(id(message))
                return message
        while True:
            message = await self.read()
            if message.get("id") == request_id and "method" not in message:
                self._claimed.add(id(message))
                return message

    async def call(self, method: str, request_id: Any = 1, **params: Any) -> dict[str, Any]:
        await self.send(request(method, request_id, **params))
        return await self.response_to(request_id)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait(self) -> int:
        return await self.process.wait()


class serve:
    """`async with serve() as client:` starts a server subprocess and reaps it.

    The server's stderr is inherited (pytest shows it on failure) unless given.
    """

    def __init__(self, command: Sequence[str] = SERVE_ECHO, stderr: int | None = None, legacy: bool = False) -> None:
        self.command = list(command)
        self.stderr = stderr
        self.checker = check_legacy if legacy else check

    async def __aenter__(self) -> StdioClient:
        self._process = await anyio.open_process(self.command, stderr=self.stderr, cwd=ROOT)
        return StdioClient(self._process, self.checker)

    async def __aexit__(self, *exc: object) -> None:
        if self._process.returncode is None:
            self._process.kill()
        await self._process.wait()
        await self._process.aclose()
