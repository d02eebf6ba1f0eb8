"""``regress demo``: the main job on the embedded reference engine, end to end in minutes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click

from regress.cli.heartbeat import Heartbeat
from regress.cli.output import emit_json, json_option
from regress.errors import FAILED, OK, exit_codes_help


def _shower(beat: Heartbeat):
    """Render each progress event on stderr, elapsed seconds first; the heartbeat fills gaps."""

    def show(event) -> None:
        beat.say(
            f"[{event.elapsed:4.0f}s] [{event.where}] {event.message}",
            doing=f"working on [{event.where}]",
        )

    return show


def _check_workdir(workdir: Path | None) -> None:
    from regress.errors import UsageError
    from regress.files import check_output_path

    if workdir is None:
        return
    if workdir.exists():
        if any(workdir.iterdir()):
            raise UsageError(f"--workdir {workdir} is not empty; give a new or empty directory")
        check_output_path(workdir / "repo", option="--workdir")
    else:
        check_output_path(workdir, option="--workdir")


@contextlib.contextmanager
def _kept_files_hint(keep: bool) -> Iterator[None]:
    """An error naming a log in the work folder, which is gone by now: say how to keep it."""
    from regress.errors import RegressError

    try:
        yield
    except RegressError as exc:
        if keep:
            raise
        raise RegressError(
            f"{exc}; the work folder was removed: rerun with --keep to keep the files it names",
            exit_code=exc.exit_code,
        ) from exc


def _trend(*, workdir, keep, commits, seed, json_out) -> None:
    """The nightly variant: reports per night, ``regress trend`` finds the step and bisects it."""
    from regress.demo.trend import run_trend_demo

    with _kept_files_hint(keep), Heartbeat("regress demo") as beat:
        beat.say("regress demo: building the nightly history", doing="building the history")
        result = run_trend_demo(
            workdir=workdir, keep=keep, commits=commits, seed=seed, progress=_shower(beat)
        )
    _finish(result, json_out)


def _check(*, workdir, keep, json_out) -> None:
    """``regress check`` on two fake trees: before the fix it fails, after it it passes."""
    from regress.demo.check import run_check_demo

    with Heartbeat("regress demo") as beat:
        beat.say("regress demo: building two fake TensorRT-LLM trees", doing="checking")
        result = run_check_demo(workdir=workdir, keep=keep, progress=_shower(beat))
    _finish(result, json_out)


def _finish(result, json_out) -> NoReturn:
    """The JSON, or the summary and an OK/FAILED line; then the exit (the --trend and --check
    variants end alike)."""
    if not emit_json(result.to_json(), json_out):
        click.echo("\n".join(result.summary()))
        click.echo(f"{'OK' if result.ok else 'FAILED'} in {result.seconds:.0f}s")
    raise SystemExit(OK if result.ok else FAILED)


@click.command(epilog=exit_codes_help("regress demo"))
@click.option("--keep", is_flag=True, help="Keep the generated repository and bisect cache.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Where to build (default: a new temporary directory).",
)
@click.option(
    "--commits",
    default=100,
    show_default=True,
    type=click.IntRange(8, 2000),
    help="Length of the generated history.",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Where the bugs are planted.",
)
@json_option(
    "Write the result as JSON to FILE (the summary still shows); '-': only JSON on stdout."
)
@click.option(
    "--trend",
    is_flag=True,
    help="Nightly variant: reports per night, `regress trend` finds the step and bisects it.",
)
@click.option(
    "--check",
    "check",
    is_flag=True,
    help="Show `regress check` without a TensorRT-LLM checkout: two fake trees, before and after "
    "the fix; the first must fail, the second pass.",
)
@click.option(
    "--defect",
    metavar="NAME",
    default=None,
    help="Plant this registered defect alone (see `regress defects`) and bisect it.",
)
def demo(
    keep: bool,
    workdir: Path | None,
    commits: int,
    seed: int,
    json_out: str | None,
    trend: bool,
    check: bool,
    defect: str | None,
) -> None:
    """Plant the two historical DSA regressions in a throwaway git history and bisect them.

    The history (100 commits by default) carries copies of the reference engine's DSA metadata and
    layer-wise runner with harmless edits; one commit drops the req_idx_per_token refresh, a later
    one drops the MTP shape announcement. `regress bisect` then finds the first with the metric
    probe (AL at batch 8 / AL at batch 1 on the reference engine) and the second with the assert
    probe (DeepGEMM's DG_HOST_ASSERT). --defect NAME plants that registered defect alone and
    bisects it with its own probe.
    """
    from regress.demo import run_demo
    from regress.errors import UsageError
    from regress.files import check_output_path

    _check_workdir(workdir)
    check_output_path(json_out, option="--json")
    if defect is not None:
        from regress.demo.plants import PLANTS
        from regress.reference.defects import validate_defects

        validate_defects([defect])
        if trend:
            raise UsageError("--defect plants one defect for the bisect demo; drop --trend")
        if defect not in PLANTS:  # a registered defect the demo has no plant for: our bug
            raise UsageError(f"regress demo cannot plant {defect!r} yet; see regress/demo")
    if check and (trend or defect is not None):
        raise UsageError("--check runs alone; drop --trend and --defect")
    if check:
        _check(workdir=workdir, keep=keep, json_out=json_out)
    if trend:
        _trend(workdir=workdir, keep=keep, commits=commits, seed=seed, json_out=json_out)
    with _kept_files_hint(keep), Heartbeat("regress demo") as beat:
        beat.doing("building the history")  # run_demo's own first event comes at once
        result = run_demo(
            workdir=workdir,
            keep=keep,
            commits=commits,
            seed=seed,
            defect=defect,
            progress=_shower(beat),
        )
    if not emit_json(result.to_json(), json_out):
        for b in result.bisects:
            mark = "MATCH" if b.matched else "MISMATCH"
            click.echo(
                f"{b.name}: culprit {(b.culprit or 'none')[:12]} "
                f'"{b.culprit_subject or ""}" - planted {b.planted[:12]} [{mark}] '
                f"({b.probes} probe runs, {b.seconds:.0f}s, status {b.status})"
            )
        where = f"kept in {result.repo}" if keep else "removed"
        click.echo(
            f"{'OK' if result.ok else 'FAILED'} in {result.seconds:.0f}s; repository {where}"
        )
    raise SystemExit(OK if result.ok else FAILED)
