"""Generated nightly series (seeded) for the trend tests and the detector benchmark."""

from __future__ import annotations

import random
from collections.abc import Sequence

#: AL at batch 1, K = 4: GLM-5.2's figure before the stale ``req_idx_per_token`` map.
LEVEL = 3.77
#: The stale map cut AL at batch 8 by 13 %: the step every generated regression is sized against.
STEP = 0.13


def step_series(
    n: int,
    *,
    at: Sequence[int] = (),
    sizes: Sequence[float] = (),
    sigma: float = 0.1,
    seed: int = 0,
    drift: float = 0.0,
    level: float = LEVEL,
) -> list[float]:
    """``n`` nights at ``level``; from night ``at[i]`` on, the level moves by ``sizes[i]``.

    Args:
        at / sizes: where each step lands and its size, relative to ``level`` (-0.13: the bug).
        sigma: Gaussian noise as a fraction of the 13 % step (the issue's "sigma/step").
        drift: total relative change spread evenly over the ``n`` nights.
    """
    rnd = random.Random(seed)
    noise = sigma * STEP * level
    out = []
    for i in range(n):
        value = level * (1 + drift * i / n)
        for start, size in zip(at, sizes, strict=True):
            if i >= start:
                value += size * level
        out.append(value + rnd.gauss(0, noise))
    return out
