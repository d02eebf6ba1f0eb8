"""The one batch layout and prepare_batch, the one 'set the batch, then prepare()'."""

from __future__ import annotations

import pytest

from regress.dsa.batch import DEFAULT_CACHED, Batch, prepare_batch
from regress.dsa.stale_batches import BATCHES, next_forward
from regress.reference.scenarios import make_dsa_metadata


class _Recorder:
    """Records what is set on it, in order, and when prepare() runs."""

    def __init__(self, *, mirror: bool) -> None:
        object.__setattr__(self, "log", [])
        if mirror:
            object.__setattr__(self, "cached_token_lens", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)

    def prepare(self) -> None:
        self.log.append("prepare()")


def test_defaults_contexts_have_nothing_cached_and_ids_count_up():
    batch = Batch((6, 4, 4), num_contexts=1)
    assert batch.cached_lens() == [0, DEFAULT_CACHED, DEFAULT_CACHED]
    assert batch.ids() == [0, 1, 2] and batch.accepted() == [1, 1, 1]
    assert (batch.num_tokens, batch.num_generations, batch.next_n) == (14, 2, 4)
    assert batch.request_types == (0, 1, 1)


def test_the_mirrors_get_cached_token_lens_and_prepare_comes_last():
    md = _Recorder(mirror=True)
    prepare_batch(md, Batch((4, 4), cached=(9, 7), request_ids=(5, 6)))
    assert md.log == ["request_ids", "cached_token_lens", "seq_lens", "num_contexts", "prepare()"]
    assert md.request_ids == [5, 6] and md.cached_token_lens == [9, 7]
    assert md.seq_lens.tolist() == [4, 4] and md.num_contexts == 0


def test_a_real_class_gets_kv_cache_params_and_prompt_lens():
    md = _Recorder(mirror=False)
    built = []

    def kv_cache_params(cached):
        built.append(cached)
        return ("params", tuple(cached))

    prepare_batch(md, Batch((6, 4), 1, cached=(0, 30)), kv_cache_params=kv_cache_params)
    assert built == [[0, 30]] and md.kv_cache_params == ("params", (0, 30))
    assert md.prompt_lens == [0, 30]  # no prompt lengths given: the cached ones, as before
    assert "cached_token_lens" not in md.log and md.log[-1] == "prepare()"
    md = _Recorder(mirror=False)
    prepare_batch(md, Batch((4,), prompt_lens=(24,)), kv_cache_params=lambda c: None)
    assert md.prompt_lens == [24]


@pytest.mark.parametrize(
    "batch",
    [
        Batch((4, 4, 4, 4), cached=(40, 27, 60, 90), max_draft_len=3),
        Batch((6, 3, 4, 4), 2, cached=(0, 0, 29, 70), request_ids=(3, 1, 0, 2), max_draft_len=3),
    ],
)
def test_what_prepare_batch_lays_out_is_what_from_metadata_reads_back(batch):
    """The stale-state oracle prepares a fresh object for the batch read off the live one: the
    two must describe the same batch."""
    md = make_dsa_metadata(max_num_requests=6, max_num_tokens=61, max_draft_tokens=3)
    prepare_batch(md, batch)
    back = Batch.from_metadata(md, 3)
    assert (back.seq_lens, back.num_contexts, back.cached) == (
        batch.seq_lens,
        batch.num_contexts,
        batch.cached,
    )
    assert back.ids() == batch.ids() and back.describe() == batch.describe()


def test_the_next_forward_keeps_what_each_request_kept_and_reverses_the_batch():
    mixed = BATCHES[1]  # two contexts, two generations
    nxt = next_forward(mixed)
    k = mixed.max_draft_len
    assert nxt.seq_lens == (1 + k,) * 4 and nxt.num_contexts == 0
    kept = [
        c + s if i < 2 else c + a
        for i, (c, s, a) in enumerate(
            zip(mixed.cached_lens(), mixed.seq_lens, mixed.accepted(), strict=True)
        )
    ]
    assert list(nxt.cached) == kept[::-1]
    assert nxt.ids() == mixed.ids()[::-1] and nxt.prompt_lens == mixed.prompt_lens[::-1]
