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
from regress.demo.plants import PLANTS, SEEDS, Plant
from regress.demo.probes import EVENTS_ENV, INDEX_SHARE_ENV, write_probes
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


def _report_update(report, name: str, update: Any) -> None:
    # the watcher already says "probe run N started on X", numbered, as each starts
    if getattr(update, "kind", None) != "started":
        report(name, describe_update(update), update)


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
    """One bisect per planted defect; ``ok`` only when each culprit is the planted commit."""

    repo: str
    kept: bool
    commits: int
    bisects: list[DemoBisect] = field(default_factory=list)
    seconds: float = 0.0
    planted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            bool(self.bisects)
            and len(self.bisects) == len(self.planted)
            and all(b.matched for b in self.bisects)
        )

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "ok": self.ok, **asdict(self)}


def _bisect(
    repo: DemoRepo, plant: Plant, root: Path, report: _Reporter, watcher: _ProbeWatcher
) -> DemoBisect:
    from regress.bisect import BisectConfig, run_bisect

    env = {EVENTS_ENV: str(watcher.path)}
    if plant.defect == "index_share_rejected_branch":
        env[INDEX_SHARE_ENV] = "1"  # the defect lives on the index-share path
    config = BisectConfig(
        good=repo.first,
        bad=repo.head,
        command=[sys.executable, plant.script],
        repo=str(repo.path),
        probe=plant.probe,
        overlays=[str(root / "probes" / plant.script)],
        cache_dir=str(root / "cache"),
        env=env,
        **plant.bisect,
    )
    name, planted = plant.name, repo.planted[plant.defect]
    watcher.follow(name)
    report(name, "checking both endpoints first (the good one must pass, the bad one fail)")
    started = time.monotonic()
    result = run_bisect(config, progress=lambda u: _report_update(report, name, u))
    culprit = result.culprit
    sha = culprit.sha if culprit is not None else None
    return DemoBisect(
        name=name,
        probe=plant.probe,
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
    defect: str | None = None,
    progress: Progress[DemoEvent] | None = None,
) -> DemoResult:
    """Build the history in ``workdir`` (a new temp dir by default) and bisect its regressions.

    By default the two seed bugs are planted: the metric bisect measures AL at batch 8 over AL at
    batch 1 (higher is better); the assert bisect runs the layer-wise GEN step and looks for
    DeepGEMM's assertion. ``defect`` plants that registered defect alone and bisects it with the
    probe ``regress.demo.plants`` names for it. Unless ``keep``, the repository and the bisect
    cache are removed afterwards, also on error or Ctrl-C.

    Args:
        progress: receives a :class:`DemoEvent` from the first second on; calls never overlap,
            though some come from a watcher thread.
    """
    started = time.monotonic()
    report = _Reporter(progress, started)
    names = [defect] if defect else list(SEEDS)
    plants = [PLANTS[n] for n in names]  # a name outside PLANTS is the caller's error
    # resolved now; a folder the user made is emptied, never deleted
    work = WorkFolder(workdir, prefix="regress-demo-", keep=keep)
    root = work.path
    try:
        what = "two planted regressions" if not defect else f"a planted {defect}"
        report("setup", f"writing a {commits}-commit history with {what}")
        repo = build_demo_repo(root / "repo", commits=commits, seed=seed, plants=names)
        report("setup", f"wrote {commits} commits to {repo.path}")
        write_probes(root / "probes")
        result = DemoResult(repo=str(repo.path), kept=keep, commits=commits, planted=names)
        with _ProbeWatcher(root / "probe-runs.log", report) as watcher:
            for plant in plants:
                result.bisects.append(_bisect(repo, plant, root, report, watcher))
        result.seconds = round(time.monotonic() - started, 2)
        return result
    finally:
        work.close()
