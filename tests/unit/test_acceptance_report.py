"""The report: JSON round trip, schema guard, atomic save, baselines, table, plot."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from regress.acceptance.baseline import load_baseline, load_upstream_reference
from regress.acceptance.engines.synthetic import SyntheticEngine
from regress.acceptance.profile import profile
from regress.acceptance.report import SCHEMA, Report, format_table
from regress.errors import MissingDependencyError, UsageError

DATA = Path(__file__).parents[1] / "data" / "acceptance"
HEALTHY = [0.868, 0.864, 0.825, 0.834]
STALE = [0.880, 0.775, 0.670, 0.596]


def make_report(**kwargs) -> Report:
    engine = SyntheticEngine(HEALTHY, degraded={8: STALE}, sentinel={8: [{"check": "req_idx_map"}]})
    return profile(
        engine,
        engine.default_prompts(30),
        batch_sizes=[1, 8],
        max_draft_len=4,
        max_new_tokens=48,
        n_boot=200,
        **kwargs,
    )


@pytest.fixture(scope="module")
def report() -> Report:
    return make_report()


def test_json_round_trip(report):
    text = report.to_json()
    again = Report.from_json(text)
    assert again == report
    assert again.to_json() == text


def test_json_layout(report):
    data = json.loads(report.to_json())
    assert data["schema"] == SCHEMA == 1
    assert data["engine"]["name"] == "synthetic" and data["model"] == "synthetic-mtp"
    assert data["config"]["batch_sizes"] == [1, 8] and data["config"]["max_draft_len"] == 4
    assert "bonus token" in data["conventions"]["acceptance_length"]
    run = data["runs"][1]
    for key in (
        "batch_size",
        "acceptance_length",
        "acceptance_length_ci",
        "per_position",
        "conditional",
        "steps",
        "requests",
        "per_request_al",
        "counts",
    ):
        assert key in run, key
    assert len(run["per_request_al"]) == 30
    verdict = data["verdicts"][0]
    assert set(verdict) == {"check", "batch_size", "status", "details"}
    assert data["regressed"] is True and data["regressed_batch_sizes"] == [8]
    assert data["sentinel"] == [{"check": "req_idx_map"}]


def test_schema_guard_and_garbage():
    data = json.loads(make_report().to_json())
    data["schema"] = 2
    with pytest.raises(UsageError, match="schema 2"):
        Report.from_json(json.dumps(data))
    with pytest.raises(UsageError, match="invalid JSON"):
        Report.from_json("{nope")
    with pytest.raises(UsageError, match="no 'runs'"):
        Report.from_json('{"schema": 1}')


def test_save_is_atomic_and_loads_back(report, tmp_path):
    path = tmp_path / "nested" / "report.json"
    report.save(path)
    assert Report.load(path) == report
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temp file left behind
    with pytest.raises(UsageError, match="cannot read"):
        Report.load(tmp_path / "missing.json")


def test_saved_fixture_still_reads():
    """A report written by an earlier build stays readable: schema 1 is a promise."""
    old = Report.load(DATA / "report_v1.json")
    assert old.schema == 1 and old.regressed_batch_sizes == [8]
    assert old.run_for(1).stats.acceptance_length > old.run_for(8).stats.acceptance_length
    assert old.run_for(3) is None


def test_format_table(report):
    table = format_table(report)
    lines = table.splitlines()
    assert lines[0].startswith("model synthetic-mtp  engine synthetic  K=4")
    row8 = next(line for line in lines if line.lstrip().startswith("8 "))
    assert row8.rstrip().endswith("REGRESSION")
    row1 = next(line for line in lines if line.lstrip().startswith("1 "))
    assert row1.rstrip().endswith("ref")
    assert "REGRESSION batch_invariance batch 8" in table
    assert "sentinel: 1 violation(s)" in table


# --- baselines --------------------------------------------------------------------------------


def test_upstream_yaml_entries():
    entry = load_upstream_reference(
        DATA / "acceptance_length.yaml", "TestGLM52NVFP4::test_mtp_k4_bs8"
    )
    assert (entry.ref_al, entry.min_al) == (3.766, 3.5777)
    # min_al: null raises, as upstream's accuracy_core.assert_acceptance_length (issue 11).
    with pytest.raises(UsageError, match="min_al: null"):
        load_upstream_reference(
            DATA / "acceptance_length.yaml", "TestGLM52NVFP4::test_mtp_k4_ref_only"
        )
    with pytest.raises(UsageError, match="min_al: null"):
        load_upstream_reference(DATA / "acceptance_length.yaml", "TestGLM52NVFP4::test_mtp_stub")
    with pytest.raises(UsageError, match="has 3 entries"):
        load_upstream_reference(DATA / "acceptance_length.yaml")
    with pytest.raises(UsageError, match="no entry 'Nope'"):
        load_upstream_reference(DATA / "acceptance_length.yaml", "Nope")


def test_load_baseline_dispatch(report, tmp_path):
    spec = f"{DATA / 'acceptance_length.yaml'}#TestGLM52NVFP4::test_mtp_k4_bs8"
    assert load_baseline(spec).key == "TestGLM52NVFP4::test_mtp_k4_bs8"
    single = tmp_path / "one.yml"
    single.write_text("T::x:\n  ref_al: 2.0\n  min_al: 1.9\n")
    assert load_baseline(single).min_al == 1.9
    report.save(tmp_path / "r.json")
    assert load_baseline(tmp_path / "r.json") == report
    with pytest.raises(UsageError, match=r"selects an entry of a \.yaml file only"):
        load_baseline(f"{tmp_path / 'r.json'}#key")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_baseline(bad)


# --- plot -------------------------------------------------------------------------------------


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_is_a_sensible_png(report, tmp_path):
    pytest.importorskip("matplotlib")
    from regress.acceptance.plot import plot_report

    out = plot_report(report, tmp_path / "plots" / "al.png")
    width, height = png_size(out)
    assert 800 <= width <= 2000 and 300 <= height <= 1200
    assert out.stat().st_size > 20_000  # lines, bands, labels: not an empty canvas


def test_plot_with_baseline_runs(tmp_path):
    pytest.importorskip("matplotlib")
    from regress.acceptance.plot import plot_report

    base = make_report()
    base_path = tmp_path / "base.json"
    base.save(base_path)
    current = make_report(baseline=base_path)
    assert current.baseline["kind"] == "report" and len(current.baseline["runs"]) == 2
    out = plot_report(current, tmp_path / "with_baseline.png")
    assert png_size(out)[0] >= 800


def test_plot_without_matplotlib(report, tmp_path, monkeypatch):
    from regress.acceptance.plot import plot_report

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependencyError, match="pip install matplotlib"):
        plot_report(report, tmp_path / "x.png")
