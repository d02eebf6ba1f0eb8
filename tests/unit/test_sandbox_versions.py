"""What the tree decides from a package's version, and whose a failed import of a tree name is.

Fake trees and a fake distribution of regress's own (never upstream code): a module that gates a
path on ``<package>.__version__``, as upstream's ``SpecWorkerBase`` gates one-model speculative
decoding on ``flashinfer>=0.6.4`` (``speculative/interface.py`` stored id 57352998664), and two
tree modules where one imports a name the other does not define, as a stored ``eagle3.py`` imports
``MTPSampler`` from an ``mtp.py`` of another commit.
"""

from __future__ import annotations

import importlib

import pytest
from _upstream_trees import build_tree, tree_sandbox, write_files

from regress.sandbox import Ledger, SandboxGap

#: A stubbed third-party import name that is not installed here (regress.sandbox.stubs.THIRD_PARTY).
PACKAGE = "deep_gemm"
GATED = (
    "from packaging.version import Version\n\n"
    f"import {PACKAGE}\n\n"
    f"VERSION = {PACKAGE}.__version__\n"
    f"READY = Version({PACKAGE}.__version__) >= Version('0.6.4')\n"
)


@pytest.fixture
def installed_package(tmp_path, monkeypatch):
    """A distribution ``fake-deep-gemm`` 7.1.0 providing the import name :data:`PACKAGE`."""
    site = tmp_path / "site"
    (site / PACKAGE).mkdir(parents=True)
    (site / PACKAGE / "__init__.py").write_text("raise RuntimeError('never executed')\n")
    info = site / "fake_deep_gemm-7.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-deep-gemm\nVersion: 7.1.0\n")
    (info / "top_level.txt").write_text(f"{PACKAGE}\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return "7.1.0"


def test_a_stubbed_installed_package_answers_its_installed_version(tmp_path, installed_package):
    tree = tmp_path / "tree"
    build_tree(tree, "C")
    write_files(tree, {"tensorrt_llm/_torch/gated.py": GATED})
    ledger = Ledger()
    with tree_sandbox(tree, "tensorrt_llm._torch.gated", ledger=ledger) as sandbox:
        gated = sandbox.load("tensorrt_llm._torch.gated")
        assert (installed_package, True) == (gated.VERSION, gated.READY)
    assert ledger.fakes[("value", f"{PACKAGE}.__version__")].detail.startswith(installed_package)


def test_an_absent_package_has_no_version_to_answer(tmp_path):
    build_tree(tmp_path, "C")
    write_files(tmp_path, {"tensorrt_llm/_torch/gated.py": GATED})
    with (
        tree_sandbox(tmp_path, "tensorrt_llm._torch.gated") as sandbox,
        pytest.raises(AttributeError),
    ):
        sandbox.load("tensorrt_llm._torch.gated")


def test_a_name_missing_from_a_tree_module_is_the_trees_not_the_sandboxs(tmp_path):
    build_tree(tmp_path, "C")
    write_files(
        tmp_path,
        {
            "tensorrt_llm/_torch/newer.py": "from .older import Sampler\n",
            "tensorrt_llm/_torch/older.py": "WORKER = 1\n",
        },
    )
    real = ("tensorrt_llm._torch.newer", "tensorrt_llm._torch.older")
    with tree_sandbox(tmp_path, *real) as sandbox, pytest.raises(SandboxGap) as gap:
        sandbox.load("tensorrt_llm._torch.newer")
    message = str(gap.value)
    assert "tensorrt_llm/_torch/older.py does not define" in message
    assert "one commit" in message and "Mark it real or stubbed" not in message


REFUSES = (
    f"try:\n    import {PACKAGE}\n    HAVE = True\nexcept ImportError:\n    HAVE = False\n\n\n"
    "def build():\n    if not HAVE:\n"
    f"        raise ImportError('Speculative decoding requires {PACKAGE}>=0.6.4')\n"
)


def test_upstream_refusing_to_run_without_an_absent_package_names_the_install(tmp_path):
    from regress.sandbox.blame import blame, describe

    build_tree(tmp_path, "C")
    write_files(tmp_path, {"tensorrt_llm/_torch/refuses.py": REFUSES})
    with tree_sandbox(tmp_path, "tensorrt_llm._torch.refuses") as sandbox:
        module = sandbox.load("tensorrt_llm._torch.refuses")
        with pytest.raises(ImportError) as raised:
            module.build()
    said = describe(raised.value, blame(raised.value, tmp_path))
    assert f"refuses to run without {PACKAGE}, not installed here" in said
    assert "refuses.py" in said and "cannot be imported" not in said
