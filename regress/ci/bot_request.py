"""A /bot request as it reaches regress: a raw comment and its author, or ``bot parse`` JSON.

Both paths end in :func:`regress.ci.bot.parse_comment`, so a hand-edited ``--parsed`` file gets no
further than a hostile comment would: the JSON is turned back into a comment and parsed again from
scratch, and an author given beside it must be the one it names.
"""

from __future__ import annotations

import json
from pathlib import Path

from regress.ci.bot import BotCommand, load_allow_list, parse_comment
from regress.ci.stages import StageLists
from regress.errors import UsageError

#: The allow list's default name inside the test-lists directory.
ALLOW_FILE = "bot-allow.txt"


def read_request(
    comment: str | None, author: str | None, *, allow_file: Path | None, lists_dir: Path
) -> tuple[BotCommand, StageLists]:
    """Validate ``comment`` by ``author`` against the allow list and the stages of ``lists_dir``.

    Raises:
        UsageError: the comment or the author is missing; ``BotRejection`` (exit 2) for a
            comment the bot refuses.
    """
    if comment is None or author is None:
        raise UsageError("give the comment (or - to read it from stdin) and --author LOGIN")
    path = allow_file if allow_file is not None else lists_dir / ALLOW_FILE
    allowed = load_allow_list(path)
    lists = StageLists.load(lists_dir)
    command = parse_comment(
        comment, author=author, allowed=allowed, stages=lists.stages, allow_file=str(path)
    )
    return command, lists


def comment_from_parsed(text: str, author: str | None) -> tuple[str, str]:
    """The comment and author that ``regress bot parse`` JSON stands for, to be parsed again.

    Raises:
        UsageError: not such JSON, or ``author`` differs from the one it names.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--parsed is not JSON from `regress bot parse`: {exc}") from None
    try:
        command = BotCommand.from_json(doc)
    except UsageError as exc:
        raise UsageError(f"--parsed is not JSON from `regress bot parse`: {exc}") from None
    if author is not None and author.lower() != command.author.lower():
        raise UsageError(f"--author {author} differs from the parsed author {command.author}")
    return command.to_comment(), command.author
