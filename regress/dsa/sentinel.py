"""A runtime sentinel that watches live DSA metadata and records every contract violation.

``Sentinel().attach(metadata)`` wraps the lifecycle methods upstream callers use (``prepare``,
``on_update``, ``on_update_kv_lens``, ``update_for_spec_dec``, ``update_spec_dec_param``) on that
one instance and counts their calls. It checks the contracts of ``regress.dsa.invariants`` (the
token-to-request map agrees with the layout, the 2-D kv-lens buffer is wide enough for the
generation ``next_n``) only where upstream guarantees them: after the outermost ``prepare()``,
``on_update_kv_lens()`` or ``update_for_spec_dec()`` returns
(``regress.dsa.lifecycle.GUARANTEED_AFTER``; the lifecycle module cites the upstream sources).
Never after ``update_spec_dec_param()``: upstream calls it first in every forward, on a fresh
metadata whose ``seq_lens`` is ``None`` and later on the layout the draft loop's restore left,
whose map is legitimately still in the draft-step layout. Never after ``on_update()`` alone: it
recounts, and upstream refreshes the map in ``on_update_kv_lens()``.

The sentinel never raises into the engine it watches: a check that fails internally is recorded
as a violation with ``check="sentinel_error"`` (so no run that hit one reads as clean).

Debug mode (``Sentinel(stale=StaleDebug(...))``): at the same sites the sentinel also runs the
stale-state oracle (:mod:`regress.dsa.staleness`): it builds a fresh object the way the watched one
was built, replays the last ``update_spec_dec_param()`` it saw, prepares it for the current layout,
replays the refresh that just returned, and records every field the reviewed allow table does not
explain as a violation with ``check="stale_state"``. Two more objects and a comparison per site:
a debugging aid for the reference engine, not a production hook. Skipped under capture.

Checks read device buffers back, which a CUDA graph under capture forbids. During capture the
sentinel instead records device-side snapshots of the layout and the map (plain copies, captured
with the graph and refreshed by every replay) and checks them at the replay boundary:
:meth:`Sentinel.after_replay` (call it after ``graph.replay()``), or automatically for every graph
once :func:`install_replay_hook` is in place.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.invariants import Violation, check_kv_lens_2d_width, check_req_idx_map
from regress.dsa.lifecycle import GUARANTEED_AFTER


@dataclass(frozen=True)
class StaleDebug:
    """The sentinel's stale-state debug mode: how to build a watched object from scratch.

    Attributes:
        construct: a new object with the watched one's construction settings (the sentinel
            replays the announcement it saw on it).
        draft_len: K for the draft-window row rule, or how to read it off the metadata.
        prepare: give an object a batch and prepare it the way the executor does (default
            :func:`regress.dsa.batch.prepare_batch`, the mirrors' way).
    """

    construct: Any
    draft_len: Any = 0
    prepare: Any = prepare_batch


HOOKED = (
    "prepare",
    "on_update",
    "on_update_kv_lens",
    "update_for_spec_dec",
    "update_spec_dec_param",
)
CHECKED_AFTER = GUARANTEED_AFTER
SENTINEL_ERROR = "sentinel_error"


@dataclass(frozen=True)
class SentinelViolation:
    """A violation with where it was seen.

    Attributes:
        site: the outermost hooked method whose return exposed it.
        phase: ``"eager"`` or ``"replay"`` (checked from a CUDA-graph snapshot).
        call_index: running count of hooked calls on this metadata when it was seen.
        seq_lens: the layout at that moment.
        backend: the metadata class name.
    """

    check: str
    message: str
    site: str
    phase: str
    call_index: int
    seq_lens: list[int]
    backend: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Snapshot:
    site: str
    call_index: int
    backend: str
    num_tokens: int
    num_generations: int
    num_ctx_tokens: int
    seq_lens: Any  # device tensor, refreshed by replays
    req_idx: Any  # device tensor, refreshed by replays
    kv2d_shape: tuple[int, ...] | None


def _capturing() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return False
    return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


class Sentinel:
    """Records contract violations of the metadata objects it is attached to.

    Args:
        max_records: violations kept in :attr:`violations` (all are counted in
            :attr:`num_violations`), so a broken run cannot exhaust memory. A violation seen again
            with the same check, site, phase, layout and message is counted once.
    """

    _live: ClassVar[weakref.WeakSet[Sentinel]] = weakref.WeakSet()

    def __init__(self, *, max_records: int = 200, stale: StaleDebug | None = None) -> None:
        self.max_records = max_records
        self.stale = stale
        self.stale_checks = 0
        self._announced: dict[int, tuple[tuple, dict]] = {}
        self.violations: list[SentinelViolation] = []
        self.num_violations = 0
        self.calls: dict[str, int] = dict.fromkeys(HOOKED, 0)
        self.checks_run = 0
        self.errors = 0
        self._snapshots: list[_Snapshot] = []
        self._seen: set[tuple] = set()
        self._attached: list[tuple[weakref.ref, dict[str, Any]]] = []
        Sentinel._live.add(self)

    # -- attaching ----------------------------------------------------------------------------
    def attach(self, metadata: Any) -> Sentinel:
        """Wrap ``metadata``'s lifecycle methods (this instance only); returns ``self``."""
        originals: dict[str, Any] = {}
        state = {"depth": 0, "index": 0}
        for name in HOOKED:
            method = getattr(metadata, name, None)
            if method is None:
                continue
            originals[name] = metadata.__dict__.get(name)
            setattr(metadata, name, self._wrap(metadata, name, method, state))
        self._attached.append((weakref.ref(metadata), originals))
        return self

    def detach(self) -> None:
        """Restore every wrapped method on every attached metadata object."""
        for ref, originals in self._attached:
            md = ref()
            if md is None:
                continue
            for name, original in originals.items():
                if original is None:
                    md.__dict__.pop(name, None)
                else:
                    setattr(md, name, original)
        self._attached.clear()

    def _wrap(self, md: Any, name: str, method: Any, state: dict[str, int]) -> Any:
        sentinel = self

        @functools.wraps(method)
        def hooked(*args: Any, **kwargs: Any) -> Any:
            state["depth"] += 1
            try:
                result = method(*args, **kwargs)
            finally:
                state["depth"] -= 1
            state["index"] += 1
            sentinel.calls[name] += 1
            if name == "update_spec_dec_param":
                sentinel._announced[id(md)] = (args, kwargs)
            if state["depth"] == 0 and name in CHECKED_AFTER:
                sentinel._guarded(sentinel._observe, md, name, state["index"])
            return result

        return hooked

    # -- checking -----------------------------------------------------------------------------
    def _guarded(self, check: Any, md: Any, site: str, index: int, phase: str = "eager") -> None:
        """Run ``check``; an exception inside it is recorded, never raised into the engine."""
        try:
            check(md, site, index)
        except Exception as exc:  # the engine must survive a broken check
            self.errors += 1
            error = Violation(
                SENTINEL_ERROR,
                f"the sentinel's own check failed at {site}: {exc!r}; the run's contracts were "
                "not verified there (report it as a regress bug)",
                {"error": repr(exc)},
            )
            self._record(error, site, phase, index, md)

    def _observe(self, md: Any, site: str, index: int) -> None:
        if _capturing():
            self._snapshot(md, site, index)
            return
        self.checks_run += 1
        for v in check_req_idx_map(md) if hasattr(md, "req_idx_per_token") else []:
            self._record(v, site, "eager", index, md)
        for v in check_kv_lens_2d_width(md):
            self._record(v, site, "eager", index, md)
        if self.stale is not None and getattr(md, "seq_lens", None) is not None:
            for v in self._stale_state(md, site):
                self._record(v, site, "eager", index, md)

    def _stale_state(self, md: Any, site: str) -> list[Violation]:
        """The stale-state oracle at ``site``: unexplained differences from a fresh object."""
        from regress.dsa.fresh import Blueprint, fresh_twins
        from regress.dsa.stale_allow import ALLOWED, explain
        from regress.dsa.staleness import compare

        debug = self.stale
        args, kwargs = self._announced.get(id(md), ((), {}))

        def make() -> Any:
            fresh = debug.construct()
            if args or kwargs:
                fresh.update_spec_dec_param(*args, **kwargs)
            return fresh

        k = debug.draft_len(md) if callable(debug.draft_len) else debug.draft_len
        batch = Batch.from_metadata(md, k)
        replay = () if site == "prepare" else (site,)
        fresh, determined = fresh_twins(Blueprint(make, debug.prepare), batch, replay=replay)
        self.stale_checks += 1
        # A refresh returning is the draft-step checkpoint of the allow table's vocabulary.
        label = "prepare" if site == "prepare" else "draft_step"
        found = compare(md, fresh, batch, determined=determined, checkpoint=label).differences
        unexplained, _ = explain(found, ALLOWED, type(md).__name__)
        return [
            Violation(
                "stale_state",
                f"{f.field} differs from a fresh {f.owner} prepared for {f.layout}: "
                f"live {f.live}, fresh {f.fresh}",
                f.to_dict(),
            )
            for f in unexplained
        ]

    def _snapshot(self, md: Any, site: str, index: int) -> None:
        seq_lens_cuda = getattr(md, "seq_lens_cuda", None)
        req_idx = getattr(md, "req_idx_per_token", None)
        if md.seq_lens is None or seq_lens_cuda is None or req_idx is None:
            return  # no layout yet, or no map: nothing upstream guarantees to check
        n, t = int(md.seq_lens.shape[0]), int(md.num_tokens)
        kv2d = getattr(md, "kv_lens_cuda_2d", None)
        self._snapshots.append(
            _Snapshot(
                site=site,
                call_index=index,
                backend=type(md).__name__,
                num_tokens=t,
                num_generations=md.num_generations,
                num_ctx_tokens=md.num_ctx_tokens,
                seq_lens=seq_lens_cuda[:n].clone(),  # captured copy, refreshed per replay
                req_idx=req_idx[:t].clone(),
                kv2d_shape=tuple(kv2d.shape) if kv2d is not None else None,
            )
        )

    def after_replay(self) -> None:
        """Check the snapshots captured with the graphs: call after ``graph.replay()``."""
        for snap in self._snapshots:
            self._guarded(self._check_snapshot, snap, snap.site, snap.call_index, "replay")

    def _check_snapshot(self, snap: _Snapshot, site: str, index: int) -> None:
        """Check one captured snapshot (the copies the last replay refreshed)."""
        self.checks_run += 1
        view = SimpleNamespace(
            seq_lens=snap.seq_lens.cpu(),
            seq_lens_cuda=None,
            num_tokens=snap.num_tokens,
            req_idx_per_token=snap.req_idx,
            num_generations=snap.num_generations,
            num_ctx_tokens=snap.num_ctx_tokens,
        )
        found = check_req_idx_map(view)
        if snap.kv2d_shape is not None:
            view.kv_lens_cuda_2d = SimpleNamespace(shape=snap.kv2d_shape)
            found += check_kv_lens_2d_width(view)
        for v in found:
            self._record(v, snap.site, "replay", snap.call_index, view, backend=snap.backend)

    def flush(self) -> None:
        """Run any checks still owed (captured snapshots): call when a run ends."""
        if self._snapshots and not _capturing():
            self.after_replay()

    def _record(
        self, v: Violation, site: str, phase: str, index: int, md: Any, backend=None
    ) -> None:
        if isinstance(md, _Snapshot):
            backend, lens = md.backend, md.seq_lens
        else:
            lens = getattr(md, "seq_lens", None)
        layout = [int(x) for x in lens.tolist()] if lens is not None else []
        key = (v.check, site, phase, tuple(layout), v.message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.num_violations += 1
        if len(self.violations) < self.max_records:
            self.violations.append(
                SentinelViolation(
                    check=v.check,
                    message=v.message,
                    site=site,
                    phase=phase,
                    call_index=index,
                    seq_lens=layout,
                    backend=backend or type(md).__name__,
                    details=v.details,
                )
            )

    def summary(self) -> dict[str, Any]:
        """Counts for a report: calls seen, checks run, violations found."""
        return {
            "calls": dict(self.calls),
            "checks_run": self.checks_run,
            "stale_checks": self.stale_checks,
            "violations": self.num_violations,
            "errors": self.errors,
        }


_REPLAY_HOOK: dict[str, Any] = {}


def install_replay_hook() -> None:
    """Make every ``torch.cuda.CUDAGraph.replay`` check all live sentinels' snapshots after it.

    For code that replays graphs it does not own (TensorRT-LLM's CUDA-graph runner). Idempotent;
    undo with :func:`remove_replay_hook`.
    """
    import torch

    if _REPLAY_HOOK:
        return
    original = torch.cuda.CUDAGraph.replay

    @functools.wraps(original)
    def replay(graph: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(graph, *args, **kwargs)
        for sentinel in list(Sentinel._live):
            if sentinel._snapshots:
                sentinel.after_replay()
        return result

    _REPLAY_HOOK["original"] = original
    torch.cuda.CUDAGraph.replay = replay


def remove_replay_hook() -> None:
    """Undo :func:`install_replay_hook`."""
    import torch

    original = _REPLAY_HOOK.pop("original", None)
    if original is not None:
        torch.cuda.CUDAGraph.replay = original
