"""A mirror of the layer-wise benchmark's run-pack construction, with bug 2's historical states.

Mirrors ``tensorrt_llm/tools/layer_wise_benchmarks/runner.py::Runner.create_run_pack``: a batch of
``batch_size`` requests with ``seq_len_q`` new tokens each on top of ``seq_len_kv_cache`` cached
ones, all context (``CTX``) or all generation (``GEN``), then ``prepare()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from regress.dsa.announce import announce_mtp_shapes, mtp_shape_params
from regress.dsa.batch import Batch, set_batch
from regress.errors import UsageError
from regress.reference.cache import PagedKVCacheManager
from regress.reference.defects import active_defects
from regress.reference.indexer import indexer_decode_shapes
from regress.reference.metadata import DSAtrtllmAttentionMetadata, TrtllmAttentionMetadata

BACKENDS = {"dsa": DSAtrtllmAttentionMetadata, "trtllm": TrtllmAttentionMetadata}


def _announce(metadata: Any, run_type: str, batch_size: int, seq_len_q: int, defects) -> bool:
    """The announcement as each historical revision of the runner made it."""
    if "unannounced_mtp_shapes" in defects:
        return False  # before PR #17247: nothing is announced
    if "method_hasattr_guard" in defects:
        # PR #17247's first revision: a guard every backend passes.
        if run_type == "GEN" and seq_len_q > 1 and hasattr(metadata, "update_spec_dec_param"):
            metadata.update_spec_dec_param(**mtp_shape_params(batch_size, seq_len_q))
            return True
        return False
    return announce_mtp_shapes(metadata, run_type, batch_size, seq_len_q)


def create_run_pack(
    run_type: str,
    *,
    batch_size: int,
    seq_len_q: int,
    seq_len_kv_cache: int,
    backend: str = "dsa",
    tokens_per_block: int = 64,
    device: str = "cpu",
    defects: Iterable[str] | None = None,
) -> Any:
    """Build and prepare metadata for one layer-wise benchmark step.

    Raises:
        UsageError: for an unknown ``run_type``/``backend`` or non-positive sizes.
    """
    if run_type not in ("CTX", "GEN"):
        raise UsageError(f"run_type must be 'CTX' or 'GEN', not {run_type!r}")
    if backend not in BACKENDS:
        raise UsageError(f"backend must be one of {sorted(BACKENDS)}, not {backend!r}")
    if batch_size < 1 or seq_len_q < 1 or seq_len_kv_cache < 0:
        raise UsageError("batch_size and seq_len_q must be >= 1 and seq_len_kv_cache >= 0")
    chosen = active_defects(defects)
    manager = PagedKVCacheManager.for_requests(
        batch_size, seq_len_kv_cache + seq_len_q, tokens_per_block=tokens_per_block
    )
    kwargs = dict(
        max_num_requests=batch_size,
        max_num_tokens=batch_size * seq_len_q,
        kv_cache_manager=manager,
        device=device,
    )
    if backend == "dsa":
        metadata = DSAtrtllmAttentionMetadata(defects=chosen, **kwargs)
    else:
        metadata = TrtllmAttentionMetadata(**kwargs)
    context = run_type == "CTX"
    batch = Batch(
        seq_lens=(seq_len_q,) * batch_size,
        num_contexts=batch_size if context else 0,
        cached=(0 if context else seq_len_kv_cache,) * batch_size,
    )
    set_batch(metadata, batch)  # the runner builds with the batch, announces, then prepares
    _announce(metadata, run_type, batch_size, seq_len_q, chosen)
    metadata.prepare()
    return metadata


def run_generation_step(metadata: Any) -> tuple[int, int]:
    """Run the DSA indexer's decode shape check, as the layer-wise GEN step does on DSA models.

    Returns:
        ``(num_generations, next_n)``; raises ``DeepGemmAssertion`` on mismatched shapes.
    """
    if not hasattr(metadata, "kv_lens_cuda_2d") or metadata.num_generations == 0:
        return metadata.num_generations, 0
    return indexer_decode_shapes(metadata)
