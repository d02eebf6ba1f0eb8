"""Run ``regress demo``: build the planted history, bisect it twice, check the culprits.

Progress goes to an injected callback from the first second: a line before and after the
history is written, one per probe run as it starts (the probes append the commit they test to a
file the demo watches, so the endpoint checks that open each bisect are not silent), and the
bisect's own per-round updates.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from regress.demo.history import DemoRepo, build_demo_repo
from regress.demo.probes import ACCEPTANCE_PROBE, EVENTS_ENV, LAYERWISE_PROBE, write_probes
from regress.processes import WorkFolder
from regress.progress import Progress


@dataclass(frozen=True)
class DemoEvent:
    """One line of progress, for the CLI to render on stderr.

    Attributes:
        where: ``"setup"`` or the bisect's name.
        message: what happened, in words.
        elapsed: seconds since the demo started.
        update: the bisect library's own record, for a ``where`` that is a bisect round.
    """

    where: str
    message: str
    elapsed: float
    update: Any = None


def describe_update(update: Any) -> str:
    """A bisect progress record in words (a round's commits, verdicts and what is left)."""
    if getattr(update, "kind", None) == "step":
        pairs = ", ".join(
            f"{c[:10]} {v}" for c, v in zip(update.commits, update.verdicts, strict=False)
        )
        return (
            f"step {update.step}: {pairs}; {update.candidates} candidate(s) left, "
            f"{update.probes} probe run(s)"
        )
    return str(getattr(update, "message", update))


class _Reporter:
    """Serialises progress calls from the demo and from its probe watcher; stamps elapsed time."""

    def __init__(self, progress: Progress[DemoEvent] | None, started: float) -> None:
        self.progress, self.started = progress, started
        self.lock = threading.Lock()

    def __call__(self, where: str, message: str, update: Any = None) -> None:
        if self.progress is None:
            return
        with self.lock:
            self.progress(DemoEvent(where, message, time.monotonic() - self.started, update))


class _ProbeWatcher:
    """Reports each probe run as it starts, from the lines the demo's probes append to a file."""

    def __init__(self, path: Path, report: _Reporter, interval: float = 0.5) -> None:
        self.path, self.report, self.interval = path, report, interval
        self.where = "setup"
        self.runs = 0
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="regress-demo-probes", daemon=True)

    def __enter__(self) -> _ProbeWatcher:
        self.path.touch()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()  # lines written after the last tick

    def follow(self, where: str) -> None:
        """Attribute the runs that start from now on to ``where``, counting from 1 again."""
        self.poll()  # earlier runs belong to the previous bisect
        self.where, self.runs = where, 0

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.decode("utf-8", "replace").splitlines():
            self.runs += 1
            self.report(self.where, f"probe run {self.runs} started on {line.strip()[:10]}")


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
    repo: DemoRepo,
    name: str,
    probe_kind: str,
    probe_file: str,
    planted: str,
    root: Path,
    report: _Reporter,
    watcher: _ProbeWatcher,
    **extra: Any,
) -> DemoBisect:
    import regress.trtllm.probes  # noqa: F401 - registers the DeepGEMM assert probe
    from regress.bisect import BisectConfig, run_bisect

    config = BisectConfig(
        good=repo.first,
        bad=repo.head,
        command=[sys.executable, probe_file],
        repo=str(repo.path),
        probe=probe_kind,
        overlays=[str(root / "probes" / probe_file)],
        cache_dir=str(root / "cache"),
        env={EVENTS_ENV: str(watcher.path)},
        **extra,
    )
    watcher.follow(name)
    report(name, "checking both endpoints first (the good one must pass, the bad one fail)")
    started = time.monotonic()
    result = run_bisect(config, progress=lambda u: report(name, describe_update(u), u))
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
    progress: Progress[DemoEvent] | None = None,
) -> DemoResult:
    """Build the history in ``workdir`` (a new temp dir by default) and bisect both regressions.

    The metric bisect measures AL at batch 8 over AL at batch 1 (higher is better); the assert
    bisect runs the layer-wise GEN step and looks for DeepGEMM's assertion. Unless ``keep``, the
    repository and the bisect cache are removed afterwards, also on error or Ctrl-C.

    Args:
        progress: receives a :class:`DemoEvent` from the first second on; calls never overlap,
            though some come from a watcher thread.
    """
    started = time.monotonic()
    report = _Reporter(progress, started)
    # resolved now; a folder the user made is emptied, never deleted
    work = WorkFolder(workdir, prefix="regress-demo-", keep=keep)
    root = work.path
    try:
        report("setup", f"writing a {commits}-commit history with two planted regressions")
        repo = build_demo_repo(root / "repo", commits=commits, seed=seed)
        report("setup", f"wrote {commits} commits to {repo.path}")
        write_probes(root / "probes")
        result = DemoResult(repo=str(repo.path), kept=keep, commits=commits)
        with _ProbeWatcher(root / "probe-runs.log", report) as watcher:
            result.bisects.append(
                _bisect(
                    repo,
                    "stale_req_idx (acceptance metric)",
                    "metric",
                    ACCEPTANCE_PROBE,
                    repo.stale_map_commit,
                    root,
                    report,
                    watcher,
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
                    root,
                    report,
                    watcher,
                )
            )
        result.seconds = round(time.monotonic() - started, 2)
        return result
    finally:
        work.close()
