"""The status vocabulary of ``regress check``: one scenario's verdict, the whole report's, and the
one table from the report's status to its exit code, its git-bisect code and its verdict text.

The CLI exits with :func:`exit_code`, the ``trtllm-source`` bisect recipe with :func:`bisect_code`,
the markdown summary heads with :func:`verdict_text`; all three read :data:`CODES`, so a status cannot
mean one thing to the CLI and another to a bisect. The exit codes are the ones
``regress.errors.EXIT_CODES["regress check"]`` explains.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from regress.errors import BAD_INPUT, FAILED, OK, UNFINISHED

#: git bisect's codes for a good, a bad and an untestable commit (``git help bisect``, "bisect
#: run"); the skip is ``regress.bisect.causes.SKIP_EXIT_CODE`` too, not imported from there:
#: that package's import (~0.15 s) would be paid by every ``regress check`` child, which never
#: bisects (``tests/unit/test_upstream_recipes.py`` holds them equal).
BISECT_GOOD, BISECT_BAD, BISECT_SKIP = 0, 1, 125


class ScenarioStatus(enum.StrEnum):
    """One scenario's verdict (its JSON ``status``)."""

    PASS = "pass"
    FAIL = "fail"  # a contract is broken
    WARN = "warn"  # a finding about the caller, not a verdict on the metadata
    SKIP = "skip"  # the tree has nothing of this kind
    GAP = "gap"  # the sandbox could not run it
    ERROR = "error"  # the scenario's own checker misbehaved (a regress bug)


#: Scenario statuses that leave the tree without a verdict.
UNJUDGED = frozenset({ScenarioStatus.GAP, ScenarioStatus.ERROR})


class ReportStatus(enum.StrEnum):
    """The whole check's status (its JSON ``status``)."""

    PASS = "pass"
    FAIL = "fail"
    NOT_A_TREE = "not-a-tree"
    GAP = "gap"


@dataclass(frozen=True)
class Codes:
    """What one report status means to each reader."""

    exit: int
    bisect: int
    verdict: str


#: The one table: report status -> exit code, git-bisect code, the summary's verdict text. A tree that is
#: not TensorRT-LLM (before DSA existed) or that cannot be judged is untestable: bisect's skip.
CODES: dict[ReportStatus, Codes] = {
    ReportStatus.PASS: Codes(OK, BISECT_GOOD, "contracts hold"),
    ReportStatus.FAIL: Codes(FAILED, BISECT_BAD, "a contract is broken"),
    ReportStatus.NOT_A_TREE: Codes(
        BAD_INPUT, BISECT_SKIP, "not a TensorRT-LLM tree with DSA metadata"
    ),
    ReportStatus.GAP: Codes(
        UNFINISHED, BISECT_SKIP, "no verdict: the sandbox could not run this tree"
    ),
}


def exit_code(status: ReportStatus | str) -> int:
    return CODES[ReportStatus(status)].exit


def bisect_code(status: ReportStatus | str) -> int:
    return CODES[ReportStatus(status)].bisect


def verdict_text(status: ReportStatus | str) -> str:
    return CODES[ReportStatus(status)].verdict


__all__ = [
    "CODES",
    "UNJUDGED",
    "Codes",
    "ReportStatus",
    "ScenarioStatus",
    "bisect_code",
    "exit_code",
    "verdict_text",
]
