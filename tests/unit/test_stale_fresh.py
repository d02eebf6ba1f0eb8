"""Fresh twins: which elements a from-scratch prepare fixes, found by poisoning allocations."""

from __future__ import annotations

import torch

from regress.dsa.batch import Batch
from regress.dsa.fresh import POISONS, Blueprint, determined_by, fresh_twins, poisoned_allocations

CAP = 8


class _Meta:
    """A metadata shape: a buffer prepare() fills in part, a constant, an untouched scratch."""

    def __init__(self) -> None:
        self.buf = torch.zeros(CAP, dtype=torch.int32)
        self.row = torch.arange(CAP)  # computed at construction: determined
        self.scratch = torch.empty(CAP)  # never written: left as allocated
        self.flag = torch.zeros(CAP, dtype=torch.bool)
        self.calls = 0

    def prepare(self, n: int) -> None:
        self.buf[:n] = torch.arange(n, dtype=torch.int32) + 1
        self.flag[:n] = True

    def refresh(self) -> None:
        self.calls += 1


def _batch(n: int) -> Batch:
    return Batch((1,) * n)


def test_poisoned_allocation_differs_from_a_zero_one():
    with poisoned_allocations():
        a = torch.zeros(3, dtype=torch.int32)
        b = torch.empty(2, dtype=torch.bool)
        c = torch.zeros_like(torch.ones(2))
    assert a.tolist() == [-12345] * 3 and b.tolist() == [True, True] and c.tolist() == [-1234] * 2
    assert torch.zeros(2).tolist() == [0, 0]  # only inside the block


def test_determined_marks_what_prepare_and_construction_write():
    blueprint = Blueprint(make=_Meta, prepare=lambda md, batch: md.prepare(batch.num_tokens))
    fresh, determined = fresh_twins(blueprint, _batch(3), replay=("refresh",))
    assert fresh.buf[:3].tolist() == [1, 2, 3] and fresh.calls == 1
    assert determined["buf"].tolist() == [True] * 3 + [False] * 5
    assert determined["flag"].tolist() == [True] * 3 + [False] * 5
    assert bool(determined["row"].all())  # the constructor's arange is the same in both twins
    assert not bool(determined["scratch"].any())
    assert "calls" not in determined  # equal scalars: determined


def test_a_scalar_the_allocation_decides_is_undetermined():
    first, second = _Meta(), _Meta()
    second.calls = 5
    assert determined_by(first, second)["calls"] is False


def test_watch_sees_the_fresh_object_before_it_is_prepared():
    seen = []

    def watch(md):
        seen.append(md.buf.clone())
        return md

    blueprint = Blueprint(make=_Meta, prepare=lambda md, batch: md.prepare(batch.num_tokens))
    fresh, _ = fresh_twins(blueprint, _batch(2), watch=watch)
    assert seen[0].tolist() == [POISONS[0][-1]] * CAP and fresh.buf[:2].tolist() == [1, 2]


def test_both_twins_are_poisoned_each_with_its_own_value():
    """An ``empty`` buffer's garbage can equal one poison (a nonzero bool byte reads True): the
    fresh object is poisoned too, with a different value, so an unwritten element never agrees."""
    assert all(a != b for a, b in zip(*POISONS, strict=True))
    with poisoned_allocations(0):
        zero = torch.empty(2, dtype=torch.bool)
    with poisoned_allocations(1):
        one = torch.empty(2, dtype=torch.bool)
    assert zero.tolist() == [False, False] and one.tolist() == [True, True]
    blueprint = Blueprint(make=_Meta, prepare=lambda md, batch: md.prepare(batch.num_tokens))
    fresh, determined = fresh_twins(blueprint, _batch(3))
    assert fresh.flag[3:].tolist() == [False] * (CAP - 3)  # the fresh twin's own poison
    assert fresh.scratch.tolist() == [float(POISONS[0][4])] * CAP
    assert determined["flag"].tolist() == [True] * 3 + [False] * (CAP - 3)
