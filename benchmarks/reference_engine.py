"""Speed of the reference engine: end to end, the draft-step section eager vs CUDA graph, the map
refresh per draft step, and the sentinel's overhead. Prints a JSON document.

    python benchmarks/reference_engine.py --device cpu --batch 8            # CPU figures
    python benchmarks/reference_engine.py --device cuda --batch 1 8 32      # H200 figures

Timing of the draft section wraps ``ServingRun.draft_steps`` / ``DraftGraphs.run`` with a device sync
on both sides (the same for eager and graph), so it is the section's own wall time.
"""

from __future__ import annotations

import argparse
import json
import time

from regress.reference import graphs as graphs_module
from regress.reference import serving as serving_module
from regress.reference.engine import ReferenceEngine
from regress.reference.prompts import load_prompts


class SectionTimer:
    """Accumulates the wall time of the draft steps 1..K-1 (eager or replayed)."""

    def __init__(self, device: str) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.device = device

    def _sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def wrap(self, fn):
        def timed(*args, **kwargs):
            self._sync()
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            self._sync()
            self.seconds += time.perf_counter() - t
            self.calls += 1
            return out

        return timed


def run_once(device, batch, graph, prompts, tokens, k, defects=(), sentinel=False):
    timer = SectionTimer(device)
    eager_steps, graph_run = serving_module.ServingRun.draft_steps, graphs_module.DraftGraphs.run
    if graph:
        graphs_module.DraftGraphs.run = timer.wrap(graph_run)
    else:
        serving_module.ServingRun.draft_steps = timer.wrap(eager_steps)
    try:
        engine = ReferenceEngine(
            device=device, cuda_graph=graph, defects=defects, sentinel=sentinel
        )
        engine.generate(prompts[:2], batch_size=batch, max_draft_len=k, max_new_tokens=8)  # warm
        timer.seconds, timer.calls = 0.0, 0
        res = engine.generate(prompts, batch_size=batch, max_draft_len=k, max_new_tokens=tokens)
    finally:
        serving_module.ServingRun.draft_steps, graphs_module.DraftGraphs.run = (
            eager_steps,
            graph_run,
        )
    n_tok = sum(len(r.tokens) for r in res.requests)
    acc = [a for r in res.requests for a in r.accepted]
    return {
        "batch": batch,
        "cuda_graph": graph,
        "defects": list(defects),
        "sentinel": sentinel,
        "wall_s": round(res.wall_seconds, 3),
        "tokens_per_s": round(n_tok / res.wall_seconds, 1),
        "acceptance_length": round(1 + sum(acc) / len(acc), 4),
        "draft_section_ms_per_iteration": round(1e3 * timer.seconds / max(timer.calls, 1), 4),
        "iterations": res.counters["iterations"],
    }


def refresh_cost(device: str, batch: int, reps: int = 2000) -> dict:
    """Microseconds per ``req_idx_per_token`` refresh, and per whole ``on_update_kv_lens``."""
    import torch

    from regress.dsa.batch import Batch, prepare_batch
    from regress.reference.scenarios import make_dsa_metadata, rewrite_layout

    md = make_dsa_metadata(
        max_num_requests=batch,
        max_num_tokens=batch * 5,
        max_draft_tokens=4,
        defects=(),
        device=device,
    )
    prepare_batch(md, Batch((5,) * batch))
    rewrite_layout(md, [1] * batch)
    out = {}
    for name, fn in (
        ("refresh_us", md._refresh_req_idx_per_token),
        ("on_update_kv_lens_us", md.on_update_kv_lens),
    ):
        for _ in range(20):
            fn()
        if device == "cuda":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(50):
                    fn()
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(reps // 50):
                graph.replay()
            torch.cuda.synchronize()
            out[name + "_in_graph"] = round(1e6 * (time.perf_counter() - t) / reps, 3)
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        out[name + "_eager"] = round(1e6 * (time.perf_counter() - t) / reps, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, nargs="+", default=[8])
    ap.add_argument("--prompts", type=int, default=80)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--sentinel-batch", type=int, default=8)
    args = ap.parse_args()
    prompts = load_prompts(args.prompts)
    doc = {
        "device": args.device,
        "prompts": args.prompts,
        "tokens": args.tokens,
        "k": args.k,
        "runs": [],
        "refresh": {},
    }
    if args.device == "cuda":
        import torch

        doc["gpu"] = torch.cuda.get_device_name()
        doc["torch"] = torch.__version__
    modes = (False, True) if args.device == "cuda" else (False,)
    for batch in args.batch:
        for graph in modes:
            doc["runs"].append(run_once(args.device, batch, graph, prompts, args.tokens, args.k))
            print(json.dumps(doc["runs"][-1]), flush=True)
        doc["refresh"][str(batch)] = refresh_cost(args.device, batch)
        print(json.dumps({"refresh": doc["refresh"][str(batch)], "batch": batch}), flush=True)
    b = args.sentinel_batch
    for sentinel in (False, True):
        r = run_once(
            args.device, b, args.device == "cuda", prompts, args.tokens, args.k, sentinel=sentinel
        )
        doc["runs"].append(r)
        print(json.dumps(r), flush=True)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
