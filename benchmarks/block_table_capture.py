"""Capture safety of ``on_update_kv_lens()`` on a TensorRT-LLM tree: the ops one draft step runs.

Why: a fix for finding 1 (docs/findings.md) adds work to ``on_update_kv_lens()``, which runs
inside the captured CUDA graph of every MTP draft step; it must add no host sync and no new tensor.
Loads TREE through regress's sandbox as ``regress check`` does, prepares the stale-state oracle's
verify batch (cached [40, 27, 60, 90], 4 tokens each, K=3), collapses to the draft layout as the
worker does, advances ``kv_lens_cuda`` by one, then records every aten op ``on_update_kv_lens()``
dispatches. Prints them as JSON with the host syncs (``_local_scalar_dense`` is ``.item()``) and
the tensor factories among them; diff two trees' outputs to see what a patch adds.

    python benchmarks/block_table_capture.py TREE > TREE.ops.json
"""

import collections
import json
import sys

from torch.utils._python_dispatch import TorchDispatchMode

from regress.check.stale_state import Subject, _blueprint
from regress.dsa.stale_batches import BATCHES, CAPACITY, DRAFT_LEN
from regress.dsa.transitions import collapse, save_target
from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, all_values, load, plan_for
from regress.sandbox.fakes import FakeKVCacheManager
from regress.sandbox.shells import Sandbox
from regress.tree.source import resolve_source_tree

FACTORIES = ("empty", "zeros", "ones", "full", "arange", "scalar_tensor", "lift", "tensor", "rand")


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dev = kwargs.get("device")
        self.ops.append((str(func), str(dev) if dev is not None else ""))
        return func(*args, **kwargs)


def main(tree):
    layout = resolve_source_tree(tree)
    plan = plan_for(layout)
    ledger = Ledger()
    with Sandbox(
        plan.checkout, plan.real, all_values(plan, Settings()), env=plan.env, ledger=ledger
    ) as sb:
        up = load(sb, plan, ledger)
        batch = next(b for b in BATCHES if b.name == "verify_4x4")
        kvm = FakeKVCacheManager(CAPACITY)
        blueprint = _blueprint(up, Subject(up.metadata_cls, lambda: kvm), kvm, batch)
        md = blueprint.make()
        blueprint.prepare(md, batch)
        saved = save_target(md)
        collapse(md, saved, DRAFT_LEN, batch.accepted())
        md.kv_lens_cuda[: md.num_seqs] += (
            1  # advance, as the draft loop does before update_for_spec_dec()
        )
        rec = Recorder()
        with rec:
            md.on_update_kv_lens()
        counts = collections.Counter(op for op, _ in rec.ops)
        syncs = [op for op, _ in rec.ops if "_local_scalar_dense" in op or "item" in op]
        to_cpu = [op for op, dev in rec.ops if dev == "cpu"]
        factories = [op for op, _ in rec.ops if op.split(".")[1].startswith(FACTORIES)]
        row = md.block_table[2, :3].tolist()
        print(
            json.dumps(
                {
                    "tree": tree,
                    "ops": dict(sorted(counts.items())),
                    "host_syncs": syncs,
                    "device_cpu_ops": to_cpu,
                    "factory_ops": factories,
                    "block_table_row_2_after": row,
                    "kv_lens_cuda": md.kv_lens_cuda[:4].tolist(),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main(sys.argv[1])
