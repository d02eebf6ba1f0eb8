"""Reading YAML as a node tree so every error names the file and line it came from.

``yaml.safe_load`` returns plain dicts and forgets where each value was written, and it silently
keeps the last of two duplicate keys. Walking ``yaml.compose`` nodes keeps both problems visible.
Aliases are refused: list files never need them, and a node reached twice is how alias bombs
turn a small file into an exponential walk.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_FLOAT_TAG = "tag:yaml.org,2002:float"
MAX_LIST_FILE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located so an editor can jump to it."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


def closest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The choices most similar to ``word``, best first (for "did you mean" hints)."""
    return difflib.get_close_matches(word, sorted(set(choices)), n=n, cutoff=0.5)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` or ``""``."""
    best = closest(word, choices, n=1)
    return f"; did you mean {best[0]!r}?" if best else ""


class NodeReader:
    """Collects problems while walking one file's YAML nodes.

    Each accessor returns ``None`` (and records a problem) when the node has the wrong shape, so
    one pass reports every problem in the file instead of stopping at the first.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self._seen: set[int] = set()

    def add(self, node_or_line: object, message: str) -> None:
        """Record a problem at a node's line (or at an explicit 1-based line number)."""
        if isinstance(node_or_line, int):
            line = node_or_line
        else:
            mark = getattr(node_or_line, "start_mark", None)
            line = mark.line + 1 if mark is not None else 1
        self.problems.append(Problem(self.source, line, message))

    def read(self, path: Path):
        """Compose ``path`` into a node tree; ``None`` (with a problem) if unreadable or invalid."""
        import yaml  # lazy: the GPU box imports the plugin with only a few packages around

        try:
            if path.stat().st_size > MAX_LIST_FILE_BYTES:
                self.add(
                    1, f"file is larger than {MAX_LIST_FILE_BYTES} bytes; is it really a list?"
                )
                return None
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.add(1, f"cannot read: {exc}")
            return None
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            problem = getattr(exc, "problem", None) or str(exc)
            self.add(line, f"invalid YAML: {problem}")
            return None
        if node is None:
            self.add(1, "file is empty")
        return node

    def _visit(self, node) -> bool:
        if id(node) in self._seen:
            self.add(node, "YAML anchors and aliases are not supported in list files; write it out")
            return False
        self._seen.add(id(node))
        return True

    def mapping(self, node, what: str) -> list[tuple[str, object, object]]:
        """``(key, key_node, value_node)`` pairs of a mapping; duplicate and non-string keys flagged."""
        import yaml

        if node is None or not self._visit(node):
            return []
        if not isinstance(node, yaml.MappingNode):
            self.add(node, f"{what} must be a mapping (key: value)")
            return []
        pairs: list[tuple[str, object, object]] = []
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                self.add(key_node, f"keys of {what} must be plain strings")
                continue
            key = key_node.value
            if key in first_line:
                self.add(
                    key_node, f"duplicate key {key!r} in {what} (first at line {first_line[key]})"
                )
                continue
            first_line[key] = key_node.start_mark.line + 1
            pairs.append((key, key_node, value_node))
        return pairs

    def sequence(self, node, what: str) -> list[object]:
        """Items of a sequence node."""
        import yaml

        if node is None or not self._visit(node):
            return []
        if not isinstance(node, yaml.SequenceNode):
            self.add(node, f"{what} must be a list")
            return []
        return list(node.value)

    def string(self, node, what: str) -> str | None:
        """A string scalar (numbers and booleans are refused: ``stage: 1`` is a typo)."""
        import yaml

        if node is None or not self._visit(node):
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag != _STR_TAG or not node.value:
            self.add(node, f"{what} must be a non-empty string")
            return None
        return node.value

    def integer(self, node, what: str, *, minimum: int = 0) -> int | None:
        """A non-negative (or ``>= minimum``) integer scalar."""
        import yaml

        if node is None or not self._visit(node):
            return None
        if (
            not isinstance(node, yaml.ScalarNode)
            or node.tag != _INT_TAG
            or not re.fullmatch(r"[+-]?[0-9]+", node.value)
        ):
            self.add(node, f"{what} must be a plain decimal integer")
            return None
        value = int(node.value)
        if value < minimum:
            self.add(node, f"{what} must be >= {minimum}, got {value}")
            return None
        return value

    def number(self, node, what: str) -> float | None:
        """An int or float scalar (``gte: 4``, ``gte: 8.9``)."""
        import yaml

        if node is None or not self._visit(node):
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag not in (_INT_TAG, _FLOAT_TAG):
            self.add(node, f"{what} must be a number")
            return None
        value = self.scalar(node)
        return float(value)  # type: ignore[arg-type]

    def scalar(self, node) -> object:
        """A scalar node as YAML's safe loader types it (str, int, float, bool, None)."""
        import yaml

        return yaml.SafeLoader("").construct_object(node)

    def strings(self, node, what: str) -> list[str]:
        """A string or a list of strings, as a list."""
        import yaml

        if isinstance(node, yaml.SequenceNode):
            items = [
                self.string(item, f"each item of {what}") for item in self.sequence(node, what)
            ]
            return [item for item in items if item is not None]
        value = self.string(node, what)
        return [value] if value is not None else []

    def unknown_key(self, key_node, key: str, known: Iterable[str], where: str) -> None:
        """Flag a key the format does not define, with the closest known key."""
        known = list(known)
        self.add(
            key_node,
            f"unknown key {key!r} in {where}{did_you_mean(key, known)} "
            f"(allowed: {', '.join(known)})",
        )
