"""Why the probe could not judge an endpoint: the cause from its runs, their logs, the likely fix.

The search only sees verdicts, so its endpoint error says "0 passed, 0 failed, 3 skipped" whatever
went wrong. The runs themselves know more (each :class:`~regress.bisect.verdicts.Outcome` carries a
``cause`` (:mod:`regress.bisect.causes`) and the path of its log), and so does the repository:
the most common mistake, ``-- ./probe.sh`` with an untracked script, fails only because probes
run in a private clone of each commit, where the script is absent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from regress.bisect.causes import CAUSE, SKIP_EXIT_CODE, Cause
from regress.bisect.git import git
from regress.bisect.verdicts import Outcome

#: The likely fix per ``Outcome.details["cause"]``.
FIXES = {
    Cause.NOT_FOUND: "check the command's spelling and PATH (a relative path is looked up in "
    "the private clone of the commit)",
    Cause.NOT_EXECUTABLE: "make it executable (chmod +x) or name its interpreter (-- sh PROBE)",
    Cause.NOT_STARTED: "check the command can start by hand",
    Cause.TIMEOUT: "raise --timeout, or make the probe faster",
    Cause.BUILD_FAILED: "run the --build command by hand in a checkout of that commit and fix "
    "it (or its --overlay files)",
    Cause.ASKED_SKIP: f"the probe itself said it cannot test that commit (exit {SKIP_EXIT_CODE})",
    Cause.CRASH: "the probe crashed: read the log, or pass --crash-is-bad if the crash is the "
    "problem you are after",
    Cause.NO_METRIC: "check --metric / --metric-regex against what the probe prints (its "
    "standard output is the log)",
    Cause.PROBE_FAILED: "the probe failed before it printed a result: run it by hand in a "
    "checkout of that commit and fix what its error says",
    Cause.NO_JUNIT: "the pytest probe needs a pytest command line (it adds --junitxml)",
    Cause.NO_TEST_RESULT: "no test passed or failed there: check the test ids and the log",
}


def explain(
    message: str,
    *,
    sha: str,
    outcomes: Sequence[Outcome],
    command: Sequence[str],
    repo: Path,
    fixes: Mapping[str, str] | None = None,
) -> str:
    """``message`` (the search's endpoint error) with the cause, the log and the likely fix.

    Args:
        message: what the search said about the endpoint.
        sha: the endpoint commit.
        outcomes: every run at that commit, oldest first.
        command: the probe command (to find files that the commit lacks).
        repo: the user's checkout.
        fixes: the probe's own likely fixes by cause, beside :data:`FIXES`.

    Returns:
        One line, cause first: the last run's cause, its fix and log, then what the search
        concluded from it, then files of the command that the commit lacks (a hint: a build
        that fails or a launcher that is missing is not cured by committing the probe).
    """
    parts = []
    if outcomes:
        last = outcomes[-1]
        cause = f"last run at {sha[:12]}: {last.reason}"
        fix = {**FIXES, **(fixes or {})}.get(last.details.get(CAUSE, ""))
        if fix:
            cause += f"; {fix}"
        if last.log:
            cause += f" (output: {_logs(last.log)})"
        parts.append(cause)
    parts.append(message.rstrip("."))
    for word, state in uncommitted(command, sha, repo):
        absolute = (repo / word).resolve()
        parts.append(
            f"note: the probe file {word} {state} at {sha[:12]} (probes run in a private clone "
            f"of each commit): pass an absolute path ({absolute}) or --overlay {word}"
        )
    return "; ".join(parts)


def uncommitted(command: Sequence[str], sha: str, repo: Path) -> list[tuple[str, str]]:
    """Words of ``command`` naming checkout files that ``sha`` lacks or holds in another version.

    Returns:
        ``(word, state)`` pairs, ``state`` saying which: ``"is not committed"`` or ``"in your
        checkout differs from the one committed"``.
    """
    out = []
    for word in command:
        if word.startswith("-") or Path(word).is_absolute() or not (repo / word).is_file():
            continue
        rel = os.path.normpath(word)
        if rel.startswith(".."):
            continue
        committed = git(["rev-parse", "--verify", "--quiet", f"{sha}:{rel}"], cwd=repo, check=False)
        if committed.returncode != 0:
            out.append((word, "is not committed"))
            continue
        mine = git(["hash-object", "--", rel], cwd=repo, check=False)
        if mine.returncode == 0 and mine.stdout.strip() != committed.stdout.strip():
            out.append((word, "in your checkout differs from the one committed"))
    return out


def _logs(log: str) -> str:
    """The run's stdout log and, beside it, its stderr log."""
    err = Path(log).with_suffix(".err")
    return f"{log}, {err}" if err.exists() else log
