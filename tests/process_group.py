"""Server processes in tests: run a script that starts its own and clean all of them up, wait for one
to accept connections, stop one gracefully."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from typing import Any, Sequence


def run_in_own_group(command: Sequence[str], timeout: float = 120, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run `command` in a new session and kill that whole process group afterwards, servers included."""
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True, start_new_session=True, **options)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop_gracefully(process: subprocess.Popen[Any], seconds: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `seconds`."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_accepting(port: int, seconds: float = 15.0) -> None:
    """Until something accepts connections on 127.0.0.1:`port` (AssertionError after `seconds`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing accepted connections on port {port}")
