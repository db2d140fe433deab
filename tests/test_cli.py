"""Loading a TARGET: file paths, modules, attributes, factories, clear failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT
from mcpcore import Server
from mcpcore._cli.main import TargetError, load_target

SERVER_SOURCE = """
from mcpcore import Server
{name} = Server("{label}")
"""


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_file_path_uses_the_default_attribute_server(tmp_path: Path) -> None:
    target = write(tmp_path / "one.py", SERVER_SOURCE.format(name="server", label="one"))
    assert load_target(target).name == "one"


def test_file_path_with_an_explicit_attribute(tmp_path: Path) -> None:
    target = write(tmp_path / "two.py", SERVER_SOURCE.format(name="custom", label="two"))
    assert load_target(f"{target}:custom").name == "two"


def test_mcp_and_app_are_default_attributes_too(tmp_path: Path) -> None:
    assert load_target(write(tmp_path / "m.py", SERVER_SOURCE.format(name="mcp", label="m"))).name == "m"
    assert load_target(write(tmp_path / "a.py", SERVER_SOURCE.format(name="app", label="a"))).name == "a"


def test_the_only_server_in_a_module_is_found_under_any_name(tmp_path: Path) -> None:
    assert load_target(write(tmp_path / "lone.py", SERVER_SOURCE.format(name="whatever", label="lone"))).name == "lone"


def test_a_callable_attribute_is_called_to_build_the_server(tmp_path: Path) -> None:
    target = write(tmp_path / "factory.py", "from mcpcore import Server\ndef make():\n    return Server('built')\n")
    assert load_target(f"{target}:make").name == "built"


def test_dotted_module_with_attribute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pkg_for_cli_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write(package / "mod.py", SERVER_SOURCE.format(name="srv", label="dotted"))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_target("pkg_for_cli_test.mod:srv").name == "dotted"
    sys.modules.pop("pkg_for_cli_test.mod", None)


def test_missing_file_names_the_path_tried(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="no file .*nope.py"):
        load_target(str(tmp_path / "nope.py"))


def test_missing_module_says_what_was_tried() -> None:
    with pytest.raises(TargetError, match="no importable module 'not_a_module_abc'"):
        load_target("not_a_module_abc")


def test_attribute_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    target = write(tmp_path / "wrong.py", "server = 42\n")
    with pytest.raises(TargetError, match="server is a int, not an mcpcore Server"):
        load_target(target)


def test_no_server_at_all_lists_the_attributes_tried(tmp_path: Path) -> None:
    target = write(tmp_path / "empty.py", "x = 1\n")
    with pytest.raises(TargetError, match="server / mcp / app"):
        load_target(target)


def test_load_target_returns_a_server_instance(tmp_path: Path) -> None:
    target = write(tmp_path / "inst.py", SERVER_SOURCE.format(name="server", label="inst"))
    assert isinstance(load_target(target), Server)


def test_worker_arguments_drop_the_workers_option_in_both_spellings() -> None:
    from mcpcore._cli.main import _without_option

    assert _without_option(["run", "s.py", "--workers", "2", "--port", "1"], "--workers") == ["run", "s.py", "--port", "1"]
    assert _without_option(["run", "--workers=3", "s.py"], "--workers") == ["run", "s.py"]


def test_the_random_key_note_comes_at_start_not_at_shutdown() -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), "--transport", "http", "--port", "0",
               "--log-level", "debug"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "MCPCORE_STATE_KEYS": ""})
    try:
        assert process.stderr is not None
        first: list[str] = []
        while len(first) < 10 and not any("random per-process key" in line for line in first):
            first.append(process.stderr.readline())  # these lines arrive while the server runs (at most a few)
        assert any("serving 'echo'" in line for line in first[:-1]) and "random per-process key" in first[-1], first
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def test_two_servers_in_a_file_are_ambiguous_and_the_message_says_how_to_choose(tmp_path: Path) -> None:
    target = write(tmp_path / "two_servers.py", "from mcpcore import Server\nalpha = Server('a')\nbeta = Server('b')\n")
    with pytest.raises(TargetError, match=r"holds 2 Servers \(alpha, beta\); name one, e.g. .*:alpha"):
        load_target(target)


def test_a_target_named_like_a_stdlib_module_does_not_shadow_it(tmp_path: Path) -> None:
    target = write(tmp_path / "http.py", SERVER_SOURCE.format(name="server", label="shadow"))
    import http.client  # noqa: F401  (the standard library's, imported before)

    assert load_target(target).name == "shadow"
    assert str(tmp_path) not in (sys.modules["http"].__file__ or "") and sys.path[0] != str(tmp_path)


def test_a_dotted_target_is_found_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "cwd_pkg_for_cli_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write(package / "srv.py", SERVER_SOURCE.format(name="server", label="from-cwd"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_target("cwd_pkg_for_cli_test.srv:server").name == "from-cwd"


@pytest.mark.parametrize("option", [["--port", "9"], ["--host", "0.0.0.0"], ["--workers", "2"], ["--stateless"], ["--json-response"]])
def test_http_options_without_the_http_transport_are_refused(option: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), *option],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0 and f"{option[0]} needs --transport http" in result.stderr


def test_an_abbreviated_option_is_not_taken_for_another() -> None:
    result = subprocess.run([sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), "--work", "2"],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "unrecognized arguments: --work" in result.stderr


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_a_public_bind_without_an_allowed_host_list_is_refused_with_the_fix(workers: list[str]) -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), "--transport", "http",
               "--host", "0.0.0.0", "--port", "0", *workers]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "--allow-host" in result.stderr and "DNS rebinding" in result.stderr
    assert result.stderr.count("\n") == 1  # one line, no traceback


def test_workers_are_refused_for_tasks_kept_in_one_process() -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "everything_server.py"), "--transport", "http",
               "--port", "0", "--workers", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and "--workers needs a task store the workers share" in result.stderr
    assert "server.tasks.configure(store=...)" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(os.environ.get("MCPCORE_PORTABLE") == "1", reason="the portable paths refuse --workers (test_portable.py)")
def test_workers_without_shared_state_say_what_stays_per_worker() -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), "--transport", "http",
               "--port", "0", "--workers", "2"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # said before the workers start
        assert "each worker keeps its own state" in first and "--redis URL" in first
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize(("options", "stream", "status", "answer"), [
    (["--sse-path", "/events", "--sse-message-path", "/events/in"], "/events", 200, b"data: /events/in?session_id="),
    (["--sse-path", ""], "/sse", 404, b'"code":-32600'),  # switched off: not found, as any other path
])
def test_the_http_sse_transport_moves_with_its_options_and_an_empty_path_turns_it_off(
        options: list[str], stream: str, status: int, answer: bytes) -> None:
    import http.client
    import time

    from conftest import free_port

    port = free_port()
    command = [sys.executable, "-m", "mcpcore", "run", str(ROOT / "examples" / "echo_server.py"), "--transport", "http",
               "--port", str(port), *options]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", stream, headers={"accept": "text/event-stream"})
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        reply = connection.getresponse()
        assert reply.status == status
        assert answer in (reply.readline() + reply.readline() if status == 200 else reply.read())  # a stream: its first event
        connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
