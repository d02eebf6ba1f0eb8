"""Probes and recipes by name (:data:`PROBES`, :data:`RECIPES`): where a bisect looks them up.

The bisect is generic, like mozregression's bisector (its build source and test runner are
injected): it knows how to search, run and store, not what it is looking for nor how a project is
built. Its own probes (``exit-code``, ``metric``, ``pytest``) are entries here; every other probe
or recipe is a :class:`~regress.plugins.Plugin` that a package declares in the ``regress.probes``
or ``regress.recipes`` entry-point group, found when a registry is first asked (regress's own
domain plug-ins are declared in its ``pyproject.toml`` the same way). Each entry carries its
one-line help and the options it reads, so the command line is made from the entries. Every probe
satisfies :class:`~regress.bisect.probes.Probe`, every recipe :class:`Recipe`, as pytest-xdist's
schedulers share one ``Protocol``. A factory gets the :class:`~regress.bisect.config.BisectConfig`:
the bisect's own options are its fields, a plug-in's are in its ``options`` mapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from regress.bisect import probes
from regress.errors import UsageError
from regress.plugins import Option, Plugin, Registry

if TYPE_CHECKING:
    from regress.bisect.config import BisectConfig


class Recipe(Protocol):
    """How each worktree is built and with which environment its probe runs.

    Attributes:
        native_paths: repository paths whose changes the recipe's build cannot follow; a range
            touching them gets :meth:`native_warning` (empty: nothing to warn about).
    """

    native_paths: tuple[str, ...]

    def build_command(self) -> str | None:
        """The shell command run in each worktree before the probe, or None."""
        ...

    def command(self) -> list[str]:
        """The probe command when the user gives none (empty: the user must give one)."""
        ...

    def env(self, sha: str, worktree: Path) -> dict[str, str]:
        """Extra environment of the build and probe at ``sha``, checked out at ``worktree``."""
        ...

    def config(self) -> dict[str, Any]:
        """Everything about the recipe that can change a verdict (part of the store key)."""
        ...

    def native_warning(self, touching: Sequence[str]) -> str | None:
        """The warning for the commits (one line each) that touch :attr:`native_paths`."""
        ...


#: The metric probe's caps when none are given: runs per endpoint, first and most runs per commit.
METRIC_RUNS = (10, 1, 10)


def parse_metric_runs(text: str) -> tuple[int, int, int]:
    """``--metric-runs`` as three integers; :class:`BisectConfig` checks their values."""
    try:
        ends, first, most = (int(x) for x in text.split(","))
    except ValueError as exc:
        raise UsageError(f"--metric-runs {text!r}: give three integers, e.g. 10,1,10") from exc
    return ends, first, most


_METRIC_OPTIONS = (
    Option("metric", "--metric", "dotted JSON path, e.g. runs[1].score.", metavar="PATH"),
    Option(
        "metric_regex", "--metric-regex", "regex whose first group is the number.", metavar="RE"
    ),
    Option("threshold", "--threshold", "judge each run against X.", kind="number", metavar="X"),
    Option(
        "direction",
        "--higher-is-better/--lower-is-better",
        "which way is better (default: learned from the endpoints).",
        kind="switch",
        values=(1, -1),
    ),
    Option(
        "metric_runs",
        "--metric-runs",
        "caps: most runs per endpoint, first runs per commit, most runs per commit (more runs "
        "only while the noise leaves a commit undecided).",
        default=METRIC_RUNS,
        metavar="E,F,M",
        parse=parse_metric_runs,
    ),
)

#: Probes by name (``--probe``): the bisect's own, then the ``regress.probes`` entry points.
PROBES: Registry[Plugin] = Registry(
    "probe",
    "--probe",
    "regress.probes",
    [
        Plugin(
            "exit-code",
            "git bisect run's contract: 0 good, 125 skip, 1..127 bad, >= 128 or a signal is a "
            "crash (skip, or bad with --crash-is-bad); 126/127 (the shell could not run it) are "
            "skips, never replayed",
            lambda c: probes.ExitCodeProbe(crash_is_bad=c.crash_is_bad),
            (Option("crash_is_bad", "--crash-is-bad", "a crash (>= 128, signal) is bad.", "flag"),),
        ),
        Plugin(
            "metric",
            "a number from the command's JSON output (--metric PATH) or a regex "
            "(--metric-regex); endpoints are measured repeatedly and each commit is compared "
            "with both; or a fixed --threshold per run",
            lambda c: probes.MetricProbe(
                path=c.metric, regex=c.metric_regex, threshold=c.threshold, direction=c.direction
            ),
            _METRIC_OPTIONS,
        ),
        Plugin(
            "pytest",
            "a JUnit file is injected: passed good, failed bad, else skip",
            lambda c: probes.PytestProbe(),
        ),
    ],
)

#: Recipes by name (``--recipe``): the bisect has none of its own; ``regress.recipes`` adds them.
RECIPES: Registry[Plugin] = Registry("recipe", "--recipe", "regress.recipes")


def make_probe(name: str, config: BisectConfig) -> probes.Probe:
    """The probe ``name`` for ``config``; an unknown name is a usage error."""
    return PROBES.get_entry(name).factory(config)


def make_recipe(name: str, config: BisectConfig) -> Recipe:
    """The recipe ``name`` for ``config``; an unknown name is a usage error."""
    return RECIPES.get_entry(name).factory(config)
