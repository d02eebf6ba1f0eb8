"""Ctrl-C, SIGTERM and kill -9 of real ``regress accept`` and ``regress demo`` processes: exit 130
or 143, nothing left behind (no report, no temp folder, no probe).

Both used to exit 1 on Ctrl-C, the code that means "regression found" / "culprit missed". These
run the console entry point in a child process and send it SIGINT once its progress shows it is
mid-run, as a terminal would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from _processes import processes_in, wait_for


def _start(args: list[str], **env: str) -> subprocess.Popen:
    # A shell running CI in the background starts its children with SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler; give the child Ctrl-C as a terminal would.
    return subprocess.Popen(
        [sys.executable, "-c", "from regress.cli import main; main()", *args],
        env={**os.environ, "REGRESS_TRACEBACK": "", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _signal_once_stderr_shows(
    proc: subprocess.Popen, marker: bytes, sig: int = signal.SIGINT
) -> tuple[bytes, str]:
    """Send ``sig`` once the child's stderr shows ``marker``; its stdout and whole stderr."""
    seen = b""
    while marker not in seen:
        chunk = os.read(proc.stderr.fileno(), 4096)  # blocks until the child writes
        assert chunk, f"the child ended before showing {marker!r}: {seen.decode()[-2000:]}"
        seen += chunk
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    return out, (seen + err).decode()


def _demo_in(tmp: Path) -> subprocess.Popen:
    """A small ``regress demo`` whose default temp folder is made under ``tmp``."""
    tmp.mkdir()
    return _start(
        ["demo", "--commits", "8"],
        TMPDIR=str(tmp),
        REGRESS_DEMO_PROMPTS="4",
        REGRESS_DEMO_TOKENS="16",
        REGRESS_DEFECTS="",
    )


def test_ctrl_c_in_accept_exits_130_and_writes_no_report(tmp_path):
    report = tmp_path / "r.json"
    proc = _start(
        ["accept", "--batch-sizes", "1,8", "--max-new-tokens", "64", "--json", str(report)],
        REGRESS_DEFECTS="",
    )
    _, err = _signal_once_stderr_shows(proc, b"regress accept: batch")
    assert proc.returncode == 130, err[-2000:]
    assert err.rstrip().endswith("regress: interrupted")
    assert "Traceback" not in err
    assert not report.exists()


def test_sigterm_in_accept_exits_143_and_writes_no_report(tmp_path):
    report = tmp_path / "r.json"
    proc = _start(
        ["accept", "--batch-sizes", "1,8", "--max-new-tokens", "64", "--json", str(report)],
        REGRESS_DEFECTS="",
    )
    _, err = _signal_once_stderr_shows(proc, b"regress accept: batch", signal.SIGTERM)
    assert proc.returncode == 143, err[-2000:]
    assert err.rstrip().endswith("regress: terminated (SIGTERM)")
    assert not report.exists()


def test_ctrl_c_in_demo_exits_130_and_removes_its_workdir(tmp_path):
    workdir = tmp_path / "demo"
    proc = _start(
        ["demo", "--commits", "8", "--workdir", str(workdir)],
        REGRESS_DEMO_PROMPTS="4",
        REGRESS_DEMO_TOKENS="16",
        REGRESS_DEFECTS="",
    )
    _, err = _signal_once_stderr_shows(proc, b"probe run 1 started")
    assert proc.returncode == 130, err[-2000:]
    assert err.rstrip().endswith("regress: interrupted")
    assert "Traceback" not in err
    assert not workdir.exists()


def test_sigterm_in_demo_exits_143_and_leaves_no_temp_folder_and_no_probe(tmp_path):
    # What a cancelled CI job or Slurm sends: the default temp folder (under TMPDIR) goes, and so
    # does the probe running in it.
    tmp = tmp_path / "tmp"
    proc = _demo_in(tmp)
    marker = b"probe run 1 started"
    _, err = _signal_once_stderr_shows(proc, marker, signal.SIGTERM)
    assert proc.returncode == 143, err[-2000:]
    assert err.rstrip().endswith("regress: terminated (SIGTERM)")
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == []
    assert processes_in(tmp) == []


def test_kill_9_of_demo_leaves_no_temp_folder_and_no_probe(tmp_path):
    tmp = tmp_path / "tmp"
    proc = _demo_in(tmp)
    _signal_once_stderr_shows(proc, b"probe run 1 started", signal.SIGKILL)
    wait_for(lambda: list(tmp.iterdir()) == [], timeout=30)
    assert processes_in(tmp) == []
