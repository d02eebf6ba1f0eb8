"""A partial tree (fewer files than a checkout) on regress's own fake matrix tree: what it lacks
is named, never turned into a stub call or a silent pass."""

from __future__ import annotations

from _matrix_trees import DSA_DIR, build_matrix_tree

from regress.check.check import run_check


def _without_kernel(tmp_path):
    root = build_matrix_tree(tmp_path)
    (root / DSA_DIR / "fused_metadata.py").unlink()
    return root


def test_a_missing_fused_kernel_module_is_one_gap_per_fused_cell_naming_the_file(tmp_path):
    cells = ["fused=on", "fused=off"]
    report = run_check(
        _without_kernel(tmp_path), scenarios=["fused_metadata", "matrix"], matrix=cells
    )
    gaps = [r for r in report.results if r.status == "gap"]
    assert report.status == "gap"
    assert {r.name.split("/")[0] for r in gaps} == {"fused_metadata", "matrix"}
    for gap in gaps:
        assert "not a complete checkout" in gap.note, gap.note
        assert f"{DSA_DIR}/fused_metadata.py" in gap.note
        assert "metadata.py:" in gap.note  # the import's line
    [cell] = [r for r in gaps if r.name.startswith("matrix/")]
    assert ",fused=on" in f",{cell.name.split('/', 1)[1]}"
    off = next(r for r in report.results if r.name.startswith("matrix/fused=off,"))
    assert off.status == "pass", off.note


def test_the_ledger_says_which_stubbed_modules_the_tree_lacks(tmp_path):
    root = build_matrix_tree(tmp_path)
    (root / "tensorrt_llm" / "mapping.py").write_text("raise RuntimeError('never run')\n")
    report = run_check(root, scenarios=["req_idx_map"], matrix=[])
    stubs = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "module-stub"}
    assert stubs["tensorrt_llm._utils"].endswith("(not in the tree)")
    assert stubs["tensorrt_llm.mapping"].endswith("(in the tree, not executed)")
    text = "\n".join(report.lines())
    absent = sum(d.endswith("(not in the tree)") for d in stubs.values())
    assert f"({absent} stubbed module(s) not in the tree)" in text
