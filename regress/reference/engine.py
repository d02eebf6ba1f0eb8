"""The reference DSA + one-model MTP-Eagle engine: the default target wherever TensorRT-LLM is not.

``ReferenceEngine.generate`` serves prompts with in-flight batching (up to ``batch_size`` requests
at once, a finished request's slot refilled by the next prompt, contexts first in every batch) and
runs, per iteration, the sequence of the upstream executor and one-model MTP-Eagle worker
(modelled once in ``regress.dsa.lifecycle``, which cites the upstream sources):
``update_spec_dec_param()``, ``prepare()``, the target
forward verifying ``1 + K`` tokens per generation request, greedy acceptance of the longest
matching draft prefix, draft step 0 on the target layout, the collapse to one token per request
(every ``seq_lens`` entry set to 1, ``on_update()``, kv lens rewound, ``update_for_spec_dec()``),
then draft steps ``1..K-1`` (captured in a CUDA graph per padded batch size on CUDA; see
``graphs.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.devices import require_cuda
from regress.errors import UsageError
from regress.reference.defects import active_defects
from regress.reference.layerwise import create_run_pack
from regress.reference.metadata import DSAtrtllmAttentionMetadata
from regress.reference.model import (
    LayerCache,
    ModelConfig,
    Weights,
    build_weights,
    index_share_config,
    target_forward,
)
from regress.reference.serving import TOKENS_PER_BLOCK, ServedRequest, ServingRun

MODEL_NAME = "reference-dsa-tiny"

_WEIGHTS: dict[tuple[ModelConfig, str], tuple[Weights, Weights]] = {}


def _weights(cfg: ModelConfig, device: Any) -> tuple[Weights, Weights]:
    """Weights are a pure function of the config: build once per process and device."""
    key = (cfg, str(device))
    if key not in _WEIGHTS:
        target, draft = build_weights(cfg)
        _WEIGHTS[key] = (target.to(device), draft.to(device))
    return _WEIGHTS[key]


@dataclass
class GenerationResult:
    """Per-request traces plus upstream-style iteration counters and the wall time."""

    requests: list[ServedRequest]
    batch_size: int
    max_draft_len: int
    wall_seconds: float
    counters: dict[str, int]
    device: str
    cuda_graph: bool


class ReferenceEngine:
    """A tiny deterministic DSA model with an MTP draft layer, on CPU or CUDA.

    Args:
        device: ``"cpu"`` or ``"cuda"`` (``"cuda:N"`` too).
        defects: historical defects to replay (see ``regress defects``); ``None`` reads
            ``REGRESS_DEFECTS``, an empty collection means none.
        cuda_graph: capture draft steps ``1..K-1`` in CUDA graphs; default: on for CUDA. Refused
            on CPU.
        seed: added to the model's weight seed; 0 is the calibrated default model.
        sentinel: attach the runtime DSA sentinel to the metadata; findings land in
            :attr:`sentinel_violations`.
        config: model sizes and calibration (default: :class:`ModelConfig`).
        metadata_cls: the DSA metadata class to drive (default: the mirror in
            ``regress.reference.metadata``); ``regress demo`` passes each commit's own copy.
        draft_cache: the module with the draft layer's cache choices (default:
            ``regress.reference.draft_cache``); ``regress demo`` passes each commit's own copy.
        tokens_per_block: KV block size of the paged caches (default 16).
        overlap_scheduler: model the overlap scheduler's host view: the host builds each
            forward's tables believing every draft of the request's previous iteration was
            accepted (the device lengths stay true); only ``stale_block_table`` reads it.
    """

    model_name = MODEL_NAME

    def __init__(
        self,
        *,
        device: str = "cpu",
        defects: Iterable[str] | None = None,
        cuda_graph: bool | None = None,
        seed: int = 0,
        sentinel: bool = False,
        config: ModelConfig | None = None,
        metadata_cls: type | None = None,
        draft_cache: Any = None,
        tokens_per_block: int = TOKENS_PER_BLOCK,
        overlap_scheduler: bool = False,
    ) -> None:
        import torch

        from regress.reference import draft_cache as default_draft_cache

        self.device = torch.device(device)
        if self.device.type == "cuda":
            require_cuda()  # the user's to fix (exit 2, not 3), as `defects --check` says
        if self.device.type not in ("cpu", "cuda"):
            raise UsageError(f"device must be cpu or cuda, not {device!r}")
        if cuda_graph and self.device.type != "cuda":
            raise UsageError("CUDA graphs need --device cuda; use --no-cuda-graph on CPU")
        self.cuda_graph = self.device.type == "cuda" if cuda_graph is None else bool(cuda_graph)
        self.defects = active_defects(defects)
        base = config or ModelConfig()
        if "index_share_rejected_branch" in self.defects and not base.index_share:
            base = index_share_config(base)  # the defect lives on the index-share path
        self.config = base if seed == 0 else _reseed(base, base.seed + seed)
        self.sentinel = sentinel
        self.tokens_per_block = int(tokens_per_block)
        self.overlap_scheduler = bool(overlap_scheduler)
        self.metadata_cls = metadata_cls or DSAtrtllmAttentionMetadata
        self.draft_cache = draft_cache or default_draft_cache
        self.sentinel_violations: list[dict[str, Any]] = []
        self.sentinel_summary: dict[str, Any] = {}
        self.target_w, self.draft_w = _weights(self.config, self.device)

    # -- public API -------------------------------------------------------------------------
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        batch_size: int,
        max_draft_len: int,
        max_new_tokens: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> GenerationResult:
        """Greedy-generate ``max_new_tokens`` per prompt with MTP drafts of length ``max_draft_len``.

        Raises:
            UsageError: on bad sizes or tokens outside the vocabulary.
        """
        import torch

        self._validate(prompts, batch_size, max_draft_len, max_new_tokens)
        start = time.perf_counter()
        threads = torch.get_num_threads()
        if self.device.type == "cpu":
            # Every op here is tiny: intra-op threads only add contention (7x slower on 2 cores).
            torch.set_num_threads(1)
        try:
            run = ServingRun(self, prompts, batch_size, max_draft_len, max_new_tokens)
            traces = run.serve(progress)
        finally:
            torch.set_num_threads(threads)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return GenerationResult(
            requests=traces,
            batch_size=batch_size,
            max_draft_len=max_draft_len,
            wall_seconds=time.perf_counter() - start,
            counters=run.counters,
            device=str(self.device),
            cuda_graph=self.cuda_graph and max_draft_len >= 2,
        )

    def layerwise_step(
        self,
        *,
        run_type: str = "GEN",
        batch_size: int = 32,
        seq_len_q: int = 4,
        seq_len_kv_cache: int = 256,
    ) -> dict[str, int]:
        """One layer-wise benchmark step: build a run pack, then run the DSA layer on it.

        This is the path bug 2 broke: with ``unannounced_mtp_shapes`` it raises
        ``DeepGemmAssertion`` carrying DeepGEMM's message.
        """
        import torch

        md = create_run_pack(
            run_type,
            batch_size=batch_size,
            seq_len_q=seq_len_q,
            seq_len_kv_cache=seq_len_kv_cache,
            backend="dsa",
            tokens_per_block=TOKENS_PER_BLOCK,
            device=str(self.device),
            defects=self.defects,
        )
        cache = LayerCache(self.config, md.kv_cache_manager.num_slots, self.device)
        gen = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, self.config.vocab_size, (md.num_tokens,), generator=gen)
        start = md.kv_lens_cuda[: md.num_seqs].long() - md.seq_lens_cuda.long()
        positions = torch.cat(
            [
                torch.arange(int(s), int(s) + int(n))
                for s, n in zip(start.tolist(), md.seq_lens.tolist(), strict=True)
            ]
        ).to(self.device)
        width = md.indexer_k_cache_block_offsets.shape[1] * TOKENS_PER_BLOCK
        target_forward(
            self.config, self.target_w, cache, md, tokens.to(self.device), positions, width
        )  # returns (hidden, context state); the step only has to get through the indexer
        return {"num_tokens": md.num_tokens, "num_generations": md.num_generations}

    # -- helpers ------------------------------------------------------------------------------
    def _validate(self, prompts, batch_size, max_draft_len, max_new_tokens) -> None:
        if batch_size < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        if max_draft_len < 0:
            raise UsageError(f"max_draft_len must be >= 0, got {max_draft_len}")
        if max_new_tokens < 1:
            raise UsageError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if not prompts:
            raise UsageError("no prompts to run")
        vocab = self.config.vocab_size
        for i, p in enumerate(prompts):
            if not p:
                raise UsageError(f"prompt {i} is empty")
            bad = [t for t in p if not 0 <= int(t) < vocab]
            if bad:
                raise UsageError(f"prompt {i} has token ids outside [0, {vocab}): {bad[:5]}")
            need = len(p) + max_new_tokens + max_draft_len + 2
            if need > self.config.max_position:
                # blame what made it too long: K alone, or the prompt and the token budget
                longest = max(len(q) for q in prompts)  # K must fit the longest prompt
                room = self.config.max_position - longest - max_new_tokens - 2
                fix = (
                    f"lower --max-draft-len to at most {room}"
                    if max_draft_len > room >= 1
                    else "shorten it or lower --max-new-tokens"
                )
                raise UsageError(
                    f"prompt {i} ({len(p)} tokens) + {max_new_tokens} new tokens + "
                    f"{max_draft_len} drafts (--max-draft-len) exceeds the model's "
                    f"{self.config.max_position} positions; {fix}"
                )


def _reseed(cfg: ModelConfig, seed: int) -> ModelConfig:
    from dataclasses import replace

    return replace(cfg, seed=seed)


__all__ = ["MODEL_NAME", "GenerationResult", "ReferenceEngine", "ServedRequest"]
