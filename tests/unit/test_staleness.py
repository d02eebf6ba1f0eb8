"""compare on hand-built states: the prefix, column, capacity and mask rules, scalars."""

from __future__ import annotations

import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.dsa.batch import Batch
from regress.dsa.staleness import Capacities, compare

TOKENS, SEQS, K = 20, 6, 3


CAPS = Capacities(max_num_tokens=TOKENS, max_num_sequences=SEQS)


def _layout(seq_lens=(1, 1, 1, 1), num_contexts=0, k=K) -> Batch:
    return Batch(
        seq_lens=tuple(seq_lens),
        num_contexts=num_contexts,
        cached=tuple(10 + i - s for i, s in enumerate(seq_lens)),
        max_draft_len=k,
    )


def _differences(live, fresh, batch, **kwargs):
    """The differences :func:`compare` finds, on this file's capacities."""
    return compare(live, fresh, batch, capacities=CAPS, **kwargs).differences


def _state(**fields) -> types.SimpleNamespace:
    return types.SimpleNamespace(**fields)


def _fields(found) -> list[str]:
    return [f.field for f in found]


def test_token_buffer_compares_only_the_used_prefix():
    fresh = _state(req_idx_per_token=torch.tensor([0, 1, 2, 3] + [0] * (TOKENS - 4)))
    live = _state(req_idx_per_token=fresh.req_idx_per_token.clone())
    live.req_idx_per_token[4:] = 7  # beyond num_tokens: what an older, longer batch left there
    assert _differences(live, fresh, _layout()) == []
    live.req_idx_per_token[:4] = torch.tensor([0, 0, 0, 0])  # the stale map of #16925
    (found,) = _differences(live, fresh, _layout(), checkpoint="draft_step_0")
    assert (found.field, found.kind, found.first) == ("req_idx_per_token", "value", (1,))
    assert found.live.startswith("[0, 0, 0") and found.fresh.startswith("[0, 1, 2")
    assert (found.differing, found.compared, found.region) == (3, 4, (4,))
    assert found.checkpoint == "draft_step_0" and "seq_lens=[1, 1, 1, 1]" in found.layout


def test_sequence_buffers_and_exclusive_prefix_sums_use_num_seqs():
    fresh = _state(
        kv=torch.arange(SEQS), indptr=torch.arange(SEQS + 1), table=torch.zeros(SEQS, 16)
    )
    live = _state(kv=fresh.kv.clone(), indptr=fresh.indptr.clone(), table=fresh.table.clone())
    live.kv[4:] = -1  # rows 4..5 unused by a batch of 4
    live.indptr[5:] = -1  # entries 0..4 of a prefix sum over 4 sequences
    live.table[4:, :] = 9
    assert _differences(live, fresh, _layout()) == []
    live.indptr[4] = -1
    live.table[3, 15] = 9  # a 16-wide block table is compared in full on the used rows
    assert _fields(_differences(live, fresh, _layout())) == ["indptr", "table"]


def test_draft_window_buffer_compares_only_next_n_columns():
    fresh = _state(kv_lens_cuda_2d=torch.zeros(SEQS, 1 + K, dtype=torch.int32))
    live = _state(kv_lens_cuda_2d=fresh.kv_lens_cuda_2d.clone())
    live.kv_lens_cuda_2d[:4, 1:] = 5  # columns the verify layout used; a draft step reads one
    assert _differences(live, fresh, _layout()) == []
    verify = _layout(seq_lens=(1 + K,) * 4)  # next_n = 1 + K: every column is used
    assert _fields(_differences(live, fresh, verify)) == ["kv_lens_cuda_2d"]


def test_capacity_difference_is_not_staleness_but_the_overlap_is_compared():
    fresh = _state(kv_lens_cuda_2d=torch.ones(SEQS, 1 + K))
    wide = torch.ones(SEQS, 1 + 2 * K)  # allocated for a larger draft window earlier
    wide[:, 1 + K :] = 3
    live = _state(kv_lens_cuda_2d=wide)
    verify = _layout(seq_lens=(1 + K,) * 4)
    assert _differences(live, fresh, verify) == []
    live.kv_lens_cuda_2d[2, 1] = 4
    (found,) = _differences(live, fresh, verify)
    assert found.first == (2, 1) and found.region == (4, 1 + K)


def test_a_narrower_live_buffer_is_compared_on_the_overlap():
    fresh = _state(kv_lens_cuda_2d=torch.ones(SEQS, 1 + K))
    live = _state(kv_lens_cuda_2d=torch.ones(SEQS, 2))  # allocated for K = 1, never regrown
    verify = _layout(seq_lens=(1 + K,) * 4)
    out = compare(live, fresh, verify, capacities=CAPS)
    assert out.differences == [] and out.compared == ["kv_lens_cuda_2d"]


def test_a_different_number_of_axes_is_reported_as_a_shape_difference():
    live, fresh = _state(t=torch.zeros(SEQS, 2)), _state(t=torch.zeros(SEQS))
    (found,) = _differences(live, fresh, _layout())
    assert found.kind == "shape"


def test_determined_mask_keeps_only_what_a_fresh_prepare_fixes():
    fresh = _state(buf=torch.zeros(SEQS, 16), never=torch.zeros(TOKENS))
    live = _state(buf=fresh.buf.clone(), never=torch.ones(TOKENS))
    live.buf[1, 8:] = 2  # columns a fresh prepare leaves as allocated
    mask = torch.zeros(SEQS, 16, dtype=torch.bool)
    mask[:, :8] = True
    determined = {"buf": mask, "never": False}
    out = compare(live, fresh, _layout(), capacities=CAPS, determined=determined)
    assert out.differences == []
    assert "buf" in out.compared and "never" in out.undetermined
    live.buf[1, 7] = 2
    (found,) = _differences(live, fresh, _layout(), determined=determined)
    assert found.field == "buf" and found.differing == 1
    # shown from the element before the difference; the open columns print as "?"
    assert found.live == "[..., 0.0, 2.0, ?, ?, ?, ?, ?, ?, ...]", found.live


def test_scalars_presence_and_class_defaults():
    class Meta:
        max_draft_tokens = 0  # a dataclass-style class default

        def prepare(self) -> None:
            pass

    live, fresh = Meta(), Meta()
    fresh.max_gen_seq_len, live.max_gen_seq_len = 1, 4
    live.max_draft_tokens = 0  # set on one object, the same value the other reads by default
    live.kv_lens_row_reorder = None
    live.prepare = lambda: None  # a method a spy patched onto the instance is not state
    out = compare(live, fresh, _layout(), capacities=CAPS)
    assert [(f.field, f.kind) for f in out.differences] == [
        ("kv_lens_row_reorder", "presence"),
        ("max_gen_seq_len", "value"),
    ]
    assert "max_draft_tokens" in out.compared
    assert "prepare" not in out.compared + out.uncomparable + out.undetermined


def test_small_dicts_of_buffers_are_compared_per_key():
    fresh = _state(lens={4: torch.zeros(SEQS), 128: torch.zeros(SEQS)}, saved={})
    live = _state(
        lens={4: torch.zeros(SEQS), 128: torch.ones(SEQS)}, saved={"_seq_lens": torch.ones(2)}
    )
    assert [(f.field, f.kind) for f in _differences(live, fresh, _layout())] == [
        ("lens[128]", "value"),
        ("saved['_seq_lens']", "presence"),
    ]


def test_uncomparable_objects_are_listed_not_compared():
    live = _state(kv_cache_manager=object(), params={"a": object()}, lazily_built=object())
    fresh = _state(kv_cache_manager=object(), params={"a": object()})
    out = compare(live, fresh, _layout(), capacities=CAPS)
    assert out.differences == []
    assert sorted(out.uncomparable) == ["kv_cache_manager", "lazily_built", "params"]


def test_an_alias_is_compared_once_under_the_first_name():
    buf = torch.zeros(TOKENS)
    live = _state(slot_mapping=buf, slot_mapping_fullkv=buf)
    fresh_buf = torch.ones(TOKENS)
    fresh = _state(slot_mapping=fresh_buf, slot_mapping_fullkv=fresh_buf)
    out = compare(live, fresh, _layout(), capacities=CAPS)
    assert _fields(out.differences) == ["slot_mapping"]
    assert out.aliases == {"slot_mapping_fullkv": "slot_mapping"}


def test_layout_from_metadata_reads_the_draft_loops_device_lengths():
    md = _state(
        seq_lens=torch.tensor([1, 1, 1]),
        num_contexts=0,
        kv_lens_cuda=torch.tensor([9, 8, 7, 0, 0, 0]),
        max_num_tokens=TOKENS,
        max_num_sequences=None,
        max_num_requests=SEQS,
        request_ids=[4, 5, 6],
        prompt_lens=[3, 3, 3],
    )
    batch = Batch.from_metadata(md, K)
    assert batch.cached == (8, 7, 6) and "kv_lens=[9, 8, 7]" in batch.describe()
    assert batch.request_types == (1, 1, 1) and batch.request_ids == (4, 5, 6)
    assert Capacities.of(md) == CAPS  # max_num_requests where max_num_sequences is unset


@settings(max_examples=60, deadline=None)
@given(
    lens=st.lists(st.integers(0, 4), min_size=1, max_size=SEQS).filter(lambda v: sum(v) > 0),
    garbage=st.integers(-100, 100),
    data=st.data(),
)
def test_only_a_difference_inside_the_used_region_is_reported(lens, garbage, data):
    layout = _layout(seq_lens=lens)
    fresh = _state(tok=torch.arange(TOKENS), seq=torch.arange(SEQS))
    live = _state(tok=fresh.tok.clone(), seq=fresh.seq.clone())
    live.tok[layout.num_tokens :] = garbage
    live.seq[layout.batch_size :] = garbage
    assert _differences(live, fresh, layout) == []
    at = data.draw(st.integers(0, layout.num_tokens - 1))
    live.tok[at] += 1
    (found,) = _differences(live, fresh, layout)
    assert found.field == "tok" and found.first == (at,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nan_equals_nan_in_float_buffers(dtype):
    fresh = _state(w=torch.full((TOKENS,), float("nan"), dtype=dtype))
    live = _state(w=fresh.w.clone())
    assert _differences(live, fresh, _layout()) == []


def test_a_field_aliased_in_the_live_object_only_is_still_compared():
    # The live object wrote one buffer under two names; the fresh one keeps two buffers, the
    # second different: the alias is the stale state, so the second name must be compared.
    buf = torch.zeros(TOKENS)
    live = _state(slot_mapping=buf, slot_mapping_fullkv=buf)
    fresh = _state(slot_mapping=torch.zeros(TOKENS), slot_mapping_fullkv=torch.ones(TOKENS))
    out = compare(live, fresh, _layout(), capacities=CAPS)
    assert out.aliases == {}
    assert _fields(out.differences) == ["slot_mapping_fullkv"]
