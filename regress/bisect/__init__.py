"""regress bisect: flake- and metric-aware, resumable bisection of a git range.

The library entry point is :func:`run_bisect`; the pure search (no git, no processes) is
:func:`regress.bisect.search.search`.
"""

from __future__ import annotations

from regress.bisect.report import BisectResult
from regress.bisect.session import BisectConfig, Progress, run_bisect
from regress.bisect.verdicts import Verdict

__all__ = ["BisectConfig", "BisectResult", "Progress", "Verdict", "run_bisect"]
