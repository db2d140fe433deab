"""The stdio floor: the least an asyncio MCP server does per `tools/call`.

Where the ceiling (`ceiling_stdio.py`) parses nothing, this one does what no server
can skip and nothing more: split lines, parse each with orjson, run the named async
tool in a task of its own (so a slow call cannot hold up the next), and write the
result as one JSON line (any other request gets an empty result). No validation, no
limits, no cancellation, no error answers: a lower bound for mcpcore's stdio cost, not
a server to use.
"""

import asyncio

import orjson
from ceiling_stdio import Echo, main  # the same pipes and end of input; only the answering differs


async def echo(text: str) -> str:
    return text


TOOLS = {"echo": echo}
META = {"io.modelcontextprotocol/serverInfo": {"name": "floor", "version": "1.0.0"}}


class Floor(Echo):
    def __init__(self, output: asyncio.WriteTransport, done: asyncio.Future) -> None:
        super().__init__(output, done)
        self.rest = b""

    def data_received(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        loop = asyncio.get_running_loop()
        for line in lines:
            loop.create_task(self.answer(orjson.loads(line)))

    async def answer(self, message: dict) -> None:
        params = message["params"]
        if message["method"] == "tools/call":
            text = await TOOLS[params["name"]](**params["arguments"])
            result = {"content": [{"type": "text", "text": text}], "resultType": "complete", "_meta": META}
        else:  # the harness's first request (server/discover): any complete result
            result = {"resultType": "complete", "_meta": META}
        self.output.write(orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + b"\n")


if __name__ == "__main__":
    asyncio.run(main(Floor))
