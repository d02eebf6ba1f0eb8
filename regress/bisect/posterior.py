"""The flake-aware model: a posterior over "position c is the first bad one", and its rates.

Model (after Henderson et al., "Flake Aware Culprit Finding", ICST 2023): a good commit fails with an
unknown false-fail rate ``e``, a bad commit passes with an unknown false-pass rate ``f`` (zero unless
two-sided). Both rates get Beta priors and are integrated out, so every run (the repeated endpoint
runs first of all, then every later one) refines the rate estimate while it localises the culprit;
no point estimate has to be trusted.

The likelihood of culprit ``c`` only depends on which tested positions fall below ``c``, so the
posterior is piecewise constant between tested positions. We keep it as segments: an update costs
O(tested positions), never O(n), which keeps 1000 simulated trials at n = 8192 fast in pure Python.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import lru_cache

from regress.bisect.stats import betacf as _betacf

_HALF = math.log(0.5)

#: Beta prior of the false-fail rate: mean 1/8, worth a handful of runs, so the runs at good
#: commits soon dominate it. A flaky CI test typically fails well under one run in ten; the prior
#: leans there without ruling out 30 % (benchmarks/bisect.md: calibrated up to eps = 0.3).
FAIL_PRIOR = (1.0, 7.0)
#: Beta prior of the false-pass rate (two-sided model): mean 1/10, since a broken commit that
#: passes by chance is rarer than a good one that fails by chance.
PASS_PRIOR = (1.0, 9.0)


@lru_cache(maxsize=65536)
def _log_beta(x: float, y: float) -> float:
    """log of the integral of t^(x-1) (1-t)^(y-1) over [0, 1/2].

    Flake rates live below one half (a good commit passes more often than a bad one); without the
    truncation the model could explain a clean history as "every good commit flakes 90% of the
    time" and stall between the two stories.
    """
    full = math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
    front = (x + y) * _HALF  # x log(1/2) + y log(1 - 1/2)
    if (x + 1.0) / (x + y + 2.0) > 0.5:
        return front + math.log(_betacf(x, y, 0.5) / x)
    other = front - full + math.log(_betacf(y, x, 0.5) / y)  # log I_{1/2}(y, x)
    return full + math.log1p(-math.exp(other)) if other < 0 else full + math.log(1e-300)


def _mean(x: float, y: float) -> float:
    """Mean of the Beta(x, y) density truncated to [0, 1/2]."""
    return math.exp(_log_beta(x + 1, y) - _log_beta(x, y))


def _logsumexp(xs: list[float]) -> float:
    top = max(xs)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(x - top) for x in xs))


def _entropy(p: float) -> float:
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


@dataclass
class Posterior:
    """Per-commit posterior, constant on each segment ``edges[j]+1 .. edges[j+1]``."""

    n: int
    edges: list[int]
    weight: list[float]  # probability of each single commit in segment j
    false_fail: float  # posterior mean of the false-fail rate
    false_pass: float

    def seg_len(self, j: int) -> int:
        return self.edges[j + 1] - self.edges[j]

    def cdf(self, m: int) -> float:
        """P(culprit <= m)."""
        if m <= 0:
            return 0.0
        if m >= self.n:
            return 1.0
        j = bisect.bisect_left(self.edges, m) - 1  # segment holding m
        total = sum(self.seg_len(i) * self.weight[i] for i in range(j))
        return min(total + (m - self.edges[j]) * self.weight[j], 1.0)

    def quantile(self, q: float) -> int:
        """The smallest position m with P(culprit <= m) >= q."""
        cum = 0.0
        for j, w in enumerate(self.weight):
            mass = self.seg_len(j) * w
            if cum + mass >= q and w > 0:
                k = math.ceil((q - cum) / w - 1e-12)
                return min(max(self.edges[j] + k, self.edges[j] + 1), self.edges[j + 1])
            cum += mass
        return self.n

    def top(self) -> tuple[int, float]:
        """The most probable culprit (the first of a tied segment) and its probability."""
        j = max(range(len(self.weight)), key=lambda i: (self.weight[i], -i))
        return self.edges[j] + 1, self.weight[j]

    def interval(self, confidence: float) -> tuple[int, int]:
        """A short run of culprits holding ``confidence`` mass, grown greedily from the top."""
        j = max(range(len(self.weight)), key=lambda i: (self.weight[i], -i))
        lo = hi = j
        mass = self.seg_len(j) * self.weight[j]
        a, b = self.edges[j] + 1, self.edges[j + 1]
        if mass >= confidence:  # the top segment alone suffices: trim it
            need = max(math.ceil(confidence / self.weight[j] - 1e-9), 1)
            return a, min(a + need - 1, b)
        while mass < confidence and (lo > 0 or hi < len(self.weight) - 1):
            left = self.weight[lo - 1] if lo > 0 else -1.0
            right = self.weight[hi + 1] if hi < len(self.weight) - 1 else -1.0
            i = lo - 1 if left >= right else hi + 1
            seg = self.seg_len(i) * self.weight[i]
            if mass + seg >= confidence and self.weight[i] > 0:
                k = min(math.ceil((confidence - mass) / self.weight[i] - 1e-9), self.seg_len(i))
                if i < lo:
                    a = self.edges[i + 1] - k + 1
                else:
                    b = self.edges[i] + k
                return a, b
            mass += seg
            if i < lo:
                lo, a = i, self.edges[i] + 1
            else:
                hi, b = i, self.edges[i + 1]
        return a, b

    def info_gain(self, m: int) -> float:
        """Expected bits learned by one run at position m under the mean flake rates."""
        p = self.cdf(m)  # P(m is bad)
        fail = p * (1 - self.false_pass) + (1 - p) * self.false_fail
        return _entropy(fail) - p * _entropy(self.false_pass) - (1 - p) * _entropy(self.false_fail)


@dataclass(frozen=True)
class RateModel:
    """Beta priors on the flake rates and how the one- and two-sided stories are weighed.

    Args:
        false_pass: ``True`` models false passes (two-sided flakiness) as well as false fails,
            ``False`` only false fails, ``None`` averages both models by their evidence, so a few
            passes of bad commits switch the two-sided story on without being told.
        fail_prior: Beta(a, b) prior of the false-fail rate (truncated to [0, 1/2]);
            :data:`FAIL_PRIOR` by default.
        pass_prior: Beta prior of the false-pass rate (two-sided only); :data:`PASS_PRIOR`.
    """

    false_pass: bool | None = None
    fail_prior: tuple[float, float] = FAIL_PRIOR
    pass_prior: tuple[float, float] = PASS_PRIOR
    _models: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Each model's weight in the average: one-sided is the simpler story, so it starts ahead;
        # a fixed rate of zero needs no Occam penalty, the two-sided rate pays one through B(c, d).
        if self.false_pass is None:
            models = {False: math.log(0.75), True: math.log(0.25)}
        else:
            models = {self.false_pass: 0.0}
        object.__setattr__(self, "_models", models)

    def evidence(self, gf: int, gp: int, bf: int, bp: int) -> tuple[float, float, float]:
        """Log evidence of one culprit hypothesis and its posterior mean rates.

        Args:
            gf, gp: fails and passes seen at commits the hypothesis calls good.
            bf, bp: fails and passes seen at commits it calls bad.

        Returns:
            ``(log evidence, mean false-fail rate, mean false-pass rate)``; the evidence is
            ``-inf`` when only the one-sided model is allowed and a bad commit passed.
        """
        a, b = self.fail_prior
        c, d = self.pass_prior
        good = _log_beta(a + gf, b + gp) - _log_beta(a, b)
        parts = []
        for two_sided, prior in self._models.items():
            if two_sided:
                parts.append((prior + good + _log_beta(c + bp, d + bf) - _log_beta(c, d), True))
            elif not bp:
                parts.append((prior + good, False))
        if not parts:
            return -math.inf, _mean(a + gf, b + gp), 0.0
        ll = _logsumexp([x for x, _ in parts])
        share_two = sum(math.exp(x - ll) for x, t in parts if t)
        return ll, _mean(a + gf, b + gp), share_two * _mean(c + bp, d + bf)

    def lenient(self) -> RateModel:
        """The averaged model, for evidence the one-sided model cannot explain at all."""
        return RateModel(None, self.fail_prior, self.pass_prior)
