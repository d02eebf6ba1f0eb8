"""The collaborators regress hands upstream's speculative worker: a small draft model of our own.

Upstream's one-model workers (``tensorrt_llm/_torch/speculative/eagle3.py``, ``mtp.py``,
``draft_target.py``) take the target model's logits and hidden states, a spec config, spec
metadata and the draft model, and run the draft loop on the attention metadata. Everything here
stands in for what the model engine would pass; none of it is upstream code, and the attention
metadata the worker drives is upstream's own. The draft model is deterministic (fixed weights from
a seeded generator) and returns tensors of the shapes the workers index: hidden states
``[tokens, hidden]`` and logits ``[rows, vocab]``. It calls :attr:`FakeDraftModel.on_forward` with
the attention metadata at every draft forward, the point where a real draft layer's attention
kernels would read the DSA maps.

This module is one of the sandbox's (:data:`regress.sandbox.blame.SANDBOX_MODULES`): a fake
here that upstream's call does not fit (a missing attribute, an argument it does not take) is a
gap, never a verdict on the tree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from regress.sandbox.llm_args import LLM_ARGS  # the module holding upstream's config classes

#: Hidden size and vocabulary of the fake draft model: small, any size works.
HIDDEN, VOCAB = 16, 64


class DraftModelFailure(RuntimeError):
    """What :class:`FakeDraftModel` raises in its ``fail_at`` step: a draft step that fails."""


def _weights(seed: int, *shape: int) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen) * 0.5


#: What the configs of a separate draft model are given as ``speculative_model``: upstream's
#: ``EagleDecodingConfig`` and ``DraftTargetDecodingConfig`` refuse None ("Draft model must be
#: provided for EAGLE", ``llm_args.py`` @ 00043967) and only the executor reads the checkpoint;
#: here the draft model is regress's own (:class:`FakeDraftModel`).
DRAFT_MODEL = "regress-fake-draft-model"

#: Upstream's speculative-decoding config class per worker (``tensorrt_llm/llmapi/llm_args.py``:
#: ``MTPDecodingConfig``, ``EagleDecodingConfig``, ...), the first one the tree defines is used,
#: and the fields regress sets where the class declares them (``{k}``: the draft length).
SPEC_CONFIGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "MTPEagleWorker": (
        ("MTPDecodingConfig",),
        {
            "max_draft_len": "{k}",
            "num_nextn_predict_layers": "{k}",
            "mtp_eagle_one_model": True,
            "use_mtp_vanilla": False,
        },
    ),
    "MTPWorker": (
        ("MTPDecodingConfig",),
        {"max_draft_len": "{k}", "num_nextn_predict_layers": "{k}", "use_mtp_vanilla": True},
    ),
    "Eagle3OneModelWorker": (
        ("Eagle3DecodingConfig", "EagleDecodingConfig"),
        {"max_draft_len": "{k}", "eagle3_one_model": True, "speculative_model": DRAFT_MODEL},
    ),
    "DraftTargetOneModelWorker": (
        ("DraftTargetDecodingConfig",),
        {"max_draft_len": "{k}", "speculative_model": DRAFT_MODEL},
    ),
}


def spec_config(up: Any, worker: str, k: int, mode: Any) -> Any:
    """The spec config ``worker`` is built with: upstream's own class where the tree has one.

    Upstream's config classes drift (``MTPWorker.__init__`` reads ``spec_config.sa_config``, a
    field :class:`FakeSpecConfig` lacked), so the tree's ``llm_args.py`` is executed in the
    sandbox and its class built with the draft length; :class:`FakeSpecConfig` is the fallback
    for a tree without that file, or whose file cannot load here. The ledger says which, and why.
    """
    names, wanted = SPEC_CONFIGS.get(worker, ((), {}))
    module, why = llm_args_module(up)
    cls = next((getattr(module, n) for n in names if hasattr(module, n)), None)
    if module is not None and cls is None:
        why = f"{LLM_ARGS} defines none of {', '.join(names) or 'the config classes'}"
    if cls is not None:
        try:
            config, fields = _build_config(cls, wanted, k, mode)
        except Exception as exc:  # upstream's validators refused regress's fields
            why = f"{cls.__name__}(...) raised {type(exc).__name__}: {exc}"
        else:
            up.ledger.note(
                "collaborator",
                f"spec_config for {worker}",
                f"upstream {cls.__name__} from {LLM_ARGS}, fields set: {fields}",
            )
            return config
    up.ledger.note(
        "collaborator", f"spec_config for {worker}", f"regress FakeSpecConfig (fallback: {why})"
    )
    return FakeSpecConfig(k, mode)


def llm_args_module(up: Any) -> tuple[Any, str]:
    """The tree's ``llm_args`` module, or None and why not: loaded once per run and session kind.

    Loaded in a session of its own (:func:`regress.sandbox.llm_args.llm_args_session`, with its
    stand-ins for the compiled bindings): the tree may have imported ``llm_args`` already, and
    then this session holds its stub (era-B ``speculative/interface.py`` imports
    ``AdvancedSamplingMode`` from it at module level). The config is built back in this session,
    so the imports its properties make (``spec_dec_mode``) reach the worker's own modules. Every
    matrix cell is a session of its own; the cells that would load it alike share one load
    (:func:`_session_kind`), as a whole ``--matrix full`` otherwise loads it once per cell.
    """
    loads = up.plan.llm_args_loads
    kind = _session_kind(up.sandbox)
    if kind not in loads:
        loads[kind] = _load_llm_args(up)
    return loads[kind]


def _session_kind(sandbox: Any) -> tuple[Any, ...]:
    """What a load of ``llm_args.py`` depends on besides the tree: the modules run from source,
    the environment and the stubs' answers (the SM a validator may ask), each named by its why."""
    answers = sorted(
        (module, name, entry[1])
        for module, names in sandbox.values.items()
        for name, entry in names.items()
    )
    env = sorted(sandbox.env.items(), key=lambda item: item[0])
    return (tuple(sorted(sandbox.real)), tuple(env), tuple(answers))


def _load_llm_args(up: Any) -> tuple[Any, str]:
    from regress.sandbox.llm_args import llm_args_file, llm_args_session

    path = llm_args_file(up.plan.checkout)
    if not path.is_file():
        return None, f"the tree has no {path.relative_to(up.plan.checkout)}"

    try:
        with llm_args_session(up) as module:
            return module, ""
    except Exception as exc:  # upstream's module needs what the sandbox lacks
        from regress.sandbox.blame import blame, describe

        reason = describe(exc, blame(exc, up.plan.checkout))
        return None, f"{LLM_ARGS} cannot load in the sandbox: {reason}"


def _declared(cls: type) -> set[str]:
    import inspect

    fields = set(getattr(cls, "model_fields", {}) or {})
    fields |= set(getattr(cls, "__dataclass_fields__", {}))
    if not fields:
        params = inspect.signature(cls).parameters
        fields = {n for n, p in params.items() if p.kind is not p.VAR_KEYWORD}
    return fields


def _build_config(cls: type, wanted: dict[str, Any], k: int, mode: Any) -> tuple[Any, list[str]]:
    declared = _declared(cls)
    kwargs = {n: (k if v == "{k}" else v) for n, v in wanted.items() if n in declared}
    config = cls(**kwargs)
    got = getattr(config, "spec_dec_mode", None)
    if got is not None and got != mode and getattr(got, "name", got) != getattr(mode, "name", mode):
        raise ValueError(f"its spec_dec_mode is {got}, the worker runs {mode}")
    return config, sorted(kwargs)


class FakeSpecConfig:
    """The fallback spec config (shape of ``MTPDecodingConfig`` / ``EagleDecodingConfig``).

    Attributes:
        max_draft_len: K.
        spec_dec_mode: upstream's own ``SpeculativeDecodingMode`` member when the tree has one.
        num_nextn_predict_layers: K, for the vanilla MTP worker.
    """

    use_relaxed_acceptance_for_thinking = False
    use_sa_spec = False
    #: No suffix-automaton enhancer: ``MTPWorker.__init__`` (``speculative/mtp.py`` @ 9eabd2df)
    #: reads ``spec_config.sa_config`` and builds one only when it is not None.
    sa_config = None
    draft_offload_enabled = False
    draft_offload_v2 = False

    def __init__(self, max_draft_len: int, spec_dec_mode: Any) -> None:
        self.max_draft_len = max_draft_len
        self.num_nextn_predict_layers = max_draft_len
        self.max_total_draft_tokens = max_draft_len
        self.spec_dec_mode = spec_dec_mode


class FakeHiddenStatesManager:
    """The vanilla MTP worker's past-token and past-hidden-state pools (``MTPHiddenStatesManager``)."""

    def __init__(self, max_requests: int, k: int) -> None:
        import torch

        self.mtp_past_hidden_states_pool = _weights(7, max_requests, k, HIDDEN)
        self.mtp_past_tokens_pool = (
            torch.arange(max_requests * k, dtype=torch.int32).reshape(max_requests, k) % VOCAB
        )


class FakeSpecMetadata:
    """What the model engine's spec metadata gives the worker for one forward.

    Greedy sampling only (``allow_advanced_sampling`` False): the target tokens are the argmax of
    the logits regress builds, so the accepted count per request is the one regress planned.
    """

    allow_advanced_sampling = False
    is_cuda_graph = False
    is_all_greedy_sample = True
    use_rejection_sampling = False
    wants_advanced_draft_sampling = False
    spec_resource_manager = None
    all_rank_num_tokens = None
    all_rank_num_seqs = None
    subseq_all_rank_num_tokens = None
    is_spec_dec_tree = False
    is_spec_dec_dynamic_tree = False

    def __init__(
        self,
        *,
        max_num_requests: int,
        max_draft_len: int,
        runtime_draft_len: int,
        request_ids: list[int],
        draft_tokens: Any,
        gather_ids: Any,
        num_tokens: int,
        hidden_states: Any,
    ) -> None:
        import torch

        self.max_num_requests = max_num_requests
        self.max_draft_len = max_draft_len
        self.max_total_draft_tokens = max_draft_len
        self.runtime_draft_len = runtime_draft_len
        self.runtime_tokens_per_gen_step = runtime_draft_len + 1
        self.request_ids = list(request_ids)
        self.draft_tokens = draft_tokens
        self.gather_ids = gather_ids
        self.num_tokens = num_tokens
        self.batch_indices_cuda = torch.arange(max_num_requests, dtype=torch.int32)
        # Eagle3 (not MTP-Eagle) projects captured hidden states through apply_eagle3_fc.
        self.hidden_size = HIDDEN
        self.layers_to_capture = (0,)
        self.hidden_states = hidden_states
        # The vanilla MTP worker's slots and past pools.
        self.slot_ids = torch.arange(max_num_requests, dtype=torch.long)
        self.draft_token_indices_cuda = torch.arange(max_draft_len)
        self.mtp_hidden_states_manager = FakeHiddenStatesManager(max_num_requests, max_draft_len)


class FakeDraftLayer:
    """One MTP layer, called with the embedding, the input ids, the hidden states and the rest."""

    def __init__(self, model: FakeDraftModel, index: int) -> None:
        self.model = model
        self.index = index

    def __call__(self, **inputs: Any) -> Any:
        """Called with keywords only, as every worker calls its draft layers."""
        return self.model.forward_inputs(inputs)

    def shared_head(
        self, hidden_states: Any, lm_head: Any, attn_metadata: Any, return_context_logits=False
    ) -> Any:
        return self.model.logits_processor(
            hidden_states, lm_head, attn_metadata, return_context_logits
        )


class FakeDraftNet:
    """``draft_model.model`` of Eagle3 / DraftTarget: hidden states, optionally with a copy to save."""

    d2t = None

    def __init__(self, model: FakeDraftModel, returns_pair: bool) -> None:
        self.model = model
        self.returns_pair = returns_pair

    def __call__(self, **inputs: Any) -> Any:
        out = self.model.forward_inputs(inputs)
        return (out, out.clone()) if self.returns_pair else out


class FakeDraftModel:
    """A deterministic draft model with the attributes every one-model worker reads.

    Args:
        num_layers: MTP layers (the vanilla MTP worker runs each once per draft step).
        returns_pair: whether ``model(...)`` returns ``(hidden, hidden_to_save)`` (Eagle3).

    Attributes (set by the scenario that drives it):
        on_forward: called with the attention metadata at every draft forward, before it returns.
        fail_at: the draft step (0-based forward) that raises :class:`DraftModelFailure` after
            ``on_forward``, or None.
    """

    def __init__(self, *, num_layers: int, returns_pair: bool) -> None:
        self.on_forward: Callable[[Any], None] = lambda md: None
        self.embed = _weights(1, VOCAB, HIDDEN)
        self.w_hidden = _weights(2, HIDDEN, HIDDEN)
        self.lm_head = _weights(3, VOCAB, HIDDEN)
        self.embed_tokens = self.embed
        self.mtp_layers = [FakeDraftLayer(self, i) for i in range(num_layers)]
        self.model = FakeDraftNet(self, returns_pair)
        self.forwards = 0
        self.fail_at: int | None = None

    def forward_inputs(self, inputs: dict[str, Any]) -> Any:
        """One draft forward: the metadata is looked at first, then hidden states come back."""
        from regress.sandbox.cuda import regress_side

        self.forwards += 1
        self.on_forward(inputs["attn_metadata"])
        if self.fail_at is not None and self.forwards - 1 == self.fail_at:
            raise DraftModelFailure(f"the draft model failed in draft step {self.fail_at}")
        with regress_side():
            return self._hidden(
                inputs["input_ids"], inputs.get("position_ids"), inputs.get("hidden_states")
            )

    def _hidden(self, input_ids: Any, position_ids: Any, hidden: Any) -> Any:
        import torch

        ids = input_ids.long().reshape(-1) % VOCAB
        out = self.embed[ids]
        if hidden is not None and hidden.dim() == 2 and hidden.shape[0] == ids.shape[0]:
            out = out + hidden.float()[:, :HIDDEN] @ self.w_hidden
        if position_ids is not None and position_ids.numel() == ids.shape[0]:
            out = out + 0.01 * position_ids.reshape(-1, 1).float()
        return torch.tanh(out)

    def apply_eagle3_fc(self, hidden_states: Any) -> Any:
        return hidden_states[:, :HIDDEN].float()

    def logits_processor(
        self, hidden_states: Any, lm_head: Any, attn_metadata: Any, return_context_logits=False
    ) -> Any:
        """Every row's logits, or only each sequence's last token's (upstream's LogitsProcessor)."""
        import torch

        logits = hidden_states.float() @ self.lm_head.T
        if return_context_logits:
            return logits
        last = torch.cumsum(attn_metadata.seq_lens_cuda, dim=0, dtype=torch.long) - 1
        return logits[last]


class FakeResourceManager:
    """The engine's resource manager: hands the worker a separate draft KV-cache manager."""

    def __init__(self, draft_kv_cache_manager: Any) -> None:
        self.draft_kv_cache_manager = draft_kv_cache_manager

    def get_resource_manager(self, kind: Any) -> Any:
        return self.draft_kv_cache_manager
