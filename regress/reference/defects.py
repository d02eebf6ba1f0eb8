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

ENV_VAR = "REGRESS_DEFECTS"


@dataclass(frozen=True)
class Defect:
    """One historical defect.

    Attributes:
        name: the switch, e.g. ``"stale_req_idx"``.
        summary: one line saying what goes wrong.
        upstream: the upstream state it reproduces (PR, file, function).
        symptom: what a user sees when it is live.
    """

    name: str
    summary: str
    upstream: str
    symptom: str


DEFECTS: dict[str, Defect] = {
    d.name: d
    for d in (
        Defect(
            "stale_req_idx",
            "req_idx_per_token is built in prepare() only; on_update_kv_lens() reuses it after "
            "the MTP-Eagle draft loop collapses the batch to one token per request.",
            "TensorRT-LLM before PR #16925: DSAtrtllmAttentionMetadata.on_update_kv_lens() in "
            "_torch/attention_backend/sparse/dsa.py",
            "acceptance length drops at batch > 1 with max_draft_len >= 2 (3.77 -> 3.28 at "
            "batch 8 on GLM-5.2); batch 1 and accuracy unchanged",
        ),
        Defect(
            "arange_only_refresh",
            "the map is refreshed only when num_tokens == num_seqs, by copying a static arange; "
            "any other layout written after prepare() (e.g. [4]*8, tree drafts [3,1,4,1]) stays "
            "stale.",
            "the closed alternative fix, PR #17240 (_refresh_req_idx_per_token)",
            "correct for all-ones draft steps, wrong for every other re-laid-out batch",
        ),
        Defect(
            "unannounced_mtp_shapes",
            "the layer-wise benchmark submits seq_len_q > 1 tokens per request without "
            "update_spec_dec_param(), so kv_lens_cuda_2d stays one column wide.",
            "TensorRT-LLM before PR #17247: Runner.create_run_pack() in "
            "tensorrt_llm/tools/layer_wise_benchmarks/runner.py",
            f"DeepGEMM aborts: {DEEPGEMM_ASSERT}",
        ),
        Defect(
            "method_hasattr_guard",
            "the shape announcement is guarded by hasattr(metadata, 'update_spec_dec_param'), "
            "which every backend has, so non-DSA metadata gets max_total_draft_tokens set.",
            "the first revision of PR #17247, before review narrowed the guard to "
            "hasattr(metadata, 'kv_lens_cuda_2d')",
            "non-DSA layer-wise runs at seq_len_q > 1 silently select another attention kernel",
        ),
    )
}


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
