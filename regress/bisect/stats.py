"""Statistics for metric bisects: Student-t, and the Mann-Whitney/KS tests of Pinpoint's verdict.

The metric judge (:mod:`regress.bisect.metric`) decides each commit with a sequential
likelihood-ratio test under a normal noise model whose spread is learned from every run
(:func:`t_logpdf`, :func:`t_sf`, :func:`pooled_noise`).

Pure Python (no scipy). :func:`compare` mirrors Chromium Pinpoint's
``dashboard/pinpoint/models/compare/compare.py``: take the smaller of the two p-values; below a low
threshold the samples are DIFFERENT; above a high threshold that shrinks as the samples grow (for
the change size we are looking for) they are the SAME; in between we do not know yet and need more
runs. Pinpoint reads its high thresholds from a simulated table; we compute them from the normal
approximation of the U statistic under the expected shift, which gives the same behaviour: small
samples cannot be called SAME, larger ones can.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from regress.bisect.verdicts import Comparison

LOW_THRESHOLD = 0.01  # Pinpoint's: p below this is a difference


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) and the tie correction sum of (t^3 - t)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    return ranks, ties


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, ties corrected).

    Returns 1.0 when either sample is empty or everything is tied (no evidence of a difference).
    """
    n, m = len(x), len(y)
    if not n or not m:
        return 1.0
    ranks, ties = _ranks([*x, *y])
    u = sum(ranks[:n]) - n * (n + 1) / 2.0
    mean = n * m / 2.0
    total = n + m
    var = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if var <= 0:
        return 1.0
    z = max(abs(u - mean) - 0.5, 0.0) / math.sqrt(var)  # continuity correction
    return min(2.0 * (1.0 - normal_cdf(z)), 1.0)


def kolmogorov_smirnov(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the two-sample KS test (asymptotic, Numerical Recipes ``kstwo``)."""
    n, m = len(x), len(y)
    if not n or not m:
        return 1.0
    xs, ys = sorted(x), sorted(y)
    i = j = 0
    d = 0.0
    while i < n and j < m:
        v = min(xs[i], ys[j])
        while i < n and xs[i] == v:
            i += 1
        while j < m and ys[j] == v:
            j += 1
        d = max(d, abs(i / n - j / m))
    en = math.sqrt(n * m / (n + m))
    lam = (en + 0.12 + 0.11 / en) * d
    return _kolmogorov_q(lam)


def _kolmogorov_q(lam: float) -> float:
    """Q_KS(lambda) = 2 sum_{j>=1} (-1)^(j-1) exp(-2 j^2 lambda^2)."""
    if lam < 1e-3:
        return 1.0
    total, sign = 0.0, 1.0
    for j in range(1, 101):
        term = sign * 2.0 * math.exp(-2.0 * j * j * lam * lam)
        total += term
        if abs(term) < 1e-10 * max(abs(total), 1e-300):
            return min(max(total, 0.0), 1.0)
        sign = -sign
    return 1.0  # the series did not converge: lambda is tiny, no evidence


def effect_size(a: Sequence[float], b: Sequence[float]) -> float:
    """|mean(a) - mean(b)| over the pooled standard deviation (inf when both are constant)."""
    if not a or not b:
        return 0.0
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    ss = sum((v - ma) ** 2 for v in a) + sum((v - mb) ** 2 for v in b)
    dof = len(a) + len(b) - 2
    sd = math.sqrt(ss / dof) if dof > 0 else 0.0
    diff = abs(ma - mb)
    if sd == 0.0:
        return math.inf if diff > 0 else 0.0
    return diff / sd


def high_threshold(n: int, m: int, magnitude: float, power: float = 0.95) -> float:
    """The p-value above which samples of sizes n, m are called the SAME.

    A real shift of ``magnitude`` pooled standard deviations would give a p-value below this with
    probability ``power``; seeing a larger one is evidence there is no such shift. It falls as the
    samples grow, so "same" needs fewer runs for large expected changes (Pinpoint's size-aware
    thresholds).
    """
    if n == 0 or m == 0 or magnitude <= 0:
        return 1.0
    auc = normal_cdf(magnitude / math.sqrt(2.0)) if math.isfinite(magnitude) else 1.0
    z_alt = n * m * (auc - 0.5) / math.sqrt(n * m * (n + m + 1) / 12.0)
    z_low = z_alt - _z_for(power)
    if z_low <= 0:
        return 1.0
    return 2.0 * (1.0 - normal_cdf(z_low))


def _z_for(power: float) -> float:
    """Inverse normal CDF by bisection (only a handful of calls; no scipy)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if normal_cdf(mid) < power:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """The smaller of the Mann-Whitney and KS p-values (Pinpoint's choice: either may see it)."""
    return min(mann_whitney_u(a, b), kolmogorov_smirnov(a, b))


def compare(
    a: Sequence[float],
    b: Sequence[float],
    *,
    magnitude: float,
    low: float = LOW_THRESHOLD,
) -> Comparison:
    """SAME, DIFFERENT or UNKNOWN for two samples, given the change size we look for.

    Args:
        a, b: the samples.
        magnitude: the expected change in pooled standard deviations (from the endpoints).
        low: p-values below this mean DIFFERENT.
    """
    p = p_value(a, b)
    if p < low:
        return Comparison.DIFFERENT
    if p > high_threshold(len(a), len(b), magnitude):
        return Comparison.SAME
    return Comparison.UNKNOWN


def betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Numerical Recipes, betacf)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-13:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes, betai)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1.0 - x) / b


def t_sf(t: float, dof: float) -> float:
    """P(T > t) for Student's t with ``dof`` degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(dof / 2.0, 0.5, dof / (dof + t * t))
    return tail if t > 0 else 1.0 - tail


def t_logpdf(x: float, dof: float, scale: float) -> float:
    """log density of ``scale`` times Student's t with ``dof`` degrees of freedom, at ``x``."""
    z = x / scale
    return (
        math.lgamma((dof + 1) / 2)
        - math.lgamma(dof / 2)
        - 0.5 * math.log(dof * math.pi)
        - math.log(scale)
        - (dof + 1) / 2 * math.log1p(z * z / dof)
    )


def pooled_noise(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Within-group sum of squares and its degrees of freedom, over groups of repeated runs.

    Every commit's runs share one run-to-run spread (the noise of the benchmark, not of the code),
    so each group with two or more runs adds ``len - 1`` degrees of freedom to the estimate.
    """
    ss, dof = 0.0, 0
    for xs in groups:
        if len(xs) >= 2:
            m = sum(xs) / len(xs)
            ss += sum((x - m) ** 2 for x in xs)
            dof += len(xs) - 1
    return ss, dof
