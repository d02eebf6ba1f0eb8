"""CPU seconds of the reference engine on the test suite's workloads, and a digest of what it chose.

The workloads are the ones the engine-heavy unit tests run (default model: 16 prompts x 48 tokens,
K = 4; index share: the 64 shortest prompts x 32 tokens, K = 7), each timed in the process's own
CPU seconds (best of ``--repeat``), with one thread as ``generate`` sets. The digest (SHA-256 of
every request's tokens and accepted counts) says whether two trees generate the same thing: run
the same command against an older tree to compare (``benchmarks/suite.md``, "The engine's gather")::

    python benchmarks/engine_gather.py --json after.json
    PYTHONPATH=/tmp/old-tree python benchmarks/engine_gather.py --json before.json
    python benchmarks/engine_gather.py --profile share-b8     # torch's op table for one workload
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

from regress.reference.engine import ReferenceEngine
from regress.reference.model import ModelConfig, index_share_config
from regress.reference.prompts import load_prompts

#: name -> (index share, defects, batch, K)
WORKLOADS = {
    "default-b1": (False, (), 1, 4),
    "default-b8": (False, (), 8, 4),
    "stale-b8": (False, ("stale_req_idx",), 8, 4),
    "v1-b8": (False, ("no_accept_v1_cache_manager",), 8, 4),
    "greedy-b1": (False, (), 1, 0),
    "share-b1": (True, (), 1, 7),
    "share-b8": (True, (), 8, 7),
    "rejected-branch-b8": (True, ("index_share_rejected_branch",), 8, 7),
}


def generate(name: str):
    share, defects, batch, k = WORKLOADS[name]
    if share:
        engine = ReferenceEngine(defects=defects, config=index_share_config(ModelConfig()))
        prompts, tokens = sorted(load_prompts(), key=len)[:64], 32
    else:
        engine = ReferenceEngine(defects=defects)
        prompts, tokens = load_prompts(16), 48
    return engine.generate(prompts, batch_size=batch, max_draft_len=k, max_new_tokens=tokens)


def measure(name: str, repeat: int) -> dict:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        result = generate(name)
        best = min(best, time.process_time() - start)
    traces = [[r.tokens, r.accepted] for r in result.requests]
    acc = [a for r in result.requests for a in r.accepted]
    return {
        "workload": name,
        "cpu_s": round(best, 3),
        "acceptance_length": round(1 + sum(acc) / len(acc), 6) if acc else None,
        "digest": hashlib.sha256(json.dumps(traces).encode()).hexdigest()[:16],
    }


def profile(name: str) -> str:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    generate(name)  # warm
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        generate(name)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--profile", choices=list(WORKLOADS), help="print torch's op table instead")
    ap.add_argument("--json", dest="json_out", help="write the rows to this file")
    args = ap.parse_args()
    if args.profile:
        print(profile(args.profile))
        return
    generate("greedy-b1")  # torch's import and first-call costs out of the first row
    rows = []
    for name in args.workloads:
        rows.append(measure(name, args.repeat))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"total_cpu_s": round(sum(r["cpu_s"] for r in rows), 3)}))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
