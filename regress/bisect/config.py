"""What a bisect is asked to do: :class:`BisectConfig`, which refuses bad values itself.

The CLI, ``regress demo`` and ``status`` (replaying a stored session) all build one, so a value
that one of them accepts cannot be refused by another: every check lives here, and each failure is
a usage error (exit 2) raised before anything is written or run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from regress.bisect.probes import DEFAULT_SIGNATURE
from regress.bisect.search import SearchConfig
from regress.errors import UsageError

PROBES = ("exit-code", "assert", "metric", "pytest")


@dataclass
class BisectConfig:
    """Everything ``regress bisect run`` takes; see its ``--help`` for each option."""

    good: str
    bad: str
    command: list[str]
    repo: str = "."
    probe: str = "exit-code"  # exit-code | assert | metric | pytest
    signature: str = DEFAULT_SIGNATURE
    crash_is_bad: bool = False
    metric: str | None = None
    metric_regex: str | None = None
    threshold: float | None = None
    direction: int | None = None  # +1 higher is better, -1 lower is better
    # caps: runs per endpoint, first runs per commit, most runs per commit
    metric_runs: tuple[int, int, int] = (10, 1, 10)
    flaky: bool = False
    confidence: float = 0.99
    false_pass: bool | None = None
    endpoint_runs: int = 1
    verify_runs: int = 0
    confirm: bool = True
    max_probes: int | None = None
    find_fix: bool = False
    first_parent: bool = False
    jobs: int = 1
    gpus: list[str] | None = None
    launcher: list[str] = field(default_factory=list)
    build: str | None = None
    timeout: float | None = None
    overlays: list[str] = field(default_factory=list)
    recipe: str | None = None  # trtllm | trtllm-precompiled | trtllm-source
    wheel: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    use_cache: bool = True
    keep_worktrees: bool = False

    def __post_init__(self) -> None:
        self.metric_runs = tuple(self.metric_runs)  # a stored session has a JSON list
        self.validate()

    def validate(self) -> None:
        """Refuse values no bisect can run with (usage error, exit 2)."""
        # The trtllm-source recipe supplies its own probe (`regress check` in each worktree).
        if not self.command and self.recipe != "trtllm-source":
            raise UsageError("no probe command: give it after `--`, e.g. `-- ./probe.sh`")
        if self.probe not in PROBES:
            raise UsageError(f"unknown --probe {self.probe!r}: use one of {', '.join(PROBES)}")
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
        search_config(self)

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
