"""Fake trees for the production matrix and the failing draft step (regress's own code only).

Not a test module. :func:`matrix_files` takes an era-C caller tree (:func:`caller_files`, the
MTP-Eagle worker included) and adds, by variant, the shapes of upstream's switches: a
``DSAMetadataParams`` with ``use_cute_dsl_paged_mqa_logits``, ``mtp_index_share`` and
``enable_indexer_skip``; a fused decode-metadata gate (``TRTLLM_DISABLE_FUSED_DSA_METADATA``) and
a pure-torch fake kernel module; a DSL expand path (``kv_lens_expanded_cuda``, one row per
verified token); and planted defects each of which only one cell can show:

* ``fused="defect"``: the fused kernel writes a map right for verify layouts, wrong in draft steps;
* ``dsl="stale"``: ``on_update_kv_lens()`` never refreshes the expanded kv lens;
* ``overlap_skip``: ``on_update_kv_lens()`` returns early on a verify layout ("prepare() did it"),
  so only the overlap correction, which calls it on one, goes stale;
* ``pad_dedup``: the map refresh counts distinct request ids, so CUDA-graph dummy rows, which all
  share one id, keep the verify forward's map in draft steps.

Worker variants: ``no_finally`` (``SpecWorkerBase.forward`` without its ``finally`` restore) and
``paired`` (``prepare_for_spec_dec`` refuses to save twice and ``has_spec_dec_saved_state`` says
whether it holds a save, as upstream's interface does).
"""

from __future__ import annotations

from pathlib import Path

from _upstream_trees import REFRESH, caller_files, write_files

META = "tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py"
DSA_DIR = META.rsplit("/", 1)[0]
INTERFACE = "tensorrt_llm/_torch/attention/backends/interface.py"
SPEC = "tensorrt_llm/_torch/speculative/interface.py"

PARAMS = '''"""Fake DSA metadata parameters with upstream's switches (regress's own)."""
from dataclasses import dataclass
from typing import Optional


@dataclass
class DSAMetadataParams:
    index_topk: int
    indexer_max_chunk_size: Optional[int] = None
    use_cute_dsl_paged_mqa_logits: bool = False
    mtp_index_share: bool = False
    enable_indexer_skip: bool = False
'''
FUSED_MODULE = '''"""Fake fused decode-metadata kernel (regress's own; pure torch)."""
{imports}import torch


def fused_dsa_decode_metadata(md):
    n, ns = md.num_tokens, md.num_seqs
{map}    md._slot_mappings()
'''
FUSED_MAPS = {
    "clean": "    md.req_idx_per_token[:n] = torch.repeat_interleave(\n"
    "        torch.arange(ns, dtype=torch.int32, device=md.seq_lens_cuda.device), md.seq_lens_cuda[:ns])\n",
    # right when every request verifies 1 + K tokens, wrong once the draft steps collapse to 1
    "defect": "    md.req_idx_per_token[:n] = torch.arange(n, dtype=torch.int32) // (md.max_draft_tokens + 1)\n",
}
GATE = """import os

from tensorrt_llm._utils import get_sm_version

from .fused_metadata import fused_dsa_decode_metadata


def _fused_enabled():
    return os.environ.get("TRTLLM_DISABLE_FUSED_DSA_METADATA", "0") != "1"


"""
SEEN = """        params = self.sparse_metadata_params
        self.cell_seen = {
            "dsl": getattr(params, "use_cute_dsl_paged_mqa_logits", None),
            "share": getattr(params, "mtp_index_share", None),
            "skip": getattr(params, "enable_indexer_skip", None),
            "sm": get_sm_version(),
            "fused": _fused_enabled(),
        }
        self.kv_lens_expanded_cuda = self.get_empty(
            None, (self.max_num_tokens,), torch.int32, "kv_lens_expanded_cuda"
        )
"""
DSL_METHOD = """    def _dsl_expand(self):
        params = self.sparse_metadata_params
        if not getattr(params, "use_cute_dsl_paged_mqa_logits", False) or self.num_generations == 0:
            return
        nc, ns = self.num_contexts, self.num_seqs
        factor = int(self.seq_lens[nc:ns].max())
        if factor <= 1:
            return
        lens = self.kv_lens_cuda[nc:ns].repeat_interleave(factor)
        self.kv_lens_expanded_cuda[: lens.numel()] = lens

"""
FUSED_CALL = (
    "        if _fused_enabled() and self.num_contexts == 0 and self.num_tokens > 0:\n"
    "            fused_dsa_decode_metadata(self)\n"
    "            return\n"
)
OVERLAP_SKIP = (
    "        if self.num_contexts == 0 and int(self.seq_lens.min()) > 1:\n"
    "            return  # prepare() already built everything for a verify layout\n"
)
PAD_DEDUP = (
    "        rows = len(dict.fromkeys(list(self.request_ids)[: self.num_seqs]))\n"
    "        n = int(self.seq_lens[:rows].sum())\n"
    "        if n > 0:\n"
    "            self.req_idx_per_token[:n].copy_(\n"
    "                build_req_idx_per_token(self.seq_lens_cuda[:rows], n)\n"
    "            )\n"
)
_FORWARD_FINALLY = """        try:
            return self._forward_impl(*args, **kwargs)
        finally:
            if attn_metadata is not None and attn_metadata._saved:
                self._restore_attn_metadata_from_spec_dec(attn_metadata)
"""
_PAIRED = """    @property
    def has_spec_dec_saved_state(self):
        return bool(self._saved)

    def prepare_for_spec_dec(self, *fields):
        assert not self._saved, "prepare_for_spec_dec called twice without a restore"
"""


def _insert(text: str, anchor: str, code: str, *, after: bool = True) -> str:
    assert text.count(anchor) == 1, anchor
    return text.replace(anchor, anchor + code if after else code + anchor)


def matrix_files(
    *,
    switches: bool = True,
    fused: str | None = "clean",
    dsl: str | None = "clean",
    overlap_skip: bool = False,
    pad_dedup: bool = False,
    no_finally: bool = False,
    paired: bool = False,
    workers: tuple[str, ...] = ("eagle3",),
    restore_contexts: bool = True,
) -> dict[str, str]:
    """The files of one matrix tree (see the module docstring)."""
    files = caller_files("C", "post", workers=workers, restore_contexts=restore_contexts)
    meta = files[META]
    meta = _insert(meta, "class DSAtrtllmAttentionMetadata(", GATE, after=False)
    if fused is None:  # no gate in the tree: the module still needs _fused_enabled for SEEN
        meta = meta.replace("from .fused_metadata import fused_dsa_decode_metadata\n", "")
        meta = meta.replace(
            'os.environ.get("TRTLLM_DISABLE_FUSED_DSA_METADATA", "0") != "1"', "None"
        )
    else:
        imports = "import triton  # noqa: F401\n" if fused == "triton" else ""
        kernel = FUSED_MAPS["defect" if fused == "defect" else "clean"]
        files[f"{DSA_DIR}/fused_metadata.py"] = FUSED_MODULE.format(imports=imports, map=kernel)
    meta = _insert(meta, "    def __post_init__(self):\n        super().__post_init__()\n", SEEN)
    top = OVERLAP_SKIP if overlap_skip else ""
    if dsl is not None:
        meta = _insert(meta, "    def update_for_spec_dec(self):\n", DSL_METHOD, after=False)
        meta = _insert(
            meta, "    def on_update_kv_lens(self):\n", "        self._dsl_expand()\n", after=False
        )
        top += "        self._dsl_expand()\n" if dsl == "clean" else ""
    if fused is not None:
        top += FUSED_CALL
    meta = _insert(meta, "    def on_update_kv_lens(self):\n", top)
    if pad_dedup:
        meta = meta.replace(REFRESH["post"], PAD_DEDUP)
    files[META] = meta
    if switches:
        files[f"{DSA_DIR}/params.py"] = PARAMS
    if no_finally:
        files[SPEC] = files[SPEC].replace(
            _FORWARD_FINALLY, "        return self._forward_impl(*args, **kwargs)\n"
        )
    if paired:
        files[INTERFACE] = files[INTERFACE].replace(
            "    def prepare_for_spec_dec(self, *fields):\n", _PAIRED
        )
    return files


def build_matrix_tree(root: Path, **variant) -> Path:
    """Write one matrix tree (:func:`matrix_files`) under ``root`` and return ``root``."""
    return write_files(root, matrix_files(**variant))
