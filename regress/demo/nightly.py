"""A generated nightly series with one registered defect landing on a known night.

What a CI job would store, one ``regress accept`` report per night into a ``regress trend``
store, with the code of each night: up to ``land`` the reference engine's own sources, from then on
the same sources with the defect's plant applied (``regress.demo.plants``, the edit a real commit
would make). The defect lives in the code, not in the engine's options, so every night belongs to
one configuration, as it would in CI. A night whose job aborts (``indexer_pool_exhaustion`` at
batch 8) stores nothing, as a crashed nightly stores nothing.

The engine is deterministic, so a night's report depends on its code only: each distinct code is
measured once and reused for the nights that run it.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.demo.plants import DRAFT_CACHE_FILE, METADATA_FILE, PLANTS, RUNNER_FILE
from regress.errors import EngineError, UsageError

BATCH_SIZES = (1, 8)


@dataclass
class NightlySeries:
    """The series written and what ``regress trend check`` said about it.

    Attributes:
        defect: the planted defect.
        land: index of the first night that runs the planted code.
        nights: nights scheduled; ``stored`` of them produced a report.
        failed: indices of the nights whose job aborted (nothing stored).
        findings: the check's findings (``regress.trend.check.Finding.to_dict``).
        exit_code: ``regress trend check``'s exit code (1: an open regression).
    """

    defect: str
    land: int
    nights: int
    stored: int = 0
    failed: list[int] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    exit_code: int | None = None

    def first_bad_nights(self) -> dict[str, int]:
        """Metric -> index of the first bad night of each alarm."""
        return {
            f["metric"]: int(f["first_bad"]["commit"].removeprefix("night-"))
            for f in self.findings
            if f["alarm"]
        }


def _load(name: str, text: str, scratch: Path) -> Any:
    path = scratch / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"_regress_nightly_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def night_code(defect: str | None, scratch: Path) -> dict[str, Any]:
    """The metadata class and draft-cache module of a night, with ``defect`` planted or not."""
    from regress.reference import draft_cache, metadata

    sources = {METADATA_FILE: inspect.getsource(metadata), DRAFT_CACHE_FILE: ""}
    sources[DRAFT_CACHE_FILE] = inspect.getsource(draft_cache)
    tag = "clean"
    if defect is not None:
        plant = PLANTS[defect]
        if plant.file == RUNNER_FILE:
            raise UsageError(
                f"{defect} lives in the layer-wise runner: no acceptance night sees it"
            )
        if sources[plant.file].count(plant.needle) != 1:
            raise UsageError(f"the plant for {defect} no longer matches {plant.file}")
        sources[plant.file] = sources[plant.file].replace(plant.needle, plant.replacement)
        tag = defect
    scratch.mkdir(parents=True, exist_ok=True)
    meta = _load(f"{tag}_metadata", sources[METADATA_FILE], scratch)
    return {
        "metadata_cls": meta.DSAtrtllmAttentionMetadata,
        "draft_cache": _load(f"{tag}_draft_cache", sources[DRAFT_CACHE_FILE], scratch),
    }


def night_report(code: dict[str, Any], *, share: bool, prompts: int, tokens: int):
    """One night's ``regress accept`` report on ``code`` (raises ``EngineError`` on an abort)."""
    from regress.acceptance.engines.reference import ReferenceAcceptanceEngine
    from regress.acceptance.profile import profile
    from regress.reference.engine import ReferenceEngine
    from regress.reference.model import ModelConfig, index_share_config

    config = index_share_config(ModelConfig()) if share else ModelConfig()

    def factory(**options):
        return ReferenceEngine(config=config, **code, **options)

    engine = ReferenceAcceptanceEngine(defects=(), engine_factory=factory)
    return profile(
        engine,
        engine.default_prompts(prompts),
        batch_sizes=BATCH_SIZES,
        max_draft_len=7 if share else 4,
        max_new_tokens=tokens,
        n_boot=50,
        config={"prompts": "builtin", "source": "regress.demo.nightly"},
    )


def nightly_series(
    defect: str,
    store_dir: Path,
    *,
    nights: int = 16,
    land: int = 9,
    prompts: int = 8,
    tokens: int = 24,
) -> NightlySeries:
    """Write ``nights`` nightly reports into a trend store at ``store_dir``, check it.

    The defect's code runs from night ``land`` (0-based) on; ``index_share_rejected_branch`` is
    measured in the index-share configuration at K = 7 on every night, the others at K = 4.
    """
    from regress.trend.check import check_store
    from regress.trend.store import TrendStore

    if not 0 < land < nights:
        raise UsageError(f"land={land} must fall strictly inside the {nights} nights")
    share = defect == "index_share_rejected_branch"
    scratch = Path(store_dir) / "code"
    store = TrendStore(Path(store_dir) / "store")
    result = NightlySeries(defect, land, nights)
    reports: dict[str, Any] = {}
    day = dt.date(2026, 1, 1)
    for n in range(nights):
        which = defect if n >= land else None
        key = which or "clean"
        if key not in reports:
            try:
                reports[key] = night_report(
                    night_code(which, scratch), share=share, prompts=prompts, tokens=tokens
                )
            except EngineError:
                reports[key] = None  # the nightly job aborted: nothing to store
        if reports[key] is None:
            result.failed.append(n)
            continue
        date = (day + dt.timedelta(days=n)).isoformat()
        store.add(reports[key], commit=f"night-{n:02d}", date=date)
        result.stored += 1
    check = check_store(store)
    result.findings = [f.to_dict() for f in check.findings]
    result.exit_code = check.exit_code
    return result
