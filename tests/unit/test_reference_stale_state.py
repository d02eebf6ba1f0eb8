"""The stale-state oracle on the reference mirrors and in the sentinel's debug mode."""

from __future__ import annotations

import functools

import pytest

from regress.reference.engine import ReferenceEngine
from regress.reference.prompts import load_prompts
from regress.reference.scenarios import run_contract_battery
from regress.reference.stale_state import debug_metadata_cls, stale_state_scenarios


def _fields(defects) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, run in stale_state_scenarios(defects, "cpu"):
        for v in run():
            out.setdefault(name, set()).add(v.details["field"])
    return out


def test_the_mirror_without_defects_holds_every_field():
    assert _fields(()) == {}


def test_the_stale_map_is_named_in_every_batch():
    found = _fields(("stale_req_idx",))
    assert set(found) == {
        "stale_state_verify_4x4",
        "stale_state_mixed_2ctx_2gen",
        "stale_state_tree_draft_3_1_4_1",
    }
    assert all({"req_idx_per_token", "slot_mapping"} <= f for f in found.values())


def test_the_arange_refresh_is_named_where_the_draft_layout_is_not_all_ones():
    assert _fields(("arange_only_refresh",)) == {
        "stale_state_tree_draft_3_1_4_1": {"req_idx_per_token", "slot_mapping"}
    }


def test_the_battery_runs_it():
    names = {v.details["scenario"] for v in run_contract_battery(defects={"stale_req_idx"})}
    assert "stale_state_verify_4x4" in names


@functools.cache
def _engine_run(defects: tuple[str, ...]):
    sink: list = []
    engine = ReferenceEngine(defects=defects, metadata_cls=debug_metadata_cls(sink))
    engine.generate(load_prompts(6), batch_size=4, max_draft_len=3, max_new_tokens=12)
    (sentinel,) = sink
    return sentinel


def test_sentinel_debug_mode_on_the_engine_is_silent_without_defects():
    sentinel = _engine_run(())
    assert sentinel.stale_checks > 10 and sentinel.violations == []


@pytest.mark.parametrize("site", ["update_for_spec_dec"])
def test_sentinel_debug_mode_names_the_stale_map_without_being_told(site):
    sentinel = _engine_run(("stale_req_idx",))
    stale = [v for v in sentinel.violations if v.check == "stale_state"]
    assert {v.details["field"] for v in stale} == {"req_idx_per_token", "slot_mapping"}
    assert {v.site for v in stale} == {site}
    assert all(v.details["checkpoint"] == "draft_step" for v in stale)
