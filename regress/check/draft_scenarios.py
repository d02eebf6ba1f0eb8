"""The scenarios of upstream's callers and newer paths: every worker, every DSA-family class, and
fused metadata, a separate draft KV cache and ragged verification.

Each runs the tree's own code (:func:`regress.check.caller.caller_checkpoints`) and judges
every checkpoint with :func:`regress.check.steps.judge`. What the tree does not have is a
``skip`` with the reason; what the sandbox cannot build is a ``gap``, never a verdict: only a
contract broken while upstream's caller drives upstream's metadata fails a tree.

* ``draft_callers``: every one-model worker class found (:mod:`regress.sandbox.workers`) runs its
  own draft loop with zero, partial and full acceptance; then, for the preferred worker, a batch
  that mixes contexts and generations (the restore must bring back ``num_contexts`` and
  ``host_request_types``, as upstream's newer ``SpecWorkerBase`` does and pins in its test of the
  restore lifecycle, a stored test file whose commit is unknown) and ``runtime_draft_len == 0``
  (``skip_drafting``).
* ``metadata_classes`` (:func:`every_metadata_class`): every DSA-family metadata class of the tree
  (:func:`maps.dsa_family`), each
  map it carries checked after every call of the preferred caller.
* ``fused_metadata``: the fused decode-metadata path, the tree's gate set on
  (:meth:`regress.sandbox.eras.Upstream.session`): upstream's Triton kernel runs for real
  (interpreted with tensors on the CPU); without triton it is a gap naming ``pip install triton``.
* ``draft_kv_cache``: a separate draft KV cache (``use_separate_draft_kv_cache``): the worker
  switches managers around its draft forwards (``draft_kv_cache_context``).
* ``ragged_verify``: per-request verification windows (``ragged_verify_lens``) and the device
  windows installed by ``apply_device_ragged_layout``; the row maps checked.
"""

from __future__ import annotations

import inspect
from typing import Any

from regress.check.caller import DraftSettings, caller_checkpoints
from regress.check.production import kernel_files, kernel_missing
from regress.check.status import ScenarioStatus
from regress.check.steps import (
    ScenarioResult,
    caller_note,
    drive,
    judge,
    observe,
    target_forward,
)
from regress.dsa.batch import Batch
from regress.sandbox.fakes import FakeKVCacheManager
from regress.sandbox.workers import catalog
from regress.tree.maps import check_maps, dsa_family, load_class, maps_of

#: The acceptance pattern every worker gets: full, zero, partial, partial (bonus counted).
ACCEPTED = [4, 1, 2, 3]
DECODE = Batch((4, 4, 4, 4), 0, max_draft_len=3, name="decode_4x4")
MIXED = Batch((6, 3, 4, 4), 2, max_draft_len=3, name="mixed_ctx_gen")


def _calls(run: Any) -> str:
    counts: dict[str, int] = {}
    for c in run.calls:
        key = "draft_forward" if c.startswith("draft_forward_") else c.split("#")[0]
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} x{n}" for k, n in counts.items())


def draft_callers(up: Any) -> list[ScenarioResult]:
    """Every worker's own draft loop, then the preferred one on a mixed batch and on r = 0."""
    found = catalog(up)
    out = [
        ScenarioResult(f"draft_callers/load:{p.split(':', 1)[0]}", ScenarioStatus.GAP, note=p)
        for p in found.problems
    ]
    if not found.workers:
        if not out:
            out.append(
                ScenarioResult(
                    "draft_callers",
                    ScenarioStatus.SKIP,
                    note="no one-model speculative worker in this tree: the draft-loop scenarios "
                    "ran regress's model (regress/dsa/lifecycle.py)",
                )
            )
        return out
    for worker in found.workers:
        result = ScenarioResult(f"draft_callers/{worker.name}")
        md, kvm = target_forward(up, DECODE)
        run = drive(up, md, kvm, DraftSettings(3, ACCEPTED, worker=worker.name), result)
        result.note += f"; calls: {_calls(run)}"
        if result.status == ScenarioStatus.WARN:
            result.note += f"; finding: {worker.name} never lets the metadata rebuild its maps"
        out.append(result)
    best = found.pick()
    out.append(_mixed(up, best.name))
    if "skip_drafting" in inspect.getsource(getattr(best.cls, best.method)):
        out.append(_no_drafting(up, best.name))
    return out


def _mixed(up: Any, worker: str) -> ScenarioResult:
    """Contexts and generations in one batch; after the loop the restore brings the layout back."""
    result = ScenarioResult(f"draft_callers/{worker}/{MIXED.name}")
    md, kvm = target_forward(up, MIXED)
    nc, bs = int(md.num_contexts), int(md.num_seqs)
    types_before = [int(x) for x in md.host_request_types[:bs].tolist()]
    drive(up, md, kvm, DraftSettings(3, [1, 1, 2, 4], worker=worker), result)
    types_after = [int(x) for x in md.host_request_types[:bs].tolist()]
    if int(md.num_contexts) != nc or types_after != types_before:
        from regress.dsa.invariants import Violation

        result.warn(
            [
                Violation(
                    "restore",
                    f"after the draft loop num_contexts is {int(md.num_contexts)} and "
                    f"host_request_types {types_after}, where the target forward had {nc} and "
                    f"{types_before}: the restore does not bring the context metadata back "
                    "(upstream's newer SpecWorkerBase does)",
                    {"num_contexts": [nc, int(md.num_contexts)], "host_request_types": types_after},
                )
            ],
            "after the restore",
        )
    return result


def _no_drafting(up: Any, worker: str) -> ScenarioResult:
    """``runtime_draft_len == 0``: the worker skips drafting; the prepared maps stay right."""
    result = ScenarioResult(f"draft_callers/{worker}/runtime_draft_len_0")
    md, kvm = target_forward(up, Batch((1, 1, 1, 1), 0, max_draft_len=3, name="decode_1"))
    run = drive(up, md, kvm, DraftSettings(3, [1] * 4, runtime_draft_len=0, worker=worker), result)
    result.add(observe(md, "after skip_drafting", result, pages=kvm), "after skip_drafting")
    result.note += f"; {len(run.calls)} metadata calls"
    return result


def every_metadata_class(up: Any) -> list[ScenarioResult]:
    """Every DSA-family class of the tree, every map it carries, after every caller's call."""
    from regress.tree.source import DSA_METADATA_CLASS

    plan = up.plan
    sparse = plan.tree.dsa_metadata.file.parent.parent.relative_to(plan.tree.package_dir)
    out = []
    for found in dsa_family(plan.tree.package_dir, str(sparse), DSA_METADATA_CLASS):
        result = ScenarioResult(f"metadata_classes/{found.name}")
        try:
            cls = load_class(up, found)
            md, kvm = _build(up, cls)
        except Exception as exc:  # built with regress's fakes: not a contract of the tree
            from regress.sandbox.blame import blame, describe

            result.status = ScenarioStatus.GAP
            result.note = f"could not build {found.name} in the sandbox: " + describe(
                exc, blame(exc, plan.checkout)
            )
            out.append(result)
            continue
        # Indexer-K pages are judged for the DSA class only: a subclass's own indexer may write
        # them another way (DeepSeek-V4's compressor scatters them and its _update_k_cache is a
        # no-op, deepseek_v4/indexer.py @ 4fd977cc), so DSA's slot mapping is not its write path.
        pages = kvm if found.name == DSA_METADATA_CLASS else None
        result.add(observe(md, "after_prepare", result, pages=pages), "after_prepare")
        run = drive(up, md, pages, DraftSettings(3, ACCEPTED), result)
        result.note = f"maps checked: {', '.join(maps_of(md)) or 'none'}; {caller_note(run)}"
        out.append(result)
    return out


def _build(up: Any, cls: type) -> tuple[Any, FakeKVCacheManager]:
    kvm = FakeKVCacheManager(len(DECODE.seq_lens))
    md = up.make_metadata(kvm, max_num_tokens=64, seq_lens=list(DECODE.seq_lens), metadata_cls=cls)
    from regress.dsa.announce import mtp_shape_params

    md.update_spec_dec_param(**mtp_shape_params(len(DECODE.seq_lens), DECODE.max_draft_len + 1))
    md.prepare()
    return md, kvm


def fused_metadata(up: Any) -> list[ScenarioResult]:
    """The fused decode-metadata path with the tree's gate on: its kernel runs for real."""
    result = ScenarioResult("fused_metadata/fused_kernel")
    gates = up.plan.fused_gates
    if not gates:
        result.status, result.note = (
            ScenarioStatus.SKIP,
            "the DSA module reads no fused-metadata gate",
        )
        return [result]
    missing = kernel_missing(kernel_files(up.plan))
    if missing:
        result.status, result.note = ScenarioStatus.GAP, missing
        return [result]
    before = _launches(up)
    with up.session(fused=True) as fused:
        md, kvm = target_forward(fused, DECODE)
        drive(fused, md, kvm, DraftSettings(3, ACCEPTED), result, fused_gates=gates)
        env = fused.sandbox.env
    launched = {k: n - before.get(k, 0) for k, n in _launches(up).items() if n > before.get(k, 0)}
    gate = ", ".join(f"{g.name}={env.get(g.name)}" for g in gates)
    ran = "; ".join(f"{k} x{n}" for k, n in launched.items())
    how = next((f.detail for f in up.ledger.fakes.values() if f.kind == "triton"), "")
    result.note = (
        f"gate {gate}: fused kernel {ran} {how}; {result.note}"
        if launched
        else f"gate {gate}: no Triton kernel was launched (the metadata took another path); "
        f"{result.note}"
    )
    return [result]


def _launches(up: Any) -> dict[str, int]:
    return {f.name: f.count for f in up.ledger.fakes.values() if f.kind == "triton"}


def draft_kv_cache(up: Any) -> list[ScenarioResult]:
    """A separate draft KV cache: the worker swaps managers; every map judged throughout."""
    result = ScenarioResult("draft_kv_cache/separate_manager")
    fields = getattr(up.metadata_cls, "__dataclass_fields__", {})
    if "draft_kv_cache_manager" not in fields:
        result.status, result.note = (
            ScenarioStatus.SKIP,
            "this metadata takes no draft_kv_cache_manager",
        )
        return [result]
    if not catalog(up).workers:
        result.status, result.note = (
            ScenarioStatus.SKIP,
            "no upstream worker to switch the draft KV cache",
        )
        return [result]
    draft = FakeKVCacheManager(len(DECODE.seq_lens), block_base=10_000)
    md, kvm = target_forward(up, DECODE, draft_kv_cache_manager=draft)
    run = caller_checkpoints(up, md, DraftSettings(3, ACCEPTED, draft_kv_cache_manager=draft))
    owners = []
    for cp in run:
        judge(cp, result)
        if cp.reads:
            owners.append(f"{cp.label}: {_pages_owner(md, kvm, draft)}")
    swapped = "prepare_for_draft_forward" in {c.split("#")[0] for c in run.calls}
    result.note = (
        f"{caller_note(run)}; the worker {'called' if swapped else 'did not call'} "
        f"prepare_for_draft_forward(); indexer-K slots written into: {', '.join(owners)} "
        "(reported, not judged)"
    )
    return [result]


def _pages_owner(md: Any, target: FakeKVCacheManager, draft: FakeKVCacheManager) -> str:
    """Whose pages the indexer-K slot mapping writes: ``target``, ``draft`` or ``mixed``."""
    slots = getattr(md, "slot_mapping_fp8", None)
    if slots is None:
        return "no slot mapping"
    blocks = [int(s) // target.indexer_block_stride() for s in slots[: int(md.num_tokens)].tolist()]
    if all(draft.owner_of_block(b) >= 0 for b in blocks):
        return "draft pages"
    if all(target.owner_of_block(b) >= 0 for b in blocks):
        return "target pages"
    return "mixed pages"


#: The switch newer DSA metadata takes in its constructor before it allocates the ragged row
#: buffers (``__init__`` pops it; ``is_ragged_verify`` raises when ``ragged_verify_lens`` is set
#: without it): ``attention/backends/sparse/dsa/metadata.py`` @ 186080bb.
RAGGED_SWITCH = "enable_ragged_verification"


def ragged_verify(up: Any) -> list[ScenarioResult]:
    """Per-request verification windows: the row maps after prepare() and after device windows.

    The metadata is built the way upstream builds it for ragged verification: where the class
    takes :data:`RAGGED_SWITCH`, it is passed to the constructor (the row buffers are allocated
    in ``__post_init__`` from it); an older class (the newest stored version of the era-B path's
    ``sparse/dsa/metadata.py``, commit unknown) has no switch and
    ``ragged_verify_lens`` alone turns the feature on. Upstream raising on these inputs is a gap:
    the windows are regress's choice, so the refusal says nothing about the tree.
    """
    result = ScenarioResult("ragged_verify/windows_4_2_3_1")
    cls = up.metadata_cls
    if not hasattr(cls, "ragged_verify_lens"):
        result.status, result.note = ScenarioStatus.SKIP, "this metadata has no ragged verification"
        return [result]
    switch = _has_switch(cls)
    try:
        md = _ragged_metadata(up, cls, switch)
        result.add(check_maps(md), "after_prepare")
        if hasattr(md, "apply_device_ragged_layout"):
            _device_windows(md, result)
    except Exception as exc:  # regress chose the windows: a refusal is not a verdict
        from regress.sandbox.blame import blame, describe

        result.status, result.violations = ScenarioStatus.GAP, []
        how = f"built with {RAGGED_SWITCH}=True" if switch else f"no {RAGGED_SWITCH} switch"
        result.note = (
            f"the ragged-verification input regress chose ({how}) was refused: "
            + describe(exc, blame(exc, up.plan.checkout))
        )
        return [result]
    enabled = f"{RAGGED_SWITCH}=True passed to the constructor" if switch else f"no {RAGGED_SWITCH}"
    result.note = f"maps checked: {', '.join(maps_of(md))}; {enabled}"
    return [result]


def _has_switch(cls: type) -> bool:
    """Whether the class takes :data:`RAGGED_SWITCH` (upstream's is a field defaulting False)."""
    return hasattr(cls, RAGGED_SWITCH)


def _ragged_metadata(up: Any, cls: type, switch: bool) -> Any:
    """A prepared object with windows ``[4, 2, 3, 1]``, built as upstream builds it."""
    lens = [4, 2, 3, 1]
    kvm = FakeKVCacheManager(len(lens))
    built = _enabling(cls) if switch else None
    md = up.make_metadata(kvm, max_num_tokens=64, seq_lens=lens, metadata_cls=built)
    from regress.dsa.announce import mtp_shape_params

    md.update_spec_dec_param(**mtp_shape_params(len(lens), max(lens)))
    md.ragged_verify_lens = list(lens)
    md.prepare()
    return md


def _enabling(cls: type) -> type:
    """``cls`` whose constructor gets ``enable_ragged_verification=True`` (the keyword upstream's
    ``__init__`` pops, 186080bb; its own ragged test, ``test_feature_off_rejects_ragged_layout``
    in a stored version whose commit is unknown, builds the object with it; the engine call that
    passes it was not found in the stored files).

    A subclass in ``cls``'s own module (so the era's sparse settings resolve as for ``cls``) that
    only adds the keyword: every method the scenario runs is upstream's.
    """

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault(RAGGED_SWITCH, True)
        cls.__init__(self, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


def _device_windows(md: Any, result: ScenarioResult) -> None:
    """Install other windows of the same total on device; the maps must follow the device layout.

    In device-window mode the host windows fix only the captured shape and
    ``apply_device_ragged_layout`` installs the true ones (the newest stored version of the era-B
    path's ``sparse/dsa/metadata.py``, commit unknown), so the maps
    are judged against the device ``seq_lens`` there.
    """
    import torch

    from regress.dsa.mapping import expected_req_idx_per_token

    host = [int(x) for x in md.ragged_verify_lens]
    lens = host[1:] + host[:1]  # same total, another split
    from regress.sandbox.cuda import on_executor_device

    # the executor's device tensors (GPU natively): upstream index_selects its rows with ``req``
    req = on_executor_device(torch.tensor(expected_req_idx_per_token(lens), dtype=torch.long))
    correction = on_executor_device(
        torch.cat([torch.arange(1 - n, 1) for n in lens]).to(torch.int32)
    )
    verify = on_executor_device(torch.tensor(lens, dtype=torch.int32))
    md.apply_device_ragged_layout(verify, req, correction)
    result.add(check_maps(_DeviceLayout(md, lens)), f"after apply_device_ragged_layout({lens})")


class _DeviceLayout:
    """``md`` with the device windows as its layout (host ``seq_lens`` := ``seq_lens_cuda``)."""

    def __init__(self, md: Any, lens: list[int]) -> None:
        self._md = md
        self.seq_lens = md.seq_lens_cuda[: int(md.num_seqs)].cpu()
        self.ragged_verify_lens = lens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._md, name)
