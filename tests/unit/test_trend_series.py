"""Metric paths into acceptance reports, and series built from stored nights."""

from __future__ import annotations

import pytest
from _trend_data import night, report, report_dict, sha

from regress.errors import UsageError
from regress.trend.series import Metric, build_series, default_metrics, index_path
from regress.trend.store import TrendStore


def test_a_selector_finds_the_run_of_that_batch_size():
    data = report_dict({1: 3.7, 8: 3.2})
    assert Metric.parse("runs[batch=8].acceptance_length").value(data) == 3.2
    assert Metric.parse("runs[batch_size=1].acceptance_length").value(data) == 3.7
    assert Metric.parse("runs[1].acceptance_length").value(data) == 3.2


def test_per_position_and_ratio():
    data = report_dict({1: 3.7, 8: 3.2})
    pos = Metric.parse("runs[batch=8].per_position[0]").value(data)
    assert pos == data["runs"][1]["per_position"][0]
    ratio = Metric.parse("runs[batch=8].acceptance_length / runs[batch=1].acceptance_length")
    assert ratio.value(data) == pytest.approx(3.2 / 3.7)


def test_a_missing_run_is_a_gap_not_an_error():
    data = report_dict({1: 3.7})
    assert Metric.parse("runs[batch=8].acceptance_length").value(data) is None


@pytest.mark.parametrize(
    ("path", "direction"),
    [("runs[batch=8].acceptance_length", 1), ("runs[batch=8].wall_seconds", -1)],
)
def test_direction_comes_from_the_metric(path, direction):
    assert Metric.parse(path).direction == direction


@pytest.mark.parametrize("bad", ["", "runs[batch=8]..x", "runs[batch=8]x", "a / b / c", "runs[b"])
def test_unparseable_paths_are_bad_input(bad):
    with pytest.raises(UsageError):
        Metric.parse(bad)


def test_index_path_is_what_the_bisect_probe_reads():
    from regress.bisect.probes import json_path

    data = report_dict({1: 3.7, 2: 3.6, 8: 3.2})
    path = index_path("runs[batch=8].per_position[2]", data)
    assert path == "runs[2].per_position[2]"
    assert json_path(data, path) == data["runs"][2]["per_position"][2]
    with pytest.raises(UsageError, match="no"):
        index_path("runs[batch=4].acceptance_length", data)


def test_default_metrics_cover_al_positions_and_the_ratio():
    texts = [m.text for m in default_metrics(report_dict({1: 3.7, 8: 3.2}))]
    assert texts[:2] == ["runs[batch=1].acceptance_length", "runs[batch=8].acceptance_length"]
    assert "runs[batch=8].per_position[3]" in texts
    assert texts[-1] == "runs[batch=8].acceptance_length / runs[batch=1].acceptance_length"


def test_a_series_skips_nights_without_the_metric(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    store.add(report({1: 3.7}), commit=sha(2), date=night(2))
    store.add(report({1: 3.7, 8: 3.5}), commit=sha(3), date=night(3))
    entries = store.entries()
    # one configuration needs equal batch sizes: the batch-1-only night is its own series
    series = build_series(
        [e for e in entries if e.config_id == entries[0].config_id],
        Metric.parse("runs[batch=8].acceptance_length"),
    )
    assert [p.commit for p in series.points] == [sha(1), sha(3)]
    assert series.values == [3.6, 3.5]
