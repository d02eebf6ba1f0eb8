"""``regress junit``: merge per-stage JUnit XML into one file, and summarise results for a PR."""

from __future__ import annotations

import json
from pathlib import Path

import click

from regress.cli.output import OUTPUT_FILE, emit


@click.group()
def junit() -> None:
    """Merge and summarise JUnit XML from CI stages (FILE may be written STAGE=FILE)."""


def _inputs(files: tuple[str, ...]):
    from regress.ci.junit import parse_input

    return [parse_input(f) for f in files]


@junit.command()
@click.argument("files", nargs=-1, required=True, metavar="[STAGE=]FILE...")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Merged JUnit XML to write (atomically).",
)
@click.option(
    "--keep-going",
    is_flag=True,
    help="Report malformed files by name, merge the rest, then exit 2.",
)
def merge(files: tuple[str, ...], output: Path, keep_going: bool) -> None:
    """Merge JUnit files into one, a suite per stage, with counts recomputed.

    A suite's stage is STAGE= when given, else its own name unless that is pytest's default
    'pytest', else the file name (or its directory, for Jenkins' <stage>/results.xml).
    """
    from regress.ci import junit as lib
    from regress.errors import UsageError
    from regress.files import check_output_path

    check_output_path(output, option="--output")
    loaded = lib.load_all(_inputs(files), keep_going=keep_going)
    merged = lib.merge(loaded)
    emit(output, lib.to_bytes(merged), option="--output")
    click.echo(
        f"{output}: {len(merged)} suite(s), {merged.tests} tests, {merged.failures} "
        f"failures, {merged.errors} errors, {merged.skipped} skipped"
    )
    if loaded.problems:
        for problem in loaded.problems:
            click.echo(f"skipped {problem}", err=True)
        raise UsageError(f"{len(loaded.problems)} file(s) could not be merged (listed above)")


@junit.command()
@click.argument("files", nargs=-1, required=True, metavar="[STAGE=]FILE...")
@click.option(
    "--baseline",
    "baselines",
    multiple=True,
    metavar="[STAGE=]FILE",
    help="Baseline JUnit file (repeatable): report new failures and fixed tests.",
)
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a Markdown summary (for a PR comment) here.",
)
@click.option(
    "--json",
    "json_out",
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write the summary as JSON ('-': stdout).",
)
@click.option("--keep-going", is_flag=True, help="Summarise readable files; list unreadable ones.")
@click.option("--fail-on-new", is_flag=True, help="Exit 1 when there are new failures vs baseline.")
def summary(
    files: tuple[str, ...],
    baselines: tuple[str, ...],
    markdown: Path | None,
    json_out: str | None,
    keep_going: bool,
    fail_on_new: bool,
) -> None:
    """Per-stage pass/fail/skip table and failure messages; with --baseline, what changed."""
    from regress.ci.junit import load_all, render_markdown, render_text, results_of, summarize
    from regress.errors import UsageError
    from regress.files import STDOUT, check_output_path

    if str(markdown) == STDOUT and json_out == STDOUT:
        raise UsageError("--markdown - and --json - both want stdout; send one to a file")
    check_output_path(markdown, option="--markdown")
    check_output_path(json_out, option="--json")
    current = load_all(_inputs(files), keep_going=keep_going)
    base = load_all(_inputs(baselines), keep_going=keep_going) if baselines else None
    result = summarize(results_of(current), results_of(base) if base else None)
    result.problems = current.problems + (base.problems if base else [])
    emit(markdown, render_markdown(result) if markdown else "", option="--markdown")
    emit(
        json_out, json.dumps(result.to_json(), indent=2) + "\n" if json_out else "", option="--json"
    )
    if STDOUT not in (str(markdown), json_out):
        click.echo(render_text(result), nl=False)
    if fail_on_new and result.new_failures:
        raise SystemExit(1)
