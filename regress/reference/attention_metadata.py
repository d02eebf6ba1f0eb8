"""Mirrors of TensorRT-LLM's base and dense attention metadata (the DSA one is in ``metadata``).

Upstream (era A/B paths): ``tensorrt_llm/_torch/attention_backend/interface.py::AttentionMetadata``
(checked @ 000a01de: the ``seq_lens`` setter, ``on_update``, ``num_seqs``) and
``tensorrt_llm/_torch/attention_backend/trtllm.py::TrtllmAttentionMetadata``.
``prepare_for_spec_dec``/``restore_from_spec_dec`` as in a later ``interface.py`` (the newest
stored version, commit unknown). Only what the two historical bugs and the lifecycle model touch is mirrored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from regress.reference.cache import PagedKVCacheManager


class AttentionMetadata:
    """Mirror of ``interface.py::AttentionMetadata``.

    ``on_update()`` recomputes the host-side counts and nothing else: it touches no backend buffer.
    That is the premise bug 1 broke: a caller that rewrites ``seq_lens`` and calls only
    ``on_update()`` leaves every derived device buffer describing the old layout.
    """

    def __init__(
        self,
        *,
        max_num_requests: int,
        max_num_tokens: int,
        kv_cache_manager: PagedKVCacheManager | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        import torch

        self.device = torch.device(device)
        self.max_num_requests = max_num_requests
        self.max_num_sequences = max_num_requests
        self.max_num_tokens = max_num_tokens
        self.kv_cache_manager = kv_cache_manager
        self.request_ids: list[int] = []
        self.cached_token_lens: list[int] = []
        self._seq_lens = torch.zeros(max_num_requests, dtype=torch.int32)
        self._seq_lens_cuda = torch.zeros(max_num_requests, dtype=torch.int32, device=self.device)
        self._num_seqs = 0
        # Upstream builds metadata without a layout: seq_lens reads None until the executor sets
        # one (interface.py seq_lens setter @ 000a01de, "sets seq_lens to None initially").
        self._has_layout = False
        self._saved_tensors: dict[str, torch.Tensor] = {}
        self._num_contexts = 0
        self.num_tokens = 0
        self.num_ctx_tokens = 0
        self.num_generations = 0
        self.is_spec_decoding_enabled = False

    # -- layout -------------------------------------------------------------------------------
    @property
    def num_seqs(self) -> int:
        return self._num_seqs

    @property
    def seq_lens(self) -> torch.Tensor | None:
        """Host view of the current new-token count per request; None before the first layout."""
        if not self._has_layout:
            return None
        return self._seq_lens[: self._num_seqs]

    @seq_lens.setter
    def seq_lens(self, value: Sequence[int] | torch.Tensor | None) -> None:
        import torch

        if value is None:
            self._has_layout = False
            self._num_seqs = 0
            self.on_update()
            return
        lens = torch.as_tensor(value, dtype=torch.int32).reshape(-1)
        if lens.numel() > self.max_num_requests:
            raise ValueError(
                f"{lens.numel()} requests exceed max_num_requests={self.max_num_requests}"
            )
        if int(lens.sum()) > self.max_num_tokens:
            raise ValueError(
                f"{int(lens.sum())} tokens exceed max_num_tokens={self.max_num_tokens}"
            )
        self._num_seqs = lens.numel()
        self._has_layout = True
        self._seq_lens[: self._num_seqs].copy_(lens)
        self._seq_lens_cuda[: self._num_seqs].copy_(lens, non_blocking=True)
        self.on_update()

    @property
    def seq_lens_cuda(self) -> torch.Tensor | None:
        """Device view of :attr:`seq_lens` (same values; what kernels read)."""
        if not self._has_layout:
            return None
        return self._seq_lens_cuda[: self._num_seqs]

    @property
    def num_contexts(self) -> int:
        return self._num_contexts

    @num_contexts.setter
    def num_contexts(self, value: int) -> None:
        self._num_contexts = int(value)
        self.on_update()

    def on_update(self) -> None:
        """Recompute the counts from the host ``seq_lens``; no device buffer is touched."""
        lens = self._seq_lens[: self._num_seqs]
        self.num_tokens = int(lens.sum())
        self.num_ctx_tokens = int(lens[: self._num_contexts].sum())
        self.num_generations = self._num_seqs - self._num_contexts

    def prepare_for_spec_dec(self, *fields: str) -> None:
        """Save the named tensors and swap in clones for the draft loop to mutate.

        Mirrors ``interface.py::AttentionMetadata.prepare_for_spec_dec``: the draft loop writes
        the clones; :meth:`restore_from_spec_dec` puts the originals back.
        """
        assert not self._saved_tensors, "prepare_for_spec_dec called twice without a restore"
        for name in fields:
            value = getattr(self, name)
            self._saved_tensors[name] = value
            setattr(self, name, value.clone())

    def restore_from_spec_dec(self) -> None:
        """Put back what :meth:`prepare_for_spec_dec` saved (no recount: callers run on_update)."""
        for name, value in self._saved_tensors.items():
            setattr(self, name, value)
        self._saved_tensors.clear()

    # -- lifecycle hooks (no-ops on the base class, as upstream) ------------------------------
    def prepare(self) -> None:
        """Build per-forward state from the host layout. The base class has none."""

    def on_update_kv_lens(self) -> None:
        """Refresh what derives from ``kv_lens_cuda`` after an in-place change. Base: nothing."""

    def update_for_spec_dec(self) -> None:
        """Called by the MTP draft loop between sub-steps. Base: nothing."""

    def update_spec_dec_param(
        self,
        batch_size: int,
        is_spec_decoding_enabled: bool,
        is_spec_dec_tree: bool,
        is_spec_dec_dynamic_tree: bool,
        max_draft_len: int,
        max_total_draft_tokens: int,
        **kwargs: Any,
    ) -> None:
        """The executor's spec-dec announcement hook. Every backend has it, hence bug 2's review."""


class TrtllmAttentionMetadata(AttentionMetadata):
    """Mirror of ``trtllm.py::TrtllmAttentionMetadata`` (the dense, non-DSA backend).

    Its ``update_spec_dec_param`` sets ``max_total_draft_tokens`` whatever the arguments say; that
    value is part of the attention op's cache key and reaches FMHA/XQA kernel selection, which is
    why announcing MTP shapes to this backend is not inert.
    """

    def __init__(self, **kwargs: Any) -> None:
        import torch

        super().__init__(**kwargs)
        self.max_total_draft_tokens: int | None = None
        self.is_spec_dec_tree = False
        self.is_spec_dec_dynamic_tree = False
        self.spec_decoding_position_offsets: torch.Tensor | None = None
        self.spec_decoding_generation_lengths: torch.Tensor | None = None
        self.kv_lens_cuda = torch.zeros(
            self.max_num_sequences, dtype=torch.int32, device=self.device
        )
        self.max_gen_seq_len = 1

    def prepare(self) -> None:
        """``kv_lens = cached + new`` per request, computed on the host and copied once."""
        import torch

        super().prepare()
        n = self.num_seqs
        cached = list(self.cached_token_lens[:n]) + [0] * (n - len(self.cached_token_lens))
        kv = torch.tensor(cached, dtype=torch.int32) + self.seq_lens
        self.kv_lens_cuda[:n].copy_(kv, non_blocking=True)
        gen = self.seq_lens[self.num_contexts :]
        self.max_gen_seq_len = int(gen.max()) if gen.numel() else 1

    def update_spec_dec_param(
        self,
        batch_size: int,
        is_spec_decoding_enabled: bool,
        is_spec_dec_tree: bool,
        is_spec_dec_dynamic_tree: bool,
        max_draft_len: int,
        max_total_draft_tokens: int,
        **kwargs: Any,
    ) -> None:
        import torch

        self.is_spec_decoding_enabled = is_spec_decoding_enabled
        self.is_spec_dec_tree = is_spec_dec_tree
        self.is_spec_dec_dynamic_tree = is_spec_dec_dynamic_tree
        # Unconditional, as upstream: this is the assignment bug 2's review traced to kernel
        # selection.
        self.max_total_draft_tokens = max_total_draft_tokens
        width = 1 + max_total_draft_tokens
        current = self.spec_decoding_position_offsets
        # Allocated once per width: the executor announces every forward, and a CUDA graph holds
        # on to the buffers it captured.
        if is_spec_decoding_enabled and (current is None or current.shape[1] != width):
            self.spec_decoding_position_offsets = torch.zeros(
                self.max_num_sequences, width, dtype=torch.int32, device=self.device
            )
            self.spec_decoding_generation_lengths = torch.zeros(
                self.max_num_sequences, dtype=torch.int32, device=self.device
            )
