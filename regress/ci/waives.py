"""The waive list: ``<node id> SKIP|XFAIL (reason or bug link)``, optionally ``full:GPU/``-scoped.

Mirrors upstream ``tests/integration/test_lists/waives.txt``. A waive is applied as a pytest
marker (never a deselection) so the waived test still appears in the terminal summary and in
JUnit with its reason: a waive that silently removed tests would hide exactly the coverage gaps
the list exists to track.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from regress.ci.selection import nodeid_keys
from regress.ci.testlist import TestListError, parse_entry
from regress.ci.yamlnodes import NodeReader

KINDS = ("SKIP", "XFAIL")
_LINE = re.compile(
    r"(?:full:(?P<gpu>[A-Za-z0-9_.-]+)/)?(?P<id>\S.*?)\s+(?P<kind>SKIP|XFAIL)\s*\((?P<reason>.*)\)\s*"
)


@dataclass(frozen=True)
class Waive:
    """One waive line.

    Attributes:
        test_id: node id or path it covers (prefix semantics, like list entries).
        kind: ``"SKIP"`` or ``"XFAIL"``.
        reason: the text in parentheses, usually a bug link.
        gpu: the ``full:GPU/`` scope, or ``None`` for every GPU.
    """

    test_id: str
    kind: str
    reason: str
    gpu: str | None
    source: str
    line: int

    def describe(self) -> str:
        scope = f"full:{self.gpu}/" if self.gpu else ""
        return f"{scope}{self.test_id} {self.kind} ({self.reason}) [{self.source}:{self.line}]"


def load_waives(path: Path, *, display: str | None = None) -> list[Waive]:
    """Parse a waive file; blank lines and ``#`` comments are ignored.

    Raises:
        TestListError: every malformed line, with its number.
    """
    reader = NodeReader(display or str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reader.add(1, f"cannot read: {exc}")
        raise TestListError(reader.problems) from exc
    waives: list[Waive] = []
    first: dict[tuple[str, str | None], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            other = re.search(r"\s([A-Z]+)\s*\(", line)
            if other:
                reader.add(number, f"unknown waive kind {other[1]!r}; use SKIP or XFAIL")
            else:
                reader.add(
                    number, "expected '<test id> SKIP (reason)' or '<test id> XFAIL (reason)'"
                )
            continue
        reason = match["reason"].strip()
        if not reason:
            reader.add(number, "a waive needs a reason, ideally a bug link: SKIP (https://...)")
            continue
        parsed = parse_entry(match["id"], reader, number)
        if parsed is None:
            continue
        if parsed[1] is not None:
            reader.add(number, "TIMEOUT belongs in the stage list, not in waives")
            continue
        key = (parsed[0], match["gpu"])
        if key in first:
            reader.add(number, f"{parsed[0]!r} is already waived at line {first[key]}")
            continue
        first[key] = number
        waives.append(Waive(parsed[0], match["kind"], reason, match["gpu"], reader.source, number))
    if reader.problems:
        raise TestListError(reader.problems)
    return waives


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def gpu_matches(scope: str, gpu_names: Iterable[str]) -> bool:
    """Whether a ``full:GPU/`` scope names one of these GPUs.

    Compared word by word, so ``H100_PCIe`` matches ``NVIDIA H100 PCIe`` and ``H200`` matches a
    stage whose ``gpu_type`` is ``H200``, but ``H200`` does not match ``NVIDIA GH200``.
    """
    wanted = _words(scope)
    for name in gpu_names:
        words = _words(name)
        for start in range(len(words) - len(wanted) + 1):
            if words[start : start + len(wanted)] == wanted:
                return True
    return False


def applicable(waives: Sequence[Waive], gpu_names: Iterable[str]) -> list[Waive]:
    """The waives that apply here: unscoped ones, and ``full:GPU/`` ones naming one of our GPUs."""
    names = list(gpu_names)
    return [w for w in waives if w.gpu is None or gpu_matches(w.gpu, names)]


def waive_for(nodeid: str, waives: Sequence[Waive]) -> Waive | None:
    """The most specific applicable waive covering ``nodeid`` (a GPU-scoped one wins a tie)."""
    by_id: dict[str, Waive] = {}
    for waive in waives:
        current = by_id.get(waive.test_id)
        if current is None or (current.gpu is None and waive.gpu is not None):
            by_id[waive.test_id] = waive
    for key in nodeid_keys(nodeid):
        if key in by_id:
            return by_id[key]
    return None
