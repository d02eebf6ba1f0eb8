"""Per-depth conditional acceptance of the reference engine, clean and with each defect.

The table in ``benchmarks/reference_engine.md``: the ``regress accept`` default workload (the 80
built-in prompts, 64 new tokens) at K = 4, and the index-share configuration at K = 7 with its
fixed stash (the baseline) and with ``index_share_rejected_branch``.

    python benchmarks/defect_profiles.py              # everything (~15 min on 2 loaded cores)
    python benchmarks/defect_profiles.py --only clean stale_req_idx

Prints one row per run, and the wall time of each.
"""

from __future__ import annotations

import argparse
import time

from regress.errors import EngineError
from regress.reference.engine import ReferenceEngine
from regress.reference.model import ModelConfig, index_share_config
from regress.reference.prompts import load_prompts

SHARE = index_share_config(ModelConfig())
#: name -> (defects, config, K, batch sizes)
ROWS = {
    "clean": ((), None, 4, (1, 8)),
    "stale_req_idx": (("stale_req_idx",), None, 4, (1, 8)),
    "no_accept_v1_cache_manager": (("no_accept_v1_cache_manager",), None, 4, (1, 8)),
    "index_share (fixed stash)": ((), SHARE, 7, (8,)),
    "index_share_rejected_branch": (("index_share_rejected_branch",), SHARE, 7, (8,)),
    "indexer_pool_exhaustion": (("indexer_pool_exhaustion",), None, 4, (4, 8)),
}


def row(name, defects, config, k, batch, prompts, tokens) -> str:
    start = time.perf_counter()
    try:
        result = ReferenceEngine(defects=defects, config=config).generate(
            prompts, batch_size=batch, max_draft_len=k, max_new_tokens=tokens
        )
    except EngineError as exc:
        return f"| {name} | {batch} | {k} | aborts: {type(exc).__name__} | | {time.perf_counter() - start:.0f} s |"
    acc = [a for r in result.requests for a in r.accepted]
    reach = [sum(a > i for a in acc) / len(acc) for i in range(k)]
    prior = [1.0, *reach[:-1]]
    cond = " / ".join("-" if not p else f"{r / p:.3f}" for r, p in zip(reach, prior, strict=True))
    al = 1 + sum(acc) / len(acc)
    return f"| {name} | {batch} | {k} | {cond} | {al:.3f} | {time.perf_counter() - start:.0f} s |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only", nargs="+", choices=sorted(ROWS), default=sorted(ROWS, key=list(ROWS).index)
    )
    ap.add_argument("--prompts", type=int, default=80)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    prompts = load_prompts(args.prompts)
    print("| run | batch | K | conditional acceptance c1 / c2 / ... | AL | wall |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.only:
        defects, config, k, batches = ROWS[name]
        for batch in batches:
            print(row(name, defects, config, k, batch, prompts, args.tokens), flush=True)


if __name__ == "__main__":
    main()
