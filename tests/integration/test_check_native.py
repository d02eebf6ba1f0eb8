"""``regress check --device cuda``: upstream's code natively on a GPU reaches the CPU's verdicts.

On a CPU the sandbox maps CUDA onto the CPU and runs upstream's ``@triton.jit`` kernels in Triton's
interpreter; with ``--device cuda`` the tree's CUDA tensors live on the GPU and its kernels compile
and run natively (issue 28 item 1). Each test below runs ``regress check`` (the CLI, its child
process included) on regress's own fake trees twice, ``--device cpu`` and ``--device cuda``, and
asserts:

* the verdicts: the pre-fix trees fail, the post-fix trees pass, and every scenario (every matrix
  cell) has the same status natively as on the CPU;
* that it really ran natively: the report's ``device`` is ``cuda``, the ledger names the GPU, no
  allocation was mapped onto the CPU, ``TRITON_INTERPRET`` was unset, and every Triton launch
  "ran natively on the GPU" (none in the interpreter).

Runs on the H200 stage (``pytest -m gpu``, ``benchmarks/gpu_session.sh check_native``); on a
machine without CUDA the regress pytest plugin skips every test with the reason. A failure prints
the scenarios whose status differs between the devices, or the report's own summary.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.demo.trees import build_tree

# the fake trees of the unit tests (regress's own code): tests/unit is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _matrix_trees import build_matrix_tree
from _upstream_trees import build_caller_tree

pytestmark = pytest.mark.gpu


def check(tree: Path, device: str, *args: str) -> dict:
    """``regress check --device DEVICE`` on ``tree``: its JSON report (``exit`` added)."""
    out = tree.parent / f"{tree.name}-{device}.json"
    result = CliRunner().invoke(
        cli,
        ["check", "--trtllm-src", str(tree), "--device", device, "--json", str(out), *args],
    )
    assert out.is_file(), f"no report (exit {result.exit_code}): {result.output}"
    doc = json.loads(out.read_text())
    doc["exit"] = result.exit_code
    doc["text"] = result.output
    return doc


def statuses(doc: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in doc["scenarios"]}


def fakes(doc: dict, kind: str) -> dict[str, dict]:
    return {f["name"]: f for f in doc["sandbox"]["faked"] if f["kind"] == kind}


def both(tree: Path, *args: str) -> tuple[dict, dict]:
    """The CPU's report and the GPU's, after asserting they reach the same verdicts."""
    cpu, gpu = check(tree, "cpu", *args), check(tree, "cuda", *args)
    differ = {
        name: (status, statuses(gpu).get(name))
        for name, status in statuses(cpu).items()
        if statuses(gpu).get(name) != status
    }
    assert not differ, f"scenario: (cpu, cuda) status\n{differ}\n{gpu['text']}"
    assert set(statuses(gpu)) == set(statuses(cpu)), gpu["text"]
    assert (gpu["status"], gpu["exit"]) == (cpu["status"], cpu["exit"]), gpu["text"]
    assert_native(gpu)
    assert cpu["device"] == "cpu"
    return cpu, gpu


def assert_native(doc: dict) -> None:
    """The report ran upstream natively: on the GPU, nothing mapped onto the CPU, no interpreter."""
    assert doc["device"] == "cuda"
    cuda = fakes(doc, "cuda")
    assert "native" in cuda and "cuda:" in cuda["native"]["detail"], cuda
    mapped = [n for n in cuda if n != "native"]  # Tensor.cuda, device=cuda in ..., FakeEvent
    assert not mapped, f"mapped onto the CPU in a native run: {mapped}"
    env = fakes(doc, "env")
    assert "TRITON_INTERPRET=1" not in env, env
    for name, launch in fakes(doc, "triton").items():
        assert launch["detail"] == "ran natively on the GPU", (name, launch)


@pytest.mark.parametrize("era", ["A", "B", "C"])
@pytest.mark.parametrize(("fix", "exit_code"), [("pre", 1), ("post", 0)])
def test_pre_fix_trees_fail_and_post_fix_trees_pass_natively(tmp_path, era, fix, exit_code):
    """The demo trees (``regress demo --check``'s): the map refreshed after the draft loop or not."""
    _, gpu = both(build_tree(tmp_path / "tree", era=era, fix=fix, guard=True))
    assert gpu["exit"] == exit_code, gpu["text"]


#: Matrix trees: clean, and each planted defect only some cells show (tests/unit/_matrix_trees.py).
MATRIX_TREES = {
    "clean": ({}, 0),
    "fused_kernel": ({"fused": "defect"}, 1),
    "overlap_correction_skips_refresh": ({"overlap_skip": True}, 1),
    "padded_dummy_rows_stale": ({"pad_dedup": True}, 1),
}


@pytest.mark.parametrize("name", list(MATRIX_TREES))
def test_the_production_matrix_gives_the_same_verdict_per_cell_natively(tmp_path, name):
    variant, exit_code = MATRIX_TREES[name]
    tree = build_matrix_tree(tmp_path / "tree", **variant)
    _, gpu = both(tree, "--scenario", "matrix", "--matrix", "full")
    assert gpu["exit"] == exit_code, gpu["text"]
    assert len(gpu["cells"]) > 2  # the matrix ran, not only the base cell


@pytest.mark.parametrize(("kernel", "exit_code"), [("right", 0), ("wrong", 1)])
def test_a_real_triton_kernel_runs_natively_in_a_fused_on_cell(tmp_path, kernel, exit_code):
    """A fake tree whose fused decode-metadata path launches a real ``@triton.jit`` kernel
    (``regress/demo/tree_parts/fused_metadata.py.in``); ``wrong`` writes the next request's index."""
    tree = build_caller_tree(tmp_path / "tree", fused="new", fused_kernel=kernel)
    args = ("--scenario", "matrix", "--scenario", "fused_metadata", "--matrix", "fused=on")
    cpu, gpu = both(tree, *args)
    assert gpu["exit"] == exit_code, gpu["text"]
    assert any(c.startswith("fused=on") for c in gpu["cells"]), gpu["cells"]
    launches = fakes(gpu, "triton")
    assert any(n.endswith("._req_idx_kernel") for n in launches), launches
    assert all("interpreter" in f["detail"] for f in fakes(cpu, "triton").values())
    assert fakes(gpu, "env")["TRITON_INTERPRET"]["detail"].startswith("unset")


@pytest.mark.parametrize("switch", [False, True])
def test_ragged_device_windows_are_handed_over_on_the_metadata_device(tmp_path, switch):
    """``ragged_verify`` installs device windows through the tree's ``apply_device_ragged_layout``,
    which ``index_select``s with them as upstream's does (186080bb, ``sparse/dsa/metadata.py``
    line 1852): on the H200 regress once handed CPU tensors and got a gap of its own making."""
    tree = build_caller_tree(tmp_path / "tree", ragged="post", ragged_switch=switch)
    _, gpu = both(tree, "--scenario", "ragged_verify")
    assert gpu["exit"] == 0, gpu["text"]
    assert statuses(gpu) == {"ragged_verify/windows_4_2_3_1": "pass"}, gpu["text"]
