"""``regress check``: run the DSA contracts against a TensorRT-LLM source tree on a CPU."""

from __future__ import annotations

import json
import sys

import click

from regress.errors import BAD_INPUT, UNFINISHED, exit_codes_help
from regress.upstream.check import ENV_VAR


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
    help="Run only this scenario (repeatable): req_idx_map, shape_announcement, "
    "runner_guard, sentinel_lifecycle.",
)
@click.option(
    "--sm",
    type=click.IntRange(min=1),
    default=90,
    show_default=True,
    help="SM version the code sees (90 Hopper, 100 Blackwell).",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    metavar="FILE|-",
    help="Write the report as JSON to FILE, or -.",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def check(source: str, scenarios: tuple[str, ...], sm: int, json_out: str | None, quiet: bool):
    """Load the real DSA metadata of a TensorRT-LLM tree on a CPU and check its contracts.

    Nothing is built or installed: package __init__ files are skipped, compiled and GPU-only
    modules are strict stubs, CUDA allocations land on the CPU; the report lists every fake.
    When the sandbox cannot load the tree, the missing piece is named.
    """
    from regress.errors import UsageError
    from regress.files import STDOUT, check_output_path, write_output
    from regress.upstream.check import run_check, scenario_names
    from regress.upstream.eras import Settings

    unknown = sorted(set(scenarios) - set(scenario_names()))
    if unknown:
        raise UsageError(
            f"unknown --scenario {', '.join(unknown)}: choose from {', '.join(scenario_names())}"
        )
    check_output_path(json_out, option="--json")
    report = run_check(source, scenarios=scenarios or None, settings=Settings(sm=sm))
    to_stdout = json_out == STDOUT
    if not quiet or report.exit_code in (BAD_INPUT, UNFINISHED):
        for line in report.lines():
            click.echo(line, err=True)
    if json_out:
        text = json.dumps(report.to_json(), indent=1, sort_keys=True) + "\n"
        if to_stdout:
            click.echo(text, nl=False)
        else:
            write_output(json_out, text, option="--json")
    sys.exit(report.exit_code)
