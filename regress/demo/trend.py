"""``regress demo --trend``: nightly reports over the demo history, detection, and the bisect.

The CI story end to end on the reference engine, with no command written by hand: each night
measures the head of the demo history's main (acceptance at batch 1 and 8, on that commit's own
copy of the DSA metadata) and adds the report to a trend store; some nights are missing, as in
real CI. ``regress trend check --bisect --run`` then finds the night the stale
``req_idx_per_token`` landed and bisects the commits between the last good and the first bad
night with the command it planned. Success is the bisect naming the planted commit.

The engine is deterministic, so a night whose metadata code (comments aside) an earlier night
already measured stores that night's report again (its ``wall_seconds`` too) instead of
measuring it twice: the history's harmless edits leave two distinct codes in a 30-commit demo.
"""

from __future__ import annotations

import ast
import datetime as dt
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from regress.demo.history import METADATA_FILE, _git, build_demo_repo
from regress.demo.run import DemoEvent
from regress.processes import WorkFolder
from regress.progress import Progress

NIGHTLY = "nightly_accept.py"
BATCH_SIZES = (1, 8)
MAX_DRAFT_LEN = 4

_NIGHTLY = '''"""The demo's nightly job: this commit's acceptance report (JSON) on stdout."""
import os
import sys

sys.path.insert(0, os.getcwd())
from dsa_metadata import DSAtrtllmAttentionMetadata  # noqa: E402

from regress.demo.trend import nightly_report  # noqa: E402

prompts, tokens = int(sys.argv[1]), int(sys.argv[2])
print(nightly_report(DSAtrtllmAttentionMetadata, prompts=prompts, tokens=tokens).to_json())
'''


def nightly_report(metadata_cls: type, *, prompts: int, tokens: int):
    """One night's acceptance report (``regress accept``'s profiler) on ``metadata_cls``."""
    from regress.acceptance.engines.reference import ReferenceAcceptanceEngine
    from regress.acceptance.profile import profile
    from regress.reference.engine import ReferenceEngine

    def factory(**options):
        return ReferenceEngine(metadata_cls=metadata_cls, **options)

    engine = ReferenceAcceptanceEngine(defects=(), engine_factory=factory)
    return profile(
        engine,
        engine.default_prompts(prompts),
        batch_sizes=BATCH_SIZES,
        max_draft_len=MAX_DRAFT_LEN,
        max_new_tokens=tokens,
        n_boot=50,
        config={"prompts": "builtin", "source": "regress demo --trend"},
    )


def _metadata_source(repo: Path, commit: str) -> str:
    """That commit's copy of the DSA metadata module."""
    return _git(repo, "show", f"{commit}:{METADATA_FILE}") + "\n"


def _code_of(source: str) -> str:
    """What decides a night's report: the module's syntax tree, so comments and blank lines
    (most of the history's harmless edits) do not count as new code."""
    return ast.dump(ast.parse(source))


def _metadata_at(source: str, commit: str, scratch: Path) -> type:
    """That commit's ``DSAtrtllmAttentionMetadata``, loaded from its own file."""
    path = scratch / f"dsa_metadata_{commit[:12]}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"_regress_demo_night_{commit[:12]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DSAtrtllmAttentionMetadata


@dataclass
class TrendDemoResult:
    """What the nightly trend found and whether its bisect named the planted commit."""

    repo: str
    commits: int
    nights: int
    planted: str
    last_good: str | None = None
    first_bad: str | None = None
    bisect_command: str | None = None
    bisect_exit_code: int | None = None
    culprit: str | None = None
    culprit_subject: str | None = None
    check_exit_code: int | None = None
    seconds: float = 0.0
    findings: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.culprit == self.planted

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "ok": self.ok, **asdict(self)}

    def summary(self) -> list[str]:
        """The lines ``regress demo --trend`` prints."""
        lines = [f"{self.nights} nightly reports over {self.commits} commits"]
        for f in self.findings:
            lines.append(
                f"regression in {f['metric']}: {f['before']:.3f} -> {f['after']:.3f} "
                f"({f['relative']:+.1%}), last good {f['last_good']['commit'][:12]}, "
                f"first bad {f['first_bad']['commit'][:12]}"
            )
        if self.bisect_command:
            lines.append(f"bisect started: {self.bisect_command}")
        mark = "MATCH" if self.ok else "MISMATCH"
        lines.append(
            f'culprit {(self.culprit or "none")[:12]} "{self.culprit_subject or ""}" - planted '
            f"{self.planted[:12]} [{mark}]"
        )
        return lines


def run_trend_demo(
    *,
    workdir: Path | None = None,
    keep: bool = False,
    commits: int = 40,
    every: int = 2,
    skip: float = 0.15,
    prompts: int | None = None,
    tokens: int | None = None,
    seed: int = 0,
    progress: Progress[DemoEvent] | None = None,
) -> TrendDemoResult:
    """Nightly reports every ``every`` commits (``skip`` of nights missing), check, bisect.

    Args:
        workdir: where to build (a new temp dir by default; removed unless ``keep``).
        commits: length of the demo history.
        prompts / tokens: the nightly job's size (few and short: the engine is deterministic);
            default ``$REGRESS_DEMO_PROMPTS`` / ``$REGRESS_DEMO_TOKENS`` as for the other
            demo's probe, else 8 and 32.
        seed: where the bug is planted and which nights are missing.
        progress: receives a :class:`~regress.demo.run.DemoEvent` per step (``where`` "trend").
    """
    from regress.trend.bisect import run_plan
    from regress.trend.check import check_store
    from regress.trend.store import TrendStore

    prompts = prompts or int(os.environ.get("REGRESS_DEMO_PROMPTS", "8"))
    tokens = tokens or int(os.environ.get("REGRESS_DEMO_TOKENS", "32"))
    started = time.monotonic()

    def say(message: str) -> None:
        if progress is not None:
            progress(DemoEvent("trend", message, time.monotonic() - started))

    # resolved now; a folder the user made is emptied, never deleted
    work = WorkFolder(workdir, prefix="regress-demo-trend-", keep=keep)
    root = work.path
    try:
        repo = build_demo_repo(root / "repo", commits=commits, seed=seed)
        shas = _git(repo.path, "rev-list", "--reverse", "HEAD").split()
        scratch = root / "nights"
        scratch.mkdir()
        (root / NIGHTLY).write_text(_NIGHTLY)
        store = TrendStore(root / "store")
        command = [sys.executable, NIGHTLY, str(prompts), str(tokens)]
        rnd = random.Random(seed)
        result = TrendDemoResult(str(repo.path), commits, 0, repo.stale_map_commit)
        day = dt.date(2026, 1, 1)
        # The engine is deterministic, so a night's report depends on its metadata code only:
        # each distinct code is measured once and its report stored for every night that runs it.
        reports: dict[str, Any] = {}
        for n, commit in enumerate(shas[every - 1 :: every]):
            if n and commit != shas[-1] and rnd.random() < skip:
                say(f"night {n + 1}: no run (missing night)")
                continue
            source = _metadata_source(repo.path, commit)
            code = _code_of(source)
            if code not in reports:
                reports[code] = nightly_report(
                    _metadata_at(source, commit, scratch), prompts=prompts, tokens=tokens
                )
            report = reports[code]
            date = (day + dt.timedelta(days=n)).isoformat()
            store.add(report, commit=commit, date=date, command=command)
            result.nights += 1
            al8 = report.run_for(8).stats.acceptance_length
            say(f"night {n + 1} ({date}): {commit[:10]} AL@8 {al8:.3f}")
        check = check_store(
            store,
            bisect=True,
            bisect_threshold=True,
            bisect_options=[
                "--repo", str(repo.path),
                "--cache-dir", str(root / "cache"),
                "--overlay", str(root / NIGHTLY),
                "--json", "-",
                "--quiet",
            ],
        )  # fmt: skip
        result.check_exit_code = check.exit_code
        result.findings = [f.to_dict() for f in check.alarms]
        plans = check.bisects
        if plans:
            plan = plans[0]
            result.last_good, result.first_bad = plan.good, plan.bad
            result.bisect_command = plan.shell
            say(f"regression between {plan.good[:10]} and {plan.bad[:10]}; {plan.shell}")
            done = run_plan(plan, capture_output=True, text=True)
            result.bisect_exit_code = done.returncode
            culprit = _culprit(done)
            if culprit:
                result.culprit, result.culprit_subject = culprit
        result.seconds = round(time.monotonic() - started, 2)
        return result
    finally:
        work.close()


def _culprit(done: subprocess.CompletedProcess) -> tuple[str, str] | None:
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        return None
    culprit = doc.get("culprit") or {}
    return (culprit["sha"], culprit.get("subject", "")) if culprit.get("sha") else None
