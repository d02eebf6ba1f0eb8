"""Untrusted PR-comment text: size, characters, author login, allow list, tokens.

The first checks every ``/bot`` comment passes (see :mod:`regress.ci.bot` for the grammar after
them). They run from cheapest to richest and the first failure wins; a refusal's message is safe
to echo back to the pull request (ASCII, printable, short).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from regress.errors import UsageError
from regress.files import read_text

MAX_COMMENT_BYTES = 4096
#: Every character a shell treats specially; all are refused, except that the glob characters
#: below may appear inside a stage selector (where they are matched against stage names only).
SHELL_METACHARACTERS = frozenset(";|&$`<>(){}[]*?!~\\'")
GLOB_CHARACTERS = frozenset("*[]")
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")


class BotRejection(UsageError):
    """The comment (or its author) was refused; the message says why, safe to echo."""


def load_allow_list(path: Path) -> frozenset[str]:
    """GitHub logins allowed to trigger the bot: one per line, ``#`` comments; case-insensitive."""
    try:
        text = read_text(path, what="the /bot allow list")
    except UsageError as exc:
        raise UsageError(f"{exc}; fix it or pass --allow FILE") from None
    logins = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _LOGIN.fullmatch(line):
            raise UsageError(f"{path}:{number}: {line!r} is not a GitHub login")
        logins.add(line.lower())
    return frozenset(logins)


def _char_problem(ch: str, column: int) -> str | None:
    if ch in SHELL_METACHARACTERS and ch not in GLOB_CHARACTERS:
        return f"shell metacharacter {ch!r} at column {column}"
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        label = {"\n": "newline", "\r": "carriage return", "\t": "tab", "\x00": "NUL"}.get(ch)
        return f"control character {label or f'U+{ord(ch):04X}'} at column {column}"
    if ord(ch) > 0x7E:
        name = unicodedata.name(ch, "unnamed")
        folded = unicodedata.normalize("NFKC", ch)
        if folded.isascii() and folded.isprintable() and folded.strip():
            return f"U+{ord(ch):04X} {name} at column {column} looks like ASCII {folded!r}; type it plainly"
        return (
            f"non-ASCII character U+{ord(ch):04X} {name} at column {column}; comments must be ASCII"
        )
    return None


def check_text(comment: str) -> str:
    """Refuse over-long, non-ASCII, control and shell-metacharacter text; return it stripped.

    The glob characters pass this check; :func:`tokenize` refuses them outside stage selectors.
    """
    size = len(comment.encode("utf-8", "surrogatepass"))
    if size > MAX_COMMENT_BYTES:
        raise BotRejection(
            f"/bot comment rejected: {size} bytes is over the {MAX_COMMENT_BYTES}-byte limit"
        )
    # Outer whitespace (GitHub appends a newline) is harmless; anything inside is checked.
    text = comment.strip(" \r\n")
    for column, ch in enumerate(text, start=1):
        problem = _char_problem(ch, column)
        if problem:
            raise BotRejection(f"/bot comment rejected: {problem}")
    return text


def check_author(author: str, allowed: frozenset[str], *, allow_file: str | None = None) -> str:
    """``author`` if it may trigger the bot; the refusal names the allow-list file to edit."""
    if not _LOGIN.fullmatch(author):
        raise BotRejection(
            f"/bot comment rejected: author {author[:60]!a} is not a valid GitHub login"
        )
    if author.lower() not in allowed:
        where = f" ({allow_file}: add the login there, one per line)" if allow_file else ""
        raise BotRejection(
            f"/bot comment rejected: {author} is not on the allow list of bot users{where}"
        )
    return author


def tokenize(text: str, *, glob_flags: tuple[str, ...] = ()) -> list[str]:
    """Split on spaces; ``"..."`` groups words (no escapes; quotes cannot nest).

    Args:
        text: the comment, after :func:`check_text`.
        glob_flags: the flags whose value (the next token, or ``--flag=value``) may hold the
            glob characters; anywhere else they are refused as the metacharacters they are.
    """
    tokens = _tokens(text)
    for index, (token, column) in enumerate(tokens):
        allowed = index > 0 and tokens[index - 1][0].partition("=")[0] in glob_flags
        if token.partition("=")[0] in glob_flags and "=" in token:
            allowed, offset = True, token.index("=") + 1
        else:
            offset = 0
        for i, ch in enumerate(token):
            if ch in GLOB_CHARACTERS and not (allowed and i >= offset):
                where = column + i
                raise BotRejection(
                    f"/bot comment rejected: shell metacharacter {ch!r} at column {where} "
                    f"(wildcards and brackets belong only in {'/'.join(glob_flags) or 'stage selectors'})"
                )
    return [token for token, _ in tokens]


def _tokens(text: str) -> list[tuple[str, int]]:
    """Tokens with the 1-based column where each starts (inside its quotes, if quoted)."""
    tokens: list[tuple[str, int]] = []
    for match in re.finditer(r'"([^"]*)"|([^\s"]+)|(")', text):
        if match.start() > 0 and not text[match.start() - 1].isspace():
            raise BotRejection(
                f"/bot comment rejected: put a space before column {match.start() + 1}"
            )
        if match.group(3) is not None:
            raise BotRejection(
                f"/bot comment rejected: unbalanced quote at column {match.start() + 1}"
            )
        if match.group(1) is not None:
            tokens.append((match.group(1), match.start() + 2))
        else:
            tokens.append((match.group(2), match.start() + 1))
    return tokens
