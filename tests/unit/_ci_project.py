"""A small sample project (tests plus stage lists) shared by the CI-plumbing tests."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

LISTS = Path(__file__).resolve().parents[1] / "data" / "testlists" / "good"

PROJECT = {
    "tests/unit/test_u.py": """
        import pytest

        def test_a():
            pass

        @pytest.mark.parametrize("n", [1, 2])
        def test_b(n):
            pass
    """,
    "tests/test_top.py": """
        def test_one():
            pass

        def test_two():
            pass
    """,
    "tests/gpu/test_single.py": """
        import pytest

        @pytest.mark.gpu
        def test_cuda():
            pass

        @pytest.mark.trtllm
        def test_trt():
            pass
    """,
    "tests/gpu/test_multi.py": """
        import pytest

        class TestGLM52:
            @pytest.mark.gpu(count=4)
            def test_al(self):
                pass

        class TestDeepSeekV32:
            @pytest.mark.gpu(count=4)
            def test_al(self):
                pass

            def test_other(self):
                pass
    """,
}


def write_project(root: Path, lists: Path = LISTS) -> Path:
    """A small repository: PROJECT's tests plus a copy of a fixture test-lists directory."""
    for rel, body in PROJECT.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body), encoding="utf-8")
    shutil.copytree(lists, root / "test-lists")
    return root / "test-lists"
