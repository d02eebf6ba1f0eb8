"""The bisect result and its renderings: JSON (schema 1), JUnit XML and a markdown PR comment."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from regress.bisect.git import CommitInfo
from regress.errors import OK, UNFINISHED

SCHEMA = 1


@dataclass
class Step:
    """Everything one commit went through: one entry per probe execution."""

    commit: str
    position: int
    subject: str = ""
    verdicts: list[str] = field(default_factory=list)  # the probe's verdicts, in the user's terms
    values: list[float] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)  # what the search concluded (good/bad/skip)
    cached: int = 0  # runs answered from the store (resume)


@dataclass
class BisectResult:
    """The outcome of ``regress bisect``; ``exit_code`` is what the CLI exits with."""

    status: str  # found | ambiguous | inconclusive | interrupted
    good: str
    bad: str
    commits: int
    culprit: CommitInfo | None
    confidence: float
    probes: int  # probe executions behind this answer, cached ones included
    cached: int
    steps: list[Step]
    strategy: str
    find_fix: bool = False
    candidates: list[CommitInfo] = field(default_factory=list)
    switched: str | None = None
    rates: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    command: list[str] = field(default_factory=list)
    probe: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return OK if self.status == "found" else UNFINISHED

    @property
    def what(self) -> str:
        return "fix" if self.find_fix else "culprit"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA
        data["kind"] = self.what
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    def summary(self, *, warnings: bool = True) -> str:
        """A few plain lines for the terminal.

        Args:
            warnings: end with the warnings; the CLI leaves them out when its live progress
                already showed each one (said once, not twice).
        """
        head = f"first {'fixed' if self.find_fix else 'bad'} commit"
        if self.culprit:
            c = self.culprit
            lines = [
                f"{head}: {c.sha} (confidence {self.confidence:.3f})",
                f"    {c.subject}",
                f"    Author: {c.author}",
                f"    Date:   {c.date}",
            ]
            lines += [f"    {row}" for row in c.diffstat.splitlines()]
        elif self.candidates:
            lines = [f"{head} could be any of {len(self.candidates)} commits (untestable between):"]
            lines += [f"    {c.short} {c.subject}" for c in self.candidates[:20]]
        else:
            lines = [f"no {self.what} found: {self.status}"]
        lines.append(
            f"{self.probes} probe runs ({self.cached} from cache) over {self.commits} commits, "
            f"{self.strategy} search, {self.elapsed_s:.1f}s"
        )
        if self.switched:
            lines.append(f"switched to flaky mode: {self.switched}")
        if self.rates:
            lines.append(
                ", ".join(f"{k.replace('_', '-')} rate {v:.3f}" for k, v in self.rates.items())
            )
        lines += [f"note: {n}" for n in self.notes if not n.startswith("switched")]
        lines += [f"warning: {w}" for w in self.warnings] if warnings else []
        return "\n".join(lines)


def to_junit(result: BisectResult) -> str:
    """The bisect as a JUnit suite that a CI reporter shows green exactly when it succeeded.

    One testcase per probed commit, named with its verdict: a bad commit is what the bisect
    looked for, not a failed test, so it passes (a found culprit used to make the report red
    with a failure per bad commit); an untestable one is skipped. A last testcase, ``outcome``,
    carries the verdict on the whole: it fails when the bisect gave no answer (exit 3).
    """
    from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

    suite = TestSuite(f"regress-bisect {result.good[:12]}..{result.bad[:12]}")
    for step in result.steps:
        runs = ", ".join(f"{v} ({r})" for v, r in zip(step.verdicts, step.reasons, strict=False))
        judged = set(step.judged or step.verdicts)
        verdict = "bad" if "bad" in judged else "good" if "good" in judged else "untestable"
        if not step.judged and not step.verdicts:
            verdict = "not judged"
        name = f"{step.commit[:12]} [{verdict}] {step.subject}".strip()
        case = TestCase(name, classname="regress.bisect")
        if verdict in ("untestable", "not judged"):
            case.result = [Skipped(f"{verdict}: {runs}" if runs else verdict)]
        case.system_out = runs
        suite.add_testcase(case)
    outcome = TestCase("outcome", classname="regress.bisect")
    summary = result.summary().splitlines()[0]
    if result.exit_code != 0:
        outcome.result = [Failure(f"{result.status}: {summary}")]
    outcome.system_out = summary
    suite.add_testcase(outcome)
    suite.add_property("status", result.status)
    if result.culprit:
        suite.add_property("culprit", result.culprit.sha)
    suite.add_property("confidence", f"{result.confidence:.4f}")
    suite.add_property("probes", str(result.probes))
    xml = JUnitXml()
    xml.add_testsuite(suite)
    text = xml.tostring()
    return text.decode() if isinstance(text, bytes) else str(text)


def to_markdown(result: BisectResult) -> str:
    """A PR comment: the answer first, then every probed commit."""
    title = "Fix" if result.find_fix else "Culprit"
    lines = [f"### regress bisect: {result.status}", ""]
    if result.culprit:
        c = result.culprit
        lines += [
            f"**{title}:** `{c.sha[:12]}` {c.subject}  ",
            f"**Author:** {c.author}, {c.date}  ",
            f"**Confidence:** {result.confidence:.3f} after {result.probes} probe runs "
            f"({result.strategy} search over {result.commits} commits)",
            "",
            "```",
            c.diffstat.strip(),
            "```",
        ]
    elif result.candidates:
        lines.append(f"The {result.what} is one of these untestable commits:")
        lines += [f"- `{c.short}` {c.subject}" for c in result.candidates]
    else:
        lines.append(f"No {result.what} found after {result.probes} probe runs.")
    lines += ["", "| commit | subject | runs | search verdict |", "|---|---|---|---|"]
    for s in sorted(result.steps, key=lambda s: s.position):
        runs = " ".join(s.verdicts) if not s.values else " ".join(f"{v:.4g}" for v in s.values)
        subject = s.subject.replace("|", "\\|")
        lines.append(f"| `{s.commit[:12]}` | {subject} | {runs} | {', '.join(s.judged)} |")
    for w in result.warnings:
        lines += ["", f"> warning: {w}"]
    return "\n".join(lines) + "\n"
