"""What finding 1 (DSA's stale ``block_table``) costs in acceptance, on the reference engine.

The table of ``benchmarks/block_table.md``: batch 8, the 80 built-in prompts, KV blocks of 64
tokens, the dense recency-weighted model (top-k above every context, as DSA's top-k of 2048 is on
MT-bench-sized contexts, so a token always selects its own key; ``--model default`` for the
sparse top-k 48 model), K = 3 and K = 7, index share off and on, the ``stale_block_table`` defect with and without
the overlap scheduler's host view (the host pads the table believing every draft of the previous
iteration was accepted), each against the clean engine on the same prompts. AL and per-position
acceptance with 95 % bootstrap intervals over prompts (``regress.acceptance.stats``), and the
paired interval of the drop (clean - defect, prompts resampled jointly).

    python benchmarks/block_table_cost.py --json benchmarks/results/block_table_cpu.json
    python benchmarks/block_table_cost.py --only k3-share-off --tokens 32   # one config, to time

Prints one markdown row per run with its wall time. The clean engine does not depend on the
overlap setting (nothing it reads is padded), so it runs once per (K, index share).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime

from regress.acceptance.stats import paired_drop_intervals, summarize
from regress.acceptance.trace import RequestTrace
from regress.reference.engine import ReferenceEngine
from regress.reference.metadata import DSAtrtllmAttentionMetadata
from regress.reference.model import ModelConfig, index_share_config
from regress.reference.prompts import load_prompts

DEFECT = "stale_block_table"
BLOCK = 64
BATCH = 8
#: name -> (K, index share)
CONFIGS = {
    f"k{k}-share-{'on' if share else 'off'}": (k, share) for k in (3, 7) for share in (False, True)
}


class _Counting(DSAtrtllmAttentionMetadata):
    """The mirror, counting the selected keys its conversion drops (a -1 table entry)."""

    dropped = 0
    tokens_hit = 0

    def local_to_global(self, local_idx):
        out = super().local_to_global(local_idx)
        lost = ((local_idx >= 0) & (out < 0)).sum(dim=-1)
        _Counting.dropped += int(lost.sum())
        _Counting.tokens_hit += int((lost > 0).sum())
        return out


def _model(name, share):
    if name == "default":
        return index_share_config(ModelConfig()) if share else ModelConfig()
    return replace(index_share_config(ModelConfig()), index_share=share)


def _stats(result, k):
    traces = [
        RequestTrace(accepted=list(r.accepted), prompt_index=r.prompt_index)
        for r in result.requests
    ]
    return summarize(traces, k, counters=result.counters)


def _run(model, k, share, defects, overlap, prompts, tokens):
    engine = ReferenceEngine(
        defects=defects,
        config=_model(model, share),
        tokens_per_block=BLOCK,
        overlap_scheduler=overlap,
        metadata_cls=_Counting,
    )
    _Counting.dropped = _Counting.tokens_hit = 0
    start = time.perf_counter()
    result = engine.generate(prompts, batch_size=BATCH, max_draft_len=k, max_new_tokens=tokens)
    hits = {"keys_dropped": _Counting.dropped, "tokens_with_a_dropped_key": _Counting.tokens_hit}
    return _stats(result, k), time.perf_counter() - start, result.requests, hits


def _fmt(lo_hi):
    return f"[{lo_hi[0]:+.4f}, {lo_hi[1]:+.4f}]" if lo_hi else "-"


def _row(name, run, stats, wall, drop=None):
    pos = " / ".join(f"{p:.3f}" for p in stats.per_position)
    al = f"{stats.acceptance_length:.4f} [{stats.acceptance_length_ci[0]:.3f}, {stats.acceptance_length_ci[1]:.3f}]"
    d = _fmt(drop["acceptance_length"]) if drop else "-"
    return f"| {name} | {run} | {al} | {pos} | {d} | {wall:.0f} s |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--prompts", type=int, default=80)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--model", choices=("dense", "default"), default="dense")
    ap.add_argument("--json", help="write every run's statistics here")
    args = ap.parse_args()
    prompts = load_prompts(args.prompts)
    out = {
        "command": "python benchmarks/block_table_cost.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_start": os.getloadavg(),
        "batch": BATCH,
        "tokens_per_block": BLOCK,
        "model": args.model,
        "prompts": len(prompts),
        "max_new_tokens": args.tokens,
        "runs": [],
    }
    print(f"load average at start: {os.getloadavg()}")
    print("| config | run | AL [95% CI] | per-position | AL drop vs clean [95% CI] | wall |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.only:
        k, share = CONFIGS[name]
        clean, wall, clean_reqs, _ = _run(args.model, k, share, (), False, prompts, args.tokens)
        print(_row(name, "clean", clean, wall), flush=True)
        entry = {"config": name, "k": k, "index_share": share, "clean": clean.to_dict()}
        for overlap in (False, True):
            run, wall, reqs, hits = _run(
                args.model, k, share, (DEFECT,), overlap, prompts, args.tokens
            )
            drop = paired_drop_intervals(clean, run)
            same = sum(a.tokens == b.tokens for a, b in zip(clean_reqs, reqs, strict=True))
            label = f"{DEFECT}, overlap {'on' if overlap else 'off'}"
            print(_row(name, label, run, wall, drop), hits, f"outputs equal: {same}/{len(reqs)}")
            entry["overlap_on" if overlap else "overlap_off"] = {
                "stats": run.to_dict(),
                "drop_ci": drop,
                "identical_outputs": same,
                **hits,
                "wall_s": round(wall, 1),
            }
        out["runs"].append(entry)
    out["load_average_end"] = os.getloadavg()
    print(f"load average at end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
