"""``regress testlist``: show what a CI stage (or a facts query) runs, and validate every list."""

from __future__ import annotations

import json
from pathlib import Path

import click

from regress.cli.output import OUTPUT_FILE

_DIR = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    default=Path("test-lists"),
    show_default=True,
    help="A test-db directory: l0_*.yml lists, optionally stages.yml and waives.txt.",
)


@click.group()
def testlist() -> None:
    """Show and validate CI stage test lists (test-db YAML, as upstream TensorRT-LLM)."""


def _facts(text: str, option: str) -> dict[str, object]:
    from regress.errors import UsageError

    try:
        facts = json.loads(text)
    except ValueError as exc:
        raise UsageError(f'{option}: not JSON ({exc}); e.g. \'{{"gpu": "H200"}}\'') from None
    if not isinstance(facts, dict) or not all(
        isinstance(v, str | int | float | bool) or v is None for v in facts.values()
    ):
        raise UsageError(f"{option}: give a JSON object of facts with scalar values")
    return facts


def _write(doc: object, json_out: str) -> None:
    from regress.cli.output import emit

    emit(json_out, json.dumps(doc, indent=1, sort_keys=True) + "\n", option="--json")


@testlist.command()
@_DIR
@click.option("--stage", "stage_name", metavar="NAME", help="A stage of stages.yml to show.")
@click.option("--context", metavar="NAME", help="A test-db context (top-level key) to show.")
@click.option(
    "--match",
    "match",
    metavar="JSON",
    help="With --context: facts as trt-test-db takes them; facts not given do not constrain.",
)
@click.option(
    "--match-exact",
    "match_exact",
    metavar="JSON",
    help="With --context: facts; a block testing a fact not given does not match.",
)
@click.option(
    "--json", "json_out", type=OUTPUT_FILE, metavar="FILE|-", help="Write JSON here ('-': stdout)."
)
def show(
    directory: Path,
    stage_name: str | None,
    context: str | None,
    match: str | None,
    match_exact: str | None,
    json_out: str | None,
) -> None:
    """Print the entries a stage or a context query selects, or the stages and contexts.

    \b
    regress testlist show --stage H200-PyTorch-1
    regress testlist show --dir test-db --context l0_dgx_h200 \\
        --match-exact '{"gpu": "H200", "system_gpu_count": "8", "stage": "post_merge", ...}'
    """
    from regress.ci.stages import StageLists
    from regress.errors import UsageError
    from regress.files import check_output_path

    check_output_path(json_out, option="--json")
    if match is not None and match_exact is not None:
        raise UsageError("give --match or --match-exact, not both")
    if (match is not None or match_exact is not None) and context is None:
        raise UsageError("--match/--match-exact select blocks of one --context NAME")
    if stage_name is not None and context is not None:
        raise UsageError("give --stage or --context, not both")
    lists = StageLists.load(directory)
    if not lists.stages and not lists.dbs:  # an empty folder said nothing
        raise UsageError(
            f"--dir {directory}: no test lists there (no l0_*.yml, no stages.yml); point --dir "
            "at a test-db folder, e.g. --dir test-lists"
        )
    if stage_name is None and context is None:
        _overview(lists, json_out)
        return
    if stage_name is not None:
        entries, label = lists.entries(stage_name), {"stage": stage_name}
    else:
        query = match_exact if match_exact is not None else match
        facts = _facts(query, "--match-exact" if match_exact else "--match") if query else None
        db = lists.context(context)
        entries = db.select(context, facts, exact=match_exact is not None)
        label = {"context": context, "facts": facts}
    if json_out is not None:
        _write({**label, "entries": [e.to_json() for e in entries]}, json_out)
        if json_out != "-":
            click.echo(f"{len(entries)} entries written to {json_out}")
        return
    for entry in entries:
        click.echo(entry.render())


def _overview(lists, json_out: str | None) -> None:
    doc = lists.overview()
    rows, contexts = doc["stages"], doc["contexts"]
    if json_out is not None:
        _write(doc, json_out)
        return
    for r in rows:
        click.echo(
            f"{r['stage']}  ({r['gpu_count']}x {r['gpu_type']}, {r['stage_term']}, "
            f"{r['test_db']}: {r['entries']} entries)"
        )
    if not rows:
        for name, path in contexts.items():
            click.echo(f"{name}  ({path})")


@testlist.command()
@_DIR
@click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    metavar="DIR",
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
@click.option(
    "--syntax-only",
    is_flag=True,
    help="Check the grammar only, not paths on disk (upstream's folder, outside its repo).",
)
def validate(
    directory: Path, root: Path | None, waives: Path | None, no_collect: bool, syntax_only: bool
) -> None:
    """Check every list: grammar and keys, stages, paths on disk, node ids pytest collects.

    Problems are printed as FILE:LINE: MESSAGE; exit 2 if there is any.
    """
    from regress.ci.validation import validate as run_validation
    from regress.errors import UsageError

    root = root if root is not None else directory.resolve().parent
    problems = run_validation(
        directory, root=root, waives=waives, collect=not no_collect, paths=not syntax_only
    )
    if problems:
        for problem in problems:
            click.echo(str(problem), err=True)
        raise UsageError(f"{len(problems)} problem(s) in {directory}; fix them and re-run")
    click.echo(f"{directory}: ok")
