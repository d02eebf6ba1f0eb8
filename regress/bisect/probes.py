"""Probes: how one finished run of the user's command becomes a verdict (or a number).

Every probe gets the argv the user gave after ``--`` (never a shell string we build), may add to it
(the pytest probe injects ``--junitxml``), and classifies the finished process from its exit code,
its output or the files it wrote. Running the process is :mod:`regress.bisect.runner`'s job.
"""

from __future__ import annotations

import errno
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from regress.bisect.causes import CAUSE, DID_NOT_RUN, SHELL_NOT_RUN, SKIP_EXIT_CODE, Cause
from regress.bisect.verdicts import Outcome, Verdict
from regress.errors import UsageError


@dataclass
class Finished:
    """A finished probe process, as the runner hands it to a probe."""

    exit_code: int | None  # negative: killed by that signal; None: could not start
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""  # why it could not start
    errno: int | None = None  # the OS error number when it could not start
    scratch: Path | None = None  # a private directory for files the probe asked for


class Probe(Protocol):
    """Turns a finished run into an :class:`Outcome`.

    A probe may also have a ``fixes`` attribute: a mapping from the causes it records (in
    ``Outcome.details``) to the likely fix, which an endpoint error then names
    (:mod:`regress.bisect.diagnosis`), as it does for the causes of :class:`Cause`.
    """

    kind: str

    def argv(self, command: list[str], scratch: Path) -> list[str]: ...

    def classify(self, run: Finished) -> Outcome: ...

    def config(self) -> dict[str, Any]:
        """Everything about the probe that can change a verdict (part of the store key)."""
        ...


def not_run(run: Finished, timeout_reason: str = "timeout") -> Outcome | None:
    """The outcome of a run that says nothing about the commit, or ``None``.

    A run that could not start, or whose shell answered 126/127, never ran the probe: it is a skip
    marked ``did_not_run`` so the store never replays it (fixing the cause is believed at once).
    ``git bisect run`` likewise refuses to start on 126/127 ("unable to verify %s on good
    revision", git ``builtin/bisect.c``, ``bisect_run``) instead of calling the commit bad.
    """
    if run.exit_code is None and not run.timed_out:
        cause = {
            errno.EACCES: Cause.NOT_EXECUTABLE.value,
            errno.ENOEXEC: Cause.NOT_EXECUTABLE.value,
        }.get(
            run.errno or 0,
            Cause.NOT_FOUND.value if run.errno == errno.ENOENT else Cause.NOT_STARTED.value,
        )
        return Outcome(
            Verdict.SKIP,
            f"could not start: {run.error}",
            details={DID_NOT_RUN: "could not start", CAUSE: cause},
        )
    if run.exit_code in SHELL_NOT_RUN and not run.timed_out:
        why = SHELL_NOT_RUN[run.exit_code]
        return Outcome(
            Verdict.SKIP,
            f"exit {run.exit_code} ({why}: the probe did not run)",
            exit_code=run.exit_code,
            details={
                DID_NOT_RUN: why,
                CAUSE: Cause.NOT_FOUND.value
                if run.exit_code == 127
                else Cause.NOT_EXECUTABLE.value,
            },
        )
    if run.timed_out:
        return Outcome(
            Verdict.SKIP,
            timeout_reason,
            exit_code=run.exit_code,
            details={"timeout": True, CAUSE: Cause.TIMEOUT.value},
        )
    return None


def _crash(code: int) -> bool:
    return code < 0 or code >= 128


@dataclass
class ExitCodeProbe:
    """git bisect run's contract: 0 good, 125 skip, 1..127 bad, >= 128 or a signal a crash.

    126 and 127 are the shell saying it could not run the command: a skip that is never
    replayed (see :func:`not_run`), not a bad commit.

    A crash is a skip unless ``crash_is_bad``: a segfault at an unrelated commit should not be
    blamed for the regression we are after.
    """

    crash_is_bad: bool = False
    kind: str = "exit-code"

    def argv(self, command: list[str], scratch: Path) -> list[str]:
        return list(command)

    def classify(self, run: Finished) -> Outcome:
        early = not_run(run)
        if early:
            return early
        code = run.exit_code
        assert code is not None
        if code == 0:
            return Outcome(Verdict.GOOD, "exit 0", exit_code=code)
        if code == SKIP_EXIT_CODE:
            return Outcome(
                Verdict.SKIP,
                f"exit {SKIP_EXIT_CODE} (skip)",
                exit_code=code,
                details={CAUSE: Cause.ASKED_SKIP.value},
            )
        if _crash(code):
            what = f"signal {-code}" if code < 0 else f"exit {code}"
            if self.crash_is_bad:
                return Outcome(Verdict.BAD, f"crash ({what})", exit_code=code)
            return Outcome(
                Verdict.SKIP, f"crash ({what})", exit_code=code, details={CAUSE: Cause.CRASH.value}
            )
        return Outcome(Verdict.BAD, f"exit {code}", exit_code=code)

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "crash_is_bad": self.crash_is_bad}


_TOKEN = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


def last_line(text: str, *, limit: int = 300) -> str:
    """The last non-blank line of a probe's stderr, for a one-line reason (or say there is none)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "its stderr is empty"
    line = lines[-1]
    return f"its last stderr line: {line[:limit]}{'...' if len(line) > limit else ''}"


def json_path(data: Any, path: str) -> Any:
    """Follow a dotted path with list indices, e.g. ``runs[1].score``.

    Raises:
        KeyError: naming the first step that does not exist.
    """
    node = data
    pos = 0
    for match in _TOKEN.finditer(path):
        if match.start() != pos and path[pos : match.start()] != ".":
            raise KeyError(f"cannot parse {path!r} near {path[pos:]!r}")
        pos = match.end()
        key, index = match.groups()
        try:
            if index is not None:
                node = node[int(index)]
            elif isinstance(node, list) and key.lstrip("-").isdigit():
                node = node[int(key)]
            else:
                node = node[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise KeyError(f"{path!r}: no {match.group(0)!r} here") from exc
    if pos != len(path):
        raise KeyError(f"cannot parse {path!r} near {path[pos:]!r}")
    return node


def find_json(text: str) -> Any:
    """The JSON document in a command's stdout: all of it, else its last JSON line."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line[:1] in "{[":
            try:
                return json.loads(line)
            except ValueError:
                continue
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        return json.loads(text[start : end + 1])
    raise ValueError("no JSON document in the output")


@dataclass
class MetricProbe:
    """A number per run, from the command's JSON output (a dotted path) or a regex.

    Without ``threshold`` the outcome carries only the value (verdict ``None``) and the metric
    judge decides from the distributions. With it, each run is judged alone: worse than the
    threshold (per ``direction``: +1 higher is better, -1 lower is better) is bad.
    """

    path: str | None = None
    regex: str | None = None
    threshold: float | None = None
    direction: int | None = None
    kind: str = "metric"

    def __post_init__(self) -> None:
        if (self.path is None) == (self.regex is None):
            raise UsageError(
                "the metric probe needs exactly one of --metric PATH or --metric-regex RE"
            )
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise UsageError(
                    f"--metric-regex {self.regex!r} is not a valid regex: {exc}"
                ) from exc
        if self.threshold is not None and self.direction is None:
            raise UsageError("--threshold needs --higher-is-better or --lower-is-better")

    def argv(self, command: list[str], scratch: Path) -> list[str]:
        return list(command)

    def value(self, run: Finished) -> float:
        if self.regex is not None:
            matches = list(re.finditer(self.regex, run.stdout + "\n" + run.stderr))
            if not matches:
                raise ValueError(f"--metric-regex {self.regex!r} matched nothing")
            last = matches[-1]
            raw = last.group(1) if last.groups() else last.group(0)
        else:
            raw = json_path(find_json(run.stdout), self.path or "")
        number = float(raw)
        if not math.isfinite(number):
            raise ValueError(f"the metric is {number}")
        return number

    def classify(self, run: Finished) -> Outcome:
        # A value counts even on a nonzero exit: `regress accept` exits 1 on a regression and
        # still prints its report.
        try:
            value = self.value(run)
        except (ValueError, KeyError, TypeError) as exc:
            early = not_run(run)
            why = exc.args[0] if isinstance(exc, KeyError) else exc
            if early is None and run.exit_code:  # it failed: its exit and error, not --metric
                return Outcome(
                    Verdict.SKIP,
                    f"exit {run.exit_code} and no metric ({why}); {last_line(run.stderr)}",
                    exit_code=run.exit_code,
                    details={CAUSE: Cause.PROBE_FAILED.value},
                )
            return early or Outcome(
                Verdict.SKIP,
                f"no metric: {why}",
                exit_code=run.exit_code,
                details={CAUSE: Cause.NO_METRIC.value},
            )
        if self.threshold is None:
            return Outcome(None, f"measured {value:.6g}", exit_code=run.exit_code, value=value)
        assert self.direction is not None
        bad = (value - self.threshold) * self.direction < 0
        verdict = Verdict.BAD if bad else Verdict.GOOD
        side = "worse" if bad else "not worse"
        return Outcome(
            verdict,
            f"{value:.6g} {side} than {self.threshold:g}",
            exit_code=run.exit_code,
            value=value,
        )

    def config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "regex": self.regex,
            "threshold": self.threshold,
            "direction": self.direction,
        }


@dataclass
class PytestProbe:
    """Run a pytest command with a JUnit file injected and classify from the file.

    passed: good; any failure: bad; errors, skips or nothing collected: skip (the test could not
    say anything about this commit).
    """

    kind: str = "pytest"

    def argv(self, command: list[str], scratch: Path) -> list[str]:
        return [*command, f"--junitxml={scratch / 'junit.xml'}"]

    def classify(self, run: Finished) -> Outcome:
        early = not_run(run)
        if early:
            return early
        path = (run.scratch or Path(".")) / "junit.xml"
        counts = junit_counts(path)
        if counts is None:
            return Outcome(
                Verdict.SKIP,
                f"no JUnit report (exit {run.exit_code})",
                exit_code=run.exit_code,
                details={CAUSE: Cause.NO_JUNIT.value},
            )
        details: dict[str, Any] = {"junit": counts}
        if counts["failed"]:
            verdict, reason = Verdict.BAD, f"{counts['failed']} failed"
        elif counts["error"] or counts["skipped"] or not counts["passed"]:
            verdict = Verdict.SKIP
            reason = (
                f"{counts['error']} errors, {counts['skipped']} skipped, {counts['passed']} passed"
            )
            details[CAUSE] = Cause.NO_TEST_RESULT.value
        else:
            verdict, reason = Verdict.GOOD, f"{counts['passed']} passed"
        return Outcome(verdict, reason, exit_code=run.exit_code, details=details)

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind}


def junit_counts(path: Path) -> dict[str, int] | None:
    """passed/failed/error/skipped test cases in a JUnit file, or ``None`` if unreadable."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    try:
        xml = JUnitXml.fromfile(str(path))
    except Exception:  # missing, empty or torn file: the run said nothing usable
        return None
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    for suite in suites:
        for case in suite:
            results = case.result
            if any(isinstance(r, Failure) for r in results):
                counts["failed"] += 1
            elif any(isinstance(r, Error) for r in results):
                counts["error"] += 1
            elif any(isinstance(r, Skipped) for r in results):
                counts["skipped"] += 1
            else:
                counts["passed"] += 1
    return counts
