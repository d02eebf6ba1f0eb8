"""``regress trend``: keep nightly acceptance reports, find the night a metric stepped, bisect it."""

from __future__ import annotations

import json
import os
import sys

import click

from regress.cli.options import SEED, FiniteFloatRange, shell_words
from regress.cli.output import OUTPUT_FILE, emit
from regress.errors import exit_codes_help
from regress.files import STDOUT, check_output_path, output_errors

_STORE_ENV = "REGRESS_TREND_STORE"
_DEFAULT_STORE = ".regress-trend"


def _store_option(f):
    return click.option(
        "--store",
        metavar="DIR",
        default=lambda: os.environ.get(_STORE_ENV, _DEFAULT_STORE),
        show_default=f"${_STORE_ENV} or {_DEFAULT_STORE}",
        help="The history folder (keep it as a CI artifact).",
    )(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def trend() -> None:
    """Nightly acceptance history: add reports, check for change points, plot.

    \b
      regress accept --json report.json ...          # the nightly job
      regress trend add report.json --commit $SHA --store history/
      regress trend check --store history/ --bisect  # exit 1 on a regression
      regress trend plot --store history/ -o trend.png
    """


@trend.command("add")
@click.argument("report", metavar="REPORT.json")
@click.option("--commit", required=True, help="The revision the report measured.")
@click.option("--date", default=None, help="The night (YYYY-MM-DD or ISO-8601; default: now).")
@_store_option
@click.option(
    "--command",
    "command",
    default=None,
    help="The command that wrote the report (JSON on stdout); a bisect reruns it. "
    "Default: the regress accept command the report describes.",
)
@click.option("--replace", is_flag=True, help="Supersede a different report for the same night.")
def add(
    report: str, commit: str, date: str | None, store: str, command: str | None, replace: bool
) -> None:
    """Add one night's acceptance report (from `regress accept --json`) to the history."""
    from regress.acceptance.report import Report
    from regress.trend.store import TrendStore

    argv = (
        shell_words(command, option="--command", example='"regress accept --json -"')
        if command
        else None
    )
    loaded = Report.from_json(sys.stdin.read()) if report == STDOUT else Report.load(report)
    trend_store = TrendStore(store)
    status = trend_store.add(loaded, commit=commit, date=date, command=argv, replace=replace)
    click.echo(f"regress trend: {status} {commit[:12]} in {trend_store.path}", err=True)


@trend.command("check", epilog=exit_codes_help("regress trend check"))
@_store_option
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help="Series to check, e.g. runs[batch=8].acceptance_length or A / B (repeatable). "
    "Default: AL and per-position acceptance per batch size, and each AL over batch 1's.",
)
@click.option(
    "--since", default=None, help="Only regressions first seen on or after this date alarm."
)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write the findings.",
)
@click.option(
    "--markdown",
    "md_out",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write an issue comment.",
)
@click.option(
    "--bisect", "bisect", is_flag=True, help="Print the bisect command for each regression."
)
@click.option("--run", "run_bisects", is_flag=True, help="With --bisect: start each bisect.")
@click.option(
    "--repo",
    default=None,
    metavar="DIR",
    help="With --bisect: the checkout to bisect (default: .).",
)
@click.option(
    "--bisect-option",
    "bisect_options",
    multiple=True,
    help='Extra `regress bisect run` option, e.g. "--jobs 4" (repeatable).',
)
@click.option(
    "--bisect-threshold",
    is_flag=True,
    help="With --bisect: judge each run against the midpoint of the two levels "
    "(one run per commit; for a deterministic engine).",
)
@click.option(
    "--alpha",
    type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
    default=None,
    help="Largest permutation p-value of a change point (default 0.01).",
)
@click.option(
    "--min-change",
    type=FiniteFloatRange(0, 1),
    default=None,
    help="Smallest relative step reported (default 0.03).",
)
@click.option(
    "--min-nights",
    type=click.IntRange(min=2),
    default=None,
    help="Fewest nights on each side of a step (default 3): a regression alarms after this "
    "many bad nights; 2 alarms a night sooner, but two odd nights in a row then look like one.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Permutation seed.")
def check(**opts) -> None:
    """Find change points in every series; exit 1 on an open regression, 0 otherwise.

    A fall in acceptance is a regression, a rise an improvement (never an alarm); a regression
    the series has since recovered from is reported but does not alarm.
    """
    from regress.errors import UsageError
    from regress.trend import detect as d
    from regress.trend.bisect import run_plan
    from regress.trend.check import check_store
    from regress.trend.markdown import to_markdown
    from regress.trend.store import TrendStore

    if opts["json_out"] == STDOUT and opts["md_out"] == STDOUT:
        raise UsageError("--json - and --markdown - both want stdout; send one to a file")
    if opts["run_bisects"] and not opts["bisect"]:
        raise UsageError("--run starts the bisects --bisect plans; pass --bisect too")
    check_output_path(opts["json_out"], option="--json")
    check_output_path(opts["md_out"], option="--markdown")
    config = d.DetectorConfig(
        alpha=opts["alpha"] if opts["alpha"] is not None else d.ALPHA,
        min_change=opts["min_change"] if opts["min_change"] is not None else d.MIN_CHANGE,
        min_size=opts["min_nights"] or d.MIN_SIZE,
        seed=opts["seed"],
    )
    options = ["--repo", opts["repo"]] if opts["repo"] else []
    for text in opts["bisect_options"]:
        options += shell_words(text, option="--bisect-option", example='"--jobs 4"')
    result = check_store(
        TrendStore(opts["store"]),
        metrics=opts["metrics"],
        config=config,
        since=opts["since"],
        bisect=opts["bisect"],
        bisect_options=options,
        bisect_threshold=opts["bisect_threshold"],
    )
    quiet = STDOUT in (opts["json_out"], opts["md_out"])
    for line in _lines(result):
        click.echo(line, err=quiet)
    bisect_codes = []
    if opts["run_bisects"]:
        for plan in result.bisects:
            click.echo(f"regress trend: starting {plan.shell}", err=True)
            # the bisect's own output goes to stderr so --json - stays one document
            code = run_plan(plan, stdout=sys.stderr if quiet else None).returncode
            bisect_codes.append(code)
            click.echo(f"regress trend: bisect exited {code}", err=True)
    doc = result.to_dict()
    if bisect_codes:
        doc["bisect_exit_codes"] = bisect_codes
    emit(
        opts["json_out"],
        json.dumps(doc, indent=2) + "\n" if opts["json_out"] else "",
        option="--json",
    )
    emit(opts["md_out"], to_markdown(result) if opts["md_out"] else "", option="--markdown")
    sys.exit(result.exit_code)


def _lines(result) -> list[str]:
    out = []
    for f in result.findings:
        c = f.change
        mark = "REGRESSION" if f.alarm else (c.kind if f.open or not c.regression else "recovered")
        out.append(
            f"{mark:>11s}  {f.metric}  {c.before:.4g} -> {c.after:.4g} ({c.relative:+.1%}, "
            f"p={c.p_value:.3f})  last good {f.last_good['commit'][:12]} "
            f"{f.last_good['date'][:10]}, first bad {f.first_bad['commit'][:12]} "
            f"{f.first_bad['date'][:10]}  [{f.configuration}]"
        )
        if f.bisect_error:
            out.append(f"             no bisect: {f.bisect_error}")
    for plan in result.bisects:
        out.append(f"bisect: {plan.shell}")
    checked = len(result.series)
    skipped = sum(1 for s in result.series if s.note)
    out.append(
        f"regress trend: {checked} series ({skipped} too short), {len(result.findings)} change "
        f"point(s), {len(result.alarms)} open regression(s)"
    )
    return out


@trend.command("plot")
@_store_option
@click.option("-o", "--output", "output", required=True, metavar="FILE", help="The PNG to write.")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help="Series to draw (repeatable). Default: AL per batch size and the AL ratios.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Permutation seed.")
def plot(store: str, output: str, metrics: tuple[str, ...], seed: int) -> None:
    """Draw each series with its change points marked (needs matplotlib)."""
    from regress.errors import UsageError, require_module
    from regress.trend.check import check_store
    from regress.trend.detect import DetectorConfig
    from regress.trend.plot import plot_series, plotted_series
    from regress.trend.store import TrendStore

    if output == STDOUT:
        raise UsageError("-o: a PNG needs a file name, not standard output")
    check_output_path(output, option="-o")
    require_module("matplotlib", purpose="regress trend plot", install="pip install matplotlib")
    trend_store = TrendStore(store)
    result = check_store(trend_store, metrics=metrics, config=DetectorConfig(seed=seed))
    with output_errors("-o", output):
        plot_series(plotted_series(trend_store, metrics), result.findings, output)
    click.echo(f"regress trend: plot written to {output}", err=True)
