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

from _upstream_trees import LAYOUT, tree_files, write_files

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
#: The field each plant must be named by.
PLANTED_FIELD = {
    "gen_indptr_not_refreshed": "gen_kv_indptr",
    "restore_forgets_seq_lens_cuda": "_seq_lens_cuda",
    "host_mirror_not_updated": "host_gen_block_counts",
}


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, f"fake-tree anchor not found: {old!r}"
    return text.replace(old, new, 1)


def stale_tree_files(era: str = "C", fix: str = "post", plant: str | None = None) -> dict[str, str]:
    """The files of one healthy (or planted) fake tree, relative to the checkout root."""
    files = tree_files(era, fix)
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
    files[keys["trtllm"]] = _edit(
        files[keys["trtllm"]], _TRTLLM_PREPARE, _TRTLLM_PREPARE + _REQUEST_TYPES
    )
    meta = files[keys["dsa"]]
    meta = _edit(meta, _ALLOC_ANCHOR, _ALLOC + _ALLOC_ANCHOR)
    meta = _edit(meta, _METHODS_ANCHOR, _METHODS + _METHODS_ANCHOR)
    # prepare() and on_update_kv_lens() both rebuild them after the slot mappings
    meta = _edit(meta, _PREPARE_TAIL, _PREPARE_TAIL.replace("()\n\n", "()\n" + _REFRESH + "\n", 1))
    meta = _edit(meta, _UPDATE_TAIL, _UPDATE_TAIL.replace("()\n", "()\n" + _REFRESH, 1))
    files[keys["dsa"]] = meta
    if plant is not None:
        key, old, new = PLANTS[plant]
        files[keys[key]] = _edit(files[keys[key]], old, new)
    return files


def build_stale_tree(
    root: Path, era: str = "C", fix: str = "post", plant: str | None = None
) -> Path:
    """Write one tree of :func:`stale_tree_files` under ``root``; return ``root``."""
    return write_files(root, stale_tree_files(era, fix, plant))
