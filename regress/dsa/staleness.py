"""The stale-state oracle: the state reached incrementally must equal the state reached from scratch.

Attention metadata caches derived state at ``prepare()`` (to keep allocations and host work out
of CUDA-graph capture) and updates it in place afterwards (``on_update()``,
``on_update_kv_lens()``, ``update_for_spec_dec()``, the spec-dec save and restore). When a caller
changes the layout and one derived buffer is not refreshed, the result is PR #16925's bug under
another name. A check per named buffer always comes one bug late; this one needs no name:
:func:`compare_states` compares every tensor and scalar attribute of a live metadata object with
a fresh object of the same class prepared directly for the current layout
(:func:`regress.dsa.fresh.fresh_twins` builds it), and every field that differs is a candidate.

Only what the current layout uses is compared. The layout rules (:meth:`StateLayout.used`): the
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

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: Lists and tuples of scalars up to this length are compared as one scalar value.
MAX_SCALAR_SEQUENCE = 64
#: Elements shown per value in a finding.
SHOWN = 8


@dataclass(frozen=True)
class StateLayout:
    """The batch a metadata object describes, and the capacities its buffers were allocated for.

    Attributes:
        seq_lens: new tokens per request, contexts first.
        num_contexts: how many leading requests are contexts (their request type).
        kv_lens: tokens in the KV cache per request, the new ones included (``kv_lens_cuda``).
        draft_len: K, the draft window announced (``1 + K`` tokens per generation in a verify).
        max_num_tokens: the token capacity of the object.
        max_num_sequences: the sequence capacity of the object.
        request_ids: the requests, in batch order.
        prompt_lens: each request's prompt length.
    """

    seq_lens: tuple[int, ...]
    num_contexts: int
    kv_lens: tuple[int, ...] | None
    draft_len: int
    max_num_tokens: int
    max_num_sequences: int
    request_ids: tuple[int, ...] = ()
    prompt_lens: tuple[int, ...] | None = None

    @property
    def num_seqs(self) -> int:
        return len(self.seq_lens)

    @property
    def num_tokens(self) -> int:
        return sum(self.seq_lens)

    @property
    def num_generations(self) -> int:
        return self.num_seqs - self.num_contexts

    @property
    def next_n(self) -> int:
        """Tokens per generation request (the widest one), 0 without generations."""
        return max(self.seq_lens[self.num_contexts :], default=0)

    @property
    def request_types(self) -> tuple[int, ...]:
        """Upstream's request types per request: 0 context, 1 generation (contexts lead)."""
        return (0,) * self.num_contexts + (1,) * self.num_generations

    def cached(self) -> list[int]:
        """Tokens already cached before this step's new ones (``kv_lens - seq_lens``)."""
        if self.kv_lens is None:
            return [0] * self.num_seqs
        return [k - s for k, s in zip(self.kv_lens, self.seq_lens, strict=True)]

    def describe(self) -> str:
        """One short line: what a reader needs to recreate the batch."""
        kv = f" kv_lens={list(self.kv_lens)}" if self.kv_lens is not None else ""
        return (
            f"seq_lens={list(self.seq_lens)} num_contexts={self.num_contexts}{kv} "
            f"K={self.draft_len}"
        )

    def row_rules(self) -> list[tuple[int, int, str]]:
        """``(capacity, used, why)`` for a buffer's batch axis, in priority order."""
        window = 1 + self.draft_len
        return [
            (self.max_num_tokens, self.num_tokens, "tokens"),
            (self.max_num_sequences, self.num_seqs, "sequences"),
            (self.max_num_sequences + 1, self.num_seqs + 1, "sequence prefix sums"),
            (self.max_num_sequences * window, self.num_seqs * window, "draft-token rows"),
        ]

    def used(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The extent of each axis of a buffer of ``shape`` that the current layout uses."""
        out = list(shape)
        for axis, size in enumerate(shape):
            rule = next(((c, u) for c, u, _ in self.row_rules() if c == size), None)
            if rule is None:
                continue
            out[axis] = min(size, rule[1])
            sequences = size in (self.max_num_sequences, self.max_num_sequences + 1)
            nxt = axis + 1
            if sequences and nxt < len(shape) and shape[nxt] == 1 + self.draft_len:
                out[nxt] = min(shape[nxt], self.next_n)
            break
        return tuple(out)

    @classmethod
    def from_metadata(cls, md: Any, draft_len: int) -> StateLayout:
        """Read the current layout off a metadata object (upstream's attribute names).

        ``seq_lens`` (host), ``num_contexts``, ``kv_lens_cuda`` (what the draft loop rewinds and
        advances), ``request_ids``, ``prompt_lens`` and the capacities ``max_num_tokens`` and
        ``max_num_sequences`` (``max_num_requests`` where that is unset).
        """
        lens = [int(x) for x in md.seq_lens.tolist()]
        kv = getattr(md, "kv_lens_cuda", None)
        prompts = getattr(md, "prompt_lens", None)
        return cls(
            seq_lens=tuple(lens),
            num_contexts=int(md.num_contexts),
            kv_lens=tuple(int(x) for x in kv[: len(lens)].tolist()) if kv is not None else None,
            draft_len=int(draft_len),
            max_num_tokens=int(md.max_num_tokens),
            max_num_sequences=int(getattr(md, "max_num_sequences", None) or md.max_num_requests),
            request_ids=tuple(int(r) for r in (getattr(md, "request_ids", None) or ())),
            prompt_lens=tuple(int(p) for p in prompts[: len(lens)]) if prompts else None,
        )


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
        layout: :meth:`StateLayout.describe` of the layout compared.
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


def _is_tensor(value: Any) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency here
        return False
    return isinstance(value, torch.Tensor)


def is_scalar(value: Any) -> bool:
    """A value compared as one: numbers, strings, None, enums, short sequences of those."""
    if value is None or isinstance(value, (bool, int, float, str, enum.Enum)):
        return True
    if isinstance(value, (list, tuple)) and len(value) <= MAX_SCALAR_SEQUENCE:
        return all(v is None or isinstance(v, (bool, int, float, str, enum.Enum)) for v in value)
    return False


def _flat_dict(value: Any) -> bool:
    """A small dict of tensors or scalars keyed by names or numbers (per-ratio buffers)."""
    return (
        isinstance(value, dict)
        and 0 < len(value) <= MAX_SCALAR_SEQUENCE
        and all(isinstance(k, (str, int)) for k in value)
        and all(_is_tensor(v) or is_scalar(v) for v in value.values())
    )


def state_fields(md: Any) -> dict[str, Any]:
    """The instance attributes of ``md``, small dicts of buffers flattened to ``name[key]``.

    Methods a spy patched onto the instance are left out. A dict such as upstream's per-ratio
    buffers (DeepSeek-V4 metadata keeps ``{compress_ratio: tensor}``) is state like any other.
    """
    out: dict[str, Any] = {}
    for name, value in vars(md).items():
        if callable(value) and not _is_tensor(value):
            continue
        if _flat_dict(value):
            out.update({f"{name}[{key!r}]": v for key, v in value.items()})
        else:
            out[name] = value
    return out


_MISSING = object()


def _class_default(obj: Any, name: str) -> Any:
    """What ``obj.name`` reads when the instance never set it: a plain class attribute."""
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            value = klass.__dict__[name]
            descriptor = hasattr(value, "__get__") and not _is_tensor(value)
            return _MISSING if descriptor or callable(value) else value
    return _MISSING


def _with_defaults(obj: Any, mine: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    out = dict(mine)
    for name in names:
        if name not in out:
            value = _class_default(obj, name)
            if value is not _MISSING:
                out[name] = value
    return out


def _view_key(t: Any) -> tuple | None:
    if not _is_tensor(t) or not t.numel():
        return None
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype))


def _aliases(mine: dict[str, Any], theirs: dict[str, Any], names: list[str]) -> dict[str, str]:
    """Fields that are the same tensor view as an earlier field, in both objects alike."""
    first_mine: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for name in names:
        key = _view_key(mine.get(name))
        if key is None:
            continue
        if key in first_mine:
            other = first_mine[key]
            if _view_key(theirs.get(name)) == _view_key(theirs.get(other)) is not None:
                out[name] = other
            continue
        first_mine[key] = name
    return out


def _short(values: list[Any], start: int = 0) -> str:
    part = values[start : start + SHOWN]
    head = "..., " if start else ""
    tail = ", ..." if start + SHOWN < len(values) else ""
    return "[" + head + ", ".join(str(v) for v in part) + tail + "]"


def _region(live: Any, fresh: Any, layout: StateLayout) -> tuple[int, ...] | None:
    if live.dim() != fresh.dim():
        return None
    used = layout.used(tuple(fresh.shape))
    return tuple(min(a, b, u) for a, b, u in zip(live.shape, fresh.shape, used, strict=True))


def _equal(a: Any, b: Any) -> Any:
    import torch

    if a.dtype != b.dtype:
        a, b = a.to(torch.float64), b.to(torch.float64)
    if a.is_floating_point():
        return (a == b) | (a.isnan() & b.isnan())
    return a == b


def _compare_tensor(
    name: str, live: Any, fresh: Any, layout: StateLayout, mask: Any | None
) -> tuple[StaleField | None, bool]:
    """``(difference or None, whether anything was compared)`` for one tensor field."""
    region = _region(live, fresh, layout)
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
    layout: StateLayout,
    *,
    determined: Mapping[str, Any] | None = None,
    fields: Iterable[str] | None = None,
    sites: Any = None,
    checkpoint: str = "",
) -> Comparison:
    """Compare every tensor and scalar attribute of ``live`` with ``fresh`` on the used region.

    Args:
        live: the metadata reached incrementally.
        fresh: one of the same class and construction settings, prepared for ``layout``.
        layout: the current layout (:meth:`StateLayout.from_metadata` of ``live``).
        determined: per field, what a from-scratch prepare fixes: a boolean tensor of the
            fresh field's shape, or ``False`` for a field (tensor or scalar) it leaves open.
            Fields missing here are compared in full (on the used region).
        fields: compare only these (a restore's contract covers the fields it saved).
        sites: a :class:`regress.dsa.write_log.WriteLog` that watched both objects; it names
            where each differing field was last written.
        checkpoint: stamped on every difference.
    """
    out = Comparison()
    determined = determined or {}
    mine, theirs = state_fields(live), state_fields(fresh)
    names = sorted(set(mine) | set(theirs))
    # A dataclass field one object never assigned reads its class default: compare that.
    mine, theirs = _with_defaults(live, mine, names), _with_defaults(fresh, theirs, names)
    out.aliases = _aliases(mine, theirs, names)
    if fields is not None:
        wanted = set(fields)
        names = [n for n in names if n in wanted]
    for name in names:
        if name in out.aliases:
            continue
        found = _compare_field(name, mine, theirs, layout, determined, out)
        if found is None:
            continue
        found.checkpoint, found.layout, found.owner = (
            checkpoint,
            layout.describe(),
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
    layout: StateLayout,
    determined: Mapping[str, Any],
    out: Comparison,
) -> StaleField | None:
    mask = determined.get(name)
    if name not in mine or name not in theirs:
        value = mine.get(name, theirs.get(name))
        if not (_is_tensor(value) or is_scalar(value)):
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
    if _is_tensor(a) and _is_tensor(b):
        found, looked = _compare_tensor(name, a, b, layout, mask)
        (out.compared if looked else out.undetermined).append(name)
        return found
    if is_scalar(a) and is_scalar(b) and not _is_tensor(a) and not _is_tensor(b):
        out.compared.append(name)
        return None if a == b else StaleField(name, "value", repr(a)[:80], repr(b)[:80])
    if _is_tensor(a) or _is_tensor(b) or is_scalar(a) or is_scalar(b):
        out.compared.append(name)
        return StaleField(name, "kind", type(a).__name__, type(b).__name__)
    out.uncomparable.append(name)
    return None


def compare_states(live: Any, fresh: Any, layout: StateLayout, **kwargs: Any) -> list[StaleField]:
    """The fields of ``live`` that differ from ``fresh`` on what ``layout`` uses (see :func:`compare`).

    The library entry point of the oracle; the runtime sentinel's debug mode and the
    ``stale_state`` scenario of ``regress check`` call it. Keyword arguments go to
    :func:`compare`.
    """
    return compare(live, fresh, layout, **kwargs).differences


__all__ = [
    "Comparison",
    "StaleField",
    "StateLayout",
    "compare",
    "compare_states",
    "is_scalar",
    "state_fields",
]
