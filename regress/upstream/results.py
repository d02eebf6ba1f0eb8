"""What a scenario of ``regress check`` reports: its verdict and what each checked step saw.

Shared by the scenario modules (:mod:`regress.upstream.scenarios`,
:mod:`regress.upstream.stale_state`), the report and the child process that rebuilds it, so no
scenario module imports another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from regress.dsa.invariants import Violation


@dataclass
class Step:
    """What one checked step saw."""

    step: str
    seq_lens: list[int]
    req_idx_per_token: list[int]
    blocks_written: list[int] = field(default_factory=list)
    #: what a scenario adds about the step (``stale_state``: the fields compared and explained)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScenarioResult:
    """One scenario's verdict: ``pass``, ``fail`` (violations) or ``gap`` (could not run)."""

    name: str
    status: str = "pass"
    violations: list[Violation] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    note: str = ""

    def add(self, found: list[Violation], where: str) -> None:
        for v in found:
            self.violations.append(Violation(v.check, v.message, {**v.details, "step": where}))
        if self.violations:
            self.status = "fail"


__all__ = ["ScenarioResult", "Step"]
