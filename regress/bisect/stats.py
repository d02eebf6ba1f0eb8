"""Statistics for metric bisects: Student's t and the pooled run-to-run noise.

The metric judge (:mod:`regress.bisect.metric`) decides each commit with a sequential
likelihood-ratio test under a normal noise model whose spread is learned from every run
(:func:`t_logpdf`, :func:`t_sf`, :func:`pooled_noise`). Pure Python (no scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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
