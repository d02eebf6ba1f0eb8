"""``regress check``'s default time budget grows with the production-matrix cells it runs."""

from __future__ import annotations

from _matrix_trees import build_matrix_tree

from regress.check import isolation
from regress.check.matrix import AXES, PRODUCTION, most_cells


def test_most_cells_bounds_every_spec_without_a_tree():
    assert most_cells(["default"]) == len(PRODUCTION)
    assert most_cells(["full"]) == 2 ** len(AXES)
    assert most_cells(["default", "fused=off,dsl=on"]) == len(PRODUCTION) + 1


def _budget(tmp_path, monkeypatch, **kwargs) -> float:
    seen = []

    def spawn(work, timeout):
        seen.append(timeout)
        (work / "stderr.txt").write_text("")
        return 1, False  # no report: the check is a gap, no child started

    monkeypatch.setattr(isolation, "_spawn", spawn)
    isolation.run_check_isolated(build_matrix_tree(tmp_path), **kwargs)
    [timeout] = seen
    return timeout


def test_the_full_matrix_gets_time_per_cell_and_the_default_run_keeps_its_own(
    tmp_path, monkeypatch
):
    default = _budget(tmp_path / "d", monkeypatch)
    full = _budget(tmp_path / "f", monkeypatch, matrix=["full"])
    assert default == isolation.DEFAULT_TIMEOUT_S
    extra = 2 ** len(AXES) - len(PRODUCTION)
    assert full == isolation.DEFAULT_TIMEOUT_S + isolation.PER_CELL_S * extra
    assert _budget(tmp_path / "g", monkeypatch, matrix=["full"], timeout=5) == 5  # given: kept
