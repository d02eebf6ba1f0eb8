"""Which attributes of a metadata object are its state, and which of them alias one another.

The stale-state oracle (:mod:`regress.dsa.staleness`) and the fresh twins
(:mod:`regress.dsa.fresh`) read an object the same way: every instance attribute that is a tensor
or a scalar, small dicts of buffers flattened (:func:`state_fields`), class defaults where the
instance never assigned a field (:func:`with_defaults`), and tensors that are the same view under
two names compared once (:func:`aliases`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

#: Lists and tuples of scalars up to this length are compared as one scalar value.
MAX_SCALAR_SEQUENCE = 64


def is_tensor(value: Any) -> bool:
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
        and all(is_tensor(v) or is_scalar(v) for v in value.values())
    )


def state_fields(md: Any) -> dict[str, Any]:
    """The instance attributes of ``md``, small dicts of buffers flattened to ``name[key]``.

    Methods a spy patched onto the instance are left out. A dict such as upstream's per-ratio
    buffers (DeepSeek-V4 metadata keeps ``{compress_ratio: tensor}``) is state like any other.
    """
    out: dict[str, Any] = {}
    for name, value in vars(md).items():
        if callable(value) and not is_tensor(value):
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
            descriptor = hasattr(value, "__get__") and not is_tensor(value)
            return _MISSING if descriptor or callable(value) else value
    return _MISSING


def with_defaults(obj: Any, mine: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``mine`` plus the class default of every name in ``names`` the instance never set."""
    out = dict(mine)
    for name in names:
        if name not in out:
            value = _class_default(obj, name)
            if value is not _MISSING:
                out[name] = value
    return out


def _view_key(t: Any) -> tuple | None:
    if not is_tensor(t) or not t.numel():
        return None
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype))


def aliases(mine: dict[str, Any], theirs: dict[str, Any], names: list[str]) -> dict[str, str]:
    """Fields that are the same tensor view as an earlier field, in both objects alike.

    ``alias -> first name``. A field the live object aliases but the fresh one keeps apart is
    not an alias: that the live object wrote one buffer under two names may be the stale state,
    so both names are compared.
    """
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


__all__ = [
    "MAX_SCALAR_SEQUENCE",
    "aliases",
    "is_scalar",
    "is_tensor",
    "state_fields",
    "with_defaults",
]
