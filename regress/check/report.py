"""The result of ``regress check``: verdict per scenario, values seen, and everything faked.

Its JSON form (:meth:`CheckReport.to_json`, schema 2) is written and read here, side by side
(:meth:`CheckReport.from_json`: the parent rebuilds the report its child process wrote).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from regress.check.known import KnownFile, KnownOutcome, annotate, headline, mark, text_lines
from regress.check.results import ScenarioResult
from regress.check.status import UNJUDGED, ReportStatus, ScenarioStatus, exit_code
from regress.sandbox import Ledger

if TYPE_CHECKING:
    from regress.tree.source import SourceTree

#: The version of :meth:`CheckReport.to_json`'s document.
SCHEMA = 2


@dataclass
class CheckReport:
    """Everything one ``regress check`` found.

    Attributes:
        source: the tree checked.
        era: its era's letter (A, B, C), when resolved.
        status: see :class:`~regress.check.status.ReportStatus`.
        error: the message for ``not-a-tree`` and ``gap``.
        results: per scenario, its verdict, violations and the values seen per step.
        ledger: the real modules executed and every fake.
        seconds: wall time.
        tree: the tree as this process resolved it (not in the JSON: the summary reads its draft
            loop from here instead of resolving the tree again).
        known: which findings a ``--known`` file matched (:meth:`apply_known`), or None.
        cells: the production-matrix cells run (:mod:`regress.check.matrix`): first the base
            cell of the scenarios outside the matrix, then the ``matrix`` scenario's.
        device: where upstream's CUDA tensors lived: ``cpu`` (mapped onto the CPU, Triton
            interpreted) or ``cuda`` (natively on the GPU the ledger names).
    """

    source: str
    era: str | None = None
    status: ReportStatus = ReportStatus.PASS
    error: str = ""
    results: list[ScenarioResult] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)
    seconds: float = 0.0
    tree: SourceTree | None = field(default=None, repr=False, compare=False)
    known: KnownOutcome | None = None
    cells: list[str] = field(default_factory=list)
    device: str = "cpu"

    @property
    def where(self) -> str:
        """Where the tree's code ran, as the summaries say it."""
        return "natively on the GPU" if self.device == "cuda" else "on a CPU"

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)

    def finish(self) -> None:
        """Derive the overall status from the scenario verdicts.

        A broken contract is a verdict whatever else happened (``fail``). Otherwise one scenario
        the sandbox could not run (``gap``) or whose own checker misbehaved (``error``) makes the
        whole check a gap: "the contracts hold" (exit 0) is said only when every scenario that
        applies to the tree ran and passed. A scenario the tree has nothing for (``skip``, e.g.
        no layer-wise runner) does not count against it.
        """
        if self.status in (ReportStatus.NOT_A_TREE, ReportStatus.GAP):
            return
        statuses = {r.status for r in self.results}
        if ScenarioStatus.FAIL in statuses:
            self.status = ReportStatus.FAIL
        elif statuses & UNJUDGED:
            self.status = ReportStatus.GAP
            unrun = [r for r in self.results if r.status in UNJUDGED]
            self.error = self.error or (
                f"{len(unrun)} scenario(s) without a verdict, first {unrun[0].name}: "
                f"{unrun[0].note or unrun[0].status}"
            )
        else:
            self.status = ReportStatus.PASS

    def apply_known(self, known: KnownFile) -> None:
        """Mark the findings ``known`` lists and derive the status again: a scenario that failed
        on known findings only no longer fails the check (:func:`regress.check.known.mark`)."""
        self.known = mark(self.results, known)
        self.finish()

    def to_json(self) -> dict[str, Any]:
        # schema 2: known_file, known, fixed, unchecked; each violation's finding and known
        doc = {
            "schema": SCHEMA,
            "source": self.source,
            "era": self.era,
            "status": str(self.status),
            "exit_code": self.exit_code,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "cells": list(self.cells),
            "device": self.device,
            "scenarios": [r.to_json() for r in self.results],
            "sandbox": self.ledger.to_json(),
        }
        return annotate(doc, self.known)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> CheckReport:
        """The report :meth:`to_json` wrote."""
        return cls(
            source=doc["source"],
            era=doc.get("era"),
            status=ReportStatus(doc["status"]),
            error=doc.get("error", ""),
            results=[ScenarioResult.from_json(s) for s in doc.get("scenarios", [])],
            ledger=Ledger.from_json(doc.get("sandbox", {})),
            seconds=float(doc.get("seconds", 0.0)),
            cells=list(doc.get("cells", [])),
            device=doc.get("device", "cpu"),
        )

    def lines(self) -> list[str]:
        """A short human summary: one line per scenario, then the first violation of each."""
        if self.status == ReportStatus.NOT_A_TREE:  # bad input: one line, the cause
            return [f"regress check: {self.error}"]
        native = f", {self.where}" if self.device != "cpu" else ""  # the CPU's line as it was
        head = f"regress check: {self.source} (era {self.era or '?'}{native}): {self.status}"
        head += headline(self.known)
        out = [head]
        if self.error:
            out.append(f"  {self.error}")
        for r in self.results:
            extra = f" ({r.note})" if r.note else ""
            out.append(f"  {r.status:4s} {r.name}{extra}")
            if r.violations:
                v = r.violations[0]
                out.append(f"       {v.details.get('step', '')}: {v.message}")
                if "actual" in v.details:
                    out.append(
                        f"       seen {v.details['actual'][:16]}, expected "
                        f"{v.details['expected'][:16]}"
                    )
        out += text_lines(self.known)
        if self.cells:
            more = f"; matrix: {len(self.cells) - 1} cell(s)" if len(self.cells) > 1 else ""
            out.append(f"  cells: base {self.cells[0]}{more} (--json lists them)")
        fakes = self.ledger.fakes.values()
        kinds: dict[str, int] = {}
        for f in fakes:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        if kinds or self.ledger.real_modules:
            faked = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            absent = sum("(not in the tree)" in f.detail for f in fakes)
            if absent:  # a partial tree: upstream modules a checkout has were stubbed
                faked += f" ({absent} stubbed module(s) not in the tree)"
            out.append(
                f"  real modules: {len(self.ledger.real_modules)}; faked: {faked} (--json lists them)"
            )
        return out
