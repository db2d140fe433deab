"""Running a script that starts servers of its own, and cleaning all of them up whatever happens."""

from __future__ import annotations

import os
import signal
import subprocess
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
