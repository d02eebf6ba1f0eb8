"""The one seam to the draft loop: upstream's own worker where the tree has one, regress's model else.

:func:`caller_checkpoints` takes the loaded tree, a prepared metadata object and the draft
settings, runs the best caller available and yields ``(label, metadata)`` after every metadata
call the caller makes, so that any checker (the map contracts of :mod:`regress.check.scenarios`,
the stale-state oracle) looks at the live object at exactly the moments upstream's loop touches
it. Labels name the call: ``update_for_spec_dec#1``, ``on_update#2``, ``restore_from_spec_dec#1``,
and ``draft_forward_<i>`` when the worker runs draft step ``i``'s model, the point where a draft
layer's attention kernels read the maps. The regress model (no worker in the tree) yields the
labels of :func:`regress.dsa.lifecycle.draft_checkpoints`: ``draft_begin``, ``draft_step_<i>``.

Spying wraps, never re-implements: every method the metadata's upstream classes define is
wrapped on this one instance (the sentinel's way), and only the outermost call yields, after it
returned. Upstream's worker is one synchronous call, so it runs in a helper thread that hands
control over at each checkpoint and waits until the consumer asks for the next one: only one of
the two threads runs at any time. A consumer that stops early ends the worker at its next
checkpoint. The placement rewrite of :mod:`regress.sandbox.cuda` is per thread and is entered
in the helper thread too. An exception in upstream's code reaches the consumer unchanged (its
traceback still ends in the tree, for :mod:`regress.sandbox.blame`).

Usage (a one-line change from ``draft_checkpoints(md, k, accepted)``)::

    run = caller_checkpoints(up, md, DraftSettings(max_draft_len=4, num_accepted=[5, 1, 3, 2]))
    for label, md in run:
        ...
    run.caller  # 'upstream tensorrt_llm/_torch/speculative/eagle3.py::MTPEagleWorker.forward'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from regress.dsa.lifecycle import GUARANTEED_AFTER, draft_checkpoints
from regress.sandbox import workers

MODEL_CALLER = "regress model (regress/dsa/lifecycle.py::iter_draft_loop)"
#: Methods whose return is a rebuild point: upstream guarantees the maps match the layout there.
REBUILDS = GUARANTEED_AFTER


@dataclass(frozen=True)
class DraftSettings:
    """What one draft loop is asked to do.

    Attributes:
        max_draft_len: K.
        num_accepted: per request, accepted tokens counting the bonus (1..K+1), as upstream's
            ``num_accepted_tokens``; context requests accept 1 whatever is given. Include 1
            (zero acceptance) and values between 1 and K+1 (partial acceptance).
        runtime_draft_len: the draft length of this iteration (default K); 0 makes upstream's
            worker skip drafting (``skip_drafting``), as dynamic draft length does.
        worker: a worker class name to run (default: the best available, :data:`workers.KINDS`).
        draft_kv_cache_manager: a separate draft KV-cache manager, handed to the worker through
            its resource manager (``use_separate_draft_kv_cache``).
        draft_seq_lens: the regress model's draft layout (its ``draft_seq_lens``; model only).
        fail_at: the draft step whose draft forward raises
            :class:`~regress.sandbox.drafts.DraftModelFailure` (upstream's worker only), to see
            what the worker's own handling leaves behind (:mod:`regress.check.failures`).
    """

    max_draft_len: int
    num_accepted: Sequence[int]
    runtime_draft_len: int | None = None
    worker: str | None = None
    draft_kv_cache_manager: Any = None
    draft_seq_lens: Sequence[int] | None = None
    fail_at: int | None = None


class CallPoint(tuple):
    """``(label, metadata)`` at one point of the caller's run, with what the checker needs to judge
    it as attributes (the stale-state oracle's own point is
    :class:`regress.dsa.stale_check.Checkpoint`).

    Attributes:
        method: the metadata method that just returned (None at a draft forward or model step).
        step: the draft step the worker is in (the last draft forward started), or None.
        guaranteed: upstream guarantees here that derived buffers match the layout (after
            ``prepare``/``on_update_kv_lens``/``update_for_spec_dec``, at a draft forward, at a
            model draft step).
        reads: a draft layer reads the metadata here (a draft forward).
        rebuilt: the metadata was given a rebuild call since the layout last changed.
    """

    def __new__(cls, label: str, metadata: Any, **info: Any) -> CallPoint:
        self = super().__new__(cls, (label, metadata))
        self.method = info.get("method")
        self.step = info.get("step")
        self.guaranteed = bool(info.get("guaranteed"))
        self.reads = bool(info.get("reads"))
        self.rebuilt = bool(info.get("rebuilt", True))
        return self

    @property
    def label(self) -> str:
        return self[0]


class _Abandoned(BaseException):
    """The consumer stopped iterating: unwind the worker at its next checkpoint."""


@dataclass
class CallerRun:
    """An iterable over the checkpoints of one draft loop, and what ran it.

    Attributes:
        caller: ``upstream <file>::<Class>.<method>`` or :data:`MODEL_CALLER`.
        kind: ``"upstream"`` or ``"model"``.
        fallback: why the regress model ran (no worker, or none loadable), else ``""``.
        calls: every outermost metadata call the caller made, in order.
        result: the worker's return value once the loop ran to its end.
    """

    caller: str
    kind: str
    fallback: str = ""
    calls: list[str] = field(default_factory=list)
    result: Any = None
    _source: Any = field(default=None, repr=False)

    def __iter__(self) -> Iterator[CallPoint]:
        return self._source(self)


def caller_checkpoints(
    up: Any,
    metadata: Any,
    settings: DraftSettings,
    *,
    thread_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> CallerRun:
    """Run the best draft-loop caller on ``metadata`` and yield after every metadata call.

    Args:
        up: the loaded tree (:class:`regress.sandbox.eras.Upstream`).
        metadata: a prepared metadata object (the target forward's layout).
        settings: the draft loop to run (:class:`DraftSettings`).
        thread_context: entered in the worker's helper thread around the worker's call (a
            per-thread recorder, such as a write log's :meth:`~regress.dsa.write_log.WriteLog.in_thread`).

    Returns:
        A :class:`CallerRun`: iterate it for :class:`CallPoint` ``(label, metadata)`` tuples;
        ``.caller`` names what ran. Iterating runs the loop; iterate once.
    """
    found = workers.catalog(up)
    worker = found.pick(settings.worker)
    if worker is not None:
        why = _not_a_verify_layout(metadata, settings)
    elif settings.worker:
        why = f"no worker {settings.worker!r} in this tree"
    else:
        why = "; ".join(found.problems) or "no one-model speculative worker in this tree"
    if why:
        return CallerRun(
            MODEL_CALLER, "model", fallback=why, _source=_model_source(metadata, settings)
        )
    return CallerRun(
        worker.caller,
        "upstream",
        _source=_upstream_source(up, worker, metadata, settings, thread_context or nullcontext),
    )


def _not_a_verify_layout(md: Any, settings: DraftSettings) -> str:
    """Why upstream's worker cannot take this layout ('' when it can).

    One-model workers reshape each generation request's logits to ``1 + runtime_draft_len``
    rows (``_sample_and_accept_draft_tokens_base``); another layout (tree drafts, PARD) never
    reaches them, so the regress model drives it instead of a worker failing on our input.
    """
    r = settings.max_draft_len if settings.runtime_draft_len is None else settings.runtime_draft_len
    nc = int(md.num_contexts)
    gen = [int(x) for x in md.seq_lens.tolist()][nc:]
    if any(n != r + 1 for n in gen):
        return (
            f"generation lengths {gen} are not 1 + runtime_draft_len = {r + 1}: a layout "
            "upstream's one-model worker never receives, driven by the regress model"
        )
    return ""


def _model_source(md: Any, settings: DraftSettings):
    def source(run: CallerRun) -> Iterator[CallPoint]:
        for label in draft_checkpoints(
            md,
            settings.max_draft_len,
            settings.num_accepted,
            draft_seq_lens=settings.draft_seq_lens,
        ):
            run.calls.append(label)
            step = int(label.rsplit("_", 1)[1]) if label.startswith("draft_step_") else None
            yield CallPoint(label, md, step=step, guaranteed=True, reads=step is not None)

    return source


def _layout(md: Any) -> tuple:
    lens = getattr(md, "seq_lens", None)
    return (tuple(int(x) for x in lens.tolist()) if lens is not None else None, md.num_contexts)


class _Handoff:
    """Strict alternation between the worker thread and the consumer."""

    def __init__(self) -> None:
        self.to_worker = threading.Semaphore(0)
        self.to_consumer = threading.Semaphore(0)
        self.item: Any = None
        self.done = False
        self.error: BaseException | None = None
        self.abandoned = False

    def offer(self, item: CallPoint) -> None:
        """Worker side: hand ``item`` over and wait until the consumer wants the next one."""
        if self.abandoned:
            return
        self.item = item
        self.to_consumer.release()
        self.to_worker.acquire()
        if self.abandoned:
            raise _Abandoned


def _upstream_source(
    up: Any,
    worker: workers.WorkerClass,
    md: Any,
    settings: DraftSettings,
    thread_context: Callable[[], AbstractContextManager[Any]],
):
    def source(run: CallerRun) -> Iterator[CallPoint]:
        hand = _Handoff()
        spy = _Spy(md, hand, run)
        thread = threading.Thread(
            target=_drive,
            args=(up, worker, md, settings, spy, hand, run, thread_context),
            daemon=True,
        )
        spy.thread = thread
        spy.install()
        thread.start()
        try:
            while True:
                hand.to_consumer.acquire()
                if hand.done:
                    break
                yield hand.item
                hand.to_worker.release()
        finally:
            if not hand.done:  # the consumer stopped early: unwind the worker
                hand.abandoned = True
                hand.to_worker.release()
                while not hand.done:
                    hand.to_consumer.acquire()
            thread.join()
            spy.remove()
        if hand.error is not None:
            raise hand.error

    return source


def _drive(up, worker, md, settings, spy, hand: _Handoff, run: CallerRun, context) -> None:
    """The helper thread: build the worker, run one forward, hand over at every checkpoint."""
    from regress.sandbox.cuda import device_mode, regress_side
    from regress.sandbox.drafts import FakeResourceManager

    try:
        with device_mode(up.ledger), context():
            k = settings.max_draft_len
            r = k if settings.runtime_draft_len is None else settings.runtime_draft_len
            manager = settings.draft_kv_cache_manager
            instance = workers.build(worker, k, separate_draft_kv=manager is not None, up=up)
            with regress_side():
                plan = workers.forward_inputs(
                    worker,
                    md,
                    k=k,
                    runtime_draft_len=r,
                    num_accepted=settings.num_accepted,
                    resource_manager=FakeResourceManager(manager) if manager is not None else None,
                )
            plan.draft_model.on_forward = spy.draft_forward
            plan.draft_model.fail_at = settings.fail_at
            num_contexts = int(md.num_contexts)
            run.result = instance(**plan.kwargs)
            workers.check_acceptance(plan, run.result, num_contexts)
    except _Abandoned:
        pass
    except BaseException as exc:  # handed to the consumer, who re-raises it
        hand.error = exc
    finally:
        hand.done = True
        hand.to_consumer.release()


class _Spy:
    """Wraps the metadata instance's upstream methods; yields after each outermost call."""

    def __init__(self, md: Any, hand: _Handoff, run: CallerRun) -> None:
        self.md = md
        self.hand = hand
        self.run = run
        self.depth = 0
        self.counts: dict[str, int] = {}
        self.forwards = 0
        self.saved: dict[str, Any] = {}
        self.rebuild_layout = _layout(md)  # the layout the last rebuild (prepare) described
        self.thread: threading.Thread | None = None  # only the worker's calls are checkpoints

    def install(self) -> None:
        for name in _upstream_methods(type(self.md)):
            self.saved[name] = self.md.__dict__.get(name)
            setattr(self.md, name, self._wrap(name, getattr(self.md, name)))

    def remove(self) -> None:
        for name, original in self.saved.items():
            if original is None:
                self.md.__dict__.pop(name, None)
            else:
                setattr(self.md, name, original)

    def _wrap(self, name: str, method: Any) -> Any:
        def spied(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not self.thread:  # the consumer looking
                return method(*args, **kwargs)
            self.depth += 1
            try:
                result = method(*args, **kwargs)
            finally:
                self.depth -= 1
            if self.depth == 0:
                self._returned(name)
            return result

        spied.__wrapped__ = method
        return spied

    def _returned(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        label = f"{name}#{self.counts[name]}"
        self.run.calls.append(label)
        if name in REBUILDS:
            self.rebuild_layout = _layout(self.md)
        step = self.forwards - 1 if self.forwards else None
        self.hand.offer(
            CallPoint(label, self.md, method=name, step=step, guaranteed=name in REBUILDS)
        )

    def draft_forward(self, md: Any) -> None:
        """Called by the fake draft model at the start of every draft forward."""
        label = f"draft_forward_{self.forwards}"
        self.forwards += 1
        self.run.calls.append(label)
        rebuilt = _layout(md) == self.rebuild_layout
        self.hand.offer(
            CallPoint(
                label, md, step=self.forwards - 1, guaranteed=True, reads=True, rebuilt=rebuilt
            )
        )


def _upstream_methods(cls: type) -> list[str]:
    """Methods defined by upstream classes in ``cls``'s MRO (not dunders, not properties)."""
    import inspect

    names = []
    for klass in cls.__mro__:
        if not (klass.__module__ or "").startswith("tensorrt_llm"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("__") or name in names:
                continue
            raw = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if inspect.isfunction(raw):
                names.append(name)
    return names
