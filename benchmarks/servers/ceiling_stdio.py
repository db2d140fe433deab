"""The stdio ceiling: a bare asyncio pipe echo answering every line with a fixed JSON line.

Asyncio read and write pipe transports and nothing else (no parsing, no tasks): what
an event-loop server on stdin/stdout costs at least, so mcpcore's stdio transport is
compared with the same loop machinery it runs on.
"""

import asyncio
import sys

REPLY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}\n'


class Echo(asyncio.Protocol):
    def __init__(self, output: asyncio.WriteTransport, done: asyncio.Future) -> None:
        self.output = output
        self.done = done

    def data_received(self, data: bytes) -> None:
        lines = data.count(b"\n")
        if lines:
            self.output.write(REPLY * lines)

    def eof_received(self) -> None:
        self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def main(protocol: type[Echo] = Echo) -> None:
    """Serve stdin/stdout with `protocol` (this echo, or one built on it) until EOF."""
    loop = asyncio.get_running_loop()
    output, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, sys.stdout.buffer)
    done = loop.create_future()
    await loop.connect_read_pipe(lambda: protocol(output, done), sys.stdin.buffer)
    await done


if __name__ == "__main__":
    asyncio.run(main())
