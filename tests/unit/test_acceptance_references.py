"""References of our own: written in upstream's schema with the workload, read back by workload."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from regress.acceptance.baseline import load_upstream_reference
from regress.acceptance.references import (
    MIN_FACTOR,
    Workload,
    find_reference,
    load_references,
    record_reference,
    reference_entry,
)
from regress.acceptance.stats import summarize
from regress.acceptance.trace import RequestTrace
from regress.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "trtllm"
KEY = "TestGLM52NVFP4::test_acceptance[k3-graph]"
WORKLOAD = Workload(max_draft_len=3, max_new_tokens=256, num_prompts=4, prompts_digest="d1")
EXISTING = """\
# A hand-written header that must survive.
TestA::test_x:
  ref_al: 2.0
  min_al: 1.9   # keep this comment
# The comment above TestB belongs to TestB.
TestB::test_y: {ref_al: 3.0, min_al: 2.85}
"""


def run_stats():
    traces = [RequestTrace(accepted=[3, 2, 1, 0, 3], prompt_index=i) for i in range(4)]
    return summarize(traces, 3, seed=0, n_boot=50)


def entry():
    return reference_entry(run_stats(), WORKLOAD, measured={"batch_size": 1, "engine": "x"})


def test_the_entry_is_upstreams_schema_plus_the_workload():
    stats = run_stats()
    e = entry()
    assert e["ref_al"] == pytest.approx(stats.acceptance_length)
    assert e["min_al"] == pytest.approx(MIN_FACTOR * stats.acceptance_length)
    assert e["per_position"] == pytest.approx(stats.per_position)
    assert e["min_per_position"] == pytest.approx([MIN_FACTOR * p for p in stats.per_position])
    assert e["workload"] == {
        "max_draft_len": 3,
        "max_new_tokens": 256,
        "num_prompts": 4,
        "prompts_digest": "d1",
    }
    assert e["measured"]["value_from"] == "acceptance_length"


def test_record_then_find_round_trips_and_upstreams_reader_reads_it(tmp_path):
    path = tmp_path / "refs.yaml"
    record_reference(path, KEY, entry())
    found = find_reference(path, (KEY,), WORKLOAD)
    assert found.key == KEY and found.reference.min_al == pytest.approx(entry()["min_al"])
    assert found.min_per_position == pytest.approx(entry()["min_per_position"])
    # Upstream's loader (mirrored by load_upstream_reference) reads ref_al / min_al as ever.
    assert load_upstream_reference(path, KEY).ref_al == pytest.approx(entry()["ref_al"])


def test_recording_keeps_every_other_line_byte_for_byte(tmp_path):
    path = tmp_path / "refs.yaml"
    path.write_text(EXISTING)
    record_reference(path, KEY, entry())
    text = path.read_text()
    assert text.startswith(EXISTING)
    assert set(load_references(path)) == {"TestA::test_x", "TestB::test_y", KEY}


def test_re_recording_replaces_only_that_entry(tmp_path):
    path = tmp_path / "refs.yaml"
    path.write_text(EXISTING)
    record_reference(path, "TestA::test_x", entry())
    text = path.read_text()
    assert text.startswith("# A hand-written header that must survive.\n")
    assert "# The comment above TestB belongs to TestB.\nTestB::test_y: {ref_al: 3.0" in text
    assert "keep this comment" not in text  # it was inside the replaced entry
    data = load_references(path)
    assert data["TestB::test_y"] == {"ref_al": 3.0, "min_al": 2.85}
    assert data["TestA::test_x"]["workload"]["prompts_digest"] == "d1"
    record_reference(path, "TestA::test_x", entry())
    assert path.read_text() == text  # idempotent


def test_an_empty_mapping_keeps_its_comments(tmp_path):
    path = tmp_path / "refs.yaml"
    shutil.copy(DATA / "acceptance_length.yaml", path)
    record_reference(path, KEY, entry())
    text = path.read_text()
    assert text.startswith("# Acceptance-length references of our own")
    assert list(load_references(path)) == [KEY]


def test_a_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text(EXISTING)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    record_reference(link, KEY, entry())
    assert link.is_symlink() and KEY in load_references(real)


@pytest.mark.parametrize("kind", ["folder", "fifo", "list", "broken"])
def test_a_file_that_is_not_a_reference_mapping_is_refused(tmp_path, kind):
    path = tmp_path / "refs.yaml"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "list":
        path.write_text("- 1\n- 2\n")
    else:
        path.write_text("a: [1,\n")
    with pytest.raises(UsageError):
        record_reference(path, KEY, entry())


def test_only_the_same_workload_finds_an_entry(tmp_path):
    path = tmp_path / "refs.yaml"
    record_reference(path, KEY, entry())
    for change in (
        {"prompts_digest": "d2"},
        {"num_prompts": 80},
        {"max_new_tokens": 64},
        {"max_draft_len": 4},
    ):
        other = Workload(**{**WORKLOAD.to_dict(), **change})
        found = find_reference(path, (KEY,), other)
        assert found.reference is None
        (reason,) = found.skipped
        assert (
            "another workload" in reason and f"(this run: {next(iter(change.values()))})" in reason
        )


def test_upstreams_entries_are_never_ours(tmp_path):
    path = tmp_path / "refs.yaml"
    path.write_text("TestGLM52NVFP4::test_mtp_index_share:\n  ref_al: 3.356\n  min_al: 3.188\n")
    found = find_reference(path, ("TestGLM52NVFP4::test_mtp_index_share",), WORKLOAD)
    assert found.reference is None and "no workload recorded" in found.skipped[0]


def test_workload_of_prompts_uses_the_profilers_digest():
    from regress.acceptance.workload import prompts_digest

    prompts = [[1, 2, 3], "text"]
    w = Workload.of(prompts, max_new_tokens=64, max_draft_len=4)
    assert (w.num_prompts, w.prompts_digest) == (2, prompts_digest(prompts))
    assert Workload.from_mapping({**w.to_dict(), "other": 1}) == w
    assert Workload.from_mapping({"max_draft_len": 4}) is None


@pytest.mark.skipif(
    not os.environ.get("REGRESS_UPSTREAM_DATA"),
    reason="set REGRESS_UPSTREAM_DATA to a folder holding upstream's acceptance_length.yaml",
)
def test_recording_into_a_copy_of_upstreams_file_keeps_upstreams_entries(tmp_path):
    source = Path(os.environ["REGRESS_UPSTREAM_DATA"]) / "acceptance_length.yaml"
    path = tmp_path / "acceptance_length.yaml"
    shutil.copy(source, path)
    before = yaml.safe_load(source.read_text())
    record_reference(path, KEY, entry())
    after = yaml.safe_load(path.read_text())
    assert {k: v for k, v in after.items() if k != KEY} == before
    assert path.read_text().startswith(source.read_text())
