"""How ``regress demo`` plants each registered defect in its history, and how it hunts it down.

A plant is the one-line edit a real commit would make to the history's copy of the reference
code (``dsa_metadata.py``, ``layerwise_runner.py``, ``draft_cache.py``), with the bisect that finds
it: the probe script and kind, and what the probe reads. The two seed bugs keep their edits (drop
the map refresh; drop the MTP shape announcement); every other defect in
``regress.reference.defects.DEFECTS`` has one here too, so ``regress demo --defect NAME`` works
for all of them (a test checks the two tables agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

METADATA_FILE = "dsa_metadata.py"
RUNNER_FILE = "layerwise_runner.py"
DRAFT_CACHE_FILE = "draft_cache.py"

ACCEPTANCE_PROBE = "probe_acceptance.py"
LAYERWISE_PROBE = "probe_layerwise.py"
CONTRACT_PROBE = "probe_contracts.py"
SERVING_PROBE = "probe_serving.py"

#: What the serving probe's abort looks like (the class name shows in the traceback).
POOL_SIGNATURE = r"IndexerPoolExhausted"


@dataclass(frozen=True)
class Plant:
    """One defect's commit and bisect.

    Attributes:
        defect: the registry name.
        file: the history file the commit edits.
        needle: text that must occur exactly once in that file.
        replacement: what the commit puts in its place.
        subject: the commit's subject line.
        probe: the bisect probe kind (``metric``, ``assert``, ``exit-code``).
        script: the probe script run in every worktree.
        what: how the demo names this bisect in its progress and summary.
        bisect: extra ``BisectConfig`` fields (metric, direction, the assert probe's
            ``options`` ...).
    """

    defect: str
    file: str
    needle: str
    replacement: str
    subject: str
    probe: str
    script: str
    what: str
    bisect: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.defect} ({self.what})"


def _metric(metric: str) -> dict[str, Any]:
    return {"metric": metric, "direction": 1, "metric_runs": (2, 1, 4)}


PLANTS: dict[str, Plant] = {
    p.defect: p
    for p in (
        Plant(
            "stale_req_idx",
            METADATA_FILE,
            "        self._refresh_req_idx_per_token()\n",
            "",
            "perf: reuse req_idx_per_token from prepare() in on_update_kv_lens",
            "metric",
            ACCEPTANCE_PROBE,
            "acceptance metric",
            _metric("al_ratio"),
        ),
        Plant(
            "arange_only_refresh",
            METADATA_FILE,
            '        if "arange_only_refresh" in self.defects:\n',
            "        if True:  # one token per request is all the draft loop needs\n",
            "perf: refresh req_idx_per_token from a static arange",
            "exit-code",
            CONTRACT_PROBE,
            "map contract on a tree layout",
        ),
        Plant(
            "unannounced_mtp_shapes",
            RUNNER_FILE,
            "    _announce(metadata, run_type, batch_size, seq_len_q, chosen)\n",
            "",
            "layer-wise: build GEN packs without the spec-dec call",
            "assert",
            LAYERWISE_PROBE,
            "DeepGEMM assert",
        ),
        Plant(
            "method_hasattr_guard",
            RUNNER_FILE,
            '    if "method_hasattr_guard" in defects:\n',
            "    if True:  # every metadata can be announced to\n",
            "layer-wise: announce MTP shapes to any metadata with update_spec_dec_param",
            "exit-code",
            CONTRACT_PROBE,
            "dense-backend contract",
        ),
        Plant(
            "no_accept_v1_cache_manager",
            DRAFT_CACHE_FILE,
            "    return range(num_target_layers + num_draft_layers)\n",
            "    return range(num_target_layers)\n",
            "cache: size the indexer layer mask from the model's layers",
            "metric",
            ACCEPTANCE_PROBE,
            "acceptance metric, batch 1",
            _metric("al_batch1"),
        ),
        Plant(
            "index_share_rejected_branch",
            DRAFT_CACHE_FILE,
            "            rows.append(start + a)\n",
            "            rows.append(start + n - 1)\n",
            "spec: stash each request's last row of the verify layout for index share",
            "metric",
            ACCEPTANCE_PROBE,
            "acceptance metric, index share, batch 8",
            _metric("al_batch8"),
        ),
        Plant(
            "stale_block_table",
            METADATA_FILE,
            '        if "stale_block_table" not in self.defects:\n            self._refresh_block_table()\n',
            "",
            "perf: build the top-k block table once per forward, in prepare()",
            "exit-code",
            CONTRACT_PROBE,
            "block-table contract",
        ),
        Plant(
            "indexer_pool_exhaustion",
            DRAFT_CACHE_FILE,
            "    return 1 + batch_size * blocks_per_request\n",
            "    return 1 + WARMUP_REQUESTS * blocks_per_request\n",
            "cache: size the indexer pool from the warm-up batch",
            "assert",
            SERVING_PROBE,
            "engine abort",
            {"options": {"signature": POOL_SIGNATURE}},
        ),
    )
}

#: What ``regress demo`` plants without ``--defect``: the two seed bugs.
SEEDS = ("stale_req_idx", "unannounced_mtp_shapes")
