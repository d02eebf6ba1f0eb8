"""Flake-aware search: a posterior over the culprit, probes where they teach the most.

Model (after Henderson et al., "Flake Aware Culprit Finding", ICST 2023): a good commit fails with
an unknown false-fail rate, a bad commit passes with an unknown false-pass rate (zero unless
two-sided); both rates are integrated out under Beta priors (:class:`RateModel`), so every run
refines them while it localises the culprit. There is no separate verification phase: the runs at
the culprit and its parents are part of the posterior, so "verified" means "the posterior is
``confidence`` sure", and the search stops as soon as it is.

:class:`Flaky` works on a chain (segments between tested positions, O(tested) per update);
:class:`GraphFlaky` on a commit graph, one likelihood per candidate (O(n * tested) per update).
"""

from __future__ import annotations

import math

from regress.bisect.graph import Graph, members
from regress.bisect.observations import Observations, pick
from regress.bisect.posterior import FAIL_PRIOR, PASS_PRIOR, Posterior, RateModel, _entropy
from regress.bisect.strategies import Estimate


class Flaky:
    """Bayesian bisection of a chain: probe at posterior quantiles, stop at ``confidence``.

    Args:
        confidence: posterior probability the top commit needs before we call it the culprit.
        false_pass, fail_prior, pass_prior: the flake-rate model, see :class:`RateModel`.
    """

    name = "flaky"

    def __init__(
        self,
        *,
        confidence: float = 0.99,
        false_pass: bool | None = None,
        fail_prior: tuple[float, float] = FAIL_PRIOR,
        pass_prior: tuple[float, float] = PASS_PRIOR,
    ) -> None:
        self.confidence = confidence
        self.model = RateModel(false_pass, fail_prior, pass_prior)

    def posterior(self, obs: Observations) -> Posterior:
        return self._posterior(obs, self.model)

    def _posterior(self, obs: Observations, model: RateModel) -> Posterior:
        n = obs.n
        tested = obs.tested()
        edges = [0, *(q for q in tested if 0 < q < n), n]
        total_f = sum(obs.fails(q) for q in tested)
        total_p = sum(obs.passes(q) for q in tested)
        logs, ff, fp = [], [], []
        gf = gp = 0
        i = 0
        for e in edges[:-1]:
            while i < len(tested) and tested[i] <= e:
                gf += obs.fails(tested[i])
                gp += obs.passes(tested[i])
                i += 1
            ll, f_fail, f_pass = model.evidence(gf, gp, total_f - gf, total_p - gp)
            logs.append(ll)
            ff.append(f_fail)
            fp.append(f_pass)
        top = max(logs)
        if top == -math.inf:  # only reachable with false_pass=False and a passing bad endpoint
            return self._posterior(obs, model.lenient())
        raw = [math.exp(x - top) for x in logs]
        z = sum((edges[j + 1] - edges[j]) * w for j, w in enumerate(raw))
        weight = [w / z for w in raw]
        mass = [(edges[j + 1] - edges[j]) * w for j, w in enumerate(weight)]
        return Posterior(
            n=n,
            edges=edges,
            weight=weight,
            false_fail=sum(m * x for m, x in zip(mass, ff, strict=True)),
            false_pass=sum(m * x for m, x in zip(mass, fp, strict=True)),
        )

    def propose(self, obs: Observations, k: int) -> list[int]:
        post = self.posterior(obs)
        # Jumps over untestable runs stay where a probe can still move mass: positions a-1..b
        # around the credible interval (a probe far outside it would only repeat the known).
        a, b = post.interval(self.confidence)
        # Probes at a and b-1 split off the interval's outermost commits; when the median sits in an
        # untestable run, they are what can still shrink the interval.
        ends = [p for p in {a, b - 1} if not obs.blocked(p)]
        chosen: list[int] = []
        for i in range(1, k + 1):
            upper = post.quantile(i / (k + 1))
            options = list(ends)
            for m in (upper - 1, upper):
                p = pick(m, a - 2, b + 1, obs)
                if p is not None:
                    options.append(p)
            if options:
                chosen.append(max(options, key=lambda p: (post.info_gain(p), -p)))
        return sorted(chosen)

    def estimate(self, obs: Observations) -> Estimate:
        post = self.posterior(obs)
        top, mass = post.top()
        a, b = post.interval(self.confidence)
        found = mass >= self.confidence
        stuck = not found and all(obs.blocked(p) for p in range(a, b))
        return Estimate(
            top=top,
            mass=mass,
            candidates=b - a + 1,
            interval=(a, b),
            found=found,
            stuck=stuck,
        )

    def rates(self, obs: Observations) -> dict[str, float]:
        """Posterior mean flake rates, reported with the result."""
        post = self.posterior(obs)
        return {"false_fail": post.false_fail, "false_pass": post.false_pass}

    def parents(self, c: int) -> list[int]:
        return [c - 1]


class GraphFlaky:
    """Bayesian bisection of a commit graph: a run at ``m`` is "bad" iff the culprit is below it.

    Same model and stopping rule as :class:`Flaky`; the likelihood of culprit ``c`` counts the runs
    at ``c``'s descendants as runs of bad commits and every other run as runs of good ones.
    """

    name = "flaky"

    def __init__(self, graph: Graph, *, confidence: float = 0.99, **model) -> None:
        self.graph = graph
        self.confidence = confidence
        self.model = RateModel(**model)

    def posterior(self, obs: Observations) -> tuple[list[float], float, float]:
        """Per-node culprit probability (node 0 gets 0) and the mean false-fail/-pass rates."""
        return self._posterior(obs, self.model)

    def _posterior(self, obs, model: RateModel) -> tuple[list[float], float, float]:
        g = self.graph
        tested = [(m, obs.fails(m), obs.passes(m)) for m in obs.tested()]
        total_f = sum(f for _, f, _ in tested)
        total_p = sum(p for _, _, p in tested)
        logs, ff, fp = [-math.inf], [0.0], [0.0]
        for c in range(1, g.n + 1):
            bf = sum(f for m, f, _ in tested if g.ancestors[m] >> c & 1)
            bp = sum(p for m, _, p in tested if g.ancestors[m] >> c & 1)
            ll, f_fail, f_pass = model.evidence(total_f - bf, total_p - bp, bf, bp)
            logs.append(ll)
            ff.append(f_fail)
            fp.append(f_pass)
        top = max(logs)
        if top == -math.inf:
            return self._posterior(obs, model.lenient())
        raw = [math.exp(x - top) for x in logs]
        z = sum(raw)
        w = [x / z for x in raw]
        return (
            w,
            sum(a * b for a, b in zip(w, ff, strict=True)),
            sum(a * b for a, b in zip(w, fp, strict=True)),
        )

    def _credible(self, w: list[float]) -> list[int]:
        order = sorted(range(1, len(w)), key=lambda c: (-w[c], c))
        out, mass = [], 0.0
        for c in order:
            out.append(c)
            mass += w[c]
            if mass >= self.confidence:
                break
        return sorted(out)

    def _splits(self, obs: Observations, w: list[float]) -> dict[int, float]:
        """P(m is bad) for every testable node whose verdict can still move the posterior."""
        g = self.graph
        tiny = (1 - self.confidence) / 100
        out = {}
        for m in range(1, g.n + 1):
            if not obs.untestable(m):
                p = sum(w[c] for c in members(g.ancestors[m] & g.everything))
                if tiny < p < 1 - tiny:
                    out[m] = p
        return out

    def propose(self, obs: Observations, k: int) -> list[int]:
        w, e, f = self.posterior(obs)
        gains = []
        for m, p in self._splits(obs, w).items():
            fail = p * (1 - f) + (1 - p) * e
            gains.append((_entropy(fail) - p * _entropy(f) - (1 - p) * _entropy(e), -m))
        gains.sort(reverse=True)
        return sorted(-m for _, m in gains[:k])

    def estimate(self, obs: Observations) -> Estimate:
        w, _, _ = self.posterior(obs)
        top = max(range(1, len(w)), key=lambda c: (w[c], -c))
        suspects = self._credible(w)
        found = w[top] >= self.confidence
        stuck = not found and not self._splits(obs, w)
        return Estimate(
            top=top,
            mass=w[top],
            candidates=len(suspects),
            interval=(suspects[0], suspects[-1]),
            found=found,
            stuck=stuck,
            suspects=tuple(suspects),
        )

    def rates(self, obs: Observations) -> dict[str, float]:
        _, e, f = self.posterior(obs)
        return {"false_fail": e, "false_pass": f}

    def parents(self, c: int) -> list[int]:
        return list(self.graph.parents[c])
