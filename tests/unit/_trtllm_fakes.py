"""Fake modules shared by the TensorRT-LLM unit tests."""

# Source of a stand-in for regress.dsa.sentinel: a violation whenever a metadata object is stale.
FAKE_SENTINEL_MODULE = """
class Sentinel:
    def __init__(self):
        self.violations = []

    def attach(self, metadata):
        inner = metadata.prepare

        def prepare():
            inner()
            if metadata.stale:
                self.violations.append({"check": "req_idx_map", "message": "stale map"})

        metadata.prepare = prepare
"""


class RecordedConfig:
    """A stand-in for a ``tensorrt_llm.llmapi`` config class: keeps what it was passed.

    Subclasses list their fields in ``model_fields`` (what ``llm_config._field_names`` reads);
    an argument outside them raises, as pydantic's ``StrictBaseModel`` does.
    """

    model_fields: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.model_fields)
        if self.model_fields and unknown:
            raise TypeError(f"{type(self).__name__}: unexpected {sorted(unknown)}")
        self.kwargs = dict(kwargs)
        for name in self.model_fields:
            setattr(self, name, kwargs.get(name))


class NewestMTPDecodingConfig(RecordedConfig):
    """``MTPDecodingConfig`` @ 00043967: ``max_draft_len`` honoured; a passed
    ``num_nextn_predict_layers`` moved onto it by the ``mode="before"`` validator."""

    model_fields = ("max_draft_len", "num_nextn_predict_layers", "mtp_eagle_one_model")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.max_draft_len is None:
            self.max_draft_len = kwargs.get("num_nextn_predict_layers")


def recording_llmapi():
    """A ``tensorrt_llm.llmapi`` namespace whose configs record their arguments (newest shape)."""
    from types import SimpleNamespace

    def config(name, *fields):
        return type(name, (RecordedConfig,), {"model_fields": fields})

    return SimpleNamespace(
        MTPDecodingConfig=NewestMTPDecodingConfig,
        CudaGraphConfig=config(
            "CudaGraphConfig", "batch_sizes", "max_batch_size", "enable_padding"
        ),
        KvCacheConfig=config(
            "KvCacheConfig",
            "free_gpu_memory_fraction",
            "enable_block_reuse",
            "use_kv_cache_manager_v2",
            "max_tokens",
        ),
        MoeConfig=config("MoeConfig", "backend", "max_num_tokens"),
        DeepSeekSparseAttentionConfig=config(
            "DeepSeekSparseAttentionConfig",
            "index_share_for_mtp_iteration",
            "enable_heuristic_topk",
        ),
    )


def flatten_llm_kwargs(kwargs):
    """``LLM(**kwargs)`` as ``{"kv_cache_config.free_gpu_memory_fraction": 0.7, ...}`` rows.

    A config object becomes one row per argument it was passed (``{}`` when passed none, as
    upstream's bare ``CudaGraphConfig()``); ``model`` is left out (a path, not a setting).
    """
    rows = {}
    for name, value in kwargs.items():
        if name == "model":
            continue
        if isinstance(value, RecordedConfig):
            if not value.kwargs:
                rows[name] = {}
            for inner, inner_value in value.kwargs.items():
                rows[f"{name}.{inner}"] = inner_value
        else:
            rows[name] = value
    return rows
