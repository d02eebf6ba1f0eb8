"""One line of a test list or waive list, in upstream TensorRT-LLM's grammar.

Upstream reads both kinds of line with one parser, ``parse_test_list_lines`` in
``tests/integration/defs/test_list_parser.py`` (NVIDIA/TensorRT-LLM @ 054411a0): the text after a
``#`` is a comment; the markers are ``XFAIL``, ``SKIP``, ``UNSTABLE`` (optionally followed by a
``(reason)``), ``TIMEOUT (N)`` (N minutes) and ``ISOLATION``, each written with a space before it
and case-sensitive; a ``full:X/`` prefix scopes a waive to the stages whose name starts with
``X-``. ``tests/README.md`` @ 068c4416 (sections 5-7) adds that markers combine with commas in any
order (``ISOLATION, TIMEOUT (90)``, ``TIMEOUT (90), ISOLATION``) and that a ``unittest/`` line may
carry pytest's ``-k "expr"`` / ``-m "expr"`` and several paths (the whole line becomes the argv of
a pytest subprocess there). Here every line names real pytest paths, so ``-k``/``-m`` filter the
tests under the line's paths and each path of a multi-path line is covered on its own.

Upstream finds markers by substring search, so ``ISOLATION, TIMEOUT (120)`` loses its timeout
there and unknown trailing words become part of the test name. This parser instead tokenizes the
line and refuses anything it does not recognise, naming the construct: nothing is silently
absorbed into a test id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Markers upstream's parser knows (``kVALID_TEST_LIST_MARKERS``), case-sensitive.
MARKERS = ("XFAIL", "SKIP", "UNSTABLE", "TIMEOUT", "ISOLATION")
#: The markers that decide a waived test's outcome; they may carry a ``(reason)``.
WAIVE_KINDS = ("SKIP", "XFAIL", "UNSTABLE")
_SCOPE = re.compile(r"full:(?P<scope>[^/\s]+)/(?P<rest>.*)")
_GRAMMAR = '<test id> [more paths] [-k "expr"] [-m "expr"] [ISOLATION] [TIMEOUT (N)]'


class LineError(ValueError):
    """A line does not follow the grammar; the message names the construct."""


@dataclass(frozen=True)
class ListLine:
    """A parsed line.

    Attributes:
        paths: the test ids or paths it names (several on a multi-path line), as written.
        scope: ``X`` of a ``full:X/`` prefix, or None.
        keyword: the ``-k`` expression, or None.
        markexpr: the ``-m`` expression, or None.
        kind: ``SKIP``, ``XFAIL`` or ``UNSTABLE``, or None.
        reason: the parenthesised text after the kind (optional upstream), or None.
        timeout_minutes: ``TIMEOUT (N)``, or None.
        isolation: whether ``ISOLATION`` was given.
    """

    paths: tuple[str, ...]
    scope: str | None = None
    keyword: str | None = None
    markexpr: str | None = None
    kind: str | None = None
    reason: str | None = None
    timeout_minutes: int | None = None
    isolation: bool = False

    def suffix(self) -> str:
        """The filters and markers as they would be written after the paths."""
        parts = []
        if self.keyword is not None:
            parts.append(f'-k "{self.keyword}"')
        if self.markexpr is not None:
            parts.append(f'-m "{self.markexpr}"')
        markers = []
        if self.kind is not None:
            markers.append(self.kind + (f" ({self.reason})" if self.reason else ""))
        if self.isolation:
            markers.append("ISOLATION")
        if self.timeout_minutes is not None:
            markers.append(f"TIMEOUT ({self.timeout_minutes})")
        if markers:
            parts.append(", ".join(markers))
        return " ".join(parts)


def strip_comment(text: str) -> str:
    """Drop a ``#`` comment and surrounding whitespace, as upstream does (``partition("#")``)."""
    return text.partition("#")[0].strip()


def _tokens(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` pairs: ``word`` (brackets keep spaces inside), ``quoted``, ``paren``, ``comma``."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == ",":
            tokens.append(("comma", ","))
            i += 1
        elif ch == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise LineError(f"unbalanced quote at column {i + 1}")
            tokens.append(("quoted", text[i + 1 : end]))
            i = end + 1
        elif ch == "(":
            depth, j = 0, i
            while j < n:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            if j >= n:
                raise LineError(f"unbalanced parenthesis at column {i + 1}")
            tokens.append(("paren", text[i + 1 : j].strip()))
            i = j + 1
        else:
            depth, j = 0, i
            while j < n:
                c = text[j]
                if c == "[":
                    depth += 1
                elif c == "]":
                    depth = max(depth - 1, 0)
                elif depth == 0 and (c.isspace() or c in ',"('):
                    break
                j += 1
            tokens.append(("word", text[i:j]))
            i = j
    return tokens


def _check_expression(flag: str, expr: str) -> str:
    """Compile a ``-k``/``-m`` expression with pytest's own parser, so a typo fails here."""
    from _pytest.mark.expression import Expression

    try:
        Expression.compile(expr)
    except (SyntaxError, ValueError) as exc:  # pytest >= 8.4 raises SyntaxError
        raise LineError(f"{flag} {expr!r} is not a pytest expression: {exc}") from None
    return expr


def parse_line(text: str, *, allow_scope: bool = False) -> ListLine:
    """Parse one line (comment already stripped).

    Args:
        text: the line, without its ``#`` comment.
        allow_scope: whether a ``full:X/`` prefix is allowed (waives only).

    Raises:
        LineError: naming the first construct that is not part of the grammar.
    """
    scope = None
    match = _SCOPE.fullmatch(text)
    if match:
        if not allow_scope:
            raise LineError("a 'full:X/' scope belongs in waives, not in a test list")
        scope, text = match["scope"], match["rest"]
    tokens = _tokens(text)
    if not tokens or tokens[0][0] != "word":
        raise LineError(f"expected a test id first ({_GRAMMAR})")
    paths: list[str] = []
    values: dict[str, object] = {}
    i = 0
    # Paths, then filters, then markers: the grammar of tests/README.md.
    while i < len(tokens) and tokens[i][0] == "word" and not _is_marker_or_flag(tokens[i][1]):
        word = tokens[i][1]
        if paths and (word.isupper() or not ("/" in word or "::" in word)):
            # A second path must look like one, so a misspelt marker (ISOLATED) is an error
            # rather than a path nobody wrote.
            raise LineError(_unexpected("word", word))
        paths.append(check_path(word))
        i += 1
    while i < len(tokens) and tokens[i] in (("word", "-k"), ("word", "-m")):
        flag = tokens[i][1]
        name = "keyword" if flag == "-k" else "markexpr"
        if name in values:
            raise LineError(f"{flag} given twice")
        if i + 1 >= len(tokens) or tokens[i + 1][0] not in ("quoted", "word"):
            raise LineError(f'{flag} needs an expression, e.g. {flag} "part0 and not slow"')
        values[name] = _check_expression(flag, tokens[i + 1][1])
        i += 2
    expect_marker = True
    while i < len(tokens):
        kind, word = tokens[i]
        if kind == "comma":
            if expect_marker:
                raise LineError("stray ',' between markers")
            expect_marker = True
            i += 1
            continue
        if kind != "word" or word not in MARKERS:
            raise LineError(_unexpected(kind, word))
        if not expect_marker:
            raise LineError(f"separate markers with ',' (before {word})")
        i += 1
        paren = tokens[i][1] if i < len(tokens) and tokens[i][0] == "paren" else None
        if paren is not None:
            i += 1
        _add_marker(values, word, paren)
        expect_marker = False
    if expect_marker and any(k in values for k in ("kind", "isolation", "timeout_minutes")):
        raise LineError("a marker list must not end with ','")
    return ListLine(paths=tuple(paths), scope=scope, **values)  # type: ignore[arg-type]


def check_path(test_id: str) -> str:
    """A test id relative to the root, normalised (``./`` and a trailing ``/`` dropped).

    Raises:
        LineError: for absolute paths, ``..`` parts and backslashes.
    """
    head, sep, rest = test_id.partition("::")
    path = head.removeprefix("./").rstrip("/")
    if not path or path.startswith("/") or ".." in path.split("/") or "\\" in path:
        raise LineError(
            f"test path {head or test_id!r} must be relative to the repository root, without '..'"
        )
    return path + sep + rest


def _is_marker_or_flag(word: str) -> bool:
    return word in MARKERS or word.startswith("-")


def _unexpected(kind: str, word: str) -> str:
    if kind == "word" and word.isupper() and word not in MARKERS:
        return f"unknown marker {word!r} (markers: {', '.join(MARKERS)})"
    if kind == "word" and word.upper() in MARKERS:
        return f"markers are case-sensitive: write {word.upper()!r}, not {word!r}"
    if kind == "word" and word.startswith("-"):
        return f'unknown option {word!r}; only -k "expr" and -m "expr" follow the paths'
    shown = {"paren": f"({word})", "quoted": f'"{word}"'}.get(kind, word)
    return f"unexpected {shown!r}; a line is {_GRAMMAR} (waives end with SKIP|XFAIL|UNSTABLE [(reason)])"


def _add_marker(values: dict[str, object], word: str, paren: str | None) -> None:
    if word in WAIVE_KINDS:
        if "kind" in values:
            raise LineError(f"two outcome markers ({values['kind']} and {word}); keep one")
        values["kind"] = word
        values["reason"] = paren or None
    elif word == "TIMEOUT":
        if "timeout_minutes" in values:
            raise LineError("TIMEOUT given twice")
        if paren is None or not paren.isdigit() or int(paren) < 1:
            raise LineError(
                f"TIMEOUT needs a positive whole number of minutes: TIMEOUT (30), got {paren!r}"
            )
        values["timeout_minutes"] = int(paren)
    else:  # ISOLATION
        if paren is not None:
            raise LineError(f"ISOLATION takes no value, got ({paren})")
        if "isolation" in values:
            raise LineError("ISOLATION given twice")
        values["isolation"] = True
