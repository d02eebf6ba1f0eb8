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
    probe: str = "exit-code"  # a registered probe (registry.probe_names())
    signature: str | None = None  # assert probe; None: the registered probe's default
    crash_is_bad: bool = False
    metric: str | None = None
    metric_regex: str | None = None
    threshold: float | None = None
    direction: int | None = None  # +1 higher is better, -1 lower is better
    # caps: runs per endpoint, first runs per commit, most runs per commit
    metric_runs: tuple[int, int, int] = (10, 1, 10)
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
    recipe: str | None = None  # a registered recipe (registry.recipe_names())
    wheel: str | None = None
    known: str | None = None  # a file of failures the recipe's probe accepts (registry.reads)
    env: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    use_cache: bool = True
    keep_worktrees: bool = False

    def __post_init__(self) -> None:
        self.metric_runs = tuple(self.metric_runs)  # a stored session has a JSON list
        if self.jobs is None:
            self.jobs = len(self.gpus) if self.gpus else 1
        self.validate()

    def validate(self) -> None:
        """Refuse values no bisect can run with (usage error, exit 2)."""
        # A recipe may supply its own probe command (trtllm-source: `regress check`).
        recipe = registry.make_recipe(self.recipe, self) if self.recipe else None
        if not self.command and not (recipe and recipe.command()):
            raise UsageError("no probe command: give it after `--`, e.g. `-- ./probe.sh`")
        if self.probe not in registry.probe_names():
            registry.make_probe(self.probe, self)  # raises, naming the registered probes
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
        if self.gpus is not None and len(self.gpus) < self.jobs:
            raise UsageError(
                f"--gpus lists {len(self.gpus)} GPUs for --jobs {self.jobs}: give one per job"
            )
        self._check_jobs()
        self._check_specific("probe", self.probe)
        self._check_specific("recipe", self.recipe)
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

    def _check_specific(self, what: str, name: str | None) -> None:
        """Refuse an option that only another probe (recipe) reads: it would be ignored."""
        fields = _PROBE_FIELDS if what == "probe" else _RECIPE_FIELDS
        read = registry.reads(what, name)
        for field_name, flag in fields.items():
            if field_name in read or getattr(self, field_name) == _default(field_name):
                continue
            others = registry.readers(what, field_name)
            chosen = f"--{what} {name}" if name else f"no --{what}"
            raise UsageError(
                f"{flag} is read only by --{what} {' or '.join(others)}; with {chosen} it would "
                f"be ignored: drop it or use --{what} {others[0]}"
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


#: Fields a probe reads only if registered to (``registry.reads``), by their option.
_PROBE_FIELDS = {
    "crash_is_bad": "--crash-is-bad",
    "signature": "--signature",
    "metric": "--metric",
    "metric_regex": "--metric-regex",
    "threshold": "--threshold",
    "direction": "--higher-is-better/--lower-is-better",
    "metric_runs": "--metric-runs",
}
#: Fields a recipe reads only if registered to.
_RECIPE_FIELDS = {"wheel": "--wheel", "known": "--known"}


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _default(name: str) -> Any:
    return defaults()[name]


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
