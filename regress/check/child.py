"""The child process of ``regress check``: ``python -m regress.check.child WORKDIR``.

:mod:`regress.check.isolation` starts it by this module's name (:data:`MODULE`), so the library
depends on no CLI module to run the tree's code apart. It reads ``request.json`` in ``WORKDIR``,
runs :func:`regress.check.check.run_check` and writes ``report.json`` there, stamped with the
parent's token, then ends itself with ``os._exit`` (no atexit handler, no join of a thread the tree
may have started). Its guards, which only this process may install: faulthandler's stack dump at
the deadline (a hang names its frame) and an ``os._exit`` that names its upstream caller first.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path
from typing import NoReturn

#: The ``python -m`` name of this module.
MODULE = "regress.check.child"
#: The line the child writes to stderr when upstream calls ``os._exit`` (parsed by the parent).
EXIT_MARK = "regress-check: upstream called os._exit"
_REAL_EXIT = os._exit


def _guard_os_exit(root: Path) -> None:
    """Make ``os._exit`` name its upstream caller on stderr before it ends the process."""
    from regress.sandbox.stubs import call_site

    def _exit(status: int) -> None:
        site = call_site(root) or "a frame outside the tree"
        os.write(2, f"{EXIT_MARK}({status}) at {site}\n".encode())
        _REAL_EXIT(status)

    os._exit = _exit


def check_request(work: Path) -> int:
    """The child's work: check the tree ``work/request.json`` names; its exit code.

    The caller must then end the process with :func:`end_process`.
    """
    from regress.check.report import CheckReport
    from regress.check.status import ReportStatus
    from regress.files import read_json, write_json_atomic
    from regress.sandbox.eras import Settings

    request = read_json(work / "request.json")
    faulthandler.enable(all_threads=True)
    _guard_os_exit(Path(request["root"]))
    import torch  # before the clock starts: a slow import is not a hang

    # The sandbox's tensors hold a few dozen elements; torch's intra-op thread pool only adds
    # contention (on 2 busy cores a tiny repeat_interleave took 20 ms with 2 threads, 0.02 ms
    # with 1: a whole check 2.8 s -> 1.6 s).
    torch.set_num_threads(1)
    device = request.get("device", "cpu")
    # the GPU's context, like torch's import, is the child's start (not the tree's time)
    if device == "cuda" and torch.cuda.is_available():
        torch.cuda.init()

    from regress.check.check import run_check

    faulthandler.dump_traceback_later(request["timeout"], exit=True)
    settings = Settings(sm=request["sm"], num_sms=request["num_sms"], device=device)
    try:
        doc = run_check(
            request["source"],
            scenarios=request["scenarios"],
            settings=settings,
            matrix=request.get("matrix", ["default"]),
        ).to_json()
    except Exception as exc:  # a regress bug: still no verdict on the tree
        from regress.errors import save_traceback

        failed = CheckReport(source=request["source"], status=ReportStatus.GAP, device=device)
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


if __name__ == "__main__":
    end_process(check_request(Path(sys.argv[1])))
