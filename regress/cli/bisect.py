"""``regress bisect``: find the commit that caused (or fixed) a regression; a thin click layer."""

from __future__ import annotations

import json
import sys

import click

from regress.bisect.config import defaults
from regress.bisect.registry import PROBES, RECIPES
from regress.cli.heartbeat import Heartbeat
from regress.cli.options import FiniteFloat
from regress.cli.output import OUTPUT_FILE, emit
from regress.cli.plugin_options import choices_help, registry_options, take_values
from regress.errors import Terminated, exit_codes_help, interrupt_exit_code
from regress.files import check_output_path

_D = defaults()

_OUTPUTS = {"json_out": "--json", "junit": "--junit", "markdown": "--markdown"}

RUN_HELP = """Bisect GOOD..BAD with the probe command given after `--`.

\b
  regress bisect run --good v1.2 --bad main -- ./probe.sh
  regress bisect run --good A --bad B --flaky --jobs 4 -- pytest tests/test_x.py
  regress bisect run --good A --bad B --probe metric --metric runs[1].acceptance_length \\
      --higher-is-better -- regress accept --json -

\b
The probe runs in a private clone of each commit (REGRESS_COMMIT, REGRESS_WORKTREE set).
Results are stored: rerunning the same command resumes. README.md, "Bisect", has the
details (the search, what is checked before the first run, the JUnit report).

{probes}

{recipes}

{exit_codes}
""".format(
    exit_codes=exit_codes_help("regress bisect"),
    probes=choices_help(PROBES, "Probes"),
    recipes=choices_help(RECIPES, "Recipes"),
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def bisect() -> None:
    """Find the commit that caused (or fixed) a regression: run, log, status, reset."""


def _where(repo_help: str):
    """``--repo`` (its help says what the command does with it) and ``--cache-dir``."""

    def add(f):
        f = click.option("--repo", default=".", show_default=True, metavar="DIR", help=repo_help)(f)
        return click.option(
            "--cache-dir",
            default=None,
            metavar="DIR",
            help="Cache root (default $REGRESS_CACHE_DIR or ~/.cache/regress).",
        )(f)

    return add


class _ProbeCommand(click.Command):
    """``bisect run``: an unknown option says where the probe command's own options go."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            exc.message = exc.message.rstrip(".") + (
                "; if it is the probe's own option, put `--` before the probe command "
                f"(regress bisect run ... -- CMD {exc.option_name})"
            )
            raise


@bisect.command(
    "run",
    cls=_ProbeCommand,
    help=RUN_HELP,
    # 98 columns: one line per option where 80 wrapped most into two (issue 31: 102 lines)
    context_settings={"help_option_names": ["-h", "--help"], "terminal_width": 98},
)
@click.option("--good", required=True, help="A revision without the problem (the older end).")
@click.option("--bad", default="HEAD", show_default=True, help="A revision with the problem.")
@_where("The git checkout to bisect.")
@click.option(
    "--probe",
    "probe_kind",
    default=_D["probe"],
    show_default=True,
    type=click.Choice(PROBES.names()),
    help="How a run becomes a verdict (see Probes above).",
)
@registry_options(PROBES)
@click.option("--flaky", is_flag=True, help="Start in flake-aware (Bayesian) mode.")
@click.option(
    "--confidence",
    type=FiniteFloat(),
    default=_D["confidence"],
    show_default=True,
    help="Posterior probability the culprit needs (flaky mode).",
)
@click.option(
    "--false-pass/--no-false-pass",
    default=_D["false_pass"],
    help="Model bad commits that pass by chance (default: inferred from the runs).",
)
@click.option(
    "--endpoint-runs",
    type=int,
    default=_D["endpoint_runs"],
    show_default=True,
    help="Flaky mode: first runs of each endpoint (every run refines the flake rates).",
)
@click.option(
    "--verify-runs",
    type=int,
    default=_D["verify_runs"],
    show_default=True,
    help="Flaky mode: runs the culprit and its parents each need on top of --confidence.",
)
@click.option(
    "--confirm/--no-confirm",
    default=_D["confirm"],
    show_default=True,
    help="Rerun the culprit once (how a flaky probe that bisected consistently is noticed).",
)
@click.option("--max-probes", type=int, default=None, help="Give up (exit 3) after this many runs.")
@click.option(
    "--find-fix", is_flag=True, help="Find the first good commit: --bad is the older end."
)
@click.option(
    "--first-parent",
    is_flag=True,
    help="Bisect only the mainline (the answer may be a merge); default: the commit graph, "
    "as git bisect does.",
)
@click.option("--jobs", "-j", type=int, default=None, help="Probe this many commits per round.")
@click.option(
    "--gpus", default=None, help="Comma-separated GPU ids, one per job (CUDA_VISIBLE_DEVICES)."
)
@click.option(
    "--launcher", default=None, help='Argv prefix for builds and probes, e.g. "srun --gpus=1".'
)
@click.option("--build", default=None, help="Shell command run in the worktree before the probe.")
@click.option(
    "--timeout",
    type=FiniteFloat(),
    default=None,
    help="Kill a build or probe after S seconds (skip).",
)
@click.option(
    "--overlay", multiple=True, help="SRC[:DEST] copied into every worktree (repeatable)."
)
@click.option(
    "--recipe",
    type=click.Choice(RECIPES.names()),
    default=None,
    help="How each worktree is built and run (see Recipes above).",
)
@registry_options(RECIPES)
@click.option("--no-cache", is_flag=True, help="Neither read nor write stored results.")
@click.option("--keep-worktrees", is_flag=True, help="Leave the private clones for inspection.")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write the result as JSON to FILE, or - for stdout.",
)
@click.option(
    "--junit",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write a JUnit report (a testcase per probed commit).",
)
@click.option(
    "--markdown",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write a markdown summary for a PR comment.",
)
@click.option("--quiet", "-q", is_flag=True, help="No live progress on stderr.")
@click.argument("command", nargs=-1, required=False)  # trtllm-source supplies its own
def run(**opts) -> None:
    from regress.bisect.config import BisectConfig
    from regress.bisect.preflight import preflight
    from regress.bisect.report import to_junit, to_markdown
    from regress.bisect.runner import parse_launcher
    from regress.bisect.session import run_bisect

    for option in ("json_out", "junit", "markdown"):  # before the run, not after it
        check_output_path(opts[option], option=_OUTPUTS[option])
    # The probes' and recipes' options: the bisect's own are config fields, a plug-in's go to
    # its `options` mapping.
    own = set(defaults())
    chosen = {**take_values(PROBES, opts), **take_values(RECIPES, opts)}
    fields = {k: v for k, v in chosen.items() if k in own}
    plugin = {k: v for k, v in chosen.items() if k not in own}

    config = BisectConfig(
        good=opts["good"],
        bad=opts["bad"],
        command=list(opts["command"]),
        repo=opts["repo"],
        probe=opts["probe_kind"],
        flaky=opts["flaky"],
        confidence=opts["confidence"],
        false_pass=opts["false_pass"],
        endpoint_runs=opts["endpoint_runs"],
        verify_runs=opts["verify_runs"],
        confirm=opts["confirm"],
        max_probes=opts["max_probes"],
        find_fix=opts["find_fix"],
        first_parent=opts["first_parent"],
        gpus=_gpus(opts["gpus"]),
        jobs=opts["jobs"],
        launcher=parse_launcher(opts["launcher"]),
        build=opts["build"],
        timeout=opts["timeout"],
        overlays=list(opts["overlay"]),
        recipe=opts["recipe"],
        options=plugin,
        cache_dir=opts["cache_dir"],
        use_cache=not opts["no_cache"],
        keep_worktrees=opts["keep_worktrees"],
        **fields,
    )
    # what the first probes would only find late (after four endpoint runs), found now
    preflight(
        repo=config.repo,
        command=list(config.command),
        launcher=list(config.launcher),
        metric=config.metric,
        recipe=config.recipe_entry(),
        revisions=(config.good, config.bad),
    )
    try:  # SIGTERM arrives as Terminated (the CLI group's handler), a KeyboardInterrupt
        with Heartbeat("regress bisect", quiet=opts["quiet"]) as beat:
            result = run_bisect(config, progress=None if opts["quiet"] else _renderer(beat))
    except KeyboardInterrupt as exc:
        said = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        click.echo(f"regress: {said}; rerun the same command to resume", err=True)
        sys.exit(interrupt_exit_code(exc))
    to_stdout = opts["json_out"] == "-"
    click.echo(result.summary(warnings=opts["quiet"]), err=to_stdout)  # else shown live
    emit(opts["json_out"], result.dumps(), option="--json")
    emit(opts["junit"], to_junit(result) if opts["junit"] else "", option="--junit")
    emit(opts["markdown"], to_markdown(result) if opts["markdown"] else "", option="--markdown")
    sys.exit(result.exit_code)


@bisect.command("log")
@_where("The git checkout whose latest bisect to list.")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write the runs as JSON to FILE, or - for stdout.",
)
def log(repo: str, cache_dir: str | None, json_out: str | None) -> None:
    """Every probe run of the latest bisect of this repository, in execution order."""
    from regress.bisect.session import bisect_log

    check_output_path(json_out, option="--json")
    runs = bisect_log(repo, cache_dir)
    if json_out:
        emit(json_out, json.dumps(runs, indent=2) + "\n", option="--json")
        return
    for i, r in enumerate(runs, 1):
        value = f" value={r['value']:.6g}" if r.get("value") is not None else ""
        again = "" if r["replayable"] else " (the probe did not run: a rerun tries again)"
        click.echo(
            f"{i:4d} {r['commit'][:12]} {r['verdict'] or 'measured':8s} "
            f"{r['seconds']:7.1f}s {r['reason']}{value}{again}"
        )


@bisect.command("status")
@_where("The git checkout whose latest bisect to show.")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OUTPUT_FILE,
    metavar="FILE|-",
    help="Write the state as JSON to FILE, or - for stdout.",
)
def status(repo: str, cache_dir: str | None, json_out: str | None) -> None:
    """Where the latest bisect of this repository stands (replayed from stored results)."""
    from regress.bisect.session import bisect_status

    check_output_path(json_out, option="--json")
    state = bisect_status(repo, cache_dir)
    if json_out:
        emit(json_out, json.dumps(state, indent=2) + "\n", option="--json")
        return
    click.echo(state["text"])


@bisect.command("reset")
@_where("The git checkout whose stored bisect state to remove.")
def reset(repo: str, cache_dir: str | None) -> None:
    """Forget this repository's stored results, session, clones and logs."""
    from regress.bisect.session import bisect_reset

    click.echo(bisect_reset(repo, cache_dir))


def _renderer(beat: Heartbeat):
    """Each progress event a line on stderr; the heartbeat says which probe is still running."""

    def render(p) -> None:
        if p.kind == "started":
            beat.say(f"regress bisect: probe started on {p.message}", doing=f"probing {p.message}")
            return
        if p.kind != "step":
            beat.say(f"regress bisect: {p.kind}: {p.message}")
            return
        pairs = " ".join(f"{c} {v}" for c, v in zip(p.commits, p.verdicts, strict=False))
        eta = f", ~{_clock(p.eta)} left" if p.eta is not None else ""
        note = f" ({p.message})" if p.message else ""
        beat.say(
            f"[{p.step:3d}] {pairs}{note} | {p.candidates} candidates, top {p.mass:.3f} | "
            f"{p.probes} runs, {_clock(p.elapsed)} elapsed{eta} [{p.strategy}]",
            doing="searching",
        )

    return render


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _gpus(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [g.strip() for g in text.split(",") if g.strip()]
