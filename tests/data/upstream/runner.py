"""Fake layer-wise benchmark runner (shape of upstream tools/layer_wise_benchmarks/runner.py)."""
import torch

from tensorrt_llm._torch.attention_backend.utils import get_attention_backend
from tensorrt_llm._torch.metadata import KVCacheParams
from tensorrt_llm._utils import mpi_world_size


class Runner:
    def create_run_pack(self, run_type, *, batch_size, request_id_begin, seq_len_q,
                        seq_len_kv_cache, kv_cache_manager, attn_workspace=None):
        world_size = mpi_world_size()
        assert world_size == 1
        AttentionCls = get_attention_backend(self.model_config.attn_backend,
                                             self.model_config.sparse_attention_config)
        attn_metadata = AttentionCls.Metadata(
            seq_lens=torch.tensor([seq_len_q] * batch_size, dtype=torch.int),
            request_ids=list(range(request_id_begin, request_id_begin + batch_size)),
            max_num_requests=kv_cache_manager.max_batch_size,
            num_contexts={"CTX": batch_size, "GEN": 0}[run_type],
            prompt_lens=[seq_len_kv_cache + seq_len_q] * batch_size,
            max_num_tokens=batch_size * seq_len_q,
            kv_cache_manager=kv_cache_manager,
            kv_cache_params=KVCacheParams(
                use_cache=True, num_cached_tokens_per_seq=[seq_len_kv_cache] * batch_size
            ),
        )
        # FIXTURE: guard
        attn_metadata.prepare()
        return attn_metadata
