"""A metadata object prepared from scratch for a batch, and which of its elements that fixes.

The stale-state oracle (:mod:`regress.dsa.staleness`) compares a live object with one of the
same class and construction settings that was given the current batch directly and prepared the
way upstream prepares (:class:`Blueprint`). "What the current batch uses" is then exactly what that
from-scratch path writes: every other element of a preallocated buffer holds whatever the
allocation left there, in the fresh object as in the live one, and comparing it would report
capacity, not staleness.

:func:`fresh_twins` finds those elements without knowing any buffer: it builds the fresh object
twice, with every ``zeros``/``empty`` allocation of the construction filled with a poison value,
a different one in each (:data:`POISONS`). An element the from-scratch path fixes is the same in
both; one it leaves to the allocation differs. Values the construction computes (an ``arange``, a
filled constant) are written over the poison, so they count as fixed too. Both twins are
poisoned, neither is left to the allocator: an ``empty`` buffer's garbage could otherwise equal
the one poison by chance (a nonzero byte of a ``bool`` buffer reads ``True``), and an element
nothing writes would count as fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.state_fields import is_scalar, state_fields

#: Allocation functions whose result the poisoned twin fills (everything that is not given values).
_ALLOCATIONS = frozenset({"zeros", "empty", "zeros_like", "empty_like", "new_zeros", "new_empty"})


@dataclass(frozen=True)
class Blueprint:
    """How to build a fresh metadata object the way the live one was built.

    Attributes:
        make: construct one with the live object's construction settings and replay its
            announcement (``update_spec_dec_param(...)``), as the executor does first.
        prepare: give it a batch and prepare it as upstream's executor does (default
            :func:`regress.dsa.batch.prepare_batch`, the mirrors' way; a real tree's class
            passes its ``kv_cache_params`` builder to it).
    """

    make: Callable[[], Any]
    prepare: Callable[[Any, Batch], None] = prepare_batch


#: Poison values per dtype kind, one tuple per twin: ``(bool, int8, uint8, 1-byte float,
#: float or int16, other integers)``. The two differ in every kind.
POISONS = (
    (False, -55, 155, -2.0, -2345, -23456),
    (True, -77, 177, -3.0, -1234, -12345),
)


def _poison(t: Any, variant: int) -> None:
    import torch

    boolean, int8, uint8, float8, wide, integer = POISONS[variant]
    if t.dtype == torch.bool:
        t.fill_(boolean)
    elif t.dtype in (torch.int8,):
        t.fill_(int8)
    elif t.dtype == torch.uint8:
        t.fill_(uint8)
    elif t.is_floating_point() and t.element_size() == 1:
        t.fill_(float8)
    elif t.is_floating_point() or t.dtype in (torch.int16,):
        t.fill_(wide)
    elif t.is_complex():
        return
    else:
        t.fill_(integer)


@contextmanager
def poisoned_allocations(variant: int = 1) -> Iterator[None]:
    """Fill every tensor allocated inside with a poison value instead of zeros or garbage.

    Args:
        variant: which row of :data:`POISONS` (the two twins use one each).
    """
    from torch.overrides import TorchFunctionMode

    class _Poison(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _ALLOCATIONS:
                with suppress(RuntimeError, TypeError):  # a dtype fill_ refuses: as allocated
                    _poison(result, variant)
            return result

    with _Poison():
        yield


def _agree(a: Any, b: Any) -> Any:
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return None
    if a.is_floating_point():
        return (a == b) | (torch.isnan(a) & torch.isnan(b))
    return a == b


def determined_by(first: Any, second: Any) -> dict[str, Any]:
    """Per field, which elements two from-scratch objects agree on (a mask, or False)."""
    import torch

    mine, theirs = state_fields(first), state_fields(second)
    out: dict[str, Any] = {}
    for name in set(mine) & set(theirs):
        a, b = mine[name], theirs[name]
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            agree = _agree(a.detach().cpu(), b.detach().cpu())
            out[name] = agree if agree is not None else False
        elif is_scalar(a) and is_scalar(b) and a != b:
            out[name] = False  # a value the allocation decided (an id, a counter)
    return out


def fresh_twins(
    blueprint: Blueprint,
    batch: Batch,
    *,
    replay: Iterable[str] = (),
    watch: Callable[[Any], Any] = lambda md: md,
) -> tuple[Any, dict[str, Any]]:
    """A fresh object prepared for ``batch`` and the mask of what that preparation fixes.

    Args:
        blueprint: how the live object was built and how upstream prepares one.
        batch: the batch to prepare for.
        replay: methods to call after ``prepare()``, the caller's last metadata call when it
            was one of the refreshes (``update_for_spec_dec``): a fresh object refreshed once
            more must still describe the same batch, and the refresh sets what it alone sets.
        watch: called on the fresh object before it is prepared (a write log's ``watch``).

    Returns:
        ``(fresh, determined)``: ``determined`` maps fields to boolean masks for
        :func:`regress.dsa.staleness.compare`.
    """
    with poisoned_allocations(0):
        fresh = blueprint.make()
    fresh = watch(fresh)
    blueprint.prepare(fresh, batch)
    for name in replay:
        getattr(fresh, name)()
    with poisoned_allocations(1):
        twin = blueprint.make()
    blueprint.prepare(twin, batch)
    for name in replay:
        getattr(twin, name)()
    return fresh, determined_by(fresh, twin)


__all__ = ["POISONS", "Blueprint", "determined_by", "fresh_twins", "poisoned_allocations"]
