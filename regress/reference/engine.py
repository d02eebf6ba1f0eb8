"""The reference DSA + one-model MTP-Eagle engine: the default target wherever TensorRT-LLM is not.

``ReferenceEngine.generate`` serves prompts with in-flight batching (up to ``batch_size`` requests
at once, a finished request's slot refilled by the next prompt, contexts first in every batch) and
runs, per iteration, the sequence of the upstream executor and one-model MTP-Eagle worker
(modelled once in ``regress.dsa.lifecycle``, which cites the upstream sources):
``update_spec_dec_param()``, ``prepare()``, the target
forward verifying ``1 + K`` tokens per generation request, greedy acceptance of the longest
matching draft prefix, draft step 0 on the target layout, the collapse to one token per request
(``seq_lens.fill_(1)``, ``on_update()``, kv lens rewound, ``update_for_spec_dec()``), then draft
steps ``1..K-1`` (captured in a CUDA graph per padded batch size on CUDA; see ``graphs.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from regress.errors import EngineError, UsageError
from regress.reference.cache import PagedKVCacheManager
from regress.reference.defects import active_defects
from regress.reference.graphs import DraftGraphs, padded_batch_size
from regress.reference.layerwise import create_run_pack
from regress.reference.metadata import DSAtrtllmAttentionMetadata
from regress.reference.model import (
    LayerCache,
    ModelConfig,
    Weights,
    build_weights,
    draft_forward,
    logits_of,
    target_forward,
)

MODEL_NAME = "reference-dsa-tiny"
TOKENS_PER_BLOCK = 16

_WEIGHTS: dict[tuple[ModelConfig, str], tuple[Weights, Weights]] = {}


def _weights(cfg: ModelConfig, device: Any) -> tuple[Weights, Weights]:
    """Weights are a pure function of the config: build once per process and device."""
    key = (cfg, str(device))
    if key not in _WEIGHTS:
        target, draft = build_weights(cfg)
        _WEIGHTS[key] = (target.to(device), draft.to(device))
    return _WEIGHTS[key]


@dataclass
class ServedRequest:
    """What one request produced: its tokens and the accepted-draft count of every verify step.

    Not ``regress.acceptance.trace.RequestTrace``: that is the profiler's engine-neutral record,
    which ``regress.acceptance.engines.reference`` builds from this one.
    """

    prompt_index: int
    tokens: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)


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


@dataclass
class _Live:
    trace: ServedRequest
    prompt: list[int]
    rid: int
    cached: int = 0  # tokens whose K/V are in the cache
    last: int = -1  # the newest token, not yet in the cache
    drafts: list[int] = field(default_factory=list)


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
    ) -> None:
        import torch

        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise EngineError(
                "device 'cuda' was asked for but torch sees no CUDA device; use --device cpu"
            )
        if self.device.type not in ("cpu", "cuda"):
            raise UsageError(f"device must be cpu or cuda, not {device!r}")
        if cuda_graph and self.device.type != "cuda":
            raise UsageError("CUDA graphs need --device cuda; use --no-cuda-graph on CPU")
        self.cuda_graph = self.device.type == "cuda" if cuda_graph is None else bool(cuda_graph)
        self.defects = active_defects(defects)
        base = config or ModelConfig()
        self.config = base if seed == 0 else _reseed(base, base.seed + seed)
        self.sentinel = sentinel
        self.metadata_cls = metadata_cls or DSAtrtllmAttentionMetadata
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
            run = _Run(self, prompts, batch_size, max_draft_len, max_new_tokens)
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
        )
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
                raise UsageError(
                    f"prompt {i} ({len(p)} tokens) + {max_new_tokens} new tokens exceeds the "
                    f"model's {self.config.max_position} positions; shorten it or lower "
                    "--max-new-tokens"
                )


def _reseed(cfg: ModelConfig, seed: int) -> ModelConfig:
    from dataclasses import replace

    return replace(cfg, seed=seed)


class _Run:
    """State of one ``generate`` call: caches, metadata, the live batch and its counters."""

    def __init__(self, engine: ReferenceEngine, prompts, batch_size, k, max_new_tokens) -> None:
        self.e, self.k, self.max_new = engine, k, max_new_tokens
        self.cfg, self.dev = engine.config, engine.device
        self.batch_size = batch_size
        self.prompts = [[int(t) for t in p] for p in prompts]
        max_prompt = max(len(p) for p in self.prompts)
        self.max_seq = max_prompt + max_new_tokens + k + 2
        blocks = -(-self.max_seq // TOKENS_PER_BLOCK)
        self.width = blocks * TOKENS_PER_BLOCK
        # Room for the dummy requests a CUDA-graph replay pads the batch with.
        max_reqs = padded_batch_size(batch_size)
        self.manager = PagedKVCacheManager(
            num_blocks=1 + batch_size * blocks,
            tokens_per_block=TOKENS_PER_BLOCK,
            max_blocks_per_seq=blocks,
        )
        self.md = engine.metadata_cls(
            max_num_requests=max_reqs,
            max_num_tokens=max(batch_size * max(max_prompt, k + 1), max_reqs),
            kv_cache_manager=self.manager,
            max_draft_tokens=0,
            defects=engine.defects,
            device=self.dev,
        )
        self.sentinel = None
        if engine.sentinel:
            from regress.dsa.sentinel import Sentinel

            self.sentinel = Sentinel().attach(self.md)
        slots = self.manager.num_slots
        self.target_cache = LayerCache(self.cfg, slots, self.dev)
        self.draft_cache = LayerCache(self.cfg, slots, self.dev)
        self.counters = {
            "num_draft_tokens": 0,
            "num_accepted_tokens": 0,
            "num_requests_with_draft_tokens": 0,
            "iterations": 0,
        }
        self.graphs = None
        if engine.cuda_graph and k >= 2:
            self.graphs = DraftGraphs(self)

    # -- scheduling ---------------------------------------------------------------------------
    def serve(self, progress) -> list[ServedRequest]:
        pending = list(range(len(self.prompts)))
        pending.reverse()
        live: list[_Live] = []
        traces: list[ServedRequest] = [ServedRequest(i) for i in range(len(self.prompts))]
        done, next_rid = 0, 0
        while pending or live:
            while pending and len(live) < self.batch_size:
                idx = pending.pop()
                self.manager.add_request(next_rid, self.max_seq)
                live.append(_Live(traces[idx], self.prompts[idx], next_rid))
                next_rid += 1
            live.sort(key=lambda r: r.cached != 0)  # contexts first, as upstream batches
            self.step(live)
            still = []
            for r in live:
                if len(r.trace.tokens) >= self.max_new:
                    del r.trace.tokens[self.max_new :]
                    self.manager.free_request(r.rid)
                    done += 1
                    if progress:
                        progress(done, len(self.prompts))
                else:
                    still.append(r)
            live = still
        if self.graphs is not None:
            self.counters["graph_replays"] = self.graphs.replays
        if self.sentinel is not None:
            self.sentinel.flush()
            self.e.sentinel_violations = [v.to_dict() for v in self.sentinel.violations]
            self.e.sentinel_summary = self.sentinel.summary()
        return traces

    # -- one iteration ------------------------------------------------------------------------
    def step(self, live: list[_Live]) -> None:
        import torch

        k, md = self.k, self.md
        # What the executor announces first in every forward, before the layout is set
        # (regress.dsa.lifecycle; the path bug 2's benchmark skipped).
        md.update_spec_dec_param(
            batch_size=len(live),
            is_spec_decoding_enabled=k > 0,
            is_spec_dec_tree=False,
            is_spec_dec_dynamic_tree=False,
            max_draft_len=k,
            max_total_draft_tokens=k,
        )
        ctx = [r for r in live if r.cached == 0]
        lens = [len(r.prompt) for r in ctx] + [1 + k] * (len(live) - len(ctx))
        tokens, positions = [], []
        for r in live:
            if r.cached == 0:
                tokens += r.prompt
                positions += range(len(r.prompt))
            else:
                tokens += [r.last, *r.drafts]
                positions += range(r.cached, r.cached + 1 + k)
        md.request_ids = [r.rid for r in live]
        md.cached_token_lens = [r.cached for r in live]
        md.seq_lens = lens
        md.num_contexts = len(ctx)
        md.prepare()
        tok = torch.tensor(tokens, device=self.dev)
        pos = torch.tensor(positions, device=self.dev)
        h = target_forward(self.cfg, self.e.target_w, self.target_cache, md, tok, pos, self.width)
        target_ids = logits_of(self.e.target_w, h).argmax(-1)
        out = target_ids.tolist()

        # Greedy verification: accept the longest draft prefix the target agrees with.
        starts, accepted = [], []
        offset = 0
        for r, n_tok in zip(live, lens, strict=True):
            starts.append(offset)
            if r.cached == 0:
                accepted.append(0)
            else:
                t = out[offset : offset + 1 + k]
                n = 0
                while n < k and r.drafts[n] == t[n]:
                    n += 1
                accepted.append(n)
            offset += n_tok
        self.counters["iterations"] += 1
        if k > 0:
            drafts = self.draft_loop(live, lens, starts, accepted, tok, pos, target_ids, h)
        for i, r in enumerate(live):
            s = starts[i]
            if r.cached == 0:
                new = [out[s + lens[i] - 1]]
                r.cached = len(r.prompt)
            else:
                n = accepted[i]
                new = [*r.drafts[:n], out[s + n]]
                r.trace.accepted.append(n)
                self.counters["num_draft_tokens"] += k
                self.counters["num_accepted_tokens"] += n
                self.counters["num_requests_with_draft_tokens"] += 1
                r.cached += n + 1
            r.trace.tokens += new
            r.last = new[-1]
            r.drafts = drafts[i] if k > 0 else []

    def draft_loop(self, live, lens, starts, accepted, tok, pos, target_ids, h) -> list[list[int]]:
        """Draft step 0 on the target layout, the collapse, then steps 1..K-1."""
        import torch

        k, md, bs = self.k, self.md, len(live)
        # Step 0: at every target position p the draft sees (h[p], token at p + 1), where the
        # token at p + 1 is the prompt's next token inside a context, else the target's choice.
        nxt = target_ids.clone()
        offset = 0
        for r, n_tok in zip(live, lens, strict=True):
            if r.cached == 0 and n_tok > 1:
                nxt[offset : offset + n_tok - 1] = tok[offset + 1 : offset + n_tok]
            offset += n_tok
        hd = draft_forward(self.cfg, self.e.draft_w, self.draft_cache, md, nxt, h, pos, self.width)
        last = torch.tensor(
            [
                s + (n_tok - 1 if r.cached == 0 else a)
                for r, s, n_tok, a in zip(live, starts, lens, accepted, strict=True)
            ],
            device=self.dev,
        )
        hidden = hd[last]
        first = logits_of(self.e.draft_w, hidden).argmax(-1)
        saved = (md.seq_lens.clone(), md.num_contexts, md.kv_lens_cuda[:bs].clone())

        # The collapse at the end of draft step 0 (upstream: _seq_lens.fill_(1) + on_update()).
        md._seq_lens[:bs].fill_(1)
        md._seq_lens_cuda[:bs].fill_(1)
        md.on_update()
        md.num_contexts = 0
        rejected = [0 if r.cached == 0 else k - a for r, a in zip(live, accepted, strict=True)]
        md.kv_lens_cuda[:bs] -= torch.tensor(rejected, dtype=torch.int32, device=self.dev)
        if self.graphs is not None:
            rest = self.graphs.run(bs, first, hidden)
        else:
            md.update_for_spec_dec()
            rest = self.draft_steps(first, hidden)
        drafts = (
            torch.stack([first, *rest], dim=1)[:bs].tolist()
            if rest
            else [[t] for t in first.tolist()]
        )
        lens_t, ctx, kv = saved
        md._num_seqs = bs
        md._seq_lens[:bs].copy_(lens_t)
        md._seq_lens_cuda[:bs].copy_(lens_t)
        md.kv_lens_cuda[:bs].copy_(kv)
        md.num_contexts = ctx
        return drafts

    def draft_steps(self, tokens, hidden) -> list[Any]:
        """Draft steps 1..K-1, one token per request; the body a CUDA graph captures."""
        md = self.md
        outs = []
        for _ in range(1, self.k):
            md.kv_lens_cuda[: md.num_seqs] += 1
            md.update_for_spec_dec()
            slot = md.kv_lens_cuda[: md.num_seqs].long() - 1
            h = draft_forward(
                self.cfg, self.e.draft_w, self.draft_cache, md, tokens, hidden, slot, self.width
            )
            tokens = logits_of(self.e.draft_w, h).argmax(-1)
            hidden = h
            outs.append(tokens)
        return outs


__all__ = ["MODEL_NAME", "GenerationResult", "ReferenceEngine", "ServedRequest"]
