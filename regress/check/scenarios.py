"""The contract scenarios of ``regress check``, driven against real upstream metadata in the sandbox.

Each scenario builds metadata the way upstream callers do and checks the contracts of
:mod:`regress.dsa.invariants` at every step. The draft loop is the best caller the tree has
(:func:`regress.check.caller.caller_checkpoints`): upstream's own one-model worker
(``speculative/eagle3.py::MTPEagleWorker`` and the others of :mod:`regress.sandbox.workers`),
checked at every metadata call it makes, or, in a tree without one, :mod:`regress.dsa.lifecycle`'s
model of it. Every result's note names the caller.

Scenarios 1 and 2a check the map and the announced widths. Scenario 3 drives one metadata object
through upstream's per-forward order (``tensorrt_llm/_torch/pyexecutor/model_engine.py``
``forward``, read for :mod:`regress.dsa.lifecycle`): built without ``seq_lens``;
``update_spec_dec_param()`` first
(``model_engine.forward``), then the batch fields and ``prepare()``, the draft loop with its
restore, and the next forward. The runtime :class:`~regress.dsa.sentinel.Sentinel` is attached
throughout: it must neither crash nor flag a fixed build, and must flag a pre-fix one. Scenario 2b
runs the layer-wise runner's guard. The scenarios of :mod:`regress.check.draft_scenarios` run
every worker, every DSA-family class and the newer paths; :mod:`regress.check.catalog` lists them
all.
"""

from __future__ import annotations

import traceback
import types
from pathlib import Path
from typing import Any

from regress.check.caller import DraftSettings, caller_checkpoints
from regress.check.status import ScenarioStatus
from regress.check.steps import (
    ScenarioResult,
    caller_note,
    drive,
    observe,
    target_forward,
    tree_prepare,
)
from regress.dsa.announce import mtp_shape_params
from regress.dsa.batch import Batch
from regress.dsa.invariants import Violation, check_announced_width
from regress.dsa.sentinel import SENTINEL_ERROR
from regress.sandbox import SandboxGap
from regress.sandbox.eras import Upstream
from regress.sandbox.fakes import FakeKVCacheManager
from regress.sandbox.shells import Sandbox
from regress.tree.maps import check_maps

__all__ = ["map_after_draft_loop", "runner_guard", "sentinel_lifecycle", "shape_announcement"]

#: Scenario 1's layouts (issue 10): uniform MTP verify chunks, a tree-drafting layout, a mixed
#: context+generation batch, and a zero-length row.
MAP_LAYOUTS: tuple[...] = (
    Batch((5, 5, 5, 5), 0, max_draft_len=4, name="uniform_5x4"),
    Batch((4,) * 8, 0, max_draft_len=3, name="uniform_4x8"),
    Batch((3, 1, 4, 1), 0, max_draft_len=3, name="tree_3_1_4_1"),
    Batch((6, 3, 4, 4), 2, max_draft_len=3, name="mixed_ctx_gen"),
)
#: A zero-length row: the map built for ``[4, 4, 4]`` must follow a rewrite to ``[2, 0, 3]``
#: (upstream ``tests/unittest/_torch/attention/sparse/dsa/test_req_idx_per_token.py``).
ZERO_ROW = ((4, 4, 4), (2, 0, 3))


def _accepted(batch: int, k: int) -> list[int]:
    """Accepted tokens per request, bonus counted: zero (1), partial and full acceptance mixed."""
    return [1 + (3 * i + 1) % (k + 1) for i in range(batch)]


def map_after_draft_loop(up: Upstream) -> list[ScenarioResult]:
    """Scenario 1: the token-to-request map and the indexer-K slots at every draft step."""
    results = []
    for layout in MAP_LAYOUTS:
        result = ScenarioResult(f"req_idx_map/{layout.name}")
        md, kvm = target_forward(up, layout)
        result.add(observe(md, "after_prepare", result, pages=kvm), "after_prepare")
        k = layout.max_draft_len
        drive(up, md, kvm, DraftSettings(k, _accepted(len(layout.seq_lens), k)), result)
        results.append(result)
    result = ScenarioResult("req_idx_map/zero_length_row")
    before, after = ZERO_ROW
    md, kvm = target_forward(up, Batch(before, 0, max_draft_len=3, name="zero"))
    result.add(observe(md, "after_prepare", result, pages=kvm), "after_prepare")
    import torch

    lens = torch.tensor(after, dtype=torch.int32)
    md._seq_lens[: len(after)].copy_(lens)
    md._seq_lens_cuda[: len(after)].copy_(lens)
    md.on_update()
    md.update_for_spec_dec()
    where = f"rewritten_to_{list(after)}"
    result.add(observe(md, where, result, pages=kvm), where)
    result.note = "caller: regress (a zero-length row, as upstream's test_req_idx_per_token.py)"
    results.append(result)
    return results


def shape_announcement(up: Upstream) -> list[ScenarioResult]:
    """Scenario 2a: ``update_spec_dec_param()`` for GEN with ``seq_len_q > 1`` sizes the buffers."""
    out = []
    for batch, q in ((32, 4), (4, 2), (8, 8)):
        result = ScenarioResult(f"shape_announcement/b{batch}_q{q}")
        kvm = FakeKVCacheManager(batch)
        md = up.make_metadata(kvm, max_num_tokens=batch * q, seq_lens=[q] * batch)
        md.update_spec_dec_param(**mtp_shape_params(batch, q))
        md.prepare()
        result.add(check_announced_width(md, batch, q), "after_prepare")
        out.append(result)
    return out


_SENTINEL_DIR = str(Path(__file__).resolve().parents[1] / "dsa")


def _from_sentinel(exc: BaseException, tree: Path) -> bool:
    """Whether the innermost frame that is either sentinel or upstream code is the sentinel's."""
    tree_s = str(tree)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith(_SENTINEL_DIR):
            return True
        if frame.filename.startswith(tree_s):
            return False
    return False


def sentinel_lifecycle(up: Upstream) -> list[ScenarioResult]:
    """Scenario 3: the sentinel rides two forwards and one draft loop of real metadata.

    The sentinel is regress code, so its findings are judged against ground truth taken in the
    same run (the map checked directly after every draft step): the scenario fails only when the
    tree breaks the contract and the sentinel says so. A sentinel that crashes, flags a tree whose
    map is right (a false positive) or misses a broken one is reported as ``error``, a regress
    bug that never changes the tree's exit code.
    """
    out = []
    for batch, k in ((4, 4), (8, 3)):
        out.append(_ride(up, batch, k))
    return out


def _ride(up: Upstream, batch: int, k: int) -> ScenarioResult:
    from regress.dsa.sentinel import Sentinel

    result = ScenarioResult(f"sentinel_lifecycle/b{batch}_k{k}")
    kvm = FakeKVCacheManager(batch)
    md = up.make_metadata(kvm, max_num_tokens=batch * (k + 1) * 2, seq_lens=None)
    sentinel = Sentinel().attach(md)
    cached = [40 + 10 * i for i in range(batch)]
    truth: list[Violation] = []
    stage = "update_spec_dec_param(seq_lens=None)"
    try:
        md.update_spec_dec_param(**mtp_shape_params(batch, k + 1))
        stage = "prepare()"
        tree_prepare(up)(md, Batch((k + 1,) * batch, cached=tuple(cached)))
        accepted = _accepted(batch, k)
        run = caller_checkpoints(up, md, DraftSettings(k, accepted))
        for cp in run:
            stage = cp.label
            if cp.guaranteed:
                truth += [
                    Violation(v.check, v.message, {**v.details, "step": cp.label})
                    for v in check_maps(md)
                ]
        stage = "next forward: update_spec_dec_param()"
        md.update_spec_dec_param(**mtp_shape_params(batch, k + 1))
        stage = "next forward: prepare()"
        after = tuple(c + a for c, a in zip(cached, accepted, strict=True))
        tree_prepare(up)(md, Batch((k + 1,) * batch, cached=after))
        sentinel.flush()
    except SandboxGap:
        raise
    except Exception as exc:
        if not _from_sentinel(exc, up.plan.checkout):
            raise
        result.status = ScenarioStatus.ERROR
        result.note = f"the sentinel crashed at {stage}: {type(exc).__name__}: {exc}"
        return result
    finally:
        sentinel.detach()
    flagged = [
        Violation(v.check, v.message, {**v.details, "site": v.site, "seq_lens": v.seq_lens})
        for v in sentinel.violations
    ]
    counts = (
        f"{sentinel.summary()['checks_run']} checks, {sentinel.num_violations} violations; "
        f"{caller_note(run)}"
    )
    crashed = [v for v in flagged if v.check == SENTINEL_ERROR]
    if crashed:  # the sentinel catches its own errors and records them; still a regress bug
        v = crashed[0]
        result.status = ScenarioStatus.ERROR
        result.note = f"the sentinel crashed at {v.details['site']}: {v.message}"
    elif truth and flagged:
        result.add(flagged, "sentinel")  # the tree is broken and the sentinel said so
        result.note = f"sentinel flagged the broken map ({counts})"
    elif truth:
        result.status = ScenarioStatus.ERROR
        result.note = (
            f"the sentinel missed a stale map seen directly ({counts}): {truth[0].message}"
        )
    elif flagged:
        v = flagged[0]
        result.status = ScenarioStatus.ERROR
        result.note = (
            f"the sentinel flagged a correct map ({counts}), a false positive at "
            f"{v.details['site']}: {v.message}"
        )
    else:
        result.note = f"sentinel silent on a correct map ({counts})"
    return result


def runner_guard(up: Upstream) -> list[ScenarioResult]:
    """Scenario 2b: ``Runner.create_run_pack("GEN", seq_len_q > 1)`` announces the MTP shapes.

    Runs the real ``tools/layer_wise_benchmarks/runner.py`` with a fake ``self`` (a model config
    without a checkpoint), ``mpi_world_size() == 1`` and ``get_attention_backend`` returning the
    real DSA metadata class. The metadata it builds is checked once its ``prepare()`` has run;
    what the method does after that (model inputs, forward setup) may need more than the sandbox
    has, which is reported in the note, not as a verdict.
    """
    result = ScenarioResult("runner_guard/gen_b32_q4")
    name = up.plan.runner_module
    if name is None:
        result.status, result.note = (
            ScenarioStatus.SKIP,
            "no tools/layer_wise_benchmarks/runner.py in this tree",
        )
        return [result]
    built: list[Any] = []

    def metadata(**kwargs: Any) -> Any:
        for key, value in up.sparse_kwargs().items():
            if kwargs.get(key) is None:
                kwargs[key] = value
        md = up.metadata_cls(**kwargs)
        prepare = md.prepare

        def prepared() -> None:
            prepare()
            built.append(md)

        md.prepare = prepared
        return md

    backend = types.SimpleNamespace(Metadata=metadata)
    extra = {
        "mpi_world_size": (lambda: 1, "one rank"),
        "get_attention_backend": (lambda *a, **k: backend, "the real DSA metadata class"),
    }
    batch, q = 32, 4
    sandbox: Sandbox = up.sandbox
    try:
        sandbox.add_real([name])
        runner = sandbox.load(name)
        for key, (value, why) in extra.items():
            if hasattr(runner, key):
                setattr(runner, key, value)
                sandbox.ledger.note("value", f"{name}.{key}", why)
        config = types.SimpleNamespace(
            moe_backend="CUTLASS",
            attn_backend="TRTLLM",
            sparse_attention_config=None,
            pretrained_config=types.SimpleNamespace(hidden_size=64),
            mapping=None,
            extra_attrs={},
        )
        sandbox.ledger.note("collaborator", "Runner (self)", "a namespace holding model_config")
        runner.Runner.create_run_pack(
            types.SimpleNamespace(model_config=config),
            "GEN",
            batch_size=batch,
            request_id_begin=0,
            seq_len_q=q,
            seq_len_kv_cache=64,
            kv_cache_manager=FakeKVCacheManager(batch),
        )
    except Exception as exc:  # after prepare() only the note; before it, the scenario is a gap
        result.note = f"create_run_pack stopped after prepare(): {type(exc).__name__}: {exc}"
        if not built:
            result.status = ScenarioStatus.GAP
            result.note = f"runner not runnable in the sandbox: {type(exc).__name__}: {exc}"
            return [result]
    result.add(check_announced_width(built[-1], batch, q), "create_run_pack")
    return [result]
