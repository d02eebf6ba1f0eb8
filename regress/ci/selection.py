"""Matching list entries (node ids, files, directories) against collected pytest node ids."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from regress.ci.testlist import Entry
from regress.ci.yamlnodes import closest


def nodeid_keys(nodeid: str) -> list[str]:
    """Every entry id that selects ``nodeid``, most specific first.

    ``a/b/t.py::C::f[x::y]`` -> the id itself, ``a/b/t.py::C::f``, ``a/b/t.py::C``, ``a/b/t.py``,
    ``a/b``, ``a``. ``::`` inside parameter brackets is not a separator.
    """
    head, bracket, _ = nodeid.partition("[")
    keys = [nodeid]
    if bracket:
        keys.append(head)
    parts = head.split("::")
    for i in range(len(parts) - 1, 0, -1):
        keys.append("::".join(parts[:i]))
    path = parts[0].split("/")
    for i in range(len(path) - 1, 0, -1):
        keys.append("/".join(path[:i]))
    return list(dict.fromkeys(keys))


@dataclass
class Selection:
    """Which collected ids a list selects, the entry that selected each, and unmatched entries."""

    selected: list[int]
    entry_for: dict[int, Entry]  # index -> the most specific matching entry (its TIMEOUT wins)
    unmatched: list[Entry]


def select(
    entries: Sequence[Entry],
    nodeids: Sequence[str],
    *,
    required: Callable[[Entry], bool] = lambda e: True,
    admits: Callable[[Entry, int], bool] | None = None,
) -> Selection:
    """Match entries against collected node ids, keeping collection order.

    Args:
        entries: the list's entries.
        nodeids: collected ids, relative to the rootdir.
        required: entries for which matching nothing is an error (the plugin passes the entries
            its collection arguments fully cover; others may legitimately be out of scope).
        admits: whether an entry's ``-k``/``-m`` filter admits the test at an index (the plugin
            evaluates it on the item). Entries with a filter select nothing without it.
    """
    by_id: dict[str, list[Entry]] = {}
    for entry in entries:
        by_id.setdefault(entry.test_id, []).append(entry)

    def admitted(entry: Entry, index: int) -> bool:
        if entry.keyword is None and entry.markexpr is None:
            return True
        return admits is not None and admits(entry, index)

    used: set[tuple] = set()
    selected: list[int] = []
    entry_for: dict[int, Entry] = {}
    for index, nodeid in enumerate(nodeids):
        matches = [e for k in nodeid_keys(nodeid) for e in by_id.get(k, ()) if admitted(e, index)]
        if not matches:
            continue
        selected.append(index)
        entry_for[index] = matches[0]
        used.update(m.key for m in matches)
    unmatched = [e for e in entries if e.key not in used and required(e)]
    return Selection(selected, entry_for, unmatched)


def suggestions(test_id: str, nodeids: Iterable[str], n: int = 3) -> list[str]:
    """The collected ids (or their files/classes) closest to an entry that matched nothing."""
    candidates = {
        key for nodeid in nodeids for key in nodeid_keys(nodeid) if "/" in key or "::" in key
    }
    return closest(test_id, candidates, n=n)


def unmatched_message(entry: Entry, nodeids: Iterable[str]) -> str:
    near = suggestions(entry.test_id, nodeids)
    hint = f"; closest collected: {', '.join(near)}" if near else "; nothing similar was collected"
    return f"{entry.source}:{entry.line}: {entry.render()!r} matches no collected test{hint}"
