"""Stage test lists in TensorRT-LLM's test-db YAML format: entries, blocks, contexts, parsing.

Mirrors ``tests/integration/test_lists/test-db/l0_*.yml`` upstream: a file holds a context key
(``l0_h200``) whose blocks pair a ``condition`` (see :mod:`regress.ci.conditions`) with ``tests``,
each a line of the grammar in :mod:`regress.ci.listline` (node id or path, optional ``-k``/``-m``
filter, `` ISOLATION`` and `` TIMEOUT (N)`` markers, N in minutes). Upstream renders a context
with ``trt-test-db`` from a node's live facts; here a query gives the facts
(``regress testlist show --context l0_x --match '{...}'``), or a stage of ``stages.yml`` declares
them, so ``regress testlist show`` prints on a laptop exactly what the CI node will run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from regress.ci.conditions import BACKENDS, STAGE_TERMS, Condition, parse_condition
from regress.ci.listline import WAIVE_KINDS, LineError, parse_line, strip_comment
from regress.ci.yamlnodes import NodeReader, Problem
from regress.errors import UsageError

__all__ = ["BACKENDS", "STAGE_TERMS", "Block", "Entry", "Stage", "TestDb", "TestListError"]
_BLOCK_KEYS = ("condition", "tests")
STAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_CONTEXT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


class TestListError(UsageError):
    """A list file is malformed; ``problems`` says where, one ``file:line: message`` each."""

    __test__ = False

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Entry:
    """One path of a ``tests:`` item, with the item's filters and markers.

    A multi-path item gives one entry per path, all with the item's line.
    """

    test_id: str
    timeout_minutes: int | None
    source: str
    line: int
    keyword: str | None = None
    markexpr: str | None = None
    isolation: bool = False

    @property
    def path(self) -> str:
        return self.test_id.split("::", 1)[0]

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        """What makes two entries the same selection: the id and its filters."""
        return (self.test_id, self.keyword, self.markexpr)

    def to_json(self) -> dict[str, object]:
        """The entry as ``regress testlist show --json`` writes it."""
        return {
            "test": self.test_id,
            "keyword": self.keyword,
            "markexpr": self.markexpr,
            "timeout_minutes": self.timeout_minutes,
            "isolation": self.isolation,
            "source": f"{self.source}:{self.line}",
        }

    def render(self) -> str:
        parts = [self.test_id]
        if self.keyword is not None:
            parts.append(f'-k "{self.keyword}"')
        if self.markexpr is not None:
            parts.append(f'-m "{self.markexpr}"')
        markers = (["ISOLATION"] if self.isolation else []) + (
            [f"TIMEOUT ({self.timeout_minutes})"] if self.timeout_minutes is not None else []
        )
        if markers:
            parts.append(", ".join(markers))
        return " ".join(parts)


@dataclass(frozen=True)
class Stage:
    """A CI stage: which test-db context it renders and the system facts its conditions see."""

    name: str
    test_db: str
    gpu_type: str
    gpu_count: int
    stage: str
    backend: str
    linux_distribution_name: str | None = None
    pytest_args: tuple[str, ...] = ()
    description: str = ""
    line: int = 0
    extra_facts: tuple[tuple[str, object], ...] = ()

    @property
    def multi_gpu(self) -> bool:
        return self.gpu_count > 1

    @property
    def post_merge(self) -> bool:
        return self.stage == "post_merge"

    def facts(self) -> dict[str, object]:
        """The facts ``trt-test-db`` would be given for this stage (declared, never probed)."""
        facts: dict[str, object] = {
            "gpu": self.gpu_type,
            "system_gpu_count": self.gpu_count,
            "stage": self.stage,
            "backend": self.backend,
        }
        if self.linux_distribution_name is not None:
            facts["linux_distribution_name"] = self.linux_distribution_name
        facts.update(dict(self.extra_facts))
        return facts


@dataclass(frozen=True)
class Block:
    condition: Condition
    entries: tuple[Entry, ...]
    line: int


@dataclass
class TestDb:
    """One test-db file: ``version`` and one or more contexts, each a list of blocks."""

    __test__ = False
    path: Path
    contexts: dict[str, list[Block]] = field(default_factory=dict)
    version: str | None = None

    def select(
        self, context: str | None, facts: Mapping[str, object] | None, *, exact: bool = True
    ) -> list[Entry]:
        """Entries of one context (or all) whose block condition ``facts`` meet (or all).

        Duplicates (the same id and filters in two matching blocks) are kept once, first wins.
        """
        names = [context] if context is not None else list(self.contexts)
        seen: dict[tuple, Entry] = {}
        for name in names:
            for block in self.contexts.get(name, []):
                if facts is None or block.condition.matches(facts, exact=exact):
                    for entry in block.entries:
                        seen.setdefault(entry.key, entry)
        return list(seen.values())

    def entries(self, context: str | None = None, stage: Stage | None = None) -> list[Entry]:
        """Entries of one context (or all), of blocks whose condition the stage meets (or all)."""
        return self.select(context, stage.facts() if stage is not None else None)


def parse_entry(text: str, source: str, line: int) -> list[Entry]:
    """The entries one list line gives.

    Raises:
        LineError: the line breaks the grammar, or carries a waive outcome (SKIP/XFAIL/UNSTABLE),
            which belongs in ``waives.txt``.
    """
    parsed = parse_line(strip_comment(text))
    if parsed.kind is not None:
        raise LineError(
            f"{parsed.kind} is a waive: put '{parsed.paths[0]} {parsed.kind} (reason)' in "
            f"waives.txt (the outcome markers are {', '.join(WAIVE_KINDS)})"
        )
    return [
        Entry(
            path,
            parsed.timeout_minutes,
            source,
            line,
            keyword=parsed.keyword,
            markexpr=parsed.markexpr,
            isolation=parsed.isolation,
        )
        for path in parsed.paths
    ]


def _parse_block(reader: NodeReader, node: object, context: str) -> Block | None:
    pairs = reader.mapping(node, f"a block of {context!r}")
    keys = {key for key, _, _ in pairs}
    if pairs and "tests" not in keys:
        reader.add(node, f"a block of {context!r} has no 'tests' list")
    condition = Condition()
    entries: list[Entry] = []
    first_line: dict[tuple, int] = {}
    for key, key_node, value in pairs:
        if key == "condition":
            condition = parse_condition(reader, value)
        elif key == "tests":
            for item in reader.sequence(value, "tests"):
                text = reader.string(item, "a test entry")
                if text is None:
                    continue
                line = item.start_mark.line + 1
                try:
                    parsed = parse_entry(text, reader.source, line)
                except LineError as exc:
                    reader.add(item, f"{exc} in {text!r}")
                    continue
                for entry in parsed:
                    earlier = first_line.get(entry.key)
                    if earlier is None:
                        first_line[entry.key] = line
                        entries.append(entry)
                        continue
                    index = next(i for i, e in enumerate(entries) if e.key == entry.key)
                    if entries[index].render() == entry.render():
                        reader.add(
                            item, f"duplicate entry {entry.render()!r} (first at line {earlier})"
                        )
                        continue
                    # The same test with other markers: upstream keeps one entry per name and the
                    # later line's markers win (a dict keyed by test name in test_list_parser.py).
                    entries[index] = entry
        else:
            reader.unknown_key(key_node, key, _BLOCK_KEYS, "a block")
    line = getattr(node, "start_mark", None)
    return Block(condition, tuple(entries), line.line + 1 if line else 1)


def load_test_db(path: Path, *, display: str | None = None) -> TestDb:
    """Parse a test-db YAML file (or a plain ``.txt`` list, one entry per line).

    Raises:
        TestListError: every problem in the file, each with its line.
    """
    reader = NodeReader(display or str(path))
    db = TestDb(path)
    if path.suffix == ".txt":
        return _load_plain(path, reader, db)
    root = reader.read(path)
    for key, key_node, value in reader.mapping(root, "a test-db file"):
        if key == "version":
            db.version = reader.string(value, "version") if not _is_number(value) else value.value
        elif not _CONTEXT_NAME.fullmatch(key):
            reader.add(key_node, f"context name {key!r} must be an identifier like 'l0_h200'")
        else:
            blocks = [
                _parse_block(reader, b, key) for b in reader.sequence(value, f"context {key!r}")
            ]
            db.contexts[key] = [b for b in blocks if b is not None]
    if root is not None and not db.contexts and not reader.problems:
        reader.add(root, "no context key (e.g. 'l0_h200:') holding blocks of tests")
    if reader.problems:
        raise TestListError(reader.problems)
    return db


def _is_number(node: object) -> bool:
    return getattr(node, "tag", "").endswith((":int", ":float"))


def _load_plain(path: Path, reader: NodeReader, db: TestDb) -> TestDb:
    """Upstream's rendered lists: one entry per line, ``#`` comments."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TestListError([Problem(reader.source, 1, f"cannot read: {exc}")]) from exc
    entries: list[Entry] = []
    for number, raw in enumerate(lines, start=1):
        text = strip_comment(raw)
        if not text:
            continue
        try:
            entries.extend(parse_entry(text, reader.source, number))
        except LineError as exc:
            reader.add(number, f"{exc} in {text!r}")
    if reader.problems:
        raise TestListError(reader.problems)
    db.contexts[path.stem] = [Block(Condition(), tuple(entries), 1)]
    return db
