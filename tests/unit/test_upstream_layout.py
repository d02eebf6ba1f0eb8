"""Module-path resolution against small fake TensorRT-LLM trees laid out like eras A, B and C.

The era table is ``regress.tree.eras``, its rule ``regress.tree.source``; finding and loading the installed
package is ``regress.trtllm.paths``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from regress.errors import MissingDependencyError, UsageError
from regress.tree import source as trees
from regress.tree.eras import ERAS
from regress.trtllm import paths

DSA_CLASS = (
    "TrtllmAttentionMetadata = object\n\n\n"
    "class DSAtrtllmAttentionMetadata(TrtllmAttentionMetadata):\n    pass\n"
)
BASES = {
    "interface.py": "class AttentionMetadata:\n    pass\n",
    "trtllm.py": "class TrtllmAttentionMetadata:\n    pass\n",
}


def write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_tree(root: Path, era: str, draft: str | None = "mtp") -> Path:
    """A fake checkout holding only what resolution reads, laid out like ``era``."""
    pkg = "tensorrt_llm"
    write(root, f"{pkg}/__init__.py")
    backends = {"A": "_torch/attention_backend", "B": "_torch/attention_backend"}.get(
        era, "_torch/attention/backends"
    )
    for name, text in BASES.items():
        write(root, f"{pkg}/{backends}/{name}", text)
    if era == "A":
        write(root, f"{pkg}/{backends}/sparse/dsa.py", DSA_CLASS)
    else:
        write(root, f"{pkg}/{backends}/sparse/dsa/metadata.py", DSA_CLASS)
        write(
            root,
            f"{pkg}/{backends}/sparse/dsa/__init__.py",
            "from .metadata import DSAtrtllmAttentionMetadata\n",
        )
    spec = f"{pkg}/_torch/speculative"
    if draft == "mtp":
        write(
            root,
            f"{spec}/mtp.py",
            "class MTPWorker:\n    pass\n\n\nclass MTPEagleWorker(MTPWorker):\n    pass\n",
        )
    elif draft == "eagle3":
        write(root, f"{spec}/eagle3.py", "class Eagle3OneModelWorker:\n    pass\n")
        write(
            root,
            f"{spec}/mtp.py",
            "from .eagle3 import Eagle3OneModelWorker\n\n\n"
            "class MTPEagleWorker(Eagle3OneModelWorker):\n    pass\n",
        )
    return root


@pytest.mark.parametrize(
    ("era", "module"),
    [
        ("A", "tensorrt_llm._torch.attention_backend.sparse.dsa"),
        ("B", "tensorrt_llm._torch.attention_backend.sparse.dsa.metadata"),
        ("C", "tensorrt_llm._torch.attention.backends.sparse.dsa.metadata"),
    ],
)
def test_each_era_resolves_to_its_dsa_module(tmp_path, era, module):
    layout = trees.resolve_source_tree(make_tree(tmp_path, era))
    assert layout.era.name == era
    assert layout.dsa_metadata.module == module
    assert layout.dsa_metadata.qualname == "DSAtrtllmAttentionMetadata"
    assert layout.dsa_metadata.file.is_file()
    assert layout.dsa_module_names[0] == module


def test_package_eras_also_name_the_reexporting_package(tmp_path):
    layout = trees.resolve_source_tree(make_tree(tmp_path, "B"))
    assert layout.reexported_from == ("tensorrt_llm._torch.attention_backend.sparse.dsa",)
    assert trees.resolve_source_tree(make_tree(tmp_path / "a", "A")).reexported_from == ()


@pytest.mark.parametrize(
    ("era", "backends"),
    [
        ("A", "tensorrt_llm._torch.attention_backend"),
        ("B", "tensorrt_llm._torch.attention_backend"),
        ("C", "tensorrt_llm._torch.attention.backends"),
    ],
)
def test_base_classes_follow_the_era(tmp_path, era, backends):
    layout = trees.resolve_source_tree(make_tree(tmp_path, era))
    assert layout.attention_metadata.module == f"{backends}.interface"
    assert layout.attention_metadata.qualname == "AttentionMetadata"
    assert layout.trtllm_metadata.module == f"{backends}.trtllm"


def test_draft_loop_is_mtp_eagle_worker_before_the_eagle3_unification(tmp_path):
    layout = trees.resolve_source_tree(make_tree(tmp_path, "A", draft="mtp"))
    assert layout.draft_loop.module == "tensorrt_llm._torch.speculative.mtp"
    assert layout.draft_loop.qualname == "MTPEagleWorker.forward"


def test_draft_loop_is_eagle3_one_model_worker_once_mtp_eagle_wraps_it(tmp_path):
    layout = trees.resolve_source_tree(make_tree(tmp_path, "C", draft="eagle3"))
    assert layout.draft_loop.module == "tensorrt_llm._torch.speculative.eagle3"
    assert layout.draft_loop.qualname == "Eagle3OneModelWorker.forward"


def test_tree_without_one_model_mtp_has_no_draft_loop(tmp_path):
    assert trees.resolve_source_tree(make_tree(tmp_path, "B", draft=None)).draft_loop is None


def test_package_directory_itself_is_accepted(tmp_path):
    layout = trees.resolve_source_tree(make_tree(tmp_path, "C") / "tensorrt_llm")
    assert layout.package_dir == tmp_path / "tensorrt_llm"


def test_newest_layout_wins_when_an_old_file_lingers(tmp_path):
    # A checkout moved from era A to C can keep an untracked dsa.py; C must still be found.
    root = make_tree(tmp_path, "C")
    write(root, "tensorrt_llm/_torch/attention_backend/sparse/dsa.py", DSA_CLASS)
    assert trees.resolve_source_tree(root).era.name == "C"


def test_leftover_package_dir_without_init_does_not_shadow_era_a(tmp_path):
    # Going back from era B to A leaves dsa/ with only __pycache__; it is not a package.
    root = make_tree(tmp_path, "A")
    write(root, "tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py", DSA_CLASS)
    assert trees.resolve_source_tree(root).era.name == "A"


def test_tree_without_dsa_names_every_path_tried(tmp_path):
    root = tmp_path / "old"
    write(root, "tensorrt_llm/__init__.py")
    with pytest.raises(trees.SourceTreeError) as info:
        trees.resolve_source_tree(root)
    message = str(info.value)
    for era in ERAS:
        assert str(root / "tensorrt_llm" / era.dsa_metadata) in message
    assert "skipped" in message
    assert isinstance(info.value, UsageError)


def test_file_without_the_class_is_not_a_match(tmp_path):
    root = make_tree(tmp_path, "A")
    write(root, "tensorrt_llm/_torch/attention_backend/sparse/dsa.py", "# DSA moved away\n")
    with pytest.raises(trees.SourceTreeError, match="No DSAtrtllmAttentionMetadata"):
        trees.resolve_source_tree(root)


def test_missing_base_class_is_an_unknown_layout(tmp_path):
    root = make_tree(tmp_path, "B")
    write(root, "tensorrt_llm/_torch/attention_backend/trtllm.py", "class Other:\n    pass\n")
    with pytest.raises(trees.SourceTreeError, match="TrtllmAttentionMetadata is not defined"):
        trees.resolve_source_tree(root)


def test_not_a_tensorrt_llm_tree(tmp_path):
    with pytest.raises(trees.SourceTreeError, match="is not a TensorRT-LLM tree"):
        trees.resolve_source_tree(tmp_path)


def test_installed_package_is_resolved_from_its_spec_without_importing(tmp_path):
    root = make_tree(tmp_path, "B")
    asked = []

    def find_spec(name):
        asked.append(name)
        return SimpleNamespace(submodule_search_locations=[str(root / "tensorrt_llm")])

    layout = paths.resolve(find_spec=find_spec)
    assert layout.era.name == "B"
    assert asked == ["tensorrt_llm"]
    assert "tensorrt_llm" not in sys.modules


def test_missing_installed_package_says_how_to_get_it():
    with pytest.raises(MissingDependencyError, match="not importable"):
        paths.resolve_installed(lambda name: None)


def test_source_argument_beats_the_installed_package(tmp_path):
    root = make_tree(tmp_path, "A")
    assert paths.resolve(root, find_spec=lambda name: pytest.fail("must not look")).era.name == "A"


@pytest.fixture
def importable_tree(tmp_path, monkeypatch):
    """A fake tree on sys.path; every tensorrt_llm module it loads is dropped afterwards."""
    root = make_tree(tmp_path, "C")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield root
    for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
        del sys.modules[name]


def test_load_imports_the_resolved_class(importable_tree):
    layout = trees.resolve_source_tree(importable_tree)
    cls = paths.load(layout.dsa_metadata)
    assert cls.__name__ == "DSAtrtllmAttentionMetadata"
    assert cls.__module__ == layout.dsa_metadata.module


def test_load_explains_an_unimportable_module(tmp_path):
    location = trees.Location("no_such_pkg_for_regress.mod", tmp_path / "mod.py", "X")
    with pytest.raises(MissingDependencyError, match=r"Cannot import no_such_pkg_for_regress\.mod"):
        paths.load(location)


def test_a_metadata_whose_package_init_is_missing_is_named_not_called_absent(tmp_path):
    """An era-C tree without ``sparse/dsa/__init__.py`` used to be told "no
    DSAtrtllmAttentionMetadata found" beside the very file that defines it (2026-12-02, on a
    real tree assembled by hand); the error now names the missing package file."""
    tree = make_tree(tmp_path, "C")
    init = tree / "tensorrt_llm/_torch/attention/backends/sparse/dsa/__init__.py"
    init.unlink()
    with pytest.raises(trees.SourceTreeError) as err:
        trees.resolve_source_tree(tree)
    message = str(err.value)
    assert f"{init} is missing" in message and "defines it" in message
    assert "predates DSA" not in message


def test_an_era_without_its_facts_fails_where_the_table_is_defined():
    """Before the one ``Era`` object, an era added to the layout table alone passed every test and
    raised ``KeyError`` on the first real tree of that era (issue 30)."""
    from regress.tree.eras import Era

    with pytest.raises(TypeError, match="real"):
        Era("D", "_torch/x/sparse/dsa/metadata.py", "_torch/x")  # what runs for real is missing
    with pytest.raises(ValueError, match="DSA module"):
        Era("D", "_torch/x/sparse/dsa/metadata.py", "_torch/x", real=("{backends}/trtllm.py",))
    with pytest.raises(ValueError, match="unknown field"):
        Era("D", "_torch/x/dsa.py", "_torch/x", real=("{backend}/interface.py", "{dsa}"))


@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.name)
def test_every_era_plans_its_real_modules_from_the_era_the_tree_carries(tmp_path, era):
    from regress.sandbox.eras import plan_for

    tree = trees.resolve_source_tree(make_tree(tmp_path, era.name))
    assert tree.era is era
    plan = plan_for(tree)
    assert plan.dsa_module == tree.dsa_metadata.module
    assert plan.real[-1] == tree.dsa_metadata.module
    assert f"{tree.attention_metadata.module}" in plan.real
