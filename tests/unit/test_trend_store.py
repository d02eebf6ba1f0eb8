"""The nightly history store: atomic appends, versioned lines, deliberate duplicates."""

from __future__ import annotations

import json
import multiprocessing

import pytest
from _trend_data import night, report, sha

from regress.errors import UsageError
from regress.trend.store import HISTORY, SCHEMA, TrendStore, config_id, normalize_date


def test_a_night_is_added_and_read_back(tmp_path):
    store = TrendStore(tmp_path / "h")
    assert store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1)) == "added"
    (entry,) = store.entries()
    assert entry.commit == sha(1)
    assert entry.date == f"{night(1)}T00:00:00Z"
    assert entry.report["runs"][1]["acceptance_length"] == 3.6
    line = json.loads((tmp_path / "h" / HISTORY).read_text())
    assert line["schema"] == SCHEMA and line["config_id"] == entry.config_id


def test_the_same_report_again_changes_nothing(tmp_path):
    store = TrendStore(tmp_path)
    r = report({1: 3.7, 8: 3.6})
    store.add(r, commit=sha(1), date=night(1))
    assert store.add(r, commit=sha(1), date=night(1)) == "unchanged"
    assert len((tmp_path / HISTORY).read_text().splitlines()) == 1


def test_a_different_report_for_the_same_night_needs_replace(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    with pytest.raises(UsageError, match="--replace"):
        store.add(report({1: 3.7, 8: 3.1}), commit=sha(1), date=night(1))
    assert store.add(report({1: 3.7, 8: 3.1}), commit=sha(1), date=night(1), replace=True) == (
        "replaced"
    )
    (entry,) = store.entries()
    assert entry.report["runs"][1]["acceptance_length"] == 3.1


def test_the_same_commit_on_another_night_is_another_night(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    store.add(report({1: 3.7, 8: 3.5}), commit=sha(1), date=night(2))
    assert [e.date[:10] for e in store.entries()] == [night(1), night(2)]


def test_nights_come_back_in_date_order_and_split_by_configuration(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(2), date=night(2))
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    other = report({1: 3.7, 8: 3.6})
    other.config["max_draft_len"] = 3
    store.add(other, commit=sha(3), date=night(3))
    groups = store.by_configuration()
    assert len(groups) == 2
    assert [e.commit for e in store.entries()] == [sha(1), sha(2), sha(3)]


def test_bootstrap_and_tolerance_do_not_split_a_series(tmp_path):
    a, b = report({1: 3.7, 8: 3.6}), report({1: 3.7, 8: 3.6})
    b.config["n_boot"], b.config["tolerance"] = 5, 0.2
    from regress.trend.store import configuration_of

    assert config_id(configuration_of(a.to_dict())) == config_id(configuration_of(b.to_dict()))


def test_a_series_is_one_workload_as_a_baseline_sees_it():
    """Trend and baseline share one definition of "same workload": the prompts by content."""
    from regress.acceptance.workload import mismatches
    from regress.trend.store import configuration_of

    def ident(r):
        return config_id(configuration_of(r.to_dict()))

    a, renamed, edited = (report({1: 3.7, 8: 3.6}) for _ in range(3))
    a.config.update(prompts="a.jsonl", prompts_digest="d1")
    renamed.config.update(prompts="b.jsonl", prompts_digest="d1")  # same prompts, new name
    edited.config.update(prompts="a.jsonl", prompts_digest="d2")  # same name, other prompts
    assert ident(a) == ident(renamed) and mismatches(a.config, renamed.config) == []
    assert ident(a) != ident(edited) and mismatches(a.config, edited.config)


def test_a_torn_last_line_is_ignored_then_cut(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    with open(tmp_path / HISTORY, "a") as fh:
        fh.write('{"schema": 1, "commit": "half')  # a crash mid-append
    assert len(store.entries()) == 1
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(2), date=night(2))
    lines = (tmp_path / HISTORY).read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)


def test_a_damaged_line_in_the_middle_is_an_error(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    text = (tmp_path / HISTORY).read_text()
    (tmp_path / HISTORY).write_text("not json\n" + text)
    with pytest.raises(UsageError, match=":1: not a trend entry"):
        store.entries()


def test_an_unknown_schema_is_refused(tmp_path):
    store = TrendStore(tmp_path)
    store.add(report({1: 3.7, 8: 3.6}), commit=sha(1), date=night(1))
    data = json.loads((tmp_path / HISTORY).read_text())
    data["schema"] = SCHEMA + 1
    (tmp_path / HISTORY).write_text(json.dumps(data) + "\n")
    with pytest.raises(UsageError, match="schema"):
        store.entries()


@pytest.mark.parametrize("bad", ["", "two words"])
def test_a_commit_must_be_one_word(tmp_path, bad):
    with pytest.raises(UsageError, match="--commit"):
        TrendStore(tmp_path).add(report({1: 3.7}), commit=bad, date=night(1))


def test_dates_are_normalised_to_utc():
    assert normalize_date("2026-03-04") == "2026-03-04T00:00:00Z"
    assert normalize_date("2026-03-04T02:30:00+02:00") == "2026-03-04T00:30:00Z"
    with pytest.raises(UsageError, match="--date"):
        normalize_date("yesterday")


def _add_many(args):
    directory, worker = args
    store = TrendStore(directory)
    for i in range(8):
        store.add(report({1: 3.7, 8: 3.6 - i / 100}), commit=sha(worker * 100 + i), date=night(i))


def test_concurrent_adds_never_interleave(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        pool.map(_add_many, [(str(tmp_path), w) for w in range(3)])
    lines = (tmp_path / HISTORY).read_text().splitlines()
    assert len(lines) == 24
    assert len({json.loads(line)["commit"] for line in lines}) == 24
