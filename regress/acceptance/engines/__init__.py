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

Engines are built by name (:func:`get_engine`): the reference engine is the profiler's own, and
an engine of another package registers itself when imported (:func:`register_engine`), so this
package imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from regress.acceptance.trace import RequestTrace
from regress.errors import UsageError

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


EngineFactory = Callable[..., AcceptanceEngine]


def _reference(**options) -> AcceptanceEngine:
    from regress.acceptance.engines.reference import ReferenceAcceptanceEngine

    return ReferenceAcceptanceEngine(**options)


#: Engines by name. The profiler's own (the reference engine) is here; an engine of another
#: package registers itself when imported (``regress.trtllm.engine`` registers ``trtllm``).
_ENGINES: dict[str, EngineFactory] = {"reference": _reference}


def register_engine(name: str, factory: EngineFactory) -> None:
    """Make ``--engine NAME`` build ``factory(**options)``; a name is taken once."""
    if _ENGINES.get(name, factory) is not factory:
        raise ValueError(f"the acceptance engine {name!r} is registered already")
    _ENGINES[name] = factory


def engine_names() -> list[str]:
    """Every registered engine, in registration order."""
    return list(_ENGINES)


def get_engine(name: str, **options) -> AcceptanceEngine:
    """Build an engine adapter by name; its heavy imports happen here, not at module import.

    Raises:
        UsageError: for an unknown engine name or options it does not take.
    """
    if name not in _ENGINES:
        raise UsageError(f"unknown engine '{name}'; choose one of: {', '.join(_ENGINES)}")
    return _ENGINES[name](**options)
