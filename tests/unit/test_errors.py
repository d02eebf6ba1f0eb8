"""The one exit-code table: the README quotes it, the CLI's help texts are made from it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from regress.cli import cli
from regress.errors import EXIT_CODES, exit_codes_help, exit_codes_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_quotes_the_exit_code_table():
    text = README.read_text(encoding="utf-8")
    lines = text.split("## Exit codes", 1)[1].strip().splitlines()
    end = next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))
    assert "\n".join(lines[:end]) == exit_codes_markdown()


def test_the_table_covers_every_command_that_exits_with_its_own_codes():
    assert {"regress check", "regress trend check", "regress bisect"} <= set(EXIT_CODES)
    assert all({0, 2, 130} <= set(codes) for codes in EXIT_CODES.values())


def test_each_command_help_states_its_codes_from_the_table():
    runner = CliRunner()
    for argv, command in (
        (["accept", "--help"], "regress accept"),
        (["bisect", "run", "--help"], "regress bisect"),
        (["check", "--help"], "regress check"),
        (["trend", "check", "--help"], "regress trend check"),
        (["demo", "--help"], "regress demo"),
    ):
        shown = " ".join(runner.invoke(cli, argv).output.split())
        assert exit_codes_help(command) in shown, argv
