"""The allow table: a field leaves the report only by its own row, reviewed and cited."""

from __future__ import annotations

import re

import pytest

from regress.dsa.stale_allow import ALLOWED, Allowed, explain
from regress.dsa.staleness import StaleField


def _found(field: str, checkpoint: str) -> StaleField:
    return StaleField(field, "value", "[1]", "[2]", checkpoint=checkpoint)


ROW = Allowed("kv_lens", "host snapshot", "trtllm.py @ abc", ("draft_step",), ("Meta",))


@pytest.mark.parametrize(
    "checkpoint",
    [
        "draft_step_0",
        "draft_step_12",
        "f2:draft_step_1",
        "draft_step_0@update_for_spec_dec#1",  # under upstream's worker: its own call after "@"
        "f2:draft_step_2@update_for_spec_dec#3",
    ],
)
def test_a_row_covers_its_field_at_its_checkpoint_kinds(checkpoint):
    unexplained, allowed = explain([_found("kv_lens", checkpoint)], [ROW], "Meta")
    assert unexplained == [] and allowed[0][1] is ROW


@pytest.mark.parametrize(
    ("field", "checkpoint", "owner"),
    [
        ("kv_lens_cuda", "draft_step_0", "Meta"),  # another field: never a prefix or pattern
        ("kv_lens", "restore", "Meta"),  # another checkpoint kind
        ("kv_lens", "restore@restore_from_spec_dec#1", "Meta"),
        ("kv_lens", "draft_begin", "Meta"),
        ("kv_lens", "draft_step_0", "Other"),  # another class
    ],
)
def test_anything_else_stays_unexplained(field, checkpoint, owner):
    unexplained, allowed = explain([_found(field, checkpoint)], [ROW], owner)
    assert [f.field for f in unexplained] == [field] and allowed == []


def test_every_row_names_one_field_and_gives_a_reason_and_an_upstream_place():
    # one row per field and checkpoint kind: a field may differ for another reason elsewhere
    # (kv_lens in draft steps, and after the overlap correction)
    names = [(row.field, row.checkpoints) for row in ALLOWED]
    assert len(names) == len(set(names))
    for row in ALLOWED:
        assert re.fullmatch(r"[A-Za-z_]\w*(\[('\w+'|\d+)\])?", row.field), row
        assert len(row.reason) > 40, row
        assert "@" in row.upstream or "commit unknown" in row.upstream, row
        assert not re.search(r"\d{10,}", row.upstream), row  # no bare stored-file id
        assert "tensorrt_llm/" in row.upstream, row


def test_the_map_of_16925_is_never_allowed():
    assert not {"req_idx_per_token", "slot_mapping_fp8", "block_table"} & {r.field for r in ALLOWED}
