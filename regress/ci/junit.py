"""JUnit XML from CI stages: parse untrusted files safely, merge shards per stage, summarise.

Upstream Jenkins runs pytest with ``--junit-xml <stage>/results.xml`` per stage (and reruns into
separate files); dashboards want one file with one suite per stage, and PR comments want a short
table plus what broke since a baseline. The files arrive from CI nodes, so they are untrusted:
``xml.etree`` would happily expand internal entities (the "billion laughs" bomb), and defusedxml
is not a dependency, so :func:`parse_xml` drives expat itself and refuses any DTD outright.
pytest never writes one, so refusing is free.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path

from regress.errors import UsageError

MAX_XML_BYTES = 256 * 1024 * 1024
# File names too generic to name a stage: Jenkins writes <stage>/results.xml.
_GENERIC_STEMS = {"results", "result", "junit", "report", "test-results", "test_results", "pytest"}
_STAGE_ARG = re.compile(r"(?P<stage>[A-Za-z0-9][A-Za-z0-9_.-]{0,99})=(?P<path>.+)")
OUTCOMES = ("passed", "failed", "error", "skipped")


class JunitFileError(UsageError):
    """One input file is unreadable, not XML, hostile, or not JUnit; names the file."""

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        super().__init__(f"{source}: {message}")


class _Refused(Exception):
    pass


def parse_xml(data: bytes, *, source: str):
    """Parse XML bytes into an element tree with no DTD, no entities, no external references.

    Returns an element of the ElementTree flavour junitparser uses (lxml if installed, else the
    standard library), so junitparser can wrap and write it.

    Raises:
        JunitFileError: malformed XML, or any DOCTYPE/ENTITY declaration.
    """
    from xml.parsers import expat

    from junitparser.junitparser import etree

    builder = etree.TreeBuilder()
    parser = expat.ParserCreate()

    def refuse(*_args: object) -> None:
        raise _Refused("DTD and entity declarations are refused (JUnit XML never needs them)")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
        return builder.close()
    except _Refused as exc:
        raise JunitFileError(source, f"refused at line {parser.CurrentLineNumber}: {exc}") from None
    except expat.ExpatError as exc:
        reason = expat.ErrorString(exc.code)
        raise JunitFileError(
            source, f"not well-formed XML (line {exc.lineno}, column {exc.offset}): {reason}"
        ) from None
    except AssertionError as exc:  # TreeBuilder.close() on an unfinished document
        raise JunitFileError(source, f"incomplete XML document: {exc}") from None


def load(path: Path):
    """Read one JUnit file into a ``junitparser.JUnitXml`` (a ``<testsuite>`` root is wrapped)."""
    from junitparser import JUnitXml
    from junitparser.junitparser import JUnitXmlError

    source = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_XML_BYTES:
            raise JunitFileError(source, f"{size} bytes is over the {MAX_XML_BYTES}-byte limit")
        data = path.read_bytes()
    except OSError as exc:
        raise JunitFileError(source, f"cannot read: {exc.strerror or exc}") from None
    root = parse_xml(data, source=source)
    try:
        xml = JUnitXml.fromroot(root)
    except JUnitXmlError:
        raise JunitFileError(
            source, f"root element is <{root.tag}>, expected <testsuites> or <testsuite>"
        ) from None
    xml.filepath = source
    return xml


def parse_input(arg: str) -> tuple[str | None, Path]:
    """``STAGE=PATH`` or ``PATH`` (an existing file whose name contains '=' stays a path)."""
    match = _STAGE_ARG.fullmatch(arg)
    if match and not Path(arg).exists():
        return match["stage"], Path(match["path"])
    return None, Path(arg)


def stage_from_path(path: Path) -> str:
    """``H200-PyTorch-1/results.xml`` -> ``H200-PyTorch-1``; ``CPU-Unit-1.xml`` -> ``CPU-Unit-1``."""
    if path.stem.lower() in _GENERIC_STEMS and path.parent.name:
        return path.parent.name
    return path.stem


def suite_stage(suite_name: str | None, path: Path, override: str | None) -> str:
    """The stage a suite belongs to: explicit ``STAGE=``, its own name, or its file's name.

    pytest names every suite ``pytest`` unless ``-o junit_suite_name=`` was given, so that name
    carries no information and the file name is used instead.
    """
    if override:
        return override
    if suite_name and suite_name != "pytest":
        return suite_name
    return stage_from_path(path)


@dataclass(frozen=True)
class CaseResult:
    """One test case as the summary sees it."""

    stage: str
    test_id: str
    outcome: str  # one of OUTCOMES
    message: str
    time: float


def _outcome(case) -> tuple[str, str]:
    from junitparser import Error, Failure, Skipped

    kinds = [(Error, "error"), (Failure, "failed"), (Skipped, "skipped")]
    for cls, outcome in kinds:
        for result in case.result:
            if isinstance(result, cls):
                text = result.message or (result.text or "").strip().splitlines()[:1]
                return outcome, text if isinstance(text, str) else (text[0] if text else "")
    return "passed", ""


def case_results(xml, path: Path, override: str | None = None) -> list[CaseResult]:
    """Flatten a JUnit document into per-case results tagged with their stage."""
    results = []
    for suite in xml:
        stage = suite_stage(suite.name, path, override)
        for case in suite:
            test_id = f"{case.classname}::{case.name}" if case.classname else str(case.name)
            outcome, message = _outcome(case)
            results.append(CaseResult(stage, test_id, outcome, message or "", case.time or 0.0))
    return results


@dataclass
class Loaded:
    """The files that parsed, and a message per file that did not."""

    documents: list[tuple[str | None, Path, object]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_all(inputs: Sequence[tuple[str | None, Path]], *, keep_going: bool) -> Loaded:
    """Load every input; without ``keep_going`` the first bad file raises."""
    loaded = Loaded()
    for override, path in inputs:
        try:
            loaded.documents.append((override, path, load(path)))
        except JunitFileError as exc:
            if not keep_going:
                raise UsageError(f"{exc} (use --keep-going to merge the other files)") from None
            loaded.problems.append(str(exc))
    return loaded


def merge(loaded: Loaded):
    """One ``JUnitXml`` with one suite per stage; shards of a stage are concatenated.

    Counts (tests/failures/errors/skipped/time) are recomputed from the cases, and each suite
    records the files it came from as ``regress.source`` properties.
    """
    from junitparser import JUnitXml, TestSuite

    merged = JUnitXml(name="regress")
    suites: dict[str, TestSuite] = {}
    for override, path, xml in loaded.documents:
        for suite in xml:
            stage = suite_stage(suite.name, path, override)
            target = suites.get(stage)
            if target is None:
                target = suites[stage] = TestSuite(stage)
                target.hostname = suite.hostname
                target.timestamp = suite.timestamp
            target.add_property("regress.source", str(path))
            for case in suite:
                target.append(deepcopy(case))
    for suite in suites.values():
        suite.update_statistics()
        merged.append(suite)
    merged.update_statistics()
    return merged


def to_bytes(xml) -> bytes:
    """The document as bytes, for :func:`regress.files.write_atomic` (the one atomic writer)."""
    import io

    buffer = io.BytesIO()
    xml.write(buffer)
    return buffer.getvalue()


@dataclass
class StageCounts:
    """One row of the summary table."""

    stage: str
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    time: float = 0.0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.error + self.skipped


@dataclass
class Summary:
    """Per-stage counts, failures, and (with a baseline) what newly broke and what got fixed."""

    stages: list[StageCounts]
    failures: list[CaseResult]
    new_failures: list[CaseResult] | None = None
    fixed: list[CaseResult] | None = None
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        def rows(cases: list[CaseResult] | None) -> list[dict] | None:
            if cases is None:
                return None
            return [
                {"stage": c.stage, "test": c.test_id, "outcome": c.outcome, "message": c.message}
                for c in cases
            ]

        return {
            "schema": 1,
            "stages": [
                {
                    "stage": s.stage,
                    "passed": s.passed,
                    "failed": s.failed,
                    "error": s.error,
                    "skipped": s.skipped,
                    "total": s.total,
                    "time": round(s.time, 3),
                }
                for s in self.stages
            ],
            "failures": rows(self.failures),
            "new_failures": rows(self.new_failures),
            "fixed": rows(self.fixed),
            "problems": list(self.problems),
        }


def results_of(loaded: Loaded) -> list[CaseResult]:
    return [
        r for override, path, xml in loaded.documents for r in case_results(xml, path, override)
    ]


def summarize(current: list[CaseResult], baseline: list[CaseResult] | None = None) -> Summary:
    """Count outcomes per stage; compare failures by ``(stage, test id)`` against a baseline.

    A test that appears twice in a stage (a rerun file) counts by its last result for the
    comparison; the table counts every case, matching the XML's own totals.
    """
    stages: dict[str, StageCounts] = {}
    for result in current:
        row = stages.setdefault(result.stage, StageCounts(result.stage))
        setattr(row, result.outcome, getattr(row, result.outcome) + 1)
        row.time += result.time
    failing = ("failed", "error")
    failures = [r for r in current if r.outcome in failing]
    summary = Summary(sorted(stages.values(), key=lambda s: s.stage), failures)
    if baseline is not None:
        now = {(r.stage, r.test_id): r for r in current}
        before = {(r.stage, r.test_id): r for r in baseline}
        summary.new_failures = [
            r
            for key, r in now.items()
            if r.outcome in failing and (key not in before or before[key].outcome not in failing)
        ]
        summary.fixed = [
            r
            for key, r in now.items()
            if r.outcome == "passed" and key in before and before[key].outcome in failing
        ]
    return summary


def _md(text: str, limit: int = 200) -> str:
    """Neutralise untrusted text for a Markdown table cell posted to a PR."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    for raw, safe in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("@", "&#64;")):
        text = text.replace(raw, safe)
    return text.replace("`", "'")


def render_markdown(summary: Summary, *, max_rows: int = 50) -> str:
    """A PR-comment body: stage table, failures, and the baseline comparison."""
    lines = [
        "## Test results",
        "",
        "| stage | passed | failed | errors | skipped | total | time (s) |",
    ]
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for s in summary.stages:
        lines.append(
            f"| {_md(s.stage)} | {s.passed} | {s.failed} | {s.error} | {s.skipped} | {s.total} "
            f"| {s.time:.1f} |"
        )

    def section(title: str, cases: list[CaseResult]) -> None:
        lines.extend(["", f"### {title} ({len(cases)})", ""])
        if not cases:
            lines.append("None.")
            return
        lines.extend(["| stage | test | message |", "|---|---|---|"])
        for c in cases[:max_rows]:
            lines.append(f"| {_md(c.stage)} | {_md(c.test_id, 300)} | {_md(c.message)} |")
        if len(cases) > max_rows:
            lines.append(f"\n... and {len(cases) - max_rows} more")

    if summary.new_failures is not None and summary.fixed is not None:
        section("New failures vs baseline", summary.new_failures)
        section("Fixed vs baseline", summary.fixed)
    section("Failures", summary.failures)
    if summary.problems:
        lines.extend(["", "### Unreadable result files", ""])
        lines.extend(f"- {_md(p, 300)}" for p in summary.problems)
    return "\n".join(lines) + "\n"


def render_text(summary: Summary) -> str:
    """The same content for a terminal."""
    width = max([len(s.stage) for s in summary.stages] + [5])
    head = f"{'stage':<{width}}  passed  failed  errors  skipped  total"
    lines = [head]
    for s in summary.stages:
        lines.append(
            f"{s.stage:<{width}}  {s.passed:>6}  {s.failed:>6}  {s.error:>6}  {s.skipped:>7}  {s.total:>5}"
        )
    groups = [("failures", summary.failures)]
    if summary.new_failures is not None and summary.fixed is not None:
        groups = [
            ("new failures vs baseline", summary.new_failures),
            ("fixed vs baseline", summary.fixed),
            *groups,
        ]
    for title, cases in groups:
        lines.append(f"\n{title} ({len(cases)}):")
        lines.extend(
            f"  [{c.stage}] {c.test_id}: {' '.join(c.message.split())[:200]}" for c in cases
        )
    lines.extend(f"\nunreadable: {p}" for p in summary.problems)
    return "\n".join(lines) + "\n"
