"""The ``LLM(...)`` arguments of one acceptance run: plain data first, TensorRT-LLM objects lazily."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from regress.errors import EngineError, MissingDependencyError, UsageError


def graph_batch_sizes(max_batch: int) -> tuple[int, ...]:
    """The captured CUDA-graph batch sizes for ``max_batch`` (the acceptance engine's choice).

    Powers of two up to the batch plus the batch itself: with ``enable_padding`` the tail wave of
    a run (80 prompts at batch 32 leave 16) still replays a graph instead of running eager.
    """
    sizes = {max_batch}
    n = 1
    while n < max_batch:
        sizes.add(n)
        n *= 2
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class LlmSpec:
    """Everything passed to ``tensorrt_llm.LLM`` for one case, as JSON-friendly data.

    Attributes:
        model: checkpoint directory (or a directory holding only ``config.json`` for dummy loads).
        tensor_parallel_size: TP size (``tensor_parallel_size``).
        moe_expert_parallel_size: EP size, or None for the TensorRT-LLM default.
        max_batch_size: the scheduler's batch cap; equal to the case's batch so that the batch
            size under test is really reached and never exceeded.
        max_draft_len: K, the number of MTP draft tokens per step.
        mtp_eagle_one_model: one-model MTP-Eagle (the path with the draft loop under test).
        cuda_graph_batch_sizes: captured batch sizes, or None for CUDA graphs off.
        cuda_graph_padding: ``CudaGraphConfig.enable_padding``.
        free_gpu_memory_fraction: ``KvCacheConfig.free_gpu_memory_fraction``.
        enable_block_reuse: ``KvCacheConfig.enable_block_reuse``; off so that prompts sharing a
            chat-template prefix cost the same context work at every batch size.
        load_format: ``"auto"`` for real weights, ``"dummy"`` for random weights from config.json.
        enable_iter_perf_stats: needed for ``llm.get_stats()`` spec-decoding counters.
        moe_backend: ``MoeConfig(backend=...)``, or None for the default.
        moe_max_num_tokens: ``MoeConfig(max_num_tokens=...)``, or None for the default.
        enable_attention_dp: attention data parallelism.
        max_seq_len: or None for the checkpoint's limit.
        skip_tokenizer_init: for dummy checkpoints that ship no tokenizer (prompts are token ids).
        extra: further ``LLM`` keyword arguments, passed through unchanged.
    """

    model: str
    tensor_parallel_size: int = 1
    moe_expert_parallel_size: int | None = None
    max_batch_size: int = 1
    max_draft_len: int = 1
    mtp_eagle_one_model: bool = True
    cuda_graph_batch_sizes: tuple[int, ...] | None = None
    cuda_graph_padding: bool = True
    free_gpu_memory_fraction: float = 0.7
    enable_block_reuse: bool = False
    load_format: str = "auto"
    enable_iter_perf_stats: bool = True
    moe_backend: str | None = None
    moe_max_num_tokens: int | None = None
    enable_attention_dp: bool = False
    max_seq_len: int | None = None
    skip_tokenizer_init: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_draft_len < 1:
            raise UsageError(f"max_draft_len must be >= 1 for MTP, got {self.max_draft_len}")
        if self.max_batch_size < 1 or self.tensor_parallel_size < 1:
            raise UsageError(
                f"max_batch_size and tensor_parallel_size must be >= 1, got "
                f"{self.max_batch_size} and {self.tensor_parallel_size}"
            )
        if self.cuda_graph_batch_sizes is not None and (
            not self.cuda_graph_batch_sizes
            or max(self.cuda_graph_batch_sizes) < self.max_batch_size
        ):
            raise UsageError(
                f"cuda_graph_batch_sizes {self.cuda_graph_batch_sizes} must reach max_batch_size "
                f"{self.max_batch_size}, or the largest batch runs eager; use graph_batch_sizes()"
            )

    @property
    def cuda_graph(self) -> bool:
        return self.cuda_graph_batch_sizes is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form, for reports and for the record of what ran."""
        data = asdict(self)
        if self.cuda_graph_batch_sizes is not None:
            data["cuda_graph_batch_sizes"] = list(self.cuda_graph_batch_sizes)
        return data


def build_spec(
    model: str,
    *,
    batch_size: int,
    max_draft_len: int,
    cuda_graph: bool,
    tensor_parallel_size: int = 1,
    **options: Any,
) -> LlmSpec:
    """The spec of one (batch, K, graph) case; ``options`` are further ``LlmSpec`` fields."""
    return LlmSpec(
        model=model,
        tensor_parallel_size=tensor_parallel_size,
        max_batch_size=batch_size,
        max_draft_len=max_draft_len,
        cuda_graph_batch_sizes=graph_batch_sizes(batch_size) if cuda_graph else None,
        **options,
    )


def _field_names(cls: type) -> set[str]:
    """Constructor field names of a pydantic model (v2 or v1) or a dataclass."""
    for attr in ("model_fields", "__fields__", "__dataclass_fields__"):
        names = getattr(cls, attr, None)
        if names:
            return set(names)
    return set()


def mtp_kwargs(config_cls: type, max_draft_len: int, one_model: bool) -> dict[str, Any]:
    """``MTPDecodingConfig`` arguments that give K draft tokens on the TensorRT-LLM at hand.

    ``num_nextn_predict_layers=K`` whenever the class declares it, as upstream's own
    ``TestDeepSeekV32`` passes it: it is the one spelling every release read honours.
    ``max_draft_len`` is an inherited ``DecodingBaseConfig`` field, so declaring it proves
    nothing: in the ~1.2 ``tensorrt_llm/llmapi/llm_args.py`` the after-validator
    ``MTPDecodingConfig.set_max_total_draft_tokens`` sets ``max_draft_len =
    num_nextn_predict_layers`` (default 1), silently turning ``max_draft_len=4`` into K = 1;
    releases between map ``num_nextn_predict_layers`` onto ``max_draft_len`` in ``__init__``
    (read through the code index of NVIDIA/TensorRT-LLM; the oldest read, @ fcd3f316, has only
    ``num_nextn_predict_layers``). ``max_draft_len`` is passed only to a class without
    ``num_nextn_predict_layers`` (a release that dropped the deprecated name) or one that
    declares no fields at all. :func:`effective_draft_len` checks the result either way.
    The newest read, @ 00043967, still declares ``num_nextn_predict_layers`` (an internal field
    filled from the checkpoint, "do not set manually") and a ``mode="before"`` validator moves a
    passed ``num_nextn_predict_layers`` onto ``max_draft_len`` with a deprecation warning; the
    ~1.2 after-validator is code index stored id 7019226376.
    """
    names = _field_names(config_cls)
    kwargs: dict[str, Any] = {}
    if "num_nextn_predict_layers" in names:
        kwargs["num_nextn_predict_layers"] = max_draft_len
    else:
        kwargs["max_draft_len"] = max_draft_len
    if "mtp_eagle_one_model" in names or not names:
        kwargs["mtp_eagle_one_model"] = one_model
    elif one_model is False:
        raise UsageError(
            f"{config_cls.__name__} has no mtp_eagle_one_model field; two-model MTP-Eagle cannot "
            "be requested on this TensorRT-LLM"
        )
    return kwargs


def effective_draft_len(config: Any) -> int | None:
    """The K a built ``MTPDecodingConfig`` will run with, or None when it does not say.

    ``max_draft_len`` once the validators have run (what the executor reads), else
    ``num_nextn_predict_layers`` (releases before ``max_draft_len`` existed). None only for
    objects exposing neither, such as test doubles.
    """
    for name in ("max_draft_len", "num_nextn_predict_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def build_mtp_config(llmapi: Any, max_draft_len: int, one_model: bool = True) -> Any:
    """Build ``llmapi.MTPDecodingConfig`` for K draft tokens and prove it will run K.

    Raises:
        EngineError: when the built config reports another K, with both numbers, so that a
            case (or a bisect step) never compares K = 4 against a silent K = 1.
    """
    cls = llmapi.MTPDecodingConfig
    kwargs = mtp_kwargs(cls, max_draft_len, one_model)
    config = cls(**kwargs)
    effective = effective_draft_len(config)
    if effective is not None and effective != max_draft_len:
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise EngineError(
            f"asked for K={max_draft_len} draft tokens but {cls.__name__}({args}) reports "
            f"max_draft_len={effective} on this TensorRT-LLM: the case would run K={effective}. "
            "Check how this release spells the draft length (llmapi/llm_args.py "
            "MTPDecodingConfig) and update regress.trtllm.llm_config.mtp_kwargs"
        )
    return config


def to_llm_kwargs(spec: LlmSpec, llmapi: Any = None) -> dict[str, Any]:
    """Turn a spec into ``LLM(**kwargs)`` arguments holding real TensorRT-LLM config objects.

    Args:
        spec: the plain-data spec.
        llmapi: a namespace with ``MTPDecodingConfig``, ``CudaGraphConfig``, ``KvCacheConfig`` and
            ``MoeConfig``; ``tensorrt_llm.llmapi`` (imported here, lazily) when None. Tests pass a
            fake namespace.

    Raises:
        MissingDependencyError: when ``llmapi`` is None and tensorrt_llm is not importable.
        EngineError: when the MTP config would not run the spec's K (:func:`build_mtp_config`).
    """
    if llmapi is None:
        try:
            import tensorrt_llm.llmapi as llmapi
        except ImportError as exc:
            raise MissingDependencyError(
                f"Building LLM arguments needs tensorrt_llm.llmapi ({exc}). Install tensorrt_llm "
                "or run where it is installed."
            ) from exc
    kwargs: dict[str, Any] = {
        "model": spec.model,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "max_batch_size": spec.max_batch_size,
        "speculative_config": build_mtp_config(
            llmapi, spec.max_draft_len, spec.mtp_eagle_one_model
        ),
        "cuda_graph_config": (
            llmapi.CudaGraphConfig(
                batch_sizes=list(spec.cuda_graph_batch_sizes),
                enable_padding=spec.cuda_graph_padding,
            )
            if spec.cuda_graph_batch_sizes is not None
            else None
        ),
        "kv_cache_config": llmapi.KvCacheConfig(
            free_gpu_memory_fraction=spec.free_gpu_memory_fraction,
            enable_block_reuse=spec.enable_block_reuse,
        ),
        "load_format": spec.load_format,
        "enable_iter_perf_stats": spec.enable_iter_perf_stats,
    }
    if spec.moe_expert_parallel_size is not None:
        kwargs["moe_expert_parallel_size"] = spec.moe_expert_parallel_size
    moe = {
        name: value
        for name, value in (
            ("backend", spec.moe_backend),
            ("max_num_tokens", spec.moe_max_num_tokens),
        )
        if value is not None
    }
    if moe:
        kwargs["moe_config"] = llmapi.MoeConfig(**moe)
    if spec.enable_attention_dp:
        kwargs["enable_attention_dp"] = True
    if spec.max_seq_len is not None:
        kwargs["max_seq_len"] = spec.max_seq_len
    if spec.skip_tokenizer_init:
        kwargs["skip_tokenizer_init"] = True
    kwargs.update(spec.extra)
    return kwargs


def describe(spec: LlmSpec) -> str:
    """A short id for logs and test ids: ``b8-k4-graph``."""
    return f"b{spec.max_batch_size}-k{spec.max_draft_len}-{'graph' if spec.cuda_graph else 'eager'}"
