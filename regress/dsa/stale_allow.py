"""The reviewed table of fields that legitimately differ from a from-scratch prepare.

The stale-state oracle (:mod:`regress.dsa.staleness`) reports every field whose incremental value
differs from its from-scratch value. A field leaves that report only by a row here, one field per
row (never a pattern), each with the upstream reason and the upstream line that shows it, read in
the commit named. A row may be limited to checkpoint kinds (``draft_step`` covers
``draft_step_<i>``, ``f2:draft_step_<i>`` and ``draft_step_<i>@update_for_spec_dec#2``: a label's
kind is what follows its last colon, before an ``@`` (the caller's own call), without the step
number) and to metadata classes. Rows were decided with the upstream code in hand; candidate upstream defects
are never rows: they are written up in ``docs/findings.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from regress.dsa.staleness import StaleField


@dataclass(frozen=True)
class Allowed:
    """One field that may differ, and why.

    Attributes:
        field: the attribute name, exactly.
        reason: why the difference is not staleness (who reads it, and when it is rewritten).
        upstream: ``path @ commit:line`` where the reason can be checked.
        checkpoints: checkpoint kinds it applies at (``draft_step`` covers ``draft_step_<i>``);
            empty: every checkpoint.
        classes: metadata class names it applies to; empty: every class.
    """

    field: str
    reason: str
    upstream: str
    checkpoints: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()

    def covers(self, found: StaleField, owner: str) -> bool:
        kind = re.sub(r"_\d+$", "", found.checkpoint.rsplit(":", 1)[-1].split("@", 1)[0])
        return (
            found.field == self.field
            and (not self.checkpoints or kind in self.checkpoints)
            and (not self.classes or owner in self.classes)
        )


_C_META = "tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py @ d3d4066f"
_C_TRTLLM = "tensorrt_llm/_torch/attention/backends/trtllm.py @ 017aa0ca"
_C_INDEXER = "tensorrt_llm/_torch/attention/backends/sparse/dsa/indexer.py @ 0b228a79"
#: Upstream's own list of the host tensors prepare() owns ("persistent CPU storage that prepare
#: ... rewrites before a non-blocking H2D copy, or exposes as a host runtime view").
_STAGE = (
    "tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py, stored id 57530523289: "
    "_PREPARE_HOST_STAGE_FIELDS"
)
_DRAFT = ("draft_step",)
_V4 = "tensorrt_llm/_torch/attention/backends/sparse/deepseek_v4/metadata.py @ 5ca7a947"
_V4_COMPRESSOR = (
    "tensorrt_llm/_torch/attention/backends/sparse/deepseek_v4/compressor.py @ 15f98f48"
)
_V4_CLASS = ("DeepseekV4TrtllmAttentionMetadata",)
#: The compress ratios DeepSeek-V4's metadata accepts (``__post_init__`` ``_supported_ratios``).
_V4_RATIOS = (1, 4, 128)
#: Why a per-ratio compressor count may keep the target forward's value in a draft step.
_COMPRESSOR_ONLY = (
    "host per-ratio count of the target forward, read by the compressor of the compressed "
    "layers (ratio > 1) and by prepare(); a draft step runs only the MTP layer, which upstream "
    "keeps sliding-window-only, so no compressor reads it there (a compressed MTP layer would: "
    "see docs/findings.md, 'reviewed, not filed')"
)


def _staging(name: str, written: str) -> Allowed:
    return Allowed(
        name,
        "host staging buffer: prepare() writes it and copies it to its device twin; the draft "
        "loop's on_update_kv_lens() refreshes the device twin directly and no kernel reads the "
        "host copy after prepare(); upstream lists it as prepare-owned host staging",
        f"{written}; {_STAGE}",
        _DRAFT,
    )


#: Decided on the real trees of docs/findings.md (era C @ d3d4066f and 186080bb, era B @ e5c90626
#: and the #16925 fix, DeepSeek-V4 @ 5ca7a947), with the upstream code in hand; every row was seen
#: there.
ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        "kv_lens",
        "host snapshot of cached + new (+ num_extra_kv_tokens) lengths, read only inside "
        "prepare() (the max_kv_len assert and the block-offset width); kernels read kv_lens_cuda, "
        "which the draft loop advances; upstream lists it as prepare-owned host staging",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare `self.kv_lens[:self.num_seqs].copy_(kv_lens "
        f"+ self.kv_cache_params.num_extra_kv_tokens)`; {_STAGE}",
        _DRAFT,
    ),
    *(
        Allowed(
            f"_saved_tensors[{name!r}]",
            "the target layout prepare_for_spec_dec saved for restore_from_spec_dec to put back: "
            "state the draft loop keeps for its restore, which a fresh object outside a draft "
            "loop does not hold",
            "tensorrt_llm/_torch/attention/backends/interface.py @ 1262edbc: "
            "AttentionMetadata.prepare_for_spec_dec `self._saved_tensors[f] = v`",
            ("draft_begin", "draft_step"),
        )
        for name in ("_seq_lens", "_seq_lens_cuda")
    ),
    Allowed(
        "cached_token_lens",
        "the reference mirrors' copy of the executor's per-forward input "
        "kv_cache_params.num_cached_tokens_per_seq (upstream holds it in an object the oracle "
        "does not compare): read only by prepare(); the draft loop advances kv_lens_cuda instead",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare `cached_token_lens = torch.tensor("
        "self.kv_cache_params.num_cached_tokens_per_seq, ...)`",
        _DRAFT,
    ),
    Allowed(
        "kv_lens_runtime",
        "host runtime view (host_past_key_value_lengths of the attention op) of the target "
        "forward's lengths; by upstream's design a spec-dec sub-step advances only the device "
        "view: its own test asserts kv_lens_runtime keeps the snapshot while "
        "kv_lens_cuda_runtime moves on (see docs/findings.md, 'reviewed, not filed')",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare `self._bind_runtime_views(... "
        "kv_lens=kv_lens[:self.num_seqs] ...)`; tests/unittest KV-cache-compression attention "
        "test, stored id 60342322228: test_native_spec_update_refreshes_device_domain_once",
        _DRAFT,
    ),
    Allowed(
        "host_total_kv_lens",
        "host totals [context, generation] of the target forward, a host runtime view like "
        "kv_lens_runtime; sub-steps move only the device lengths",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare `self.host_total_kv_lens[1] = "
        f"kv_lens[self.num_contexts:self.num_seqs].sum().item()`; {_STAGE}",
        _DRAFT,
    ),
    _staging(
        "host_gen_cached_token_indptr",
        f"{_C_META}: prepare_for_mla_rope_append; on_update_kv_lens "
        "`torch.cumsum(..., out=self.gen_cached_token_indptr[1 : self.num_generations + 1])`",
    ),
    _staging(
        "host_gen_kv_indptr",
        f"{_C_META}: prepare_for_mla_rope_append; on_update_kv_lens "
        "`torch.cumsum(..., out=self.gen_kv_indptr[1 : self.num_generations + 1])`",
    ),
    _staging(
        "host_slot_mapping_fp8",
        f"{_C_INDEXER}: Indexer.recompute_slot_mappings; {_C_META}: on_update_kv_lens "
        "`self.slot_mapping_fp8[: self.num_tokens] = fp8_indices`",
    ),
    _staging(
        "host_slot_mapping_scale",
        f"{_C_INDEXER}: Indexer.recompute_slot_mappings; {_C_META}: on_update_kv_lens "
        "`self.slot_mapping_scale[: self.num_tokens] = scale_indices`",
    ),
    _staging(
        "host_req_idx_per_token",
        f"{_C_META}: prepare_for_indices_conversion; on_update_kv_lens "
        "`self.req_idx_per_token[: self.num_tokens] = build_req_idx_per_token(...)`",
    ),
    _staging(
        "kv_lens_expanded_host",
        f"{_C_META}: prepare_for_spec_decode; on_update_kv_lens "
        "`self.kv_lens_expanded_cuda[:num_tokens] = (...)`",
    ),
    _staging("host_block_table_expanded", f"{_C_META}: _refresh_expanded_block_table"),
    Allowed(
        "block_table_expanded",
        "read only when the indexer runs the expanded path, i.e. next_n > 1; every draft step "
        "has next_n == 1 and reads indexer_k_cache_block_offsets instead; the next prepare() "
        "rebuilds it",
        f"{_C_INDEXER}: Indexer.sparse_attn_indexer `if not metadata.use_expanded_buffers_for_mtp "
        "or next_n == 1:` (block_table = metadata.indexer_k_cache_block_offsets[...])",
        _DRAFT,
    ),
    Allowed(
        "slot_mapping_fp8_fullkv",
        "bound to slot_mapping_fp8 (or a full-KV gather map) for the context requests' indexer "
        "prefill; only the prefill gather reads it, a draft step has no context request, and a "
        "later generation-only forward keeps the binding (an alias whose values follow "
        "slot_mapping_fp8) without reading it",
        f"{_C_INDEXER}: Indexer.recompute_context_kv_gather_mappings; Indexer.sparse_attn_indexer "
        "`indexer_k_cache_gather_op(..., metadata.slot_mapping_fp8_fullkv, ...)` under "
        "`if has_prefill`",
    ),
    Allowed(
        "slot_mapping_scale_fullkv",
        "the scale twin of slot_mapping_fp8_fullkv: read only by the context prefill gather",
        f"{_C_INDEXER}: Indexer.sparse_attn_indexer `indexer_k_cache_gather_op(..., "
        "metadata.slot_mapping_scale_fullkv, ...)` under `if has_prefill`",
    ),
    Allowed(
        "max_ctx_seq_len",
        "context-only host counter of the target forward; every reader is on the context path "
        "and num_contexts is 0 in every draft step (update_for_spec_dec resets the two context "
        "counters the generation path reads, max_ctx_kv_len and num_ctx_cached_tokens)",
        f"{_C_META}: prepare_for_mla_rope_append `self.max_ctx_seq_len = "
        "self.seq_lens[: self.num_contexts].max().item()`; update_for_spec_dec",
        _DRAFT,
    ),
    Allowed(
        "num_ctx_mla_kv_tokens",
        "context-only host counter: read only by the NVFP4 context path (`not is_generation`)",
        f"{_C_META}: prepare_for_mla_rope_append; DSA sparse MLA NVFP4 context gather, stored id "
        "57842311440: `total_kv_tokens = metadata.num_ctx_mla_kv_tokens`",
        _DRAFT,
    ),
    Allowed(
        "num_ctx_kv_tokens",
        "context-only host counter: read only under `has_prefill` by the indexer's single-pass "
        "prefill",
        f"{_C_INDEXER}: Indexer.prepare `metadata.num_ctx_kv_tokens = ...`; "
        "Indexer.sparse_attn_indexer `elif metadata.num_ctx_kv_tokens == 0:`",
        _DRAFT,
    ),
    # seen only when upstream's own worker drives the loop (issue 19's real tree N-v4:
    # benchmarks/upstream.md, "Upstream's own caller on the newest stored stack")
    Allowed(
        "use_spec_decoding",
        "a mode the worker itself sets for the chained draft steps and resets after the loop: "
        "an input of the caller, not state prepare() derives from the layout (a fresh object "
        "holds what the announcement set)",
        "tensorrt_llm/_torch/speculative/eagle3.py, stored id 51981746824: "
        "Eagle3OneModelWorker.forward `attn_metadata.use_spec_decoding = False` in the draft "
        "loop, `attn_metadata.use_spec_decoding = True` after it",
        _DRAFT,
    ),
    Allowed(
        "_prepare_host_stage_slot",
        "which slot of prepare()'s ring of pinned host staging buffers the last prepare() used: "
        "it advances on every prepare() by design, so an object that prepared twice holds "
        "another slot than a fresh one that prepared once",
        f"{_STAGE}, `_acquire_prepare_host_stage_slot` `slot = (self._prepare_host_stage_slot + 1) "
        "% len(ring)`",
    ),
    # DeepSeek-V4 (decided on its metadata @ 5ca7a947 over the era-C DSA files above)
    Allowed(
        "cached_token_lens_cuda",
        "the target forward's cached lengths, copied in prepare() for its own index build and the "
        "compressor's context (prefill) path, both reading [:num_contexts] or running in "
        "prepare(); on_update_kv_lens() derives the draft step's positions from kv_lens_cuda "
        "instead (`cached_tokens = kv_lens - seq_lens`) and a draft step has no context request",
        f"{_V4}: prepare `self.cached_token_lens_cuda[:num_requests].copy_(...)`, "
        f"on_update_kv_lens `cached_tokens = kv_lens - seq_lens`; {_V4_COMPRESSOR}: "
        "`metadata.cached_token_lens_cuda[:num_contexts]` under `if num_contexts > 0`",
        _DRAFT,
        _V4_CLASS,
    ),
    Allowed(
        "cached_token_lens_cpu",
        "host staging of cached_token_lens_cuda: written by prepare() and copied to the device "
        "buffer; nothing reads it after prepare()",
        f"{_V4}: prepare `self.cached_token_lens_cpu[:num_requests] = torch.tensor(...)`",
        _DRAFT,
        _V4_CLASS,
    ),
    Allowed(
        "cu_seq_lens",
        "host staging of cu_seq_lens_cuda, which on_update_kv_lens() rebuilds on the device "
        "(_compute_token_positions); nothing reads the host copy after prepare()",
        f"{_V4}: prepare `self.cu_seq_lens[1 : num_requests + 1] = self.seq_lens.cumsum(0)`; "
        "_compute_token_positions `cu_seq_lens_buf[: batch_size + 1] = ...`",
        _DRAFT,
        _V4_CLASS,
    ),
    *(
        Allowed(f"{name}[{ratio}]", _COMPRESSOR_ONLY, f"{_V4}: {where}", _DRAFT, _V4_CLASS)
        for name, where in (
            (
                "num_total_compressed_tokens",
                "prepare `self.num_total_compressed_tokens[compress_ratio] = ...` (not in "
                f"on_update_kv_lens); {_V4_COMPRESSOR}: `compressed_mask_cuda[...][:total_tokens]`",
            ),
            (
                "max_ctx_compressed_tokens",
                f"prepare; {_V4_COMPRESSOR}: context compress `max_ctx_comp_kv_lens`",
            ),
        )
        for ratio in _V4_RATIOS
    ),
    *(
        Allowed(
            name,
            "prepare()'s host context output sizes, cached for on_update_kv_lens(), which hands "
            "them to _compute_ctx_compressed_position_ids only when num_contexts > 0; a draft "
            "step has no context request",
            f"{_V4}: prepare `self._ctx_output_sizes = ctx_output_sizes`; "
            "prepare_compressed_kv_metadata `if num_contexts > 0:`",
            _DRAFT,
            _V4_CLASS,
        )
        for name in ("_ctx_output_sizes", *(f"_ctx_output_sizes[{r}]" for r in _V4_RATIOS))
    ),
    *(
        Allowed(
            name,
            "DSA's MLA-RoPE-append counter: DSA's update_for_spec_dec() sets it, but DeepSeek-V4's "
            "prepare() calls TrtllmAttentionMetadata.prepare() and never DSA's, so a fresh object "
            "never holds it; nothing on V4's forward path reads it (the first forward of a fresh "
            "object would raise AttributeError)",
            f"{_V4}: prepare `TrtllmAttentionMetadata.prepare(self)`; {_C_META}: "
            f"update_for_spec_dec `self.{name} = ...`",
            ("prepare", "draft_begin"),
            _V4_CLASS,
        )
        for name in ("max_ctx_kv_len", "num_ctx_cached_tokens", "max_gen_seq_len")
    ),
)


def explain(
    found: Sequence[StaleField], table: Sequence[Allowed], owner: str
) -> tuple[list[StaleField], list[tuple[StaleField, Allowed]]]:
    """Split differences into unexplained ones and those a row of ``table`` explains."""
    unexplained: list[StaleField] = []
    allowed: list[tuple[StaleField, Allowed]] = []
    for f in found:
        row = next((a for a in table if a.covers(f, owner)), None)
        if row is None:
            unexplained.append(f)
        else:
            allowed.append((f, row))
    return unexplained, allowed


__all__ = ["ALLOWED", "Allowed", "explain"]
