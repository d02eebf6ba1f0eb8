"""Sweep the reference model's calibration knobs and print AL per batch size, clean and stale.

python benchmarks/calibrate_reference.py --noise 0.04 0.05 --recycle 0.1 0.3 --gain 1.0
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import replace

from regress.reference.engine import ReferenceEngine
from regress.reference.model import ModelConfig
from regress.reference.prompts import load_prompts


def summary(result, k):
    acc = [a for r in result.requests for a in r.accepted]
    pos = [sum(a > i for a in acc) / len(acc) for i in range(k)]
    cond = [pos[i] / (pos[i - 1] if i else 1.0) for i in range(k)]
    return 1 + sum(acc) / len(acc), cond


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--noise", type=float, nargs="+", default=[ModelConfig.draft_noise])
    ap.add_argument("--recycle", type=float, nargs="+", default=[ModelConfig.draft_recycle])
    ap.add_argument("--gain", type=float, nargs="+", default=[ModelConfig.attn_gain])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=80)
    args = ap.parse_args()
    prompts = load_prompts(args.prompts)
    for noise, rec, gain in itertools.product(args.noise, args.recycle, args.gain):
        cfg = replace(ModelConfig(), draft_noise=noise, draft_recycle=rec, attn_gain=gain)
        for defects in ((), ("stale_req_idx",)):
            for b in args.batch:
                t = time.perf_counter()
                res = ReferenceEngine(defects=defects, config=cfg).generate(
                    prompts, batch_size=b, max_draft_len=args.k, max_new_tokens=128
                )
                al, cond = summary(res, args.k)
                print(
                    f"noise={noise} recycle={rec} gain={gain} {defects or 'clean'} b={b}: "
                    f"AL {al:.3f} cond {' '.join(f'{c:.3f}' for c in cond)} "
                    f"({time.perf_counter() - t:.1f}s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
