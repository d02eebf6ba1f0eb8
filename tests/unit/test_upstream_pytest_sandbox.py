"""``pytest --trtllm-src PATH <tests inside PATH>``: upstream-shaped unit tests run on a CPU.

The test module below is regress's own code, shaped like upstream's
``tests/unittest/_torch/attention/sparse/dsa/test_req_idx_per_token.py`` (package import of the
DSA helpers, CUDA-only tests that skip without CUDA, a bare ``object.__new__`` metadata object),
plus two tests that need what a CPU lacks. Each run is a subprocess: the sandbox claims
``tensorrt_llm`` and patches ``torch.cuda`` for the whole run.
"""

from __future__ import annotations

import functools
import importlib.util
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from _upstream_trees import build_tree

pytest_plugins = ("pytester",)

TEST_DIR = "tests/unittest/_torch/attention/sparse/dsa"
UPSTREAM_SHAPED = '''
"""regress's own test, in the shape of upstream's test_req_idx_per_token.py."""
import pytest
import torch

from tensorrt_llm._torch.attention.backends.sparse.dsa import (
    DSAtrtllmAttentionMetadata,
    build_req_idx_per_token,
)


def _expected(seq_lens):
    lens = seq_lens.cpu()
    return torch.repeat_interleave(torch.arange(len(lens), dtype=torch.int32), lens)


@pytest.mark.parametrize("layout", [[3, 3], [2, 0, 1]])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_helper_matches_repeat_interleave(layout, device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA not available")
    seq_lens = torch.tensor(layout, dtype=torch.int32, device=device)
    got = build_req_idx_per_token(seq_lens, int(seq_lens.sum()))
    assert got.tolist() == _expected(seq_lens).tolist()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
def test_on_update_kv_lens_rebuilds_the_map():
    md = object.__new__(DSAtrtllmAttentionMetadata)
    md.kv_cache_manager = None
    md._num_generations = 0
    target = torch.full((3,), 4, dtype=torch.int32)
    md._seq_lens, md._seq_lens_cuda, md._num_tokens = target, target.to("cuda"), 12
    md.req_idx_per_token = torch.empty(12, dtype=torch.int32, device="cuda")
    md.req_idx_per_token[:] = _expected(target)
    draft = torch.ones(3, dtype=torch.int32)
    md._seq_lens, md._seq_lens_cuda, md._num_tokens = draft, draft.to("cuda"), 3
    md.on_update_kv_lens()
    assert md.req_idx_per_token[:3].tolist() == [0, 1, 2]


def test_needs_a_compiled_kernel():
    from tensorrt_llm._utils import fused_gather_kernel

    fused_gather_kernel(torch.zeros(4))


def test_needs_the_cuda_runtime():
    # streams and events are faked (they order nothing on a CPU); a CUDA graph has no CPU meaning
    torch.cuda.CUDAGraph()
'''


def _run(pytester: pytest.Pytester, fix: str, *extra: str):
    tree = build_tree(pytester.path / "trtllm", "C", fix)
    test = tree / TEST_DIR / "test_upstream_shaped.py"
    test.parent.mkdir(parents=True)
    test.write_text(UPSTREAM_SHAPED)
    return pytester.runpytest_subprocess(
        "-p", "regress.pytest_plugin", "--trtllm-src", str(tree), str(test), "-rfs",
        "-p", "no:hypothesispytest",  # no hypothesis tests here: its import is 0.5 CPU s
        *extra,
    )  # fmt: skip


def _gpu_build_of_torch() -> bool:
    """Whether the installed torch was built for CUDA or ROCm, read from its ``version.py``.

    A CPU build (``cuda`` and ``hip`` both None) never has a CUDA runtime, so the answer needs no
    ``import torch``; the file is run on its own, without the package around it.
    """
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin, "torch is not installed"
    built = runpy.run_path(str(Path(spec.origin).with_name("version.py")))
    return bool(built.get("cuda") or built.get("hip"))


@functools.cache
def _real_cuda() -> bool:
    """On a GPU box the stream test gets a real CUDA runtime, so it passes instead of being a gap.

    Asked in a child: torch imported into this worker beside pytester's runs crashed it in GC.
    A CPU build of torch is not asked (a child importing torch costs 1.1 CPU s).
    """
    if not _gpu_build_of_torch():
        return False
    probe = "import torch; print(torch.cuda.is_available())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.strip() == "True"


def test_post_fix_tree_passes_with_no_cuda_skip_and_gaps_as_skips(pytester):
    result = _run(pytester, "post")
    cuda_gaps = 0 if _real_cuda() else 1
    result.assert_outcomes(passed=6 - cuda_gaps, skipped=1 + cuda_gaps)
    assert "CUDA not available" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "regress sandbox: tensorrt_llm from *(era C), CUDA on the CPU*",
            f"skipped as sandbox gaps: {1 + cuda_gaps}",
            "*regress sandbox gap: *stub*fused_gather_kernel*test_upstream_shaped.py:*",
            *(["*regress sandbox gap: upstream needs the CUDA runtime*"] if cuda_gaps else []),
        ]
    )


def test_helper_without_the_rebuild_fails_the_stale_map_test(pytester):
    result = _run(pytester, "helper")
    cuda_gaps = 0 if _real_cuda() else 1
    result.assert_outcomes(passed=5 - cuda_gaps, failed=1, skipped=1 + cuda_gaps)
    result.stdout.fnmatch_lines(["*FAILED*test_on_update_kv_lens_rebuilds_the_map*"])


def test_a_tree_without_the_helper_is_upstream_s_own_import_error_not_a_skip(pytester):
    result = _run(pytester, "pre")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ImportError: cannot import name 'build_req_idx_per_token'*"])


def test_mixing_upstream_tests_with_others_is_refused(pytester):
    pytester.makepyfile(test_ours="def test_x():\n    pass\n")
    result = _run(pytester, "post", "test_ours.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_ours.py lie outside the tree*separate pytest runs*"])
