"""Checkpoints of the draft loop and check_states over them, on the reference mirror."""

from __future__ import annotations

from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.fresh import Blueprint
from regress.dsa.stale_check import Checkpoint, check_states, draft_loop_checkpoints
from regress.reference.cache import PagedKVCacheManager
from regress.reference.metadata import DSAtrtllmAttentionMetadata

K = 3


def _blueprint(made: list, defects=()) -> Blueprint:
    manager = PagedKVCacheManager.for_requests(6, 256, tokens_per_block=32)

    def make():
        md = DSAtrtllmAttentionMetadata(
            max_num_requests=6, max_num_tokens=61, kv_cache_manager=manager, defects=defects
        )
        announce_speculation(md, 4, K)
        calls = []
        original = md.update_for_spec_dec

        def spy():
            calls.append("update_for_spec_dec")
            original()

        md.update_for_spec_dec = spy
        made.append(calls)
        return md

    return Blueprint(make)


def _target() -> Batch:
    return Batch((4, 4, 4, 4), cached=(40, 27, 60, 90), request_ids=(0, 1, 2, 3), max_draft_len=K)


def test_the_draft_loop_yields_its_checkpoints_and_the_restore_contract():
    made: list = []
    live = _blueprint(made).make()
    prepare_batch(live, _target())
    cps = list(draft_loop_checkpoints(live, K, [2, 1, 4, 3]))
    assert [c.label for c in cps] == [
        "draft_begin",
        "draft_step_0",
        "draft_step_1",
        "draft_step_2",
        "restore",
    ]
    assert all(c.replay == ("update_for_spec_dec",) for c in cps[1:4])
    assert cps[-1].scope == ("_seq_lens", "_seq_lens_cuda") and cps[-1].against == "draft_begin"
    assert "prepare_for_spec_dec" not in vars(live)  # the spy is gone


def test_fresh_objects_replay_the_refresh_and_the_restore_compares_its_scope():
    made: list = []
    blueprint = _blueprint(made, defects=("stale_req_idx",))
    live = blueprint.make()
    prepare_batch(live, _target())
    results = check_states(
        live, blueprint, draft_loop_checkpoints(live, K, [2, 1, 4, 3]), draft_len=K
    )
    fresh_calls = made[1:]  # made[0] is the live object
    assert [len(c) for c in fresh_calls] == [0, 0] + [1] * 6 + [0, 0]  # twins: 2 per checkpoint
    by_label = {r.checkpoint.label: r for r in results}
    assert by_label["restore"].comparison.compared == ["_seq_lens", "_seq_lens_cuda"]
    assert by_label["restore"].batch == by_label["draft_begin"].batch
    stale = {f.field for f in by_label["draft_step_1"].unexplained}
    assert stale == {"req_idx_per_token", "slot_mapping"}


def test_a_checkpoint_against_an_unknown_label_reads_the_live_layout():
    made: list = []
    blueprint = _blueprint(made)
    live = blueprint.make()
    prepare_batch(live, _target())
    (result,) = check_states(live, blueprint, [Checkpoint("x", against="nowhere")], draft_len=K)
    assert result.batch.seq_lens == (4, 4, 4, 4) and result.unexplained == []
