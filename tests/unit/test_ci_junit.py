"""JUnit merge and summary on real pytest-produced XML (tests/data/junit), plus hostile XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.ci import junit
from regress.cli import cli
from regress.errors import UsageError
from regress.files import write_atomic

DATA = Path(__file__).resolve().parents[1] / "data" / "junit"
GPU_NOW = DATA / "current" / "H200-PyTorch-1" / "results.xml"
GPU_BEFORE = DATA / "baseline" / "H200-PyTorch-1" / "results.xml"
CPU_NOW = DATA / "current" / "CPU-Unit-1.xml"
TRUNCATED = DATA / "malformed" / "truncated.xml"

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuites><testsuite name="&lol3;"/></testsuites>
"""
EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<testsuite name="x"><testcase classname="a" name="&secret;"/></testsuite>
"""
SMALL_ENTITY = b'<!DOCTYPE t [<!ENTITY a "AAAA">]><testsuites name="&a;"/>'


def load(*paths: Path, keep_going: bool = False) -> junit.Loaded:
    return junit.load_all([junit.parse_input(str(p)) for p in paths], keep_going=keep_going)


def test_real_pytest_output_loads_with_its_own_counts():
    xml = junit.load(GPU_NOW)
    (suite,) = list(xml)
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == (
        "pytest",
        7,
        2,
        1,
        2,
    )


@pytest.mark.parametrize(
    ("arg", "stage"),
    [
        (GPU_NOW, "H200-PyTorch-1"),  # Jenkins layout: <stage>/results.xml, suite named "pytest"
        (CPU_NOW, "CPU-Unit-1"),  # junit_suite_name set by the stage's argv
    ],
)
def test_stage_comes_from_suite_name_or_path(arg, stage):
    results = junit.results_of(load(arg))
    assert {r.stage for r in results} == {stage}


def test_explicit_stage_overrides_both():
    results = junit.results_of(load(f"Renamed-1={GPU_NOW}"))
    assert {r.stage for r in results} == {"Renamed-1"}


def test_parse_input_keeps_an_existing_path_with_equals(tmp_path):
    odd = tmp_path / "a=b.xml"
    odd.write_bytes(CPU_NOW.read_bytes())
    assert junit.parse_input(str(odd)) == (None, odd)
    assert junit.parse_input("S-1=x.xml") == ("S-1", Path("x.xml"))


def test_merge_names_suites_after_stages_and_recounts(tmp_path):
    merged = junit.merge(load(GPU_NOW, CPU_NOW))
    suites = {s.name: s for s in merged}
    assert set(suites) == {"H200-PyTorch-1", "CPU-Unit-1"}
    assert (suites["H200-PyTorch-1"].tests, suites["CPU-Unit-1"].tests) == (7, 4)
    assert (merged.tests, merged.failures, merged.errors, merged.skipped) == (11, 2, 1, 3)
    out = tmp_path / "all.xml"
    write_atomic(out, junit.to_bytes(merged))
    assert [p.name for p in tmp_path.iterdir()] == ["all.xml"]  # no temp file left behind
    again = junit.load(out)
    assert (again.tests, again.failures, again.errors, again.skipped) == (11, 2, 1, 3)


def test_merging_a_merged_file_keeps_its_stage_suites(tmp_path):
    out = tmp_path / "all.xml"
    write_atomic(out, junit.to_bytes(junit.merge(load(GPU_NOW, CPU_NOW))))
    remerged = junit.merge(load(out, f"Extra-1={CPU_NOW}"))
    assert sorted(s.name for s in remerged) == ["CPU-Unit-1", "Extra-1", "H200-PyTorch-1"]


def test_shards_of_one_stage_become_one_suite():
    merged = junit.merge(load(f"S-1={GPU_NOW}", f"S-1={CPU_NOW}"))
    (suite,) = list(merged)
    assert (suite.name, suite.tests) == ("S-1", 11)
    sources = [p.value for p in suite.properties()]
    assert sources == [str(GPU_NOW), str(CPU_NOW)]


def test_malformed_file_stops_the_merge_by_name():
    with pytest.raises(UsageError) as caught:
        load(GPU_NOW, TRUNCATED, CPU_NOW)
    assert str(TRUNCATED) in str(caught.value)
    assert "not well-formed" in str(caught.value) and "--keep-going" in str(caught.value)


def test_keep_going_merges_the_rest_and_names_the_bad_file():
    loaded = load(GPU_NOW, TRUNCATED, CPU_NOW, keep_going=True)
    assert len(loaded.documents) == 2
    assert len(loaded.problems) == 1 and str(TRUNCATED) in loaded.problems[0]
    assert junit.merge(loaded).tests == 11


def test_stdlib_etree_expands_entities_which_is_why_we_do_not_use_it():
    # The hazard the hardened parser exists for: xml.etree resolves internal entities.
    assert ET.fromstring(SMALL_ENTITY).get("name") == "AAAA"
    with pytest.raises(junit.JunitFileError, match="refused"):
        junit.parse_xml(SMALL_ENTITY, source="small.xml")


@pytest.mark.parametrize("payload", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["bomb", "external"])
def test_dtds_and_entities_are_refused(tmp_path, payload):
    path = tmp_path / "evil.xml"
    path.write_bytes(payload)
    with pytest.raises(junit.JunitFileError) as caught:
        junit.load(path)
    assert str(path) in str(caught.value) and "DTD and entity declarations are refused" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "not well-formed"),
        (b"<html><body/></html>", "root element is <html>"),
        (b"<testsuites><testsuite>", "not well-formed"),
    ],
)
def test_non_junit_input_is_refused_by_name(tmp_path, payload, message):
    path = tmp_path / "x.xml"
    path.write_bytes(payload)
    with pytest.raises(junit.JunitFileError, match=message):
        junit.load(path)


def test_oversized_and_missing_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(junit, "MAX_XML_BYTES", 100)
    with pytest.raises(junit.JunitFileError, match="over the 100-byte limit"):
        junit.load(GPU_NOW)
    with pytest.raises(junit.JunitFileError, match="cannot read"):
        junit.load(tmp_path / "absent.xml")


def test_summary_counts_failures_and_compares_with_a_baseline():
    summary = junit.summarize(
        junit.results_of(load(GPU_NOW, CPU_NOW)), junit.results_of(load(GPU_BEFORE))
    )
    rows = {s.stage: (s.passed, s.failed, s.error, s.skipped, s.total) for s in summary.stages}
    assert rows == {"CPU-Unit-1": (3, 0, 0, 1, 4), "H200-PyTorch-1": (2, 2, 1, 2, 7)}
    assert [r.test_id for r in summary.failures] == [
        "sample_gpu::test_acceptance_batch8",
        "sample_gpu::test_engine_setup",
        "sample_gpu::test_markup_in_message[pipe]",
    ]
    assert "AL at batch 8 3.283 < 0.95 * batch 1 3.768" in summary.failures[0].message
    assert [r.test_id for r in summary.new_failures] == [
        "sample_gpu::test_acceptance_batch8",
        "sample_gpu::test_markup_in_message[pipe]",
    ]
    assert [r.test_id for r in summary.fixed] == ["sample_gpu::test_layerwise_seq_len_q4"]


def test_without_a_baseline_there_is_no_comparison():
    summary = junit.summarize(junit.results_of(load(GPU_NOW)))
    assert summary.new_failures is None and summary.fixed is None
    assert summary.to_json()["new_failures"] is None


def test_markdown_neutralises_untrusted_messages():
    summary = junit.summarize(junit.results_of(load(GPU_NOW)), junit.results_of(load(GPU_BEFORE)))
    text = junit.render_markdown(summary)
    assert "| H200-PyTorch-1 | 2 | 2 | 1 | 2 | 7 |" in text
    assert "### New failures vs baseline (2)" in text and "### Fixed vs baseline (1)" in text
    line = next(ln for ln in text.splitlines() if "test_markup_in_message" in ln)
    assert "a\\|b" in line and "&lt;b&gt;" in line and "&#64;someone" in line
    assert "<b>" not in line and "@someone" not in line and "`" not in line
    assert line.count(" | ") == 2  # the message's pipe did not add a column


def test_cli_merge_writes_the_file_and_reports_counts(tmp_path):
    out = tmp_path / "all.xml"
    result = CliRunner().invoke(cli, ["junit", "merge", str(GPU_NOW), str(CPU_NOW), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 suite(s), 11 tests, 2 failures, 1 errors, 3 skipped" in result.output
    assert junit.load(out).tests == 11


def test_cli_merge_keep_going_writes_what_it_can_and_exits_2(tmp_path):
    out = tmp_path / "all.xml"
    args = ["junit", "merge", str(GPU_NOW), str(TRUNCATED), "-o", str(out)]
    stopped = CliRunner().invoke(cli, args)
    assert stopped.exit_code == 2 and not out.exists()
    kept = CliRunner().invoke(cli, [*args, "--keep-going"])
    assert kept.exit_code == 2
    assert f"skipped {TRUNCATED}" in kept.output
    assert junit.load(out).tests == 7


def test_cli_summary_text_json_markdown_and_fail_on_new(tmp_path):
    md = tmp_path / "summary.md"
    base = ["junit", "summary", str(GPU_NOW), str(CPU_NOW), "--baseline", str(GPU_BEFORE)]
    text = CliRunner().invoke(cli, [*base, "--markdown", str(md)])
    assert text.exit_code == 0
    assert "new failures vs baseline (2):" in text.output
    assert md.read_text().startswith("## Test results")
    as_json = CliRunner().invoke(cli, [*base, "--json", "-"])
    doc = json.loads(as_json.output)
    assert [s["stage"] for s in doc["stages"]] == ["CPU-Unit-1", "H200-PyTorch-1"]
    assert len(doc["fixed"]) == 1
    assert CliRunner().invoke(cli, [*base, "--fail-on-new"]).exit_code == 1
    clean = CliRunner().invoke(
        cli, ["junit", "summary", str(CPU_NOW), "--baseline", str(CPU_NOW), "--fail-on-new"]
    )
    assert clean.exit_code == 0


def test_cli_summary_keep_going_lists_unreadable_files(tmp_path):
    md = tmp_path / "summary.md"
    args = ["junit", "summary", str(CPU_NOW), str(TRUNCATED), "--keep-going", "--markdown", str(md)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0
    assert f"unreadable: {TRUNCATED}: not well-formed XML" in result.output
    assert "### Unreadable result files" in md.read_text()
    assert CliRunner().invoke(cli, args[:4]).exit_code == 2


def _unwritable(tmp_path: Path) -> str:
    """A path no one can write: a file inside a regular file (a folder where one is needed)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    return str(blocker / "out.xml")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["merge", "{cpu}", "-o", "{bad}"], "--output"),
        (["merge", "{cpu}", "-o", "{folder}"], "--output"),
        (["summary", "{cpu}", "--markdown", "{bad}"], "--markdown"),
        (["summary", "{cpu}", "--markdown", "{folder}"], "--markdown"),
        (["summary", "{cpu}", "--json", "{bad}"], "--json"),
        (["summary", "{missing}", "--json", "{bad}"], "--json"),  # checked before any reading
    ],
)
def test_every_output_path_is_checked_before_work_and_nothing_is_written(tmp_path, argv, option):
    values = {
        "cpu": str(CPU_NOW),
        "bad": _unwritable(tmp_path),
        "folder": str(tmp_path),
        "missing": str(tmp_path / "missing.xml"),
    }
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = CliRunner().invoke(cli, ["junit", *(a.format(**values) for a in argv)])
    assert result.exit_code == 2, result.output
    assert option in result.output and "missing.xml" not in result.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_summary_json_to_a_file(tmp_path):
    out = tmp_path / "deep" / "summary.json"
    result = CliRunner().invoke(cli, ["junit", "summary", str(CPU_NOW), "--json", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text())["schema"] == 1
    assert "stage" in result.output  # the text table still goes to the terminal
