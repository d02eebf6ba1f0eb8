"""``regress check``: run the DSA contracts against a TensorRT-LLM source tree, on a CPU or a GPU."""

from __future__ import annotations

import json
import sys

import click

from regress.check.catalog import scenario_help, scenario_names
from regress.check.check import ENV_VAR
from regress.check.isolation import DEFAULT_TIMEOUT_S, PER_CELL_S
from regress.cli.options import FiniteFloatRange
from regress.errors import BAD_INPUT, UNFINISHED, exit_codes_help

#: The longest --timeout taken (a week): past it a deadline no longer fits the clock's range.
MAX_TIMEOUT_S = 7 * 24 * 3600.0


@click.command(epilog=exit_codes_help("regress check"))
@click.option(
    "--trtllm-src",
    "source",
    envvar=ENV_VAR,
    required=True,
    metavar="PATH",
    help=f"TensorRT-LLM checkout (or its tensorrt_llm/ directory); default ${ENV_VAR}.",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    metavar="NAME",
    help=scenario_help(),
)
@click.option(
    "--matrix",
    "matrix",
    multiple=True,
    metavar="CELLS",
    help="Cells of the matrix scenario (repeatable): default (upstream's production "
    "configurations), full, or a cell such as fused=off,dsl=on (axes fused, dsl, share, skip, "
    "sm, overlap, pad). [default: default]",
)
@click.option(
    "--sm",
    type=click.IntRange(min=70, max=199),
    default=90,
    show_default=True,
    help="SM version the code sees (90 Hopper, 100 Blackwell).",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="cpu: CUDA allocations land on the CPU and Triton kernels run in its interpreter; cuda: "
    "the tree's CUDA tensors live on the GPU and its kernels run natively (needs a GPU and a "
    "CUDA build of torch).",
)
@click.option(
    "--timeout",
    type=FiniteFloatRange(min=0, max=MAX_TIMEOUT_S, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Seconds the tree's code may run (loading and scenarios, in a child process; its start "
    "and import torch are not counted) before the check is a gap, exit 3: a hang. "
    f"[default: {DEFAULT_TIMEOUT_S:g}, plus {PER_CELL_S:g} per --matrix cell past the default "
    "run's]",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    metavar="FILE|-",
    help="Write the report as JSON to FILE, or -.",
)
@click.option(
    "--markdown",
    "markdown_out",
    default=None,
    metavar="FILE|-",
    help="Write the report as markdown (a CI job summary) to FILE, or -.",
)
@click.option(
    "--known",
    "known_file",
    default=None,
    metavar="FILE",
    help="Known findings (docs/known-findings.txt shows the format): a finding a line matches is "
    "reported as known and does not fail; a line matching nothing is reported as fixed.",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def check(
    source: str,
    scenarios: tuple[str, ...],
    matrix: tuple[str, ...],
    sm: int,
    device: str,
    timeout: float | None,
    json_out: str | None,
    markdown_out: str | None,
    known_file: str | None,
    quiet: bool,
):
    """Load the real DSA metadata of a TensorRT-LLM tree on a CPU and check its contracts.

    Nothing is built or installed: package __init__ files are skipped, compiled and GPU-only
    modules are strict stubs, CUDA allocations land on the CPU (with --device cuda: on the GPU,
    the tree's Triton kernels native); the report lists every fake.
    The tree's code runs in a child process, so an exit or a hang in it cannot pass for a result;
    only a broken contract (upstream's own code on real inputs) is a verdict. When no verdict is
    possible, the cause is named with the upstream file and line.
    """
    from regress.check.isolation import run_check_isolated
    from regress.check.known import load_known
    from regress.check.summary import markdown
    from regress.cli.output import emit
    from regress.errors import UsageError
    from regress.files import STDOUT, check_output_path
    from regress.sandbox.eras import Settings

    unknown = sorted(set(scenarios) - set(scenario_names()))
    if unknown:
        raise UsageError(
            f"unknown --scenario {', '.join(unknown)}: choose from {', '.join(scenario_names())}"
        )
    if json_out == STDOUT and markdown_out == STDOUT:
        raise UsageError("--json - and --markdown - both want stdout: send one to a file")
    from regress.check.matrix import check_spec

    for spec in matrix:
        check_spec(spec)
    check_output_path(json_out, option="--json")
    check_output_path(markdown_out, option="--markdown")
    known = load_known(known_file, scenario_names()) if known_file else None  # before running
    report = run_check_isolated(
        source,
        scenarios=scenarios or None,
        settings=Settings(sm=sm, device=device),
        timeout=timeout,
        matrix=matrix or ("default",),
    )
    if known is not None:
        report.apply_known(known)
    if not quiet or report.exit_code in (BAD_INPUT, UNFINISHED):
        for line in report.lines():
            click.echo(line, err=True)
    text = json.dumps(report.to_json(), indent=1, sort_keys=True) + "\n"
    emit(json_out, text, option="--json")
    if markdown_out:
        emit(markdown_out, markdown(report), option="--markdown")
    sys.exit(report.exit_code)
