"""The fused decode-metadata kernel against upstream's own eager chain, on the same state.

Upstream states the contract itself: ``fused_dsa_decode_metadata`` "produces integer metadata that
must be bit-identical to the eager chain" of ``on_update_kv_lens()``
(``sparse/dsa/fused_metadata.py`` @ e9eacd32, module and function docstrings). The map contracts
and the stale-state oracle see only part of what the kernel writes: a kernel that wrote a wrong
indexer-K *scale* slot only in draft steps passed every cell of ``--matrix full`` on the real era-C
tree (benchmarks/check_matrix.md). So at every checkpoint of a ``fused=on`` session where the
metadata was just rebuilt, a copy of the live object runs ``on_update_kv_lens()`` again with the
tree's fused gate answered "off", i.e. upstream's eager chain on the same inputs, and the kernel's
outputs (:data:`FUSED_OUTPUTS`) must equal the eager ones, element for element.

The gate is read once per process upstream (``_fused_dsa_meta_enabled`` is ``lru_cache``'d), so
the twin clears the DSA module's caches, sets the gate's off value, runs, and restores both.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from regress.dsa.invariants import Violation
from regress.sandbox.cuda import regress_side

#: The type of an ``lru_cache``'d function (what upstream's gate reader is).
_CACHED = type(functools.lru_cache(maxsize=1)(lambda: None))

#: The check name of a difference (``violation.check``).
FUSED_VS_EAGER = "fused_vs_eager"
#: What the kernel writes, and the extent it writes: ``tokens`` or ``seqs + 1`` entries.
FUSED_OUTPUTS: tuple[tuple[str, str], ...] = (
    ("req_idx_per_token", "tokens"),
    ("slot_mapping_fp8", "tokens"),
    ("slot_mapping_scale", "tokens"),
    ("gen_kv_indptr", "seqs"),
    ("gen_cached_token_indptr", "seqs"),
)


@contextmanager
def eager_gate(module: Any, gates: Sequence[Any]) -> Iterator[None]:
    """Upstream's gate answering "fused off" inside the block (``gates``:
    :class:`regress.sandbox.gates.FusedGate`), its process cache cleared on entry and exit."""
    cached = [f for f in vars(module).values() if isinstance(f, _CACHED)]
    saved = {g.name: os.environ.get(g.name) for g in gates}
    for f in cached:
        f.cache_clear()
    try:
        for g in gates:
            os.environ[g.name] = g.off_value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for f in cached:
            f.cache_clear()


def _extent(md: Any, kind: str) -> int:
    return int(md.num_tokens) if kind == "tokens" else int(md.num_seqs) + 1


def _eligible(md: Any) -> bool:
    """Upstream's ``fused_eligible`` without the gate: a pure generation step with tokens."""
    return (
        getattr(md, "kv_cache_manager", None) is not None
        and int(getattr(md, "num_tokens", 0) or 0) > 0
        and int(getattr(md, "num_generations", 0) or 0) > 0
        and int(getattr(md, "num_contexts", 0) or 0) == 0
        and not getattr(md, "use_fp8_ds_mla", False)
    )


def _unspied(twin: Any) -> Any:
    """The copy without the caller's spies (:mod:`regress.check.caller` wraps methods on the live
    instance): the twin runs the class's own methods, never hands a checkpoint to the caller."""
    cls = type(twin)
    for name, value in list(vars(twin).items()):
        if callable(value) and callable(getattr(cls, name, None)):
            delattr(twin, name)
    return twin


def fused_vs_eager(md: Any, gates: Sequence[Any], where: str) -> list[Violation]:
    """The kernel's outputs on ``md`` against upstream's eager chain run on a copy of it."""
    if not gates or not _eligible(md):
        return []
    module = sys.modules[type(md).__module__]
    twin = _unspied(copy.deepcopy(md))
    with eager_gate(module, gates):
        twin.on_update_kv_lens()
    found = []
    with regress_side():
        for name, kind in FUSED_OUTPUTS:
            live, eager = getattr(md, name, None), getattr(twin, name, None)
            if live is None or eager is None:
                continue
            n = _extent(md, kind)
            fused_vals = [int(x) for x in live[:n].tolist()]
            eager_vals = [int(x) for x in eager[:n].tolist()]
            if fused_vals == eager_vals:
                continue
            at = next(
                i for i, (a, b) in enumerate(zip(fused_vals, eager_vals, strict=False)) if a != b
            )
            found.append(
                Violation(
                    FUSED_VS_EAGER,
                    f"{name} from the fused kernel differs from upstream's eager chain at {where} "
                    f"(entry {at}: fused {fused_vals[at]}, eager {eager_vals[at]}); upstream "
                    "promises them bit-identical",
                    {"field": name, "index": at, "fused": fused_vals, "eager": eager_vals},
                )
            )
    return found


__all__ = ["FUSED_OUTPUTS", "FUSED_VS_EAGER", "eager_gate", "fused_vs_eager"]
