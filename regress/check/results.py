"""What a scenario of ``regress check`` reports: its verdict and what each checked step saw.

Shared by the scenario modules (:mod:`regress.check.scenarios`,
:mod:`regress.check.draft_scenarios`, :mod:`regress.check.stale_state`, and the checkpoint
judging of :mod:`regress.check.steps`) and the report (:mod:`regress.check.report`), so no
scenario module imports another. The JSON form of a result is written and read here, side by side.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from regress.check.status import ScenarioStatus
from regress.dsa.invariants import Violation

#: The check of a finding about the caller, not the metadata (:meth:`ScenarioResult.warn`).
NO_REBUILD = "no_rebuild_point"
#: A worker that leaves the metadata in its draft state when a draft step raises (upstream's
#: workers restore in a ``finally`` since PR #16382): a finding about the caller, like NO_REBUILD.
NO_RESTORE = "no_restore_on_failure"
#: Checks that make a result ``warn``, not ``fail``: findings about the caller.
CALLER_FINDINGS = frozenset({NO_REBUILD, NO_RESTORE})


def stale_message(found: Any, at: str) -> str:
    """The stale-state oracle's sentence for ``found`` (a :class:`regress.dsa.staleness.StaleField`)
    seen at ``at``: what a fresh twin holds against the live object."""
    return (
        f"{found.field} is stale at {at}: a fresh {found.owner} prepared for {found.layout} holds "
        f"{found.fresh}, the live one {found.live}"
    )


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
    """One verdict (:class:`~regress.check.status.ScenarioStatus`) and what it saw."""

    name: str
    status: ScenarioStatus = ScenarioStatus.PASS
    violations: list[Violation] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    note: str = ""

    def add(self, found: list[Violation], where: str) -> None:
        for v in found:
            self.violations.append(Violation(v.check, v.message, {**v.details, "step": where}))
        if self.violations and self.status != ScenarioStatus.FAIL:
            broken = any(v.check not in CALLER_FINDINGS for v in self.violations)
            self.status = ScenarioStatus.FAIL if broken else ScenarioStatus.WARN

    def warn(self, found: list[Violation], where: str) -> None:
        """Record ``found`` as a finding about the caller: ``warn`` unless already failed."""
        self.add([Violation(NO_REBUILD, v.message, v.details) for v in found], where)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": str(self.status),
            "note": self.note,
            "violations": [v.to_dict() for v in self.violations],
            "steps": [asdict(s) for s in self.steps],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ScenarioResult:
        """The result :meth:`to_json` wrote."""
        return cls(
            doc["name"],
            status=ScenarioStatus(doc["status"]),
            note=doc.get("note", ""),
            # schema 2 adds each violation's finding and known marker: not Violation fields
            violations=[
                Violation(v["check"], v["message"], v.get("details", {}))
                for v in doc.get("violations", [])
            ],
            steps=[Step(**st) for st in doc.get("steps", [])],
        )


__all__ = ["CALLER_FINDINGS", "NO_REBUILD", "NO_RESTORE", "ScenarioResult", "Step"]
