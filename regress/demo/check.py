"""``regress demo --check``: ``regress check`` at work on two of regress's own fake trees.

``regress check`` needs a TensorRT-LLM checkout, so a newcomer had no way to see what it does.
This builds two fake trees (:mod:`regress.demo.trees`, the shape of upstream's DSA metadata, no
upstream source) in a temporary folder: one whose ``on_update_kv_lens()`` leaves the
token-to-request map stale after the draft loop (before PR #16925) and one that rebuilds it, and
checks each on the CPU as ``regress check`` would. The demo succeeds when the first fails a contract
and the second passes.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.demo.run import DemoEvent
from regress.demo.trees import build_tree
from regress.progress import Progress

#: The two trees, in the order they are checked: name, fix state, the status that is right.
TREES = (
    ("before-fix", "pre", "fail"),
    ("after-fix", "post", "pass"),
)


@dataclass
class CheckDemoResult:
    """Each tree's report and whether it came out as it should."""

    reports: dict[str, Any] = field(default_factory=dict)  # name -> CheckReport
    expected: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(self.reports[n].status == self.expected[n] for n in self.expected)

    def summary(self) -> list[str]:
        lines = []
        for name, report in self.reports.items():
            mark = "as expected" if report.status == self.expected[name] else "UNEXPECTED"
            lines.append(
                f"{name}: regress check says {report.status} (exit {report.exit_code}, {mark})"
            )
            lines += [f"  {line}" for line in report.lines()[:6]]
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seconds": self.seconds,
            "trees": {
                n: {"expected": self.expected[n], **r.to_json()} for n, r in self.reports.items()
            },
        }


def run_check_demo(
    *, workdir: Path | None = None, keep: bool = False, progress: Progress[DemoEvent] | None = None
) -> CheckDemoResult:
    """Build the two fake trees under ``workdir`` (default: a new temporary folder) and check them.

    Args:
        workdir: where the trees go; removed afterwards unless ``keep``.
        progress: one event per tree built and checked.
    """
    from regress.check.check import run_check

    started = time.monotonic()
    emit = progress or (lambda _e: None)
    root = (
        Path(workdir)
        if workdir is not None
        else Path(tempfile.mkdtemp(prefix="regress-check-demo-"))
    )
    result = CheckDemoResult()
    try:
        for name, fix, expected in TREES:
            tree = build_tree(root / name, era="B", fix=fix, guard=True)
            emit(DemoEvent("check", f"checking the {name} tree {tree}", time.monotonic() - started))
            report = run_check(tree)
            result.reports[name], result.expected[name] = report, expected
            emit(
                DemoEvent(
                    "check",
                    f"{name}: {report.status} (expected {expected})",
                    time.monotonic() - started,
                )
            )
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    result.seconds = time.monotonic() - started
    return result
