"""regress check --scenario stale_state on fake trees: no field named, every planted one found."""

from __future__ import annotations

import json

import pytest
from _stale_trees import PLANTED_FIELD, build_stale_tree
from click.testing import CliRunner

from regress.check.catalog import scenario_names
from regress.check.check import run_check
from regress.cli import cli


def _unexplained(report) -> dict[str, set[str]]:
    """field -> checkpoints where it was reported (the JSON shape a reader sees)."""
    out: dict[str, set[str]] = {}
    for result in report.to_json()["scenarios"]:
        for v in result["violations"]:
            out.setdefault(v["details"]["field"], set()).add(v["details"]["checkpoint"])
    return out


@pytest.fixture(scope="module")
def stale_check(tmp_path_factory):
    """``run_check(build_stale_tree(...), scenarios=["stale_state"])``, once per tree variant in
    this module: several tests read the same run (the healthy era-C tree is three tests' run, two
    planted trees two tests' each), and each run is 1.3-2.5 CPU s. The reports are only read."""
    reports = {}

    def check(era: str = "C", **variant):
        key = (era, tuple(sorted(variant.items())))
        if key not in reports:
            tree = build_stale_tree(tmp_path_factory.mktemp("stale-tree"), era, **variant)
            reports[key] = run_check(tree, scenarios=["stale_state"])
        return reports[key]

    return check


def test_the_scenario_is_registered():
    assert "stale_state" in scenario_names()


@pytest.mark.parametrize("era", ["B", "C"])
def test_a_healthy_tree_passes_and_the_report_shows_it_looked(stale_check, era):
    report = stale_check(era)
    assert report.exit_code == 0, report.lines()
    names = [r.name for r in report.results]
    assert {n.split("/")[1] for n in names} == {
        "DSAtrtllmAttentionMetadata",
        "TrtllmAttentionMetadata",
    }
    for result in report.results:
        labels = [s.step for s in result.steps]
        assert labels[:2] == ["draft_begin", "draft_step_0"] and "restore" in labels
        assert "f2:prepare" in labels
        assert all(s.extra["fields_compared"] > 0 for s in result.steps)
        assert "fields compared per checkpoint: draft_begin " in result.note


@pytest.mark.parametrize("era", ["B", "C"])
def test_pre_fix_tree_is_caught_naming_the_map(stale_check, era):
    report = stale_check(era, fix="pre")
    assert report.exit_code == 1
    found = _unexplained(report)
    assert "req_idx_per_token" in found
    assert "draft_step_0" in found["req_idx_per_token"]
    stale = next(
        v for r in report.results for v in r.violations if v.details["field"] == "req_idx_per_token"
    )
    assert stale.details["live"].startswith("[0, 0, 0, 0]")
    assert stale.details["fresh"].startswith("[0, 1, 2, 3]")
    assert "in prepare()" in stale.details["live_site"]  # written once, by the target prepare
    assert "stale_state/DSAtrtllmAttentionMetadata" in report.lines()[1]


@pytest.mark.parametrize("plant", sorted(PLANTED_FIELD))
def test_each_planted_defect_is_named_by_its_field(stale_check, plant):
    report = stale_check("C", plant=plant)
    assert report.exit_code == 1
    assert set(_unexplained(report)) == {PLANTED_FIELD[plant]}


def test_the_forgotten_restore_is_found_at_the_restore(stale_check):
    report = stale_check("C", plant="restore_forgets_seq_lens_cuda")
    assert _unexplained(report)["_seq_lens_cuda"] == {"restore", "f2:restore"}


def test_cli_runs_the_scenario_in_its_child_and_keeps_the_step_details(tmp_path):
    tree = build_stale_tree(tmp_path / "tree", "C", plant="gen_indptr_not_refreshed")
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli,
        ["check", "--trtllm-src", str(tree), "--scenario", "stale_state", "--json", str(out)],
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(out.read_text())
    step = next(s for r in doc["scenarios"] for s in r["steps"] if s["step"] == "draft_step_1")
    assert step["extra"]["unexplained"] == ["gen_kv_indptr"]
    assert step["extra"]["fields_compared"] > 10
    assert "gen_kv_indptr is stale at draft_step_0" in result.output


def test_it_runs_only_when_named(tmp_path):
    report = run_check(build_stale_tree(tmp_path, "C", plant="host_mirror_not_updated"))
    assert not any(r.name.startswith("stale_state") for r in report.results)
    assert report.exit_code == 0


V4_CLASS = "DeepseekV4TrtllmAttentionMetadata"


def test_deepseek_v4_metadata_is_compared_where_the_tree_has_it(stale_check):
    report = stale_check("C", v4=True)
    assert report.exit_code == 0, report.lines()
    by_class = {}
    for r in report.results:
        by_class.setdefault(r.name.split("/")[1], []).append(r)
    assert len(by_class[V4_CLASS]) == 2  # both batches
    # every DSA field, plus one per compress ratio and the sliding tables
    dsa_runs, v4_runs = by_class["DSAtrtllmAttentionMetadata"], by_class[V4_CLASS]
    for dsa, v4 in zip(dsa_runs, v4_runs, strict=True):
        for a, b in zip(dsa.steps, v4.steps, strict=True):
            if not a.step.endswith("restore"):  # a restore compares what it saved
                assert b.extra["fields_compared"] >= a.extra["fields_compared"] + 3, a.step


def test_a_tree_without_deepseek_v4_compares_two_classes(stale_check):
    report = stale_check("C")
    assert not any("DeepseekV4" in r.name for r in report.results)


def test_the_deepseek_v4_fake_manager_is_not_a_dsa_manager():
    """Upstream's DeepseekV4CacheManager is a KVCacheManagerV2: is_dsa_cache_manager is False."""
    from regress.sandbox.fakes import FakeDeepseekV4CacheManager, FakeKVCacheManager
    from regress.sandbox.values import cache_manager_values

    ((check, _why),) = cache_manager_values("x.dsa")["x.dsa.cache_manager"].values()
    assert check(FakeKVCacheManager(2))
    assert not check(FakeDeepseekV4CacheManager(2, [4, 128, 1]))


# --- driven by upstream's own worker (issue 19's caller) -----------------------------------------

WORKER = ("eagle3",)


def _labels(report) -> list[str]:
    return [s.step for r in report.results for s in r.steps]


def test_upstreams_worker_drives_the_loop_where_the_tree_has_one(stale_check):
    report = stale_check("C", workers=WORKER)
    assert report.exit_code == 0, report.lines()
    assert all(
        "caller: upstream tensorrt_llm/_torch/speculative/eagle3.py" in r.note
        for r in report.results
    )
    labels = _labels(report)
    assert "draft_begin@prepare_for_spec_dec#1" in labels
    assert (
        "draft_step_0@update_for_spec_dec#1" in labels
        and "draft_step_2@update_for_spec_dec#3" in labels
    )
    assert (
        "restore@restore_from_spec_dec#1" in labels
        and "f2:restore@restore_from_spec_dec#1" in labels
    )
    assert not any("on_update#" in label for label in labels)  # between a change and its refresh


def test_without_a_worker_regress_model_drives_it(stale_check):
    report = stale_check("C")
    assert all("caller: regress model" in r.note for r in report.results)
    assert "draft_step_0" in _labels(report)


@pytest.mark.parametrize("era", ["B", "C"])
def test_pre_fix_tree_is_caught_at_the_workers_own_call(stale_check, era):
    report = stale_check(era, fix="pre", workers=WORKER)
    assert report.exit_code == 1
    found = _unexplained(report)
    assert "draft_step_0@update_for_spec_dec#1" in found["req_idx_per_token"]


@pytest.mark.parametrize("plant", sorted(PLANTED_FIELD))
def test_each_plant_is_named_under_the_worker_too(stale_check, plant):
    report = stale_check("C", plant=plant, workers=WORKER)
    assert report.exit_code == 1, report.lines()
    assert set(_unexplained(report)) == {PLANTED_FIELD[plant]}


def test_the_worker_drives_deepseek_v4_too(stale_check):
    report = stale_check("C", plant="v4_ratio_not_refreshed", workers=WORKER)
    found = _unexplained(report)
    assert set(found) == {PLANTED_FIELD["v4_ratio_not_refreshed"]}
    assert "draft_step_0@update_for_spec_dec#1" in found["compressed_kv_lens_cuda[4]"]
