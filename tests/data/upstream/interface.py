"""Fake base metadata (shape of upstream interface.py): seq_lens property, hooks, get_empty."""
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from tensorrt_llm._utils import maybe_pin_memory
from tensorrt_llm.mapping import Mapping

from ..metadata import KVCacheParams
from ..pyexecutor.resource_manager import KVCacheManager


@dataclass(kw_only=True)
class AttentionMetadata:
    max_num_requests: int
    max_num_tokens: int
    max_num_sequences: Optional[int] = None
    kv_cache_manager: Optional[KVCacheManager] = None
    mapping: Optional[Mapping] = None
    # FIXTURE: sparse-config-field
    seq_lens: Optional[torch.Tensor]
    num_contexts: int
    request_ids: Optional[List[int]] = None
    prompt_lens: Optional[List[int]] = None
    kv_cache_params: Optional[KVCacheParams] = None
    cuda_graph_buffers: Optional[dict] = None
    is_cuda_graph: bool = False
    _seq_lens: Optional[torch.Tensor] = field(init=False, default=None)
    _seq_lens_cuda: Optional[torch.Tensor] = field(init=False, default=None)
    _num_contexts: int = field(init=False, default=0)
    _num_tokens: int = field(init=False, default=0)
    _num_ctx_tokens: int = field(init=False, default=0)
    _num_generations: int = field(init=False, default=0)
    _saved: dict = field(init=False, default_factory=dict)

    def __post_init__(self):
        pass

    def on_update(self):
        if self._seq_lens is not None:
            self._num_ctx_tokens = int(self._seq_lens[: self.num_contexts].sum())
            self._num_generations = self._seq_lens.shape[0] - self.num_contexts
            self._num_tokens = int(self._seq_lens.sum())

    @property
    def seq_lens(self):
        return self._seq_lens

    @seq_lens.setter
    def seq_lens(self, value):
        value = value if value is not AttentionMetadata.seq_lens else None
        self._seq_lens = value
        self.on_update()
        if value is not None:
            self._seq_lens = maybe_pin_memory(value)
            self._seq_lens_cuda = self._seq_lens.cuda(non_blocking=True)

    @property
    def num_contexts(self):
        return self._num_contexts

    @num_contexts.setter
    def num_contexts(self, value):
        value = value if value is not AttentionMetadata.num_contexts else 0
        self._num_contexts = value
        self.on_update()

    @property
    def seq_lens_cuda(self):
        return self._seq_lens_cuda

    @property
    def num_seqs(self):
        return self._seq_lens.shape[0]

    @property
    def num_tokens(self):
        return self._num_tokens

    @property
    def num_ctx_tokens(self):
        return self._num_ctx_tokens

    @property
    def num_generations(self):
        return self._num_generations

    def prepare(self):
        pass

    def on_update_kv_lens(self):
        pass

    def update_for_spec_dec(self):
        pass

    def update_spec_dec_param(self, batch_size, is_spec_decoding_enabled, is_spec_dec_tree,
                              is_spec_dec_dynamic_tree, max_draft_len, max_total_draft_tokens,
                              **kwargs):
        pass

    def prepare_for_spec_dec(self, *fields):
        for f in fields:
            self._saved[f] = getattr(self, f)
            setattr(self, f, getattr(self, f).clone())

    def restore_from_spec_dec(self):
        for f, v in self._saved.items():
            setattr(self, f, v)
        self._saved.clear()

    @staticmethod
    def get_empty(buffers, shape, dtype, cache_name, capture_graph=False):
        return torch.zeros(shape, device="cuda", dtype=dtype)
