"""One ``ReferenceEngine.generate`` call: in-flight batching and the per-forward MTP-Eagle sequence.

Every metadata transition of a forward is ``regress.dsa``'s (``announce.announce_speculation``,
``batch.prepare_batch``, and ``transitions``' ``save_target``, ``collapse``, ``advance``,
``restore_target``): this module only computes between them, so the engine cannot drift from
the model ``regress check`` and the tests drive. ``tests/unit/test_reference_loop.py`` checks
the calls and the layouts they see agree with ``iter_draft_loop`` on the same batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.transitions import LoopOptions, advance, collapse, restore_target, save_target
from regress.reference.cache import PagedKVCacheManager
from regress.reference.graphs import DraftGraphs, padded_batch_size
from regress.reference.model import LayerCache, draft_forward, logits_of, target_forward

if TYPE_CHECKING:
    from regress.reference.engine import ReferenceEngine

TOKENS_PER_BLOCK = 16
DRAFT_LOOP = LoopOptions(save="in_place", restore_kv_lens=True)
"""How the engine's draft loop saves the layout: in place, since its CUDA graph holds only steps
1..K-1 and must keep reading the buffers it captured (``LoopOptions`` says why), and with the
kv lens put back, so an iteration leaves the metadata as its target forward found it."""


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
class LiveRequest:
    """One request in flight: its cache state, newest token and pending drafts."""

    trace: ServedRequest
    prompt: list[int]
    rid: int
    cached: int = 0  # tokens whose K/V are in the cache
    last: int = -1  # the newest token, not yet in the cache
    drafts: list[int] = field(default_factory=list)
    state: Any = None  # context state z at the last cached position (None: a fresh prompt)


def _host_view_cached(r: LiveRequest, k: int) -> int:
    """The cached length the overlap scheduler's host assumes: every previous draft accepted.

    The host prepares this forward before the previous one's acceptance is known, so it counts
    ``K + 1`` new tokens for it (a context's output too, hence ``K`` over after a prefill); the
    device lengths are corrected afterwards (``pyexecutor/model_engine.py`` @ 001e6700,
    ``_prepare_tp_inputs``: past + runtime_draft_len + 1, offsets new_tokens_lens - K - 1).
    """
    if r.cached == 0:
        return 0
    previous = r.trace.accepted[-1] if r.trace.accepted else 0
    return r.cached + k - previous


class ServingRun:
    """State of one ``generate`` call: caches, metadata, the live batch and its counters."""

    def __init__(self, engine: ReferenceEngine, prompts, batch_size, k, max_new_tokens) -> None:
        import torch

        self.e, self.k, self.max_new = engine, k, max_new_tokens
        self.cfg, self.dev = engine.config, engine.device
        self.batch_size = batch_size
        self.prompts = [[int(t) for t in p] for p in prompts]
        max_prompt = max(len(p) for p in self.prompts)
        self.max_seq = max_prompt + max_new_tokens + k + 2
        tpb = engine.tokens_per_block
        blocks = -(-self.max_seq // tpb)
        self.width = blocks * tpb
        # Room for the dummy requests a CUDA-graph replay pads the batch with.
        max_reqs = padded_batch_size(batch_size)
        self.manager = PagedKVCacheManager(
            num_blocks=1 + batch_size * blocks,
            tokens_per_block=tpb,
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
        policy, defects = engine.draft_cache, engine.defects
        self.blocks_per_request = blocks
        self.indexer_pool = policy.IndexerPool(
            policy.indexer_pool_blocks(batch_size, blocks, defects)
        )
        owners = policy.indexer_pool_layers(1, 1, defects)  # layer 0 target, layer 1 MTP
        slots = self.manager.num_slots
        self.target_cache = LayerCache(self.cfg, slots, self.dev, indexer=0 in owners)
        self.draft_cache = LayerCache(self.cfg, slots, self.dev, indexer=1 in owners)
        # Index share: the top-k draft step 0 selected per request, reused by steps 1..K-1, and
        # the first slot those steps write (static buffers: the captured steps read them).
        self.stash = torch.full(
            (max_reqs, min(self.width, self.cfg.topk)), -1, dtype=torch.int64, device=self.dev
        )
        self.loop_start = torch.zeros(max_reqs, dtype=torch.int64, device=self.dev)
        self.recent = torch.arange(max(k - 1, 0), dtype=torch.int64, device=self.dev)
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
        live: list[LiveRequest] = []
        traces: list[ServedRequest] = [ServedRequest(i) for i in range(len(self.prompts))]
        done, next_rid = 0, 0
        while pending or live:
            while pending and len(live) < self.batch_size:
                idx = pending.pop()
                self.manager.add_request(next_rid, self.max_seq)  # admission: the KV pool
                self.indexer_pool.take(next_rid, self.blocks_per_request)
                live.append(LiveRequest(traces[idx], self.prompts[idx], next_rid))
                next_rid += 1
            live.sort(key=lambda r: r.cached != 0)  # contexts first, as upstream batches
            self.step(live)
            still = []
            for r in live:
                if len(r.trace.tokens) >= self.max_new:
                    del r.trace.tokens[self.max_new :]
                    self.manager.free_request(r.rid)
                    self.indexer_pool.release(r.rid)
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
    def step(self, live: list[LiveRequest]) -> None:
        import torch

        k, md = self.k, self.md
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
        forward = Batch(
            seq_lens=tuple(lens),
            num_contexts=len(ctx),
            cached=tuple(r.cached for r in live),
            request_ids=tuple(r.rid for r in live),
        )
        # What the executor announces first in every forward, before the layout is set (the
        # path bug 2's benchmark skipped), then the layout and prepare().
        announce_speculation(md, forward.batch_size, k)
        if self.e.overlap_scheduler:
            md.host_view_cached_lens = [_host_view_cached(r, k) for r in live]
        prepare_batch(md, forward)
        tok = torch.tensor(tokens, device=self.dev)
        pos = torch.tensor(positions, device=self.dev)
        zero = torch.zeros(self.cfg.hidden, dtype=torch.float64, device=self.dev)
        carry_in = torch.stack([zero if r.state is None else r.state for r in live])
        h, z = target_forward(
            self.cfg, self.e.target_w, self.target_cache, md, tok, pos, self.width, carry_in
        )
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
            drafts = self.draft_loop(live, lens, starts, accepted, tok, pos, target_ids, z)
        for i, r in enumerate(live):
            s = starts[i]
            if r.cached == 0:
                new = [out[s + lens[i] - 1]]
                r.state = z[s + lens[i] - 1].clone()
                r.cached = len(r.prompt)
            else:
                n = accepted[i]
                new = [*r.drafts[:n], out[s + n]]
                r.state = z[s + n].clone()  # the state where the accepted tokens end
                r.trace.accepted.append(n)
                self.counters["num_draft_tokens"] += k
                self.counters["num_accepted_tokens"] += n
                self.counters["num_requests_with_draft_tokens"] += 1
                r.cached += n + 1
            r.trace.tokens += new
            r.last = new[-1]
            r.drafts = drafts[i] if k > 0 else []

    def draft_loop(self, live, lens, starts, accepted, tok, pos, target_ids, z) -> list[list[int]]:
        """Draft step 0 on the target layout, the collapse, then steps 1..K-1, then the restore."""
        import torch

        k, md, bs = self.k, self.md, len(live)
        saved = save_target(md, DRAFT_LOOP)
        # Step 0: at every target position p the draft sees (z[p], token at p + 1), where the
        # token at p + 1 is the prompt's next token inside a context, else the target's choice.
        nxt = target_ids.clone()
        offset = 0
        for r, n_tok in zip(live, lens, strict=True):
            if r.cached == 0 and n_tok > 1:
                nxt[offset : offset + n_tok - 1] = tok[offset + 1 : offset + n_tok]
            offset += n_tok
        hd, zd, chosen = draft_forward(
            self.cfg, self.e.draft_w, self.draft_cache, md, nxt, z, pos, self.width
        )
        is_ctx = [r.cached == 0 for r in live]
        rows_in = zip(starts, lens, accepted, is_ctx, strict=True)
        last = torch.tensor([s + (n - 1 if c else a) for s, n, a, c in rows_in], device=self.dev)
        hidden = zd[last]
        first = logits_of(self.e.draft_w, hd[last]).argmax(-1)
        rows = self.e.draft_cache.stash_rows(starts, lens, accepted, is_ctx, self.e.defects)
        self.stash.fill_(-1)
        self.stash[:bs] = chosen[torch.tensor(rows, device=self.dev)]
        # upstream's num_accepted_tokens: the bonus token counted, a context's one token
        num_accepted = [1 if c else a + 1 for a, c in zip(accepted, is_ctx, strict=True)]
        collapse(md, saved, k, num_accepted)
        self.loop_start.zero_()
        self.loop_start[:bs] = md.kv_lens_cuda[:bs]  # steps 1.. write slots from here on
        if self.graphs is not None:
            rest = self.graphs.run(bs, first, hidden)
        else:
            rest = self.draft_steps(first, hidden)
        drafts = (
            torch.stack([first, *rest], dim=1)[:bs].tolist()
            if rest
            else [[t] for t in first.tolist()]
        )
        restore_target(md, saved)
        return drafts

    def shared_selection(self, slot) -> Any:
        """Index share: step 0's stashed top-k plus the slots steps 1.. have written since."""
        import torch

        n = slot.shape[0]
        recent = slot.unsqueeze(1) - self.recent
        recent = torch.where(recent >= self.loop_start[:n].unsqueeze(1), recent, -1)
        return torch.cat([self.stash[:n], recent], dim=1)

    def draft_steps(self, tokens, hidden) -> list[Any]:
        """Draft steps 1..K-1, one token per request; the body a CUDA graph captures.

        Each step is entered through ``advance`` (the first one is step 0's, after the eager
        collapse), and the last ``advance`` prepares a step that never runs, as upstream's loop
        does: the metadata sees the calls ``iter_draft_loop`` makes, and the refresh of the map
        stays inside the captured region.
        """
        md = self.md
        outs = []
        for _ in range(1, self.k):
            advance(md, md.num_seqs)
            slot = md.kv_lens_cuda[: md.num_seqs].long() - 1
            selection = self.shared_selection(slot) if self.cfg.index_share else None
            h, hidden, _ = draft_forward(
                self.cfg,
                self.e.draft_w,
                self.draft_cache,
                md,
                tokens,
                hidden,
                slot,
                self.width,
                selection,
            )
            tokens = logits_of(self.e.draft_w, h).argmax(-1)
            outs.append(tokens)
        advance(md, md.num_seqs)
        return outs
