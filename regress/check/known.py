"""Known findings: the lines of a ``--known`` file, and which findings of a check they match.

A gate that runs ``regress check`` on upstream's own tree would fail every pull request while a
finding waits for its upstream fix, as upstream's CI would without its ``waives.txt``. A known
file lists such findings, one a line, each with its reason; ``regress check --known FILE`` reports
a finding a line matches as ``known`` (it does not fail the check), and a line that matches
nothing any more as ``fixed`` (delete it). See ``docs/known-findings.txt`` for the shipped file.

The format (one finding a line; blank lines and lines starting with ``#`` are ignored)::

    SCENARIO CLASS FIELD [cell=CELL] (REASON)

* ``SCENARIO``: a ``--scenario`` name (``stale_state``), the family of the scenario results
  (``stale_state/DSAtrtllmAttentionMetadata/b4`` belongs to ``stale_state``).
* ``CLASS``: the metadata class the finding is about. The stale-state oracle names it (the
  ``owner`` of a stale field); ``metadata_classes/<Class>`` results are about ``<Class>``; every
  other scenario judges the tree's DSA metadata class, ``DSAtrtllmAttentionMetadata``.
* ``FIELD``: what is wrong. The stale-state oracle names the stale field (``block_table``,
  ``compressed_kv_lens_cuda[4]``); every other finding names the contract it broke, its
  violation's ``check`` (``req_idx_map``, ``indexer_k_slots``, ``announcement_scope``,
  ``upstream_raised``).
* ``cell=CELL`` (optional): the production-matrix cell the finding was seen in. A finding that
  carries a cell (``details["cell"]``) is matched only by a line without a cell or with the same
  one; a finding without a cell (every finding of today's check) is matched whatever the line's
  cell says, so a line written for a cell keeps working before and after cells exist.
* ``(REASON)``: required: why it is known, with a link (an issue, ``docs/findings.md#...``).
  Everything from the first ``(`` to the line's final ``)``; it may hold ``#`` and parentheses.

A line that cannot be read is refused with its file and line number (exit 2) before anything
runs. A line is ``fixed`` only when its scenario ran to a verdict: a scenario not run (another
``--scenario``), or one that could not judge the tree (a gap), says nothing about the line, which
is then listed as ``unchecked``.

Matching works on plain records (a result's name and each violation's ``check`` and
``details``), so it does not depend on how the report is stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.check.results import CALLER_FINDINGS
from regress.errors import UsageError
from regress.tree.source import DSA_METADATA_CLASS

#: The class judged by every scenario that names none: the tree's DSA metadata class.
DEFAULT_CLASS = DSA_METADATA_CLASS
#: A result's status when it failed on known findings only (it does not fail the check).
KNOWN = "known"
#: Result statuses that are a verdict on the tree: a line of such a scenario can be ``fixed``.
_VERDICTS = frozenset({"pass", "fail", "warn", KNOWN})
_NAME = re.compile(r"^[A-Za-z_][\w.\-\[\]:]*$")
_CELL = re.compile(r"^cell=([\w.\-:+,/=]+)$")


class KnownFileError(UsageError):
    """A line of a known file cannot be read (exit 2, nothing run)."""


@dataclass(frozen=True)
class KnownLine:
    """One line of a known file.

    Attributes:
        scenario: the ``--scenario`` name.
        cls: the metadata class.
        field: the stale field, or the contract broken.
        cell: the production-matrix cell, or None (every cell).
        reason: why it is known (a link).
        file: the file, as given.
        line: its 1-based line number.
    """

    scenario: str
    cls: str
    field: str
    cell: str | None
    reason: str
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def finding(self) -> str:
        cell = f" cell={self.cell}" if self.cell else ""
        return f"{self.scenario} {self.cls} {self.field}{cell}"

    def matches(self, found: Finding) -> bool:
        same = (self.scenario, self.cls, self.field) == (found.scenario, found.cls, found.field)
        return same and (self.cell is None or found.cell is None or self.cell == found.cell)

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "scenario": self.scenario,
            "class": self.cls,
            "field": self.field,
            "cell": self.cell,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class KnownFile:
    """The lines of one known file, in file order."""

    path: str
    lines: tuple[KnownLine, ...] = ()


@dataclass(frozen=True)
class Finding:
    """What a known line is matched against: one violation of one scenario result."""

    scenario: str
    cls: str
    field: str
    cell: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "class": self.cls,
            "field": self.field,
            "cell": self.cell,
        }


def finding(result_name: str, check: str, details: dict[str, Any]) -> Finding:
    """The finding a violation ``check``/``details`` of the result ``result_name`` is (see above)."""
    family, _, rest = result_name.partition("/")
    if details.get("owner"):
        cls = str(details["owner"])
    elif family == "metadata_classes" and rest:
        cls = rest.split("/", 1)[0]
    else:
        cls = DEFAULT_CLASS
    what = str(details["field"]) if check == "stale_state" and details.get("field") else check
    cell = details.get("cell")
    return Finding(family, cls, what, None if cell is None else str(cell))


def parse_known(text: str, path: str, scenarios: Sequence[str] | None = None) -> KnownFile:
    """The lines of a known file's ``text``.

    Args:
        text: the file's contents.
        path: its name, for messages and reports.
        scenarios: the valid scenario names; None accepts any.

    Raises:
        KnownFileError: a line cannot be read, names an unknown scenario, or repeats another.
    """
    out: list[KnownLine] = []
    seen: dict[tuple[str, str, str, str | None], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        line = _parse_line(stripped, path, number, scenarios)
        key = (line.scenario, line.cls, line.field, line.cell)
        if key in seen:
            _refuse(path, number, f"repeats line {seen[key]} ({line.finding})", "delete one")
        seen[key] = number
        out.append(line)
    return KnownFile(path, tuple(out))


def load_known(path: str | Path, scenarios: Sequence[str] | None = None) -> KnownFile:
    """:func:`parse_known` of the file at ``path``.

    Raises:
        KnownFileError: the file cannot be read, or one of its lines (see :func:`parse_known`).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnownFileError(
            f"--known {path}: cannot read it ({exc}): give a readable known-findings file"
        ) from exc
    return parse_known(text, str(path), scenarios)


_FORMAT = "SCENARIO CLASS FIELD [cell=CELL] (REASON)"


def _refuse(path: str, number: int, what: str, fix: str) -> None:
    raise KnownFileError(f"--known {path}:{number}: {what}: {fix}; the format is {_FORMAT}")


def _parse_line(text: str, path: str, number: int, scenarios: Sequence[str] | None) -> KnownLine:
    open_at = text.find("(")
    if open_at < 0 or not text.endswith(")"):
        _refuse(path, number, f"no (REASON) at the end of {text[:80]!r}", "add why it is known")
    reason = text[open_at + 1 : -1].strip()
    if not reason:
        _refuse(path, number, "the (REASON) is empty", "say why it is known, with a link")
    words = text[:open_at].split()
    if len(words) not in (3, 4):
        _refuse(path, number, f"{len(words)} word(s) before the reason, not 3 or 4", "fix the line")
    scenario, cls, what = words[:3]
    for name, word in (("scenario", scenario), ("class", cls), ("field", what)):
        if not _NAME.match(word):
            _refuse(path, number, f"{word!r} is not a {name} name", "fix the line")
    if scenarios is not None and scenario not in scenarios:
        _refuse(
            path,
            number,
            f"unknown scenario {scenario!r}",
            f"use one of {', '.join(scenarios)}",
        )
    cell = None
    if len(words) == 4:
        match = _CELL.match(words[3])
        if not match:
            _refuse(path, number, f"{words[3]!r} is not cell=CELL", "fix or drop it")
        cell = match.group(1)
    return KnownLine(scenario, cls, what, cell, reason, path, number)


@dataclass
class KnownOutcome:
    """Which findings of one check the lines of a known file matched.

    Attributes:
        path: the known file.
        lines: all its lines.
        matched: (result index, violation index) -> the line that matched that finding.
        fixed: lines whose scenario ran to a verdict and matched nothing (delete them).
        unchecked: lines whose scenario did not run or could not judge the tree.
    """

    path: str
    lines: tuple[KnownLine, ...] = ()
    matched: dict[tuple[int, int], KnownLine] = field(default_factory=dict)
    fixed: list[KnownLine] = field(default_factory=list)
    unchecked: list[KnownLine] = field(default_factory=list)

    def count(self, line: KnownLine) -> int:
        """How many findings ``line`` matched."""
        return sum(1 for m in self.matched.values() if m == line)

    @property
    def used(self) -> list[KnownLine]:
        """The lines that matched at least one finding, in file order."""
        hit = set(self.matched.values())
        return [line for line in self.lines if line in hit]


def mark(results: Sequence[Any], known: KnownFile) -> KnownOutcome:
    """Match the findings of ``results`` against ``known``; a result that failed on known
    findings only gets the status ``known`` (so the check's verdict no longer counts it), and
    each result's violations are put in order, those no line matches first.

    Args:
        results: scenario results (``name``, ``status``, ``violations`` with ``check`` and
            ``details``), in report order.
        known: the parsed file.
    """
    outcome = KnownOutcome(known.path, known.lines)
    for i, result in enumerate(results):
        found = [finding(result.name, v.check, v.details) for v in result.violations]
        lines = [next((ln for ln in known.lines if ln.matches(f)), None) for f in found]
        # unknown findings first (stable): the summaries show a result's first finding, which
        # must be one that fails when there is one
        order = sorted(range(len(found)), key=lambda j: lines[j] is not None)
        result.violations[:] = [result.violations[j] for j in order]
        for j, was in enumerate(order):
            if lines[was] is not None:
                outcome.matched[i, j] = lines[was]
        failing = [j for j, v in enumerate(result.violations) if v.check not in CALLER_FINDINGS]
        if result.status == "fail" and failing and all((i, j) in outcome.matched for j in failing):
            result.status = KNOWN
    used = set(outcome.matched.values())
    for line in known.lines:
        if line in used:
            continue
        family = [r for r in results if r.name.partition("/")[0] == line.scenario]
        judged = family and all(r.status in _VERDICTS for r in family)
        (outcome.fixed if judged else outcome.unchecked).append(line)
    return outcome


def annotate(doc: dict[str, Any], outcome: KnownOutcome | None) -> dict[str, Any]:
    """Add the known-findings view to a report's JSON document (schema 2) and return it.

    Top level: ``known_file`` (or null), ``known`` (the lines that matched, with how many
    findings each), ``fixed`` and ``unchecked`` (lines). Each violation: ``finding`` (scenario,
    class, field, cell: what a line would name) and ``known`` (``FILE:LINE`` of the line that
    matched it, or null).
    """
    doc["known_file"] = outcome.path if outcome else None
    doc["known"] = (
        [{**line.to_json(), "findings": outcome.count(line)} for line in outcome.used]
        if outcome
        else []
    )
    doc["fixed"] = [line.to_json() for line in outcome.fixed] if outcome else []
    doc["unchecked"] = [line.to_json() for line in outcome.unchecked] if outcome else []
    for i, scenario in enumerate(doc.get("scenarios", [])):
        for j, v in enumerate(scenario.get("violations", [])):
            found = finding(scenario["name"], v["check"], v.get("details", {}))
            line = outcome.matched.get((i, j)) if outcome else None
            v["finding"] = found.to_json()
            v["known"] = line.where if line else None
    return doc


def text_lines(outcome: KnownOutcome | None) -> list[str]:
    """The human summary's lines about the known file (none without one)."""
    if outcome is None:
        return []
    out = []
    for line in outcome.used:
        out.append(
            f"  known {line.finding}: {outcome.count(line)} finding(s), {line.where} "
            f"({line.reason})"
        )
    for line in outcome.fixed:
        out.append(f"  fixed {line.finding}: {line.where} matches nothing now: delete the line")
    for line in outcome.unchecked:
        out.append(f"  unchecked {line.finding}: {line.where} (its scenario gave no verdict)")
    return out


def headline(outcome: KnownOutcome | None) -> str:
    """What the verdict's line adds: how many findings were known, how many lines are fixed."""
    if outcome is None or not (outcome.matched or outcome.fixed):
        return ""
    parts = [f"{len(outcome.matched)} known finding(s)"] if outcome.matched else []
    parts += [f"{len(outcome.fixed)} known line(s) fixed"] if outcome.fixed else []
    return f" ({', '.join(parts)})"


def md_cell(text: object) -> str:
    """``text`` as one Markdown table cell (pipes escaped, on one line)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_lines(outcome: KnownOutcome | None) -> list[str]:
    """The job summary's section about the known file (none without one)."""
    if outcome is None:
        return []
    out = ["", f"**Known findings** (`{outcome.path}`)", ""]
    if outcome.used:
        out += ["| line | finding | seen | reason |", "|---|---|---|---|"]
        out += [
            f"| {ln.line} | `{md_cell(ln.finding)}` | {outcome.count(ln)} | {md_cell(ln.reason)} |"
            for ln in outcome.used
        ]
    else:
        out.append("No finding of this check is listed.")
    if outcome.fixed:
        out += [
            "",
            f"**Fixed**: these lines of `{outcome.path}` match nothing now; delete them:",
            "",
        ]
        out += [
            f"- line {ln.line}: `{md_cell(ln.finding)}` ({md_cell(ln.reason)})"
            for ln in outcome.fixed
        ]
    if outcome.unchecked:
        out += ["", "Not checked (their scenario gave no verdict): "]
        out[-1] += ", ".join(f"line {ln.line} `{md_cell(ln.finding)}`" for ln in outcome.unchecked)
    return out


__all__ = [
    "DEFAULT_CLASS",
    "KNOWN",
    "Finding",
    "KnownFile",
    "KnownFileError",
    "KnownLine",
    "KnownOutcome",
    "annotate",
    "finding",
    "headline",
    "load_known",
    "mark",
    "markdown_lines",
    "md_cell",
    "parse_known",
    "text_lines",
]
