"""Allow rows decided for every production-matrix cell: they fix no axis.

The ring slot of ``prepare()``'s pinned host staging (``_prepare_host_stage_slot``, the newest
stored era-B-path ``sparse/dsa/metadata.py``, stored id 57530523289) advances on every
``prepare()`` whatever the cell, so a live object that prepared twice differs from a fresh one in
every cell; decided only for the base cell, it failed 63 of 64 runnable cells of ``--matrix full``
on that real tree although nothing there is stale.
"""

from __future__ import annotations

from regress.dsa.stale_allow import ALLOWED, EVERY_CELL, Allowed, explain
from regress.dsa.staleness import StaleField

CELLS = (
    "fused=off,dsl=off,share=off,skip=off,sm=90,overlap=off,pad=off",
    "fused=on,dsl=on,share=on,skip=on,sm=100,overlap=on,pad=on",
    "fused=n/a,dsl=n/a,share=n/a,skip=n/a,sm=90,overlap=on,pad=off",
)


def _stale(field: str, checkpoint: str = "f2:prepare") -> StaleField:
    return StaleField(
        field=field, kind="value", live="1", fresh="0", checkpoint=checkpoint, owner="X"
    )


def test_a_row_decided_for_every_cell_covers_each_cell():
    row = Allowed("ring", "why", "where", cells=EVERY_CELL)
    found = [_stale("ring")]
    for cell in CELLS:
        assert explain(found, [row], "X", cell)[0] == []


def test_the_prepare_ring_slot_is_decided_for_every_cell():
    found = [_stale("_prepare_host_stage_slot"), _stale("_prepare_host_stage_slot", "f2:pad")]
    for cell in CELLS:
        unexplained = explain(found, ALLOWED, "DSAtrtllmAttentionMetadata", cell)[0]
        assert unexplained == [], cell
