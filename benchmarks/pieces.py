"""Instructions per call of each piece of a `tools/call`, counted apart by callgrind.

    python benchmarks/pieces.py [--pieces parse,context,...] [--calls 1000]

`instructions.py` counts whole requests; this says where they go. Each piece is one
function of the request path called on the bench server's async `echo` request, in a
loop outside any event loop (a coroutine is stepped to its end by hand): the loop runs
twice under callgrind, 200 and 200 + `--calls` times, and the difference divided by
`--calls` is what one call of the piece costs. `noop` is the loop itself (a call of an
empty lambda): take it off the others. Needs `valgrind`; counts are under one hash seed,
as `instructions.py`'s are.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

from instructions import callgrind_total

HERE = Path(__file__).resolve().parent
WARM = 200


def pieces() -> dict[str, Callable[[], Any]]:
    """Each piece as a function of no arguments, on the echo request."""
    os.environ["MCPCORE_BENCH_ASYNC"] = "1"
    sys.path[:0] = [str(HERE), str(HERE / "servers")]
    import orjson
    from mcpcore_bench import server  # type: ignore[import-not-found]

    from instructions import request_body
    from mcpcore._app.context import Context
    from mcpcore._runtime.call import Call
    from mcpcore._serving.dispatch import request_meta
    from mcpcore._wire.jsonrpc import classify, encode_raw_result
    from mcpcore.transports._calls import read_message

    line = request_body("async")
    message = orjson.loads(line)
    dispatcher = server.dispatcher
    route = dispatcher.route(message)
    tool = route.target

    class Writer:
        async def notify(self, data: bytes) -> None: ...

        async def respond(self, data: bytes, error_code: int | None = None) -> None: ...

    writer = Writer()
    call = Call(message, route)
    meta = message["params"]["_meta"]
    context = Context(call, writer, meta, server)

    def run(coroutine: Any) -> Any:
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        raise RuntimeError("the piece waited: it cannot be counted outside an event loop")

    result = run(tool.call({"text": "hello"}, context))

    def envelope() -> bytes:
        return encode_raw_result(1, orjson.dumps({**result, "resultType": "complete", "_meta": server.result_meta}))

    # The HTTP transport's own checks, on the head `instructions.py` sends with the echo request.
    import h11

    from mcpcore.transports._http.exchange import header_map
    from mcpcore.transports._http.rules import check_head, check_mcp_headers, make_policy

    head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: %d\r\n\r\n" % len(line))
    parser = h11.Connection(h11.SERVER)
    parser.receive_data(head)
    raw = parser.next_event().headers.raw_items()  # type: ignore[union-attr]
    headers = header_map(raw)[0]
    policy = make_policy("127.0.0.1", 8000, "/mcp")

    return {
        "noop": lambda: None,
        "loads": lambda: orjson.loads(line),
        "classify": lambda: classify(message),
        "parse": lambda: read_message(line),
        "route": lambda: dispatcher.route(message),
        "call": lambda: Call(message, route),
        "meta": lambda: request_meta(message["params"]),
        "context": lambda: Context(call, writer, meta, server),
        "validate": lambda: tool.validator.validate({"text": "hello"}),
        "convert": lambda: tool.info.convert({"text": "hello"}),
        "shape": lambda: tool.shape("hello"),
        "toolcall": lambda: run(tool.call({"text": "hello"}, context)),
        "envelope": envelope,
        "dispatch": lambda: run(dispatcher._dispatch(Call(message, route), writer)),
        "handle": lambda: run(dispatcher.handle(Call(message, route), writer)),
        "headermap": lambda: header_map(raw),
        "checkhead": lambda: check_head(policy, "POST", "/mcp", headers),
        "mcpheaders": lambda: check_mcp_headers(headers, message, route),
    }


def count(piece: str, calls: int) -> int:
    """Instructions callgrind counts for one whole run of `piece` called `calls` times."""
    return callgrind_total([sys.executable, str(Path(__file__).resolve()), "--inner", piece, str(calls)], piece)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", help="comma-separated (default: all)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--inner", nargs=2, metavar=("PIECE", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        piece = pieces()[args.inner[0]]
        for _ in range(int(args.inner[1])):
            piece()
        return
    for name in args.pieces.split(",") if args.pieces else pieces():
        low, high = count(name, WARM), count(name, WARM + args.calls)
        print(f"{name:10} {(high - low) / args.calls:>10,.0f} instructions per call", flush=True)


if __name__ == "__main__":
    main()
