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


#: ``CudaGraphConfig()``'s largest captured batch when neither ``batch_sizes`` nor
#: ``max_batch_size`` is given (``BaseCudaGraphConfig.validate_base_cuda_graph_config`` in
#: ``tensorrt_llm/llmapi/llm_args.py`` @ 00043967: "a default max_batch_size of 128 is used").
CUDA_GRAPH_DEFAULT_MAX_BATCH = 128


@dataclass(frozen=True)
class CudaGraphSpec:
    """``CudaGraphConfig(...)`` arguments; a field left None is not passed (upstream's default).

    Upstream's tests pass ``CudaGraphConfig(max_batch_size=128, enable_padding=True)`` (GLM-5.2)
    or a bare ``CudaGraphConfig()`` (DeepSeek-V3.2) and let the config generate the captured
    sizes; :func:`build_spec` passes explicit ``batch_sizes`` for checkpoint-free runs.
    """

    batch_sizes: tuple[int, ...] | None = None
    max_batch_size: int | None = None
    enable_padding: bool | None = None

    @property
    def largest(self) -> int:
        """The largest batch that replays a graph (larger batches would run eager)."""
        if self.batch_sizes:
            return max(self.batch_sizes)
        return self.max_batch_size or CUDA_GRAPH_DEFAULT_MAX_BATCH

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments to pass, ``batch_sizes`` as a list."""
        out: dict[str, Any] = {}
        if self.batch_sizes is not None:
            out["batch_sizes"] = list(self.batch_sizes)
        if self.max_batch_size is not None:
            out["max_batch_size"] = self.max_batch_size
        if self.enable_padding is not None:
            out["enable_padding"] = self.enable_padding
        return out


#: How ``MTPDecodingConfig`` is told K: upstream's GLM-5.2 test passes ``max_draft_len``,
#: its DeepSeek-V3.2 test ``num_nextn_predict_layers`` (see :func:`build_mtp_config`).
MTP_SPELLINGS = ("max_draft_len", "num_nextn_predict_layers")


@dataclass(frozen=True)
class LlmSpec:
    """Everything passed to ``tensorrt_llm.LLM`` for one case, as JSON-friendly data.

    A field left None is not passed, so TensorRT-LLM's default applies, as when upstream's test
    does not pass it. ``regress.trtllm.cases`` fills these from upstream's tests field by field.

    Attributes:
        model: checkpoint directory (or a directory holding only ``config.json`` for dummy loads).
        tensor_parallel_size: TP size (``tensor_parallel_size``).
        pipeline_parallel_size: PP size, or None.
        moe_expert_parallel_size: EP size, or None for the TensorRT-LLM default.
        max_batch_size: the scheduler's batch cap, or None; the matrix pins it to the case's
            batch so that the batch size under test is reached and never exceeded.
        max_draft_len: K, the number of MTP draft tokens per step.
        mtp_spelling: how K is passed first (:data:`MTP_SPELLINGS`), or None for the spelling
            every release honours (:func:`mtp_kwargs`).
        mtp_eagle_one_model: one-model MTP-Eagle (the path with the draft loop under test).
        cuda_graph_config: ``CudaGraphConfig`` arguments, or None for CUDA graphs off.
        free_gpu_memory_fraction: ``KvCacheConfig.free_gpu_memory_fraction``, or None.
        enable_block_reuse: ``KvCacheConfig.enable_block_reuse``, or None (upstream default on).
        use_kv_cache_manager_v2: ``KvCacheConfig.use_kv_cache_manager_v2``, or None ("auto").
        kv_cache_max_tokens: ``KvCacheConfig.max_tokens``, or None.
        load_format: ``"dummy"`` for random weights from config.json, or None (real weights).
        enable_iter_perf_stats: needed for ``llm.get_stats()`` spec-decoding counters.
        moe_backend: ``MoeConfig(backend=...)``, or None for the default.
        moe_max_num_tokens: ``MoeConfig(max_num_tokens=...)``, or None for the default.
        enable_attention_dp: attention data parallelism, or None.
        disable_overlap_scheduler: or None.
        enable_chunked_prefill: or None.
        max_num_tokens: or None.
        max_seq_len: or None for the checkpoint's limit.
        sparse_attention: ``DeepSeekSparseAttentionConfig`` arguments, or None.
        skip_tokenizer_init: for dummy checkpoints that ship no tokenizer (prompts are token ids).
        extra: further ``LLM`` keyword arguments, passed through unchanged.
    """

    model: str
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int | None = None
    moe_expert_parallel_size: int | None = None
    max_batch_size: int | None = 1
    max_draft_len: int = 1
    mtp_spelling: str | None = None
    mtp_eagle_one_model: bool = True
    cuda_graph_config: CudaGraphSpec | None = None
    free_gpu_memory_fraction: float | None = 0.7
    enable_block_reuse: bool | None = False
    use_kv_cache_manager_v2: bool | None = None
    kv_cache_max_tokens: int | None = None
    load_format: str | None = None
    enable_iter_perf_stats: bool = True
    moe_backend: str | None = None
    moe_max_num_tokens: int | None = None
    enable_attention_dp: bool | None = None
    disable_overlap_scheduler: bool | None = None
    enable_chunked_prefill: bool | None = None
    max_num_tokens: int | None = None
    max_seq_len: int | None = None
    sparse_attention: dict[str, Any] | None = None
    skip_tokenizer_init: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_draft_len < 1:
            raise UsageError(f"max_draft_len must be >= 1 for MTP, got {self.max_draft_len}")
        if (self.max_batch_size is not None and self.max_batch_size < 1) or (
            self.tensor_parallel_size < 1
        ):
            raise UsageError(
                f"max_batch_size and tensor_parallel_size must be >= 1, got "
                f"{self.max_batch_size} and {self.tensor_parallel_size}"
            )
        if self.mtp_spelling is not None and self.mtp_spelling not in MTP_SPELLINGS:
            raise UsageError(
                f"mtp_spelling must be one of {', '.join(MTP_SPELLINGS)}, got {self.mtp_spelling!r}"
            )
        graph = self.cuda_graph_config
        if graph is not None and graph.batch_sizes is not None and not graph.batch_sizes:
            raise UsageError("cuda_graph_config.batch_sizes is empty; give sizes or None")
        capped = graph is not None and self.max_batch_size is not None
        if capped and graph.largest < self.max_batch_size:
            raise UsageError(
                f"CUDA graphs reach batch {graph.largest} but max_batch_size is "
                f"{self.max_batch_size}, so the largest batches would run eager; use "
                "graph_batch_sizes() or a larger cuda_graph_config.max_batch_size"
            )

    @property
    def cuda_graph(self) -> bool:
        return self.cuda_graph_config is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form, for reports and for the record of what ran."""
        data = asdict(self)
        if self.cuda_graph_config is not None:
            data["cuda_graph_config"] = self.cuda_graph_config.kwargs()
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
    """The spec of one (batch, K, graph) run; ``options`` are further ``LlmSpec`` fields.

    For checkpoint-free runs (dummy weights, the smoke test): CUDA graphs capture
    :func:`graph_batch_sizes` of the batch, with padding.
    """
    graph = (
        CudaGraphSpec(batch_sizes=graph_batch_sizes(batch_size), enable_padding=True)
        if cuda_graph
        else None
    )
    return LlmSpec(
        model=model,
        tensor_parallel_size=tensor_parallel_size,
        max_batch_size=batch_size,
        max_draft_len=max_draft_len,
        cuda_graph_config=graph,
        **options,
    )


def _field_names(cls: type) -> set[str]:
    """Constructor field names of a pydantic model (v2 or v1) or a dataclass."""
    for attr in ("model_fields", "__fields__", "__dataclass_fields__"):
        names = getattr(cls, attr, None)
        if names:
            return set(names)
    return set()


def _spelling_for(names: set[str], spelling: str | None) -> str:
    """The field to pass K in: see :func:`mtp_kwargs`."""
    if spelling is None:
        nextn = "num_nextn_predict_layers" in names
        return "num_nextn_predict_layers" if nextn else "max_draft_len"
    if names and spelling not in names:
        return _other_spelling(spelling)
    return spelling


def mtp_kwargs(
    config_cls: type, max_draft_len: int, one_model: bool, spelling: str | None = None
) -> dict[str, Any]:
    """``MTPDecodingConfig`` arguments that give K draft tokens on the TensorRT-LLM at hand.

    With ``spelling`` None: ``num_nextn_predict_layers=K`` whenever the class declares it, the
    one spelling every release read honours. ``max_draft_len`` is an inherited
    ``DecodingBaseConfig`` field, so declaring it proves nothing: in the ~1.2
    ``tensorrt_llm/llmapi/llm_args.py`` the after-validator
    ``MTPDecodingConfig.set_max_total_draft_tokens`` sets ``max_draft_len =
    num_nextn_predict_layers`` (default 1), silently turning ``max_draft_len=4`` into K = 1;
    releases between map ``num_nextn_predict_layers`` onto ``max_draft_len`` in ``__init__``
    (read through the code index of NVIDIA/TensorRT-LLM; the oldest read, @ fcd3f316, has only
    ``num_nextn_predict_layers``). The newest read, @ 00043967, still declares
    ``num_nextn_predict_layers`` (an internal ``init=False`` field, "do not set manually") and
    its ``mode="before"`` validator ``_remap_deprecated_num_nextn_predict_layers`` moves a passed
    value onto ``max_draft_len`` with a deprecation warning; the ~1.2 after-validator is in a
    stored ~1.2 version of ``tensorrt_llm/llmapi/llm_args.py`` (commit unknown).

    With ``spelling`` given (upstream's test's own: ``max_draft_len`` in ``test_glm52.py``,
    ``num_nextn_predict_layers`` in ``TestDeepSeekV32``), that spelling, unless the class
    declares fields and that one is not among them (a release that dropped the deprecated name,
    or one older than ``max_draft_len``). :func:`build_mtp_config` proves the result and falls
    back.
    """
    names = _field_names(config_cls)
    kwargs: dict[str, Any] = {_spelling_for(names, spelling): max_draft_len}
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


def _other_spelling(spelling: str) -> str:
    return "num_nextn_predict_layers" if spelling == "max_draft_len" else "max_draft_len"


def build_mtp_config(
    llmapi: Any, max_draft_len: int, one_model: bool = True, spelling: str | None = None
) -> Any:
    """Build ``llmapi.MTPDecodingConfig`` for K draft tokens and prove it will run K.

    ``spelling`` is tried first (:func:`mtp_kwargs`); when the built config reports another K
    (``max_draft_len`` on a ~1.2 build is overwritten with ``num_nextn_predict_layers``'s default
    1), the other spelling is tried once, if the class declares it.

    Raises:
        EngineError: when no spelling gives K, with both numbers, so that a case (or a bisect
            step) never compares K = 4 against a silent K = 1.
    """
    cls = llmapi.MTPDecodingConfig
    kwargs = mtp_kwargs(cls, max_draft_len, one_model, spelling)
    config = cls(**kwargs)
    effective = effective_draft_len(config)
    if effective is not None and effective != max_draft_len and spelling is not None:
        other = _other_spelling(next(iter(kwargs)))
        if other in _field_names(cls):
            retry = mtp_kwargs(cls, max_draft_len, one_model, other)
            retried = cls(**retry)
            if effective_draft_len(retried) in (None, max_draft_len):
                return retried
    if effective is not None and effective != max_draft_len:
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise EngineError(
            f"asked for K={max_draft_len} draft tokens but {cls.__name__}({args}) reports "
            f"max_draft_len={effective} on this TensorRT-LLM: the case would run K={effective}. "
            "Check how this release spells the draft length (llmapi/llm_args.py "
            "MTPDecodingConfig) and update regress.trtllm.llm_config.mtp_kwargs"
        )
    return config


def _import_llmapi() -> Any:
    try:
        import tensorrt_llm.llmapi as llmapi
    except ImportError as exc:
        raise MissingDependencyError(
            f"Building LLM arguments needs tensorrt_llm.llmapi ({exc}). Install tensorrt_llm "
            "or run where it is installed."
        ) from exc
    return llmapi


def _kv_cache_config(spec: LlmSpec, llmapi: Any) -> Any:
    kv = {
        name: value
        for name, value in (
            ("free_gpu_memory_fraction", spec.free_gpu_memory_fraction),
            ("enable_block_reuse", spec.enable_block_reuse),
            ("use_kv_cache_manager_v2", spec.use_kv_cache_manager_v2),
            ("max_tokens", spec.kv_cache_max_tokens),
        )
        if value is not None
    }
    return llmapi.KvCacheConfig(**kv)


#: ``LLM`` keyword arguments passed as they are when set (None: not passed).
_PLAIN_OPTIONAL = (
    "pipeline_parallel_size",
    "moe_expert_parallel_size",
    "max_batch_size",
    "enable_attention_dp",
    "disable_overlap_scheduler",
    "enable_chunked_prefill",
    "max_num_tokens",
    "max_seq_len",
    "load_format",
)


def to_llm_kwargs(spec: LlmSpec, llmapi: Any = None) -> dict[str, Any]:
    """Turn a spec into ``LLM(**kwargs)`` arguments holding real TensorRT-LLM config objects.

    Args:
        spec: the plain-data spec.
        llmapi: a namespace with ``MTPDecodingConfig``, ``CudaGraphConfig``, ``KvCacheConfig``,
            ``MoeConfig`` and ``DeepSeekSparseAttentionConfig``; ``tensorrt_llm.llmapi``
            (imported here, lazily) when None. Tests pass a fake namespace.

    Raises:
        MissingDependencyError: when ``llmapi`` is None and tensorrt_llm is not importable.
        EngineError: when the MTP config would not run the spec's K (:func:`build_mtp_config`).
    """
    if llmapi is None:
        llmapi = _import_llmapi()
    graph = spec.cuda_graph_config
    kwargs: dict[str, Any] = {
        "model": spec.model,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "speculative_config": build_mtp_config(
            llmapi, spec.max_draft_len, spec.mtp_eagle_one_model, spec.mtp_spelling
        ),
        "cuda_graph_config": llmapi.CudaGraphConfig(**graph.kwargs()) if graph else None,
        "kv_cache_config": _kv_cache_config(spec, llmapi),
        "enable_iter_perf_stats": spec.enable_iter_perf_stats,
    }
    for name in _PLAIN_OPTIONAL:
        if getattr(spec, name) is not None:
            kwargs[name] = getattr(spec, name)
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
    if spec.sparse_attention is not None:
        kwargs["sparse_attention_config"] = llmapi.DeepSeekSparseAttentionConfig(
            **spec.sparse_attention
        )
    if spec.skip_tokenizer_init:
        kwargs["skip_tokenizer_init"] = True
    kwargs.update(spec.extra)
    return kwargs


def describe(spec: LlmSpec) -> str:
    """A short id for logs and test ids: ``b8-k4-graph``."""
    batch = spec.max_batch_size if spec.max_batch_size is not None else "default"
    return f"b{batch}-k{spec.max_draft_len}-{'graph' if spec.cuda_graph else 'eager'}"
