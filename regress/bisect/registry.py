"""Probes and recipes by name: where a bisect looks them up, and where other packages add theirs.

The bisect is generic, like mozregression's bisector (its build source and test runner are
injected): it knows how to search, run and store, not what a DeepGEMM assertion looks like or how
a TensorRT-LLM worktree is built. Its own probes (``exit-code``, ``metric``, ``pytest``) are
registered here; a probe or recipe that needs domain knowledge is registered by name from the
module that has it, when that module is imported (``regress.trtllm.probes`` registers ``assert``,
``regress.check.recipes`` the TensorRT-LLM recipes). The ``regress`` CLI imports them all; a
library caller imports the ones it names. Every probe satisfies
:class:`~regress.bisect.probes.Probe`, every recipe :class:`Recipe`, as pytest-xdist's schedulers
share one ``Protocol``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from regress.bisect import probes
from regress.errors import UsageError

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


ProbeFactory = Callable[["BisectConfig"], probes.Probe]
RecipeFactory = Callable[["BisectConfig"], Recipe]

_PROBES: dict[str, ProbeFactory] = {
    "exit-code": lambda c: probes.ExitCodeProbe(crash_is_bad=c.crash_is_bad),
    "metric": lambda c: probes.MetricProbe(
        path=c.metric, regex=c.metric_regex, threshold=c.threshold, direction=c.direction
    ),
    "pytest": lambda c: probes.PytestProbe(),
}
_RECIPES: dict[str, RecipeFactory] = {}
#: The :class:`~regress.bisect.config.BisectConfig` fields each probe or recipe reads beyond the
#: common ones: an option meant for another probe is refused, never silently ignored.
_READS: dict[tuple[str, str], frozenset[str]] = {
    ("probe", "exit-code"): frozenset({"crash_is_bad"}),
    ("probe", "metric"): frozenset(
        {"metric", "metric_regex", "threshold", "direction", "metric_runs"}
    ),
    ("probe", "pytest"): frozenset(),
}

_HINT = "probes and recipes of other packages are registered when their module is imported"


def register_probe(name: str, factory: ProbeFactory, *, reads: Sequence[str] = ()) -> None:
    """Make ``--probe NAME`` build its probe with ``factory(config)``; a name is taken once.

    Args:
        reads: the probe-specific ``BisectConfig`` fields the factory uses (``"signature"``).
    """
    _register(_PROBES, "probe", name, factory)
    _READS["probe", name] = frozenset(reads)


def register_recipe(name: str, factory: RecipeFactory, *, reads: Sequence[str] = ()) -> None:
    """Make ``--recipe NAME`` build its recipe with ``factory(config)``; a name is taken once.

    Args:
        reads: the recipe-specific ``BisectConfig`` fields the factory uses (``"wheel"``).
    """
    _register(_RECIPES, "recipe", name, factory)
    _READS["recipe", name] = frozenset(reads)


def _register(table: dict[str, Any], what: str, name: str, factory: Any) -> None:
    if table.get(name, factory) is not factory:
        raise ValueError(f"the bisect {what} {name!r} is registered already")
    table[name] = factory


def reads(what: str, name: str | None) -> frozenset[str]:
    """The specific fields the probe or recipe ``name`` reads (``what``: "probe" or "recipe")."""
    return _READS.get((what, name or ""), frozenset())


def readers(what: str, field: str) -> list[str]:
    """The registered probes or recipes that read ``field``."""
    return [name for (kind, name), fields in _READS.items() if kind == what and field in fields]


def probe_names() -> list[str]:
    """Every registered probe, in registration order."""
    return list(_PROBES)


def recipe_names() -> list[str]:
    """Every registered recipe, in registration order."""
    return list(_RECIPES)


def make_probe(name: str, config: BisectConfig) -> probes.Probe:
    """The probe ``name`` for ``config``; an unknown name is a usage error."""
    if name not in _PROBES:
        raise UsageError(
            f"unknown probe {name!r} (--probe): use one of {', '.join(_PROBES)} ({_HINT})"
        )
    return _PROBES[name](config)


def make_recipe(name: str, config: BisectConfig) -> Recipe:
    """The recipe ``name`` for ``config``; an unknown name is a usage error."""
    if name not in _RECIPES:
        known = ", ".join(_RECIPES) or "none registered"
        raise UsageError(f"unknown recipe {name!r} (--recipe): use one of {known} ({_HINT})")
    return _RECIPES[name](config)
