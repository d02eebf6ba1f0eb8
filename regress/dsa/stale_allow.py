"""The reviewed table of fields that legitimately differ from a from-scratch prepare.

The stale-state oracle (:mod:`regress.dsa.staleness`) reports every field whose incremental value
differs from its from-scratch value. A field leaves that report only by a row here, one field per
row (never a pattern), each with the upstream reason and the upstream line that shows it, read in
the commit named. A row may be limited to checkpoint kinds (``draft_step`` covers
``draft_step_<i>`` and ``f2:draft_step_<i>``: a label's kind is what follows its last colon,
without the step number) and to metadata classes. Rows were decided with the upstream code in hand; candidate upstream defects
are never rows: they are written up in ``docs/findings.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from regress.dsa.staleness import StaleField


@dataclass(frozen=True)
class Allowed:
    """One field that may differ, and why.

    Attributes:
        field: the attribute name, exactly.
        reason: why the difference is not staleness (who reads it, and when it is rewritten).
        upstream: ``path @ commit:line`` where the reason can be checked.
        checkpoints: checkpoint kinds it applies at (``draft_step`` covers ``draft_step_<i>``);
            empty: every checkpoint.
        classes: metadata class names it applies to; empty: every class.
    """

    field: str
    reason: str
    upstream: str
    checkpoints: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()

    def covers(self, found: StaleField, owner: str) -> bool:
        kind = re.sub(r"_\d+$", "", found.checkpoint.rsplit(":", 1)[-1])
        return (
            found.field == self.field
            and (not self.checkpoints or kind in self.checkpoints)
            and (not self.classes or owner in self.classes)
        )


#: Filled from the runs on real upstream trees (docs/findings.md says how each was decided).
ALLOWED: tuple[Allowed, ...] = ()


def explain(
    found: Sequence[StaleField], table: Sequence[Allowed], owner: str
) -> tuple[list[StaleField], list[tuple[StaleField, Allowed]]]:
    """Split differences into unexplained ones and those a row of ``table`` explains."""
    unexplained: list[StaleField] = []
    allowed: list[tuple[StaleField, Allowed]] = []
    for f in found:
        row = next((a for a in table if a.covers(f, owner)), None)
        if row is None:
            unexplained.append(f)
        else:
            allowed.append((f, row))
    return unexplained, allowed


__all__ = ["ALLOWED", "Allowed", "explain"]
