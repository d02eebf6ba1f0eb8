"""``regress check --known FILE``: the format, the matcher, and known findings end to end.

The end-to-end tests run the stale-state oracle on fake trees with a planted staleness
(:mod:`_stale_trees`): ``gen_indptr_not_refreshed`` makes the DSA class report ``gen_kv_indptr``,
``host_mirror_not_updated`` reports ``host_gen_block_counts``, as a real era-C tree reports
``block_table``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _stale_trees import build_stale_tree
from click.testing import CliRunner

from regress.check import isolation
from regress.check.catalog import scenario_names
from regress.check.known import (
    DEFAULT_CLASS,
    KNOWN,
    Finding,
    KnownFileError,
    load_known,
    mark,
    parse_known,
)
from regress.check.recipes import SourceRecipe, probe_exit_code
from regress.check.report import CheckReport
from regress.check.results import NO_REBUILD, ScenarioResult
from regress.cli import cli
from regress.dsa.invariants import Violation

REPO = Path(__file__).resolve().parents[2]
DSA = "DSAtrtllmAttentionMetadata"
#: The known line of the planted finding, after a comment and a blank line (it is line 3).
KNOWN_INDPTR = (
    "# the planted finding\n"
    "\n"
    f"stale_state {DSA} gen_kv_indptr (planted: on_update_kv_lens() skips it; see #1)\n"
)


def _stale(owner: str, field: str, **extra) -> Violation:
    return Violation("stale_state", f"{field} is stale", {"owner": owner, "field": field, **extra})


# -- the format ---------------------------------------------------------------------------------


def test_lines_are_read_with_their_numbers_reasons_and_cells():
    text = (
        "# comment\n\n"
        f"stale_state {DSA} block_table (docs/findings.md#1 (finding 1))\n"
        f"  req_idx_map {DSA} req_idx_map cell=overlap-cg:mtp3 (https://example.org/1)  \n"
    )
    known = parse_known(text, "k.txt", scenario_names())
    first, second = known.lines
    assert (first.line, first.field, first.cell) == (3, "block_table", None)
    assert first.reason == "docs/findings.md#1 (finding 1)"  # '#' and parentheses kept
    assert (second.line, second.scenario, second.cell) == (4, "req_idx_map", "overlap-cg:mtp3")
    assert second.where == "k.txt:4"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (f"stale_state {DSA} block_table", "no (REASON)"),
        (f"stale_state {DSA} block_table ()", "the (REASON) is empty"),
        (f"stale_state {DSA} (why)", "2 word(s)"),
        (f"stale_state {DSA} block_table x y (why)", "5 word(s)"),
        (f"stale_state {DSA} block_table cell (why)", "'cell' is not cell=CELL"),
        (f"stale_stat {DSA} block_table (why)", "unknown scenario 'stale_stat'"),
        (f"stale_state {DSA} block_table; (why)", "'block_table;' is not a field name"),
    ],
)
def test_a_bad_line_is_refused_naming_file_and_line(line, said):
    with pytest.raises(KnownFileError) as exc:
        parse_known(f"# header\n{line}\n", "known.txt", scenario_names())
    assert f"--known known.txt:2: {said}" in str(exc.value)
    assert exc.value.exit_code == 2


def test_a_repeated_line_is_refused():
    line = f"stale_state {DSA} block_table (why)\n"
    with pytest.raises(KnownFileError, match=r"known.txt:3: repeats line 1"):
        parse_known(line + "\n" + line, "known.txt")


def test_an_unreadable_file_is_a_usage_error(tmp_path):
    with pytest.raises(KnownFileError, match="cannot read it"):
        load_known(tmp_path / "missing.txt")


def test_the_shipped_file_lists_finding_1():
    known = load_known(REPO / "docs" / "known-findings.txt", scenario_names())
    assert [(ln.scenario, ln.cls, ln.field, ln.cell) for ln in known.lines] == [
        ("stale_state", DSA, "block_table", None)
    ]
    assert "docs/findings.md#" in known.lines[0].reason


# -- the matcher, on plain records --------------------------------------------------------------


def test_class_and_field_of_each_kind_of_finding():
    from regress.check.known import finding

    stale = _stale("TrtllmAttentionMetadata", "kv_lens_cuda")
    assert finding("stale_state/TrtllmAttentionMetadata/b4", stale.check, stale.details) == (
        Finding("stale_state", "TrtllmAttentionMetadata", "kv_lens_cuda")
    )
    assert finding("metadata_classes/V4Meta", "req_idx_map", {}) == Finding(
        "metadata_classes", "V4Meta", "req_idx_map"
    )
    assert finding("req_idx_map/uniform_5x4", "indexer_k_slots", {"cell": 7}) == Finding(
        "req_idx_map", DEFAULT_CLASS, "indexer_k_slots", "7"
    )


def test_cells_are_compared_only_when_the_finding_carries_one():
    known = parse_known(f"stale_state {DSA} block_table cell=a (why)\n", "k")
    results = [
        ScenarioResult("stale_state/x/1", "fail", [_stale(DSA, "block_table")]),
        ScenarioResult("stale_state/x/2", "fail", [_stale(DSA, "block_table", cell="a")]),
        ScenarioResult("stale_state/x/3", "fail", [_stale(DSA, "block_table", cell="b")]),
    ]
    outcome = mark(results, known)
    assert [r.status for r in results] == [KNOWN, KNOWN, "fail"]
    assert sorted(outcome.matched) == [(0, 0), (1, 0)]


def test_a_result_is_known_only_when_every_failing_finding_is():
    known = parse_known(f"stale_state {DSA} block_table (why)\n", "k")
    warned = Violation(NO_REBUILD, "a caller finding", {})
    results = [
        ScenarioResult("stale_state/a", "fail", [_stale(DSA, "block_table"), warned]),
        ScenarioResult("stale_state/b", "fail", [_stale(DSA, "block_table"), _stale(DSA, "x")]),
        ScenarioResult("stale_state/c", "pass"),
    ]
    mark(results, known)
    assert [r.status for r in results] == [KNOWN, "fail", "pass"]


def test_a_line_is_fixed_only_where_its_scenario_gave_a_verdict():
    text = f"stale_state {DSA} block_table (a)\nreq_idx_map {DSA} req_idx_map (b)\n"
    known = parse_known(text, "k")
    ran = [ScenarioResult("stale_state/x/1", "pass"), ScenarioResult("ragged_verify/w", "pass")]
    outcome = mark(ran, known)
    assert [ln.line for ln in outcome.fixed] == [1]
    assert [ln.line for ln in outcome.unchecked] == [2]  # req_idx_map did not run
    gapped = [ScenarioResult("stale_state/x/1", "pass"), ScenarioResult("stale_state", "gap")]
    assert [ln.line for ln in mark(gapped, known).unchecked] == [1, 2]


# -- end to end, through the CLI and its child process -------------------------------------------


def _check(tree: Path, tmp_path: Path, *extra: str):
    out, md = tmp_path / "report.json", tmp_path / "summary.md"
    args = ["check", "--trtllm-src", str(tree), "--scenario", "stale_state"]
    result = CliRunner().invoke(cli, [*args, "--json", str(out), "--markdown", str(md), *extra])
    doc = json.loads(out.read_text()) if out.exists() else None
    return result, doc, md.read_text() if md.exists() else ""


def _check_known(tmp_path: Path, text: str, plant: str | None = None):
    """``_check`` of an era-C stale tree (``plant`` in it) with ``--known`` a file of ``text``."""
    known = tmp_path / "known.txt"
    known.write_text(text)
    tree = build_stale_tree(tmp_path / "tree", "C", plant=plant)
    return known, *_check(tree, tmp_path, "--known", str(known))


def test_a_bad_line_is_exit_2_before_anything_runs(tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the check ran")

    monkeypatch.setattr(isolation, "run_check_isolated", never)
    known, result, doc, _ = _check_known(tmp_path, KNOWN_INDPTR + "stale_state DSA block_table\n")
    assert result.exit_code == 2, result.output
    assert f"{known}:4: no (REASON)" in result.output
    assert doc is None


def test_a_known_finding_passes_and_is_reported_known_everywhere(tmp_path):
    known, result, doc, md = _check_known(tmp_path, KNOWN_INDPTR, "gen_indptr_not_refreshed")
    assert result.exit_code == 0, result.output
    assert f"known stale_state {DSA} gen_kv_indptr" in result.output
    assert f"known stale_state/{DSA}/verify_4x4" in result.output
    assert doc["schema"] == 2 and doc["status"] == "pass" and doc["exit_code"] == 0
    assert [(k["line"], k["field"]) for k in doc["known"]] == [(3, "gen_kv_indptr")]
    assert doc["known"][0]["findings"] > 0 and doc["fixed"] == []
    marks = {v["known"] for s in doc["scenarios"] for v in s["violations"]}
    assert marks == {f"{known}:3"}
    assert "known finding(s)" in md and "**Known findings**" in md
    assert "| 3 | `stale_state DSAtrtllmAttentionMetadata gen_kv_indptr` |" in md


def test_a_finding_not_listed_still_fails_and_the_listed_line_is_fixed(tmp_path):
    known, result, doc, md = _check_known(tmp_path, KNOWN_INDPTR, "host_mirror_not_updated")
    assert result.exit_code == 1, result.output
    assert f"fixed stale_state {DSA} gen_kv_indptr: {known}:3 matches nothing now" in result.output
    assert doc["status"] == "fail" and doc["known"] == []
    assert [(f["line"], f["field"]) for f in doc["fixed"]] == [(3, "gen_kv_indptr")]
    found = [v for s in doc["scenarios"] for v in s["violations"]]
    assert found and all(v["known"] is None for v in found)
    assert {v["finding"]["field"] for v in found} == {"host_gen_block_counts"}
    assert "**Fixed**" in md and "delete them" in md


def test_without_known_the_report_marks_nothing(tmp_path):
    tree = build_stale_tree(tmp_path / "tree", "C", plant="gen_indptr_not_refreshed")
    result, doc, _ = _check(tree, tmp_path)
    assert result.exit_code == 1
    assert doc["known_file"] is None and doc["known"] == [] and doc["fixed"] == []
    assert all(v["known"] is None for s in doc["scenarios"] for v in s["violations"])
    # the JSON still reads back (the child's report travels this way)
    assert CheckReport.from_json(doc).status == "fail"


# -- the bisect recipe --------------------------------------------------------------------------


def test_the_recipe_maps_a_run_whose_only_findings_are_known_to_good(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text(KNOWN_INDPTR)
    tree = build_stale_tree(tmp_path / "tree", "C", plant="gen_indptr_not_refreshed")
    code, lines = probe_exit_code(tree, scenarios=["stale_state"], known=known)
    assert code == 0, lines
    assert any(line.strip().startswith("known stale_state") for line in lines)
    bad, _ = probe_exit_code(tree, scenarios=["stale_state"])
    assert bad == 1


def test_the_recipe_passes_known_to_its_probe_and_keys_on_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("known.txt").write_text(KNOWN_INDPTR)
    recipe = SourceRecipe(known="known.txt")
    assert recipe.command()[-2:] == ["--known", str(tmp_path / "known.txt")]
    before = recipe.config()
    Path("known.txt").write_text(KNOWN_INDPTR + f"stale_state {DSA} other (why)\n")
    assert SourceRecipe(known="known.txt").config() != before
    assert "--known" not in SourceRecipe().command()
    Path("bad.txt").write_text("stale_state x\n")
    with pytest.raises(KnownFileError, match=r"bad\.txt:1"):
        SourceRecipe(known="bad.txt")


def test_a_bisect_parses_each_version_of_the_known_file_once(tmp_path, monkeypatch):
    """The recipe is built by the config's validation, the preflight and the plan."""
    import regress.check.known as known_module

    parsed = []
    real = known_module.load_known
    monkeypatch.setattr(known_module, "load_known", lambda *a: parsed.append(a) or real(*a))
    known = tmp_path / "known.txt"
    known.write_text(KNOWN_INDPTR)
    first = [SourceRecipe(known=known).config() for _ in range(3)]
    assert len(parsed) == 1 and first[0] == first[2]
    known.write_text(KNOWN_INDPTR + f"stale_state {DSA} other (why)\n")
    assert SourceRecipe(known=known).config() != first[0]
    assert len(parsed) == 2
    known.write_text("stale_state x\n")
    with pytest.raises(KnownFileError, match=r"known\.txt:1"):
        SourceRecipe(known=known)


def test_regress_bisect_takes_known_for_the_source_recipe_only(tmp_path):
    from regress.bisect import registry
    from regress.bisect.config import BisectConfig
    from regress.errors import UsageError

    known = tmp_path / "known.txt"
    known.write_text(KNOWN_INDPTR)
    config = BisectConfig(
        good="A", bad="B", command=[], recipe="trtllm-source", options={"known": str(known)}
    )
    recipe = registry.make_recipe(config.recipe, config)
    assert recipe.command()[-2:] == ["--known", str(known)]
    with pytest.raises(UsageError, match="--known is read only by --recipe trtllm-source"):
        BisectConfig(
            good="A", bad="B", command=["x"], recipe="trtllm", options={"known": str(known)}
        )


def test_a_result_shows_its_unknown_finding_first():
    known = parse_known(f"stale_state {DSA} block_table (why)\n", "k")
    result = ScenarioResult("stale_state/a", "fail", [_stale(DSA, "block_table"), _stale(DSA, "x")])
    outcome = mark([result], known)
    assert [v.details["field"] for v in result.violations] == ["x", "block_table"]
    assert sorted(outcome.matched) == [(0, 1)]
