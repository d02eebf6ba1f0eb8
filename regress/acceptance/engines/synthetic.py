"""A torch-free engine with prescribed acceptance rates, for tests, demos and documentation."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from regress.acceptance.engines import EngineProgress, Prompt
from regress.acceptance.trace import RequestTrace


class SyntheticEngine:
    """Draws accepted-draft counts from given conditional acceptance rates, deterministically.

    Each prompt gets its own random stream seeded by ``(seed, prompt index)``, so a prompt draws
    the same numbers at every batch size: with equal rates, runs are identical across batch sizes
    (perfect batch invariance), and with ``degraded`` rates the difference is the degradation
    alone, as it would be with a real batch-dependent bug. Each prompt also gets a difficulty
    factor in ``[1 - spread, 1]`` multiplying its rates, so bootstrap intervals have something to
    measure.

    Args:
        conditional: acceptance probability of draft ``i`` given drafts before it were accepted,
            e.g. the seeds' healthy ``[0.868, 0.864, 0.825, 0.834]``.
        degraded: per batch size, rates to use instead (e.g. ``{8: [0.880, 0.775, 0.670, 0.596]}``).
        seed: seeds every draw.
        spread: per-prompt difficulty spread.
        counters: report upstream-style iteration-stats sums (``last_counters``).
        sentinel: per batch size, violations to "observe" (None: the sentinel is off).
        model: name to report.
    """

    name = "synthetic"

    def __init__(
        self,
        conditional: Sequence[float],
        *,
        degraded: Mapping[int, Sequence[float]] | None = None,
        seed: int = 0,
        spread: float = 0.2,
        counters: bool = True,
        sentinel: Mapping[int, Sequence[dict]] | None = None,
        model: str = "synthetic-mtp",
    ) -> None:
        self.conditional = list(conditional)
        self.degraded = {int(b): list(r) for b, r in (degraded or {}).items()}
        self.seed = seed
        self.spread = spread
        self.counters = counters
        self._sentinel = sentinel
        self.model = model
        self.options = {"seed": seed, "conditional": self.conditional, "degraded": self.degraded}
        self.sentinel_violations: list[dict] | None = [] if sentinel is not None else None
        self.last_counters: dict[str, int] | None = None
        self.last_notes: list[str] = []
        self.calls: list[int] = []

    def default_prompts(self, limit: int | None = None) -> list[Prompt]:
        n = 40 if limit is None else limit
        return [[1 + i, 2 + i, 3 + i] for i in range(n)]

    def _rates(self, batch_size: int, max_draft_len: int) -> list[float]:
        rates = self.degraded.get(batch_size, self.conditional)
        # Depths past the given rates repeat the last one.
        return [rates[min(i, len(rates) - 1)] for i in range(max_draft_len)]

    def run(
        self,
        prompts: Sequence[Prompt],
        *,
        batch_size: int,
        max_draft_len: int,
        max_new_tokens: int,
        progress: EngineProgress | None = None,
    ) -> list[RequestTrace]:
        self.calls.append(batch_size)
        rates = self._rates(batch_size, max_draft_len)
        traces = []
        for index, _prompt in enumerate(prompts):
            rng = random.Random(f"{self.seed}:{index}")
            factor = 1.0 - self.spread * rng.random()
            accepted: list[int] = []
            tokens = 1  # the prefill token
            while tokens < max_new_tokens:
                a = 0
                while a < max_draft_len and rng.random() < rates[a] * factor:
                    a += 1
                accepted.append(a)
                tokens += a + 1
            traces.append(RequestTrace(accepted=accepted, prompt_index=index))
            if progress is not None:
                progress(index + 1, len(prompts))
        steps = sum(t.steps for t in traces)
        self.last_counters = (
            {
                "num_draft_tokens": steps * max_draft_len,
                "num_accepted_tokens": sum(t.accepted_total for t in traces),
                "num_requests_with_draft_tokens": steps,
            }
            if self.counters
            else None
        )
        if self._sentinel is not None and self.sentinel_violations is not None:
            self.sentinel_violations.extend(dict(v) for v in self._sentinel.get(batch_size, []))
        return traces
