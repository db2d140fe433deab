"""Failures a user causes, as the console script says them: one or two lines naming the cause and the
fix, a non-zero exit, and the traceback only at --log-level debug. Real subprocesses, real sockets,
real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from conftest import ROOT

ECHO = str(ROOT / "examples" / "echo_server.py")
MCPCORE = [sys.executable, "-m", "mcpcore"]


def mcpcore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCPCORE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)


def write(path: Path, source: str) -> str:
    path.write_text(textwrap.dedent(source))
    return str(path)


@pytest.fixture
def taken_port() -> int:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("workers", [[], pytest.param(["--workers", "2"], marks=pytest.mark.skipif(
    os.environ.get("MCPCORE_PORTABLE") == "1", reason="the portable paths refuse --workers"))])
def test_a_port_in_use_is_one_line_with_the_fix(taken_port: int, workers: list[str]) -> None:
    failed = mcpcore("run", ECHO, "--transport", "http", "--port", str(taken_port), *workers)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == f"mcpcore: cannot listen on 127.0.0.1:{taken_port}: address already in use (try --port 0)"
    assert "Traceback" not in failed.stderr and len(failed.stderr.splitlines()) <= 2  # with --workers, the state note first


def test_debug_shows_the_traceback_before_the_line(taken_port: int) -> None:
    failed = mcpcore("run", ECHO, "--transport", "http", "--port", str(taken_port), "--log-level", "debug")
    assert failed.returncode == 1 and "Traceback" in failed.stderr and "Errno" in failed.stderr
    assert failed.stderr.splitlines()[-1].endswith("address already in use (try --port 0)")


@pytest.mark.parametrize("command", ["inspect", "run"])
def test_an_error_in_the_users_file_names_their_own_line(tmp_path: Path, command: str) -> None:
    target = write(tmp_path / "broken.py", """\
        from mcpcore import Server

        server = Server("broken")


        def settings():
            return undefined_setting


        settings()
    """)
    failed = mcpcore(command, target)
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        f"mcpcore: cannot load {target!r}: NameError: name 'undefined_setting' is not defined",
        f"  at {target}:7 in settings: return undefined_setting",
    ]
    shown = mcpcore(command, target, "--log-level", "debug")
    assert "Traceback" in shown.stderr and shown.stderr.splitlines()[-1].startswith("  at ")


def test_a_registration_error_names_the_decorated_line(tmp_path: Path) -> None:
    target = write(tmp_path / "schema.py", """\
        from mcpcore import Server

        server = Server("schema")


        class Opaque:
            pass


        @server.tool
        def use(thing: Opaque) -> str:
            return "used"
    """)
    failed = mcpcore("inspect", target)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    first, where = failed.stderr.splitlines()
    assert first.startswith(f"mcpcore: cannot load {target!r}: TypeError: use(): parameter 'thing'")
    # Python 3.11 names the decorator's line; 3.10 the decorated function's
    assert where == (f"  at {target}:10 in <module>: @server.tool" if sys.version_info >= (3, 11)
                     else f"  at {target}:11 in <module>: def use(thing: Opaque) -> str:")


def test_a_missing_import_and_a_syntax_error_name_their_line(tmp_path: Path) -> None:
    missing = write(tmp_path / "missing.py", "from mcpcore import Server\nimport not_installed_anywhere_xyz\n")
    failed = mcpcore("call", missing, "tool")
    assert failed.stderr.splitlines() == [
        f"mcpcore: cannot load {missing!r}: ModuleNotFoundError: No module named 'not_installed_anywhere_xyz'",
        f"  at {missing}:2 in <module>: import not_installed_anywhere_xyz",
    ]
    typo = write(tmp_path / "typo.py", "from mcpcore import Server\nserver = Server('typo'\n")
    failed = mcpcore("inspect", typo)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.splitlines()[1] == f"  at {typo}:2: server = Server('typo'"


SLOW = """\
    import os
    import signal
    import sys
    import threading
    import time

    import anyio

    from mcpcore import Context, Server

    server = Server("slow")


    @server.tool
    async def wait(ctx: Context) -> str:
        await ctx.progress(1, 2, "waiting")
        await anyio.sleep(600)
        return "done"


    @server.tool
    def block() -> str:
        print("blocking", file=sys.stderr, flush=True)
        time.sleep(600)
        return "done"


    @server.tool
    def aimed() -> str:  # the kernel may hand a process's SIGINT to any thread: here, the worker's own
        print("aiming", file=sys.stderr, flush=True)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        time.sleep(600)
        return "done"


    if os.environ.get("SLOW_IMPORT"):
        print("importing", file=sys.stderr, flush=True)
        time.sleep(600)
"""


async def _interrupted(command: list[str], marker: str, env: dict[str, str] | None = None,
                       send: bool = True) -> tuple[int, str]:
    """Run `command` until `marker` shows on stderr, send SIGINT (unless it sends its own), and return its
    exit status and stderr. A child still running after 30 s is sent SIGABRT, so the failure shows where
    each of its threads was."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}
    # A test run started in the background by a shell ignores SIGINT, and its children would inherit that:
    # they start with it handled here, so they get the default disposition a terminal's program has.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = await anyio.open_process(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGINT, previous)
    seen = b""
    try:
        assert process.stderr is not None
        with anyio.move_on_after(30) as waited:
            while marker.encode() not in seen:
                seen += await process.stderr.receive()
            if send:
                process.send_signal(signal.SIGINT)
            async for chunk in process.stderr:
                seen += chunk
        if waited.cancelled_caught:
            process.send_signal(signal.SIGABRT)
            with anyio.move_on_after(10):
                async for chunk in process.stderr:
                    seen += chunk
            pytest.fail(f"still running 30 s after it started; its stderr:\n{seen.decode(errors='replace')}")
        with anyio.fail_after(30):
            status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await process.aclose()
    return status, seen.decode()


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "marker"), [("wait", "progress 1/2"), ("block", "blocking\n")])
async def test_ctrl_c_during_call_is_one_short_line(tmp_path: Path, tool: str, marker: str) -> None:
    target = write(tmp_path / "slow.py", SLOW)
    status, said = await _interrupted([*MCPCORE, "call", target, tool], marker)
    assert status == 130 and "Traceback" not in said
    assert said.splitlines()[-1] == "mcpcore: interrupted"


@pytest.mark.anyio
@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="aims a signal at one thread")
async def test_ctrl_c_handed_to_a_worker_thread_still_stops_the_call(tmp_path: Path) -> None:
    """The loop's own signal handler is woken whichever thread the kernel picks; one run only by the
    main thread between bytecodes would leave the call waiting for the tool (600 s)."""
    target = write(tmp_path / "slow.py", SLOW)
    status, said = await _interrupted([*MCPCORE, "call", target, "aimed"], "aiming\n", send=False)
    assert status == 130 and "Traceback" not in said
    assert said.splitlines()[-1] == "mcpcore: interrupted"


@pytest.mark.anyio
@pytest.mark.parametrize("command", [["inspect"], ["read", "x://y"], ["prompt", "p"], ["run"], ["run", "--transport", "http", "--port", "0"]])
async def test_ctrl_c_while_the_target_loads_is_one_short_line(tmp_path: Path, command: list[str]) -> None:
    target = write(tmp_path / "slow.py", SLOW)
    status, said = await _interrupted([*MCPCORE, command[0], target, *command[1:]], "importing\n", {"SLOW_IMPORT": "1"})
    assert status == 130 and "Traceback" not in said
    assert said.splitlines() == ["importing", "mcpcore: interrupted"]
