"""What a check on acceptance runs concludes: :class:`Finding`, :class:`CheckStatus` and :data:`EPS`.

The vocabulary every acceptance check, report and gate shares; the checks themselves are in
:mod:`regress.acceptance.verdicts`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Slack on every threshold comparison, so a value exactly on a boundary passes despite rounding
#: (4.0 * (1 - 0.05) is not exactly 3.8 in binary floating point).
EPS = 1e-9


class CheckStatus(enum.StrEnum):
    """Outcome of one check; compares equal to its string value ("pass", "regression")."""

    PASS = "pass"
    REGRESSION = "regression"

    @classmethod
    def of(cls, regressed: bool) -> CheckStatus:
        return cls.REGRESSION if regressed else cls.PASS


@dataclass
class Finding:
    """One check's outcome, with the numbers behind it so a reader can second-guess it.

    Named ``Finding``, not ``Verdict``: :class:`regress.bisect.verdicts.Verdict` is the bisect's
    good/bad/skip enum, and one name means one thing (so too :class:`CheckStatus`). Reports keep
    the JSON key ``"verdicts"`` for their list of findings (schema 1).

    Attributes:
        check: which check (``batch_invariance``, ``conditional_decay``, ``baseline``,
            ``upstream_min_al``, ``sentinel``).
        batch_size: the batch size judged, or None for a run-independent check.
        status: pass or regression.
        details: the compared values, thresholds and the metrics that failed.
    """

    check: str
    batch_size: int | None
    status: CheckStatus
    details: dict = field(default_factory=dict)

    @property
    def regressed(self) -> bool:
        return self.status == CheckStatus.REGRESSION

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "batch_size": self.batch_size,
            "status": str(self.status),
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Finding:
        return cls(
            data["check"],
            data.get("batch_size"),
            CheckStatus(data["status"]),
            data.get("details", {}),
        )

    def summary(self) -> str:
        """One human line: what was judged, the outcome and the headline numbers."""
        where = f"batch {self.batch_size}" if self.batch_size is not None else "all runs"
        text = f"{self.status.value.upper():10s} {self.check} {where}"
        if headline := self.details.get("headline"):
            text += f": {headline}"
        if failed := self.details.get("regressed_metrics"):
            text += f"; regressed: {', '.join(failed)}"
        return text
