"""The `mcpcore` console script: `mcpcore run TARGET [--transport ...]`, and for the inner loop
`mcpcore inspect TARGET`, `mcpcore call TARGET TOOL key=value...`, `read TARGET URI`, `prompt TARGET NAME`.

TARGET is `path/to/file.py[:attr]` or `package.module[:attr]`; without an
attribute the first of `server`, `mcp`, `app` (or the only `Server` in the
module) is used. A callable attribute is called to build the server.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NoReturn, Sequence
from urllib.parse import urlsplit

from .. import __version__
from .._runtime import defaults as d
from .._runtime.lifespan import StartupError
from .._runtime.results import parse_budget
from .._serving.server import Server
from ..logs import DEFAULT_LEVEL, FORMATS, LEVELS
from .clientconfig import CLIENTS
from .failures import cannot_listen, in_user_code
from ..gateway import DEFAULT_CONNECT_TIMEOUT, DEFAULT_HOLD, DEFAULT_TIMEOUT
from .limits import add_options as add_limit_options, install as install_limits, limits_from
from .proxy import HEADERS_VARIABLE, TRANSPORTS as UPSTREAM_TRANSPORTS, RemoteUpstream, is_url, upstream_headers
from .runner import TRANSPORTS, run, run_workers, shape

DEFAULT_ATTRIBUTES = ("server", "mcp", "app")


class TargetError(Exception):
    """A TARGET that does not name a server; the message says what was tried."""


def _split(target: str) -> tuple[str, str | None]:
    location, sep, attr = target.rpartition(":")
    if sep and attr.isidentifier() and location:
        return location, attr
    return target, None


def _is_file(location: str) -> bool:
    """Whether a TARGET's location names a file (else an importable module)."""
    return location.endswith(".py") or os.sep in location or "/" in location


def absolute_target(target: str) -> tuple[str, bool]:
    """TARGET with its file made absolute (it runs from anywhere then), and whether it names a file."""
    location, attr = _split(target)
    if not _is_file(location):
        return target, False
    return os.path.abspath(location) + (f":{attr}" if attr else ""), True


def _import(location: str) -> ModuleType:
    if _is_file(location):
        path = os.path.abspath(location)
        if not os.path.isfile(path):
            raise TargetError(f"no file {path}")
        name = os.path.splitext(os.path.basename(path))[0]
        if name in sys.modules or name in sys.stdlib_module_names:  # e.g. http.py must not replace `http`
            name = f"_mcpcore_target_{name}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot import {path} as Python")
        module = importlib.util.module_from_spec(spec)
        # Its folder goes last, so its neighbours import but never shadow the standard library.
        sys.path.append(os.path.dirname(path))
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # `pkg.module` from the project folder, as `python -m` finds it
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as error:
        if error.name and location.startswith(error.name):
            raise TargetError(f"no file {location!r} and no importable module {location!r}") from None
        raise


def load_target(target: str) -> Server:
    """The `Server` a TARGET names (raises `TargetError` saying what was tried)."""
    location, attr = _split(target)
    module = _import(location)
    names = (attr,) if attr else DEFAULT_ATTRIBUTES
    for name in names:
        found: Any = getattr(module, name, None)
        if found is None:
            continue
        if not isinstance(found, Server) and callable(found):
            found = found()
        if isinstance(found, Server):
            return found
        raise TargetError(f"{location}:{name} is a {type(found).__name__}, not an mcpcore Server")
    if attr is None:
        servers = {key: v for key, v in vars(module).items() if isinstance(v, Server)}
        if len(servers) == 1:
            return next(iter(servers.values()))
        if len(servers) > 1:
            named = ", ".join(sorted(servers))
            raise TargetError(f"{location} holds {len(servers)} Servers ({named}); name one, e.g. {location}:{min(servers)}")
    raise TargetError(f"{location} has no attribute {' / '.join(names)} holding an mcpcore Server")


def _serving_options(parser: argparse.ArgumentParser) -> None:
    """The options of `run` that say how a server is served (`proxy` takes them too)."""
    parser.add_argument("--transport", choices=TRANSPORTS, help="stdio (the default) or http")
    parser.add_argument("--log-level", choices=LEVELS,
                        help=f"least severe diagnostics written to stderr ({DEFAULT_LEVEL})")
    parser.add_argument("--log-format", choices=FORMATS,
                        help="stderr diagnostics as 'mcpcore: message' lines (text) or one JSON object per line (json)")
    parser.add_argument("--max-in-flight", type=int, help="concurrent calls before reading pauses "
                        f"(stdio {d.STDIO_MAX_IN_FLIGHT}, http {d.HTTP_MAX_IN_FLIGHT})")
    parser.add_argument("--grace-period", type=float, help="seconds in-flight calls get to finish at shutdown "
                        f"(stdio {d.STDIO_GRACE_PERIOD:g}, http {d.HTTP_GRACE_PERIOD:g})")
    parser.add_argument("--redis", dest="redis_url", metavar="URL", help="share subscriptions' changes, tasks and "
                        "2025-era sessions with the other processes using this Redis, e.g. redis://127.0.0.1:6379/0 "
                        "(needs mcpcore[redis])")
    parser.add_argument("--result-budget", type=parse_budget, metavar="SIZE", help="the most a tool result may take: "
                        "bytes of JSON content (100000) or estimated tokens (25000tokens, 4 bytes each); more is cut "
                        "and the rest linked, readable by the same caller (a tool's result_budget= overrides it)")
    add_limit_options(parser)
    stdio = parser.add_argument_group("stdio")
    stdio.add_argument("--max-line-bytes", type=int, help=f"largest accepted message line ({d.STDIO_MAX_LINE_BYTES // d.MIB} MiB)")
    http = parser.add_argument_group("http")
    http.add_argument("--host", help=f"address to bind ({d.HTTP_HOST})")
    http.add_argument("--port", type=int, help=f"port to bind ({d.HTTP_PORT}; 0 picks a free one)")
    http.add_argument("--path", help=f"the MCP endpoint path ({d.HTTP_PATH})")
    http.add_argument("--allow-origin", dest="allowed_origins", action="append", metavar="ORIGIN",
                      help="an extra allowed Origin, e.g. https://app.example (repeatable)")
    http.add_argument("--allow-host", dest="allowed_hosts", action="append", metavar="HOST",
                      help="an extra allowed Host name (repeatable)")
    http.add_argument("--cors-origin", dest="cors_origins", action="append", metavar="ORIGIN",
                      help="a web page origin that may call from a browser (CORS), e.g. https://app.example; "
                           "also an allowed Origin (repeatable)")
    http.add_argument("--max-body-bytes", type=int, help=f"largest accepted request body ({d.HTTP_MAX_BODY_BYTES // d.MIB} MiB)")
    http.add_argument("--max-connections", type=int, help=f"open connections before new ones get 503 ({d.HTTP_MAX_CONNECTIONS})")
    http.add_argument("--max-sessions", type=int, help=f"live 2025-era sessions before initialize is refused "
                      f"({d.HTTP_MAX_SESSIONS}, per process)")
    http.add_argument("--max-sessions-per-principal", type=int, help="live 2025-era sessions one authenticated "
                      f"principal may hold (1/{d.HTTP_SESSION_SHARE} of --max-sessions; with --redis, across processes)")
    http.add_argument("--session-idle-timeout", type=float, help="seconds a 2025-era session lives without "
                      f"a request ({d.HTTP_SESSION_IDLE_TIMEOUT:g})")
    http.add_argument("--stateless", action="store_true", default=None,
                      help="serve 2025-era clients without sessions: each POST stands on its own, for many processes "
                           "behind a plain load balancer (the default with --workers unless --redis)")
    http.add_argument("--json-response", action="store_true", default=None,
                      help="never answer with an SSE stream, for clients and proxies that cannot take one: a call's "
                           "notifications are dropped (and counted), and what needs a stream is refused")
    http.add_argument("--sse-path", metavar="PATH", help="where a client of the deprecated HTTP+SSE transport "
                      f"(protocol 2024-11-05) opens its stream ({d.HTTP_SSE_PATH}; '' serves no HTTP+SSE)")
    http.add_argument("--sse-message-path", metavar="PATH", help="where such a client POSTs its messages "
                      f"({d.HTTP_SSE_MESSAGE_PATH})")
    http.add_argument("--workers", type=int, help="worker processes sharing the port (1)")
    http.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # set by the worker supervisor


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The console script's parser, and its `run` subcommand's (whose options settings may give)."""
    parser = argparse.ArgumentParser(prog="mcpcore", description="Run Model Context Protocol servers.", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"mcpcore {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    runner = commands.add_parser("run", help="serve a server defined in a file or module", allow_abbrev=False,
                                 epilog="Options may also come from MCPCORE_<OPTION> variables and mcpcore.toml or "
                                        "[tool.mcpcore] in pyproject.toml (see docs/running.md).")
    runner.add_argument("target", nargs="?", help="path/to/file.py[:attr] or package.module[:attr]")
    _serving_options(runner)
    proxy = commands.add_parser("proxy", help="serve another MCP server's tools, resources and prompts as mcpcore's own: "
                                "mcpcore proxy [options] -- CMD ARGS... (a stdio server) or mcpcore proxy [options] URL",
                                allow_abbrev=False, epilog="Options as for run (settings included); see docs/gateway.md.")
    proxy.add_argument("url", nargs="?", metavar="URL", help="a remote server's Streamable HTTP (or HTTP+SSE) URL")
    proxy.add_argument("--upstream-timeout", type=float, default=DEFAULT_TIMEOUT,
                       help=f"seconds a request forwarded to the upstream may take ({DEFAULT_TIMEOUT:g})")
    proxy.add_argument("--upstream-connect-timeout", type=float, metavar="SECONDS",
                       help="seconds to start (or reach) the upstream and read its lists, at start and at each "
                            f"restart ({DEFAULT_CONNECT_TIMEOUT:g}; also upstream_connect_timeout in settings)")
    proxy.add_argument("--upstream-transport", choices=UPSTREAM_TRANSPORTS, default="auto",
                       help="how URL is reached: auto (Streamable HTTP, or HTTP+SSE where a POST gets 404 or 405), "
                            "streamable-http or sse")
    proxy.add_argument("--upstream-header", action="append", default=[], metavar="'NAME: VALUE'",
                       help=f"a header sent with every request to URL (repeatable; also {HEADERS_VARIABLE}, "
                            "one per line, which keeps a secret out of the command line)")
    proxy.add_argument("--upstream-hold", type=float, default=DEFAULT_HOLD,
                       help="seconds a 2025-era upstream's call that asked for input waits for the client's retry "
                            f"({DEFAULT_HOLD:g})")
    _serving_options(proxy)
    inspect = commands.add_parser("inspect", help="list a server's tools (with schemas), resources and prompts")
    inspect.add_argument("target", help="path/to/file.py[:attr] or package.module[:attr]")
    inspect.add_argument("--json", action="store_true", help="print everything as JSON")
    call = commands.add_parser("call", help="call one tool in this process and print its answer")
    call.add_argument("target")
    call.add_argument("tool")
    # default=[]: argparse otherwise lists an absent `*` positional among the required ones
    call.add_argument("arguments", nargs="*", default=[], metavar="key=value", help="a value that parses as JSON is JSON")
    read = commands.add_parser("read", help="read one resource in this process")
    read.add_argument("target")
    read.add_argument("uri")
    prompt = commands.add_parser("prompt", help="get one prompt in this process")
    prompt.add_argument("target")
    prompt.add_argument("name")
    prompt.add_argument("arguments", nargs="*", default=[], metavar="key=value")
    for inner in (inspect, call, read, prompt):
        inner.add_argument("--log-level", choices=LEVELS, default="warning",
                           help="least severe diagnostics written to stderr (warning); debug adds tracebacks")
    dev = commands.add_parser("dev", help="run, restarting when a source file changes (options as for run)")
    dev.add_argument("target")
    dev.add_argument("run_options", nargs=argparse.REMAINDER, help="any `mcpcore run` options")
    config = commands.add_parser("config", help="print (or --write) the client configuration that launches it")
    config.add_argument("target")
    config.add_argument("--client", choices=CLIENTS, required=True)
    config.add_argument("--name", help="the server's name in the client (its own name)")
    config.add_argument("--write", action="store_true", help="merge it into the client's configuration file")
    return parser, runner


_STDIO_OPTIONS = ("max_in_flight", "max_line_bytes", "grace_period")
_HTTP_ONLY = ("host", "port", "path", "allowed_origins", "allowed_hosts", "cors_origins", "max_body_bytes",
              "max_connections", "max_sessions", "max_sessions_per_principal", "session_idle_timeout", "stateless",
              "json_response", "sse_path", "sse_message_path")
_HTTP_OPTIONS = ("max_in_flight", "grace_period", "host", "port", "path", "allowed_origins", "allowed_hosts",
                 "cors_origins", "max_body_bytes", "max_connections", "max_sessions", "max_sessions_per_principal",
                 "session_idle_timeout", "stateless", "json_response", "sse_path", "sse_message_path", "listen_fd")


def _without_option(argv: list[str], option: str) -> list[str]:
    """`argv` without `option VALUE` and `option=VALUE`."""
    kept: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg == option:
            skip_value = True
        elif not arg.startswith(option + "="):
            kept.append(arg)
    return kept


RUN_DEFAULTS = {"transport": "stdio", "log_level": DEFAULT_LEVEL, "log_format": "text", "workers": 1}
# proxy options settings may give too (dest → its parser and default); a `run` reading the same file ignores them
PROXY_SETTINGS: dict[str, tuple[Callable[[str], Any], Any]] = {"upstream_connect_timeout": (float, DEFAULT_CONNECT_TIMEOUT)}


def _chosen(kind: Callable[[str], Any], choices: Any) -> Callable[[str], Any]:
    """An option's parser that also refuses a value outside its choices (as the command line does)."""
    if choices is None:
        return kind

    def parse(text: str) -> Any:
        value = kind(text)
        if value not in choices:
            raise ValueError(f"choose from {', '.join(map(str, choices))}")
        return value

    return parse


def _settle(runner: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fill the `run` options the command line left out from the environment and the settings file, then
    the defaults (mcpcore/_cli/settings.py); a bad setting exits with its source named."""
    from .settings import SettingsError, flag, load

    actions = {a.dest: a for a in runner._actions if a.dest not in ("help", "listen_fd")}
    kinds = {dest: flag if action.const is True else _chosen(action.type or str, action.choices)
             for dest, action in actions.items()}
    kinds.update({dest: kind for dest, (kind, _) in PROXY_SETTINGS.items()})
    try:
        found = load(kinds)  # a bad value is refused naming its file and key, or its MCPCORE_* variable
    except SettingsError as error:
        sys.exit(f"mcpcore: {error}")
    for dest in actions:
        if getattr(args, dest) is None:
            setattr(args, dest, found.get(dest, RUN_DEFAULTS.get(dest)))
    if getattr(args, "command", None) == "proxy":  # `dev` settles its children's options, which name no command
        for dest, (_, default) in PROXY_SETTINGS.items():
            if getattr(args, dest) is None:
                setattr(args, dest, found.get(dest, default))
    if args.listen_fd is not None:
        args.workers = 1  # a worker serves; only its supervisor (which read the same settings) starts workers
    if args.target is None and args.command == "run":
        sys.exit("mcpcore: run needs a TARGET (or `target` in mcpcore.toml, or MCPCORE_TARGET)")


def _share_state(server: Server, url: str) -> Any:
    """`--redis URL`: the server's bus and task store on Redis (the `redis` package is an extra)."""
    try:
        from ..redisstate import RedisState, require_configured_keys
    except ImportError:
        sys.exit("mcpcore: --redis needs the redis package: pip install 'mcpcore[redis]'")
    try:
        require_configured_keys(server)  # here, before a supervisor gives its workers a key of its own
    except ValueError as error:
        sys.exit(f"mcpcore: {error}")
    state = RedisState(url)
    server.use_store(state)
    return state


def _inner_loop(server: Server, args: argparse.Namespace) -> int:
    from . import commands  # loaded only for these commands

    logging.basicConfig(level=args.log_level.upper(), format="mcpcore: %(message)s")
    try:
        if args.command == "inspect":
            return commands.inspect(server, args.json)
        if args.command == "call":
            return commands.call(server, args.tool, args.arguments)
        if args.command == "read":
            return commands.read(server, args.uri)
        return commands.prompt(server, args.name, args.arguments)
    except ValueError as error:
        print(f"mcpcore: {error}", file=sys.stderr)
        return 2


def _printing(command: Callable[[], int]) -> int:
    """`command()`'s status, for a command that prints its answer: a reader of stdout that left
    (`mcpcore inspect app.py | head -1`) ends it with status 1 and no traceback, as other tools do."""
    try:
        status = command()
        sys.stdout.flush()  # what is still buffered is written here, so a reader that left is found here, not at exit
        return status
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing buffered can fail again at exit
        return 1


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, runner = _parser()
    upstream: list[str] = []
    if argv[:1] == ["proxy"] and "--" in argv:  # the upstream's own arguments are never mcpcore's options
        cut = argv.index("--")
        argv, upstream = argv[:cut], argv[cut + 1:]
    args = parser.parse_args(argv)
    if args.command == "proxy":
        _check_upstream(args, upstream)
        args.upstream, args.target = upstream, None
    if args.command in ("run", "proxy"):
        _settle(runner, args)
    try:
        _command(args, argv, runner)
    except KeyboardInterrupt as interrupt:  # before serving, or in an inner-loop command: no traceback
        _fail(args, "interrupted", interrupt, status=130)


def _fail(args: argparse.Namespace, said: str, error: BaseException, status: int = 1) -> NoReturn:
    """Exit with `mcpcore: said` on stderr; the traceback first only at --log-level debug."""
    if getattr(args, "log_level", None) == "debug":
        traceback.print_exception(type(error), error, error.__traceback__)
    print(f"mcpcore: {said}", file=sys.stderr)
    sys.exit(status)


def _load(args: argparse.Namespace) -> Server:
    """The TARGET's server; an error raised by the user's own code is said with its place in that code."""
    try:
        return load_target(args.target)
    except TargetError as error:
        _fail(args, f"cannot load {args.target!r}: {error}", error)
    except Exception as error:
        _fail(args, f"cannot load {args.target!r}: {in_user_code(error)}", error)


def _check_upstream(args: argparse.Namespace, command: list[str]) -> None:
    """Exactly one upstream: a URL, or a command after `--`; the URL's own options only with a URL."""
    if args.url is not None and command:
        sys.exit("mcpcore: proxy takes one upstream: a URL or a command after --, not both")
    if args.url is None and not command:
        sys.exit("mcpcore: proxy needs an upstream: its URL (mcpcore proxy http://127.0.0.1:8000/mcp) "
                 "or its command after -- (mcpcore proxy -- python server.py)")
    if args.url is not None and not is_url(args.url):
        sys.exit(f"mcpcore: proxy takes an http:// or https:// URL, not {args.url!r} "
                 f"(a command goes after --: mcpcore proxy -- {args.url})")
    if command and (args.upstream_header or args.upstream_transport != "auto"):
        sys.exit("mcpcore: --upstream-header and --upstream-transport need an upstream URL")


def _gateway(args: argparse.Namespace) -> Server:
    """`mcpcore proxy`: a server whose tools, resources and prompts are the upstream's (mcpcore.gateway): a stdio
    server it starts, or a remote one (mcpcore/_cli/proxy.py)."""
    from ..client import Client
    from ..gateway import Gateway

    try:
        if args.url is not None:
            connect: Any = RemoteUpstream(args.url, upstream_headers(args.upstream_header), args.upstream_transport)
            name = f"proxy:{urlsplit(args.url).netloc}"
        else:
            connect, name = (lambda: Client.stdio(args.upstream)), f"proxy:{os.path.basename(args.upstream[0])}"
        return Gateway(connect, name=name, timeout=args.upstream_timeout, connect_timeout=args.upstream_connect_timeout,
                       hold=args.upstream_hold).server
    except ValueError as error:
        sys.exit(f"mcpcore: {error}")


def _command(args: argparse.Namespace, argv: list[str], runner: argparse.ArgumentParser) -> None:
    if args.command == "dev":  # the children load the target, each after a change
        from .reload import run as dev

        watched = runner.parse_args([args.target, *args.run_options])
        _settle(runner, watched)  # the transport as the child will see it, settings included
        target, is_file = absolute_target(args.target)
        folder = Path(_split(target)[0]).parent if is_file else Path.cwd()
        sys.exit(dev(folder, [args.target, *args.run_options], stdio=watched.transport == "stdio"))
    server = _gateway(args) if args.command == "proxy" else _load(args)
    if args.command == "config":
        from .clientconfig import configure

        sys.exit(_printing(lambda: configure(*absolute_target(args.target), args.name or server.name, args.client,
                                             args.write)))
    if args.command not in ("run", "proxy"):
        sys.exit(_printing(lambda: _inner_loop(server, args)))
    if args.command == "proxy" and args.workers > 1:
        sys.exit("mcpcore: proxy serves one upstream process: --workers is not supported")
    if args.transport != "http":
        flags = {action.dest: action.option_strings[0] for action in runner._actions if action.option_strings}
        given = [flags[name] for name in _HTTP_ONLY if getattr(args, name) not in (None, False)]
        if args.workers > 1:
            given.append("--workers")
        if given:
            sys.exit(f"mcpcore: {', '.join(given)} needs --transport http")
    state = _share_state(server, args.redis_url) if args.redis_url else None
    if args.result_budget is not None:
        server.set_result_budget(args.result_budget)
    try:
        limits = limits_from(args)
    except ValueError as error:
        sys.exit(f"mcpcore: {error}")
    if limits:
        install_limits(server, limits, state)
    if args.workers > 1 and server.offers_tasks and server.tasks.per_process:
        sys.exit("mcpcore: --workers needs a task store the workers share: this server's task tools keep "
                 "tasks in one process's memory, so a task made by one worker would be unknown to the others "
                 "(run one process, or set server.tasks.configure(store=...) to a shared TaskStore)")
    host, path = args.host or d.HTTP_HOST, args.path or d.HTTP_PATH
    port = d.HTTP_PORT if args.port is None else args.port  # 0: any free port
    if args.workers > 1:
        worker_args = _without_option(argv, "--workers")
        if not args.redis_url:
            # Without a shared store a 2025-era session would live in one process, and the kernel spreads
            # connections over all of them: workers serve 2025-era clients stateless.
            worker_args.append("--stateless")
        try:
            served = shape(not args.redis_url or bool(args.stateless), bool(args.json_response),
                           d.HTTP_SSE_PATH if args.sse_path is None else args.sse_path, bool(args.redis_url))
            sys.exit(run_workers(worker_args, host, port, args.workers, path, args.log_level, tuple(args.allowed_hosts or ()),
                                 args.log_format, shared=bool(args.redis_url), served=served))
        except ValueError as error:
            sys.exit(f"mcpcore: {error}")
        except OSError as error:
            _cannot_listen(args, error, host, port)
    names = _HTTP_OPTIONS if args.transport == "http" else _STDIO_OPTIONS
    options = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    for name in ("allowed_origins", "allowed_hosts", "cors_origins"):
        if name in options:
            options[name] = tuple(options[name])
    try:
        run(server, args.transport, log_level=args.log_level, log_format=args.log_format, **options)
    except ValueError as error:  # a configuration the transport refuses, said in one line
        sys.exit(f"mcpcore: {error}")
    except StartupError as error:  # the app's own start-up failed: its traceback, then one line
        logging.getLogger("mcpcore").error("start-up failed", exc_info=error.__cause__)
        sys.exit(f"mcpcore: {error}")
    except Exception as error:  # the listening socket refused, inside the task groups that started it
        _cannot_listen(args, error, host, port)


def _cannot_listen(args: argparse.Namespace, error: Exception, host: str, port: int) -> NoReturn:
    """A refused bind said in one line with its fix; any other error raised again as it is."""
    said = cannot_listen(error, host, port)
    if said is None:
        raise error
    _fail(args, said, error)
