"""Fake trees for the stale-state oracle: an upstream-shaped healthy tree and planted staleness.

Not a test module. Builds on :mod:`_upstream_trees` (the post-fix tree of each era) and edits its
files as text, so the shared fake parts stay as they are. The healthy tree adds what the oracle
must see refreshed the way upstream refreshes it: ``prepare()`` sets the request types
(``trtllm.py`` ``TrtllmAttentionMetadata.prepare``), and the DSA metadata keeps two derived
generation buffers, ``gen_kv_indptr`` (cumulative kv lengths, as upstream's) and
``gen_block_counts`` with a host mirror ``host_gen_block_counts`` that a host-side planner would
read, all rebuilt by ``prepare()`` and by every ``on_update_kv_lens()``.

:data:`PLANTS` are the defects the oracle must name without being told where to look: each
removes one refresh.
"""

from __future__ import annotations

from pathlib import Path

from _upstream_trees import LAYOUT, caller_files, tree_files, write_files

_TRTLLM_PREPARE = (
    "        self.kv_lens_cuda[: self.num_seqs].copy_(self.kv_lens[: self.num_seqs], "
    "non_blocking=True)\n"
)
_REQUEST_TYPES = (
    "        self.host_request_types[: self.num_contexts].fill_(0)\n"
    "        self.host_request_types[self.num_contexts : self.num_seqs].fill_(1)\n"
)
_ALLOC_ANCHOR = "        self._create_kv_lens_2d()\n"
_ALLOC = (
    '        self.gen_kv_indptr = self.get_empty(None, (n + 1,), torch.int64, "gen_kv_indptr")\n'
    '        self.gen_block_counts = self.get_empty(None, (n,), torch.int32, "gen_block_counts")\n'
    '        self.host_gen_block_counts = torch.zeros_like(self.gen_block_counts, device="cpu")\n'
)
_METHODS_ANCHOR = "    def update_for_spec_dec(self):\n"
_METHODS = (
    "    def _refresh_gen_kv_indptr(self):\n"
    "        if self.num_generations > 0:\n"
    "            torch.cumsum(\n"
    "                self.kv_lens_cuda[self.num_contexts : self.num_seqs], dim=0,\n"
    "                dtype=torch.int64, out=self.gen_kv_indptr[1 : self.num_generations + 1],\n"
    "            )\n"
    "\n"
    "    def _refresh_block_counts(self):\n"
    "        if self.num_generations > 0:\n"
    "            tpb = self.kv_cache_manager.tokens_per_block\n"
    "            gen_kv = self.kv_lens_cuda[self.num_contexts : self.num_seqs]\n"
    "            self.gen_block_counts[: self.num_generations].copy_((gen_kv + tpb - 1) // tpb)\n"
    "\n"
    "    def _mirror_block_counts(self):\n"
    "        g = self.num_generations\n"
    "        self.host_gen_block_counts[:g].copy_(self.gen_block_counts[:g])\n"
    "\n"
)
_INDPTR = "        self._refresh_gen_kv_indptr()\n"
_COUNTS = "        self._refresh_block_counts()\n"
_MIRROR = "        self._mirror_block_counts()\n"
_REFRESH = _INDPTR + _COUNTS + _MIRROR
#: A cache validity flag prepare() sets and every spec-dec refresh clears, as upstream's
#: ``TrtllmAttentionMetadata.update_for_spec_dec`` invalidates its MLA scheduler buffers
#: (``trtllm.py`` @ 017aa0ca ``_invalidate_mla_scheduler_buffers``): only a fresh object that
#: replays the refresh holds the live value.
_SPEC_UPDATE = "    def update_for_spec_dec(self):\n        super().update_for_spec_dec()\n"
_INVALIDATE = "        self._scheduler_valid = False\n"
_VALIDATE = "        self._scheduler_valid = True\n"
#: The end of prepare() and the refresh point of on_update_kv_lens() in the fake DSA module.
_PREPARE_TAIL = "        self._slot_mappings()\n\n    def on_update_kv_lens(self):\n"
_UPDATE_TAIL = "        self._slot_mappings()\n        if self.num_generations > 0:\n"
_RESTORE = "        for f, v in self._saved_tensors.items():\n            setattr(self, f, v)\n"
#: on_update_kv_lens()'s refresh, which a plant edits (prepare()'s stays whole).
_UPDATE_REFRESH = (
    "        self._slot_mappings()\n" + _REFRESH + "        if self.num_generations > 0:\n"
)

#: Planted staleness: name -> (file key, the text replaced, its replacement). Each removes a
#: refresh from the incremental path only; the from-scratch path still computes the field.
PLANTS: dict[str, tuple[str, str, str]] = {
    # on_update_kv_lens() stops refreshing a derived buffer other than the map
    "gen_indptr_not_refreshed": ("dsa", _UPDATE_REFRESH, _UPDATE_REFRESH.replace(_INDPTR, "")),
    # restore_from_spec_dec() forgets one of the fields prepare_for_spec_dec saved
    "restore_forgets_seq_lens_cuda": (
        "interface",
        _RESTORE,
        "        for f, v in self._saved_tensors.items():\n"
        '            if f != "_seq_lens_cuda":\n'
        "                setattr(self, f, v)\n",
    ),
    # on_update_kv_lens() updates a device buffer but not its host mirror
    "host_mirror_not_updated": ("dsa", _UPDATE_REFRESH, _UPDATE_REFRESH.replace(_MIRROR, "")),
}
#: DeepSeek-V4's metadata, our own code in the shape of upstream's (``sparse/deepseek_v4/
#: metadata.py`` @ 5ca7a947): a DSA subclass whose per-ratio buffers live in dicts keyed by the
#: compress ratio, whose prepare() copies its cache manager's sliding block tables, and whose
#: on_update_kv_lens() rebuilds the per-ratio lengths from kv_lens_cuda.
V4_METADATA = '''"""Fake DeepSeek-V4 metadata."""
import torch

from ..dsa.metadata import DSAtrtllmAttentionMetadata
from .indexer import DeepseekV4Indexer
from .params import DeepSeekV4MetadataParams


class DeepseekV4TrtllmAttentionMetadata(DSAtrtllmAttentionMetadata):
    def __post_init__(self):
        super().__post_init__()
        assert isinstance(self.sparse_metadata_params, DeepSeekV4MetadataParams)
        self.compress_ratio_set = set(self.sparse_metadata_params.compress_ratios)
        n, mgr = self.max_num_sequences, self.kv_cache_manager
        self.compressed_kv_lens_cuda = {
            r: self.get_empty(None, (n,), torch.int32, f"compressed_kv_lens_cuda_{r}")
            for r in self.compress_ratio_set
        }
        self.sliding_block_tables = self.get_empty(
            None, (mgr.num_local_layers, 5, n, mgr.max_blocks_per_seq), torch.int32, "sbt"
        )

    def prepare(self):
        self.kv_cache_manager.compute_sliding_block_tables(self.request_ids, self.num_contexts)
        super().prepare()
        self.kv_cache_manager.copy_batch_sliding_block_tables(
            self.sliding_block_tables, self.request_ids, self.num_contexts, self.num_seqs
        )
        DeepseekV4Indexer.prepare(metadata=self)
        self._per_ratio(self.kv_lens_cuda[: self.num_seqs], skip=())

    def on_update_kv_lens(self):
        super().on_update_kv_lens()
        self._per_ratio(self.kv_lens_cuda[: self.num_seqs], skip=())

    def _per_ratio(self, kv_lens, skip):
        for ratio, buf in self.compressed_kv_lens_cuda.items():
            if ratio not in skip:
                buf[: self.num_seqs] = kv_lens // ratio
'''
V4_PARAMS = '''"""Fake DeepSeek-V4 metadata parameters."""
from dataclasses import dataclass, field
from typing import List

from ..dsa.params import DSAMetadataParams


@dataclass
class DeepSeekV4MetadataParams(DSAMetadataParams):
    compress_ratios: List[int] = field(default_factory=list)
    window_size: int = 128
'''
V4_INDEXER = '''"""Fake DeepSeek-V4 indexer: prepare() as the DSA Indexer's (nothing in the fake)."""


class DeepseekV4Indexer:
    @staticmethod
    def prepare(metadata):
        return None
'''
#: on_update_kv_lens() stops refreshing one ratio's buffer of DeepSeek-V4's dicts
V4_PLANT = (
    "        super().on_update_kv_lens()\n"
    "        self._per_ratio(self.kv_lens_cuda[: self.num_seqs], skip=())\n",
    "        super().on_update_kv_lens()\n"
    "        self._per_ratio(self.kv_lens_cuda[: self.num_seqs], skip=(4,))\n",
)
#: The fake DSA check mirrors upstream's: a manager that is not a DSA one must have
#: DeepSeek-V4's interface (``DSAtrtllmAttentionMetadata.__post_init__`` @ 186080bb).
_DSA_CHECK = "        assert is_dsa_cache_manager(self.kv_cache_manager)\n"
_V4_CHECK = (
    "        if not is_dsa_cache_manager(self.kv_cache_manager):\n"
    '            assert hasattr(self.kv_cache_manager, "compressed_block_sizes")\n'
)

#: The field each plant must be named by.
PLANTED_FIELD = {
    "gen_indptr_not_refreshed": "gen_kv_indptr",
    "restore_forgets_seq_lens_cuda": "_seq_lens_cuda",
    "host_mirror_not_updated": "host_gen_block_counts",
    "v4_ratio_not_refreshed": "compressed_kv_lens_cuda[4]",
}


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, f"fake-tree anchor not found: {old!r}"
    return text.replace(old, new, 1)


def _add_v4(files: dict[str, str], dsa_key: str, plant: str | None) -> None:
    """DeepSeek-V4's package next to the DSA one (era C only, as upstream's)."""
    v4 = "tensorrt_llm/_torch/attention/backends/sparse/deepseek_v4"
    metadata = V4_METADATA if plant != "v4_ratio_not_refreshed" else _edit(V4_METADATA, *V4_PLANT)
    files[f"{v4}/__init__.py"] = ""
    files[f"{v4}/metadata.py"] = metadata
    files[f"{v4}/params.py"] = V4_PARAMS
    files[f"{v4}/indexer.py"] = V4_INDEXER
    files[dsa_key] = _edit(files[dsa_key], _DSA_CHECK, _V4_CHECK)


def stale_tree_files(
    era: str = "C",
    fix: str = "post",
    plant: str | None = None,
    v4: bool = False,
    workers: tuple[str, ...] = (),
) -> dict[str, str]:
    """The files of one healthy (or planted) fake tree, relative to the checkout root.

    ``v4`` adds DeepSeek-V4's metadata (era C); the plant ``v4_ratio_not_refreshed`` implies it.
    ``workers`` adds upstream-shaped one-model workers (``_upstream_trees.caller_files``), whose
    own draft loop then drives the metadata.
    """
    files = caller_files(era, fix, workers=workers, guard=None) if workers else tree_files(era, fix)
    backends, dsa = LAYOUT[era]
    keys = {
        "trtllm": f"tensorrt_llm/{backends}/trtllm.py",
        "interface": f"tensorrt_llm/{backends}/interface.py",
        "dsa": f"tensorrt_llm/{dsa}",
    }
    # upstream's name for the spec-dec save (interface.py AttentionMetadata._saved_tensors)
    files[keys["interface"]] = files[keys["interface"]].replace(
        "self._saved", "self._saved_tensors"
    )
    files[keys["interface"]] = _edit(
        files[keys["interface"]], "    _saved: dict =", "    _saved_tensors: dict ="
    )
    spec = "tensorrt_llm/_torch/speculative/interface.py"
    if spec in files:  # the workers' paired-restore assert reads the same field
        files[spec] = _edit(files[spec], "attn_metadata._saved:", "attn_metadata._saved_tensors:")
    files[keys["trtllm"]] = _edit(
        files[keys["trtllm"]], _TRTLLM_PREPARE, _TRTLLM_PREPARE + _REQUEST_TYPES
    )
    # markers the caller trees fill (``_upstream_trees.caller_files``) stay unfilled here: drop them
    meta = "".join(
        line
        for line in files[keys["dsa"]].splitlines(keepends=True)
        if not line.strip().startswith("# FIXTURE:")
    )
    meta = _edit(meta, _ALLOC_ANCHOR, _ALLOC + _ALLOC_ANCHOR)
    meta = _edit(meta, _METHODS_ANCHOR, _METHODS + _METHODS_ANCHOR)
    # prepare() and on_update_kv_lens() both rebuild them after the slot mappings
    meta = _edit(meta, _PREPARE_TAIL, _PREPARE_TAIL.replace("()\n\n", "()\n" + _REFRESH + "\n", 1))
    meta = _edit(meta, _UPDATE_TAIL, _UPDATE_TAIL.replace("()\n", "()\n" + _REFRESH, 1))
    meta = _edit(meta, _SPEC_UPDATE, _SPEC_UPDATE + _INVALIDATE)
    end = _REFRESH + "\n    def on_update_kv_lens(self):\n"  # prepare()'s end, as edited above
    meta = _edit(meta, end, _REFRESH + _VALIDATE + end[len(_REFRESH) :])
    files[keys["dsa"]] = meta
    if plant in PLANTS:
        key, old, new = PLANTS[plant]
        files[keys[key]] = _edit(files[keys[key]], old, new)
    if v4 or plant == "v4_ratio_not_refreshed":
        _add_v4(files, keys["dsa"], plant)
    return files


def build_stale_tree(
    root: Path,
    era: str = "C",
    fix: str = "post",
    plant: str | None = None,
    v4: bool = False,
    workers: tuple[str, ...] = (),
) -> Path:
    """Write one tree of :func:`stale_tree_files` under ``root``; return ``root``."""
    return write_files(root, stale_tree_files(era, fix, plant, v4, workers))
