"""The historical defects the reference engine can replay, switchable per call or by env var.

Each defect reproduces one upstream state of TensorRT-LLM faithfully enough that the contract
checks, the acceptance profiler and ``regress bisect`` can be shown to catch it. Switch them on with
``defects=...`` on the reference classes or ``REGRESS_DEFECTS=a,b`` in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from regress.dsa.announce import DEEPGEMM_ASSERT
from regress.errors import UsageError
from regress.plugins import Option, Registry

ENV_VAR = "REGRESS_DEFECTS"


@dataclass(frozen=True)
class Defect:
    """One historical defect.

    Attributes:
        name: the switch, e.g. ``"stale_req_idx"``.
        summary: one line saying what goes wrong, in our engine's terms (the mechanism).
        upstream: the upstream state it reproduces (PR, issue, file, function).
        symptom: what a user sees when it is live.
        caught_by: the checks that catch it (``CONTRACTS``, ``SENTINEL``, the ``regress accept``
            verdict names, ``ASSERT``); each is proved by a test in ``tests/unit``.
    """

    name: str
    summary: str
    upstream: str
    symptom: str
    caught_by: tuple[str, ...] = ()

    # A registry entry (regress.plugins.Described); properties, so the JSON of
    # `regress defects --json` (the fields) stays what it was.
    @property
    def help(self) -> str:
        """The one line a help text shows: the mechanism."""
        return self.summary

    @property
    def options(self) -> tuple[Option, ...]:
        """A defect is switched on by name alone."""
        return ()


#: ``regress defects --check`` (the contract battery) catches the defect.
CONTRACTS = "contracts"
#: The runtime DSA sentinel (``regress accept --sentinel``) catches it.
SENTINEL = "sentinel"
#: The run aborts with a named error: an ``assert`` probe target for ``regress bisect``.
ASSERT = "assert"


#: The defects by name: the reference engine's own, then the ``regress.defects`` entry points (a
#: package whose engine replays defects of its own declares them there).
DEFECTS: Registry[Defect] = Registry(
    "defect",
    "--defect",
    "regress.defects",
    (
        Defect(
            "stale_req_idx",
            "req_idx_per_token is built in prepare() only; on_update_kv_lens() reuses it after "
            "the MTP-Eagle draft loop collapses the batch to one token per request.",
            "TensorRT-LLM before PR #16925: DSAtrtllmAttentionMetadata.on_update_kv_lens() in "
            "_torch/attention_backend/sparse/dsa.py",
            "acceptance length drops at batch > 1 with max_draft_len >= 2 (3.77 -> 3.28 at "
            "batch 8 on GLM-5.2), conditional acceptance decaying with depth; batch 1 and "
            "accuracy unchanged",
            (CONTRACTS, SENTINEL, "batch_invariance", "conditional_decay", "baseline"),
        ),
        Defect(
            "arange_only_refresh",
            "the map is refreshed only when num_tokens == num_seqs, by copying a static arange; "
            "any other layout written after prepare() (e.g. [4]*8, tree drafts [3,1,4,1]) stays "
            "stale.",
            "the closed alternative fix, PR #17240 (_refresh_req_idx_per_token)",
            "correct for all-ones draft steps, wrong for every other re-laid-out batch",
            (CONTRACTS,),
        ),
        Defect(
            "unannounced_mtp_shapes",
            "the layer-wise benchmark submits seq_len_q > 1 tokens per request without "
            "update_spec_dec_param(), so kv_lens_cuda_2d stays one column wide.",
            "TensorRT-LLM before PR #17247: Runner.create_run_pack() in "
            "tensorrt_llm/tools/layer_wise_benchmarks/runner.py",
            f"DeepGEMM aborts: {DEEPGEMM_ASSERT}",
            (CONTRACTS, ASSERT),
        ),
        Defect(
            "method_hasattr_guard",
            "the shape announcement is made whenever the metadata has an update_spec_dec_param "
            "method, which every backend has, so non-DSA metadata gets max_total_draft_tokens set.",
            "the first revision of PR #17247, before review narrowed the guard to metadata that "
            "has kv_lens_cuda_2d",
            "non-DSA layer-wise runs at seq_len_q > 1 silently select another attention kernel",
            (CONTRACTS,),
        ),
        Defect(
            "no_accept_v1_cache_manager",
            "the V1 cache-manager path sizes the indexer-K layer mask by the target's layers "
            "only, so the MTP layer owns no indexer pool: its indexer finds no keys, draft step "
            "0 attends nothing and every draft token is garbage.",
            "TensorRT-LLM issue #18662 (open): MTP accepts no draft tokens on DSA models with "
            "use_kv_cache_manager_v2=False (V1 KVCacheManager + DSACacheManager)",
            "acceptance length 1.0 at every batch size; outputs unchanged (drafts are only "
            "verified)",
            ("baseline",),
        ),
        Defect(
            "index_share_rejected_branch",
            "index share stashes each request's last padded row of draft step 0, so under "
            "partial acceptance draft steps 1..K-1 attend a top-k chosen on the target's "
            "rejected branch, pointing at stale rejected-branch KV after the kv-lens rewind.",
            "TensorRT-LLM PR #15806 (DSA MTP indexer top-k sharing), review of the stash (every "
            "next_n-th row of topk_indices_buffer from row next_n - 1); QSA follow-up PR #19138",
            "conditional acceptance decays faster with depth wherever acceptance is partial, at "
            "every batch size; no effect when every draft is accepted",
            ("baseline",),
        ),
        Defect(
            "indexer_pool_exhaustion",
            "the indexer-K pool is sized for a warm-up batch and left out of admission, so a "
            "larger batch takes more indexer blocks than the pool has and the engine aborts.",
            "TensorRT-LLM issue #18660 (open): KVCacheManagerV2 + DSA, the indexer (draft) "
            "cache pool is not part of admission; exhausting it aborts the engine",
            "IndexerPoolExhausted once more than 4 requests are in flight (batch 8 aborts, "
            "batch 1..4 run)",
            (ASSERT,),
        ),
        Defect(
            "stale_block_table",
            "block_table (the top-k conversion's table) is padded with -1 from the target "
            "forward's host kv lengths and written only up to the widest request's blocks; "
            "on_update_kv_lens() never refreshes it, so a draft token past the verify window's "
            "last block loses the keys of that block (its own included), and the widest row "
            "reads what an earlier forward left past its blocks.",
            "TensorRT-LLM (open, docs/findings.md finding 1): "
            "DSAtrtllmAttentionMetadata.prepare_for_indexer_k_cache() and on_update_kv_lens() in "
            "_torch/attention/backends/sparse/dsa/metadata.py @ 186080bb",
            "draft tokens that cross a KV block boundary attend without the crossed block; "
            "acceptance drops by less than any AL gate resolves (benchmarks/block_table.md)",
            (CONTRACTS,),
        ),
    ),
)


def validate_defects(names: Iterable[str]) -> frozenset[str]:
    """Check defect names against the registry.

    Raises:
        UsageError: naming the unknown defects and listing the known ones.
    """
    chosen = frozenset(n.strip() for n in names if n and n.strip())
    unknown = sorted(chosen - DEFECTS.keys())
    if unknown:
        raise UsageError(
            f"unknown defect(s): {', '.join(unknown)}. Known defects: "
            f"{', '.join(sorted(DEFECTS))} (see `regress defects`)."
        )
    return chosen


def active_defects(explicit: Iterable[str] | None = None) -> frozenset[str]:
    """The defects in force: ``explicit`` when given, else those named in ``REGRESS_DEFECTS``.

    An explicit empty collection means "no defects", whatever the environment says, so a test
    that must run on correct code can insist on it.
    """
    if explicit is not None:
        return validate_defects(explicit)
    return validate_defects(os.environ.get(ENV_VAR, "").split(","))
