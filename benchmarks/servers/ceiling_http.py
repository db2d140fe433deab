"""The HTTP ceiling: h11 on a raw asyncio protocol answering every POST with a fixed small JSON body.

    python ceiling_http.py PORT
"""

import asyncio
import sys

import h11

BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


class Ceiling(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.conn = h11.Connection(h11.SERVER)

    def data_received(self, data):
        self.conn.receive_data(data)
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.EndOfMessage):
                self.transport.write(
                    self.conn.send(h11.Response(status_code=200, headers=HEADERS))
                    + self.conn.send(h11.Data(data=BODY))
                    + self.conn.send(h11.EndOfMessage())
                )
                self.conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                self.transport.close()
                return


async def main(port: int, protocol: type[asyncio.Protocol] = Ceiling) -> None:
    server = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
