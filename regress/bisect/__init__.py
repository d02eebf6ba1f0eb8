"""regress bisect: flake- and metric-aware, resumable bisection of a git range.

The library entry point is :func:`run_bisect`; the pure search (no git, no processes) is
:func:`regress.bisect.search.search`.
"""

from __future__ import annotations

from regress.bisect.config import BisectConfig
from regress.bisect.evaluator import BisectProgress
from regress.bisect.report import BisectResult
from regress.bisect.session import run_bisect
from regress.bisect.verdicts import Status, Verdict

__all__ = ["BisectConfig", "BisectProgress", "BisectResult", "Status", "Verdict", "run_bisect"]
