"""The reviewed table of fields that legitimately differ from a from-scratch prepare.

The stale-state oracle (:mod:`regress.dsa.staleness`) reports every field whose incremental value
differs from its from-scratch value. A field leaves that report only by a row here, one field per
row (never a pattern), each with the upstream reason and the upstream place that shows it (file,
commit, method, and in our own words what that code does; never upstream's code), read in the
commit named, or in the newest stored version where the commit is unknown (said so). A row may be limited to checkpoint kinds (``draft_step`` covers
``draft_step_<i>``, ``f2:draft_step_<i>`` and ``draft_step_<i>@update_for_spec_dec#2``: a label's
kind is what follows its last colon, before an ``@`` (the caller's own call), without the step
number) and to metadata classes. Rows were decided with the upstream code in hand; candidate
upstream defects are never rows: they are written up in ``docs/findings.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from regress.dsa.staleness import StaleField

#: The cell every row below was decided in: the sandbox of ``docs/findings.md``'s runs (fused
#: gate forced off, the DSL path, index share and indexer skip off, SM 90, no overlap
#: correction, no CUDA-graph padding), as :data:`regress.check.matrix.BASE` names it.
DECIDED_BASE = ("fused=off,dsl=off,share=off,skip=off,sm=90,overlap=off,pad=off",)
#: A row decided for every cell: it fixes no axis, because no axis changes what the row explains.
EVERY_CELL = ("",)


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
        cells: the production-matrix cells it was decided in (``regress.check.matrix`` cell
            strings, each naming only the axes it fixes); a difference seen in any other cell is
            not covered: it is reported as unreviewed until a row is decided for that cell.
    """

    field: str
    reason: str
    upstream: str
    checkpoints: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    cells: tuple[str, ...] = DECIDED_BASE

    def covers(self, found: StaleField, owner: str, cell: str | None = None) -> bool:
        """Whether the row explains ``found``; in a matrix ``cell``, only one it was decided in."""
        kind = re.sub(r"_\d+$", "", found.checkpoint.rsplit(":", 1)[-1].split("@", 1)[0])
        return (
            found.field == self.field
            and (not self.checkpoints or kind in self.checkpoints)
            and (not self.classes or owner in self.classes)
            and (cell is None or self.decided_in(cell))
        )

    def decided_in(self, cell: str) -> bool:
        """``cell`` agrees with one of :attr:`cells` on every axis that cell fixes (an axis the
        tree lacks, ``n/a``, agrees with anything)."""
        have = dict(p.split("=", 1) for p in cell.split(",") if "=" in p)
        return any(
            all(
                have.get(k, v) in (v, "n/a")
                for k, v in (p.split("=", 1) for p in row.split(",") if p)
            )
            for row in self.cells
        )


_C_META = "tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py @ d3d4066f"
_C_TRTLLM = "tensorrt_llm/_torch/attention/backends/trtllm.py @ 017aa0ca"
_C_INDEXER = "tensorrt_llm/_torch/attention/backends/sparse/dsa/indexer.py @ 0b228a79"
#: Upstream's own list of the host tensors prepare() owns: pinned host buffers that prepare()
#: refills before copying them to the device without blocking, or hands out as host runtime views.
_STAGE = (
    "tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py (era-B path; the newest stored "
    "version, commit unknown): _PREPARE_HOST_STAGE_FIELDS"
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


#: Host copies the overlap correction leaves at the host's assumption. Decided on era C @
#: 186080bb: seen in every fused=off, overlap=on cell (each value of the other axes); for
#: fused=on by reading that file's on_update_kv_lens (the fused kernel replaces only the device
#: chain; the host copies are written by prepare() alone, whichever path), not yet by running it.
_OVERLAP_HOST = (
    "kv_lens",
    "kv_lens_runtime",
    "host_total_kv_lens",
    "host_gen_cached_token_indptr",
    "host_gen_kv_indptr",
    "host_slot_mapping_fp8",
    "host_slot_mapping_scale",
    "host_topk_indices_buffer",
    "kv_lens_expanded_host",
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
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare (copies each request's kv length plus the "
        f"extra kv tokens into the first num_seqs entries of kv_lens); {_STAGE}",
        _DRAFT,
    ),
    *(
        Allowed(
            f"_saved_tensors[{name!r}]",
            "the target layout prepare_for_spec_dec saved for restore_from_spec_dec to put back: "
            "state the draft loop keeps for its restore, which a fresh object outside a draft "
            "loop does not hold",
            "tensorrt_llm/_torch/attention/backends/interface.py @ 1262edbc: "
            "AttentionMetadata.prepare_for_spec_dec (saves each named field's tensor into "
            "_saved_tensors under the field's name)",
            ("draft_begin", "draft_step"),
        )
        for name in ("_seq_lens", "_seq_lens_cuda")
    ),
    Allowed(
        "cached_token_lens",
        "the reference mirrors' copy of the executor's per-forward input "
        "kv_cache_params.num_cached_tokens_per_seq (upstream holds it in an object the oracle "
        "does not compare): read only by prepare(); the draft loop advances kv_lens_cuda instead",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare (builds a local cached_token_lens tensor "
        "from kv_cache_params.num_cached_tokens_per_seq)",
        _DRAFT,
    ),
    Allowed(
        "kv_lens_runtime",
        "host runtime view (host_past_key_value_lengths of the attention op) of the target "
        "forward's lengths; by upstream's design a spec-dec sub-step advances only the device "
        "view: its own test asserts kv_lens_runtime keeps the snapshot while "
        "kv_lens_cuda_runtime moves on (see docs/findings.md, 'reviewed, not filed')",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare (hands the first num_seqs host kv "
        "lengths to _bind_runtime_views as the kv_lens view); tests/unittest "
        "KV-cache-compression attention test (the newest stored version, commit unknown): "
        "test_native_spec_update_refreshes_device_domain_once",
        _DRAFT,
    ),
    Allowed(
        "host_total_kv_lens",
        "host totals [context, generation] of the target forward, a host runtime view like "
        "kv_lens_runtime; sub-steps move only the device lengths",
        f"{_C_TRTLLM}: TrtllmAttentionMetadata.prepare (stores the summed kv lengths of the "
        f"generation requests as the second entry of host_total_kv_lens); {_STAGE}",
        _DRAFT,
    ),
    _staging(
        "host_gen_cached_token_indptr",
        f"{_C_META}: prepare_for_mla_rope_append; on_update_kv_lens (writes the running sum of "
        "the generation requests' cached lengths straight into the device gen_cached_token_indptr)",
    ),
    _staging(
        "host_gen_kv_indptr",
        f"{_C_META}: prepare_for_mla_rope_append; on_update_kv_lens (writes the running sum of "
        "the generation requests' kv lengths straight into the device gen_kv_indptr)",
    ),
    _staging(
        "host_slot_mapping_fp8",
        f"{_C_INDEXER}: Indexer.recompute_slot_mappings; {_C_META}: on_update_kv_lens (stores "
        "the recomputed fp8 slot indices in the device slot_mapping_fp8, one per token)",
    ),
    _staging(
        "host_slot_mapping_scale",
        f"{_C_INDEXER}: Indexer.recompute_slot_mappings; {_C_META}: on_update_kv_lens (stores "
        "the recomputed scale slot indices in the device slot_mapping_scale, one per token)",
    ),
    _staging(
        "host_req_idx_per_token",
        f"{_C_META}: prepare_for_indices_conversion; on_update_kv_lens (rebuilds the device "
        "req_idx_per_token with build_req_idx_per_token, one entry per token)",
    ),
    _staging(
        "kv_lens_expanded_host",
        f"{_C_META}: prepare_for_spec_decode; on_update_kv_lens (refills the device "
        "kv_lens_expanded_cuda, one entry per token)",
    ),
    _staging("host_block_table_expanded", f"{_C_META}: _refresh_expanded_block_table"),
    Allowed(
        "block_table_expanded",
        "read only when the indexer runs the expanded path, i.e. next_n > 1; every draft step "
        "has next_n == 1 and reads indexer_k_cache_block_offsets instead; the next prepare() "
        "rebuilds it",
        f"{_C_INDEXER}: Indexer.sparse_attn_indexer (unless use_expanded_buffers_for_mtp is set "
        "and next_n exceeds 1, it takes its block table from indexer_k_cache_block_offsets)",
        _DRAFT,
    ),
    Allowed(
        "slot_mapping_fp8_fullkv",
        "bound to slot_mapping_fp8 (or a full-KV gather map) for the context requests' indexer "
        "prefill; only the prefill gather reads it, a draft step has no context request, and a "
        "later generation-only forward keeps the binding (an alias whose values follow "
        "slot_mapping_fp8) without reading it",
        f"{_C_INDEXER}: Indexer.recompute_context_kv_gather_mappings; Indexer.sparse_attn_indexer "
        "(passes slot_mapping_fp8_fullkv to indexer_k_cache_gather_op only on its has_prefill "
        "branch)",
    ),
    Allowed(
        "slot_mapping_scale_fullkv",
        "the scale twin of slot_mapping_fp8_fullkv: read only by the context prefill gather",
        f"{_C_INDEXER}: Indexer.sparse_attn_indexer (passes slot_mapping_scale_fullkv to "
        "indexer_k_cache_gather_op only on its has_prefill branch)",
    ),
    Allowed(
        "max_ctx_seq_len",
        "context-only host counter of the target forward; every reader is on the context path "
        "and num_contexts is 0 in every draft step (update_for_spec_dec resets the two context "
        "counters the generation path reads, max_ctx_kv_len and num_ctx_cached_tokens)",
        f"{_C_META}: prepare_for_mla_rope_append (sets max_ctx_seq_len to the longest context "
        "request's new length); update_for_spec_dec",
        _DRAFT,
    ),
    Allowed(
        "num_ctx_mla_kv_tokens",
        "context-only host counter: read only by the NVFP4 context path (when the forward is not "
        "a generation one)",
        f"{_C_META}: prepare_for_mla_rope_append; DSA sparse MLA NVFP4 context gather (the "
        "newest stored version, commit unknown; takes its total kv token count from "
        "num_ctx_mla_kv_tokens)",
        _DRAFT,
    ),
    Allowed(
        "num_ctx_kv_tokens",
        "context-only host counter: read only on the has_prefill branch by the indexer's "
        "single-pass prefill",
        f"{_C_INDEXER}: Indexer.prepare (sets num_ctx_kv_tokens); Indexer.sparse_attn_indexer "
        "(branches on num_ctx_kv_tokens being zero)",
        _DRAFT,
    ),
    # seen only when upstream's own worker drives the loop (issue 19's real tree N-v4:
    # benchmarks/upstream.md, "Upstream's own caller on the newest stored stack")
    Allowed(
        "use_spec_decoding",
        "a mode the worker itself sets for the chained draft steps and resets after the loop: "
        "an input of the caller, not state prepare() derives from the layout (a fresh object "
        "holds what the announcement set)",
        "tensorrt_llm/_torch/speculative/eagle3.py (the newest stored version, commit unknown): "
        "Eagle3OneModelWorker.forward (turns use_spec_decoding off on the attention metadata "
        "for the draft loop and back on after it)",
        _DRAFT,
    ),
    Allowed(
        "_prepare_host_stage_slot",
        "which slot of prepare()'s ring of pinned host staging buffers the last prepare() used: "
        "it advances on every prepare() by design, so an object that prepared twice holds "
        "another slot than a fresh one that prepared once",
        f"{_STAGE}, _acquire_prepare_host_stage_slot (moves _prepare_host_stage_slot on by one, "
        "wrapping around the ring; prepare() acquires a slot whatever the fused gate, the DSL "
        "path, index share, indexer skip, SM, overlap correction or graph padding)",
        cells=EVERY_CELL,
    ),
    # DeepSeek-V4 (decided on its metadata @ 5ca7a947 over the era-C DSA files above)
    Allowed(
        "cached_token_lens_cuda",
        "the target forward's cached lengths, copied in prepare() for its own index build and the "
        "compressor's context (prefill) path, both reading [:num_contexts] or running in "
        "prepare(); on_update_kv_lens() derives the draft step's positions from kv_lens_cuda "
        "instead (kv lengths less new lengths) and a draft step has no context request",
        f"{_V4}: prepare (copies the requests' cached lengths into cached_token_lens_cuda), "
        f"on_update_kv_lens (cached tokens from kv lengths less new lengths); {_V4_COMPRESSOR}: "
        "reads the context requests' slice of cached_token_lens_cuda only when there are "
        "context requests",
        _DRAFT,
        _V4_CLASS,
    ),
    Allowed(
        "cached_token_lens_cpu",
        "host staging of cached_token_lens_cuda: written by prepare() and copied to the device "
        "buffer; nothing reads it after prepare()",
        f"{_V4}: prepare (fills cached_token_lens_cpu with the requests' cached lengths)",
        _DRAFT,
        _V4_CLASS,
    ),
    Allowed(
        "cu_seq_lens",
        "host staging of cu_seq_lens_cuda, which on_update_kv_lens() rebuilds on the device "
        "(_compute_token_positions); nothing reads the host copy after prepare()",
        f"{_V4}: prepare (fills the host cu_seq_lens with the running sum of seq_lens); "
        "_compute_token_positions (rewrites the device cu_seq_lens buffer)",
        _DRAFT,
        _V4_CLASS,
    ),
    *(
        Allowed(f"{name}[{ratio}]", _COMPRESSOR_ONLY, f"{_V4}: {where}", _DRAFT, _V4_CLASS)
        for name, where in (
            (
                "num_total_compressed_tokens",
                "prepare sets num_total_compressed_tokens per compress ratio (on_update_kv_lens "
                f"does not); {_V4_COMPRESSOR}: bounds its compressed_mask_cuda slice by it",
            ),
            (
                "max_ctx_compressed_tokens",
                f"prepare; {_V4_COMPRESSOR}: context compress (its max_ctx_comp_kv_lens)",
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
            f"{_V4}: prepare (keeps the context output sizes in _ctx_output_sizes); "
            "prepare_compressed_kv_metadata (uses them only when there are context requests)",
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
            f"{_V4}: prepare (calls TrtllmAttentionMetadata.prepare directly); {_C_META}: "
            f"update_for_spec_dec (sets {name})",
            ("prepare", "draft_begin"),
            _V4_CLASS,
        )
        for name in ("max_ctx_kv_len", "num_ctx_cached_tokens", "max_gen_seq_len")
    ),
    Allowed(
        "_fused_dsa_meta_armed",
        "a log-once flag: the first fused decode-metadata launch sets it so the 'kernel armed' "
        "info line is written once per object; nothing else reads it, and a fresh object that "
        "never ran the fused path has none",
        "tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py @ 186080bb: "
        "on_update_kv_lens (the fused branch, read before the launch only to decide the log "
        "line)",
        cells=("fused=on",),
    ),
    *(
        Allowed(
            name,
            "host copy of lengths prepare() computed from what the host assumed under the overlap "
            "scheduler (every draft of the previous iteration accepted); the correction that "
            "follows is device-only (kv_lens_cuda += previous_kv_lens_offsets_cuda, then "
            "on_update_kv_lens(), which refreshes the device twins, equal to a fresh prepare "
            "here), so the host copy keeps the assumed value, an upper bound of the true one",
            "tensorrt_llm/_torch/pyexecutor/model_engine.py (newest stored version, commit "
            f"unknown): _preprocess_inputs (the device-side correction); {_C_TRTLLM} and "
            "attention/backends/sparse/dsa/metadata.py @ 186080bb: prepare (writes the host "
            "copy, then its device twin), on_update_kv_lens (refreshes the device twin only)",
            ("overlap_correction",),
            cells=("overlap=on",),
        )
        for name in _OVERLAP_HOST
    ),
)


def explain(
    found: Sequence[StaleField], table: Sequence[Allowed], owner: str, cell: str | None = None
) -> tuple[list[StaleField], list[tuple[StaleField, Allowed]]]:
    """Split differences into unexplained ones and those a row of ``table`` explains (in a
    production-matrix ``cell``, only a row decided in it: :meth:`Allowed.decided_in`)."""
    unexplained: list[StaleField] = []
    allowed: list[tuple[StaleField, Allowed]] = []
    for f in found:
        row = next((a for a in table if a.covers(f, owner, cell)), None)
        if row is None:
            unexplained.append(f)
        else:
            allowed.append((f, row))
    return unexplained, allowed


__all__ = ["ALLOWED", "DECIDED_BASE", "Allowed", "explain"]
