"""Upstream's one-model speculative workers: found in the tree, built, and given one forward's inputs.

The workers are found by inspecting the modules of :data:`regress.tree.eras.CALLER_FILES`
once they are executed in the sandbox, never by line: every class defined there that subclasses
``SpecWorkerBase`` (``speculative/interface.py``) or, in trees older than it, an ``nn.Module``
whose draft-loop method takes ``attn_metadata``, ``spec_metadata`` and ``draft_model``. Which
draft-loop method holds the loop is read from the class too: ``_forward_impl`` where
``SpecWorkerBase.forward`` is final and delegates to it (the stored version of
``tensorrt_llm/_torch/speculative/interface.py`` that names ``_forward_linear_draft_loop``, commit
unknown, forbids subclasses to override ``forward``), else ``forward``. The worker is
always entered through ``forward`` (``nn.Module.__call__``), as the model calls it.

Read from upstream: ``Eagle3OneModelWorker`` / ``MTPEagleWorker`` (``eagle3.py``, the one stored
version, commit unknown: built with a ``spec_config`` whose ``spec_dec_mode`` says whether it is the
one-model MTP-Eagle mode; for MTP-Eagle the draft loop calls the first of
``draft_model.mtp_layers`` with ``embed_tokens`` and the step's inputs, then its ``shared_head``;
for Eagle3 it calls ``draft_model.model``, which returns the hidden states and the ones to save,
then ``apply_eagle3_fc`` and ``logits_processor``), ``DraftTargetOneModelWorker``
(two stored versions of ``draft_target.py``, commits unknown: ``draft_model.model`` gives the
hidden states, then ``logits_processor``) and the vanilla ``MTPWorker`` (``mtp.py`` @ 23ee85ee:
each of ``draft_model.mtp_layers`` in turn, its ``shared_head`` giving last-token logits). The
target logits are built so that upstream's own strict acceptance
(``_sample_and_accept_draft_tokens_base``: argmax, then the leading run of drafts equal to the
target) accepts the count regress planned per request; the worker's returned ``new_tokens_lens``
is compared with the plan, so a pattern that did not take effect is a driver error, never a
silent pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.sandbox import drafts

#: Worker classes regress knows how to feed, in the order a draft-loop scenario prefers them
#: (MTP-Eagle first: the loop DSA models run). ``mode`` names the ``SpeculativeDecodingMode``
#: member the spec config carries; ``pair`` whether ``draft_model.model`` returns two tensors.
KINDS: dict[str, dict[str, Any]] = {
    "MTPEagleWorker": {"mode": "MTP_EAGLE_ONE_MODEL", "pair": False},
    "Eagle3OneModelWorker": {"mode": "EAGLE3_ONE_MODEL", "pair": True},
    "MTPWorker": {"mode": "MTP", "pair": False},
    "DraftTargetOneModelWorker": {"mode": "DRAFT_TARGET_ONE_MODEL", "pair": False},
}
_LOOP_ARGS = {"attn_metadata", "spec_metadata", "draft_model"}


@dataclass(frozen=True)
class WorkerClass:
    """One worker class found in the tree.

    Attributes:
        cls: the class.
        method: the method holding the draft loop (``_forward_impl`` or ``forward``).
        defined_in: the file (relative to the checkout) defining that method.
    """

    cls: type
    method: str
    defined_in: str

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def caller(self) -> str:
        """How the report names it: ``upstream <file>::<Class>.<method>``."""
        return f"upstream {self.defined_in}::{self.name}.{self.method}"


@dataclass
class Catalog:
    """The workers of one tree; ``problems`` says why a module or class could not be used."""

    workers: list[WorkerClass] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)

    def pick(self, name: str | None = None) -> WorkerClass | None:
        """The named worker, or the one a draft-loop scenario prefers (:data:`KINDS` order)."""
        by_name = {w.name: w for w in self.workers}
        if name is not None:
            return by_name.get(name)
        return next((by_name[k] for k in KINDS if k in by_name), None)


def catalog(up: Any) -> Catalog:
    """Load the tree's worker modules once (cached on ``up``) and list their worker classes."""
    if getattr(up, "workers", None) is not None:
        return up.workers
    found = Catalog()
    sandbox = up.sandbox
    sandbox.add_real(up.plan.caller_modules)
    for name in up.plan.caller_modules:
        try:
            module = sandbox.load(name)
        except Exception as exc:  # the module is upstream's; what it needs may be missing
            from regress.sandbox.blame import blame, describe

            found.problems.append(f"{name}: {describe(exc, blame(exc, up.plan.checkout))}")
            continue
        found.loaded.append(name)
        found.workers += _workers_in(module, up.plan.checkout)
    up.workers = found
    return found


def _workers_in(module: Any, checkout: Path) -> list[WorkerClass]:
    import torch

    out = []
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != module.__name__ or cls.__name__ not in KINDS:
            continue
        if not issubclass(cls, torch.nn.Module):  # SpecWorkerBase is one too
            continue
        method = _loop_method(cls)
        if method is None:
            continue
        fn = getattr(cls, method)
        file = Path(inspect.getsourcefile(fn) or module.__file__).resolve()
        out.append(WorkerClass(cls, method, str(file.relative_to(Path(checkout).resolve()))))
    return out


def _loop_method(cls: type) -> str | None:
    """``_forward_impl`` when implemented (``forward`` final), else ``forward``; None if neither."""
    impl = getattr(cls, "_forward_impl", None)
    if impl is not None and not getattr(impl, "__isabstractmethod__", False):
        return "_forward_impl"
    forward = getattr(cls, "forward", None)
    if forward is None:
        return None
    params = set(inspect.signature(forward).parameters)
    return "forward" if params >= _LOOP_ARGS else None


def spec_mode(worker: WorkerClass) -> Any:
    """The tree's own ``SpeculativeDecodingMode`` member for ``worker``, or its name."""
    import sys

    mode = KINDS[worker.name]["mode"]
    interface = sys.modules.get(worker.cls.__module__.rsplit(".", 1)[0] + ".interface")
    enum = getattr(interface, "SpeculativeDecodingMode", None)
    return getattr(enum, mode, mode) if enum is not None else mode


def build(worker: WorkerClass, k: int, *, separate_draft_kv: bool, up: Any = None) -> Any:
    """An instance, built through the class's own ``__init__`` with the arguments it takes.

    Its spec config is upstream's own class where the loaded tree ``up`` has one
    (:func:`regress.sandbox.drafts.spec_config`).
    """
    mode = spec_mode(worker)
    config = (
        drafts.spec_config(up, worker.name, k, mode)
        if up is not None
        else drafts.FakeSpecConfig(k, mode)
    )
    params = inspect.signature(worker.cls.__init__).parameters
    kwargs: dict[str, Any] = {}
    for name, value in (
        ("mapping", None),
        ("model_config", None),
        ("use_separate_draft_kv_cache", separate_draft_kv),
    ):
        if name in params:
            kwargs[name] = value
    return worker.cls(config, **kwargs)


@dataclass
class Plan:
    """One forward's inputs to a worker and the acceptance regress expects back."""

    kwargs: dict[str, Any]
    accepted: list[int]
    draft_model: drafts.FakeDraftModel


def forward_inputs(
    worker: WorkerClass,
    md: Any,
    *,
    k: int,
    runtime_draft_len: int,
    num_accepted: Sequence[int],
    resource_manager: Any = None,
) -> Plan:
    """Inputs for one target forward on ``md``'s prepared layout.

    ``num_accepted`` counts the bonus token per request (1..K+1), as upstream's
    ``num_accepted_tokens``; context requests always accept 1.
    """
    import torch

    bs, nc = int(md.num_seqs), int(md.num_contexts)
    ng = bs - nc
    seq_lens = [int(x) for x in md.seq_lens.tolist()]
    n = sum(seq_lens)
    r = runtime_draft_len
    accepted = [1] * nc + [max(1, min(int(a), r + 1)) for a in list(num_accepted)[nc:bs]]
    target = [[(7 * g + 3 * j + 1) % drafts.VOCAB for j in range(r + 1)] for g in range(ng)]
    draft = [
        [t if j < accepted[nc + g] - 1 else (t + 1) % drafts.VOCAB for j, t in enumerate(row[:r])]
        for g, row in enumerate(target)
    ]
    rows = [(5 * c + 2) % drafts.VOCAB for c in range(nc)] + [t for row in target for t in row]
    logits = torch.full((len(rows), drafts.VOCAB), -4.0)
    logits[torch.arange(len(rows)), torch.tensor(rows, dtype=torch.long)] = 4.0
    cached = list(getattr(md.kv_cache_params, "num_cached_tokens_per_seq", None) or [0] * bs)
    positions = [c + i for c, s in zip(cached, seq_lens, strict=False) for i in range(s)]
    ends = torch.cumsum(torch.tensor(seq_lens), 0) - 1
    draft_model = drafts.FakeDraftModel(
        num_layers=max(k, 1), returns_pair=KINDS[worker.name]["pair"]
    )
    hidden = torch.tanh(torch.arange(n * drafts.HIDDEN, dtype=torch.float32) * 0.01)
    spec = drafts.FakeSpecMetadata(
        max_num_requests=max(bs, int(getattr(md, "max_num_requests", bs))),
        max_draft_len=k,
        runtime_draft_len=r,
        request_ids=list(md.request_ids or range(bs)),
        draft_tokens=torch.tensor([t for row in draft for t in row], dtype=torch.int32),
        gather_ids=ends[:nc].to(torch.long),
        num_tokens=n,
        hidden_states=hidden.reshape(n, drafts.HIDDEN),
    )
    values = {
        "input_ids": torch.tensor(
            [(3 * t + 5) % drafts.VOCAB for t in range(n)], dtype=torch.int32
        ),
        "position_ids": torch.tensor([positions], dtype=torch.int32),
        "hidden_states": hidden.reshape(n, drafts.HIDDEN),
        "logits": logits,
        "attn_metadata": md,
        "spec_metadata": spec,
        "draft_model": draft_model,
        "resource_manager": resource_manager,
        "is_warmup": False,
    }
    from regress.sandbox.cuda import on_executor_device

    for fake in (draft_model, spec, spec.mtp_hidden_states_manager):
        on_executor_device(fake)  # natively on the GPU, as the executor's are
    for name in ("input_ids", "position_ids", "hidden_states", "logits"):
        values[name] = on_executor_device(values[name])
    params = inspect.signature(getattr(worker.cls, worker.method)).parameters
    accepts_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {name: v for name, v in values.items() if name in params or accepts_all}
    return Plan(kwargs, accepted, draft_model)


def check_acceptance(plan: Plan, result: Any, num_contexts: int) -> None:
    """The worker accepted what regress planned; otherwise the inputs are wrong (a driver error)."""
    lens = result.get("new_tokens_lens") if isinstance(result, dict) else None
    if lens is None:
        return  # skip_drafting on runtime_draft_len == 0 accepts the bonus only
    got = [int(x) for x in lens.tolist()][num_contexts:]
    want = plan.accepted[num_contexts:]
    if got != want:
        raise RuntimeError(
            f"the worker accepted {got} tokens per generation request where regress planned "
            f"{want}: regress's logits/draft tokens do not drive this worker as intended"
        )
