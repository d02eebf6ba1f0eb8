"""Layer-wise shape checks: the DeepGEMM signature, metadata contracts and the child-process driver."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from typing import Any

import pytest
import torch

from regress.cli import child
from regress.dsa.announce import DEEPGEMM_ASSERT
from regress.errors import MissingDependencyError
from regress.trtllm import layerwise
from regress.trtllm.layerwise import ShapeCheck, run_in_subprocess
from regress.trtllm.shapes import (
    ShapeResult,
    check_metadata,
    default_spec_state,
    find_deepgemm_assertion,
    metadata_of,
)

# How the abort reads when DeepGEMM's host assertion fires inside fp8_paged_mqa_logits.
ABORT = (
    "RuntimeError: Assertion failed: csrc/apis/attention.hpp:212, "
    "condition: batch_size == __batch_size and next_n == _next_n"
)


@dataclasses.dataclass
class DenseMetadata:
    """Like TrtllmAttentionMetadata: spec-dec fields with defaults, no kv_lens_cuda_2d."""

    num_tokens: int = 128
    num_ctx_tokens: int = 0
    num_generations: int = 32
    max_total_draft_tokens: Any = None
    is_spec_decoding_enabled: bool = False
    is_spec_dec_tree: bool = False

    def prepare(self):
        pass


@dataclasses.dataclass
class DsaMetadata(DenseMetadata):
    kv_lens_cuda_2d: Any = None


def dsa(columns, *, seq_len_q=4, batch=32):
    return DsaMetadata(
        num_tokens=batch * seq_len_q,
        num_generations=batch,
        kv_lens_cuda_2d=torch.zeros(batch, columns, dtype=torch.int32),
    )


def test_deepgemm_signature_is_found_only_where_it_is():
    assert find_deepgemm_assertion(ABORT) == ABORT
    assert find_deepgemm_assertion("x\n" + DEEPGEMM_ASSERT + "\ny") == DEEPGEMM_ASSERT
    assert find_deepgemm_assertion("batch_size==__batch_size   and next_n==_next_n") is not None
    assert find_deepgemm_assertion("CUDA error: out of memory") is None
    assert find_deepgemm_assertion("") is None and find_deepgemm_assertion(None) is None


def test_unannounced_mtp_shapes_are_a_violation_before_any_kernel_runs():
    result = ShapeResult("dsa", 32, 4)
    check_metadata(dsa(columns=1), result)  # bug 2: buffer one column wide, next_n = 4
    assert [v["check"] for v in result.violations] == ["kv_lens_2d_width"]
    assert result.kv_lens_2d_shape == [32, 1]
    fixed = ShapeResult("dsa", 32, 4)
    check_metadata(dsa(columns=4), fixed)
    assert fixed.violations == []


def test_non_dsa_metadata_must_keep_max_total_draft_tokens_unset():
    untouched = ShapeResult("dense", 32, 4)
    check_metadata(DenseMetadata(), untouched)
    assert untouched.violations == [] and untouched.max_total_draft_tokens is None
    # The rejected guard (on the update_spec_dec_param method) announced to every backend.
    announced = ShapeResult("dense", 32, 4)
    check_metadata(DenseMetadata(max_total_draft_tokens=3), announced)
    assert [v["check"] for v in announced.violations] == ["announcement_scope"]
    assert announced.max_total_draft_tokens == 3


def test_default_spec_state_reads_dataclass_defaults():
    @dataclasses.dataclass
    class WithFactory:
        max_total_draft_tokens: list = dataclasses.field(default_factory=list)

    assert default_spec_state(DenseMetadata(max_total_draft_tokens=7)) == {
        "max_total_draft_tokens": None,
        "is_spec_decoding_enabled": False,
        "is_spec_dec_tree": False,
    }
    assert default_spec_state(WithFactory())["max_total_draft_tokens"] == []
    assert default_spec_state(object())["max_total_draft_tokens"] is None


def test_metadata_is_read_from_the_run_pack_closure():
    attn_metadata = DenseMetadata()

    def run_pack(*, check=False):
        return attn_metadata, check

    assert metadata_of(run_pack) is attn_metadata

    other = DsaMetadata()

    def renamed():
        return other

    assert metadata_of(renamed) is other
    assert metadata_of(lambda: None) is None
    assert metadata_of(print) is None


def test_results_describe_themselves():
    ok = ShapeResult("dsa", 32, 1, ran=True)
    assert ok.ok and ok.describe() == "dsa GEN batch=32 seq_len_q=1: ok"
    crashed = ShapeResult("dsa", 32, 4, deepgemm_assertion=ABORT)
    assert not crashed.ok and DEEPGEMM_ASSERT in crashed.describe()
    assert ShapeResult("dsa", 32, 4).describe().endswith("did not run")
    assert ShapeResult.from_dict({**ok.to_dict(), "unknown": 1}) == ok


class Spawn:
    """Fakes the child process: writes the given results, then exits with the given output."""

    def __init__(self, results, *, returncode=0, stderr=""):
        self.results, self.returncode, self.stderr = results, returncode, stderr
        self.argv = None

    def __call__(self, argv, **kwargs):
        self.argv = argv
        out = argv[argv.index("--out") + 1]
        with open(out, "a", encoding="utf-8") as handle:
            for result in self.results:
                handle.write(json.dumps(result.to_dict()) + "\n")
        return subprocess.CompletedProcess(argv, self.returncode, "", self.stderr)


def test_child_killed_by_deepgemm_still_reports_each_seq_len(tmp_path):
    check = ShapeCheck(model="/tiny", seq_len_q=(1, 4))
    spawn = Spawn([ShapeResult("dsa", 32, 1, ran=True)], returncode=-6, stderr=ABORT)
    one, four = run_in_subprocess(check, tmp_path / "out.jsonl", spawn=spawn)
    assert one.ok
    assert four.deepgemm_assertion == ABORT and not four.ok
    assert spawn.argv[1:4] == ["-m", "regress.cli.child", "layerwise"]
    assert spawn.argv[spawn.argv.index("--seq-len-q") + 1] == "1,4"


def test_child_dying_for_another_reason_is_an_error_not_the_signature(tmp_path):
    check = ShapeCheck(model="/tiny", seq_len_q=(4,))
    spawn = Spawn([], returncode=1, stderr="ImportError: no module named tensorrt_llm")
    (result,) = run_in_subprocess(check, tmp_path / "out.jsonl", spawn=spawn)
    assert result.deepgemm_assertion is None
    assert "child exited 1" in result.error and "ImportError" in result.error


def test_stale_output_of_an_earlier_run_is_not_read(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps(ShapeResult("dsa", 32, 4, ran=True).to_dict()) + "\n")
    (result,) = run_in_subprocess(
        ShapeCheck(model="/t", seq_len_q=(4,)), out, spawn=Spawn([], returncode=-6, stderr=ABORT)
    )
    assert not result.ok


def test_main_writes_a_line_per_result_and_exits_nonzero_on_failure(tmp_path, monkeypatch):
    seen = []

    def fake_run(check, emit):
        seen.append(check)
        emit(ShapeResult(check.backend, check.batch_size, 1, ran=True))
        emit(ShapeResult(check.backend, check.batch_size, 4, deepgemm_assertion=ABORT))

    monkeypatch.setattr(layerwise, "run_in_process", fake_run)
    out = tmp_path / "out.jsonl"
    argv = [
        *ShapeCheck(model="/tiny", backend="dense", moe_backend="TRTLLM").argv(),
        "--out",
        str(out),
    ]
    assert child.main(["layerwise", *argv]) == 1
    (check,) = seen
    assert check == ShapeCheck(model="/tiny", backend="dense", moe_backend="TRTLLM")
    lines = [ShapeResult.from_dict(json.loads(x)) for x in out.read_text().splitlines()]
    assert [r.seq_len_q for r in lines] == [1, 4] and lines[1].deepgemm_assertion == ABORT


def test_accepted_kwargs_follow_the_signature():
    def old(model, *, batch_size, seq_len_q):
        return None

    def anything(**kwargs):
        return None

    kwargs = {"batch_size": 1, "seq_len_q": 4, "request_id_begin": 0}
    assert layerwise._accepted(old, kwargs) == {"batch_size": 1, "seq_len_q": 4}
    assert layerwise._accepted(anything, kwargs) == kwargs


def test_in_process_run_needs_tensorrt_llm():
    try:
        import tensorrt_llm  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - a GPU box with TensorRT-LLM
        pytest.skip("tensorrt_llm is installed")
    with pytest.raises(MissingDependencyError, match="layer_wise_benchmarks"):
        layerwise.run_in_process(ShapeCheck(model="/tiny"), lambda result: None)


@pytest.mark.parametrize("seq_len_q", [1, 4])
@pytest.mark.parametrize(
    ("backend", "defects", "expected"),
    [
        ("dsa", [], []),
        ("dsa", ["unannounced_mtp_shapes"], ["kv_lens_2d_width"]),  # bug 2 before PR #17247
        ("trtllm", [], []),
        ("trtllm", ["method_hasattr_guard"], ["announcement_scope"]),  # PR #17247's first guard
    ],
)
def test_checks_on_the_reference_mirror_of_the_runner(backend, defects, expected, seq_len_q):
    # regress.reference.layerwise mirrors Runner.create_run_pack with bug 2's historical states;
    # the checks the GPU test applies to upstream's packs must tell them apart the same way.
    from regress.reference.layerwise import create_run_pack

    metadata = create_run_pack(
        "GEN",
        batch_size=32,
        seq_len_q=seq_len_q,
        seq_len_kv_cache=2049,
        backend=backend,
        defects=defects,
    )
    result = ShapeResult(backend, 32, seq_len_q)
    check_metadata(metadata, result)
    # seq_len_q == 1 is plain decode: nothing to announce, so no revision can get it wrong.
    assert [v["check"] for v in result.violations] == (expected if seq_len_q > 1 else [])


def test_reference_deepgemm_abort_carries_the_signature():
    from regress.reference.layerwise import create_run_pack, run_generation_step

    metadata = create_run_pack(
        "GEN",
        batch_size=32,
        seq_len_q=4,
        seq_len_kv_cache=2049,
        defects=["unannounced_mtp_shapes"],
    )
    with pytest.raises(Exception) as info:
        run_generation_step(metadata)
    assert find_deepgemm_assertion(str(info.value)) is not None
