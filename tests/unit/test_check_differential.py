"""Upstream's fused-vs-eager contract (``regress.check.differential``) on regress's fake trees."""

from __future__ import annotations

from _differential_trees import kernel_off_by_one
from _matrix_trees import build_matrix_tree

from regress.check.check import run_check
from regress.check.differential import FUSED_VS_EAGER

CELLS = ["fused=on", "fused=off"]


def _cells(report):
    return {r.name.split("/", 1)[1]: r for r in report.results if r.name.startswith("matrix/")}


def test_a_kernel_wrong_only_where_no_map_looks_is_named_in_the_fused_cell_only(tmp_path):
    report = run_check(kernel_off_by_one(tmp_path), scenarios=["matrix"], matrix=CELLS)
    cells = _cells(report)
    [on] = [r for c, r in cells.items() if c.startswith("fused=on,")]
    [off] = [r for c, r in cells.items() if c.startswith("fused=off,")]
    assert on.status == "fail" and off.status == "pass", (on.note, off.note)
    checks = {v.check for v in on.violations}
    assert checks == {FUSED_VS_EAGER}, [v.message for v in on.violations]
    assert all(v.details["field"] == "slot_mapping_fp8" for v in on.violations)
    assert all(v.details["cell"] == on.name.split("/", 1)[1] for v in on.violations)


def test_the_clean_fused_kernel_agrees_with_the_eager_chain(tmp_path):
    report = run_check(build_matrix_tree(tmp_path), scenarios=["matrix"], matrix=CELLS)
    assert {r.status for r in _cells(report).values()} == {"pass"}
