"""The reference engine's forwards are the lifecycle model's: the same metadata calls, each seeing
the same layout, on the same batches.

The engine runs with metadata that records every lifecycle call with the layout it was made on
(``seq_lens`` host and device, ``num_contexts``, ``kv_lens_cuda``); each forward's batch is then
replayed through ``regress.dsa.lifecycle.run_forwards`` on the same metadata class, with the
accepted counts the engine reported and the engine's own ``LoopOptions``. Any transition the
engine makes its own way (an inline collapse, an advance before instead of after a step, a
missing restore) shows up as a call or a layout the model did not make.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from regress.dsa.batch import Batch  # noqa: E402
from regress.dsa.lifecycle import run_forwards  # noqa: E402
from regress.reference.engine import ReferenceEngine  # noqa: E402
from regress.reference.metadata import DSAtrtllmAttentionMetadata  # noqa: E402
from regress.reference.prompts import load_prompts  # noqa: E402
from regress.reference.scenarios import make_dsa_metadata  # noqa: E402
from regress.reference.serving import DRAFT_LOOP  # noqa: E402

RECORDED = (
    "update_spec_dec_param",
    "prepare",
    "on_update",
    "on_update_kv_lens",
    "update_for_spec_dec",
    "prepare_for_spec_dec",
    "restore_from_spec_dec",
)
K, BATCH, PROMPTS, TOKENS = 3, 3, 6, 12


def _layout(md) -> tuple:
    n = md.num_seqs
    if md.seq_lens is None:
        return (None,)
    return (
        n,
        md.num_contexts,
        tuple(md.seq_lens.tolist()),
        tuple(md.seq_lens_cuda.tolist()),
        tuple(md.kv_lens_cuda[:n].tolist()),
    )


def _recording(log: list) -> type:
    """A DSA mirror that logs ``(call, layout at entry)``; ``prepare`` also logs its inputs."""

    class Recording(DSAtrtllmAttentionMetadata):
        pass

    for name in RECORDED:

        def method(self, *args, _name=name, **kwargs):
            entry = [_name, _layout(self)]
            if _name == "prepare":
                entry.append((tuple(self.request_ids), tuple(self.cached_token_lens)))
            log.append(tuple(entry))
            return getattr(DSAtrtllmAttentionMetadata, _name)(self, *args, **kwargs)

        setattr(Recording, name, method)
    return Recording


def _per_forward(log: list) -> list[list]:
    forwards: list[list] = []
    for entry in log:
        if entry[0] == "update_spec_dec_param":
            forwards.append([])
        forwards[-1].append(entry)
    return forwards


def _batches(forwards: list[list], requests) -> list[Batch]:
    """Each forward's batch, read off its ``prepare`` call; accepted counts from the results.

    Request ids are admission order, which is prompt order; a request's ``j``-th generation
    forward accepted ``requests[rid].accepted[j]`` drafts (upstream counts the bonus: ``+ 1``).
    """
    seen = [0] * len(requests)
    out = []
    for calls in forwards:
        (_, layout, (rids, cached)) = next(c for c in calls if c[0] == "prepare")
        n, num_contexts, seq_lens = layout[0], layout[1], layout[2]
        accepted = []
        for rid in rids:
            if cached[rids.index(rid)] == 0:
                accepted.append(1)
            else:
                accepted.append(requests[rid].accepted[seen[rid]] + 1)
                seen[rid] += 1
        assert len(rids) == n
        out.append(
            Batch(
                seq_lens=seq_lens,
                num_contexts=num_contexts,
                cached=cached,
                num_accepted=tuple(accepted),
                request_ids=rids,
            )
        )
    return out


@functools.cache
def _engine_and_model_logs() -> tuple[list[list], list[list]]:
    engine_log: list = []
    result = ReferenceEngine(defects=(), metadata_cls=_recording(engine_log)).generate(
        load_prompts(PROMPTS), batch_size=BATCH, max_draft_len=K, max_new_tokens=TOKENS
    )
    engine = _per_forward(engine_log)
    model_log: list = []
    md = make_dsa_metadata(max_num_requests=PROMPTS, max_num_tokens=512, defects=())
    md.__class__ = _recording(model_log)
    run_forwards(md, _batches(engine, result.requests), max_draft_len=K, options=DRAFT_LOOP)
    return engine, _per_forward(model_log)


def test_the_layouts_cover_contexts_generations_and_mixed_batches():
    """The comparison below is only as good as the batches it sees."""
    engine, _ = _engine_and_model_logs()
    kinds = set()
    for calls in engine:
        _, (n, num_contexts, *_), _ = next(c for c in calls if c[0] == "prepare")
        kinds.add("contexts" if num_contexts == n else "mixed" if num_contexts else "generations")
    assert kinds == {"contexts", "mixed", "generations"}


def test_engine_iterations_make_the_lifecycle_models_calls_on_its_layouts():
    engine, model = _engine_and_model_logs()
    assert len(engine) == len(model) > 2
    for index, (seen, expected) in enumerate(zip(engine, model, strict=True)):
        assert seen == expected, f"forward {index}: the engine left the lifecycle model"
