"""``regress check`` in a child process with a timeout, so nothing the tree does can fake a result.

The check executes upstream code: its modules at import, its methods in the scenarios. In one
process, ``sys.exit(0)`` or ``os._exit(0)`` at import would end ``regress check`` with 0 and no
report, and a ``while True`` would hang it. :func:`run_check_isolated` runs
:func:`regress.check.check.run_check` in a child (:mod:`regress.check.child`) started as every
child of regress is (:func:`regress.processes.run_child`: its own process group, ended with
regress, registered with the guardian so even ``kill -9`` of regress ends it; its work folder too)
that writes its report to a file only the parent names, stamped with a token only the parent knows.
No complete report is a gap (exit 3), whatever the child's exit status, and the cause is named:

* a hang: ``timeout`` seconds after the tree starts loading (the child's own start, torch's
  import included, is not counted), the child's :mod:`faulthandler` dumps its stack and exits; the
  innermost upstream frame of the dump is the cause. The parent kills the child's group when the
  whole run exceeds ``timeout`` + :data:`GRACE_S`;
* ``os._exit``: the child's ``os._exit`` first writes the upstream call site to stderr;
* a crash in compiled code (SIGSEGV, SIGABRT): faulthandler's dump names the frame;
* any other exit without a report (a kill, a regress bug): the status and the last line written.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from regress.check.check import NEXT, resolve_into
from regress.check.child import EXIT_MARK, MODULE
from regress.check.report import CheckReport
from regress.check.status import ReportStatus
from regress.files import read_json, write_json_atomic
from regress.processes import WorkFolder, run_child, sigterm_raises
from regress.sandbox.cuda import require_device
from regress.sandbox.eras import Settings

#: Seconds the tree's loading and the scenarios may take by default (about 1 s on 2 busy cores).
DEFAULT_TIMEOUT_S = 60.0
#: Seconds more per production-matrix cell past the default run's: a cell is a fresh sandbox, two
#: forwards and their draft loops, 0.1-0.3 s on a quiet 2-core box and several times that when
#: it is shared; ``--matrix full`` (128 cells) once timed out at 60 s at load 8 on a real era-C
#: tree (benchmarks/check_matrix.md).
PER_CELL_S = 2.0


def default_timeout(matrix: Sequence[str]) -> float:
    """The ``--timeout`` a check with ``--matrix matrix`` gets when none is given."""
    from regress.check.matrix import PRODUCTION, most_cells

    return DEFAULT_TIMEOUT_S + PER_CELL_S * max(0, most_cells(matrix) - len(PRODUCTION))


#: Seconds on top of the timeout for the child's start (interpreter, ``import torch``: up to
#: several seconds on a loaded machine) and its stack dump, before the parent kills its group.
GRACE_S = 30.0
_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+)$')
_TAIL_BYTES = 64 * 1024


def run_check_isolated(
    source: Path | str,
    *,
    scenarios: Sequence[str] | None = None,
    settings: Settings | None = None,
    timeout: float | None = None,
    matrix: Sequence[str] = ("default",),
) -> CheckReport:
    """:func:`~regress.check.check.run_check` in a child process; see the module docstring.

    A tree that is not TensorRT-LLM is reported without starting a child. ``seconds`` is the wall
    time of the whole check, interpreter start of the child included. The report carries the tree
    as resolved here (:attr:`CheckReport.tree`).

    Raises:
        UsageError: ``settings.device`` is ``cuda`` where torch sees no GPU.
    """
    started = time.monotonic()
    settings = settings or Settings()
    require_device(settings.device)  # before a child starts: bad input, exit 2
    timeout = timeout if timeout is not None else default_timeout(matrix)
    report = CheckReport(source=str(source), device=settings.device)
    tree = resolve_into(report, source)
    if tree is None:
        return report
    root = tree.package_dir.parent.resolve()
    token = secrets.token_hex(16)
    with WorkFolder(None, prefix="regress-check-", keep=False) as work:
        request = {
            "source": str(source),
            "root": str(root),
            "scenarios": list(scenarios) if scenarios else None,
            "matrix": list(matrix),
            "sm": settings.sm,
            "num_sms": settings.num_sms,
            "device": settings.device,
            "timeout": timeout,
            "token": token,
        }
        write_json_atomic(work / "request.json", request)
        returncode, timed_out = _spawn(work, timeout)
        doc = _read_report(work / "report.json", token)
        if doc is not None:
            report = CheckReport.from_json(doc)
        else:
            stderr = _tail(work / "stderr.txt")
            report.era = tree.era.name
            report.status = ReportStatus.GAP
            report.error = _cause(returncode, timed_out, stderr, timeout, root) + NEXT
    report.tree = tree
    report.seconds = time.monotonic() - started
    return report


def _child_env() -> dict[str, str]:
    """The parent's environment, with this regress importable however it was started."""
    here = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    return env


def _spawn(work: Path, timeout: float) -> tuple[int, bool]:
    """Run the child to its end (or end it at the deadline); its exit status and a timeout flag.

    SIGTERM ends the child's group first, then goes on as the caller handles it (the CLI: 143).
    """
    argv = [sys.executable, "-m", MODULE, str(work)]
    with open(work / "stdout.txt", "wb") as out, open(work / "stderr.txt", "wb") as err:
        try:
            with sigterm_raises():
                done = run_child(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=_child_env(),
                    timeout=timeout + GRACE_S,
                    end_group=True,  # also anything the tree started in the child's group
                )
        except subprocess.TimeoutExpired:
            return -signal.SIGKILL, True
    return done.returncode, False


def _read_report(path: Path, token: str) -> dict[str, Any] | None:
    try:
        doc = read_json(path)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("token") == token else None


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - _TAIL_BYTES))
        return f.read().decode(errors="replace")


def _dumped_site(stderr: str, root: Path) -> str | None:
    """The innermost tree frame of a faulthandler dump (most recent call first)."""
    for line in stderr.splitlines():
        match = _FRAME.match(line)
        if match and os.path.realpath(match.group(1)).startswith(str(root) + os.sep):
            rel = os.path.relpath(os.path.realpath(match.group(1)), root)
            return f"{rel}:{match.group(2)} in {match.group(3)}()"
    return None


def _cause(returncode: int, timed_out: bool, stderr: str, timeout: float, root: Path) -> str:
    site = _dumped_site(stderr, root)
    at = f" at {site}" if site else ""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    exits = [ln for ln in lines if ln.startswith(EXIT_MARK)]
    crash = next((ln for ln in lines if ln.startswith("Fatal Python error")), None)
    if timed_out or any(ln.startswith("Timeout (") for ln in lines):
        return (
            f"the check did not finish within {timeout:g} s{at}: upstream code hangs, or the "
            "machine is too slow (raise --timeout)"
        )
    if exits:
        return exits[-1].removeprefix("regress-check: ") + " before the check finished"
    if crash:
        return f"the check process crashed ({crash}){at}"
    if returncode < 0:
        return f"the check process was killed by {signal.Signals(-returncode).name}{at}"
    last = f"; its last words: {lines[-1][:300]}" if lines else ""
    return f"the check process exited with status {returncode} before writing its report{last}"
