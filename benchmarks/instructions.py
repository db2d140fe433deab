"""Instructions per request on each hot path, counted by valgrind's callgrind: a noise-free figure.

    python benchmarks/instructions.py [--paths http-echo,stdio-echo,...] [--calls 1000] [--json out.json]

Wall-clock rates on a shared 2-core machine wander by 10% or more between runs;
the number of instructions a request costs does not. Each path is a fixed
in-process batch of calls, driven through the transport's real protocol objects
over a fake socket or pipe (so no client, kernel or scheduler cost is counted):
the batch runs twice under callgrind, with `--warm` and `--warm + --calls`
requests, and the difference divided by `--calls` is the cost of one request
with start-up and warm-up cancelled out. Needs `valgrind` (an OS package).

`--baseline FILE --tolerance 0.05` exits non-zero when a path costs more than 5%
over the figure recorded in FILE (a previous `--json` output). A path measured with
its reference (`REFERENCES`: the floor or ceiling of its transport) is compared as
a ratio to it, so a baseline recorded on one CPython build holds on another; CI
runs it that way against `benchmarks/instructions-baseline.json` (`.ci/run`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
PIPELINED = 50  # requests per chunk on the pipelined paths
PATHS = {  # name → (transport, echo flavour or method, requests per chunk of input)
    "stdio-echo": ("stdio", "async", 1),
    "stdio-echo-pipelined": ("stdio", "async", PIPELINED),  # chunks of lines, as a pipelining client sends them
    "stdio-sync-echo": ("stdio", "sync", 1),
    "stdio-floor": ("stdio-floor", "async", 1),  # the least an asyncio MCP server does (servers/floor_stdio.py)
    "stdio-floor-pipelined": ("stdio-floor", "async", PIPELINED),
    "stdio-bound": ("stdio-bound", "async", 1),  # the floor plus every check a correct server makes (servers/bound_stdio.py)
    "stdio-ceiling": ("stdio-ceiling", "async", 1),  # the bare asyncio pipe echo: no parsing, no tasks
    "http-echo": ("http", "async", 1),
    "http-sync-echo": ("http", "sync", 1),
    "http-tools-list": ("http", "list", 1),
    "http-echo-middleware": ("http", "middleware", 1),  # async echo behind one pass-through middleware
    "http-session-echo": ("http", "session", 1),  # async echo inside one 2025-11-25 session (Mcp-Session-Id)
    "http-stateless-echo": ("http", "stateless", 1),  # async echo on the 2025-11-25 wire, served stateless (no session)
    "http-idempotent-repeat": ("http", "idempotent-repeat", 1),  # async echo declared idempotent: a repeat, from the store
    "http-idempotent-first": ("http", "idempotent-first", 1),  # the same, run and stored each time (its entry expired)
    "http-echo-jwt": ("http", "jwt", 1),  # async echo with a JWT a keep-alive connection verified once
    "http-echo-jwt-verify": ("http", "jwt-verify", 1),  # the same, the signature checked on every request
    "http-echo-budget": ("http", "budget", 1),  # async echo under a result budget it fits: the measuring
    "http-long": ("http", "long", 1),  # a tool answering 8,000 bytes of text, no budget
    "http-long-budget": ("http", "long-budget", 1),  # the same under a 4,096-byte budget: cut, its rest kept
    "http-echo-asgi": ("asgi", "async", 1),  # async echo through the ASGI adapter under uvicorn's h11 protocol
    "asgi-ceiling": ("asgi", "ceiling", 1),  # a bare ASGI app answering a fixed result there: uvicorn's own cost
    "http-ceiling": ("ceiling", "async", 1),  # h11 on a bare asyncio protocol: what an HTTP request costs at least
    "http-bound": ("bound", "async", 1),  # the ceiling plus every check a correct server makes (servers/bound_http.py)
}
REFERENCES = {  # path → what its transport costs at least, measured in the same run
    "stdio-echo": "stdio-floor", "stdio-sync-echo": "stdio-floor", "stdio-echo-pipelined": "stdio-floor-pipelined",
    "stdio-bound": "stdio-floor", "http-bound": "http-ceiling",
    "http-echo": "http-ceiling", "http-sync-echo": "http-ceiling", "http-tools-list": "http-ceiling",
    "http-echo-middleware": "http-ceiling", "http-session-echo": "http-ceiling", "http-stateless-echo": "http-ceiling",
    "http-echo-asgi": "asgi-ceiling", "http-idempotent-repeat": "http-ceiling", "http-idempotent-first": "http-ceiling",
}
RESOURCE = "http://127.0.0.1:8000/mcp"
KEY_FILE = "MCPCORE_BENCH_JWT_KEY"  # the environment variable naming the JWT paths' key file
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class FakeTransport(asyncio.Transport):
    """A socket or pipe that hands every write to `sink` and never pushes back."""

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        super().__init__()
        self.sink = sink

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sink(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def request_body(flavour: str, request_id: int = 1) -> bytes:
    if flavour in ("session", "stateless"):  # the 2025-era wire: no _meta, the session holds what it carried
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hello"}}}
    elif flavour == "list":
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {"_meta": META}}
    elif flavour.startswith("long"):
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": "long", "arguments": {}, "_meta": META}}
    else:
        meta = {**META, "dev.mcpcore/idempotencyKey": "bench-0123456789abcdef"} if flavour.startswith("idem") else META
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": meta}}
    return json.dumps(message, separators=(",", ":")).encode()


async def passing(call: Any, call_next: Callable[[Any], Any]) -> bytes:
    """The cheapest middleware: what the middleware machinery itself costs."""
    return await call_next(call)


def make_key(path: Path) -> None:
    """Write the RSA key the JWT paths sign and verify with (PEM, unencrypted)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def authorized(server: Any) -> bytes:
    """Guard `server` with a JWT verifier holding one RSA key; the Authorization header line to send."""
    import time

    import jwt
    from cryptography.hazmat.primitives import serialization

    from mcpcore.auth import Auth
    from mcpcore.oauth import JwtVerifier

    # Both counted runs load one key: finding an RSA key's primes costs a varying number of instructions.
    key = serialization.load_pem_private_key(Path(os.environ[KEY_FILE]).read_bytes(), password=None)
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": "k1", "alg": "RS256"}
    issuer = "https://auth.example.com"
    server.auth = Auth(JwtVerifier(issuer, RESOURCE, jwks={"keys": [jwk]}), RESOURCE, (issuer,))
    claims = {"iss": issuer, "sub": "bench", "aud": RESOURCE, "exp": time.time() + 86400, "scope": "mcp"}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
    return f"Authorization: Bearer {token}\r\n".encode()


async def bare_asgi(scope: dict[str, Any], receive: Callable[[], Any], send: Callable[[Any], Any]) -> None:
    """The least an ASGI app answering a call does: read the body, send a fixed result."""
    while (await receive()).get("more_body"):
        pass
    body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def under_uvicorn(server: Any, bare: bool) -> asyncio.Protocol:
    """uvicorn's h11 protocol object serving `mcpcore.asgi.app(server)`, or the bare app."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.server import ServerState

    from mcpcore import asgi

    app = bare_asgi if bare else asgi.app(server)
    config = uvicorn.Config(app, lifespan="off", http="h11", log_level="warning", access_log=False)
    config.load()
    return H11Protocol(config, ServerState(), app_state={})


async def drive(transport: str, flavour: str, count: int, batch: int) -> None:
    """Serve `count` requests through the transport's protocol object, `batch` per chunk of input
    (the next chunk once every answer to this one is written)."""
    os.environ["MCPCORE_BENCH_ASYNC"] = "0" if flavour == "sync" else "1"  # "ceiling": no mcpcore at all
    sys.path.insert(0, str(HERE / "servers"))
    from ceiling_http import Ceiling  # type: ignore[import-not-found]
    from mcpcore_bench import server  # type: ignore[import-not-found]

    extra = b""
    if flavour == "middleware":
        server.middleware = (passing,)
    elif flavour.startswith("idempotent"):
        server.add_tool(server.tools.get("echo").info.fn, idempotent=True, replace=True)
        if flavour == "idempotent-first":  # a clock that jumps past the window between calls: every call runs anew
            import itertools

            from mcpcore._runtime.idempotency import LocalOnceStore

            server.idempotency.store = LocalOnceStore(clock=itertools.count(0, 10_000).__next__)
    elif flavour.startswith("jwt"):
        from mcpcore.transports._http import exchange

        # A connection reuses its verdict for VERDICT_SECONDS of wall clock, which a run under valgrind
        # spans a varying number of times: fix the regime instead, reused for ever or never.
        exchange.VERDICT_SECONDS = -1.0 if flavour == "jwt-verify" else math.inf
        extra = authorized(server)
    elif flavour.startswith("long"):
        listing = "".join(f"{n}\tfile-{n}.txt\n" for n in range(600))[:8000]

        async def long() -> str:
            return listing

        server.add_tool(long, result_budget=4096 if flavour == "long-budget" else None)
    if flavour == "budget":
        server.set_result_budget(4096)

    loop = asyncio.get_running_loop()
    owed = [0]  # answers to the current chunk not yet written
    written: list[bytes] = []
    chunks = iter(range(0, count, batch))
    finished = loop.create_future()

    def sink(data: bytes) -> None:
        written.append(data)
        before = owed[0]
        owed[0] -= data.count(b'"jsonrpc"')  # one per answer (uvicorn writes the head apart)
        if before > 0 >= owed[0]:
            loop.call_soon(next_chunk)

    def next_chunk() -> None:
        """Check the last chunk's answers, then feed the next from a callback of the loop, outside any
        task, as a pipe or socket transport hands over what it read (a call started eagerly runs then)."""
        if owed[0] < 0 or (written and written_answers(b"".join(written)) != batch):
            raise SystemExit(f"instructions: the answer was not {batch} result(s): {b''.join(written)[:300]!r}")
        written.clear()
        if next(chunks, None) is None:
            finished.set_result(None)
            return
        owed[0] = batch
        feed(chunk)

    body = request_body(flavour)
    if transport in ("http", "ceiling", "bound", "asgi"):
        from mcpcore.transports.http import HttpConfig, HttpServer, _Connection

        method = b"tools/list" if flavour == "list" else b"tools/call"
        name = b"" if flavour == "list" else b"Mcp-Name: long\r\n" if flavour.startswith("long") else b"Mcp-Name: echo\r\n"
        version = b"2025-11-25" if flavour in ("session", "stateless") else b"2026-07-28"
        head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: " + version + b"\r\n")
        chunk = (head + b"Mcp-Method: " + method + b"\r\n" + name + extra + b"Content-Length: " + str(len(body)).encode()
                 + b"\r\n\r\n" + body)
        if transport == "asgi":
            connection = under_uvicorn(server, bare=flavour == "ceiling")
        else:
            config = HttpConfig(port=8000, stateless=flavour == "stateless")
            if transport == "http":
                connection = _Connection(HttpServer(server, config))
            else:
                from bound_http import Bound  # type: ignore[import-not-found]

                connection = Ceiling() if transport == "ceiling" else Bound()
        connection.connection_made(FakeTransport(sink))
        feed = connection.data_received
        if flavour == "session":
            chunk = chunk.replace(head, head + await opened_session(feed, written), 1)
    else:
        chunk = b"".join(request_body(flavour, request_id) + b"\n" for request_id in range(1, batch + 1))
        if transport == "stdio":
            from mcpcore.transports.stdio import StdioSession

            session = StdioSession(server, -1, -1)
            session._output = FakeTransport(sink)  # type: ignore[assignment]
            feed = session.feed
        else:
            from bound_stdio import Bound  # type: ignore[import-not-found]
            from ceiling_stdio import Echo  # type: ignore[import-not-found]
            from floor_stdio import Floor  # type: ignore[import-not-found]

            protocol = {"stdio-ceiling": Echo, "stdio-floor": Floor, "stdio-bound": Bound}[transport]
            feed = protocol(FakeTransport(sink), loop.create_future()).data_received
    written.clear()
    owed[0] = 0  # what opening a session wrote is not this batch's
    loop.call_soon(next_chunk)
    await finished


def written_answers(answer: bytes) -> int:
    """How many results the answer holds (-1 if a tool answered with an error)."""
    return -1 if b'"isError":true' in answer else answer.count(b'"result":')


async def opened_session(feed: Callable[[bytes], None], written: list[bytes]) -> bytes:
    """Open a 2025-11-25 session on the connection `feed` writes to (initialize, then
    notifications/initialized); its `Mcp-Session-Id` header line."""

    async def post(message: dict[str, Any], session: bytes = b"") -> bytes:
        body = json.dumps(message, separators=(",", ":")).encode()
        feed(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
             b"Accept: application/json, text/event-stream\r\n" + session
             + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        for _ in range(100):  # the answer is written within a few turns of the loop
            await asyncio.sleep(0)
            answer = b"".join(written)
            if answer.startswith(b"HTTP/1.1 ") and b"\r\n\r\n" in answer and (b'"id"' in answer or b" 202 " in answer):
                break
        written.clear()
        return answer

    opened = await post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    found = re.search(rb"(?im)^mcp-session-id: *([^\r\n]+)", opened)
    if found is None:
        raise SystemExit(f"instructions: initialize opened no session: {opened[:300]!r}")
    session = b"Mcp-Session-Id: " + found.group(1) + b"\r\n"
    accepted = await post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    if not accepted.startswith(b"HTTP/1.1 202"):
        raise SystemExit(f"instructions: notifications/initialized was not accepted: {accepted[:300]!r}")
    return session


def runnable(python: str) -> list[str]:
    """Every path, less the JWT ones where PyJWT (the `[jwt]` extra) is not installed and the ASGI
    ones where uvicorn is not."""

    def has(modules: str) -> bool:
        return subprocess.run([python, "-c", f"import {modules}"], capture_output=True).returncode == 0

    has_jwt, has_uvicorn = has("jwt, cryptography"), has("uvicorn")
    return [path for path, (transport, flavour, _) in PATHS.items()
            if (has_jwt or not flavour.startswith("jwt")) and (has_uvicorn or transport != "asgi")]


def callgrind_total(arguments: list[str], what: str) -> int:
    """Instructions callgrind counts for one whole run of `arguments` (a Python command line)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *arguments]
    # One hash seed for every run: with random ones, dict and set layouts (hence probe counts) vary
    # from run to run and move a path's figure by up to 3%; with one, a build's figure repeats exactly.
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent, env={**os.environ, "PYTHONHASHSEED": "0"})
    match = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"{Path(arguments[1]).stem}: {what} failed under valgrind:\n{done.stderr[-2000:]}")
    return int(match.group(1))


def collected(path: str, count: int, python: str) -> int:
    """Instructions callgrind counts for one whole run of `path` with `count` requests."""
    return callgrind_total([python, str(Path(__file__).resolve()), "--inner", path, str(count)], path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paths", help="comma-separated (default: every path the interpreter can run)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--baseline", type=Path, help="a previous --json output to compare with")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--inner", nargs=2, metavar=("PATH", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--make-key", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_key:
        make_key(args.make_key)
        return
    if args.inner:
        transport, flavour, batch = PATHS[args.inner[0]]
        asyncio.run(drive(transport, flavour, int(args.inner[1]), batch))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions: valgrind is not installed (apt-get install -y valgrind)")
    paths = args.paths.split(",") if args.paths else runnable(args.python)
    figures: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        if any(PATHS[path][1].startswith("jwt") for path in paths):
            os.environ[KEY_FILE] = str(Path(folder) / "key.pem")
            subprocess.run([args.python, str(Path(__file__).resolve()), "--make-key", os.environ[KEY_FILE]], check=True)
        for path in paths:
            low, high = collected(path, args.warm, args.python), collected(path, args.warm + args.calls, args.python)
            figures[path] = round((high - low) / args.calls)
            print(f"{path:20} {figures[path]:>10,} instructions per request", flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.baseline:
        regressions = regressed(figures, json.loads(args.baseline.read_text()), args.tolerance)
        for line in regressions:
            print(f"instructions: {line}", file=sys.stderr)
        if regressions:
            raise SystemExit(1)


def regressed(now: dict[str, int], then: dict[str, int], tolerance: float) -> list[str]:
    """The paths that cost more than `tolerance` over the baseline `then`: as a ratio to their
    reference where both runs measured it, else in instructions. The references themselves
    (no mcpcore in them) only measure the interpreter."""
    found = []
    for path, count in now.items():
        if path not in then or path in REFERENCES.values():
            continue
        reference = REFERENCES.get(path)
        if reference in now and reference in then:
            ratio, was = count / now[reference], then[path] / then[reference]
            if ratio > was * (1 + tolerance):
                found.append(f"{path} costs {ratio:.3f}x {reference}, over {was:.3f}x (+{ratio / was - 1:.1%})")
        elif count > then[path] * (1 + tolerance):
            found.append(f"{path} costs {count:,} per request, over {then[path]:,} (+{count / then[path] - 1:.1%})")
    return found


if __name__ == "__main__":
    main()
