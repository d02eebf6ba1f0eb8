"""Finding 1 on upstream's own DSA metadata, on a device: every stale ``block_table`` entry.

Why: docs/findings.md finding 1 says ``block_table`` keeps the verify forward's ``-1`` padding
through the MTP draft loop. This runs the tree's real ``DSAtrtllmAttentionMetadata`` through the
stale-state oracle's two forwards (``regress/check/stale_state.py``; upstream's one-model worker
drives the draft loop where the tree has one, regress's model of it else) and, at every
checkpoint where the oracle finds ``block_table`` stale, prints each entry that differs from a
fresh ``prepare()`` for the same layout: checkpoint, request, column, live, expected.

``--device cpu`` is ``regress check``'s own placement (CUDA allocations land on the CPU,
``regress/sandbox/cuda.py``). ``--device cuda`` switches that rewrite off, in the sandbox and in
the worker's thread, so upstream's buffers are real CUDA tensors and ``torch.cuda`` is real; the
sandbox still stubs what the tree lacks (compiled ``torch.ops.trtllm`` ops, DeepGEMM's scheduler).

Cells: SM 90 and 100 (``Settings.sm``), ``mtp_index_share`` off/on (``DSAMetadataParams``,
where the tree's params have it) and, where the DSA module reads a fused-decode-metadata gate,
that path off/on (its module then runs from source: a Triton kernel, GPU only).

    python benchmarks/block_table_gpu.py --trtllm-src TREE [--device cuda] [--json FILE]

Exit 0: stale rows found; 1: none in any cell (a fixed tree); 2: bad arguments; 3: the tree or
the device could not be used (the reason on stderr).
"""

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import sys
from importlib.util import find_spec
from unittest import mock

from regress.check.production import fused_modules
from regress.check.stale_loop import caller_draft_loop
from regress.check.stale_state import Subject, _blueprint, _forwards
from regress.dsa.fresh import fresh_twins
from regress.dsa.stale_batches import BATCHES, CAPACITY
from regress.dsa.stale_check import check_states
from regress.dsa.write_log import WriteLog
from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, all_values, load, plan_for
from regress.sandbox.fakes import FakeKVCacheManager
from regress.sandbox.shells import Sandbox
from regress.tree.source import SourceTreeError, resolve_source_tree

FIELD = "block_table"
SMS = (90, 100)
SHARE = "mtp_index_share"


@contextlib.contextmanager
def placement(device):
    """``cpu``: the sandbox's CUDA-on-CPU rewrite; ``cuda``: no rewrite, real CUDA tensors, and
    Triton (a JIT, not a compiled op: the fused decode-metadata kernel) real where installed."""
    if device == "cpu":
        yield
        return
    from regress.sandbox import cuda, shells

    off = lambda ledger: contextlib.nullcontext()  # noqa: E731
    jit = tuple(p for p in shells.THIRD_PARTY if p != "triton" or not find_spec("triton"))
    with (
        mock.patch.object(shells, "cuda_on_cpu", off),
        mock.patch.object(cuda, "device_mode", off),
        mock.patch.object(shells, "THIRD_PARTY", jit),
    ):
        yield


def cells(plan):
    """The switch matrix: ``(sm, share, fused)``; ``fused`` is None where the tree has no gate."""
    fused = (False, True) if plan.fused_gates else (None,)
    return [(sm, share, f) for sm in SMS for share in (False, True) for f in fused]


def cell_plan(plan, fused):
    """The plan and session env of a cell: each fused gate set as its source reads it
    (``EraPlan.session_env``), and the fused kernel's modules run for real when on, as
    ``regress check``'s matrix cells run them (``production.fused_modules``)."""
    env = plan.session_env(fused)
    if not fused:
        return plan, env
    real = tuple(dict.fromkeys([*fused_modules(plan), *plan.real]))
    return dataclasses.replace(plan, real=real), env


def stale_entries(result, live, blueprint):
    """Each ``block_table`` entry a fresh prepare fixes and the live object holds otherwise."""
    batch, cp = result.batch, result.checkpoint
    fresh, determined = fresh_twins(blueprint, batch, replay=cp.replay)
    mask = determined.get(FIELD, True)  # False: the fresh prepare fixes no entry of it
    if mask is False:
        return []
    n = batch.batch_size
    a, b = live.block_table[:n].detach().cpu(), fresh.block_table[:n].detach().cpu()
    diff = (a != b) if mask is True else (a != b) & mask[:n].cpu()
    ids = batch.ids()
    return [
        {"checkpoint": cp.label, "batch": batch.describe(), "row": r, "request": ids[r],
         "column": c, "live": int(a[r, c]), "expected": int(b[r, c])}
        for r, c in diff.nonzero().tolist()
    ]  # fmt: skip


def run_cell(plan, sm, share, fused, device):
    """One cell: ``{"status": "ran", "rows": [...], ...}`` or ``{"status": "gap", "reason"}``."""
    word = {None: "n/a", False: "off", True: "on"}
    name = f"fused={word[fused]},share={word[share]},sm={sm}"  # H8's cell string, these axes
    out = {"cell": name, "sm": sm, SHARE: share, "fused_decode_metadata": fused}
    out.update(rows=[], callers=[])
    if fused and device == "cpu":
        why = "the fused decode metadata is a Triton kernel: it runs with --device cuda only"
        return {**out, "status": "skipped", "reason": why}
    p, env = cell_plan(plan, fused)
    ledger = Ledger()
    try:
        with (
            placement(device),
            Sandbox(
                p.checkout, p.real, all_values(p, Settings(sm=sm)), env=env, ledger=ledger
            ) as sb,
        ):
            up = load(sb, p, ledger)
            params = up.sparse_kwargs().get("sparse_metadata_params")
            if share and not hasattr(params, SHARE):
                return {**out, "status": "n/a", "reason": f"the tree's params have no {SHARE}"}
            if params is not None:
                params = dataclasses.replace(params, **{SHARE: share})
            subject = Subject(up.metadata_cls, lambda: FakeKVCacheManager(CAPACITY), params)
            for batch in BATCHES:
                out["rows"] += run_batch(up, subject, batch, out)
    except Exception as exc:  # a cell that cannot run is reported, the others still run
        return {**out, "status": "gap", "reason": f"{type(exc).__name__}: {exc}"[:400]}
    return {**out, "status": "ran"}


def run_batch(up, subject, batch, cell):
    """The oracle's two forwards on one batch; the stale entries at every checkpoint it flags.

    ``cell`` receives the caller that drove the loop and the device ``block_table`` lives on."""
    callers = cell["callers"]
    kvm = subject.manager()
    blueprint = _blueprint(up, subject, kvm, batch)
    log = WriteLog([up.plan.checkout])
    rows = []

    def loop(md, k, accepted):
        return caller_draft_loop(up, md, k, accepted, callers, thread_context=log.in_thread)

    with log:
        live = log.watch(blueprint.make())
        blueprint.prepare(live, batch)
        cell["device"] = str(live.block_table.device)

        def judged(result):
            if any(f.field == FIELD for f in result.unexplained):
                for row in stale_entries(result, live, blueprint):
                    rows.append({"scenario": batch.name, **row})

        check_states(live, blueprint, _forwards(live, blueprint, batch, loop),
                     draft_len=batch.max_draft_len, log=log, on_result=judged)  # fmt: skip
    return rows


def machine(device):
    """What ran it: torch, the device's name, the host."""
    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(),
            "host": f"{platform.machine()}, {os.cpu_count()} CPUs", "device": device,
            "load_average": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    if device == "cuda":
        info["device_name"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    else:
        info["device_name"] = platform.processor() or platform.machine()
    return info


def report(tree, info, results, say=print):
    """The human lines: one per cell, one per stale entry under it, a total."""
    say(
        f"block_table_gpu: {tree} on {info['device']} ({info['device_name']}, torch {info['torch']})"
    )
    for cell in results:
        head = f"cell {cell['cell']}"
        if cell["status"] != "ran":
            say(f"{head}: {cell['status']}: {cell['reason']}")
            continue
        callers = "; ".join(dict.fromkeys(cell["callers"]))
        n, dev = len(cell["rows"]), cell["device"]
        say(f"{head}: {n} stale entries (tensors on {dev}; caller: {callers})")
        for r in cell["rows"]:
            say(f"  {r['scenario']} {r['checkpoint']}: request {r['request']} (row {r['row']}) "
                  f"column {r['column']}: live {r['live']}, expected {r['expected']}")  # fmt: skip
    ran = [c for c in results if c["status"] == "ran"]
    hit = sum(1 for c in ran if c["rows"])
    say(f"{sum(len(c['rows']) for c in ran)} stale entries in {hit} of {len(ran)} cells run "
          f"({len(results)} cells)")  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trtllm-src", required=True, help="a TensorRT-LLM checkout")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--json", help="write the machine, the cells and the rows here ('-': stdout)")
    args = ap.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"error: --device cuda: torch {torch.__version__} sees no CUDA device; run on "
              "the GPU machine or pass --device cpu", file=sys.stderr)  # fmt: skip
        return 3
    try:
        plan = plan_for(resolve_source_tree(args.trtllm_src))
    except SourceTreeError as exc:
        print(f"error: --trtllm-src {args.trtllm_src}: {exc}", file=sys.stderr)
        return 3
    info = machine(args.device)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    results = [run_cell(plan, *cell, args.device) for cell in cells(plan)]
    to_stderr = lambda line: print(line, file=sys.stderr)  # noqa: E731  (--json - owns stdout)
    report(args.trtllm_src, info, results, to_stderr if args.json == "-" else print)
    if args.json:
        doc = {"command": sys.argv, "tree": args.trtllm_src, "era": plan.tree.era.name,
               "started": started, "machine": info, "field": FIELD, "cells": results}  # fmt: skip
        text = json.dumps(doc, indent=1, default=str)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as fh:
                fh.write(text + "\n")
    ran = [c for c in results if c["status"] == "ran"]
    if not ran:
        why = results[0].get("reason", "") if results else "no cell"
        print(f"error: --trtllm-src {args.trtllm_src}: no cell could run: {why}; fix the tree "
              "or pass another checkout", file=sys.stderr)  # fmt: skip
        return 3
    return 0 if any(c["rows"] for c in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
