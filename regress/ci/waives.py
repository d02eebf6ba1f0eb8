"""The waive list: ``[full:X/]<path>... [-k|-m "expr"] SKIP|XFAIL|UNSTABLE [(reason)]`` lines.

Mirrors upstream ``tests/integration/test_lists/waives.txt`` as read by ``parse_test_list_lines``
and ``apply_waives`` in ``tests/integration/defs/test_list_parser.py`` (NVIDIA/TensorRT-LLM @
054411a0): the reason is optional, ``#`` starts a comment, ``TIMEOUT (N)`` and ``ISOLATION`` may
stand instead of (or beside) an outcome, and a ``full:X/`` prefix limits the waive to stages whose
name (pytest's ``--test-prefix``, which Jenkins sets to the stage name) has ``X`` as its first
dash-separated part: upstream rewrites ``full:X/<id>`` to ``<stage name>/<id>`` only when
the first dash-separated part of ``test_prefix`` is ``X``, and a scoped waive whose prefix does
not match names no test. So ``full:B200/`` waives ``B200-PyTorch-1`` but not
``DGX_B200-PyTorch-1``, and ``full:sm100/`` waives stages named ``sm100-...``.

A waive is applied as a pytest marker (never a deselection) so the waived test still appears in the
terminal summary and in JUnit with its reason: a waive that silently removed tests would hide
exactly the coverage gaps the list exists to track. ``UNSTABLE`` runs the test and tolerates a
failure (a non-strict xfail), regress's reading of upstream's "unstable".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from regress.ci.listline import LineError, parse_line, strip_comment
from regress.ci.selection import nodeid_keys
from regress.ci.testlist import TestListError
from regress.ci.yamlnodes import NodeReader


@dataclass(frozen=True)
class Waive:
    """One path of a waive line (a multi-path line gives one per path, all with its line).

    Attributes:
        test_id: node id or path it covers (prefix semantics, like list entries).
        kind: ``SKIP``, ``XFAIL``, ``UNSTABLE``, or None for a line with only TIMEOUT/ISOLATION.
        reason: the text in parentheses, usually a bug link, or None.
        scope: ``X`` of ``full:X/``, or None for every stage.
        keyword: ``-k`` expression the covered tests must also match, or None.
        markexpr: ``-m`` expression the covered tests must also match, or None.
        timeout_minutes: ``TIMEOUT (N)``, or None.
        isolation: ``ISOLATION`` was given.
    """

    test_id: str
    kind: str | None
    reason: str | None
    scope: str | None
    source: str
    line: int
    keyword: str | None = None
    markexpr: str | None = None
    timeout_minutes: int | None = None
    isolation: bool = False

    def describe(self) -> str:
        scope = f"full:{self.scope}/" if self.scope else ""
        what = self.kind or ""
        if self.reason:
            what += f" ({self.reason})"
        filters = "".join(
            f' {flag} "{expr}"'
            for flag, expr in (("-k", self.keyword), ("-m", self.markexpr))
            if expr is not None
        )
        return f"{scope}{self.test_id}{filters} {what.strip()} [{self.source}:{self.line}]"


def load_waives(path: Path, *, display: str | None = None) -> list[Waive]:
    """Parse a waive file; blank lines and ``#`` comments are ignored.

    Raises:
        TestListError: every malformed or duplicate line, with its number.
    """
    reader = NodeReader(display or str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reader.add(1, f"cannot read: {exc}")
        raise TestListError(reader.problems) from exc
    waives: list[Waive] = []
    first: dict[tuple, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = strip_comment(raw)
        if not line:
            continue
        try:
            parsed = parse_line(line, allow_scope=True)
        except LineError as exc:
            reader.add(number, f"{exc} in {line!r}")
            continue
        if parsed.kind is None and parsed.timeout_minutes is None and not parsed.isolation:
            reader.add(
                number,
                f"no marker in {line!r}: end a waive with SKIP, XFAIL or UNSTABLE [(reason)], "
                "or TIMEOUT (N) / ISOLATION",
            )
            continue
        for test_id in parsed.paths:
            key = (test_id, parsed.scope, parsed.keyword, parsed.markexpr)
            if key in first:
                reader.add(number, f"{test_id!r} is already waived at line {first[key]}")
                continue
            first[key] = number
            waives.append(
                Waive(
                    test_id,
                    parsed.kind,
                    parsed.reason,
                    parsed.scope,
                    reader.source,
                    number,
                    keyword=parsed.keyword,
                    markexpr=parsed.markexpr,
                    timeout_minutes=parsed.timeout_minutes,
                    isolation=parsed.isolation,
                )
            )
    if reader.problems:
        raise TestListError(reader.problems)
    return waives


def scope_matches(scope: str, test_prefix: str | None) -> bool:
    """Whether ``full:scope/`` applies under ``--test-prefix test_prefix`` (upstream's rule)."""
    return test_prefix is not None and test_prefix.split("-")[0] == scope


def applicable(waives: Sequence[Waive], test_prefix: str | None) -> list[Waive]:
    """The waives that apply in a stage: unscoped ones, and ``full:X/`` ones whose X it starts with."""
    return [w for w in waives if w.scope is None or scope_matches(w.scope, test_prefix)]


def waive_for(
    nodeid: str,
    waives: Sequence[Waive],
    admits: Callable[[Waive], bool] = lambda w: True,
) -> Waive | None:
    """The most specific applicable waive covering ``nodeid``.

    The longest id wins (a waive on the test beats one on its file); at the same id a scoped
    waive beats an unscoped one, since it was written for this stage in particular.

    Args:
        nodeid: the collected test.
        waives: from :func:`applicable`.
        admits: whether a waive's ``-k``/``-m`` filter admits this test (the plugin evaluates it
            on the item; without filters every waive admits).
    """
    by_id: dict[str, list[Waive]] = {}
    for waive in waives:
        by_id.setdefault(waive.test_id, []).append(waive)
    for key in nodeid_keys(nodeid):
        candidates = [w for w in by_id.get(key, ()) if admits(w)]
        if candidates:
            scoped = [w for w in candidates if w.scope is not None]
            return (scoped or candidates)[0]
    return None
