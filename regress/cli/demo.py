"""``regress demo``: the main job on the embedded reference engine, end to end in minutes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def _progress(name: str, p) -> None:
    kind = getattr(p, "kind", None)
    if kind == "step":
        pairs = ", ".join(f"{c[:10]} {v}" for c, v in zip(p.commits, p.verdicts, strict=False))
        click.echo(
            f"[{name}] step {p.step}: {pairs}; {p.candidates} candidate(s) left, "
            f"{p.probes} probe run(s), {p.elapsed:.0f}s",
            err=True,
        )
    else:
        click.echo(f"[{name}] {getattr(p, 'message', p)}", err=True)


@click.command()
@click.option("--keep", is_flag=True, help="Keep the generated repository and bisect cache.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to build (default: a new temporary directory).",
)
@click.option(
    "--commits",
    default=100,
    show_default=True,
    type=click.IntRange(8, 2000),
    help="Length of the generated history.",
)
@click.option("--seed", default=0, show_default=True, help="Where the bugs are planted.")
@click.option(
    "--json", "json_out", metavar="FILE|-", help="Write the result as JSON ('-': stdout)."
)
@click.option(
    "--trend",
    is_flag=True,
    help="Nightly variant: reports per night, `regress trend` finds the step and bisects it.",
)
def demo(
    keep: bool, workdir: Path | None, commits: int, seed: int, json_out: str | None, trend: bool
) -> None:
    """Plant the two historical DSA regressions in a throwaway git history and bisect them.

    The history (100 commits by default) carries copies of the reference engine's DSA metadata and
    layer-wise runner with harmless edits; one commit drops the req_idx_per_token refresh, a later
    one drops the MTP shape announcement. `regress bisect` then finds the first with the metric
    probe (AL at batch 8 / AL at batch 1 on the reference engine) and the second with the assert
    probe (DeepGEMM's DG_HOST_ASSERT). Exit 0 only when both culprits are the planted commits.
    """
    from regress.demo import run_demo

    if workdir is not None and workdir.exists() and any(workdir.iterdir()):
        raise click.UsageError(f"--workdir {workdir} is not empty; give a new or empty directory")
    if trend:
        from regress.demo.trend import run_trend_demo
        from regress.files import check_output_path

        check_output_path(json_out, option="--json")

        result = run_trend_demo(
            workdir=workdir, keep=keep, commits=commits, seed=seed, progress=_progress
        )
        if json_out == "-":
            click.echo(json.dumps(result.to_json(), indent=2))
        else:
            if json_out:
                Path(json_out).write_text(json.dumps(result.to_json(), indent=2) + "\n")
            click.echo("\n".join(result.summary()))
            click.echo(f"{'OK' if result.ok else 'FAILED'} in {result.seconds:.0f}s")
        sys.exit(0 if result.ok else 1)
    result = run_demo(workdir=workdir, keep=keep, commits=commits, seed=seed, progress=_progress)
    doc = result.to_json()
    if json_out == "-":
        click.echo(json.dumps(doc, indent=2))
    else:
        if json_out:
            Path(json_out).write_text(json.dumps(doc, indent=2) + "\n")
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
    sys.exit(0 if result.ok else 1)
