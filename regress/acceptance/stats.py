"""Acceptance statistics of one run: AL, per-position and conditional acceptance, bootstrap CIs."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from regress.acceptance.trace import RequestTrace, reach_counts, validate_traces
from regress.errors import UsageError

#: How the numbers in a report are defined; copied into every report so a reader needs no code.
CONVENTIONS: dict[str, str] = {
    "acceptance_length": (
        "AL = 1 + accepted / steps, pooled over all verify steps of all requests: mean tokens "
        "emitted per verify step, counting the target's bonus token (so 1 <= AL <= 1 + K). The "
        "prefill step verifies nothing and is not a step."
    ),
    "upstream_acceptance_length": (
        "TensorRT-LLM's iteration-stats formula (sum numAcceptedTokens + sum "
        "numRequestsWithDraftTokens) / sum numRequestsWithDraftTokens over iterations with drafts, "
        "from the engine's own counters; equals AL when both count the same steps."
    ),
    "per_position": (
        "per_position[i] = fraction of verify steps whose first i+1 drafts were all accepted "
        "(vLLM's per-position acceptance rate); AL = 1 + sum(per_position)."
    ),
    "conditional": (
        "conditional[i] = per_position[i] / per_position[i-1] (conditional[0] = per_position[0]): "
        "the chance draft i+1 is accepted given the ones before it were; a healthy drafter is "
        "roughly flat across depth. conditional_slope is its least-squares slope over depth, "
        "each depth weighted by the steps that reached it."
    ),
    "confidence_intervals": (
        "95% percentile bootstrap over prompts (requests resampled with replacement, seeded)."
    ),
}

_PERCENTILES = (5, 25, 50, 75, 95)


@dataclass
class RequestCounts:
    """The sufficient statistics of one request: everything a run's numbers are built from.

    Attributes:
        prompt_index: position of the prompt in the prompt list (None if the engine did not say).
        steps: verify steps with a known accepted count.
        reach: ``reach[i]`` = steps whose first ``i + 1`` drafts were accepted.
        censored_steps: steps the engine ran whose accepted count is unknown (left out).
    """

    prompt_index: int | None
    steps: int
    reach: list[int]
    censored_steps: int = 0

    @property
    def accepted(self) -> int:
        """Accepted drafts over all steps (``sum(reach)``, since a step counts once per depth)."""
        return sum(self.reach)

    @property
    def acceptance_length(self) -> float | None:
        """This request's own AL, or None when it ran no verify step."""
        return 1.0 + self.accepted / self.steps if self.steps else None


@dataclass
class RunStats:
    """Acceptance statistics of one run (one batch size), ready for verdicts and the report.

    CI fields hold ``[low, high]`` of a 95% bootstrap interval over prompts; entries that are
    undefined (a conditional rate whose previous depth was never reached) are None.
    """

    max_draft_len: int
    requests: int
    steps: int
    accepted: int
    drafted: int
    acceptance_length: float
    acceptance_length_ci: list[float]
    acceptance_rate: float
    per_position: list[float]
    per_position_ci: list[list[float]]
    conditional: list[float | None]
    conditional_ci: list[list[float] | None]
    conditional_slope: float | None
    conditional_slope_ci: list[float] | None
    counts: list[int]
    per_request: list[RequestCounts]
    per_request_al_percentiles: dict[str, float]
    censored_steps: int = 0
    upstream_acceptance_length: float | None = None
    counters: dict[str, int] | None = None
    seed: int = 0
    n_boot: int = 1000
    convention: str = field(default="bonus_token")

    @property
    def per_request_al(self) -> list[float]:
        """ALs of the requests that ran at least one verify step, in request order."""
        return [r.acceptance_length for r in self.per_request if r.acceptance_length is not None]

    def to_dict(self) -> dict:
        """A JSON-ready dict (the report's run entry, minus what the report adds)."""
        data = asdict(self)
        data["per_request_al"] = self.per_request_al
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> RunStats:
        """Rebuild from :meth:`to_dict` output, ignoring keys this version does not know."""
        names = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["per_request"] = [RequestCounts(**r) for r in data.get("per_request", [])]
        return cls(**kwargs)


def percentile(values: Sequence[float], q: float) -> float:
    """Percentile with linear interpolation between order statistics (numpy's default method)."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def slope(values: Sequence[float | None], weights: Sequence[float] | None = None) -> float | None:
    """(Weighted) least-squares slope of ``values`` against their index, skipping None and
    zero-weight points; None when fewer than two points remain."""
    ws = weights if weights is not None else [1.0] * len(values)
    pts = [
        (float(i), v, w)
        for i, (v, w) in enumerate(zip(values, ws, strict=True))
        if v is not None and w > 0
    ]
    if len(pts) < 2:
        return None
    total = sum(w for _, _, w in pts)
    mx = sum(x * w for x, _, w in pts) / total
    my = sum(y * w for _, y, w in pts) / total
    sxx = sum(w * (x - mx) ** 2 for x, _, w in pts)
    return sum(w * (x - mx) * (y - my) for x, y, w in pts) / sxx


def _reached(steps: int, reach: Sequence[int]) -> list[int]:
    """Steps that reached each depth: all of them for the first draft, ``reach[i-1]`` after."""
    return [steps, *reach[:-1]]


def conditional_rates(steps: int, reach: Sequence[int]) -> list[float | None]:
    """``conditional[i] = reach[i] / reach[i-1]`` (``reach[0] / steps`` first); None where no
    step got that far. The one definition of conditional acceptance (see :data:`CONVENTIONS`)."""
    return [r / d if d else None for r, d in zip(reach, _reached(steps, reach), strict=True)]


def decay_slope(steps: int, reach: Sequence[int]) -> float | None:
    """Slope of conditional acceptance over draft depth, each depth weighted by its sample size.

    Conditional acceptance at depth ``i`` is estimated from the ``reach[i-1]`` steps that got
    that far, which shrink with depth; weighting by them keeps a handful of lucky deep steps
    (a 1.000 from three samples) from dictating the slope.
    """
    return slope(conditional_rates(steps, reach), _reached(steps, reach))


def upstream_acceptance_length(counters: Mapping[str, int] | None) -> float | None:
    """TensorRT-LLM's AL from summed iteration stats, or None without usable counters.

    Mirrors ``compute_acceptance_length`` in upstream's
    ``tests/integration/defs/accuracy/accuracy_core.py``:
    ``(sum numAcceptedTokens + sum numRequestsWithDraftTokens) / sum numRequestsWithDraftTokens``.
    """
    if not counters:
        return None
    requests = counters.get("num_requests_with_draft_tokens")
    accepted = counters.get("num_accepted_tokens")
    if not requests or accepted is None:
        return None
    return (accepted + requests) / requests


def _rates(steps: int, reach: Sequence[int]) -> tuple[float, list[float], list[float | None]]:
    """AL, per-position and conditional rates from pooled counts (``steps`` > 0)."""
    per_position = [r / steps for r in reach]
    return 1.0 + sum(reach) / steps, per_position, conditional_rates(steps, reach)


def _interval(samples: list[float]) -> list[float] | None:
    return [percentile(samples, 2.5), percentile(samples, 97.5)] if samples else None


def _resamples(
    groups: Sequence[Sequence[RequestCounts]], k: int, *, seed: int, n_boot: int
) -> Iterator[list[tuple[int, list[int]]]]:
    """Per bootstrap resample of the prompts, the pooled ``(steps, reach)`` of each group.

    Requests, not steps, are resampled: steps of one prompt are correlated (same text, same
    context), so treating steps as independent would make the intervals falsely narrow. The
    groups (one run, or two runs over the same prompts) are resampled jointly: request ``j`` of
    every group is drawn together, which is what pairs two runs.
    """
    rng = random.Random(seed)
    n = len(groups[0])
    for _ in range(n_boot):
        picks = rng.choices(range(n), k=n)
        pooled = []
        for requests in groups:
            steps = 0
            reach = [0] * k
            for j in picks:
                steps += requests[j].steps
                rj = requests[j].reach
                for i in range(k):
                    reach[i] += rj[i]
            pooled.append((steps, reach))
        yield pooled


def _bootstrap(
    requests: Sequence[RequestCounts], k: int, *, seed: int, n_boot: int
) -> tuple[list[float] | None, list, list, list[float] | None]:
    """Percentile-bootstrap CIs over prompts for AL, each position, each conditional and the slope.

    An interval is None when no resample defined the quantity.
    """
    al: list[float] = []
    pos: list[list[float]] = [[] for _ in range(k)]
    cond: list[list[float]] = [[] for _ in range(k)]
    slopes: list[float] = []
    for ((steps, reach),) in _resamples([requests], k, seed=seed, n_boot=n_boot):
        if steps == 0:
            continue
        a, p, c = _rates(steps, reach)
        al.append(a)
        for i in range(k):
            pos[i].append(p[i])
            if c[i] is not None:
                cond[i].append(c[i])
        s = decay_slope(steps, reach)
        if s is not None:
            slopes.append(s)
    return (
        _interval(al),
        [_interval(p) for p in pos],
        [_interval(c) for c in cond],
        _interval(slopes),
    )


def request_counts(traces: Iterable[RequestTrace], max_draft_len: int) -> list[RequestCounts]:
    """Reduce traces to per-request sufficient statistics."""
    return [
        RequestCounts(
            prompt_index=t.prompt_index if t.prompt_index is not None else n,
            steps=t.steps,
            reach=reach_counts(t.accepted, max_draft_len),
            censored_steps=t.censored_steps,
        )
        for n, t in enumerate(traces)
    ]


def summarize(
    traces: Iterable[RequestTrace],
    max_draft_len: int,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    counters: Mapping[str, int] | None = None,
) -> RunStats:
    """Compute every acceptance statistic of one run.

    Args:
        traces: one trace per request.
        max_draft_len: K, the number of drafts proposed per verify step.
        seed: seeds the bootstrap, so the same traces always give the same intervals.
        n_boot: bootstrap resamples (1000 gives CI endpoints stable to about +-0.01 AL).
        counters: the engine's own iteration-stats sums (``num_draft_tokens``,
            ``num_accepted_tokens``, ``num_requests_with_draft_tokens``), when it keeps them;
            upstream's AL formula is then reported beside ours.

    Raises:
        UsageError: when no request ran a single verify step (nothing to measure; usually
            ``max_new_tokens`` is too small).
    """
    if max_draft_len < 1:
        raise UsageError(f"max_draft_len must be >= 1, got {max_draft_len}")
    traces = validate_traces(traces, max_draft_len)
    per_request = request_counts(traces, max_draft_len)
    steps = sum(r.steps for r in per_request)
    if steps == 0:
        raise UsageError(
            f"none of the {len(per_request)} requests ran a verify step, so there is no acceptance "
            "to measure; raise --max-new-tokens (each request needs at least 2 new tokens)"
        )
    reach = [sum(r.reach[i] for r in per_request) for i in range(max_draft_len)]
    accepted = sum(reach)
    al, per_position, conditional = _rates(steps, reach)
    counts = [0] * (max_draft_len + 1)
    for t in traces:
        for a in t.accepted:
            counts[a] += 1
    al_ci, pos_ci, cond_ci, slope_ci = _bootstrap(
        per_request, max_draft_len, seed=seed, n_boot=n_boot
    )
    # A degenerate bootstrap (n_boot=0, or every resample empty) leaves zero-width intervals.
    al_ci = al_ci or [al, al]
    pos_ci = [ci or [p, p] for ci, p in zip(pos_ci, per_position, strict=True)]
    request_als = [r.acceptance_length for r in per_request if r.acceptance_length is not None]
    return RunStats(
        max_draft_len=max_draft_len,
        requests=len(per_request),
        steps=steps,
        accepted=accepted,
        drafted=steps * max_draft_len,
        acceptance_length=al,
        acceptance_length_ci=al_ci,
        acceptance_rate=accepted / (steps * max_draft_len),
        per_position=per_position,
        per_position_ci=pos_ci,
        conditional=conditional,
        conditional_ci=cond_ci,
        conditional_slope=decay_slope(steps, reach),
        conditional_slope_ci=slope_ci,
        counts=counts,
        per_request=per_request,
        per_request_al_percentiles={f"p{q}": percentile(request_als, q) for q in _PERCENTILES},
        censored_steps=sum(r.censored_steps for r in per_request),
        upstream_acceptance_length=upstream_acceptance_length(counters),
        counters=dict(counters) if counters else None,
        seed=seed,
        n_boot=n_boot,
    )


def paired_drop_intervals(
    reference: RunStats, run: RunStats, *, seed: int = 0, n_boot: int = 1000
) -> dict[str, list[float] | None] | None:
    """95% bootstrap intervals of ``reference - run`` for AL, every position and the decay slope.

    Both runs served the same prompts, so prompts are resampled jointly: prompt-to-prompt
    variation (some texts are simply easier to draft) cancels out of the difference, and a loss
    that two separate intervals would blur together stands out. This is what makes a 10-prompt
    CI smoke run able to see a batch-dependent bug.

    Returns:
        ``{"acceptance_length": [lo, hi], "per_position[1]": [lo, hi], ...,
        "conditional_slope": [lo, hi] or None}``, or None when the runs do not cover the same
        prompts with the same K (then the runs cannot be paired).
    """
    k = reference.max_draft_len
    ref_by = {r.prompt_index: r for r in reference.per_request}
    run_by = {r.prompt_index: r for r in run.per_request}
    if run.max_draft_len != k or not ref_by or ref_by.keys() != run_by.keys() or None in ref_by:
        return None
    keys = sorted(ref_by)
    groups = [[ref_by[p] for p in keys], [run_by[p] for p in keys]]
    names = ["acceptance_length", *(f"per_position[{i + 1}]" for i in range(k))]
    samples: dict[str, list[float]] = {name: [] for name in [*names, "conditional_slope"]}
    for (sa, ra), (sb, rb) in _resamples(groups, k, seed=seed, n_boot=n_boot):
        if not sa or not sb:
            continue
        al_a, pos_a, _ = _rates(sa, ra)
        al_b, pos_b, _ = _rates(sb, rb)
        for name, da in zip(
            names, [al_a - al_b, *(x - y for x, y in zip(pos_a, pos_b, strict=True))], strict=True
        ):
            samples[name].append(da)
        slope_a, slope_b = decay_slope(sa, ra), decay_slope(sb, rb)
        if slope_a is not None and slope_b is not None:
            samples["conditional_slope"].append(slope_a - slope_b)
    return {name: _interval(values) for name, values in samples.items()}
