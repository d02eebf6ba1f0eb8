"""What a bisect is asked to do: :class:`BisectConfig`, which refuses bad values itself.

The CLI, ``regress demo`` and ``status`` (replaying a stored session) all build one, so a value
that one of them accepts cannot be refused by another: every check lives here, and each failure is
a usage error (exit 2) raised before anything is written or run.
"""

from __future__ import annotations

import math
import os
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from regress.bisect import registry
from regress.bisect.search import SearchConfig
from regress.errors import UsageError


@dataclass
class BisectConfig:
    """Everything ``regress bisect run`` takes; see its ``--help`` for each option."""

    good: str
    bad: str
    command: list[str]
    repo: str = "."
    probe: str = "exit-code"  # a registered probe (registry.PROBES)
    crash_is_bad: bool = False
    metric: str | None = None
    metric_regex: str | None = None
    threshold: float | None = None
    direction: int | None = None  # +1 higher is better, -1 lower is better
    # caps: runs per endpoint, first runs per commit, most runs per commit
    metric_runs: tuple[int, int, int] = registry.METRIC_RUNS
    flaky: bool = False
    confidence: float = SearchConfig.confidence
    false_pass: bool | None = SearchConfig.false_pass
    endpoint_runs: int = SearchConfig.endpoint_runs
    verify_runs: int = SearchConfig.verify_runs
    confirm: bool = SearchConfig.confirm
    max_probes: int | None = SearchConfig.max_probes
    find_fix: bool = False
    first_parent: bool = False
    jobs: int | None = None  # None: one per --gpus entry, else 1
    gpus: list[str] | None = None
    launcher: list[str] = field(default_factory=list)
    build: str | None = None
    timeout: float | None = None
    overlays: list[str] = field(default_factory=list)
    recipe: str | None = None  # a registered recipe (registry.RECIPES)
    # the options of plug-in probes and recipes, by the name their entry declares
    options: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    use_cache: bool = True
    keep_worktrees: bool = False

    def __post_init__(self) -> None:
        self.metric_runs = tuple(self.metric_runs)  # a stored session has a JSON list
        if self.jobs is None:
            self.jobs = len(self.gpus) if self.gpus else 1
        self.validate()

    def recipe_entry(self) -> registry.Recipe | None:
        """The recipe this bisect runs, built once per config and recipe name.

        Validation, preflight and the session plan all ask for it, and a recipe may read files
        when built (a ``--known`` list): building it three times read them three times.
        """
        if not self.recipe:
            return None
        built = self.__dict__.get("_recipe_built")
        if built is None or built[0] != self.recipe:
            built = (self.recipe, registry.make_recipe(self.recipe, self))
            self.__dict__["_recipe_built"] = built  # not a field: asdict() and the store skip it
        return built[1]

    def validate(self) -> None:
        """Refuse values no bisect can run with (usage error, exit 2)."""
        # A recipe may supply its own probe command (one that judges each tree itself).
        recipe = self.recipe_entry()
        if not self.command and not (recipe and recipe.command()):
            raise UsageError("no probe command: give it after `--`, e.g. `-- ./probe.sh`")
        registry.PROBES.get_entry(self.probe)  # an unknown name raises, naming the known ones
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(
                f"--timeout {self.timeout}: give a positive number of seconds, or leave it out"
            )
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise UsageError(f"--threshold {self.threshold}: give a finite number")
        if self.direction not in (None, 1, -1):
            raise UsageError("direction must be +1 (higher is better) or -1 (lower is better)")
        if len(self.metric_runs) != 3:
            raise UsageError("--metric-runs: give three integers, e.g. 10,1,10")
        ends, first, most = self.metric_runs
        if ends < 2 or not 1 <= first <= most:
            raise UsageError(
                f"--metric-runs {ends},{first},{most}: need at most-runs per endpoint >= 2 and "
                "1 <= first runs per commit <= most runs per commit, e.g. 10,1,10"
            )
        if self.gpus is not None and len(self.gpus) != self.jobs:
            # more GPUs than jobs left some idle while the user believed all were used
            raise UsageError(
                f"--gpus lists {len(self.gpus)} GPUs for --jobs {self.jobs}: give one per job "
                f"(or leave out --jobs: it defaults to the number of --gpus)"
            )
        self._check_jobs()
        self._check_specific()
        search_config(self)

    def _check_jobs(self) -> None:
        """Refuse more parallel probes than this machine has CPUs for, unless they run elsewhere.

        Each job is a private clone and a probe process; ``-j 1000000000000`` on two cores used
        to be capped to the range (48) and run as 48 probes fighting over two CPUs.
        """
        cpus = available_cpus()
        if self.jobs > cpus and not self.launcher:
            raise UsageError(
                f"--jobs {self.jobs}: this machine gives regress {cpus} CPU(s), and each job "
                f"is a probe process; give --jobs {cpus} or fewer, or a --launcher that runs "
                "each job elsewhere (e.g. --launcher 'srun --gpus=1')"
            )

    def _check_specific(self) -> None:
        """Refuse an option that only another probe (recipe) reads: it would be ignored."""
        given = {**{f.name: getattr(self, f.name) for f in fields(self)}, **self.options}
        registry.PROBES.refuse_foreign(self.probe, given)
        registry.RECIPES.refuse_foreign(self.recipe, given)
        known = {o.name for r in (registry.PROBES, registry.RECIPES) for o, _ in r.options()}
        unknown = sorted(set(self.options) - known)
        if unknown:
            raise UsageError(
                f"no registered probe or recipe reads the option(s) {', '.join(unknown)}: "
                "drop them, or install the package that declares the plug-in"
            )

    def capped(self, candidates: int) -> tuple[BisectConfig, str | None]:
        """This config with ``jobs`` no larger than a range of ``candidates`` can use, and why.

        A round probes at most the candidates strictly between the two ends (two, for the
        endpoint checks, when there are fewer), so more job slots would only be cloned and
        never used.
        """
        useful = max(candidates - 1, 2)
        if self.jobs <= useful:
            return self, None
        note = (
            f"--jobs {self.jobs} capped to {useful}: the range has {candidates} candidate "
            f"commits, so no round can probe more than {useful} at once"
        )
        return replace(self, jobs=useful, gpus=self.gpus[:useful] if self.gpus else None), note


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def defaults() -> dict[str, Any]:
    """Every option's default, by field name: the one place the CLI takes its defaults from."""
    out = {}
    for f in fields(BisectConfig):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def search_config(c: BisectConfig, *, metric: bool = False) -> SearchConfig:
    """The pure search's options (validated: a bad value is a usage error).

    A metric bisect skips the confirmation rerun: its judge already decided every commit at the
    configured confidence, so a rerun would only repeat it.
    """
    return SearchConfig(
        mode="flaky" if c.flaky else "auto",
        jobs=c.jobs,
        confidence=c.confidence,
        false_pass=c.false_pass,
        endpoint_runs=c.endpoint_runs,
        verify_runs=c.verify_runs,
        confirm=c.confirm and not metric,
        max_probes=c.max_probes,
    )
