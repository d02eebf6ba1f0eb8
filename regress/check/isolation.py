"""``regress check`` in a child process with a timeout, so nothing the tree does can fake a result.

The check executes upstream code: its modules at import, its methods in the scenarios. In one
process, ``sys.exit(0)`` or ``os._exit(0)`` at import would end ``regress check`` with 0 and no
report, and a ``while True`` would hang it. :func:`run_check_isolated` runs
:func:`regress.check.check.run_check` in a child (its own process group, killed with it) that
writes its report to a file only the parent names, stamped with a token only the parent knows.
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

import contextlib
import faulthandler
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from regress.check.report import CheckReport
from regress.sandbox import Fake, Ledger
from regress.sandbox.eras import Settings

#: Seconds the tree's loading and the scenarios may take by default (about 1 s on 2 busy cores).
DEFAULT_TIMEOUT_S = 60.0
#: Seconds on top of the timeout for the child's start (interpreter, ``import torch``: up to
#: several seconds on a loaded machine) and its stack dump, before the parent kills its group.
GRACE_S = 30.0
_EXIT_MARK = "regress-check: upstream called os._exit"
_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+)$')
_TAIL_BYTES = 64 * 1024
_REAL_EXIT = os._exit
#: The module holding the child's entry point (``check-tree``).
CHILD = "regress.cli.child"


class _Terminated(BaseException):
    """SIGTERM arrived while the child ran."""


def run_check_isolated(
    source: Path | str,
    *,
    scenarios: Sequence[str] | None = None,
    settings: Settings | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    matrix: Sequence[str] = ("default",),
) -> CheckReport:
    """:func:`~regress.check.check.run_check` in a child process; see the module docstring.

    A tree that is not TensorRT-LLM is reported without starting a child. ``seconds`` is the wall
    time of the whole check, interpreter start of the child included.
    """
    from regress.tree.layout import TrtllmLayoutError, resolve_source_tree

    started = time.monotonic()
    report = CheckReport(source=str(source))
    try:
        layout = resolve_source_tree(source)
    except TrtllmLayoutError as exc:
        report.status, report.error = "not-a-tree", str(exc)
        return report
    root = layout.package_dir.parent.resolve()
    settings = settings or Settings()
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="regress-check-") as tmp:
        work = Path(tmp)
        request = {
            "source": str(source),
            "root": str(root),
            "scenarios": list(scenarios) if scenarios else None,
            "matrix": list(matrix),
            "sm": settings.sm,
            "num_sms": settings.num_sms,
            "timeout": timeout,
            "token": token,
        }
        (work / "request.json").write_text(json.dumps(request))
        returncode, timed_out = _spawn(work, timeout)
        doc = _read_report(work / "report.json", token)
        if doc is not None:
            report = report_from_json(doc)
        else:
            stderr = _tail(work / "stderr.txt")
            report.era = layout.era
            report.status = "gap"
            report.error = _cause(returncode, timed_out, stderr, timeout, root) + (
                ". No contract was judged: fix the tree, or check another commit "
                "(a bisect skips this one)"
            )
    report.seconds = time.monotonic() - started
    return report


def _child_env() -> dict[str, str]:
    """The parent's environment, with this regress importable however it was started."""
    here = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    return env


def _spawn(work: Path, timeout: float) -> tuple[int, bool]:
    """Run the child to its end (or kill it at the deadline); its exit status and a timeout flag."""
    argv = [sys.executable, "-m", CHILD, "check-tree", str(work)]
    timed_out = False
    with open(work / "stdout.txt", "wb") as out, open(work / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=_child_env(),
            start_new_session=True,
        )
        try:
            with _sigterm_ends_child(proc):
                try:
                    proc.wait(timeout=timeout + GRACE_S)
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            _kill_group(proc)  # also anything the tree started in the child's group
    return proc.returncode, timed_out


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def _sigterm_ends_child(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGTERM kills the child's group first, then takes the previous disposition (143)."""

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    except _Terminated:
        _kill_group(proc)
        signal.signal(signal.SIGTERM, previous)
        os.kill(os.getpid(), signal.SIGTERM)
        raise KeyboardInterrupt from None  # the previous handler returned instead of exiting
    finally:
        signal.signal(signal.SIGTERM, previous)


def _read_report(path: Path, token: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
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
    exits = [ln for ln in lines if ln.startswith(_EXIT_MARK)]
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


def report_from_json(doc: dict[str, Any]) -> CheckReport:
    """The :class:`CheckReport` that :meth:`CheckReport.to_json` wrote."""
    from regress.check.scenarios import ScenarioResult, Step
    from regress.dsa.invariants import Violation

    sandbox = doc.get("sandbox", {})
    ledger = Ledger(
        real_modules=list(sandbox.get("real_modules", [])),
        divergences=list(sandbox.get("cpu_gpu_divergences", [])),
    )
    for f in sandbox.get("faked", []):
        ledger.fakes[(f["kind"], f["name"])] = Fake(**f)
    results = [
        ScenarioResult(
            s["name"],
            status=s["status"],
            note=s.get("note", ""),
            # schema 2 adds each violation's finding and known marker: not Violation fields
            violations=[
                Violation(v["check"], v["message"], v.get("details", {}))
                for v in s.get("violations", [])
            ],
            steps=[Step(**st) for st in s.get("steps", [])],
        )
        for s in doc.get("scenarios", [])
    ]
    return CheckReport(
        source=doc["source"],
        era=doc.get("era"),
        status=doc["status"],
        error=doc.get("error", ""),
        results=results,
        ledger=ledger,
        seconds=float(doc.get("seconds", 0.0)),
        cells=list(doc.get("cells", [])),
    )


def _guard_os_exit(root: Path) -> None:
    """Make ``os._exit`` name its upstream caller on stderr before it ends the process."""
    from regress.sandbox.stubs import call_site

    def _exit(status: int) -> None:
        site = call_site(root) or "a frame outside the tree"
        os.write(2, f"{_EXIT_MARK}({status}) at {site}\n".encode())
        _REAL_EXIT(status)

    os._exit = _exit


def run_child(work: Path) -> int:
    """The child's work (``python -m regress.cli.child check-tree WORKDIR``): its exit code.

    Reads ``request.json`` in ``work``, checks the tree and writes ``report.json`` there. The
    caller must then end the process with :func:`end_process`.
    """
    request = json.loads((work / "request.json").read_text())
    faulthandler.enable(all_threads=True)
    _guard_os_exit(Path(request["root"]))
    import torch  # before the clock starts: a slow import is not a hang

    # The sandbox's tensors hold a few dozen elements; torch's intra-op thread pool only adds
    # contention (on 2 busy cores a tiny repeat_interleave took 20 ms with 2 threads, 0.02 ms
    # with 1: a whole check 2.8 s -> 1.6 s).
    torch.set_num_threads(1)

    from regress.check.check import run_check
    from regress.files import write_json_atomic

    faulthandler.dump_traceback_later(request["timeout"], exit=True)
    settings = Settings(sm=request["sm"], num_sms=request["num_sms"])
    try:
        doc = run_check(
            request["source"],
            scenarios=request["scenarios"],
            settings=settings,
            matrix=request.get("matrix", ["default"]),
        ).to_json()
    except Exception as exc:  # a regress bug: still no verdict on the tree
        from regress.errors import save_traceback

        failed = CheckReport(source=request["source"], status="gap")
        failed.error = f"regress failed while checking ({exc}); traceback: {save_traceback(exc)}"
        doc = failed.to_json()
    doc["token"] = request["token"]
    write_json_atomic(work / "report.json", doc)
    faulthandler.cancel_dump_traceback_later()
    return int(doc["exit_code"])


def end_process(code: int) -> NoReturn:
    """End the child now: no atexit handlers, no joining threads the tree may have started."""
    sys.stdout.flush()
    sys.stderr.flush()
    _REAL_EXIT(code)
