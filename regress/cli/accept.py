"""``regress accept``: profile MTP acceptance per batch size and exit 1 on a regression."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import click

from regress.acceptance.engines import COMMON_OPTIONS, ENGINES
from regress.cli.heartbeat import EVERY_S
from regress.cli.options import BatchSizes, FiniteFloatRange
from regress.cli.output import emit, json_option
from regress.cli.plugin_options import inline_help, registry_options, take_values
from regress.errors import FAILED, exit_codes_help
from regress.reference.defects import DEFECTS

_BAR_STEPS = 1000


class _ProgressBar:
    """Progress on stderr, shown from the first finished request: an error found before the
    engine does any work (a bad baseline, a prompt too long for K) is then the only line.

    On a terminal a click progress bar; elsewhere (CI logs, a pipe) plain lines, one per batch
    size and a heartbeat at least every :data:`~regress.cli.heartbeat.EVERY_S` seconds (the
    bar every other command's heartbeat keeps) while requests finish, since click's bar writes
    nothing but its label there.
    """

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._bar = None
        self._shown = 0
        self._said: tuple[str, float] | None = None

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.__exit__(*exc)

    def __call__(self, p) -> None:
        if p.fraction <= 0 and self._bar is None and self._said is None:
            return  # nothing done yet: the run may still be refused as bad input
        label = f"batch {p.batch_size} ({p.run_index + 1}/{p.runs})"
        # sys.stderr looked up now, not at import: CliRunner swaps it per invocation.
        if not sys.stderr.isatty():
            now = time.monotonic()
            if self._said is None or self._said[0] != label or now - self._said[1] >= EVERY_S:
                click.echo(f"regress accept: {label}, {p.fraction:.0%} done", err=True)
                self._said = (label, now)
            return
        if self._bar is None:
            bar = click.progressbar(length=_BAR_STEPS, label="profiling", file=sys.stderr)
            self._bar = self._stack.enter_context(bar)
        self._bar.label = label
        target = int(p.fraction * _BAR_STEPS)
        if target > self._shown:
            self._bar.update(target - self._shown)
            self._shown = target


@click.command("accept", epilog=exit_codes_help("regress accept"))
@click.option(
    "--engine",
    type=click.Choice(ENGINES.names()),
    default="reference",
    show_default=True,
    help=inline_help(ENGINES),
)
@registry_options(ENGINES, skip=COMMON_OPTIONS)
@click.option("--model", default=None, metavar="DIR", help="Checkpoint directory (trtllm only).")
@click.option(
    "--batch-sizes",
    default="1,8",
    show_default=True,
    type=BatchSizes(),
    help="Comma-separated; 1 is the reference.",
)
@click.option(
    "--max-draft-len",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="K, drafts per step.",
)
@click.option(
    "--defect",
    "defects",
    multiple=True,
    metavar="NAME",
    help=f"Replay a historical defect (reference; repeatable): {', '.join(DEFECTS)}.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Default: cpu (reference), cuda (trtllm).",
)
@click.option("--cuda-graph/--no-cuda-graph", default=None, help="Default: the engine's own.")
@click.option(
    "--sentinel/--no-sentinel", default=False, help="Run the reference engine's DSA sentinel."
)
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='JSONL: {"token_ids": [...]} or {"prompt": "text"} per line. Default: built-in prompts.',
)
@click.option(
    "--num-prompts", type=click.IntRange(min=1), default=None, help="Use the first N prompts."
)
@click.option("--max-new-tokens", type=click.IntRange(min=2), default=64, show_default=True)
@click.option(
    "--tolerance",
    type=FiniteFloatRange(0, 1, max_open=True),
    default=0.05,
    show_default=True,
    help="Relative drop tolerated before a significant loss is a regression.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    default=0,
    show_default=True,
    help="Engine seed (reference: its weights) and bootstrap seed.",
)
@json_option("Write the report to FILE (the table still shows); '-' puts only JSON on stdout.")
@click.option("--plot", "plot_out", default=None, metavar="FILE", help="Write a PNG plot.")
@click.option(
    "--baseline",
    default=None,
    metavar="FILE",
    help="A report from --json, or acceptance_length.yaml[#KEY].",
)
@click.option(
    "--allow-config-mismatch",
    is_flag=True,
    help="Compare against a baseline report measured on other prompts, K or token budget.",
)
@click.option(
    "--record-reference",
    "record_key",
    default=None,
    metavar="KEY",
    help="Record the reference batch's AL and per-position rates as KEY in --reference-yaml "
    "(upstream's acceptance_length.yaml schema plus the workload digest).",
)
@click.option(
    "--reference-yaml",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("acceptance_length.yaml"),
    show_default=True,
    help="The reference file --record-reference updates (other entries kept as they are).",
)
@click.pass_context
def accept(
    ctx: click.Context,
    engine: str,
    model: str | None,
    batch_sizes: list[int],
    max_draft_len: int,
    defects: tuple[str, ...],
    device: str | None,
    cuda_graph: bool | None,
    sentinel: bool,
    prompts_file: Path | None,
    num_prompts: int | None,
    max_new_tokens: int,
    tolerance: float,
    seed: int,
    json_out: str | None,
    plot_out: str | None,
    baseline: str | None,
    allow_config_mismatch: bool,
    record_key: str | None,
    reference_yaml: Path,
    **engine_options,
) -> None:
    """Profile MTP acceptance per batch size and judge it against batch 1."""
    from regress.acceptance.engines import get_engine
    from regress.acceptance.profile import profile
    from regress.acceptance.prompts import resolve_prompts
    from regress.acceptance.references import check_reference_file, record_report_reference
    from regress.acceptance.report import format_table
    from regress.errors import UsageError, require_module
    from regress.files import STDOUT, check_output_path, output_errors

    # Every output is checked before the run: a bad path found after it is a wasted run.
    check_output_path(json_out, option="--json")
    if plot_out is not None:
        if plot_out == STDOUT:
            raise UsageError("--plot -: a PNG does not go to standard output; give a file name")
        check_output_path(plot_out, option="--plot")
        require_module("matplotlib", purpose="--plot", install="pip install matplotlib")
    if record_key is not None:
        check_reference_file(reference_yaml, record_key)
    names = [n.strip() for d in defects for n in d.split(",") if n.strip()]
    if defects and not names:
        raise UsageError(
            f"--defect {defects[0]!r} names no defect; give one `regress defects` lists"
        )
    extra = take_values(ENGINES, engine_options)  # the options an installed engine adds
    ENGINES.refuse_foreign(engine, extra)
    adapter = get_engine(
        engine,
        model=model,
        device=device or ("cuda" if engine == "trtllm" else "cpu"),
        defects=names or None,
        cuda_graph=cuda_graph,
        seed=seed,
        sentinel=sentinel,
        **extra,
    )
    prompts, prompts_label = resolve_prompts(adapter, prompts_file, num_prompts)

    with _ProgressBar() as on_progress:
        report = profile(
            adapter,
            prompts,
            batch_sizes=batch_sizes,
            max_draft_len=max_draft_len,
            max_new_tokens=max_new_tokens,
            tolerance=tolerance,
            baseline=baseline,  # loaded (and checked) before the first run
            progress=on_progress,
            seed=seed,
            config={"prompts": prompts_label},
            allow_config_mismatch=allow_config_mismatch,
        )

    for mismatch in (report.baseline or {}).get("config_mismatches") or []:
        click.echo(f"regress accept: note: baseline differs: {mismatch}", err=True)

    emit(json_out, report.to_json() + "\n" if json_out else "", option="--json")
    if json_out == STDOUT:
        for verdict in report.verdicts:
            if verdict.regressed:
                click.echo(f"regress accept: {verdict.summary()}", err=True)
    else:
        click.echo(format_table(report))
    if plot_out is not None:
        from regress.acceptance.plot import plot_report

        with output_errors("--plot", plot_out):
            plot_report(report, plot_out)
        click.echo(f"plot written to {plot_out}", err=True)
    if record_key is not None and report.regressed:
        click.echo(f"regress accept: {record_key} not recorded: the run regressed", err=True)
    elif record_key is not None:
        written = record_report_reference(reference_yaml, record_key, report)
        click.echo(f"regress accept: reference {record_key} recorded in {written}", err=True)
    if report.regressed:
        sizes = ", ".join(str(b) for b in report.regressed_batch_sizes) or "-"
        click.echo(f"regress accept: acceptance regression at batch size(s) {sizes}", err=True)
        ctx.exit(FAILED)
