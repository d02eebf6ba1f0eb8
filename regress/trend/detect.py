"""Change points in a nightly series: e-divisive means with a permutation test, then a step check.

The method is Matteson and James's e-divisive means ("A Nonparametric Approach for Multiple Change
Point Analysis of Multivariate Data", 2014), the algorithm Apache Otava (formerly Hunter) runs for
continuous performance testing (``otava/change_point_divisive/`` in apache/otava 0.8.0:
``PairDistanceCalculator`` and ``PermutationsSignificanceTester``). This is a small independent
implementation in plain Python: ``regress trend check`` runs on a CI runner that installs no
torch and no numpy, over a few hundred nights at most (``benchmarks/trend.md`` has its speed):

1. **Split.** Each segment's best split ``tau`` maximises the energy statistic
   ``Q = m k / n * (2/(m k) sum|x-y| - sum|x-x'|/C(m,2) - sum|y-y'|/C(k,2))`` (alpha = 1, the
   segment's end fixed as kappa). The largest ``Q`` over all segments is the candidate.
2. **Significance.** The points are permuted within each segment ``permutations`` times (one
   ``random.Random(seed)``, so a check is reproducible on every machine) and the candidate's
   p-value is the share of permuted maxima at least as large. Significant candidates split their
   segment; the first one that is not stops the search (its permutations stop as soon as its
   p-value is sure to exceed alpha).
3. **Step check.** A significant split is not yet a regression: a slow drift is significant too,
   because the two halves of a drifting series differ. Around each split a line with a jump is
   fitted to up to ``window`` nights on either side (bounded by the neighbouring change points);
   the split is kept only if the jump is at least ``min_change`` of the level and ``min_z``
   standard errors. A drift's shared slope absorbs it, so its jump is noise; the weakest failing
   split is dropped and its neighbours re-measured over the wider windows it leaves (Otava's
   merge step does the same with its own test). The same fit places each split (least residual
   within ``min_size`` nights of it): e-divisive never leaves fewer than ``min_size`` nights on a
   side, and would otherwise blame the last good commit while a step has fewer bad nights.

A permutation test cannot be surer than its series allows: with ``m`` nights before a split and
``k`` after, no p-value falls much below ``1 / C(m + k, k)``, so a step needs roughly nine nights in
all (e.g. 5 + 4) before ``alpha = 0.01`` can be met, whatever its size.

Missing nights need nothing special: a series is the sequence of nights that have a value, and a
change point is reported between the last night before it and the first night after it.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

#: Defaults shared by the CLI and the library (one place).
ALPHA = 0.01
PERMUTATIONS = 199
MIN_SIZE = 3
WINDOW = 20
MIN_CHANGE = 0.03
MIN_Z = 3.0


@dataclass(frozen=True)
class ChangePoint:
    """A step in a series.

    Attributes:
        index: position of the first point of the new level (the first bad night).
        before: median of the nights just before it (up to ``window``, within its segment).
        after: median of the nights just after it.
        relative: ``(after - before) / |before|``.
        p_value: permutation p-value of the split when it was found.
        kind: ``"regression"`` when the step goes the worse way, else ``"improvement"``.
        z: the jump over the local trend in robust standard errors (see :func:`step_at`).
    """

    index: int
    before: float
    after: float
    relative: float
    p_value: float
    kind: str
    z: float

    @property
    def regression(self) -> bool:
        return self.kind == "regression"

    def to_dict(self) -> dict:
        data = asdict(self)
        # a noiseless step (a deterministic engine) has an infinite z; JSON has no infinity
        data["z"] = self.z if math.isfinite(self.z) else None
        return data


@dataclass(frozen=True)
class DetectorConfig:
    """How sure and how large a change must be to be reported.

    Attributes:
        alpha: largest permutation p-value a split may have.
        permutations: permutations per significance test (p-values resolve to 1/(permutations+1)).
        min_size: fewest points on each side of a split: a step needs this many bad nights, so
            it is found ``min_size - 1`` nights after it lands at the earliest, and one or two odd
            nights never make one.
        window: nights on each side whose medians give a step's size.
        min_change: smallest relative step reported.
        min_z: smallest jump over the local trend, in robust standard errors: what tells a step
            from a drift, whose local jump is zero once its slope is taken out.
        seed: permutation seed; the same series and seed give the same answer.
    """

    alpha: float = ALPHA
    permutations: int = PERMUTATIONS
    min_size: int = MIN_SIZE
    window: int = WINDOW
    min_change: float = MIN_CHANGE
    min_z: float = MIN_Z
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.permutations < 1 or self.min_size < 2 or self.window < 1 or self.min_change < 0:
            raise ValueError(
                "need permutations >= 1, min_size >= 2, window >= 1 and min_change >= 0"
            )


def _within_sums(xs: Sequence[float]) -> list[float]:
    """``sum |x_i - x_j|`` over the pairs ``i < j < t`` of the first ``t`` points, for t = 0..n.

    Each point's distances to the points before it come from those points kept sorted: the ones
    below it add ``lo * x - sum(below)``, the ones above ``sum(above) - (t - hi) * x``, and equal
    ones add exactly 0 (a flat series has an energy of exactly 0, not rounding noise to test).
    The two slice sums run in C, so this is ``O(n^2)`` additions at C speed rather than ``n^2``
    Python steps: half a millisecond for 200 points, which the permutation test repeats.
    """
    below: list[float] = []
    out = [0.0]
    total = 0.0
    for x in xs:
        lo = bisect.bisect_left(below, x)
        hi = bisect.bisect_right(below, x, lo)
        total += (lo * x - sum(below[:lo])) + (sum(below[hi:]) - (len(below) - hi) * x)
        below.insert(lo, x)
        out.append(total)
    return out


def _distances(xs: Sequence[float]) -> dict[float, float]:
    """Each value of ``xs`` -> ``sum_j |x - x_j|`` over all of ``xs`` (ties add exactly 0).

    It depends on the value and the segment's values only, not on their order, so a permutation
    test computes it once per segment: with it a split's cross term is the running sum of these
    over the points before it, less twice their within sum, and no second sorted pass is needed.
    """
    ordered = sorted(xs)
    sums = list(itertools.accumulate(ordered, initial=0.0))
    n = len(ordered)
    out = {}
    for x in set(ordered):
        lo = bisect.bisect_left(ordered, x)
        hi = bisect.bisect_right(ordered, x, lo)
        out[x] = (lo * x - sums[lo]) + ((sums[n] - sums[hi]) - (n - hi) * x)
    return out


def _energy(xs: Sequence[float], distances: dict[float, float], min_size: int) -> list[float]:
    """Q(tau) for tau = min_size .. n - min_size (the allowed splits of ``xs``), in that order.

    ``distances`` is :func:`_distances` of ``xs`` (in any order). With ``W(m)`` the pair sum
    within the first ``m`` points and ``R(m)`` the running sum of their distances to all points,
    ``R(m) = 2 W(m) + cross(m)`` and the pair sum within the rest is ``total - W - cross``.
    """
    n = len(xs)
    within = _within_sums(xs)
    row = list(itertools.accumulate(map(distances.__getitem__, xs), initial=0.0))
    total = row[n] / 2
    out = []
    for m in range(min_size, n - min_size + 1):
        k = n - m
        within_x = within[m]
        cross = row[m] - 2 * within_x
        within_y = total - within_x - cross
        e = 2 * cross / (m * k) - 2 * within_x / (m * (m - 1)) - 2 * within_y / (k * (k - 1))
        out.append(m * k / n * e)
    return out


def _best_split(x: Sequence[float], start: int, end: int, min_size: int):
    """(index, Q) of the first largest Q in ``x[start:end]``, or None when it is too short."""
    if end - start < 2 * min_size:
        return None
    segment = x[start:end]
    q = _energy(segment, _distances(segment), min_size)
    i = max(range(len(q)), key=q.__getitem__)
    return start + min_size + i, q[i]


def _p_value(x, segments, q: float, config: DetectorConfig, rng: random.Random) -> float | None:
    """The permutation p-value of the largest statistic ``q``, or None once it exceeds alpha.

    Each permutation shuffles every segment in place (a shuffle of a shuffle is as uniform as a
    fresh one) and takes the largest Q over all of them. Counting stops as soon as enough
    permuted maxima reach ``q`` that the p-value must exceed alpha: the decision is the one all
    permutations would give, and a p-value above alpha is never reported. A quiet series, whose
    best split is ordinary, stops after a few permutations instead of ``permutations``.
    """
    work = [(list(x[s:e]), _distances(x[s:e])) for s, e in segments if e - s >= 2 * config.min_size]
    # a relative tolerance so float noise in equal statistics counts as "as large"
    threshold = q * (1 - 1e-9)
    exceed = 0
    for _ in range(config.permutations):
        best = -math.inf
        for seg, distances in work:
            rng.shuffle(seg)
            best = max(best, *_energy(seg, distances, config.min_size))
        if best >= threshold:
            exceed += 1
            if (exceed + 1) / (config.permutations + 1) > config.alpha:
                return None
    return (exceed + 1) / (config.permutations + 1)


def split_points(values: Sequence[float], config: DetectorConfig) -> list[tuple[int, float]]:
    """Significant e-divisive splits of ``values``: (index, p-value), sorted by index."""
    # Distances do not change when every value moves by the same amount; centred values lose
    # fewer digits in _within_sums' ``lo * x - sum(below)``.
    center = statistics.median(values) if values else 0.0
    x = [float(v) - center for v in values]
    n = len(x)
    rng = random.Random(config.seed)
    found: list[tuple[int, float]] = []
    while True:
        bounds = [0, *sorted(i for i, _ in found), n]
        segments = list(itertools.pairwise(bounds))
        candidates = [c for c in (_best_split(x, *s, config.min_size) for s in segments) if c]
        if not candidates:
            return sorted(found)
        index, q = max(candidates, key=lambda c: c[1])
        if not q > 0:
            return sorted(found)
        p = _p_value(x, segments, q, config, rng)
        if p is None:
            return sorted(found)
        found.append((index, p))


def _fit(
    values: Sequence[float], ts: Sequence[int], index: int
) -> tuple[float, float, float, float]:
    """Least squares of ``y = a + b (t - index) + jump [t >= index]`` over nights ``ts``.

    Returns:
        (a, jump, z of the jump, residual sum of squares); z is ``inf`` for a noiseless step.
    """
    rows = [(1.0, float(t - index), float(t >= index)) for t in ts]
    ys = [values[t] for t in ts]
    # normal equations of the 3-parameter fit, solved by hand: no numpy in the dependencies
    xtx = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    xty = [sum(r[i] * y for r, y in zip(rows, ys, strict=True)) for i in range(3)]
    inv = _inverse3(xtx)
    a, b, jump = (sum(inv[i][j] * xty[j] for j in range(3)) for i in range(3))
    rss = sum((y - a - b * r[1] - jump * r[2]) ** 2 for r, y in zip(rows, ys, strict=True))
    dof = len(rows) - 3
    var = rss / dof if dof > 0 else 0.0
    se = math.sqrt(max(var * inv[2][2], 0.0))
    tiny = 1e-12 * max(1.0, abs(a))
    z = abs(jump) / se if se > tiny else (math.inf if abs(jump) > tiny else 0.0)
    return a, jump, z, rss


def step_at(values: Sequence[float], index: int, lo: int, hi: int, window: int) -> tuple:
    """The jump at ``index`` beyond the local trend, and its z-score.

    A line with a jump is fitted to up to ``window`` nights on each side (within ``lo:hi``): both
    sides share one slope, so a drift adds nothing to the jump, and the jump's standard error
    includes the slope's uncertainty (a slope guessed from a few noisy nights would otherwise
    manufacture steps out of drift).

    Returns:
        (fitted level just before, fitted level just after, z).
    """
    ts = range(max(lo, index - window), min(hi, index + window))
    a, jump, z, _ = _fit(values, ts, index)
    return a, a + jump, z


def refine(values: Sequence[float], index: int, lo: int, hi: int, config: DetectorConfig):
    """Where the step near ``index`` really is, or None while a side has too few nights.

    E-divisive never leaves fewer than ``min_size`` nights on a side, so with two bad nights in
    it would split one night early, blaming the last good commit. The step fit (least residual)
    over the nights around ``index`` places it; a step with fewer than ``min_size`` nights after
    it waits for the next night.
    """
    ts = range(max(lo, index - config.window), min(hi, index + config.window))
    near = range(max(lo + 1, index - config.min_size + 1), min(hi - 1, index + config.min_size))
    best = min(near, key=lambda t: _fit(values, ts, t)[3])
    if best - lo < config.min_size or hi - best < config.min_size:
        return None
    return best


def _inverse3(m: list[list[float]]) -> list[list[float]]:
    (a, b, c), (d, e, f), (g, h, i) = m
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    if abs(det) < 1e-12:
        raise ValueError("too few points around the split to fit a step")
    cof = [
        [e * i - f * h, c * h - b * i, b * f - c * e],
        [f * g - d * i, a * i - c * g, c * d - a * f],
        [d * h - e * g, b * g - a * h, a * e - b * d],
    ]
    return [[x / det for x in row] for row in cof]


def _steps(values, splits, config: DetectorConfig, direction: int) -> list[tuple]:
    """(change point, fitted relative jump) per split."""
    indices = [i for i, _ in splits]
    out = []
    for j, (index, p) in enumerate(splits):
        lo = indices[j - 1] if j > 0 else 0
        hi = indices[j + 1] if j + 1 < len(indices) else len(values)
        fit_before, fit_after, z = step_at(values, index, lo, hi, config.window)
        jump = (fit_after - fit_before) / abs(fit_before) if fit_before else math.inf
        # the levels reported are plain medians of the nights either side: what a reader checks
        before = statistics.median(values[max(lo, index - config.window) : index])
        after = statistics.median(values[index : min(hi, index + config.window)])
        relative = (after - before) / abs(before) if before else math.copysign(math.inf, after)
        kind = "regression" if relative * direction < 0 else "improvement"
        out.append((ChangePoint(index, before, after, relative, p, kind, z), jump))
    return out


def detect(
    values: Sequence[float], *, direction: int = 1, config: DetectorConfig | None = None
) -> list[ChangePoint]:
    """Steps in ``values`` (one point per night, oldest first), regressions and improvements.

    Args:
        values: the series; at least ``2 * min_size`` points are needed to find anything.
        direction: +1 when higher is better (acceptance), -1 when lower is better (latency).
        config: thresholds; the defaults are what ``regress trend check`` uses.

    Returns:
        Change points sorted by index, each at least ``min_change`` in size.
    """
    config = config or DetectorConfig()
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1, got {direction}")
    values = [float(v) for v in values]
    if any(not math.isfinite(v) for v in values):
        raise ValueError("the series holds a NaN or infinite value; drop those nights first")
    splits = []
    raw = split_points(values, config)
    bounds = [0, *(i for i, _ in raw), len(values)]
    for j, (index, p) in enumerate(raw):
        moved = refine(values, index, bounds[j], bounds[j + 2], config)
        if moved is not None and moved not in (i for i, _ in splits):
            splits.append((moved, p))
    # Drop the smallest step below min_change and re-measure its neighbours over the wider
    # windows it leaves (like Otava's merge step), until every remaining step is large enough.
    while True:
        measured = _steps(values, splits, config, direction)
        small = [
            k
            for k, (s, jump) in enumerate(measured)
            if abs(jump) < config.min_change or s.z < config.min_z
        ]
        if not small:
            return [s for s, _ in measured]
        weakest = min(small, key=lambda k: (measured[k][0].z, abs(measured[k][1])))
        del splits[weakest]


def open_regressions(steps: Sequence[ChangePoint], min_change: float) -> list[ChangePoint]:
    """Regressions the series has not recovered from since.

    A regression is closed once a later point's level (the ``after`` of a later change point) is
    back within ``min_change`` of the level before it, whatever path it took back: a nightly
    check must not fail forever on a bug that was fixed.
    """
    out = []
    for j, step in enumerate(steps):
        if not step.regression:
            continue
        sign = 1 if step.after < step.before else -1  # +1: higher is better here
        recovered = any(
            (later.after - step.before) * sign >= -min_change * abs(step.before)
            for later in steps[j + 1 :]
        )
        if not recovered:
            out.append(step)
    return out
