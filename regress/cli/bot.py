"""``regress bot``: validate a /bot PR comment to normalised JSON, and plan its pytest runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

_COMMON = [
    click.argument("comment", required=False),
    click.option("--author", metavar="LOGIN", help="GitHub login of the commenter."),
    click.option(
        "--allow",
        "allow_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Allow list of logins (default: <test-lists>/bot-allow.txt).",
    ),
    click.option(
        "--test-lists",
        "lists_dir",
        type=click.Path(file_okay=False, path_type=Path),
        metavar="DIR",
        default=Path("test-lists"),
        show_default=True,
        help="Directory whose stages.yml defines the valid stage names.",
    ),
]


def _common(func):
    for decorator in reversed(_COMMON):
        func = decorator(func)
    return func


@click.group()
def bot() -> None:
    """Parse and plan /bot PR comments. Rejections exit 2 with the reason on stderr."""


def _parse(comment: str | None, author: str | None, allow_file: Path | None, lists_dir: Path):
    from regress.ci.bot_request import read_request

    if comment == "-":
        comment = sys.stdin.read(1 << 20)  # the size check then rejects anything this long
    return read_request(comment, author, allow_file=allow_file, lists_dir=lists_dir)


@bot.command()
@_common
def parse(
    comment: str | None, author: str | None, allow_file: Path | None, lists_dir: Path
) -> None:
    """Validate COMMENT by --author and print it as normalised JSON."""
    command, _ = _parse(comment, author, allow_file, lists_dir)
    click.echo(json.dumps(command.to_json(), indent=2))


@bot.command()
@_common
@click.option(
    "--parsed",
    type=click.File("rb"),
    default=None,
    help="JSON from `regress bot parse` (or - for stdin) instead of COMMENT/--author.",
)
@click.option(
    "--results",
    "results_dir",
    metavar="DIR",
    default="results",
    show_default=True,
    help="Directory for per-stage JUnit XML in the planned argv.",
)
@click.option("--python", default="python", show_default=True, help="Interpreter in the argv.")
def plan(
    comment: str | None,
    author: str | None,
    allow_file: Path | None,
    lists_dir: Path,
    parsed,
    results_dir: str,
    python: str,
) -> None:
    """Print the stages a /bot run selects and each one's pytest argv (JSON lists).

    With --parsed the JSON is re-validated from scratch (turned back into a comment and parsed
    again), so a hand-edited file gets no further than a hostile comment would.
    """
    from regress.ci.bot_request import comment_from_parsed
    from regress.ci.plan import plan as make_plan
    from regress.errors import UsageError

    if parsed is not None:
        if comment is not None:
            raise UsageError("give either COMMENT or --parsed, not both")
        data = parsed.read(1 << 20)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"--parsed {parsed.name}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                "give the JSON `regress bot parse` printed"
            ) from None
        comment, author = comment_from_parsed(text, author)
    command, lists = _parse(comment, author, allow_file, lists_dir)
    result = make_plan(
        command, lists, test_lists_dir=lists_dir.as_posix(), results_dir=results_dir, python=python
    )
    click.echo(json.dumps(result.to_json(), indent=2))
