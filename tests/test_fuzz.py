"""The bundled fuzz script, briefly: a few thousand inputs each way at real server processes, no invariant broken.

The full run (100,000 of each, `tests/fuzz/fuzz.py` with its defaults) is in
benchmarks/RESULTS.md; this one keeps the script and the invariants honest in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from process_group import run_in_own_group

HTTP_INPUTS = 3000
STDIO_INPUTS = 3000


def test_a_short_fuzz_run_over_http_and_stdio_breaks_no_invariant(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    command = [
        sys.executable, str(ROOT / "tests" / "fuzz" / "fuzz.py"), "--http", str(HTTP_INPUTS), "--stdio", str(STDIO_INPUTS),
        "--stdio-stream", "1000", "--health-every", "1000", "--seed", "7", "--json", str(summary_file),
    ]
    done = run_in_own_group(command, cwd=ROOT, stderr=subprocess.STDOUT)  # the script and every server it starts
    output = done.stdout
    assert done.returncode == 0, output
    summary = json.loads(summary_file.read_text())
    assert summary["violations"] == {}, output
    assert summary["inputs"]["http"] >= HTTP_INPUTS and summary["inputs"]["stdio"] >= STDIO_INPUTS, output
    assert summary["health_checks"] >= 6, output
