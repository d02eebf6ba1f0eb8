"""The stale-state oracle: the state reached incrementally must equal the state reached from scratch.

Attention metadata caches derived state at ``prepare()`` (to keep allocations and host work out
of CUDA-graph capture) and updates it in place afterwards (``on_update()``,
``on_update_kv_lens()``, ``update_for_spec_dec()``, the spec-dec save and restore). When a caller
changes the layout and one derived buffer is not refreshed, the result is PR #16925's bug under
another name. A check per named buffer always comes one bug late; this one needs no name:
:func:`compare` compares every tensor and scalar attribute of a live metadata object with a fresh
object of the same class prepared directly for the current batch
(:func:`regress.dsa.fresh.fresh_twins` builds it), and every field that differs is a candidate.
Callers judge whole draft loops through :func:`regress.dsa.stale_check.check_states`, which
calls :func:`compare` at each checkpoint; the runtime sentinel's debug mode calls it directly.

Only what the current batch uses is compared. The row rules (:meth:`Capacities.used`): the
first axis whose size is a capacity of the object is cut to the extent in use (``max_num_tokens``
-> ``num_tokens``, ``max_num_sequences`` -> ``num_seqs``, ``max_num_sequences + 1`` ->
``num_seqs + 1`` for exclusive prefix sums, ``max_num_sequences * (1 + K)`` -> ``num_seqs *
(1 + K)`` for the per-draft-token expanded buffers), and the axis after a per-sequence axis that
is as wide as the draft window (``1 + K``) is cut to ``next_n``, the tokens per generation request.
A buffer allocated wider in one object than in the other is compared on the overlap (capacity
is not staleness). Where the caller passes ``determined`` (which elements a from-scratch prepare
actually fixes; see :mod:`regress.dsa.fresh`), only those are compared. Nothing here knows a field
by name: which differences are legitimate is an explicit, reviewed table
(:mod:`regress.dsa.stale_allow`), applied by the caller, never here.

The capacities must differ from one another and from the object's constant sizes for the row
rule to be unambiguous (``regress check``'s ``stale_state`` scenario picks them so); where two
coincide the first rule listed wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from regress.dsa.batch import Batch
from regress.dsa.state_fields import aliases, is_scalar, is_tensor, state_fields, with_defaults

#: Elements shown per value in a finding.
SHOWN = 8


@dataclass(frozen=True)
class Capacities:
    """The sizes a metadata object's buffers were allocated for, which the row rules cut.

    Attributes:
        max_num_tokens: the token capacity of the object.
        max_num_sequences: the sequence capacity of the object.
    """

    max_num_tokens: int
    max_num_sequences: int

    @classmethod
    def of(cls, md: Any) -> Capacities:
        """Read them off a metadata object (``max_num_requests`` where ``max_num_sequences`` is
        unset)."""
        seqs = getattr(md, "max_num_sequences", None) or md.max_num_requests
        return cls(int(md.max_num_tokens), int(seqs))

    def row_rules(self, batch: Batch) -> list[tuple[int, int, str]]:
        """``(capacity, used, why)`` for a buffer's batch axis, in priority order."""
        window = 1 + batch.max_draft_len
        n = batch.batch_size
        return [
            (self.max_num_tokens, batch.num_tokens, "tokens"),
            (self.max_num_sequences, n, "sequences"),
            (self.max_num_sequences + 1, n + 1, "sequence prefix sums"),
            (self.max_num_sequences * window, n * window, "draft-token rows"),
        ]

    def used(self, shape: tuple[int, ...], batch: Batch) -> tuple[int, ...]:
        """The extent of each axis of a buffer of ``shape`` that ``batch`` uses."""
        out = list(shape)
        rules = self.row_rules(batch)
        for axis, size in enumerate(shape):
            rule = next(((c, u) for c, u, _ in rules if c == size), None)
            if rule is None:
                continue
            out[axis] = min(size, rule[1])
            sequences = size in (self.max_num_sequences, self.max_num_sequences + 1)
            nxt = axis + 1
            if sequences and nxt < len(shape) and shape[nxt] == 1 + batch.max_draft_len:
                out[nxt] = min(shape[nxt], batch.next_n)
            break
        return tuple(out)


@dataclass
class StaleField:
    """One field whose live value differs from its from-scratch value.

    Attributes:
        field: the attribute name.
        kind: ``value`` (elements differ), ``shape`` (not comparable shapes: a different number
            of axes), ``dtype`` or ``presence`` (set on one object only).
        live: the live value, short (the compared region, at most :data:`SHOWN` elements from
            the first difference).
        fresh: the from-scratch value, same region.
        first: index of the first differing element, or None for scalars.
        differing: how many compared elements differ.
        compared: how many elements were compared.
        region: the compared region's extent per axis.
        live_site: the upstream ``file:line in fn()`` that last wrote the live field.
        fresh_site: where the fresh object's prepare wrote it (the refresh the live one lacks).
        checkpoint: where in the caller's sequence it was seen.
        layout: :meth:`~regress.dsa.batch.Batch.describe` of the batch compared.
        owner: the metadata class.
    """

    field: str
    kind: str
    live: str
    fresh: str
    first: tuple[int, ...] | None = None
    differing: int = 1
    compared: int = 1
    region: tuple[int, ...] = ()
    live_site: str | None = None
    fresh_site: str | None = None
    checkpoint: str = ""
    layout: str = ""
    owner: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: field, both values, and where the live value was last written."""
        where = f"; live last written at {self.live_site}" if self.live_site else ""
        return f"{self.field}: live {self.live}, fresh {self.fresh}{where}"


@dataclass
class Comparison:
    """Everything one comparison looked at, so a report can show it looked.

    Attributes:
        differences: the fields that differ (:class:`StaleField`).
        compared: fields with at least one element (or a scalar) compared.
        undetermined: fields present on both objects whose used region a from-scratch prepare
            does not fix (nothing to compare against; listed, never silently dropped).
        uncomparable: attributes that are neither tensors nor scalars (objects, managers).
        aliases: ``alias -> field`` for tensors that are the same view as another field in both
            objects (compared once, under the first name).
    """

    differences: list[StaleField] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)
    undetermined: list[str] = field(default_factory=list)
    uncomparable: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)


def _short(values: list[Any], start: int = 0) -> str:
    part = values[start : start + SHOWN]
    head = "..., " if start else ""
    tail = ", ..." if start + SHOWN < len(values) else ""
    return "[" + head + ", ".join(str(v) for v in part) + tail + "]"


def _region(live: Any, fresh: Any, batch: Batch, caps: Capacities) -> tuple[int, ...] | None:
    if live.dim() != fresh.dim():
        return None
    used = caps.used(tuple(fresh.shape), batch)
    return tuple(min(a, b, u) for a, b, u in zip(live.shape, fresh.shape, used, strict=True))


def _equal(a: Any, b: Any) -> Any:
    import torch

    if a.dtype != b.dtype:
        a, b = a.to(torch.float64), b.to(torch.float64)
    if a.is_floating_point():
        return (a == b) | (a.isnan() & b.isnan())
    return a == b


def _compare_tensor(
    name: str, live: Any, fresh: Any, batch: Batch, caps: Capacities, mask: Any | None
) -> tuple[StaleField | None, bool]:
    """``(difference or None, whether anything was compared)`` for one tensor field."""
    region = _region(live, fresh, batch, caps)
    if region is None:  # a different number of axes: no overlap to compare
        return StaleField(name, "shape", str(tuple(live.shape)), str(tuple(fresh.shape))), True
    index = tuple(slice(0, n) for n in region)
    a, b = live[index].detach().cpu(), fresh[index].detach().cpu()
    keep = None
    if mask is not None and tuple(mask.shape) == tuple(fresh.shape):
        keep = mask[index].cpu()
    count = int(keep.sum()) if keep is not None else a.numel()
    if count == 0:
        return None, False
    same = _equal(a, b)
    if keep is not None:
        same = same | ~keep
    if bool(same.all()):
        return None, True
    diff = ~same
    first = tuple(int(i) for i in diff.nonzero()[0].tolist())
    flat_first = int(diff.flatten().nonzero()[0])
    av, bv = a.flatten().tolist(), b.flatten().tolist()
    if keep is not None:  # an element a from-scratch prepare leaves open is shown as "?"
        shown = keep.flatten().tolist()
        av = [v if k else "?" for v, k in zip(av, shown, strict=True)]
        bv = [v if k else "?" for v, k in zip(bv, shown, strict=True)]
    start = max(0, flat_first - 1)
    return (
        StaleField(
            name,
            "dtype" if live.dtype != fresh.dtype else "value",
            _short(av, start),
            _short(bv, start),
            first=first,
            differing=int(diff.sum()),
            compared=count,
            region=region,
        ),
        True,
    )


def compare(
    live: Any,
    fresh: Any,
    batch: Batch,
    *,
    capacities: Capacities | None = None,
    determined: Mapping[str, Any] | None = None,
    fields: Iterable[str] | None = None,
    sites: Any = None,
    checkpoint: str = "",
) -> Comparison:
    """Compare every tensor and scalar attribute of ``live`` with ``fresh`` on the used region.

    Args:
        live: the metadata reached incrementally.
        fresh: one of the same class and construction settings, prepared for ``batch``.
        batch: the current batch (:meth:`~regress.dsa.batch.Batch.from_metadata` of ``live``).
        capacities: what the buffers were allocated for (default: read off ``live``).
        determined: per field, what a from-scratch prepare fixes: a boolean tensor of the
            fresh field's shape, or ``False`` for a field (tensor or scalar) it leaves open.
            Fields missing here are compared in full (on the used region).
        fields: compare only these (a restore's contract covers the fields it saved).
        sites: a :class:`regress.dsa.write_log.WriteLog` that watched both objects; it names
            where each differing field was last written.
        checkpoint: stamped on every difference.
    """
    out = Comparison()
    caps = capacities or Capacities.of(live)
    determined = determined or {}
    mine, theirs = state_fields(live), state_fields(fresh)
    names = sorted(set(mine) | set(theirs))
    # A dataclass field one object never assigned reads its class default: compare that.
    mine, theirs = with_defaults(live, mine, names), with_defaults(fresh, theirs, names)
    out.aliases = aliases(mine, theirs, names)
    if fields is not None:
        wanted = set(fields)
        names = [n for n in names if n in wanted]
    for name in names:
        if name in out.aliases:
            continue
        found = _compare_field(name, mine, theirs, batch, caps, determined, out)
        if found is None:
            continue
        found.checkpoint, found.layout, found.owner = (
            checkpoint,
            batch.describe(),
            type(live).__name__,
        )
        if sites is not None:
            found.live_site = sites.last(live, name)
            found.fresh_site = sites.last(fresh, name)
        out.differences.append(found)
    return out


def _compare_field(
    name: str,
    mine: dict[str, Any],
    theirs: dict[str, Any],
    batch: Batch,
    caps: Capacities,
    determined: Mapping[str, Any],
    out: Comparison,
) -> StaleField | None:
    mask = determined.get(name)
    if name not in mine or name not in theirs:
        value = mine.get(name, theirs.get(name))
        if not (is_tensor(value) or is_scalar(value)):
            out.uncomparable.append(name)
            return None
        out.compared.append(name)
        live = "set" if name in mine else "unset"
        fresh = "set" if name in theirs else "unset"
        return StaleField(name, "presence", live, fresh)
    a, b = mine[name], theirs[name]
    if mask is False:
        out.undetermined.append(name)
        return None
    if is_tensor(a) and is_tensor(b):
        found, looked = _compare_tensor(name, a, b, batch, caps, mask)
        (out.compared if looked else out.undetermined).append(name)
        return found
    if is_scalar(a) and is_scalar(b) and not is_tensor(a) and not is_tensor(b):
        out.compared.append(name)
        return None if a == b else StaleField(name, "value", repr(a)[:80], repr(b)[:80])
    if is_tensor(a) or is_tensor(b) or is_scalar(a) or is_scalar(b):
        out.compared.append(name)
        return StaleField(name, "kind", type(a).__name__, type(b).__name__)
    out.uncomparable.append(name)
    return None


__all__ = ["SHOWN", "Capacities", "Comparison", "StaleField", "compare"]
