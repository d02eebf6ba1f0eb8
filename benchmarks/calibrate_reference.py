"""Calibrate the reference model's knobs against upstream's per-depth acceptance profile.

Each candidate ``ModelConfig`` runs the ``regress accept`` default workload (the 80 built-in
prompts, 64 new tokens, K = 4) twice at batch 8, defect-free and with ``stale_req_idx``, and is
scored by its largest miss against GLM-5.2's figures (PR #17240's description, trtllm-facts.md):
conditional acceptance per depth 0.868/0.864/0.825/0.834 clean and 0.880/0.775/0.670/0.596 with the
stale map, AL 3.766 and 3.283 (an AL miss counts 0.6x, so the 0.05 AL tolerance weighs like the
0.03 per-depth one). ``--verify`` reruns the best candidate at batch 1 too.

    # the sweep behind the shipped defaults (benchmarks/reference_engine.md)
    python benchmarks/calibrate_reference.py --carry 0.6 0.7 0.8 --context-gain 4 5 6 --noise 0.08
    # check the defaults
    python benchmarks/calibrate_reference.py --verify

Every knob not given keeps its ``ModelConfig`` default. Prints one line per candidate, then the
best one; ``--json FILE`` writes every row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import asdict, replace

from regress.reference.engine import ReferenceEngine
from regress.reference.model import ModelConfig
from regress.reference.prompts import load_prompts

CLEAN = (0.868, 0.864, 0.825, 0.834)
STALE = (0.880, 0.775, 0.670, 0.596)
AL = {"clean": 3.766, "stale": 3.283}
AL_WEIGHT = 0.6
KNOBS = {
    "carry": "context_carry",
    "lag": "context_lag",
    "recency": "attn_recency",
    "context_gain": "context_gain",
    "attn_gain": "attn_gain",
    "noise": "draft_noise",
    "stack_noise": "draft_stack_noise",
    "topk": "topk",
    "readout_base": "readout_base",
}


def profile(result, k: int) -> tuple[float, list[float]]:
    """AL and conditional acceptance per depth of one ``generate`` result."""
    acc = [a for r in result.requests for a in r.accepted]
    reach = [sum(a > i for a in acc) / len(acc) for i in range(k)]
    prior = [1.0, *reach[:-1]]
    cond = [r / p if p else None for r, p in zip(reach, prior, strict=True)]
    return 1 + sum(acc) / len(acc), cond


def measure(cfg: ModelConfig, prompts, batch: int, defects, tokens: int, k: int) -> dict:
    start = time.perf_counter()
    result = ReferenceEngine(defects=defects, config=cfg).generate(
        prompts, batch_size=batch, max_draft_len=k, max_new_tokens=tokens
    )
    al, cond = profile(result, k)
    return {"al": al, "conditional": cond, "seconds": time.perf_counter() - start}


def miss(run: dict, target: tuple[float, ...], al_target: float) -> float:
    per_depth = max(abs((c or 0.0) - t) for c, t in zip(run["conditional"], target, strict=True))
    return max(per_depth, AL_WEIGHT * abs(run["al"] - al_target))


def _line(name: str, run: dict) -> str:
    cond = " ".join("-" if c is None else f"{c:.3f}" for c in run["conditional"])
    return f"{name} AL {run['al']:.3f} c {cond} ({run['seconds']:.0f}s)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, field in KNOBS.items():
        kind = int if field == "topk" else float
        ap.add_argument(f"--{flag.replace('_', '-')}", type=kind, nargs="+", dest=flag)
    ap.add_argument("--prompts", type=int, default=80)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--verify", action="store_true", help="rerun the best at batch 1 as well")
    ap.add_argument("--json", dest="json_out", help="write every candidate's row to this file")
    args = ap.parse_args()
    prompts = load_prompts(args.prompts)
    axes = {field: getattr(args, flag) for flag, field in KNOBS.items() if getattr(args, flag)}
    rows = []
    for values in itertools.product(*axes.values()):
        cfg = replace(ModelConfig(), **dict(zip(axes, values, strict=True)))
        clean = measure(cfg, prompts, 8, (), args.tokens, args.k)
        stale = measure(cfg, prompts, 8, ("stale_req_idx",), args.tokens, args.k)
        score = max(miss(clean, CLEAN, AL["clean"]), miss(stale, STALE, AL["stale"]))
        rows.append({"config": asdict(cfg), "clean": clean, "stale": stale, "miss": score})
        knobs = " ".join(f"{k}={v}" for k, v in zip(axes, values, strict=True)) or "defaults"
        print(
            f"{knobs}: {_line('clean b8', clean)} | {_line('stale b8', stale)} | miss {score:.3f}",
            flush=True,
        )
    best = min(rows, key=lambda r: r["miss"])
    print(f"best: miss {best['miss']:.3f} {json.dumps(best['config'])}")
    if args.verify:
        cfg = ModelConfig(**best["config"])
        b1 = measure(cfg, prompts, 1, (), args.tokens, args.k)
        s1 = measure(cfg, prompts, 1, ("stale_req_idx",), args.tokens, args.k)
        best["clean_b1"], best["stale_b1"] = b1, s1
        print(_line("clean b1", b1), "|", _line("stale b1", s1))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
