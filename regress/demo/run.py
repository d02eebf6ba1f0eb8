"""Run ``regress demo``: build the planted history, bisect it twice, check the culprits."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from regress.demo.history import DemoRepo, build_demo_repo
from regress.demo.probes import ACCEPTANCE_PROBE, LAYERWISE_PROBE, write_probes


@dataclass
class DemoBisect:
    """One of the demo's two bisects and whether it found the planted commit."""

    name: str
    probe: str
    planted: str
    culprit: str | None
    culprit_subject: str | None
    status: str
    probes: int
    seconds: float
    matched: bool
    confidence: float | None = None


@dataclass
class DemoResult:
    """Both bisects; ``ok`` only when each culprit is the planted commit."""

    repo: str
    kept: bool
    commits: int
    bisects: list[DemoBisect] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return len(self.bisects) == 2 and all(b.matched for b in self.bisects)

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "ok": self.ok, **asdict(self)}


def _bisect(
    repo: DemoRepo, name, probe_kind, probe_file, planted, probes_dir, cache, progress, **extra
) -> DemoBisect:
    from regress.bisect import BisectConfig, run_bisect

    config = BisectConfig(
        good=repo.first,
        bad=repo.head,
        command=[sys.executable, probe_file],
        repo=str(repo.path),
        probe=probe_kind,
        overlays=[str(probes_dir / probe_file)],
        cache_dir=str(cache),
        **extra,
    )
    started = time.monotonic()
    result = run_bisect(config, progress=(lambda p: progress(name, p)) if progress else None)
    culprit = result.culprit
    sha = culprit.sha if culprit is not None else None
    return DemoBisect(
        name=name,
        probe=probe_kind,
        planted=planted,
        culprit=sha,
        culprit_subject=culprit.subject if culprit is not None else None,
        status=result.status,
        probes=result.probes,
        seconds=round(time.monotonic() - started, 2),
        matched=sha == planted,
        confidence=result.confidence,
    )


def run_demo(
    *,
    workdir: Path | None = None,
    keep: bool = False,
    commits: int = 100,
    seed: int = 0,
    progress: Callable[[str, Any], None] | None = None,
) -> DemoResult:
    """Build the history in ``workdir`` (a new temp dir by default) and bisect both regressions.

    The metric bisect measures AL at batch 8 over AL at batch 1 (higher is better); the assert
    bisect runs the layer-wise GEN step and looks for DeepGEMM's assertion. Unless ``keep``, the
    repository and the bisect cache are removed afterwards.
    """
    started = time.monotonic()
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="regress-demo-"))
    try:
        repo = build_demo_repo(root / "repo", commits=commits, seed=seed)
        if progress:
            progress("setup", f"wrote {commits} commits to {repo.path}")
        probes_dir = root / "probes"
        write_probes(probes_dir)
        cache = root / "cache"
        result = DemoResult(repo=str(repo.path), kept=keep, commits=commits)
        result.bisects.append(
            _bisect(
                repo,
                "stale_req_idx (acceptance metric)",
                "metric",
                ACCEPTANCE_PROBE,
                repo.stale_map_commit,
                probes_dir,
                cache,
                progress,
                metric="al_ratio",
                direction=1,
                metric_runs=(2, 1, 4),
            )
        )
        result.bisects.append(
            _bisect(
                repo,
                "unannounced_mtp_shapes (DeepGEMM assert)",
                "assert",
                LAYERWISE_PROBE,
                repo.layerwise_commit,
                probes_dir,
                cache,
                progress,
            )
        )
        result.seconds = round(time.monotonic() - started, 2)
        return result
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
