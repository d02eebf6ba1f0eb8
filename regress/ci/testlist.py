"""Stage test lists in TensorRT-LLM's test-db YAML format: entries, conditions, parsing.

Mirrors ``tests/integration/test_lists/test-db/l0_*.yml`` upstream: a file holds a context key
(``l0_h200``) whose blocks pair a ``condition`` (GPU-name ``wildcards``, ``system_gpu_count``
``ranges``, ``stage``/``backend`` ``terms``) with ``tests`` (node ids or paths, optionally
suffixed `` TIMEOUT (N)``, N in minutes as upstream). Upstream renders a block list with the
``trt-test-db`` tool from a node's live system facts; here a stage's facts are declared in
``stages.yml`` next to the lists, so ``regress testlist show`` prints on a laptop exactly what the
CI node will run, and the /bot grammar can check stage names against the same file.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from regress.ci.yamlnodes import NodeReader, Problem, did_you_mean
from regress.errors import UsageError

STAGE_TERMS = ("pre_merge", "post_merge")
BACKENDS = ("pytorch", "tensorrt", "cpp", "triton", "autodeploy", "generic")
_BLOCK_KEYS = ("condition", "tests")
_CONDITION_KEYS = ("ranges", "wildcards", "terms")
_RANGE_VARS = ("system_gpu_count",)
_RANGE_BOUNDS = ("gte", "lte", "gt", "lt")
_WILDCARD_VARS = ("gpu", "linux_distribution_name")
_TERM_VARS = ("stage", "backend")
STAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_CONTEXT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_ENTRY = re.compile(r"(?P<id>\S.*?)(?:\s+TIMEOUT\s*\(\s*(?P<timeout>\d+)\s*\))?\s*")


class TestListError(UsageError):
    """A list file is malformed; ``problems`` says where, one ``file:line: message`` each."""

    __test__ = False

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Entry:
    """One ``tests:`` item: a node id (has ``::``) or a file/directory path, plus its timeout."""

    test_id: str
    timeout_minutes: int | None
    source: str
    line: int

    @property
    def is_node_id(self) -> bool:
        return "::" in self.test_id

    @property
    def path(self) -> str:
        return self.test_id.split("::", 1)[0]

    def render(self) -> str:
        suffix = f" TIMEOUT ({self.timeout_minutes})" if self.timeout_minutes is not None else ""
        return self.test_id + suffix


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

    @property
    def multi_gpu(self) -> bool:
        return self.gpu_count > 1

    @property
    def post_merge(self) -> bool:
        return self.stage == "post_merge"


@dataclass(frozen=True)
class Condition:
    """A block's ``condition``; every part present must hold for a stage to run the block."""

    ranges: tuple[tuple[str, int | None, int | None], ...] = ()
    wildcards: tuple[tuple[str, tuple[str, ...]], ...] = ()
    terms: tuple[tuple[str, str], ...] = ()

    def matches(self, stage: Stage) -> bool:
        facts: dict[str, object] = {
            "system_gpu_count": stage.gpu_count,
            "gpu": stage.gpu_type,
            "linux_distribution_name": stage.linux_distribution_name,
            "stage": stage.stage,
            "backend": stage.backend,
        }
        for var, low, high in self.ranges:
            value = facts[var]
            if not isinstance(value, int) or (low is not None and value < low):
                return False
            if high is not None and value > high:
                return False
        for var, patterns in self.wildcards:
            value = facts[var]
            if value is None or not any(
                fnmatch.fnmatchcase(str(value).lower(), p.lower()) for p in patterns
            ):
                return False
        return all(facts[var] == value for var, value in self.terms)


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

    def entries(self, context: str | None = None, stage: Stage | None = None) -> list[Entry]:
        """Entries of one context (or all), of blocks whose condition the stage meets (or all).

        Duplicates (the same id in two matching blocks) are kept once, first occurrence wins.
        """
        names = [context] if context is not None else list(self.contexts)
        seen: dict[str, Entry] = {}
        for name in names:
            for block in self.contexts.get(name, []):
                if stage is None or block.condition.matches(stage):
                    for entry in block.entries:
                        seen.setdefault(entry.test_id, entry)
        return list(seen.values())


def parse_entry(text: str, reader: NodeReader, node: object) -> tuple[str, int | None] | None:
    """Split ``"id TIMEOUT (N)"``; refuse absolute paths, ``..`` and unknown suffixes."""
    match = _ENTRY.fullmatch(text)
    if match is None:
        reader.add(node, f"cannot read test entry {text!r}")
        return None
    test_id, timeout = match["id"], match["timeout"]
    head, bracket, params = test_id.partition("[")
    if re.search(r"\s", head):
        extra = head.split(None, 1)[1]
        reader.add(
            node, f"unexpected text {extra!r} after the test id; only ' TIMEOUT (N)' is supported"
        )
        return None
    path, sep, rest = head.partition("::")
    path = path.removeprefix("./").rstrip("/")
    if not path or path.startswith("/") or ".." in path.split("/") or "\\" in path:
        reader.add(
            node,
            f"test path {path or text!r} must be relative to the repository root, without '..'",
        )
        return None
    return path + sep + rest + bracket + params, int(timeout) if timeout is not None else None


def _parse_condition(reader: NodeReader, node: object) -> Condition:
    ranges: list[tuple[str, int | None, int | None]] = []
    wildcards: list[tuple[str, tuple[str, ...]]] = []
    terms: list[tuple[str, str]] = []
    for key, key_node, value in reader.mapping(node, "condition"):
        if key == "ranges":
            for var, var_node, bounds in reader.mapping(value, "ranges"):
                if var not in _RANGE_VARS:
                    reader.unknown_key(var_node, var, _RANGE_VARS, "ranges")
                    continue
                low: int | None = None
                high: int | None = None
                for bound, bound_node, number in reader.mapping(bounds, f"ranges.{var}"):
                    if bound not in _RANGE_BOUNDS:
                        reader.unknown_key(bound_node, bound, _RANGE_BOUNDS, f"ranges.{var}")
                        continue
                    n = reader.integer(number, f"ranges.{var}.{bound}")
                    if n is None:
                        continue
                    if bound in ("gte", "gt"):
                        low = n if bound == "gte" else n + 1
                    else:
                        high = n if bound == "lte" else n - 1
                if low is not None and high is not None and low > high:
                    reader.add(
                        bounds, f"ranges.{var} is empty ({low} > {high}): no stage can match"
                    )
                ranges.append((var, low, high))
        elif key == "wildcards":
            for var, var_node, patterns in reader.mapping(value, "wildcards"):
                if var not in _WILDCARD_VARS:
                    reader.unknown_key(var_node, var, _WILDCARD_VARS, "wildcards")
                    continue
                wildcards.append((var, tuple(reader.strings(patterns, f"wildcards.{var}"))))
        elif key == "terms":
            for var, var_node, term in reader.mapping(value, "terms"):
                if var not in _TERM_VARS:
                    reader.unknown_key(var_node, var, _TERM_VARS, "terms")
                    continue
                text = reader.string(term, f"terms.{var}")
                allowed = STAGE_TERMS if var == "stage" else BACKENDS
                if text is not None and text not in allowed:
                    reader.add(
                        term,
                        f"terms.{var} is {text!r}{did_you_mean(text, allowed)} (allowed: {', '.join(allowed)})",
                    )
                elif text is not None:
                    terms.append((var, text))
        else:
            reader.unknown_key(key_node, key, _CONDITION_KEYS, "condition")
    return Condition(tuple(ranges), tuple(wildcards), tuple(terms))


def _parse_block(reader: NodeReader, node: object, context: str) -> Block | None:
    pairs = reader.mapping(node, f"a block of {context!r}")
    keys = {key for key, _, _ in pairs}
    if pairs and "tests" not in keys:
        reader.add(node, f"a block of {context!r} has no 'tests' list")
    condition = Condition()
    entries: list[Entry] = []
    first_line: dict[str, int] = {}
    for key, key_node, value in pairs:
        if key == "condition":
            condition = _parse_condition(reader, value)
        elif key == "tests":
            for item in reader.sequence(value, "tests"):
                text = reader.string(item, "a test entry")
                parsed = parse_entry(text, reader, item) if text is not None else None
                if parsed is None:
                    continue
                line = item.start_mark.line + 1
                if parsed[0] in first_line:
                    reader.add(
                        item,
                        f"duplicate entry {parsed[0]!r} (first at line {first_line[parsed[0]]})",
                    )
                    continue
                first_line[parsed[0]] = line
                entries.append(Entry(parsed[0], parsed[1], reader.source, line))
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
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        parsed = parse_entry(text, reader, number)
        if parsed is not None:
            entries.append(Entry(parsed[0], parsed[1], reader.source, number))
    if reader.problems:
        raise TestListError(reader.problems)
    db.contexts[path.stem] = [Block(Condition(), tuple(entries), 1)]
    return db
