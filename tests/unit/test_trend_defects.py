"""``regress trend`` on a generated nightly series: each defect lands on night 9 of 16.

The metric that moves says which tool catches what: the batch-8-over-batch-1 ratio (the stale
map's signature) moves for ``stale_req_idx`` only; absolute AL at batch 1 moves for the two
batch-invariant defects; a nightly job that aborts stores nothing, so the series of
``indexer_pool_exhaustion`` simply stops and the trend check has nothing to flag (the ``assert``
probe of ``regress bisect`` is what finds it).
"""

from __future__ import annotations

import pytest

from regress.demo.nightly import nightly_series

LAND = 9
RATIO = "runs[batch=8].acceptance_length / runs[batch=1].acceptance_length"
AL1, AL8 = "runs[batch=1].acceptance_length", "runs[batch=8].acceptance_length"


@pytest.mark.parametrize(
    ("defect", "flagged", "quiet"),
    [
        ("stale_req_idx", {AL8, RATIO}, {AL1, "runs[batch=8].per_position[0]"}),
        ("no_accept_v1_cache_manager", {AL1, AL8}, {RATIO}),
        ("index_share_rejected_branch", {AL1, AL8}, {RATIO}),
    ],
)
def test_trend_finds_the_night_the_defect_landed(tmp_path, defect, flagged, quiet):
    series = nightly_series(defect, tmp_path, nights=16, land=LAND)
    assert series.exit_code == 1 and series.stored == 16
    found = series.first_bad_nights()
    assert {m: found.get(m) for m in flagged} == dict.fromkeys(flagged, LAND)
    assert not quiet & set(found), found


def test_trend_misses_a_defect_that_aborts_the_nightly_job(tmp_path):
    series = nightly_series("indexer_pool_exhaustion", tmp_path, nights=16, land=LAND)
    assert series.failed == list(range(LAND, 16))
    assert series.stored == LAND
    assert series.exit_code == 0 and series.first_bad_nights() == {}


def test_clean_code_raises_no_alarm(tmp_path, monkeypatch):
    """The mutation the tests above must fail on: a plant that changes nothing."""
    from regress.demo import plants

    plant = plants.PLANTS["stale_req_idx"]
    monkeypatch.setitem(
        plants.PLANTS, "stale_req_idx", plants.Plant(**{**vars(plant), "replacement": plant.needle})
    )
    series = nightly_series("stale_req_idx", tmp_path, nights=16, land=LAND)
    assert series.exit_code == 0 and series.first_bad_nights() == {}
