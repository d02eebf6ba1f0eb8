"""The production matrix of ``regress check`` on regress's own fake trees (``_matrix_trees.py``)."""

from __future__ import annotations

import json

import pytest
from _absent import no_triton  # noqa: F401 (the fixture, used by name)
from _matrix_trees import build_matrix_tree
from _upstream_trees import build_caller_tree
from click.testing import CliRunner

from regress.check.check import _load, run_check
from regress.check.matrix import (
    AXES,
    NA,
    MatrixError,
    base_cell,
    cells,
    check_spec,
    find_axes,
    settings_for,
)
from regress.check.production import cell_sandbox
from regress.check.report import CheckReport
from regress.cli import cli
from regress.dsa.stale_allow import Allowed, explain
from regress.dsa.staleness import StaleField
from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, plan_for
from regress.sandbox.fakes import FakeKVCacheManager
from regress.tree.source import resolve_source_tree


def _axes(root):
    plan = plan_for(resolve_source_tree(root))
    return plan, find_axes(plan.tree, plan.fused_gates)


def test_every_axis_found_in_a_tree_that_has_it(tmp_path):
    _, axes = _axes(build_matrix_tree(tmp_path))
    assert all(axes.has(a.key) for a in AXES), axes.describe()
    assert axes.found["fused"].switch == "TRTLLM_DISABLE_FUSED_DSA_METADATA"
    assert axes.found["dsl"].file.endswith("sparse/dsa/params.py")
    assert len(cells(["full"], axes)) == 2 ** len(AXES)


def test_an_axis_the_tree_lacks_is_na_not_a_gap(tmp_path):
    _, axes = _axes(build_caller_tree(tmp_path))  # no switches in params, no fused gate
    for key in ("fused", "dsl", "share", "skip"):
        assert not axes.has(key)
    full = cells(["full"], axes)
    assert len(full) == 2**3  # sm, overlap, pad
    assert all(c["fused"] == NA and c["dsl"] == NA for c in full)
    assert str(base_cell(axes, 90)) == (
        "fused=n/a,dsl=n/a,share=n/a,skip=n/a,sm=90,overlap=off,pad=off"
    )


def test_default_cells_are_the_production_configurations(tmp_path):
    _, axes = _axes(build_matrix_tree(tmp_path))
    got = [str(c) for c in cells(["default"], axes)]
    assert got == [
        f"fused=on,dsl=off,share={share},skip=on,sm={sm},overlap=on,pad=on"
        for share in ("on", "off")
        for sm in ("100", "90")
    ]
    one = cells(["dsl=on,sm=90"], axes)
    assert [str(c) for c in one] == ["fused=on,dsl=on,share=on,skip=on,sm=90,overlap=on,pad=on"]


@pytest.mark.parametrize(
    "spec, words",
    [
        ("nope", ["unknown --matrix axis 'nope'", "fused, dsl, share, skip, sm, overlap, pad"]),
        ("dsl=maybe", ["unknown --matrix value 'maybe' for dsl", "off, on"]),
        ("sm=80", ["for sm", "90, 100"]),
    ],
)
def test_bad_matrix_is_one_line_and_exit_2(tmp_path, spec, words):
    with pytest.raises(MatrixError):
        check_spec(spec)
    src = build_matrix_tree(tmp_path)
    result = CliRunner().invoke(cli, ["check", "--trtllm-src", str(src), "--matrix", spec])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), result.output


@pytest.mark.parametrize(
    "spec, seen",
    [
        (
            "fused=on,dsl=on,share=off,skip=on,sm=100",
            {"dsl": True, "share": False, "skip": True, "sm": 100, "fused": True},
        ),
        (
            "fused=off,dsl=off,share=on,skip=off,sm=90",
            {"dsl": False, "share": True, "skip": False, "sm": 90, "fused": False},
        ),
    ],
)
def test_each_axis_setter_reaches_the_metadata(tmp_path, spec, seen):
    plan, axes = _axes(build_matrix_tree(tmp_path))
    [cell] = cells([spec], axes)
    cfg = settings_for(cell, plan.fused_gates)
    ledger = Ledger()
    with cell_sandbox(plan, cfg, Settings(), ledger) as sandbox:
        up = _load(sandbox, plan, ledger)
        up.sparse_overrides = dict(cfg.params)
        md = up.make_metadata(FakeKVCacheManager(4), max_num_tokens=32, seq_lens=None)
    assert md.cell_seen == seen


def _matrix(tmp_path, matrix=("full",), **variant):
    report = run_check(build_matrix_tree(tmp_path, **variant), matrix=list(matrix))
    bad = [r for r in report.results if r.status not in ("pass", "skip")]
    return report, bad


#: Each planted defect and the axis values every cell that shows it has (and no other does).
#: The fused kernel runs in the base cell too (upstream's default gate value, the fake tree's
#: default being on), so the scenarios outside the matrix name that one as well.
BASE_SEES = {"fused_kernel"}
DEFECTS = {
    "fused_kernel": ({"fused": "defect"}, {"fused": "on"}),
    "dsl_expand_not_refreshed": ({"dsl": "stale"}, {"dsl": "on", "overlap": "on"}),
    "overlap_correction_skips_refresh": ({"overlap_skip": True}, {"overlap": "on"}),
    "padded_dummy_rows_stale": ({"pad_dedup": True}, {"pad": "on", "fused": "off"}),
}
CLEAN = "clean"


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """``full_run(name)``: the default scenarios and ``--matrix full`` on the clean tree
    (:data:`CLEAN`) or a planted defect's (:data:`DEFECTS`), run once for the module: every test
    asserting on a variant's run reads this one (a run is 128 cells)."""
    runs = {}

    def run(name):
        if name not in runs:
            variant = {} if name == CLEAN else DEFECTS[name][0]
            runs[name] = _matrix(tmp_path_factory.mktemp(name), **variant)
        return runs[name]

    return run


def test_clean_tree_passes_every_cell(full_run):
    report, bad = full_run(CLEAN)
    assert report.status == "pass", [(r.name, r.note) for r in bad]
    assert len(report.cells) == 1 + 2 ** len(AXES)
    assert sum(r.name.startswith("matrix/") for r in report.results) == 2 ** len(AXES)
    assert (
        "caller: upstream" in next(r for r in report.results if r.name.startswith("matrix/")).note
    )


@pytest.mark.parametrize("name", list(DEFECTS))
def test_a_defect_is_named_with_the_cells_that_show_it_only(full_run, name):
    _, where = DEFECTS[name]
    report, bad = full_run(name)
    assert report.status == "fail"
    if name not in BASE_SEES:
        assert all(r.name.startswith("matrix/") for r in bad), [r.name for r in bad]
    bad = [r for r in bad if r.name.startswith("matrix/")]
    failing = {r.name.split("/", 1)[1] for r in bad}
    for cell in (r.name.split("/", 1)[1] for r in report.results if r.name.startswith("matrix/")):
        values = dict(p.split("=") for p in cell.split(","))
        assert (cell in failing) == all(values[k] == v for k, v in where.items()), cell
    for r in bad:
        assert {v.details["cell"] for v in r.violations} == {r.name.split("/", 1)[1]}


def test_the_default_run_without_the_matrix_misses_them(full_run):
    """The scenarios outside the matrix run in the base cell: only the fused kernel, which the
    base cell runs at upstream's default, shows there.

    Their results are read from each defect's full run: they ran there in the base cell's
    sandbox, before any cell, as in a run without the matrix.
    """
    scenarios = ("req_idx_map", "draft_callers", "fused_metadata")
    for name, (variant, _) in DEFECTS.items():
        report, _ = full_run(name)
        outside = CheckReport(
            source=report.source,
            results=[r for r in report.results if r.name.split("/", 1)[0] in scenarios],
        )
        assert {r.name.split("/", 1)[0] for r in outside.results} == set(scenarios)
        outside.finish()
        assert outside.status == ("fail" if name in BASE_SEES else "pass"), variant


@pytest.mark.usefixtures("no_triton")
def test_fused_cells_without_triton_are_gaps_naming_pip_install(tmp_path):
    report, bad = _matrix(tmp_path, matrix=("fused=on", "fused=off"), fused="triton")
    assert report.status == "gap"
    [gap] = bad
    assert gap.name.startswith("matrix/fused=on,") and gap.status == "gap"
    assert "pip install triton" in gap.note
    assert (
        next(r for r in report.results if r.name.startswith("matrix/fused=off,")).status == "pass"
    )


def test_every_finding_names_its_cell_in_text_and_json(tmp_path):
    src = build_matrix_tree(tmp_path, overlap_skip=True)
    result = CliRunner().invoke(
        cli,
        ["check", "--trtllm-src", str(src), "--matrix", "overlap=on", "--json", "-", "-q"],
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    cell = "fused=on,dsl=off,share=on,skip=on,sm=100,overlap=on,pad=on"
    # the base cell names the gate as the base session ran it: this tree's default is fused on
    assert doc["cells"] == ["fused=on,dsl=off,share=off,skip=off,sm=90,overlap=off,pad=off", cell]
    found = [v for s in doc["scenarios"] for v in s["violations"]]
    assert found and all(v["details"]["cell"] == cell for v in found)
    assert all("cell" in v["details"] for s in doc["scenarios"] for v in s["violations"])


def _stale(field: str, checkpoint: str) -> StaleField:
    return StaleField(
        field=field, kind="value", live="[1]", fresh="[0]", checkpoint=checkpoint, owner="X"
    )


def test_an_allow_row_covers_only_the_cells_it_was_decided_in():
    row = Allowed("kv_lens", "why", "where", ("overlap_correction",), cells=("overlap=on,sm=90",))
    found = [_stale("kv_lens", "f2:overlap_correction")]
    owner = "X"
    decided = "fused=on,dsl=off,share=on,skip=on,sm=90,overlap=on,pad=on"
    other_sm = decided.replace("sm=90", "sm=100")
    lacking = decided.replace("sm=90", "sm=n/a")  # a tree without the axis agrees with any value
    assert explain(found, [row], owner, decided)[0] == []
    assert explain(found, [row], owner, lacking)[0] == []
    assert explain(found, [row], owner, other_sm)[0] == found  # never silently covered
    assert explain(found, [row], owner)[0] == []  # outside the matrix: as before


def test_a_difference_in_a_cell_no_row_was_decided_for_is_unreviewed(tmp_path, monkeypatch):
    import regress.dsa.stale_allow as allow

    narrowed = tuple(
        a
        if a.field != "kv_lens" or "overlap_correction" not in a.checkpoints
        else Allowed(a.field, a.reason, a.upstream, a.checkpoints, a.classes, ("overlap=on,sm=90",))
        for a in allow.ALLOWED
    )
    monkeypatch.setattr(allow, "ALLOWED", narrowed)
    _, bad = _matrix(tmp_path, matrix=("overlap=on,sm=90", "overlap=on,sm=100"))
    [result] = bad
    assert "sm=100" in result.name
    [v] = result.violations
    assert v.check == "unreviewed" and "decided in overlap=on,sm=90" in v.message


def test_findings_outside_the_matrix_carry_the_base_cell(tmp_path):
    from _upstream_trees import build_tree

    report = run_check(build_tree(tmp_path, "C", "pre"), scenarios=["req_idx_map"], matrix=[])
    base = "fused=n/a,dsl=n/a,share=n/a,skip=n/a,sm=90,overlap=off,pad=off"
    assert report.cells == [base]
    found = [v for r in report.results for v in r.violations]
    assert found and {v.details["cell"] for v in found} == {base}


def test_the_allow_tables_base_cell_is_the_matrix_base_at_sm_90():
    """``dsa.stale_allow`` may not import ``check``, so it spells the base cell out: keep them equal."""
    from regress.check.matrix import AXES, BASE
    from regress.dsa.stale_allow import DECIDED_BASE

    base = {**BASE, "sm": "90"}
    assert (",".join(f"{a.key}={base[a.key]}" for a in AXES),) == DECIDED_BASE
