"""announce_mtp_shapes: DSA gets the 2-D buffer widened; dense, CTX and q=1 are untouched."""

from __future__ import annotations

import pytest

from regress.dsa.announce import announce_mtp_shapes
from regress.dsa.invariants import (
    check_dense_untouched,
    check_kv_lens_2d_width,
    snapshot_spec_state,
)
from regress.errors import UsageError
from regress.reference.indexer import DEEPGEMM_ASSERT, DeepGemmAssertion
from regress.reference.layerwise import create_run_pack, run_generation_step
from regress.reference.metadata import DSAtrtllmAttentionMetadata, TrtllmAttentionMetadata


@pytest.mark.parametrize("seq_len_q", [2, 4, 8])
def test_dsa_generation_gets_seq_len_q_columns(seq_len_q):
    md = create_run_pack("GEN", batch_size=32, seq_len_q=seq_len_q, seq_len_kv_cache=128)
    assert tuple(md.kv_lens_cuda_2d.shape) == (32, seq_len_q)
    assert md.max_draft_tokens == seq_len_q - 1
    assert md.max_total_draft_tokens == seq_len_q - 1
    assert md.is_spec_decoding_enabled is False
    assert check_kv_lens_2d_width(md) == []
    assert run_generation_step(md) == (32, seq_len_q)
    # Causal context lengths per query column: the last column sees everything.
    assert md.gen_context_lens()[0].tolist() == list(range(128 + 1, 128 + seq_len_q + 1))


@pytest.mark.parametrize(("run_type", "seq_len_q"), [("GEN", 4), ("GEN", 1), ("CTX", 4)])
def test_dense_metadata_keeps_max_total_draft_tokens_unset(run_type, seq_len_q):
    md = create_run_pack(
        run_type, batch_size=32, seq_len_q=seq_len_q, seq_len_kv_cache=64, backend="trtllm"
    )
    assert md.max_total_draft_tokens is None
    assert md.is_spec_decoding_enabled is False


@pytest.mark.parametrize(("run_type", "seq_len_q"), [("GEN", 1), ("CTX", 4), ("CTX", 1)])
def test_ctx_and_single_token_runs_are_not_announced(run_type, seq_len_q):
    md = create_run_pack(run_type, batch_size=8, seq_len_q=seq_len_q, seq_len_kv_cache=64)
    assert md.max_total_draft_tokens is None
    assert tuple(md.kv_lens_cuda_2d.shape) == (8, 1)
    run_generation_step(md)


def test_guard_is_the_dsa_attribute_not_the_method():
    dense = TrtllmAttentionMetadata(max_num_requests=4, max_num_tokens=16)
    dsa = DSAtrtllmAttentionMetadata(max_num_requests=4, max_num_tokens=16, defects=())
    assert hasattr(dense, "update_spec_dec_param")  # why a method guard admits every backend
    before = snapshot_spec_state(dense)
    assert announce_mtp_shapes(dense, "GEN", 4, 4) is False
    assert check_dense_untouched(before, dense) == []
    assert announce_mtp_shapes(dsa, "GEN", 4, 4) is True


def test_unannounced_shapes_abort_with_deepgemm_message():
    md = create_run_pack(
        "GEN", batch_size=32, seq_len_q=4, seq_len_kv_cache=128, defects={"unannounced_mtp_shapes"}
    )
    assert [v.check for v in check_kv_lens_2d_width(md)] == ["kv_lens_2d_width"]
    with pytest.raises(DeepGemmAssertion, match=r"DG_HOST_ASSERT\(batch_size == __batch_size"):
        run_generation_step(md)
    assert DEEPGEMM_ASSERT == "DG_HOST_ASSERT(batch_size == __batch_size and next_n == _next_n)"


def test_method_guard_changes_dense_kernel_inputs():
    pristine = create_run_pack(
        "GEN", batch_size=8, seq_len_q=4, seq_len_kv_cache=64, backend="trtllm", defects=()
    )
    md = create_run_pack(
        "GEN",
        batch_size=8,
        seq_len_q=4,
        seq_len_kv_cache=64,
        backend="trtllm",
        defects={"method_hasattr_guard"},
    )
    [violation] = check_dense_untouched(snapshot_spec_state(pristine), md)
    assert violation.check == "announcement_scope"
    assert violation.details["changed"]["max_total_draft_tokens"] == [None, 3]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"run_type": "DECODE"}, "run_type"),
        ({"backend": "flashinfer"}, "backend"),
        ({"batch_size": 0}, ">= 1"),
    ],
)
def test_bad_run_pack_input_is_a_usage_error(kwargs, needle):
    args = {"run_type": "GEN", "batch_size": 4, "seq_len_q": 2, "seq_len_kv_cache": 8} | kwargs
    run_type = args.pop("run_type")
    with pytest.raises(UsageError, match=needle):
        create_run_pack(run_type, **args)


def test_the_deepgemm_assert_string_is_defined_once():
    """One fact in one place: every module imports regress.dsa.announce.DEEPGEMM_ASSERT."""
    from pathlib import Path

    import regress

    root = Path(regress.__file__).parent
    holders = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if "batch_size == __batch_size and next_n == _next_n" in p.read_text(encoding="utf-8")
    ]
    assert holders == ["dsa/announce.py"]
