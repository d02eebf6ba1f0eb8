"""``regress testlist``: show what a CI stage runs, and validate every list against the repo."""

from __future__ import annotations

import json
from pathlib import Path

import click

_DIR = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("test-lists"),
    show_default=True,
    help="The test-lists directory (stages.yml, l0_*.yml, waives.txt).",
)


@click.group()
def testlist() -> None:
    """Show and validate CI stage test lists (test-db YAML, as upstream TensorRT-LLM)."""


@testlist.command()
@_DIR
@click.option("--stage", "stage_name", metavar="NAME", help="Stage to show; omit to list stages.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def show(directory: Path, stage_name: str | None, as_json: bool) -> None:
    """Print the entries a stage selects (one per line), or every stage without --stage."""
    from regress.ci.stages import StageLists

    lists = StageLists.load(directory)
    if stage_name is None:
        rows = [
            {
                "stage": s.name,
                "test_db": s.test_db,
                "gpu_type": s.gpu_type,
                "gpu_count": s.gpu_count,
                "stage_term": s.stage,
                "backend": s.backend,
                "entries": len(lists.entries(s.name)) if s.test_db in lists.dbs else 0,
            }
            for s in lists.stages.values()
        ]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
        for r in [] if as_json else rows:
            click.echo(
                f"{r['stage']}  ({r['gpu_count']}x {r['gpu_type']}, {r['stage_term']}, "
                f"{r['test_db']}: {r['entries']} entries)"
            )
        return
    entries = lists.entries(stage_name)
    if as_json:
        doc = [
            {
                "test": e.test_id,
                "timeout_minutes": e.timeout_minutes,
                "source": f"{e.source}:{e.line}",
            }
            for e in entries
        ]
        click.echo(json.dumps({"stage": stage_name, "entries": doc}, indent=2))
        return
    for entry in entries:
        click.echo(entry.render())


@testlist.command()
@_DIR
@click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Repository root the entries are relative to (default: the list directory's parent).",
)
@click.option(
    "--waives",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Waive file to check too (default: waives.txt in the list directory, if present).",
)
@click.option(
    "--no-collect", is_flag=True, help="Skip `pytest --collect-only` (paths and keys only)."
)
def validate(directory: Path, root: Path | None, waives: Path | None, no_collect: bool) -> None:
    """Check every list: YAML keys, stages, paths on disk, node ids pytest collects.

    Problems are printed as FILE:LINE: MESSAGE; exit 2 if there is any.
    """
    from regress.ci.validation import validate as run_validation
    from regress.errors import UsageError

    root = root if root is not None else directory.resolve().parent
    problems = run_validation(directory, root=root, waives=waives, collect=not no_collect)
    if problems:
        for problem in problems:
            click.echo(str(problem), err=True)
        raise UsageError(f"{len(problems)} problem(s) in {directory}; fix them and re-run")
    click.echo(f"{directory}: ok")
