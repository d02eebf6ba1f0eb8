"""A fake matrix tree whose fused kernel breaks only what no map contract reads (regress's own).

Not a test module. The kernel of :func:`kernel_off_by_one` writes the right request map and the
eager chain's slot mappings, then, in draft steps only (every request one token), moves each
indexer-K slot one byte on: the page a token writes stays its own request's, so the map and
page-ownership checks pass, and only upstream's fused-vs-eager contract can tell.
"""

from __future__ import annotations

from pathlib import Path

from _matrix_trees import DSA_DIR, FUSED_MAPS, FUSED_MODULE, build_matrix_tree

OFF_BY_ONE = FUSED_MODULE.format(imports="", map=FUSED_MAPS["clean"]) + (
    "    if int(md.seq_lens_cuda[:ns].max()) == 1:  # draft steps only: one byte on, same page\n"
    "        md.slot_mapping_fp8[:n] += 1\n"
)


def kernel_off_by_one(root: Path) -> Path:
    """A matrix tree (:func:`_matrix_trees.build_matrix_tree`) with that kernel."""
    build_matrix_tree(root)
    (root / DSA_DIR / "fused_metadata.py").write_text(OFF_BY_ONE)
    return root
