"""The vocabulary of a bisect: verdicts, how a bisect ended, and one probe execution's outcome."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Verdict(enum.Enum):
    """What one probe execution says about a commit.

    The search speaks in the terms of the range it was given: ``GOOD`` means "like the old
    endpoint", ``BAD`` "like the new endpoint". ``--find-fix`` swaps the probe's verdicts before the
    search sees them (see :meth:`swapped`) instead of running a second algorithm.
    """

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"

    def swapped(self) -> Verdict:
        """The same observation in swapped terms (``--find-fix``): good and bad trade places."""
        if self is Verdict.GOOD:
            return Verdict.BAD
        if self is Verdict.BAD:
            return Verdict.GOOD
        return self


class Status(enum.StrEnum):
    """How a bisect ended. A string enum, so JSON and string comparisons see ``"found"``."""

    FOUND = "found"  # one culprit, at the configured confidence
    AMBIGUOUS = "ambiguous"  # the culprit is one of several commits nobody could test
    INCONCLUSIVE = "inconclusive"  # contradictions (strict mode) or --max-probes ran out
    INTERRUPTED = "interrupted"  # stopped early (Ctrl-C, or status replaying a partial session)


@dataclass
class Outcome:
    """One probe execution at one commit, as persisted in the store.

    Attributes:
        verdict: the probe's verdict in the user's terms (before any ``--find-fix`` swap);
            ``None`` for a metric measurement that only the metric judge can turn into a verdict.
        reason: a short human explanation (``"exit 0"``, ``"crash (signal 11)"``).
        exit_code: the probe's exit status; negative for a signal, ``None`` if it never ran.
        value: the measured number (metric probe), else ``None``.
        seconds: wall time of build plus probe.
        log: path of the captured output, if any.
        details: probe-specific extras (JUnit counts, timeout flag, ...).
    """

    verdict: Verdict | None
    reason: str = ""
    exit_code: int | None = None
    value: float | None = None
    seconds: float = 0.0
    log: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value if self.verdict else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        fields = dict(data)
        fields["verdict"] = Verdict(fields["verdict"]) if fields["verdict"] else None
        return cls(**fields)
