"""The suite's own configuration: failures that would otherwise pass as a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_exception_in_a_worker_thread_fails_the_test_that_started_it(tmp_path):
    (tmp_path / "test_thread.py").write_text(
        "import threading\n\n\n"
        "def test_a_thread_that_raises():\n"
        "    worker = threading.Thread(target=lambda: 1 / 0)\n"
        "    worker.start()\n"
        "    worker.join()\n"
    )

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            "-p",
            "no:django",
            "-p",
            "no:xdist",
            "-q",
            str(tmp_path / "test_thread.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed" in run.stdout
    assert "ZeroDivisionError" in run.stdout
