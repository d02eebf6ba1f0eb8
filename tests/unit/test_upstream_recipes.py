"""The TensorRT-LLM recipes: DSA module per era, binary overlay, environment, native-code warning."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _upstream_trees import LAYOUT, build_tree

from regress.check import recipes
from regress.check.check import run_check
from regress.check.recipes import TrtllmRecipe, dsa_env, link_binaries, native_warning
from regress.cli import child
from regress.errors import MissingDependencyError, UsageError
from regress.tree.eras import ERAS

A = "tensorrt_llm/_torch/attention_backend/sparse/dsa.py"
B = "tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py"
C = "tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py"
DSA_CLASS = "class DSAtrtllmAttentionMetadata:\n    pass\n"


def era_tree(root: Path, eras: set[str]) -> Path:
    """A tree holding the DSA class of each era in ``eras``, as regress check recognises them."""
    (root / "tensorrt_llm").mkdir(parents=True)
    (root / "tensorrt_llm" / "__init__.py").write_text("")
    for era in eras:
        backends, dsa = LAYOUT[era]
        base = root / "tensorrt_llm" / backends
        base.mkdir(parents=True, exist_ok=True)
        (base / "interface.py").write_text("class AttentionMetadata:\n    pass\n")
        (base / "trtllm.py").write_text("class TrtllmAttentionMetadata:\n    pass\n")
        (root / "tensorrt_llm" / dsa).parent.mkdir(parents=True, exist_ok=True)
        (root / "tensorrt_llm" / dsa).write_text(DSA_CLASS)
        if era != "A":
            (root / "tensorrt_llm" / dsa).with_name("__init__.py").write_text("")
    return root


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        ({"A"}, ("A", A)),
        ({"B"}, ("B", B)),
        ({"C"}, ("C", C)),
        ({"A", "C"}, ("C", C)),  # during a move both exist: the newest location wins
        (set(), None),
    ],
)
def test_dsa_module_per_era(tmp_path, present, expected):
    env = dsa_env(era_tree(tmp_path, present))
    found = (env["REGRESS_DSA_ERA"], env["REGRESS_DSA_MODULE"]) if env else None
    assert found == expected


def test_eras_mirror_the_facts_table(tmp_path):
    assert [era.name for era in ERAS] == ["C", "B", "A"]
    env = dsa_env(era_tree(tmp_path, {"B"}))
    assert env["REGRESS_DSA_IMPORT"] == "tensorrt_llm._torch.attention_backend.sparse.dsa.metadata"


def test_the_recipe_and_regress_check_give_a_tree_one_era(tmp_path):
    """Era A plus a leftover era-C metadata.py without its package __init__ (a checkout moved
    back from C, or an untracked file): regress check says A, and so must the recipe."""
    root = build_tree(tmp_path, "A", "pre")
    leftover = root / "tensorrt_llm" / LAYOUT["C"][1]
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_text(DSA_CLASS)
    assert run_check(root, scenarios=["req_idx_map"]).era == "A"
    env = TrtllmRecipe(python="/py").env("sha", root)
    assert (env["REGRESS_DSA_ERA"], env["REGRESS_DSA_MODULE"]) == ("A", A)


def test_native_warning():
    assert native_warning([]) is None
    text = native_warning(["abc123 touch kernels", "def456 bindings", "0a1b2c x", "ffff y"])
    assert text.startswith("4 commit(s) in the range touch cpp/")
    assert "abc123 touch kernels" in text and "; ..." in text
    assert "scripts/build_wheel.py --use_ccache" in text


def test_link_binaries_links_only_compiled_files(tmp_path):
    installed = tmp_path / "site" / "tensorrt_llm"
    for rel in (
        "libs/libtensorrt_llm.so",
        "libs/libnvinfer_plugin_tensorrt_llm.so.10",
        "bindings.cpython-311-x86_64-linux-gnu.so",
        "deep_gemm/_C.so",
        "bin/executor_worker",
        "_torch/attention_backend/sparse/dsa.py",
        "__pycache__/x.so",
    ):
        (installed / rel).parent.mkdir(parents=True, exist_ok=True)
        (installed / rel).write_text(rel)
    target = tmp_path / "worktree" / "tensorrt_llm"
    (target / "_torch/attention_backend/sparse").mkdir(parents=True)
    (target / "_torch/attention_backend/sparse/dsa.py").write_text("worktree code")
    (target / "deep_gemm").mkdir()
    (target / "deep_gemm/_C.so").write_text("built here")
    made = {str(p.relative_to(target)) for p in link_binaries(installed, target)}
    assert made == {
        "libs/libtensorrt_llm.so",
        "libs/libnvinfer_plugin_tensorrt_llm.so.10",
        "bindings.cpython-311-x86_64-linux-gnu.so",
        "bin/executor_worker",
    }
    assert (target / "_torch/attention_backend/sparse/dsa.py").read_text() == "worktree code"
    assert (target / "deep_gemm/_C.so").read_text() == "built here"
    assert link_binaries(installed, target) == []  # idempotent


def test_main_links_from_the_command_line(tmp_path, monkeypatch):
    installed = tmp_path / "site"
    (installed / "libs").mkdir(parents=True)
    (installed / "libs" / "libx.so").write_text("elf")
    monkeypatch.chdir(tmp_path)
    assert child.main(["link-binaries", "--from", str(installed)]) == 2  # no ./tensorrt_llm
    (tmp_path / "tensorrt_llm").mkdir()
    assert child.main(["link-binaries", "--from", str(installed)]) == 0
    assert (tmp_path / "tensorrt_llm" / "libs" / "libx.so").is_symlink()


def test_recipe_environment_and_builds(tmp_path, monkeypatch):
    era_tree(tmp_path, {"B"})
    monkeypatch.setenv("PYTHONPATH", "/extra")
    pre = TrtllmRecipe(mode="precompiled", wheel="/wheels/trtllm.whl", python="/py")
    env = pre.env("sha", tmp_path)
    assert env["TRTLLM_USE_PRECOMPILED"] == "1"
    assert env["TRTLLM_PRECOMPILED_LOCATION"] == "/wheels/trtllm.whl"
    assert env["PYTHONPATH"].split(":") == [str(tmp_path), "/extra"]
    assert (env["REGRESS_DSA_ERA"], env["REGRESS_DSA_MODULE"]) == ("B", B)
    assert env["REGRESS_DSA_IMPORT"] == "tensorrt_llm._torch.attention_backend.sparse.dsa.metadata"
    assert pre.build_command() == "/py -m pip install --no-deps -e ."
    monkeypatch.setattr(
        recipes, "installed_package", lambda: tmp_path / "site pkgs" / "tensorrt_llm"
    )
    overlay = TrtllmRecipe(python="/py")
    assert "TRTLLM_USE_PRECOMPILED" not in overlay.env("sha", tmp_path)
    assert overlay.build_command() == (
        f"/py -m regress.cli.child link-binaries --from '{tmp_path}/site pkgs/tensorrt_llm'"
    )
    with pytest.raises(UsageError, match="overlay or precompiled"):
        TrtllmRecipe(mode="full")


def test_overlay_without_an_installed_wheel_says_how_to_get_one(monkeypatch):
    monkeypatch.setattr(recipes.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match="pip install tensorrt_llm"):
        TrtllmRecipe(python=sys.executable).build_command()


def test_one_status_table_gives_the_exit_code_and_the_bisect_verdict():
    """A tree without a verdict (gap) or without DSA (not-a-tree) is bisect's skip, never bad."""
    from regress.bisect.causes import SKIP_EXIT_CODE
    from regress.check.status import CODES, ReportStatus, bisect_code, exit_code
    from regress.errors import EXIT_CODES

    assert set(CODES) == set(ReportStatus)
    assert {s: bisect_code(s) for s in ReportStatus} == {
        "pass": 0,
        "fail": 1,
        "not-a-tree": SKIP_EXIT_CODE,
        "gap": SKIP_EXIT_CODE,
    }
    meanings = EXIT_CODES["regress check"]
    assert meanings[exit_code("pass")].startswith("contracts hold")
    assert meanings[exit_code("fail")] == "a contract is broken"
    assert meanings[exit_code("not-a-tree")] == "not a TensorRT-LLM tree"
    assert meanings[exit_code("gap")].startswith("no verdict")
