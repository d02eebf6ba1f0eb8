"""Inference engines the profiler can drive, all behind one small Protocol.

An engine adapter turns prompts into :class:`~regress.acceptance.trace.RequestTrace` objects at a
given batch size and draft length. Adapters may also expose, as plain attributes the profiler
reads with ``getattr`` after each run:

* ``last_counters``: upstream-style iteration-stats sums (``num_draft_tokens``,
  ``num_accepted_tokens``, ``num_requests_with_draft_tokens``) for the last run, or None;
* ``last_notes``: remarks about the last run (cross-check mismatches, batch size not reached);
* ``sentinel_violations``: the runtime DSA sentinel's findings so far, or None when it is off;
* ``options``: a JSON-ready dict of how the engine was configured, for the report;

and, as methods :func:`regress.acceptance.prompts.resolve_prompts` looks for:

* ``default_prompts(limit)``: prompts to use when ``--prompts`` is not given (may raise
  UsageError to demand a file);
* ``tokenize(text)``: token ids of a text prompt, for engines that take ids only.

Engines are built by name (:func:`get_engine`) from :data:`ENGINES`: the reference engine is the
profiler's own, and another package's engine is a :class:`~regress.plugins.Plugin` it declares
in the ``regress.engines`` entry-point group, so this package imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from regress.acceptance.trace import RequestTrace
from regress.plugins import Plugin, Registry

#: A prompt: token ids, or text for engines that own a tokenizer.
Prompt = Sequence[int] | str

#: progress(done_requests, total_requests), called from the engine as requests finish.
EngineProgress = Callable[[int, int], None]


@runtime_checkable
class AcceptanceEngine(Protocol):
    """What the profiler needs from an engine."""

    name: str
    model: str

    def run(
        self,
        prompts: Sequence[Prompt],
        *,
        batch_size: int,
        max_draft_len: int,
        max_new_tokens: int,
        progress: EngineProgress | None = None,
    ) -> list[RequestTrace]:
        """Generate every prompt with ``batch_size`` requests in flight; one trace per prompt."""
        ...


def _reference(**options) -> AcceptanceEngine:
    from regress.acceptance.engines.reference import ReferenceAcceptanceEngine

    return ReferenceAcceptanceEngine(**options)


#: The options every engine is built with (``regress accept`` passes them all; an engine refuses
#: those it cannot honour, in its own words). An entry's ``options`` are the ones it adds.
COMMON_OPTIONS = ("model", "device", "defects", "cuda_graph", "seed", "sentinel")

#: Engines by name (``--engine``): the profiler's own, then the ``regress.engines`` entry points
#: (``regress.trtllm.engine`` declares ``trtllm``), so this package imports none of them.
ENGINES: Registry[Plugin] = Registry(
    "engine",
    "--engine",
    "regress.engines",
    [Plugin("reference", "regress's CPU DSA model (replays defects)", _reference)],
)


def engine_names() -> list[str]:
    """Every registered engine, the reference first."""
    return ENGINES.names()


def get_engine(name: str, **options) -> AcceptanceEngine:
    """Build an engine adapter by name; its heavy imports happen here, not at module import.

    Raises:
        UsageError: for an unknown engine name or options it does not take.
    """
    return ENGINES.get_entry(name).factory(**options)
